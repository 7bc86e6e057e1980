//! Why a tool refused (one line, for the model to read): its arguments,
//! a path outside the workspace, the file or the editor. The wording is
//! what MCP's tool errors and tap's `tool.result` carry.

use crate::core::checked_file::FileRefusal;
use crate::core::editor::EditorError;
use crate::core::file_error::FileError;
use crate::core::patch::PatchError;
use crate::core::uri::UriError;

/// A tool argument of the wrong type or missing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArgError {
    /// `got`: the kind of JSON value given ("a number", ...).
    #[error("{name} must be a string, got {got}")]
    NotAString { name: String, got: &'static str },
    #[error("{name} is required (a non-empty string)")]
    Required { name: String },
    /// `got`: the value given, short.
    #[error("{name} must be a positive integer (1-based), got {got}")]
    NotAPosition { name: String, got: String },
    #[error("{name} must be true or false, got {got}")]
    NotABoolean { name: String, got: &'static str },
}

/// A path an agent named that no tool may use.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    #[error("the path is {len} bytes, longer than any file's ({})", super::paths::MAX_PATH_BYTES)]
    TooLong { len: usize },
    #[error("the path contains a NUL byte")]
    Nul,
    /// `shown`: the URI as given, short.
    #[error("{shown}: {source}")]
    Uri { shown: String, source: UriError },
    /// `shown`: the path, short; `reached`: where its links lead, when
    /// that is elsewhere.
    #[error(
        "{shown}{} is outside the workspace ({}): only files under it can be used",
        reached.as_ref().map(|r| format!(" (it is {r})")).unwrap_or_default(),
        folders.join(", ")
    )]
    Outside { shown: String, reached: Option<String>, folders: Vec<String> },
}

/// Why a tool refused.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    #[error(transparent)]
    Arg(#[from] ArgError),
    #[error(transparent)]
    Path(#[from] PathError),
    /// The file cannot be read or edited (`core::file_ops`).
    #[error(transparent)]
    File(#[from] FileError),
    /// The file cannot be opened (`core::checked_file`).
    #[error(transparent)]
    Unopenable(#[from] FileRefusal),
    /// The editor is closing, crashed, or refused.
    #[error(transparent)]
    Editor(#[from] EditorError),
    #[error("line is required with column, endLine or endColumn")]
    LineRequired,
    #[error("give newText or patch, not both")]
    BothTextAndPatch,
    #[error("give newText (the whole new text) or patch (a unified diff)")]
    NoTextNorPatch,
    /// `shown`: the path, short.
    #[error("{shown} is read-only: the user would have to make it writable first")]
    ReadOnly { shown: String },
    #[error(
        "{shown} is open in Neovim but was never saved: the user's buffer has its text; ask them to save it first"
    )]
    NotSavedYet { shown: String },
    #[error("{shown} does not exist: an empty new file has nothing to review; give its text")]
    EmptyNewFile { shown: String },
    #[error("cannot apply the patch to {shown}: {source}")]
    Patch { shown: String, source: PatchError },
    #[error("the user did not review the edit to {shown} within {secs} s (review.timeout_ms): nothing was changed")]
    NotReviewed { shown: String, secs: u64 },
    #[error("the user accepted the edit, but it was not written: {0}")]
    NotWritten(FileError),
}
