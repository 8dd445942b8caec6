//! Sub-millisecond sleeps for the pacer.
//!
//! tokio's timer wheel has a 1 ms granularity and rounds deadlines up, so a
//! schedule paced with it is late by up to a millisecond on every request
//! (the same error wrk2 admits). On Linux a `timerfd` armed with an absolute
//! CLOCK_MONOTONIC deadline wakes the runtime through epoll with microsecond
//! accuracy; elsewhere this falls back to tokio's sleep.

use std::time::Instant;

#[cfg(target_os = "linux")]
mod imp {
    use std::io;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::time::{Duration, Instant};
    use tokio::io::unix::AsyncFd;

    pub struct PreciseTimer {
        fd: AsyncFd<OwnedFd>,
        /// An instant and the CLOCK_MONOTONIC reading taken with it: `Instant`
        /// is that clock on Linux but keeps its reading private.
        origin: Instant,
        origin_clock: Duration,
    }

    fn monotonic_now() -> Duration {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: writes into the timespec we pass.
        unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
        Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
    }

    impl PreciseTimer {
        pub fn new() -> io::Result<PreciseTimer> {
            // SAFETY: plain syscall; the descriptor is owned right away.
            let raw = unsafe {
                libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_NONBLOCK | libc::TFD_CLOEXEC)
            };
            if raw < 0 {
                return Err(io::Error::last_os_error());
            }
            // SAFETY: `raw` is a fresh descriptor nobody else owns.
            let fd = unsafe { OwnedFd::from_raw_fd(raw) };
            let origin = Instant::now();
            let origin_clock = monotonic_now();
            // SAFETY: the `OwnedFd` keeps the descriptor open, unchanged, for
            // as long as the `AsyncFd` that owns it.
            let fd = unsafe { AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE) }?;
            Ok(PreciseTimer {
                fd,
                origin,
                origin_clock,
            })
        }

        pub async fn sleep_until(&self, at: Instant) -> io::Result<()> {
            if at <= Instant::now() {
                return Ok(());
            }
            let due = self.origin_clock + at.saturating_duration_since(self.origin);
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
            let fd = self.fd.get_ref().as_raw_fd();
            // SAFETY: arms our own timerfd with a valid itimerspec.
            if unsafe { libc::timerfd_settime(fd, libc::TFD_TIMER_ABSTIME, &spec, std::ptr::null_mut()) } != 0
            {
                return Err(io::Error::last_os_error());
            }
            loop {
                let mut guard = self.fd.readable().await?;
                let mut expirations = 0u64;
                // SAFETY: reads the 8-byte expiration count into a u64.
                let n = unsafe { libc::read(fd, (&mut expirations as *mut u64).cast(), 8) };
                if n == 8 {
                    return Ok(());
                }
                // Not yet expired (a stale readiness): wait for the next edge.
                guard.clear_ready();
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
        pub fn new() -> io::Result<PreciseTimer> {
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
    use std::time::Duration;

    #[test]
    fn wakes_within_a_fraction_of_a_millisecond() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let lateness: Vec<Duration> = rt.block_on(async {
            let timer = PreciseTimer::new().unwrap();
            let mut late = Vec::new();
            for i in 1..=50u32 {
                let at = Instant::now() + Duration::from_micros(300 + 37 * u64::from(i));
                timer.sleep_until(at).await.unwrap();
                let now = Instant::now();
                assert!(now >= at, "woke early");
                late.push(now - at);
            }
            late
        });
        let mut sorted = lateness.clone();
        sorted.sort();
        // The median wake-up is far better than tokio's 1 ms rounding.
        assert!(
            sorted[25] < Duration::from_micros(400),
            "median lateness {:?}",
            sorted[25]
        );
    }
}
