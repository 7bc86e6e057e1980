//! The Lua module `amp_core`: its entry point and the exported function
//! table (see `lua/amp/native.lua`). Every exported function catches panics;
//! it returns its value or raises an error with a readable message; the
//! hot-path ones called from autocmds return nothing and never raise. The exports are
//! mlua functions: nvim-oxi 0.6 leaks every string that crosses its function
//! and API wrappers (see `lua.rs`), so it is used only for its libuv handle
//! and `vim.schedule` (in `bridge`).

use std::ffi::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};

use mlua::{FromLua, FromLuaMulti, Function, Lua, Table};
use serde::Serialize;
use serde_json::Value;

use crate::core::{filetext, log};
use crate::nvim::log_file::default_log_file;
use crate::nvim::{annotations as editor_annotations, bridge, bulk, ide_name, lua, session};
use crate::serve::options::ServerOptions;

/// The module's entry point (`luaopen_amp_core`, made by mlua), `require`d
/// through `package.loadlib` on Neovim's main thread. An error raises in
/// the loader, which `lua/amp/native.lua` calls under `pcall`.
#[mlua::lua_module(name = "amp_core", skip_memory_check)]
fn amp_core(lua: &Lua) -> mlua::Result<Table> {
    // nvim-oxi keeps the Lua state and the libuv loop in thread-locals for
    // `AsyncHandle` and `schedule`; its entry point does that and pushes nil.
    // SAFETY: on the main thread, with the state Neovim called us with.
    unsafe {
        lua.exec_raw::<()>((), |state| {
            let pushed = nvim_oxi::entrypoint::entrypoint(state.cast(), || ());
            mlua::ffi::lua_pop(state, pushed);
        })?;
    }
    lua::init(lua)
        .and_then(|()| exports(lua))
        .map_err(|e| mlua::Error::runtime(format!("amp_core failed to load: {e}")))
}

/// The module's table: each function is made the first time it is looked
/// up (`__index`), and kept. Making all ~30 of them at load took ~0.05 ms
/// of start-up, which needs four or five.
fn exports(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    let index = lua.create_function(|lua, (t, name): (Table, mlua::String)| {
        let Ok(name) = name.to_str() else { return Ok(None) };
        let made = export_named(lua, &name)?;
        if let Some(f) = &made {
            t.raw_set(&*name, f.clone())?;
        }
        Ok(made)
    })?;
    let meta = lua.create_table()?;
    meta.set("__index", index)?;
    t.set_metatable(Some(meta));
    Ok(t)
}

/// The exported function `name`, made on first use (see [`exports`]).
fn export_named(lua: &Lua, name: &str) -> mlua::Result<Option<Function>> {
    Ok(Some(match name {
        "version" => export(lua, "version", |()| Ok(env!("CARGO_PKG_VERSION")))?,
        "start" => export(lua, "start", |Json(mut options)| {
            // The editor's name and, for `setup({})`, the schema's default
            // log file are made here when left out (lua/amp/core.lua does):
            // no Lua module is loaded for them at start-up.
            if let Value::Object(fields) = &mut options {
                if !fields.contains_key("ide_name") {
                    fields.insert("ide_name".into(), ide_name::ide_name().into());
                }
                if !fields.contains_key("log_file") {
                    if let Some(file) = default_log_file() {
                        fields.insert("log_file".into(), file.into());
                    }
                }
            }
            session::start(ServerOptions::from_json(&options).map_err(|e| e.to_string())?)
        })?,
        "stop" => export(lua, "stop", |()| {
            session::stop();
            Ok(())
        })?,
        "status" => export(lua, "status", |()| Ok(session::status()))?,
        "running" => export(lua, "running", |()| Ok(session::running()))?,
        // Whether big reads and writes use Neovim's C API on this version (nvim::bulk).
        "bulk_c_api" => export(lua, "bulk_c_api", |()| Ok(bulk::c_api()))?,
        "set_workspace_folders" => {
            export(lua, "set_workspace_folders", |folders: Vec<String>| session::set_workspace_folders(folders))?
        }
        // at_mentioned(path, line_start, line_end): 0-based, end inclusive; the
        // number of Claude clients it was queued for.
        "at_mentioned" => export(lua, "at_mentioned", |(path, start, end): (String, usize, usize)| {
            Ok(session::at_mentioned(&path, start, end))
        })?,
        // broadcast("userSentMessage" | "appendToPrompt", { message = text }):
        // the text to every client whose protocol carries it; how many got it.
        "broadcast" => export(lua, "broadcast", |(kind, Json(payload)): (Broadcast, Json)| {
            let text =
                payload.get("message").and_then(Value::as_str).ok_or("broadcast: expected { message = text }")?;
            Ok(session::send_text(kind == Broadcast::UserSentMessage, text))
        })?,
        // Hot paths (autocmds): no arguments used, nothing returned.
        "selection_changed" => quiet(lua, session::selection_changed)?,
        // SAFETY: `cursor_moved` reads only its own arguments off the stack.
        "cursor_moved" => unsafe { lua.create_c_function(cursor_moved) }?,
        "visible_files_changed" => quiet(lua, session::visible_files_changed)?,
        "buffers_changed" => quiet(lua, session::buffers_changed)?,
        "buffer_written" => export(lua, "buffer_written", |name: String| {
            session::buffer_written(&name);
            Ok(())
        })?,
        "set_read_options" => export(lua, "set_read_options", |Json(options)| {
            let read = crate::serve::options::read_options("read_options", &options).map_err(|e| e.to_string())?;
            filetext::set_read_options(read);
            Ok(())
        })?,
        "take_disk_version" => export(lua, "take_disk_version", |name: String| session::take_disk_version(&name))?,
        // `:Amp tap pair`: the code the user typed, to the tap connection
        // waiting for it (lua/amp/tap.lua).
        "tap_pair" => {
            export(lua, "tap_pair", |code: String| crate::tap::pairing::submit(&code).map_err(|e| e.to_string()))?
        }
        // OpenCtx (see lua/amp/openctx.lua).
        "openctx_configure" => export(lua, "openctx_configure", |Json(options)| {
            crate::nvim::openctx::configure(crate::nvim::openctx::ServiceOptions::from_json(&options)?)
        })?,
        // The Lua function that takes the answers to requests made with an id.
        "openctx_set_resolver" => lua.create_function(|_, resolve: Function| {
            editor_annotations::set_resolver(resolve);
            Ok(())
        })?,
        "openctx_stop" => export(lua, "openctx_stop", |()| {
            crate::nvim::openctx::stop();
            Ok(())
        })?,
        "openctx_running" => export(lua, "openctx_running", |()| Ok(crate::nvim::openctx::running()))?,
        "openctx_refresh_buffer" => {
            export(lua, "openctx_refresh_buffer", |bufnr: i32| crate::nvim::openctx::refresh_buffer(bufnr))?
        }
        "openctx_reset" => export(lua, "openctx_reset", |()| crate::nvim::openctx::reset())?,
        "openctx_set_visible" => export(lua, "openctx_set_visible", |visible: Option<bool>| {
            editor_annotations::set_visible(visible.unwrap_or(true));
            Ok(())
        })?,
        // Hot path: the annotations' decoration provider `on_win`, called on
        // every redraw of every window; returns false, never raises.
        "openctx_on_win" => lua.create_function(|_, args: mlua::MultiValue| {
            if let Err(panic) = catch_unwind(AssertUnwindSafe(|| editor_annotations::on_win(&args))) {
                log::error(format!("panic drawing annotations: {}", bridge::panic_message(&panic)));
            }
            Ok(false)
        })?,
        // A buffer unloaded or wiped out (its annotations' state goes), and the
        // buffers that still have some (for tests).
        "openctx_forget_buffer" => export(lua, "openctx_forget_buffer", |bufnr: i32| {
            editor_annotations::forget_buffer(bufnr);
            Ok(())
        })?,
        "openctx_tracked_buffers" => {
            export(lua, "openctx_tracked_buffers", |()| Ok(editor_annotations::tracked_buffers()))?
        }
        "openctx_mentions" => {
            export(lua, "openctx_mentions", |(query, path, id): (Option<String>, Option<String>, i64)| {
                crate::nvim::openctx::mentions(query.unwrap_or_default(), path.unwrap_or_default(), id)
            })?
        }
        "openctx_check" => export(lua, "openctx_check", |id: i64| crate::nvim::openctx::check(id))?,
        "openctx_items_mention" => {
            export(lua, "openctx_items_mention", |(provider, Json(mention), id): (String, Json, i64)| {
                crate::nvim::openctx::items_for_mention(provider, mention, id)
            })?
        }
        "openctx_items_message" => export(lua, "openctx_items_message", |(message, id): (String, i64)| {
            crate::nvim::openctx::items_for_message(message, id)
        })?,
        // configure_log(file, level, max_bytes?): the log file, its level and its size cap.
        "configure_log" => export(lua, "configure_log", |(file, level, max): (String, Option<Level>, Option<u64>)| {
            if let Some(max) = max {
                log::set_max_bytes(max);
            }
            log::init(std::path::PathBuf::from(file), level.map_or(log::Level::Info, |l| l.0));
            Ok(())
        })?,
        "log" => export(lua, "log", |(level, Json(message)): (Option<Level>, Json)| {
            let level = level.map_or(log::Level::Info, |l| l.0);
            match message {
                Value::String(s) => log::write(level, s),
                other => log::write(level, other.to_string()),
            }
            Ok(())
        })?,
        _ => return Ok(None),
    }))
}

/// An argument read as JSON: options tables and payloads, whose shape the
/// Rust side checks itself (`ServerOptions::from_json`, ...).
struct Json(Value);

impl FromLua for Json {
    fn from_lua(value: mlua::Value, _: &Lua) -> mlua::Result<Self> {
        lua::from_lua(value).map(Json)
    }
}

/// `broadcast`'s first argument: the Amp notification a text travels as.
#[derive(PartialEq)]
enum Broadcast {
    /// Sent as the user's message (submitted).
    UserSentMessage,
    /// Appended to the agent's prompt.
    AppendToPrompt,
}

impl FromLua for Broadcast {
    fn from_lua(value: mlua::Value, lua: &Lua) -> mlua::Result<Self> {
        match String::from_lua(value, lua)?.as_str() {
            "userSentMessage" => Ok(Broadcast::UserSentMessage),
            "appendToPrompt" => Ok(Broadcast::AppendToPrompt),
            other => Err(mlua::Error::external(Failure(format!("unknown notification {other}")))),
        }
    }
}

/// A log level by its name (`"info"`, ...); an unknown name is info, as
/// the log always took it.
struct Level(log::Level);

impl FromLua for Level {
    fn from_lua(value: mlua::Value, lua: &Lua) -> mlua::Result<Self> {
        Ok(Level(String::from_lua(value, lua).ok().and_then(|s| log::Level::parse(&s)).unwrap_or(log::Level::Info)))
    }
}

/// An error a native function raises: its text is all Lua sees
/// (`tostring(err)`), with no "runtime error:" prefix.
#[derive(Debug)]
struct Failure(String);

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Failure {}

/// Wraps `f` as the Lua function `name`: its arguments are read into the
/// types `f` takes (a tuple for several; a wrong one raises `name: <why>`),
/// its value goes back as Lua data, and an error or a panic raises a Lua
/// error with its message (`lua/amp/native.lua` calls these under `pcall`).
fn export<A, R>(lua: &Lua, name: &'static str, f: impl Fn(A) -> Result<R, String> + 'static) -> mlua::Result<Function>
where
    A: FromLuaMulti,
    R: Serialize,
{
    lua.create_function(move |lua, args: mlua::MultiValue| {
        let args = A::from_lua_multi(args, lua).map_err(|e| format!("{name}: invalid argument: {e}"));
        let value = args.and_then(|args| {
            catch_unwind(AssertUnwindSafe(|| f(args))).unwrap_or_else(|panic| {
                let message = bridge::panic_message(&panic);
                log::error(format!("panic in a native call: {message}"));
                Err(format!("amp: internal error: {message}"))
            })
        });
        match value.and_then(|v| serde_json::to_value(v).map_err(|e| format!("{name}: {e}"))) {
            Ok(value) => lua::to_lua(&value),
            Err(err) => Err(mlua::Error::external(Failure(err))),
        }
    })
}

/// Wraps an argument-free action for autocmd callbacks: extra arguments are
/// ignored, panics are caught and logged, nothing is returned.
fn quiet(lua: &Lua, f: fn()) -> mlua::Result<Function> {
    lua.create_function(move |_, _: mlua::MultiValue| {
        if let Err(panic) = catch_unwind(f) {
            log::error(format!("panic in an editor event: {}", bridge::panic_message(&panic)));
        }
        Ok(())
    })
}

/// `cursor_moved(name)`: the cursor of the current window, which shows the
/// file `name`, moved outside Visual mode. Called on every keystroke by
/// buffer-local autocmds, so it is a raw C function: the name is borrowed,
/// not converted, and there is none of mlua's per-call machinery; the cursor
/// and line are read from Neovim's C API (see `nvim::bulk`). Anything but
/// a string argument is ignored; returns nothing.
unsafe extern "C-unwind" fn cursor_moved(state: *mut mlua::ffi::lua_State) -> c_int {
    use mlua::ffi;
    if ffi::lua_type(state, 1) != ffi::LUA_TSTRING {
        return 0;
    }
    let mut len = 0usize;
    let p = ffi::lua_tolstring(state, 1, &mut len);
    if p.is_null() {
        return 0;
    }
    // SAFETY: the string stays on the Lua stack until this function returns.
    let path = std::slice::from_raw_parts(p.cast::<u8>(), len);
    if let Err(panic) = catch_unwind(AssertUnwindSafe(|| session::cursor_moved(path))) {
        log::error(format!("panic in an editor event: {}", bridge::panic_message(&panic)));
    }
    0
}
