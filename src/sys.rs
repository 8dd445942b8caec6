//! Operating-system facts the run needs: per-thread CPU time (so the tool
//! can tell when it, not the target, was the bottleneck) and the open-files
//! limit (so many connections fail before the run, not during it).

use serde::Serialize;
use std::ops::{AddAssign, Sub};
use std::time::Duration;

/// CPU time spent, split as the kernel accounts it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct CpuTime {
    pub user_s: f64,
    pub sys_s: f64,
}

impl CpuTime {
    pub fn total_s(&self) -> f64 {
        self.user_s + self.sys_s
    }
}

impl AddAssign for CpuTime {
    fn add_assign(&mut self, other: CpuTime) {
        self.user_s += other.user_s;
        self.sys_s += other.sys_s;
    }
}

impl Sub for CpuTime {
    type Output = CpuTime;
    fn sub(self, other: CpuTime) -> CpuTime {
        CpuTime {
            user_s: self.user_s - other.user_s,
            sys_s: self.sys_s - other.sys_s,
        }
    }
}

fn timeval_s(tv: libc::timeval) -> f64 {
    tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6
}

fn rusage(who: libc::c_int) -> CpuTime {
    // SAFETY: getrusage only writes into the zeroed struct we pass.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is a valid, writable rusage for the call's duration.
    if unsafe { libc::getrusage(who, &mut usage) } != 0 {
        return CpuTime::default();
    }
    CpuTime {
        user_s: timeval_s(usage.ru_utime),
        sys_s: timeval_s(usage.ru_stime),
    }
}

/// CPU time of the calling thread only: a worker measures itself, so an
/// embedded target in the same process (`volley demo`) is not counted.
pub fn thread_cpu() -> CpuTime {
    #[cfg(target_os = "linux")]
    {
        rusage(libc::RUSAGE_THREAD)
    }
    #[cfg(not(target_os = "linux"))]
    {
        rusage(libc::RUSAGE_SELF)
    }
}

/// The kernel's CLOCK_MONOTONIC now: what absolute deadlines (a timerfd's,
/// an io_uring timeout's) are read against. `Instant` is that clock on
/// Linux but keeps its reading private.
pub fn monotonic_clock() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: writes into the timespec we pass.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Puts the calling thread in the background: Linux's `SCHED_IDLE`, so it
/// runs only when no ordinary thread wants its core, and a worker that
/// wakes takes the core from it at once. For the threads of a run that are
/// not workers (the collector, the sinks' threads): their per-interval work
/// (merging snapshots, percentiles, the live view, encoding for a receiver)
/// then never delays a worker's schedule, even where they share a core.
/// Best effort: where the policy is refused the thread stays as it was.
///
/// Never call it on a thread that later starts workers: threads inherit
/// the policy, and an unprivileged thread cannot leave `SCHED_IDLE`.
pub fn run_in_background() {
    #[cfg(target_os = "linux")]
    {
        let param = libc::sched_param { sched_priority: 0 };
        // SAFETY: changes only the calling thread's (pid 0) policy; the
        // parameter is a valid sched_param that lives across the call.
        let _ = unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) };
    }
}

/// Where one of volley's own threads that is not a worker runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ThreadPriority {
    /// Beside the workers, as any thread.
    #[default]
    Normal,
    /// Behind them (see [`run_in_background`]): for the open model, whose
    /// schedule a thread taking a worker's core would delay.
    Background,
}

impl ThreadPriority {
    /// For a run of this load model: the open model's threads besides its
    /// workers stay out of the workers' way; in the closed model there is no
    /// schedule to protect, and the live views keep pace with the workers
    /// even where they fill every core.
    pub fn for_model(open_model: bool) -> ThreadPriority {
        if open_model {
            ThreadPriority::Background
        } else {
            ThreadPriority::Normal
        }
    }

    /// Gives the calling thread this priority (a thread starts as
    /// [`ThreadPriority::Normal`]).
    pub fn apply(self) {
        if self == ThreadPriority::Background {
            run_in_background();
        }
    }
}

/// Whether the calling thread runs in the background (see
/// [`run_in_background`]).
pub fn in_background() -> bool {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: reads the calling thread's (pid 0) policy; no memory is passed.
        unsafe { libc::sched_getscheduler(0) == libc::SCHED_IDLE }
    }
    #[cfg(not(target_os = "linux"))]
    {
        false
    }
}

/// CPU time of the whole process.
pub fn process_cpu() -> CpuTime {
    rusage(libc::RUSAGE_SELF)
}

/// Peak resident set size of this process, in bytes.
///
/// Read from `VmHWM` in `/proc/self/status`: the peak of this process's own
/// memory. `getrusage`'s `ru_maxrss` is not that: `execve` folds the peak
/// of the memory it replaces into it, and a process started by
/// `posix_spawn` (a vfork, as Rust's and Python's process APIs use)
/// replaces its parent's, so volley started from a large process (a test
/// harness holding 300 MB) reported that process's peak as its own.
/// `getrusage` stays the fallback where `/proc` is missing.
pub fn peak_rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| vm_hwm_bytes(&status))
        .unwrap_or_else(rusage_peak_rss_bytes)
}

/// The `VmHWM` line of a `/proc/PID/status` text, in bytes.
fn vm_hwm_bytes(status: &str) -> Option<u64> {
    let value = status.lines().find_map(|line| line.strip_prefix("VmHWM:"))?;
    let kilobytes: u64 = value.trim().strip_suffix("kB")?.trim().parse().ok()?;
    Some(kilobytes * 1024)
}

fn rusage_peak_rss_bytes() -> u64 {
    // SAFETY: as above.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is a valid, writable rusage for the call's duration.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return 0;
    }
    // Linux reports kilobytes.
    usage.ru_maxrss.max(0) as u64 * 1024
}

/// Why a run cannot have the open files it needs.
#[derive(Debug, thiserror::Error)]
pub enum OpenFilesError {
    #[error(
        "{needed} open files are needed but the hard limit is {hard}: raise it (ulimit -Hn) or use fewer connections"
    )]
    HardLimit { needed: u64, hard: u64 },
    #[error("{needed} open files are needed but the limit is {soft} and could not be raised")]
    NotRaised {
        needed: u64,
        soft: u64,
        #[source]
        source: std::io::Error,
    },
}

/// Raises the soft open-files limit to fit `needed` descriptors, up to the
/// hard limit. Errors in one line when even the hard limit is too low.
pub fn ensure_open_files(needed: u64) -> Result<(), OpenFilesError> {
    // SAFETY: getrlimit/setrlimit read and write the struct we pass.
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `limit` is a valid, writable rlimit for the call's duration.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return Ok(()); // Nothing we can learn; let the run try.
    }
    if limit.rlim_cur >= needed as libc::rlim_t {
        return Ok(());
    }
    if limit.rlim_max < needed as libc::rlim_t {
        return Err(OpenFilesError::HardLimit {
            needed,
            hard: limit.rlim_max,
        });
    }
    let raised = libc::rlimit {
        rlim_cur: limit.rlim_max,
        rlim_max: limit.rlim_max,
    };
    // SAFETY: `raised` is a valid rlimit; setrlimit only reads it.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } != 0 {
        return Err(OpenFilesError::NotRaised {
            needed,
            soft: limit.rlim_cur,
            source: std::io::Error::last_os_error(),
        });
    }
    Ok(())
}

/// Grows this process's descriptor table now to hold `count` descriptors,
/// instead of while the run adds connections. The kernel grows the table
/// by doubling, and in a process with several threads each growth waits
/// for an RCU grace period (milliseconds) while every other thread that
/// opens a descriptor meanwhile waits with it: a worker adding a
/// connection mid-run sat 6-16 ms in `socket()`, its pacer as late, and
/// the collecting thread opening a `/proc` file at the 512th descriptor
/// waited 355 ms (`perf trace`). The table never shrinks, so one growth
/// here, before the schedule starts, is the only one. Best effort: a
/// table that cannot grow leaves the run as it was.
pub fn reserve_descriptors(count: u64) {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `limit` is a valid, writable rlimit for the call's duration.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return;
    }
    // F_DUPFD refuses a lowest descriptor at or past the soft limit.
    let highest = count.min(limit.rlim_cur.saturating_sub(1));
    let Ok(highest) = libc::c_int::try_from(highest) else {
        return;
    };
    let Ok(null) = std::fs::File::open("/dev/null") else {
        return;
    };
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    // SAFETY: duplicates a descriptor this function owns; the duplicate,
    // if made, is owned below and closed at once.
    let duplicate = unsafe { libc::fcntl(null.as_raw_fd(), libc::F_DUPFD_CLOEXEC, highest) };
    if duplicate >= 0 {
        // SAFETY: `duplicate` is a fresh descriptor nothing else owns.
        drop(unsafe { OwnedFd::from_raw_fd(duplicate) });
    }
}

/// The longest span [`secs`] gives: about 31 years, far past any run,
/// and small enough to add to any `Instant`.
const LONGEST_SECS: f64 = 1e9;

/// Seconds as a `Duration`, never negative and never past
/// about 31 years: what a stream line or report says may be anything
/// (NaN is zero), and `Duration::from_secs_f64` panics out of range.
pub fn secs(d: f64) -> Duration {
    let d = if d.is_nan() { 0.0 } else { d };
    Duration::from_secs_f64(d.clamp(0.0, LONGEST_SECS))
}

#[cfg(test)]
mod tests {
    #[test]
    fn any_number_of_seconds_is_a_duration() {
        assert_eq!(secs(1.5), Duration::from_millis(1500));
        assert_eq!(secs(-3.0), Duration::ZERO);
        assert_eq!(secs(f64::NAN), Duration::ZERO);
        assert_eq!(secs(1e300), Duration::from_secs(1_000_000_000));
        assert_eq!(secs(f64::INFINITY), Duration::from_secs(1_000_000_000));
        let _ = std::time::Instant::now() + secs(f64::MAX);
    }

    use super::*;

    #[test]
    fn thread_cpu_grows_with_work() {
        // Work until this thread has had 20 ms of CPU: on a busy machine
        // 50 ms of wall time may bring it less. A clock that does not count
        // this thread's work never gets there and fails after 10 s.
        let before = thread_cpu();
        let mut x = 0u64;
        let give_up = std::time::Instant::now() + Duration::from_secs(10);
        let mut spent = CpuTime::default();
        while spent.total_s() <= 0.02 && std::time::Instant::now() < give_up {
            for _ in 0..100_000 {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
            }
            spent = thread_cpu() - before;
        }
        assert!(spent.total_s() > 0.02, "spent {spent:?}");
    }

    #[test]
    fn the_peak_is_read_from_vm_hwm() {
        let status = "Name:\tvolley\nVmPeak:\t  900000 kB\nVmHWM:\t   12345 kB\nVmRSS:\t 1000 kB\n";
        assert_eq!(vm_hwm_bytes(status), Some(12345 * 1024));
        assert_eq!(vm_hwm_bytes("Name:\tvolley\n"), None);
        assert_eq!(vm_hwm_bytes("VmHWM:\t12 MB\n"), None);
        // Other test threads allocate meanwhile: the resident set read
        // first is a floor of the peak read after it.
        let before = rss_now();
        let peak = peak_rss_bytes();
        assert!(
            peak >= before && before > 0,
            "peak {peak}, resident before {before}"
        );
    }

    /// This process's resident set now, from `/proc/self/statm`.
    fn rss_now() -> u64 {
        let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
        let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
        pages * 4096
    }

    #[test]
    fn open_files_within_limit_is_fine() {
        assert!(ensure_open_files(16).is_ok());
        assert!(ensure_open_files(u64::MAX / 2).is_err());
    }

    #[test]
    fn reserving_descriptors_grows_the_table_to_fit() {
        assert!(ensure_open_files(1024 + 64).is_ok());
        reserve_descriptors(1000);
        // The descriptor table's size, as the kernel reports it.
        let fd_table_size = || {
            let status = std::fs::read_to_string("/proc/self/status").unwrap();
            let line = status.lines().find(|l| l.starts_with("FDSize:")).unwrap();
            line["FDSize:".len()..].trim().parse::<u64>().unwrap()
        };
        assert!(fd_table_size() >= 1000, "FDSize {}", fd_table_size());
        // Past the limit it stops at the limit, without failing.
        reserve_descriptors(u64::MAX);
    }
}
