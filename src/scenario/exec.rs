//! Runs a plan's `exec` command: `bash -c COMMAND`, as drill does, but as
//! an async child process so the worker's other connections keep going
//! while it runs.
//!
//! Its standard output, with trailing whitespace trimmed, is the value an
//! `assign` receives. A command that cannot start, exits non-zero, outlives
//! the timeout or prints more than [`MAX_OUTPUT`] is a failure whose
//! message says which (with the first line of its standard error).

use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Command;

/// Standard output kept for `assign`; more is a failure (a variable is not
/// meant to hold a file, and memory must stay bounded).
pub const MAX_OUTPUT: usize = 1 << 20;

/// Standard error kept for the failure message.
const MAX_STDERR: usize = 4096;

/// Reads `reader` to its end, keeping at most `cap` bytes; true if more came.
/// It drains past the cap so the child never blocks on a full pipe.
async fn read_capped<R: AsyncRead + Unpin>(reader: Option<R>, cap: usize) -> (Vec<u8>, bool) {
    let mut kept = Vec::new();
    let Some(mut reader) = reader else {
        return (kept, false);
    };
    let mut chunk = [0u8; 8192];
    let mut overflowed = false;
    loop {
        match reader.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let room = cap - kept.len();
                kept.extend_from_slice(&chunk[..n.min(room)]);
                overflowed |= n > room;
            }
        }
    }
    (kept, overflowed)
}

/// Runs `command` with `bash -c`, within `timeout`; its trimmed standard
/// output, or why it failed.
// A step's failure in words: its message is the error text the report
// records for the step.
pub async fn run(command: &str, timeout: Duration) -> Result<String, String> {
    let mut child = Command::new("bash")
        .args(["-c", "--", command])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // A timed-out or abandoned (Ctrl-C, end of run) command is killed.
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("cannot start 'bash -c {command}': {e}"))?;
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let work = async {
        let ((out, too_long), (err, _), status) = tokio::join!(
            read_capped(stdout, MAX_OUTPUT),
            read_capped(stderr, MAX_STDERR),
            child.wait()
        );
        (out, too_long, err, status)
    };
    let (out, too_long, err, status) = tokio::time::timeout(timeout, work)
        .await
        .map_err(|_| format!("'{command}' still ran after {timeout:?} (the timeout): stopped"))?;
    let status = status.map_err(|e| format!("'{command}': cannot wait for it: {e}"))?;
    if !status.success() {
        let err = String::from_utf8_lossy(&err);
        let first = err.lines().find(|l| !l.trim().is_empty()).unwrap_or("").trim();
        let how = match status.code() {
            Some(code) => format!("exited with status {code}"),
            None => "was killed by a signal".to_string(),
        };
        return Err(if first.is_empty() {
            format!("'{command}' {how}")
        } else {
            format!("'{command}' {how}: {first}")
        });
    }
    if too_long {
        return Err(format!(
            "'{command}' printed more than {} MiB (an exec's output is for a variable)",
            MAX_OUTPUT >> 20
        ));
    }
    let mut out = String::from_utf8_lossy(&out).into_owned();
    out.truncate(out.trim_end().len());
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(f)
    }

    const SECOND: Duration = Duration::from_secs(5);

    #[test]
    fn output_is_trimmed_at_the_end_only() {
        assert_eq!(block_on(run("printf '  a b \\n\\n'", SECOND)).unwrap(), "  a b");
    }

    #[test]
    fn a_non_zero_exit_names_the_status_and_stderr() {
        let err = block_on(run("echo oops >&2; exit 3", SECOND)).unwrap_err();
        assert!(
            err.contains("exited with status 3") && err.ends_with("oops"),
            "{err}"
        );
    }

    #[test]
    fn a_slow_command_is_stopped_at_the_timeout() {
        let started = std::time::Instant::now();
        let err = block_on(run("sleep 5", Duration::from_millis(200))).unwrap_err();
        assert!(err.contains("still ran after"), "{err}");
        assert!(started.elapsed() < Duration::from_secs(3));
    }

    #[test]
    fn too_much_output_is_a_failure_not_a_variable() {
        let err = block_on(run("head -c 2000000 /dev/zero", SECOND)).unwrap_err();
        assert!(err.contains("more than 1 MiB"), "{err}");
    }
}
