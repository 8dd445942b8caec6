//! A worker thread's part of a script: its Lua state and the callbacks the
//! script defines there, looked up once before the load, so that a round
//! asks only for what the script has.

use super::thread::ThreadCell;
use super::{RequestText, ScriptThread};
use mlua::{Function, Lua, Value};
use std::sync::Arc;

/// A worker's script: its state and the callbacks it defines, looked up
/// once.
pub struct ScriptWorker {
    pub lua: Lua,
    pub cell: Arc<ThreadCell>,
    pub request: Option<Function>,
    pub response: Option<Function>,
    pub delay: Option<Function>,
    /// The text `init` built, read once, for a script without `request()`.
    pub fixed: RequestText,
    /// Given to each response's headers table: a name looked up as
    /// written and not there is looked up regardless of case, so that
    /// `headers["Content-Type"]` finds HTTP/2's and HTTP/3's lowercase
    /// `content-type` too.
    pub any_case: mlua::Table,
}

/// The `any_case` metatable's source.
const ANY_CASE: &str = r#"
return { __index = function(headers, wanted)
  if type(wanted) ~= "string" then return nil end
  wanted = wanted:lower()
  for name, value in pairs(headers) do
    if name:lower() == wanted then return value end
  end
end }
"#;

impl ScriptWorker {
    /// The worker's part of a loaded script.
    pub fn new(thread: &ScriptThread) -> Result<ScriptWorker, String> {
        let lua = thread.lua.clone();
        let function = |name: &str| match lua.globals().get::<Value>(name) {
            Ok(Value::Function(f)) => Some(f),
            _ => None,
        };
        let mut fixed = RequestText::default();
        let request = function("request");
        if request.is_none() {
            fixed
                .read(&thread.fixed)
                .map_err(|e| format!("the script's request is {e}"))?;
        }
        let any_case = lua
            .load(ANY_CASE)
            .set_name("=headers")
            .eval()
            .map_err(|e| format!("cannot prepare the script's headers: {e}"))?;
        Ok(ScriptWorker {
            any_case,
            request,
            response: function("response"),
            delay: function("delay"),
            cell: thread.cell.clone(),
            fixed,
            lua,
        })
    }

    /// Whether `thread:stop()` was called.
    pub fn stopped(&self) -> bool {
        self.cell.stopped()
    }
}
