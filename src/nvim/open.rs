//! `openURI`: showing a file (and a line or range in it), a directory, or
//! handing a web URL to the system opener.

use super::{api_err, lua, lua_path};
use crate::core::checked_file::CheckedPath;
use crate::core::uri::LineSelection;

/// Shows `path` in the current tab page (its window if one already shows it,
/// else `:edit` in the current window) and moves the cursor to `selection`:
/// a line, a line and column, or a range selected in Visual mode.
pub fn open_path(checked: CheckedPath, selection: Option<LineSelection>) -> Result<(), String> {
    let path = checked.path();
    if super::find_buffer(&[path.to_path_buf()], true).is_none() {
        // `:edit` reads it now: only what was checked off this thread, and
        // only if it is still that (one stat).
        checked.still_same().map_err(|e| e.to_string())?;
    }
    let name = lua_path(path).map_err(|e| api_err("path", e))?;
    let (sl, sc, el, ec) = match selection {
        Some(s) => (Some(s.start_line), s.start_col, s.end_line, s.end_col),
        None => (None, None, None, None),
    };
    lua::helper::<_, ()>("open_path", (name, sl, sc, el, ec)).map_err(|e| api_err("open", e))
}

/// Opens a web URL with `vim.ui.open` (the system's opener).
pub fn open_external(url: String) -> Result<(), String> {
    // vim.ui.open returns (SystemObj|nil, errmsg|nil); the process is not waited for.
    let (_, err): (mlua::Value, Option<String>) =
        lua::global("vim.ui.open", url).map_err(|e| api_err("vim.ui.open", e))?;
    match err {
        Some(e) => Err(api_err("vim.ui.open", e)),
        None => Ok(()),
    }
}
