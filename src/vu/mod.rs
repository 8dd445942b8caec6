//! Virtual users written in Lua (`volley script FILE.lua`), in k6's names:
//! the file's top level is the init (once per Lua state), `options` the
//! load, `setup()` once before the load (what it returns is every
//! iteration's argument), `default(data)` one iteration of a VU, and
//! `teardown(data)` once after.
//!
//! Each worker thread has one Lua state for all its VUs ([`VuWorker`]):
//! each VU is a coroutine, and a request or a sleep yields it to the
//! worker's event loop, which resumes it with the answer (see
//! `prelude.lua`). The coroutines live in a Lua table by VU id, so Rust
//! holds no handle per VU, and ten thousand of them take a few megabytes.
//!
//! Request names and check names are discovered while the run goes; the
//! run's [`Names`] give each one index for all workers, so that their
//! statistics merge by index.

pub mod command;
pub mod names;
pub mod options;
pub mod response;
pub mod state;

use crate::script::Source;
use crate::script::state::describe;
use mlua::{Function, Lua, LuaSerdeExt, MultiValue, Value};
pub use names::Names;
pub use options::Options;
use std::sync::{Arc, Mutex};

/// A VU script loaded for a run: its source, what its options ask, and
/// the run's names.
pub struct Users {
    pub source: Source,
    pub options: Options,
    /// The names requests are kept under.
    pub requests: Names,
    pub checks: Arc<Names>,
    /// What `setup()` returned, as JSON: handed to every state.
    pub data: serde_json::Value,
    /// Whether what the script prints goes to stderr (the report is JSON
    /// on stdout).
    pub prints_to_stderr: bool,
    /// The state the init, `setup()` and `teardown()` ran in.
    main: Mutex<Lua>,
}

impl std::fmt::Debug for Users {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Users")
            .field("path", &self.source.path)
            .field("options", &self.options)
            .finish()
    }
}

/// Why a script cannot run.
#[derive(Debug, thiserror::Error)]
pub enum UsersError {
    #[error("cannot read the script {0}")]
    Read(String, #[source] std::io::Error),
    /// Its init failed (a syntax error among them): `file:line: message`.
    #[error("{0}")]
    Init(String),
    #[error("{0}")]
    Options(String),
    /// `setup()` failed: the run does not start.
    #[error("setup(): {0}")]
    Setup(String),
}

impl Users {
    /// Reads and initialises the script at `path` in its main state, and
    /// reads its options.
    pub fn load(path: &str, prints_to_stderr: bool) -> Result<Users, UsersError> {
        let text = std::fs::read_to_string(path).map_err(|e| UsersError::Read(path.to_string(), e))?;
        let source = Source {
            path: path.to_string(),
            text,
        };
        let checks = Arc::new(Names::new("check names"));
        let main = state::new_state(&source, checks.clone(), prints_to_stderr).map_err(UsersError::Init)?;
        let options = Options::read(&main).map_err(UsersError::Options)?;
        Ok(Users {
            source,
            options,
            requests: Names::new("request names"),
            checks,
            data: serde_json::Value::Null,
            prints_to_stderr,
            main: Mutex::new(main),
        })
    }

    /// Runs `setup()`, if the script defines it, and keeps what it returns.
    pub fn setup(&mut self) -> Result<(), UsersError> {
        let main = self.main.lock().unwrap_or_else(|p| p.into_inner());
        let Some(setup) = defined(&main, "setup") else {
            return Ok(());
        };
        let returned = setup
            .call::<Value>(())
            .map_err(|e| UsersError::Setup(describe(&e)))?;
        let data = response::to_json(&main, returned)
            .map_err(|e| UsersError::Setup(format!("what it returns cannot be handed to the VUs: {e}")))?;
        drop(main);
        self.data = data;
        Ok(())
    }

    /// Runs `teardown(data)`, if the script defines it.
    pub fn teardown(&self) -> Result<(), String> {
        let main = self.main.lock().unwrap_or_else(|p| p.into_inner());
        let Some(teardown) = defined(&main, "teardown") else {
            return Ok(());
        };
        let data = main
            .to_value_with(&self.data, response::json_to_lua())
            .map_err(|e| describe(&e))?;
        let called = teardown
            .call::<()>(data)
            .map_err(|e| format!("teardown(): {}", describe(&e)));
        let _ = main.load("io.stdout:flush()").exec();
        called
    }
}

/// The global function `name`, if the state defines one.
fn defined(lua: &Lua, name: &str) -> Option<Function> {
    match lua.globals().get::<Value>(name) {
        Ok(Value::Function(f)) => Some(f),
        _ => None,
    }
}

/// One worker's state and its way into the VUs' coroutines.
pub struct VuWorker {
    pub lua: Lua,
    begin: Function,
    step: Function,
    /// What `setup()` returned, in this state.
    data: Value,
}

impl VuWorker {
    /// A worker's own state for `users`: the script's init run in it.
    pub fn new(users: &Users) -> Result<VuWorker, String> {
        let lua = state::new_state(&users.source, users.checks.clone(), users.prints_to_stderr)?;
        let worker: mlua::Table = lua.globals().get("__vu").map_err(|e| e.to_string())?;
        let begin = worker.get("begin").map_err(|e| e.to_string())?;
        let step = worker.get("step").map_err(|e| e.to_string())?;
        let data = lua
            .to_value_with(&users.data, response::json_to_lua())
            .map_err(|e| describe(&e))?;
        Ok(VuWorker {
            lua,
            begin,
            step,
            data,
        })
    }

    /// Starts VU `id`'s iteration `iteration` of the script's function
    /// `exec`: what it yields first.
    pub fn begin(&self, id: u64, iteration: u64, exec: &str) -> Result<command::Command, String> {
        let yielded = self
            .begin
            .call::<MultiValue>((id, iteration, exec, self.data.clone()))
            .map_err(|e| describe(&e))?;
        command::Command::read(yielded)
    }

    /// Resumes VU `id` with `answer`: what it yields next.
    pub fn step(&self, id: u64, answer: impl mlua::IntoLuaMulti) -> Result<command::Command, String> {
        let yielded = self
            .step
            .call::<MultiValue>((id, answer))
            .map_err(|e| describe(&e))?;
        command::Command::read(yielded)
    }

    /// Hands each check made since the last call to `record`: its index
    /// and whether it held.
    pub fn take_checks(&self, mut record: impl FnMut(usize, bool)) {
        if let Some(mut tally) = self.lua.app_data_mut::<state::Tally>() {
            for (index, held) in tally.pending.drain(..) {
                record(index, held);
            }
        }
    }
}
