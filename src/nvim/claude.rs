//! The Claude front-end's side in Neovim (`crate::claude::tools::EditorSide`):
//! it reaches the editor always through `bridge::on_main` (the tokio side
//! waits; the main thread never blocks). Reuses `diagnostics`, `open` and
//! the review view (`review`); the rest is the small Lua chunk `claude.lua`.

use std::cell::OnceCell;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use crate::claude::tools::{Diagnostic, EditorFuture, EditorSide, OpenEditor, TextToSelect};
use crate::core::review::{Decision, Proposal};
use crate::core::text::byte_to_utf16_col;
use crate::nvim::bridge::on_main;
use crate::nvim::{diagnostics, lua as nvim, open, review};

thread_local! {
    static CHUNK: OnceCell<mlua::Table> = const { OnceCell::new() };
}

/// `claude.lua`, compiled on first use (main thread).
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
        let _ = cell.set(table.clone());
        Ok(table)
    })
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

    fn open_diff(&self, tab_name: String, path: PathBuf, contents: String) -> EditorFuture<'_, Decision> {
        Box::pin(review::propose(Proposal {
            name: tab_name,
            path,
            original: None,
            proposed: contents,
            agent: "Claude",
        }))
    }

    fn close_diff(&self, tab_name: String) -> EditorFuture<'_, bool> {
        Box::pin(review::close(tab_name))
    }

    fn close_all_diffs(&self) -> EditorFuture<'_, usize> {
        Box::pin(review::close_all())
    }
}
