//! The worker's outbox: connections with frames waiting to be written.
//!
//! Lanes never write: they append frames to their connection and queue it
//! here; the worker flushes once every lane it woke has run, so the requests
//! of a whole batch of responses go out in one write. The outbox knows a
//! connection only as something that writes itself out ([`Pending`]), so it
//! sits below [`super::conn`].
//!
//! With `--coalesce` a connection may hold its requests back until its
//! other streams' responses are in, so that they go out together
//! ([`WriteOut::Held`]); the outbox keeps it queued and owns the one timer
//! that brings the worker back when the first hold runs out.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::rc::{Rc, Weak};
use std::task::Context;
use std::time::Instant;
use tokio::time::Sleep;

/// What writing a queued connection out did.
#[derive(Debug, PartialEq, Eq)]
pub enum WriteOut {
    /// Everything queued went out (or the connection is gone): it leaves
    /// the outbox.
    Done,
    /// The socket is full: it stays queued, and `cx` is woken when the
    /// socket takes more.
    Blocked,
    /// It holds its requests back to send them with its other streams'
    /// (`--coalesce`): it stays queued, until a response it waits for comes
    /// in (`None`) or at the latest at this time.
    Held(Option<Instant>),
}

/// A connection queued in the outbox.
pub trait Pending {
    /// Writes the queued frames out, or holds them (see [`WriteOut`]).
    fn write_out(&self, cx: &mut Context<'_>) -> WriteOut;
}

/// A connection's place in its worker's outbox: the outbox, the
/// connection itself (to enter it), and whether it is in already, so it
/// enters once per flush however often its lanes queue it.
pub struct Seat<C> {
    outbox: Rc<Outbox>,
    this: Weak<C>,
    queued: Cell<bool>,
}

impl<C: Pending + 'static> Seat<C> {
    /// The seat of the connection `this` will point to (made inside
    /// `Rc::new_cyclic`).
    pub fn new(outbox: Rc<Outbox>, this: Weak<C>) -> Seat<C> {
        Seat {
            outbox,
            this,
            queued: Cell::new(false),
        }
    }

    /// Queues the connection for the worker's next flush, unless it is
    /// queued already.
    pub fn enter(&self) {
        if !self.queued.replace(true)
            && let Some(this) = self.this.upgrade()
        {
            self.outbox.push(this);
        }
    }

    /// The flush wrote the connection out: the next `enter` queues it anew.
    pub fn leave(&self) {
        self.queued.set(false);
    }
}

/// A worker's connections with frames waiting to be written.
#[derive(Default)]
pub struct Outbox {
    dirty: RefCell<Vec<Rc<dyn Pending>>>,
    /// The previous flush's list, kept for its allocation.
    spare: RefCell<Vec<Rc<dyn Pending>>>,
    /// With `--coalesce`: the timer set to the earliest end of a hold.
    linger: Option<RefCell<Pin<Box<Sleep>>>>,
}

impl Outbox {
    /// The outbox of a worker whose connections hold requests back to send
    /// them together (`--coalesce`).
    pub fn coalescing() -> Outbox {
        let now = tokio::time::Instant::now();
        Outbox {
            linger: Some(RefCell::new(Box::pin(tokio::time::sleep_until(now)))),
            ..Outbox::default()
        }
    }

    /// Whether its connections hold requests back (`--coalesce`).
    pub fn coalesces(&self) -> bool {
        self.linger.is_some()
    }

    /// Queues a connection (once: the connection remembers that it is in).
    pub(crate) fn push(&self, conn: Rc<dyn Pending>) {
        self.dirty.borrow_mut().push(conn);
    }

    /// Drops every queued connection unwritten (when no flush will come).
    pub(super) fn forget(&self) {
        self.dirty.borrow_mut().clear();
    }

    /// Writes every waiting connection's frames; a connection whose socket
    /// is full stays queued and `cx` is woken when it can take more, one
    /// that holds its requests back stays queued and `cx` is woken when its
    /// hold ends (if no lane's wake-up brings the worker back first). The
    /// timer is armed only for a hold with no response to wait for: a
    /// timer moved for every round cost 2.5 us of CPU per request over h2c
    /// at 10 x 10, a quarter of the whole.
    pub fn flush(&self, cx: &mut Context<'_>) {
        let mut conns = std::mem::take(&mut *self.spare.borrow_mut());
        std::mem::swap(&mut conns, &mut *self.dirty.borrow_mut());
        let mut first_end: Option<Instant> = None;
        for conn in conns.drain(..) {
            match conn.write_out(cx) {
                WriteOut::Done => {}
                WriteOut::Blocked => self.dirty.borrow_mut().push(conn),
                WriteOut::Held(until) => {
                    if let Some(until) = until {
                        first_end = Some(first_end.map_or(until, |end| end.min(until)));
                    }
                    self.dirty.borrow_mut().push(conn);
                }
            }
        }
        *self.spare.borrow_mut() = conns;
        if let (Some(end), Some(linger)) = (first_end, &self.linger) {
            let mut linger = linger.borrow_mut();
            let end = tokio::time::Instant::from_std(end);
            if linger.deadline() != end {
                linger.as_mut().reset(end);
            }
            // Registers the wake-up; the hold ends later than now, so the
            // timer is not due yet.
            let _ = linger.as_mut().poll(cx);
        }
    }
}
