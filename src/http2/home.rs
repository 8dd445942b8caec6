//! Sharing HTTP/2 connections among a worker's request loops.
//!
//! With `--streams N`, N request loops share one connection: each is a
//! [`Lane`] of the same [`Home`], and each has at most one stream open, so a
//! connection carries at most N streams. The home holds the connection new
//! streams go to; when it closes (GOAWAY, an error, one connection per
//! request) the next stream opens a fresh one, while streams still running
//! on the old one finish there (each lane keeps its own handle).

use super::conn::Conn;
use super::machine::Failure;
use super::outbox::Outbox;
use super::request::H2Request;
use crate::net::{Connector, Stream};
use crate::recorder::Recorder;
use crate::request::Request;
use crate::response::{Capture, ResponseHead};
use crate::sample::{ErrorDetail, ErrorKind, RequestError};
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::task::{Poll, Waker};

/// How often a refused stream (never processed by the server) is sent
/// again on a new connection before it counts as failed.
const RETRIES: usize = 3;

/// The connection a group of lanes shares.
pub struct Home {
    current: RefCell<Option<Rc<Conn>>>,
    /// One lane connects at a time; the others wait for its connection.
    connecting: Cell<bool>,
    waiters: RefCell<Vec<Waker>>,
    lanes: usize,
    given: Cell<usize>,
    outbox: Rc<Outbox>,
}

/// One request loop's place on a home's connections.
pub struct Lane {
    home: Rc<Home>,
    index: usize,
    /// A plan's requests, encoded for each send.
    scratch: H2Request,
}

impl Home {
    pub fn new(lanes: usize, outbox: Rc<Outbox>) -> Rc<Home> {
        Rc::new(Home {
            current: RefCell::new(None),
            connecting: Cell::new(false),
            waiters: RefCell::new(Vec::new()),
            lanes,
            given: Cell::new(0),
            outbox,
        })
    }

    /// The next free lane, or `None` when every lane is given out.
    pub fn lane(self: &Rc<Home>) -> Option<Lane> {
        let index = self.given.get();
        if index == self.lanes {
            return None;
        }
        self.given.set(index + 1);
        Some(Lane {
            home: self.clone(),
            index,
            scratch: H2Request::default(),
        })
    }

    /// A connection that takes new streams: the current one, or a new one.
    async fn connection(
        &self,
        connector: &Connector,
        recorder: &RefCell<Recorder>,
    ) -> Result<Rc<Conn>, RequestError> {
        loop {
            if let Some(conn) = self.current.borrow().as_ref().filter(|c| c.accepts_streams()) {
                return Ok(conn.clone());
            }
            if self.connecting.get() {
                std::future::poll_fn(|cx| {
                    if !self.connecting.get() {
                        return Poll::Ready(());
                    }
                    self.waiters.borrow_mut().push(cx.waker().clone());
                    Poll::Pending
                })
                .await;
                continue;
            }
            let _connecting = Connecting(self);
            self.connecting.set(true);
            let stream = connector.connect(recorder).await?;
            if let Stream::Tls(tls) = &stream
                && tls.get_ref().1.alpn_protocol() != Some(b"h2")
            {
                return Err(RequestError::new(
                    ErrorKind::Protocol,
                    ErrorDetail::Static("the server did not agree to HTTP/2 in the TLS handshake (ALPN)"),
                ));
            }
            *self.current.borrow_mut() = Some(Conn::new(stream, self.lanes, self.outbox.clone()));
        }
    }
}

/// Marks the end of a connect, however it ends, and wakes the waiters.
struct Connecting<'a>(&'a Home);

impl Drop for Connecting<'_> {
    fn drop(&mut self) {
        self.0.connecting.set(false);
        for waker in self.0.waiters.borrow_mut().drain(..) {
            waker.wake();
        }
    }
}

/// Cancels the stream if the round trip is dropped before it finished.
struct Open<'a> {
    conn: &'a Conn,
    lane: usize,
    armed: bool,
}

impl Drop for Open<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.conn.cancel(self.lane);
        }
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
            let conn = self.home.connection(connector, recorder).await?;
            std::future::poll_fn(|cx| conn.poll_capacity(cx)).await;
            if !conn.accepts_streams() {
                continue;
            }
            conn.start(self.index, request, capture.as_deref_mut().map(std::mem::take));
            let mut open = Open {
                conn: &conn,
                lane: self.index,
                armed: true,
            };
            let (result, lent) =
                std::future::poll_fn(|cx| conn.poll_response(self.index, &request.body, cx)).await;
            open.armed = false;
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
        self.home.connection(connector, recorder).await.map(drop)
    }

    /// Moves this lane's group to a new connection for its next streams.
    pub fn new_connection(&self) {
        let current = self.home.current.borrow().clone();
        if let Some(conn) = current {
            self.home.retire(&conn);
        }
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

impl Home {
    /// Starts no more streams on `conn`, and lets it close as soon as no
    /// stream runs on it.
    fn retire(&self, conn: &Rc<Conn>) {
        conn.retire();
        let mut current = self.current.borrow_mut();
        if current.as_ref().is_some_and(|c| Rc::ptr_eq(c, conn) && c.idle()) {
            *current = None;
        }
    }
}
