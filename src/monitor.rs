//! Watches a process while the load runs: resident memory, CPU, threads and
//! open descriptors, sampled once per interval from Linux's /proc. The
//! target (`--monitor-pid`, or what `--spawn` started) and volley itself are
//! sampled the same way, so a report shows what the load did to the server
//! and what it cost the tool.

use serde::{Deserialize, Serialize};
use std::time::Instant;

/// One sample of a process.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ProcSample {
    pub rss_mb: f64,
    /// CPU use since the previous sample, in percent of one core.
    pub cpu_pct: f64,
    pub threads: u64,
    pub fds: u64,
}

/// Samples one process; CPU is the difference between two readings.
#[derive(Debug)]
pub struct ProcSampler {
    pub pid: u32,
    last: Option<(u64, Instant)>,
    ticks_per_s: f64,
    page_bytes: f64,
}

/// The fields of /proc/PID/stat volley reads: CPU ticks, threads, RSS pages.
fn parse_stat(text: &str) -> Option<(u64, u64, u64)> {
    // The command name (field 2) is in parentheses and may hold spaces.
    let after = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    // Field 3 (state) is fields[0]; utime is field 14, stime 15, threads 20, rss 24.
    let get = |field: usize| fields.get(field - 3).and_then(|v| v.parse::<u64>().ok());
    Some((get(14)? + get(15)?, get(20)?, get(24)?))
}

/// Why a process cannot be watched, or `--spawn`'s target did not come up.
#[derive(Debug, thiserror::Error)]
pub enum MonitorError {
    #[error("watching a process needs Linux's /proc")]
    NoProc,
    #[error("no process with PID {0} to watch (has it exited?)")]
    NoProcess(u32),
    #[error("--spawn: cannot start '{0}'")]
    Spawn(String, #[source] std::io::Error),
    #[error("--spawn: '{command}' exited ({status}) before {addr} answered")]
    Exited {
        command: String,
        status: std::process::ExitStatus,
        addr: std::net::SocketAddr,
    },
    #[error("--spawn: nothing answered on {addr} within {secs}s")]
    NoAnswer { addr: std::net::SocketAddr, secs: u64 },
}

impl ProcSampler {
    /// Checks that the process exists.
    pub fn new(pid: u32) -> Result<ProcSampler, MonitorError> {
        if !cfg!(target_os = "linux") {
            return Err(MonitorError::NoProc);
        }
        std::fs::read_to_string(format!("/proc/{pid}/stat")).map_err(|_| MonitorError::NoProcess(pid))?;
        // SAFETY: sysconf only reads system constants.
        let (ticks, page) = unsafe {
            (
                libc::sysconf(libc::_SC_CLK_TCK),
                libc::sysconf(libc::_SC_PAGESIZE),
            )
        };
        let mut sampler = ProcSampler {
            pid,
            last: None,
            ticks_per_s: ticks.max(1) as f64,
            page_bytes: page.max(1) as f64,
        };
        let _ = sampler.sample();
        Ok(sampler)
    }

    /// This process.
    pub fn own() -> Option<ProcSampler> {
        ProcSampler::new(std::process::id()).ok()
    }

    /// A sample, or `None` once the process is gone.
    pub fn sample(&mut self) -> Option<ProcSample> {
        let text = std::fs::read_to_string(format!("/proc/{}/stat", self.pid)).ok()?;
        let (ticks, threads, rss_pages) = parse_stat(&text)?;
        let now = Instant::now();
        let cpu_pct = match self.last {
            Some((last_ticks, at)) => {
                let secs = (now - at).as_secs_f64();
                if secs > 0.0 {
                    100.0 * (ticks.saturating_sub(last_ticks)) as f64 / self.ticks_per_s / secs
                } else {
                    0.0
                }
            }
            None => 0.0,
        };
        self.last = Some((ticks, now));
        let fds = open_fds(self.pid);
        Some(ProcSample {
            rss_mb: rss_pages as f64 * self.page_bytes / (1024.0 * 1024.0),
            cpu_pct,
            threads,
            fds,
        })
    }
}

/// How many descriptors `pid` has open. Linux 6.2 and later give the count
/// as the size of `/proc/PID/fd`, read off the descriptor table's bitmap;
/// listing the directory instead makes the kernel build an entry per
/// descriptor, which for a worker's thousands of sockets took a sampling
/// thread milliseconds of kernel time every interval, long enough to hold
/// up a worker that shared its core. Older kernels (size 0) are listed.
fn open_fds(pid: u32) -> u64 {
    let dir = format!("/proc/{pid}/fd");
    match std::fs::metadata(&dir) {
        Ok(meta) if meta.len() > 0 => meta.len(),
        _ => std::fs::read_dir(&dir).map_or(0, |d| d.count() as u64),
    }
}

/// Peak and mean figures of a process over a run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ProcSummary {
    pub pid: u32,
    pub samples: u64,
    pub peak_rss_mb: f64,
    pub mean_rss_mb: f64,
    /// Before the load started.
    pub first_rss_mb: f64,
    pub mean_cpu_pct: f64,
    pub peak_cpu_pct: f64,
    pub peak_threads: u64,
    pub peak_fds: u64,
    /// The process exited before the run ended.
    pub exited: bool,
}

impl ProcSummary {
    /// `before`: a sample taken before the load started, if any.
    pub fn from_samples(
        pid: u32,
        before: Option<ProcSample>,
        samples: &[ProcSample],
        exited: bool,
    ) -> ProcSummary {
        let n = samples.len().max(1) as f64;
        ProcSummary {
            pid,
            samples: samples.len() as u64,
            peak_rss_mb: samples.iter().map(|s| s.rss_mb).fold(0.0, f64::max),
            mean_rss_mb: samples.iter().map(|s| s.rss_mb).sum::<f64>() / n,
            first_rss_mb: before.or(samples.first().copied()).map_or(0.0, |s| s.rss_mb),
            mean_cpu_pct: samples.iter().map(|s| s.cpu_pct).sum::<f64>() / n,
            peak_cpu_pct: samples.iter().map(|s| s.cpu_pct).fold(0.0, f64::max),
            peak_threads: samples.iter().map(|s| s.threads).max().unwrap_or(0),
            peak_fds: samples.iter().map(|s| s.fds).max().unwrap_or(0),
            exited,
        }
    }
}

/// The target's and volley's own samplers.
#[derive(Debug)]
pub struct Monitor {
    pub target: Option<ProcSampler>,
    /// The target before the load started.
    pub target_before: Option<ProcSample>,
    pub target_exited: bool,
    pub tool: Option<ProcSampler>,
}

impl Monitor {
    pub fn new(target_pid: Option<u32>) -> Result<Monitor, MonitorError> {
        let mut target = target_pid.map(ProcSampler::new).transpose()?;
        let target_before = target.as_mut().and_then(ProcSampler::sample);
        Ok(Monitor {
            target,
            target_before,
            target_exited: false,
            tool: ProcSampler::own(),
        })
    }

    /// Samples both (the target's sample is `None` once it has exited).
    pub fn sample(&mut self) -> (Option<ProcSample>, Option<ProcSample>) {
        let target = match &mut self.target {
            Some(t) if !self.target_exited => {
                let s = t.sample();
                self.target_exited = s.is_none();
                s
            }
            _ => None,
        };
        (target, self.tool.as_mut().and_then(ProcSampler::sample))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stat_with_spaces_in_the_name() {
        let stat = "1234 (my (odd) server) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 7 0 100 123456789 2560 18446744073709551615";
        assert_eq!(parse_stat(stat), Some((300, 7, 2560)));
    }

    #[test]
    fn samples_this_process() {
        let mut own = ProcSampler::own().expect("/proc/self exists on Linux");
        let s = own.sample().unwrap();
        assert!(s.rss_mb > 0.5 && s.threads >= 1 && s.fds >= 3, "{s:?}");
        assert!(
            ProcSampler::new(u32::MAX - 1)
                .unwrap_err()
                .to_string()
                .contains("no process with PID")
        );
    }

    #[test]
    fn counts_another_processs_open_descriptors() {
        // A child holds its standard streams and whatever this process
        // lets it inherit (cargo's jobserver pipes, say); listing its
        // descriptors opens none of its own, so the count must match it.
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + std::time::Duration::from_secs(2);
        // Until it sleeps in `sleep` itself: it has exec'd (before, it is a
        // copy of this process) and is past the dynamic loader, which opens
        // and closes files of its own (the name changes at the exec, before
        // the loader runs, so a count taken then could differ by one).
        let sleeping = || {
            let stat = std::fs::read_to_string(format!("/proc/{}/stat", child.id())).unwrap_or_default();
            let state = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().next());
            stat.contains("(sleep)") && state == Some("S")
        };
        while !sleeping() && Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let fds = open_fds(child.id());
        let listed = std::fs::read_dir(format!("/proc/{}/fd", child.id()))
            .unwrap()
            .count() as u64;
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(fds >= 3, "{fds}");
        assert_eq!(fds, listed);
    }

    #[test]
    fn summaries_take_peaks_and_means() {
        let samples = [
            ProcSample {
                rss_mb: 10.0,
                cpu_pct: 50.0,
                threads: 2,
                fds: 10,
            },
            ProcSample {
                rss_mb: 30.0,
                cpu_pct: 150.0,
                threads: 4,
                fds: 12,
            },
        ];
        let s = ProcSummary::from_samples(7, None, &samples, false);
        assert_eq!((s.peak_rss_mb, s.mean_rss_mb, s.first_rss_mb), (30.0, 20.0, 10.0));
        assert_eq!(
            (s.mean_cpu_pct, s.peak_cpu_pct, s.peak_threads, s.peak_fds),
            (100.0, 150.0, 4, 12)
        );
    }
}

/// A target started by `--spawn`: watched while the load runs, stopped
/// (SIGTERM, then SIGKILL after 2 s) when dropped, whatever happened.
#[derive(Debug)]
pub struct Spawned {
    child: std::process::Child,
}

impl Spawned {
    /// Runs `command` with `sh -c` and waits up to `wait` for `addr` to
    /// accept connections.
    pub fn start(
        command: &str,
        addr: std::net::SocketAddr,
        wait: std::time::Duration,
    ) -> Result<Spawned, MonitorError> {
        use std::process::{Command, Stdio};
        // `exec` so the PID watched is the target's, not the shell's.
        let child = Command::new("sh")
            .arg("-c")
            .arg(format!("exec {command}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .map_err(|e| MonitorError::Spawn(command.to_string(), e))?;
        let mut spawned = Spawned { child };
        let deadline = Instant::now() + wait;
        loop {
            if let Ok(Some(status)) = spawned.child.try_wait() {
                return Err(MonitorError::Exited {
                    command: command.to_string(),
                    status,
                    addr,
                });
            }
            if std::net::TcpStream::connect_timeout(&addr, std::time::Duration::from_millis(200)).is_ok() {
                return Ok(spawned);
            }
            if Instant::now() >= deadline {
                return Err(MonitorError::NoAnswer {
                    addr,
                    secs: wait.as_secs(),
                });
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Spawned {
    fn drop(&mut self) {
        // SAFETY: signals our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let until = Instant::now() + std::time::Duration::from_secs(2);
        while Instant::now() < until {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
