//! Reading and writing buffer text for `readFile` and `editFile`.

use std::path::PathBuf;

use super::{api_err, find_buffer, lua_paths, nvim};
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
    pub fn file_text(self) -> String {
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
            self.joined
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
        Some(buf) => snapshot(buf).map(Some),
        None => Ok(None),
    }
}

/// The text of the buffer for one of `paths`, loading the file into a (listed,
/// hidden) buffer first if no buffer has it loaded, so the edit can be undone
/// in the editor.
pub fn text_for_edit(paths: Vec<PathBuf>) -> Result<BufferText, String> {
    let names = lua_paths(&paths).map_err(|e| api_err("paths", e))?;
    let buf: i32 = nvim::helper("load_buffer", names).map_err(|e| api_err("loading the file", e))?;
    snapshot(buf)
}

fn snapshot(buf: i32) -> Result<BufferText, String> {
    let (size, line_count, changedtick, modified, crlf, eol): (usize, usize, u32, bool, bool, bool) =
        nvim::helper("snapshot", buf).map_err(|e| api_err("reading the buffer", e))?;
    let joined = if line_count == 0 { Vec::new() } else { super::bulk::lines_joined(buf, size)? };
    Ok(BufferText {
        bufnr: buf,
        changedtick,
        modified,
        joined,
        line_count,
        format: LineFormat { crlf, final_newline: eol },
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
    let fail = |e: mlua::Error| ApplyError::Failed(api_err("applying the edit", e));
    if !nvim::helper::<_, bool>("apply_begin", (bufnr, expected_tick, !hunks.is_empty())).map_err(fail)? {
        return Err(ApplyError::Changed);
    }
    // Last hunk first so earlier line numbers stay valid; changes made in
    // one main-thread job, with no user input between them, are one undo step.
    for hunk in hunks.iter().rev() {
        super::bulk::set_lines(bufnr, hunk.start, hunk.old_end, &hunk.lines).map_err(ApplyError::Failed)?;
    }
    nvim::helper::<_, u32>("apply_end", (bufnr, final_newline)).map_err(fail)
}

/// After the tokio side wrote the buffer's text to disk: marks the buffer
/// unmodified if the user has not typed since (`tick`), and makes Neovim
/// record the file's new timestamp without a "file changed" prompt.
pub fn mark_saved(bufnr: i32, tick: u32) -> Result<(), String> {
    nvim::helper::<_, ()>("mark_saved", (bufnr, tick)).map_err(|e| api_err("checktime", e))
}
