//! The live merge's state: every shard's stream lines as they arrive, and
//! interval k of every shard merged into interval k once it can be shown.
//!
//! An interval is shown when every shard has sent it (or has finished its
//! run before it, or is gone), or, after the grace period from its first
//! part, as partial, naming the shards that lag. Intervals are shown in
//! order, a run's after the run before it, and merged by
//! [`crate::merge::merge_interval`], the same code `volley merge` sums the
//! finished reports' series with, so a complete interval shown live is the
//! merged report's row. A shard that stops writing (silent past the
//! gone-after time, its source ended without an end line, or an end line
//! saying it failed) is gone from its last interval on.
//!
//! Nothing here reads a clock or a file: lines and the time come in, events
//! go out ([`Event`]).

mod stream;

use crate::collector::SeriesRow;
use crate::plan::shard::Shard;
use crate::recorder::Snapshot;
use crate::report::stream::{End, EndState, Header, IntervalLine, Line, RunLine};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use stream::Slot;

/// How long a shard may be silent, at the least, before it counts as gone.
pub const GONE_AFTER_MIN: Duration = Duration::from_secs(10);

/// What the views are told.
#[derive(Debug)]
pub enum Event {
    /// The first interval is about to be shown: the whole plan (the shards'
    /// plans known so far, added up) and how many shards there are.
    Begin {
        plan: Value,
        count: u32,
    },
    /// A URL's first merged interval comes next.
    RunStarted(RunLine),
    Interval(Box<Shown>),
    /// A shard stopped writing; `last` says after what.
    Gone {
        label: String,
        last: String,
        why: String,
    },
    /// Every shard is past this run: its totals.
    RunDone {
        run: usize,
        total: Box<Snapshot>,
        elapsed_s: f64,
    },
}

/// One merged interval, as shown.
#[derive(Debug)]
pub struct Shown {
    pub run: usize,
    pub k: usize,
    pub row: SeriesRow,
    /// A plan file's items, each merged the same way.
    pub steps: Vec<SeriesRow>,
    /// The interval's counters and latency, all shards together.
    pub interval: Snapshot,
    /// The run so far, this interval included (and late parts of partial
    /// intervals before it).
    pub total: Snapshot,
    pub shards: IntervalShards,
}

/// Which shards an interval was made of.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct IntervalShards {
    pub reported: Vec<String>,
    /// Still running but had not sent it within the grace period.
    pub lagging: Vec<String>,
    pub gone: Vec<String>,
}

impl IntervalShards {
    pub fn partial(&self) -> bool {
        !self.lagging.is_empty() || !self.gone.is_empty()
    }
}

/// An interval waiting for its shards.
struct Pending {
    parts: Vec<Option<Box<IntervalLine>>>,
    first_at: Instant,
}

/// One URL of the run, all shards together.
#[derive(Default)]
struct RunBoard {
    info: Option<RunLine>,
    announced: bool,
    pending: BTreeMap<usize, Pending>,
    /// The next interval to show.
    next: usize,
    /// The end of the last shown interval, and of each item's.
    last_t: f64,
    steps_last_t: Vec<f64>,
    total: Snapshot,
    done: bool,
}

/// The settings of a live merge.
#[derive(Clone, Copy, Debug)]
pub struct Timing {
    /// How long an interval waits for its late shards before it is shown
    /// as partial.
    pub grace: Duration,
    /// How long a shard may be silent before it is gone; `None`: three
    /// intervals plus the plan's pause between URLs, at least
    /// [`GONE_AFTER_MIN`].
    pub gone_after: Option<Duration>,
}

/// The live merge of a run's shards.
pub struct Board {
    slots: Vec<Slot>,
    timing: Timing,
    /// Fewer streams than shards is allowed (`--partial`).
    partial: bool,
    runs: Vec<RunBoard>,
    began: bool,
}

impl Board {
    /// A board for the streams named `names` (file names, pods), each
    /// expected to be one shard of the same plan.
    pub fn new(names: Vec<String>, timing: Timing, partial: bool, now: Instant) -> Board {
        Board {
            slots: names
                .into_iter()
                .map(|name| Slot {
                    name,
                    header: None,
                    last_line: now,
                    starts_at: None,
                    runs: Vec::new(),
                    current_run: None,
                    end: None,
                    gone: None,
                    gone_told: false,
                    lagging: false,
                })
                .collect(),
            timing,
            partial,
            runs: Vec::new(),
            began: false,
        }
    }

    pub fn name(&self, slot: usize) -> &str {
        &self.slots[slot].name
    }

    fn first_header(&self) -> Option<(&Slot, &Header)> {
        self.slots.iter().find_map(|s| s.header.as_ref().map(|h| (s, h)))
    }

    /// Takes one line of stream `slot`; an error is a stream that does not
    /// belong to this run (or is not a stream).
    pub fn feed(&mut self, slot: usize, line: Line, now: Instant) -> Result<(), BoardError> {
        if let Line::Header(header) = &line {
            self.check_header(slot, header)?;
        }
        let name = self.slots[slot].name.clone();
        let entry = &mut self.slots[slot];
        entry.last_line = now;
        if entry.end.is_none() {
            // Silent for a while, but alive.
            entry.gone = None;
            entry.gone_told = false;
        }
        match line {
            Line::Header(header) => {
                entry.starts_at = header
                    .planned_start
                    .as_deref()
                    .and_then(|at| humantime::parse_rfc3339_weak(at).ok())
                    .and_then(|at| at.duration_since(std::time::SystemTime::now()).ok())
                    .map(|wait| now + wait);
                entry.header = Some(header);
            }
            Line::Run(run) => {
                entry.current_run = Some(run.run);
                entry.run(run.run);
                let board = self.run_board(run.run);
                if board.info.is_none() {
                    board.info = Some(run);
                }
            }
            Line::Interval(part) => {
                if entry.header.is_none() {
                    return Err(BoardError::NoHeader(name));
                }
                let (run, k) = (part.run, part.k);
                let received = &mut entry.run(run).received;
                *received = (*received).max(k + 1);
                let slots = self.slots.len();
                let board = self.run_board(run);
                if k < board.next {
                    // Shown already (as partial): it still counts in the totals.
                    let hist = histogram_of(&part.row)?;
                    board.total += &part.snapshot(hist)?;
                } else {
                    let pending = board.pending.entry(k).or_insert_with(|| Pending {
                        parts: (0..slots).map(|_| None).collect(),
                        first_at: now,
                    });
                    // A follower that reconnected may repeat a line: the first counts.
                    pending.parts[slot].get_or_insert(part);
                }
            }
            Line::RunEnd(end) => entry.run(end.run).ended = Some(end.intervals),
            Line::End(end) => {
                if end.state == EndState::Failed {
                    entry.gone = Some("it failed (see its own error output)".to_string());
                }
                entry.end = Some(end);
            }
        }
        Ok(())
    }

    fn check_header(&self, slot: usize, header: &Header) -> Result<(), BoardError> {
        let name = &self.slots[slot].name;
        let shard = header.shard.ok_or_else(|| BoardError::NotAShard(name.clone()))?;
        if let Some((first, known)) = self.first_header() {
            let count = known.shard.map_or(0, |s| s.count);
            if known.plan_hash != header.plan_hash || shard.count != count {
                return Err(BoardError::OtherPlan {
                    names: (name.clone(), first.name.clone()),
                    hashes: (header.plan_hash.clone(), known.plan_hash.clone()),
                });
            }
        }
        if let Some(other) = self.slots.iter().find(|s| {
            s.header
                .as_ref()
                .and_then(|h| h.shard)
                .is_some_and(|s| s.index == shard.index)
        }) {
            return Err(BoardError::Twice {
                shard,
                names: (other.name.clone(), name.clone()),
            });
        }
        let given = self.slots.len() as u32;
        if given > shard.count || (given < shard.count && !self.partial) {
            return Err(BoardError::Count {
                count: shard.count,
                given,
            });
        }
        Ok(())
    }

    fn run_board(&mut self, run: usize) -> &mut RunBoard {
        if self.runs.len() <= run {
            self.runs.resize_with(run + 1, RunBoard::default);
        }
        &mut self.runs[run]
    }

    /// The source of `slot` has ended for good (a pod's log after the pod
    /// ended): without an end line, the shard is gone.
    pub fn source_ended(&mut self, slot: usize) {
        let entry = &mut self.slots[slot];
        if entry.end.is_none() && entry.gone.is_none() {
            entry.gone = Some("its output ended without an end line".to_string());
        }
    }

    /// Whether `slot`'s stream has its end line.
    pub fn has_ended(&self, slot: usize) -> bool {
        self.slots[slot].end.is_some()
    }

    /// Marks a shard gone for a reason its source knows (a pod that failed).
    pub fn mark_gone(&mut self, slot: usize, why: String) {
        let entry = &mut self.slots[slot];
        if entry.end.is_none() {
            entry.gone = Some(why);
        }
    }

    fn gone_after(&self, slot: &Slot) -> Duration {
        if let Some(limit) = self.timing.gone_after {
            return limit;
        }
        let plan = slot
            .header
            .as_ref()
            .map(|h| (h.interval_s, h.plan["delay_s"].as_f64()));
        let (interval, delay) = plan.map_or((0.0, 0.0), |(i, d)| (i, d.unwrap_or(0.0)));
        GONE_AFTER_MIN.max(crate::sys::secs(3.0 * interval + delay))
    }

    /// Declares gone the shards that fell silent, and shows every interval
    /// that is ready; returns what the views are to show, in order.
    pub fn poll(&mut self, now: Instant) -> Result<Vec<Event>, BoardError> {
        let mut events = Vec::new();
        self.find_gone(now, &mut events);
        for run in 0..self.runs.len() {
            self.show_ready(run, now, &mut events)?;
            if !self.runs[run].done {
                break;
            }
        }
        Ok(events)
    }

    fn find_gone(&mut self, now: Instant, events: &mut Vec<Event>) {
        let over = |s: &Slot| s.end.is_some() || s.gone.is_some();
        let started: Vec<&Slot> = self.slots.iter().filter(|s| s.header.is_some()).collect();
        // A shard that has not written its header yet may still be coming
        // up (a pod being scheduled) while others run; once every started
        // shard is over, it is waited for no longer.
        let late_is_gone = !started.is_empty() && started.iter().all(|s| over(s));
        for i in 0..self.slots.len() {
            let slot = &self.slots[i];
            if over(slot) {
                continue;
            }
            let limit = self.gone_after(slot);
            let quiet_since = slot.starts_at.map_or(slot.last_line, |at| at.max(slot.last_line));
            let silent = now.saturating_duration_since(quiet_since) >= limit;
            if silent && (slot.header.is_some() || late_is_gone) {
                let why = format!(
                    "it wrote nothing for {}",
                    humantime::format_duration(Duration::from_secs(limit.as_secs()))
                );
                self.slots[i].gone = Some(why);
            }
        }
        for slot in &mut self.slots {
            if let Some(why) = &slot.gone
                && !std::mem::replace(&mut slot.gone_told, true)
            {
                events.push(Event::Gone {
                    label: slot.label(),
                    last: slot.last_interval(),
                    why: why.clone(),
                });
            }
        }
    }

    fn show_ready(&mut self, run: usize, now: Instant, events: &mut Vec<Event>) -> Result<(), BoardError> {
        loop {
            let k = self.runs[run].next;
            let shards = self.shards_of(run, k);
            let Some(pending) = self.runs[run].pending.get(&k) else {
                // No part of k, and no shard that may still send one: the run is over.
                if shards.lagging.is_empty() && !self.runs[run].done {
                    self.runs[run].done = true;
                    self.announce(run, events);
                    let board = &self.runs[run];
                    events.push(Event::RunDone {
                        run,
                        elapsed_s: board.last_t,
                        total: Box::new(board.total.clone()),
                    });
                }
                return Ok(());
            };
            if !shards.lagging.is_empty()
                && now.saturating_duration_since(pending.first_at) < self.timing.grace
            {
                return Ok(());
            }
            let pending = self.runs[run].pending.remove(&k).expect("looked up above");
            for slot in &mut self.slots {
                slot.lagging = shards.lagging.contains(&slot.label());
            }
            self.announce(run, events);
            let shown = self.merge(run, k, pending, shards)?;
            events.push(Event::Interval(Box::new(shown)));
        }
    }

    /// Where each shard stands on interval k of `run`.
    fn shards_of(&self, run: usize, k: usize) -> IntervalShards {
        let pending = self.runs[run].pending.get(&k);
        let mut shards = IntervalShards::default();
        for (i, slot) in self.slots.iter().enumerate() {
            if pending.is_some_and(|p| p.parts[i].is_some()) {
                shards.reported.push(slot.label());
            } else if slot.gone.is_some() {
                if !slot.done_with(run, k) {
                    shards.gone.push(slot.label());
                }
            } else if !slot.done_with(run, k) {
                shards.lagging.push(slot.label());
            }
        }
        shards
    }

    /// Tells the views the plan and the run, before the run's first interval.
    fn announce(&mut self, run: usize, events: &mut Vec<Event>) {
        if !std::mem::replace(&mut self.began, true) {
            let plans: Vec<&Value> = self
                .slots
                .iter()
                .filter_map(|s| s.header.as_ref().map(|h| &h.plan))
                .collect();
            let count = self.shard_count();
            if !plans.is_empty() {
                events.push(Event::Begin {
                    plan: crate::merge::whole_plan_of(&plans),
                    count,
                });
            }
        }
        let board = &mut self.runs[run];
        if !std::mem::replace(&mut board.announced, true) {
            let info = board.info.clone().unwrap_or_else(|| RunLine {
                run,
                url: String::new(),
                level: None,
                planned_s: None,
            });
            events.push(Event::RunStarted(info));
        }
    }

    /// Interval k of every shard that sent it, as one.
    fn merge(
        &mut self,
        run: usize,
        k: usize,
        pending: Pending,
        shards: IntervalShards,
    ) -> Result<Shown, BoardError> {
        let parts: Vec<Box<IntervalLine>> = pending.parts.into_iter().flatten().collect();
        let board = &mut self.runs[run];
        let rows: Vec<&SeriesRow> = parts.iter().map(|p| &p.row).collect();
        let (row, hist) = crate::merge::merge_interval(&rows, board.last_t)?;
        let items = parts.iter().map(|p| p.steps.len()).max().unwrap_or(0);
        board.steps_last_t.resize(items, 0.0);
        let mut steps = Vec::with_capacity(items);
        for (i, last_t) in board.steps_last_t.iter_mut().enumerate() {
            let rows: Vec<&SeriesRow> = parts.iter().filter_map(|p| p.steps.get(i)).collect();
            let (step, _) = crate::merge::merge_interval(&rows, *last_t)?;
            *last_t = step.t_s;
            steps.push(step);
        }
        board.last_t = row.t_s;
        board.next = k + 1;
        let interval = merged_counters(&parts, row.clone()).snapshot(hist)?;
        board.total += &interval;
        Ok(Shown {
            run,
            k,
            row,
            steps,
            interval,
            total: board.total.clone(),
            shards,
        })
    }

    /// Whether every stream has ended (or is gone) and everything is shown.
    pub fn over(&self) -> bool {
        self.slots.iter().all(|s| s.end.is_some() || s.gone.is_some()) && self.runs.iter().all(|r| r.done)
    }

    /// Each shard's standing, for the dashboard's table.
    pub fn standing(&self) -> Value {
        let shards: Vec<Value> = self
            .slots
            .iter()
            .map(|s| {
                json!({
                    "shard": s.label(),
                    "name": s.name,
                    "state": s.state(),
                    "last": s.last_interval(),
                })
            })
            .collect();
        json!({ "shards": shards })
    }

    /// How many shards the plan has (0 before any header).
    pub fn shard_count(&self) -> u32 {
        self.first_header()
            .and_then(|(_, h)| h.shard)
            .map_or(0, |s| s.count)
    }

    /// The streams' ends and the shards that are gone, once
    /// [`Board::over`]; the end lines are taken out of the board.
    pub fn take_outcome(&mut self) -> Outcome {
        let mut outcome = Outcome::default();
        for slot in &mut self.slots {
            let (label, last) = (slot.label(), slot.last_interval());
            match (slot.end.take(), &slot.gone) {
                (Some(end), _) if end.state != EndState::Failed => {
                    outcome.ended.push((slot.name.clone(), end))
                }
                (_, why) => outcome.gone.push(GoneShard {
                    label,
                    last,
                    why: why.clone().unwrap_or_else(|| "it did not end".to_string()),
                }),
            }
        }
        outcome
    }
}

/// How the streams ended.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Each stream that ended, by name, with its end line.
    pub ended: Vec<(String, End)>,
    pub gone: Vec<GoneShard>,
}

/// A shard that stopped without an end (or ended failed).
#[derive(Debug)]
pub struct GoneShard {
    /// Its index (or its stream's name, when it never wrote a header).
    pub label: String,
    /// Its last interval.
    pub last: String,
    pub why: String,
}

fn histogram_of(row: &SeriesRow) -> Result<hdrhistogram::Histogram<u64>, BoardError> {
    row.histogram
        .as_ref()
        .ok_or(BoardError::NoHistogram)?
        .histogram()
        .map_err(BoardError::Histogram)
}

/// A stream that does not belong to the run being followed, or a line that
/// does not add up; the stream is named as shown.
#[derive(Debug, thiserror::Error)]
pub enum BoardError {
    #[error("{0}: an interval line before the stream's header")]
    NoHeader(String),
    #[error("{0} is the stream of a run without --shard: a live merge adds up the shards of one run")]
    NotAShard(String),
    /// The stream's name and plan hash, then the first stream's.
    #[error(
        "{} streams a different plan than {} (plan hash {} vs {}): follow only the shards of one run",
        names.0, names.1, hashes.0, hashes.1
    )]
    OtherPlan {
        names: (String, String),
        hashes: (String, String),
    },
    #[error(
        "shard {}/{} is streamed twice ({} and {}): give each shard once",
        shard.index, shard.count, names.0, names.1
    )]
    Twice { shard: Shard, names: (String, String) },
    #[error(
        "the plan has {count} shards and {given} streams are followed: give every shard's stream once{}",
        if given < count { ", or --partial to follow without the others" } else { "" }
    )]
    Count { count: u32, given: u32 },
    #[error("an interval line without its histogram")]
    NoHistogram,
    /// An interval's histogram that does not decode.
    #[error("{0}")]
    Histogram(crate::histogram::DecodeError),
    #[error(transparent)]
    Counters(#[from] crate::report::stream::CounterError),
    #[error(transparent)]
    Merge(#[from] crate::merge::Mismatch),
}

/// The shards' counters of one interval added up, on the merged row.
fn merged_counters(parts: &[Box<IntervalLine>], row: SeriesRow) -> IntervalLine {
    let add = |pick: fn(&IntervalLine) -> &BTreeMap<String, u64>| {
        let mut sum: BTreeMap<String, u64> = BTreeMap::new();
        for part in parts {
            for (key, n) in pick(part) {
                *sum.entry(key.clone()).or_default() += n;
            }
        }
        sum
    };
    IntervalLine {
        run: parts[0].run,
        k: parts[0].k,
        row,
        ok: parts.iter().map(|p| p.ok).sum(),
        bytes: parts.iter().map(|p| p.bytes).sum(),
        min_ms: parts
            .iter()
            .filter(|p| p.min_ms > 0.0)
            .map(|p| p.min_ms)
            .reduce(f64::min)
            .unwrap_or(0.0),
        status: add(|p| &p.status),
        errors_by_kind: add(|p| &p.errors_by_kind),
        steps: Vec::new(),
    }
}

#[cfg(test)]
mod tests;
