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
        let has = |name: &str| headers.iter().any(|(n, _)| n.eq_ignore_ascii_case(name));
        let mut out = Vec::with_capacity(128 + body.len());
        let mut line = |name: &str, value: &str| {
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(b": ");
            out.extend_from_slice(value.as_bytes());
            out.extend_from_slice(b"\r\n");
        };
        // Request line first; `line` borrows `out`, so write it via a fresh
        // buffer spliced in front below.
        if !has("host") {
            line("Host", &target.host_header);
        }
        if !has("user-agent") {
            line("User-Agent", USER_AGENT);
        }
        for (name, value) in headers {
            line(name, value);
        }
        if !body.is_empty() && !has("content-length") && !has("transfer-encoding") {
            line("Content-Length", &body.len().to_string());
        }
        if !keepalive && !has("connection") {
            line("Connection", "close");
        }
        let mut bytes = format!("{method} {} HTTP/1.1\r\n", target.path_and_query).into_bytes();
        bytes.extend_from_slice(&out);
        bytes.extend_from_slice(b"\r\n");
        bytes.extend_from_slice(body);
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
}
