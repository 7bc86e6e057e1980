//! The Claude Code front-end (also OpenCode's TUI): its port, token and
//! lockfile (`~/.claude/ide/<port>.lock`), MCP over the shared WebSocket
//! loop (`serve::websocket`), and the selection it pushes.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;

use super::protocol::{self, Lockfile, AUTH_HEADER, LOCK_EXTENSION, SUBPROTOCOL};
use super::tools;
use crate::core::log;
use crate::core::published::SelectionSnapshot;
use crate::core::review::Owner;
use crate::mcp;
use crate::serve::admission::{Policy, TokenIn};
use crate::serve::budget::Held;
use crate::serve::discovery::{DiscoveryError, DiscoveryFile, PidIn};
use crate::serve::front_end::{announce, base_status, Announce, FrontEnd, Started};
use crate::serve::hub::Hub;
use crate::serve::listener::{listen_loopback, PortChoice};
use crate::serve::registry::Agent;
use crate::serve::tasks::AbortOnDrop;
use crate::serve::websocket::{self, CloseCode, Outbox, Outgoing, Protocol};

pub const AGENT: Agent = Agent { id: "claude", name: "Claude" };

/// When the selection is sent again after a client connects (see [`push_selection`]).
const RESEND_AFTER_CONNECT: [Duration; 2] = [Duration::from_millis(500), Duration::from_millis(2000)];

pub struct ClaudeServer {
    pub hub: Arc<Hub>,
    pub port: u16,
    policy: Policy,
    pub lockfile: DiscoveryFile,
    clients: Mutex<HashMap<u64, Outbox>>,
}

/// What the front-end keeps of one client; dropping it ends its pusher.
pub struct Client {
    server: Arc<ClaudeServer>,
    owner: Owner,
    outbox: Outbox,
    /// Started by `ide_connected` (Claude Code) or `tools/list` (clients
    /// that send no ide_connected).
    pusher: Mutex<Option<AbortOnDrop<Option<()>>>>,
}

impl Drop for Client {
    fn drop(&mut self) {
        self.server.clients.lock().unwrap_or_else(|p| p.into_inner()).remove(&self.owner.session);
    }
}

impl Client {
    fn start_pushing(&self) {
        let mut pusher = self.pusher.lock().unwrap_or_else(|p| p.into_inner());
        if pusher.is_none() {
            let task = push_selection(self.server.hub.clone(), self.outbox.clone());
            *pusher = Some(AbortOnDrop(self.server.hub.spawn(task)));
        }
    }
}

impl ClaudeServer {
    pub fn new(hub: Arc<Hub>, token: String, port: u16, lock_dir: PathBuf) -> Self {
        let policy = Policy {
            token,
            token_in: TokenIn::Header(AUTH_HEADER),
            allowed_origins: hub.options.allowed_origins.clone(),
            port: Some(port),
        };
        let path = lock_dir.join(format!("{port}.{LOCK_EXTENSION}"));
        let pid_in = PidIn::Field { extension: LOCK_EXTENSION, field: "pid" };
        Self {
            lockfile: DiscoveryFile::new(AGENT.name, lock_dir, path, pid_in),
            hub,
            port,
            policy,
            clients: Mutex::new(HashMap::new()),
        }
    }

    /// Writes the lockfile with the current workspace folders, first
    /// sweeping dead editors' lockfiles when `sweep`.
    pub async fn write_lockfile(&self, sweep: bool) -> Result<PathBuf, DiscoveryError> {
        let contents = || {
            let lock = Lockfile::new(
                std::process::id(),
                self.hub.workspace_folders(),
                self.hub.options.ide_name.clone(),
                self.policy.token.clone(),
            );
            serde_json::to_vec_pretty(&lock).expect("a lockfile serializes")
        };
        self.lockfile.write(contents, sweep).await
    }

    /// Queues a notification for every client; returns how many it reached.
    pub fn broadcast(&self, method: &str, params: &Value) -> usize {
        let text = mcp::notification(method, params);
        let clients = self.clients.lock().unwrap_or_else(|p| p.into_inner());
        clients.values().filter(|outbox| outbox.push(text.clone())).count()
    }
}

impl Protocol for ClaudeServer {
    type Client = Client;

    fn agent(&self) -> Agent {
        AGENT
    }

    fn hub(&self) -> &Arc<Hub> {
        &self.hub
    }

    fn policy(&self) -> &Policy {
        &self.policy
    }

    fn subprotocol(&self) -> Option<&'static str> {
        Some(SUBPROTOCOL)
    }

    fn unauthenticated(&self) -> (CloseCode, &'static str) {
        (CloseCode::Policy, "Authentication failed")
    }

    fn open(self: &Arc<Self>, outbox: &Outbox, owner: Owner) -> Client {
        self.clients.lock().unwrap_or_else(|p| p.into_inner()).insert(owner.session, outbox.clone());
        Client { server: self.clone(), owner, outbox: outbox.clone(), pusher: Mutex::new(None) }
    }

    async fn message(self: &Arc<Self>, client: &Arc<Client>, text: String, held: &mut Held) -> Option<Outgoing> {
        let (id, method, params) = match mcp::decode(&text) {
            Ok(mcp::Incoming::Request { id, method, params }) => (id, method, params),
            // The selection is pushed from ide_connected on (and sent again
            // shortly after: see RESEND_AFTER_CONNECT).
            Ok(mcp::Incoming::Notification { method, params }) => {
                if method == "ide_connected" {
                    let pid = params.get("pid").and_then(Value::as_u64);
                    log::info(format!("claude: ide_connected from pid {pid:?}"));
                    client.start_pushing();
                }
                return None;
            }
            Ok(mcp::Incoming::Response { .. }) => return None,
            Err(bad) => return Some(mcp::error(&bad.id, bad.code, &bad.message).into()),
        };
        drop(text);
        // Clients that send no ide_connected (OpenCode) get the selection
        // once they list the tools.
        if method == "tools/list" {
            client.start_pushing();
        }
        // openDiff waits for the user: its bytes now belong to the review.
        if method == "tools/call" && params.get("name").and_then(Value::as_str) == Some("openDiff") {
            held.release();
        }
        let hub = &self.hub;
        let cx = tools::Context {
            editor: hub.editor.as_ref(),
            workspace_folders: hub.workspace_folders(),
            current_selection: hub.state.selection().map(|s| s.raw.clone()),
            latest_selection: hub.state.latest_range().map(|s| s.raw.clone()),
            owner: client.owner,
            max_file_bytes: hub.options.max_file_bytes,
        };
        crate::log_debug!("claude: {method} {}", log::untrusted(&params.to_string()));
        let reply = match tools::answer(&method, &params, &cx).await {
            Ok(result) => mcp::result(&id, result),
            Err((code, message)) => {
                crate::log_debug!("claude: {method} failed: {message}");
                mcp::error(&id, code, &message)
            }
        };
        Some(reply.into())
    }
}

/// Sends `selection_changed` from the one published selection: at once,
/// then on every change, at most one per `selection_interval_ms`, newest
/// state only (a slow client skips states, never queues them).
async fn push_selection(hub: Arc<Hub>, outbox: Outbox) {
    let interval = Duration::from_millis(hub.options.selection_interval_ms);
    let mut selection = hub.state.subscribe_selection();
    selection.mark_changed();
    let mut sent: Option<Arc<SelectionSnapshot>> = None;
    let mut last_at: Option<tokio::time::Instant> = None;
    // Claude Code 2.1.330 registers its selection handler a moment after
    // ide_connected and drops what comes before: the state at connect time is
    // sent again after each of these delays (the same state twice is harmless).
    let mut resends =
        RESEND_AFTER_CONNECT.iter().map(|d| tokio::time::Instant::now() + *d).collect::<Vec<_>>().into_iter();
    let mut resend_at = resends.next();
    loop {
        tokio::select! {
            changed = selection.changed() => if changed.is_err() { return },
            () = async { tokio::time::sleep_until(resend_at.expect("guarded")).await }, if resend_at.is_some() => {
                resend_at = resends.next();
                sent = None;
                selection.mark_changed();
                continue;
            }
        }
        if let Some(at) = last_at {
            tokio::time::sleep_until(at + interval).await;
        }
        let Some(state) = selection.borrow_and_update().clone() else { continue };
        if sent.as_ref().is_some_and(|s| s.raw == state.raw) {
            continue;
        }
        let text = state.encoded("claude", |raw| mcp::notification("selection_changed", &protocol::selection(raw)));
        crate::log_debug!("claude: selection_changed {}", log::untrusted(&text));
        if !outbox.send(text.to_string()).await {
            return;
        }
        last_at = Some(tokio::time::Instant::now());
        sent = Some(state);
    }
}

/// Starts the Claude Code front-end: its own loopback port and token, its
/// lockfile in `~/.claude/ide/` (`$CLAUDE_CONFIG_DIR/ide/`). Main thread,
/// inside the runtime.
pub fn start(hub: &Arc<Hub>) -> Result<Started, String> {
    let lock_dir = protocol::lock_dir_from_env()
        .ok_or("claude: cannot find the Claude config directory: set CLAUDE_CONFIG_DIR or HOME")?;
    let (listener, port) = listen_loopback(AGENT.id, PortChoice::default())?;
    let server = Arc::new(ClaudeServer::new(hub.clone(), crate::serve::token::generate_token(), port, lock_dir));
    websocket::spawn_accepting(server.clone(), listener);
    let announce = server.clone().write_and_announce(true);
    Ok(Started { front_end: server, announce })
}

impl ClaudeServer {
    fn write_and_announce(self: Arc<Self>, sweep: bool) -> Announce {
        let at = format!("127.0.0.1:{}", self.port);
        announce(AGENT, at, async move { self.write_lockfile(sweep).await })
    }
}

impl FrontEnd for ClaudeServer {
    fn agent(&self) -> Agent {
        AGENT
    }

    fn status(&self) -> Value {
        let mut status = base_status(Some(self.port), &self.lockfile.path, self.hub.clients(AGENT.id));
        status["lockfile"] = status["discovery_file"].clone();
        status
    }

    /// Claude Code and OpenCode attach to the editor whose port this is.
    fn terminal_env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("CLAUDE_CODE_SSE_PORT", self.port.to_string()),
            ("OPENCODE_EDITOR_SSE_PORT", self.port.to_string()),
            ("ENABLE_IDE_INTEGRATION", "true".into()),
        ]
    }

    fn workspace_changed(self: Arc<Self>) -> Announce {
        self.write_and_announce(false)
    }

    fn stopped(&self) {
        if let Err(e) = self.lockfile.remove() {
            log::warn(format!("cannot remove the Claude lockfile: {e}"));
        }
    }

    /// `at_mentioned`: lines are 0-based, end inclusive.
    fn mention(&self, path: &std::path::Path, first: usize, last: usize) -> usize {
        self.broadcast("at_mentioned", &protocol::at_mentioned(path, first, last))
    }
}
