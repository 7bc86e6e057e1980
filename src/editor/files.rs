//! Main-thread side of watching files: which files are loaded, and telling
//! the user (once) what happened to a file on disk.

use std::path::{Path, PathBuf};

use nvim_oxi::api::{self, Buffer};
use nvim_oxi::mlua::{self, Table};
use serde_json::json;

use super::context::file_of;
use super::{events, find_buffer};

/// Buffer variable marking a buffer whose file changed on disk while it had
/// unsaved changes (cleared when the conflict is settled).
const CONFLICT_VAR: &str = "amp_disk_conflict";

/// The files of every loaded buffer.
pub fn loaded_files() -> Vec<PathBuf> {
    api::list_bufs().filter(|b| b.is_loaded()).filter_map(|b| file_of(&b)).collect()
}

fn buffer_for(path: &Path) -> Option<Buffer> {
    find_buffer(&[path.to_path_buf()], true)
}

fn notify(message: &str, level: &str) {
    let lua = mlua::lua();
    let run = || -> mlua::Result<()> {
        let vim: Table = lua.globals().get("vim")?;
        let levels: Table = vim.get::<Table>("log")?.get("levels")?;
        let opts = lua.create_table()?;
        opts.set("title", "amp")?;
        vim.get::<mlua::Function>("notify")?.call::<()>((message, levels.get::<mlua::Value>(level)?, opts))
    };
    if let Err(e) = run() {
        crate::log::warn(format!("vim.notify failed: {e}"));
    }
}

/// The file changed on disk while its buffer has unsaved changes.
pub fn report_conflict(path: &Path) {
    let Some(mut buf) = buffer_for(path) else { return };
    let already = buf.get_var::<bool>(CONFLICT_VAR).unwrap_or(false);
    if !already {
        let _ = buf.set_var(CONFLICT_VAR, true);
        notify(
            &format!(
                "{} changed on disk, and this buffer has unsaved changes (kept). \
                 :Amp diff compares them, :Amp take loads the disk version, :Amp keep writes yours.",
                path.display()
            ),
            "WARN",
        );
    }
    events::fire("AmpFileChanged", &json!({ "path": path.to_string_lossy(), "buf": buf.handle(), "conflict": true }));
}

/// The buffer now holds the disk's new text.
pub fn report_reloaded(path: &Path) {
    let Some(mut buf) = buffer_for(path) else { return };
    let _ = buf.del_var(CONFLICT_VAR);
    events::fire("AmpFileChanged", &json!({ "path": path.to_string_lossy(), "buf": buf.handle(), "reloaded": true }));
}

/// The disk and the buffer agree again (nothing to load).
pub fn report_settled(path: &Path) {
    if let Some(mut buf) = buffer_for(path) {
        let _ = buf.del_var(CONFLICT_VAR);
    }
}

/// The file was deleted or renamed away; the buffer keeps its text.
pub fn report_deleted(path: &Path) {
    let Some(buf) = buffer_for(path) else { return };
    notify(
        &format!("{} was deleted or moved on disk; the buffer keeps its text (:w writes it back).", path.display()),
        "WARN",
    );
    events::fire("AmpFileChanged", &json!({ "path": path.to_string_lossy(), "buf": buf.handle(), "deleted": true }));
}
