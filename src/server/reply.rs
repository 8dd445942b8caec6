//! What an endpoint sees and answers, whichever protocol carries the
//! exchange.
//!
//! The endpoints (`routes`, `api`) are written once against these types:
//! `conn` turns an [`Incoming`] out of HTTP/1.1 bytes and renders the
//! [`Answer`] as HTTP/1.1, `h2` does both with HTTP/2 streams. A reply says
//! what to send, not how: its body may be a recipe (`n` filler bytes, a slow
//! drip) that each protocol writes its own way, without building the body in
//! memory first.

use std::time::Duration;

use tokio::time::Instant;

use super::request::{Fields, Method};

/// The body `/slow` drips, one byte at a time.
pub(super) const SLOW_BODY: &[u8] = b"0123456789";
/// What `/garbage` sends: no status line (nor HTTP/2 frame), then bytes no
/// parser can like.
pub(super) const GARBAGE: &[u8] = b"NOT HTTP AT ALL\r\n\r\n\x00\xff\xfe\x01\x80\x7f\r\n\x1b[0m\xc3\x28";
/// Size of the filler `/bytes` bodies are cut from.
pub(super) const FILL_LEN: usize = 64 * 1024;
/// Filler bodies are cut from this, so no body is built per request.
static FILL: [u8; FILL_LEN] = [b'x'; FILL_LEN];

/// A request as the endpoints see it.
pub(super) struct Incoming<'a> {
    pub method: Method,
    /// The method as sent (`Method` names only the ones endpoints tell
    /// apart); for the request log.
    pub method_name: &'a [u8],
    /// The path of the request target, without query string.
    pub path: &'a [u8],
    /// The query string, without its `?`; empty when there is none.
    pub query: &'a [u8],
    pub content_type: Option<&'a [u8]>,
    pub headers: Headers<'a>,
    pub body: &'a [u8],
}

/// Where a request's header fields are; read only by the few endpoints that
/// want them, so an HTTP/1.1 head is parsed for them only then.
#[derive(Clone, Copy)]
pub(super) enum Headers<'a> {
    /// The HTTP/1.1 request from its first byte.
    Http1(&'a [u8]),
    Http2(&'a http::HeaderMap),
}

impl<'a> Incoming<'a> {
    pub(super) fn fields(&self) -> Fields<'a> {
        match self.headers {
            Headers::Http1(request) => Fields::of(request),
            Headers::Http2(map) => Fields::Map(map),
        }
    }

    /// `HEAD` gets the header fields a `GET` would, and no body.
    pub(super) fn head_only(&self) -> bool {
        self.method == Method::Head
    }
}

/// What an endpoint does with a request.
pub(super) enum Answer<'a> {
    Reply(Reply<'a>),
    /// `/drop`: end the connection without answering.
    Drop,
    /// `/stall`: never answer.
    Stall,
    /// `/garbage`: send [`GARBAGE`] instead of an answer, then close.
    Garbage,
}

/// A response, not yet written.
pub(super) struct Reply<'a> {
    pub status: u16,
    pub content_type: Option<&'a [u8]>,
    /// Header fields of the endpoint's own (`Set-Cookie`, `Allow`): name,
    /// then value.
    pub fields: Vec<(&'static str, String)>,
    pub body: Body<'a>,
}

impl<'a> Reply<'a> {
    pub(super) fn new(status: u16, content_type: Option<&'a [u8]>, body: Body<'a>) -> Self {
        Self {
            status,
            content_type,
            fields: Vec::new(),
            body,
        }
    }

    /// Whether the body is sent: not for `HEAD`, and never for statuses
    /// that cannot have one.
    pub(super) fn sends_body(&self, head_only: bool) -> bool {
        !head_only && !is_bodiless(self.status)
    }
}

/// Statuses whose responses never have a body, so also no `Content-Length`
/// (RFC 9110 forbids it for 204, and for 304 it would describe a
/// representation that is not sent).
pub(super) fn is_bodiless(status: u16) -> bool {
    matches!(status, 204 | 304)
}

pub(super) enum Body<'a> {
    Static(&'static [u8]),
    Owned(Vec<u8>),
    /// Part of the request (`/echo`).
    Borrowed(&'a [u8]),
    /// This many filler bytes, written in pieces from a static buffer.
    Fill(u64),
    /// [`SLOW_BODY`], one byte at a time, the last this long after the head.
    Drip(Duration),
}

impl Body<'_> {
    pub(super) fn len(&self) -> u64 {
        match self {
            Body::Static(bytes) | Body::Borrowed(bytes) => bytes.len() as u64,
            Body::Owned(bytes) => bytes.len() as u64,
            Body::Fill(n) => *n,
            Body::Drip(_) => SLOW_BODY.len() as u64,
        }
    }
}

/// The pieces of a [`Body::Fill`] of `n` bytes, each at most [`FILL_LEN`].
pub(super) fn fill(n: u64) -> impl Iterator<Item = &'static [u8]> {
    let mut left = n;
    std::iter::from_fn(move || {
        let piece = usize::try_from(left).map_or(FILL_LEN, |left| left.min(FILL_LEN));
        left -= piece as u64;
        (piece > 0).then(|| &FILL[..piece])
    })
}

/// The bytes of a [`Body::Drip`] begun at `start`, each with when it is
/// due. Deadlines count from one start, so timer lateness does not add up.
pub(super) fn drip(start: Instant, total: Duration) -> impl Iterator<Item = (Instant, &'static [u8])> {
    let steps = SLOW_BODY.len() as u32;
    (1..=steps).map(move |i| {
        let byte = &SLOW_BODY[i as usize - 1..i as usize];
        (start + total * i / steps, byte)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fill_is_cut_into_pieces_that_add_up() {
        assert_eq!(fill(0).count(), 0);
        let lens = |n| fill(n).map(<[u8]>::len).collect::<Vec<_>>();
        assert_eq!(lens(5), [5]);
        assert_eq!(lens(FILL_LEN as u64), [FILL_LEN]);
        assert_eq!(lens(2 * FILL_LEN as u64 + 1), [FILL_LEN, FILL_LEN, 1]);
        assert!(fill(3).all(|piece| piece.iter().all(|&b| b == b'x')));
    }

    #[test]
    fn drip_spreads_the_body_to_the_end() {
        let start = Instant::now();
        let total = Duration::from_millis(100);
        let steps: Vec<_> = drip(start, total).collect();
        let body: Vec<u8> = steps.iter().flat_map(|(_, byte)| byte.iter().copied()).collect();
        assert_eq!(body, SLOW_BODY);
        assert_eq!(steps.first().map(|s| s.0), Some(start + total / 10));
        assert_eq!(steps.last().map(|s| s.0), Some(start + total));
    }
}
