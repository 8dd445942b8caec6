//! Stop conditions of a phase: a request count, a deadline, or both.
//!
//! A worker's connections share one budget through a `Cell`: they all run on
//! the worker's thread, so "exactly N requests" holds with no atomics.

use std::cell::Cell;
use std::time::{Duration, Instant};

/// How long a phase lasts, for one worker.
#[derive(Clone, Copy, Debug, Default)]
pub struct Limit {
    pub requests: Option<u64>,
    pub duration: Option<Duration>,
}

/// Hands out permission to send, one request at a time.
pub struct Budget {
    remaining: Cell<u64>,
    deadline: Option<Instant>,
}

impl Budget {
    pub fn new(requests: Option<u64>, deadline: Option<Instant>) -> Budget {
        Budget {
            remaining: Cell::new(requests.unwrap_or(u64::MAX)),
            deadline,
        }
    }

    /// Takes one request from the budget; returns the send time, or `None`
    /// when the phase is over. The instant doubles as the latency start, so
    /// the clock is read once.
    #[inline]
    pub fn take(&self) -> Option<Instant> {
        let left = self.remaining.get();
        if left == 0 {
            return None;
        }
        let now = Instant::now();
        if self.deadline.is_some_and(|d| now >= d) {
            return None;
        }
        self.remaining.set(left - 1);
        Some(now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn count_is_exact() {
        let budget = Budget::new(Some(3), None);
        assert_eq!((0..10).filter(|_| budget.take().is_some()).count(), 3);
    }

    #[test]
    fn deadline_stops() {
        let past = Instant::now();
        let budget = Budget::new(None, Some(past));
        assert!(budget.take().is_none());
        let budget = Budget::new(Some(1), Some(Instant::now() + Duration::from_secs(60)));
        assert!(budget.take().is_some());
        assert!(budget.take().is_none(), "whichever comes first");
    }
}
