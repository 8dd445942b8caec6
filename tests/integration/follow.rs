//! `--stream` and `volley merge --follow`: three shards started as separate
//! processes write their streams while a follower started before them
//! merges them live; what it showed (read from its dashboard's event
//! stream) adds up to the shards' own rows, and its final report is the
//! very bytes `volley merge` writes from the shards' reports.

use crate::support::{num, read_report, stderr, stdout, target, timed, url, volley};
use base64::Engine;
use hdrhistogram::Histogram;
use hdrhistogram::serialization::Deserializer;
use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn spawn(args: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_volley"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("volley starts")
}

/// Shard `index` of `count`, streaming to `dir/s-I.jsonl` and saving its
/// report to `dir/r-I.json`.
fn spawn_shard(dir: &Path, index: u32, count: u32, args: &[&str]) -> Child {
    let stream = dir.join(format!("s-{index}.jsonl"));
    let report = dir.join(format!("r-{index}.json"));
    let shard = format!("{index}/{count}");
    let mut all: Vec<&str> = args.to_vec();
    all.extend([
        "--shard",
        &shard,
        "--stream",
        stream.to_str().unwrap(),
        "-o",
        report.to_str().unwrap(),
        "-q",
    ]);
    let mut child = spawn(&all);
    // Nothing reads its stdout: its summary must not fill a pipe.
    drain(child.stdout.take().unwrap());
    child
}

fn drain(from: impl Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut text = String::new();
        let _ = BufReader::new(from).read_to_string(&mut text);
        text
    })
}

/// Waits for a child at most `limit`, killing it past that.
pub(super) fn wait(mut child: Child, limit: Duration) -> Output {
    let deadline = Instant::now() + limit;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("a volley process ran past {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

fn streams(dir: &Path, count: u32) -> Vec<String> {
    (0..count)
        .map(|i| dir.join(format!("s-{i}.jsonl")).display().to_string())
        .collect()
}

fn reports(dir: &Path, count: u32) -> Vec<PathBuf> {
    (0..count).map(|i| dir.join(format!("r-{i}.json"))).collect()
}

/// The follower's dashboard address (from its stderr), and its stderr.
pub(super) fn dashboard_address(child: &mut Child) -> (String, std::thread::JoinHandle<String>) {
    let (tx, rx) = std::sync::mpsc::channel();
    let err = child.stderr.take().unwrap();
    let rest = std::thread::spawn(move || {
        let mut all = String::new();
        for line in BufReader::new(err).lines().map_while(Result::ok) {
            if let Some(addr) = line.strip_prefix("dashboard: http://") {
                let _ = tx.send(addr.split('/').next().unwrap_or("").to_string());
            }
            all += &line;
            all += "\n";
        }
        all
    });
    let addr = rx
        .recv_timeout(Duration::from_secs(20))
        .expect("the follower named its dashboard");
    (addr, rest)
}

/// Every event the dashboard at `addr` sends until it closes: HTTP/1.0, so
/// the body is the events as they are, to the end of the connection.
pub(super) fn dashboard_events(addr: String) -> std::thread::JoinHandle<Vec<(String, Value)>> {
    std::thread::spawn(move || {
        let mut conn = std::net::TcpStream::connect(&addr).unwrap();
        conn.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        conn.write_all(b"GET /events HTTP/1.0\r\n\r\n").unwrap();
        let mut text = String::new();
        let _ = conn.read_to_string(&mut text);
        let body = &text[text.find("\r\n\r\n").expect("a response") + 4..];
        body.split("\n\n")
            .filter_map(|block| {
                let event = block.lines().find_map(|l| l.strip_prefix("event: "))?;
                let data = block.lines().find_map(|l| l.strip_prefix("data: "))?;
                Some((event.to_string(), serde_json::from_str(data).unwrap()))
            })
            .collect()
    })
}

/// Decodes a histogram here, independently of volley's code.
fn decode(text: &Value) -> Histogram<u64> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text.as_str().unwrap())
        .unwrap();
    Deserializer::new().deserialize(&mut bytes.as_slice()).unwrap()
}

/// What schema/stream-v1.json finds wrong with each line of `text` (its
/// references into the report's schema resolved to schema/report-v1.json).
fn stream_violations(text: &str) -> Vec<String> {
    let report: Value = serde_json::from_str(include_str!("../../schema/report-v1.json")).unwrap();
    let stream: Value = serde_json::from_str(include_str!("../../schema/stream-v1.json")).unwrap();
    let registry = jsonschema::Registry::new()
        .add(
            "json-schema:///volley.report/1",
            jsonschema::Resource::from_contents(report),
        )
        .unwrap()
        .prepare()
        .unwrap();
    let validator = jsonschema::options()
        .with_registry(&registry)
        .with_base_uri("json-schema:///")
        .build(&stream)
        .expect("the stream's schema compiles");
    text.lines()
        .enumerate()
        .flat_map(|(i, line)| {
            let line: Value = serde_json::from_str(line).unwrap();
            validator
                .iter_errors(&line)
                .map(|e| format!("line {}: {e} at {}", i + 1, e.instance_path()))
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn three_shards_followed_live_add_up_to_their_merge() {
    let server = target();
    let dir = tempfile::tempdir().unwrap();
    let followed = dir.path().join("followed.json");
    let _quiet = timed();
    let mut args = vec!["merge", "--follow", "--grace", "5s", "--dashboard=127.0.0.1:0"];
    let files = streams(dir.path(), 3);
    args.extend(files.iter().map(String::as_str));
    args.extend(["-o", followed.to_str().unwrap()]);
    // The follower starts first: the streams do not exist yet.
    let mut follower = spawn(&args);
    let (addr, follower_err) = dashboard_address(&mut follower);
    let events = dashboard_events(addr);
    let target_url = url(&server, "/sleep/2");
    let shard_args = [
        "run",
        &target_url,
        "-d",
        "4s",
        "-c",
        "6",
        "-t",
        "1",
        "--interval",
        "500ms",
        "--start-at",
        "+2s",
    ];
    let shards: Vec<Child> = (0..3)
        .map(|i| spawn_shard(dir.path(), i, 3, &shard_args))
        .collect();
    for shard in shards {
        let out = wait(shard, Duration::from_secs(40));
        assert!(out.status.success(), "a shard failed: {}", stderr(&out));
    }
    let out = wait(follower, Duration::from_secs(30));
    let follower_err = follower_err.join().unwrap();
    assert!(out.status.success(), "{}{follower_err}", stdout(&out));
    let shown = stdout(&out);
    assert!(shown.contains("following 3 shard streams"), "{shown}");
    assert!(
        shown.contains("  shards\n") && shown.contains("  3/3\n"),
        "{shown}"
    );
    assert!(shown.contains("merged 3 of 3 shards"), "{shown}");

    // Every line of the streams is what the stream's schema says.
    for stream in &files {
        let text = std::fs::read_to_string(stream).unwrap();
        assert!(text.lines().count() >= 12, "{text}");
        assert_eq!(stream_violations(&text), Vec::<String>::new(), "{stream}");
    }
    let bad = r#"{"stream":"volley.stream/1","type":"interval","run":0,"k":-1}"#;
    assert!(!stream_violations(bad).is_empty(), "the schema check can fail");

    // The final report is the very bytes volley merge writes.
    let merged_path = dir.path().join("merged.json");
    let paths = reports(dir.path(), 3);
    let mut merge_args = vec!["merge"];
    merge_args.extend(paths.iter().map(|p| p.to_str().unwrap()));
    merge_args.extend(["-o", merged_path.to_str().unwrap()]);
    let out = volley(&merge_args);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        std::fs::read(&merged_path).unwrap(),
        std::fs::read(&followed).unwrap(),
        "the followed merge writes what volley merge does"
    );

    // What the follower showed, interval by interval.
    let events = events.join().unwrap();
    let live: Vec<&Value> = events
        .iter()
        .filter(|(name, _)| name == "interval")
        .map(|(_, data)| data)
        .collect();
    let shards: Vec<Value> = paths.iter().map(|p| read_report(p)).collect();
    let merged = read_report(&merged_path);
    let rows = merged["runs"][0]["series"].as_array().unwrap();
    assert!(rows.len() >= 8, "4 s at 500 ms: {} rows", rows.len());
    assert_eq!(live.len(), rows.len(), "one live interval per merged row");
    for (k, event) in live.iter().enumerate() {
        let row = &event["row"];
        assert_eq!(row["shards"]["partial"], false, "interval {k}: {row}");
        assert_eq!(row["shards"]["reported"], serde_json::json!(["0", "1", "2"]));
        let parts: Vec<&Value> = shards.iter().map(|s| &s["runs"][0]["series"][k]).collect();
        let sum: u64 = parts.iter().map(|r| r["requests"].as_u64().unwrap()).sum();
        assert_eq!(row["requests"].as_u64(), Some(sum), "interval {k}");
        let mut union = decode(&parts[0]["histogram"]);
        for part in &parts[1..] {
            union.add(decode(&part["histogram"])).unwrap();
        }
        let p99 = union.value_at_quantile(0.99) as f64 / 1000.0;
        assert_eq!(num(&row["p99"]), p99, "interval {k}: the union's p99");
        for key in ["t_s", "requests", "errors", "p50", "p99", "max", "histogram"] {
            assert_eq!(row[key], rows[k][key], "interval {k}: {key} as merged");
        }
    }
    let last = live.last().unwrap();
    let summary = &merged["runs"][0]["summary"];
    assert_eq!(
        last["summary"]["requests"], summary["requests"],
        "the last totals shown"
    );
    for key in ["min", "p50", "p99", "max"] {
        assert_eq!(
            last["summary"]["latency_ms"][key], summary["latency_ms"][key],
            "the live {key} of the whole run"
        );
    }
    // Totals grew as the intervals came.
    let totals: Vec<u64> = live
        .iter()
        .map(|e| e["summary"]["requests"].as_u64().unwrap())
        .collect();
    assert!(totals.windows(2).all(|w| w[1] > w[0]), "{totals:?}");
    let (name, last_event) = events.last().unwrap();
    assert_eq!(name, "final");
    assert_eq!(
        last_event["report"], merged,
        "the dashboard ends on the merged report"
    );
}

#[test]
fn a_shard_killed_mid_run_is_gone_and_fails_the_follow() {
    let server = target();
    let dir = tempfile::tempdir().unwrap();
    let _quiet = timed();
    let files = streams(dir.path(), 3);
    let follow_args = |extra: &[&'static str]| {
        let mut args = vec!["merge", "--follow", "--gone-after", "2s"];
        args.extend(files.iter().map(String::as_str));
        args.extend(extra);
        args
    };
    let follower = spawn(&follow_args(&[]));
    let partial_json = dir.path().join("partial.json");
    let partial_args = {
        let mut args = follow_args(&["--partial", "--json"]);
        args.extend(["-o", partial_json.to_str().unwrap()]);
        args
    };
    let partial = spawn(&partial_args);
    let target_url = url(&server, "/sleep/2");
    let shard_args = [
        "run",
        &target_url,
        "-d",
        "5s",
        "-c",
        "3",
        "-t",
        "1",
        "--interval",
        "500ms",
        "--start-at",
        "+1s",
    ];
    let mut shards: Vec<Child> = (0..3)
        .map(|i| spawn_shard(dir.path(), i, 3, &shard_args))
        .collect();
    // Shard 1 dies without a word a couple of seconds into its run.
    std::thread::sleep(Duration::from_millis(2500));
    shards[1].kill().unwrap();
    for shard in shards {
        let _ = wait(shard, Duration::from_secs(40));
    }
    let out = wait(follower, Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(1), "{}{}", stdout(&out), stderr(&out));
    let shown = stdout(&out);
    assert!(shown.contains("shard 1 is gone (last sent: interval "), "{shown}");
    assert!(
        shown.contains("2/3 gone 1"),
        "later intervals show it gone: {shown}"
    );
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("error: shard 1 of 3 stopped (last sent: interval ")
            && err.contains("wrote nothing for 2s")
            && err.contains("--partial"),
        "{err}"
    );
    // With --partial the others are merged, and the report says which is missing.
    let out = wait(partial, Duration::from_secs(30));
    assert!(out.status.success(), "{}", stderr(&out));
    let report = read_report(&partial_json);
    assert_eq!(report["merged"]["missing"], serde_json::json!([1]));
    assert_eq!(report["merged"]["shards"].as_array().unwrap().len(), 2);
}

#[test]
fn a_follow_refuses_what_is_not_one_runs_streams() {
    let server = target();
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).display().to_string();
    let hi = url(&server, "/hi");
    for (file, n, shard) in [
        ("a.jsonl", "60", "0/2"),
        ("b.jsonl", "80", "1/2"),
        ("c.jsonl", "60", "1/2"),
    ] {
        let out = volley(&[
            "run",
            &hi,
            "-n",
            n,
            "-c",
            "2",
            "--shard",
            shard,
            "--stream",
            &path(file),
            "-q",
        ]);
        assert!(out.status.success(), "{}", stderr(&out));
    }
    let refused = |args: &[&str], expect: &str| {
        let mut all = vec!["merge", "--follow", "--gone-after", "2s"];
        all.extend(args);
        let out = volley(&all);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stdout(&out));
        let err = stderr(&out);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(expect), "{err}");
    };
    refused(
        &[&path("a.jsonl"), &path("b.jsonl")],
        "streams a different plan than",
    );
    refused(&[&path("a.jsonl"), &path("a.jsonl")], "is streamed twice");
    refused(
        &[&path("a.jsonl")],
        "the plan has 2 shards and 1 streams are followed",
    );
    std::fs::write(path("report.json"), "{\n  \"schema\": \"volley.report/1\"\n}\n").unwrap();
    refused(
        &[&path("a.jsonl"), &path("report.json")],
        "is not a volley stream",
    );
    // Two finished streams merge at once, as their reports would.
    let out = volley(&["merge", "--follow", &path("a.jsonl"), &path("c.jsonl"), "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let report: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(
        report["runs"][0]["summary"]["requests"], 60,
        "-n 60 in two shards"
    );
    // The live flags belong to --follow.
    let out = volley(&["merge", &path("x.json"), "--dashboard"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("give them with --follow"),
        "{}",
        stderr(&out)
    );
}
