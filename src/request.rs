//! One request as volley means it, before any protocol writes it: method,
//! target (scheme, authority, path and query), header fields and body.
//!
//! Both encoders take this one [`Request`]: [`crate::http1::request`]
//! writes it as HTTP/1.1 bytes, [`crate::http2`] as a HEADERS block, so
//! the rules of what volley sends (its own `User-Agent`, the URL's Basic
//! credentials, the body's `Content-Length`, and which of those the user's
//! headers replace) live here once, and only what belongs to a protocol
//! (the request line, `Host`, `Connection`, pseudo-headers) lives in its
//! encoder.
//!
//! A request borrows everything it names: the run's one request is built
//! and encoded once before the run, and a plan renders each of its requests
//! into reused buffers ([`Fields`] holds the rendered header fields), so
//! building one per send allocates nothing once those buffers have grown.

use crate::target::Target;

/// Sent as `User-Agent` unless the user's headers carry one.
pub const USER_AGENT: &str = concat!("volley/", env!("CARGO_PKG_VERSION"));

/// A request, borrowed from wherever its parts live.
#[derive(Clone, Copy, Debug)]
pub struct Request<'a> {
    /// Upper case, a token (`GET`, `POST`, ...).
    pub method: &'a str,
    /// `https` (else `http`): HTTP/2's `:scheme`.
    pub https: bool,
    /// `host[:port]`: HTTP/1.1's `Host`, HTTP/2's `:authority`, unless the
    /// user's headers set `Host`.
    pub authority: &'a str,
    /// Path and query as sent; empty sends `/`.
    pub path: &'a [u8],
    /// `Authorization` made from the URL's credentials, if it had some.
    pub url_auth: Option<&'a str>,
    /// The user's header fields, in order.
    pub fields: &'a Fields,
    /// Which of volley's own fields the user's replace.
    pub overrides: Overrides,
    pub body: &'a [u8],
}

impl<'a> Request<'a> {
    /// A request to `target`'s origin and credentials, at `path`.
    pub fn to(
        target: &'a Target,
        method: &'a str,
        path: &'a [u8],
        fields: &'a Fields,
        overrides: Overrides,
        body: &'a [u8],
    ) -> Request<'a> {
        Request {
            method,
            https: target.tls,
            authority: &target.host_header,
            path,
            url_auth: target.basic_auth.as_ref().map(|auth| auth.header_value()),
            fields,
            overrides,
            body,
        }
    }

    /// The path as sent: `/` when empty.
    pub fn path_or_root(&self) -> &'a [u8] {
        if self.path.is_empty() { b"/" } else { self.path }
    }

    /// A HEAD request's response carries no body whatever its headers say.
    pub fn is_head(&self) -> bool {
        self.method.eq_ignore_ascii_case("HEAD")
    }

    /// Every header field sent beyond what the protocol adds of its own, in
    /// order: volley's `User-Agent` and the URL's `Authorization` (unless
    /// the user's replace them), the user's fields, then the body's
    /// `Content-Length` when there is a body or the method expects one (RFC
    /// 9110 section 8.6), unless the user framed it. Names as written; no
    /// allocation (the length is written into a stack buffer).
    pub fn for_each_field(&self, mut field: impl FnMut(&[u8], &[u8])) {
        let rules = self.overrides;
        if !rules.user_agent {
            field(b"User-Agent", USER_AGENT.as_bytes());
        }
        if let Some(auth) = self.url_auth
            && !rules.authorization
        {
            field(b"Authorization", auth.as_bytes());
        }
        for (name, value) in self.fields.iter() {
            field(name, value);
        }
        let expects_body = matches!(self.method, "POST" | "PUT" | "PATCH");
        if (!self.body.is_empty() || expects_body) && !rules.framing {
            let mut digits = [0u8; 20];
            field(b"Content-Length", decimal(self.body.len(), &mut digits));
        }
    }
}

/// `n` in decimal, written at the end of `out`.
fn decimal(mut n: usize, out: &mut [u8; 20]) -> &[u8] {
    let mut start = out.len();
    loop {
        start -= 1;
        out[start] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &out[start..];
        }
    }
}

/// Header fields in one buffer that is reused from request to request:
/// names and values written back to back, and where each ends.
#[derive(Clone, Debug, Default)]
pub struct Fields {
    bytes: Vec<u8>,
    /// Per field: where its name ends (its value starts) and where it ends;
    /// it starts where the previous one ended.
    ends: Vec<(usize, usize)>,
}

impl Fields {
    /// Fields with these names and values.
    pub fn of(pairs: &[(String, String)]) -> Fields {
        let mut fields = Fields::default();
        for (name, value) in pairs {
            fields.push(name, value.as_bytes());
        }
        fields
    }

    /// Empties it for the next request, keeping its allocations.
    pub fn clear(&mut self) {
        self.bytes.clear();
        self.ends.clear();
    }

    pub fn push(&mut self, name: &str, value: &[u8]) {
        let _ = self.push_with(name, |out| {
            out.extend_from_slice(value);
            Ok::<(), ()>(())
        });
    }

    /// Adds a field whose value `write` appends to the buffer (a plan's
    /// template renders straight into it); on an error the field is not
    /// added.
    pub fn push_with<E>(
        &mut self,
        name: &str,
        write: impl FnOnce(&mut Vec<u8>) -> Result<(), E>,
    ) -> Result<(), E> {
        let start = self.bytes.len();
        self.bytes.extend_from_slice(name.as_bytes());
        let name_end = self.bytes.len();
        match write(&mut self.bytes) {
            Ok(()) => {
                self.ends.push((name_end, self.bytes.len()));
                Ok(())
            }
            Err(err) => {
                self.bytes.truncate(start);
                Err(err)
            }
        }
    }

    /// The fields as `(name, value)`, in the order they were added.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        let mut start = 0;
        self.ends.iter().map(move |&(name_end, end)| {
            let field = (&self.bytes[start..name_end], &self.bytes[name_end..end]);
            start = end;
            field
        })
    }

    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }
}

/// Which of volley's own header fields the user's headers replace: the one
/// set of rules for `volley run -H` and a plan's `headers`, over either
/// protocol. Worked out once from the header names (known before the run),
/// never per request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Overrides {
    pub host: bool,
    pub user_agent: bool,
    /// `Content-Length` or `Transfer-Encoding`: the user frames the body.
    pub framing: bool,
    pub connection: bool,
    /// The user's own `Authorization` wins over the URL's credentials.
    pub authorization: bool,
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

/// A user's framing header that could contradict the body volley sends.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum FramingError {
    #[error("header '{0}': volley sends every body with its Content-Length; drop the header")]
    TransferEncoding(String),
    #[error(
        "header '{name}: {value}' contradicts the {body_len}-byte body; drop the header (volley sends the body's length)"
    )]
    Contradicts {
        name: String,
        value: String,
        body_len: usize,
    },
    #[error(
        "header '{0}' with a templated value or body, whose length changes per request; drop the header (volley sends each body's length)"
    )]
    Templated(String),
}

/// Refuses a user's framing header that could contradict the body volley
/// sends (the body's bytes past a too-small length would be read as the
/// next request on the connection). `value` and `body` are `None` when they
/// are templates, whose length is known only per request. A
/// `Content-Length` equal to the body's length is fine (it replaces
/// volley's own); `Transfer-Encoding` never is: volley sends every body with
/// its length. The error says what to drop.
pub fn check_framing(name: &str, value: Option<&str>, body: Option<&[u8]>) -> Result<(), FramingError> {
    if name.eq_ignore_ascii_case("transfer-encoding") {
        return Err(FramingError::TransferEncoding(name.to_string()));
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
        (Some(value), Some(body)) => Err(FramingError::Contradicts {
            name: name.to_string(),
            value: value.to_string(),
            body_len: body.len(),
        }),
        _ => Err(FramingError::Templated(name.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collect(request: &Request) -> Vec<(String, String)> {
        let mut out = Vec::new();
        request.for_each_field(|n, v| {
            out.push((
                String::from_utf8_lossy(n).into_owned(),
                String::from_utf8_lossy(v).into_owned(),
            ))
        });
        out
    }

    #[test]
    fn fields_keep_order_and_reuse_their_buffer() {
        let mut fields = Fields::of(&[("A".into(), "1".into()), ("Bb".into(), "".into())]);
        let got: Vec<_> = fields.iter().collect();
        assert_eq!(got, [(&b"A"[..], &b"1"[..]), (b"Bb", b"")]);
        let failed = fields.push_with("C", |out| {
            out.extend_from_slice(b"partial");
            Err("no value")
        });
        assert_eq!(failed, Err("no value"));
        assert_eq!(fields.iter().count(), 2, "a failed field is not added");
        fields.clear();
        assert!(fields.is_empty());
        fields.push("D", b"4");
        assert_eq!(fields.iter().collect::<Vec<_>>(), [(&b"D"[..], &b"4"[..])]);
    }

    #[test]
    fn volley_s_own_fields_come_around_the_user_s_unless_replaced() {
        let target = Target::parse("http://u:p@example.test:8080/a").unwrap();
        let fields = Fields::of(&[("X-A".into(), "1".into())]);
        let request = Request::to(&target, "POST", b"/a", &fields, Overrides::default(), b"hi");
        let got = collect(&request);
        let names: Vec<&str> = got.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["User-Agent", "Authorization", "X-A", "Content-Length"]);
        assert_eq!(got[1].1, "Basic dTpw");
        assert_eq!(got[3].1, "2");
        assert_eq!(request.authority, "example.test:8080");
        assert!(!request.https && !request.is_head());

        let mine = [
            ("user-agent".to_string(), "me".to_string()),
            ("Authorization".to_string(), "Bearer t".to_string()),
            ("content-length".to_string(), "2".to_string()),
        ];
        let fields = Fields::of(&mine);
        let rules = Overrides::of(mine.iter().map(|(n, _)| n.as_str()));
        let request = Request::to(&target, "POST", b"/a", &fields, rules, b"hi");
        let got = collect(&request);
        assert_eq!(got.len(), 3, "{got:?}");
    }

    #[test]
    fn lengths_go_with_bodies_and_with_methods_that_expect_one() {
        let target = Target::parse("https://example.test/").unwrap();
        let fields = Fields::default();
        let length = |method, body: &[u8]| {
            let request = Request::to(&target, method, b"", &fields, Overrides::default(), body);
            collect(&request)
                .into_iter()
                .find(|(n, _)| n == "Content-Length")
                .map(|(_, v)| v)
        };
        assert_eq!(length("GET", b""), None);
        assert_eq!(length("PUT", b""), Some("0".into()));
        assert_eq!(length("GET", &[7; 1234567]), Some("1234567".into()));
        let request = Request::to(&target, "HEAD", b"", &fields, Overrides::default(), b"");
        assert!(request.https && request.is_head());
        assert_eq!(request.path_or_root(), b"/");
    }
}
