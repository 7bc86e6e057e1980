//! Why an agent's read or edit of a file was refused (`core::file_ops`):
//! each variant carries what the agent is told, in one line, and the
//! protocols pass it on as their own failure (`success: false`, a tool
//! error). The wording is part of the wire: tests and agents read it.

use std::io;
use std::path::PathBuf;

use super::buffer::NotUtf8;
use super::checked_file::{io_message, FileRefusal};
use super::edit::RangeError;
use super::edit_gate::TooManyLines;
use super::filetext::Undecodable;

#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// Not a regular file on disk, too big, unreadable (`checked_file`).
    #[error(transparent)]
    Refused(#[from] FileRefusal),
    /// `stat` of the file failed.
    #[error("{}", io_message(path, source))]
    Io { path: PathBuf, source: io::Error },
    /// Its bytes are text in no encoding this side reads.
    #[error("cannot read {} as text: {source}", path.display())]
    NotText { path: PathBuf, source: Undecodable },
    /// The editor refused the call, in its own words
    /// (`EditorError::Refused`).
    #[error("{0}")]
    Editor(String),
    /// The user typed during every attempt at the edit.
    #[error("{} kept changing while the edit was applied; try again", path.display())]
    KeptChanging { path: PathBuf },
    /// The file has no write permission for this user (`mode`: its bits).
    #[error(
        "{} is read-only (mode {mode:o}): the agent may not change it; make it writable (chmod u+w) to allow edits",
        path.display()
    )]
    ReadOnly { path: PathBuf, mode: u32 },
    /// Its buffer has a `'buftype'`.
    #[error("{} is open in a buffer that is not a file ('buftype')", path.display())]
    NotAFileBuffer { path: PathBuf },
    /// Its buffer is `'readonly'`.
    #[error(
        "{} is read-only in Neovim ('readonly'): the agent may not change it; :setlocal noreadonly in its buffer to allow edits",
        path.display()
    )]
    ReadOnlyBuffer { path: PathBuf },
    /// The file changed on disk while its buffer has unsaved changes.
    #[error(
        "{} changed on disk while its buffer has unsaved changes: settle that first (:Amp diff, :Amp take or :Amp keep)",
        path.display()
    )]
    Conflict { path: PathBuf },
    #[error(transparent)]
    TooManyLines(#[from] TooManyLines),
    #[error("cannot edit {}: {source}", path.display())]
    NotUtf8 { path: PathBuf, source: NotUtf8 },
    /// A Latin-1 buffer and characters it has no byte for (`bad`: the first few).
    #[error(
        "{} is Latin-1 ('fileencoding') and has no byte for {bad:?}: nothing was changed (the file is never transcoded)",
        path.display()
    )]
    NotLatin1 { path: PathBuf, bad: String },
    /// Where the file is cannot be learned (`canonicalize`).
    #[error("cannot write beside {}: {source}", path.display())]
    WriteBeside { path: PathBuf, source: io::Error },
    /// The editor could not apply or write the edit (its words).
    #[error("could not edit {}: {why}", path.display())]
    NotApplied { path: PathBuf, why: String },
    /// An edit by byte offsets that do not fit the file's text.
    #[error("cannot apply the edit to {}: {source}", path.display())]
    Range { path: PathBuf, source: RangeError },
    /// A reviewed edit whose file changed while the user decided.
    #[error("{} changed during the review: nothing was written; read it again", path.display())]
    ChangedDuringReview { path: PathBuf },
    /// A new file a buffer was opened for while the user decided.
    #[error(
        "{} was opened in Neovim during the review: nothing was written; read it (its buffer has the text now)",
        path.display()
    )]
    OpenedDuringReview { path: PathBuf },
    /// A reviewed new file that could not be written.
    #[error(transparent)]
    NewFile(#[from] super::new_file::NewFileError),
}
