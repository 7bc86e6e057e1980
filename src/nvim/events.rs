//! `User` autocmd events the plugin fires, with `data` for listeners.

use serde_json::Value;

use super::lua;

/// Fires `User <pattern>` with `data`. Errors in listeners are the listeners'
/// own: they are logged, not raised into the server.
pub fn fire(pattern: &str, data: &Value) {
    let run = || -> mlua::Result<()> {
        let lua = lua::lua()?;
        let opts = lua.create_table()?;
        opts.set("pattern", pattern)?;
        opts.set("modeline", false)?;
        opts.set("data", lua::to_lua(data)?)?;
        lua::api("nvim_exec_autocmds", ("User", opts))
    };
    if let Err(e) = run() {
        crate::core::log::warn(format!("User {pattern} autocmd failed: {e}"));
    }
}

/// `require("amp.notify").notify(message, vim.log.levels[level])`: one line,
/// cut to fit the screen (a longer message stops Neovim at a hit-enter
/// prompt, where agent requests wait), through `vim.notify`.
pub fn notify(message: &str, level: &str) {
    let run = || -> mlua::Result<()> {
        let lua = lua::lua()?;
        let vim: mlua::Table = lua.globals().get("vim")?;
        let levels: mlua::Table = vim.get::<mlua::Table>("log")?.get("levels")?;
        let level = levels.get::<mlua::Value>(level)?;
        let require: mlua::Function = lua.globals().get("require")?;
        match require.call::<mlua::Table>("amp.notify") {
            Ok(module) => module.get::<mlua::Function>("notify")?.call::<()>((message, level)),
            Err(_) => {
                let opts = lua.create_table()?;
                opts.set("title", "amp")?;
                lua::global("vim.notify", (message, level, opts))
            }
        }
    };
    if let Err(e) = run() {
        crate::core::log::warn(format!("vim.notify failed: {e}"));
    }
}
