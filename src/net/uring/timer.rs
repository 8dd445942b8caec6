//! The pacer's sleeps on the worker's ring.
//!
//! On the epoll backend the pacer sleeps on a timerfd: arming it is a
//! `timerfd_settime` and waking from it a `read`, two system calls per
//! request at a steady rate, on top of the turn's own. On a ring the same
//! sleep is an absolute timeout operation: it goes to the kernel in the
//! `io_uring_enter` that submits the turn's sends anyway, and its
//! completion wakes the worker like a response does, so a paced request
//! costs no system call of its own. Same clock (CLOCK_MONOTONIC), same
//! high-resolution timer in the kernel, so the same precision.

use super::{GENERATION_MASK, Inner, Kind, Ring, user_data};
use crate::wake::keep_waker;
use io_uring::{opcode, types};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

/// The slot index the timer's operations carry in their user data: never
/// a socket's (a ring has far fewer).
pub(super) const TIMER_INDEX: usize = u32::MAX as usize;

/// The one sleep a ring keeps for its worker's pacer: a later sleep
/// replaces an earlier one (whose completion is then ignored).
#[derive(Default)]
pub(super) struct TimerSlot {
    /// Which sleep is current; a completion of an older one is ignored.
    generation: u32,
    /// The current sleep's deadline came.
    fired: bool,
    waker: Option<Waker>,
    /// The deadline the kernel reads when the timeout is submitted: it must
    /// stay put until then, so it lives here, not on the caller's stack. A
    /// newer sleep armed in the same turn rewrites it, which only moves the
    /// superseded timeout, whose completion is ignored anyway.
    deadline: Box<types::Timespec>,
}

impl Inner {
    /// Arms a timeout for `clock` (a CLOCK_MONOTONIC reading): the current
    /// sleep from now on, by its generation.
    fn arm_timer(&mut self, clock: Duration) -> u32 {
        let timer = &mut self.timer;
        timer.generation = (timer.generation + 1) & GENERATION_MASK;
        timer.fired = false;
        timer.waker = None;
        *timer.deadline = types::Timespec::new()
            .sec(clock.as_secs())
            .nsec(clock.subsec_nanos());
        let entry = opcode::Timeout::new(&*timer.deadline)
            .flags(types::TimeoutFlags::ABS)
            .build()
            .user_data(user_data(TIMER_INDEX, timer.generation, Kind::Receive));
        self.in_flight += 1;
        self.push(&entry);
        self.timer.generation
    }

    /// A timeout completed (its deadline came, or it was cancelled).
    pub(super) fn timer_completed(&mut self, generation: u32) {
        self.in_flight -= 1;
        let timer = &mut self.timer;
        if generation == timer.generation {
            timer.fired = true;
            if let Some(waker) = timer.waker.take() {
                waker.wake();
            }
        }
    }
}

impl Ring {
    /// Sleeps until CLOCK_MONOTONIC reads `clock`. The timeout goes to the
    /// kernel with the turn's submission, so this must be awaited inside
    /// [`Ring::run`], as everything of the worker's phase is.
    pub fn sleep_until(self: &Rc<Ring>, clock: Duration) -> RingSleep {
        let generation = self.inner.borrow_mut().arm_timer(clock);
        RingSleep {
            ring: self.clone(),
            generation,
        }
    }
}

/// A pending [`Ring::sleep_until`].
pub struct RingSleep {
    ring: Rc<Ring>,
    generation: u32,
}

impl Future for RingSleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut inner = self.ring.inner.borrow_mut();
        let timer = &mut inner.timer;
        // A newer sleep replaced this one: nothing will wake it, so it ends.
        if timer.fired || timer.generation != self.generation {
            return Poll::Ready(());
        }
        keep_waker(&mut timer.waker, cx.waker());
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::on_a_ring;
    use super::*;
    use crate::sys::monotonic_clock;
    use std::time::Instant;

    #[test]
    fn a_newer_sleep_replaces_an_older_one_and_the_ring_still_closes() {
        on_a_ring(1, async |ring| {
            let began = Instant::now();
            ring.run(async {
                let older = ring.sleep_until(monotonic_clock() + Duration::from_secs(30));
                // A turn ends, so the kernel has the 30 s timeout before the
                // next one reuses its deadline's memory.
                tokio::task::yield_now().await;
                ring.sleep_until(monotonic_clock() + Duration::from_millis(5))
                    .await;
                // The older sleep is superseded: it ends at once instead of
                // waiting for a wake-up that will never come.
                older.await;
            })
            .await;
            assert!(
                began.elapsed() < Duration::from_secs(1),
                "took {:?}",
                began.elapsed()
            );
            // The 30 s timeout is still in the kernel: dropping the ring
            // cancels it rather than waiting it out.
            assert_eq!(ring.inner.borrow().in_flight, 1);
            let closing = Instant::now();
            drop(ring);
            assert!(closing.elapsed() < Duration::from_secs(1));
        });
    }
}
