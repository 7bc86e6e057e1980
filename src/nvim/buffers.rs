//! Reading and writing buffer text for `readFile`, `editFile` and reloads.

use std::path::{Path, PathBuf};

use super::{api_err, file_record, find_buffer, lua, lua_paths};
use std::time::{Duration, Instant};

use crate::core::buffer::{ApplyError, BufferFormat, BufferText, FileStamp, WritePlan};
use crate::core::checked_file::CheckedPath;
use crate::core::edit_plan::EditPlan;
use crate::core::editor::{Sliced, WriteAutocmds};
use crate::core::filetext::{self, FileFormat, LineEnd};

/// A snapshot of a buffer being taken, one slice of the main thread's
/// time after another: the text read so far (`text.joined`) and the next
/// line to read.
pub struct Snapshot {
    pub text: BufferText,
    pub next: usize,
}

impl Snapshot {
    pub fn done(&self) -> bool {
        self.next >= self.text.line_count
    }
}

/// How long one slice of a snapshot or of an edit runs on the main thread
/// (a line or an op that started finishes): keys typed meanwhile wait at
/// most about this long, plus the bridge's own turn (`bridge::TURN_BUDGET`).
pub const SLICE_BUDGET: Duration = Duration::from_millis(3);

/// Starts a snapshot of the loaded buffer for one of `paths`, if there is
/// one (all of it with `whole`).
pub fn loaded_text(paths: Vec<PathBuf>, whole: bool) -> Result<Option<Snapshot>, String> {
    match find_buffer(&paths, true) {
        Some(buf) => snapshot(buf, whole).map(Some),
        None => Ok(None),
    }
}

/// Starts a snapshot of the buffer for one of `paths`, loading the file
/// into a (listed, hidden) buffer first if no buffer has it loaded, so the
/// edit can be undone in the editor.
pub fn text_for_edit(paths: Vec<PathBuf>, file: &CheckedPath, whole: bool) -> Result<Snapshot, String> {
    if find_buffer(&paths, true).is_none() {
        // Neovim reads the file now: only the file checked off this thread.
        file.still_same().map_err(|e| e.to_string())?;
    }
    let names = lua_paths(&paths).map_err(|e| api_err("paths", e))?;
    let buf: i32 = lua::helper("load_buffer", names).map_err(|e| api_err("loading the file", e))?;
    snapshot(buf, whole)
}

type SnapshotFields =
    (usize, usize, u32, bool, mlua::String, bool, bool, bool, bool, mlua::String, bool, mlua::String, bool);

fn snapshot(buf: i32, whole: bool) -> Result<Snapshot, String> {
    let started = Instant::now();
    let (size, line_count, changedtick, modified, ff, eol, fixeol, binary, readonly, buftype, conflict, fenc, bomb): SnapshotFields =
        lua::helper("snapshot", buf).map_err(|e| api_err("reading the buffer", e))?;
    let line_end = if binary {
        LineEnd::Unix
    } else {
        LineEnd::parse(&ff.to_str().map_err(|e| e.to_string())?).unwrap_or(LineEnd::Unix)
    };
    let text = BufferText {
        bufnr: buf,
        changedtick,
        modified,
        joined: Vec::with_capacity(size),
        line_count,
        format: BufferFormat {
            line_end,
            eol,
            fixeol: fixeol && !binary,
            readonly,
            is_file: buftype.as_bytes().is_empty(),
            conflict,
            encoding: filetext::known_encoding(&fenc.to_string_lossy()),
            bomb: bomb && !binary,
            binary,
        },
    };
    let mut snapshot = Snapshot { text, next: 0 };
    read_lines(&mut snapshot, started, whole)?;
    Ok(snapshot)
}

/// Reads on in a snapshot started earlier; `None` when the buffer changed
/// since (or is gone): the snapshot must start again.
pub fn continue_snapshot(mut snapshot: Snapshot, whole: bool) -> Result<Option<Snapshot>, String> {
    let started = Instant::now();
    let tick: Option<u32> =
        lua::helper("loaded_changedtick", snapshot.text.bufnr).map_err(|e| api_err("reading the buffer", e))?;
    if tick != Some(snapshot.text.changedtick) {
        return Ok(None);
    }
    read_lines(&mut snapshot, started, whole)?;
    Ok(Some(snapshot))
}

/// Lines read per call of the C API while a snapshot slice runs.
const SNAPSHOT_CHUNK_LINES: usize = 4096;

fn read_lines(snapshot: &mut Snapshot, started: Instant, whole: bool) -> Result<(), String> {
    while !snapshot.done() {
        let end = (snapshot.next + SNAPSHOT_CHUNK_LINES).min(snapshot.text.line_count);
        super::bulk::append_lines(snapshot.text.bufnr, snapshot.next, end, &mut snapshot.text.joined)?;
        snapshot.next = end;
        if !whole && started.elapsed() >= SLICE_BUDGET {
            break;
        }
    }
    Ok(())
}

/// Applies `plan`'s ops from `from` on for one slice of the main thread's
/// time (all of them when `whole`), if the buffer is still at `tick`: the
/// first slice starts the edit's undo step, the others join it, the last
/// sets the final end-of-line.
pub fn apply_slice(plan: &EditPlan, from: usize, tick: u32, whole: bool) -> Result<Sliced, ApplyError> {
    let started = Instant::now();
    let bufnr = plan.bufnr;
    let fail = |e: mlua::Error| ApplyError::Failed(api_err("applying the edit", e));
    let ops = plan.ops();
    let ready: bool = if from == 0 {
        lua::helper("apply_begin", (bufnr, tick, !ops.is_empty())).map_err(fail)?
    } else {
        lua::helper("apply_continue", (bufnr, tick)).map_err(fail)?
    };
    if !ready {
        return Err(ApplyError::Changed);
    }
    let mut next = from;
    while next < ops.len() {
        let op = &ops[next];
        super::bulk::set_lines(bufnr, op.start, op.old_end, plan.lines(op)).map_err(ApplyError::Failed)?;
        next += 1;
        if !whole && started.elapsed() >= SLICE_BUDGET {
            break;
        }
    }
    let tick = if next == ops.len() {
        lua::helper::<_, u32>("apply_end", (bufnr, plan.final_eol)).map_err(fail)?
    } else {
        lua::helper::<_, u32>("changedtick", bufnr).map_err(fail)?
    };
    Ok(Sliced { tick, next })
}

/// Writes the buffer (an edit applied, the buffer at `tick`) with Neovim's
/// own `:write` (whose autocommands `autocmds` names: "all", "post" or
/// "none"), if the file is still at `stamp`. When the write fails and
/// `undo` is set the edit is undone (unless the user typed since): nothing
/// is left half-done, and the error says why (`E45`, `E212`, `E513`, ...).
pub fn write_applied(
    bufnr: i32,
    tick: u32,
    autocmds: WriteAutocmds,
    stamp: FileStamp,
    plan: WritePlan,
    undo: bool,
) -> Result<(), ApplyError> {
    let result = write(bufnr, autocmds, stamp, &plan);
    if result.is_err() && undo {
        // Nothing half-done: the buffer goes back to what it was.
        undo_applied(bufnr, tick);
    }
    result
}

fn write(bufnr: i32, autocmds: WriteAutocmds, stamp: FileStamp, plan: &WritePlan) -> Result<(), ApplyError> {
    let failed = |what: &str, e: &dyn std::fmt::Display| ApplyError::Failed(api_err(what, e));
    // `:write` asks "changed since reading it (y/n)?" when the file is not
    // the one Neovim recorded, and no agent request may stop the editor at a
    // prompt: the file must still be the one the server settled (else the
    // caller settles and retries), and that is what Neovim then records.
    let stamp = [stamp.0, stamp.1, stamp.2 as i64, stamp.3 as i64];
    if !lua::helper::<_, bool>("same_file", (bufnr, stamp)).map_err(|e| failed("checking the file", &e))? {
        return Err(ApplyError::Changed);
    }
    let error = |outcome: Option<String>| outcome.map_or(Ok(()), |why| Err(ApplyError::Failed(why)));
    let target = match plan {
        WritePlan::Rename { target } if file_record::available() => target,
        _ => {
            // Without the record, :write! (the caller checked 'readonly' and
            // the permissions).
            let bang = !file_record::record_timestamp(bufnr);
            let outcome: Option<String> = lua::helper("write", (bufnr, autocmds.name(), mlua::Value::Nil, bang))
                .map_err(|e| failed("writing the file", &e))?;
            return error(outcome);
        }
    };
    let tmp =
        crate::core::fsutil::reserve_temp(target).map_err(|e| failed("creating a temp file beside the file", &e))?;
    let result = super::lua_path(&tmp)
        .and_then(|name| lua::helper::<_, Option<String>>("write", (bufnr, autocmds.name(), name, true)))
        .map_err(|e| failed("writing the file", &e))
        .and_then(error)
        .and_then(|()| {
            // Durable only if the user asks Neovim's own writes to be ('fsync').
            let durable = lua::helper("global_option", "fsync").unwrap_or(false);
            replace(bufnr, autocmds, &tmp, target, durable)
        });
    let _ = std::fs::remove_file(&tmp); // renamed away, or a leftover
    result
}

/// Renames `tmp` (the buffer's text as `:w` writes it) over `target`, then
/// records what `:write` records: the buffer matches its file.
fn replace(bufnr: i32, autocmds: WriteAutocmds, tmp: &Path, target: &Path, durable: bool) -> Result<(), ApplyError> {
    crate::core::fsutil::finish_replace(tmp, target, durable)
        .map_err(|e| ApplyError::Failed(format!("cannot replace {}: {e}", target.display())))?;
    file_record::record_saved(bufnr);
    lua::helper::<_, ()>("mark_written", (bufnr, autocmds.name()))
        .map_err(|e| ApplyError::Failed(api_err("marking the buffer written", e)))
}

/// The second half of an edit whose bytes the tokio side wrote to `tmp`
/// (after `apply` left the buffer at `tick`): if the file is still at
/// `stamp`, `tmp` is renamed over `target` and the buffer marked written
/// (still modified if the user typed since `tick`). `Changed` when the file
/// changed meanwhile.
pub fn replace_applied(
    bufnr: i32,
    tick: u32,
    autocmds: WriteAutocmds,
    stamp: FileStamp,
    tmp: &Path,
    target: &Path,
) -> Result<(), ApplyError> {
    let stamp = [stamp.0, stamp.1, stamp.2 as i64, stamp.3 as i64];
    if !lua::helper::<_, bool>("same_file", (bufnr, stamp))
        .map_err(|e| ApplyError::Failed(api_err("checking the file", e)))?
    {
        return Err(ApplyError::Changed);
    }
    let typed = lua::helper::<_, u32>("changedtick", bufnr)
        .map_err(|e| ApplyError::Failed(api_err("reading the buffer", e)))?
        != tick;
    replace(bufnr, autocmds, tmp, target, false)?;
    if typed {
        // The disk has the agent's text; the user's typing since is unsaved.
        let _ = lua::api::<_, ()>("nvim_set_option_value", ("modified", true, nvim_buf_opts(bufnr)?));
    }
    Ok(())
}

fn nvim_buf_opts(bufnr: i32) -> Result<mlua::Table, ApplyError> {
    let table = lua::lua().and_then(|lua| lua.create_table()).map_err(|e| ApplyError::Failed(e.to_string()))?;
    table.set("buf", bufnr).map_err(|e| ApplyError::Failed(e.to_string()))?;
    Ok(table)
}

/// Takes back an edit `apply` made (the buffer at `tick`) when its write
/// failed; left alone if the user typed since (then the buffer keeps the
/// edit, unsaved: nothing is lost). Returns whether it was taken back.
pub fn undo_applied(bufnr: i32, tick: u32) -> bool {
    let now: Option<u32> = lua::helper("changedtick", bufnr).ok();
    now == Some(tick) && lua::helper::<_, ()>("undo_edit", bufnr).is_ok()
}

/// After a reload's text went in (the buffer at `tick`): the file's format
/// as read, Neovim's record of the file up to date (no prompt at the next
/// `:w`, `u` marks the buffer modified), and not modified unless
/// `modified` (typed into during the reload). `Changed` when the user typed
/// since `tick`.
pub fn mark_reloaded(bufnr: i32, tick: u32, format: FileFormat, modified: bool) -> Result<(), ApplyError> {
    let err = |e: mlua::Error| ApplyError::Failed(api_err("marking the buffer saved", e));
    let fields = (bufnr, tick, format.line_end.name(), format.bomb, format.encoding, format.eol);
    if !lua::helper::<_, bool>("set_file_format", fields).map_err(err)? {
        return Err(ApplyError::Changed);
    }
    if !file_record::record_saved(bufnr) {
        lua::helper::<_, ()>("checktime_quietly", bufnr).map_err(err)?;
    }
    if !modified {
        lua::helper::<_, ()>("set_unmodified", bufnr).map_err(err)?;
    }
    Ok(())
}
