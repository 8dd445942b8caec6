//! A worker thread as a script sees it: the `thread` handed to `setup()`
//! (and left in `wrk.thread`), whose `get`/`set` read and write globals of
//! the thread's own state, whose `addr` is the server it connects to, and
//! whose `stop()` ends its load.

use super::state::Addr;
use mlua::{Lua, MetaMethod, UserData, UserDataMethods, Value, WeakLua};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

/// How deep a table handed between states may nest.
const MAX_DEPTH: usize = 32;

/// What a thread's handle reaches; shared by the handles in every state.
pub struct ThreadCell {
    /// The thread's own state (weak: the state holds a handle to itself).
    pub lua: WeakLua,
    /// The server address `setup()` chose, if it chose one.
    pub addr: Mutex<Option<SocketAddr>>,
    /// Set by `thread:stop()`.
    pub stop: AtomicBool,
}

impl ThreadCell {
    pub fn new(lua: &Lua) -> Arc<ThreadCell> {
        Arc::new(ThreadCell {
            lua: lua.weak(),
            addr: Mutex::new(None),
            stop: AtomicBool::new(false),
        })
    }

    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    pub fn addr(&self) -> Option<SocketAddr> {
        *self.addr.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The `thread` userdata.
#[derive(Clone)]
pub struct ThreadHandle(pub Arc<ThreadCell>);

impl UserData for ThreadHandle {
    fn add_methods<M: UserDataMethods<Self>>(methods: &mut M) {
        methods.add_method("get", |lua, this, name: String| {
            let own = this.0.lua.try_upgrade().ok_or_else(gone)?;
            let value: Value = own.globals().get(name.as_str())?;
            copy(&value, lua, 0)
        });
        methods.add_method("set", |_, this, (name, value): (String, Value)| {
            let own = this.0.lua.try_upgrade().ok_or_else(gone)?;
            let copied = copy(&value, &own, 0)?;
            own.globals().set(name, copied)
        });
        methods.add_method("stop", |_, this, ()| {
            this.0.stop.store(true, Ordering::Relaxed);
            Ok(())
        });
        methods.add_meta_method(MetaMethod::Index, |lua, this, key: String| match key.as_str() {
            "addr" => match this.0.addr() {
                Some(addr) => lua.create_userdata(Addr(addr)).map(Value::UserData),
                None => Ok(Value::Nil),
            },
            _ => Ok(Value::Nil),
        });
        methods.add_meta_method(
            MetaMethod::NewIndex,
            |_, this, (key, value): (String, Value)| match (key.as_str(), value) {
                ("addr", Value::UserData(ud)) => {
                    let addr = ud.borrow::<Addr>()?;
                    *this.0.addr.lock().unwrap_or_else(|e| e.into_inner()) = Some(addr.0);
                    Ok(())
                }
                // No address answered (`wrk.addrs` is empty): the thread
                // keeps the URL's, and its connects count the failures.
                ("addr", Value::Nil) => {
                    *this.0.addr.lock().unwrap_or_else(|e| e.into_inner()) = None;
                    Ok(())
                }
                ("addr", other) => Err(mlua::Error::runtime(format!(
                    "thread.addr must be an address from wrk.lookup, not a {}",
                    other.type_name()
                ))),
                (key, _) => Err(mlua::Error::runtime(format!("cannot set '{key}' on thread"))),
            },
        );
    }
}

fn gone() -> mlua::Error {
    mlua::Error::runtime("the thread's state is gone")
}

/// `value` made anew in state `to`: booleans, numbers, strings and tables
/// of them, as wrk transfers them; anything else is an error.
fn copy(value: &Value, to: &Lua, depth: usize) -> mlua::Result<Value> {
    Ok(match value {
        Value::Nil => Value::Nil,
        Value::Boolean(b) => Value::Boolean(*b),
        Value::Integer(n) => Value::Integer(*n),
        Value::Number(n) => Value::Number(*n),
        Value::String(s) => Value::String(to.create_string(s.as_bytes())?),
        Value::Table(table) if depth < MAX_DEPTH => {
            let copied = to.create_table()?;
            for pair in table.pairs::<Value, Value>() {
                let (k, v) = pair?;
                copied.raw_set(copy(&k, to, depth + 1)?, copy(&v, to, depth + 1)?)?;
            }
            Value::Table(copied)
        }
        Value::Table(_) => {
            return Err(mlua::Error::runtime(
                "cannot transfer a table nested this deep to thread",
            ));
        }
        other => {
            return Err(mlua::Error::runtime(format!(
                "cannot transfer '{}' to thread",
                other.type_name()
            )));
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn get_and_set_reach_the_threads_own_state() {
        let main = Lua::new();
        let own = Lua::new();
        let cell = ThreadCell::new(&own);
        main.globals().set("thread", ThreadHandle(cell.clone())).unwrap();
        main.load("thread:set('id', 7); thread:set('t', {a = 'x', 2})")
            .exec()
            .unwrap();
        assert_eq!(own.globals().get::<i64>("id").unwrap(), 7);
        own.load("requests = 12").exec().unwrap();
        let got: i64 = main.load("return thread:get('requests')").eval().unwrap();
        assert_eq!(got, 12);
        let nested: String = own.load("return t.a .. t[1]").eval().unwrap();
        assert_eq!(nested, "x2");
        let err = main.load("thread:set('f', print)").exec().unwrap_err();
        assert!(err.to_string().contains("cannot transfer 'function'"), "{err}");
        main.load("thread:stop()").exec().unwrap();
        assert!(cell.stopped());
    }
}
