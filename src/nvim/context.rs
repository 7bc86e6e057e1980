//! Reading what the user is looking at: the cursor or Visual selection of
//! the current file buffer, and the files shown in the current tab page.
//! Called from autocmds, so it only reads: positions and the lines they
//! index (one call into `helpers/context.lua`). Positions are converted and encoded
//! on the tokio side.

use std::path::PathBuf;

use mlua::{Table, Value};

use super::{lua, path_from_lua};
use crate::core::selection::{RawRegion, RawSelection};

/// The selection in the current window, or `None` if its buffer is not a file.
pub fn read_selection() -> Option<RawSelection> {
    let values: mlua::MultiValue = lua::helper("selection", ()).ok()?;
    let mut v = values.into_iter();
    let path = match v.next()? {
        Value::String(name) => path_from_lua(&name),
        _ => return None,
    };
    let cursor_only = matches!(v.next()?, Value::Boolean(true));
    if cursor_only {
        let row = as_usize(&v.next()?)?;
        let col = as_usize(&v.next()?)?;
        let line = match v.next()? {
            Value::String(s) => s.as_bytes().to_vec(),
            _ => Vec::new(),
        };
        return Some(RawSelection::cursor(path, row.saturating_sub(1), col, line));
    }
    let (Value::Table(regions), Value::Table(lines), first) = (v.next()?, v.next()?, v.next()?) else { return None };
    let first = as_usize(&first)?;
    let lines: Vec<Vec<u8>> =
        lines.sequence_values::<mlua::String>().filter_map(Result::ok).map(|s| s.as_bytes().to_vec()).collect();
    let mut out = Vec::new();
    for region in regions.sequence_values::<Table>() {
        let r = region.ok()?;
        let n = |i: usize| r.raw_get::<i64>(i).ok().map(|x| x.max(0) as usize);
        let (sl, sc, el, ec) = (n(1)?.max(1), n(2)?, n(3)?.max(1), n(4)?);
        let slice = |line: usize| lines.get(line.checked_sub(first)?).map(Vec::as_slice);
        let (start_text, end_text) = (slice(sl).unwrap_or_default(), slice(el).unwrap_or_default());
        let region_lines: Vec<Vec<u8>> = (sl..=el).filter_map(|l| slice(l).map(<[u8]>::to_vec)).collect();
        out.push(RawRegion {
            start_line: sl - 1,
            start_col: sc.saturating_sub(1).min(start_text.len()),
            end_line: el - 1,
            end_col: end_of_char(end_text, ec.saturating_sub(1)),
            lines: region_lines,
        });
    }
    if out.is_empty() {
        return None;
    }
    Some(RawSelection { path, cursor_only: false, regions: out })
}

fn as_usize(v: &Value) -> Option<usize> {
    match v {
        Value::Integer(i) => Some((*i).max(0) as usize),
        Value::Number(n) => Some(n.max(0.0) as usize),
        _ => None,
    }
}

/// The exclusive end of the character that contains byte `at` (an inclusive
/// end position), clamped to the line.
fn end_of_char(line: &[u8], at: usize) -> usize {
    if at >= line.len() {
        return line.len();
    }
    let mut end = at + 1;
    while end < line.len() && (line[end] & 0b1100_0000) == 0b1000_0000 {
        end += 1;
    }
    end
}

/// The files shown in the current tab page's windows, in window order,
/// without duplicates. Floating windows are left out.
pub fn read_visible_files() -> Vec<PathBuf> {
    let names: Vec<mlua::String> = lua::helper("visible_files", ()).unwrap_or_default();
    let mut files: Vec<PathBuf> = Vec::with_capacity(names.len());
    for name in &names {
        let path = path_from_lua(name);
        if !files.contains(&path) {
            files.push(path);
        }
    }
    files
}

#[cfg(test)]
mod tests {
    use super::end_of_char;

    #[test]
    fn inclusive_end_byte_to_exclusive_char_end() {
        let line = "é→😀x".as_bytes();
        assert_eq!(end_of_char(line, 0), 2);
        assert_eq!(end_of_char(line, 5), 9);
        assert_eq!(end_of_char(line, 8), 9);
        assert_eq!(end_of_char(line, 9), 10);
        assert_eq!(end_of_char(line, 99), 10);
        assert_eq!(end_of_char(b"", 0), 0);
    }
}
