//! `volley k8s run`: the whole sharded run through the user's `kubectl`:
//! apply the manifests, follow every index's pod live as it starts
//! ([`super::logs`], merged by [`crate::follow`]), wait for every pod to
//! finish, read each report from its pod's log, merge, and delete the Job
//! unless `--keep`.
//!
//! Only four kubectl verbs are used (`apply -f`, `get pods -o json`,
//! `logs` with and without `-f`, `delete`), all stable across kubectl
//! versions.

use super::logs::{Follower, Message};
use super::{JobSpec, RUN_LABEL};
use crate::follow::{Follow, FollowError};
use crate::merge::Input;
use crate::report::SavedReport;
use serde_json::Value;
use std::collections::BTreeMap;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant};

/// How often the pods are looked at while the shards run.
const POLL: Duration = Duration::from_secs(1);

/// How often the live view is brought up to date between the pods' lines.
const TICK: Duration = Duration::from_millis(100);

/// Why kubectl could not tell what was asked of it.
#[derive(Debug, thiserror::Error)]
pub enum KubectlError {
    #[error("cannot run '{0}' (install kubectl or give --kubectl PATH)")]
    Spawn(String, #[source] std::io::Error),
    #[error("cannot run '{0}'")]
    Wait(String, #[source] std::io::Error),
    /// The verb and the last line kubectl wrote on stderr.
    #[error("kubectl {0} failed: {1}")]
    Failed(String, String),
    #[error("kubectl get pods printed no JSON list")]
    Listing(#[source] serde_json::Error),
    #[error("cannot write the manifests")]
    Manifests(#[source] std::io::Error),
    #[error("cannot create '{0}'")]
    Scratch(String, #[source] std::io::Error),
}

/// One kubectl invocation's stdout, or a one-line error with its stderr.
fn kubectl(program: &str, args: &[&str]) -> Result<String, KubectlError> {
    kubectl_fed(program, args, None)
}

/// [`kubectl`] with `input` written to its stdin: how a Secret is applied,
/// so that it never touches the disk or a command line.
fn kubectl_fed(program: &str, args: &[&str], input: Option<&[u8]>) -> Result<String, KubectlError> {
    use std::io::Write as _;
    use std::process::Stdio;
    let mut child = Command::new(program)
        .args(args)
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| KubectlError::Spawn(program.to_string(), e))?;
    if let (Some(mut stdin), Some(input)) = (child.stdin.take(), input) {
        // A kubectl that exits early reports why below.
        let _ = stdin.write_all(input);
    }
    let out = child
        .wait_with_output()
        .map_err(|e| KubectlError::Wait(program.to_string(), e))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(KubectlError::Failed(
            args.first().unwrap_or(&"").to_string(),
            err.lines().last().unwrap_or("no message").trim().to_string(),
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// How one index's pod ended.
#[derive(Debug, PartialEq)]
enum PodEnd {
    Succeeded(String),
    /// The pod's name and why it failed.
    Failed(String, String),
}

/// Where one index's pod stands.
#[derive(Debug, PartialEq)]
enum PodState {
    /// Not started yet (scheduled, pulling its image): no log yet.
    Pending(String),
    Running(String),
    Ended(PodEnd),
}

impl PodState {
    fn name(&self) -> &str {
        match self {
            PodState::Pending(name) | PodState::Running(name) => name,
            PodState::Ended(PodEnd::Succeeded(name) | PodEnd::Failed(name, _)) => name,
        }
    }
}

/// The pods by completion index.
fn pod_states(listing: &str) -> Result<BTreeMap<u32, PodState>, KubectlError> {
    let value: Value = serde_json::from_str(listing).map_err(KubectlError::Listing)?;
    let mut states = BTreeMap::new();
    for pod in value["items"].as_array().into_iter().flatten() {
        let name = pod["metadata"]["name"].as_str().unwrap_or("?").to_string();
        let Some(index) = pod["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"]
            .as_str()
            .and_then(|i| i.parse::<u32>().ok())
        else {
            continue;
        };
        let state = match pod["status"]["phase"].as_str() {
            Some("Pending") => PodState::Pending(name),
            Some("Running") => PodState::Running(name),
            Some("Succeeded") => PodState::Ended(PodEnd::Succeeded(name)),
            Some("Failed") => {
                let terminated = &pod["status"]["containerStatuses"][0]["state"]["terminated"];
                let reason = format!(
                    "{} (exit code {})",
                    terminated["reason"].as_str().unwrap_or("failed"),
                    terminated["exitCode"]
                        .as_i64()
                        .map_or("?".to_string(), |c| c.to_string())
                );
                PodState::Ended(PodEnd::Failed(name, reason))
            }
            _ => continue,
        };
        // A succeeded pod of an index wins over a failed one.
        if !matches!(states.get(&index), Some(PodState::Ended(PodEnd::Succeeded(_)))) {
            states.insert(index, state);
        }
    }
    Ok(states)
}

/// The JSON report in a pod's log: from the line that opens it to the line
/// that closes it (the log also holds volley's stderr, the countdown).
fn report_in_log(log: &str) -> Option<&str> {
    let start = log
        .find("\n{\n")
        .map(|i| i + 1)
        .or_else(|| log.starts_with("{\n").then_some(0))?;
    let end = log.rfind("\n}").map(|i| i + 2)?;
    (end > start).then(|| &log[start..end])
}

/// Applies, follows every pod live, waits, collects and merges, then ends
/// as `volley merge` does; returns whether a threshold failed, or the
/// first shard that failed or never finished.
pub fn run(
    spec: &JobSpec,
    program: &str,
    timeout: Duration,
    keep: bool,
    options: &crate::follow::Options,
    stop: &AtomicBool,
) -> Result<bool, FollowError> {
    // The dashboard's address is taken before anything is applied.
    let names = (0..spec.shards).map(|i| format!("pod {i}")).collect();
    let mut follow = Follow::start(names, options).map_err(FollowError::input)?;
    let dir = tempfile_dir().map_err(FollowError::failed)?;
    let inputs = apply(spec, program, &dir).and_then(|()| {
        eprintln!(
            "applied job/{} ({} shards, starting at {})",
            spec.name, spec.shards, spec.start_at
        );
        collect(spec, program, timeout, &mut follow, stop)
    });
    if !keep {
        let _ = kubectl(program, &["delete", "job", &spec.name, "--ignore-not-found"]);
        if spec.objects.len() > 1 {
            let _ = kubectl(
                program,
                &[
                    "delete",
                    "configmap",
                    &format!("{}-plan", spec.name),
                    "--ignore-not-found",
                ],
            );
        }
        if let Some(credentials) = &spec.credentials {
            let _ = kubectl(
                program,
                &["delete", "secret", &credentials.name, "--ignore-not-found"],
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    follow.conclude(inputs, options)
}

fn apply(spec: &JobSpec, program: &str, dir: &std::path::Path) -> Result<(), FollowError> {
    let manifest = dir.join("manifests.yaml");
    std::fs::write(&manifest, super::to_json(spec))
        .map_err(|e| FollowError::failed(KubectlError::Manifests(e)))?;
    if let Some(credentials) = &spec.credentials {
        let secret = credentials.secret.to_string();
        kubectl_fed(program, &["apply", "-f", "-"], Some(secret.as_bytes())).map_err(FollowError::failed)?;
    }
    kubectl(program, &["apply", "-f", manifest.to_str().unwrap_or_default()]).map_err(FollowError::failed)?;
    Ok(())
}

/// One index's pod as the watch sees it.
#[derive(Default)]
struct Watched {
    follower: Option<Follower>,
    /// Stream lines delivered from its log (a new follower skips them).
    delivered: u64,
    /// When a poll first saw the pod ended.
    ended_at: Option<Instant>,
    /// Followers that ran after the pod ended and still saw no end line.
    reads_after_end: u32,
    /// Its log was read to the end after the pod ended.
    read_whole: bool,
}

/// Reads of an ended pod's log, short of its end line, before the shard
/// counts as gone (a read cut short is read again).
const READS_AFTER_END: u32 = 3;

/// Follows the pods until every one has ended and its log is read; then
/// the reports from their logs, or the first shard that failed.
fn collect(
    spec: &JobSpec,
    program: &str,
    timeout: Duration,
    follow: &mut Follow,
    stop: &AtomicBool,
) -> Result<Vec<Input>, FollowError> {
    let (tx, rx) = std::sync::mpsc::channel();
    let mut watched: BTreeMap<u32, Watched> = (0..spec.shards).map(|i| (i, Watched::default())).collect();
    let watch = (|| {
        let selector = format!("{RUN_LABEL}={}", spec.name);
        let deadline = Instant::now() + timeout;
        let mut next_poll = Instant::now();
        let mut failure: Option<(u32, String, String)> = None;
        let mut ends = BTreeMap::new();
        loop {
            match rx.recv_timeout(TICK) {
                Ok(message) => {
                    let mut next = Some(message);
                    while let Some(message) = next.take() {
                        match message {
                            Message::Line(index, line) => {
                                if let Some(w) = watched.get_mut(&index) {
                                    w.delivered += 1;
                                }
                                follow.line(index as usize, line).map_err(FollowError::input)?;
                            }
                            Message::Exited(index) => exited(&mut watched, follow, index),
                        }
                        next = rx.try_recv().ok();
                    }
                }
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => {}
            }
            follow.update().map_err(FollowError::input)?;
            if Instant::now() >= next_poll {
                next_poll = Instant::now() + POLL;
                let states = pod_states(
                    &kubectl(program, &["get", "pods", "-l", &selector, "-o", "json"])
                        .map_err(FollowError::failed)?,
                )
                .map_err(FollowError::failed)?;
                for (index, state) in &states {
                    let Some(w) = watched.get_mut(index) else { continue };
                    if let PodState::Ended(end) = state {
                        w.ended_at.get_or_insert_with(Instant::now);
                        ends.insert(*index, end_of(end));
                        if let (PodEnd::Failed(pod, reason), None) = (end, &failure) {
                            failure = Some((*index, pod.clone(), reason.clone()));
                            follow.mark_gone(*index as usize, format!("pod {pod} failed: {reason}"));
                        }
                    }
                    // A pod not started has no log yet; it is picked up once it starts.
                    let started = !matches!(state, PodState::Pending(_));
                    if started && w.follower.is_none() && !w.read_whole {
                        let follower =
                            Follower::start(program, state.name(), *index, w.delivered, tx.clone())
                                .map_err(FollowError::failed)?;
                        w.follower = Some(follower);
                    }
                }
                if ends.len() as u32 == spec.shards && watched.values().all(|w| w.read_whole) && follow.over()
                {
                    return Ok((ends, failure));
                }
            }
            if stop.load(Ordering::Relaxed) {
                return Err(FollowError::Interrupted);
            }
            if Instant::now() >= deadline {
                let missing: Vec<String> = (0..spec.shards)
                    .filter(|i| !ends.contains_key(i))
                    .map(|i| i.to_string())
                    .collect();
                return Err(FollowError::failed(format!(
                    "shard{} {} did not finish within {} (see kubectl describe job/{})",
                    if missing.len() > 1 { "s" } else { "" },
                    missing.join(", "),
                    humantime::format_duration(timeout),
                    spec.name
                )));
            }
        }
    })();
    for follower in watched.into_values().filter_map(|w| w.follower) {
        follower.stop();
    }
    let (ends, failure) = watch?;
    if let Some((index, pod, reason)) = failure {
        let last_line = kubectl(program, &["logs", &pod])
            .ok()
            .and_then(|log| {
                log.lines()
                    .rev()
                    .find(|l| !l.trim().is_empty() && crate::report::stream::Line::find(l).is_none())
                    .map(str::to_string)
            })
            .unwrap_or_default();
        return Err(FollowError::failed(format!(
            "shard {index} (pod {pod}) failed: {reason}: {last_line}"
        )));
    }
    let mut inputs = Vec::with_capacity(ends.len());
    for (index, pod) in &ends {
        let log = kubectl(program, &["logs", pod]).map_err(FollowError::failed)?;
        let text = report_in_log(&log).ok_or_else(|| {
            FollowError::failed(format!("shard {index} (pod {pod}) printed no JSON report"))
        })?;
        let name = format!("shard {index} (pod {pod})");
        let report = SavedReport::parse(&name, text).map_err(FollowError::failed)?;
        inputs.push(Input { name, report });
    }
    Ok(inputs)
}

/// The pod's name, for reading its report.
fn end_of(end: &PodEnd) -> String {
    match end {
        PodEnd::Succeeded(pod) | PodEnd::Failed(pod, _) => pod.clone(),
    }
}

/// Index `index`'s kubectl ended. Its log was read whole once its stream
/// ended, or after a few reads that started after the pod had ended (a
/// pod that died mid-run, or never streamed); otherwise it is started
/// again at the next look at the pods, skipping what it delivered.
fn exited(watched: &mut BTreeMap<u32, Watched>, follow: &mut Follow, index: u32) {
    let Some(w) = watched.get_mut(&index) else { return };
    let Some(follower) = w.follower.take() else { return };
    let slot = index as usize;
    if w.ended_at.is_some_and(|ended| ended <= follower.started) {
        w.reads_after_end += 1;
    }
    if follow.has_ended(slot) || w.reads_after_end >= READS_AFTER_END {
        w.read_whole = true;
        follow.source_ended(slot);
    }
    follower.reap();
}

/// A private scratch directory for the manifests.
fn tempfile_dir() -> Result<std::path::PathBuf, KubectlError> {
    let dir = std::env::temp_dir().join(format!("volley-k8s-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| KubectlError::Scratch(dir.display().to_string(), e))?;
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_pod_states_by_index() {
        let listing = r#"{"items": [
            {"metadata": {"name": "a", "annotations": {"batch.kubernetes.io/job-completion-index": "0"}},
             "status": {"phase": "Succeeded"}},
            {"metadata": {"name": "b", "annotations": {"batch.kubernetes.io/job-completion-index": "1"}},
             "status": {"phase": "Failed", "containerStatuses": [{"state": {"terminated": {"reason": "Error", "exitCode": 1}}}]}},
            {"metadata": {"name": "c", "annotations": {"batch.kubernetes.io/job-completion-index": "2"}},
             "status": {"phase": "Running"}}
        ]}"#;
        let states = pod_states(listing).unwrap();
        assert_eq!(states.len(), 3);
        assert_eq!(states[&0], PodState::Ended(PodEnd::Succeeded("a".into())));
        assert_eq!(
            states[&1],
            PodState::Ended(PodEnd::Failed("b".into(), "Error (exit code 1)".into()))
        );
        assert_eq!(states[&2], PodState::Running("c".into()));
    }

    #[test]
    fn finds_the_report_between_log_lines() {
        let log = "starting at 2026-01-01T00:00:00.000Z (in 3s)\n{\n  \"a\": {\n  }\n}\n";
        assert_eq!(report_in_log(log), Some("{\n  \"a\": {\n  }\n}"));
        assert_eq!(report_in_log("error: no\n"), None);
        // The stream's lines before it (on the same stdout) are not the report.
        let streamed = "{\"stream\":\"volley.stream/1\",\"type\":\"run_end\"}\n\
                        {\"stream\":\"volley.stream/1\",\"type\":\"end\",\"report\":{\"a\":{}}}\n{\n  \"a\": {\n  }\n}\n";
        assert_eq!(report_in_log(streamed), Some("{\n  \"a\": {\n  }\n}"));
    }
}
