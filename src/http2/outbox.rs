//! The worker's outbox: connections with frames waiting to be written.
//!
//! Lanes never write: they append frames to their connection and queue it
//! here; the worker flushes once every lane it woke has run, so the requests
//! of a whole batch of responses go out in one write. The outbox knows a
//! connection only as something that writes itself out ([`Pending`]), so it
//! sits below [`super::conn`].

use std::cell::{Cell, RefCell};
use std::rc::{Rc, Weak};
use std::task::{Context, Poll};

/// A connection queued in the outbox.
pub trait Pending {
    /// Writes the queued frames out; `Pending` while the socket is full
    /// (`cx` is woken when it can take more), and the connection stays
    /// queued.
    fn write_out(&self, cx: &mut Context<'_>) -> Poll<()>;
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
}

impl Outbox {
    /// Queues a connection (once: the connection remembers that it is in).
    pub(crate) fn push(&self, conn: Rc<dyn Pending>) {
        self.dirty.borrow_mut().push(conn);
    }

    /// Drops every queued connection unwritten (when no flush will come).
    pub(super) fn forget(&self) {
        self.dirty.borrow_mut().clear();
    }

    /// Writes every waiting connection's frames; a connection whose socket
    /// is full stays queued and `cx` is woken when it can take more.
    pub fn flush(&self, cx: &mut Context<'_>) {
        let mut conns = std::mem::take(&mut *self.spare.borrow_mut());
        std::mem::swap(&mut conns, &mut *self.dirty.borrow_mut());
        for conn in conns.drain(..) {
            if conn.write_out(cx).is_pending() {
                self.dirty.borrow_mut().push(conn);
            }
        }
        *self.spare.borrow_mut() = conns;
    }
}
