//! What a VU's coroutine yields to its worker, read at once into owned
//! values: a request to send, a sleep, or the end of its iteration. The
//! prelude's `http.*` and `sleep` write these; nothing of Lua is held past
//! the read.

use mlua::{MultiValue, Table, Value};
use std::time::Duration;

/// One command of a VU.
#[derive(Debug)]
pub enum Command {
    Http(Call),
    Sleep(Duration),
    /// The iteration ended, with its error (`file:line: message`) if it
    /// failed.
    End(Option<String>),
}

/// A request a VU asked for.
#[derive(Debug, Default)]
pub struct Call {
    pub method: String,
    pub url: String,
    pub body: Vec<u8>,
    pub headers: Vec<(String, String)>,
    /// The name its statistics are kept under, if the script gave one.
    pub name: Option<String>,
    /// The groups it was sent in, as the name's prefix (`outer::inner::`).
    pub group: String,
    pub timeout: Option<Duration>,
}

impl Command {
    /// Reads what the coroutine yielded.
    pub fn read(values: MultiValue) -> Result<Command, String> {
        let mut values = values.into_iter();
        let tag = match values.next() {
            Some(Value::String(s)) => s.to_string_lossy(),
            Some(other) => return Err(format!("a VU yielded a {}, not a command", other.type_name())),
            // The function returned without yielding "end" (cannot happen
            // through the prelude; a script that resumes it itself might).
            None => return Ok(Command::End(None)),
        };
        match tag.as_str() {
            "end" => Ok(Command::End(match values.next() {
                Some(Value::String(s)) => Some(first_line(&s.to_string_lossy())),
                _ => None,
            })),
            "sleep" => {
                let seconds = match values.next() {
                    Some(Value::Number(n)) => n,
                    Some(Value::Integer(n)) => n as f64,
                    _ => 0.0,
                };
                Ok(Command::Sleep(
                    Duration::try_from_secs_f64(seconds).unwrap_or_default(),
                ))
            }
            "http" => read_call(values.collect()).map(Command::Http),
            other => Err(format!(
                "a VU yielded '{other}', not a command (do not yield from a script)"
            )),
        }
    }
}

/// An error's first line: Lua's traceback follows it.
fn first_line(text: &str) -> String {
    text.lines().next().unwrap_or_default().to_string()
}

/// `method, url, body, params, group` as `http.request` yields them.
fn read_call(values: Vec<Value>) -> Result<Call, String> {
    let mut values = values.into_iter();
    let mut next = || values.next().unwrap_or(Value::Nil);
    let text = |value: Value| match value {
        Value::String(s) => Some(s.to_string_lossy()),
        _ => None,
    };
    let method = text(next()).unwrap_or_default();
    let url = text(next()).unwrap_or_default();
    let mut call = Call {
        method,
        url,
        ..Call::default()
    };
    let mut form = false;
    match next() {
        Value::Nil => {}
        Value::String(s) => call.body = s.as_bytes().to_vec(),
        Value::Table(table) => {
            call.body = form_encode(&table).map_err(|e| e.to_string())?;
            form = true;
        }
        Value::Integer(n) => call.body = n.to_string().into_bytes(),
        Value::Number(n) => call.body = n.to_string().into_bytes(),
        other => return Err(format!("http.request: a body cannot be a {}", other.type_name())),
    }
    let params = next();
    let group = text(next()).unwrap_or_default();
    if let Value::Table(params) = params {
        read_params(&params, &mut call).map_err(|e| format!("http.request: {e}"))?;
    }
    if form
        && !call
            .headers
            .iter()
            .any(|(n, _)| n.eq_ignore_ascii_case("content-type"))
    {
        call.headers.push((
            "Content-Type".to_string(),
            "application/x-www-form-urlencoded".to_string(),
        ));
    }
    call.group = group;
    Ok(call)
}

/// `headers`, `name`, `timeout` (seconds, or text such as "2s") and
/// `tags` (accepted; tags are not kept yet).
fn read_params(params: &Table, call: &mut Call) -> mlua::Result<()> {
    if let Some(headers) = params.get::<Option<Table>>("headers")? {
        for pair in headers.pairs::<mlua::LuaString, Value>() {
            let (name, value) = pair?;
            let value = match value {
                Value::String(s) => s.to_string_lossy(),
                Value::Integer(n) => n.to_string(),
                Value::Number(n) => n.to_string(),
                Value::Boolean(b) => b.to_string(),
                other => {
                    return Err(mlua::Error::runtime(format!(
                        "the header {} is a {}, not text",
                        name.to_string_lossy(),
                        other.type_name()
                    )));
                }
            };
            call.headers.push((name.to_string_lossy(), value));
        }
    }
    if let Some(name) = params.get::<Option<String>>("name")? {
        call.name = Some(name);
    }
    call.timeout = match params.get::<Value>("timeout")? {
        Value::Nil => None,
        Value::Integer(n) => Some(Duration::from_secs(n.max(0) as u64)),
        Value::Number(n) => Duration::try_from_secs_f64(n).ok(),
        Value::String(s) => Some(
            humantime::parse_duration(&s.to_string_lossy())
                .map_err(|e| mlua::Error::runtime(format!("timeout '{}': {e}", s.to_string_lossy())))?,
        ),
        other => {
            return Err(mlua::Error::runtime(format!(
                "timeout is a {}, not seconds",
                other.type_name()
            )));
        }
    };
    Ok(())
}

/// A table body as a form: `a=1&b=two`, keys in sorted order.
fn form_encode(table: &Table) -> mlua::Result<Vec<u8>> {
    let mut pairs = Vec::new();
    for pair in table.pairs::<mlua::LuaString, mlua::LuaString>() {
        let (key, value) = pair?;
        pairs.push((key.to_string_lossy(), value.to_string_lossy()));
    }
    pairs.sort();
    let mut form = url::form_urlencoded::Serializer::new(String::new());
    for (key, value) in &pairs {
        form.append_pair(key, value);
    }
    Ok(form.finish().into_bytes())
}
