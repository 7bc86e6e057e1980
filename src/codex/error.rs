//! Why Codex's patches cannot be applied or rewritten, and why a frame of
//! its IDE client is no message. The texts go to Codex (a hook's denial)
//! and to the log as they are.

use super::patch::ParseError;

/// An update chunk whose lines are not in the file (`apply::apply_update`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UpdateError {
    /// A chunk's `@@ <line>` anchor (shown short).
    #[error("the line '{0}' is not in the file")]
    NoAnchor(String),
    /// A chunk's old lines (its first shown short).
    #[error("a chunk's lines are not in the file (its first: '{0}')")]
    NoChunk(String),
}

/// Why no patch of Codex's can write the accepted texts (`rewrite`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RewriteError {
    #[error("the text has no final line break, which Codex always writes")]
    NoFinalLineBreak,
    #[error("the text mixes line endings in a CRLF file, which Codex writes with CRLF only")]
    MixedLineEndings,
    #[error("the text has CRLF line endings in a file Codex writes with LF")]
    CrlfInLfFile,
    #[error("a new file's text must end with a line break and use LF line endings")]
    NotAddable,
    #[error("a moved file's text must end with a line break and use LF line endings")]
    NotMovable,
    /// One file's reason, with its path.
    #[error("{path}: {source}")]
    Of { path: String, source: Box<RewriteError> },
    #[error("the accepted texts are the files as they are")]
    NothingToChange,
    #[error("the rewritten patch does not read back ({0})")]
    NotReadBack(ParseError),
    #[error("{0}: updated but absent")]
    UpdatedButAbsent(String),
    #[error("{path}: {source}")]
    NotApplied { path: String, source: UpdateError },
    #[error("{0}: the rewritten patch would not write the accepted text")]
    NotTheAcceptedText(String),
}

/// A frame of Codex's IDE client that is no message.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    #[error("not JSON: {0}")]
    NotJson(#[source] serde_json::Error),
    #[error("a message without a type")]
    NoType,
    #[error("a request without a method")]
    NoMethod,
}
