//! OpenCtx annotations in the buffer: virtual text at the end of the
//! annotated line, in the plugin's own namespace, several on one line shown
//! together. Also the main-thread ends of OpenCtx requests.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::path::PathBuf;

use serde_json::Value;

use super::{api_err, events, nvim, path_from_lua};

/// Buffer variable holding the drawn annotations as JSON text, for
/// `:Amp annotations list`, hover and open (`amp.openctx.annotations()`
/// decodes it).
const ANNOTATIONS_VAR: &str = "amp_openctx_annotations";

/// A document to annotate, read on the main thread.
pub struct Document {
    pub bufnr: i32,
    /// The buffer's changedtick: an answer for an older tick is dropped.
    pub generation: u32,
    pub path: PathBuf,
    pub text: String,
}

/// One annotation's place in the buffer (byte column) and its title.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mark {
    pub line: usize,
    pub col: usize,
    pub title: String,
}

thread_local! {
    static NAMESPACE: Cell<Option<i64>> = const { Cell::new(None) };
    static HIDDEN: Cell<bool> = const { Cell::new(false) };
    /// The newest generation requested per buffer.
    static LATEST: RefCell<HashMap<i32, u32>> = RefCell::new(HashMap::new());
}

fn namespace() -> i64 {
    if let Some(ns) = NAMESPACE.get() {
        return ns;
    }
    let ns = nvim::api::<_, i64>("nvim_create_namespace", "amp_openctx").unwrap_or(0);
    NAMESPACE.set(Some(ns));
    ns
}

fn clear(buf: i32) {
    let _ = nvim::api::<_, ()>("nvim_buf_clear_namespace", (buf, namespace(), 0, -1));
}

/// The buffer's text if it is a file no bigger than `max_bytes`.
pub fn read_document(bufnr: i32, max_bytes: usize) -> Result<Option<Document>, String> {
    let values: mlua::MultiValue = nvim::helper("document", (bufnr, max_bytes)).map_err(|e| api_err("document", e))?;
    let mut v = values.into_iter();
    match (v.next(), v.next(), v.next(), v.next()) {
        (Some(mlua::Value::String(name)), Some(mlua::Value::String(text)), Some(tick), Some(mlua::Value::Integer(buf))) => {
            let generation = match tick {
                mlua::Value::Integer(t) => t as u32,
                mlua::Value::Number(t) => t as u32,
                _ => 0,
            };
            let buf = buf as i32;
            LATEST.with(|l| l.borrow_mut().insert(buf, generation));
            Ok(Some(Document { bufnr: buf, generation, path: path_from_lua(&name), text: text.to_string_lossy() }))
        }
        // Too big: whatever was drawn or listed before no longer applies.
        (Some(mlua::Value::Nil), Some(mlua::Value::Integer(buf)), _, _) => {
            let buf = buf as i32;
            clear(buf);
            let _ = nvim::helper::<_, ()>("del_var", (buf, ANNOTATIONS_VAR));
            // A request still in flight for the smaller text must not draw.
            LATEST.with(|l| l.borrow_mut().remove(&buf));
            Ok(None)
        }
        _ => Ok(None),
    }
}

/// Draws the annotations unless a newer request for the buffer was made
/// since. `groups` (titles by line) and `listed` (the annotations, for list,
/// hover and open) arrive as JSON text built off the main thread: handing
/// Lua one string is much cheaper than building thousands of tables here.
pub fn render(bufnr: i32, generation: u32, groups: String, listed: String) {
    let newest = LATEST.with(|l| l.borrow().get(&bufnr).copied());
    let tick: Option<u32> = nvim::api("nvim_buf_get_changedtick", bufnr).ok();
    if newest != Some(generation) || tick != Some(generation) {
        return; // stale: a newer answer is on its way
    }
    let run = || -> mlua::Result<()> {
        nvim::api::<_, ()>("nvim_buf_set_var", (bufnr, ANNOTATIONS_VAR, listed))?;
        if HIDDEN.get() {
            clear(bufnr);
            return Ok(());
        }
        nvim::helper("draw_annotations", (bufnr, namespace(), groups))
    };
    if let Err(e) = run() {
        crate::log::warn(format!("drawing annotations failed: {e}"));
    }
}

/// Shows or hides every annotation (`:Amp annotations toggle`).
pub fn set_visible(visible: bool) {
    HIDDEN.set(!visible);
    if !visible {
        let bufs: Vec<i32> = nvim::api("nvim_list_bufs", ()).unwrap_or_default();
        for buf in bufs {
            clear(buf);
        }
    }
}

/// Calls `require("amp.openctx")._resolve(id, result)`.
pub fn resolve_request(id: i64, result: &Value) {
    let run = || -> mlua::Result<()> {
        let module: mlua::Table = nvim::global("require", "amp.openctx")?;
        module.get::<mlua::Function>("_resolve")?.call((id, nvim::to_lua(result)?))
    };
    if let Err(e) = run() {
        crate::log::warn(format!("openctx: delivering result {id} failed: {e}"));
    }
}

/// Tells the user about a failing provider (once per run of failures).
pub fn report_failure(provider: &str, message: &str) {
    events::notify(&format!("OpenCtx provider {provider}: {message}"), "WARN");
}
