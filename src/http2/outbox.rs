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
//! ([`WriteOut::Held`], decided by its [`Rounds`]); the outbox keeps it
//! queued and owns the one timer that brings the worker back when the
//! first hold runs out.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::rc::{Rc, Weak};
use std::task::Context;
use std::time::{Duration, Instant};
use tokio::time::Sleep;

/// The shortest bound on how long a connection holds its requests back
/// for its other streams' responses (`--coalesce`); tokio's timers have
/// millisecond steps, so a shorter one would not be kept anyway.
const MIN_LINGER: Duration = Duration::from_millis(1);

/// Where a connection's lanes stand, for [`Rounds::hold`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// Lanes whose request waits to go out.
    pub unsent: usize,
    /// All of the connection's lanes.
    pub lanes: usize,
    /// A request that went out still waits for its response.
    pub awaiting: bool,
}

impl Tally {
    /// Adds up lanes given as (has a stream, that stream still waits for
    /// its response, when its request went out).
    pub fn of(lanes: impl Iterator<Item = (bool, bool, Option<Instant>)>) -> Tally {
        let mut tally = Tally::default();
        for (stream, open, sent_at) in lanes {
            tally.lanes += 1;
            if stream && sent_at.is_none() {
                tally.unsent += 1;
            }
            tally.awaiting |= open && sent_at.is_some();
        }
        tally
    }
}

/// One connection's `--coalesce`: whether its queued requests wait for
/// its other lanes' (HTTP/2's and HTTP/3's alike).
///
/// They wait until every lane of the connection has its next request
/// queued, so that its streams go out in rounds, one write each: a round
/// waits for all of the last one's responses (`Held(None)`: a response, or
/// a request timeout, ends the wait). A lane that paused or stopped is
/// waited for at most as long as the last round took from its write to
/// the hold (and at least a millisecond, `MIN_LINGER`).
#[derive(Debug, Default)]
pub struct Rounds {
    on: bool,
    /// When the requests waiting now were first held back.
    held_since: Option<Instant>,
    /// When the last write of held requests began.
    last_write: Option<Instant>,
}

impl Rounds {
    pub fn new(on: bool) -> Rounds {
        Rounds {
            on,
            ..Rounds::default()
        }
    }

    /// Whether the connection coalesces at all (stamps its writes).
    pub fn on(&self) -> bool {
        self.on
    }

    /// Whether the queued requests wait, and until when; `None` to write
    /// now. `urgent`: something the server may be waiting for is queued
    /// (an acknowledgement, a window update), so nothing is held.
    pub fn hold(&mut self, tally: Tally, urgent: bool) -> Option<Option<Instant>> {
        if !self.on || urgent || tally.unsent == 0 || tally.unsent == tally.lanes {
            self.held_since = None;
            return None;
        }
        let now = Instant::now();
        let since = *self.held_since.get_or_insert(now);
        if tally.awaiting {
            return Some(None);
        }
        let round = self
            .last_write
            .map_or(MIN_LINGER, |at| since.saturating_duration_since(at));
        let until = since + round.max(MIN_LINGER);
        (now < until).then_some(Some(until))
    }

    /// A write begins `now`: stamps it on each request in it (the
    /// `sent_at` of every lane with a stream, still `None` for those not
    /// yet sent), so that their latency counts from it rather than from
    /// when their lanes queued them. A write with no request in it (only
    /// acknowledgements) is no round.
    pub fn wrote<'a>(&mut self, streams: impl Iterator<Item = &'a mut Option<Instant>>, now: Instant) {
        let mut any = false;
        for sent_at in streams.filter(|sent_at| sent_at.is_none()) {
            *sent_at = Some(now);
            any = true;
        }
        if any {
            self.held_since = None;
            self.last_write = Some(now);
        }
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    fn tally(unsent: usize, awaiting: bool) -> Tally {
        Tally {
            unsent,
            lanes: 4,
            awaiting,
        }
    }

    #[test]
    fn a_round_waits_for_its_responses_and_a_stopped_lane_for_a_rounds_time() {
        let mut off = Rounds::new(false);
        assert_eq!(
            off.hold(tally(1, true), false),
            None,
            "without --coalesce nothing waits"
        );
        let mut rounds = Rounds::new(true);
        assert_eq!(rounds.hold(tally(0, true), false), None, "nothing queued");
        assert_eq!(rounds.hold(tally(4, false), false), None, "every lane queued");
        assert_eq!(
            rounds.hold(tally(2, true), true),
            None,
            "an acknowledgement is due"
        );
        // Responses still to come: held until one arrives, with no timer.
        assert_eq!(rounds.hold(tally(2, true), false), Some(None));
        // None to come (lanes paused or stopped): held for a round's time,
        // at least MIN_LINGER, from the start of the hold.
        let last_write = Instant::now() - Duration::from_millis(50);
        let mut sent = [None, Some(last_write)];
        rounds.wrote(sent.iter_mut(), last_write);
        assert_eq!(sent, [Some(last_write); 2], "the unsent request is stamped");
        let before = Instant::now();
        let Some(Some(until)) = rounds.hold(tally(2, false), false) else {
            panic!("a stopped lane is waited for");
        };
        let after = Instant::now();
        assert!(
            until >= before + (before - last_write),
            "as long again as the round"
        );
        assert!(until <= after + (after - last_write));
        // Right after a write: MIN_LINGER.
        let mut fresh = Rounds::new(true);
        let before = Instant::now();
        fresh.wrote([None].iter_mut(), before);
        let Some(Some(until)) = fresh.hold(tally(1, false), false) else {
            panic!("a stopped lane is waited for");
        };
        assert!(until >= before + MIN_LINGER && until <= Instant::now() + MIN_LINGER);
    }
}
