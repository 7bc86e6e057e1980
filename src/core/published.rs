//! The editor's state as every agent sees it, published once: the
//! workspace folders, the selection (or cursor), the newest selection that
//! was more than a cursor, the visible files and the names of the loaded
//! buffers. The editor's events write it (one comparison and at most one
//! wake-up per event, on the main thread); each connection of each
//! protocol reads it from a watch channel, so a slow client skips states
//! instead of queueing them, and serving seven agents costs the editor what
//! serving one does.
//!
//! A [`Snapshot`] keeps each protocol's encoding of it: the first client of
//! a protocol that needs a payload encodes it, the others reuse the text.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::Duration;

use tokio::sync::watch;

use super::editor::LoadedBuffers;
use super::filewatch::FileWatch;
use super::selection::RawSelection;
use super::sync::{LockExt, RwLockExt};

/// One published state and its encodings, each made once, by name.
#[derive(Debug)]
pub struct Snapshot<T> {
    pub raw: T,
    /// (encoding name, text): a handful at most (one or two per protocol),
    /// so a short list beats a map.
    encodings: Mutex<Vec<(&'static str, Arc<str>)>>,
}

pub type SelectionSnapshot = Snapshot<RawSelection>;
pub type VisibleFilesSnapshot = Snapshot<Vec<PathBuf>>;

impl<T> Snapshot<T> {
    pub fn new(raw: T) -> Self {
        Self { raw, encodings: Mutex::new(Vec::new()) }
    }

    /// The snapshot as encoding `name` makes it (a protocol's name for one
    /// of its payloads, e.g. `"amp/flat"`), encoded on first use.
    pub fn encoded(&self, name: &'static str, encode: impl FnOnce(&T) -> String) -> Arc<str> {
        let mut encodings = self.encodings.locked();
        if let Some((_, text)) = encodings.iter().find(|(n, _)| *n == name) {
            return text.clone();
        }
        let text: Arc<str> = encode(&self.raw).into();
        encodings.push((name, text.clone()));
        text
    }
}

/// The published editor state of one running session.
#[derive(Debug)]
pub struct EditorState {
    workspace: RwLock<Vec<String>>,
    selection: watch::Sender<Option<Arc<SelectionSnapshot>>>,
    /// The newest selection that was not just a cursor (Claude's
    /// `getLatestSelection`, Copilot's `get_selection`). Kept by the
    /// publisher: a task that watched `selection` for it would be woken by
    /// every cursor move, a cross-thread wake-up (~1 µs) on the main thread.
    latest_range: Mutex<Option<Arc<SelectionSnapshot>>>,
    visible_files: watch::Sender<Option<Arc<VisibleFilesSnapshot>>>,
    /// The names of the loaded buffers, kept by the editor's buffer events:
    /// a read of a file no buffer has loaded goes to the disk without
    /// waiting for the editor, which may be held up (a hit-enter prompt).
    pub loaded_buffers: LoadedBuffers,
    /// The file watcher, when it runs.
    pub file_watch: FileWatch,
    /// Asks the editor to publish its selection and visible files (they
    /// arrive through `publish_*`). Not done when the session starts: the
    /// first read costs the editor's main thread ~0.1 ms of start-up, for
    /// a state no agent may ever ask for. The first reader asks.
    context_reader: OnceLock<ContextReader>,
    context_asked: AtomicBool,
}

/// How the editor is asked for its selection and visible files.
struct ContextReader(Box<dyn Fn() + Send + Sync>);

impl std::fmt::Debug for ContextReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ContextReader")
    }
}

/// How long a client's first message waits for the editor's first read of
/// its selection and visible files ([`EditorState::context_ready`]): longer
/// only while the editor is held up (a hit-enter prompt); then it is
/// answered with what is known.
pub const CONTEXT_WAIT: Duration = Duration::from_secs(1);

impl EditorState {
    pub fn new(workspace_folders: Vec<String>) -> Self {
        Self {
            workspace: RwLock::new(workspace_folders),
            selection: watch::Sender::new(None),
            latest_range: Mutex::new(None),
            visible_files: watch::Sender::new(None),
            loaded_buffers: LoadedBuffers::default(),
            file_watch: FileWatch::default(),
            context_reader: OnceLock::new(),
            context_asked: AtomicBool::new(false),
        }
    }

    /// How the editor is asked for its selection and visible files (once,
    /// by the first reader); without one they are whatever was published.
    pub fn set_context_reader(&self, read: impl Fn() + Send + Sync + 'static) {
        let _ = self.context_reader.set(ContextReader(Box::new(read)));
    }

    /// Asks the editor for its first read, once.
    fn ask_context(&self) {
        if let Some(read) = self.context_reader.get() {
            if !self.context_asked.swap(true, Ordering::AcqRel) {
                (read.0)();
            }
        }
    }

    /// Returns once the editor's selection and visible files have been
    /// published at least once (asking for them the first time), or after
    /// [`CONTEXT_WAIT`]. Every front-end awaits it before serving a client.
    pub async fn context_ready(&self) {
        if self.context_reader.get().is_none() || self.visible_files.borrow().is_some() {
            return;
        }
        let mut visible = self.visible_files.subscribe();
        self.ask_context();
        let _ = tokio::time::timeout(CONTEXT_WAIT, visible.wait_for(Option::is_some)).await;
    }

    pub fn workspace_folders(&self) -> Vec<String> {
        self.workspace.read_locked().clone()
    }

    pub fn set_workspace_folders(&self, folders: Vec<String>) {
        *self.workspace.write_locked() = folders;
    }

    /// The current selection (or cursor), if any was published.
    pub fn selection(&self) -> Option<Arc<SelectionSnapshot>> {
        self.ask_context();
        self.selection.borrow().clone()
    }

    /// The newest selection that was more than a cursor, else the current one.
    pub fn latest_range(&self) -> Option<Arc<SelectionSnapshot>> {
        self.ask_context();
        self.latest_range.locked().clone()
    }

    pub fn visible_files(&self) -> Option<Arc<VisibleFilesSnapshot>> {
        self.ask_context();
        self.visible_files.borrow().clone()
    }

    pub fn subscribe_selection(&self) -> watch::Receiver<Option<Arc<SelectionSnapshot>>> {
        self.ask_context();
        self.selection.subscribe()
    }

    pub fn subscribe_visible_files(&self) -> watch::Receiver<Option<Arc<VisibleFilesSnapshot>>> {
        self.ask_context();
        self.visible_files.subscribe()
    }

    /// Publishes a new selection unless it equals the current one. Cheap
    /// enough for the main thread: a comparison, an allocation and a wake-up.
    pub fn publish_selection(&self, selection: RawSelection) {
        self.selection.send_if_modified(|current| {
            if current.as_ref().is_some_and(|c| c.raw == selection) {
                return false;
            }
            let published = Arc::new(Snapshot::new(selection));
            if !published.raw.cursor_only {
                *self.latest_range.locked() = Some(published.clone());
            }
            *current = Some(published);
            true
        });
    }

    /// [`Self::publish_selection`] for the cursor outside Visual mode, from
    /// borrowed bytes: an unchanged cursor allocates nothing.
    pub fn publish_cursor(&self, path: &[u8], line: usize, col: usize, text: &[u8]) {
        use std::os::unix::ffi::OsStrExt;
        self.selection.send_if_modified(|current| {
            if current.as_ref().is_some_and(|c| c.raw.is_cursor(path, line, col, text)) {
                return false;
            }
            let path = PathBuf::from(std::ffi::OsStr::from_bytes(path));
            *current = Some(Arc::new(Snapshot::new(RawSelection::cursor(path, line, col, text.to_vec()))));
            true
        });
    }

    pub fn publish_visible_files(&self, files: Vec<PathBuf>) {
        self.visible_files.send_if_modified(|current| {
            if current.as_ref().is_some_and(|c| c.raw == files) {
                return false;
            }
            *current = Some(Arc::new(Snapshot::new(files)));
            true
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_encoding_is_made_once_and_shared() {
        let s = VisibleFilesSnapshot::new(vec!["/x".into()]);
        let mut made = 0;
        let a = s.encoded("a", |_| {
            made += 1;
            "A".into()
        });
        let again = s.encoded("a", |_| unreachable!("encoded twice"));
        assert!(Arc::ptr_eq(&a, &again));
        assert_eq!(&*s.encoded("b", |files| format!("{}", files.len())), "1");
        assert_eq!(made, 1);
    }

    #[test]
    fn unchanged_states_wake_nobody_and_ranges_are_remembered() {
        let state = EditorState::new(vec!["/w".into()]);
        let mut rx = state.subscribe_selection();
        rx.mark_unchanged();
        state.publish_cursor(b"/w/a", 1, 2, b"line");
        assert!(rx.has_changed().unwrap());
        rx.mark_unchanged();
        state.publish_cursor(b"/w/a", 1, 2, b"line");
        assert!(!rx.has_changed().unwrap(), "the same cursor published twice");
        assert!(state.latest_range().is_none(), "a cursor is no range");
        let range = RawSelection { cursor_only: false, ..RawSelection::cursor("/w/a".into(), 1, 0, b"ab".to_vec()) };
        state.publish_selection(range.clone());
        state.publish_cursor(b"/w/b", 0, 0, b"");
        assert_eq!(state.latest_range().unwrap().raw, range);
        assert_eq!(state.selection().unwrap().raw.path, PathBuf::from("/w/b"));
        state.publish_visible_files(vec!["/w/a".into()]);
        let mut files = state.subscribe_visible_files();
        files.mark_unchanged();
        state.publish_visible_files(vec!["/w/a".into()]);
        assert!(!files.has_changed().unwrap());
        state.set_workspace_folders(vec!["/v".into()]);
        assert_eq!(state.workspace_folders(), vec!["/v".to_string()]);
    }
}
