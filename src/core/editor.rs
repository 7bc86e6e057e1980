//! What a protocol may ask of the editor, and nothing more.
//!
//! The Amp server, the file watcher and (later) other agents' servers run on
//! tokio threads and never call the editor themselves: they hold an
//! `Arc<dyn Editor>` and await its answers. Neovim's implementation
//! (`crate::nvim::editor`) runs each call as one job on the main thread; the
//! unit tests use an in-memory one (`core::fake_editor`).
//!
//! Every call answers within the editor's own time (a job on Neovim's main
//! loop); none blocks the caller's thread.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;

use serde_json::Value;

use crate::core::review::{Decision, Owner, Proposal, ReviewEnd};

use super::buffer::{ApplyError, BufferText, FileStamp, WritePlan};
use super::checked_file::CheckedPath;
use super::edit_plan::EditPlan;
use super::filetext::FileFormat;
use super::sync::RwLockExt;
use super::uri::LineSelection;

/// Why the editor did not answer a call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EditorError {
    /// The editor is stopping or exiting: nothing ran.
    #[error("the editor is shutting down")]
    Closed,
    /// The call failed inside the editor (a panic there, logged).
    #[error("the editor failed to run the request (see :Amp log)")]
    Crashed,
    /// The editor ran the call and refused it: why, in one line that the
    /// agent is told as it is ("cannot read …: permission denied").
    #[error("{0}")]
    Refused(String),
}

impl EditorError {
    /// The refusal's reason, for an answer that reports it as the call's
    /// result (`success: false`); the editor's own failures stay errors.
    pub fn refusal(self) -> Result<String, EditorError> {
        match self {
            EditorError::Refused(why) => Ok(why),
            other => Err(other),
        }
    }
}

/// An editor call's answer, later.
pub type Pending<'a, T> = Pin<Box<dyn Future<Output = Result<T, EditorError>> + Send + 'a>>;

/// One diagnostic as the editor has it: 0-based lines, byte columns, and the
/// text of its first and last lines (each protocol converts the columns).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawDiagnostic {
    pub path: PathBuf,
    pub lnum: usize,
    pub col: usize,
    pub end_lnum: usize,
    pub end_col: usize,
    /// 1 error, 2 warning, 3 info, 4 hint.
    pub severity: u8,
    pub message: String,
    pub source: Option<String>,
    pub line: Vec<u8>,
    pub end_line: Vec<u8>,
    /// Byte offsets of `lnum`'s and `end_lnum`'s first bytes in the buffer.
    pub line_offset: usize,
    pub end_line_offset: usize,
}

impl RawDiagnostic {
    /// The start as (line, UTF-16 character), the units of LSP and of
    /// every agent protocol.
    pub fn utf16_start(&self) -> (usize, usize) {
        (self.lnum, crate::core::text::byte_to_utf16_col(&self.line, self.col))
    }

    pub fn utf16_end(&self) -> (usize, usize) {
        (self.end_lnum, crate::core::text::byte_to_utf16_col(&self.end_line, self.end_col))
    }
}

/// How far one slice of an edit got: the buffer's changedtick after it,
/// and the first op of the plan not applied yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sliced {
    pub tick: u32,
    pub next: usize,
}

/// `edits.write_autocmds`: which of Neovim's write autocommands an agent's
/// write runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteAutocmds {
    /// Every one, as the user's own `:w`.
    All,
    /// `BufWritePost` only (formatters on BufWritePre would change the
    /// agent's text after the user reviewed it).
    Post,
    /// None.
    None,
}

impl WriteAutocmds {
    /// The option's value by name: "all", "post" or "none".
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "all" => Some(Self::All),
            "post" => Some(Self::Post),
            "none" => Some(Self::None),
            _ => None,
        }
    }

    /// The name the write helper (src/nvim/helpers) takes.
    pub fn name(self) -> &'static str {
        match self {
            Self::All => "all",
            Self::Post => "post",
            Self::None => "none",
        }
    }
}

/// How a buffer is written after an agent's edit.
#[derive(Debug, Clone)]
pub struct WriteRequest {
    /// Which of the write autocommands run.
    pub autocmds: WriteAutocmds,
    /// The file as it was when the edit was computed: the write happens
    /// only if it is still that file (else `ApplyError::Changed`).
    pub stamp: FileStamp,
}

/// What became of a file the watcher saw change on disk, for the user.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileChange {
    /// The buffer has unsaved changes: they are kept, the user is told.
    Conflict,
    /// The clean buffer took the new text.
    Reloaded,
    /// The text on disk was the buffer's already.
    Settled,
    /// The file is gone; the buffer keeps its text.
    Deleted,
}

/// The editor, as the protocols see it.
pub trait Editor: Send + Sync + 'static {
    /// The text of the loaded buffer that has one of `paths` (the same
    /// file under several names), if any. `Refused`: it cannot be read.
    fn loaded_text(&self, paths: Vec<PathBuf>) -> Pending<'_, Option<BufferText>>;

    /// The text of the buffer for one of `paths`, the file loaded into a
    /// (hidden) buffer first if none has it, so an edit can be undone there:
    /// `file` (`paths[0]`, checked off the main thread) is loaded only if
    /// it is still the file that was checked.
    fn text_for_edit(&self, paths: Vec<PathBuf>, file: CheckedPath) -> Pending<'_, BufferText>;

    /// Applies `plan`'s ops from `from` on, if the buffer is still at
    /// `tick`, for one slice of the editor's time (all of them when
    /// `whole`), so that keys typed meanwhile are handled between slices.
    /// The first slice (`from` 0) starts an undo step, the others join it;
    /// the last one sets the final end-of-line. `Changed`: the buffer
    /// changed since `tick` (see `core::sliced_apply`).
    fn apply_slice(
        &self,
        plan: Arc<EditPlan>,
        from: usize,
        tick: u32,
        whole: bool,
    ) -> Pending<'_, Result<Sliced, ApplyError>>;

    /// Takes back an edit `apply` made (the buffer at `tick`) unless the
    /// user typed since; whether it did.
    fn undo_applied(&self, bufnr: i32, tick: u32) -> Pending<'_, bool>;

    /// Whether the editor can record a file written by someone else as the
    /// buffer's own write (`replace_applied`); if not, edits are written by
    /// `apply_and_write`.
    fn records_writes(&self) -> bool;

    /// The second half of an edit whose bytes the caller wrote to `tmp`:
    /// renames `tmp` over `target` and records the buffer as written.
    fn replace_applied(
        &self,
        bufnr: i32,
        tick: u32,
        write: WriteRequest,
        tmp: PathBuf,
        target: PathBuf,
    ) -> Pending<'_, Result<(), ApplyError>>;

    /// Writes the buffer (an edit applied, the buffer at `tick`) as the
    /// user's `:w` would, if the file is still at `write.stamp`; when the
    /// write fails and `undo` is set, the edit (one undo step) is taken
    /// back: nothing is left half-done.
    fn write_applied(
        &self,
        bufnr: i32,
        tick: u32,
        write: WriteRequest,
        plan: WritePlan,
        undo: bool,
    ) -> Pending<'_, Result<(), ApplyError>>;

    /// After a reload's text went in (the buffer at `tick`): the file's
    /// format, the editor's record of the file, and not modified unless
    /// `modified` (someone typed into the buffer during the reload).
    fn mark_reloaded(
        &self,
        bufnr: i32,
        tick: u32,
        format: FileFormat,
        modified: bool,
    ) -> Pending<'_, Result<(), ApplyError>>;

    /// Tells the user (and `User` event listeners) what became of a file
    /// that changed on disk.
    fn file_changed(&self, path: PathBuf, change: FileChange) -> Pending<'_, ()>;

    /// The diagnostics of every buffer, or of those whose files are (or are
    /// under) one of `under`.
    fn diagnostics(&self, under: Option<Vec<PathBuf>>) -> Pending<'_, Vec<RawDiagnostic>>;

    /// Shows `path` (a file or a directory, checked off the main thread:
    /// read only if it is still what was checked), the selection on it if given.
    fn open_file(&self, path: CheckedPath, selection: Option<LineSelection>) -> Pending<'_, ()>;

    /// Opens an http(s) URL with the system's handler.
    fn open_url(&self, url: String) -> Pending<'_, ()>;

    /// Fires `User {name}` with `data`, later, without waiting.
    fn event(&self, name: &'static str, data: Value);

    /// Offers `proposal` for review and waits (blocking nothing) until the
    /// user decides. It never takes the keyboard: the user is told and
    /// opens it when they choose.
    fn propose(&self, proposal: Proposal) -> Pending<'_, Decision>;

    /// Closes `owner`'s review `name` (pending: rejected), saying why when
    /// the agent did not close it itself; whether there was one.
    fn close_review(&self, owner: Owner, name: String, why: ReviewEnd) -> Pending<'_, bool>;

    /// The current text of `owner`'s review `name`'s proposal (the user may
    /// have edited it); `None`: no such review.
    fn review_text(&self, owner: Owner, name: String) -> Pending<'_, Option<String>>;

    /// Closes every review of `owner` (pending: rejected), none of another
    /// agent's; how many.
    fn close_reviews(&self, owner: Owner, why: ReviewEnd) -> Pending<'_, usize>;

    /// The buffers that hold files, the current one marked.
    fn open_buffers(&self) -> Pending<'_, Vec<OpenBuffer>>;

    /// Whether the buffer of `path` has unsaved changes; `None`: no buffer.
    fn buffer_modified(&self, path: PathBuf) -> Pending<'_, Option<bool>>;

    /// Writes the buffer of `path` as `:write` does; `None`: no buffer.
    fn save_buffer(&self, path: PathBuf) -> Pending<'_, Option<()>>;

    /// Selects `select` in the current buffer; whether its text was found.
    fn select_text(&self, select: TextToSelect) -> Pending<'_, bool>;
}

/// A buffer that holds a file, as an agent's list of open editors shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct OpenBuffer {
    pub path: PathBuf,
    /// The current buffer.
    pub active: bool,
    /// Unsaved changes.
    pub dirty: bool,
    pub filetype: String,
}

/// A selection given by text: from the first `start_text` to the first
/// `end_text` after it (to the end of `start_text` without one; to the end
/// of that line with `to_end_of_line`).
#[derive(Debug, Clone, PartialEq)]
pub struct TextToSelect {
    pub start_text: String,
    pub end_text: Option<String>,
    pub to_end_of_line: bool,
}

/// The names a loaded buffer may have for `path` besides itself: its
/// canonical form (symlinks resolved) and the names of `loaded` buffers that
/// are the same file (another hard link). Editors know a buffer by its
/// file's identity, not only by its name.
pub async fn same_file_names(path: &Path, loaded: impl IntoIterator<Item = PathBuf>) -> Vec<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    let mut out = vec![path.to_path_buf()];
    if let Ok(c) = tokio::fs::canonicalize(path).await {
        if c != path {
            out.push(c);
        }
    }
    if let Ok(meta) = tokio::fs::metadata(path).await {
        let id = (meta.dev(), meta.ino());
        for name in loaded {
            if out.contains(&name) {
                continue;
            }
            if let Ok(m) = tokio::fs::metadata(&name).await {
                if (m.dev(), m.ino()) == id {
                    out.push(name);
                }
            }
        }
    }
    out
}

/// The names of the editor's loaded buffers, as its buffer events last
/// reported them (unknown until first told). A read of a file no buffer has
/// loaded goes to the disk without waiting for the editor, which may be
/// held up (a hit-enter prompt runs no scheduled callbacks).
#[derive(Debug, Default)]
pub struct LoadedBuffers(std::sync::RwLock<Option<std::collections::HashSet<PathBuf>>>);

impl LoadedBuffers {
    pub fn set(&self, names: Vec<PathBuf>) {
        *self.0.write_locked() = Some(names.into_iter().collect());
    }

    /// Whether a loaded buffer may be named one of `paths` (yes when not
    /// known yet).
    pub fn maybe(&self, paths: &[PathBuf]) -> bool {
        let loaded = self.0.read_locked();
        loaded.as_ref().is_none_or(|names| paths.iter().any(|p| names.contains(p)))
    }

    /// The names, as last reported (none when not known yet).
    pub fn names(&self) -> Vec<PathBuf> {
        let loaded = self.0.read_locked();
        loaded.as_ref().map(|names| names.iter().cloned().collect()).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::EditorError;

    #[test]
    fn a_refusal_is_an_answer_and_the_editors_failures_stay_errors() {
        assert_eq!(EditorError::Refused("cannot read x".into()).refusal(), Ok("cannot read x".to_owned()));
        assert_eq!(EditorError::Closed.refusal(), Err(EditorError::Closed));
        assert_eq!(EditorError::Crashed.refusal(), Err(EditorError::Crashed));
        assert_eq!(EditorError::Refused("why".into()).to_string(), "why");
    }
}
