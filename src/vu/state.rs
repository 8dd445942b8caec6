//! One Lua state for a virtual-user script: LuaJIT with every standard
//! library (as wrk's scripts have them: `ffi`, `jit`, `require` on
//! `LUA_PATH`), the prelude (`http`, `check`, `group`, `sleep`, `vu`),
//! `open()`, `__ENV`, and the script's file run in it: its init.

use super::names::{Names, SeenNames};
use super::response::{ANY_CASE, ANY_CASE_KEY};
use crate::script::Source;
use crate::script::state::describe;
use mlua::{Lua, LuaOptions, StdLib};
use std::sync::Arc;

const PRELUDE: &str = include_str!("prelude.lua");

/// The checks a state's VUs made since the engine last looked: each
/// check's index and whether it held.
pub struct Tally {
    names: Arc<Names>,
    seen: SeenNames,
    pub pending: Vec<(usize, bool)>,
}

/// A new state with the prelude, which `source` then runs in; its checks
/// are named in `checks`. With `prints_to_stderr` (the report is JSON on
/// stdout) what the script prints goes to stderr. An error is one line,
/// `file:line: message`.
pub fn new_state(source: &Source, checks: Arc<Names>, prints_to_stderr: bool) -> Result<Lua, String> {
    // SAFETY: not memory unsafety of volley's own: as for wrk's scripts
    // (see `script::state`), this opens LuaJIT's `ffi` library and lets
    // `require` load C modules; the script is the user's own program.
    let lua = unsafe { Lua::unsafe_new_with(StdLib::ALL, LuaOptions::default()) };
    prepare(&lua, checks, prints_to_stderr)
        .map_err(|e| format!("cannot prepare the script's state: {}", describe(&e)))?;
    lua.load(&source.text)
        .set_name(format!("@{}", source.path))
        .exec()
        .map_err(|e| describe(&e))?;
    Ok(lua)
}

/// Everything the state has before the script runs.
fn prepare(lua: &Lua, checks: Arc<Names>, prints_to_stderr: bool) -> mlua::Result<()> {
    lua.load(PRELUDE).set_name("=volley").exec()?;
    let any_case: mlua::Table = lua.load(ANY_CASE).set_name("=headers").eval()?;
    lua.set_named_registry_value(ANY_CASE_KEY, any_case)?;
    lua.set_app_data(Tally {
        names: checks,
        seen: SeenNames::default(),
        pending: Vec::new(),
    });
    let globals = lua.globals();
    globals.set(
        "__check",
        lua.create_function(|lua, (name, held): (mlua::LuaString, bool)| {
            if let Some(mut tally) = lua.app_data_mut::<Tally>() {
                let tally = &mut *tally;
                let index = tally.seen.index(&tally.names, &name.to_string_lossy());
                tally.pending.push((index, held));
            }
            Ok(())
        })?,
    )?;
    globals.set(
        "open",
        lua.create_function(|lua, path: String| {
            let bytes =
                std::fs::read(&path).map_err(|e| mlua::Error::runtime(format!("open('{path}'): {e}")))?;
            lua.create_string(bytes)
        })?,
    )?;
    let env = lua.create_table()?;
    for (name, value) in std::env::vars_os() {
        if let (Some(name), Some(value)) = (name.to_str(), value.to_str()) {
            env.raw_set(name, value)?;
        }
    }
    globals.set("__ENV", env)?;
    if prints_to_stderr {
        lua.load(crate::script::PRINT_TO_STDERR).exec()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(text: &str) -> Source {
        Source {
            path: "vu.lua".into(),
            text: text.into(),
        }
    }

    #[test]
    fn a_syntax_error_names_the_file_and_line() {
        let names = Arc::new(Names::new("check names"));
        let err = new_state(&source("x = 1\nfunction (\n"), names, false).unwrap_err();
        assert!(err.starts_with("vu.lua:2:"), "{err}");
    }

    #[test]
    fn checks_are_tallied_by_name() {
        let names = Arc::new(Names::new("check names"));
        let lua = new_state(
            &source("ok = check(5, { ['is five'] = function(v) return v == 5 end, big = function(v) return v > 9 end })"),
            names.clone(),
            false,
        )
        .unwrap();
        assert!(!lua.globals().get::<bool>("ok").unwrap());
        let mut pending = lua.app_data_ref::<Tally>().unwrap().pending.clone();
        pending.sort();
        let list = names.list();
        let held = |name: &str| pending.iter().find(|(i, _)| list[*i] == name).map(|(_, h)| *h);
        assert_eq!((held("is five"), held("big")), (Some(true), Some(false)));
    }
}
