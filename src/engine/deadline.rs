//! A request loop's one timer, and the deadline of each request on it.
//!
//! Every protocol bounds its requests the same way, so this sits below
//! them all: a [`LoopTimer`] is kept for the loop's whole life, and each
//! request borrows it as a [`Timer`] set to that request's deadline.

use crate::sample::{ErrorDetail, ErrorKind, RequestError};
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;
use tokio::time::{Instant, Sleep};

/// The request timeout of one loop: one timer for all its requests. Each
/// request moves its deadline later, which in tokio's timer wheel is only
/// a number changed (the entry is moved when the old deadline comes up); a
/// timer per request was put into the wheel and taken out again every
/// time.
pub struct LoopTimer {
    sleep: Pin<Box<Sleep>>,
    /// Where `sleep` is set. The fast paths set the timer only once its
    /// deadline has passed (the timer never fires before it, so until then
    /// it is known to be armed, and no later than the request's own
    /// deadline), and keep this copy so that a request need not touch the
    /// timer at all: at thousands of connections the timer is one more
    /// cold cache line, and moving it in tokio's wheel per request cost
    /// more than anything else left in the fast path.
    armed_until: Instant,
    /// Whether the timer has been polled by this loop's task since it was
    /// last set, so it wakes the loop when it fires (the fast paths).
    registered: bool,
}

impl LoopTimer {
    pub fn new() -> LoopTimer {
        let now = Instant::now();
        LoopTimer {
            // Set to each request's deadline before it is waited on.
            sleep: Box::pin(tokio::time::sleep_until(now)),
            armed_until: now,
            registered: false,
        }
    }

    /// The timer for a request due by `deadline`, failing with a timeout
    /// that names `timeout`. It is set again only when it has fired or is
    /// set later than `deadline`: otherwise it fires no later than
    /// `deadline` and is moved on to it then (see [`poll_lazy_timer`]), so
    /// most requests leave tokio's timer wheel alone.
    pub fn for_request(&mut self, deadline: Instant, timeout: Duration) -> Timer<'_> {
        if deadline < self.armed_until || self.sleep.is_elapsed() {
            self.set(deadline);
        }
        Timer {
            // Armed, not fired and polled by this loop's task, which it
            // will wake: the request's first wait need not look at it.
            quiet: self.registered,
            sleep: self.sleep.as_mut(),
            armed_until: &mut self.armed_until,
            registered: &mut self.registered,
            deadline,
            timeout,
        }
    }

    /// For a fast path's request sent at `now`: until `armed_until` the
    /// timer is armed, for an earlier request's deadline, and when it fires
    /// [`Self::poll_expired`] moves it on to this one's. Past it, it is set
    /// again now.
    pub fn arm_lazily(&mut self, now: Instant, deadline: Instant) {
        if now >= self.armed_until {
            self.set(deadline);
        }
    }

    /// Sets the timer to `deadline`, noting that no task has polled it
    /// since.
    fn set(&mut self, deadline: Instant) {
        self.sleep.as_mut().reset(deadline);
        self.armed_until = deadline;
        self.registered = false;
    }

    /// A new task polls the loop (a new phase, or after a yield): the
    /// timer must be polled once by it to wake it.
    pub fn resume(&mut self) {
        self.registered = false;
    }

    /// For a fast path's request not yet answered: the timeout's error
    /// once `deadline` has passed.
    ///
    /// `waited` says whether this request has waited before: the first
    /// time, right after it was sent, a timer this task registered is known
    /// to be armed and is left alone; after that, something woke the loop,
    /// perhaps the timer, and it is looked at.
    pub fn poll_expired(
        &mut self,
        cx: &mut Context<'_>,
        deadline: Instant,
        timeout: Duration,
        waited: &mut bool,
    ) -> Poll<RequestError> {
        let first = !*waited;
        *waited = true;
        if first && self.registered {
            return Poll::Pending;
        }
        ready!(poll_lazy_timer(
            self.sleep.as_mut(),
            &mut self.armed_until,
            &mut self.registered,
            deadline,
            cx
        ));
        Poll::Ready(timed_out(timeout))
    }
}

/// Polls a timer set to `*armed_until`, at or before `deadline`: `Ready`
/// once `deadline` has passed. A timer that fired for an earlier deadline
/// is set to this one and polled again, to wake the task then. Either way
/// this task has now polled it (`registered`).
fn poll_lazy_timer(
    mut timer: Pin<&mut Sleep>,
    armed_until: &mut Instant,
    registered: &mut bool,
    deadline: Instant,
    cx: &mut Context<'_>,
) -> Poll<()> {
    *registered = true;
    loop {
        ready!(timer.as_mut().poll(cx));
        if *armed_until >= deadline || Instant::now() >= deadline {
            return Poll::Ready(());
        }
        timer.as_mut().reset(deadline);
        *armed_until = deadline;
    }
}

/// A loop's timer set to one request's deadline (the request timeout, from
/// the actual send), for each step of the request to be bounded by.
pub struct Timer<'t> {
    /// Set to `*armed_until`, at or before `deadline`.
    sleep: Pin<&'t mut Sleep>,
    armed_until: &'t mut Instant,
    /// Whether this loop's task has polled `sleep` since it was last set.
    registered: &'t mut bool,
    deadline: Instant,
    /// The timer has not fired and will wake this task: the first wait
    /// skips polling it.
    quiet: bool,
    /// The run's request timeout, which the error names.
    timeout: Duration,
}

impl<'t> Timer<'t> {
    /// The outcome of `work`, or a timeout once the deadline has passed.
    pub fn within<T, F: Future<Output = Result<T, RequestError>>>(&mut self, work: F) -> Within<'_, 't, F> {
        Within { work, timer: self }
    }

    /// `Ready` once the deadline has passed; until then, this task is
    /// woken when it does.
    fn poll_expired(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        if std::mem::take(&mut self.quiet) {
            return Poll::Pending;
        }
        poll_lazy_timer(
            self.sleep.as_mut(),
            self.armed_until,
            self.registered,
            self.deadline,
            cx,
        )
    }
}

pin_project_lite::pin_project! {
    /// [`Timer::within`]'s future. A struct rather than an `async fn`: an
    /// `async fn` would move `work` into a state machine of its own, a copy
    /// per request that measured as 2.5% of a run's CPU in `memmove`.
    pub struct Within<'a, 't, F> {
        #[pin]
        work: F,
        timer: &'a mut Timer<'t>,
    }
}

impl<T, F: Future<Output = Result<T, RequestError>>> Future for Within<'_, '_, F> {
    type Output = Result<T, RequestError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        // The work first, as tokio's own timeout does: a response that is
        // in counts even when the deadline has just passed.
        if let Poll::Ready(done) = this.work.poll(cx) {
            return Poll::Ready(done);
        }
        match this.timer.poll_expired(cx) {
            Poll::Ready(()) => Poll::Ready(Err(timed_out(this.timer.timeout))),
            Poll::Pending => Poll::Pending,
        }
    }
}

/// What a request that ran out of `timeout` failed with.
fn timed_out(timeout: Duration) -> RequestError {
    RequestError::new(ErrorKind::Timeout, ErrorDetail::Timeout(timeout))
}
