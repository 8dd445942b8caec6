//! What a response gives the engine, whatever the protocol: its
//! [`ResponseHead`], and where its body goes: the worker's one shared
//! [`BodySink`], read into and dropped, or a plan's [`Capture`] when the
//! response is assigned to a variable (up to [`MAX_KEPT_BODY`]). HTTP/1.1
//! and HTTP/2 both fill them.

use crate::sample::RequestError;
use std::cell::RefCell;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use tokio::io::{AsyncRead, ReadBuf};

/// What the engine needs from a response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResponseHead {
    pub status: u16,
    /// Bytes read for this response: head, body and chunk framing.
    pub bytes: u64,
    /// The server will close the connection after this response.
    pub close: bool,
    /// The UDP port this response's `Alt-Svc` offers HTTP/3 on
    /// ([`h3_offer`]), for `-v`'s note. Looked for in every HTTP/1.1
    /// response (its header fields are parsed anyway) and in the first
    /// response of each HTTP/2 connection (its fields are otherwise left
    /// undecoded); never over HTTP/3, which is spoken already.
    pub h3_offer: Option<u16>,
    /// When the request began to go out, where its connection held it back
    /// after its loop queued it (HTTP/2's `--coalesce`); `None` where it
    /// went out as its loop sent it.
    pub sent_at: Option<std::time::Instant>,
    /// When the kernel received the response's last bytes, where the
    /// socket's receives are stamped (a worker that waits for batches of
    /// completions); `None` where it counts as received when read.
    pub received_at: Option<std::time::Instant>,
}

/// The UDP port an `Alt-Svc` field value (RFC 7838) offers HTTP/3 on:
/// `h3=":443"; ma=86400` offers port 443. The first `h3` alternative
/// counts; drafts (`h3-29`) are not the HTTP/3 volley speaks, and `clear`
/// offers nothing.
pub fn h3_offer(value: &[u8]) -> Option<u16> {
    let value = std::str::from_utf8(value).ok()?;
    value.split(',').find_map(|alternative| {
        // `protocol-id="host:port"`, then `; parameters`.
        let (protocol, rest) = alternative.split_once('=')?;
        if protocol.trim() != "h3" {
            return None;
        }
        let authority = rest.split(';').next()?.trim().trim_matches('"');
        // The host may be empty (the same host) or an IPv6 address in
        // brackets; the port comes last.
        let (_, port) = authority.rsplit_once(':')?;
        port.parse().ok().filter(|port| *port != 0)
    })
}

/// Size of the shared sink body bytes are read into and dropped.
pub(crate) const SINK_SIZE: usize = 64 * 1024;

/// A worker's scratch space for body bytes nobody needs, shared by all its
/// connections. It is borrowed only inside one `poll_read`, never across an
/// await, so connections on the same thread never contend for it.
pub struct BodySink {
    buf: RefCell<Box<[u8]>>,
}

impl Default for BodySink {
    fn default() -> Self {
        BodySink {
            buf: RefCell::new(vec![0; SINK_SIZE].into_boxed_slice()),
        }
    }
}

impl BodySink {
    pub(crate) fn poll_discard<S: AsyncRead + Unpin>(
        &self,
        stream: &mut S,
        cx: &mut Context<'_>,
        max: usize,
    ) -> Poll<std::io::Result<usize>> {
        let mut buf = self.buf.borrow_mut();
        let len = max.min(buf.len());
        let mut read = ReadBuf::new(&mut buf[..len]);
        ready!(Pin::new(stream).poll_read(cx, &mut read))?;
        Poll::Ready(Ok(read.filled().len()))
    }

    /// Reads at most `max` bytes (never past the body, so a pipelined next
    /// response stays on the socket) and drops them; 0 means end of stream.
    pub(crate) async fn discard<S: AsyncRead + Unpin>(
        &self,
        stream: &mut S,
        max: u64,
    ) -> Result<usize, RequestError> {
        let max = usize::try_from(max).unwrap_or(usize::MAX);
        std::future::poll_fn(|cx| self.poll_discard(stream, cx, max))
            .await
            .map_err(RequestError::from_io)
    }
}

/// The most of a response body a plan keeps when it assigns the response
/// to a variable. A body is kept per connection, so without a cap one
/// huge (or endless) response would take the machine's memory; past it the
/// rest is read and dropped and the step fails ([`Capture::overflowed`]).
pub const MAX_KEPT_BODY: usize = 8 * 1024 * 1024;

/// What a scenario keeps of a response: Set-Cookie values always, and with
/// `full` (the response is assigned to a variable) every header and the body.
#[derive(Debug, Default)]
pub struct Capture {
    pub full: bool,
    /// A script's `response()` reads the headers: they are kept in
    /// [`Capture::flat`] instead, names as the server wrote them, and
    /// nothing is allocated per header.
    pub for_script: bool,
    pub headers: Vec<(String, String)>,
    /// With `for_script`: the header names and values back to back.
    pub flat: Vec<u8>,
    /// With `for_script`: where each header's name ends and its value ends
    /// in `flat` (each starts where the one before ended).
    pub flat_ends: Vec<(usize, usize)>,
    /// At most [`MAX_KEPT_BODY`] bytes.
    pub body: Vec<u8>,
    /// The body was longer than [`MAX_KEPT_BODY`]: what was kept is not it.
    pub overflowed: bool,
    /// `name=value` of each Set-Cookie header.
    pub set_cookies: Vec<String>,
}

impl Capture {
    /// Empties it for the next response, keeping its allocations.
    pub fn clear(&mut self, full: bool) {
        self.full = full;
        self.clear_headers();
        self.body.clear();
        self.overflowed = false;
        self.set_cookies.clear();
    }

    /// Forgets the headers kept (an interim response's).
    pub fn clear_headers(&mut self) {
        self.headers.clear();
        self.flat.clear();
        self.flat_ends.clear();
    }

    /// With `for_script`: each kept header's name and value.
    pub fn flat_headers(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        let mut start = 0;
        self.flat_ends.iter().map(move |&(name_end, end)| {
            let header = (&self.flat[start..name_end], &self.flat[name_end..end]);
            start = end;
            header
        })
    }

    /// Keeps body bytes (HTTP/1.1 or HTTP/2) up to [`MAX_KEPT_BODY`].
    pub fn keep_body(&mut self, bytes: &[u8]) {
        if self.body.len() + bytes.len() > MAX_KEPT_BODY {
            self.overflowed = true;
        } else {
            self.body.extend_from_slice(bytes);
        }
    }

    /// Keeps one response header (HTTP/1.1 or HTTP/2). Only Set-Cookie is
    /// needed on every response; the rest is copied (allocating) only for
    /// responses that are assigned.
    pub fn add_header(&mut self, name: &str, value: &[u8]) {
        if self.for_script {
            self.flat.extend_from_slice(name.as_bytes());
            let name_end = self.flat.len();
            self.flat.extend_from_slice(value);
            self.flat_ends.push((name_end, self.flat.len()));
            return;
        }
        if name.eq_ignore_ascii_case("set-cookie") {
            let value = String::from_utf8_lossy(value);
            let pair = value.split(';').next().unwrap_or_default().trim();
            if pair.contains('=') {
                self.set_cookies.push(pair.to_string());
            }
        }
        if self.full {
            self.headers.push((
                name.to_ascii_lowercase(),
                String::from_utf8_lossy(value).into_owned(),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::h3_offer;

    #[test]
    fn an_alt_svc_offers_http3_on_its_port() {
        for (value, port) in [
            (&b"h3=\":443\"; ma=86400"[..], Some(443)),
            (b"h3-29=\":8443\", h3=\":8444\"", Some(8444)),
            (
                b"h2=\"alt.example:443\", h3=\"alt.example:4433\"; persist=1",
                Some(4433),
            ),
            (b"h3=\"[::1]:9443\"", Some(9443)),
            (b" h3 = \":443\" ", Some(443)),
            (b"h3-29=\":443\"", None),
            (b"clear", None),
            (b"h2=\":443\"", None),
            (b"h3=\":0\"", None),
            (b"h3=\":port\"", None),
            (b"", None),
            (b"h3=\":\xff\"", None),
        ] {
            assert_eq!(h3_offer(value), port, "{}", String::from_utf8_lossy(value));
        }
    }
}
