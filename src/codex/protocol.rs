//! Codex CLI's private IDE protocol, and our hook's, as plain data. No
//! Neovim, no I/O.
//!
//! Codex's `/ide` (checked against Codex 0.169.0; the protocol is not
//! public and may change with any Codex update: openai/codex#26390) asks
//! for the editor's context over `$TMPDIR/codex-ipc/ipc-<uid>.sock`, each
//! frame a u32 little-endian length and a JSON message:
//!
//! - `{"type":"request","requestId","sourceClientId","version":0,
//!   "method":"ide-context","params":{"workspaceRoot"}}` (the TUI, one
//!   connection per prompt) or `"method":"initialize"` (a client that
//!   stays), answered `{"type":"response","requestId",
//!   "resultType":"success","result":{...}}` or `"resultType":"error"`.
//! - `ide-context` answers `{"ideContext":{"activeFile":{label, path,
//!   fsPath, selection:{start:{line,character},end}, activeSelectionContent,
//!   selections}, "openTabs":[{label, path, fsPath}]}}`: 0-based lines,
//!   UTF-16 characters (VS Code's units), `path` relative to the workspace
//!   root (it is what the model reads).
//!
//! Our hook (`lua/amp/codex/hook.lua`) speaks the same framing on a socket
//! of its own: a header frame (the hook's JSON from Codex without the
//! patch), then the patch as a frame of its own, answered by one
//! [`HookAnswer`] frame.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::{json, Value};

pub use super::error::DecodeError;
use crate::core::selection::RawSelection;

/// Largest frame Codex's IDE client may send us (its requests are a few
/// hundred bytes), and largest header frame of our hook.
pub const MAX_IPC_FRAME_BYTES: usize = 64 * 1024;
/// Largest patch the hook may send: one review shows at most 16 MiB.
pub const MAX_PATCH_BYTES: usize = 16 * 1024 * 1024;
/// Files one patch may change (each is a review of its own).
pub const MAX_PATCH_FILES: usize = 32;
/// Selected text sent in one `ide-context` answer, cut on a character
/// boundary.
pub const MAX_SELECTION_BYTES: usize = 256 * 1024;
/// Open tabs listed in one `ide-context` answer.
pub const MAX_OPEN_TABS: usize = 50;

/// A message of Codex's IDE client.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    Request {
        id: Value,
        method: String,
        params: Value,
    },
    /// Anything else (a broadcast, a response): nothing to answer.
    Other,
}

/// Reads one frame's JSON; `Err`: why it is no message.
pub fn decode(frame: &[u8]) -> Result<Incoming, DecodeError> {
    let value: Value = serde_json::from_slice(frame).map_err(DecodeError::NotJson)?;
    let Some(kind) = value.get("type").and_then(Value::as_str) else {
        return Err(DecodeError::NoType);
    };
    if kind != "request" {
        return Ok(Incoming::Other);
    }
    let id = value.get("requestId").cloned().unwrap_or(Value::Null);
    let method = value.get("method").and_then(Value::as_str).ok_or(DecodeError::NoMethod)?.to_owned();
    let params = value.get("params").cloned().unwrap_or(Value::Null);
    Ok(Incoming::Request { id, method, params })
}

pub fn success(id: &Value, result: Value) -> Vec<u8> {
    json!({ "type": "response", "requestId": id, "resultType": "success", "result": result }).to_string().into_bytes()
}

pub fn failure(id: &Value, error: &str) -> Vec<u8> {
    json!({ "type": "response", "requestId": id, "resultType": "error", "error": error }).to_string().into_bytes()
}

/// The answer to `initialize`: the id this connection is known by.
pub fn initialized(client_id: u64) -> Value {
    json!({ "clientId": format!("neovim-{client_id}") })
}

/// Codex's workspace root from `ide-context`'s params, when absolute.
pub fn workspace_root(params: &Value) -> Option<PathBuf> {
    params.get("workspaceRoot").and_then(Value::as_str).map(PathBuf::from).filter(|p| p.is_absolute())
}

/// The `ide-context` result: the file of the cursor or Visual selection and
/// the files shown in the current tab page, paths relative to `root` (else
/// to `fallback_root`, else absolute).
pub fn ide_context(selection: Option<&RawSelection>, visible: &[PathBuf], roots: &[&Path]) -> Value {
    let file = |path: &Path| {
        json!({
            "label": path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
            "path": relative(path, roots),
            "fsPath": path.to_string_lossy(),
        })
    };
    let mut context = json!({});
    let active = selection.filter(|s| s.path.is_absolute());
    if let Some(sel) = active {
        let mut entry = file(&sel.path);
        let (first, last) = (sel.regions.first(), sel.regions.last());
        let (start, end) = match (first, last) {
            (Some(f), Some(l)) => ((f.start_line, f.utf16_range().0), (l.end_line, l.utf16_range().1)),
            _ => ((0, 0), (0, 0)),
        };
        let position = |(line, character): (usize, usize)| json!({ "line": line, "character": character });
        entry["selection"] = json!({ "start": position(start), "end": position(end) });
        let text = if sel.cursor_only {
            String::new()
        } else {
            sel.regions.iter().map(|r| r.content(false)).collect::<Vec<_>>().join("\n")
        };
        entry["activeSelectionContent"] = json!(crate::core::text::cut(&text, MAX_SELECTION_BYTES));
        // A blockwise selection: each row a selection of its own.
        let rows: Vec<Value> = if sel.regions.len() > 1 {
            sel.regions
                .iter()
                .map(|r| {
                    let (s, e) = r.utf16_range();
                    json!({ "start": position((r.start_line, s)), "end": position((r.end_line, e)) })
                })
                .collect()
        } else {
            Vec::new()
        };
        entry["selections"] = json!(rows);
        context["activeFile"] = entry;
    }
    let mut tabs: Vec<&Path> = Vec::new();
    for path in active.map(|s| s.path.as_path()).into_iter().chain(visible.iter().map(PathBuf::as_path)) {
        if path.is_absolute() && !tabs.contains(&path) && tabs.len() < MAX_OPEN_TABS {
            tabs.push(path);
        }
    }
    context["openTabs"] = json!(tabs.into_iter().map(file).collect::<Vec<_>>());
    json!({ "ideContext": context })
}

/// `path` relative to the first root that holds it, else as it is.
fn relative(path: &Path, roots: &[&Path]) -> String {
    roots
        .iter()
        .find_map(|root| path.strip_prefix(root).ok().filter(|rel| !rel.as_os_str().is_empty()))
        .unwrap_or(path)
        .to_string_lossy()
        .into_owned()
}

/// The header frame of our hook: what Codex's `PreToolUse` gave it, the
/// patch aside (it comes in the next frame).
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct HookHeader {
    /// Codex's working directory: the patch's paths are relative to it.
    pub cwd: PathBuf,
    #[serde(default)]
    pub session_id: Option<String>,
    #[serde(default)]
    pub tool_name: Option<String>,
}

/// What the hook tells Codex.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HookAnswer {
    /// Every file accepted as proposed: Codex applies its own patch.
    Apply,
    /// Accepted with the user's changes: Codex applies this patch instead.
    Rewrite(String),
    /// Not applied, for this one-line reason (the model is told).
    Deny(String),
}

impl HookAnswer {
    pub fn to_frame(&self) -> Vec<u8> {
        match self {
            HookAnswer::Apply => json!({ "decision": "apply" }),
            HookAnswer::Rewrite(patch) => json!({ "decision": "rewrite", "patch": patch }),
            HookAnswer::Deny(reason) => json!({ "decision": "deny", "reason": one_line(reason) }),
        }
        .to_string()
        .into_bytes()
    }
}

/// `reason` on one line (Codex shows it in its transcript).
pub fn one_line(reason: &str) -> String {
    let flat: String = reason.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    crate::core::text::cut(flat.trim(), 1000).to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::selection::RawRegion;

    #[test]
    fn requests_and_answers() {
        let req = br#"{"type":"request","requestId":"r1","sourceClientId":"codex-tui","version":0,"method":"ide-context","params":{"workspaceRoot":"/w"}}"#;
        let Incoming::Request { id, method, params } = decode(req).unwrap() else { panic!() };
        assert_eq!((id.clone(), method.as_str()), (json!("r1"), "ide-context"));
        assert_eq!(workspace_root(&params), Some(PathBuf::from("/w")));
        assert_eq!(workspace_root(&json!({"workspaceRoot": "rel"})), None);
        let answer: Value = serde_json::from_slice(&success(&id, json!({"x": 1}))).unwrap();
        assert_eq!(answer, json!({"type": "response", "requestId": "r1", "resultType": "success", "result": {"x": 1}}));
        let answer: Value = serde_json::from_slice(&failure(&id, "no-handler-for-request")).unwrap();
        assert_eq!(answer["resultType"], "error");
        assert_eq!(decode(br#"{"type":"broadcast","method":"x"}"#).unwrap(), Incoming::Other);
        assert_eq!(decode(b"{}").unwrap_err().to_string(), "a message without a type");
        assert!(decode(b"nope").unwrap_err().to_string().starts_with("not JSON: expected"));
        assert_eq!(decode(br#"{"type":"request"}"#).unwrap_err().to_string(), "a request without a method");
        assert_eq!(initialized(7), json!({"clientId": "neovim-7"}));
    }

    #[test]
    fn the_visual_selection_in_utf16_with_workspace_relative_paths() {
        let sel = RawSelection {
            path: "/w/src/é.rs".into(),
            cursor_only: false,
            regions: vec![RawRegion::of(1, 1, 2, 5, &["a😀bc", "hello"])],
        };
        let visible = vec![PathBuf::from("/w/src/é.rs"), PathBuf::from("/elsewhere/b.txt"), PathBuf::from("rel")];
        let got = ide_context(Some(&sel), &visible, &[Path::new("/w")]);
        assert_eq!(
            got,
            json!({"ideContext": {
                "activeFile": {
                    "label": "é.rs", "path": "src/é.rs", "fsPath": "/w/src/é.rs",
                    "selection": {"start": {"line": 1, "character": 1}, "end": {"line": 2, "character": 5}},
                    "activeSelectionContent": "😀bc\nhello",
                    "selections": [],
                },
                "openTabs": [
                    {"label": "é.rs", "path": "src/é.rs", "fsPath": "/w/src/é.rs"},
                    {"label": "b.txt", "path": "/elsewhere/b.txt", "fsPath": "/elsewhere/b.txt"},
                ],
            }})
        );
    }

    #[test]
    fn a_cursor_a_block_and_nothing() {
        let cursor = RawSelection::cursor("/w/a.txt".into(), 3, 4, b"abcdef".to_vec());
        let got = ide_context(Some(&cursor), &[], &[Path::new("/x"), Path::new("/w")]);
        let active = &got["ideContext"]["activeFile"];
        assert_eq!(
            active["selection"],
            json!({"start": {"line": 3, "character": 4}, "end": {"line": 3, "character": 4}})
        );
        assert_eq!((active["activeSelectionContent"].as_str(), active["path"].as_str()), (Some(""), Some("a.txt")));
        let block = RawSelection {
            path: "/w/a.txt".into(),
            cursor_only: false,
            regions: vec![RawRegion::of(0, 1, 0, 3, &["abcd"]), RawRegion::of(1, 1, 1, 3, &["efgh"])],
        };
        let got = ide_context(Some(&block), &[], &[Path::new("/w")]);
        assert_eq!(got["ideContext"]["activeFile"]["activeSelectionContent"], "bc\nfg");
        assert_eq!(got["ideContext"]["activeFile"]["selections"].as_array().unwrap().len(), 2);
        assert_eq!(ide_context(None, &[], &[]), json!({"ideContext": {"openTabs": []}}));
        // Open tabs: at the limit all are listed; one past, the last is left out.
        let tabs = |n: usize| {
            let many: Vec<PathBuf> = (0..n).map(|i| PathBuf::from(format!("/w/{i}"))).collect();
            ide_context(None, &many, &[])["ideContext"]["openTabs"].as_array().unwrap().len()
        };
        assert_eq!(tabs(MAX_OPEN_TABS), MAX_OPEN_TABS);
        assert_eq!(tabs(MAX_OPEN_TABS + 1), MAX_OPEN_TABS);
        // Selected text: at the limit whole; one byte past, cut (on a
        // character boundary: "é" is two bytes).
        let selected = |text: &str| {
            let sel = RawSelection {
                path: "/w/a.txt".into(),
                cursor_only: false,
                regions: vec![RawRegion::of(0, 0, 0, text.len(), &[text])],
            };
            let got = ide_context(Some(&sel), &[], &[]);
            got["ideContext"]["activeFile"]["activeSelectionContent"].as_str().unwrap().to_owned()
        };
        let at = "é".repeat(MAX_SELECTION_BYTES / 2);
        assert_eq!(selected(&at), at);
        let past = format!("{at}x");
        assert_eq!(selected(&past).len(), MAX_SELECTION_BYTES);
        let past = format!("x{at}");
        assert_eq!(selected(&past), format!("x{}", "é".repeat(MAX_SELECTION_BYTES / 2 - 1)));
    }

    #[test]
    fn hook_answers() {
        let frame = |a: &HookAnswer| serde_json::from_slice::<Value>(&a.to_frame()).unwrap();
        assert_eq!(frame(&HookAnswer::Apply), json!({"decision": "apply"}));
        assert_eq!(frame(&HookAnswer::Rewrite("p".into())), json!({"decision": "rewrite", "patch": "p"}));
        assert_eq!(frame(&HookAnswer::Deny("a\nb\u{1b}".into())), json!({"decision": "deny", "reason": "a b"}));
        let header: HookHeader = serde_json::from_str(r#"{"cwd": "/w", "session_id": "s", "x": 1}"#).unwrap();
        assert_eq!(header.cwd, PathBuf::from("/w"));
    }
}
