//! amp.nvim-rs: the Amp editor server inside Neovim.
//!
//! This crate is loaded by Neovim as the Lua module `amp_core` (see
//! `lua/amp/native.lua`). Every exported function catches panics and returns
//! `{ ok = true, value = … }` or `{ ok = false, err = "…" }`: with nvim-oxi 0.6
//! an error or panic that crosses into Lua aborts Neovim.

pub mod amp;
pub mod bridge;
pub mod editor;
pub mod filewatch;
pub mod fsutil;
pub mod log;
pub mod session;
pub mod text;

use std::convert::Infallible;
use std::panic::{catch_unwind, AssertUnwindSafe};

use nvim_oxi::serde::{Deserializer, Serializer};
use nvim_oxi::{Dictionary, Function, Object};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use amp::options::ServerOptions;

#[nvim_oxi::plugin]
fn amp_core() -> nvim_oxi::Result<Dictionary> {
    Ok(Dictionary::from_iter([
        ("version", export(|_: Object| Ok(json!(env!("CARGO_PKG_VERSION"))))),
        ("start", export(|opts: Object| session::start(ServerOptions::from_json(&to_json(opts)?)?))),
        ("stop", export(|_: Object| {
            session::stop();
            Ok(Value::Null)
        })),
        ("status", export(|_: Object| Ok(session::status()))),
        ("set_workspace_folders", export(|folders: Object| {
            let folders: Vec<String> = serde_json::from_value(to_json(folders)?)
                .map_err(|e| format!("set_workspace_folders: expected a list of paths ({e})"))?;
            session::set_workspace_folders(folders).map(|_| Value::Null)
        })),
        ("broadcast", export(|(name, payload): (Object, Object)| {
            let name = match to_json(name)? {
                Value::String(s) => s,
                other => return Err(format!("broadcast: the notification name must be a string, got {other}")),
            };
            Ok(json!(session::broadcast(&name, &to_json(payload)?)))
        })),
        // Hot paths (autocmds): no arguments, no result table to build.
        ("selection_changed", quiet(session::selection_changed)),
        ("visible_files_changed", quiet(session::visible_files_changed)),
        ("buffers_changed", quiet(session::buffers_changed)),
        ("buffer_written", export(|path: Object| {
            session::buffer_written(&string_arg("buffer_written", path)?);
            Ok(Value::Null)
        })),
        ("take_disk_version", export(|path: Object| {
            session::take_disk_version(&string_arg("take_disk_version", path)?).map(|_| Value::Null)
        })),
        ("log", export(|(level, message): (Object, Object)| {
            let level = to_json(level)?;
            let level = level.as_str().and_then(log::Level::parse).unwrap_or(log::Level::Info);
            match to_json(message)? {
                Value::String(s) => log::write(level, s),
                other => log::write(level, other.to_string()),
            }
            Ok(Value::Null)
        })),
    ]))
}

/// Wraps `f` as a Lua function that never raises: panics and errors become
/// `{ ok = false, err = … }`.
fn export<A>(f: impl Fn(A) -> Result<Value, String> + 'static) -> Object
where
    A: nvim_oxi::lua::Poppable + 'static,
{
    let function = Function::<A, Object>::from_fn(move |args: A| -> Result<Object, Infallible> {
        let reply = match catch_unwind(AssertUnwindSafe(|| f(args))) {
            Ok(Ok(value)) => json!({ "ok": true, "value": value }),
            Ok(Err(err)) => json!({ "ok": false, "err": err }),
            Err(panic) => {
                let message = bridge::panic_message(&panic);
                log::error(format!("panic in a native call: {message}"));
                json!({ "ok": false, "err": format!("amp: internal error: {message}") })
            }
        };
        Ok(reply.serialize(Serializer::new()).unwrap_or_else(|_| Object::nil()))
    });
    Object::from(function)
}

/// Wraps an argument-free action for autocmd callbacks: panics are caught
/// and logged, nothing is returned.
fn quiet(f: fn()) -> Object {
    Object::from(Function::<(), ()>::from_fn(move |()| -> Result<(), Infallible> {
        if let Err(panic) = catch_unwind(f) {
            log::error(format!("panic in an editor event: {}", bridge::panic_message(&panic)));
        }
        Ok(())
    }))
}

fn string_arg(function: &str, object: Object) -> Result<String, String> {
    match to_json(object)? {
        Value::String(s) => Ok(s),
        other => Err(format!("{function}: expected a path string, got {other}")),
    }
}

fn to_json(object: Object) -> Result<Value, String> {
    Value::deserialize(Deserializer::new(object)).map_err(|e| format!("invalid argument: {e}"))
}
