//! Reading and writing buffer text for `readFile` and `editFile`.

use std::path::PathBuf;

use nvim_oxi::api::{self, opts::OptionOpts, Buffer};

use super::{api_err, find_buffer};
use crate::amp::edit::{Hunk, LineFormat};

/// A copy of a buffer's text, taken on the main thread and turned into a
/// file's text on the tokio side.
#[derive(Debug, Clone)]
pub struct BufferText {
    pub bufnr: i32,
    pub changedtick: u32,
    /// `'modified'`: the buffer has unsaved changes.
    pub modified: bool,
    /// The lines joined with `\n`, without a final end-of-line. Empty for an
    /// empty buffer.
    pub joined: Vec<u8>,
    /// Number of lines in `joined`; 0 for an empty buffer.
    pub line_count: usize,
    pub format: LineFormat,
}

impl BufferText {
    /// The file's text as it would be written: lines joined with the
    /// buffer's end-of-line, plus a final one if the buffer has it. (Plain
    /// data work, done on the tokio side.)
    pub fn file_text(&self) -> String {
        let eol: &[u8] = if self.format.crlf { b"\r\n" } else { b"\n" };
        let mut bytes = if self.format.crlf {
            let mut out = Vec::with_capacity(self.joined.len() + self.line_count + 2);
            for (i, line) in self.joined.split(|&b| b == b'\n').enumerate() {
                if i > 0 {
                    out.extend_from_slice(eol);
                }
                out.extend_from_slice(line);
            }
            out
        } else {
            self.joined.clone()
        };
        if self.format.final_newline && self.line_count > 0 {
            bytes.extend_from_slice(eol);
        }
        String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
    }
}

/// The text of the loaded buffer for one of `paths`, if there is one.
pub fn loaded_text(paths: Vec<PathBuf>) -> Result<Option<BufferText>, String> {
    match find_buffer(&paths, true) {
        Some(buf) => snapshot(&buf).map(Some),
        None => Ok(None),
    }
}

/// The text of the buffer for one of `paths`, loading the file into a (listed,
/// hidden) buffer first if no buffer has it loaded, so the edit can be undone
/// in the editor.
pub fn text_for_edit(paths: Vec<PathBuf>) -> Result<BufferText, String> {
    let buf = match find_buffer(&paths, false) {
        Some(buf) => buf,
        None => {
            let name = paths[0].to_string_lossy().into_owned();
            let bufnr: i32 = api::call_function("bufadd", (name,)).map_err(|e| api_err("bufadd", e))?;
            Buffer::from(bufnr)
        }
    };
    if !buf.is_loaded() {
        let _: i64 = api::call_function("bufload", (buf.handle(),)).map_err(|e| api_err("bufload", e))?;
        api::set_option_value("buflisted", true, &buf_opts(&buf)).map_err(|e| api_err("buflisted", e))?;
    }
    snapshot(&buf)
}

fn buf_opts(buf: &Buffer) -> OptionOpts {
    OptionOpts::builder().buffer(buf.clone()).build()
}

fn snapshot(buf: &Buffer) -> Result<BufferText, String> {
    let opts = buf_opts(buf);
    let fileformat: String = api::get_option_value("fileformat", &opts).map_err(|e| api_err("fileformat", e))?;
    let eol: bool = api::get_option_value("endofline", &opts).map_err(|e| api_err("endofline", e))?;
    let changedtick = buf.get_changedtick().map_err(|e| api_err("changedtick", e))?;
    let modified: bool = api::get_option_value("modified", &opts).map_err(|e| api_err("modified", e))?;
    let count = buf.line_count().map_err(|e| api_err("line_count", e))?;
    // A buffer always has one line; an empty file is one empty line with a
    // byte count of 0 (nvim_buf_get_offset counts the final EOL if written).
    let empty = count == 1 && buf.get_offset(1).map_err(|e| api_err("get_offset", e))? == 0;
    let mut joined = Vec::new();
    if !empty {
        let size = buf.get_offset(count).unwrap_or(0);
        joined.reserve(size);
        for (i, line) in buf.get_lines(.., true).map_err(|e| api_err("get_lines", e))?.enumerate() {
            if i > 0 {
                joined.push(b'\n');
            }
            joined.extend_from_slice(line.as_bytes());
        }
    }
    Ok(BufferText {
        bufnr: buf.handle(),
        changedtick,
        modified,
        joined,
        line_count: if empty { 0 } else { count },
        format: LineFormat { crlf: fileformat == "dos", final_newline: eol },
    })
}

/// Why an edit was not applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApplyError {
    /// The user changed the buffer since the snapshot: take a new one.
    Changed,
    Failed(String),
}

/// Applies `hunks` (ascending, non-overlapping) as one undo step, if the
/// buffer is still at `expected_tick`. Returns the new changedtick.
pub fn apply(bufnr: i32, expected_tick: u32, hunks: Vec<Hunk>, final_newline: bool) -> Result<u32, ApplyError> {
    let mut buf = Buffer::from(bufnr);
    if !buf.is_valid() || !buf.is_loaded() {
        return Err(ApplyError::Failed("the buffer was closed during the edit".into()));
    }
    let tick = buf.get_changedtick().map_err(|e| ApplyError::Failed(api_err("changedtick", e)))?;
    if tick != expected_tick {
        return Err(ApplyError::Changed);
    }
    if !hunks.is_empty() {
        // Close the current undo block so this edit is its own undo step
        // (`:help undo-break`); it must run with the buffer current.
        // (Through Lua: an error inside nvim-oxi's `Buffer::call` would be
        // raised into Lua and abort Neovim; mlua returns it as a value.)
        nvim_oxi::mlua::lua()
            .load("vim.api.nvim_buf_call(..., function() vim.cmd('let &g:undolevels = &g:undolevels') end)")
            .call::<()>(bufnr)
            .map_err(|e| ApplyError::Failed(api_err("undo break", e)))?;
        // Last hunk first, so the earlier line numbers stay valid. Changes
        // made in one callback without user input between them are one undo
        // step.
        for hunk in hunks.into_iter().rev() {
            buf.set_lines(hunk.start..hunk.old_end, true, hunk.lines)
                .map_err(|e| ApplyError::Failed(api_err("set_lines", e)))?;
        }
    }
    let opts = buf_opts(&buf);
    let eol: bool = api::get_option_value("endofline", &opts).unwrap_or(true);
    if eol != final_newline {
        let _ = api::set_option_value("endofline", final_newline, &opts);
        // Without this a later :w would add the end-of-line the agent left out.
        let _ = api::set_option_value("fixendofline", final_newline, &opts);
    }
    buf.get_changedtick().map_err(|e| ApplyError::Failed(api_err("changedtick", e)))
}

/// After the tokio side wrote the buffer's text to disk: marks the buffer
/// unmodified if the user has not typed since (`tick`), and makes Neovim
/// record the file's new timestamp without a "file changed" prompt.
pub fn mark_saved(bufnr: i32, tick: u32) -> Result<(), String> {
    let buf = Buffer::from(bufnr);
    if !buf.is_valid() {
        return Ok(());
    }
    if buf.get_changedtick().ok() == Some(tick) {
        api::set_option_value("modified", false, &buf_opts(&buf)).map_err(|e| api_err("modified", e))?;
    }
    // `:checktime` stores the new mtime before it fires FileChangedShell; a
    // one-shot buffer-local handler that chooses nothing keeps Neovim from
    // asking the user about a write it already has in the buffer. 'autoread'
    // is off meanwhile: with it, Neovim would reload the buffer instead (an
    // extra undo step that breaks `u` back to the text before the edit).
    let lua = nvim_oxi::mlua::lua();
    let chunk = lua.load(
        r#"local buf = ...
        local id = vim.api.nvim_create_autocmd("FileChangedShell", {
          buffer = buf, once = true, callback = function() vim.v.fcs_choice = "" end,
        })
        pcall(vim.api.nvim_buf_call, buf, function()
          vim.cmd([[
            let s:amp_autoread = &l:autoread
            setlocal noautoread
            silent! checktime ]] .. buf .. [[

            if s:amp_autoread < 0 | set autoread< | else | let &l:autoread = s:amp_autoread | endif
          ]])
        end)
        pcall(vim.api.nvim_del_autocmd, id)"#,
    );
    chunk.call::<()>(bufnr).map_err(|e| api_err("checktime", e))
}
