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
//!   knows the old timestamp, so a plain `:w` asks before overwriting.
//!
//! Writes by Neovim itself and by `editFile` are remembered by their stat
//! stamp and not reported.

use std::collections::{HashMap, HashSet};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use notify::{RecursiveMode, Watcher};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::nvim::bridge::on_main;
use crate::nvim::buffers::{self, ApplyError};
use crate::nvim::files;
use crate::core::filetext::DiskText;
use crate::core::log;

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
pub async fn run(mut commands: mpsc::UnboundedReceiver<WatchCommand>, debounce: Duration) {
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
                    check(&path, &mut known, true).await;
                }
                Some(WatchCommand::Settle(paths, done)) => {
                    for path in paths.iter().filter(|p| files.contains(*p)) {
                        pending.remove(path);
                        check(path, &mut known, false).await;
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
                    check(&path, &mut known, false).await;
                }
            }
        }
    }
}

/// Looks at one file after its writes settled and brings its buffer up to date.
async fn check(path: &Path, known: &mut HashMap<PathBuf, Option<Stamp>>, take: bool) {
    let now = stamp(path).await;
    let before = known.get(path).copied().flatten();
    if !take && now.is_some() && now == before {
        return; // our own write, or nothing really changed
    }
    known.insert(path.to_path_buf(), now);
    let Some(_) = now else {
        if before.is_some() {
            let p = path.to_path_buf();
            let _ = on_main(move || files::report_deleted(&p)).await;
        }
        return;
    };
    let bytes = match crate::core::fsutil::read_regular(path.to_path_buf(), MAX_RELOAD_BYTES).await {
        Ok(bytes) => bytes,
        Err(e) => {
            log::warn(format!("cannot read {} after it changed: {e}", path.display()));
            return;
        }
    };
    let disk = match crate::core::filetext::decode(&bytes, &crate::core::filetext::read_options()) {
        Ok(disk) => disk,
        Err(why) => {
            log::info(format!("{} changed on disk but cannot be read here ({}); left alone", path.display(), why.0));
            return;
        }
    };
    if let Err(e) = reload(path, disk, take).await {
        log::warn(format!("reloading {} failed: {e}", path.display()));
    }
}

/// Files bigger than this are not reloaded into their buffer by the watcher
/// (Neovim's `:checktime` still offers to).
const MAX_RELOAD_BYTES: u64 = 256 * 1024 * 1024;

/// How often a reload is recomputed when the user types meanwhile.
const RELOAD_ATTEMPTS: usize = 3;

/// Puts the disk's text and format into the file's buffer, unless the
/// buffer has unsaved changes and `take` is false.
async fn reload(path: &Path, disk: DiskText, take: bool) -> Result<(), String> {
    for _ in 0..RELOAD_ATTEMPTS {
        let want = vec![path.to_path_buf()];
        let Some(snapshot) = on_main(move || buffers::loaded_text(want)).await.map_err(|e| e.to_string())?? else {
            return Ok(()); // the buffer went away
        };
        let p = path.to_path_buf();
        if snapshot.modified && !take {
            on_main(move || files::report_conflict(&p)).await.map_err(|e| e.to_string())?;
            return Ok(());
        }
        let (bufnr, tick) = (snapshot.bufnr, snapshot.changedtick);
        let hunks = snapshot.hunks_to(&disk.lines())?;
        let unchanged = hunks.is_empty();
        let d = disk.clone();
        match on_main(move || buffers::reload(bufnr, tick, hunks, d)).await.map_err(|e| e.to_string())? {
            Ok(()) if unchanged => {
                on_main(move || files::report_settled(&p)).await.map_err(|e| e.to_string())?;
                return Ok(());
            }
            Ok(()) => {
                on_main(move || files::report_reloaded(&p)).await.map_err(|e| e.to_string())?;
                return Ok(());
            }
            Err(ApplyError::Changed) => continue,
            Err(ApplyError::Failed(e)) => return Err(e),
        }
    }
    Err("the buffer kept changing".into())
}
