//! The Claude front-end's side in Neovim (`crate::claude::tools::EditorSide`):
//! it reaches the editor always through `bridge::on_main` (the tokio side
//! waits; the main thread never blocks). Reuses `editor::diagnostics` and
//! `editor::open`; the rest is the small Lua chunk `editor_side.lua`.

use std::cell::OnceCell;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use std::collections::HashMap;
use std::sync::Mutex;

use tokio::sync::oneshot;

use crate::claude::tools::{Diagnostic, DiffOutcome, EditorFuture, EditorSide, OpenEditor, TextToSelect};
use crate::core::text::byte_to_utf16_col;
use crate::nvim::bridge::on_main;
use crate::nvim::{diagnostics, lua as nvim, open};

thread_local! {
    static CHUNK: OnceCell<mlua::Table> = const { OnceCell::new() };
}

/// `editor_side.lua`, compiled on first use (main thread).
fn chunk() -> Result<mlua::Table, String> {
    CHUNK.with(|cell| {
        if let Some(t) = cell.get() {
            return Ok(t.clone());
        }
        let lua = nvim::lua().map_err(|e| e.to_string())?;
        let table: mlua::Table = lua
            .load(include_str!("claude.lua"))
            .set_name("@amp_core/nvim/claude.lua")
            .call(())
            .map_err(|e| e.to_string())?;
        // The reviews' decisions come back through this one function
        // (created once: mlua functions are never collected).
        let decide = lua
            .create_function(|_, (name, accepted, text): (String, bool, Option<mlua::String>)| {
                let outcome = match (accepted, text) {
                    (true, Some(text)) => DiffOutcome::Saved(text.to_string_lossy()),
                    _ => DiffOutcome::Rejected,
                };
                if let Some(waiting) = pending().remove(&name) {
                    let _ = waiting.send(outcome);
                }
                Ok(())
            })
            .map_err(|e| e.to_string())?;
        table.set("decide", decide).map_err(|e| e.to_string())?;
        let _ = cell.set(table.clone());
        Ok(table)
    })
}

/// The `openDiff` requests waiting for the user, by review name.
static PENDING: Mutex<Option<HashMap<String, oneshot::Sender<DiffOutcome>>>> = Mutex::new(None);

struct Pending(std::sync::MutexGuard<'static, Option<HashMap<String, oneshot::Sender<DiffOutcome>>>>);

impl Pending {
    fn map(&mut self) -> &mut HashMap<String, oneshot::Sender<DiffOutcome>> {
        self.0.get_or_insert_with(HashMap::new)
    }
    fn remove(&mut self, name: &str) -> Option<oneshot::Sender<DiffOutcome>> {
        self.map().remove(name)
    }
}

fn pending() -> Pending {
    Pending(PENDING.lock().unwrap_or_else(|p| p.into_inner()))
}

fn call<A: mlua::IntoLuaMulti, R: mlua::FromLuaMulti>(name: &str, args: A) -> Result<R, String> {
    let f: mlua::Function = chunk()?.get(name).map_err(|e| e.to_string())?;
    f.call(args).map_err(|e| format!("{name}: {e}"))
}

fn path_string(path: &std::path::Path) -> String {
    path.to_string_lossy().into_owned()
}

/// Neovim as the Claude front-end's editor.
pub struct Nvim;

impl EditorSide for Nvim {
    fn diagnostics(&self, path: Option<PathBuf>) -> EditorFuture<'_, Vec<Diagnostic>> {
        Box::pin(async move {
            let raw =
                on_main(move || diagnostics::collect(path.map(|p| vec![p]))).await.map_err(|e| e.to_string())??;
            Ok(raw
                .into_iter()
                .map(|d| Diagnostic {
                    start: (d.lnum, byte_to_utf16_col(&d.line, d.col)),
                    end: (d.end_lnum, byte_to_utf16_col(&d.end_line, d.end_col)),
                    path: d.path,
                    severity: d.severity,
                    message: d.message,
                    source: d.source,
                })
                .collect())
        })
    }

    fn open_editors(&self) -> EditorFuture<'_, Vec<OpenEditor>> {
        Box::pin(async move {
            on_main(|| {
                let list: Vec<mlua::Table> = call("open_editors", ())?;
                list.into_iter()
                    .map(|t| {
                        let name: mlua::String = t.raw_get(1).map_err(|e| e.to_string())?;
                        Ok(OpenEditor {
                            path: PathBuf::from(std::ffi::OsStr::from_bytes(&name.as_bytes())),
                            active: t.raw_get(2).unwrap_or(false),
                            dirty: t.raw_get(3).unwrap_or(false),
                            filetype: t.raw_get(4).unwrap_or_default(),
                        })
                    })
                    .collect()
            })
            .await
            .map_err(|e| e.to_string())?
        })
    }

    fn dirty(&self, path: PathBuf) -> EditorFuture<'_, Option<bool>> {
        Box::pin(async move {
            on_main(move || call::<_, Option<bool>>("dirty", path_string(&path))).await.map_err(|e| e.to_string())?
        })
    }

    fn save(&self, path: PathBuf) -> EditorFuture<'_, Option<()>> {
        Box::pin(async move {
            on_main(move || {
                let (saved, err): (Option<bool>, Option<String>) = call("save", path_string(&path))?;
                match saved {
                    None => Ok(None),
                    Some(true) => Ok(Some(())),
                    Some(false) => Err(err.unwrap_or_else(|| "cannot write".into())),
                }
            })
            .await
            .map_err(|e| e.to_string())?
        })
    }

    fn open(&self, path: PathBuf, select: Option<TextToSelect>) -> EditorFuture<'_, ()> {
        Box::pin(async move {
            // A FIFO or a device would block or flood the main thread: only
            // regular files and directories are opened (as for Amp's openURI).
            let meta = tokio::fs::metadata(&path).await.map_err(|e| format!("cannot open {}: {e}", path.display()))?;
            if !meta.is_file() && !meta.is_dir() {
                return Err(format!("cannot open {}: not a regular file", path.display()));
            }
            on_main(move || {
                open::open_path(path, None)?;
                if let Some(t) = select {
                    // Not found: the file is shown, nothing is selected.
                    let _found: bool = call("select_text", (t.start_text, t.end_text, t.to_end_of_line))?;
                }
                Ok(())
            })
            .await
            .map_err(|e| e.to_string())?
        })
    }

    fn open_diff(&self, tab_name: String, path: PathBuf, contents: String) -> EditorFuture<'_, DiffOutcome> {
        Box::pin(async move {
            let (tx, rx) = oneshot::channel();
            // A second openDiff of the same name replaces the first: that
            // one is answered as rejected, never left hanging.
            if let Some(old) = pending().map().insert(tab_name.clone(), tx) {
                let _ = old.send(DiffOutcome::Rejected);
            }
            let name = tab_name.clone();
            let shown = on_main(move || call::<_, ()>("open_diff", (name, path_string(&path), contents))).await;
            if let Err(e) = shown.map_err(|e| e.to_string()).and_then(|r| r) {
                pending().remove(&tab_name);
                return Err(e);
            }
            // Dropped only when Neovim shuts down: then there is no decision.
            rx.await.map_err(|_| "the review was closed without a decision (Neovim is exiting)".to_string())
        })
    }

    fn close_diff(&self, tab_name: String) -> EditorFuture<'_, bool> {
        Box::pin(
            async move { on_main(move || call::<_, bool>("close_diff", tab_name)).await.map_err(|e| e.to_string())? },
        )
    }

    fn close_all_diffs(&self) -> EditorFuture<'_, usize> {
        Box::pin(async move { on_main(|| call::<_, usize>("close_all_diffs", ())).await.map_err(|e| e.to_string())? })
    }
}
