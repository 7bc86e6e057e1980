//! One MCP request of an IDE-companion client (Gemini CLI, Qwen Code),
//! answered: `initialize`, `tools/list`, `tools/call` (`openDiff`,
//! `closeDiff`). Plain Rust over the core's [`Editor`] (unit-tested with
//! `core::fake_editor`).
//!
//! `openDiff` answers at once: the user's decision reaches the agent later,
//! as `ide/diffAccepted` / `ide/diffRejected` on the calling session's SSE
//! stream. The editor never writes the file: the agent does, with the text
//! it is told (Gemini's edit fails with "No changes to apply" when the file
//! already holds it; Qwen writes `ide/diffAccepted.content`).

use crate::core::sync::LockExt;
use std::collections::HashMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{json, Map, Value};

use super::protocol;
use crate::core::editor::Editor;
use crate::core::log;
use crate::core::review::{Decision, Owner, Proposal, ReviewEnd};
use crate::mcp::{self, RequestError};

/// Sends one notification to the session that made the request.
pub type Notify = Arc<dyn Fn(&'static str, Value) + Send + Sync>;
/// Runs a task on the server's runtime (one of its tasks, stopped with it).
pub type Spawn<'a> = &'a (dyn Fn(Pin<Box<dyn Future<Output = ()> + Send>>) + Sync);

/// What a request needs besides its params.
pub struct Context<'a> {
    pub editor: Arc<dyn Editor>,
    /// The MCP session asking: its reviews are its own.
    pub owner: Owner,
    pub workspace_folders: Vec<String>,
    pub diffs: Arc<Diffs>,
    pub notify: Notify,
    pub spawn: Spawn<'a>,
}

/// The diffs waiting for a decision, by session and file: the agent knows a
/// diff only by its path, so a decision is told only for the newest
/// `openDiff` of a path (an older one replaced by it would resolve the
/// newer one's wait).
#[derive(Default)]
pub struct Diffs {
    open: Mutex<HashMap<(u64, PathBuf), Open>>,
    next: AtomicU64,
}

struct Open {
    generation: u64,
    /// `closeDiff` with `suppressNotification`: Gemini resolved it itself.
    suppressed: bool,
}

impl Diffs {
    fn open(&self, session: u64, path: &Path) -> u64 {
        let generation = self.next.fetch_add(1, Ordering::Relaxed);
        self.lock().insert((session, path.to_path_buf()), Open { generation, suppressed: false });
        generation
    }

    fn suppress(&self, session: u64, path: &Path) {
        if let Some(open) = self.lock().get_mut(&(session, path.to_path_buf())) {
            open.suppressed = true;
        }
    }

    /// Whether the decision of diff `generation` of `path` is to be told.
    fn finish(&self, session: u64, path: &Path, generation: u64) -> bool {
        let mut open = self.lock();
        let key = (session, path.to_path_buf());
        match open.get(&key) {
            Some(o) if o.generation == generation => open.remove(&key).is_some_and(|o| !o.suppressed),
            _ => false,
        }
    }

    pub fn count(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(u64, PathBuf), Open>> {
        self.open.locked()
    }
}

/// The review's name for a file of `agent`'s: one review per file, as the
/// agent has one diff per file.
pub fn review_name(agent: &str, path: &Path) -> String {
    format!("[{agent}] {}", path.display())
}

/// Answers one request: its result, or why not (its code follows).
pub async fn answer(method: &str, params: &Value, cx: &Context<'_>) -> Result<Value, RequestError> {
    if let Some(answer) = mcp::standard_answer(method, params, protocol::tools) {
        return answer;
    }
    let (name, args) = mcp::tool_call(params)?;
    call(&name, &args, cx).await
}

async fn call(name: &str, args: &Map<String, Value>, cx: &Context<'_>) -> Result<Value, RequestError> {
    match name {
        "openDiff" => {
            let path = mcp::path_arg(args, "filePath", &cx.workspace_folders)?;
            let proposed = mcp::text_arg(args, "newContent")?;
            let session = cx.owner.session;
            let generation = cx.diffs.open(session, &path);
            let proposal = Proposal {
                name: review_name(cx.owner.agent, &path),
                path: path.clone(),
                original: None,
                proposed,
                owner: cx.owner,
                edits_kept: true,
            };
            let (editor, diffs, notify, owner) = (cx.editor.clone(), cx.diffs.clone(), cx.notify.clone(), cx.owner);
            (cx.spawn)(Box::pin(async move {
                let decided = editor.propose(proposal).await;
                if !diffs.finish(session, &path, generation) {
                    return;
                }
                match decided {
                    Ok(Decision::Accepted(text)) => notify("ide/diffAccepted", protocol::diff_accepted(&path, &text)),
                    Ok(Decision::Rejected) => notify("ide/diffRejected", protocol::diff_rejected(&path)),
                    // The agent waits for a decision: a review that could
                    // not be shown is one it must not wait for.
                    Err(e) => {
                        log::warn(format!(
                            "{}: openDiff of {}: {}",
                            owner.agent.to_lowercase(),
                            path.display(),
                            log::untrusted(&e.to_string())
                        ));
                        notify("ide/diffRejected", protocol::diff_rejected(&path));
                    }
                }
            }));
            Ok(json!({ "content": [] }))
        }
        "closeDiff" => {
            let path = mcp::path_arg(args, "filePath", &cx.workspace_folders)?;
            let name = review_name(cx.owner.agent, &path);
            if args.get("suppressNotification").and_then(Value::as_bool).unwrap_or(false) {
                cx.diffs.suppress(cx.owner.session, &path);
            }
            let text = cx.editor.review_text(cx.owner, name.clone()).await?;
            cx.editor.close_review(cx.owner, name, ReviewEnd::Agent).await?;
            Ok(mcp::text_content(&[&protocol::close_diff_text(text.as_deref())], false))
        }
        other => Err(RequestError::NoTool(other.to_owned())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::fake_editor::{Call, FakeEditor};

    type Sent = Arc<Mutex<Vec<(&'static str, Value)>>>;

    fn context<'a>(editor: &Arc<FakeEditor>, sent: &Sent, diffs: &Arc<Diffs>, spawn: Spawn<'a>) -> Context<'a> {
        let sent = sent.clone();
        Context {
            editor: editor.clone(),
            owner: Owner { agent: "Gemini", session: 7 },
            workspace_folders: vec!["/w".into()],
            diffs: diffs.clone(),
            notify: Arc::new(move |m, p| sent.lock().unwrap().push((m, p))),
            spawn,
        }
    }

    fn diff(path: &str, content: &str) -> Value {
        json!({"name": "openDiff", "arguments": {"filePath": path, "newContent": content}})
    }

    #[tokio::test]
    async fn open_diff_answers_at_once_and_tells_the_decision_later() {
        let fake = Arc::new(FakeEditor::new(false));
        fake.decide(vec![Decision::Accepted("x\nmine\n".into()), Decision::Rejected]);
        let (sent, diffs): (Sent, _) = (Sent::default(), Arc::new(Diffs::default()));
        let spawn = |f: Pin<Box<dyn Future<Output = ()> + Send>>| {
            tokio::spawn(f);
        };
        let cx = context(&fake, &sent, &diffs, &spawn);
        assert_eq!(answer("tools/call", &diff("/w/a.rs", "x\n"), &cx).await.unwrap(), json!({"content": []}));
        // Relative paths are the workspace's.
        answer("tools/call", &diff("b.rs", "y\n"), &cx).await.unwrap();
        for _ in 0..100 {
            if sent.lock().unwrap().len() == 2 {
                break;
            }
            tokio::task::yield_now().await;
        }
        let sent = sent.lock().unwrap().clone();
        assert_eq!(sent[0], ("ide/diffAccepted", json!({"filePath": "/w/a.rs", "content": "x\nmine\n"})));
        assert_eq!(sent[1], ("ide/diffRejected", json!({"filePath": "/w/b.rs"})));
        assert!(fake.calls().contains(&Call::Propose("[Gemini] /w/a.rs".into(), "x\n".into())));
        assert_eq!(diffs.count(), 0);
        // The editor was never asked to write anything.
        assert!(!fake.calls().iter().any(|c| matches!(c, Call::ApplySlice | Call::WriteApplied | Call::Replace)));
        let bad = json!({"name": "openDiff", "arguments": {"filePath": "/w/a.rs"}});
        assert_eq!(answer("tools/call", &bad, &cx).await.unwrap_err().code(), mcp::INVALID_PARAMS);
    }

    #[tokio::test]
    async fn close_diff_returns_the_proposal_text_and_may_suppress_the_rejection() {
        let fake = Arc::new(FakeEditor::new(false));
        // Reviews stay open until closed, as the user has not decided.
        fake.hold_reviews();
        let (sent, diffs): (Sent, _) = (Sent::default(), Arc::new(Diffs::default()));
        let tasks: Arc<Mutex<Vec<tokio::task::JoinHandle<()>>>> = Arc::default();
        let keep = tasks.clone();
        let spawn = move |f: Pin<Box<dyn Future<Output = ()> + Send>>| keep.lock().unwrap().push(tokio::spawn(f));
        let cx = context(&fake, &sent, &diffs, &spawn);
        let shown =
            |fake: &FakeEditor, n: usize| fake.calls().iter().filter(|c| matches!(c, Call::Propose(..))).count() == n;
        answer("tools/call", &diff("/w/a.rs", "new\n"), &cx).await.unwrap();
        while !shown(&fake, 1) {
            tokio::task::yield_now().await;
        }
        let closed = json!({"name": "closeDiff", "arguments": {"filePath": "/w/a.rs", "suppressNotification": true}});
        let result = answer("tools/call", &closed, &cx).await.unwrap();
        assert_eq!(result["content"][0]["text"], r#"{"content":"new\n"}"#);
        assert!(fake.calls().contains(&Call::CloseReview("[Gemini] /w/a.rs".into(), ReviewEnd::Agent)));
        // The review's task ends (rejected by the close): nothing is told.
        let pending: Vec<_> = tasks.lock().unwrap().drain(..).collect();
        for t in pending {
            t.await.unwrap();
        }
        assert!(sent.lock().unwrap().is_empty());
        // Without suppressNotification the close is told as a rejection.
        answer("tools/call", &diff("/w/a.rs", "again\n"), &cx).await.unwrap();
        while !shown(&fake, 2) {
            tokio::task::yield_now().await;
        }
        let plain = json!({"name": "closeDiff", "arguments": {"filePath": "/w/a.rs"}});
        answer("tools/call", &plain, &cx).await.unwrap();
        let pending: Vec<_> = tasks.lock().unwrap().drain(..).collect();
        for t in pending {
            t.await.unwrap();
        }
        assert_eq!(sent.lock().unwrap().clone(), vec![("ide/diffRejected", json!({"filePath": "/w/a.rs"}))]);
        // No review of that file: content null.
        let none = json!({"name": "closeDiff", "arguments": {"filePath": "/w/none.rs"}});
        assert_eq!(answer("tools/call", &none, &cx).await.unwrap()["content"][0]["text"], r#"{"content":null}"#);
    }

    #[test]
    fn each_flavor_names_its_reviews() {
        assert_eq!(review_name("Gemini", Path::new("/w/a.rs")), "[Gemini] /w/a.rs");
        assert_eq!(review_name("Qwen", Path::new("/w/a.rs")), "[Qwen] /w/a.rs");
    }

    #[tokio::test]
    async fn a_replaced_diff_tells_nothing() {
        let diffs = Diffs::default();
        let first = diffs.open(1, Path::new("/a"));
        let second = diffs.open(1, Path::new("/a"));
        // Another session's diff of the same file is its own.
        let elsewhere = diffs.open(2, Path::new("/a"));
        assert!(!diffs.finish(1, Path::new("/a"), first));
        assert!(diffs.finish(1, Path::new("/a"), second));
        assert!(!diffs.finish(1, Path::new("/a"), second));
        assert!(diffs.finish(2, Path::new("/a"), elsewhere));
    }

    #[tokio::test]
    async fn initialize_and_list() {
        let fake = Arc::new(FakeEditor::new(false));
        let (sent, diffs): (Sent, _) = (Sent::default(), Arc::new(Diffs::default()));
        let spawn = |_f: Pin<Box<dyn Future<Output = ()> + Send>>| {};
        let cx = context(&fake, &sent, &diffs, &spawn);
        let init = answer("initialize", &json!({"protocolVersion": "2025-06-18"}), &cx).await.unwrap();
        assert_eq!(init["protocolVersion"], "2025-06-18");
        assert_eq!(answer("tools/list", &Value::Null, &cx).await.unwrap()["tools"].as_array().unwrap().len(), 2);
        assert_eq!(answer("nope", &Value::Null, &cx).await.unwrap_err().code(), mcp::METHOD_NOT_FOUND);
        let unknown = answer("tools/call", &json!({"name": "openFile"}), &cx).await.unwrap_err();
        assert_eq!(unknown.code(), mcp::METHOD_NOT_FOUND);
    }
}
