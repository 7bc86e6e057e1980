//! The MCP server's wire-facing data: its discovery file and directory,
//! the variable that names this Neovim to agents started in its terminals,
//! `initialize`, and the tools and their results in MCP's terms. Plain
//! data, no I/O.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::{json, Value};

use crate::editor_tools::{Answer, Outcome, Tool};
use crate::serve::discovery::{amp_data_dir, amp_data_dir_from_env};

/// Set in Neovim's environment while the server runs, so an agent started
/// in its terminal (and the stdio entry point it starts) finds this Neovim
/// first: the port, whose discovery file has the token.
pub const PORT_ENV: &str = "AMP_NVIM_MCP_PORT";

/// What the model is told about the server when a client connects.
pub const INSTRUCTIONS: &str = "These tools are the user's Neovim: what they selected, the files they have open (with unsaved changes), diagnostics, and edits they review before they are written. Prefer propose_edit to writing files yourself when the user should see the change.";

/// Where discovery files live: `$AMP_DATA_HOME/amp/mcp`, else
/// `$XDG_DATA_HOME/amp/mcp` (absolute only), else `~/.local/share/amp/mcp`
/// (beside Amp's lockfiles in `amp/ide`).
pub fn discovery_dir(
    amp_data_home: Option<&OsStr>,
    xdg_data_home: Option<&OsStr>,
    home: Option<&Path>,
) -> Option<PathBuf> {
    Some(amp_data_dir(amp_data_home, xdg_data_home, home)?.join("mcp"))
}

pub fn discovery_dir_from_env() -> Option<PathBuf> {
    Some(amp_data_dir_from_env()?.join("mcp"))
}

pub fn file_name(port: u16) -> String {
    format!("{port}.json")
}

/// The discovery file: how the stdio entry point (or anyone with this
/// user's rights) reaches this Neovim.
#[derive(Serialize, Debug, Clone, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Discovery {
    pub port: u16,
    pub url: String,
    pub auth_token: String,
    pub pid: u32,
    pub workspace_folders: Vec<String>,
    pub ide_name: String,
    /// The largest request body the server takes (`server.max_frame_bytes`).
    pub max_request_bytes: usize,
}

pub fn url(port: u16) -> String {
    format!("http://127.0.0.1:{port}/mcp")
}

/// The `initialize` result: tools and resources (subscriptions too), and
/// instructions for the model.
pub fn initialize_result(params: &Value) -> Value {
    let mut result = crate::mcp::initialize_result(params, "neovim", env!("CARGO_PKG_VERSION"));
    result["capabilities"]["resources"] = json!({ "subscribe": true, "listChanged": false });
    result["instructions"] = json!(INSTRUCTIONS);
    result
}

/// One tool as `tools/list` lists it.
pub fn tool(tool: &Tool) -> Value {
    json!({
        "name": tool.name,
        "title": tool.title,
        "description": tool.description,
        "inputSchema": tool.input_schema(),
        "annotations": {
            "title": tool.title,
            "readOnlyHint": tool.read_only,
            "destructiveHint": false,
            "idempotentHint": tool.read_only,
            "openWorldHint": false,
        },
    })
}

pub fn tools_list() -> Value {
    json!({ "tools": crate::editor_tools::TOOLS.iter().map(tool).collect::<Vec<_>>() })
}

/// A tool's outcome as a `tools/call` result: a refusal is a result with
/// `isError` (the model reads why and can try otherwise), not a protocol
/// error.
pub fn tool_result(outcome: Outcome) -> Value {
    match outcome {
        Ok(Answer::Text(text)) => crate::mcp::text_content(&[&text], false),
        Ok(Answer::Json(value)) => crate::mcp::text_content(&[&value.to_string()], false),
        Err(why) => crate::mcp::text_content(&[&why.to_string()], true),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_discovery_directory_is_beside_amps_lockfiles() {
        let home = Path::new("/h");
        assert_eq!(discovery_dir(Some(OsStr::new("/a")), None, Some(home)), Some(PathBuf::from("/a/amp/mcp")));
        assert_eq!(discovery_dir(None, Some(OsStr::new("/x")), Some(home)), Some(PathBuf::from("/x/amp/mcp")));
        assert_eq!(
            discovery_dir(None, Some(OsStr::new("rel")), Some(home)),
            Some(PathBuf::from("/h/.local/share/amp/mcp"))
        );
        assert_eq!(discovery_dir(None, None, None), None);
        let d = Discovery {
            port: 5,
            url: url(5),
            auth_token: "t".into(),
            pid: 9,
            workspace_folders: vec!["/w".into()],
            ide_name: "Neovim".into(),
            max_request_bytes: 10,
        };
        assert_eq!(
            serde_json::to_value(&d).unwrap(),
            json!({"port": 5, "url": "http://127.0.0.1:5/mcp", "authToken": "t", "pid": 9,
                   "workspaceFolders": ["/w"], "ideName": "Neovim", "maxRequestBytes": 10})
        );
    }

    #[test]
    fn initialize_offers_tools_and_resources_and_refusals_are_tool_errors() {
        let init = initialize_result(&json!({"protocolVersion": "2025-06-18"}));
        assert_eq!(init["protocolVersion"], "2025-06-18");
        assert_eq!(init["capabilities"]["resources"]["subscribe"], true);
        assert!(init["capabilities"]["tools"].is_object() && init["instructions"].is_string());
        let list = tools_list();
        assert!(list["tools"].as_array().unwrap().iter().any(|t| t["name"] == "propose_edit"));
        assert_eq!(
            tool_result(Err(crate::editor_tools::ToolError::BothTextAndPatch)),
            json!({"content": [{"type": "text", "text": "give newText or patch, not both"}], "isError": true})
        );
        assert_eq!(tool_result(Ok(Answer::Json(json!({"a": 1}))))["content"][0]["text"], r#"{"a":1}"#);
    }
}
