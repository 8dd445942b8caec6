//! `volley k8s run`'s live view: one `kubectl logs POD -f` per completion
//! index, the stream's lines picked out of the pod's log (which holds the
//! countdown and, at the end, the report too) and handed to the live merge
//! by a reader thread per follower.
//!
//! kubectl replays a pod's log from its start each time it is asked, so a
//! follower that has to start again (its kubectl exited before the pod's
//! end line: a dropped connection, an API server restart) skips the stream
//! lines it already delivered.

use crate::report::stream::Line;
use std::io::BufRead;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::Sender;
use std::time::Instant;

/// What a follower's reader thread tells the watch.
pub enum Message {
    /// A stream line of index `.0`'s pod.
    Line(u32, Line),
    /// Index `.0`'s kubectl ended its output.
    Exited(u32),
}

/// Why a pod's log could not be followed.
#[derive(Debug, thiserror::Error)]
pub enum LogsError {
    #[error("cannot run '{0}'")]
    Spawn(String, #[source] std::io::Error),
    #[error("cannot start a log follower")]
    Thread(#[source] std::io::Error),
}

/// One running `kubectl logs -f`.
pub struct Follower {
    child: Child,
    /// When it was started: a pod seen ended before this was read whole.
    pub started: Instant,
}

impl Follower {
    /// Follows `pod`'s log (index `index`), skipping the first `skip`
    /// stream lines, which were delivered before.
    pub fn start(
        program: &str,
        pod: &str,
        index: u32,
        skip: u64,
        to: Sender<Message>,
    ) -> Result<Follower, LogsError> {
        let started = Instant::now();
        let mut child = Command::new(program)
            .args(["logs", pod, "-f"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| LogsError::Spawn(program.to_string(), e))?;
        let stdout = child.stdout.take().expect("stdout is piped");
        let pod = pod.to_string();
        std::thread::Builder::new()
            .name(format!("volley-logs-{index}"))
            .spawn(move || read(stdout, &pod, index, skip, &to))
            .map_err(LogsError::Thread)?;
        Ok(Follower { child, started })
    }

    /// Reaps a kubectl whose output ended.
    pub fn reap(mut self) {
        let _ = self.child.wait();
    }

    /// Stops a kubectl still following (the run is over or abandoned).
    pub fn stop(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn read(stdout: impl std::io::Read, pod: &str, index: u32, skip: u64, to: &Sender<Message>) {
    let mut reader = std::io::BufReader::new(stdout);
    let mut bytes = Vec::new();
    let mut seen = 0u64;
    let mut warned = false;
    loop {
        bytes.clear();
        match reader.read_until(b'\n', &mut bytes) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        match Line::find(&String::from_utf8_lossy(&bytes)) {
            None => {}
            Some(Ok(line)) => {
                seen += 1;
                if seen > skip && to.send(Message::Line(index, line)).is_err() {
                    return;
                }
            }
            // The live view goes on without it; the report is read apart.
            Some(Err(e)) if !warned => {
                warned = true;
                eprintln!("warning: pod {pod}'s log has a line the live view cannot read: {e}");
            }
            Some(Err(_)) => {}
        }
    }
    let _ = to.send(Message::Exited(index));
}
