//! Writes a [`Request`] as HTTP/1.1 bytes: the run's one request once,
//! before the run (repeated for pipelined rounds), a plan's requests into a
//! reused buffer per send.
//!
//! What belongs to HTTP/1.1 alone is added here: the request line, `Host`
//! (unless the user's headers set it), `Connection: close` without
//! keep-alive; every other field, and which of them the user's headers
//! replace, is the [`Request`]'s.

// Where `plan` looks for the framing check (the rules are the request's).
use crate::request::{Fields, Request};
pub use crate::request::{Overrides, check_framing};
use crate::target::Target;
use bytes::Bytes;

/// The exact bytes of one request, reused for every send.
#[derive(Clone, Debug)]
pub struct RequestBytes {
    /// The request, repeated `depth` times so a pipelined round of any size
    /// up to `depth` is one prefix of this buffer, written at once. Shared
    /// and never changed, so a worker's ring can send it from where it is,
    /// keeping a handle on it.
    pub bytes: Bytes,
    /// Length of one request.
    pub single: usize,
    /// A HEAD request's response carries no body whatever its headers say.
    pub is_head: bool,
}

/// Writes one `name: value` header line.
fn header(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.extend_from_slice(name);
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

/// Appends `request` to `out`: the request line, `Host`, the request's
/// fields, `Connection: close` without keep-alive (unless the user's headers
/// set `Connection`), the blank line and the body. Allocates nothing beyond
/// `out`'s growth.
pub fn encode(out: &mut Vec<u8>, request: &Request, keepalive: bool) {
    let rules = request.overrides;
    out.extend_from_slice(request.method.as_bytes());
    out.push(b' ');
    out.extend_from_slice(request.path_or_root());
    out.extend_from_slice(b" HTTP/1.1\r\n");
    if !rules.host {
        header(out, b"Host", request.authority.as_bytes());
    }
    request.for_each_field(|name, value| header(out, name, value));
    if !keepalive && !rules.connection {
        header(out, b"Connection", b"close");
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(request.body);
}

impl RequestBytes {
    /// `request` as HTTP/1.1, once.
    pub fn encode(request: &Request, keepalive: bool) -> RequestBytes {
        let mut bytes = Vec::with_capacity(128 + request.body.len());
        encode(&mut bytes, request, keepalive);
        RequestBytes {
            single: bytes.len(),
            bytes: Bytes::from(bytes),
            is_head: request.is_head(),
        }
    }

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
        let fields = Fields::of(headers);
        let rules = Overrides::of(headers.iter().map(|(n, _)| n.as_str()));
        let path = target.path_and_query.as_bytes();
        RequestBytes::encode(
            &Request::to(target, method, path, &fields, rules, body),
            keepalive,
        )
    }

    /// Repeats the request for pipelined rounds of up to `depth` requests.
    /// Without pipelining the bytes stay as they are: copying them would
    /// hold a large `--body-file` twice at the start of the run.
    pub fn pipelined(mut self, depth: u32) -> RequestBytes {
        if depth > 1 {
            self.bytes = Bytes::from(self.bytes[..self.single].repeat(depth as usize));
        } else {
            self.bytes.truncate(self.single);
        }
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
        let text = String::from_utf8(req.bytes.to_vec()).unwrap();
        assert!(text.starts_with("GET /a/b?x=1 HTTP/1.1\r\nHost: example.test:8080\r\n"));
        assert!(text.contains("User-Agent: volley/"));
        assert!(text.ends_with("\r\n\r\n"));
        assert!(!text.contains("Connection"));
    }

    #[test]
    fn body_gets_length_and_close_when_asked() {
        let headers = vec![("X-Test".to_string(), "1".to_string())];
        let req = RequestBytes::build("POST", &target(), &headers, b"hello", false);
        let text = String::from_utf8(req.bytes.to_vec()).unwrap();
        assert!(text.contains("X-Test: 1\r\n"));
        assert!(text.contains("Content-Length: 5\r\n"));
        assert!(text.contains("Connection: close\r\n"));
        assert!(text.ends_with("\r\n\r\nhello"));
    }

    #[test]
    fn url_credentials_send_basic_auth_unless_the_user_sets_one() {
        let target = Target::parse("http://u:p@example.test/").unwrap();
        let req = RequestBytes::build("GET", &target, &[], b"", true);
        let text = String::from_utf8(req.bytes.to_vec()).unwrap();
        assert!(text.contains("Authorization: Basic dTpw\r\n"), "{text}");
        let mine = vec![("authorization".to_string(), "Bearer t".to_string())];
        let req = RequestBytes::build("GET", &target, &mine, b"", true);
        let text = String::from_utf8(req.bytes.to_vec()).unwrap();
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
            let err = check_framing("Content-Length", value, body)
                .unwrap_err()
                .to_string();
            assert!(err.contains("drop the header"), "{err}");
        }
        let err = check_framing("Transfer-Encoding", Some("chunked"), Some(b""))
            .unwrap_err()
            .to_string();
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
        let text = String::from_utf8(req.bytes.to_vec()).unwrap();
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
        let text = String::from_utf8(req.bytes.to_vec()).unwrap();
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
            String::from_utf8(empty_post.bytes.to_vec())
                .unwrap()
                .contains("Content-Length: 0\r\n")
        );
    }
}
