//! How Rust reaches Neovim's API: through mlua and the helpers in
//! `helpers.lua`, not nvim-oxi's API wrappers. nvim-oxi 0.6 never frees the
//! strings that cross its wrappers (its `String`'s `Drop` is a no-op), so
//! every buffer name, line or option value read that way leaks; Lua strings
//! are garbage collected. nvim-oxi is kept for the libuv handle and
//! `vim.schedule` (see `bridge`).

use std::cell::OnceCell;

use mlua::{FromLuaMulti, Function, IntoLuaMulti, Lua, LuaSerdeExt, Table};
use serde_json::Value;

thread_local! {
    static STATE: OnceCell<State> = const { OnceCell::new() };
}

struct State {
    lua: Lua,
    helpers: Table,
    api: Table,
    /// Helpers already looked up by name (hot paths call them per keystroke).
    resolved: std::cell::RefCell<std::collections::HashMap<&'static str, Function>>,
}

/// Called once when the module is loaded (main thread).
pub fn init(lua: &Lua) -> mlua::Result<()> {
    let helpers: Table = lua.load(include_str!("helpers.lua")).set_name("@amp_core/editor/helpers.lua").call(())?;
    let vim: Table = lua.globals().get("vim")?;
    let api: Table = vim.get("api")?;
    STATE.with(|s| {
        let _ = s.set(State { lua: lua.clone(), helpers, api, resolved: Default::default() });
    });
    Ok(())
}

fn with<R>(f: impl FnOnce(&State) -> mlua::Result<R>) -> mlua::Result<R> {
    STATE.with(|s| match s.get() {
        Some(state) => f(state),
        None => Err(mlua::Error::runtime("amp_core is not initialised")),
    })
}

/// The Lua state (main thread only).
pub fn lua() -> mlua::Result<Lua> {
    with(|s| Ok(s.lua.clone()))
}

/// Calls `helpers.<name>(args)`.
pub fn helper<A: IntoLuaMulti, R: FromLuaMulti>(name: &'static str, args: A) -> mlua::Result<R> {
    with(|s| {
        let cached = s.resolved.borrow().get(name).cloned();
        let function = match cached {
            Some(f) => f,
            None => {
                let f: Function = s.helpers.get(name)?;
                s.resolved.borrow_mut().insert(name, f.clone());
                f
            }
        };
        function.call(args)
    })
}

/// Calls `vim.api.<name>(args)`.
pub fn api<A: IntoLuaMulti, R: FromLuaMulti>(name: &str, args: A) -> mlua::Result<R> {
    with(|s| s.api.get::<Function>(name)?.call(args))
}

/// Calls a function found at a dotted path from the globals, e.g.
/// `"vim.notify"` or `"vim.ui.open"`.
pub fn global<A: IntoLuaMulti, R: FromLuaMulti>(path: &str, args: A) -> mlua::Result<R> {
    with(|s| {
        let mut parts = path.split('.');
        let mut table: Table = s.lua.globals();
        let mut name = parts.next().unwrap_or_default();
        for next in parts {
            table = table.get(name)?;
            name = next;
        }
        table.get::<Function>(name)?.call(args)
    })
}

/// A JSON value as a Lua value: objects and arrays become tables, null nil.
pub fn to_lua(value: &Value) -> mlua::Result<mlua::Value> {
    with(|s| {
        let options = mlua::SerializeOptions::new().serialize_none_to_null(false).serialize_unit_to_null(false);
        s.lua.to_value_with(value, options)
    })
}

/// A Lua value as JSON (an empty table becomes an empty object).
pub fn from_lua(value: mlua::Value) -> mlua::Result<Value> {
    with(|s| s.lua.from_value(value))
}
