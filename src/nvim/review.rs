//! The review view's Rust side: a protocol's proposal (`core::review`) is
//! offered to the user by `lua/amp/review/` and the protocol's task waits,
//! without blocking anything, until the user decides there.
//!
//! A proposal's texts stay here until the user opens its view: its arrival
//! costs the main thread one short call (a notice, a count), whatever its
//! size. Opening it fills the view's buffers from here in slices of at
//! most [`FILL_SLICE_BYTES`], each its own main-thread job, so keys typed
//! meanwhile are read between them.
//!
//! Reviews are known by (owner's session, name): an agent replaces, reads
//! and closes only its own. Every call reaches the editor through
//! `bridge::on_main`.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

use crate::core::editor::EditorError;
use crate::core::rebase::rebase;
use crate::core::review::{admit, disk_text, original_text, Decision, Owner, Proposal, ReviewEnd, ReviewError};
use crate::core::sync::LockExt;
use crate::nvim::bridge::on_main;
use crate::nvim::lua as nvim;

type Key = (u64, String);

/// A review waiting for the user.
struct Waiting {
    /// Which proposal of this key (a newer one replaces it).
    id: u64,
    decided: oneshot::Sender<Decision>,
    /// Its two sides until the view is filled, then for `review_text`
    /// when the view is gone.
    texts: Arc<Sides>,
}

/// The text the user has (left) and the proposal over it (right).
struct Sides {
    left: String,
    right: String,
}

/// The proposals waiting for the user.
static PENDING: Mutex<Option<HashMap<Key, Waiting>>> = Mutex::new(None);
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// Bytes of lines one main-thread job puts into a view's buffer (and at
/// most [`FILL_SLICE_LINES`] lines): about a millisecond of Neovim's work.
const FILL_SLICE_BYTES: usize = 256 * 1024;
const FILL_SLICE_LINES: usize = 4096;

fn with_pending<R>(f: impl FnOnce(&mut HashMap<Key, Waiting>) -> R) -> R {
    let mut guard = PENDING.locked();
    f(guard.get_or_insert_with(HashMap::new))
}

fn lua_err(e: mlua::Error) -> String {
    e.to_string()
}

/// `require("amp.review")`, with its hooks into this side set (main thread).
fn module() -> Result<mlua::Table, String> {
    let lua = nvim::lua().map_err(lua_err)?;
    let require: mlua::Function = lua.globals().get("require").map_err(lua_err)?;
    let module: mlua::Table = require.call("amp.review").map_err(lua_err)?;
    if module.raw_get::<Option<mlua::Function>>("decide").map_err(lua_err)?.is_none() {
        // Made once per module table: the decisions come back through it.
        let decide = lua
            .create_function(|_, (session, name, accepted, text): (u64, String, bool, Option<mlua::String>)| {
                let decision = match (accepted, text) {
                    (true, Some(text)) => Decision::Accepted(text.to_string_lossy()),
                    _ => Decision::Rejected,
                };
                Ok(answer(&(session, name), decision))
            })
            .map_err(lua_err)?;
        module.raw_set("decide", decide).map_err(lua_err)?;
        let fill = lua
            .create_function(|_, (session, name, left, right): (u64, String, i32, i32)| {
                Ok(fill(session, name, left, right))
            })
            .map_err(lua_err)?;
        module.raw_set("fill", fill).map_err(lua_err)?;
    }
    Ok(module)
}

fn call<A: mlua::IntoLuaMulti, R: mlua::FromLuaMulti>(name: &str, args: A) -> Result<R, String> {
    let f: mlua::Function = module()?.get(name).map_err(lua_err)?;
    f.call(args).map_err(|e| format!("review.{name}: {e}"))
}

/// Tells the agent waiting for `key` the decision; whether one waited.
fn answer(key: &Key, decision: Decision) -> bool {
    match with_pending(|p| p.remove(key)) {
        Some(waiting) => {
            let _ = waiting.decided.send(decision);
            true
        }
        None => false,
    }
}

/// The buffer's text of `path` when it has unsaved changes, and its
/// changedtick.
async fn unsaved_text(path: &Path) -> Result<Option<(String, u32)>, EditorError> {
    use crate::core::editor::Editor;
    // Read in slices of the main thread, as an agent's readFile is.
    let loaded = super::editor::Neovim.loaded_text(vec![path.to_path_buf()]).await?;
    Ok(loaded.filter(|b| b.modified).map(|b| {
        let tick = b.changedtick;
        (b.file_text(), tick)
    }))
}

/// Offers `proposal` and waits until the user decides. A second proposal
/// of the same owner and name replaces the first, which is answered as
/// rejected (never left hanging).
pub async fn propose(proposal: Proposal) -> Result<Decision, EditorError> {
    let original = original_text(&proposal).await?;
    // Shown against the text the user has, unsaved changes included, and
    // carried over them (core::rebase): accepting never takes them out.
    let (left, right, conflicts, tick) = match unsaved_text(&proposal.path).await? {
        Some((ours, tick)) => {
            let disk = match &proposal.original {
                None => original.clone(),
                Some(_) => disk_text(&proposal.path).await?,
            };
            if ours == disk {
                (original, proposal.proposed.clone(), 0, None)
            } else {
                let rebased = rebase(&disk, &ours, &proposal.proposed);
                (ours, rebased.text, rebased.conflicts, Some(tick))
            }
        }
        None => (original, proposal.proposed.clone(), 0, None),
    };
    let key: Key = (proposal.owner.session, proposal.name.clone());
    let (tx, rx) = oneshot::channel();
    let (eol, nl) = line_break(&right);
    let bytes = right.len();
    let texts = Arc::new(Sides { left, right });
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    // Counted and registered in one step: concurrent proposals cannot
    // together pass the limit.
    let replaced = with_pending(|p| {
        admit(&proposal, p.len(), p.contains_key(&key))?;
        Ok::<_, ReviewError>(p.insert(key.clone(), Waiting { id, decided: tx, texts }))
    })?;
    if let Some(old) = replaced {
        let _ = old.decided.send(Decision::Rejected);
    }
    let owner = proposal.owner;
    let path = proposal.path.to_string_lossy().into_owned();
    let name = proposal.name.clone();
    // The agent writes its own proposal: the view offers no edit.
    let as_proposed = !proposal.edits_kept;
    let shown = on_main(move || -> Result<(), String> {
        let lua = nvim::lua().map_err(lua_err)?;
        let meta = lua.create_table().map_err(lua_err)?;
        let set = |k: &str, v: mlua::Value| meta.raw_set(k, v).map_err(lua_err);
        set("session", mlua::Value::Number(owner.session as f64))?;
        set("name", mlua::Value::String(lua.create_string(&name).map_err(lua_err)?))?;
        set("path", mlua::Value::String(lua.create_string(&path).map_err(lua_err)?))?;
        set("agent", mlua::Value::String(lua.create_string(owner.agent).map_err(lua_err)?))?;
        set("eol", mlua::Value::Boolean(eol))?;
        set("nl", mlua::Value::String(lua.create_string(nl).map_err(lua_err)?))?;
        set("bytes", mlua::Value::Number(bytes as f64))?;
        set("conflicts", mlua::Value::Number(conflicts as f64))?;
        set("as_proposed", mlua::Value::Boolean(as_proposed))?;
        if let Some(tick) = tick {
            set("tick", mlua::Value::Number(tick as f64))?;
        }
        call::<_, ()>("propose", meta)
    })
    .await;
    if let Err(e) = shown.map_err(EditorError::from).and_then(|r| r.map_err(EditorError::Refused)) {
        // Only ours: a newer proposal may have taken the key meanwhile.
        with_pending(|p| {
            if p.get(&key).is_some_and(|w| w.id == id) {
                p.remove(&key);
            }
        });
        return Err(e);
    }
    // Dropped only when Neovim shuts down: then there is no decision.
    rx.await.map_err(|_| EditorError::Closed)
}

/// Whether `text` ends with a line break, and the one its lines use
/// ("\r\n" when every line break is one, as a 'fileformat' "dos" file).
fn line_break(text: &str) -> (bool, &'static str) {
    let lf = text.matches('\n').count();
    let crlf = text.matches("\r\n").count();
    let nl = if crlf > 0 && crlf == lf { "\r\n" } else { "\n" };
    (text.ends_with('\n'), nl)
}

/// `text` as buffer lines, in slices for [`fill`]: split at `nl`, without
/// the last empty piece a final line break leaves.
fn slices(text: &str) -> Vec<Vec<String>> {
    let (eol, nl) = line_break(text);
    let body = if eol { &text[..text.len() - nl.len()] } else { text };
    let mut out = Vec::new();
    let (mut slice, mut bytes) = (Vec::new(), 0);
    if text.is_empty() {
        return out;
    }
    for line in body.split(nl) {
        bytes += line.len();
        slice.push(line.to_owned());
        if bytes >= FILL_SLICE_BYTES || slice.len() >= FILL_SLICE_LINES {
            out.push(std::mem::take(&mut slice));
            bytes = 0;
        }
    }
    if !slice.is_empty() {
        out.push(slice);
    }
    out
}

/// Fills the view of review (`session`, `name`): its sides' lines into the
/// empty buffers `left` and `right`, a slice per main-thread job, then
/// calls `review.filled(session, name, error)`. False when there is no
/// such review. Main thread (called from Lua).
fn fill(session: u64, name: String, left: i32, right: i32) -> bool {
    let Some(texts) = with_pending(|p| p.get(&(session, name.clone())).map(|w| w.texts.clone())) else {
        return false;
    };
    let runtime = match super::runtime::handle() {
        Ok(runtime) => runtime,
        Err(_) => return false,
    };
    runtime.spawn(async move {
        let mut failed = None;
        'sides: for (buf, text) in [(left, &texts.left), (right, &texts.right)] {
            let mut at = 0;
            for slice in slices(text) {
                let n = slice.len();
                // The empty buffer's one line is replaced by the first slice.
                let end = if at == 0 { 1 } else { at };
                match on_main(move || super::bulk::set_lines(buf, at, end, slice.iter().map(String::as_str))).await {
                    Ok(Ok(())) => at += n,
                    // The view was closed meanwhile (its buffers gone): stop.
                    Ok(Err(e)) => {
                        failed = Some(e);
                        break 'sides;
                    }
                    Err(_) => return, // Neovim is stopping: nothing to finish.
                }
            }
        }
        let _ = on_main(move || call::<_, ()>("filled", (session, name, failed))).await;
    });
    true
}

/// Closes `owner`'s review `name` (a pending one counts as rejected);
/// whether there was one.
pub async fn close(owner: Owner, name: String, why: ReviewEnd) -> Result<bool, EditorError> {
    let waited = answer(&(owner.session, name.clone()), Decision::Rejected);
    let shown = on_main(move || call::<_, bool>("close", (owner.session, name, why.name()))).await?;
    Ok(shown.map_err(EditorError::Refused)? || waited)
}

/// The current text of `owner`'s review `name`'s proposal; `None`: no such
/// review.
pub async fn text(owner: Owner, name: String) -> Result<Option<String>, EditorError> {
    let key = (owner.session, name.clone());
    let shown = on_main(move || {
        call::<_, Option<mlua::String>>("text", (owner.session, name)).map(|t| t.map(|t| t.to_string_lossy()))
    })
    .await?
    .map_err(EditorError::Refused)?;
    // Not shown yet: the proposal as it came.
    Ok(shown.or_else(|| with_pending(|p| p.get(&key).map(|w| w.texts.right.clone()))))
}

/// Closes every review of `owner`; how many there were.
pub async fn close_all(owner: Owner, why: ReviewEnd) -> Result<usize, EditorError> {
    let keys: Vec<Key> = with_pending(|p| p.keys().filter(|(session, _)| *session == owner.session).cloned().collect());
    let waited = keys.iter().filter(|key| answer(key, Decision::Rejected)).count();
    let agent = owner.agent;
    let shown = on_main(move || call::<_, usize>("close_owner", (owner.session, agent, why.name()))).await?;
    Ok(shown.map_err(EditorError::Refused)?.max(waited))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_become_slices_of_lines_as_the_view_splits_them() {
        assert!(slices("").is_empty());
        assert_eq!(slices("a\nb\n"), vec![vec!["a".to_string(), "b".into()]]);
        assert_eq!(slices("a\r\nb"), vec![vec!["a".to_string(), "b".into()]]);
        // Mixed line breaks: split at "\n", the "\r" stays visible.
        assert_eq!(slices("a\r\nb\n"), vec![vec!["a\r".to_string(), "b".into()]]);
        assert_eq!(slices("\n"), vec![vec![String::new()]]);
        let many = "x\n".repeat(FILL_SLICE_LINES + 1);
        let got = slices(&many);
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].len(), FILL_SLICE_LINES);
        let long = format!("{}\n", "y".repeat(FILL_SLICE_BYTES)).repeat(3);
        assert_eq!(slices(&long).len(), 3);
        assert_eq!(line_break("a\r\n"), (true, "\r\n"));
        assert_eq!(line_break("a\nb"), (false, "\n"));
    }
}
