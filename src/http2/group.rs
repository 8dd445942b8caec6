//! A group of request loops sharing one multiplexed connection at a time,
//! whatever the protocol (HTTP/2's connections and HTTP/3's alike).
//!
//! With `--streams N`, N request loops share a connection: each is a lane
//! of the same [`Group`], with at most one stream open, so a connection
//! carries at most N streams. The group holds the connection new streams
//! go to; when it stops taking them (GOAWAY, an error, one connection per
//! request) the next stream opens a fresh one, while streams still running
//! on the old one finish there (each lane holds its own handle). One lane
//! connects at a time; the others wait for its connection.
//!
//! A lane's round trip ([`Lane::round_trip`]) is written here once for both
//! protocols: which connection a stream goes on, a refused stream sent
//! again, a connection retired without keep-alive. What differs between
//! them is behind [`Streams`] (how a stream starts and ends) and [`Dial`]
//! (how a connection is opened).

use super::outbox::Outbox;
use super::outcome::{Failure, Finished};
use crate::recorder::Recorder;
use crate::request::Request;
use crate::response::{Capture, ResponseHead};
use crate::sample::{ErrorDetail, ErrorKind, RequestError};
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

/// How often a refused stream (never processed by the server) is sent
/// again before it counts as failed.
pub const RETRIES: usize = 3;

/// What a group needs of the connection its lanes share.
pub trait Multiplexed {
    /// Whether a new stream may start here.
    fn accepts_streams(&self) -> bool;
    /// Starts no more streams here.
    fn retire(&self);
    /// The lane gave up on its stream (a timeout, or the run ended).
    fn cancel(&self, lane: usize);
    /// Takes in what arrived while no lane was reading, before the
    /// connection is asked whether it takes streams.
    fn catch_up(&self) {}
}

/// How a lane's stream starts and ends on a connection of its protocol.
pub trait Streams: Multiplexed + Sized {
    /// A request as the protocol sends it: encoded once for the run, or
    /// for each send into a lane's own.
    type Request: Default;
    /// What the error of a stream refused `RETRIES` times says.
    const REFUSED: &'static str;

    /// Encodes a plan's request into a lane's own `into`.
    fn encode(into: &mut Self::Request, request: &Request<'_>) -> Result<(), RequestError>;

    /// Opens the lane's stream and starts its request, taking `capture`:
    /// ready with `true` once it has started, `false` when the connection
    /// takes no more streams (the lane goes to another), pending while the
    /// server's stream limit is reached.
    fn poll_start(
        &self,
        lane: usize,
        request: &Self::Request,
        capture: &mut Option<Capture>,
        cx: &mut Context<'_>,
    ) -> Poll<bool>;

    /// Drives the connection until the lane's stream has finished.
    fn poll_response(&self, lane: usize, request: &Self::Request, cx: &mut Context<'_>) -> Poll<Finished>;

    /// After a stream ended or could not start: what the connection has
    /// to report that no stream carries (HTTP/3's handshake, which its
    /// first streams may have gone out before, as 0-RTT data).
    fn settled(&self, _recorder: &RefCell<Recorder>) {}
}

/// How a worker opens a connection of a group's protocol.
///
/// Its future runs on the worker's current-thread runtime and is never
/// sent to another thread, so it carries no `Send` bound.
#[allow(async_fn_in_trait)]
pub trait Dial<C> {
    /// A new connection for `group`, its handshake going to `recorder`;
    /// with `early`, one that may still be finishing a 0-RTT handshake
    /// (where the protocol has one).
    async fn dial(
        &self,
        group: &Group<C>,
        recorder: &RefCell<Recorder>,
        early: bool,
    ) -> Result<Rc<C>, RequestError>;
}

/// The connection a group of lanes shares.
pub struct Group<C> {
    current: RefCell<Option<Rc<C>>>,
    connecting: Cell<bool>,
    waiters: RefCell<Vec<Waker>>,
    lanes: usize,
    given: Cell<usize>,
    outbox: Rc<Outbox>,
}

impl<C: Multiplexed> Group<C> {
    pub fn new(lanes: usize, outbox: Rc<Outbox>) -> Rc<Group<C>> {
        Rc::new(Group {
            current: RefCell::new(None),
            connecting: Cell::new(false),
            waiters: RefCell::new(Vec::new()),
            lanes,
            given: Cell::new(0),
            outbox,
        })
    }

    /// The next free lane's index, or `None` when every lane is given out.
    pub fn take_lane(&self) -> Option<usize> {
        let index = self.given.get();
        if index == self.lanes {
            return None;
        }
        self.given.set(index + 1);
        Some(index)
    }

    /// How many lanes share a connection.
    pub fn lanes(&self) -> usize {
        self.lanes
    }

    /// Where the group's connections queue their writes.
    pub fn outbox(&self) -> &Rc<Outbox> {
        &self.outbox
    }

    /// A connection that takes new streams: the current one, or a new one
    /// from `open`.
    pub async fn connection(
        &self,
        mut open: impl AsyncFnMut() -> Result<Rc<C>, RequestError>,
    ) -> Result<Rc<C>, RequestError> {
        loop {
            if let Some(conn) = self.open_current() {
                return Ok(conn);
            }
            self.retire_current();
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
            let conn = open().await?;
            *self.current.borrow_mut() = Some(conn);
        }
    }

    /// The current connection if it takes new streams, with no await: what
    /// almost every stream finds.
    pub fn open_current(&self) -> Option<Rc<C>> {
        // Not borrowed while the connection catches up, which may end it.
        let conn = self.current.borrow().clone()?;
        conn.catch_up();
        conn.accepts_streams().then_some(conn)
    }

    /// Starts no more streams on `conn`, and forgets it as the current one.
    pub fn retire(&self, conn: &Rc<C>) {
        conn.retire();
        let mut current = self.current.borrow_mut();
        if current.as_ref().is_some_and(|c| Rc::ptr_eq(c, conn)) {
            *current = None;
        }
    }

    /// Moves the group to a new connection for its next streams.
    pub fn retire_current(&self) {
        let current = self.current.borrow().clone();
        if let Some(conn) = current {
            self.retire(&conn);
        }
    }
}

/// Marks the end of a connect, however it ends, and wakes the waiters.
struct Connecting<'a, C>(&'a Group<C>);

impl<C> Drop for Connecting<'_, C> {
    fn drop(&mut self) {
        self.0.connecting.set(false);
        for waker in self.0.waiters.borrow_mut().drain(..) {
            waker.wake();
        }
    }
}

/// Cancels a lane's stream if its round trip is dropped before it ended.
pub struct Open<'a, C: Multiplexed> {
    conn: &'a C,
    lane: usize,
    armed: bool,
}

impl<'a, C: Multiplexed> Open<'a, C> {
    pub fn new(conn: &'a C, lane: usize) -> Self {
        Open {
            conn,
            lane,
            armed: true,
        }
    }

    /// The stream ended: nothing to cancel.
    pub fn disarm(&mut self) {
        self.armed = false;
    }
}

impl<C: Multiplexed> Drop for Open<'_, C> {
    fn drop(&mut self) {
        if self.armed {
            self.conn.cancel(self.lane);
        }
    }
}

/// One request loop's place on a group's connections.
pub struct Lane<C: Streams> {
    home: Rc<Group<C>>,
    index: usize,
    /// A plan's requests, encoded for each send.
    scratch: C::Request,
}

impl<C: Streams> Lane<C> {
    /// The next free lane of `home`, or `None` when every lane is given out.
    pub fn of(home: &Rc<Group<C>>) -> Option<Lane<C>> {
        Some(Lane {
            home: home.clone(),
            index: home.take_lane()?,
            scratch: C::Request::default(),
        })
    }

    /// The group this lane belongs to.
    pub fn home(&self) -> &Rc<Group<C>> {
        &self.home
    }

    /// The lane's index in its group.
    pub fn index(&self) -> usize {
        self.index
    }

    /// A connection that takes new streams: the group's, or a new one from
    /// `dialer`.
    async fn connection(
        &self,
        dialer: &impl Dial<C>,
        recorder: &RefCell<Recorder>,
        early: bool,
    ) -> Result<Rc<C>, RequestError> {
        let home = &self.home;
        home.connection(async || dialer.dial(home, recorder, early).await)
            .await
    }

    /// Sends `request` and waits for its response; `capture` receives the
    /// headers and body a plan asked for. Without keep-alive the connection
    /// takes no further stream. New connections' handshakes go to
    /// `recorder`.
    ///
    /// A refused stream was never processed, so it is sent again, up to
    /// `RETRIES` times, on the group's connection that takes streams:
    /// the same one, unless the server has since said it takes no more
    /// (a GOAWAY), which sends it to a new one. A server refuses a stream
    /// when it sheds load, which a new connection per refusal would add to.
    pub async fn round_trip(
        &self,
        dialer: &impl Dial<C>,
        recorder: &RefCell<Recorder>,
        request: &C::Request,
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
                conn.settled(recorder);
                if let (Some(capture), Some(lent)) = (capture.as_deref_mut(), lent) {
                    *capture = lent;
                }
                self.home.retire(&conn);
                continue;
            }
            let mut open = Open::new(&*conn, self.index);
            let (result, lent) = std::future::poll_fn(|cx| conn.poll_response(self.index, request, cx)).await;
            open.disarm();
            conn.settled(recorder);
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
                        ErrorDetail::Static(C::REFUSED),
                    ));
                }
            }
        }
    }

    /// A plan's request, encoded for this send into the lane's own
    /// buffers.
    pub async fn round_trip_rendered(
        &mut self,
        dialer: &impl Dial<C>,
        recorder: &RefCell<Recorder>,
        request: &Request<'_>,
        capture: Option<&mut Capture>,
        keepalive: bool,
    ) -> Result<ResponseHead, RequestError> {
        C::encode(&mut self.scratch, request)?;
        self.round_trip(dialer, recorder, &self.scratch, capture, keepalive)
            .await
    }

    /// Opens the group's connection now, if it has none, rather than at
    /// the first stream: with its handshake done, as no request waits to
    /// go in 0-RTT data.
    pub async fn connect(
        &self,
        dialer: &impl Dial<C>,
        recorder: &RefCell<Recorder>,
    ) -> Result<(), RequestError> {
        self.connection(dialer, recorder, false).await.map(drop)
    }

    /// Moves this lane's group to a new connection for its next streams.
    pub fn new_connection(&self) {
        self.home.retire_current();
    }
}
