//! Sub-millisecond sleeps for the pacer.
//!
//! tokio's timer wheel has a 1 ms granularity and rounds deadlines up, so a
//! schedule paced with it is late by up to a millisecond on every request
//! (the same error wrk2 admits). On Linux an absolute CLOCK_MONOTONIC
//! deadline wakes the worker with microsecond accuracy: a timeout on the
//! worker's ring when it has one (no system call of its own, see
//! `net::uring`), else a `timerfd` in tokio's epoll; elsewhere this falls
//! back to tokio's sleep.

use std::time::Instant;

#[cfg(target_os = "linux")]
mod imp {
    use crate::net::uring::Ring;
    use crate::sys::monotonic_clock;
    use std::io;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::rc::Rc;
    use std::time::{Duration, Instant};
    use tokio::io::unix::AsyncFd;

    pub struct PreciseTimer {
        sleeper: Sleeper,
        /// An instant and the CLOCK_MONOTONIC reading taken with it: `Instant`
        /// is that clock on Linux but keeps its reading private.
        origin: Instant,
        origin_clock: Duration,
    }

    /// What the deadline is armed on.
    enum Sleeper {
        Ring(Rc<Ring>),
        Fd(AsyncFd<OwnedFd>),
    }

    impl PreciseTimer {
        /// A timer on `ring` when the worker has one, else on a timerfd.
        pub fn new(ring: Option<&Rc<Ring>>) -> io::Result<PreciseTimer> {
            let sleeper = match ring {
                Some(ring) => Sleeper::Ring(ring.clone()),
                None => Sleeper::Fd(timerfd()?),
            };
            Ok(PreciseTimer {
                sleeper,
                origin: Instant::now(),
                origin_clock: monotonic_clock(),
            })
        }

        pub async fn sleep_until(&self, at: Instant) -> io::Result<()> {
            if at <= Instant::now() {
                return Ok(());
            }
            let due = self.origin_clock + at.saturating_duration_since(self.origin);
            match &self.sleeper {
                Sleeper::Ring(ring) => {
                    ring.sleep_until(due).await;
                    Ok(())
                }
                Sleeper::Fd(fd) => sleep_on_timerfd(fd, due).await,
            }
        }
    }

    /// A non-blocking timerfd on CLOCK_MONOTONIC, in tokio's reactor.
    fn timerfd() -> io::Result<AsyncFd<OwnedFd>> {
        // SAFETY: plain syscall; the descriptor is owned right away.
        let raw =
            unsafe { libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_NONBLOCK | libc::TFD_CLOEXEC) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a fresh descriptor nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: the `OwnedFd` keeps the descriptor open, unchanged, for
        // as long as the `AsyncFd` that owns it.
        Ok(unsafe { AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE) }?)
    }

    /// Arms `timer` for `due` (a CLOCK_MONOTONIC reading) and waits for it.
    async fn sleep_on_timerfd(timer: &AsyncFd<OwnedFd>, due: Duration) -> io::Result<()> {
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: due.as_secs() as libc::time_t,
                tv_nsec: due.subsec_nanos() as _,
            },
        };
        let fd = timer.get_ref().as_raw_fd();
        // SAFETY: arms our own timerfd with a valid itimerspec.
        if unsafe { libc::timerfd_settime(fd, libc::TFD_TIMER_ABSTIME, &spec, std::ptr::null_mut()) } != 0 {
            return Err(io::Error::last_os_error());
        }
        loop {
            let mut guard = timer.readable().await?;
            let mut expirations = 0u64;
            // SAFETY: reads the 8-byte expiration count into a u64.
            let n = unsafe { libc::read(fd, (&mut expirations as *mut u64).cast(), 8) };
            // Drained (or not yet expired, from a stale readiness): the
            // next sleep waits for the next edge instead of trying a
            // read that would fail first.
            guard.clear_ready();
            if n == 8 {
                return Ok(());
            }
        }
    }
}

#[cfg(not(target_os = "linux"))]
mod imp {
    use std::io;
    use std::time::Instant;

    pub struct PreciseTimer;

    impl PreciseTimer {
        pub fn new(_ring: Option<&std::rc::Rc<crate::net::uring::Ring>>) -> io::Result<PreciseTimer> {
            Ok(PreciseTimer)
        }

        pub async fn sleep_until(&self, at: Instant) -> io::Result<()> {
            tokio::time::sleep_until(at.into()).await;
            Ok(())
        }
    }
}

pub use imp::PreciseTimer;

/// Sleeps until `at` as precisely as the platform allows.
pub async fn sleep_precisely(timer: Option<&PreciseTimer>, at: Instant) {
    match timer {
        Some(timer) if timer.sleep_until(at).await.is_ok() => {}
        _ => tokio::time::sleep_until(at.into()).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::uring::{Ring, probe};
    use std::time::Duration;

    /// How late each of 50 sleeps of 0.3 to 2.2 ms on `timer` woke; none
    /// may wake early.
    async fn lateness(timer: &PreciseTimer) -> Vec<Duration> {
        let mut late = Vec::new();
        for i in 1..=50u64 {
            let at = Instant::now() + Duration::from_micros(300 + 37 * i);
            timer.sleep_until(at).await.unwrap();
            let now = Instant::now();
            assert!(now >= at, "woke early");
            late.push(now - at);
        }
        late.sort();
        late
    }

    #[test]
    fn wakes_within_a_fraction_of_a_millisecond_on_a_timerfd_and_on_a_ring() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let mut medians = vec![(
            "timerfd",
            rt.block_on(async { lateness(&PreciseTimer::new(None).unwrap()).await[25] }),
        )];
        if probe().is_ok() {
            let on_ring = rt.block_on(async {
                let ring = Ring::new(1).unwrap();
                let timer = PreciseTimer::new(Some(&ring)).unwrap();
                ring.run(lateness(&timer)).await[25]
            });
            medians.push(("ring", on_ring));
        }
        // The median wake-up is far better than tokio's 1 ms rounding.
        for (sleeper, median) in medians {
            assert!(
                median < Duration::from_micros(400),
                "{sleeper}: median lateness {median:?}"
            );
        }
    }
}
