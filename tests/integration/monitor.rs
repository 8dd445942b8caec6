//! Watching the target: a spawned `volley serve` hit on /alloc shows its
//! memory rising; a dead PID is a clear error; compare reads the samples.

use super::support::{exclusive, num, stderr, stdout, volley, volley_json};

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn a_spawned_target_shows_its_memory_rising() {
    let _exclusive = exclusive();
    let port = free_port();
    let serve = format!("{} serve --addr 127.0.0.1:{port}", env!("CARGO_BIN_EXE_volley"));
    let url = format!("http://127.0.0.1:{port}/alloc/512");
    let (out, report) = volley_json(&[
        "run",
        "--spawn",
        &serve,
        "-c",
        "50",
        "-d",
        "2s",
        "--interval",
        "500ms",
        &url,
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let run = &report["runs"][0];
    let target = &run["target"];
    let (before, peak) = (num(&target["first_rss_mb"]), num(&target["peak_rss_mb"]));
    assert!(
        peak > before + 5.0,
        "RSS {before} MiB before, {peak} MiB at peak: {target}"
    );
    assert!(num(&target["mean_cpu_pct"]) > 10.0, "{target}");
    let series = run["series"].as_array().unwrap();
    assert!(
        series.iter().all(|r| r["target"]["rss_mb"].as_f64().is_some()),
        "every row has a sample"
    );
    assert!(num(&series.last().unwrap()["target"]["rss_mb"]) > before + 5.0);
    assert!(
        num(&run["tool_process"]["peak_rss_mb"]) > 0.0,
        "volley samples itself too"
    );
    assert!(stdout(&out).contains("target process"), "{}", stdout(&out));
    // The spawned target was stopped at the end.
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", port)).is_err(),
        "the spawned target is gone"
    );
}

#[test]
fn a_dead_pid_or_a_spawn_that_never_answers_is_a_clear_error() {
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id().to_string();
    child.wait().unwrap();
    let out = volley(&["run", "--monitor-pid", &pid, "-n", "1", "http://127.0.0.1:1/"]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("no process with PID") && err.lines().count() == 1,
        "{err}"
    );

    let port = free_port();
    let out = volley(&[
        "run",
        "--spawn",
        "sleep 0.2",
        "-n",
        "1",
        &format!("http://127.0.0.1:{port}/"),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("exited"), "{}", stderr(&out));
}

#[test]
fn compare_includes_the_target_when_both_runs_watched_it() {
    let _exclusive = exclusive();
    let port = free_port();
    let serve = format!("{} serve --addr 127.0.0.1:{port}", env!("CARGO_BIN_EXE_volley"));
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.json"), dir.path().join("b.json"));
    for (path, kb) in [(&a, "4"), (&b, "512")] {
        let url = format!("http://127.0.0.1:{port}/alloc/{kb}");
        let out = volley(&[
            "run",
            "--spawn",
            &serve,
            "-c",
            "50",
            "-d",
            "1500ms",
            "--interval",
            "250ms",
            "-q",
            "-o",
            path.to_str().unwrap(),
            &url,
        ]);
        assert!(out.status.success());
    }
    let out = volley(&["compare", a.to_str().unwrap(), b.to_str().unwrap()]);
    let table = stdout(&out);
    let rss = table
        .lines()
        .find(|l| l.starts_with("tgt MiB"))
        .unwrap_or_else(|| panic!("{table}"));
    assert!(rss.ends_with("significant: worse"), "{table}");
}

/// volley's own peak memory is its own, not its parent's: a child started
/// by `posix_spawn` (as `Command` does) used to report the peak of the
/// process that started it, through `getrusage`'s `ru_maxrss`.
#[test]
fn the_tools_peak_memory_is_not_its_parents() {
    let _serial = exclusive();
    const HELD: usize = 400 << 20;
    // Touched, so that it is resident in this (the parent) process.
    let held = std::hint::black_box(vec![1u8; HELD]);
    let server = super::support::target();
    let (out, report) = volley_json(&[
        "run",
        "-n",
        "200",
        "-c",
        "2",
        "-q",
        &super::support::url(&server, "/bytes/10"),
    ]);
    drop(held);
    let summary = super::support::summary(&report);
    assert_eq!(summary["ok"], 200, "{}", stderr(&out));
    let peak = num(&summary["tool_cpu"]["peak_rss_bytes"]);
    assert!(
        peak > 0.0 && peak < (HELD / 4) as f64,
        "volley's peak RSS {peak} bytes while its parent held {HELD}: {}",
        stderr(&out)
    );
}
