//! What `done(summary, latency, requests)` receives after the run, as wrk
//! hands it over: the summary table (microseconds, requests, bytes and
//! wrk's five error counts) and two statistics objects, the latency of
//! each request and the requests per second of each thread.

use hdrhistogram::Histogram;
use mlua::{Lua, MetaMethod, UserData, UserDataMethods, Value};

/// wrk's error counts, from volley's kinds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Errors {
    pub connect: u64,
    /// The connection failed or closed while a response was read (volley's
    /// reset, protocol, TLS and other I/O errors).
    pub read: u64,
    pub write: u64,
    /// Responses with a status above 399.
    pub status: u64,
    pub timeout: u64,
}

/// The run as `done()` is told of it.
pub struct Summary {
    pub duration_us: u64,
    pub requests: u64,
    pub bytes: u64,
    pub errors: Errors,
}

/// A statistics object: recorded values (microseconds, or requests per
/// second) with wrk's fields and calls.
pub struct Stats(pub Histogram<u64>);

impl Stats {
    /// The distinct values recorded, lowest first, with their counts.
    fn values(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.0.iter_recorded().map(|v| {
            (
                self.0.highest_equivalent(v.value_iterated_to()),
                v.count_at_value(),
            )
        })
    }
}

impl UserData for Stats {
    fn add_methods<M: UserDataMethods<Self>>(methods: &mut M) {
        methods.add_meta_method(MetaMethod::Index, |lua, stats, key: String| {
            let hist = &stats.0;
            let empty = hist.is_empty();
            let number = |n: f64| Ok(Value::Number(if empty { 0.0 } else { n }));
            match key.as_str() {
                "min" => number(hist.min() as f64),
                "max" => number(hist.max() as f64),
                "mean" => number(hist.mean()),
                "stdev" => number(hist.stdev()),
                "percentile" => lua
                    .create_function(|_, (stats, p): (mlua::UserDataRef<Stats>, f64)| {
                        Ok(stats.0.value_at_quantile((p / 100.0).clamp(0.0, 1.0)))
                    })
                    .map(Value::Function),
                _ => Ok(Value::Nil),
            }
        });
        // `stats(i)`: the i-th distinct value (from 1) and its count.
        methods.add_meta_method(MetaMethod::Call, |_, stats, index: usize| {
            let found = index.checked_sub(1).and_then(|i| stats.values().nth(i));
            Ok(found.unwrap_or((0, 0)))
        });
        methods.add_meta_method(MetaMethod::Len, |_, stats, ()| Ok(stats.values().count()));
    }
}

/// Calls `done` in `lua` with the summary and the two statistics.
pub fn call(
    lua: &Lua,
    done: &mlua::Function,
    summary: &Summary,
    latency: Stats,
    rates: Stats,
) -> mlua::Result<()> {
    let table = lua.create_table()?;
    table.set("duration", summary.duration_us)?;
    table.set("requests", summary.requests)?;
    table.set("bytes", summary.bytes)?;
    let errors = lua.create_table()?;
    let e = summary.errors;
    for (name, count) in [
        ("connect", e.connect),
        ("read", e.read),
        ("write", e.write),
        ("status", e.status),
        ("timeout", e.timeout),
    ] {
        errors.set(name, count)?;
    }
    table.set("errors", errors)?;
    done.call::<()>((table, latency, rates))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_answer_as_wrks_do() {
        let lua = Lua::new();
        let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).unwrap();
        for v in [100, 100, 200, 300] {
            hist.record(v).unwrap();
        }
        lua.globals().set("s", Stats(hist)).unwrap();
        let (min, max, p50, n): (f64, f64, f64, i64) = lua
            .load("return s.min, s.max, s:percentile(50), #s")
            .eval()
            .unwrap();
        assert_eq!((min, max, p50, n), (100.0, 300.0, 100.0, 3));
        let (value, count): (u64, u64) = lua.load("return s(1)").eval().unwrap();
        assert_eq!((value, count), (100, 2));
        let mean: f64 = lua.load("return s.mean").eval().unwrap();
        assert!((mean - 175.0).abs() < 1.0, "{mean}");
    }
}
