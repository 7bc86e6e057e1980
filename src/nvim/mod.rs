//! Everything that touches Neovim: the module's entry point (`exports`),
//! the bridge between tokio threads and the main thread (`bridge`), the
//! session lifecycles (`session` for the Amp server, `openctx` for the
//! OpenCtx service), and the editor calls themselves. Those run on the main
//! thread and do as little as they can: read or write editor state, nothing
//! else (no JSON, no sockets, no files). Calls go through [`lua`] (mlua and
//! the Lua helpers in `helpers/`, one file per module that calls them).

pub mod annotations;
pub mod bridge;
pub mod buffers;
pub mod bulk;
pub mod context;
pub mod diagnostics;
pub mod editor;
pub mod events;
pub mod exports;
pub mod file_record;
pub mod files;
pub mod ide_name;
pub mod log_file;
pub mod lua;
pub mod open;
pub mod openctx;
pub mod prefault;
pub mod review;
pub mod runtime;
pub mod session;

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Error text for a failed editor call.
pub(crate) fn api_err(what: &str, err: impl std::fmt::Display) -> String {
    format!("{what}: {err}")
}

/// A path as a Lua string (byte for byte: paths need not be UTF-8).
pub(crate) fn lua_path(path: &Path) -> mlua::Result<mlua::String> {
    lua::lua()?.create_string(path.as_os_str().as_bytes())
}

pub(crate) fn lua_paths(paths: &[PathBuf]) -> mlua::Result<Vec<mlua::String>> {
    paths.iter().map(|p| lua_path(p)).collect()
}

/// A buffer name from Lua as a path.
pub(crate) fn path_from_lua(name: &mlua::String) -> PathBuf {
    PathBuf::from(std::ffi::OsStr::from_bytes(&name.as_bytes()))
}

/// The loaded-or-not buffer whose name is one of `paths`.
pub(crate) fn find_buffer(paths: &[PathBuf], loaded_only: bool) -> Option<i32> {
    let names = lua_paths(paths).ok()?;
    lua::helper::<_, Option<i32>>("find_buffer", (names, loaded_only)).ok().flatten()
}
