//! The Claude Code IDE protocol as plain data: the tools we list, the
//! notifications we send, the lockfile. No Neovim API, no I/O.
//!
//! Units (checked against Claude Code 2.1.330): lines are 0-based on the
//! wire, characters are UTF-16 code units (VS Code's `Position`).

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::{json, Value};

use crate::core::selection::RawSelection;
use crate::core::uri::path_to_file_uri;

/// The WebSocket subprotocol Claude Code asks for.
pub const SUBPROTOCOL: &str = "mcp";
/// The header that carries the lockfile's token.
pub const AUTH_HEADER: &str = "x-claude-code-ide-authorization";
/// The lockfile's extension: `<port>.lock`.
pub const LOCK_EXTENSION: &str = "lock";

/// The lockfile's content (`~/.claude/ide/<port>.lock`).
#[derive(Serialize, Debug, Clone, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Lockfile {
    pub pid: u32,
    pub workspace_folders: Vec<String>,
    pub ide_name: String,
    pub transport: &'static str,
    pub auth_token: String,
}

impl Lockfile {
    pub fn new(pid: u32, workspace_folders: Vec<String>, ide_name: String, auth_token: String) -> Self {
        Self { pid, workspace_folders, ide_name, transport: "ws", auth_token }
    }
}

/// Where lockfiles live: `$CLAUDE_CONFIG_DIR/ide` when set and non-empty,
/// else `<home>/.claude/ide`.
pub fn lock_dir(claude_config_dir: Option<&std::ffi::OsStr>, home: Option<&Path>) -> Option<PathBuf> {
    match claude_config_dir.filter(|d| !d.is_empty()) {
        Some(dir) => Some(PathBuf::from(dir).join("ide")),
        None => Some(home?.join(".claude").join("ide")),
    }
}

pub fn lock_dir_from_env() -> Option<PathBuf> {
    lock_dir(std::env::var_os("CLAUDE_CONFIG_DIR").as_deref(), dirs::home_dir().as_deref())
}

/// How a client reads the line numbers of `selection_changed` and
/// `at_mentioned`: Claude Code from 0, OpenCode from 1 (`serve::vscode`).
pub use crate::serve::vscode::Lines;

/// A kind of client of this protocol: the name it is announced by, and
/// how it reads line numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientKind {
    pub name: &'static str,
    pub lines: Lines,
}

pub const CLAUDE_CODE: ClientKind = ClientKind { name: "Claude", lines: Lines::FromZero };
pub const OPENCODE: ClientKind = ClientKind { name: "OpenCode", lines: Lines::FromOne };

/// Who a client is, from the `clientInfo.name` of its `initialize`:
/// OpenCode 1.18 says `opencode` (it reads these lockfiles too); Claude
/// Code says `claude-code`, and any other client counts as Claude Code.
pub fn client_kind(initialize: &Value) -> ClientKind {
    match initialize.pointer("/clientInfo/name").and_then(Value::as_str) {
        Some("opencode") => OPENCODE,
        _ => CLAUDE_CODE,
    }
}

fn tool(name: &str, description: &str, properties: Value, required: &[&str]) -> Value {
    json!({
        "name": name,
        "description": description,
        "inputSchema": {
            "type": "object",
            "properties": properties,
            "required": required,
            "additionalProperties": false,
            "$schema": "http://json-schema.org/draft-07/schema#",
        },
    })
}

/// The `tools/list` result: VS Code's tool names (`close_tab` is snake_case).
pub fn tools() -> Value {
    let path = |d: &str| json!({ "type": "string", "description": d });
    json!({ "tools": [
        tool("openFile", "Open a file in the editor and optionally select a range of text", json!({
            "filePath": path("Path to the file to open"),
            "preview": { "type": "boolean", "default": false },
            "startText": path("Text pattern to find the start of the selection"),
            "endText": path("Text pattern to find the end of the selection"),
            "selectToEndOfLine": { "type": "boolean", "default": false },
            "makeFrontmost": { "type": "boolean", "default": true },
        }), &["filePath"]),
        tool("getCurrentSelection", "Get the current text selection in the active editor", json!({}), &[]),
        tool("getLatestSelection", "Get the most recent text selection (even if not in the active editor)", json!({}), &[]),
        tool("getOpenEditors", "Get information about currently open editors", json!({}), &[]),
        tool("getWorkspaceFolders", "Get all workspace folders currently open in the IDE", json!({}), &[]),
        tool("getDiagnostics", "Get language diagnostics from the editor", json!({
            "uri": path("Optional file URI to get diagnostics for. If not provided, gets diagnostics for all files."),
        }), &[]),
        tool("checkDocumentDirty", "Check if a document has unsaved changes (is dirty)", json!({
            "filePath": path("Path to the file to check"),
        }), &["filePath"]),
        tool("saveDocument", "Save a document with unsaved changes", json!({
            "filePath": path("Path to the file to save"),
        }), &["filePath"]),
        tool("openDiff", "Open a diff view comparing a file with proposed contents; blocks until the user accepts (FILE_SAVED and the final text) or rejects (DIFF_REJECTED)", json!({
            "old_file_path": path("Path to the file being changed"),
            "new_file_path": path("Path the new contents are for"),
            "new_file_contents": path("The whole proposed file"),
            "tab_name": path("Name of the review"),
        }), &["old_file_path", "new_file_path", "new_file_contents", "tab_name"]),
        tool("close_tab", "Close a tab by name", json!({ "tab_name": path("Name of the tab to close") }), &["tab_name"]),
        tool("closeAllDiffTabs", "Close all diff tabs in the editor", json!({}), &[]),
    ] })
}

/// The selection as `selection_changed` and `getCurrentSelection` carry it,
/// its lines counted from 0 or as `lines` says (VS Code's shape, shared
/// with other protocols: `serve::vscode`).
pub use crate::serve::vscode::{selection, selection_for};

/// `getCurrentSelection` / `getLatestSelection`: the selection with `success`.
pub fn selection_answer(sel: Option<&RawSelection>, missing: &str) -> Value {
    match sel {
        Some(sel) => {
            let mut value = selection(sel);
            value["success"] = json!(true);
            value
        }
        None => json!({ "success": false, "message": missing }),
    }
}

/// `at_mentioned`: "add these lines of this file to my prompt" (0-based
/// lines `line_start..=line_end`, counted on the wire as `lines` says:
/// from 0 as VS Code's extension sends them).
pub fn at_mentioned(path: &Path, line_start: usize, line_end: usize, lines: Lines) -> Value {
    json!({ "filePath": path.to_string_lossy(), "lineStart": lines.of(line_start), "lineEnd": lines.of(line_end) })
}

/// `getWorkspaceFolders`.
pub fn workspace_folders(folders: &[String]) -> Value {
    let list: Vec<Value> = folders
        .iter()
        .map(|f| {
            let name = Path::new(f).file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| f.clone());
            json!({ "name": name, "uri": path_to_file_uri(Path::new(f)), "path": f })
        })
        .collect();
    json!({ "success": true, "folders": list, "rootPath": folders.first() })
}

pub use crate::serve::vscode::severity_name;

#[cfg(test)]
mod tests {
    use super::*;

    use crate::core::selection::RawRegion;

    #[test]
    fn clients_are_told_apart_by_their_client_info() {
        assert_eq!(client_kind(&json!({"clientInfo": {"name": "opencode", "version": "0.0.0"}})), OPENCODE);
        assert_eq!(client_kind(&json!({"clientInfo": {"name": "claude-code", "version": "2.1"}})), CLAUDE_CODE);
        assert_eq!(client_kind(&json!({"clientInfo": {"name": "OpenCode"}})), CLAUDE_CODE);
        assert_eq!(client_kind(&json!({"clientInfo": 7})), CLAUDE_CODE);
        assert_eq!(client_kind(&Value::Null), CLAUDE_CODE);
        assert_eq!((OPENCODE.name, OPENCODE.lines), ("OpenCode", Lines::FromOne));
    }

    fn region(sl: usize, sc: usize, el: usize, ec: usize, lines: &[&str]) -> RawRegion {
        RawRegion::of(sl, sc, el, ec, lines)
    }

    #[test]
    fn lockfile_has_the_fields_claude_reads() {
        let lock = Lockfile::new(42, vec!["/w".into()], "Neovim".into(), "tok".into());
        assert_eq!(
            serde_json::to_value(&lock).unwrap(),
            json!({"pid": 42, "workspaceFolders": ["/w"], "ideName": "Neovim", "transport": "ws", "authToken": "tok"})
        );
    }

    #[test]
    fn lock_dir_follows_claude_config_dir() {
        use std::ffi::OsStr;
        assert_eq!(lock_dir(Some(OsStr::new("/c")), Some(Path::new("/h"))), Some(PathBuf::from("/c/ide")));
        assert_eq!(lock_dir(Some(OsStr::new("")), Some(Path::new("/h"))), Some(PathBuf::from("/h/.claude/ide")));
        assert_eq!(lock_dir(None, Some(Path::new("/h"))), Some(PathBuf::from("/h/.claude/ide")));
        assert_eq!(lock_dir(None, None), None);
    }

    #[test]
    fn tools_are_vs_code_names_with_object_schemas() {
        let tools = tools();
        let names: Vec<&str> = tools["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
        for name in [
            "openFile",
            "openDiff",
            "getCurrentSelection",
            "getLatestSelection",
            "getOpenEditors",
            "getWorkspaceFolders",
            "getDiagnostics",
            "checkDocumentDirty",
            "saveDocument",
            "close_tab",
            "closeAllDiffTabs",
        ] {
            assert!(names.contains(&name), "{name}");
        }
        for t in tools["tools"].as_array().unwrap() {
            assert_eq!(t["inputSchema"]["type"], "object");
        }
    }

    #[test]
    fn the_cursor_is_an_empty_selection() {
        let sel = RawSelection::cursor("/a".into(), 3, 2, b"abcd".to_vec());
        let v = selection(&sel);
        assert_eq!(v["text"], "");
        assert_eq!(v["selection"]["isEmpty"], true);
        assert_eq!(v["selection"]["start"], json!({"line": 3, "character": 2}));
        assert_eq!(selection_answer(Some(&sel), "none")["success"], true);
        assert_eq!(selection_answer(None, "none"), json!({"success": false, "message": "none"}));
    }

    #[test]
    fn blockwise_selection_joins_rows() {
        let sel = RawSelection {
            path: "/a".into(),
            cursor_only: false,
            regions: vec![region(0, 1, 0, 3, &["abcd"]), region(1, 1, 1, 3, &["efgh"])],
        };
        let v = selection(&sel);
        assert_eq!(v["text"], "bc\nfg");
        assert_eq!(v["selection"]["end"], json!({"line": 1, "character": 3}));
    }

    #[test]
    fn mentions_folders_and_severities() {
        assert_eq!(
            at_mentioned(Path::new("/a"), 0, 4, Lines::FromZero),
            json!({"filePath": "/a", "lineStart": 0, "lineEnd": 4})
        );
        assert_eq!(
            at_mentioned(Path::new("/a"), 0, 4, Lines::FromOne),
            json!({"filePath": "/a", "lineStart": 1, "lineEnd": 5})
        );
        let w = workspace_folders(&["/w/proj".into()]);
        assert_eq!(w["folders"][0], json!({"name": "proj", "uri": "file:///w/proj", "path": "/w/proj"}));
        assert_eq!(w["rootPath"], "/w/proj");
        assert_eq!([1, 2, 3, 4].map(severity_name), ["Error", "Warning", "Information", "Hint"]);
    }
}
