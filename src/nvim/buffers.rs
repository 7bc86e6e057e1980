//! Reading and writing buffer text for `readFile`, `editFile` and reloads.

use std::path::{Path, PathBuf};

use super::{api_err, file_record, find_buffer, lua, lua_paths};
use crate::core::buffer::{ApplyError, BufferFormat, BufferText, FileStamp, FinalEol, WritePlan};
use crate::core::checked_file::CheckedPath;
use crate::core::edit::Hunk;
use crate::core::filetext::DiskText;
use crate::core::filetext::{self, LineEnd};

/// The text of the loaded buffer for one of `paths`, if there is one.
pub fn loaded_text(paths: Vec<PathBuf>) -> Result<Option<BufferText>, String> {
    match find_buffer(&paths, true) {
        Some(buf) => snapshot(buf).map(Some),
        None => Ok(None),
    }
}

/// The text of the buffer for one of `paths`, loading the file into a (listed,
/// hidden) buffer first if no buffer has it loaded, so the edit can be undone
/// in the editor.
pub fn text_for_edit(paths: Vec<PathBuf>, file: &CheckedPath) -> Result<BufferText, String> {
    if find_buffer(&paths, true).is_none() {
        // Neovim reads the file now: only the file checked off this thread.
        file.still_same()?;
    }
    let names = lua_paths(&paths).map_err(|e| api_err("paths", e))?;
    let buf: i32 = lua::helper("load_buffer", names).map_err(|e| api_err("loading the file", e))?;
    snapshot(buf)
}

type SnapshotFields =
    (usize, usize, u32, bool, mlua::String, bool, bool, bool, bool, mlua::String, bool, mlua::String, bool);

fn snapshot(buf: i32) -> Result<BufferText, String> {
    let (size, line_count, changedtick, modified, ff, eol, fixeol, binary, readonly, buftype, conflict, fenc, bomb): SnapshotFields =
        lua::helper("snapshot", buf).map_err(|e| api_err("reading the buffer", e))?;
    let joined = if line_count == 0 { Vec::new() } else { super::bulk::lines_joined(buf, size)? };
    let line_end = if binary {
        LineEnd::Unix
    } else {
        LineEnd::parse(&ff.to_str().map_err(|e| e.to_string())?).unwrap_or(LineEnd::Unix)
    };
    Ok(BufferText {
        bufnr: buf,
        changedtick,
        modified,
        joined,
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
    })
}

/// Applies `hunks` (ascending, non-overlapping) as one undo step, if the
/// buffer is still at `expected_tick`. Returns the new changedtick.
pub fn apply(bufnr: i32, expected_tick: u32, hunks: &[Hunk], final_eol: FinalEol) -> Result<u32, ApplyError> {
    let fail = |e: mlua::Error| ApplyError::Failed(api_err("applying the edit", e));
    if !lua::helper::<_, bool>("apply_begin", (bufnr, expected_tick, !hunks.is_empty())).map_err(fail)? {
        return Err(ApplyError::Changed);
    }
    // Last hunk first so earlier line numbers stay valid; changes made in
    // one main-thread job, with no user input between them, are one undo step.
    for hunk in hunks.iter().rev() {
        super::bulk::set_lines(bufnr, hunk.start, hunk.old_end, &hunk.lines).map_err(ApplyError::Failed)?;
    }
    lua::helper::<_, u32>("apply_end", (bufnr, final_eol)).map_err(fail)
}

/// Applies an edit and writes the buffer with Neovim's own `:write` (whose
/// autocommands `autocmds` names: "all", "post" or "none"), in one
/// main-thread job, if the file is still at `stamp`. When the write fails
/// the edit is undone: nothing is left half-done, and the error says why
/// (`E45`, `E212`, `E513`, ...).
pub fn apply_and_write(
    bufnr: i32,
    expected_tick: u32,
    hunks: Vec<Hunk>,
    final_eol: FinalEol,
    autocmds: &'static str,
    stamp: FileStamp,
    plan: WritePlan,
) -> Result<(), ApplyError> {
    let changed = !hunks.is_empty();
    apply(bufnr, expected_tick, &hunks, final_eol)?;
    let result = write(bufnr, autocmds, stamp, &plan);
    if result.is_err() && changed {
        // Nothing half-done: the buffer goes back to what it was.
        let _ = lua::helper::<_, ()>("undo_edit", bufnr);
    }
    result
}

fn write(bufnr: i32, autocmds: &'static str, stamp: FileStamp, plan: &WritePlan) -> Result<(), ApplyError> {
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
            let outcome: Option<String> = lua::helper("write", (bufnr, autocmds, mlua::Value::Nil, bang))
                .map_err(|e| failed("writing the file", &e))?;
            return error(outcome);
        }
    };
    let tmp =
        crate::core::fsutil::reserve_temp(target).map_err(|e| failed("creating a temp file beside the file", &e))?;
    let result = super::lua_path(&tmp)
        .and_then(|name| lua::helper::<_, Option<String>>("write", (bufnr, autocmds, name, true)))
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
fn replace(bufnr: i32, autocmds: &'static str, tmp: &Path, target: &Path, durable: bool) -> Result<(), ApplyError> {
    crate::core::fsutil::finish_replace(tmp, target, durable)
        .map_err(|e| ApplyError::Failed(format!("cannot replace {}: {e}", target.display())))?;
    file_record::record_saved(bufnr);
    lua::helper::<_, ()>("mark_written", (bufnr, autocmds))
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
    autocmds: &'static str,
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

/// After a clean buffer took its file's new text: the file's format as
/// read, not modified, and Neovim's record of the file up to date (no
/// prompt at the next `:w`, `u` marks the buffer modified). False when the
/// user typed meanwhile.
pub fn mark_reloaded(bufnr: i32, tick: u32, disk: &DiskText) -> Result<bool, String> {
    let err = |e: mlua::Error| api_err("marking the buffer saved", e);
    let format = (bufnr, tick, disk.line_end.name(), disk.bomb, disk.encoding, disk.eol);
    if !lua::helper::<_, bool>("set_file_format", format).map_err(err)? {
        return Ok(false);
    }
    if !file_record::record_saved(bufnr) {
        lua::helper::<_, ()>("checktime_quietly", bufnr).map_err(err)?;
    }
    lua::helper::<_, ()>("set_unmodified", bufnr).map_err(err)?;
    Ok(true)
}

/// A clean buffer takes its file's new text from disk: `hunks` as one undo
/// step, then the file's format and Neovim's record of the file, all in one
/// main-thread job (no user input between them).
pub fn reload(bufnr: i32, tick: u32, hunks: Vec<Hunk>, disk: DiskText) -> Result<(), ApplyError> {
    let new_tick = if hunks.is_empty() { tick } else { apply(bufnr, tick, &hunks, None)? };
    match mark_reloaded(bufnr, new_tick, &disk) {
        Ok(true) => Ok(()),
        Ok(false) => Err(ApplyError::Changed),
        Err(e) => Err(ApplyError::Failed(e)),
    }
}
