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

use super::outbox::Outbox;
use crate::sample::RequestError;
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::task::{Poll, Waker};

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
