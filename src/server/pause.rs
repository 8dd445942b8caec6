//! The server-wide pause behind `/pause/{ms}`: until it ends, no response
//! of any connection is written.
//!
//! Every write of a response checks it first, so the check must cost next to
//! nothing while no pause is set: the end is one atomic, in nanoseconds after
//! a fixed epoch, with 0 meaning "none". A new pause only ever moves the end
//! later, so a waiter needs no wake-up call: it sleeps until the end it read
//! and looks again, which also covers an extension made while it slept.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use tokio::time::Instant;

#[derive(Debug)]
pub(super) struct Pause {
    epoch: Instant,
    /// When the pause ends, in nanoseconds after `epoch`; 0 when none is set.
    /// Relaxed is enough: it orders nothing else, and a write that checks a
    /// moment before a pause is set simply goes out before it.
    until: AtomicU64,
}

impl Default for Pause {
    fn default() -> Self {
        Self {
            epoch: Instant::now(),
            until: AtomicU64::new(0),
        }
    }
}

impl Pause {
    /// Pauses until `end`, unless a pause in force already ends later.
    pub(super) fn extend(&self, end: Instant) {
        // 0 means "no pause", so 1 ns is the earliest end that can be set.
        let nanos = self.nanos_since_epoch(end).max(1);
        self.until.fetch_max(nanos, Relaxed);
    }

    /// When the pause in force at `now` ends, if one is. A pause found
    /// over is cleared, so that later checks are again a single load.
    pub(super) fn end_after(&self, now: Instant) -> Option<Instant> {
        let until = self.until.load(Relaxed);
        if until == 0 {
            return None;
        }
        match self.epoch.checked_add(Duration::from_nanos(until)) {
            Some(end) if end > now => Some(end),
            // An end past what `Instant` can hold cannot have been set from
            // a capped `/pause`; it is dropped rather than trusted.
            _ => {
                // Fails, harmlessly, if a new pause was set meanwhile.
                let _ = self.until.compare_exchange(until, 0, Relaxed, Relaxed);
                None
            }
        }
    }

    /// Returns at once when no pause is in force; otherwise when it, and
    /// any extension made meanwhile, has ended.
    pub(super) async fn hold(&self) {
        // The hot path: one load, no clock read.
        if self.until.load(Relaxed) == 0 {
            return;
        }
        while let Some(end) = self.end_after(Instant::now()) {
            tokio::time::sleep_until(end).await;
        }
    }

    fn nanos_since_epoch(&self, t: Instant) -> u64 {
        u64::try_from(t.saturating_duration_since(self.epoch).as_nanos()).unwrap_or(u64::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn no_pause_until_one_is_set() {
        let pause = Pause::default();
        assert_eq!(pause.end_after(Instant::now()), None);
    }

    #[test]
    fn a_pause_lasts_until_its_end_and_is_then_cleared() {
        let pause = Pause::default();
        let now = Instant::now();
        pause.extend(now + 100 * MS);
        let end = pause.end_after(now).expect("paused");
        // Stored in whole nanoseconds from the epoch: exact.
        assert_eq!(end, now + 100 * MS);
        assert_eq!(pause.end_after(now + 99 * MS), Some(end));
        assert_eq!(pause.end_after(now + 100 * MS), None);
        assert_eq!(pause.until.load(Relaxed), 0, "cleared once over");
        assert_eq!(pause.end_after(now), None);
    }

    #[test]
    fn a_second_pause_extends_to_the_later_end() {
        let pause = Pause::default();
        let now = Instant::now();
        pause.extend(now + 100 * MS);
        pause.extend(now + 50 * MS);
        assert_eq!(pause.end_after(now), Some(now + 100 * MS));
        pause.extend(now + 300 * MS);
        assert_eq!(pause.end_after(now), Some(now + 300 * MS));
    }

    #[test]
    fn a_pause_ending_at_the_epoch_is_still_a_valid_setting() {
        let pause = Pause::default();
        pause.extend(pause.epoch);
        assert_eq!(
            pause.end_after(pause.epoch),
            Some(pause.epoch + Duration::from_nanos(1))
        );
        assert_eq!(pause.end_after(pause.epoch + MS), None);
    }

    #[tokio::test]
    async fn hold_waits_for_the_end_including_extensions() {
        let pause = Pause::default();
        let start = Instant::now();
        pause.hold().await;
        assert!(start.elapsed() < 20 * MS, "no pause, no wait");

        pause.extend(start + 30 * MS);
        let extend = async {
            tokio::time::sleep(10 * MS).await;
            pause.extend(start + 60 * MS);
        };
        tokio::join!(pause.hold(), extend);
        assert!(start.elapsed() >= 60 * MS, "{:?}", start.elapsed());
        assert_eq!(pause.until.load(Relaxed), 0);
    }
}
