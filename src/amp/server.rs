//! The Amp front-end: its port, token and lockfile, the WebSocket protocol
//! of the Amp CLI over the shared loop (`serve::websocket`), and what each
//! client is pushed (plugin metadata, the visible files and the selection).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};

use super::context::{selection_frame, visible_files_frame};
use super::lockfile::{self, Lockfile};
use super::protocol::{encode_notification, Dialect};
use crate::core::log;
use crate::core::published::{SelectionSnapshot, VisibleFilesSnapshot};
use crate::core::review::Owner;
use crate::core::sync::LockExt;
use crate::serve::admission::TokenIn;
use crate::serve::budget::Held;
use crate::serve::discovery::{self, DiscoveryError, DiscoveryFile};
use crate::serve::endpoint::Endpoint;
use crate::serve::front_end::{announce, base_status, Announce, FrontEnd, StartError, Started};
use crate::serve::hub::Hub;
use crate::serve::listener::{listen_loopback, PortChoice};
use crate::serve::registry::Agent;
use crate::serve::tasks::AbortOnDrop;
use crate::serve::websocket::{self, CloseCode, Outbox, Outgoing, Protocol};

pub const AGENT: Agent = Agent { id: "amp", name: "Amp" };

/// How a connection's dialect is stored: unknown until its first request.
pub const DIALECT_UNKNOWN: u8 = 0;
pub const DIALECT_FLAT: u8 = 1;
pub const DIALECT_WRAPPED: u8 = 2;

pub struct AmpServer {
    pub endpoint: Endpoint,
    pub port: u16,
    pub lockfile: DiscoveryFile,
    clients: Mutex<HashMap<u64, (Outbox, Arc<AtomicU8>)>>,
}

/// What the front-end keeps of one client; dropping it ends its pusher.
pub struct Client {
    server: Arc<AmpServer>,
    pub owner: Owner,
    pub dialect: Arc<AtomicU8>,
    _pusher: AbortOnDrop<Option<()>>,
}

impl Drop for Client {
    fn drop(&mut self) {
        self.server.clients.locked().remove(&self.owner.session);
    }
}

impl AmpServer {
    pub fn new(hub: Arc<Hub>, token: String, port: u16, lock_dir: PathBuf) -> Self {
        let endpoint = Endpoint::new(AGENT, hub, token, TokenIn::Query("auth"), Some(port));
        let path = lockfile::path_for(&lock_dir, port);
        Self {
            lockfile: DiscoveryFile::new(AGENT.name, lock_dir, path, lockfile::PID_IN),
            endpoint,
            port,
            clients: Mutex::new(HashMap::new()),
        }
    }

    pub fn token(&self) -> &str {
        self.endpoint.token()
    }

    /// Writes the lockfile with the current workspace folders, first
    /// sweeping dead editors' lockfiles when `sweep`.
    pub async fn write_lockfile(&self, sweep: bool) -> Result<PathBuf, DiscoveryError> {
        let contents = || {
            let lock = Lockfile {
                port: self.port,
                auth_token: self.endpoint.token().to_owned(),
                pid: std::process::id(),
                workspace_folders: self.endpoint.hub.workspace_folders(),
                ide_name: self.endpoint.hub.options.ide_name.clone(),
            };
            serde_json::to_vec_pretty(&lock).expect("a lockfile serializes")
        };
        self.lockfile.write(contents, sweep).await
    }

    pub fn client_count(&self) -> usize {
        self.endpoint.hub.clients(AGENT.id)
    }

    /// Queues notification `name` for every client, each in its own dialect.
    /// A client whose queue is full has stopped reading and is disconnected.
    /// Returns how many clients got it.
    pub fn broadcast(&self, name: &str, payload: &Value) -> usize {
        let mut encoded: [Option<String>; 2] = [None, None];
        let clients = self.clients.locked();
        let mut reached = 0;
        for (outbox, dialect) in clients.values() {
            let wrapped = dialect.load(Ordering::Relaxed) == DIALECT_WRAPPED;
            let text = encoded[wrapped as usize]
                .get_or_insert_with(|| {
                    encode_notification(name, if wrapped { Dialect::Wrapped } else { Dialect::Flat }, payload)
                })
                .clone();
            if outbox.push(text) {
                reached += 1;
            }
        }
        reached
    }

    fn plugin_metadata(&self) -> Value {
        json!({
            "version": self.endpoint.hub.options.plugin_version,
            "pluginDirectory": self.endpoint.hub.options.plugin_directory,
        })
    }
}

impl Protocol for AmpServer {
    type Client = Client;

    fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// The Amp CLI explains a failed authentication to the user only when
    /// the upgrade succeeds and the socket then closes with 1000 and this reason.
    fn unauthenticated(&self) -> (CloseCode, &'static str) {
        (CloseCode::Normal, "Authentication failed")
    }

    fn open(self: &Arc<Self>, outbox: &Outbox, owner: Owner) -> Client {
        let dialect = Arc::new(AtomicU8::new(DIALECT_UNKNOWN));
        // What a newly connected client needs first.
        outbox.push(encode_notification("pluginMetadata", Dialect::Flat, &self.plugin_metadata()));
        self.clients.locked().insert(owner.session, (outbox.clone(), dialect.clone()));
        let hub = &self.endpoint.hub;
        let pusher = hub.spawn(push_context(hub.clone(), outbox.clone(), dialect.clone()));
        Client { server: self.clone(), owner, dialect, _pusher: AbortOnDrop(pusher) }
    }

    async fn message(self: &Arc<Self>, client: &Arc<Client>, text: String, held: &mut Held) -> Option<Outgoing> {
        let reply = super::requests::answer(&text, &self.endpoint.hub, client, held).await;
        Some(reply.into())
    }
}

/// Sends the newest visible files and selection to one client: at once on
/// connect, then whenever they change, at most one selection per
/// `selection_interval_ms` (a burst is coalesced and always ends with the
/// latest state), never the same state twice.
async fn push_context(hub: Arc<Hub>, outbox: Outbox, dialect: Arc<AtomicU8>) {
    let interval = Duration::from_millis(hub.options.selection_interval_ms);
    let mut selection = hub.state.subscribe_selection();
    let mut visible = hub.state.subscribe_visible_files();
    selection.mark_changed();
    visible.mark_changed();
    let mut sent_selection: Option<Arc<SelectionSnapshot>> = None;
    let mut sent_visible: Option<Arc<VisibleFilesSnapshot>> = None;
    let mut last_selection_at: Option<tokio::time::Instant> = None;
    // Visible files go first: an empty list clears the CLI's selection.
    let mut visible_first = true;
    loop {
        let dialect = || current_dialect(&dialect);
        tokio::select! {
            biased;
            changed = visible.changed() => {
                if changed.is_err() { return; }
                let state = visible.borrow_and_update().clone();
                let state = state.unwrap_or_else(|| Arc::new(VisibleFilesSnapshot::new(Vec::new())));
                if sent_visible.as_ref().is_some_and(|s| s.raw == state.raw) { continue; }
                if !outbox.send(visible_files_frame(&state, dialect()).to_string()).await { return; }
                sent_visible = Some(state);
                visible_first = false;
            }
            changed = selection.changed(), if !visible_first => {
                if changed.is_err() { return; }
                if let Some(at) = last_selection_at {
                    tokio::time::sleep_until(at + interval).await;
                }
                let Some(state) = selection.borrow_and_update().clone() else { continue };
                if sent_selection.as_ref().is_some_and(|s| s.raw == state.raw) { continue; }
                if !outbox.send(selection_frame(&state, dialect()).to_string()).await { return; }
                last_selection_at = Some(tokio::time::Instant::now());
                sent_selection = Some(state);
            }
        }
    }
}

fn current_dialect(slot: &AtomicU8) -> Dialect {
    if slot.load(Ordering::Relaxed) == DIALECT_WRAPPED {
        Dialect::Wrapped
    } else {
        Dialect::Flat
    }
}

/// Records the dialect of a connection's first request.
pub fn note_dialect(slot: &AtomicU8, dialect: Dialect) {
    let value = match dialect {
        Dialect::Flat => DIALECT_FLAT,
        Dialect::Wrapped => DIALECT_WRAPPED,
    };
    let _ = slot.compare_exchange(DIALECT_UNKNOWN, value, Ordering::Relaxed, Ordering::Relaxed);
}

/// Starts the Amp front-end: its listener on 127.0.0.1 (the port the
/// options choose, the previous session's first), its lockfile in
/// `~/.local/share/amp/ide/` (`$XDG_DATA_HOME`, `$AMP_DATA_HOME`). Main
/// thread, inside the runtime.
pub fn start(hub: &Arc<Hub>) -> Result<Started, StartError> {
    let lock_dir = lockfile::lock_dir_from_env()
        .ok_or(StartError::NoDirectory("cannot find a data directory for the lockfile: set XDG_DATA_HOME or HOME"))?;
    // Made here, on the main thread, when missing: a thread creating
    // `$XDG_DATA_HOME` while Neovim's own `mkdir -p` does makes Neovim's
    // fail (E739). When it is there (every start but the first) the
    // runtime's write checks it (`discovery::ensure_dir`: links, owner,
    // modes), off the main thread.
    if !lock_dir.is_dir() {
        if let Err(e) = discovery::ensure_dir(&lock_dir) {
            log::warn(format!("cannot create the lockfile directory {}: {e}", lock_dir.display()));
        }
    }
    let o = &hub.options;
    let choice = PortChoice { port: o.port, range: o.port_range, preferred: o.preferred_port };
    let (listener, port) = listen_loopback(AGENT.id, choice)?;
    let server = Arc::new(AmpServer::new(hub.clone(), crate::serve::token::generate_token(), port, lock_dir));
    websocket::spawn_accepting(server.clone(), listener);
    let announce = server.clone().write_and_announce(true);
    Ok(Started { front_end: server, announce })
}

impl AmpServer {
    fn write_and_announce(self: Arc<Self>, sweep: bool) -> Announce {
        let at = format!("127.0.0.1:{}", self.port);
        announce(AGENT, at, async move { self.write_lockfile(sweep).await })
    }
}

impl FrontEnd for AmpServer {
    fn agent(&self) -> Agent {
        AGENT
    }

    fn status(&self) -> Value {
        let mut status = base_status(Some(self.port), &self.lockfile.path, self.client_count());
        status["lockfile"] = status["discovery_file"].clone();
        status
    }

    /// None: the Amp CLI finds the editor by its lockfile's workspace alone.
    fn terminal_env(&self) -> Vec<(&'static str, String)> {
        Vec::new()
    }

    fn workspace_changed(self: Arc<Self>) -> Announce {
        self.write_and_announce(false)
    }

    fn stopped(&self) {
        if let Err(e) = self.lockfile.remove() {
            log::warn(format!("cannot remove the lockfile: {e}"));
        }
    }

    /// `userSentMessage` / `appendToPrompt` (the shipping Amp CLI ignores
    /// both; `:Amp open` terminals get the text typed instead).
    fn send_text(&self, submit: bool, text: &str) -> usize {
        let name = if submit { "userSentMessage" } else { "appendToPrompt" };
        self.broadcast(name, &json!({ "message": text }))
    }
}

/// A client of a server on `hub` whose lockfile would go in `dir`, for the
/// request tests.
#[cfg(test)]
pub fn test_client(hub: &Arc<Hub>, dir: &std::path::Path) -> Client {
    let server = Arc::new(AmpServer::new(hub.clone(), "t".into(), 0, dir.to_path_buf()));
    let dialect = Arc::new(AtomicU8::new(DIALECT_UNKNOWN));
    Client { server, owner: Owner::new(AGENT.name), dialect, _pusher: AbortOnDrop(tokio::spawn(async { None })) }
}
