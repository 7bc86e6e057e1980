//! `openURI`: showing a file (and a line or range in it), a directory, or
//! handing a web URL to the system opener.

use std::path::PathBuf;

use nvim_oxi::api::{self, Window};
use nvim_oxi::mlua::{self, Table};

use super::api_err;
use crate::amp::uri::LineSelection;
use crate::text::utf16_to_byte_col;

/// Shows `path` in the current tab page (its window if one already shows it,
/// else `:edit` in the current window) and moves the cursor to `selection`:
/// a line, a line and column, or a range selected in Visual mode.
pub fn open_path(path: PathBuf, selection: Option<LineSelection>) -> Result<(), String> {
    let name = path.to_string_lossy().into_owned();
    let shown = api::get_current_tabpage()
        .list_wins()
        .map_err(|e| api_err("list_wins", e))?
        .find(|w| w.get_buf().ok().and_then(|b| b.get_name().ok()).is_some_and(|n| n == path));
    match shown {
        Some(win) => api::set_current_win(&win).map_err(|e| api_err("set_current_win", e))?,
        None => {
            let escaped: String = api::call_function("fnameescape", (name,)).map_err(|e| api_err("fnameescape", e))?;
            api::command(&format!("edit {escaped}")).map_err(|e| api_err("edit", e))?;
        }
    }
    if let Some(sel) = selection {
        select(sel)?;
    }
    Ok(())
}

fn select(sel: LineSelection) -> Result<(), String> {
    let mut win = api::get_current_win();
    // Leave any Visual mode first so the new selection starts fresh.
    let mode = api::get_mode().map_err(|e| api_err("get_mode", e))?;
    let mode_name = mode.mode.to_string();
    if mode_name.starts_with(['v', 'V', '\u{16}']) {
        api::command("execute \"normal! \\<Esc>\"").map_err(|e| api_err("normal", e))?;
    }
    let start = position(&win, sel.start_line, sel.start_col)?;
    win.set_cursor(start.0, start.1).map_err(|e| api_err("set_cursor", e))?;
    if let Some(end_line) = sel.end_line {
        let visual = if sel.start_col.is_some() || sel.end_col.is_some() { "v" } else { "V" };
        api::command(&format!("normal! {visual}")).map_err(|e| api_err("normal", e))?;
        // An end column names the last selected character (inclusive).
        let end = position(&win, end_line, sel.end_col)?;
        win.set_cursor(end.0, end.1).map_err(|e| api_err("set_cursor", e))?;
    }
    api::command("normal! zv").map_err(|e| api_err("normal", e))?;
    Ok(())
}

/// (1-based row, 0-based byte column) for a 1-based line and optional
/// 1-based UTF-16 column, clamped to the buffer.
fn position(win: &Window, line: u32, col: Option<u32>) -> Result<(usize, usize), String> {
    let buf = win.get_buf().map_err(|e| api_err("get_buf", e))?;
    let count = buf.line_count().map_err(|e| api_err("line_count", e))?.max(1);
    let row = (line.max(1) as usize).min(count);
    let byte_col = match col {
        None => 0,
        Some(c) => {
            let text = buf
                .get_lines(row - 1..row, false)
                .ok()
                .and_then(|mut l| l.next())
                .map(|l| l.as_bytes().to_vec())
                .unwrap_or_default();
            utf16_to_byte_col(&text, c.saturating_sub(1) as usize)
        }
    };
    Ok((row, byte_col))
}

/// Opens a web URL with `vim.ui.open` (the system's opener).
pub fn open_external(url: String) -> Result<(), String> {
    let lua = mlua::lua();
    let run = || -> mlua::Result<()> {
        let vim: Table = lua.globals().get("vim")?;
        let ui: Table = vim.get("ui")?;
        // vim.ui.open returns (SystemObj|nil, errmsg|nil); the process is not waited for.
        let (_, err): (mlua::Value, Option<String>) = ui.get::<mlua::Function>("open")?.call(url)?;
        match err {
            Some(e) => Err(mlua::Error::runtime(e)),
            None => Ok(()),
        }
    };
    run().map_err(|e| api_err("vim.ui.open", e))
}
