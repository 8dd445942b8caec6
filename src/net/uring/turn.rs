//! The waker a ring worker's phase is polled with, so that the wake-ups a
//! turn gives itself stay inside the turn.
//!
//! A turn of [`super::Ring::run`] reaps completions and then polls the
//! worker's loops; the completions wake those loops, and through them the
//! worker's task. Passed straight to tokio, every such wake said "poll
//! again" to a task that was being polled anyway: tokio then went round its
//! reactor once more with nothing to find (a non-blocking `epoll_wait`, its
//! timer wheel, two clock readings for its metrics) before the task slept.
//! Here a wake during a turn only asks the turn for another pass; a wake
//! from anywhere else (tokio's timers, another thread) wakes the task.

use futures_util::task::AtomicWaker;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Wake, Waker};

/// Where a turn's wakes go: to the turn while one runs, else to the task.
#[derive(Default)]
pub struct TurnWaker {
    in_turn: AtomicBool,
    again: AtomicBool,
    task: AtomicWaker,
}

impl TurnWaker {
    /// The waker to poll the phase with.
    pub fn new() -> (Arc<TurnWaker>, Waker) {
        let turn = Arc::new(TurnWaker::default());
        let waker = Waker::from(turn.clone());
        (turn, waker)
    }

    /// A turn begins, for the task `cx` polls.
    pub fn begin(&self, cx: &Context<'_>) {
        self.task.register(cx.waker());
        self.in_turn.store(true, Ordering::SeqCst);
    }

    /// Whether the turn woke something so far.
    pub fn woken(&self) -> bool {
        self.again.load(Ordering::SeqCst)
    }

    /// The turn is over: whether it woke something, which wants another
    /// pass before the task sleeps.
    pub fn end(&self) -> bool {
        self.in_turn.store(false, Ordering::SeqCst);
        self.again.swap(false, Ordering::SeqCst)
    }
}

impl Wake for TurnWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if self.in_turn.load(Ordering::SeqCst) {
            self.again.store(true, Ordering::SeqCst);
            // The turn may have ended in between without seeing it.
            if self.in_turn.load(Ordering::SeqCst) {
                return;
            }
        }
        self.task.wake();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wake::CountingWaker;

    #[test]
    fn a_wake_in_a_turn_asks_for_another_pass_and_one_outside_wakes_the_task() {
        let task = Arc::new(CountingWaker::default());
        let task_waker = Waker::from(task.clone());
        let cx = Context::from_waker(&task_waker);
        let (turn, waker) = TurnWaker::new();

        turn.begin(&cx);
        waker.wake_by_ref();
        assert!(turn.end(), "the turn's own wake was lost");
        assert_eq!(task.wakes(), 0, "the task was woken from its own turn");

        turn.begin(&cx);
        assert!(!turn.end(), "a quiet turn asked for another pass");

        // Between turns: the task.
        waker.wake_by_ref();
        assert_eq!(task.wakes(), 1);
        // Once taken, the task's waker is registered again by the next turn;
        // a wake by value reaches it too.
        turn.begin(&cx);
        assert!(!turn.end());
        let owned = waker.clone();
        owned.wake();
        assert_eq!(task.wakes(), 2);
    }
}
