//! The listening side: shared state of one running server, the accept loop,
//! the lockfile writer and broadcasts to every client.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch, Notify};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::context::{PublishedSelection, PublishedVisibleFiles, RawSelection};
use super::json_text::JsonText;
use super::lockfile::{self, Lockfile};
use super::options::ServerOptions;
use super::protocol::{encode_notification, Dialect};
use crate::core::editor::{Editor, LoadedBuffers};
use crate::core::filewatch::FileWatch;
use crate::core::log;

/// How a connection's dialect is stored: unknown until its first request.
pub const DIALECT_UNKNOWN: u8 = 0;
pub const DIALECT_FLAT: u8 = 1;
pub const DIALECT_WRAPPED: u8 = 2;

/// What the server keeps of one connected client.
pub struct ClientHandle {
    pub outbound: mpsc::Sender<Outgoing>,
    pub dialect: Arc<AtomicU8>,
    /// Wakes the connection to close it (its queue overflowed).
    pub kick: Arc<Notify>,
}

/// One message queued for a client, and the share of the in-flight budget
/// its request holds until the message is sent (`None` for notifications).
pub struct Outgoing {
    pub text: JsonText,
    pub held: Option<tokio::sync::OwnedSemaphorePermit>,
}

impl From<JsonText> for Outgoing {
    fn from(text: JsonText) -> Self {
        Self { text, held: None }
    }
}

impl From<String> for Outgoing {
    fn from(text: String) -> Self {
        Self { text: text.into(), held: None }
    }
}

/// The connections between accept and a finished handshake, oldest first.
#[derive(Default)]
struct Pending {
    next_id: u64,
    queue: std::collections::VecDeque<(u64, Arc<Notify>, std::time::Instant)>,
    /// Handshake tasks alive, those told to go included: each holds a socket
    /// until its task runs and ends.
    live: usize,
}

/// How many times `max_pending_handshakes` may be pending for a moment when
/// none of them is old enough to be dropped (a burst of real clients).
const PENDING_BURST_FACTOR: usize = 4;

/// A connection's place among the pending handshakes: `cancel` fires when
/// it is dropped to make room; leaving the place (drop) removes it.
pub struct HandshakeSlot {
    shared: Arc<Shared>,
    id: u64,
    pub cancel: Arc<Notify>,
}

impl Drop for HandshakeSlot {
    fn drop(&mut self) {
        let mut pending = self.shared.pending.lock().unwrap_or_else(|p| p.into_inner());
        pending.queue.retain(|(id, _, _)| *id != self.id);
        pending.live -= 1;
        drop(pending);
        self.shared.handshake_ended.notify_waiters();
    }
}

/// State shared by the accept loop, every connection and the Lua-facing
/// functions of one running server.
pub struct Shared {
    pub options: ServerOptions,
    pub token: String,
    pub port: u16,
    pub lock_dir: PathBuf,
    pub workspace: RwLock<Vec<String>>,
    pub clients: Mutex<HashMap<u64, ClientHandle>>,
    pub next_client_id: AtomicU64,
    pub last_error: Mutex<Option<String>>,
    /// Cancelled when the server stops: connections send their close
    /// frames and end, the accept loop returns.
    pub closing: CancellationToken,
    /// Cancelled once the server gave its connections their moment to
    /// close: every task still running is dropped.
    stopped: CancellationToken,
    /// Every task of this server (see [`Shared::spawn`]).
    tasks: TaskTracker,
    /// The latest selection and visible files; each client's pusher sends
    /// the newest state only, so a slow client skips states, never queues them.
    pub selection: watch::Sender<Option<Arc<PublishedSelection>>>,
    /// The newest selection that was not just a cursor (Claude's
    /// `getLatestSelection`). Kept here by the publisher: a task that
    /// watched `selection` for it would be woken by every cursor move, a
    /// cross-thread wake-up (~1 µs) on the main thread each time.
    pub latest_range: std::sync::Mutex<Option<Arc<PublishedSelection>>>,
    pub visible_files: watch::Sender<Option<Arc<PublishedVisibleFiles>>>,
    /// The names of the loaded buffers, kept by the editor's buffer events
    /// (`None` until first told): a `readFile` of a file no buffer has loaded
    /// is read from disk here, without waiting for the main thread, which
    /// may be held up (a hit-enter prompt runs no scheduled callbacks).
    pub loaded_buffers: LoadedBuffers,
    /// The file watcher, when it runs.
    pub file_watch: FileWatch,
    /// The editor the requests read and change.
    pub editor: Arc<dyn Editor>,
    /// Serialises lockfile writes so an older write never lands last.
    lock_writes: tokio::sync::Mutex<()>,
    /// Connections still in their handshake (see [`Shared::begin_handshake`]).
    pending: Mutex<Pending>,
    /// Fires when a handshake task ends (see [`Shared::room_for_a_handshake`]).
    handshake_ended: Notify,
    /// Bytes of requests in flight, across all clients: a frame takes its
    /// length from here when it is read and gives it back once its answer
    /// is sent ([`ServerOptions::max_inflight_bytes`]).
    pub budget: Arc<tokio::sync::Semaphore>,
}

impl Shared {
    pub fn new(options: ServerOptions, editor: Arc<dyn Editor>, token: String, port: u16, lock_dir: PathBuf) -> Self {
        let options_budget = options.max_inflight_bytes;
        Self {
            workspace: RwLock::new(options.workspace_folders.clone()),
            options,
            token,
            port,
            lock_dir,
            clients: Mutex::new(HashMap::new()),
            next_client_id: AtomicU64::new(1),
            last_error: Mutex::new(None),
            closing: CancellationToken::new(),
            stopped: CancellationToken::new(),
            tasks: TaskTracker::new(),
            selection: watch::Sender::new(None),
            latest_range: std::sync::Mutex::new(None),
            visible_files: watch::Sender::new(None),
            loaded_buffers: LoadedBuffers::default(),
            file_watch: FileWatch::default(),
            editor,
            lock_writes: tokio::sync::Mutex::new(()),
            pending: Mutex::new(Pending::default()),
            handshake_ended: Notify::new(),
            budget: Arc::new(tokio::sync::Semaphore::new(options_budget)),
        }
    }

    /// Registers a connection that starts its handshake. When more than
    /// `max_pending_handshakes` are pending, the oldest is told to go: a
    /// flood of half-open connections can hold only that many descriptors.
    /// A connection younger than a quarter of the handshake deadline is not
    /// dropped for this unless `PENDING_BURST_FACTOR` times the limit are
    /// pending: a burst of real clients connecting at once (each handshake
    /// takes a millisecond) all get in, and a flood still holds at most that
    /// many descriptors.
    pub fn begin_handshake(self: &Arc<Self>) -> HandshakeSlot {
        let cancel = Arc::new(Notify::new());
        let max = self.options.max_pending_handshakes;
        let young = std::time::Duration::from_millis(self.options.handshake_timeout_ms / 4);
        let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        pending.next_id += 1;
        pending.live += 1;
        let id = pending.next_id;
        pending.queue.push_back((id, cancel.clone(), std::time::Instant::now()));
        while pending.queue.len() > max {
            let oldest_is_young = pending.queue.front().is_some_and(|(_, _, since)| since.elapsed() < young);
            if oldest_is_young && pending.queue.len() <= max.saturating_mul(PENDING_BURST_FACTOR) {
                break;
            }
            if let Some((_, oldest, _)) = pending.queue.pop_front() {
                // notify_one keeps the wake-up if the task is not waiting yet.
                oldest.notify_one();
            }
        }
        HandshakeSlot { shared: self.clone(), id, cancel }
    }

    /// Before accepting another connection: waits while the handshake tasks
    /// alive (those told to go but not yet run included) hold as many
    /// sockets as a burst may. Under a flood on a busy machine the tasks of
    /// dropped connections may not have run yet; the kernel's backlog holds
    /// the newcomers meanwhile, not this process's descriptors.
    pub async fn room_for_a_handshake(&self) {
        let most = self.options.max_pending_handshakes.saturating_mul(PENDING_BURST_FACTOR + 1);
        loop {
            let ended = self.handshake_ended.notified();
            if self.pending.lock().unwrap_or_else(|p| p.into_inner()).live < most {
                return;
            }
            let _ = tokio::time::timeout(std::time::Duration::from_millis(100), ended).await;
        }
    }

    pub fn pending_handshakes(&self) -> usize {
        self.pending.lock().unwrap_or_else(|p| p.into_inner()).queue.len()
    }

    pub fn lockfile_path(&self) -> PathBuf {
        lockfile::path_for(&self.lock_dir, self.port)
    }

    pub fn workspace_folders(&self) -> Vec<String> {
        self.workspace.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub fn client_count(&self) -> usize {
        self.clients.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    pub fn record_error(&self, message: impl std::fmt::Display) {
        let message = message.to_string();
        log::error(&message);
        *self.last_error.lock().unwrap_or_else(|p| p.into_inner()) = Some(message);
    }

    /// Writes the lockfile (atomically, off the async workers).
    pub async fn write_lockfile(self: &Arc<Self>) -> Result<PathBuf, lockfile::LockfileError> {
        let _guard = self.lock_writes.lock().await;
        let lock = Lockfile {
            port: self.port,
            auth_token: self.token.clone(),
            pid: std::process::id(),
            workspace_folders: self.workspace_folders(),
            ide_name: self.options.ide_name.clone(),
        };
        let dir = self.lock_dir.clone();
        lockfile::write_off_thread("Amp", dir.clone(), move || lockfile::write(&dir, &lock)).await
    }

    /// Queues notification `name` for every client, each in its own dialect.
    /// A client whose queue is full has stopped reading: it is disconnected
    /// rather than allowed to grow memory. Returns how many clients got it.
    pub fn broadcast(&self, name: &str, payload: &Value) -> usize {
        let mut encoded: [Option<String>; 2] = [None, None];
        let clients = self.clients.lock().unwrap_or_else(|p| p.into_inner());
        let mut reached = 0;
        for client in clients.values() {
            let wrapped = client.dialect.load(Ordering::Relaxed) == DIALECT_WRAPPED;
            let slot = &mut encoded[wrapped as usize];
            let text = slot
                .get_or_insert_with(|| {
                    encode_notification(name, if wrapped { Dialect::Wrapped } else { Dialect::Flat }, payload)
                })
                .clone();
            match client.outbound.try_send(text.into()) {
                Ok(()) => reached += 1,
                Err(mpsc::error::TrySendError::Full(_)) => client.kick.notify_one(),
                Err(mpsc::error::TrySendError::Closed(_)) => {}
            }
        }
        reached
    }

    pub fn plugin_metadata(&self) -> Value {
        json!({
            "version": self.options.plugin_version,
            "pluginDirectory": self.options.plugin_directory,
        })
    }
}

impl Shared {
    /// Runs `task` as one of this server's tasks: [`Shared::stop`] waits for
    /// it a moment, then drops it.
    pub fn spawn<F>(&self, task: F) -> tokio::task::JoinHandle<Option<F::Output>>
    where
        F: std::future::Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.tasks.spawn(self.stopped.clone().run_until_cancelled_owned(task))
    }

    /// Stops the server's tasks: connections are told to close, and those
    /// that have not ended after `grace` are dropped with every other task.
    /// Waits at most `grace` (on the calling thread, without a runtime).
    pub fn stop(&self, runtime: &tokio::runtime::Handle, grace: std::time::Duration) {
        self.closing.cancel();
        self.tasks.close();
        let (ended, wait) = std::sync::mpsc::channel();
        let tasks = self.tasks.clone();
        runtime.spawn(async move {
            tasks.wait().await;
            let _ = ended.send(());
        });
        let _ = wait.recv_timeout(grace);
        self.stopped.cancel();
    }
}

/// Accepts connections until the server stops; each gets its own task.
pub async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    let server = shared.clone();
    shared
        .accept_connections(listener, "amp", move |stream, slot| super::connection::serve(stream, server.clone(), slot))
        .await
}

impl Shared {
    /// Accepts connections until shutdown for one protocol's listener, all
    /// protocols under the same handshake limits: a connection is accepted
    /// only when a pending-handshake slot is free, holds it until `serve`
    /// drops it, and is served as one of the server's tasks.
    pub async fn accept_connections<F, Fut>(self: &Arc<Self>, listener: TcpListener, protocol: &'static str, serve: F)
    where
        F: Fn(tokio::net::TcpStream, HandshakeSlot) -> Fut,
        Fut: std::future::Future<Output = ()> + Send + 'static,
    {
        loop {
            tokio::select! {
                () = self.room_for_a_handshake() => {}
                () = self.closing.cancelled() => return,
            }
            tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok((stream, peer)) => {
                        let _ = stream.set_nodelay(true);
                        log::limited("connection from", log::Level::Debug, format!("{protocol}: connection from {peer}"));
                        let slot = self.begin_handshake();
                        self.spawn(serve(stream, slot));
                    }
                    Err(e) => {
                        // EMFILE and friends: back off instead of spinning.
                        log::limited("accept failed", log::Level::Warn, format!("{protocol}: accept failed: {e}"));
                        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    }
                },
                () = self.closing.cancelled() => return,
            }
        }
    }
}

impl Shared {
    /// Publishes a new selection unless it equals the current one. Cheap
    /// enough for the main thread: a comparison, an allocation and a wake-up.
    pub fn publish_selection(&self, selection: super::context::RawSelection) {
        self.selection.send_if_modified(|current| {
            if current.as_ref().is_some_and(|c| c.raw == selection) {
                return false;
            }
            let published = Arc::new(PublishedSelection::new(selection));
            if !published.raw.cursor_only {
                *self.latest_range.lock().unwrap_or_else(|p| p.into_inner()) = Some(published.clone());
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
            *current = Some(Arc::new(PublishedSelection::new(RawSelection::cursor(path, line, col, text.to_vec()))));
            true
        });
    }

    pub fn publish_visible_files(&self, files: Vec<PathBuf>) {
        self.visible_files.send_if_modified(|current| {
            if current.as_ref().is_some_and(|c| c.raw == files) {
                return false;
            }
            *current = Some(Arc::new(PublishedVisibleFiles::new(files)));
            true
        });
    }
}
