//! The review view's Rust side: a protocol's proposal (`core::review`) is
//! shown by `lua/amp/review.lua` and the protocol's task waits, without
//! blocking anything, until the user decides there. Every call reaches the
//! editor through `bridge::on_main`.

use std::collections::HashMap;
use std::sync::Mutex;

use tokio::sync::oneshot;

use crate::core::editor::EditorError;
use crate::core::review::{admit, original_text, Decision, Proposal};
use crate::nvim::bridge::on_main;
use crate::nvim::lua as nvim;

type Waiting = HashMap<String, oneshot::Sender<Decision>>;

/// The proposals waiting for the user, by review name.
static PENDING: Mutex<Option<Waiting>> = Mutex::new(None);

fn with_pending<R>(f: impl FnOnce(&mut Waiting) -> R) -> R {
    let mut guard = PENDING.lock().unwrap_or_else(|p| p.into_inner());
    f(guard.get_or_insert_with(HashMap::new))
}

/// `require("amp.review")`, with its `decide` hook set (main thread).
fn module() -> Result<mlua::Table, String> {
    let lua = nvim::lua().map_err(|e| e.to_string())?;
    let require: mlua::Function = lua.globals().get("require").map_err(|e| e.to_string())?;
    let module: mlua::Table = require.call("amp.review").map_err(|e| e.to_string())?;
    if module.raw_get::<Option<mlua::Function>>("decide").map_err(|e| e.to_string())?.is_none() {
        // Created once per module table: the decisions come back through it.
        let decide = lua
            .create_function(|_, (name, accepted, text): (String, bool, Option<mlua::String>)| {
                let decision = match (accepted, text) {
                    (true, Some(text)) => Decision::Accepted(text.to_string_lossy()),
                    _ => Decision::Rejected,
                };
                if let Some(waiting) = with_pending(|p| p.remove(&name)) {
                    let _ = waiting.send(decision);
                }
                Ok(())
            })
            .map_err(|e| e.to_string())?;
        module.raw_set("decide", decide).map_err(|e| e.to_string())?;
    }
    Ok(module)
}

fn call<A: mlua::IntoLuaMulti, R: mlua::FromLuaMulti>(name: &str, args: A) -> Result<R, String> {
    let f: mlua::Function = module()?.get(name).map_err(|e| e.to_string())?;
    f.call(args).map_err(|e| format!("review.{name}: {e}"))
}

/// Shows `proposal` and waits until the user decides. A second proposal of
/// the same name replaces the first, which is answered as rejected (never
/// left hanging).
pub async fn propose(proposal: Proposal) -> Result<Decision, EditorError> {
    let original = original_text(&proposal).await.map_err(EditorError::Refused)?;
    let (tx, rx) = oneshot::channel();
    // Counted and registered in one step: concurrent proposals cannot
    // together pass the limit.
    let replaced = with_pending(|p| {
        admit(&proposal, p.len(), p.contains_key(&proposal.name))?;
        Ok(p.insert(proposal.name.clone(), tx))
    })
    .map_err(EditorError::Refused)?;
    if let Some(old) = replaced {
        let _ = old.send(Decision::Rejected);
    }
    let name = proposal.name.clone();
    let shown = on_main(move || {
        let path = proposal.path.to_string_lossy().into_owned();
        call::<_, ()>("open_proposal", (proposal.name, path, original, proposal.proposed, proposal.owner.agent))
    })
    .await;
    if let Err(e) = shown.map_err(EditorError::from).and_then(|r| r.map_err(EditorError::Refused)) {
        with_pending(|p| p.remove(&name));
        return Err(e);
    }
    // Dropped only when Neovim shuts down: then there is no decision.
    rx.await.map_err(|_| EditorError::Closed)
}

/// Closes the review `name` (a pending one counts as rejected); whether
/// there was one.
pub async fn close(name: String) -> Result<bool, EditorError> {
    on_main(move || call::<_, bool>("close", name)).await?.map_err(EditorError::Refused)
}

/// The current text of the review `name`'s proposal; `None`: no such review.
pub async fn text(name: String) -> Result<Option<String>, EditorError> {
    on_main(move || call::<_, Option<mlua::String>>("text", name).map(|t| t.map(|t| t.to_string_lossy())))
        .await?
        .map_err(EditorError::Refused)
}

/// Closes every proposal's review; how many there were.
pub async fn close_all() -> Result<usize, EditorError> {
    on_main(|| call::<_, usize>("close_all", ())).await?.map_err(EditorError::Refused)
}
