//! wrk's Lua scripts, run unchanged (`volley run -s FILE.lua`): the same
//! `wrk` table and callbacks, in the same order, with wrk's laziness.
//!
//! As under wrk, the file runs in a state of its own for `setup()` and
//! `done()`, and in one state per worker thread, shared by that thread's
//! connections. Before the load, on this thread: each worker's state is
//! made, `setup(thread)` runs for it in the first state and `init(args)` in
//! its own, and the first worker's request is read to learn how many
//! requests one `request()` text holds (its pipelining depth). The engine
//! then calls `delay()`, `request()` and `response()` on each worker's
//! thread (only those the script defines), and after the run `done()`
//! runs here with the figures.
//!
//! A script that defines none of them sends one request text, built once:
//! the engine sends it as it sends any run's one request, on its fast
//! paths.

pub mod done;
pub mod request_text;
pub mod state;
pub mod thread;
pub mod worker;

use crate::target::Target;
use mlua::{Function, Lua};
pub use request_text::{NotARequest, RequestText};
pub use state::Source;
use std::sync::Arc;
use thread::{ThreadCell, ThreadHandle};

/// Why a script cannot run.
#[derive(Debug, thiserror::Error)]
pub enum ScriptError {
    #[error("cannot read the script {0}")]
    Read(String, #[source] std::io::Error),
    /// The file did not load or its top level failed: `file:line: message`.
    #[error("{0}")]
    Load(String),
    /// A callback failed before the load began: `file:line: message`.
    #[error("{0}")]
    Lua(String),
    /// `request()` returned text that is not an HTTP request.
    #[error("the script's request() returned {0}")]
    NotARequest(String),
}

/// Which of the callbacks a script defines (as its first worker's state has
/// them once `init` has run).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Callbacks {
    pub request: bool,
    pub response: bool,
    pub delay: bool,
    pub done: bool,
}

/// One worker's state and handle.
pub struct ScriptThread {
    pub lua: Lua,
    pub cell: Arc<ThreadCell>,
    /// The request text of a script without `request()`, built by `init`.
    pub fixed: Vec<u8>,
}

/// A script loaded for a run: its states set up and initialised.
pub struct Script {
    pub source: Source,
    /// The state `setup()` and `done()` run in.
    pub main: Lua,
    pub threads: Vec<ScriptThread>,
    pub callbacks: Callbacks,
    /// Requests in the first worker's first request text.
    pub pipeline: usize,
}

impl std::fmt::Debug for Script {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Script")
            .field("path", &self.source.path)
            .field("threads", &self.threads.len())
            .field("callbacks", &self.callbacks)
            .finish()
    }
}

impl Script {
    /// Reads the script at `path`.
    pub fn read(path: &str) -> Result<Source, ScriptError> {
        let text = std::fs::read_to_string(path).map_err(|e| ScriptError::Read(path.to_string(), e))?;
        Ok(Source {
            path: path.to_string(),
            text,
        })
    }

    /// Loads `source` for `threads` workers against `target` with the
    /// user's `headers` and the script's `args` (what follows `--`). With
    /// `prints_to_stderr` (the report is JSON on stdout) what the script
    /// prints goes to stderr.
    pub fn load(
        source: Source,
        target: &Target,
        headers: &[(String, String)],
        args: &[String],
        threads: usize,
        prints_to_stderr: bool,
    ) -> Result<Script, ScriptError> {
        let lua_error = |e: mlua::Error| ScriptError::Lua(state::describe(&e));
        let new_state = || -> Result<Lua, ScriptError> {
            let lua = state::new_state(&source, target, headers)?;
            if prints_to_stderr {
                lua.load(PRINT_TO_STDERR).exec().map_err(lua_error)?;
            }
            Ok(lua)
        };
        let main = new_state()?;
        let main_wrk: mlua::Table = main.globals().get("wrk").map_err(lua_error)?;
        let service = url::Url::parse(&target.url)
            .ok()
            .and_then(|u| u.port())
            .map_or(if target.tls { "https" } else { "http" }.to_string(), |p| {
                p.to_string()
            });
        let host: String = main_wrk.get("host").map_err(lua_error)?;
        main_wrk
            .get::<Function>("resolve")
            .and_then(|resolve| resolve.call::<()>((host, service)))
            .map_err(lua_error)?;
        let wrk_setup: Function = main_wrk.get("setup").map_err(lua_error)?;
        let mut loaded = Vec::with_capacity(threads);
        let mut callbacks = Callbacks::default();
        let mut pipeline = 1;
        for index in 0..threads {
            let lua = new_state()?;
            let cell = ThreadCell::new(&lua);
            let wrk: mlua::Table = lua.globals().get("wrk").map_err(lua_error)?;
            wrk.set("thread", ThreadHandle(cell.clone())).map_err(lua_error)?;
            wrk_setup
                .call::<()>(ThreadHandle(cell.clone()))
                .map_err(lua_error)?;
            let init: Function = wrk.get("init").map_err(lua_error)?;
            init.call::<()>(arguments(&lua, &target.url, args).map_err(lua_error)?)
                .map_err(lua_error)?;
            if index == 0 {
                callbacks = Callbacks {
                    request: defines(&lua, "request"),
                    response: defines(&lua, "response"),
                    delay: defines(&lua, "delay"),
                    done: defines(&main, "done"),
                };
                // As wrk: the first worker's first request is read once,
                // for its depth (a `request()` is called for it).
                let text = request_of(&lua).map_err(lua_error)?;
                let mut read = RequestText::default();
                read.read(&text)
                    .map_err(|e| ScriptError::NotARequest(e.to_string()))?;
                pipeline = read.count;
            }
            let fixed = match callbacks.request {
                true => Vec::new(),
                false => request_of(&lua).map_err(lua_error)?,
            };
            loaded.push(ScriptThread { lua, cell, fixed });
        }
        flush_prints(&main);
        Ok(Script {
            source,
            main,
            threads: loaded,
            callbacks,
            pipeline,
        })
    }

    /// The one request text every worker sends, where the script makes no
    /// call per request: no `request()`, `response()` or `delay()`, one
    /// request per text, the same in every worker.
    pub fn fixed_request(&self) -> Option<&[u8]> {
        let c = self.callbacks;
        let first = self.threads.first()?;
        let same = self.threads.iter().all(|t| t.fixed == first.fixed);
        (!c.request && !c.response && !c.delay && self.pipeline == 1 && same).then_some(&first.fixed[..])
    }

    /// Runs `done(summary, latency, requests)`, if the script defines it.
    pub fn done(
        &self,
        summary: &done::Summary,
        latency: done::Stats,
        rates: done::Stats,
    ) -> Result<(), ScriptError> {
        if !self.callbacks.done {
            return Ok(());
        }
        let done: Function = self
            .main
            .globals()
            .get("done")
            .map_err(|e| ScriptError::Lua(state::describe(&e)))?;
        let called = done::call(&self.main, &done, summary, latency, rates);
        flush_prints(&self.main);
        called.map_err(|e| ScriptError::Lua(state::describe(&e)))
    }
}

/// Writes out what the script printed so far: Lua's `print` and `io.write`
/// go through C's buffered stdout, which volley's own output does not, so
/// without this a piped run would show `init`'s lines after the report.
fn flush_prints(lua: &Lua) {
    let _ = lua.load("io.stdout:flush()").exec();
}

/// `print` and `io.write` to stderr, as `print` would write them.
pub const PRINT_TO_STDERR: &str = r##"
io.output(io.stderr)
print = function(...)
  local parts = {}
  for i = 1, select("#", ...) do parts[i] = tostring((select(i, ...))) end
  io.stderr:write(table.concat(parts, "\t"), "\n")
end
"##;

/// `init`'s argument: the URL at index 0, then the script's arguments from 1.
fn arguments(lua: &Lua, url: &str, args: &[String]) -> mlua::Result<mlua::Table> {
    let table = lua.create_table()?;
    table.raw_set(0, url)?;
    for (i, arg) in args.iter().enumerate() {
        table.raw_set(i + 1, arg.as_str())?;
    }
    Ok(table)
}

/// Whether the global `name` is a function.
fn defines(lua: &Lua, name: &str) -> bool {
    matches!(
        lua.globals().get::<mlua::Value>(name),
        Ok(mlua::Value::Function(_))
    )
}

/// A request text from `request()`, or from `wrk.request()` where the script
/// defines none.
pub fn request_of(lua: &Lua) -> mlua::Result<Vec<u8>> {
    let request = match lua.globals().get::<mlua::Value>("request")? {
        mlua::Value::Function(f) => f,
        _ => lua
            .globals()
            .get::<mlua::Table>("wrk")?
            .get::<Function>("request")?,
    };
    text_of(request.call::<mlua::Value>(())?)
}

/// What a `request()` returned, as bytes: a string (a number is read as
/// its text, as Lua does).
pub fn text_of(value: mlua::Value) -> mlua::Result<Vec<u8>> {
    match value {
        mlua::Value::String(s) => Ok(s.as_bytes().to_vec()),
        other => Err(mlua::Error::runtime(format!(
            "request() returned a {}, not the text of a request",
            other.type_name()
        ))),
    }
}
