//! Sharing HTTP/2 connections among a worker's request loops: a [`Lane`]
//! is one loop's place in a [`Home`], the [`Group`] of loops that share a
//! connection (see [`super::group`]), and its round trip.

use super::conn::Conn;
use super::group::{Group, Multiplexed, Open};
use super::machine::Failure;
use super::request::H2Request;
use crate::net::{Connector, Stream};
use crate::recorder::Recorder;
use crate::request::Request;
use crate::response::{Capture, ResponseHead};
use crate::sample::{ErrorDetail, ErrorKind, RequestError};
use std::cell::RefCell;
use std::rc::Rc;
use std::task::{Context, Poll};

/// How often a refused stream (never processed by the server) is sent
/// again on a new connection before it counts as failed.
pub(crate) const RETRIES: usize = 3;

/// The HTTP/2 connection a group of lanes shares.
pub type Home = Group<Conn>;

/// One request loop's place on a home's connections.
pub struct Lane {
    home: Rc<Home>,
    index: usize,
    /// A plan's requests, encoded for each send.
    scratch: H2Request,
}

impl Lane {
    /// The next free lane of `home`, or `None` when every lane is given out.
    pub fn of(home: &Rc<Home>) -> Option<Lane> {
        Some(Lane {
            home: home.clone(),
            index: home.take_lane()?,
            scratch: H2Request::default(),
        })
    }

    /// A connection that takes new streams: the group's, or a new one.
    async fn connection(
        &self,
        connector: &Connector,
        recorder: &RefCell<Recorder>,
    ) -> Result<Rc<Conn>, RequestError> {
        let home = &self.home;
        home.connection(async || {
            let stream = connector.connect(recorder).await?;
            if let Stream::Tls(tls) = &stream
                && tls.get_ref().1.alpn_protocol() != Some(b"h2")
            {
                return Err(RequestError::new(
                    ErrorKind::Protocol,
                    ErrorDetail::Static("the server did not agree to HTTP/2 in the TLS handshake (ALPN)"),
                ));
            }
            Ok(Conn::new(stream, home.lanes(), home.outbox().clone()))
        })
        .await
    }
}

impl Lane {
    /// Sends `request` and waits for its response; `capture` receives the
    /// headers and body a plan asked for. Without keep-alive the connection
    /// takes no further stream. New connections' handshakes go to `recorder`.
    pub async fn round_trip(
        &self,
        connector: &Connector,
        recorder: &RefCell<Recorder>,
        request: &H2Request,
        mut capture: Option<&mut Capture>,
        keepalive: bool,
    ) -> Result<ResponseHead, RequestError> {
        let mut refused = 0;
        loop {
            let conn = match self.home.open_current() {
                Some(conn) => conn,
                None => self.connection(connector, recorder).await?,
            };
            std::future::poll_fn(|cx| conn.poll_capacity(cx)).await;
            if !conn.accepts_streams() {
                continue;
            }
            conn.start(self.index, request, capture.as_deref_mut().map(std::mem::take));
            let mut open = Open::new(&*conn, self.index);
            let (result, lent) =
                std::future::poll_fn(|cx| conn.poll_response(self.index, &request.body, cx)).await;
            open.disarm();
            if let (Some(capture), Some(lent)) = (capture.as_deref_mut(), lent) {
                *capture = lent;
            }
            if !keepalive {
                self.home.retire(&conn);
            }
            match result {
                Ok(head) => return Ok(head),
                Err(Failure::Error(err)) => return Err(err),
                Err(Failure::Refused) if refused < RETRIES => refused += 1,
                Err(Failure::Refused) => {
                    return Err(RequestError::new(
                        ErrorKind::Reset,
                        ErrorDetail::Static("the server refused the HTTP/2 stream"),
                    ));
                }
            }
        }
    }

    /// Opens the group's connection now, if it has none, rather than at
    /// the first stream.
    pub async fn connect(
        &self,
        connector: &Connector,
        recorder: &RefCell<Recorder>,
    ) -> Result<(), RequestError> {
        self.connection(connector, recorder).await.map(drop)
    }

    /// Moves this lane's group to a new connection for its next streams.
    pub fn new_connection(&self) {
        self.home.retire_current();
    }

    /// A plan's request, encoded for this send into the lane's own
    /// buffers.
    pub async fn round_trip_rendered(
        &mut self,
        connector: &Connector,
        recorder: &RefCell<Recorder>,
        request: &Request<'_>,
        capture: Option<&mut Capture>,
        keepalive: bool,
    ) -> Result<ResponseHead, RequestError> {
        self.scratch.encode(request)?;
        self.round_trip(connector, recorder, &self.scratch, capture, keepalive)
            .await
    }
}

/// The steps of the engine's HTTP/2 fast path: a stream started and waited
/// on by plain polls, with nothing to await in between.
impl Lane {
    /// Starts the run's own `request` on the group's current connection if
    /// it is open, takes new streams and has room for one more; otherwise
    /// `None`, with nothing started (the round trip above then connects or
    /// waits for room).
    pub fn start_at_once(&self, request: &H2Request, cx: &mut Context<'_>) -> Option<Started> {
        let conn = self.home.open_current()?;
        if conn.poll_capacity(cx).is_pending() || !conn.accepts_streams() {
            return None;
        }
        conn.start(self.index, request, None);
        Some(Started {
            conn,
            lane: self.index,
            running: true,
        })
    }
}

/// A stream that [`Lane::start_at_once`] started, cancelled on the server
/// if dropped before it ends (a timeout, or the run's end).
pub struct Started {
    conn: Rc<Conn>,
    lane: usize,
    running: bool,
}

impl Started {
    /// Drives the connection until the stream ends: its response head, an
    /// error, or `Ok(None)` when the server refused the stream (never
    /// processed it), for the round trip above to send again on another
    /// connection. `body` is the request's.
    pub fn poll_end(
        &mut self,
        body: &[u8],
        cx: &mut Context<'_>,
    ) -> Poll<Result<Option<ResponseHead>, RequestError>> {
        let (result, _) = std::task::ready!(self.conn.poll_response(self.lane, body, cx));
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
