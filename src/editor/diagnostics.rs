//! Reading `vim.diagnostic` for `getDiagnostics`. Positions leave here as
//! Neovim's byte columns together with the lines they index; the tokio side
//! converts them to UTF-16 and builds the JSON.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use nvim_oxi::api::Buffer;
use nvim_oxi::mlua::{self, Table};

use super::api_err;

/// One diagnostic as Neovim holds it (0-based lines, byte columns).
#[derive(Debug, Clone)]
pub struct RawDiagnostic {
    pub path: PathBuf,
    pub lnum: usize,
    pub col: usize,
    pub end_lnum: usize,
    pub end_col: usize,
    /// 1 error, 2 warning, 3 info, 4 hint (`vim.diagnostic.severity`).
    pub severity: u8,
    pub message: String,
    pub source: Option<String>,
    /// The text of line `lnum` and of line `end_lnum` (empty if not loaded).
    pub line: Vec<u8>,
    pub end_line: Vec<u8>,
    /// Byte offset of the start of `lnum` and `end_lnum` in the buffer.
    pub line_offset: usize,
    pub end_line_offset: usize,
}

/// Every diagnostic of every buffer whose file is `under` (a file or a
/// directory), or of every buffer when `under` is `None`.
pub fn collect(under: Option<Vec<PathBuf>>) -> Result<Vec<RawDiagnostic>, String> {
    let lua = mlua::lua();
    let get = || -> mlua::Result<Table> {
        let vim: Table = lua.globals().get("vim")?;
        let diagnostic: Table = vim.get("diagnostic")?;
        diagnostic.get::<mlua::Function>("get")?.call(())
    };
    let list = get().map_err(|e| api_err("vim.diagnostic.get", e))?;
    let mut names: HashMap<i64, Option<PathBuf>> = HashMap::new();
    let mut out = Vec::new();
    for entry in list.sequence_values::<Table>() {
        let d = entry.map_err(|e| api_err("diagnostic", e))?;
        let field = |k: &str| d.get::<Option<i64>>(k).ok().flatten();
        let Some(bufnr) = field("bufnr") else { continue };
        let name = names
            .entry(bufnr)
            .or_insert_with(|| {
                Buffer::from(bufnr as i32).get_name().ok().filter(|p| !p.as_os_str().is_empty())
            })
            .clone();
        let Some(path) = name else { continue };
        if let Some(prefixes) = &under {
            if !prefixes.iter().any(|p| is_under(&path, p)) {
                continue;
            }
        }
        let lnum = field("lnum").unwrap_or(0).max(0) as usize;
        let col = field("col").unwrap_or(0).max(0) as usize;
        let end_lnum = field("end_lnum").map(|v| v.max(0) as usize).unwrap_or(lnum);
        let end_col = field("end_col").map(|v| v.max(0) as usize).unwrap_or(col);
        let buf = Buffer::from(bufnr as i32);
        let (line, line_offset) = line_and_offset(&buf, lnum);
        let (end_line, end_line_offset) =
            if end_lnum == lnum { (line.clone(), line_offset) } else { line_and_offset(&buf, end_lnum) };
        out.push(RawDiagnostic {
            path,
            lnum,
            col,
            end_lnum,
            end_col,
            severity: field("severity").unwrap_or(1).clamp(1, 4) as u8,
            message: d.get::<Option<String>>("message").ok().flatten().unwrap_or_default(),
            source: d.get::<Option<String>>("source").ok().flatten(),
            line,
            end_line,
            line_offset,
            end_line_offset,
        });
    }
    Ok(out)
}

fn line_and_offset(buf: &Buffer, lnum: usize) -> (Vec<u8>, usize) {
    if !buf.is_loaded() {
        return (Vec::new(), 0);
    }
    let line = buf
        .get_lines(lnum..lnum + 1, false)
        .ok()
        .and_then(|mut lines| lines.next())
        .map(|l| l.as_bytes().to_vec())
        .unwrap_or_default();
    (line, buf.get_offset(lnum).unwrap_or(0))
}

/// `path` is `prefix` or inside the directory `prefix` (component-wise, so
/// `/w/ab` is not under `/w/a`).
fn is_under(path: &Path, prefix: &Path) -> bool {
    path.starts_with(prefix)
}
