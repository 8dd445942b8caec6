//! `--io`: io_uring where it runs, epoll otherwise, and a refused io_uring
//! (a seccomp profile answering EPERM, as Docker's and containerd's
//! default profiles do) costs a note, never the run.

use super::support::*;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};

/// Runs volley with `io_uring_setup` refused with EPERM by a seccomp
/// filter installed in the child before it starts: what a container's
/// default profile does.
fn volley_without_io_uring(args: &[&str]) -> std::process::Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_volley"));
    command
        .args(args)
        .env_remove("VOLLEY_IO")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: between fork and exec the closure only calls prctl with a
    // filter program on its own stack: async-signal-safe, no allocation.
    unsafe {
        command.pre_exec(|| {
            // Load the syscall number; io_uring_setup answers EPERM, the
            // rest is allowed.
            let program = [
                libc::sock_filter {
                    code: (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16,
                    jt: 0,
                    jf: 0,
                    k: 0,
                },
                libc::sock_filter {
                    code: (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16,
                    jt: 0,
                    jf: 1,
                    k: libc::SYS_io_uring_setup as u32,
                },
                libc::sock_filter {
                    code: (libc::BPF_RET | libc::BPF_K) as u16,
                    jt: 0,
                    jf: 0,
                    k: libc::SECCOMP_RET_ERRNO | libc::EPERM as u32,
                },
                libc::sock_filter {
                    code: (libc::BPF_RET | libc::BPF_K) as u16,
                    jt: 0,
                    jf: 0,
                    k: libc::SECCOMP_RET_ALLOW,
                },
            ];
            let fprog = libc::sock_fprog {
                len: program.len() as u16,
                filter: program.as_ptr() as *mut libc::sock_filter,
            };
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
                || libc::prctl(libc::PR_SET_SECCOMP, libc::SECCOMP_MODE_FILTER, &fprog) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = command.spawn().expect("volley starts under the filter");
    child.wait_with_output().expect("volley finishes")
}

/// 200 requests on 4 connections, the report written to `report`.
fn small_run<'a>(flags: &[&'a str], report: &'a std::path::Path, url: &'a str) -> Vec<&'a str> {
    let mut args = vec!["run"];
    args.extend_from_slice(flags);
    args.extend(["-c", "4", "-n", "200", "-o", report.to_str().unwrap(), url]);
    args
}

#[test]
fn a_refused_io_uring_falls_back_to_epoll_with_a_note() {
    let server = target();
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report.json");
    let url = url(&server, "/hi");
    for asked in ["auto", "uring"] {
        let out = volley_without_io_uring(&small_run(&["--io", asked], &report, &url));
        let text = stdout(&out);
        assert!(out.status.success(), "--io {asked}: {}{}", text, stderr(&out));
        let notes: Vec<&str> = text.lines().filter(|l| l.contains("note: io_uring")).collect();
        assert_eq!(notes.len(), 1, "--io {asked}: one note line expected:\n{text}");
        assert!(notes[0].contains("running on epoll"), "{}", notes[0]);
        assert!(
            text.contains("GET keep-alive, epoll"),
            "the header names epoll:\n{text}"
        );
        let json = read_report(&report);
        assert_eq!(json["runs"][0]["io"], "epoll");
        assert_eq!(summary(&json)["ok"], 200);
        assert!(schema_violations(&json).is_empty());
    }
}

#[test]
fn epoll_asked_by_flag_or_environment_is_used_without_a_note() {
    let server = target();
    let url = url(&server, "/hi");
    let by_flag = volley_json(&["run", "--io", "epoll", "-c", "4", "-n", "200", &url]);
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report.json");
    let by_env = volley_env(&small_run(&[], &report, &url), &[("VOLLEY_IO", "epoll")]);
    for (out, json) in [by_flag, (by_env, read_report(&report))] {
        assert!(out.status.success(), "{}", stderr(&out));
        assert!(!stdout(&out).contains("note: io_uring"), "{}", stdout(&out));
        assert_eq!(json["runs"][0]["io"], "epoll");
        assert_eq!(summary(&json)["ok"], 200);
    }
}

/// Where this machine runs io_uring, `auto` uses it for HTTP/1.1 and
/// says so; where it does not, it says why. Every request is answered
/// either way, over HTTP/1.1, pipelined, without keep-alive and, asked for
/// the ring outright, over h2c.
#[test]
fn auto_picks_io_uring_where_it_runs_and_every_protocol_works_on_it() {
    let server = target();
    let url = url(&server, "/bytes/10000");
    let cases: [&[&str]; 4] = [
        &["--io", "auto"],
        &["--io", "auto", "--pipeline", "8"],
        &["--io", "auto", "--no-keepalive"],
        &["--io", "uring", "--http2", "--streams", "8"],
    ];
    for extra in cases {
        let mut args = vec!["run", "-c", "6", "-t", "2", "-n", "3000"];
        args.extend_from_slice(extra);
        args.push(&url);
        let (out, json) = volley_json(&args);
        let text = stdout(&out);
        assert!(out.status.success(), "{extra:?}: {}", stderr(&out));
        let io = json["runs"][0]["io"].as_str().unwrap();
        match io {
            "io_uring" => assert!(!text.contains("note: io_uring"), "{text}"),
            "epoll" => assert!(text.contains("note: io_uring is not available here"), "{text}"),
            other => panic!("io {other}"),
        }
        assert!(text.contains(&format!("(on {io})")), "{text}");
        let s = summary(&json);
        assert_eq!(s["ok"], 3000, "{extra:?}: {s}");
        assert_eq!(s["errors"], 0, "{extra:?}: {s}");
    }
}

/// `auto` runs plain HTTP/2 in the closed model on io_uring where this
/// machine has it (there it waits for batches of responses), and leaves
/// the HTTP/2 runs that do not batch on epoll, cheaper there, without a
/// note: `--no-batch` and the open model.
#[test]
fn auto_runs_http2_on_epoll_unless_it_waits_for_batches() {
    let server = target();
    let url = url(&server, "/hi");
    let ring = if volley::net::uring::probe().is_ok() {
        "io_uring"
    } else {
        "epoll"
    };
    for (extra, io) in [
        (&["--streams", "4", "-n", "100"][..], ring),
        (&["-n", "100"][..], ring),
        (&["--streams", "4", "-n", "100", "--no-batch"][..], "epoll"),
        (&["--streams", "4", "-R", "200", "-n", "20"][..], "epoll"),
    ] {
        let mut args = vec!["run", "--io", "auto", "--http2", "-c", "2"];
        args.extend_from_slice(extra);
        args.push(&url);
        let (out, json) = volley_json(&args);
        assert!(out.status.success(), "{extra:?}: {}", stderr(&out));
        assert_eq!(json["runs"][0]["io"], io, "{extra:?}");
        assert_eq!(
            summary(&json)["ok"],
            num(&summary(&json)["requests"]),
            "{extra:?}"
        );
        assert!(!stdout(&out).contains("note: io_uring"), "{}", stdout(&out));
    }
}

/// Over HTTP/1.1 on io_uring with 8 connections or more a worker waits in
/// the kernel for a few responses at once: the counts stay exact, a timed
/// run ends on time, a server that stalls for a while is waited out within
/// the request timeout's bounds, and `--no-batch` runs the same.
#[test]
fn a_run_that_waits_for_batches_counts_exactly_and_ends_on_time() {
    assert_batches_count_exactly_and_end_on_time(&["-c", "16"]);
}

/// Plain HTTP/2 waits for batches too, with 8 streams or more in flight:
/// the same holds over 4 connections of 4 streams.
#[test]
fn an_http2_run_that_waits_for_batches_counts_exactly_and_ends_on_time() {
    assert_batches_count_exactly_and_end_on_time(&["--http2", "-c", "4", "--streams", "4"]);
}

/// The checks of the two tests above, for runs of `load` on one thread.
fn assert_batches_count_exactly_and_end_on_time(load: &[&str]) {
    let server = target();
    let hi = url(&server, "/hi");
    let args = |more: &[&'static str]| {
        let mut args = vec!["run", "--io", "uring", "-t", "1"];
        args.extend_from_slice(load);
        args.extend_from_slice(more);
        args.push(&hi);
        volley_json(&args)
    };
    for extra in [&["-n", "4000"][..], &["-n", "4000", "--no-batch"][..]] {
        let (out, json) = args(extra);
        assert!(out.status.success(), "{extra:?}: {}", stderr(&out));
        if json["runs"][0]["io"] != "io_uring" {
            eprintln!("io_uring unavailable here: skipped");
            return;
        }
        let s = summary(&json);
        assert_eq!(s["ok"], 4000, "{extra:?}: {s}");
        assert_eq!(s["errors"], 0, "{extra:?}: {s}");
    }
    // Half a second of a stalled server in the middle of a 1.5 s run.
    let began = std::time::Instant::now();
    let (out, json) = paused_during(&server, std::time::Duration::from_millis(400), 500, || {
        args(&["-d", "1500ms"])
    });
    let took = began.elapsed();
    assert!(out.status.success(), "{}", stderr(&out));
    let s = summary(&json);
    assert_eq!(s["errors"], 0, "{s}");
    assert!(num(&s["ok"]) > 100.0, "{s}");
    let elapsed = num(&s["elapsed_s"]);
    assert!((1.5..1.7).contains(&elapsed), "measured {elapsed} s");
    assert!(took < std::time::Duration::from_secs(10), "took {took:?}");
    // The stalled responses count the stall: the worker's waits did not
    // hide it.
    assert!(num(&s["latency_ms"]["max"]) >= 400.0, "{s}");
}
