//! Why an MCP request failed, and the JSON-RPC code each failure is
//! answered with: the code follows from the variant, never from the text.
//! The messages are the wire's (agents and tests read them).

use crate::core::checked_file::FileRefusal;
use crate::core::editor::EditorError;
use crate::core::uri::UriError;

use super::{INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND, RESOURCE_NOT_FOUND};

#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    /// A method this server does not have (the name cut short by the caller).
    #[error("method not found: {0}")]
    NoMethod(String),
    /// A tool this front-end does not have, answered "method not found" as
    /// the IDE servers Claude Code, Copilot and the Gemini/Qwen companions
    /// expect.
    #[error("unknown tool: {0}")]
    NoTool(String),
    /// A tool the MCP server does not list: an invalid parameter, as the
    /// MCP specification says.
    #[error("unknown tool: {0}")]
    UnlistedTool(String),
    #[error("tools/call needs a tool name")]
    NoToolName,
    #[error("tools/call arguments must be an object")]
    ArgumentsNotAnObject,
    /// A tool's argument (its name) that must be a non-empty string.
    #[error("{0} must be a non-empty string")]
    NotANonEmptyString(String),
    /// A tool's argument (its name) that must be a string.
    #[error("{0} must be a string")]
    NotAString(&'static str),
    /// A tool's `file://` argument `name` that names no local path.
    #[error("{name}: {source}")]
    BadUri { name: String, source: UriError },
    #[error("uri is required")]
    NoUri,
    /// A resource that cannot be subscribed to: the two that can.
    #[error("only {} and {} can be subscribed to", .0[0], .0[1])]
    NotSubscribable([&'static str; 2]),
    /// A resource URI this server does not serve (cut short by the caller).
    #[error("no such resource: {0}")]
    NoResource(String),
    /// A file resource that cannot be read (the tool's refusal).
    #[error(transparent)]
    Unreadable(Box<dyn std::error::Error + Send + Sync>),
    /// The editor is gone, failed, or refused the call.
    #[error(transparent)]
    Editor(#[from] EditorError),
    /// A file that may not be opened (a FIFO, a device, too big, ...).
    #[error(transparent)]
    Unopenable(#[from] FileRefusal),
}

impl RequestError {
    /// The JSON-RPC error code the failure is answered with.
    pub fn code(&self) -> i64 {
        match self {
            RequestError::NoMethod(_) | RequestError::NoTool(_) => METHOD_NOT_FOUND,
            RequestError::UnlistedTool(_)
            | RequestError::NoToolName
            | RequestError::ArgumentsNotAnObject
            | RequestError::NotANonEmptyString(_)
            | RequestError::NotAString(_)
            | RequestError::BadUri { .. }
            | RequestError::NoUri
            | RequestError::NotSubscribable(_) => INVALID_PARAMS,
            RequestError::NoResource(_) | RequestError::Unreadable(_) => RESOURCE_NOT_FOUND,
            RequestError::Editor(_) | RequestError::Unopenable(_) => INTERNAL_ERROR,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_failure_has_its_code_and_its_wire_text() {
        let cases: [(RequestError, i64, &str); 6] = [
            (RequestError::NoMethod("x/y".into()), -32601, "method not found: x/y"),
            (RequestError::NoTool("t".into()), -32601, "unknown tool: t"),
            (RequestError::UnlistedTool("t".into()), -32602, "unknown tool: t"),
            (RequestError::NotSubscribable(["a://1", "b://2"]), -32602, "only a://1 and b://2 can be subscribed to"),
            (RequestError::NoResource("z://".into()), -32002, "no such resource: z://"),
            (EditorError::Closed.into(), -32603, "the editor is shutting down"),
        ];
        for (error, code, text) in cases {
            assert_eq!((error.code(), error.to_string().as_str()), (code, text));
        }
    }
}
