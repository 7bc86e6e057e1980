//! A buffer's text and format as the editor reports them, and what an edit
//! of it may run into: plain data, turned into a file's text here on the
//! tokio side.

use std::path::PathBuf;

use super::edit::Hunk;
use super::filetext::{self, LineEnd};

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
    /// Number of lines in `joined`; 0 for an empty buffer (which `:w`
    /// writes as an empty file).
    pub line_count: usize,
    pub format: BufferFormat,
}

/// The options that decide the bytes `:w` writes from a buffer's lines
/// (the encoding and the BOM are Neovim's business: the text here is UTF-8).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BufferFormat {
    /// `'fileformat'` ("unix" when `'binary'` is set, as Neovim writes it).
    pub line_end: LineEnd,
    /// `'endofline'`: the last line ended with an end-of-line when read.
    pub eol: bool,
    /// `'fixendofline'` without `'binary'`: `:w` adds a missing final
    /// end-of-line.
    pub fixeol: bool,
    /// `'readonly'`
    pub readonly: bool,
    /// `'buftype'` is empty: a buffer for a file, which `:w` writes to it.
    pub is_file: bool,
    /// The file changed on disk while the buffer had unsaved changes, and
    /// the user has not settled it yet (`:Amp diff/take/keep`).
    pub conflict: bool,
    /// `'fileencoding'` as `filetext::encode` knows it ("other": only
    /// Neovim's `:write` writes it). In Latin-1 `:w` silently writes a
    /// character it cannot encode as `¿`.
    pub encoding: &'static str,
    /// `'bomb'` (never with `'binary'`)
    pub bomb: bool,
    /// `'binary'`
    pub binary: bool,
}

impl BufferText {
    /// The buffer's lines (none for an empty buffer); an error when a line
    /// is not UTF-8 (a file Neovim read without converting it).
    pub fn lines(&self) -> Result<Vec<&str>, NotUtf8> {
        if self.line_count == 0 {
            return Ok(Vec::new());
        }
        std::str::from_utf8(&self.joined).map(|text| text.split('\n').collect()).map_err(|_| NotUtf8)
    }

    /// The hunks that turn the buffer's lines into `new`. An empty buffer
    /// still shows one (empty) line, which the first hunk replaces.
    pub fn hunks_to(&self, new: &[&str]) -> Result<Vec<Hunk>, NotUtf8> {
        if self.line_count == 0 {
            return Ok(if new.is_empty() {
                Vec::new()
            } else {
                vec![Hunk { start: 0, old_end: 1, new: 0..new.len() }]
            });
        }
        Ok(super::edit::line_hunks(&self.lines()?, new))
    }

    /// The file's text as the buffer holds it (without the BOM, in UTF-8):
    /// the lines joined with the file's end-of-line, a final one if the file
    /// had it. For an unmodified buffer these are the bytes on disk, decoded.
    /// Plain data work, done on the tokio side.
    pub fn file_text(self) -> String {
        filetext::written_text(self.joined, self.line_count == 0, self.format.line_end, self.format.eol)
    }
}

/// A buffer whose lines are not all UTF-8 (a file Neovim read without
/// converting it): no edit is computed over it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the buffer holds bytes that are not UTF-8 text")]
pub struct NotUtf8;

/// Why an edit was not applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApplyError {
    /// The user changed the buffer since the snapshot: take a new one.
    Changed,
    Failed(String),
}

/// Whether the last line ends with an end-of-line after an edit (`None`:
/// as before, and `:w` adds it if `'fixendofline'` says so). `Some(false)`
/// turns `'fixendofline'` off in the buffer: the agent took it away.
pub type FinalEol = Option<bool>;

/// A file's version as the tokio side last saw it: mtime seconds and
/// nanoseconds, size, inode.
pub type FileStamp = (i64, i64, u64, u64);

/// Where an agent's write goes.
#[derive(Debug, Clone)]
pub enum WritePlan {
    /// Neovim's `:write` fills a temp file beside `target`, which is then
    /// renamed over it: readers see the old or the new file, never a mix.
    Rename { target: PathBuf },
    /// `:write` writes the file itself (hard links, symlinks, another owner).
    InPlace,
}
