//! The human-readable report, in the spirit of latte's CONFIG / LOG /
//! SUMMARY blocks and Gatling's response-time distribution.

use super::{PhaseTotals, Report, RunReport, Summary};
use crate::collector::SeriesRow;
use crate::plan::Pace;
use std::fmt::Write;

/// How much the text report says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Detail {
    /// The summary block only (`-q`).
    Quiet,
    Normal,
    /// Also the resolved plan and the full percentile spectrum (`-v`).
    Verbose,
}

/// `1234567` as `1,234,567`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Bytes per second in the largest fitting unit.
pub fn bytes_rate(bps: f64) -> String {
    const UNITS: [&str; 4] = ["B/s", "KiB/s", "MiB/s", "GiB/s"];
    let mut value = bps;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.2} {}", UNITS[unit])
}

/// Milliseconds with precision that suits their size.
pub fn ms(value: f64) -> String {
    if value >= 100.0 {
        format!("{value:.1}")
    } else if value >= 10.0 {
        format!("{value:.2}")
    } else {
        format!("{value:.3}")
    }
}

/// A latency figure, or a dash where no request succeeded and there is
/// none to show (a 0.000 would read as an instant answer).
pub fn ms_or_dash(value: f64, any: bool) -> String {
    if any { ms(value) } else { "-".to_string() }
}

/// The header of the per-interval log.
pub fn log_header(watching: bool) -> String {
    let mut header = format!(
        "{:>9} {:>9} {:>11} {:>8} {:>9} {:>9} {:>9} {:>9}",
        "time s", "load", "req/s", "errors", "p50 ms", "p90 ms", "p99 ms", "max ms"
    );
    if watching {
        header.push_str(&format!(" {:>9} {:>7}", "tgt MiB", "tgt cpu"));
    }
    header
}

/// The req/s, errors and latency columns an interval row and its step rows
/// share, so the two stay aligned under one header.
/// An interval without a successful response has dashes for latency.
fn rate_and_latency(row: &SeriesRow) -> String {
    let any = row.requests > row.errors;
    format!(
        "{:>11} {:>8} {:>9} {:>9} {:>9} {:>9}",
        thousands(row.rps.round() as u64),
        thousands(row.errors),
        ms_or_dash(row.p50, any),
        ms_or_dash(row.p90, any),
        ms_or_dash(row.p99, any),
        ms_or_dash(row.max, any)
    )
}

/// One row of the per-interval log; with `watching`, the target's columns.
pub fn log_row(row: &SeriesRow, watching: bool) -> String {
    let mut line = format!(
        "{:>9.3} {:>9} {}",
        row.t_s,
        thousands(row.load.round() as u64),
        rate_and_latency(row)
    );
    if watching {
        // A target that exited leaves its columns empty.
        let (rss, cpu) = row.target.map_or(("-".to_string(), "-".to_string()), |t| {
            (format!("{:.1}", t.rss_mb), format!("{:.0}%", t.cpu_pct))
        });
        line.push_str(&format!(" {rss:>9} {cpu:>7}"));
    }
    line
}

/// A scenario step's row under an interval of the log.
pub fn step_log_row(name: &str, row: &SeriesRow) -> String {
    let name: String = name.chars().take(18).collect();
    format!("  {name:<18} {}", rate_and_latency(row))
}

/// The per-step table of a scenario's summary: each name whole (the name
/// column is as wide as the longest), so that two steps whose names begin
/// alike are told apart.
pub fn steps_table(run: &RunReport) -> String {
    let mut out = checks_table(run);
    if run.steps.is_empty() {
        return out;
    }
    let width = run
        .steps
        .iter()
        .map(|s| s.name.chars().count())
        .max()
        .unwrap_or(0)
        .max(24);
    let _ = writeln!(
        out,
        "steps\n  {:<width$} {:>10} {:>8} {:>9} {:>9} {:>9} {:>9}",
        "name", "requests", "errors", "req/s", "p50 ms", "p99 ms", "max ms"
    );
    for step in &run.steps {
        let s = &step.summary;
        let any = s.ok > 0;
        let _ = writeln!(
            out,
            "  {:<width$} {:>10} {:>8} {:>9} {:>9} {:>9} {:>9}",
            step.name,
            thousands(s.requests),
            thousands(s.errors),
            thousands(s.rps.round() as u64),
            ms_or_dash(s.latency_ms.p50, any),
            ms_or_dash(s.latency_ms.p99, any),
            ms_or_dash(s.latency_ms.max, any)
        );
        for (kind, example) in &s.error_examples {
            let _ = writeln!(out, "      {kind}: {example}");
        }
    }
    out
}

/// A VU script's iterations and checks: each check's share that held, as
/// k6 shows them.
fn checks_table(run: &RunReport) -> String {
    let mut out = String::new();
    if let Some(iterations) = run.iterations {
        let rate = iterations as f64 / run.summary.elapsed_s.max(1e-9);
        let _ = writeln!(out, "iterations {} ({:.1}/s)", thousands(iterations), rate);
    }
    if run.checks.is_empty() {
        return out;
    }
    let width = run
        .checks
        .iter()
        .map(|c| c.name.chars().count())
        .max()
        .unwrap_or(0)
        .max(24);
    let _ = writeln!(
        out,
        "checks\n  {:<width$} {:>10} {:>8} {:>8}",
        "name", "passes", "fails", "held"
    );
    for check in &run.checks {
        let total = check.passes + check.fails;
        let held = 100.0 * check.passes as f64 / total.max(1) as f64;
        let _ = writeln!(
            out,
            "  {:<width$} {:>10} {:>8} {:>7.2}%",
            check.name,
            thousands(check.passes),
            thousands(check.fails),
            held
        );
    }
    out
}

/// What a run is about to do, printed before it starts.
pub fn run_banner(report: &Report, url: &str) -> String {
    let plan = &report.plan;
    let stop = match (plan.stop.requests, plan.stop.duration) {
        (Some(n), Some(d)) => format!(
            "{} requests or {}, whichever first",
            thousands(n),
            humantime::format_duration(d)
        ),
        (Some(n), None) => format!("{} requests", thousands(n)),
        (None, Some(d)) => humantime::format_duration(d).to_string(),
        (None, None) => "until stopped".to_string(),
    };
    let mode = if plan.transport.keepalive {
        "keep-alive"
    } else {
        "new connection per request"
    };
    let load = match (plan.load.pace, &plan.load.stages) {
        (pace, Some(stages)) if pace.is_open() => format!(
            "req/s ramped through {}, {} connections",
            stage_list(stages),
            plan.load.connections
        ),
        (Pace::Rate(rate), _) => format!(
            "{} req/s on {} connections",
            thousands(rate.round() as u64),
            plan.load.connections
        ),
        (_, Some(stages)) => format!("connections ramped through {}", stage_list(stages)),
        (_, None) => format!("{} connections", thousands(plan.load.connections as u64)),
    };
    let mut growth = plan
        .load
        .max_connections
        .map(|m| format!(" (up to {m})"))
        .unwrap_or_default();
    if plan.transport.streams > 1 {
        growth += &format!(" x {} streams", plan.transport.streams);
        if plan.transport.coalesce {
            growth += " (coalesced)";
        }
    }
    let io = &plan.transport.io;
    let mut header = match &plan.request.scenario {
        None if let Some(users) = &plan.request.users => format!(
            "volley script {} on {url}\n  {}{growth} on {} threads, {}, {mode}, {}",
            users.source.path,
            load.replace("connections", "VUs")
                .replace("req/s", "iterations/s"),
            plan.load.threads,
            stop.replace("requests", "iterations"),
            io.backend.name()
        ),
        Some(sc) => format!(
            "volley plan {} ({} steps) on {url}\n  {load}{growth} on {} threads, {}, {mode}, {}",
            sc.file.display(),
            sc.stat_names.len(),
            plan.load.threads,
            stop.replace("requests", "iterations"),
            io.backend.name()
        ),
        None => format!(
            "volley {url}\n  {load}{growth} on {} threads, {stop}, {} {mode}, {}",
            plan.load.threads,
            plan.request.method,
            io.backend.name()
        ),
    };
    if let Some(why) = &io.refused {
        header += &format!("\n  note: {why}");
    }
    header
}

/// `10s:100,30s:100` as written.
fn stage_list(stages: &[crate::shape::Stage]) -> String {
    stages
        .iter()
        .map(|s| format!("{}:{}", humantime::format_duration(s.duration), s.target))
        .collect::<Vec<_>>()
        .join(",")
}

/// The warm-up's own line.
pub fn warmup_line(w: &PhaseTotals) -> String {
    format!(
        "warm-up: {} requests in {:.2} s ({} req/s), {} errors; not counted below",
        thousands(w.requests),
        w.elapsed_s,
        thousands(w.rps.round() as u64),
        thousands(w.errors)
    )
}

/// The summary block of one run.
pub fn summary(run: &RunReport, detail: Detail) -> String {
    let s: &Summary = &run.summary;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "summary{}",
        if run.interrupted { " (interrupted)" } else { "" }
    );
    let _ = writeln!(
        out,
        "  requests     {} ({} ok, {} failed)",
        thousands(s.requests),
        thousands(s.ok),
        thousands(s.errors)
    );
    if let Some(refused) = s.refused_s {
        let _ = writeln!(
            out,
            "  refused      connections refused for {refused:.2} s of the run's {:.2} s ({:.0}%)",
            s.elapsed_s,
            100.0 * refused / s.elapsed_s.max(1e-9)
        );
    }
    match &run.io {
        Some(io) => writeln!(out, "  protocol     {} (on {io})", run.protocol),
        None => writeln!(out, "  protocol     {}", run.protocol),
    }
    .ok();
    let _ = writeln!(out, "  elapsed      {:.2} s", s.elapsed_s);
    // Where nothing succeeded, the rate is of attempts: "43,251 req/s"
    // would read as a target that answered them.
    if s.ok == 0 && s.requests > 0 {
        let _ = writeln!(
            out,
            "  throughput   0 responses/s, {} attempts/s (none succeeded), {}",
            thousands(s.rps.round() as u64),
            bytes_rate(s.bytes_per_s)
        );
    } else {
        let _ = writeln!(
            out,
            "  throughput   {} req/s, {}",
            thousands(s.rps.round() as u64),
            bytes_rate(s.bytes_per_s)
        );
    }
    let l = &s.latency_ms;
    let any = s.ok > 0;
    let lat = |value: f64| ms_or_dash(value, any);
    let _ = writeln!(
        out,
        "latency (ms, successful requests{})",
        if s.schedule.is_some() {
            ", from the intended send time"
        } else {
            ""
        }
    );
    let _ = writeln!(
        out,
        "  min {}   mean {}   stdev {}   max {}",
        lat(l.min),
        lat(l.mean),
        lat(l.stdev),
        lat(l.max)
    );
    let _ = writeln!(
        out,
        "  p50 {}   p75 {}   p90 {}   p95 {}",
        lat(l.p50),
        lat(l.p75),
        lat(l.p90),
        lat(l.p95)
    );
    let _ = writeln!(
        out,
        "  p99 {}   p99.9 {}   p99.99 {}",
        lat(l.p99),
        lat(l.p999),
        lat(l.p9999)
    );
    if detail == Detail::Verbose
        && let hist = &run.histogram.0
        && !hist.is_empty()
    {
        let _ = writeln!(out, "  spectrum:");
        for q in [
            0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.995, 0.999, 0.9995, 0.9999, 0.99999, 1.0,
        ] {
            let v = hist.value_at_quantile(q) as f64 / 1000.0;
            let _ = writeln!(out, "    {:>9.5}%  {}", q * 100.0, ms(v));
        }
    }
    if let Some(schedule) = &s.schedule {
        let sv = &s.service_ms;
        let _ = writeln!(out, "service time (ms, from the actual send; queueing excluded)");
        let _ = writeln!(
            out,
            "  p50 {}   p90 {}   p99 {}   max {}",
            lat(sv.p50),
            lat(sv.p90),
            lat(sv.p99),
            lat(sv.max)
        );
        let _ = writeln!(
            out,
            "schedule: {} sent, {} late by 1 ms or more ({} waiting for a free connection), max delay {} ms",
            thousands(schedule.sent),
            thousands(schedule.late),
            thousands(schedule.late_waiting_for_connection),
            ms(schedule.max_delay_ms)
        );
        let _ = writeln!(
            out,
            "  tool lag (pacer wake-up): p50 {} ms, p99 {} ms, max {} ms",
            ms(schedule.tool_lag_p50_ms),
            ms(schedule.tool_lag_p99_ms),
            ms(schedule.tool_lag_max_ms)
        );
    }
    if let Some(tls) = &s.tls {
        // Only where 0-RTT was tried (HTTP/3 with --0rtt).
        let zero_rtt = match tls.zero_rtt_tried {
            0 => String::new(),
            tried => format!(
                "; 0-RTT {} tried, {} accepted",
                thousands(tried),
                thousands(tls.zero_rtt_accepted)
            ),
        };
        let _ = writeln!(
            out,
            "TLS handshakes {} ({} resumed{zero_rtt})  mean {} ms  p99 {} ms",
            thousands(tls.handshakes),
            thousands(tls.resumed),
            ms(tls.handshake_ms.mean),
            ms(tls.handshake_ms.p99)
        );
    }
    if !s.status.is_empty() {
        let _ = writeln!(out, "status codes");
        for (code, n) in &s.status {
            let _ = writeln!(out, "  {code:<6} {:>14}", thousands(*n));
        }
    }
    if !s.errors_by_kind.is_empty() {
        let _ = writeln!(out, "errors");
        for (kind, n) in &s.errors_by_kind {
            let example = s.error_examples.get(kind).map(String::as_str).unwrap_or("");
            let _ = writeln!(out, "  {kind:<9} {:>11}   e.g. {example}", thousands(*n));
        }
    }
    let _ = writeln!(out, "response times");
    for bucket in &s.distribution {
        let _ = writeln!(
            out,
            "  {:<26} {:>12} {:>7.2}%",
            bucket.label,
            thousands(bucket.count),
            bucket.percent
        );
    }
    if let Some(t) = &run.target {
        let _ = writeln!(
            out,
            "target process {}: RSS {:.1} MiB before the load, peak {:.1}, mean {:.1}; CPU mean {:.0}%, peak {:.0}%; threads up to {}, open files up to {}{}",
            t.pid,
            t.first_rss_mb,
            t.peak_rss_mb,
            t.mean_rss_mb,
            t.mean_cpu_pct,
            t.peak_cpu_pct,
            t.peak_threads,
            t.peak_fds,
            if t.exited {
                " (it exited during the run)"
            } else {
                ""
            }
        );
    }
    let cpu = &s.tool_cpu;
    let _ = writeln!(
        out,
        "tool: {:.2} s user + {:.2} s sys on {} threads = {:.0}% busy, peak memory {:.1} MiB",
        cpu.user_s,
        cpu.sys_s,
        cpu.threads,
        cpu.utilisation * 100.0,
        cpu.peak_rss_bytes as f64 / (1024.0 * 1024.0)
    );
    if cpu.saturated {
        let _ = writeln!(
            out,
            "  warning: volley's threads were {:.0}% busy: it, not the target, may have been the limit; \
             these numbers then describe the tool (add threads or cores)",
            cpu.utilisation * 100.0
        );
    }
    out
}

/// The resolved plan, for `-v`.
pub fn plan_block(report: &Report) -> String {
    let plan = serde_json::to_string_pretty(&report.plan).unwrap_or_default();
    format!("plan\n{plan}\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_numbers() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(1234567), "1,234,567");
        assert_eq!(bytes_rate(2048.0), "2.00 KiB/s");
        assert_eq!(ms(0.4123), "0.412");
        assert_eq!(ms(123.45), "123.5");
    }
}
