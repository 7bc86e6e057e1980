//! The IDE-companion protocol as plain data: the discovery file's content,
//! the tools we list, the `ide/*` notifications, and the limits. No Neovim
//! API, no I/O.
//!
//! Units (checked against Gemini CLI 0.61.0's `IdeContextSchema`, the same
//! in Qwen Code 0.24.4): cursor lines and characters are 1-based;
//! characters are UTF-16 code units (the companion spec's VS Code
//! `Position`, plus one).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::{json, Value};

use crate::core::selection::RawSelection;
use crate::mcp::listed_tool;

/// Files in one `ide/contextUpdate`: Gemini and Qwen keep their 10 most recent and
/// drops the rest, so sending more only costs bytes.
pub const MAX_OPEN_FILES: usize = 10;
/// Bytes of selected text in one `ide/contextUpdate` (cut on a character
/// boundary): Gemini and Qwen truncate at 16 KiB characters themselves.
pub const MAX_SELECTED_TEXT_BYTES: usize = 16 * 1024;

#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct IdeInfo {
    pub name: &'static str,
    #[serde(rename = "displayName")]
    pub display_name: &'static str,
}

/// The discovery file's content. `ideInfo` makes the agent name the editor
/// ("Connected to Neovim") without guessing it from `TERM_PROGRAM`; Qwen
/// connects outside VS Code's terminal only with it.
#[derive(Serialize, Debug, Clone, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Discovery {
    pub port: u16,
    /// The workspace folders joined with ":" (Node's `path.delimiter`):
    /// the agent connects only when its cwd is inside one of them.
    pub workspace_path: String,
    pub auth_token: String,
    /// This editor's pid (Qwen's `ppid`: it deletes a file whose process is gone).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ppid: Option<u32>,
    pub ide_info: IdeInfo,
}

impl Discovery {
    pub fn new(port: u16, folders: &[String], auth_token: String, ppid: Option<u32>) -> Self {
        Self {
            port,
            workspace_path: workspace_path(folders),
            auth_token,
            ppid,
            ide_info: IdeInfo { name: "neovim", display_name: "Neovim" },
        }
    }
}

pub fn workspace_path(folders: &[String]) -> String {
    folders.join(":")
}

/// The `tools/list` result: Gemini and Qwen turn diffing on when both are listed.
pub fn tools() -> Value {
    let string = |d: &str| json!({ "type": "string", "description": d });
    json!({ "tools": [
        listed_tool("openDiff", "Open a review of a proposed new text of a file; the decision comes later as ide/diffAccepted or ide/diffRejected", json!({
            "filePath": string("The absolute path of the file"),
            "newContent": string("The proposed new text of the whole file"),
        }), &["filePath", "newContent"]),
        listed_tool("closeDiff", "Close the review of a file and return the proposal's current text", json!({
            "filePath": string("The absolute path of the file"),
            "suppressNotification": { "type": "boolean", "description": "Send no ide/diffRejected for it" },
        }), &["filePath"]),
    ] })
}

/// `ide/diffAccepted`: the final text, the user's edits to the proposal included.
pub fn diff_accepted(path: &Path, content: &str) -> Value {
    json!({ "filePath": path.to_string_lossy(), "content": content })
}

pub fn diff_rejected(path: &Path) -> Value {
    json!({ "filePath": path.to_string_lossy() })
}

/// `closeDiff`'s answer text: `JSON.stringify({content})` (null: no review).
pub fn close_diff_text(content: Option<&str>) -> String {
    json!({ "content": content }).to_string()
}

/// When each file was last the active one, or first seen (milliseconds
/// since the epoch): Gemini orders `openFiles` by `timestamp` and treats
/// the newest as the active file only if it says `isActive`.
#[derive(Debug, Default)]
pub struct Recency(HashMap<PathBuf, u64>);

/// The `ide/contextUpdate` params for the cursor or selection (the active
/// file) and the visible files, at most [`MAX_OPEN_FILES`], newest first.
pub fn context_update(
    selection: Option<&RawSelection>,
    visible: &[PathBuf],
    recency: &mut Recency,
    now_ms: u64,
) -> Value {
    let active = selection.filter(|s| s.path.is_absolute());
    let mut files: Vec<(u64, Value)> = Vec::new();
    if let Some(sel) = active {
        recency.0.insert(sel.path.clone(), now_ms);
        let mut file = json!({
            "path": sel.path.to_string_lossy(),
            "timestamp": now_ms,
            "isActive": true,
            "cursor": cursor(sel),
        });
        if !sel.cursor_only {
            let text = sel.regions.iter().map(|r| r.content(false)).collect::<Vec<_>>().join("\n");
            file["selectedText"] = json!(crate::core::text::cut(&text, MAX_SELECTED_TEXT_BYTES));
        }
        files.push((now_ms, file));
    }
    for path in visible.iter().filter(|p| p.is_absolute() && active.is_none_or(|s| &s.path != *p)) {
        // Older than the active file, whatever the clock did.
        let seen = (*recency.0.entry(path.clone()).or_insert(now_ms.saturating_sub(1))).min(now_ms.saturating_sub(1));
        if files.iter().any(|(_, f)| f["path"] == json!(path.to_string_lossy())) {
            continue;
        }
        files.push((seen, json!({ "path": path.to_string_lossy(), "timestamp": seen, "isActive": false })));
    }
    files.sort_by_key(|f| std::cmp::Reverse(f.0));
    files.truncate(MAX_OPEN_FILES);
    // Forget files that are no longer shown: the map stays as small as the list.
    let kept: Vec<String> = files.iter().filter_map(|(_, f)| f["path"].as_str().map(str::to_owned)).collect();
    recency.0.retain(|p, _| kept.iter().any(|k| Path::new(k) == p));
    json!({
        "workspaceState": {
            "openFiles": files.into_iter().map(|(_, f)| f).collect::<Vec<_>>(),
            "isTrusted": true,
        }
    })
}

/// The cursor, 1-based line and UTF-16 character: the cursor itself, or
/// the end of a Visual selection (where Neovim's cursor usually is).
fn cursor(sel: &RawSelection) -> Value {
    match (sel.cursor_only, sel.regions.first(), sel.regions.last()) {
        (true, Some(r), _) => json!({ "line": r.start_line + 1, "character": r.utf16_range().0 + 1 }),
        (false, _, Some(r)) => json!({ "line": r.end_line + 1, "character": r.utf16_range().1 + 1 }),
        _ => json!({ "line": 1, "character": 1 }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::selection::RawRegion;

    #[test]
    fn discovery_file_has_the_fields_the_agents_read() {
        let d = Discovery::new(4242, &["/w/a".into(), "/w/b".into()], "tok".into(), None);
        assert_eq!(
            serde_json::to_value(&d).unwrap(),
            json!({"port": 4242, "workspacePath": "/w/a:/w/b", "authToken": "tok",
                   "ideInfo": {"name": "neovim", "displayName": "Neovim"}})
        );
        let q = Discovery::new(4242, &["/w".into()], "tok".into(), Some(77));
        assert_eq!(
            serde_json::to_value(&q).unwrap(),
            json!({"port": 4242, "workspacePath": "/w", "authToken": "tok", "ppid": 77,
                   "ideInfo": {"name": "neovim", "displayName": "Neovim"}})
        );
    }

    #[test]
    fn tools_are_open_and_close_diff() {
        let t = tools();
        let names: Vec<&str> = t["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["openDiff", "closeDiff"]);
        assert_eq!(close_diff_text(Some("x\n")), r#"{"content":"x\n"}"#);
        assert_eq!(close_diff_text(None), r#"{"content":null}"#);
    }

    #[test]
    fn the_cursor_is_1_based_in_utf16_units() {
        // "é😀x": byte 6 (before x) is UTF-16 character 3, so 4 1-based.
        let sel = RawSelection::cursor("/w/a.rs".into(), 2, 6, "é😀x".as_bytes().to_vec());
        let v = context_update(Some(&sel), &[], &mut Recency::default(), 1000);
        let f = &v["workspaceState"]["openFiles"][0];
        assert_eq!(f["cursor"], json!({"line": 3, "character": 4}));
        assert_eq!(f["isActive"], true);
        assert_eq!(f["timestamp"], 1000);
        assert!(f.get("selectedText").is_none(), "{f}");
        assert_eq!(v["workspaceState"]["isTrusted"], true);
    }

    #[test]
    fn a_selection_carries_its_text_cut_on_a_character_boundary() {
        let sel = RawSelection {
            path: "/w/a".into(),
            cursor_only: false,
            regions: vec![RawRegion::of(0, 1, 1, 2, &["abc", "def"])],
        };
        let v = context_update(Some(&sel), &[], &mut Recency::default(), 5);
        let f = &v["workspaceState"]["openFiles"][0];
        assert_eq!(f["selectedText"], "bc\nde");
        assert_eq!(f["cursor"], json!({"line": 2, "character": 3}));
        let long = "é".repeat(MAX_SELECTED_TEXT_BYTES);
        let big = RawSelection {
            path: "/w/a".into(),
            cursor_only: false,
            regions: vec![RawRegion {
                start_line: 0,
                start_col: 0,
                end_line: 0,
                end_col: long.len(),
                lines: vec![long.into_bytes()],
            }],
        };
        let v = context_update(Some(&big), &[], &mut Recency::default(), 5);
        let text = v["workspaceState"]["openFiles"][0]["selectedText"].as_str().unwrap();
        assert_eq!(text.len(), MAX_SELECTED_TEXT_BYTES);
        assert_eq!(crate::core::text::cut("aé", 2), "a");
    }

    #[test]
    fn visible_files_are_older_than_the_active_one_and_at_most_ten() {
        let mut recency = Recency::default();
        let sel = RawSelection::cursor("/w/0".into(), 0, 0, Vec::new());
        let visible: Vec<PathBuf> = (0..15).map(|i| PathBuf::from(format!("/w/{i}"))).collect();
        let v = context_update(Some(&sel), &visible, &mut recency, 100);
        let files = v["workspaceState"]["openFiles"].as_array().unwrap();
        assert_eq!(files.len(), MAX_OPEN_FILES);
        assert_eq!(files[0]["path"], "/w/0");
        assert!(files[1..].iter().all(|f| f["isActive"] == false && f["timestamp"].as_u64() < Some(100)));
        // The file that was active keeps its time when another one is.
        let sel = RawSelection::cursor("/w/1".into(), 0, 0, Vec::new());
        let v = context_update(Some(&sel), &visible[..2], &mut recency, 200);
        let files = v["workspaceState"]["openFiles"].as_array().unwrap();
        assert_eq!(files.len(), 2);
        assert_eq!((files[0]["path"].as_str(), files[0]["timestamp"].as_u64()), (Some("/w/1"), Some(200)));
        assert_eq!((files[1]["path"].as_str(), files[1]["timestamp"].as_u64()), (Some("/w/0"), Some(100)));
        // No file buffer: only the visible files, none active.
        let v = context_update(None, &visible[..1], &mut recency, 300);
        assert_eq!(v["workspaceState"]["openFiles"][0]["isActive"], false);
        let relative = RawSelection::cursor("rel".into(), 0, 0, Vec::new());
        let v = context_update(Some(&relative), &[], &mut recency, 300);
        assert_eq!(v["workspaceState"]["openFiles"], json!([]));
    }
}
