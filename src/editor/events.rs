//! `User` autocmd events the plugin fires, with `data` for listeners.

use nvim_oxi::mlua::{self, Table};
use serde_json::Value;

/// Fires `User <pattern>` with `data`. Errors in listeners are the listeners'
/// own: they are logged, not raised into the server.
pub fn fire(pattern: &str, data: &Value) {
    let lua = mlua::lua();
    let run = || -> mlua::Result<()> {
        let opts = lua.create_table()?;
        opts.set("pattern", pattern)?;
        opts.set("modeline", false)?;
        opts.set("data", to_lua(&lua, data)?)?;
        let vim: Table = lua.globals().get("vim")?;
        let api: Table = vim.get("api")?;
        api.get::<mlua::Function>("nvim_exec_autocmds")?.call::<()>(("User", opts))
    };
    if let Err(e) = run() {
        crate::log::warn(format!("User {pattern} autocmd failed: {e}"));
    }
}

/// A JSON value as a Lua value (objects and arrays become tables).
pub fn to_lua(lua: &mlua::Lua, value: &Value) -> mlua::Result<mlua::Value> {
    Ok(match value {
        Value::Null => mlua::Value::Nil,
        Value::Bool(b) => mlua::Value::Boolean(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => mlua::Value::Integer(i),
            None => mlua::Value::Number(n.as_f64().unwrap_or(0.0)),
        },
        Value::String(s) => mlua::Value::String(lua.create_string(s)?),
        Value::Array(items) => {
            let t = lua.create_table_with_capacity(items.len(), 0)?;
            for (i, item) in items.iter().enumerate() {
                t.raw_set(i + 1, to_lua(lua, item)?)?;
            }
            mlua::Value::Table(t)
        }
        Value::Object(map) => {
            let t = lua.create_table_with_capacity(0, map.len())?;
            for (k, v) in map {
                t.raw_set(k.as_str(), to_lua(lua, v)?)?;
            }
            mlua::Value::Table(t)
        }
    })
}
