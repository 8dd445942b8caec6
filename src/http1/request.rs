//! Serialises the request once, before the run.

use crate::target::Target;

/// The exact bytes of one request, reused for every send.
#[derive(Clone, Debug)]
pub struct RequestBytes {
    /// The request, repeated `depth` times so a pipelined round of any size
    /// up to `depth` is one prefix of this buffer, written at once.
    pub bytes: Vec<u8>,
    /// Length of one request.
    pub single: usize,
    /// A HEAD request's response carries no body whatever its headers say.
    pub is_head: bool,
}

/// Headers volley adds unless the user set them.
const USER_AGENT: &str = concat!("volley/", env!("CARGO_PKG_VERSION"));

/// Which of volley's own header fields the user's headers replace: the one
/// set of rules for `volley run -H` and a plan's `headers`. Worked out once
/// from the header names (known before the run), never per request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Overrides {
    host: bool,
    user_agent: bool,
    /// `Content-Length` or `Transfer-Encoding`: the user frames the body.
    framing: bool,
    connection: bool,
    /// The user's own `Authorization` wins over the URL's credentials.
    authorization: bool,
}

impl Overrides {
    /// The overrides of headers with these names (any case).
    pub fn of<'a>(names: impl IntoIterator<Item = &'a str>) -> Overrides {
        let mut rules = Overrides::default();
        for name in names {
            let is = |other: &str| name.eq_ignore_ascii_case(other);
            rules.host |= is("host");
            rules.user_agent |= is("user-agent");
            rules.framing |= is("content-length") || is("transfer-encoding");
            rules.connection |= is("connection");
            rules.authorization |= is("authorization");
        }
        rules
    }
}

/// Refuses a user's framing header that could contradict the body volley
/// sends (the body's bytes past a too-small length would be read as the
/// next request on the connection). `value` and `body` are `None` when they
/// are templates, whose length is known only per request. A
/// `Content-Length` equal to the body's length is fine (it replaces
/// volley's own); `Transfer-Encoding` never is: volley sends every body with
/// its length. The error says what to drop.
pub fn check_framing(name: &str, value: Option<&str>, body: Option<&[u8]>) -> Result<(), String> {
    if name.eq_ignore_ascii_case("transfer-encoding") {
        return Err(format!(
            "header '{name}': volley sends every body with its Content-Length; drop the header"
        ));
    }
    if !name.eq_ignore_ascii_case("content-length") {
        return Ok(());
    }
    match (value, body) {
        // Digits only (RFC 9110 section 8.6): Rust's parse takes a sign.
        (Some(value), Some(body))
            if value.trim().bytes().all(|b| b.is_ascii_digit())
                && value.trim().parse::<u64>().ok() == Some(body.len() as u64) =>
        {
            Ok(())
        }
        (Some(value), Some(body)) => Err(format!(
            "header '{name}: {value}' contradicts the {}-byte body; drop the header (volley sends the body's length)",
            body.len()
        )),
        _ => Err(format!(
            "header '{name}' with a templated value or body, whose length changes per request; drop the header (volley sends each body's length)"
        )),
    }
}

/// Writes one `name: value` header line.
pub fn write_header(out: &mut Vec<u8>, name: &str, value: &[u8]) {
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

/// Starts a request: the request line, then `Host` and `User-Agent` unless
/// the user's headers (written next, by the caller) replace them.
pub fn write_start(out: &mut Vec<u8>, method: &str, target: &[u8], host: &str, rules: Overrides) {
    out.extend_from_slice(method.as_bytes());
    out.push(b' ');
    out.extend_from_slice(if target.is_empty() { b"/" } else { target });
    out.extend_from_slice(b" HTTP/1.1\r\n");
    if !rules.host {
        write_header(out, "Host", host.as_bytes());
    }
    if !rules.user_agent {
        write_header(out, "User-Agent", USER_AGENT.as_bytes());
    }
}

/// Writes the Basic `Authorization` of the URL's credentials, unless the
/// user's headers carry their own.
pub fn write_url_auth(out: &mut Vec<u8>, target: &Target, rules: Overrides) {
    if let Some(auth) = &target.basic_auth
        && !rules.authorization
    {
        write_header(out, "Authorization", auth.header_value().as_bytes());
    }
}

/// Ends a request after the user's headers: the body's length when there is
/// a body or the method expects one (RFC 9110 section 8.6), unless the user
/// framed it; `Connection: close` without keep-alive; the blank line; the
/// body. Writes no allocation of its own (the length goes through `io::Write`).
pub fn write_end(out: &mut Vec<u8>, method: &str, body: &[u8], rules: Overrides, keepalive: bool) {
    let expects_body = matches!(method, "POST" | "PUT" | "PATCH");
    if (!body.is_empty() || expects_body) && !rules.framing {
        use std::io::Write as _;
        let _ = write!(out, "Content-Length: {}\r\n", body.len());
    }
    if !keepalive && !rules.connection {
        write_header(out, "Connection", b"close");
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(body);
}

impl RequestBytes {
    /// Builds `METHOD path HTTP/1.1` with Host, the user's headers, a body
    /// length when there is a body, and `Connection: close` when each request
    /// gets its own connection. User headers override Host and User-Agent.
    pub fn build(
        method: &str,
        target: &Target,
        headers: &[(String, String)],
        body: &[u8],
        keepalive: bool,
    ) -> RequestBytes {
        let rules = Overrides::of(headers.iter().map(|(n, _)| n.as_str()));
        let mut bytes = Vec::with_capacity(128 + body.len());
        write_start(
            &mut bytes,
            method,
            target.path_and_query.as_bytes(),
            &target.host_header,
            rules,
        );
        write_url_auth(&mut bytes, target, rules);
        for (name, value) in headers {
            write_header(&mut bytes, name, value.as_bytes());
        }
        write_end(&mut bytes, method, body, rules, keepalive);
        RequestBytes {
            single: bytes.len(),
            bytes,
            is_head: method.eq_ignore_ascii_case("HEAD"),
        }
    }

    /// Repeats the request for pipelined rounds of up to `depth` requests.
    pub fn pipelined(mut self, depth: u32) -> RequestBytes {
        self.bytes = self.bytes[..self.single].repeat(depth.max(1) as usize);
        self
    }

    /// The bytes of `count` requests back to back (`count` <= depth).
    #[inline]
    pub fn repeat_slice(&self, count: u32) -> &[u8] {
        &self.bytes[..self.single * count as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target() -> Target {
        Target::parse("http://example.test:8080/a/b?x=1").unwrap()
    }

    #[test]
    fn get_has_host_and_agent() {
        let req = RequestBytes::build("GET", &target(), &[], b"", true);
        let text = String::from_utf8(req.bytes).unwrap();
        assert!(text.starts_with("GET /a/b?x=1 HTTP/1.1\r\nHost: example.test:8080\r\n"));
        assert!(text.contains("User-Agent: volley/"));
        assert!(text.ends_with("\r\n\r\n"));
        assert!(!text.contains("Connection"));
    }

    #[test]
    fn body_gets_length_and_close_when_asked() {
        let headers = vec![("X-Test".to_string(), "1".to_string())];
        let req = RequestBytes::build("POST", &target(), &headers, b"hello", false);
        let text = String::from_utf8(req.bytes).unwrap();
        assert!(text.contains("X-Test: 1\r\n"));
        assert!(text.contains("Content-Length: 5\r\n"));
        assert!(text.contains("Connection: close\r\n"));
        assert!(text.ends_with("\r\n\r\nhello"));
    }

    #[test]
    fn url_credentials_send_basic_auth_unless_the_user_sets_one() {
        let target = Target::parse("http://u:p@example.test/").unwrap();
        let req = RequestBytes::build("GET", &target, &[], b"", true);
        let text = String::from_utf8(req.bytes).unwrap();
        assert!(text.contains("Authorization: Basic dTpw\r\n"), "{text}");
        let mine = vec![("authorization".to_string(), "Bearer t".to_string())];
        let req = RequestBytes::build("GET", &target, &mine, b"", true);
        let text = String::from_utf8(req.bytes).unwrap();
        assert_eq!(
            text.to_ascii_lowercase().matches("authorization:").count(),
            1,
            "{text}"
        );
        assert!(text.contains("authorization: Bearer t\r\n"), "{text}");
    }

    #[test]
    fn framing_headers_must_match_the_body() {
        assert_eq!(check_framing("X-Other", Some("1"), Some(b"abc")), Ok(()));
        assert_eq!(check_framing("content-length", Some(" 3 "), Some(b"abc")), Ok(()));
        assert_eq!(check_framing("Content-Length", Some("0"), Some(b"")), Ok(()));
        for (value, body) in [
            (Some("2"), Some(&b"abc"[..])),
            (Some("+3"), Some(b"abc")),
            (Some("3"), None),
            (None, Some(b"abc")),
        ] {
            let err = check_framing("Content-Length", value, body).unwrap_err();
            assert!(err.contains("drop the header"), "{err}");
        }
        let err = check_framing("Transfer-Encoding", Some("chunked"), Some(b"")).unwrap_err();
        assert!(err.contains("drop the header"), "{err}");
    }

    #[test]
    fn pipelined_rounds_are_prefixes() {
        let one = RequestBytes::build("GET", &target(), &[], b"", true);
        let single = one.bytes.clone();
        let many = one.pipelined(3);
        assert_eq!(many.repeat_slice(1), &single[..]);
        assert_eq!(
            many.repeat_slice(3),
            [single.clone(), single.clone(), single].concat()
        );
    }

    #[test]
    fn user_host_overrides_default() {
        let headers = vec![("host".to_string(), "other".to_string())];
        let req = RequestBytes::build("HEAD", &target(), &headers, b"", true);
        let text = String::from_utf8(req.bytes).unwrap();
        assert_eq!(text.matches("ost: ").count(), 1);
        assert!(text.contains("host: other\r\n"));
        assert!(req.is_head);
    }

    #[test]
    fn user_framing_agent_and_connection_override_volley_s() {
        let headers = vec![
            ("User-Agent".to_string(), "mine".to_string()),
            ("content-length".to_string(), "5".to_string()),
            ("Connection".to_string(), "keep-alive".to_string()),
        ];
        let req = RequestBytes::build("POST", &target(), &headers, b"hello", false);
        let text = String::from_utf8(req.bytes).unwrap();
        assert_eq!(
            text.to_ascii_lowercase().matches("user-agent:").count(),
            1,
            "{text}"
        );
        assert_eq!(
            text.to_ascii_lowercase().matches("content-length:").count(),
            1,
            "{text}"
        );
        assert_eq!(
            text.to_ascii_lowercase().matches("connection:").count(),
            1,
            "{text}"
        );
        let empty_post = RequestBytes::build("POST", &target(), &[], b"", true);
        assert!(
            String::from_utf8(empty_post.bytes)
                .unwrap()
                .contains("Content-Length: 0\r\n")
        );
    }
}
