//! One MCP request of a Claude Code client, answered: `initialize`,
//! `tools/list`, `tools/call`. Plain Rust: what needs the editor goes
//! through [`EditorSide`] (Neovim's is `editor_side::Nvim`; tests use a fake).

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;

use serde_json::{json, Map, Value};

use super::protocol::{self, severity_name};
use crate::amp::context::RawSelection;
use crate::core::review::Decision;
use crate::core::uri::{file_uri_to_path, path_to_file_uri};
use crate::mcp;

pub type EditorFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, String>> + Send + 'a>>;

/// One diagnostic in Claude's units: 0-based lines, UTF-16 characters.
#[derive(Debug, Clone, PartialEq)]
pub struct Diagnostic {
    pub path: PathBuf,
    pub start: (usize, usize),
    pub end: (usize, usize),
    pub severity: u8,
    pub message: String,
    pub source: Option<String>,
}

/// A file buffer as `getOpenEditors` lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct OpenEditor {
    pub path: PathBuf,
    pub active: bool,
    pub dirty: bool,
    pub filetype: String,
}

/// `openFile`'s selection: from the first `start_text` to the first
/// `end_text` after it (to the end of `start_text` without one).
#[derive(Debug, Clone, PartialEq)]
pub struct TextToSelect {
    pub start_text: String,
    pub end_text: Option<String>,
    pub to_end_of_line: bool,
}

/// What the Claude front-end needs from the editor (its Neovim side is
/// `editor_side.rs`, the only part of `claude/` that touches Neovim).
pub trait EditorSide: Send + Sync {
    /// Diagnostics of every buffer, or of the buffers of `path`.
    fn diagnostics(&self, path: Option<PathBuf>) -> EditorFuture<'_, Vec<Diagnostic>>;
    fn open_editors(&self) -> EditorFuture<'_, Vec<OpenEditor>>;
    /// `None` when no buffer has the file.
    fn dirty(&self, path: PathBuf) -> EditorFuture<'_, Option<bool>>;
    /// Writes the buffer of `path`; `None` when no buffer has the file.
    fn save(&self, path: PathBuf) -> EditorFuture<'_, Option<()>>;
    /// Shows `path`; with `select`, selects that text in it.
    fn open(&self, path: PathBuf, select: Option<TextToSelect>) -> EditorFuture<'_, ()>;
    /// Shows the review `tab_name` of `contents` against `path` and waits
    /// (without blocking anything) until the user decides.
    fn open_diff(&self, tab_name: String, path: PathBuf, contents: String) -> EditorFuture<'_, Decision>;
    /// Closes the review `tab_name`; whether there was one.
    fn close_diff(&self, tab_name: String) -> EditorFuture<'_, bool>;
    /// Closes every review; how many there were.
    fn close_all_diffs(&self) -> EditorFuture<'_, usize>;
}

/// What a request needs besides the editor.
pub struct Context<'a> {
    pub editor: &'a dyn EditorSide,
    pub workspace_folders: Vec<String>,
    pub current_selection: Option<RawSelection>,
    pub latest_selection: Option<RawSelection>,
}

/// Answers one request: `Ok(result)` or `Err((code, message))`.
pub async fn answer(method: &str, params: &Value, cx: &Context<'_>) -> Result<Value, (i64, String)> {
    match method {
        "initialize" => Ok(mcp::initialize_result(params, "amp.nvim", env!("CARGO_PKG_VERSION"))),
        "ping" => Ok(json!({})),
        "tools/list" => Ok(protocol::tools()),
        "tools/call" => {
            let (name, args) = mcp::tool_call(params).map_err(|e| (mcp::INVALID_PARAMS, e))?;
            call(&name, &args, cx).await
        }
        // Listing nothing is better than an error for clients that ask.
        "resources/list" => Ok(json!({ "resources": [] })),
        "prompts/list" => Ok(json!({ "prompts": [] })),
        other => Err((mcp::METHOD_NOT_FOUND, format!("method not found: {other}"))),
    }
}

fn text(value: &Value) -> Value {
    mcp::text_content(&[&value.to_string()], false)
}

fn plain(message: &str) -> Value {
    mcp::text_content(&[message], false)
}

fn string_arg(args: &Map<String, Value>, name: &str) -> Result<String, (i64, String)> {
    match args.get(name) {
        Some(Value::String(s)) if !s.is_empty() => Ok(s.clone()),
        _ => Err((mcp::INVALID_PARAMS, format!("{name} must be a non-empty string"))),
    }
}

/// A path argument made absolute against the first workspace folder.
fn path_arg(args: &Map<String, Value>, name: &str, cx: &Context<'_>) -> Result<PathBuf, (i64, String)> {
    let raw = string_arg(args, name)?;
    let path = if raw.starts_with("file://") {
        file_uri_to_path(&raw).map_err(|e| (mcp::INVALID_PARAMS, format!("{name}: {e}")))?
    } else {
        PathBuf::from(&raw)
    };
    Ok(if path.is_absolute() {
        path
    } else {
        Path::new(cx.workspace_folders.first().map(String::as_str).unwrap_or("/")).join(path)
    })
}

async fn call(name: &str, args: &Map<String, Value>, cx: &Context<'_>) -> Result<Value, (i64, String)> {
    let editor_error = |e: String| (mcp::INTERNAL_ERROR, e);
    match name {
        "getCurrentSelection" => {
            Ok(text(&protocol::selection_answer(cx.current_selection.as_ref(), "No active editor found")))
        }
        "getLatestSelection" => {
            let latest = cx.latest_selection.as_ref().or(cx.current_selection.as_ref());
            Ok(text(&protocol::selection_answer(latest, "No selection available")))
        }
        "getWorkspaceFolders" => Ok(text(&protocol::workspace_folders(&cx.workspace_folders))),
        "getOpenEditors" => {
            let tabs: Vec<Value> = cx
                .editor
                .open_editors()
                .await
                .map_err(editor_error)?
                .into_iter()
                .map(|e| {
                    let label = e.path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
                    json!({
                        "uri": path_to_file_uri(&e.path),
                        "isActive": e.active,
                        "label": label,
                        "languageId": e.filetype,
                        "isDirty": e.dirty,
                    })
                })
                .collect();
            Ok(text(&json!({ "tabs": tabs })))
        }
        "getDiagnostics" => {
            let path = match args.get("uri") {
                Some(Value::String(s)) if !s.is_empty() => Some(path_arg(args, "uri", cx)?),
                _ => None,
            };
            let found = cx.editor.diagnostics(path).await.map_err(editor_error)?;
            let mut files: Vec<(PathBuf, Vec<Value>)> = Vec::new();
            for d in found {
                let item = json!({
                    "message": d.message,
                    "severity": severity_name(d.severity),
                    "range": {
                        "start": { "line": d.start.0, "character": d.start.1 },
                        "end": { "line": d.end.0, "character": d.end.1 },
                    },
                    "source": d.source,
                });
                match files.iter_mut().find(|(p, _)| *p == d.path) {
                    Some((_, list)) => list.push(item),
                    None => files.push((d.path, vec![item])),
                }
            }
            let list: Vec<Value> = files
                .into_iter()
                .map(|(path, diagnostics)| json!({ "uri": path_to_file_uri(&path), "diagnostics": diagnostics }))
                .collect();
            Ok(text(&Value::Array(list)))
        }
        "checkDocumentDirty" => {
            let path = path_arg(args, "filePath", cx)?;
            let shown = path.to_string_lossy().into_owned();
            Ok(text(&match cx.editor.dirty(path).await.map_err(editor_error)? {
                Some(dirty) => json!({ "success": true, "filePath": shown, "isDirty": dirty, "isUntitled": false }),
                None => json!({ "success": false, "message": format!("Document not open: {shown}") }),
            }))
        }
        "saveDocument" => {
            let path = path_arg(args, "filePath", cx)?;
            let shown = path.to_string_lossy().into_owned();
            Ok(text(&match cx.editor.save(path).await {
                Ok(Some(())) => {
                    json!({ "success": true, "filePath": shown, "saved": true, "message": "Document saved successfully" })
                }
                Ok(None) => json!({ "success": false, "message": format!("Document not open: {shown}") }),
                Err(e) => json!({ "success": false, "filePath": shown, "saved": false, "message": e }),
            }))
        }
        "openFile" => {
            let path = path_arg(args, "filePath", cx)?;
            let shown = path.to_string_lossy().into_owned();
            let select = match args.get("startText") {
                Some(Value::String(start)) if !start.is_empty() => Some(TextToSelect {
                    start_text: start.clone(),
                    end_text: args.get("endText").and_then(Value::as_str).filter(|e| !e.is_empty()).map(str::to_owned),
                    to_end_of_line: args.get("selectToEndOfLine").and_then(Value::as_bool).unwrap_or(false),
                }),
                _ => None,
            };
            cx.editor.open(path, select).await.map_err(editor_error)?;
            Ok(plain(&format!("Opened file: {shown}")))
        }
        "openDiff" => {
            // new_file_path is the file Claude will write (the same as
            // old_file_path when editing); the review compares against it.
            let path = path_arg(args, "new_file_path", cx).or_else(|_| path_arg(args, "old_file_path", cx))?;
            let contents = match args.get("new_file_contents") {
                Some(Value::String(s)) => s.clone(),
                _ => return Err((mcp::INVALID_PARAMS, "new_file_contents must be a string".into())),
            };
            let tab_name = string_arg(args, "tab_name")?;
            // FILE_SAVED carries the final text: Claude writes the file
            // itself. TAB_CLOSED would mean "accept unchanged" to Claude, so
            // a rejection is always DIFF_REJECTED.
            Ok(match cx.editor.open_diff(tab_name.clone(), path, contents).await.map_err(editor_error)? {
                Decision::Accepted(text) => mcp::text_content(&["FILE_SAVED", &text], false),
                Decision::Rejected => mcp::text_content(&["DIFF_REJECTED", &tab_name], false),
            })
        }
        "close_tab" => {
            let tab_name = string_arg(args, "tab_name")?;
            cx.editor.close_diff(tab_name).await.map_err(editor_error)?;
            Ok(plain("TAB_CLOSED"))
        }
        "closeAllDiffTabs" => {
            let n = cx.editor.close_all_diffs().await.map_err(editor_error)?;
            Ok(plain(&format!("CLOSED_{n}_DIFF_TABS")))
        }
        other => Err((mcp::METHOD_NOT_FOUND, format!("unknown tool: {other}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[derive(Default)]
    struct Fake {
        saved: Mutex<Vec<PathBuf>>,
        opened: Mutex<Vec<PathBuf>>,
    }

    impl EditorSide for Fake {
        fn diagnostics(&self, path: Option<PathBuf>) -> EditorFuture<'_, Vec<Diagnostic>> {
            Box::pin(async move {
                let all = vec![
                    Diagnostic {
                        path: "/w/a.rs".into(),
                        start: (0, 1),
                        end: (0, 3),
                        severity: 1,
                        message: "bad".into(),
                        source: Some("rustc".into()),
                    },
                    Diagnostic {
                        path: "/w/b.rs".into(),
                        start: (2, 0),
                        end: (2, 1),
                        severity: 2,
                        message: "meh".into(),
                        source: None,
                    },
                    Diagnostic {
                        path: "/w/a.rs".into(),
                        start: (4, 0),
                        end: (5, 0),
                        severity: 4,
                        message: "hint".into(),
                        source: None,
                    },
                ];
                Ok(all.into_iter().filter(|d| path.as_ref().is_none_or(|p| *p == d.path)).collect())
            })
        }
        fn open_editors(&self) -> EditorFuture<'_, Vec<OpenEditor>> {
            Box::pin(async {
                Ok(vec![OpenEditor { path: "/w/a.rs".into(), active: true, dirty: true, filetype: "rust".into() }])
            })
        }
        fn dirty(&self, path: PathBuf) -> EditorFuture<'_, Option<bool>> {
            Box::pin(async move { Ok((path == Path::new("/w/a.rs")).then_some(true)) })
        }
        fn save(&self, path: PathBuf) -> EditorFuture<'_, Option<()>> {
            Box::pin(async move {
                if path != Path::new("/w/a.rs") {
                    return Ok(None);
                }
                self.saved.lock().unwrap().push(path);
                Ok(Some(()))
            })
        }
        fn open(&self, path: PathBuf, _select: Option<TextToSelect>) -> EditorFuture<'_, ()> {
            Box::pin(async move {
                self.opened.lock().unwrap().push(path);
                Ok(())
            })
        }
        fn open_diff(&self, tab_name: String, _path: PathBuf, contents: String) -> EditorFuture<'_, Decision> {
            Box::pin(async move {
                Ok(if tab_name == "accept" { Decision::Accepted(contents + "edited\n") } else { Decision::Rejected })
            })
        }
        fn close_diff(&self, tab_name: String) -> EditorFuture<'_, bool> {
            Box::pin(async move { Ok(tab_name == "open") })
        }
        fn close_all_diffs(&self) -> EditorFuture<'_, usize> {
            Box::pin(async { Ok(2) })
        }
    }

    #[test]
    fn open_diff_answers_file_saved_with_the_final_text_or_diff_rejected() {
        let fake = Fake::default();
        block_on(async {
            let c = cx(&fake);
            let call = |tab: &str| {
                json!({"name": "openDiff", "arguments": {
                "old_file_path": "/w/a.rs", "new_file_path": "/w/a.rs", "new_file_contents": "x\n", "tab_name": tab}})
            };
            let saved = answer("tools/call", &call("accept"), &c).await.unwrap();
            assert_eq!(
                saved,
                json!({"content": [{"type": "text", "text": "FILE_SAVED"}, {"type": "text", "text": "x\nedited\n"}]})
            );
            let rejected = answer("tools/call", &call("no"), &c).await.unwrap();
            assert_eq!(rejected["content"][0]["text"], "DIFF_REJECTED");
            assert_ne!(rejected["content"][0]["text"], "TAB_CLOSED");
            assert_eq!(tool(&c, "close_tab", json!({"tab_name": "open"})).await, "TAB_CLOSED");
            assert_eq!(tool(&c, "closeAllDiffTabs", json!({})).await, "CLOSED_2_DIFF_TABS");
            let bad = json!({"name": "openDiff", "arguments": {"new_file_path": "/w/a.rs", "tab_name": "t"}});
            assert_eq!(answer("tools/call", &bad, &c).await.unwrap_err().0, mcp::INVALID_PARAMS);
        });
    }

    fn cx(editor: &Fake) -> Context<'_> {
        Context { editor, workspace_folders: vec!["/w".into()], current_selection: None, latest_selection: None }
    }

    async fn tool(cx: &Context<'_>, name: &str, args: Value) -> Value {
        let result = answer("tools/call", &json!({ "name": name, "arguments": args }), cx).await.unwrap();
        let text = result["content"][0]["text"].as_str().unwrap().to_owned();
        serde_json::from_str(&text).unwrap_or(Value::String(text))
    }

    fn block_on<F: Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(f)
    }

    #[test]
    fn initialize_and_list() {
        let fake = Fake::default();
        block_on(async {
            let init = answer("initialize", &json!({"protocolVersion": "2025-11-25"}), &cx(&fake)).await.unwrap();
            assert_eq!(init["protocolVersion"], "2025-11-25");
            let list = answer("tools/list", &Value::Null, &cx(&fake)).await.unwrap();
            assert!(list["tools"].as_array().unwrap().len() >= 10);
            assert_eq!(answer("nope", &Value::Null, &cx(&fake)).await.unwrap_err().0, mcp::METHOD_NOT_FOUND);
            let bad = answer("tools/call", &json!({"name": "nope"}), &cx(&fake)).await.unwrap_err();
            assert_eq!(bad.0, mcp::METHOD_NOT_FOUND);
        });
    }

    #[test]
    fn diagnostics_grouped_per_file_in_claude_units() {
        let fake = Fake::default();
        block_on(async {
            let all = tool(&cx(&fake), "getDiagnostics", json!({})).await;
            assert_eq!(all.as_array().unwrap().len(), 2);
            assert_eq!(all[0]["uri"], "file:///w/a.rs");
            assert_eq!(
                all[0]["diagnostics"][0],
                json!({
                    "message": "bad", "severity": "Error", "source": "rustc",
                    "range": {"start": {"line": 0, "character": 1}, "end": {"line": 0, "character": 3}},
                })
            );
            assert_eq!(all[0]["diagnostics"][1]["severity"], "Hint");
            let one = tool(&cx(&fake), "getDiagnostics", json!({"uri": "file:///w/b.rs"})).await;
            assert_eq!(one.as_array().unwrap().len(), 1);
            assert_eq!(one[0]["diagnostics"][0]["severity"], "Warning");
        });
    }

    #[test]
    fn documents_selection_and_folders() {
        let fake = Fake::default();
        block_on(async {
            let c = cx(&fake);
            assert_eq!(tool(&c, "checkDocumentDirty", json!({"filePath": "/w/a.rs"})).await["isDirty"], true);
            assert_eq!(tool(&c, "checkDocumentDirty", json!({"filePath": "/w/x.rs"})).await["success"], false);
            assert_eq!(tool(&c, "saveDocument", json!({"filePath": "a.rs"})).await["saved"], true);
            assert_eq!(*fake.saved.lock().unwrap(), vec![PathBuf::from("/w/a.rs")]);
            assert_eq!(tool(&c, "openFile", json!({"filePath": "/w/b.rs"})).await, "Opened file: /w/b.rs");
            assert_eq!(tool(&c, "getOpenEditors", json!({})).await["tabs"][0]["label"], "a.rs");
            assert_eq!(tool(&c, "getWorkspaceFolders", json!({})).await["folders"][0]["path"], "/w");
            assert_eq!(tool(&c, "getCurrentSelection", json!({})).await["success"], false);
            let missing = answer("tools/call", &json!({"name": "openFile", "arguments": {}}), &c).await.unwrap_err();
            assert_eq!(missing.0, mcp::INVALID_PARAMS);
            let sel = RawSelection::cursor("/w/a.rs".into(), 1, 0, b"x".to_vec());
            let c = Context { latest_selection: None, current_selection: Some(sel), ..cx(&fake) };
            assert_eq!(tool(&c, "getLatestSelection", json!({})).await["filePath"], "/w/a.rs");
        });
    }
}
