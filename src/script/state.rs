//! One Lua state as wrk makes it for a script: LuaJIT with every standard
//! library (`ffi` and `jit` among them, and `require` of C modules on
//! `LUA_CPATH`, as scripts that load luasocket need), the `wrk` table filled
//! in from the run's URL and headers, and the script's file run in it.

use super::ScriptError;
use crate::target::Target;
use mlua::{Lua, LuaOptions, MetaMethod, StdLib, UserData, UserDataMethods, Value};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Duration;

/// The `wrk` table's own functions and defaults, as Lua source.
const WRK_LUA: &str = include_str!("wrk.lua");

/// How long `wrk.connect` waits for a connection before it answers false.
const CONNECT_PROBE: Duration = Duration::from_secs(2);

/// A script's source: its path (as named in errors) and text.
#[derive(Clone, Debug)]
pub struct Source {
    pub path: String,
    pub text: String,
}

/// A server address as scripts hold it (`wrk.lookup`'s entries,
/// `thread.addr`); prints as `host:port`, as wrk's do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Addr(pub SocketAddr);

impl UserData for Addr {
    fn add_methods<M: UserDataMethods<Self>>(methods: &mut M) {
        methods.add_meta_method(MetaMethod::ToString, |_, addr, ()| {
            Ok(format!("{}:{}", addr.0.ip(), addr.0.port()))
        });
    }
}

/// A new state for `source`, for a run against `target` with the user's
/// `headers`: the `wrk` table filled in, then the script's file run.
pub fn new_state(source: &Source, target: &Target, headers: &[(String, String)]) -> Result<Lua, ScriptError> {
    // SAFETY: not memory unsafety of volley's own: this opens LuaJIT's
    // `ffi` library and lets `require` load C modules, which can do
    // anything native code can. wrk's scripts have both, and scripts that
    // `require "socket"` (luasocket) need them; the script is the user's
    // own program, run as they asked.
    let lua = unsafe { Lua::unsafe_new_with(StdLib::ALL, LuaOptions::default()) };
    let lua_error = |e: mlua::Error| ScriptError::Lua(describe(&e));
    let wrk: mlua::Table = lua.load(WRK_LUA).set_name("=wrk").eval().map_err(lua_error)?;
    let url = url::Url::parse(&target.url).ok();
    wrk.set("scheme", if target.tls { "https" } else { "http" })
        .map_err(lua_error)?;
    let host = url
        .as_ref()
        .and_then(|u| u.host_str().map(|h| h.trim_matches(['[', ']']).to_string()))
        .unwrap_or_default();
    wrk.set("host", host).map_err(lua_error)?;
    // As wrk: the port only when the URL gives one.
    let port = url.as_ref().and_then(|u| u.port()).map(|p| p.to_string());
    wrk.set("port", port).map_err(lua_error)?;
    wrk.set("path", target.path_and_query.as_str())
        .map_err(lua_error)?;
    let table: mlua::Table = wrk.get("headers").map_err(lua_error)?;
    for (name, value) in headers {
        table.set(name.as_str(), value.as_str()).map_err(lua_error)?;
    }
    wrk.set("lookup", lua.create_function(lookup).map_err(lua_error)?)
        .map_err(lua_error)?;
    wrk.set("connect", lua.create_function(connect).map_err(lua_error)?)
        .map_err(lua_error)?;
    let loaded: mlua::Table = lua
        .globals()
        .get::<mlua::Table>("package")
        .and_then(|p| p.get("loaded"))
        .map_err(lua_error)?;
    loaded.set("wrk", &wrk).map_err(lua_error)?;
    lua.globals().set("wrk", wrk).map_err(lua_error)?;
    lua.load(&source.text)
        .set_name(format!("@{}", source.path))
        .exec()
        .map_err(|e| ScriptError::Load(describe(&e)))?;
    Ok(lua)
}

/// `wrk.lookup(host, service)`: every address of `host` at `service` (a
/// port number, `http` or `https`).
fn lookup(lua: &Lua, (host, service): (String, Value)) -> mlua::Result<mlua::Table> {
    let service = match &service {
        Value::String(s) => s.to_string_lossy(),
        Value::Integer(n) => n.to_string(),
        Value::Number(n) => n.to_string(),
        _ => "http".to_string(),
    };
    let port: u16 = match service.as_str() {
        "http" => 80,
        "https" => 443,
        other => other.parse().map_err(|_| {
            mlua::Error::runtime(format!("unable to resolve {host}:{service}: unknown service"))
        })?,
    };
    let addrs = (host.as_str(), port)
        .to_socket_addrs()
        .map_err(|e| mlua::Error::runtime(format!("unable to resolve {host}:{service}: {e}")))?;
    lua.create_sequence_from(addrs.map(Addr))
}

/// `wrk.connect(addr)`: whether a TCP connection to `addr` opens.
fn connect(_: &Lua, addr: mlua::UserDataRef<Addr>) -> mlua::Result<bool> {
    Ok(TcpStream::connect_timeout(&addr.0, CONNECT_PROBE).is_ok())
}

/// A Lua error as one line: `file:line: message`, without mlua's wrapping
/// or the traceback.
pub fn describe(err: &mlua::Error) -> String {
    let mut err = err;
    while let mlua::Error::CallbackError { cause, .. } = err {
        err = cause;
    }
    let text = match err {
        mlua::Error::RuntimeError(message) => message.clone(),
        mlua::Error::SyntaxError { message, .. } => message.clone(),
        other => other.to_string(),
    };
    let first = text.lines().next().unwrap_or_default();
    first.strip_prefix("runtime error: ").unwrap_or(first).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(text: &str) -> Source {
        Source {
            path: "test.lua".into(),
            text: text.into(),
        }
    }

    #[test]
    fn the_wrk_table_is_filled_from_the_url_and_headers() {
        let target = Target::parse("http://127.0.0.1:8080/a?b=1").unwrap();
        let headers = [("X-One".to_string(), "1".to_string())];
        let lua = new_state(&source("answer = wrk.format()"), &target, &headers).unwrap();
        let wrk: mlua::Table = lua.globals().get("wrk").unwrap();
        assert_eq!(wrk.get::<String>("host").unwrap(), "127.0.0.1");
        assert_eq!(wrk.get::<String>("port").unwrap(), "8080");
        assert_eq!(wrk.get::<String>("path").unwrap(), "/a?b=1");
        let text: String = lua.globals().get("answer").unwrap();
        assert!(text.starts_with("GET /a?b=1 HTTP/1.1\r\n"), "{text}");
        assert!(text.contains("X-One: 1\r\n"), "{text}");
        assert!(text.ends_with("\r\n\r\n"), "{text}");
    }

    #[test]
    fn luajit_keeps_lua_5_1s_ways() {
        // A float seed (Lua 5.4 refuses one) and the `jit` library.
        let target = Target::parse("http://127.0.0.1:1/").unwrap();
        let lua = new_state(&source("math.randomseed(1.5); v = jit.version"), &target, &[]).unwrap();
        let version: String = lua.globals().get("v").unwrap();
        assert!(version.starts_with("LuaJIT"), "{version}");
    }

    #[test]
    fn errors_name_the_file_and_line() {
        let target = Target::parse("http://127.0.0.1:1/").unwrap();
        let err = new_state(&source("x = 1\nfunction (\n"), &target, &[]).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("test.lua:2:"), "{text}");
        let err = new_state(&source("\n\nerror('no')"), &target, &[]).unwrap_err();
        assert!(err.to_string().contains("test.lua:3: no"), "{err}");
    }
}
