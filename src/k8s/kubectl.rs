//! `volley k8s run`: the whole sharded run through the user's `kubectl`:
//! apply the manifests, wait for every index's pod to finish, read each
//! report from its pod's log, merge, and delete the Job unless `--keep`.
//!
//! Only four kubectl verbs are used (`apply -f`, `get pods -o json`,
//! `logs`, `delete`), all stable across kubectl versions.

use super::{JobSpec, RUN_LABEL};
use crate::merge::Input;
use crate::report::SavedReport;
use serde_json::Value;
use std::collections::BTreeMap;
use std::process::Command;
use std::time::{Duration, Instant};

/// How often the pods are looked at while the shards run.
const POLL: Duration = Duration::from_secs(1);

/// One kubectl invocation's stdout, or a one-line error with its stderr.
fn kubectl(program: &str, args: &[&str]) -> Result<String, String> {
    kubectl_fed(program, args, None)
}

/// [`kubectl`] with `input` written to its stdin: how a Secret is applied,
/// so that it never touches the disk or a command line.
fn kubectl_fed(program: &str, args: &[&str], input: Option<&[u8]>) -> Result<String, String> {
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
        .map_err(|e| format!("cannot run '{program}': {e} (install kubectl or give --kubectl PATH)"))?;
    if let (Some(mut stdin), Some(input)) = (child.stdin.take(), input) {
        // A kubectl that exits early reports why below.
        let _ = stdin.write_all(input);
    }
    let out = child
        .wait_with_output()
        .map_err(|e| format!("cannot run '{program}': {e}"))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(format!(
            "kubectl {} failed: {}",
            args.first().unwrap_or(&""),
            err.lines().last().unwrap_or("no message").trim()
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

/// The finished pods by completion index.
fn finished_pods(listing: &str) -> Result<BTreeMap<u32, PodEnd>, String> {
    let value: Value =
        serde_json::from_str(listing).map_err(|e| format!("kubectl get pods printed no JSON list: {e}"))?;
    let mut ends = BTreeMap::new();
    for pod in value["items"].as_array().into_iter().flatten() {
        let name = pod["metadata"]["name"].as_str().unwrap_or("?").to_string();
        let Some(index) = pod["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"]
            .as_str()
            .and_then(|i| i.parse::<u32>().ok())
        else {
            continue;
        };
        let end = match pod["status"]["phase"].as_str() {
            Some("Succeeded") => PodEnd::Succeeded(name),
            Some("Failed") => {
                let terminated = &pod["status"]["containerStatuses"][0]["state"]["terminated"];
                let reason = format!(
                    "{} (exit code {})",
                    terminated["reason"].as_str().unwrap_or("failed"),
                    terminated["exitCode"]
                        .as_i64()
                        .map_or("?".to_string(), |c| c.to_string())
                );
                PodEnd::Failed(name, reason)
            }
            _ => continue,
        };
        // A succeeded pod of an index wins over a failed one.
        if !matches!(ends.get(&index), Some(PodEnd::Succeeded(_))) {
            ends.insert(index, end);
        }
    }
    Ok(ends)
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

/// Applies, waits, collects and merges; the merged report, or the first
/// shard that failed or never finished.
pub fn run(spec: &JobSpec, program: &str, timeout: Duration, keep: bool) -> Result<SavedReport, String> {
    let dir = tempfile_dir()?;
    let manifest = dir.join("manifests.yaml");
    std::fs::write(&manifest, super::to_json(spec))
        .map_err(|e| format!("cannot write the manifests: {e}"))?;
    if let Some(credentials) = &spec.credentials {
        let secret = credentials.secret.to_string();
        kubectl_fed(program, &["apply", "-f", "-"], Some(secret.as_bytes()))?;
    }
    kubectl(program, &["apply", "-f", manifest.to_str().unwrap_or_default()])?;
    eprintln!(
        "applied job/{} ({} shards, starting at {})",
        spec.name, spec.shards, spec.start_at
    );
    let result = collect(spec, program, timeout);
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
    result
}

fn collect(spec: &JobSpec, program: &str, timeout: Duration) -> Result<SavedReport, String> {
    let selector = format!("{RUN_LABEL}={}", spec.name);
    let deadline = Instant::now() + timeout;
    let ends = loop {
        let ends = finished_pods(&kubectl(
            program,
            &["get", "pods", "-l", &selector, "-o", "json"],
        )?)?;
        if let Some((index, PodEnd::Failed(pod, reason))) =
            ends.iter().find(|(_, end)| matches!(end, PodEnd::Failed(..)))
        {
            let last_line = kubectl(program, &["logs", pod])
                .ok()
                .and_then(|log| {
                    log.lines()
                        .rev()
                        .find(|l| !l.trim().is_empty())
                        .map(str::to_string)
                })
                .unwrap_or_default();
            return Err(format!("shard {index} (pod {pod}) failed: {reason}: {last_line}"));
        }
        if ends.len() as u32 == spec.shards {
            break ends;
        }
        if Instant::now() >= deadline {
            let missing: Vec<String> = (0..spec.shards)
                .filter(|i| !ends.contains_key(i))
                .map(|i| i.to_string())
                .collect();
            return Err(format!(
                "shard{} {} did not finish within {} (see kubectl describe job/{})",
                if missing.len() > 1 { "s" } else { "" },
                missing.join(", "),
                humantime::format_duration(timeout),
                spec.name
            ));
        }
        std::thread::sleep(POLL);
    };
    let mut inputs = Vec::with_capacity(ends.len());
    for (index, end) in &ends {
        let PodEnd::Succeeded(pod) = end else {
            unreachable!("failed pods returned above")
        };
        let log = kubectl(program, &["logs", pod])?;
        let text =
            report_in_log(&log).ok_or_else(|| format!("shard {index} (pod {pod}) printed no JSON report"))?;
        let name = format!("shard {index} (pod {pod})");
        let report = SavedReport::parse(&name, text).map_err(|e| e.to_string())?;
        inputs.push(Input { name, report });
    }
    crate::merge::merge(&inputs, false)
}

/// A private scratch directory for the manifests.
fn tempfile_dir() -> Result<std::path::PathBuf, String> {
    let dir = std::env::temp_dir().join(format!("volley-k8s-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create '{}': {e}", dir.display()))?;
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_pod_ends_by_index() {
        let listing = r#"{"items": [
            {"metadata": {"name": "a", "annotations": {"batch.kubernetes.io/job-completion-index": "0"}},
             "status": {"phase": "Succeeded"}},
            {"metadata": {"name": "b", "annotations": {"batch.kubernetes.io/job-completion-index": "1"}},
             "status": {"phase": "Failed", "containerStatuses": [{"state": {"terminated": {"reason": "Error", "exitCode": 1}}}]}},
            {"metadata": {"name": "c", "annotations": {"batch.kubernetes.io/job-completion-index": "2"}},
             "status": {"phase": "Running"}}
        ]}"#;
        let ends = finished_pods(listing).unwrap();
        assert_eq!(ends.len(), 2);
        assert_eq!(ends[&0], PodEnd::Succeeded("a".into()));
        assert_eq!(ends[&1], PodEnd::Failed("b".into(), "Error (exit code 1)".into()));
    }

    #[test]
    fn finds_the_report_between_log_lines() {
        let log = "starting at 2026-01-01T00:00:00.000Z (in 3s)\n{\n  \"a\": {\n  }\n}\n";
        assert_eq!(report_in_log(log), Some("{\n  \"a\": {\n  }\n}"));
        assert_eq!(report_in_log("error: no\n"), None);
    }
}
