//! Files changed on disk by someone else (an agent, a formatter, git).
//!
//! The shipping Amp CLI writes files itself, so a buffer can go stale while
//! the user looks at it. This watches the directories of the files loaded in
//! buffers (agents often write a temporary file and rename it over the old
//! one, which a watch on the file itself would lose), debounces bursts of
//! writes per file, and then:
//! - a buffer without unsaved changes takes the new text at once, as one
//!   undoable step that replaces only the changed hunks (cursor, marks and
//!   folds elsewhere stay);
//! - a buffer with unsaved changes keeps them: the user is told once and
//!   settles it with `:Amp diff`, `:Amp take` or `:Amp keep`. Neovim still
//!   knows the old timestamp, so a plain `:w` asks before overwriting. When
//!   the new file holds exactly the buffer's text, the buffer counts as
//!   saved instead.
//!
//! Writes by Neovim itself and by `editFile` are remembered by their stat
//! stamp and not reported.

use std::collections::{HashMap, HashSet};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use notify::{RecursiveMode, Watcher};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::buffer::{ApplyError, NotUtf8};
use super::edit_gate::{self, too_many_lines, TooManyLines};
use super::edit_plan::EditPlan;
use super::editor::{Editor, EditorError, FileChange};
use super::file_ops::{retry_while_typing, Retry};
use super::filetext::{DiskText, FileFormat};
use super::log;
use super::sliced_apply::{self, Applied};

/// What the watcher is told from the rest of the plugin.
#[derive(Debug)]
pub enum WatchCommand {
    /// The files of all loaded buffers, now.
    SetFiles(Vec<PathBuf>),
    /// Neovim or `editFile` just wrote this file: its new state is known.
    Written(PathBuf),
    /// Replace the buffer's text with the disk's (`:Amp take`).
    Take(PathBuf),
    /// Take in any outside change to these files now (before an edit), then
    /// answer.
    Settle(Vec<PathBuf>, tokio::sync::oneshot::Sender<()>),
}

/// The rest of the plugin's handle on the watcher: empty while watching is
/// off (then every call is a no-op).
#[derive(Debug, Default)]
pub struct FileWatch(std::sync::OnceLock<mpsc::UnboundedSender<WatchCommand>>);

impl FileWatch {
    /// Connects the handle to a running watcher; the receiver goes to [`run`].
    pub fn start(&self) -> Option<mpsc::UnboundedReceiver<WatchCommand>> {
        let (tx, rx) = mpsc::unbounded_channel();
        self.0.set(tx).ok().map(|()| rx)
    }

    pub fn is_on(&self) -> bool {
        self.0.get().is_some()
    }

    /// Tells the watcher something; a no-op when watching is off.
    pub fn tell(&self, command: WatchCommand) {
        if let Some(tx) = self.0.get() {
            let _ = tx.send(command);
        }
    }

    /// Has the watcher take in, now, any outside change to these files it
    /// has not handled yet; returns when it has (at once when watching is off).
    pub async fn settle(&self, paths: &[PathBuf]) {
        if self.is_on() {
            let (done, settled) = tokio::sync::oneshot::channel();
            self.tell(WatchCommand::Settle(paths.to_vec(), done));
            let _ = settled.await;
        }
    }

    /// A write of ours (or the editor's): not an outside change.
    pub fn note_written(&self, path: &Path) {
        self.tell(WatchCommand::Written(path.to_path_buf()));
    }
}

/// A file's identity and version as the disk reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    mtime_ns: i128,
    size: u64,
    inode: u64,
}

fn stamp_of(meta: &std::fs::Metadata) -> Stamp {
    Stamp {
        mtime_ns: meta.mtime() as i128 * 1_000_000_000 + meta.mtime_nsec() as i128,
        size: meta.size(),
        inode: meta.ino(),
    }
}

async fn stamp(path: &Path) -> Option<Stamp> {
    tokio::fs::metadata(path).await.ok().map(|m| stamp_of(&m))
}

/// Runs the watcher until `commands` closes (the session ends).
pub async fn run(mut commands: mpsc::UnboundedReceiver<WatchCommand>, debounce: Duration, editor: Arc<dyn Editor>) {
    let editor = editor.as_ref();
    let (events_tx, mut events) = mpsc::unbounded_channel();
    let mut watcher = match notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        let _ = events_tx.send(event);
    }) {
        Ok(w) => w,
        Err(e) => {
            log::error(format!("file watching is off: {e}"));
            return;
        }
    };
    let mut files: HashSet<PathBuf> = HashSet::new();
    let mut dirs: HashSet<PathBuf> = HashSet::new();
    let mut known: HashMap<PathBuf, Option<Stamp>> = HashMap::new();
    let mut pending: HashMap<PathBuf, Instant> = HashMap::new();
    loop {
        let next_due = pending.values().min().copied();
        tokio::select! {
            command = commands.recv() => match command {
                None => return,
                Some(WatchCommand::SetFiles(list)) => {
                    let wanted: HashSet<PathBuf> = list.into_iter().collect();
                    for path in wanted.difference(&files) {
                        known.insert(path.clone(), stamp(path).await);
                    }
                    known.retain(|p, _| wanted.contains(p));
                    pending.retain(|p, _| wanted.contains(p));
                    let wanted_dirs: HashSet<PathBuf> = wanted.iter().filter_map(|p| p.parent().map(Path::to_path_buf)).collect();
                    for dir in dirs.difference(&wanted_dirs) {
                        let _ = watcher.unwatch(dir);
                    }
                    for dir in wanted_dirs.difference(&dirs) {
                        if let Err(e) = watcher.watch(dir, RecursiveMode::NonRecursive) {
                            log::warn(format!("cannot watch {}: {e}", dir.display()));
                        }
                    }
                    files = wanted;
                    dirs = wanted_dirs;
                }
                Some(WatchCommand::Written(path)) => {
                    let now = stamp(&path).await;
                    known.insert(path.clone(), now);
                    pending.remove(&path);
                }
                Some(WatchCommand::Take(path)) => {
                    check(editor, &path, &mut known, true).await;
                }
                Some(WatchCommand::Settle(paths, done)) => {
                    for path in paths.iter().filter(|p| files.contains(*p)) {
                        pending.remove(path);
                        check(editor, path, &mut known, false).await;
                    }
                    let _ = done.send(());
                }
            },
            Some(event) = events.recv() => match event {
                Ok(event) => {
                    for path in event.paths {
                        if files.contains(&path) {
                            pending.insert(path, Instant::now() + debounce);
                        }
                    }
                }
                Err(e) => log::warn(format!("file watch error: {e}")),
            },
            _ = tokio::time::sleep_until(next_due.unwrap_or_else(Instant::now)), if next_due.is_some() => {
                let now = Instant::now();
                let due: Vec<PathBuf> = pending.iter().filter(|(_, at)| **at <= now).map(|(p, _)| p.clone()).collect();
                for path in due {
                    pending.remove(&path);
                    check(editor, &path, &mut known, false).await;
                }
            }
        }
    }
}

/// Looks at one file after its writes settled and brings its buffer up to date.
async fn check(editor: &dyn Editor, path: &Path, known: &mut HashMap<PathBuf, Option<Stamp>>, take: bool) {
    let now = stamp(path).await;
    let before = known.get(path).copied().flatten();
    if !take && now.is_some() && now == before {
        return; // our own write, or nothing really changed
    }
    known.insert(path.to_path_buf(), now);
    let Some(_) = now else {
        if before.is_some() {
            let _ = editor.file_changed(path.to_path_buf(), FileChange::Deleted).await;
        }
        return;
    };
    let bytes = match super::checked_file::read(path, MAX_RELOAD_BYTES).await {
        Ok(bytes) => bytes,
        Err(why) => {
            let why = why.message(path, super::checked_file::Use::Reload);
            log::warn(format!("not reloaded after it changed: {why}"));
            return;
        }
    };
    let disk = match super::filetext::decode(&bytes, &super::filetext::read_options()) {
        Ok(disk) => disk,
        Err(why) => {
            log::info(format!("{} changed on disk but cannot be read here ({why}); left alone", path.display()));
            return;
        }
    };
    if let Err(e) = reload(editor, path, disk, take).await {
        log::warn(format!("reloading {} failed: {e}", path.display()));
    }
}

/// Files bigger than this are not reloaded into their buffer by the watcher
/// (Neovim's `:checktime` still offers to).
const MAX_RELOAD_BYTES: u64 = 256 * 1024 * 1024;

/// How often a reload is recomputed when the user types meanwhile.
const RELOAD_ATTEMPTS: usize = 3;

/// Why a reload did not happen (logged).
#[derive(Debug, PartialEq, thiserror::Error)]
enum NotReloaded {
    /// The user typed during every attempt.
    #[error("the buffer kept changing")]
    KeptChanging,
    #[error(transparent)]
    Editor(#[from] EditorError),
    /// The editor could not apply it (its words).
    #[error("{0}")]
    Failed(String),
    #[error(transparent)]
    TooManyLines(#[from] TooManyLines),
    #[error(transparent)]
    NotUtf8(#[from] NotUtf8),
}

/// Puts the disk's text and format into the file's buffer, unless the
/// buffer has unsaved changes and `take` is false.
async fn reload(editor: &dyn Editor, path: &Path, disk: DiskText, take: bool) -> Result<(), NotReloaded> {
    let format = disk.format();
    let empty = disk.empty;
    // Shared by the attempts and by the slices that apply it: never copied.
    let text = Arc::new(disk.joined);
    let _work = edit_gate::work(2 * text.len() as u64).await;
    let attempt = || reload_once(editor, path, &text, empty, format, take);
    retry_while_typing(RELOAD_ATTEMPTS, attempt).await.unwrap_or(Err(NotReloaded::KeptChanging))
}

async fn reload_once(
    editor: &dyn Editor,
    path: &Path,
    text: &Arc<String>,
    empty: bool,
    format: FileFormat,
    take: bool,
) -> Retry<Result<(), NotReloaded>> {
    let done = |r: Result<(), NotReloaded>| Retry::Done(r);
    let paths = [path.to_path_buf()];
    let snapshot = match editor.loaded_text(paths.to_vec()).await {
        Ok(Some(snapshot)) => snapshot,
        Ok(None) => return done(Ok(())), // the buffer went away
        Err(e) => return done(Err(e.into())),
    };
    let report = |change| async move { Ok(editor.file_changed(path.to_path_buf(), change).await?) };
    let new_lines: Vec<&str> = if empty { Vec::new() } else { text.split('\n').collect() };
    for (what, lines) in [("the buffer", snapshot.line_count), ("the file", new_lines.len())] {
        if let Err(why) = too_many_lines(path, what, lines) {
            return done(Err(why.into()));
        }
    }
    let hunks = match snapshot.hunks_to(&new_lines) {
        Ok(hunks) => hunks,
        Err(e) => return done(Err(e.into())),
    };
    let unchanged = hunks.is_empty();
    // Unsaved changes are kept, unless the disk now holds exactly them (an
    // agent wrote the text the user accepted in a review, which the buffer
    // took at the decision): then the buffer is as good as saved.
    let same_format = snapshot.format.line_end == format.line_end && snapshot.format.eol == format.eol;
    if snapshot.modified && !take && !(unchanged && same_format) {
        drop((new_lines, hunks));
        return done(report(FileChange::Conflict).await);
    }
    let plan = EditPlan::new(snapshot.bufnr, text.clone(), &new_lines, &hunks, None);
    drop((new_lines, hunks));
    let applied = if plan.is_empty() {
        Applied { tick: snapshot.changedtick, interrupted: false }
    } else {
        match sliced_apply::apply(editor, &paths, &snapshot, plan).await {
            Ok(Ok(applied)) => applied,
            Ok(Err(ApplyError::Changed)) => return Retry::Changed,
            Ok(Err(ApplyError::Failed(e))) => return done(Err(NotReloaded::Failed(e))),
            Err(e) => return done(Err(e.into())),
        }
    };
    // Typed into during the reload: the buffer holds that too, unsaved.
    match editor.mark_reloaded(snapshot.bufnr, applied.tick, format, applied.interrupted).await {
        Ok(Ok(())) => done(report(if unchanged { FileChange::Settled } else { FileChange::Reloaded }).await),
        Ok(Err(ApplyError::Changed)) => Retry::Changed,
        Ok(Err(ApplyError::Failed(e))) => done(Err(NotReloaded::Failed(e))),
        Err(e) => done(Err(e.into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::fake_editor::{unix_format, Call, FakeEditor};
    use crate::core::filetext::{decode, LineEnd, ReadOptions};

    fn disk(bytes: &[u8]) -> DiskText {
        decode(bytes, &ReadOptions::default()).unwrap()
    }

    #[tokio::test]
    async fn a_clean_buffer_takes_the_disk_text_and_format() {
        let editor = FakeEditor::new(true);
        let path = Path::new("/w/a.txt");
        editor.open(path, &["old", "same"], false, unix_format());
        reload(&editor, path, disk(b"new\r\nsame\r\n"), false).await.unwrap();
        let b = editor.buffer(path).unwrap();
        assert_eq!(
            (b.lines, b.format.line_end, b.modified),
            (vec!["new".to_owned(), "same".to_owned()], LineEnd::Dos, false)
        );
        assert_eq!(editor.calls().last(), Some(&Call::FileChanged(path.into(), FileChange::Reloaded)));
    }

    #[tokio::test]
    async fn unsaved_changes_are_kept_and_reported_unless_taken() {
        let editor = FakeEditor::new(true);
        let path = Path::new("/w/a.txt");
        editor.open(path, &["mine"], true, unix_format());
        reload(&editor, path, disk(b"theirs\n"), false).await.unwrap();
        assert_eq!(editor.buffer(path).unwrap().lines, ["mine"]);
        assert_eq!(editor.calls().last(), Some(&Call::FileChanged(path.into(), FileChange::Conflict)));
        reload(&editor, path, disk(b"theirs\n"), true).await.unwrap();
        assert_eq!(editor.buffer(path).unwrap().lines, ["theirs"]);
    }

    #[tokio::test]
    async fn unsaved_text_that_the_disk_now_holds_is_saved_not_a_conflict() {
        let editor = FakeEditor::new(true);
        let path = Path::new("/w/a.txt");
        editor.open(path, &["accepted", "mine"], true, unix_format());
        reload(&editor, path, disk(b"accepted\nmine\n"), false).await.unwrap();
        let b = editor.buffer(path).unwrap();
        assert_eq!((b.lines, b.modified), (vec!["accepted".to_owned(), "mine".to_owned()], false));
        assert_eq!(editor.calls().last(), Some(&Call::FileChanged(path.into(), FileChange::Settled)));
        // The same lines with other line breaks: still the user's to settle.
        editor.open(Path::new("/w/b.txt"), &["x"], true, unix_format());
        reload(&editor, Path::new("/w/b.txt"), disk(b"x\r\n"), false).await.unwrap();
        assert!(editor.buffer(Path::new("/w/b.txt")).unwrap().modified);
        assert_eq!(editor.calls().last(), Some(&Call::FileChanged("/w/b.txt".into(), FileChange::Conflict)));
    }

    #[tokio::test]
    async fn a_reload_is_recomputed_while_the_user_types() {
        let editor = FakeEditor::new(true);
        let path = Path::new("/w/a.txt");
        editor.open(path, &["a"], false, unix_format());
        editor.type_meanwhile(2);
        reload(&editor, path, disk(b"b\n"), false).await.unwrap();
        assert_eq!(editor.buffer(path).unwrap().lines, ["b"]);
        editor.type_meanwhile(3);
        assert_eq!(reload(&editor, path, disk(b"c\n"), false).await, Err(NotReloaded::KeptChanging));
        assert_eq!(editor.buffer(path).unwrap().lines, ["b"]);
    }
}
