//! What every agent's edit and read, and the watcher's reload, wait for and
//! are held to, all agents together: at most [`EDIT_WORK_BYTES`] of files
//! being worked on at once (the copies an edit makes: the buffer's text,
//! its lines, the diff, the bytes written), one edit of a file at a time
//! (an edit is applied in slices: nobody else's edit or read of that file
//! sees it half done), and at most [`MAX_EDIT_LINES`] lines.
//!
//! The in-flight budget (`server.max_inflight_bytes`) bounds the requests
//! waiting here; this bounds what they make of them.

use std::collections::HashMap;
use std::fs::Metadata;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};

use tokio::sync::{OwnedRwLockReadGuard, OwnedRwLockWriteGuard, RwLock, Semaphore, SemaphorePermit};

use super::filetext::LineEnd;
use super::sync::LockExt;

/// Lines a file an agent edits, or the text it puts there, may have: the
/// diff and the editor's work grow with the number of lines, not bytes
/// (30 million empty lines are 30 MB).
pub const MAX_EDIT_LINES: usize = 1 << 20;

/// Bytes of files (the old text plus the new) that edits, reads and reloads
/// work on at once. A bigger one waits until it is alone.
pub const EDIT_WORK_BYTES: u64 = 64 * 1024 * 1024;

/// The budget counts in KiB (a semaphore counts permits in `u32`s).
const PERMIT_BYTES: u64 = 1024;
const WORK_PERMITS: u32 = (EDIT_WORK_BYTES / PERMIT_BYTES) as u32;

static WORK: Semaphore = Semaphore::const_new(WORK_PERMITS as usize);

/// A share of [`EDIT_WORK_BYTES`], given back when dropped.
pub struct WorkPermit(#[allow(dead_code)] SemaphorePermit<'static>);

/// Waits until `bytes` of work fit in the budget (the whole budget for
/// more than it), first come first served.
pub async fn work(bytes: u64) -> WorkPermit {
    let permits = bytes.div_ceil(PERMIT_BYTES).clamp(1, WORK_PERMITS as u64) as u32;
    // The semaphore is never closed.
    WorkPermit(WORK.acquire_many(permits).await.expect("the edit work budget is never closed"))
}

/// A file by identity (device, inode): every name of it.
type FileId = (u64, u64);

/// One lock per file while someone holds it; forgotten when nobody does.
static FILES: Mutex<Option<HashMap<FileId, Weak<RwLock<()>>>>> = Mutex::new(None);

fn lock_of(meta: &Metadata) -> Arc<RwLock<()>> {
    let mut files = FILES.locked();
    let files = files.get_or_insert_with(HashMap::new);
    let key = (meta.dev(), meta.ino());
    if let Some(lock) = files.get(&key).and_then(Weak::upgrade) {
        return lock;
    }
    files.retain(|_, lock| lock.strong_count() > 0);
    let lock = Arc::new(RwLock::new(()));
    files.insert(key, Arc::downgrade(&lock));
    lock
}

/// Held for a whole edit of the file `meta` describes: no other edit or
/// read of it runs meanwhile.
pub async fn edit_of(meta: &Metadata) -> OwnedRwLockWriteGuard<()> {
    lock_of(meta).write_owned().await
}

/// Held while a read of the file `meta` describes takes its text: not in
/// the middle of an edit of it.
pub async fn read_of(meta: &Metadata) -> OwnedRwLockReadGuard<()> {
    lock_of(meta).read_owned().await
}

/// The number of buffer lines `text` makes with `line_end` (as
/// `filetext::split_lines` splits it), counted without splitting.
pub fn line_count(text: &str, line_end: LineEnd) -> usize {
    if text.is_empty() {
        return 0;
    }
    let sep = if line_end == LineEnd::Mac { b'\r' } else { b'\n' };
    let separators = text.as_bytes().iter().filter(|&&b| b == sep).count();
    separators + usize::from(!text.as_bytes().ends_with(&[sep]))
}

/// An edit refused for its size in lines: `what` ("the file", "the new
/// text") of `path` has `lines` lines.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot edit {}: {what} has {lines} lines, more than the {MAX_EDIT_LINES} an agent's edit may have", path.display())]
pub struct TooManyLines {
    pub path: PathBuf,
    pub what: &'static str,
    pub lines: usize,
}

/// Refuses an edit of `path` whose `what` has `lines` lines, if that is
/// more than an edit may have.
pub fn too_many_lines(path: &Path, what: &'static str, lines: usize) -> Result<(), TooManyLines> {
    if lines > MAX_EDIT_LINES {
        return Err(TooManyLines { path: path.to_path_buf(), what, lines });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::filetext::split_lines;
    use crate::testutil::TempDir;

    #[test]
    fn lines_are_counted_as_they_are_split() {
        for text in ["", "a", "a\n", "\n", "\n\n", "a\nb", "a\r\nb\r\n", "a\rb\r", "a\rb"] {
            for end in [LineEnd::Unix, LineEnd::Dos, LineEnd::Mac] {
                assert_eq!(line_count(text, end), split_lines(text, end).0.len(), "{text:?} {end:?}");
            }
        }
        let at = "\n".repeat(MAX_EDIT_LINES);
        assert_eq!(too_many_lines(Path::new("/f"), "the new text", line_count(&at, LineEnd::Unix)), Ok(()));
        let past = "\n".repeat(MAX_EDIT_LINES + 1);
        let why =
            too_many_lines(Path::new("/f"), "the new text", line_count(&past, LineEnd::Unix)).unwrap_err().to_string();
        assert!(why.contains("1048577 lines, more than the 1048576"), "{why}");
    }

    #[tokio::test]
    async fn work_past_the_budget_waits_and_one_file_is_edited_by_one_at_a_time() {
        let wait = std::time::Duration::from_secs(5);
        // Exactly the budget is granted; a byte more waits until it is given back.
        let all = tokio::time::timeout(wait, work(EDIT_WORK_BYTES)).await.expect("the budget at once");
        let waiting = tokio::spawn(work(1));
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        assert!(!waiting.is_finished(), "one byte past the budget waits");
        drop(all);
        let one = tokio::time::timeout(wait, waiting).await.unwrap().unwrap();
        // A job bigger than the budget takes all of it, once it is alone.
        let bigger = tokio::spawn(work(EDIT_WORK_BYTES * 4));
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        assert!(!bigger.is_finished(), "waits for the byte in use");
        drop(one);
        drop(tokio::time::timeout(wait, bigger).await.unwrap().unwrap());

        let dir = TempDir::new("gate");
        let file = dir.0.join("f");
        std::fs::write(&file, b"x").unwrap();
        let link = dir.0.join("link");
        std::fs::hard_link(&file, &link).unwrap();
        let editing = edit_of(&std::fs::metadata(&file).unwrap()).await;
        let meta = std::fs::metadata(&link).unwrap();
        let read = tokio::spawn(async move { drop(read_of(&meta).await) });
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        assert!(!read.is_finished(), "the same file under another name waits for the edit");
        drop(editing);
        tokio::time::timeout(std::time::Duration::from_secs(5), read).await.unwrap().unwrap();
    }
}
