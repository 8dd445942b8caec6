//! HTTP/1.1 response heads for the embedded target server.
//!
//! Kept separate so the one place that decides the header set (minimal, no
//! `Date`, always a `Content-Length` except where HTTP forbids one) is easy to
//! audit, and so the pre-built `/hi` responses can be checked against it.

use std::io::Write as _;

use super::reply::{Body, Reply, is_bodiless};
use super::request::Head;

/// What the response says about the connection's future.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Persistence {
    /// HTTP/1.1 default: nothing to say.
    KeepAlive,
    /// HTTP/1.0 closes unless the response says otherwise.
    KeepAlive10,
    Close,
}

impl Persistence {
    pub(super) fn for_request(head: &Head) -> Self {
        match (head.keep_alive, head.http10) {
            (false, _) => Persistence::Close,
            (true, true) => Persistence::KeepAlive10,
            (true, false) => Persistence::KeepAlive,
        }
    }

    fn header(self) -> &'static [u8] {
        match self {
            Persistence::KeepAlive => b"",
            Persistence::KeepAlive10 => b"Connection: keep-alive\r\n",
            Persistence::Close => b"Connection: close\r\n",
        }
    }
}

/// Appends a status line and headers. The body's headers are left out for
/// bodiless statuses.
pub(super) fn write_head(
    out: &mut Vec<u8>,
    status: u16,
    content_type: Option<&[u8]>,
    content_length: u64,
    persistence: Persistence,
) {
    write_head_with::<&[u8]>(out, status, content_type, &[], None, content_length, persistence);
}

/// [`write_head`] with header fields of the endpoint's own (`Set-Cookie`,
/// `Allow`: name, then value) added after the body's headers, and the
/// server's `Alt-Svc` value, when it serves HTTP/3, after `Server`.
pub(super) fn write_head_with<V: AsRef<[u8]>>(
    out: &mut Vec<u8>,
    status: u16,
    content_type: Option<&[u8]>,
    fields: &[(&'static str, V)],
    alt_svc: Option<&[u8]>,
    content_length: u64,
    persistence: Persistence,
) {
    // Writing into a Vec cannot fail.
    let _ = write!(out, "HTTP/1.1 {status} {}\r\nServer: volley\r\n", reason(status));
    if let Some(alt_svc) = alt_svc {
        out.extend_from_slice(b"Alt-Svc: ");
        out.extend_from_slice(alt_svc);
        out.extend_from_slice(b"\r\n");
    }
    if !is_bodiless(status) {
        if let Some(content_type) = content_type {
            out.extend_from_slice(b"Content-Type: ");
            out.extend_from_slice(content_type);
            out.extend_from_slice(b"\r\n");
        }
        let _ = write!(out, "Content-Length: {content_length}\r\n");
    }
    for (name, value) in fields {
        let value = value.as_ref();
        // Values can carry what a client sent (a user name in a cookie).
        // Endpoints check it first, but a line break slipping through would
        // let the client write our headers, so such a field is left out.
        if value.iter().any(|&b| matches!(b, b'\r' | b'\n' | 0)) {
            continue;
        }
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(persistence.header());
    out.extend_from_slice(b"\r\n");
}

macro_rules! hi_response {
    ($connection:literal) => {
        concat!(
            "HTTP/1.1 200 OK\r\nServer: volley\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n",
            $connection,
            "\r\nworld"
        )
        .as_bytes()
    };
}

/// `/hi` is what load tests hammer, so its three possible responses are
/// built at compile time and copied out whole.
const HI: [&[u8]; 3] = [
    hi_response!(""),
    hi_response!("Connection: keep-alive\r\n"),
    hi_response!("Connection: close\r\n"),
];
pub(super) const HI_BODY: &[u8] = b"world";

/// The whole response `reply` makes, pre-built, if it is one of those
/// (`/hi`'s): then the head need not be written field by field.
pub(super) fn prebuilt(
    reply: &Reply<'_>,
    persistence: Persistence,
    head_only: bool,
) -> Option<&'static [u8]> {
    let is_hi = reply.status == 200
        && reply.content_type == Some(b"text/plain")
        && reply.fields.is_empty()
        && matches!(reply.body, Body::Static(HI_BODY));
    is_hi.then(|| hi(persistence, head_only))
}

/// The whole `/hi` response, or its head only.
fn hi(persistence: Persistence, head_only: bool) -> &'static [u8] {
    let full = match persistence {
        Persistence::KeepAlive => HI[0],
        Persistence::KeepAlive10 => HI[1],
        Persistence::Close => HI[2],
    };
    if head_only {
        &full[..full.len() - HI_BODY.len()]
    } else {
        full
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        101 => "Switching Protocols",
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        203 => "Non-Authoritative Information",
        204 => "No Content",
        205 => "Reset Content",
        206 => "Partial Content",
        300 => "Multiple Choices",
        301 => "Moved Permanently",
        302 => "Found",
        303 => "See Other",
        304 => "Not Modified",
        307 => "Temporary Redirect",
        308 => "Permanent Redirect",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        409 => "Conflict",
        410 => "Gone",
        413 => "Content Too Large",
        415 => "Unsupported Media Type",
        417 => "Expectation Failed",
        418 => "I'm a teapot",
        422 => "Unprocessable Content",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        // The reason phrase carries no meaning; clients must not rely on it.
        _ => "Status",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prebuilt_hi_matches_the_general_writer() {
        for p in [
            Persistence::KeepAlive,
            Persistence::KeepAlive10,
            Persistence::Close,
        ] {
            let mut built = Vec::new();
            write_head(&mut built, 200, Some(b"text/plain"), 5, p);
            assert_eq!(hi(p, true), &built[..]);
            built.extend_from_slice(HI_BODY);
            assert_eq!(hi(p, false), &built[..]);
        }
    }

    #[test]
    fn only_the_hi_reply_is_prebuilt() {
        let hi_reply = || Reply::new(200, Some(b"text/plain"), Body::Static(HI_BODY));
        let p = Persistence::KeepAlive;
        assert_eq!(prebuilt(&hi_reply(), p, false), Some(hi(p, false)));
        assert_eq!(prebuilt(&hi_reply(), p, true), Some(hi(p, true)));
        let mut with_field = hi_reply();
        with_field.fields.push(("Allow", "GET".into()));
        let others = [
            Reply::new(201, Some(b"text/plain"), Body::Static(HI_BODY)),
            Reply::new(200, None, Body::Static(HI_BODY)),
            Reply::new(200, Some(b"text/plain"), Body::Owned(HI_BODY.to_vec())),
            Reply::new(200, Some(b"text/plain"), Body::Static(b"other")),
            with_field,
        ];
        for other in &others {
            assert_eq!(prebuilt(other, p, false), None);
        }
    }

    #[test]
    fn extra_fields_follow_the_body_headers() {
        let mut out = Vec::new();
        let fields: [(&str, &[u8]); 2] = [("Allow", b"GET, HEAD"), ("X-Bad", b"a\r\nSet-Cookie: x=y")];
        write_head_with(&mut out, 405, None, &fields, None, 2, Persistence::Close);
        assert_eq!(
            out,
            b"HTTP/1.1 405 Method Not Allowed\r\nServer: volley\r\nContent-Length: 2\r\n\
              Allow: GET, HEAD\r\nConnection: close\r\n\r\n"
        );
        out.clear();
        write_head_with::<&[u8]>(
            &mut out,
            204,
            None,
            &[],
            Some(b"h3=\":8443\""),
            0,
            Persistence::KeepAlive,
        );
        assert_eq!(
            out,
            b"HTTP/1.1 204 No Content\r\nServer: volley\r\nAlt-Svc: h3=\":8443\"\r\n\r\n"
        );
    }

    #[test]
    fn bodiless_statuses_have_no_length() {
        let mut out = Vec::new();
        write_head(&mut out, 204, Some(b"text/plain"), 99, Persistence::Close);
        assert_eq!(
            out,
            b"HTTP/1.1 204 No Content\r\nServer: volley\r\nConnection: close\r\n\r\n"
        );
    }
}
