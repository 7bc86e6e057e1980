//! Neovim as the protocols' [`Editor`]: each call is one job on the main
//! thread (through [`bridge::on_main`]), doing only the editor's part.

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::Value;

use super::bridge::{self, on_main, BridgeError};
use super::{api_err, buffers, diagnostics, events, file_record, files, find_buffer, lua, open, path_from_lua, review};
use crate::core::buffer::{ApplyError, BufferText, WritePlan};
use crate::core::checked_file::CheckedPath;
use crate::core::edit_plan::EditPlan;
use crate::core::editor::{
    Editor, EditorError, FileChange, OpenBuffer, Pending, RawDiagnostic, Sliced, TextToSelect, WriteRequest,
};
use crate::core::filetext::FileFormat;
use crate::core::review::{Decision, Owner, Proposal, ReviewEnd};
use crate::core::uri::LineSelection;

/// The running Neovim.
pub struct Neovim;

impl From<BridgeError> for EditorError {
    fn from(e: BridgeError) -> Self {
        match e {
            BridgeError::Closed => EditorError::Closed,
            BridgeError::Failed => EditorError::Crashed,
        }
    }
}

fn main<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Pending<'static, T> {
    Box::pin(async move { on_main(f).await.map_err(EditorError::from) })
}

/// [`main`] for a job that may refuse (its reason becomes
/// [`EditorError::Refused`]).
fn main_or_refused<T: Send + 'static>(f: impl FnOnce() -> Result<T, String> + Send + 'static) -> Pending<'static, T> {
    Box::pin(async move { on_main(f).await.map_err(EditorError::from)?.map_err(EditorError::Refused) })
}

/// Snapshots that start over this many times because the buffer changed
/// between their slices are then taken in one slice.
const SNAPSHOT_ATTEMPTS: usize = 3;

/// A buffer's text read one slice of the main thread's time after another
/// (`start` begins it, all of it when told `whole`), so a big buffer does
/// not hold the keys typed meanwhile. A change between slices starts it
/// again; after [`SNAPSHOT_ATTEMPTS`] it is read in one slice.
async fn sliced_snapshot(
    start: impl Fn(bool) -> Result<Option<buffers::Snapshot>, String> + Send + Sync + 'static,
) -> Result<Option<BufferText>, EditorError> {
    let start = Arc::new(start);
    for attempt in 0.. {
        let whole = attempt + 1 >= SNAPSHOT_ATTEMPTS;
        let begin = start.clone();
        let Some(mut snapshot) = on_main(move || begin(whole)).await?.map_err(EditorError::Refused)? else {
            return Ok(None);
        };
        loop {
            if snapshot.done() {
                return Ok(Some(snapshot.text));
            }
            match on_main(move || buffers::continue_snapshot(snapshot, whole)).await?.map_err(EditorError::Refused)? {
                Some(more) => snapshot = more,
                None => break,
            }
        }
    }
    unreachable!("the last attempt reads the buffer in one slice")
}

impl Editor for Neovim {
    fn loaded_text(&self, paths: Vec<PathBuf>) -> Pending<'_, Option<BufferText>> {
        Box::pin(sliced_snapshot(move |whole| buffers::loaded_text(paths.clone(), whole)))
    }

    fn text_for_edit(&self, paths: Vec<PathBuf>, file: CheckedPath) -> Pending<'_, BufferText> {
        Box::pin(async move {
            let snapshot = sliced_snapshot(move |whole| buffers::text_for_edit(paths.clone(), &file, whole).map(Some));
            snapshot.await?.ok_or_else(|| EditorError::Refused("the buffer went away".into()))
        })
    }

    fn apply_slice(
        &self,
        plan: Arc<EditPlan>,
        from: usize,
        tick: u32,
        whole: bool,
    ) -> Pending<'_, Result<Sliced, ApplyError>> {
        main(move || buffers::apply_slice(&plan, from, tick, whole))
    }

    fn undo_applied(&self, bufnr: i32, tick: u32) -> Pending<'_, bool> {
        main(move || buffers::undo_applied(bufnr, tick))
    }

    fn records_writes(&self) -> bool {
        file_record::available()
    }

    fn replace_applied(
        &self,
        bufnr: i32,
        tick: u32,
        write: WriteRequest,
        tmp: PathBuf,
        target: PathBuf,
    ) -> Pending<'_, Result<(), ApplyError>> {
        main(move || buffers::replace_applied(bufnr, tick, write.autocmds, write.stamp, &tmp, &target))
    }

    fn write_applied(
        &self,
        bufnr: i32,
        tick: u32,
        write: WriteRequest,
        plan: WritePlan,
        undo: bool,
    ) -> Pending<'_, Result<(), ApplyError>> {
        main(move || buffers::write_applied(bufnr, tick, write.autocmds, write.stamp, plan, undo))
    }

    fn mark_reloaded(
        &self,
        bufnr: i32,
        tick: u32,
        format: FileFormat,
        modified: bool,
    ) -> Pending<'_, Result<(), ApplyError>> {
        main(move || buffers::mark_reloaded(bufnr, tick, format, modified))
    }

    fn file_changed(&self, path: PathBuf, change: FileChange) -> Pending<'_, ()> {
        main(move || match change {
            FileChange::Conflict => files::report_conflict(&path),
            FileChange::Reloaded => files::report_reloaded(&path),
            FileChange::Settled => files::report_settled(&path),
            FileChange::Deleted => files::report_deleted(&path),
        })
    }

    fn diagnostics(&self, under: Option<Vec<PathBuf>>) -> Pending<'_, Vec<RawDiagnostic>> {
        main_or_refused(move || diagnostics::collect(under))
    }

    fn open_file(&self, path: CheckedPath, selection: Option<LineSelection>) -> Pending<'_, ()> {
        main_or_refused(move || open::open_path(path, selection))
    }

    fn open_url(&self, url: String) -> Pending<'_, ()> {
        main_or_refused(move || open::open_external(url))
    }

    fn event(&self, name: &'static str, data: Value) {
        let _ = bridge::post(move || events::fire(name, &data));
    }

    fn propose(&self, proposal: Proposal) -> Pending<'_, Decision> {
        Box::pin(review::propose(proposal))
    }

    fn close_review(&self, owner: Owner, name: String, why: ReviewEnd) -> Pending<'_, bool> {
        Box::pin(review::close(owner, name, why))
    }

    fn review_text(&self, owner: Owner, name: String) -> Pending<'_, Option<String>> {
        Box::pin(review::text(owner, name))
    }

    fn close_reviews(&self, owner: Owner, why: ReviewEnd) -> Pending<'_, usize> {
        Box::pin(review::close_all(owner, why))
    }

    fn open_buffers(&self) -> Pending<'_, Vec<OpenBuffer>> {
        main_or_refused(|| {
            let list: Vec<mlua::Table> = lua::helper("open_buffers", ()).map_err(|e| api_err("listing buffers", e))?;
            Ok(list
                .into_iter()
                .filter_map(|t| {
                    let name: mlua::String = t.raw_get(1).ok()?;
                    Some(OpenBuffer {
                        path: path_from_lua(&name),
                        active: t.raw_get(2).unwrap_or(false),
                        dirty: t.raw_get(3).unwrap_or(false),
                        filetype: t.raw_get(4).unwrap_or_default(),
                    })
                })
                .collect())
        })
    }

    fn buffer_modified(&self, path: PathBuf) -> Pending<'_, Option<bool>> {
        main_or_refused(move || match find_buffer(&[path], true) {
            None => Ok(None),
            Some(buf) => lua::helper("buffer_modified", buf).map(Some).map_err(|e| api_err("'modified'", e)),
        })
    }

    fn save_buffer(&self, path: PathBuf) -> Pending<'_, Option<()>> {
        main_or_refused(move || match find_buffer(&[path], true) {
            None => Ok(None),
            Some(buf) => match lua::helper::<_, Option<String>>("save_buffer", buf) {
                Ok(None) => Ok(Some(())),
                Ok(Some(why)) => Err(why),
                Err(e) => Err(api_err(":write", e)),
            },
        })
    }

    fn select_text(&self, select: TextToSelect) -> Pending<'_, bool> {
        main_or_refused(move || {
            lua::helper("select_text", (select.start_text, select.end_text, select.to_end_of_line))
                .map_err(|e| api_err("selecting", e))
        })
    }
}
