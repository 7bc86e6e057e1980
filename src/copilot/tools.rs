//! One MCP request of a Copilot CLI client, answered: `initialize`,
//! `tools/list`, `tools/call` (`get_selection`, `get_diagnostics`,
//! `open_diff`, `close_diff`, `update_session_name`). Plain Rust over the
//! core's [`Editor`] (unit-tested with `core::fake_editor`).
//!
//! `open_diff` waits for the user's decision in the review view. On SAVED
//! Copilot writes its OWN proposal, whatever the answer says: the review
//! is offered as not editable (`Proposal::edits_kept` false) and says so,
//! so what the user accepts is what lands on disk.

use crate::core::sync::LockExt;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Map, Value};
use tokio::sync::Notify;

use super::protocol;
use crate::core::editor::Editor;
use crate::core::log;
use crate::core::review::{Decision, Owner, Proposal, ReviewEnd};
use crate::core::selection::RawSelection;
use crate::mcp::{self, RequestError};
use crate::serve::vscode;

/// What a request needs besides its params.
pub struct Context<'a> {
    pub editor: &'a dyn Editor,
    /// The MCP session asking: its reviews are its own.
    pub owner: Owner,
    pub workspace_folders: Vec<String>,
    pub current_selection: Option<RawSelection>,
    pub latest_selection: Option<RawSelection>,
    pub opening: &'a Opening,
}

/// How often a review that `close_diff` asked to close before it was
/// shown is looked for again (it appears within one editor round trip).
const CLOSE_RETRY: Duration = Duration::from_millis(25);

/// The `open_diff` calls being answered, by (session, tab name). Copilot's
/// edit dialog re-runs when its IDE connection is renewed (it renews it a
/// few times while starting): `close_diff` of the old tab then arrives a
/// few milliseconds after its `open_diff`, before that review is
/// registered, and finds nothing. It is remembered here, and the review is
/// closed once it is shown, instead of waiting for a user whom Copilot no
/// longer asks.
#[derive(Default)]
pub struct Opening(Mutex<HashMap<(u64, String), Arc<Notify>>>);

impl Opening {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(u64, String), Arc<Notify>>> {
        self.0.locked()
    }

    fn begin(&self, key: (u64, String)) -> Arc<Notify> {
        let notify = Arc::new(Notify::new());
        self.lock().insert(key, notify.clone());
        notify
    }

    fn end(&self, key: &(u64, String), notify: &Arc<Notify>) {
        let mut open = self.lock();
        if open.get(key).is_some_and(|n| Arc::ptr_eq(n, notify)) {
            open.remove(key);
        }
    }

    /// Asks the `open_diff` of `key` being answered to close its review;
    /// whether there is one.
    fn close(&self, key: &(u64, String)) -> bool {
        self.lock().get(key).map(|n| n.notify_one()).is_some()
    }

    pub fn count(&self) -> usize {
        self.lock().len()
    }
}

/// Whether `params` call `open_diff` (which waits for the user).
pub fn waits_for_user(method: &str, params: &Value) -> bool {
    method == "tools/call" && params.get("name").and_then(Value::as_str) == Some("open_diff")
}

/// Answers one request: its result, or why not (its code follows).
pub async fn answer(method: &str, params: &Value, cx: &Context<'_>) -> Result<Value, RequestError> {
    if let Some(answer) = mcp::standard_answer(method, params, protocol::tools) {
        return answer;
    }
    let (name, args) = mcp::tool_call(params)?;
    call(&name, &args, cx).await
}

fn text(value: &str) -> Value {
    mcp::text_content(&[value], false)
}

async fn call(name: &str, args: &Map<String, Value>, cx: &Context<'_>) -> Result<Value, RequestError> {
    match name {
        "get_selection" => {
            // The newest selection that was more than a cursor, else the cursor.
            let latest = cx.latest_selection.as_ref().or(cx.current_selection.as_ref());
            Ok(text(&match latest {
                Some(sel) => {
                    let mut v = vscode::selection(sel);
                    v["current"] = json!(cx.current_selection.as_ref() == Some(sel));
                    v.to_string()
                }
                None => "No file is open in Neovim".to_owned(),
            }))
        }
        "get_diagnostics" => {
            let path = match args.get("uri") {
                Some(Value::String(s)) if !s.is_empty() => Some(mcp::path_arg(args, "uri", &cx.workspace_folders)?),
                _ => None,
            };
            let found = cx.editor.diagnostics(path.map(|p| vec![p])).await?;
            Ok(text(&vscode::diagnostics(found).to_string()))
        }
        "open_diff" => {
            let path = mcp::path_arg(args, "original_file_path", &cx.workspace_folders)?;
            let proposed = mcp::text_arg(args, "new_file_contents")?;
            let tab_name = mcp::string_arg(args, "tab_name")?;
            let key = (cx.owner.session, tab_name.clone());
            let closed_early = cx.opening.begin(key.clone());
            let proposal =
                Proposal { name: tab_name.clone(), path, original: None, proposed, owner: cx.owner, edits_kept: false };
            let decided = {
                let propose = cx.editor.propose(proposal);
                tokio::pin!(propose);
                tokio::select! {
                    decided = &mut propose => decided,
                    () = closed_early.notified() => {
                        let close = async {
                            while let Ok(false) = cx.editor.close_review(cx.owner, tab_name.clone(), ReviewEnd::Agent).await {
                                tokio::time::sleep(CLOSE_RETRY).await;
                            }
                        };
                        tokio::select! {
                            decided = &mut propose => decided,
                            () = close => propose.await,
                        }
                    }
                }
            };
            cx.opening.end(&key, &closed_early);
            // A proposal that cannot be shown (the review limits) is an
            // error: Copilot then asks the user in its own dialog.
            let saved = match decided? {
                Decision::Accepted(_) => true,
                Decision::Rejected => false,
            };
            Ok(text(&protocol::open_diff_text(saved)))
        }
        "close_diff" => {
            let tab_name = mcp::string_arg(args, "tab_name")?;
            let mut was_open = cx.editor.close_review(cx.owner, tab_name.clone(), ReviewEnd::Agent).await?;
            if !was_open {
                // Its open_diff may not have shown it yet: it closes it then.
                was_open = cx.opening.close(&(cx.owner.session, tab_name.clone()));
            }
            Ok(text(&protocol::close_diff_text(&tab_name, was_open)))
        }
        "update_session_name" => {
            let name = args.get("name").and_then(Value::as_str).unwrap_or_default();
            log::info(format!("copilot: session {} is named {}", cx.owner.session, log::untrusted(name)));
            Ok(text(&json!({ "success": true }).to_string()))
        }
        other => Err(RequestError::NoTool(other.to_owned())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::fake_editor::{unix_format, Call, FakeEditor};
    use std::future::Future;
    use std::path::Path;

    fn cx<'a>(editor: &'a FakeEditor, opening: &'a Opening) -> Context<'a> {
        Context {
            editor,
            owner: Owner::new("Copilot"),
            workspace_folders: vec!["/w".into()],
            current_selection: None,
            latest_selection: None,
            opening,
        }
    }

    fn block_on<F: Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(f)
    }

    async fn tool(cx: &Context<'_>, name: &str, args: Value) -> Value {
        let result = answer("tools/call", &json!({ "name": name, "arguments": args }), cx).await.unwrap();
        let text = result["content"][0]["text"].as_str().unwrap().to_owned();
        serde_json::from_str(&text).unwrap_or(Value::String(text))
    }

    fn diff(tab: &str) -> Value {
        json!({"original_file_path": "/w/a.rs", "new_file_contents": "x\n", "tab_name": tab})
    }

    #[test]
    fn open_diff_answers_saved_or_rejected_and_never_writes() {
        let fake = FakeEditor::new(false);
        fake.decide(vec![Decision::Accepted("x\n".into()), Decision::Rejected]);
        block_on(async {
            let opening = Opening::default();
            let c = cx(&fake, &opening);
            let saved = tool(&c, "open_diff", diff("[Copilot CLI] - a.rs (1)")).await;
            assert_eq!((saved["success"].as_bool(), saved["result"].as_str()), (Some(true), Some("SAVED")));
            let rejected = tool(&c, "open_diff", diff("two")).await;
            assert_eq!(rejected["result"], "REJECTED");
            assert!(fake.calls().contains(&Call::Propose("[Copilot CLI] - a.rs (1)".into(), "x\n".into())));
            assert!(!fake
                .calls()
                .iter()
                .any(|c| matches!(c, Call::ApplySlice | Call::WriteApplied | Call::Replace | Call::MarkReloaded)));
            let bad = json!({"name": "open_diff", "arguments": {"original_file_path": "/w/a.rs", "tab_name": "t"}});
            assert_eq!(answer("tools/call", &bad, &c).await.unwrap_err().code(), mcp::INVALID_PARAMS);
            assert!(waits_for_user("tools/call", &json!({"name": "open_diff"})));
            assert!(!waits_for_user("tools/call", &json!({"name": "close_diff"})));
        });
    }

    #[test]
    fn close_diff_closes_only_this_sessions_review() {
        use futures_util::FutureExt;
        let fake = FakeEditor::new(false);
        fake.hold_reviews();
        block_on(async {
            let opening = Opening::default();
            let (mine, other) = (cx(&fake, &opening), cx(&fake, &opening));
            let args = json!({"name": "open_diff", "arguments": diff("tab")});
            let waiting = answer("tools/call", &args, &mine);
            tokio::pin!(waiting);
            assert!((&mut waiting).now_or_never().is_none(), "open_diff waits for the user");
            let elsewhere = tool(&other, "close_diff", json!({"tab_name": "tab"})).await;
            assert_eq!(elsewhere["already_closed"], true);
            assert!((&mut waiting).now_or_never().is_none(), "another session cannot close it");
            let closed = tool(&mine, "close_diff", json!({"tab_name": "tab"})).await;
            assert_eq!(
                closed,
                json!({"success": true, "already_closed": false, "tab_name": "tab",
                                      "message": "The review was closed"})
            );
            let answer = waiting.await.unwrap();
            let text: Value = serde_json::from_str(answer["content"][0]["text"].as_str().unwrap()).unwrap();
            assert_eq!(text["result"], "REJECTED");
            assert!(fake.calls().contains(&Call::CloseReview("tab".into(), ReviewEnd::Agent)));
        });
    }

    #[test]
    fn selection_diagnostics_and_the_session_name() {
        let fake = FakeEditor::new(false);
        fake.open(Path::new("/w/a.rs"), &["fn é() {}"], false, unix_format());
        block_on(async {
            let opening = Opening::default();
            assert_eq!(tool(&cx(&fake, &opening), "get_selection", json!({})).await, "No file is open in Neovim");
            let cursor = RawSelection::cursor("/w/a.rs".into(), 1, 0, b"x".to_vec());
            let range =
                RawSelection { cursor_only: false, ..RawSelection::cursor("/w/b.rs".into(), 0, 0, b"ab".to_vec()) };
            let c = Context {
                current_selection: Some(cursor.clone()),
                latest_selection: Some(range),
                ..cx(&fake, &opening)
            };
            let got = tool(&c, "get_selection", json!({})).await;
            assert_eq!((got["filePath"].as_str(), got["current"].as_bool()), (Some("/w/b.rs"), Some(false)));
            let c = Context { current_selection: Some(cursor), ..cx(&fake, &opening) };
            let got = tool(&c, "get_selection", json!({})).await;
            assert_eq!((got["filePath"].as_str(), got["current"].as_bool()), (Some("/w/a.rs"), Some(true)));
            assert_eq!(got["selection"]["isEmpty"], true);
            assert_eq!(tool(&c, "get_diagnostics", json!({})).await, json!([]));
            assert_eq!(tool(&c, "update_session_name", json!({"name": "Fix\nbugs"})).await, json!({"success": true}));
            let init = answer("initialize", &json!({"protocolVersion": "2025-11-25"}), &c).await.unwrap();
            assert_eq!(init["protocolVersion"], "2025-11-25");
            assert_eq!(answer("tools/list", &Value::Null, &c).await.unwrap()["tools"].as_array().unwrap().len(), 5);
            let unknown = answer("tools/call", &json!({"name": "openDiff"}), &c).await.unwrap_err();
            assert_eq!(unknown.code(), mcp::METHOD_NOT_FOUND);
        });
    }
}
