//! `--shard I/N`: one slice of a plan, so that N processes (or pods) run
//! together what one run would, and `volley merge` puts them back together.
//!
//! The split is done on the resolved [`Plan`] by value: connections,
//! `--max-connections`, `-n` (iterations of a plan file) and a count warm-up
//! are divided with the remainder spread over the first shards, so the parts
//! add up exactly; a rate and `--stages` targets are scaled by 1/N. With a
//! rate, arrivals are striped: global arrival k belongs to shard k mod N
//! ([`Shard::phase`] offsets the shard's pacer), so the merged schedule is
//! the single run's.

use super::{Pace, Plan, PlanError, Warmup, share};
use serde::{Deserialize, Serialize};
use std::time::{Duration, SystemTime};

/// Which slice of the plan this run is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    /// 0-based, below `count`.
    pub index: u32,
    /// How many shards the whole plan is split into.
    pub count: u32,
}

impl Shard {
    /// Parses `I/N` with 0 <= I < N.
    pub fn parse(text: &str) -> Result<Shard, PlanError> {
        let bad = || PlanError::Shard(text.to_string());
        let (i, n) = text.trim().split_once('/').ok_or_else(bad)?;
        let index: u32 = i.trim().parse().map_err(|_| bad())?;
        let count: u32 = n.trim().parse().map_err(|_| bad())?;
        if count == 0 || index >= count {
            return Err(bad());
        }
        Ok(Shard { index, count })
    }

    /// This shard's part of `total`, the remainder going to the first shards.
    pub fn part(&self, total: u64) -> u64 {
        share(total, self.count as usize, self.index as usize)
    }

    /// The open model's offset of this shard's arrivals, in arrivals of the
    /// shard's own schedule: shard I takes global arrivals I, I+N, I+2N...
    pub fn phase(&self) -> f64 {
        f64::from(self.index) / f64::from(self.count)
    }
}

/// FNV-1a, 64 bits: a stable identity for a plan's JSON (not a secret).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, b| {
        (hash ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The hash of a recorded plan, leaving out what differs between the shards
/// of one run or the machines they run on (the shard itself, the thread
/// count, a watched process id).
pub fn hash_recorded_plan(plan: &serde_json::Value) -> String {
    let mut plan = plan.clone();
    if let Some(map) = plan.as_object_mut() {
        for key in ["shard", "threads", "monitor_pid"] {
            map.remove(key);
        }
    }
    format!("{:016x}", fnv1a(plan.to_string().as_bytes()))
}

impl Plan {
    /// The hash of the whole plan this run belongs to: taken before the
    /// split and kept on the sharded plan, so every shard reports the same.
    pub fn whole_plan_hash(&self) -> String {
        match &self.whole_hash {
            Some(hash) => hash.clone(),
            None => hash_recorded_plan(&serde_json::to_value(self).expect("plans always serialise")),
        }
    }

    /// Shard `shard`'s slice of this (whole) plan.
    pub fn into_shard(mut self, shard: Shard) -> Result<Plan, PlanError> {
        self.whole_hash = Some(self.whole_plan_hash());
        let n = u64::from(shard.count);
        let too_many = |what: &'static str, total: u64| PlanError::ShardTooFine {
            index: shard.index,
            count: shard.count,
            what,
            total,
        };
        let factor = 1.0 / n as f64;
        let load = &mut self.load;
        match (&mut load.stages, load.pace) {
            (Some(stages), pace) => {
                stages.iter_mut().for_each(|s| s.target *= factor);
                if !pace.is_open() {
                    // Closed model: the stages are the connections; the peak
                    // of the scaled ramp is this shard's pool.
                    let peak = stages.iter().map(|s| s.target).fold(0.0, f64::max);
                    load.connections = peak.ceil().max(1.0) as usize;
                }
            }
            (None, Pace::Rate(rate)) => load.pace = Pace::Rate(rate * factor),
            (None, Pace::Closed | Pace::Staged) => {}
        }
        if load.stages.is_none() || load.pace.is_open() {
            let part = shard.part(load.connections as u64);
            if part == 0 {
                return Err(too_many("connections", load.connections as u64));
            }
            load.connections = part as usize;
        }
        if let Some(max) = load.max_connections {
            load.max_connections = Some((shard.part(max as u64) as usize).max(load.connections));
        }
        load.threads = load.threads.min(load.connections).max(1);
        let stop = &mut self.stop;
        if let Some(requests) = stop.requests {
            let part = shard.part(requests);
            if part == 0 {
                return Err(too_many("requests", requests));
            }
            stop.requests = Some(part);
        }
        if let Some(Warmup::Requests(w)) = stop.warmup {
            stop.warmup = Some(Warmup::Requests(shard.part(w))).filter(|_| shard.part(w) > 0);
        }
        self.shard = Some(shard);
        Ok(self)
    }
}

/// `--start-at`: an RFC 3339 instant in UTC (`2026-11-23T14:00:00Z`) or an
/// offset from now (`+30s`).
pub fn parse_start_at(text: &str, now: SystemTime) -> Result<SystemTime, PlanError> {
    let text = text.trim();
    if let Some(offset) = text.strip_prefix('+') {
        let d = humantime::parse_duration(offset.trim()).map_err(|error| PlanError::StartAtOffset {
            text: text.to_string(),
            error,
        })?;
        return Ok(now + d);
    }
    humantime::parse_rfc3339_weak(text).map_err(|error| PlanError::StartAtTime {
        text: text.to_string(),
        error,
    })
}

/// The planned start of a run and how late it may come up.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StartAt {
    pub at: SystemTime,
    pub tolerance: Duration,
}

/// A shard that came up after its start time and its tolerance.
#[derive(Debug, thiserror::Error)]
#[error(
    "this shard came up {:.3}s after its start time {} (tolerance {}): it would run a misaligned slice; start the shards again with a later --start-at or raise --start-tolerance",
    late.as_secs_f64(),
    humantime::format_rfc3339_millis(start.at),
    humantime::format_duration(start.tolerance)
)]
pub struct LateStart {
    pub start: StartAt,
    pub late: Duration,
}

impl StartAt {
    /// Refuses a start already missed by more than the tolerance.
    pub fn check_not_late(&self, now: SystemTime) -> Result<(), LateStart> {
        match now.duration_since(self.at) {
            Ok(late) if late > self.tolerance => Err(LateStart { start: *self, late }),
            _ => Ok(()),
        }
    }

    /// Now minus the planned start, in milliseconds (late is positive).
    pub fn skew_ms(&self, now: SystemTime) -> f64 {
        match now.duration_since(self.at) {
            Ok(late) => late.as_secs_f64() * 1000.0,
            Err(early) => -early.duration().as_secs_f64() * 1000.0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_shards() {
        assert_eq!(Shard::parse("1/3").unwrap(), Shard { index: 1, count: 3 });
        for bad in ["3/3", "0/0", "1", "a/2", "-1/2", "1/2/3"] {
            assert!(Shard::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn parts_add_up() {
        for (total, n) in [(30_000u64, 3u32), (50, 3), (7, 7), (10, 4)] {
            let sum: u64 = (0..n).map(|index| Shard { index, count: n }.part(total)).sum();
            assert_eq!(sum, total);
        }
    }

    #[test]
    fn striped_phases_interleave_the_global_schedule() {
        // Shard I's arrival j at rate R/N with phase I/N falls at global
        // arrival j*N + I of the rate R schedule.
        let (rate, n) = (3000.0, 3u32);
        let whole = crate::shape::LoadProfile::constant(rate);
        let mut times: Vec<f64> = Vec::new();
        for index in 0..n {
            let shard = Shard { index, count: n };
            let part = crate::shape::LoadProfile::constant(rate / f64::from(n));
            for j in 0..100 {
                times.push(part.time_of_count(j as f64 + shard.phase()).unwrap());
            }
        }
        times.sort_by(f64::total_cmp);
        for (k, t) in times.iter().enumerate() {
            assert!(
                (t - whole.time_of_count(k as f64).unwrap()).abs() < 1e-9,
                "arrival {k}"
            );
        }
    }

    #[test]
    fn start_times() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        assert_eq!(
            parse_start_at("+30s", now).unwrap(),
            now + Duration::from_secs(30)
        );
        let at = parse_start_at("2026-11-23T14:00:00Z", now).unwrap();
        assert_eq!(
            humantime::format_rfc3339_seconds(at).to_string(),
            "2026-11-23T14:00:00Z"
        );
        assert!(parse_start_at("tomorrow", now).is_err());
        let start = StartAt {
            at: now,
            tolerance: Duration::from_secs(1),
        };
        assert!(start.check_not_late(now + Duration::from_millis(900)).is_ok());
        let late = start
            .check_not_late(now + Duration::from_secs(2))
            .unwrap_err()
            .to_string();
        assert!(late.contains("came up 2.000s after"), "{late}");
        assert_eq!(start.skew_ms(now - Duration::from_millis(5)), -5.0);
    }
}
