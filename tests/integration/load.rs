//! Load models end to end: a fixed arrival rate (with latency from the
//! intended send time), ramps, a growing connection pool, and `volley step`
//! finding the knee of a target of known capacity. Every run is bounded by
//! a duration and goes to the embedded target on 127.0.0.1.

use super::support::{
    exclusive, num, paused_during, schema_violations, summary, target, target_with, timed, url, volley_json,
};
use std::process::Command;
use std::time::{Duration, Instant};

#[test]
fn fixed_rate_holds_its_count_and_schedule() {
    let _exclusive = timed();
    let server = target();
    let (out, report) = volley_json(&["run", "-R", "2000", "-d", "5s", &url(&server, "/hi")]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let s = summary(&report);
    let sent = num(&s["requests"]);
    assert!((sent - 10_000.0).abs() <= 100.0, "2000 req/s for 5 s sent {sent}");
    let schedule = &s["schedule"];
    assert!(num(&schedule["tool_lag_p50_ms"]) < 0.5, "pacer lag {schedule}");
    for row in report["runs"][0]["series"].as_array().unwrap() {
        assert_eq!(num(&row["load"]), 2000.0);
        assert!((num(&row["rps"]) - 2000.0).abs() < 100.0, "{row}");
    }
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("service time") && text.contains("tool lag"),
        "{text}"
    );
}

/// A rate far beyond what a worker can issue (ten billion a second): the
/// pacer is behind from its first ticket, yet each phase ends at its
/// duration, the connections are served meanwhile, and the backlog shows
/// as the pacer's own lag. (A pacer that never gave way went through every
/// ticket of the schedule first: minutes for this run.)
#[test]
fn a_rate_beyond_reach_still_ends_each_phase_on_time() {
    let _exclusive = exclusive();
    let server = target();
    let began = Instant::now();
    let (out, report) = volley_json(&[
        "run",
        "-R",
        "10000000000",
        "-w",
        "1s",
        "-d",
        "1s",
        &url(&server, "/hi"),
    ]);
    let took = began.elapsed();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        took < Duration::from_secs(15),
        "a 1 s warm-up and a 1 s run took {took:?}"
    );
    let s = summary(&report);
    assert!(num(&s["requests"]) >= 100.0, "{s}");
    assert_eq!(num(&s["errors"]), 0.0, "{s}");
    let schedule = &s["schedule"];
    assert!(num(&schedule["tool_lag_p99_ms"]) >= 100.0, "{schedule}");
}

/// A 1 s stall of the target during a 10 s run at 1000 req/s: latency from
/// the intended send time shows it, the service time mostly does not.
#[test]
fn a_stall_shows_in_latency_from_the_intended_time() {
    let _exclusive = timed();
    let server = target();
    let (out, report) = paused_during(&server, Duration::from_secs(4), 1000, || {
        volley_json(&["run", "-R", "1000", "-d", "10s", &url(&server, "/hi")])
    });
    assert!(out.status.success());
    let s = summary(&report);
    let (p50, p99) = (num(&s["latency_ms"]["p50"]), num(&s["latency_ms"]["p99"]));
    let service_p99 = num(&s["service_ms"]["p99"]);
    assert!(p99 >= 800.0, "p99 from the intended time {p99} ms");
    assert!(p50 < 5.0, "p50 stays near the unloaded latency: {p50} ms");
    assert!(
        service_p99 < p99 / 4.0,
        "service p99 {service_p99} ms vs {p99} ms"
    );
    let schedule = &s["schedule"];
    assert!(num(&schedule["late"]) >= 500.0, "{schedule}");
    assert!(num(&schedule["late_waiting_for_connection"]) > 0.0, "{schedule}");
    // Over time too: every interval has its service time beside its latency,
    // never above it (each request's service is part of its latency), and
    // the interval of the stall shows the queueing as a gap between them.
    assert!(
        schema_violations(&report).is_empty(),
        "{:#?}",
        schema_violations(&report)
    );
    let rows = report["runs"][0]["series"].as_array().unwrap();
    for row in rows {
        let service = &row["service"];
        for q in ["p50", "p90", "p99", "max"] {
            assert!(
                num(&service[q]) <= num(&row[q]) + 1e-9,
                "service {q} above latency: {row}"
            );
        }
    }
    let widest_gap = rows
        .iter()
        .flat_map(|row| ["p50", "p90", "p99"].map(|q| num(&row[q]) - num(&row["service"][q])))
        .fold(0.0, f64::max);
    assert!(
        widest_gap >= 300.0,
        "no interval shows the stall's queueing between latency and service time: {rows:?}"
    );
}

#[test]
fn closed_stages_ramp_the_connections() {
    let _exclusive = timed();
    let server = target();
    let (out, report) = volley_json(&[
        "run",
        "--stages",
        "1s:20,1s:20",
        "--interval",
        "500ms",
        &url(&server, "/sleep/10"),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let rows = report["runs"][0]["series"].as_array().unwrap();
    let targets: Vec<f64> = rows.iter().map(|r| num(&r["load"])).collect();
    assert_eq!(&targets[..4], &[10.0, 20.0, 20.0, 20.0], "{targets:?}");
    let first = num(&rows[0]["rps"]);
    let last = num(&rows[3]["rps"]);
    // Half-way up the ramp about a quarter of the connections are busy on
    // average; at the top all 20 are (about 1,800 req/s on 10 ms).
    assert!(last > 2.0 * first, "rps {first} then {last}");
    assert!(last > 1200.0, "{last}");
    assert_eq!(server.stats().connections_accepted, 20);
    assert!(String::from_utf8_lossy(&out.stdout).contains("load"));
}

#[test]
fn open_stages_ramp_the_rate() {
    let _exclusive = timed();
    let server = target();
    let (out, report) = volley_json(&[
        "run",
        "-R",
        "--stages",
        "1s:1000,1s:1000",
        "--interval",
        "500ms",
        &url(&server, "/hi"),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // 0 -> 1000 req/s over 1 s sends 500; then 1000 more.
    let sent = num(&summary(&report)["requests"]);
    assert!((sent - 1500.0).abs() <= 20.0, "{sent}");
    let rows = report["runs"][0]["series"].as_array().unwrap();
    let rps: Vec<f64> = rows.iter().map(|r| num(&r["rps"])).collect();
    // The first half second averages 250 req/s, the second 750, then 1000.
    assert!(
        (rps[0] - 250.0).abs() < 40.0 && (rps[1] - 750.0).abs() < 60.0,
        "{rps:?}"
    );
    assert!((rps[2] - 1000.0).abs() < 60.0, "{rps:?}");
}

#[test]
fn max_connections_grows_the_pool_instead_of_queueing() {
    let _exclusive = timed();
    let server = target();
    // 2 connections on a 20 ms endpoint carry 100 req/s; 400 needs about 8.
    let (out, report) = volley_json(&[
        "run",
        "-R",
        "400",
        "-c",
        "2",
        "--max-connections",
        "30",
        "-d",
        "2s",
        &url(&server, "/sleep/20"),
    ]);
    assert!(out.status.success());
    let s = summary(&report);
    assert!((num(&s["rps"]) - 400.0).abs() < 30.0, "{s}");
    assert!(num(&s["latency_ms"]["p90"]) < 60.0, "{s}");
    let opened = server.stats().connections_accepted;
    assert!((6..=30).contains(&opened), "opened {opened} connections");

    // Without room to grow, requests queue for the 2 connections.
    let (_, report) = volley_json(&[
        "run",
        "-R",
        "400",
        "-c",
        "2",
        "-d",
        "2s",
        &url(&server, "/sleep/20"),
    ]);
    let s = summary(&report);
    assert!(num(&s["schedule"]["late_waiting_for_connection"]) > 100.0, "{s}");
    assert!(
        num(&s["latency_ms"]["p90"]) > 200.0,
        "queueing shows in latency: {s}"
    );
}

/// The target handles 4 requests at once at 10 ms each: about 400 req/s
/// (a little less, as sleeps overshoot). The knee is at 300 or 400.
#[test]
fn step_finds_the_knee() {
    let _exclusive = timed();
    let server = target_with(Some(4));
    let (out, report) = volley_json(&[
        "step",
        "--rate-steps",
        "--levels",
        "100,200,300,400,600,800",
        "--step-duration",
        "2s",
        "--slo",
        "p99<100ms",
        &url(&server, "/sleep/10"),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let step = &report["step"];
    let max = num(&step["verdict"]["max_load"]);
    assert!(max == 300.0 || max == 400.0, "maximum load {max}: {step}");
    let levels = step["levels"].as_array().unwrap();
    assert_eq!(levels.len(), 6);
    let p99_at_max = levels
        .iter()
        .find(|l| num(&l["load"]) == max)
        .map(|l| num(&l["p99_ms"]))
        .unwrap();
    for level in levels.iter().filter(|l| num(&l["load"]) > max) {
        let p99 = num(&level["p99_ms"]);
        assert!(
            p99 > 100.0 && p99 > 3.0 * p99_at_max,
            "queueing shows past the knee: {level}"
        );
    }
    assert_eq!(
        report["runs"].as_array().unwrap().len(),
        6,
        "every level's full summary is kept"
    );
    assert!(
        report["runs"][5]["histogram"]
            .as_str()
            .unwrap()
            .starts_with("HISTF")
    );
    let text = String::from_utf8_lossy(&out.stdout);
    for needle in [
        "load (req/s)",
        "errors %",
        "responsiveness",
        "throughput",
        "maximum load",
        "tail latency",
        "error handling",
    ] {
        assert!(text.contains(needle), "{needle} missing: {text}");
    }
}

#[test]
fn step_stops_early_when_errors_pass_the_limit() {
    let _exclusive = exclusive();
    let server = target();
    let (out, report) = volley_json(&[
        "step",
        "--levels",
        "1,2,3",
        "--step-duration",
        "300ms",
        "--stop-errors",
        "10%",
        &url(&server, "/status/503"),
    ]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "every level failed: nothing succeeded"
    );
    assert_eq!(report["runs"].as_array().unwrap().len(), 1);
    assert_eq!(report["step"]["verdict"]["stopped_early"], true);
    assert!(report["step"]["verdict"]["max_load"].is_null());
}

#[test]
fn load_model_usage_errors() {
    for (args, needle) in [
        (vec!["run", "-R", "100", "--pipeline", "4"], "--pipeline"),
        (vec!["run", "--max-connections", "10"], "--max-connections"),
        (vec!["run", "-R", "100", "--stages", "1s:10"], "--stages"),
        (vec!["run", "--stages", "1s:10", "-d", "5s"], "duration"),
        (vec!["run", "--stages", "1s:x"], "invalid stage"),
        (
            vec!["run", "-R", "100", "-c", "10", "--max-connections", "5"],
            "below",
        ),
        (vec!["step", "-n", "5", "--levels", "1,2"], "--step-duration"),
        (vec!["step", "--levels", "5,2"], "rise"),
        (vec!["step", "--levels", "1", "--slo", "p99<soon"], "--slo"),
    ] {
        let mut all = args.clone();
        all.push("http://127.0.0.1:1/");
        let out = Command::new(env!("CARGO_BIN_EXE_volley"))
            .args(&all)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{all:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        assert!(err.contains(needle), "{all:?}: {err}");
    }
}
