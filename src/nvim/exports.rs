//! The Lua module `amp_core`: its entry point and the exported function
//! table (see `lua/amp/native.lua`). Every exported function catches panics;
//! it returns its value or raises an error with a readable message; the
//! hot-path ones called from autocmds return nothing and never raise. The exports are
//! mlua functions: nvim-oxi 0.6 leaks every string that crosses its function
//! and API wrappers (see `lua.rs`), so it is used only for its libuv handle
//! and `vim.schedule` (in `bridge`).

use std::ffi::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};

use mlua::{Function, Lua, Table};
use serde_json::{json, Value};

use crate::core::{filetext, log};
use crate::nvim::{annotations as editor_annotations, bridge, bulk, lua, session};
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
    bulk::init(lua);
    lua::init(lua)
        .and_then(|()| exports(lua))
        .map_err(|e| mlua::Error::runtime(format!("amp_core failed to load: {e}")))
}

fn exports(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.set("version", export(lua, |_: Vec<Value>| Ok(json!(env!("CARGO_PKG_VERSION"))))?)?;
    t.set("start", export(lua, |args: Vec<Value>| session::start(ServerOptions::from_json(&arg(&args, 0))?))?)?;
    t.set(
        "stop",
        export(lua, |_: Vec<Value>| {
            session::stop();
            Ok(Value::Null)
        })?,
    )?;
    t.set("status", export(lua, |_: Vec<Value>| Ok(session::status()))?)?;
    // Whether big reads and writes use Neovim's C API on this version (nvim::bulk).
    t.set("bulk_c_api", export(lua, |_: Vec<Value>| Ok(json!(bulk::c_api())))?)?;
    t.set(
        "set_workspace_folders",
        export(lua, |args: Vec<Value>| {
            let folders: Vec<String> = serde_json::from_value(arg(&args, 0))
                .map_err(|e| format!("set_workspace_folders: expected a list of paths ({e})"))?;
            session::set_workspace_folders(folders).map(|_| Value::Null)
        })?,
    )?;
    // at_mentioned(path, line_start, line_end): 0-based, end inclusive; the
    // number of Claude clients it was queued for.
    t.set(
        "at_mentioned",
        export(lua, |args: Vec<Value>| {
            let path = string_arg("at_mentioned", &args, 0)?;
            let line =
                |i: usize| arg(&args, i).as_u64().map(|n| n as usize).ok_or("at_mentioned: expected line numbers");
            Ok(json!(session::at_mentioned(&path, line(1)?, line(2)?)))
        })?,
    )?;
    // broadcast("userSentMessage" | "appendToPrompt", { message = text }):
    // the text to every client whose protocol carries it; how many got it.
    t.set(
        "broadcast",
        export(lua, |args: Vec<Value>| {
            let submit = match string_arg("broadcast", &args, 0)?.as_str() {
                "userSentMessage" => true,
                "appendToPrompt" => false,
                other => return Err(format!("broadcast: unknown notification {other}")),
            };
            let payload = arg(&args, 1);
            let text =
                payload.get("message").and_then(Value::as_str).ok_or("broadcast: expected { message = text }")?;
            Ok(json!(session::send_text(submit, text)))
        })?,
    )?;
    // Hot paths (autocmds): no arguments used, nothing returned.
    t.set("selection_changed", quiet(lua, session::selection_changed)?)?;
    // SAFETY: `cursor_moved` reads only its own arguments off the stack.
    t.set("cursor_moved", unsafe { lua.create_c_function(cursor_moved) }?)?;
    t.set("visible_files_changed", quiet(lua, session::visible_files_changed)?)?;
    t.set("buffers_changed", quiet(lua, session::buffers_changed)?)?;
    t.set(
        "buffer_written",
        export(lua, |args: Vec<Value>| {
            session::buffer_written(&string_arg("buffer_written", &args, 0)?);
            Ok(Value::Null)
        })?,
    )?;
    t.set(
        "set_read_options",
        export(lua, |args: Vec<Value>| {
            filetext::set_read_options(crate::serve::options::read_options("read_options", &arg(&args, 0))?);
            Ok(Value::Null)
        })?,
    )?;
    t.set(
        "take_disk_version",
        export(lua, |args: Vec<Value>| {
            session::take_disk_version(&string_arg("take_disk_version", &args, 0)?).map(|_| Value::Null)
        })?,
    )?;
    // `:Amp tap pair`: the code the user typed, to the tap connection
    // waiting for it (lua/amp/tap.lua).
    t.set(
        "tap_pair",
        export(lua, |args: Vec<Value>| {
            crate::tap::pairing::submit(&string_arg("tap_pair", &args, 0)?).map(|_| Value::Null)
        })?,
    )?;
    // OpenCtx (see lua/amp/openctx.lua).
    t.set(
        "openctx_configure",
        export(lua, |args: Vec<Value>| {
            crate::nvim::openctx::configure(crate::nvim::openctx::ServiceOptions::from_json(&arg(&args, 0))?)
        })?,
    )?;
    // The Lua function that takes the answers to requests made with an id.
    t.set(
        "openctx_set_resolver",
        lua.create_function(|_, resolve: Function| {
            editor_annotations::set_resolver(resolve);
            Ok(())
        })?,
    )?;
    t.set(
        "openctx_stop",
        export(lua, |_: Vec<Value>| {
            crate::nvim::openctx::stop();
            Ok(Value::Null)
        })?,
    )?;
    t.set("openctx_running", export(lua, |_: Vec<Value>| Ok(json!(crate::nvim::openctx::running())))?)?;
    t.set(
        "openctx_refresh_buffer",
        export(lua, |args: Vec<Value>| {
            let bufnr = arg(&args, 0).as_i64().ok_or("openctx_refresh_buffer: expected a buffer number")?;
            crate::nvim::openctx::refresh_buffer(bufnr as i32).map(|_| Value::Null)
        })?,
    )?;
    t.set("openctx_reset", export(lua, |_: Vec<Value>| crate::nvim::openctx::reset().map(|_| Value::Null))?)?;
    t.set(
        "openctx_set_visible",
        export(lua, |args: Vec<Value>| {
            editor_annotations::set_visible(arg(&args, 0).as_bool().unwrap_or(true));
            Ok(Value::Null)
        })?,
    )?;
    // Hot path: the annotations' decoration provider `on_win`, called on
    // every redraw of every window; returns false, never raises.
    t.set(
        "openctx_on_win",
        lua.create_function(|_, args: mlua::MultiValue| {
            if let Err(panic) = catch_unwind(AssertUnwindSafe(|| editor_annotations::on_win(&args))) {
                log::error(format!("panic drawing annotations: {}", bridge::panic_message(&panic)));
            }
            Ok(false)
        })?,
    )?;
    // A buffer unloaded or wiped out (its annotations' state goes), and the
    // buffers that still have some (for tests).
    t.set(
        "openctx_forget_buffer",
        export(lua, |args: Vec<Value>| {
            let bufnr = arg(&args, 0).as_i64().ok_or("openctx_forget_buffer: expected a buffer number")?;
            editor_annotations::forget_buffer(bufnr as i32);
            Ok(Value::Null)
        })?,
    )?;
    t.set("openctx_tracked_buffers", export(lua, |_: Vec<Value>| Ok(json!(editor_annotations::tracked_buffers())))?)?;
    t.set(
        "openctx_mentions",
        export(lua, |args: Vec<Value>| {
            let query = arg(&args, 0).as_str().unwrap_or_default().to_owned();
            let path = arg(&args, 1).as_str().unwrap_or_default().to_owned();
            crate::nvim::openctx::mentions(query, path, request_id(&args, 2)?).map(|_| Value::Null)
        })?,
    )?;
    t.set(
        "openctx_check",
        export(lua, |args: Vec<Value>| crate::nvim::openctx::check(request_id(&args, 0)?).map(|_| Value::Null))?,
    )?;
    t.set(
        "openctx_items_mention",
        export(lua, |args: Vec<Value>| {
            let provider = string_arg("openctx_items_mention", &args, 0)?;
            crate::nvim::openctx::items_for_mention(provider, arg(&args, 1), request_id(&args, 2)?).map(|_| Value::Null)
        })?,
    )?;
    t.set(
        "openctx_items_message",
        export(lua, |args: Vec<Value>| {
            let message = string_arg("openctx_items_message", &args, 0)?;
            crate::nvim::openctx::items_for_message(message, request_id(&args, 1)?).map(|_| Value::Null)
        })?,
    )?;
    // configure_log(file, level, max_bytes?): the log file, its level and its size cap.
    t.set(
        "configure_log",
        export(lua, |args: Vec<Value>| {
            let file = string_arg("configure_log", &args, 0)?;
            let level = arg(&args, 1).as_str().and_then(log::Level::parse).unwrap_or(log::Level::Info);
            if let Some(max) = arg(&args, 2).as_u64() {
                log::set_max_bytes(max);
            }
            log::init(std::path::PathBuf::from(file), level);
            Ok(Value::Null)
        })?,
    )?;
    t.set(
        "log",
        export(lua, |args: Vec<Value>| {
            let level = arg(&args, 0).as_str().and_then(log::Level::parse).unwrap_or(log::Level::Info);
            match arg(&args, 1) {
                Value::String(s) => log::write(level, s),
                other => log::write(level, other.to_string()),
            }
            Ok(Value::Null)
        })?,
    )?;
    Ok(t)
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

/// Wraps `f` as a Lua function: its arguments arrive as JSON values, its
/// value goes back as Lua data, and an error or a panic raises a Lua error
/// with its message (`lua/amp/native.lua` calls these under `pcall`).
fn export(lua: &Lua, f: impl Fn(Vec<Value>) -> Result<Value, String> + 'static) -> mlua::Result<Function> {
    lua.create_function(move |_, args: mlua::MultiValue| {
        let args: Result<Vec<Value>, String> =
            args.into_iter().map(|v| lua::from_lua(v).map_err(|e| format!("invalid argument: {e}"))).collect();
        let value = args.and_then(|args| {
            catch_unwind(AssertUnwindSafe(|| f(args))).unwrap_or_else(|panic| {
                let message = bridge::panic_message(&panic);
                log::error(format!("panic in a native call: {message}"));
                Err(format!("amp: internal error: {message}"))
            })
        });
        match value {
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

fn arg(args: &[Value], i: usize) -> Value {
    args.get(i).cloned().unwrap_or(Value::Null)
}

fn string_arg(function: &str, args: &[Value], i: usize) -> Result<String, String> {
    match arg(args, i) {
        Value::String(s) => Ok(s),
        other => Err(format!("{function}: expected a string, got {other}")),
    }
}

fn request_id(args: &[Value], i: usize) -> Result<i64, String> {
    arg(args, i).as_i64().ok_or_else(|| "expected a request id".to_string())
}
