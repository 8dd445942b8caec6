//! Where a connection's next request comes from.
//!
//! Closed model: as soon as the previous response is back, within the
//! budget, and (with `--stages`) only while the ramp allows this many
//! connections. Open model: a pacer issues tickets on a fixed schedule;
//! a free connection takes the oldest one, and a ticket that finds every
//! connection busy waits for one, its wait counted in its latency (dropping
//! it would hide the very stall being measured).

use super::budget::Budget;
use super::timer::{PreciseTimer, sleep_precisely};
use crate::net::uring::Ring;
use crate::recorder::Recorder;
use crate::shape::LoadProfile;
use crate::wake::keep_waker;
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};

/// A connection loop yields to the runtime after this many requests, so
/// one that never waits (a refused connect on loopback fails at once) cannot
/// starve the interval ticker, the deadline or the stop flag.
pub const YIELD_EVERY: u32 = 32;

/// The open model's pacer yields to the runtime after this many tickets in
/// a row that were due when it came to them. Only a schedule far beyond
/// the worker's reach gets there (1,024 tickets are 25 ms of a 40,000 req/s
/// worker's schedule); a pacer catching up after a short stall still issues
/// its late tickets at once, as giving its turn away would make them later.
const PACER_YIELDS_AFTER: u32 = 1024;

/// Permission to send.
#[derive(Clone, Copy, Debug)]
pub struct Ticket {
    /// When the request should go out; latency is measured from here.
    pub intended: Instant,
    /// Requests in this round (pipelining; 1 in the open model).
    pub count: u32,
    /// Open model: the ticket was already waiting when the connection asked,
    /// so any delay was spent waiting for a free connection.
    pub queued: bool,
}

/// Closed model: a budget, and optionally a ramp of connections.
pub struct ClosedFeed {
    pub budget: Budget,
    pub pipeline: u32,
    /// With `--stages`: this worker's share of the connection ramp.
    pub ramp: Option<(LoadProfile, Instant)>,
}

/// Open model: tickets on a schedule.
pub struct OpenFeed {
    /// This worker's share of the rate.
    schedule: LoadProfile,
    /// Offsets this worker's tickets so all workers together stay evenly
    /// spaced (worker w of W sends at counts k + w/W).
    phase: f64,
    start: Instant,
    limit: u64,
    deadline: Option<Instant>,
    issued: Cell<u64>,
    taken: Cell<u64>,
    finished: Cell<bool>,
    /// The phase's deadline has passed: tickets issued but not yet taken
    /// are left unsent.
    closed: Cell<bool>,
    /// Connections waiting for a ticket.
    idle: RefCell<VecDeque<Waker>>,
    /// Connections this worker may still add (`--max-connections`).
    may_add: Cell<usize>,
    /// Connections the pacer asked for, and who to wake to add them.
    add_requests: Cell<usize>,
    driver: RefCell<Option<Waker>>,
    timer: Option<PreciseTimer>,
}

/// The feed of one phase of one worker.
pub enum Feed {
    Closed(ClosedFeed),
    Open(OpenFeed),
}

impl Feed {
    /// The next permission to send for connection `index`, or `None` when
    /// the phase is over. `answered_at`: when the connection read the
    /// answer it sends this request after, if it did just now (the closed
    /// model's send time, with no second read of the clock).
    pub async fn next(&self, index: usize, answered_at: Option<Instant>) -> Option<Ticket> {
        match self {
            Feed::Closed(feed) => feed.next(index, answered_at).await,
            Feed::Open(feed) => feed.next().await,
        }
    }

    /// Whether the pacer asked for one more connection; registers `waker`
    /// to hear of later requests.
    pub fn take_add_request(&self, waker: &Waker) -> bool {
        match self {
            Feed::Closed(_) => false,
            Feed::Open(feed) => feed.take_add_request(waker),
        }
    }

    /// Runs the pacer (open model); returns at once for the closed model.
    pub async fn pace(&self, recorder: &RefCell<Recorder>) {
        if let Feed::Open(feed) = self {
            feed.pace(recorder).await;
        }
    }
}

impl ClosedFeed {
    async fn next(&self, index: usize, answered_at: Option<Instant>) -> Option<Ticket> {
        if let Some((ramp, start)) = &self.ramp {
            loop {
                let now = Instant::now();
                let elapsed = (now - *start).as_secs_f64();
                // A small epsilon so a ramp to N lets exactly N connections in.
                let allowed = (ramp.value_at(elapsed) + 1e-9).floor() as usize;
                if index < allowed {
                    break;
                }
                if self.budget.expired(now) {
                    return None;
                }
                // Sleep until the ramp lets this connection in; if it never
                // will again, this connection is done. (The phase's deadline
                // and Ctrl-C cancel the sleep with the whole drive.)
                let at = ramp.time_value_reaches(index as f64 + 1.0 - 1e-9, elapsed)?;
                let wait = Duration::from_secs_f64((at - elapsed).max(0.0));
                // At least a millisecond, so float rounding cannot spin.
                tokio::time::sleep(wait.max(Duration::from_millis(1))).await;
            }
        }
        let (intended, count) = self.budget.take_batch_at(self.pipeline, answered_at)?;
        Some(Ticket {
            intended,
            count,
            queued: false,
        })
    }
}

impl OpenFeed {
    /// `share` of the whole `rate` profile, `phase` in [0, 1); paced on
    /// the worker's `ring` when it has one.
    pub fn new(
        schedule: LoadProfile,
        phase: f64,
        start: Instant,
        limit: Option<u64>,
        deadline: Option<Instant>,
        may_add: usize,
        ring: Option<&Rc<Ring>>,
    ) -> OpenFeed {
        OpenFeed {
            schedule,
            phase,
            start,
            limit: limit.unwrap_or(u64::MAX),
            deadline,
            issued: Cell::new(0),
            taken: Cell::new(0),
            finished: Cell::new(false),
            closed: Cell::new(false),
            idle: RefCell::new(VecDeque::new()),
            may_add: Cell::new(may_add),
            add_requests: Cell::new(0),
            driver: RefCell::new(None),
            // Without a timerfd the pacer falls back to tokio's 1 ms timer.
            timer: PreciseTimer::new(ring).ok(),
        }
    }

    /// When ticket `k` is due, if the schedule reaches it.
    fn intended(&self, k: u64) -> Option<Instant> {
        let secs = self.schedule.time_of_count(k as f64 + self.phase)?;
        let at = self.start + Duration::from_secs_f64(secs);
        match self.deadline {
            Some(deadline) if at >= deadline => None,
            _ => Some(at),
        }
    }

    /// Issues tickets on schedule until the limit, the deadline or the end
    /// of the profile.
    async fn pace(&self, recorder: &RefCell<Recorder>) {
        // Tickets in a row that were already due when the pacer came to
        // them: it never waited for them, so it never gave way either.
        let mut behind = 0;
        loop {
            let k = self.issued.get();
            let Some(due) = (k < self.limit).then(|| self.intended(k)).flatten() else {
                break;
            };
            let now = Instant::now();
            let issued_at = match due <= now {
                // So far behind that the phase is over: its deadline passed
                // while the pacer was still issuing the tickets due before it.
                true if self.deadline.is_some_and(|deadline| now >= deadline) => break,
                true => {
                    behind += 1;
                    now
                }
                false => {
                    behind = 0;
                    sleep_precisely(self.timer.as_ref(), due).await;
                    Instant::now()
                }
            };
            recorder
                .borrow_mut()
                .record_pacer_lag(issued_at.saturating_duration_since(due));
            self.issued.set(k + 1);
            let idle = self.idle.borrow_mut().pop_front();
            match idle {
                Some(connection) => connection.wake(),
                None if self.may_add.get() > 0 => {
                    // Every connection is busy: open another one.
                    self.may_add.set(self.may_add.get() - 1);
                    self.add_requests.set(self.add_requests.get() + 1);
                    if let Some(driver) = self.driver.borrow().as_ref() {
                        driver.wake_by_ref();
                    }
                }
                None => {}
            }
            // A schedule faster than the worker can issue it (a rate in the
            // billions a second) keeps every ticket due at once: without a
            // pause the pacer would run through the whole schedule before
            // the phase's deadline, Ctrl-C or the connections taking its
            // tickets could run, a 1 s run lasting minutes.
            if behind == PACER_YIELDS_AFTER {
                behind = 0;
                tokio::task::yield_now().await;
            }
        }
        self.finished.set(true);
        for connection in self.idle.borrow_mut().drain(..) {
            connection.wake();
        }
        // At the phase's deadline no new request starts, and a backlog the
        // connections could not keep up with is left unsent: the measured
        // phase ends there anyway, and a warm-up at a rate beyond the
        // target's reach would otherwise go on until its whole backlog had
        // been sent. A schedule cut short by its request count is sent
        // whole.
        if let Some(deadline) = self.deadline
            && self.issued.get() < self.limit
        {
            sleep_precisely(self.timer.as_ref(), deadline).await;
            self.closed.set(true);
        }
    }

    async fn next(&self) -> Option<Ticket> {
        let mut waited = false;
        std::future::poll_fn(|cx| {
            let k = self.taken.get();
            if k < self.issued.get() && !self.closed.get() {
                self.taken.set(k + 1);
                let intended = self.intended(k).expect("issued tickets have a time");
                return Poll::Ready(Some(Ticket {
                    intended,
                    count: 1,
                    queued: !waited,
                }));
            }
            if self.finished.get() {
                return Poll::Ready(None);
            }
            waited = true;
            self.idle.borrow_mut().push_back(cx.waker().clone());
            Poll::Pending
        })
        .await
    }

    fn take_add_request(&self, waker: &Waker) -> bool {
        keep_waker(&mut self.driver.borrow_mut(), waker);
        let pending = self.add_requests.get();
        if pending > 0 {
            self.add_requests.set(pending - 1);
        }
        pending > 0
    }
}
