//! The only code that calls the Neovim API. Everything here runs on the main
//! thread, reached through [`crate::bridge`], and does as little as it can:
//! read or write editor state, nothing else (no JSON, no sockets, no files).

pub mod buffers;
pub mod context;
pub mod diagnostics;
pub mod events;
pub mod files;
pub mod open;

use std::path::{Path, PathBuf};

use nvim_oxi::api::{self, Buffer};

/// The loaded-or-not buffer whose name is one of `paths`.
///
/// Buffer names are absolute paths as Neovim resolved them; the caller passes
/// both the requested path and its canonical form so symlinked paths match.
pub(crate) fn find_buffer(paths: &[PathBuf], loaded_only: bool) -> Option<Buffer> {
    api::list_bufs().find(|buf| {
        (!loaded_only || buf.is_loaded())
            && buf.get_name().map(|name| paths.iter().any(|p| same_path(&name, p))).unwrap_or(false)
    })
}

fn same_path(a: &Path, b: &Path) -> bool {
    !a.as_os_str().is_empty() && a == b
}

/// Error text for a failed Neovim API call.
pub(crate) fn api_err(what: &str, err: impl std::fmt::Display) -> String {
    format!("{what}: {err}")
}
