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
        self.take_at(None)
    }

    /// [`Self::take`], with the clock already read at `now` when given.
    #[inline]
    fn take_at(&self, now: Option<Instant>) -> Option<Instant> {
        let left = self.remaining.get();
        if left == 0 {
            return None;
        }
        let now = now.unwrap_or_else(Instant::now);
        if self.deadline.is_some_and(|d| now >= d) {
            return None;
        }
        self.remaining.set(left - 1);
        Some(now)
    }

    /// Whether the phase is over at `now` (count spent or deadline passed).
    pub fn expired(&self, now: Instant) -> bool {
        self.remaining.get() == 0 || self.deadline.is_some_and(|d| now >= d)
    }

    /// Takes up to `max` requests at once (a pipelined round); returns the
    /// send time and how many were granted.
    #[inline]
    pub fn take_batch(&self, max: u32) -> Option<(Instant, u32)> {
        self.take_batch_at(max, None)
    }

    /// [`Self::take_batch`], with the clock already read at `now` when
    /// given: a connection that has just read a response sends its next
    /// request at once, so the instant it read it at is the send time too.
    #[inline]
    pub fn take_batch_at(&self, max: u32, now: Option<Instant>) -> Option<(Instant, u32)> {
        let now = self.take_at(now)?;
        let extra = u64::from(max.saturating_sub(1)).min(self.remaining.get());
        self.remaining.set(self.remaining.get() - extra);
        Some((now, 1 + extra as u32))
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
    fn batches_never_exceed_the_count() {
        let budget = Budget::new(Some(10), None);
        let granted: Vec<u32> = std::iter::from_fn(|| budget.take_batch(4).map(|(_, n)| n)).collect();
        assert_eq!(granted, vec![4, 4, 2]);
        let unlimited = Budget::new(None, None);
        assert_eq!(unlimited.take_batch(16).map(|(_, n)| n), Some(16));
        assert_eq!(unlimited.take_batch(1).map(|(_, n)| n), Some(1));
    }

    #[test]
    fn a_given_instant_is_the_send_time() {
        let budget = Budget::new(Some(2), None);
        let read_before = Instant::now() - Duration::from_millis(5);
        assert_eq!(budget.take_batch_at(1, Some(read_before)), Some((read_before, 1)));
        let (now, _) = budget.take_batch_at(1, None).unwrap();
        assert!(now > read_before, "without one the clock is read");
        assert_eq!(
            budget.take_batch_at(1, Some(read_before)),
            None,
            "the count still holds"
        );
        let ended = Budget::new(None, Some(read_before + Duration::from_millis(1)));
        assert_eq!(ended.take_batch_at(1, Some(read_before)), Some((read_before, 1)));
        assert_eq!(
            ended.take_batch_at(1, None),
            None,
            "the deadline is checked at the instant"
        );
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
