//! `volley merge`: the reports of a sharded run (`--shard I/N`) put back
//! together into one ordinary report.
//!
//! Counters are added and histograms summed, so every merged percentile is
//! the percentile of the summed histogram, never an average of the shards'
//! percentiles. The series are aligned on the planned start: interval k of
//! every shard is summed into interval k, whatever the shards' wall clocks.

use crate::collector::SeriesRow;
use crate::histogram::{EncodedHistogram, IntervalHistogram};
use crate::plan::shard::Shard;
use crate::report::{
    Bucket, Latency, MergeInfo, MergedShard, PhaseTotals, RunReport, SavedReport, Schedule, StartInfo,
    StepStats, Summary, TlsHandshakes, ToolCpu,
};
use hdrhistogram::Histogram;
use serde_json::Value;
use std::collections::BTreeMap;

/// Why reports could not be merged: they are not the shards of one run, or
/// the merged report could not be judged or saved.
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    #[error("volley merge needs at least one report")]
    NoReports,
    #[error("'{0}' is not the report of a shard (run it with --shard I/N)")]
    NotAShard(String),
    #[error(
        "'{name}' ran a different plan than '{first}' (plan hash {hash} vs {first_hash}): merge only the shards of one run"
    )]
    OtherPlan {
        name: String,
        first: String,
        hash: String,
        first_hash: String,
    },
    #[error("shard {index}/{count} is given twice ('{first}' and '{second}'): give each shard once")]
    Twice {
        index: u32,
        count: u32,
        first: String,
        second: String,
    },
    #[error(
        "shard{s} {list} of {count} missing: give every shard's report, or --partial to merge without {them}",
        s = if missing.len() > 1 { "s" } else { "" },
        list = join(missing),
        them = if missing.len() > 1 { "them" } else { "it" }
    )]
    Missing { missing: Vec<u32>, count: u32 },
    #[error(
        "'{name}' has {runs} runs and '{first}' {first_runs}: a shard stopped early; merge complete shards"
    )]
    StoppedEarly {
        name: String,
        runs: usize,
        first: String,
        first_runs: usize,
    },
    /// A run's parts do not add up; `name` is the first shard's report.
    #[error("{mismatch} ('{name}')")]
    Run { mismatch: Mismatch, name: String },
    /// The criterion parser's message.
    #[error("--threshold: {0}")]
    Threshold(String),
    #[error(transparent)]
    Save(#[from] crate::run::SaveError),
}

/// How the shards' runs differ where they must not.
#[derive(Debug, thiserror::Error)]
pub enum Mismatch {
    #[error("the shards loaded different URLs: {0} and {1}")]
    Urls(String, String),
    #[error("the shards' plan steps differ at '{0}'")]
    Steps(String),
    #[error("a series row has no histogram (a report from before volley 0.1's merge support)")]
    NoHistogram,
    #[error("{0}")]
    Histogram(crate::histogram::DecodeError),
}

/// One report given to the merge, with the name it is shown by.
pub struct Input {
    pub name: String,
    pub report: SavedReport,
}

fn shard_of(input: &Input) -> Result<Shard, MergeError> {
    serde_json::from_value(input.report.plan["shard"].clone())
        .map_err(|_| MergeError::NotAShard(input.name.clone()))
}

/// Checks that the inputs are the shards of one plan, each once; returns
/// their shards (in input order), N and the missing indexes.
fn check_set(inputs: &[Input], partial: bool) -> Result<(Vec<Shard>, u32, Vec<u32>), MergeError> {
    let first = inputs.first().ok_or(MergeError::NoReports)?;
    let shards = inputs.iter().map(shard_of).collect::<Result<Vec<_>, _>>()?;
    let count = shards[0].count;
    let mut seen: BTreeMap<u32, &str> = BTreeMap::new();
    for (input, shard) in inputs.iter().zip(&shards) {
        if input.report.plan_hash != first.report.plan_hash || shard.count != count {
            let hash = |r: &SavedReport| r.plan_hash.as_deref().unwrap_or("none").to_string();
            return Err(MergeError::OtherPlan {
                name: input.name.clone(),
                first: first.name.clone(),
                hash: hash(&input.report),
                first_hash: hash(&first.report),
            });
        }
        if let Some(other) = seen.insert(shard.index, &input.name) {
            return Err(MergeError::Twice {
                index: shard.index,
                count,
                first: other.to_string(),
                second: input.name.clone(),
            });
        }
    }
    let missing: Vec<u32> = (0..count).filter(|i| !seen.contains_key(i)).collect();
    if !missing.is_empty() && !partial {
        return Err(MergeError::Missing { missing, count });
    }
    let runs = first.report.runs.len();
    if let Some(odd) = inputs.iter().find(|i| i.report.runs.len() != runs) {
        return Err(MergeError::StoppedEarly {
            name: odd.name.clone(),
            runs: odd.report.runs.len(),
            first: first.name.clone(),
            first_runs: runs,
        });
    }
    Ok((shards, count, missing))
}

fn join(list: &[u32]) -> String {
    list.iter().map(u32::to_string).collect::<Vec<_>>().join(", ")
}

/// Merges the reports of one sharded run.
pub fn merge(inputs: &[Input], partial: bool) -> Result<SavedReport, MergeError> {
    let (shards, count, missing) = check_set(inputs, partial)?;
    let reports: Vec<&SavedReport> = inputs.iter().map(|i| &i.report).collect();
    let first = reports[0];
    let mut runs = Vec::with_capacity(first.runs.len());
    for r in 0..first.runs.len() {
        let parts: Vec<&RunReport> = reports.iter().map(|rep| &rep.runs[r]).collect();
        runs.push(merge_run(&parts).map_err(|mismatch| MergeError::Run {
            mismatch,
            name: inputs[0].name.clone(),
        })?);
    }
    let mut merged_shards: Vec<MergedShard> = reports
        .iter()
        .zip(&shards)
        .map(|(rep, shard)| MergedShard {
            index: shard.index,
            skew_ms: rep.start.as_ref().map(|s| s.skew_ms),
        })
        .collect();
    merged_shards.sort_by_key(|s| s.index);
    let start = first.start.as_ref().map(|s| StartInfo {
        planned_start: s.planned_start.clone(),
        // The latest shard sets the merged run's skew.
        skew_ms: reports
            .iter()
            .filter_map(|rep| rep.start.as_ref().map(|s| s.skew_ms))
            .fold(f64::NEG_INFINITY, f64::max),
    });
    Ok(SavedReport {
        schema: first.schema.clone(),
        tool: first.tool.clone(),
        started_at: reports
            .iter()
            .map(|rep| rep.started_at.clone())
            .min()
            .unwrap_or_default(),
        plan: whole_plan(&reports),
        plan_hash: first.plan_hash.clone(),
        start,
        merged: Some(MergeInfo {
            count,
            shards: merged_shards,
            missing,
        }),
        runs,
        step: None,
        thresholds: Vec::new(),
        aborted_by: reports.iter().find_map(|rep| rep.aborted_by.clone()),
        interrupted: reports.iter().any(|rep| rep.interrupted),
        // The shards of one run share a --run-id; differing ids are kept
        // nowhere rather than picking one.
        run_id: first
            .run_id
            .clone()
            .filter(|id| reports.iter().all(|rep| rep.run_id.as_ref() == Some(id))),
        outputs: reports.iter().flat_map(|rep| rep.outputs.clone()).collect(),
    })
}

/// The whole plan: the first shard's, with the split quantities added back
/// up over the shards given and no shard of its own.
fn whole_plan(reports: &[&SavedReport]) -> Value {
    whole_plan_of(&reports.iter().map(|r| &r.plan).collect::<Vec<_>>())
}

/// `whole_plan` from the shards' recorded plans alone (what the live
/// merge has before any shard has finished).
pub fn whole_plan_of(plans: &[&Value]) -> Value {
    let mut plan = plans[0].clone();
    let sum = |key: &str| -> Value {
        let values: Vec<&Value> = plans.iter().map(|p| &p[key]).collect();
        if values.iter().all(|v| v.is_u64()) {
            Value::from(values.iter().filter_map(|v| v.as_u64()).sum::<u64>())
        } else if values.iter().all(|v| v.is_number()) {
            Value::from(values.iter().filter_map(|v| v.as_f64()).sum::<f64>())
        } else {
            plans[0][key].clone()
        }
    };
    if let Some(map) = plan.as_object_mut() {
        for key in ["connections", "requests", "max_connections", "threads", "rate"] {
            map.insert(key.to_string(), sum(key));
        }
        if let Some(stages) = map.get_mut("stages").and_then(Value::as_array_mut) {
            for (i, stage) in stages.iter_mut().enumerate() {
                let total: f64 = plans
                    .iter()
                    .filter_map(|p| p["stages"][i]["target"].as_f64())
                    .sum();
                stage["target"] = Value::from(total);
            }
        }
        // `get`: a map's index panics on a key a foreign plan may lack.
        if map.get("warmup").is_some_and(|w| w["requests"].is_u64()) {
            let total: u64 = plans
                .iter()
                .filter_map(|p| p["warmup"]["requests"].as_u64())
                .sum();
            map.insert("warmup".to_string(), serde_json::json!({ "requests": total }));
        }
        map.insert("shard".to_string(), Value::Null);
    }
    plan
}

fn sum_histograms<'a>(hists: impl Iterator<Item = &'a Histogram<u64>>) -> Histogram<u64> {
    let mut total = crate::recorder::new_latency_histogram();
    for h in hists {
        // Every histogram volley writes has the same bounds; a foreign one
        // that does not fit is clamped rather than dropped.
        if total.add(h).is_err() {
            for v in h.iter_recorded() {
                total.saturating_record_n(v.value_iterated_to(), v.count_at_value());
            }
        }
    }
    total
}

fn merged_latency(parts: &[&Latency], hist: &Histogram<u64>) -> Latency {
    let present: Vec<&&Latency> = parts.iter().filter(|l| l.max > 0.0).collect();
    let min = present.iter().map(|l| l.min).fold(f64::INFINITY, f64::min);
    let max = present.iter().map(|l| l.max).fold(0.0, f64::max);
    if present.is_empty() {
        return Latency::default();
    }
    Latency::from_histogram(hist, min, max)
}

fn rate(count: u64, secs: f64) -> f64 {
    if secs > 0.0 { count as f64 / secs } else { 0.0 }
}

fn add_maps<V: Clone>(
    maps: impl Iterator<Item = BTreeMap<String, V>>,
    add: impl Fn(&mut V, &V),
) -> BTreeMap<String, V> {
    let mut total = BTreeMap::new();
    for map in maps {
        for (k, v) in map {
            total.entry(k).and_modify(|t| add(t, &v)).or_insert(v);
        }
    }
    total
}

/// Merges summaries whose latency, service and failure histograms are given.
fn merge_summary(parts: &[&Summary], hists: [&Histogram<u64>; 3]) -> Summary {
    let requests: u64 = parts.iter().map(|s| s.requests).sum();
    let bytes: u64 = parts.iter().map(|s| s.bytes).sum();
    let elapsed_s = parts.iter().map(|s| s.elapsed_s).fold(0.0, f64::max);
    let pick = |f: fn(&Summary) -> &Latency| parts.iter().map(|s| f(s)).collect::<Vec<_>>();
    let schedules: Vec<&Schedule> = parts.iter().filter_map(|s| s.schedule.as_ref()).collect();
    let tls: Vec<&TlsHandshakes> = parts.iter().filter_map(|s| s.tls.as_ref()).collect();
    let mut distribution: Vec<Bucket> = parts[0].distribution.clone();
    for bucket in &mut distribution {
        bucket.count = parts
            .iter()
            .flat_map(|s| s.distribution.iter().filter(|b| b.label == bucket.label))
            .map(|b| b.count)
            .sum();
        bucket.percent = 100.0 * bucket.count as f64 / requests.max(1) as f64;
    }
    let user_s: f64 = parts.iter().map(|s| s.tool_cpu.user_s).sum();
    let sys_s: f64 = parts.iter().map(|s| s.tool_cpu.sys_s).sum();
    let threads: usize = parts.iter().map(|s| s.tool_cpu.threads).sum();
    let capacity = elapsed_s * threads as f64;
    Summary {
        requests,
        ok: parts.iter().map(|s| s.ok).sum(),
        errors: parts.iter().map(|s| s.errors).sum(),
        elapsed_s,
        rps: rate(requests, elapsed_s),
        bytes,
        bytes_per_s: rate(bytes, elapsed_s),
        latency_ms: merged_latency(&pick(|s| &s.latency_ms), hists[0]),
        service_ms: merged_latency(&pick(|s| &s.service_ms), hists[1]),
        failures_ms: merged_latency(&pick(|s| &s.failures_ms), hists[2]),
        schedule: (!schedules.is_empty()).then(|| Schedule {
            sent: schedules.iter().map(|s| s.sent).sum(),
            late: schedules.iter().map(|s| s.late).sum(),
            late_waiting_for_connection: schedules.iter().map(|s| s.late_waiting_for_connection).sum(),
            max_delay_ms: schedules.iter().map(|s| s.max_delay_ms).fold(0.0, f64::max),
            // The tool's lag is each shard's own: the worst shard's shows.
            tool_lag_p50_ms: schedules.iter().map(|s| s.tool_lag_p50_ms).fold(0.0, f64::max),
            tool_lag_p99_ms: schedules.iter().map(|s| s.tool_lag_p99_ms).fold(0.0, f64::max),
            tool_lag_max_ms: schedules.iter().map(|s| s.tool_lag_max_ms).fold(0.0, f64::max),
        }),
        tls: (!tls.is_empty()).then(|| TlsHandshakes {
            handshakes: tls.iter().map(|t| t.handshakes).sum(),
            resumed: tls.iter().map(|t| t.resumed).sum(),
            zero_rtt_tried: tls.iter().map(|t| t.zero_rtt_tried).sum(),
            zero_rtt_accepted: tls.iter().map(|t| t.zero_rtt_accepted).sum(),
            // No handshake histogram is saved: the slowest shard's figures.
            handshake_ms: tls
                .iter()
                .max_by(|a, b| a.handshake_ms.p99.total_cmp(&b.handshake_ms.p99))
                .map(|t| t.handshake_ms.clone())
                .unwrap_or_default(),
        }),
        // Each shard was refused on its own: the longest shows.
        refused_s: parts.iter().filter_map(|s| s.refused_s).reduce(f64::max),
        status: add_maps(parts.iter().map(|s| s.status.clone()), |t, v| *t += v),
        errors_by_kind: add_maps(parts.iter().map(|s| s.errors_by_kind.clone()), |t, v| *t += v),
        error_examples: add_maps(parts.iter().map(|s| s.error_examples.clone()), |_, _| {}),
        distribution,
        tool_cpu: ToolCpu {
            user_s,
            sys_s,
            utilisation: if capacity > 0.0 {
                (user_s + sys_s) / capacity
            } else {
                0.0
            },
            threads,
            saturated: parts.iter().any(|s| s.tool_cpu.saturated),
            peak_rss_bytes: parts.iter().map(|s| s.tool_cpu.peak_rss_bytes).max().unwrap_or(0),
        },
    }
}

/// Sums interval k of every shard into interval k.
fn merge_series(parts: &[&[SeriesRow]]) -> Result<Vec<SeriesRow>, Mismatch> {
    let len = parts.iter().map(|s| s.len()).max().unwrap_or(0);
    let mut merged: Vec<SeriesRow> = Vec::with_capacity(len);
    for k in 0..len {
        let rows: Vec<&SeriesRow> = parts.iter().filter_map(|s| s.get(k)).collect();
        let start_s = if k == 0 {
            0.0
        } else {
            merged.last().map_or(0.0, |r| r.t_s)
        };
        merged.push(merge_interval(&rows, start_s)?.0);
    }
    Ok(merged)
}

/// One interval of the shards (their rows k) as one row; `start_s` is where
/// the merged interval starts (the previous merged row's end, 0 for the
/// first). Returns the summed histogram too, for whoever keeps totals: the
/// live merge of `volley merge --follow` shows what this gives, so its rows
/// are the merged report's.
pub fn merge_interval(rows: &[&SeriesRow], start_s: f64) -> Result<(SeriesRow, Histogram<u64>), Mismatch> {
    let hists = rows
        .iter()
        .map(|r| r.histogram.as_ref().map(IntervalHistogram::histogram))
        .collect::<Option<Result<Vec<_>, _>>>()
        .ok_or(Mismatch::NoHistogram)?
        .map_err(Mismatch::Histogram)?;
    let hist = sum_histograms(hists.iter());
    let t_s = rows.iter().map(|r| r.t_s).fold(0.0, f64::max);
    let requests: u64 = rows.iter().map(|r| r.requests).sum();
    let pct = |q: f64| {
        if hist.is_empty() {
            0.0
        } else {
            hist.value_at_quantile(q) as f64 / 1000.0
        }
    };
    let row = SeriesRow {
        t_s,
        requests,
        errors: rows.iter().map(|r| r.errors).sum(),
        status_classes: std::array::from_fn(|c| rows.iter().map(|r| r.status_classes[c]).sum()),
        rps: rate(requests, (t_s - start_s).max(1e-6)),
        mean: if hist.is_empty() {
            0.0
        } else {
            hist.mean() / 1000.0
        },
        p50: pct(0.5),
        p90: pct(0.9),
        p99: pct(0.99),
        max: rows.iter().map(|r| r.max).fold(0.0, f64::max),
        load: rows.iter().map(|r| r.load).sum(),
        // Process samples are each shard's machine: they do not add up.
        target: None,
        tool: None,
        histogram: Some(IntervalHistogram::new(&hist)),
        // Rows keep service percentiles, not a histogram: they do not add up.
        service: None,
    };
    Ok((row, hist))
}

fn merge_run(parts: &[&RunReport]) -> Result<RunReport, Mismatch> {
    let first = parts[0];
    if let Some(odd) = parts.iter().find(|p| p.url != first.url) {
        return Err(Mismatch::Urls(first.url.clone(), odd.url.clone()));
    }
    let latency = sum_histograms(parts.iter().map(|p| &p.histogram.0));
    let optional = |f: fn(&RunReport) -> Option<&EncodedHistogram>| {
        let hists = parts
            .iter()
            .map(|p| f(p).map(|h| &h.0))
            .collect::<Option<Vec<_>>>();
        hists.map(|h| sum_histograms(h.into_iter()))
    };
    let service = optional(|p| p.service_histogram.as_ref());
    let failures = optional(|p| p.failures_histogram.as_ref());
    let empty = crate::recorder::new_latency_histogram();
    let summaries: Vec<&Summary> = parts.iter().map(|p| &p.summary).collect();
    let summary = merge_summary(
        &summaries,
        [
            &latency,
            service.as_ref().unwrap_or(&empty),
            failures.as_ref().unwrap_or(&empty),
        ],
    );
    let series: Vec<&[SeriesRow]> = parts.iter().map(|p| p.series.as_slice()).collect();
    let warmups: Vec<&PhaseTotals> = parts.iter().filter_map(|p| p.warmup.as_ref()).collect();
    let steps = first
        .steps
        .iter()
        .enumerate()
        .map(|(i, step)| merge_step(parts, i, &step.name))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(RunReport {
        url: first.url.clone(),
        protocol: first.protocol.clone(),
        // One backend when every shard ran on it; none when they differ.
        io: first
            .io
            .clone()
            .filter(|io| parts.iter().all(|p| p.io.as_ref() == Some(io))),
        load: None,
        warmup: (!warmups.is_empty()).then(|| {
            let requests = warmups.iter().map(|w| w.requests).sum();
            let elapsed_s = warmups.iter().map(|w| w.elapsed_s).fold(0.0, f64::max);
            PhaseTotals {
                requests,
                ok: warmups.iter().map(|w| w.ok).sum(),
                errors: warmups.iter().map(|w| w.errors).sum(),
                elapsed_s,
                rps: rate(requests, elapsed_s),
            }
        }),
        summary,
        series: merge_series(&series)?,
        target: None,
        tool_process: None,
        steps,
        iterations: parts.iter().map(|p| p.iterations).sum(),
        checks: merge_checks(parts),
        histogram: EncodedHistogram(latency),
        service_histogram: service.map(EncodedHistogram),
        failures_histogram: failures.map(EncodedHistogram),
        interrupted: parts.iter().any(|p| p.interrupted),
    })
}

/// A VU script's checks: each name's counts added, in the order the
/// shards first met them.
fn merge_checks(parts: &[&RunReport]) -> Vec<crate::report::CheckStats> {
    let mut merged: Vec<crate::report::CheckStats> = Vec::new();
    for check in parts.iter().flat_map(|p| &p.checks) {
        match merged.iter_mut().find(|m| m.name == check.name) {
            Some(known) => {
                known.passes += check.passes;
                known.fails += check.fails;
            }
            None => merged.push(check.clone()),
        }
    }
    merged
}

/// A scenario step: its latency from its series' summed histograms (no
/// service or failure histogram is kept per step, so those stay empty).
fn merge_step(parts: &[&RunReport], i: usize, name: &str) -> Result<StepStats, Mismatch> {
    let steps: Vec<&StepStats> = parts
        .iter()
        .map(|p| p.steps.get(i).filter(|s| s.name == name))
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| Mismatch::Steps(name.to_string()))?;
    let series = merge_series(&steps.iter().map(|s| s.series.as_slice()).collect::<Vec<_>>())?;
    let rows = series
        .iter()
        .filter_map(|r| r.histogram.as_ref().map(IntervalHistogram::histogram))
        .collect::<Result<Vec<_>, _>>()
        .map_err(Mismatch::Histogram)?;
    let latency = sum_histograms(rows.iter());
    let empty = crate::recorder::new_latency_histogram();
    let summaries: Vec<&Summary> = steps.iter().map(|s| &s.summary).collect();
    let mut summary = merge_summary(&summaries, [&latency, &empty, &empty]);
    summary.service_ms = Latency::default();
    summary.failures_ms = Latency::default();
    Ok(StepStats {
        name: name.to_string(),
        summary,
        series,
    })
}

/// The text block naming the merged shards and their start skews.
pub fn shards_block(report: &SavedReport) -> String {
    let Some(merged) = &report.merged else {
        return String::new();
    };
    let mut out = format!(
        "merged {} of {} shards (plan {})\n",
        merged.shards.len(),
        merged.count,
        report.plan_hash.as_deref().unwrap_or("?")
    );
    if let Some(start) = &report.start {
        out += &format!("  planned start {}\n", start.planned_start);
    }
    for shard in &merged.shards {
        out += &match shard.skew_ms {
            Some(skew) => format!(
                "  shard {}/{}  start skew {skew:+.1} ms\n",
                shard.index, merged.count
            ),
            None => format!("  shard {}/{}  (no --start-at)\n", shard.index, merged.count),
        };
    }
    if !merged.missing.is_empty() {
        out += &format!(
            "  PARTIAL: shard{} {} missing (--partial)\n",
            if merged.missing.len() > 1 { "s" } else { "" },
            join(&merged.missing)
        );
    }
    out
}

/// Where and how a merged report goes.
#[derive(Clone, Debug, Default)]
pub struct Output {
    pub file: Option<std::path::PathBuf>,
    pub html: Option<std::path::PathBuf>,
    /// The JSON report on stdout instead of the text.
    pub json: bool,
    /// Criteria besides the plan's own.
    pub thresholds: Vec<String>,
}

/// Checks the plan's and the given thresholds on the merged report, prints
/// it, writes the files, as a run finishes ([`crate::run::judge`],
/// [`crate::run::save`]); returns whether a threshold failed.
pub fn finish(merged: &mut SavedReport, output: &Output) -> Result<bool, MergeError> {
    let texts = merged.plan["thresholds"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c.as_str().map(str::to_string))
        .chain(output.thresholds.iter().cloned());
    let criteria = texts
        .map(|t| crate::slo::parse_criterion(&t).map_err(MergeError::Threshold))
        .collect::<Result<Vec<_>, _>>()?;
    let text = !output.json;
    if text {
        print!("{}", shards_block(merged));
        for run in &merged.runs {
            println!("\n{}", run.url);
            print!(
                "{}",
                crate::report::text::summary(run, crate::report::text::Detail::Normal)
            );
            print!("{}", crate::report::text::steps_table(run));
        }
    }
    crate::run::judge(merged, &criteria, text);
    let files = crate::run::Output {
        json_stdout: output.json,
        file: output.file.clone(),
        html: output.html.clone(),
        detail: crate::report::text::Detail::Normal,
        sinks: Default::default(),
    };
    crate::run::save(merged, &files)?;
    Ok(merged.thresholds.iter().any(|t| !t.passed))
}
