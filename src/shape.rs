//! The load over time (a pure module below `plan`, the engine and the
//! reports, which all read it): a constant number of connections or requests per
//! second, or `--stages` that ramp linearly from one target to the next.
//!
//! In the open model the profile also fixes every request's intended send
//! time: ticket `k` is due when the cumulative count of the rate reaches `k`
//! (plus the worker's phase), so a worker needs no queue of times, only a
//! counter, however far behind the target falls.

use serde::Serialize;
use std::time::Duration;

/// One span of a ramp: reach `target` linearly over `duration`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Stage {
    #[serde(rename = "duration_s", serialize_with = "secs")]
    pub duration: Duration,
    pub target: f64,
}

fn secs<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

/// `--stages` that do not parse.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum StagesError {
    #[error("invalid stage '{0}' in --stages: use DURATION:TARGET, e.g. 10s:100")]
    Stage(String),
    #[error("--stages names no stage")]
    Empty,
}

/// Parses `10s:100,30s:100,10s:0`.
pub fn parse_stages(text: &str) -> Result<Vec<Stage>, StagesError> {
    let mut stages = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let bad = || StagesError::Stage(part.to_string());
        let (duration, target) = part.split_once(':').ok_or_else(bad)?;
        let duration = humantime::parse_duration(duration.trim()).map_err(|_| bad())?;
        let target: f64 = target.trim().parse().map_err(|_| bad())?;
        if !target.is_finite() || target < 0.0 || duration.is_zero() {
            return Err(bad());
        }
        stages.push(Stage { duration, target });
    }
    if stages.is_empty() {
        return Err(StagesError::Empty);
    }
    Ok(stages)
}

/// A piecewise-linear load, starting at `start` (per second or connections).
#[derive(Clone, Debug, PartialEq)]
pub struct LoadProfile {
    start: f64,
    stages: Vec<Stage>,
    /// After the last stage the load holds its last target (`None`: ends).
    hold: bool,
}

impl LoadProfile {
    /// The same load for as long as the run lasts.
    pub fn constant(value: f64) -> LoadProfile {
        LoadProfile {
            start: value,
            stages: Vec::new(),
            hold: true,
        }
    }

    /// Ramps from 0 through the stages, then ends.
    pub fn ramp(stages: Vec<Stage>) -> LoadProfile {
        LoadProfile {
            start: 0.0,
            stages,
            hold: false,
        }
    }

    /// Ramps from 0 to `value` over `over`, then holds it for as long as the
    /// run lasts (a plan file's `rampup`).
    pub fn ramp_then_hold(over: Duration, value: f64) -> LoadProfile {
        LoadProfile {
            start: 0.0,
            stages: vec![Stage {
                duration: over,
                target: value,
            }],
            hold: true,
        }
    }

    /// This profile with every value multiplied (a worker's share).
    pub fn scaled(&self, factor: f64) -> LoadProfile {
        LoadProfile {
            start: self.start * factor,
            stages: self
                .stages
                .iter()
                .map(|s| Stage {
                    duration: s.duration,
                    target: s.target * factor,
                })
                .collect(),
            hold: self.hold,
        }
    }

    /// The total length of the stages (`None` for a constant load).
    pub fn duration(&self) -> Option<Duration> {
        (!self.hold).then(|| self.stages.iter().map(|s| s.duration).sum())
    }

    /// The highest value the profile reaches.
    pub fn peak(&self) -> f64 {
        self.stages.iter().map(|s| s.target).fold(self.start, f64::max)
    }

    /// The segments as (start value, end value, seconds); a held load ends
    /// with an endless flat segment.
    fn segments(&self) -> impl Iterator<Item = (f64, f64, f64)> + '_ {
        let mut from = self.start;
        let ramps = self.stages.iter().map(move |s| {
            let seg = (from, s.target, s.duration.as_secs_f64());
            from = s.target;
            seg
        });
        let last = self.stages.last().map_or(self.start, |s| s.target);
        ramps.chain(self.hold.then_some((last, last, f64::INFINITY)))
    }

    /// The load at `t` seconds; after the end, 0 (or the held value).
    pub fn value_at(&self, t: f64) -> f64 {
        let mut elapsed = 0.0;
        for (a, b, len) in self.segments() {
            if t < elapsed + len {
                return if len.is_infinite() {
                    a
                } else {
                    a + (b - a) * (t - elapsed) / len
                };
            }
            elapsed += len;
        }
        0.0
    }

    /// The first time at or after `from` when the load is at least `value`,
    /// in seconds; `None` if it never is again.
    pub fn time_value_reaches(&self, value: f64, from: f64) -> Option<f64> {
        let mut start = 0.0;
        for (a, b, len) in self.segments() {
            let end = start + len;
            if end > from {
                let t0 = from.max(start);
                let at_t0 = if len.is_infinite() {
                    a
                } else {
                    a + (b - a) * (t0 - start) / len
                };
                if at_t0 >= value {
                    return Some(t0);
                }
                if b >= value && b > a && len.is_finite() {
                    // Rising through `value` inside this segment.
                    return Some(start + (value - a) / (b - a) * len);
                }
            }
            start = end;
        }
        None
    }

    /// When the cumulative count (the integral of the rate) reaches `n`,
    /// in seconds; `None` if it never does.
    pub fn time_of_count(&self, n: f64) -> Option<f64> {
        if n <= 0.0 {
            // The first ticket is due at the start (the formula below would
            // divide 0 by 0 on a ramp from 0).
            return Some(0.0);
        }
        let mut elapsed = 0.0;
        let mut left = n;
        for (a, b, len) in self.segments() {
            if len.is_infinite() {
                return (a > 0.0).then(|| elapsed + left / a);
            }
            let area = (a + b) / 2.0 * len;
            if left <= area && area > 0.0 {
                // Solve a*t + (b-a)/(2*len)*t^2 = left, in the form that
                // stays exact when a or b - a is zero.
                let slope = (b - a) / len;
                let t = 2.0 * left / (a + (a * a + 2.0 * slope * left).max(0.0).sqrt());
                return Some(elapsed + t.min(len));
            }
            left -= area;
            elapsed += len;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn parses_stages() {
        let stages = parse_stages("10s:100, 30s:100,500ms:0").unwrap();
        assert_eq!(stages.len(), 3);
        assert_eq!(
            stages[2],
            Stage {
                duration: Duration::from_millis(500),
                target: 0.0
            }
        );
        for bad in ["", "10s", "x:1", "10s:-1", "0s:5", "10s:abc"] {
            assert!(parse_stages(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn values_ramp_linearly() {
        let p = LoadProfile::ramp(parse_stages("10s:100,10s:100,10s:0").unwrap());
        assert!(close(p.value_at(0.0), 0.0));
        assert!(close(p.value_at(5.0), 50.0));
        assert!(close(p.value_at(15.0), 100.0));
        assert!(close(p.value_at(25.0), 50.0));
        assert!(close(p.value_at(31.0), 0.0));
        assert_eq!(p.duration(), Some(Duration::from_secs(30)));
        assert_eq!(p.peak(), 100.0);
        assert!(close(LoadProfile::constant(7.0).value_at(1e6), 7.0));
    }

    #[test]
    fn finds_when_a_ramp_reaches_a_value() {
        let p = LoadProfile::ramp(parse_stages("10s:100,10s:100,10s:0,10s:50").unwrap());
        assert!(close(p.time_value_reaches(50.0, 0.0).unwrap(), 5.0));
        assert!(
            close(p.time_value_reaches(50.0, 7.0).unwrap(), 7.0),
            "already above"
        );
        assert!(close(p.time_value_reaches(100.0, 0.0).unwrap(), 10.0));
        // Past the fall to 0 the next time above 40 is on the last ramp.
        assert!(close(p.time_value_reaches(40.0, 29.0).unwrap(), 38.0));
        assert!(
            close(p.time_value_reaches(60.0, 21.0).unwrap(), 21.0),
            "90 at 21 s"
        );
        assert_eq!(
            p.time_value_reaches(60.0, 26.0),
            None,
            "falling, then only up to 50"
        );
        assert!(close(
            LoadProfile::constant(5.0).time_value_reaches(5.0, 3.0).unwrap(),
            3.0
        ));
    }

    #[test]
    fn constant_rate_is_evenly_spaced() {
        let p = LoadProfile::constant(2000.0);
        assert!(close(p.time_of_count(0.0).unwrap(), 0.0));
        assert!(close(p.time_of_count(1.0).unwrap(), 0.0005));
        assert!(close(p.time_of_count(20_000.0).unwrap(), 10.0));
        assert_eq!(LoadProfile::constant(0.0).time_of_count(1.0), None);
    }

    #[test]
    fn ramp_inverts_its_integral() {
        // 0 -> 100 req/s over 10 s sends 500 requests; then 100/s for 10 s.
        let p = LoadProfile::ramp(parse_stages("10s:100,10s:100").unwrap());
        assert!(close(p.time_of_count(500.0).unwrap(), 10.0));
        // Half the ramp's area (250) is reached at t = 10 / sqrt(2).
        assert!(close(p.time_of_count(250.0).unwrap(), 10.0 / 2f64.sqrt()));
        assert!(close(p.time_of_count(1000.0).unwrap(), 15.0));
        assert!(close(p.time_of_count(1500.0).unwrap(), 20.0));
        assert_eq!(p.time_of_count(1500.5), None, "the ramp has ended");
        // Every count maps back to itself.
        for n in [1.0, 17.0, 333.3, 999.0, 1234.0] {
            let t = p.time_of_count(n).unwrap();
            let integral = if t <= 10.0 {
                5.0 * t * t
            } else {
                500.0 + 100.0 * (t - 10.0)
            };
            assert!((integral - n).abs() < 1e-6, "{n} -> {t} -> {integral}");
        }
    }

    #[test]
    fn a_ramp_from_zero_starts_at_once() {
        let p = LoadProfile::ramp(parse_stages("1s:1000").unwrap());
        assert_eq!(p.time_of_count(0.0), Some(0.0));
        let t1 = p.time_of_count(1.0).unwrap();
        assert!(close(t1, (1.0f64 / 500.0).sqrt()), "{t1}");
        let mut last = 0.0;
        for k in 0..500 {
            let t = p.time_of_count(k as f64).unwrap();
            assert!(t.is_finite() && t >= last, "ticket {k} at {t}");
            last = t;
        }
    }

    #[test]
    fn scaling_splits_the_rate() {
        let p = LoadProfile::constant(1000.0).scaled(0.25);
        assert!(close(p.time_of_count(250.0).unwrap(), 1.0));
    }
}

/// Closed (connections) or open (arrival rate) load, as the workers need
/// it.
#[derive(Clone, Debug)]
pub enum LoadModel {
    /// Each connection sends as soon as its previous response is back;
    /// `ramp` (from `--stages`, or a plan file's rampup) limits how many
    /// connections may send.
    Closed { ramp: Option<LoadProfile> },
    /// Requests are due on a schedule, in requests per second in all: a
    /// fixed rate, or ramped through stages.
    Open { schedule: LoadProfile },
}

impl LoadModel {
    /// Whether requests have intended send times (the open model).
    pub fn is_open(&self) -> bool {
        matches!(self, LoadModel::Open { .. })
    }

    /// The load profile of the whole run (of `connections` in the closed
    /// model), for the per-interval log.
    pub fn profile(&self, connections: usize) -> LoadProfile {
        match self {
            LoadModel::Closed { ramp: Some(ramp) } => ramp.clone(),
            LoadModel::Closed { ramp: None } => LoadProfile::constant(connections as f64),
            LoadModel::Open { schedule } => schedule.clone(),
        }
    }
}
