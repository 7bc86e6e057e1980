//! Main-thread side of watching files: which files are loaded, and telling
//! the user (once) what happened to a file on disk.

use std::path::{Path, PathBuf};

use serde_json::json;

use super::events::{self, notify};
use super::{find_buffer, lua, path_from_lua};

/// Buffer variable marking a buffer whose file changed on disk while it had
/// unsaved changes (cleared when the conflict is settled).
const CONFLICT_VAR: &str = "amp_disk_conflict";

/// The names of all loaded buffers (any kind), and the files among them.
pub fn loaded_buffers() -> (Vec<PathBuf>, Vec<PathBuf>) {
    let (names, files): (Vec<mlua::String>, Vec<mlua::String>) = lua::helper("loaded_buffers", ()).unwrap_or_default();
    (names.iter().map(path_from_lua).collect(), files.iter().map(path_from_lua).collect())
}

/// Whether some buffer (loaded or not) has a name: a few API calls, when
/// Neovim started without a file (one unnamed buffer). Asked once, when
/// the server starts: without one, there is no loaded file to note, and
/// the helpers `loaded_buffers` needs are not compiled for nothing.
pub fn any_named_buffer() -> bool {
    let Ok(buffers) = lua::api::<_, Vec<i32>>("nvim_list_bufs", ()) else { return true };
    buffers.into_iter().any(|buf| {
        lua::api::<_, mlua::String>("nvim_buf_get_name", buf).map_or(true, |name| !name.as_bytes().is_empty())
    })
}

fn buffer_for(path: &Path) -> Option<i32> {
    find_buffer(&[path.to_path_buf()], true)
}

fn set_conflict(buf: i32, on: bool) {
    let _ = if on {
        lua::api::<_, ()>("nvim_buf_set_var", (buf, CONFLICT_VAR, true))
    } else {
        lua::helper::<_, ()>("del_var", (buf, CONFLICT_VAR))
    };
}

/// `path` as the user would type it (relative to the cwd or `~`): these
/// messages must fit one line, or Neovim stops at a hit-enter prompt where
/// no agent request is answered.
fn short_name(path: &Path) -> String {
    let full = path.to_string_lossy();
    lua::helper::<_, String>("short_name", full.as_ref()).unwrap_or_else(|_| full.into_owned())
}

/// The file changed on disk while its buffer has unsaved changes.
pub fn report_conflict(path: &Path) {
    let Some(buf) = buffer_for(path) else { return };
    let already: bool = lua::helper("get_var", (buf, CONFLICT_VAR)).unwrap_or(false);
    if !already {
        set_conflict(buf, true);
        notify(
            // The action first: a long name is cut at the end of the line.
            &format!(
                "amp: settle with :Amp diff/take/keep: {} changed on disk, unsaved changes kept",
                short_name(path)
            ),
            "WARN",
        );
    }
    events::fire("AmpFileChanged", &json!({ "path": path.to_string_lossy(), "buf": buf, "conflict": true }));
}

/// The buffer now holds the disk's new text.
pub fn report_reloaded(path: &Path) {
    let Some(buf) = buffer_for(path) else { return };
    set_conflict(buf, false);
    events::fire("AmpFileChanged", &json!({ "path": path.to_string_lossy(), "buf": buf, "reloaded": true }));
}

/// The disk and the buffer agree again (nothing to load).
pub fn report_settled(path: &Path) {
    if let Some(buf) = buffer_for(path) {
        set_conflict(buf, false);
    }
}

/// The file was deleted or renamed away; the buffer keeps its text.
pub fn report_deleted(path: &Path) {
    let Some(buf) = buffer_for(path) else { return };
    notify(&format!("amp: {} was deleted or moved on disk; the buffer keeps its text", short_name(path)), "WARN");
    events::fire("AmpFileChanged", &json!({ "path": path.to_string_lossy(), "buf": buf, "deleted": true }));
}
