//! A script's `options` table, read once after its init: the load it asks
//! for (`vus`, `duration`, `iterations`, `stages`), in k6's names. The
//! command line overrides each, as k6's does.

use mlua::{Lua, Table, Value};

/// What a script's `options` ask for.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Options {
    pub vus: Option<usize>,
    /// As written ("30s", "1m30s").
    pub duration: Option<String>,
    /// Iterations shared by all VUs.
    pub iterations: Option<u64>,
    /// `{ duration, target }` each: VUs ramped to `target` over `duration`,
    /// in `--stages`' form ("10s:5,20s:5").
    pub stages: Option<String>,
}

impl Options {
    /// The global `options` of `lua`, if the script sets one.
    pub fn read(lua: &Lua) -> Result<Options, String> {
        let table = match lua.globals().get::<Value>("options") {
            Ok(Value::Table(table)) => table,
            Ok(Value::Nil) => return Ok(Options::default()),
            Ok(other) => return Err(format!("options is a {}, not a table", other.type_name())),
            Err(e) => return Err(e.to_string()),
        };
        read_table(&table).map_err(|e| format!("options: {}", crate::script::state::describe(&e)))
    }
}

fn read_table(table: &Table) -> mlua::Result<Options> {
    let count = |key: &str| -> mlua::Result<Option<u64>> {
        match table.get::<Value>(key)? {
            Value::Nil => Ok(None),
            Value::Integer(n) if n >= 0 => Ok(Some(n as u64)),
            Value::Number(n) if n >= 0.0 && n.fract() == 0.0 => Ok(Some(n as u64)),
            other => Err(mlua::Error::runtime(format!(
                "{key} must be a whole number, not {}",
                describe_value(&other)
            ))),
        }
    };
    let mut options = Options {
        vus: count("vus")?.map(|n| n as usize),
        iterations: count("iterations")?,
        duration: duration(table, "duration")?,
        stages: None,
    };
    if let Some(stages) = table.get::<Option<Table>>("stages")? {
        let mut parts = Vec::new();
        for stage in stages.sequence_values::<Table>() {
            let stage = stage?;
            let span = duration(&stage, "duration")?
                .ok_or_else(|| mlua::Error::runtime("each of stages needs a duration"))?;
            let target: f64 = stage
                .get::<Option<f64>>("target")?
                .ok_or_else(|| mlua::Error::runtime("each of stages needs a target"))?;
            parts.push(format!("{span}:{target}"));
        }
        options.stages = (!parts.is_empty()).then(|| parts.join(","));
    }
    Ok(options)
}

/// A duration as text: "30s" as written, a number as seconds.
fn duration(table: &Table, key: &str) -> mlua::Result<Option<String>> {
    match table.get::<Value>(key)? {
        Value::Nil => Ok(None),
        Value::String(s) => Ok(Some(s.to_string_lossy())),
        Value::Integer(n) => Ok(Some(format!("{n}s"))),
        Value::Number(n) => Ok(Some(format!("{}ms", (n * 1000.0).round()))),
        other => Err(mlua::Error::runtime(format!(
            "{key} must be a duration such as \"30s\", not {}",
            describe_value(&other)
        ))),
    }
}

fn describe_value(value: &Value) -> String {
    match value {
        Value::String(s) => format!("'{}'", s.to_string_lossy()),
        Value::Integer(n) => n.to_string(),
        Value::Number(n) => n.to_string(),
        other => format!("a {}", other.type_name()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_are_read_in_k6s_names() {
        let lua = Lua::new();
        lua.load(
            r#"options = { vus = 10, duration = "30s", iterations = 100,
                 stages = { { duration = "10s", target = 5 }, { duration = 20, target = 0 } } }"#,
        )
        .exec()
        .unwrap();
        let options = Options::read(&lua).unwrap();
        assert_eq!(
            options,
            Options {
                vus: Some(10),
                duration: Some("30s".into()),
                iterations: Some(100),
                stages: Some("10s:5,20s:0".into()),
            }
        );
        lua.load("options = { vus = 1.5 }").exec().unwrap();
        let err = Options::read(&lua).unwrap_err();
        assert!(err.contains("vus must be a whole number, not 1.5"), "{err}");
    }
}
