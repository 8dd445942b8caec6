//! `volley k8s`: the manifests pass the Kubernetes schemas (PyPI's
//! kubernetes-validate, installed by .ci/k8s-tools), and `volley k8s run`
//! goes end to end against a stand-in kubectl on PATH that runs each pod's
//! command as a local process with JOB_COMPLETION_INDEX set.

use crate::support::{exclusive, read_report, schema_violations, stderr, stdout, target, timed, url, volley};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

/// kubernetes-validate: $KUBERNETES_VALIDATE, or where .ci/k8s-tools puts it.
fn kubernetes_validate() -> Option<PathBuf> {
    let path = std::env::var_os("KUBERNETES_VALIDATE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("target/k8s-tools/bin/kubernetes-validate")
        });
    path.exists().then_some(path)
}

fn validate(tool: &Path, file: &Path) -> Output {
    Command::new(tool)
        .args(["--strict", "--kubernetes-version", "1.33.0"])
        .arg(file)
        .output()
        .expect("kubernetes-validate runs")
}

/// The documents of a `--output json` stream, with the start time (which
/// moves between two invocations) blanked.
fn json_documents(stream: &str) -> Vec<serde_json::Value> {
    stream
        .split("\n---\n")
        .map(|d| d.trim_start_matches("---\n"))
        .filter(|d| !d.trim().is_empty())
        .map(|d| without_start_time(serde_json::from_str(d).expect("each document is JSON")))
        .collect()
}

fn without_start_time(mut object: serde_json::Value) -> serde_json::Value {
    if let Some(args) = object.pointer_mut("/spec/template/spec/containers/0/args") {
        let args = args.as_array_mut().unwrap();
        for i in 1..args.len() {
            if args[i - 1] == "--start-at"
                || args[i - 1] == "--run-id" && args[i].as_str().unwrap().contains('T')
            {
                args[i] = "START".into();
            }
        }
    }
    object
}

#[test]
fn manifests_pass_the_kubernetes_schemas() {
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("plan.yml");
    std::fs::write(
        &plan,
        "# a plan file travels in the ConfigMap line for line\n\nbase: http://svc:8080\nconcurrency: 4   \niterations: 100\nplan:\n  - name: hi\n    request:\n      url: /hi\n",
    )
    .unwrap();
    let with = dir.path().join("users.csv");
    std::fs::write(&with, "  id,name\n1,no\n\n\n").unwrap();
    // Words a YAML 1.1 reader (Kubernetes', PyYAML) takes for a date, a
    // boolean, a number or null unless they are quoted: each must stay a
    // string in the pods' args.
    let tricky = [
        "-H",
        "no",
        "-H",
        "1_000",
        "-H",
        "~",
        "-H",
        "0b11",
        "--run-id",
        "2026-11-23",
    ];
    let mut run_args = vec![
        "k8s",
        "manifest",
        "--shards",
        "3",
        "--cpu",
        "1",
        "--memory",
        "256Mi",
        "run",
        // Credentials in the URL: the manifests refer to a Secret instead.
        "http://user:pw-x@svc:8080/hi",
        "-n",
        "30000",
        "-c",
        "30",
    ];
    run_args.extend(tricky);
    let run_job = volley(&run_args);
    assert!(run_job.status.success(), "{}", stderr(&run_job));
    assert!(!stdout(&run_job).contains("pw-x") && !stderr(&run_job).contains("pw-x"));
    assert!(stdout(&run_job).contains("secretKeyRef"), "{}", stdout(&run_job));
    assert!(
        stdout(&run_job).contains("\nkind: Job\n"),
        "YAML by default: {}",
        stdout(&run_job)
    );
    assert!(
        stderr(&run_job).contains("kubectl create secret generic volley-credentials --from-literal=arg-0='http://user:***@svc:8080/hi'"),
        "{}",
        stderr(&run_job)
    );
    let plan_args = [
        "k8s",
        "manifest",
        "--shards",
        "2",
        "--name",
        "plan-load",
        "--with",
        with.to_str().unwrap(),
        "plan",
        plan.to_str().unwrap(),
    ];
    let plan_job = volley(&plan_args);
    assert!(plan_job.status.success(), "{}", stderr(&plan_job));
    assert!(
        stdout(&plan_job).contains("\nkind: ConfigMap\n"),
        "{}",
        stdout(&plan_job)
    );
    assert!(stdout(&plan_job).contains("/plan/plan.yml"));
    // --output json keeps the JSON documents.
    let mut json_args = vec!["k8s", "manifest", "--output", "json"];
    json_args.extend(&plan_args[2..]);
    let plan_json = volley(&json_args);
    assert!(plan_json.status.success(), "{}", stderr(&plan_json));
    assert!(
        stdout(&plan_json).contains("\"kind\": \"ConfigMap\""),
        "{}",
        stdout(&plan_json)
    );
    // A run's wrk script travels in the ConfigMap too, its arguments kept
    // after the Job's own flags.
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/scripts/setup.lua");
    let script_job = volley(&[
        "k8s",
        "manifest",
        "--output",
        "json",
        "--shards",
        "2",
        "--name",
        "script-load",
        "run",
        "-s",
        script.to_str().unwrap(),
        "-d",
        "5s",
        "http://svc:8080/hi",
        "--",
        "one",
        "two",
    ]);
    assert!(script_job.status.success(), "{}", stderr(&script_job));
    let objects: Vec<serde_json::Value> = stdout(&script_job)
        .split("---\n")
        .filter(|doc| !doc.trim().is_empty())
        .map(|doc| serde_json::from_str(doc).expect("one JSON document per object"))
        .collect();
    let text = std::fs::read_to_string(&script).unwrap();
    assert_eq!(objects[0]["kind"], "ConfigMap");
    assert_eq!(
        objects[0]["data"]["setup.lua"],
        text.as_str(),
        "the script travels line for line"
    );
    let args: Vec<&str> = objects[1]["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .expect("the pod's args")
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(&args[..3], ["run", "-s", "/plan/setup.lua"], "{args:?}");
    assert_eq!(&args[args.len() - 3..], ["--", "one", "two"], "{args:?}");
    assert!(args.contains(&"--shard"), "{args:?}");
    let mut run_json_args = vec!["k8s", "manifest", "--output", "json"];
    run_json_args.extend(&run_args[2..]);
    let run_json = volley(&run_json_args);
    assert!(run_json.status.success(), "{}", stderr(&run_json));

    let Some(tool) = kubernetes_validate() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must validate the manifests (.ci/k8s-tools installs kubernetes-validate)"
        );
        eprintln!("note: kubernetes-validate not installed (.ci/k8s-tools); the schema check was skipped");
        return;
    };
    for (name, out) in [
        ("run.yaml", &run_job),
        ("plan.yaml", &plan_job),
        ("plan.json", &plan_json),
        ("script.json", &script_job),
    ] {
        let file = dir.path().join(name);
        std::fs::write(&file, &out.stdout).unwrap();
        let checked = validate(&tool, &file);
        assert!(
            checked.status.success(),
            "{name}: {}{}",
            stdout(&checked),
            stderr(&checked)
        );
    }
    // The YAML says what the JSON says, read by the YAML 1.1 reader
    // kubernetes-validate brings (PyYAML, in its environment).
    let python = tool.with_file_name("python");
    for (yaml, json) in [(&run_job, &run_json), (&plan_job, &plan_json)] {
        let mut read = Command::new(&python)
            .args([
                "-c",
                "import json, sys, yaml; print(json.dumps(list(yaml.safe_load_all(sys.stdin))))",
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("the kubernetes-validate environment's python runs");
        use std::io::Write;
        read.stdin.take().unwrap().write_all(&yaml.stdout).unwrap();
        let read = read.wait_with_output().unwrap();
        assert!(read.status.success(), "PyYAML could not read: {}", stdout(yaml));
        let from_yaml: Vec<serde_json::Value> =
            serde_json::from_slice::<Vec<serde_json::Value>>(&read.stdout)
                .unwrap()
                .into_iter()
                .map(without_start_time)
                .collect();
        assert_eq!(from_yaml, json_documents(&stdout(json)), "{}", stdout(yaml));
    }
    // The check can fail: a Job whose completions is not a number.
    let broken = dir.path().join("broken.yaml");
    std::fs::write(
        &broken,
        stdout(&run_job).replace("completions: 3\n", "completions: three\n"),
    )
    .unwrap();
    assert_ne!(stdout(&run_job), std::fs::read_to_string(&broken).unwrap());
    assert!(
        !validate(&tool, &broken).status.success(),
        "a broken Job must not validate"
    );
}

/// Runs volley with the stand-in kubectl first on PATH, bounded in time.
pub(super) fn volley_with_fake_kubectl(state: &Path, args: &[&str], fail_index: Option<u32>) -> Output {
    let index = fail_index.map(|i| i.to_string());
    let env: Vec<(&str, &str)> = index
        .as_deref()
        .map(|i| ("FAKE_KUBECTL_FAIL_INDEX", i))
        .into_iter()
        .collect();
    let child = with_fake_kubectl(state, args, &env)
        .spawn()
        .expect("volley starts");
    let pid = child.id() as i32;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(Duration::from_secs(60)) {
        Ok(out) => out.unwrap(),
        Err(_) => {
            // SAFETY: signals our own child process.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            panic!("volley {args:?} ran longer than 60 s");
        }
    }
}

/// volley with the stand-in kubectl first on PATH and `env` for it.
fn with_fake_kubectl(state: &Path, args: &[&str], env: &[(&str, &str)]) -> Command {
    let bin = state.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let fake = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/integration/k8s/fake_kubectl.py");
    let link = bin.join("kubectl");
    if !link.exists() {
        std::os::unix::fs::symlink(&fake, &link).unwrap();
    }
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let mut command = Command::new(env!("CARGO_BIN_EXE_volley"));
    command
        .args(args)
        .env("PATH", path)
        .env("FAKE_KUBECTL_STATE", state.join("cluster"))
        .env("FAKE_KUBECTL_VOLLEY", env!("CARGO_BIN_EXE_volley"))
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command
}

#[test]
fn k8s_run_applies_collects_merges_and_deletes() {
    let server = target();
    let target_url = url(&server, "/hi");
    let _quiet = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let merged = dir.path().join("merged.json");
    let args = [
        "k8s",
        "run",
        "--start-lead",
        "2s",
        "--timeout",
        "40s",
        "-o",
        merged.to_str().unwrap(),
        "--threshold",
        "errors<1%",
        "--name",
        "e2e",
        "--shards",
        "3",
        "run",
        &target_url,
        "-n",
        "3000",
        "-c",
        "3",
        "-t",
        "1",
    ];
    let out = volley_with_fake_kubectl(dir.path(), &args, None);
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("merged 3 of 3 shards") && text.contains("pass"),
        "{text}"
    );
    let report = read_report(&merged);
    assert_eq!(schema_violations(&report), Vec::<String>::new());
    assert_eq!(report["runs"][0]["summary"]["requests"], 3000);
    assert_eq!(report["merged"]["shards"].as_array().unwrap().len(), 3);
    let calls = std::fs::read_to_string(dir.path().join("cluster/calls.log")).unwrap();
    assert!(calls.starts_with("apply -f "), "{calls}");
    assert!(
        calls.contains("get pods -l volley.dev/run=e2e -o json"),
        "{calls}"
    );
    for index in 0..3 {
        assert!(calls.contains(&format!("logs e2e-{index}-fake")), "{calls}");
    }
    assert!(
        calls.trim_end().ends_with("delete job e2e --ignore-not-found"),
        "{calls}"
    );

    // A threshold broken on the merged run exits 3.
    let failing = dir.path().join("again");
    let args = [
        "k8s",
        "run",
        "--start-lead",
        "2s",
        "--threshold",
        "rps<1",
        "--keep",
        "--shards",
        "2",
        "run",
        &target_url,
        "-n",
        "400",
        "-c",
        "2",
        "-t",
        "1",
    ];
    let out = volley_with_fake_kubectl(&failing, &args, None);
    assert_eq!(out.status.code(), Some(3), "{}{}", stdout(&out), stderr(&out));
    let calls = std::fs::read_to_string(failing.join("cluster/calls.log")).unwrap();
    assert!(!calls.contains("delete"), "--keep keeps the Job: {calls}");
}

#[test]
fn k8s_run_names_the_shard_whose_pod_failed() {
    let server = target();
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "k8s",
        "run",
        "--start-lead",
        "1s",
        "--timeout",
        "30s",
        "--name",
        "broken",
        "--shards",
        "3",
        "run",
        &url(&server, "/hi"),
        "-n",
        "300",
        "-c",
        "3",
        "-t",
        "1",
    ];
    let out = volley_with_fake_kubectl(dir.path(), &args, Some(1));
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let err = stderr(&out);
    assert_eq!(
        err.lines().filter(|l| l.starts_with("error:")).count(),
        1,
        "{err}"
    );
    assert!(
        err.contains("shard 1 (pod broken-1-fake) failed: Error (exit code 7): error: the pod crashed"),
        "{err}"
    );
    let calls = std::fs::read_to_string(dir.path().join("cluster/calls.log")).unwrap();
    assert!(
        calls.contains("delete job broken"),
        "the failed Job is deleted: {calls}"
    );
}

/// The live view of `k8s run`: every pod's stream followed through `kubectl
/// logs -f` as the pod starts (one of them late), one of them slow and one
/// cut off once and followed again; every interval is shown whole, once,
/// and adds up to the merged report.
#[test]
fn k8s_run_follows_every_pod_live_as_they_start() {
    use super::follow::{dashboard_address, dashboard_events, wait};
    let server = target();
    let target_url = url(&server, "/sleep/2");
    let _quiet = timed();
    let dir = tempfile::tempdir().unwrap();
    let merged = dir.path().join("merged.json");
    let args = [
        "k8s",
        "run",
        "--start-lead",
        "5s",
        "--grace",
        "3s",
        "--timeout",
        "40s",
        "--dashboard=127.0.0.1:0",
        "-o",
        merged.to_str().unwrap(),
        "--name",
        "live",
        "--shards",
        "3",
        "run",
        &target_url,
        "-d",
        "4s",
        "-c",
        "3",
        "-t",
        "1",
        "--interval",
        "500ms",
    ];
    let env = [
        ("FAKE_KUBECTL_LATE_INDEX", "2"),
        ("FAKE_KUBECTL_LATE_S", "2.5"),
        ("FAKE_KUBECTL_SLOW_INDEX", "1"),
        ("FAKE_KUBECTL_DROP_INDEX", "0"),
    ];
    let mut child = with_fake_kubectl(dir.path(), &args, &env)
        .spawn()
        .expect("volley starts");
    let (addr, rest) = dashboard_address(&mut child);
    let events = dashboard_events(addr);
    let out = wait(child, Duration::from_secs(60));
    let err = rest.join().unwrap();
    assert!(out.status.success(), "{}{err}", stdout(&out));
    let report = read_report(&merged);
    let rows = report["runs"][0]["series"].as_array().unwrap();
    assert!(rows.len() >= 8, "{rows:?}");

    // On the terminal: every interval once, with all three shards.
    let text = stdout(&out);
    let shown: Vec<&str> = text.lines().filter(|l| l.ends_with("  3/3")).collect();
    assert_eq!(shown.len(), rows.len(), "{text}");
    assert!(!text.contains("lagging") && !text.contains("gone"), "{text}");
    // On the dashboard: the same rows, adding up to the merged report.
    let events = events.join().unwrap();
    let live: Vec<&serde_json::Value> = events
        .iter()
        .filter(|(name, _)| name == "interval")
        .map(|(_, data)| data)
        .collect();
    assert_eq!(live.len(), rows.len());
    for (k, event) in live.iter().enumerate() {
        for key in ["t_s", "requests", "p99", "histogram"] {
            assert_eq!(event["row"][key], rows[k][key], "interval {k}: {key}");
        }
    }
    assert_eq!(
        live.last().unwrap()["summary"]["requests"],
        report["runs"][0]["summary"]["requests"]
    );

    let calls = std::fs::read_to_string(dir.path().join("cluster/calls.log")).unwrap();
    let lines: Vec<&str> = calls.lines().collect();
    let first = |what: &str| lines.iter().position(|l| *l == what);
    assert_eq!(
        lines.iter().filter(|l| **l == "logs live-0-fake -f").count(),
        2,
        "a cut-off follower starts again: {calls}"
    );
    let first_poll = first("get pods -l volley.dev/run=live -o json").unwrap();
    let late = first("logs live-2-fake -f").expect("the late pod is followed");
    assert!(
        late > first_poll + 1,
        "the late pod is followed once it has started, not at the first look: {calls}"
    );
    assert!(first("logs live-1-fake -f").is_some(), "{calls}");
}
