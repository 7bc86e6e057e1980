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
use std::time::{Duration, Instant};

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
///
/// A `close_diff` can even be read before its `open_diff` (each request is
/// an HTTP request of its own, maybe on another connection): a close that
/// finds neither a review nor an `open_diff` is kept for [`CLOSED_KEPT`]
/// (at most [`MAX_CLOSED`] of them), and an `open_diff` of that tab in the
/// same session within that time is answered REJECTED at once, without
/// showing a review nobody will decide.
#[derive(Default)]
pub struct Opening(Mutex<OpeningState>);

#[derive(Default)]
struct OpeningState {
    open: HashMap<(u64, String), Arc<Notify>>,
    /// Closes that came first, oldest first.
    closed: std::collections::VecDeque<((u64, String), Instant)>,
}

/// How long a `close_diff` that found nothing waits for its `open_diff`.
pub const CLOSED_KEPT: Duration = Duration::from_secs(5);
/// Closes that found nothing kept at once; the oldest goes first.
pub const MAX_CLOSED: usize = 64;

impl Opening {
    fn lock(&self) -> std::sync::MutexGuard<'_, OpeningState> {
        self.0.locked()
    }

    /// Registers the `open_diff` of `key`; None when its `close_diff` came
    /// first (the call is answered REJECTED).
    fn begin(&self, key: (u64, String)) -> Option<Arc<Notify>> {
        let mut state = self.lock();
        state.forget_old_closes(Instant::now());
        if let Some(at) = state.closed.iter().position(|(k, _)| *k == key) {
            state.closed.remove(at);
            return None;
        }
        let notify = Arc::new(Notify::new());
        state.open.insert(key, notify.clone());
        Some(notify)
    }

    fn end(&self, key: &(u64, String), notify: &Arc<Notify>) {
        let mut state = self.lock();
        if state.open.get(key).is_some_and(|n| Arc::ptr_eq(n, notify)) {
            state.open.remove(key);
        }
    }

    /// Asks the `open_diff` of `key` being answered to close its review;
    /// whether there is one. When there is none, its `open_diff` may not
    /// have been read yet: the close is kept for it.
    fn close(&self, key: &(u64, String)) -> bool {
        let mut state = self.lock();
        if let Some(notify) = state.open.get(key) {
            notify.notify_one();
            return true;
        }
        state.forget_old_closes(Instant::now());
        if state.closed.len() == MAX_CLOSED {
            state.closed.pop_front();
        }
        state.closed.push_back((key.clone(), Instant::now()));
        false
    }

    pub fn count(&self) -> usize {
        self.lock().open.len()
    }
}

impl OpeningState {
    fn forget_old_closes(&mut self, now: Instant) {
        while self.closed.front().is_some_and(|(_, at)| now.saturating_duration_since(*at) > CLOSED_KEPT) {
            self.closed.pop_front();
        }
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
            let Some(closed_early) = cx.opening.begin(key.clone()) else {
                log::info(format!("copilot: {} was closed before its open_diff came", log::untrusted(&tab_name)));
                return Ok(text(&protocol::open_diff_text(false)));
            };
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
    fn a_close_diff_read_before_its_open_diff_rejects_it_at_once() {
        use futures_util::FutureExt;
        let fake = FakeEditor::new(false);
        fake.hold_reviews();
        block_on(async {
            let opening = Opening::default();
            let (mine, other) = (cx(&fake, &opening), cx(&fake, &opening));
            let closed = tool(&mine, "close_diff", json!({"tab_name": "tab"})).await;
            assert_eq!(closed["already_closed"], true);
            let answer = tool(&mine, "open_diff", diff("tab")).await;
            assert_eq!(answer["result"], "REJECTED", "answered without a review");
            assert!(!fake.calls().iter().any(|c| matches!(c, Call::Propose(..))), "no review shown");
            // Kept for one open_diff of that tab in that session only.
            let args = json!({"name": "open_diff", "arguments": diff("tab")});
            assert!(Box::pin(answer_owned(&args, &mine)).as_mut().now_or_never().is_none(), "the next one waits");
            assert!(Box::pin(answer_owned(&args, &other)).as_mut().now_or_never().is_none(), "another session's waits");
        });
    }

    async fn answer_owned(args: &Value, cx: &Context<'_>) -> Result<Value, mcp::RequestError> {
        answer("tools/call", args, cx).await
    }

    #[test]
    fn closes_that_found_nothing_are_kept_at_most_64_and_5_seconds() {
        let opening = Opening::default();
        let key = |i: usize| (1, format!("tab {i}"));
        for i in 0..=MAX_CLOSED {
            assert!(!opening.close(&key(i)));
        }
        assert_eq!(opening.lock().closed.len(), MAX_CLOSED, "one past the limit: the oldest goes");
        assert!(opening.begin(key(0)).is_some(), "the oldest was forgotten: its open_diff is shown");
        assert!(opening.begin(key(1)).is_none(), "the next is still kept");
        let mut state = OpeningState::default();
        let now = Instant::now();
        state.closed.push_back((key(0), now));
        state.forget_old_closes(now + CLOSED_KEPT);
        assert_eq!(state.closed.len(), 1, "kept for exactly CLOSED_KEPT");
        state.forget_old_closes(now + CLOSED_KEPT + Duration::from_millis(1));
        assert!(state.closed.is_empty(), "then forgotten");
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
