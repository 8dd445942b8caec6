//! HTTP/2's side of the lanes a worker's request loops share (see
//! [`super::group`], whose round trip both HTTP/2 and HTTP/3 use): how an
//! HTTP/2 connection is opened ([`Dial`] over the worker's [`Connector`]),
//! how a stream starts and ends on it ([`Streams`]), and the fast path's
//! stream, started and waited on by plain polls ([`Started`]).

use super::conn::Conn;
use super::group::{Dial, Group, Lane, Multiplexed, Streams};
use super::outcome::{Failure, Finished};
use super::request::H2Request;
use crate::net::{Connector, Stream};
use crate::recorder::Recorder;
use crate::request::Request;
use crate::response::{Capture, ResponseHead};
use crate::sample::{ErrorDetail, ErrorKind, RequestError};
use std::cell::RefCell;
use std::rc::Rc;
use std::task::{Context, Poll, ready};

/// The HTTP/2 connection a group of lanes shares.
pub type Home = Group<Conn>;

/// One request loop's place on a home's HTTP/2 connections.
pub type H2Lane = Lane<Conn>;

impl Dial<Conn> for Connector {
    /// A TCP (or TLS) connection on which the server agreed to HTTP/2.
    async fn dial(
        &self,
        home: &Home,
        recorder: &RefCell<Recorder>,
        _early: bool,
    ) -> Result<Rc<Conn>, RequestError> {
        let stream = self.connect(recorder).await?;
        if let Stream::Tls(tls) = &stream
            && tls.get_ref().1.alpn_protocol() != Some(b"h2")
        {
            return Err(RequestError::new(
                ErrorKind::Protocol,
                ErrorDetail::Static("the server did not agree to HTTP/2 in the TLS handshake (ALPN)"),
            ));
        }
        Ok(Conn::new(stream, home.lanes(), home.outbox().clone()))
    }
}

impl Streams for Conn {
    type Request = H2Request;
    const REFUSED: &'static str = "the server refused the HTTP/2 stream";

    fn encode(into: &mut H2Request, request: &Request<'_>) -> Result<(), RequestError> {
        into.encode(request)
    }

    fn poll_start(
        &self,
        lane: usize,
        request: &H2Request,
        capture: &mut Option<Capture>,
        cx: &mut Context<'_>,
    ) -> Poll<bool> {
        ready!(self.poll_capacity(cx));
        if !self.accepts_streams() {
            return Poll::Ready(false);
        }
        self.start(lane, request, capture.take());
        Poll::Ready(true)
    }

    fn poll_response(&self, lane: usize, request: &H2Request, cx: &mut Context<'_>) -> Poll<Finished> {
        Conn::poll_response(self, lane, &request.body, cx)
    }
}

/// The steps of the engine's HTTP/2 fast path: a stream started and waited
/// on by plain polls, with nothing to await in between.
pub trait StartAtOnce {
    /// Starts the run's own `request` on the group's current connection if
    /// it is open, takes new streams and has room for one more; otherwise
    /// `None`, with nothing started (the round trip then connects or waits
    /// for room).
    fn start_at_once(&self, request: &H2Request, cx: &mut Context<'_>) -> Option<Started>;
}

impl StartAtOnce for H2Lane {
    fn start_at_once(&self, request: &H2Request, cx: &mut Context<'_>) -> Option<Started> {
        let conn = self.home().open_current()?;
        if conn.poll_capacity(cx).is_pending() || !conn.accepts_streams() {
            return None;
        }
        conn.start(self.index(), request, None);
        Some(Started {
            conn,
            lane: self.index(),
            running: true,
        })
    }
}

/// A stream that [`StartAtOnce::start_at_once`] started, cancelled on the
/// server if dropped before it ends (a timeout, or the run's end).
pub struct Started {
    conn: Rc<Conn>,
    lane: usize,
    running: bool,
}

impl Started {
    /// Drives the connection until the stream ends: its response head, an
    /// error, or `Ok(None)` when the server refused the stream (never
    /// processed it), for the round trip to send again. `body` is the
    /// request's.
    pub fn poll_end(
        &mut self,
        body: &[u8],
        cx: &mut Context<'_>,
    ) -> Poll<Result<Option<ResponseHead>, RequestError>> {
        let (result, _) = ready!(self.conn.poll_response(self.lane, body, cx));
        self.running = false;
        Poll::Ready(match result {
            Ok(head) => Ok(Some(head)),
            Err(Failure::Refused) => Ok(None),
            Err(Failure::Error(err)) => Err(err),
        })
    }
}

impl Drop for Started {
    fn drop(&mut self) {
        if self.running {
            self.conn.cancel(self.lane);
        }
    }
}
