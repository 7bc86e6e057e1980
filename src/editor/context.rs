//! Reading what the user is looking at: the cursor or Visual selection of
//! the current file buffer, and the files shown in the current tab page.
//! Called from autocmds, so it only reads: positions and the lines they
//! index. Positions are converted and encoded on the tokio side.

use std::path::PathBuf;

use nvim_oxi::api::{self, opts::OptionOpts, Buffer};
use nvim_oxi::serde::Deserializer;
use nvim_oxi::{Dictionary, Object};
use serde::Deserialize;

use crate::amp::context::{RawRegion, RawSelection};

/// The file a buffer shows, if it is a real file: a normal buffer (not a
/// terminal, help, quickfix or scratch buffer) with a name that is not a URL.
pub fn file_of(buf: &Buffer) -> Option<PathBuf> {
    let buftype: String = api::get_option_value("buftype", &OptionOpts::builder().buffer(buf.clone()).build()).ok()?;
    if !buftype.is_empty() {
        return None;
    }
    let name = buf.get_name().ok()?;
    let text = name.to_str().unwrap_or_default();
    if name.as_os_str().is_empty() || !name.is_absolute() || text.contains("://") {
        return None;
    }
    Some(name)
}

/// The selection in the current window, or `None` if its buffer is not a file.
pub fn read_selection() -> Option<RawSelection> {
    let buf = api::get_current_buf();
    let path = file_of(&buf)?;
    let mode = api::get_mode().ok()?.mode;
    let visual = match mode.as_bytes().first() {
        Some(b'v' | b's') => Some("v"),
        Some(b'V' | b'S') => Some("V"),
        Some(0x16 | 0x13) => Some("\u{16}"),
        _ => None,
    };
    match visual {
        None => {
            let (row, col) = api::get_current_win().get_cursor().ok()?;
            let line = api::get_current_line().map(|l| l.into_bytes()).unwrap_or_default();
            let line0 = row.saturating_sub(1);
            Some(RawSelection {
                path,
                cursor_only: true,
                regions: vec![RawRegion { start_line: line0, start_col: col, end_line: line0, end_col: col, lines: vec![line] }],
            })
        }
        Some(kind) => read_visual(&buf, path, kind),
    }
}

/// `[bufnum, lnum, col, off]` as `getpos()` and `getregionpos()` give them.
type Pos = [i64; 4];

fn read_visual(buf: &Buffer, path: PathBuf, kind: &str) -> Option<RawSelection> {
    let from: Object = api::call_function("getpos", ("v",)).ok()?;
    let to: Object = api::call_function("getpos", (".",)).ok()?;
    let opts = Dictionary::from_iter([("type", Object::from(kind)), ("eol", Object::from(true))]);
    let raw: Object = api::call_function("getregionpos", (from, to, opts)).ok()?;
    let segments = Vec::<[Pos; 2]>::deserialize(Deserializer::new(raw)).ok()?;
    let (first, last) = (segments.first()?, segments.last()?);
    let first_line = (first[0][1] - 1).max(0) as usize;
    let last_line = (last[1][1] - 1).max(0) as usize;
    let lines: Vec<Vec<u8>> = buf
        .get_lines(first_line..last_line + 1, false)
        .ok()?
        .map(|l| l.as_bytes().to_vec())
        .collect();
    let line = |lnum: i64| lines.get((lnum - 1).max(0) as usize - first_line).map(Vec::as_slice).unwrap_or_default();
    let region = |start: &Pos, end: &Pos| {
        let (start_text, end_text) = (line(start[1]), line(end[1]));
        RawRegion {
            start_line: (start[1] - 1).max(0) as usize,
            start_col: ((start[2] - 1).max(0) as usize).min(start_text.len()),
            end_line: (end[1] - 1).max(0) as usize,
            end_col: end_of_char(end_text, (end[2] - 1).max(0) as usize),
            lines: Vec::new(),
        }
    };
    let mut regions: Vec<RawRegion> = if kind == "\u{16}" {
        segments.iter().map(|[s, e]| region(s, e)).collect()
    } else {
        vec![region(&first[0], &last[1])]
    };
    for r in &mut regions {
        r.lines = lines[r.start_line - first_line..=r.end_line - first_line].to_vec();
    }
    Some(RawSelection { path, cursor_only: false, regions })
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
    let tabpage = api::get_current_tabpage();
    let Ok(wins) = tabpage.list_wins() else { return Vec::new() };
    let mut files: Vec<PathBuf> = Vec::new();
    for win in wins {
        let floating = win.get_config().map(|c| c.relative.is_some()).unwrap_or(false);
        if floating {
            continue;
        }
        if let Some(path) = win.get_buf().ok().as_ref().and_then(file_of) {
            if !files.contains(&path) {
                files.push(path);
            }
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
