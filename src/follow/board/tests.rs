//! The board's tests: streams' lines fed in by hand, with the time.

use super::*;
use crate::plan::shard::Shard;
use crate::recorder::Recorder;
use crate::report::stream::RunEnd;
use crate::sample::{Outcome, Sample};

const GRACE: Duration = Duration::from_secs(2);

fn board(slots: usize, now: Instant) -> Board {
    let names = (0..slots).map(|i| format!("s{i}.jsonl")).collect();
    let timing = Timing {
        grace: GRACE,
        gone_after: Some(Duration::from_secs(10)),
    };
    Board::new(names, timing, false, now)
}

fn header(index: u32, count: u32, hash: &str) -> Line {
    Line::Header(Header {
        shard: Some(Shard { index, count }),
        plan_hash: hash.to_string(),
        planned_start: None,
        interval_s: 1.0,
        plan: json!({ "connections": 1, "threads": 1, "shard": { "index": index, "count": count } }),
    })
}

fn run_line() -> Line {
    Line::Run(RunLine {
        run: 0,
        url: "http://127.0.0.1:9/".to_string(),
        level: None,
        planned_s: Some(3.0),
    })
}

/// Interval k of a shard: `requests` successes of `ms` each, and one
/// timeout.
fn interval(k: usize, requests: u64, ms: u64) -> Line {
    let mut rec = Recorder::default();
    for _ in 0..requests {
        rec.record(&Sample {
            latency_us: ms * 1000,
            service_us: ms * 1000,
            bytes: 1,
            outcome: Outcome::Ok { status: 200 },
        });
    }
    rec.record(&Sample {
        latency_us: 1,
        service_us: 1,
        bytes: 0,
        outcome: Outcome::Failed(crate::sample::ErrorKind::Timeout),
    });
    let snap = rec.take();
    let mut collector = crate::collector::Collector::new(
        1,
        Duration::from_secs(1),
        crate::shape::LoadProfile::constant(1.0),
    );
    let elapsed = Duration::from_secs(k as u64 + 1);
    let mut row = None;
    collector.finished(0, 0, snap.clone(), elapsed, &mut |f| row = Some(f.row.clone()));
    let row = row.expect("the interval's row");
    Line::Interval(Box::new(IntervalLine::new(0, k, row, Vec::new(), &snap)))
}

fn started(slots: usize, now: Instant) -> Board {
    let mut b = board(slots, now);
    for i in 0..slots {
        b.feed(i, header(i as u32, slots as u32, "h"), now).unwrap();
        b.feed(i, run_line(), now).unwrap();
    }
    b
}

fn shown(events: &[Event]) -> Vec<&Shown> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Interval(s) => Some(&**s),
            _ => None,
        })
        .collect()
}

#[test]
fn an_interval_waits_for_every_shard_and_adds_them_up() {
    let t0 = Instant::now();
    let mut b = started(3, t0);
    let parts = [interval(0, 10, 1), interval(0, 20, 3), interval(0, 30, 5)];
    let mut union = crate::recorder::new_latency_histogram();
    for part in &parts {
        let Line::Interval(part) = part else {
            unreachable!()
        };
        union += histogram_of(&part.row).unwrap();
    }
    let [a, c, d] = parts;
    b.feed(0, a, t0).unwrap();
    b.feed(1, c, t0).unwrap();
    assert!(shown(&b.poll(t0).unwrap()).is_empty(), "shard 2 has not sent it");
    b.feed(2, d, t0).unwrap();
    // Interval 1 arrives from one shard early: it waits.
    b.feed(0, interval(1, 5, 1), t0).unwrap();
    let events = b.poll(t0).unwrap();
    assert!(matches!(events[0], Event::Begin { count: 3, .. }), "{events:?}");
    assert!(matches!(events[1], Event::RunStarted(_)), "{events:?}");
    let rows = shown(&events);
    assert_eq!(rows.len(), 1);
    let first = rows[0];
    assert_eq!((first.row.requests, first.row.errors), (63, 3));
    assert_eq!(
        first.interval.errors[crate::sample::ErrorKind::Timeout as usize],
        3
    );
    assert_eq!(first.total.ok, 60);
    let pct = |q: f64| union.value_at_quantile(q) as f64 / 1000.0;
    assert_eq!(first.row.p99, pct(0.99), "the percentile of the union");
    assert!((first.row.p99 - 5.0).abs() < 0.01, "{}", first.row.p99);
    assert_eq!(first.row.p50, pct(0.5));
    assert_eq!(first.interval.latency.hist, union);
    assert_eq!(first.interval.latency.min_us, 1000);
    assert_eq!(first.shards.reported, ["0", "1", "2"]);
    assert!(!first.shards.partial());
}

#[test]
fn a_lagging_shard_makes_the_interval_partial_after_the_grace() {
    let t0 = Instant::now();
    let mut b = started(3, t0);
    b.feed(0, interval(0, 10, 1), t0).unwrap();
    b.feed(1, interval(0, 10, 1), t0).unwrap();
    assert!(shown(&b.poll(t0 + GRACE / 2).unwrap()).is_empty());
    let events = b.poll(t0 + GRACE).unwrap();
    let rows = shown(&events);
    assert_eq!(rows[0].shards.lagging, ["2"]);
    assert!(rows[0].shards.partial());
    assert_eq!(rows[0].total.requests, 22);
    assert_eq!(b.standing()["shards"][2]["state"], "lagging");
    // Its late part still counts in the totals of the next interval.
    b.feed(2, interval(0, 10, 1), t0 + GRACE).unwrap();
    for i in 0..3 {
        b.feed(i, interval(1, 1, 1), t0 + GRACE).unwrap();
    }
    let events = b.poll(t0 + GRACE).unwrap();
    let rows = shown(&events);
    assert_eq!(rows[0].shards.reported.len(), 3);
    assert_eq!(rows[0].total.requests, 22 + 11 + 6);
    assert_eq!(b.standing()["shards"][2]["state"], "running");
}

#[test]
fn a_silent_shard_is_gone_from_its_last_interval_and_the_run_ends_without_it() {
    let t0 = Instant::now();
    let mut b = started(2, t0);
    b.feed(0, interval(0, 1, 1), t0).unwrap();
    b.feed(1, interval(0, 1, 1), t0).unwrap();
    let t1 = t0 + Duration::from_secs(1);
    b.feed(0, interval(1, 1, 1), t1).unwrap();
    b.feed(
        0,
        Line::RunEnd(RunEnd {
            run: 0,
            intervals: 2,
            interrupted: false,
        }),
        t1,
    )
    .unwrap();
    b.feed(
        0,
        Line::End(End {
            state: EndState::Finished,
            dropped: 0,
            report: Some(json!({})),
        }),
        t1,
    )
    .unwrap();
    assert!(!b.over());
    let events = b.poll(t0 + Duration::from_secs(10)).unwrap();
    let gone = events.iter().find_map(|e| match e {
        Event::Gone { label, last, .. } => Some((label.clone(), last.clone())),
        _ => None,
    });
    assert_eq!(gone, Some(("1".to_string(), "interval 0".to_string())));
    let rows = shown(&events);
    assert_eq!(rows.len(), 2, "{events:?}");
    assert_eq!(rows[1].shards.gone, ["1"]);
    assert!(events.iter().any(|e| matches!(e, Event::RunDone { .. })));
    assert!(b.over());
    let outcome = b.take_outcome();
    assert_eq!(outcome.ended.len(), 1);
    assert_eq!(outcome.gone[0].label, "1");
    assert!(
        outcome.gone[0].why.contains("wrote nothing for 10s"),
        "{outcome:?}"
    );
}

#[test]
fn a_shard_not_started_yet_is_waited_for_while_others_run() {
    let t0 = Instant::now();
    let mut b = board(2, t0);
    b.feed(0, header(0, 2, "h"), t0).unwrap();
    b.feed(0, run_line(), t0).unwrap();
    let later = t0 + Duration::from_secs(9);
    b.feed(0, interval(0, 1, 1), later).unwrap();
    b.poll(t0 + Duration::from_secs(11)).unwrap();
    assert_eq!(b.standing()["shards"][1]["state"], "waiting");
    assert_eq!(b.standing()["shards"][0]["state"], "running");
}

#[test]
fn streams_of_another_plan_or_shard_twice_are_refused() {
    let t0 = Instant::now();
    let mut b = board(2, t0);
    b.feed(0, header(0, 2, "h"), t0).unwrap();
    let err = b.feed(1, header(1, 2, "other"), t0).unwrap_err().to_string();
    assert!(err.contains("streams a different plan than s0.jsonl"), "{err}");
    let err = b.feed(1, header(0, 2, "h"), t0).unwrap_err().to_string();
    assert!(
        err.contains("shard 0/2 is streamed twice (s0.jsonl and s1.jsonl)"),
        "{err}"
    );
    let err = board(2, t0)
        .feed(0, header(0, 3, "h"), t0)
        .unwrap_err()
        .to_string();
    assert!(err.contains("the plan has 3 shards and 2 streams"), "{err}");
    let err = board(1, t0)
        .feed(0, interval(0, 1, 1), t0)
        .unwrap_err()
        .to_string();
    assert!(err.contains("before the stream's header"), "{err}");
}
