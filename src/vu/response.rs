//! What `http.get` and the others return to a VU: a response whose parts
//! become Lua values only when the script reads them (the body is copied
//! into Lua by `res.body` or `res:json()`, the headers' table made by
//! `res.headers`), so a VU that looks only at the status pays for nothing
//! else.

use mlua::{LuaSerdeExt, MetaMethod, UserData, UserDataFields, UserDataMethods, Value};

/// One answered (or failed) request, as a VU holds it.
#[derive(Debug, Default)]
pub struct Response {
    /// 0 when no response came.
    pub status: u16,
    /// The header names and values back to back; `ends` says where each
    /// name and value ends.
    pub flat: Vec<u8>,
    pub ends: Vec<(usize, usize)>,
    pub body: Vec<u8>,
    /// The error kind (`connect`, `timeout`, ...) when no response came,
    /// or when its status was not a success.
    pub error: Option<&'static str>,
    /// Milliseconds from the send to the whole response.
    pub duration_ms: f64,
    /// The URL it was sent to.
    pub url: String,
}

impl Response {
    fn headers(&self, lua: &mlua::Lua) -> mlua::Result<mlua::Table> {
        let headers = lua.create_table_with_capacity(0, self.ends.len())?;
        let mut start = 0;
        for &(name_end, end) in &self.ends {
            let name = &self.flat[start..name_end];
            let value = &self.flat[name_end..end];
            start = end;
            // Repeated fields are joined, as fetch() and k6 join them.
            let name = lua.create_string(name.to_ascii_lowercase())?;
            let joined = match headers.raw_get::<Option<mlua::LuaString>>(&name)? {
                Some(before) => {
                    let mut both = before.as_bytes().to_vec();
                    both.extend_from_slice(b", ");
                    both.extend_from_slice(value);
                    lua.create_string(both)?
                }
                None => lua.create_string(value)?,
            };
            headers.raw_set(name, joined)?;
        }
        headers.set_metatable(Some(lua.named_registry_value::<mlua::Table>(ANY_CASE_KEY)?))?;
        Ok(headers)
    }
}

/// Where each state keeps the headers' metatable (see [`ANY_CASE`]).
pub const ANY_CASE_KEY: &str = "volley.any_case";

/// The headers' metatable: names are kept in lower case, and a name is
/// looked up in lower case, so `headers["Content-Type"]` finds any
/// spelling.
pub const ANY_CASE: &str = r#"
return { __index = function(headers, wanted)
  if type(wanted) ~= "string" then return nil end
  return rawget(headers, wanted:lower())
end }
"#;

impl UserData for Response {
    fn add_fields<F: UserDataFields<Self>>(fields: &mut F) {
        fields.add_field_method_get("status", |_, res| Ok(res.status));
        fields.add_field_method_get("body", |lua, res| lua.create_string(&res.body));
        fields.add_field_method_get("headers", |lua, res| res.headers(lua));
        fields.add_field_method_get("error", |_, res| Ok(res.error));
        fields.add_field_method_get("url", |_, res| Ok(res.url.clone()));
        fields.add_field_method_get("timings", |lua, res| {
            let timings = lua.create_table()?;
            timings.raw_set("duration", res.duration_ms)?;
            Ok(timings)
        });
    }

    fn add_methods<M: UserDataMethods<Self>>(methods: &mut M) {
        methods.add_method("json", |lua, res, ()| {
            let parsed: serde_json::Value = serde_json::from_slice(&res.body).map_err(|e| {
                mlua::Error::runtime(format!("the response from {} is not JSON: {e}", res.url))
            })?;
            lua.to_value_with(&parsed, json_to_lua())
        });
        methods.add_meta_method(MetaMethod::ToString, |_, res, ()| {
            Ok(format!("response {} from {}", res.status, res.url))
        });
    }
}

/// JSON as Lua holds it: `null` is `nil`, arrays are plain sequences.
pub fn json_to_lua() -> mlua::serde::ser::Options {
    mlua::serde::ser::Options::new()
        .serialize_none_to_null(false)
        .serialize_unit_to_null(false)
        .set_array_metatable(false)
}

/// A Lua value copied into another state, through JSON (what `setup()`
/// returns reaches every worker's state so).
pub fn to_json(lua: &mlua::Lua, value: Value) -> mlua::Result<serde_json::Value> {
    lua.from_value_with(
        value,
        mlua::serde::de::Options::new()
            .deny_unsupported_types(false)
            .encode_empty_tables_as_array(false),
    )
}
