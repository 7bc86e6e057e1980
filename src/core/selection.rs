//! The cursor or the Visual selection as the editor reports it: 0-based
//! lines, byte columns, the text of the lines it touches. Each protocol
//! turns it into its own payload (positions in its own units).

use std::path::PathBuf;

/// One selected region as Neovim reports it: 0-based lines, byte columns,
/// end exclusive, with the text of every line it touches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawRegion {
    pub start_line: usize,
    pub start_col: usize,
    pub end_line: usize,
    pub end_col: usize,
    /// Lines `start_line..=end_line`.
    pub lines: Vec<Vec<u8>>,
}

/// The cursor or the Visual selection in a file buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawSelection {
    pub path: PathBuf,
    /// No Visual mode: the region is the cursor (empty) and the content is its line.
    pub cursor_only: bool,
    /// One region, or one per row for a blockwise selection.
    pub regions: Vec<RawRegion>,
}

impl RawSelection {
    /// The cursor outside Visual mode: an empty region at byte `col` of
    /// 0-based `line`, whose text is the selection's content.
    pub fn cursor(path: PathBuf, line: usize, col: usize, text: Vec<u8>) -> Self {
        Self {
            path,
            cursor_only: true,
            regions: vec![RawRegion {
                start_line: line,
                start_col: col,
                end_line: line,
                end_col: col,
                lines: vec![text],
            }],
        }
    }

    /// Whether this is `RawSelection::cursor(path, line, col, text)`,
    /// answered without building one (the cursor hot path compares first).
    pub fn is_cursor(&self, path: &[u8], line: usize, col: usize, text: &[u8]) -> bool {
        use std::os::unix::ffi::OsStrExt;
        self.cursor_only
            && self.path.as_os_str().as_bytes() == path
            && matches!(self.regions.as_slice(), [r] if r.start_line == line && r.end_line == line
                && r.start_col == col && r.end_col == col && r.lines.len() == 1 && r.lines[0] == text)
    }
}

#[cfg(test)]
impl RawRegion {
    /// A region over `lines` (the protocols' payload tests).
    pub fn of(start_line: usize, start_col: usize, end_line: usize, end_col: usize, lines: &[&str]) -> Self {
        Self { start_line, start_col, end_line, end_col, lines: lines.iter().map(|l| l.as_bytes().to_vec()).collect() }
    }
}
