//! The small parsers of a run's flags: durations, warm-ups, headers and the
//! set of success statuses. Pure: each takes text and gives a typed value
//! or a one-line usage error naming the flag.

use super::PlanError;
use serde::{Serialize, Serializer};
use std::time::Duration;

/// Warm-up before measuring: a span of time or a number of requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Warmup {
    Duration(Duration),
    Requests(u64),
}

impl Serialize for Warmup {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = s.serialize_map(Some(1))?;
        match self {
            Warmup::Duration(d) => map.serialize_entry("duration_s", &d.as_secs_f64())?,
            Warmup::Requests(n) => map.serialize_entry("requests", n)?,
        }
        map.end()
    }
}

/// The set of statuses that count as success, as a bitset over 0..640.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StatusSet {
    bits: [u64; 10],
    /// How the user wrote it (or the default), for reports.
    spec: String,
}

impl StatusSet {
    /// Any 2xx or 3xx: what a browser would not call a failure.
    pub fn default_success() -> StatusSet {
        let mut set = StatusSet {
            bits: [0; 10],
            spec: "2xx,3xx".to_string(),
        };
        (200..400).for_each(|code| set.insert(code));
        set
    }

    /// Parses `200,304` or ranges such as `2xx` and `200-299`.
    pub fn parse(spec: &str) -> Result<StatusSet, PlanError> {
        let mut set = StatusSet {
            bits: [0; 10],
            spec: spec.to_string(),
        };
        let bad = |part: &str| PlanError::Status(part.to_string());
        for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (lo, hi) = if let Some(class) = part.strip_suffix("xx").or_else(|| part.strip_suffix("XX")) {
                let digit: u16 = class.parse().map_err(|_| bad(part))?;
                (digit * 100, digit * 100 + 99)
            } else if let Some((a, b)) = part.split_once('-') {
                (
                    a.trim().parse().map_err(|_| bad(part))?,
                    b.trim().parse().map_err(|_| bad(part))?,
                )
            } else {
                let code = part.parse().map_err(|_| bad(part))?;
                (code, code)
            };
            if !(100..=599).contains(&lo) || !(100..=599).contains(&hi) || lo > hi {
                return Err(bad(part));
            }
            (lo..=hi).for_each(|code| set.insert(code));
        }
        if set.bits.iter().all(|b| *b == 0) {
            return Err(PlanError::NoStatus);
        }
        Ok(set)
    }

    /// A plan file's `success_codes`: shown in reports as `200,201`, and
    /// checked as `--status` would check that text.
    pub fn of_codes(codes: &[u16]) -> Result<StatusSet, PlanError> {
        StatusSet::parse(&codes.iter().map(u16::to_string).collect::<Vec<_>>().join(","))
    }

    fn insert(&mut self, code: u16) {
        self.bits[usize::from(code / 64)] |= 1 << (code % 64);
    }

    /// Whether a response with this status is a success.
    #[inline]
    pub fn contains(&self, code: u16) -> bool {
        let word = usize::from(code / 64);
        word < self.bits.len() && self.bits[word] & (1 << (code % 64)) != 0
    }
}

impl Serialize for StatusSet {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.spec)
    }
}

/// Parses a humantime duration (`10s`, `2m`, `500ms`), naming the flag on error.
pub fn parse_duration(flag: &str, text: &str) -> Result<Duration, PlanError> {
    humantime::parse_duration(text.trim()).map_err(|error| PlanError::Duration {
        flag: flag.to_string(),
        text: text.to_string(),
        error,
    })
}

/// Parses `-w`: a bare number is a request count, anything else a duration.
pub fn parse_warmup(text: &str) -> Result<Warmup, PlanError> {
    let text = text.trim();
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        let n: u64 = text.parse().map_err(|_| PlanError::Warmup(text.to_string()))?;
        return Ok(Warmup::Requests(n));
    }
    parse_duration("--warmup", text).map(Warmup::Duration)
}

/// Parses `-H`: curl's `Name: value`, or `name=value` as fun-bomb takes it.
pub fn parse_header(text: &str) -> Result<(String, String), PlanError> {
    let colon = text.find(':');
    let equals = text.find('=');
    let split = match (colon, equals) {
        (Some(c), Some(e)) => c.min(e),
        (Some(c), None) => c,
        (None, Some(e)) => e,
        (None, None) => {
            return Err(PlanError::Header(text.to_string()));
        }
    };
    let name = text[..split].trim();
    let value = text[split + 1..].trim();
    let token = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
    if name.is_empty() || !name.bytes().all(token) {
        return Err(PlanError::HeaderName(text.to_string()));
    }
    if value.bytes().any(|b| b == b'\r' || b == b'\n') {
        return Err(PlanError::HeaderLineBreak(text.to_string()));
    }
    Ok((name.to_string(), value.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_sets() {
        let default = StatusSet::default_success();
        assert!(
            default.contains(200)
                && default.contains(399)
                && !default.contains(404)
                && !default.contains(199)
        );
        let set = StatusSet::parse("200,304,5xx").unwrap();
        assert!(set.contains(200) && set.contains(304) && set.contains(503) && !set.contains(201));
        assert!(StatusSet::parse("200-204").unwrap().contains(204));
        assert!(StatusSet::parse("abc").is_err());
        assert!(StatusSet::parse("700").is_err());
        assert!(!set.contains(700));
    }

    #[test]
    fn status_sets_of_codes_read_as_the_flag_would() {
        assert_eq!(
            StatusSet::of_codes(&[200, 201]).unwrap(),
            StatusSet::parse("200,201").unwrap()
        );
        assert!(StatusSet::of_codes(&[700]).is_err());
    }

    #[test]
    fn headers_both_styles() {
        assert_eq!(
            parse_header("Accept: a=b").unwrap(),
            ("Accept".into(), "a=b".into())
        );
        assert_eq!(parse_header("x-key=v:1").unwrap(), ("x-key".into(), "v:1".into()));
        assert!(parse_header("novalue").is_err());
        assert!(parse_header("bad name: x").is_err());
    }

    #[test]
    fn warmup_count_or_duration() {
        assert_eq!(parse_warmup("500").unwrap(), Warmup::Requests(500));
        assert_eq!(
            parse_warmup("2s").unwrap(),
            Warmup::Duration(Duration::from_secs(2))
        );
        assert!(parse_warmup("2 parsecs").is_err());
    }
}
