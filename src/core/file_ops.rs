//! Agents' reads and edits of files, as the user's `:e` and `:w` would do
//! them: the protocol-independent half of `readFile`/`editFile` (and of the
//! edits other agents' protocols make). File I/O and text work happen here,
//! on the tokio side; the editor is reached through [`Editor`] only.
//!
//! An edit's path (docs/architecture.md "How an agent's edit reaches the
//! disk"): the file watcher settles outside changes first; the buffer is
//! snapshotted; refusals as Neovim would refuse `:w`; the hunks that turn
//! the buffer into the new text; then either the bytes are written here and
//! the editor applies the hunks and renames them into place, or the editor
//! applies and writes with its own `:write`. [`retry_while_typing`] is the
//! one loop that recomputes an edit when the user typed meanwhile (the
//! file watcher's reloads use it too).

use std::future::Future;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::buffer::{ApplyError, BufferFormat, BufferText, FileStamp, FinalEol, WritePlan};
use super::checked_file::{self, CheckedPath, Refused, Use, Wanted};
use super::edit_gate::{self, too_many_lines};
use super::edit_plan::EditPlan;
use super::editor::{same_file_names, Editor, EditorError, LoadedBuffers, WriteAutocmds, WriteRequest};
use super::file_error::FileError;
use super::filetext::{self, split_lines};
use super::filewatch::FileWatch;
use super::fsutil;
use super::sliced_apply::{self, Applied};

/// How often an edit is recomputed when the user types between the
/// snapshot and the change.
pub const EDIT_ATTEMPTS: usize = 3;

/// One attempt's outcome, for [`retry_while_typing`].
pub enum Retry<T> {
    Done(T),
    /// The user changed the buffer between the snapshot and the change:
    /// compute it again.
    Changed,
}

/// Runs `attempt` again while it answers [`Retry::Changed`], at most
/// `attempts` times; `None` when the buffer kept changing. The one retry
/// loop of every buffer change made from the tokio side.
pub async fn retry_while_typing<T, F, Fut>(attempts: usize, mut attempt: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Retry<T>>,
{
    for _ in 0..attempts {
        if let Retry::Done(done) = attempt().await {
            return Some(done);
        }
    }
    None
}

/// The outcome of a read or an edit: `Err` is what the agent is told (its
/// request was fine, the file or the editor refused); the outer error means
/// the editor did not answer.
pub type Outcome<T> = Result<Result<T, FileError>, EditorError>;

/// What a file access needs to know of the running server.
pub struct FileAccess<'a> {
    pub editor: &'a dyn Editor,
    pub watch: &'a FileWatch,
    pub loaded: &'a LoadedBuffers,
    /// `edits.max_file_bytes`
    pub max_file_bytes: u64,
    /// `edits.write_autocmds`.
    pub write_autocmds: WriteAutocmds,
}

/// An edit that went through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Edited {
    /// Whether the text changed (a buffer with unsaved changes is written
    /// even when the agent's text is the buffer's).
    pub changed: bool,
    /// False when the file already had the text: nothing was written.
    pub written: bool,
}

impl FileAccess<'_> {
    /// `path` and the other names a loaded buffer may have for it.
    pub async fn names_of(&self, path: &Path) -> Vec<PathBuf> {
        same_file_names(path, self.loaded.names()).await
    }

    /// The text of `abs` as the agent should see it: its loaded buffer's
    /// (as `:w` would write it), else the file's as `:edit` would read it.
    /// Either way only a regular file on a file system that holds data
    /// (`checked_file`) is read, and at most `edits.max_file_bytes` of it.
    pub async fn read(&self, abs: &Path) -> Outcome<String> {
        let max = self.max_file_bytes;
        let paths = self.names_of(abs).await;
        if !self.loaded.maybe(&paths) {
            // No buffer has it: the disk has the text, no need to wait for the editor.
            let size = tokio::fs::metadata(abs).await.map_or(0, |m| m.len().min(max));
            let _work = edit_gate::work(size).await;
            return Ok(read_from_disk(abs, max).await);
        }
        // A buffer's text is never read from a FIFO, device or procfs file
        // (its size is the buffer's business: checked below).
        let wanted = Wanted { directory_ok: false, read_through: false };
        let checked = match checked_file::check(abs, u64::MAX, wanted).await {
            Ok(checked) => Some(checked),
            Err(why) if why.is_not_found() => None,
            Err(why) => return Ok(Err(why.of(abs, Use::ReadOrEdit).into())),
        };
        // Not in the middle of an agent's edit of it.
        let _reading = match &checked {
            Some(checked) => Some(edit_gate::read_of(checked.metadata()).await),
            None => None,
        };
        let _work = edit_gate::work(checked.as_ref().map_or(max, |c| c.metadata().len().min(max))).await;
        let loaded = match self.editor.loaded_text(paths).await {
            Ok(loaded) => loaded,
            Err(e) => return Ok(Err(FileError::Editor(e.refusal()?))),
        };
        Ok(match loaded {
            Some(snapshot) if snapshot.joined.len() as u64 > max => {
                let size = snapshot.joined.len() as u64;
                Err(Refused::TooBig { size, cap: max }.of(abs, Use::ReadOrEdit).into())
            }
            Some(snapshot) => Ok(snapshot.file_text()),
            None => read_from_disk(abs, max).await,
        })
    }

    /// Replaces the text of `abs` with what `new_text` makes of its
    /// buffer's text (the buffer loaded for it if needed) as one undo step,
    /// and writes it: the bytes on disk are the bytes the user's `:w` would
    /// write. `new_len`: about how long the new text is (for the work
    /// budget, `edit_gate`).
    pub async fn edit(
        &self,
        abs: &Path,
        new_len: u64,
        new_text: impl Fn(&BufferText) -> Result<Arc<String>, FileError>,
    ) -> Outcome<Edited> {
        let max = self.max_file_bytes;
        // Read through here, off the main thread: the editor loads the file
        // into a buffer for the edit if none has it.
        let wanted = Wanted { directory_ok: false, read_through: true };
        let checked = match checked_file::check(abs, max, wanted).await {
            Ok(checked) => checked,
            Err(why) => return Ok(Err(why.of(abs, Use::ReadOrEdit).into())),
        };
        if let Err(why) = writable(abs, checked.metadata()) {
            return Ok(Err(why));
        }
        // One edit of a file at a time: each is applied in slices.
        let _editing = edit_gate::edit_of(checked.metadata()).await;
        let paths = self.names_of(abs).await;
        // What an editor killed mid-save left beside the file goes, written or not.
        let beside = abs.to_path_buf();
        let _ = tokio::task::spawn_blocking(move || fsutil::remove_orphaned_temps_of(&beside)).await;
        let work = checked.metadata().len().saturating_add(new_len);
        let edited = retry_while_typing(EDIT_ATTEMPTS, || self.edit_once(abs, &checked, &paths, work, &new_text)).await;
        edited.unwrap_or_else(|| Ok(Err(FileError::KeptChanging { path: abs.to_path_buf() })))
    }

    async fn edit_once(
        &self,
        abs: &Path,
        checked: &CheckedPath,
        paths: &[PathBuf],
        work: u64,
        new_text: &impl Fn(&BufferText) -> Result<Arc<String>, FileError>,
    ) -> Retry<Outcome<Edited>> {
        // A write by someone else that the watcher has not taken in yet: take
        // it in first (or learn that it conflicts with unsaved changes). Not
        // while holding a share of the work budget: a reload needs one too.
        self.watch.settle(paths).await;
        let _work = edit_gate::work(work).await;
        match self.try_edit(abs, checked, paths, new_text).await {
            Err(e) => Retry::Done(Err(e)),
            Ok(Err(Attempt::Changed)) => Retry::Changed,
            Ok(Err(Attempt::Refused(why))) => Retry::Done(Ok(Err(why))),
            Ok(Ok(edited)) => {
                // Our own write is not an outside change.
                for p in paths {
                    self.watch.note_written(p);
                }
                Retry::Done(Ok(Ok(edited)))
            }
        }
    }

    async fn try_edit(
        &self,
        abs: &Path,
        checked: &CheckedPath,
        paths: &[PathBuf],
        new_text: &impl Fn(&BufferText) -> Result<Arc<String>, FileError>,
    ) -> Result<Result<Edited, Attempt>, EditorError> {
        let max = self.max_file_bytes;
        let refuse = |why: FileError| Ok(Err(Attempt::Refused(why)));
        let path = || abs.to_path_buf();
        let stamp: FileStamp = match tokio::fs::metadata(abs).await {
            Ok(m) => (m.mtime(), m.mtime_nsec(), m.size(), m.ino()),
            Err(source) => return refuse(FileError::Io { path: path(), source }),
        };
        let snapshot = match self.editor.text_for_edit(paths.to_vec(), checked.clone()).await {
            Ok(s) => s,
            Err(e) => return refuse(FileError::Editor(e.refusal()?)),
        };
        let (bufnr, format, modified) = (snapshot.bufnr, snapshot.format, snapshot.modified);
        if let Err(why) = refused_by_buffer(abs, &format) {
            return refuse(why);
        }
        if let Err(why) = too_many_lines(abs, "the file", snapshot.line_count) {
            return refuse(why.into());
        }
        let new_text = match new_text(&snapshot) {
            Ok(text) => text,
            Err(why) => return refuse(why),
        };
        if new_text.len() as u64 > max {
            let size = new_text.len() as u64;
            return refuse(Refused::TooBig { size, cap: max }.of(abs, Use::ReadOrEdit).into());
        }
        // Counted before anything is split: the lines' table grows with them.
        if let Err(why) = too_many_lines(abs, "the new text", edit_gate::line_count(&new_text, format.line_end)) {
            return refuse(why.into());
        }
        let (new_lines, new_final_eol) = split_lines(&new_text, format.line_end);
        let hunks = match snapshot.hunks_to(&new_lines) {
            Ok(h) => h,
            Err(source) => return refuse(FileError::NotUtf8 { path: path(), source }),
        };
        // The final end-of-line changes only when the agent's text changes
        // it; otherwise :w treats it as it treats the user's own writes. An
        // empty buffer's text ("") has none to take away, whatever
        // 'endofline' says (Neovim sets it when it reads an empty file).
        let had_eol = format.eol && snapshot.line_count > 0;
        let final_eol = (!new_lines.is_empty() && new_final_eol != had_eol).then_some(new_final_eol);
        let changed = !hunks.is_empty() || final_eol.is_some();
        if !changed && !modified {
            // Nothing to do: the file stays as it is, byte for byte.
            return Ok(Ok(Edited { changed: false, written: false }));
        }
        let edit = EditPlan::new(bufnr, new_text.clone(), &new_lines, &hunks, final_eol);
        drop((new_lines, hunks));
        if format.encoding == "latin1" {
            let bad: String = edit.all_lines().flat_map(str::chars).filter(|&c| c > '\u{ff}').take(8).collect();
            if !bad.is_empty() {
                return refuse(FileError::NotLatin1 { path: path(), bad });
            }
        }
        let plan = match write_plan(abs).await {
            Ok(plan) => plan,
            Err(source) => return refuse(FileError::WriteBeside { path: path(), source }),
        };
        let write = WriteRequest { autocmds: self.write_autocmds, stamp };
        // The bytes :w will write, when this side can tell (formatters that
        // BufWritePre runs with "all" change the text first): written here,
        // off the main thread, streamed from the agent's text; the editor
        // only applies and renames.
        let bytes = match &plan {
            WritePlan::Rename { target } if write.autocmds != WriteAutocmds::All && self.editor.records_writes() => {
                Some(DiskBytes { text: new_text.clone(), format, final_eol, target: target.clone() })
            }
            _ => None,
        };
        Ok(match self.apply_and_write(paths, &snapshot, edit, write, plan, bytes).await? {
            Ok(()) => Ok(Edited { changed, written: true }),
            Err(ApplyError::Changed) => Err(Attempt::Changed),
            Err(ApplyError::Failed(why)) => Err(Attempt::Refused(FileError::NotApplied { path: path(), why })),
        })
    }

    /// Applies `edit` (in slices, `core::sliced_apply`), then puts the
    /// file in place: `bytes` (the agent's text as :w writes it) streamed
    /// into a temp file beside it (here, off the main thread) and renamed
    /// over it, or Neovim's own `:write` when there are no `bytes` or
    /// someone changed the buffer during the edit (the buffer, not the
    /// agent's text alone, is then what :w writes). A failed write takes
    /// the edit back unless someone changed the buffer meanwhile.
    async fn apply_and_write(
        &self,
        paths: &[PathBuf],
        snapshot: &BufferText,
        edit: EditPlan,
        write: WriteRequest,
        plan: WritePlan,
        bytes: Option<DiskBytes>,
    ) -> Result<Result<(), ApplyError>, EditorError> {
        let bufnr = edit.bufnr;
        // An undo step to take back on failure: only when lines changed
        // ('endofline' alone is no undo step).
        let has_ops = !edit.ops().is_empty();
        let applied = if edit.is_empty() {
            Applied { tick: snapshot.changedtick, interrupted: false }
        } else {
            match sliced_apply::apply(self.editor, paths, snapshot, edit).await? {
                Ok(applied) => applied,
                Err(e) => return Ok(Err(e)),
            }
        };
        let undo = has_ops && !applied.interrupted;
        let bytes = bytes.filter(|_| !applied.interrupted);
        let tmp = match bytes {
            Some(bytes) => match tokio::task::spawn_blocking(move || bytes.write_temp()).await {
                Ok(Ok(tmp)) => tmp,
                failed => {
                    let why = match failed {
                        Ok(Err(e)) => e.to_string(),
                        Err(e) => format!("the writer task failed: {e}"),
                        Ok(Ok(_)) => unreachable!(),
                    };
                    if undo {
                        let _ = self.editor.undo_applied(bufnr, applied.tick).await;
                    }
                    return Ok(Err(ApplyError::Failed(format!("cannot write beside the file: {why}"))));
                }
            },
            None => None,
        };
        match (tmp, plan) {
            (Some(tmp), WritePlan::Rename { target }) => {
                let replaced = self.editor.replace_applied(bufnr, applied.tick, write, tmp.clone(), target).await;
                let _ = tokio::fs::remove_file(&tmp).await; // renamed away, or a leftover
                let replaced = replaced?;
                if replaced.is_err() && undo {
                    let _ = self.editor.undo_applied(bufnr, applied.tick).await;
                }
                Ok(replaced)
            }
            (_, plan) => self.editor.write_applied(bufnr, applied.tick, write, plan, undo).await,
        }
    }
}

/// Why one attempt at an edit did not go through.
enum Attempt {
    Changed,
    Refused(FileError),
}

/// The file's text as `:edit` would read it, within `max` bytes
/// (`checked_file::read`).
async fn read_from_disk(abs: &Path, max: u64) -> Result<String, FileError> {
    let bytes = checked_file::read(abs, max).await.map_err(|why| why.of(abs, Use::ReadOrEdit))?;
    match filetext::decode(&bytes, &filetext::read_options()) {
        Ok(disk) => Ok(disk.written_text(false)),
        Err(source) => Err(FileError::NotText { path: abs.to_path_buf(), source }),
    }
}

/// Refuses a file that may not be written, as `:w` would refuse it (it
/// has no write permission bits, or this user may not write it).
fn writable(path: &Path, meta: &std::fs::Metadata) -> Result<(), FileError> {
    let no_write_bits = meta.permissions().mode() & 0o222 == 0;
    let denied = || {
        let Ok(c) = std::ffi::CString::new(path.as_os_str().as_bytes()) else { return true };
        // SAFETY: a valid NUL-terminated path; access() only reads it.
        unsafe { libc::access(c.as_ptr(), libc::W_OK) != 0 }
    };
    if no_write_bits || denied() {
        return Err(FileError::ReadOnly { path: path.to_path_buf(), mode: meta.permissions().mode() & 0o7777 });
    }
    Ok(())
}

/// Refuses a buffer that may not take an agent's edit, as Neovim would
/// refuse the user's `:w` (or would lose someone's text).
fn refused_by_buffer(path: &Path, format: &BufferFormat) -> Result<(), FileError> {
    let path = path.to_path_buf();
    if !format.is_file {
        Err(FileError::NotAFileBuffer { path })
    } else if format.readonly {
        Err(FileError::ReadOnlyBuffer { path })
    } else if format.conflict {
        Err(FileError::Conflict { path })
    } else {
        Ok(())
    }
}

/// Renamed into place when that keeps the file's identity (readers then see
/// the old or the new file, never a mix); written in place otherwise, as
/// Neovim's `'backupcopy'` "auto" decides.
async fn write_plan(path: &Path) -> std::io::Result<WritePlan> {
    let path = path.to_path_buf();
    tokio::task::spawn_blocking(move || {
        let target = std::fs::canonicalize(&path)?;
        if path != target && std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_symlink()) {
            return Ok(WritePlan::InPlace);
        }
        if !fsutil::rename_keeps_identity(&target) {
            return Ok(WritePlan::InPlace);
        }
        Ok(WritePlan::Rename { target })
    })
    .await
    .map_err(std::io::Error::other)?
}

/// The bytes `:w` writes once an edit is in the buffer, to be written
/// beside `target`: the agent's `text` split into the buffer's lines, the
/// buffer's format, and its final end-of-line as the edit leaves it
/// (`final_eol`; 'fixendofline' adds one unless the edit took it away).
struct DiskBytes {
    text: Arc<String>,
    format: BufferFormat,
    final_eol: FinalEol,
    target: PathBuf,
}

impl DiskBytes {
    /// A temp file beside the target holding them: UTF-8 streamed from the
    /// text (never copied whole); `None` for an encoding only Neovim
    /// converts to.
    fn write_temp(self) -> std::io::Result<Option<PathBuf>> {
        let DiskBytes { text, format, final_eol, target } = self;
        let eol = final_eol.unwrap_or(format.eol);
        let fixeol = format.fixeol && final_eol != Some(false);
        let (lines, _) = filetext::lines_of(&text, format.line_end);
        let sep = format.line_end.as_str().as_bytes();
        if format.encoding == "utf-8" {
            let tmp = fsutil::write_temp_with(&target, |out| {
                if format.bomb {
                    out.write_all(b"\xEF\xBB\xBF")?;
                }
                let mut any = false;
                for (i, line) in lines.enumerate() {
                    if i > 0 {
                        out.write_all(sep)?;
                    }
                    out.write_all(line.as_bytes())?;
                    any = true;
                }
                if any && (eol || fixeol) {
                    out.write_all(sep)?;
                }
                Ok(())
            })?;
            return Ok(Some(tmp));
        }
        let lines: Vec<&str> = lines.collect();
        let joined = lines.join("\n").into_bytes();
        let text = filetext::written_text(joined, lines.is_empty(), format.line_end, eol || fixeol);
        match filetext::encode(text, format.encoding, format.bomb) {
            Some(bytes) => fsutil::write_temp(&target, &bytes).map(Some),
            None => Ok(None),
        }
    }
}
