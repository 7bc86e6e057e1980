//! The editor's tools for any agent, as plain Rust with no transport: the
//! current selection, the open files, a file's text as its buffer holds it,
//! diagnostics, opening a file at a position, an edit proposed for the
//! user's review and written as `:w` writes it, the workspace folders.
//!
//! Each tool takes a JSON object of arguments and answers a text or a JSON
//! value, or refuses in one line (a path outside the workspace, a FIFO, a
//! file too big, a patch that does not apply): the caller's transport turns
//! that into its own result (the MCP front-end `crate::mcp_server` as tool
//! results; a tap gateway provider can do the same). Everything goes
//! through the session's [`Hub`]: the editor (`core::editor::Editor`), its
//! published state and `core::file_ops`, so the unit tests run over
//! `core::fake_editor`.

mod args;
mod edit;
pub mod error;
mod files;
pub mod paths;
pub mod spec;
mod state;

use serde_json::{Map, Value};

use crate::core::review::Owner;
use crate::serve::budget::Held;
use crate::serve::hub::Hub;

pub use error::ToolError;
pub use spec::{Tool, TOOLS};
pub use state::{open_files, selection};

/// Who asks, and through what.
pub struct Context<'a> {
    pub hub: &'a Hub,
    /// The client asking: its reviews are its own.
    pub owner: Owner,
    /// The client's name as it gave it ("codex-mcp-client", ...), shown in
    /// the names of its reviews; empty when it gave none.
    pub client: &'a str,
}

/// A tool's answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// Text given to the model as it is (a file's text, a sentence).
    Text(String),
    /// A structured answer.
    Json(Value),
}

/// A tool's answer, or why it refused (one line, for the model to read).
pub type Outcome = Result<Answer, ToolError>;

/// Runs tool `name` with `args`; `None`: there is no such tool. `held`
/// (the request's place and bytes in flight) is released before a tool
/// waits for the user.
pub async fn call(name: &str, args: &Map<String, Value>, cx: &Context<'_>, held: &mut Held) -> Option<Outcome> {
    // The editor's selection and visible files, read when first needed
    // (at once when they are).
    cx.hub.state.context_ready().await;
    Some(match name {
        "get_selection" => state::get_selection(args, cx),
        "get_open_files" => state::get_open_files(cx).await,
        "get_workspace_folders" => Ok(Answer::Json(state::workspace_folders(cx.hub))),
        "get_diagnostics" => state::get_diagnostics(args, cx).await,
        "read_file" => files::read_file(args, cx).await,
        "open_file" => files::open_file(args, cx).await,
        "propose_edit" => edit::propose_edit(args, cx, held).await,
        _ => return None,
    })
}

#[cfg(test)]
mod tests;

/// The text of the file at `path` (a path or a `file://` URI inside the
/// workspace) as `read_file` answers it: for transports that offer files
/// otherwise (MCP resources).
pub async fn read_text(hub: &Hub, path: &str) -> Result<String, ToolError> {
    let path = paths::resolve(path, &hub.workspace_folders()).await?;
    Ok(hub.files().read(&path).await??)
}
