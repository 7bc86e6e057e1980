//! One MCP request of a Claude Code client, answered: `initialize`,
//! `tools/list`, `tools/call`. Plain Rust: what needs the editor goes
//! through the core's [`Editor`] (Neovim's is `nvim::editor::Neovim`; the
//! tests use `core::fake_editor`), the same one the Amp protocol uses.

use serde_json::{json, Map, Value};

use super::protocol;
use crate::core::checked_file::{self, Use, Wanted};
use crate::core::editor::{Editor, TextToSelect};
use crate::core::review::{Decision, Owner, Proposal, ReviewEnd};
use crate::core::selection::RawSelection;
use crate::core::uri::path_to_file_uri;
use crate::mcp::{self, RequestError};

/// What a request needs besides the editor.
pub struct Context<'a> {
    pub editor: &'a dyn Editor,
    /// The connection asking: its reviews are its own.
    pub owner: Owner,
    pub workspace_folders: Vec<String>,
    pub current_selection: Option<RawSelection>,
    pub latest_selection: Option<RawSelection>,
    /// `edits.max_file_bytes`: the largest file `openFile` opens.
    pub max_file_bytes: u64,
}

/// Answers one request: its result, or why not (its code follows).
pub async fn answer(method: &str, params: &Value, cx: &Context<'_>) -> Result<Value, RequestError> {
    if let Some(answer) = mcp::standard_answer(method, params, protocol::tools) {
        return answer;
    }
    let (name, args) = mcp::tool_call(params)?;
    call(&name, &args, cx).await
}

fn text(value: &Value) -> Value {
    mcp::text_content(&[&value.to_string()], false)
}

fn plain(message: &str) -> Value {
    mcp::text_content(&[message], false)
}

async fn call(name: &str, args: &Map<String, Value>, cx: &Context<'_>) -> Result<Value, RequestError> {
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
                .open_buffers()
                .await?
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
                Some(Value::String(s)) if !s.is_empty() => Some(mcp::path_arg(args, "uri", &cx.workspace_folders)?),
                _ => None,
            };
            let found = cx.editor.diagnostics(path.map(|p| vec![p])).await?;
            Ok(text(&crate::serve::vscode::diagnostics(found)))
        }
        "checkDocumentDirty" => {
            let path = mcp::path_arg(args, "filePath", &cx.workspace_folders)?;
            let shown = path.to_string_lossy().into_owned();
            Ok(text(&match cx.editor.buffer_modified(path).await? {
                Some(dirty) => json!({ "success": true, "filePath": shown, "isDirty": dirty, "isUntitled": false }),
                None => json!({ "success": false, "message": format!("Document not open: {shown}") }),
            }))
        }
        "saveDocument" => {
            let path = mcp::path_arg(args, "filePath", &cx.workspace_folders)?;
            let shown = path.to_string_lossy().into_owned();
            Ok(text(&match cx.editor.save_buffer(path).await {
                Ok(Some(())) => {
                    json!({ "success": true, "filePath": shown, "saved": true, "message": "Document saved successfully" })
                }
                Ok(None) => json!({ "success": false, "message": format!("Document not open: {shown}") }),
                Err(e) => {
                    let why = e.refusal()?;
                    json!({ "success": false, "filePath": shown, "saved": false, "message": why })
                }
            }))
        }
        "openFile" => {
            let path = mcp::path_arg(args, "filePath", &cx.workspace_folders)?;
            let shown = path.to_string_lossy().into_owned();
            let select = match args.get("startText") {
                Some(Value::String(start)) if !start.is_empty() => Some(TextToSelect {
                    start_text: start.clone(),
                    end_text: args.get("endText").and_then(Value::as_str).filter(|e| !e.is_empty()).map(str::to_owned),
                    to_end_of_line: args.get("selectToEndOfLine").and_then(Value::as_bool).unwrap_or(false),
                }),
                _ => None,
            };
            // Checked off the main thread as Amp's openURI is
            // (`checked_file`): a FIFO, a device or a procfs file would block
            // or flood the editor.
            let wanted = Wanted { directory_ok: true, read_through: true };
            let checked =
                checked_file::check(&path, cx.max_file_bytes, wanted).await.map_err(|why| why.of(&path, Use::Open))?;
            cx.editor.open_file(checked, None).await?;
            if let Some(select) = select {
                // Not found: the file is shown, nothing is selected.
                let _found = cx.editor.select_text(select).await?;
            }
            Ok(plain(&format!("Opened file: {shown}")))
        }
        "openDiff" => {
            // new_file_path is the file Claude will write (the same as
            // old_file_path when editing); the review compares against it.
            let path = mcp::path_arg(args, "new_file_path", &cx.workspace_folders)
                .or_else(|_| mcp::path_arg(args, "old_file_path", &cx.workspace_folders))?;
            let contents = mcp::text_arg(args, "new_file_contents")?;
            let tab_name = mcp::string_arg(args, "tab_name")?;
            // FILE_SAVED carries the final text: Claude writes the file
            // itself. TAB_CLOSED would mean "accept unchanged" to Claude, so
            // a rejection is always DIFF_REJECTED.
            let proposal = Proposal {
                name: tab_name.clone(),
                path,
                original: None,
                proposed: contents,
                owner: cx.owner,
                edits_kept: true,
            };
            Ok(match cx.editor.propose(proposal).await? {
                Decision::Accepted(text) => mcp::text_content(&["FILE_SAVED", &text], false),
                Decision::Rejected => mcp::text_content(&["DIFF_REJECTED", &tab_name], false),
            })
        }
        "close_tab" => {
            let tab_name = mcp::string_arg(args, "tab_name")?;
            cx.editor.close_review(cx.owner, tab_name, ReviewEnd::Agent).await?;
            Ok(plain("TAB_CLOSED"))
        }
        "closeAllDiffTabs" => {
            // This connection's reviews only, never another agent's.
            let n = cx.editor.close_reviews(cx.owner, ReviewEnd::Agent).await?;
            Ok(plain(&format!("CLOSED_{n}_DIFF_TABS")))
        }
        other => Err(RequestError::NoTool(other.to_owned())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::editor::RawDiagnostic;
    use crate::core::fake_editor::{unix_format, Call, FakeEditor};
    use std::future::Future;
    use std::path::Path;

    /// `/w/a.rs` (modified, current) and `/w/b.rs` loaded; three diagnostics.
    fn fake() -> FakeEditor {
        let fake = FakeEditor::new(false);
        fake.open(Path::new("/w/a.rs"), &["fn é() {}"], true, unix_format());
        fake.open(Path::new("/w/b.rs"), &["x"], false, unix_format());
        let raw =
            |path: &str, (lnum, col): (usize, usize), end_col: usize, severity: u8, message: &str| RawDiagnostic {
                path: path.into(),
                lnum,
                col,
                end_lnum: lnum,
                end_col,
                severity,
                message: message.into(),
                source: (severity == 1).then(|| "rustc".into()),
                line: "fn é() {}".into(),
                end_line: "fn é() {}".into(),
                line_offset: 0,
                end_line_offset: 0,
            };
        fake.set_diagnostics(vec![
            // Byte column 5 is after "fn é": UTF-16 character 4.
            raw("/w/a.rs", (0, 3), 5, 1, "bad"),
            raw("/w/b.rs", (2, 0), 1, 2, "meh"),
            raw("/w/a.rs", (4, 0), 0, 4, "hint"),
        ]);
        fake
    }

    #[test]
    fn open_diff_answers_file_saved_with_the_final_text_or_diff_rejected() {
        let fake = fake();
        fake.decide(vec![Decision::Accepted("x\nedited\n".into()), Decision::Rejected]);
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
            assert!(fake.calls().contains(&Call::Propose("accept".into(), "x\n".into())));
            assert_eq!(tool(&c, "close_tab", json!({"tab_name": "open"})).await, "TAB_CLOSED");
            assert!(fake.calls().contains(&Call::CloseReview("open".into(), ReviewEnd::Agent)));
            assert_eq!(tool(&c, "closeAllDiffTabs", json!({})).await, "CLOSED_0_DIFF_TABS");
            let bad = json!({"name": "openDiff", "arguments": {"new_file_path": "/w/a.rs", "tab_name": "t"}});
            assert_eq!(answer("tools/call", &bad, &c).await.unwrap_err().code(), mcp::INVALID_PARAMS);
        });
    }

    fn cx(editor: &FakeEditor) -> Context<'_> {
        cx_of(editor, Owner::new("Claude"))
    }

    fn cx_of(editor: &FakeEditor, owner: Owner) -> Context<'_> {
        Context {
            editor,
            owner,
            workspace_folders: vec!["/w".into()],
            current_selection: None,
            latest_selection: None,
            max_file_bytes: checked_file::DEFAULT_MAX_FILE_BYTES,
        }
    }

    async fn tool(cx: &Context<'_>, name: &str, args: Value) -> Value {
        let result = answer("tools/call", &json!({ "name": name, "arguments": args }), cx).await.unwrap();
        let text = result["content"][0]["text"].as_str().unwrap().to_owned();
        serde_json::from_str(&text).unwrap_or(Value::String(text))
    }

    fn block_on<F: Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(f)
    }

    #[test]
    fn a_connection_closes_and_replaces_only_its_own_reviews() {
        use futures_util::FutureExt;
        let fake = fake();
        fake.hold_reviews();
        let (me, other) = (Owner::new("Claude"), Owner::new("Gemini"));
        let open = |tab: &str| {
            json!({"name": "openDiff", "arguments": {
            "new_file_path": "/w/a.rs", "new_file_contents": "x\n", "tab_name": tab}})
        };
        block_on(async {
            let (mine_cx, other_cx) = (cx_of(&fake, me), cx_of(&fake, other));
            let (open_mine, open_other) = (open("mine"), open("[Gemini] /w/a.rs"));
            let mine = answer("tools/call", &open_mine, &mine_cx);
            let theirs = answer("tools/call", &open_other, &other_cx);
            tokio::pin!(mine, theirs);
            assert!((&mut mine).now_or_never().is_none() && (&mut theirs).now_or_never().is_none());
            // A tab named like the other's is a review of this connection's own.
            let open_same = open("[Gemini] /w/a.rs");
            let same = answer("tools/call", &open_same, &mine_cx);
            tokio::pin!(same);
            assert!((&mut same).now_or_never().is_none());
            assert_eq!(tool(&mine_cx, "closeAllDiffTabs", json!({})).await, "CLOSED_2_DIFF_TABS");
            assert_eq!(mine.await.unwrap()["content"][0]["text"], "DIFF_REJECTED");
            assert_eq!(same.await.unwrap()["content"][0]["text"], "DIFF_REJECTED");
            assert!((&mut theirs).now_or_never().is_none(), "the other agent's review is still open");
            assert_eq!(tool(&other_cx, "closeAllDiffTabs", json!({})).await, "CLOSED_1_DIFF_TABS");
            assert_eq!(theirs.await.unwrap()["content"][0]["text"], "DIFF_REJECTED");
        });
    }

    #[test]
    fn initialize_and_list() {
        let fake = fake();
        block_on(async {
            let init = answer("initialize", &json!({"protocolVersion": "2025-11-25"}), &cx(&fake)).await.unwrap();
            assert_eq!(init["protocolVersion"], "2025-11-25");
            let list = answer("tools/list", &Value::Null, &cx(&fake)).await.unwrap();
            assert!(list["tools"].as_array().unwrap().len() >= 10);
            assert_eq!(answer("nope", &Value::Null, &cx(&fake)).await.unwrap_err().code(), mcp::METHOD_NOT_FOUND);
            let bad = answer("tools/call", &json!({"name": "nope"}), &cx(&fake)).await.unwrap_err();
            assert_eq!((bad.code(), bad.to_string().as_str()), (mcp::METHOD_NOT_FOUND, "unknown tool: nope"));
        });
    }

    #[test]
    fn diagnostics_grouped_per_file_in_claude_units() {
        let fake = fake();
        block_on(async {
            let all = tool(&cx(&fake), "getDiagnostics", json!({})).await;
            assert_eq!(all.as_array().unwrap().len(), 2);
            assert_eq!(all[0]["uri"], "file:///w/a.rs");
            assert_eq!(
                all[0]["diagnostics"][0],
                json!({
                    "message": "bad", "severity": "Error", "source": "rustc",
                    "range": {"start": {"line": 0, "character": 3}, "end": {"line": 0, "character": 4}},
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
        let fake = fake();
        let dir = crate::testutil::TempDir::new("claude-open");
        let file = dir.0.join("c.rs");
        std::fs::write(&file, "fn main() {}\n").unwrap();
        block_on(async {
            let c = cx(&fake);
            assert_eq!(tool(&c, "checkDocumentDirty", json!({"filePath": "/w/a.rs"})).await["isDirty"], true);
            assert_eq!(tool(&c, "checkDocumentDirty", json!({"filePath": "/w/x.rs"})).await["success"], false);
            assert_eq!(tool(&c, "saveDocument", json!({"filePath": "a.rs"})).await["saved"], true);
            assert!(fake.calls().contains(&Call::SaveBuffer("/w/a.rs".into())));
            assert_eq!(tool(&c, "saveDocument", json!({"filePath": "x.rs"})).await["success"], false);
            let shown = file.display().to_string();
            let opened = json!({"filePath": shown, "startText": "main"});
            assert_eq!(tool(&c, "openFile", opened).await, format!("Opened file: {shown}"));
            assert!(fake.calls().contains(&Call::OpenFile(file.clone(), None)));
            assert!(fake.calls().iter().any(|call| matches!(call, Call::SelectText(t) if t.start_text == "main")));
            let missing = json!({"name": "openFile", "arguments": {"filePath": "/w/none.rs"}});
            assert_eq!(answer("tools/call", &missing, &c).await.unwrap_err().code(), mcp::INTERNAL_ERROR);
            assert_eq!(tool(&c, "getOpenEditors", json!({})).await["tabs"][0]["label"], "a.rs");
            assert_eq!(tool(&c, "getWorkspaceFolders", json!({})).await["folders"][0]["path"], "/w");
            assert_eq!(tool(&c, "getCurrentSelection", json!({})).await["success"], false);
            let missing = answer("tools/call", &json!({"name": "openFile", "arguments": {}}), &c).await.unwrap_err();
            assert_eq!(
                (missing.code(), missing.to_string().as_str()),
                (mcp::INVALID_PARAMS, "filePath must be a non-empty string")
            );
            let sel = RawSelection::cursor("/w/a.rs".into(), 1, 0, b"x".to_vec());
            let c = Context { latest_selection: None, current_selection: Some(sel), ..cx(&fake) };
            assert_eq!(tool(&c, "getLatestSelection", json!({})).await["filePath"], "/w/a.rs");
        });
    }
}
