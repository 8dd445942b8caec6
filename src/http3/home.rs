//! Sharing HTTP/3 connections among a worker's request loops, as HTTP/2's
//! are shared (a [`Home`] is a [`Group`] of lanes; see
//! [`crate::http2::Group`]), how a worker opens them ([`Dialer`]) and a
//! lane's round trip.

use super::conn::{Conn, Deadline, Failure, Place};
use super::request::H3Request;
use crate::http2::{Group, Open, Outbox};
use crate::net::uring::Ring;
use crate::recorder::Recorder;
use crate::request::Request;
use crate::response::{Capture, ResponseHead};
use crate::sample::{ErrorDetail, ErrorKind, RequestError};
use quinn_proto::ClientConfig;
use std::cell::{Cell, RefCell};
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

/// How often a refused stream (never processed by the server) is sent
/// again on a new connection before it counts as failed.
const RETRIES: usize = 3;

/// Where and how a worker opens its QUIC connections.
pub struct Dialer {
    pub addrs: Vec<SocketAddr>,
    pub config: ClientConfig,
    pub server_name: String,
    pub connect_timeout: Duration,
    /// The address that answered last, tried first.
    preferred: Cell<usize>,
    /// The worker's ring, when its sockets are driven by io_uring.
    ring: Option<Rc<Ring>>,
}

impl Dialer {
    pub fn new(
        addrs: Vec<SocketAddr>,
        config: ClientConfig,
        server_name: String,
        connect_timeout: Duration,
        ring: Option<Rc<Ring>>,
    ) -> Dialer {
        Dialer {
            addrs,
            config,
            server_name,
            connect_timeout,
            preferred: Cell::new(0),
            ring,
        }
    }

    /// A new connection with its handshake done, within the connect
    /// timeout; the handshake goes to `recorder`. With `early`, one that
    /// can send 0-RTT data comes back before its handshake is done (which
    /// a lane records later, see [`record_handshake`]).
    async fn dial(
        &self,
        lanes: usize,
        outbox: &Rc<Outbox>,
        recorder: &RefCell<Recorder>,
        early: bool,
    ) -> Result<Rc<Conn>, RequestError> {
        let deadline = Deadline {
            by: tokio::time::Instant::now() + self.connect_timeout,
            timeout: self.connect_timeout,
        };
        let first = self.preferred.get();
        let mut last_err = None;
        for i in 0..self.addrs.len() {
            let index = (first + i) % self.addrs.len();
            let connect = Conn::connect(
                self.addrs[index],
                self.config.clone(),
                &self.server_name,
                Place {
                    lanes,
                    outbox: outbox.clone(),
                    ring: self.ring.as_ref(),
                },
                deadline,
                early,
            );
            match connect.await {
                Ok(conn) => {
                    self.preferred.set(index);
                    record_handshake(&conn, recorder);
                    return Ok(conn);
                }
                // Out of time: no address after it gets any.
                Err(err) if tokio::time::Instant::now() >= deadline.by => return Err(err),
                Err(err) => last_err = Some(err),
            }
        }
        Err(last_err.unwrap_or_else(|| RequestError::protocol("no address to connect to")))
    }
}

/// Records `conn`'s handshake if it is done and nobody has yet. QUIC's
/// handshake is TCP's and TLS's in one, timed from its first datagram.
fn record_handshake(conn: &Conn, recorder: &RefCell<Recorder>) {
    if let Some(handshake) = conn.take_handshake() {
        let mut recorder = recorder.borrow_mut();
        recorder.record_handshake(handshake.took, handshake.resumed);
        if let Some(accepted) = handshake.zero_rtt {
            recorder.record_zero_rtt(accepted);
        }
    }
}

/// The HTTP/3 connection a group of lanes shares.
pub type Home = Group<Conn>;

/// One request loop's place on a home's connections.
pub struct Lane {
    home: Rc<Home>,
    index: usize,
    /// A plan's requests, encoded for each send.
    scratch: H3Request,
}

impl Lane {
    /// The next free lane of `home`, or `None` when every lane is given out.
    pub fn of(home: &Rc<Home>) -> Option<Lane> {
        Some(Lane {
            home: home.clone(),
            index: home.take_lane()?,
            scratch: H3Request::default(),
        })
    }

    /// A connection that takes new streams: the group's, or a new one
    /// (which, with `early`, may still be finishing a 0-RTT handshake).
    async fn connection(
        &self,
        dialer: &Dialer,
        recorder: &RefCell<Recorder>,
        early: bool,
    ) -> Result<Rc<Conn>, RequestError> {
        let home = &self.home;
        home.connection(async || dialer.dial(home.lanes(), home.outbox(), recorder, early).await)
            .await
    }

    /// Sends `request` and waits for its response; `capture` receives the
    /// headers and body a plan asked for. Without keep-alive the connection
    /// takes no further stream.
    pub async fn round_trip(
        &self,
        dialer: &Dialer,
        recorder: &RefCell<Recorder>,
        request: &H3Request,
        mut capture: Option<&mut Capture>,
        keepalive: bool,
    ) -> Result<ResponseHead, RequestError> {
        let mut refused = 0;
        loop {
            // A request to send: a resumed session's 0-RTT data may carry it.
            let conn = self.connection(dialer, recorder, true).await?;
            let mut lent = capture.as_deref_mut().map(std::mem::take);
            let started =
                std::future::poll_fn(|cx| conn.poll_start(self.index, request, &mut lent, cx)).await;
            if !started {
                record_handshake(&conn, recorder);
                if let (Some(capture), Some(lent)) = (capture.as_deref_mut(), lent) {
                    *capture = lent;
                }
                self.home.retire(&conn);
                continue;
            }
            let mut open = Open::new(&*conn, self.index);
            let (result, lent) = std::future::poll_fn(|cx| conn.poll_response(self.index, request, cx)).await;
            open.disarm();
            record_handshake(&conn, recorder);
            if let (Some(capture), Some(lent)) = (capture.as_deref_mut(), lent) {
                *capture = lent;
            }
            if !keepalive {
                self.home.retire(&conn);
            }
            match result {
                Ok(head) => return Ok(head),
                Err(Failure::Error(err)) => return Err(err),
                Err(Failure::Refused) if refused < RETRIES => {
                    refused += 1;
                    self.home.retire(&conn);
                }
                Err(Failure::Refused) => {
                    return Err(RequestError::new(
                        ErrorKind::Reset,
                        ErrorDetail::Static("the server refused the HTTP/3 stream"),
                    ));
                }
            }
        }
    }

    /// A plan's request, encoded for this send into the lane's own
    /// buffers.
    pub async fn round_trip_rendered(
        &mut self,
        dialer: &Dialer,
        recorder: &RefCell<Recorder>,
        request: &Request<'_>,
        capture: Option<&mut Capture>,
        keepalive: bool,
    ) -> Result<ResponseHead, RequestError> {
        self.scratch.encode(request)?;
        self.round_trip(dialer, recorder, &self.scratch, capture, keepalive)
            .await
    }

    /// Opens the group's connection now, if it has none: with its
    /// handshake done, as no request waits to go in 0-RTT data.
    pub async fn connect(&self, dialer: &Dialer, recorder: &RefCell<Recorder>) -> Result<(), RequestError> {
        self.connection(dialer, recorder, false).await.map(drop)
    }

    /// Moves this lane's group to a new connection for its next streams.
    pub fn new_connection(&self) {
        self.home.retire_current();
    }
}
