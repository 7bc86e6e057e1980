//! The Claude Code front-end (also OpenCode's TUI): its port, token and
//! lockfile (`~/.claude/ide/<port>.lock`), MCP over the shared WebSocket
//! loop (`serve::websocket`), and the selection it pushes.
//!
//! Its clients say who they are in `initialize` (`protocol::client_kind`):
//! each is announced by that name (events, statusline), at the latest
//! [`NAME_DEADLINE`] after it connects, and gets line numbers as it reads
//! them (OpenCode from 1).

use crate::core::sync::LockExt;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;

use super::protocol::{self, ClientKind, Lines, Lockfile, AUTH_HEADER, CLAUDE_CODE, LOCK_EXTENSION, SUBPROTOCOL};
use super::tools;
use crate::core::log;
use crate::core::published::SelectionSnapshot;
use crate::core::review::Owner;
use crate::mcp;
use crate::serve::admission::TokenIn;
use crate::serve::budget::Held;
use crate::serve::discovery::{DiscoveryError, DiscoveryFile, PidIn};
use crate::serve::endpoint::Endpoint;
use crate::serve::front_end::{announce, base_status, Announce, FrontEnd, StartError, Started};
use crate::serve::hub::Hub;
use crate::serve::listener::{listen_loopback, PortChoice};
use crate::serve::registry::Agent;
use crate::serve::tasks::AbortOnDrop;
use crate::serve::websocket::{self, CloseCode, Outbox, Outgoing, Protocol};

pub const AGENT: Agent = Agent { id: "claude", name: "Claude" };

/// When the selection is sent again after a client connects (see [`push_selection`]).
const RESEND_AFTER_CONNECT: [Duration; 2] = [Duration::from_millis(500), Duration::from_millis(2000)];
/// A client that has not said who it is by then is announced as Claude.
const NAME_DEADLINE: Duration = Duration::from_secs(1);

pub struct ClaudeServer {
    pub endpoint: Endpoint,
    pub port: u16,
    pub lockfile: DiscoveryFile,
    clients: Mutex<HashMap<u64, Peer>>,
}

/// Where a client's notifications go, and how it counts lines.
struct Peer {
    outbox: Outbox,
    lines: Lines,
}

/// What the front-end keeps of one client; dropping it ends its pusher.
pub struct Client {
    server: Arc<ClaudeServer>,
    owner: Owner,
    outbox: Outbox,
    /// Started by `notifications/initialized` (OpenCode sends nothing
    /// more), `tools/list`, and started again by `ide_connected` (Claude
    /// Code, whose handler comes a moment after it: see RESEND_AFTER_CONNECT).
    pusher: Mutex<Option<AbortOnDrop<Option<()>>>>,
    /// Announces the client as Claude at NAME_DEADLINE unless it said who
    /// it is first; dropped once it did.
    naming: Mutex<Option<AbortOnDrop<Option<()>>>>,
    /// Who it said it is (Claude Code until then).
    kind: Mutex<ClientKind>,
}

impl Drop for Client {
    fn drop(&mut self) {
        self.server.clients.locked().remove(&self.owner.session);
    }
}

impl Client {
    /// Starts the selection pusher unless it runs; `again`: starts it anew
    /// (the state now at once, then the resends after it).
    fn start_pushing(&self, again: bool) {
        let mut pusher = self.pusher.locked();
        if pusher.is_none() || again {
            let lines = self.kind.locked().lines;
            let task = push_selection(self.server.endpoint.hub.clone(), self.outbox.clone(), lines);
            // (Replacing the old pusher aborts it.)
            *pusher = Some(AbortOnDrop(self.server.endpoint.hub.spawn(task)));
        }
    }

    /// The client said who it is (or its first message was not
    /// `initialize`): announced by that name, once.
    fn name(&self, kind: ClientKind) {
        let Some(deadline) = self.naming.locked().take() else { return };
        drop(deadline);
        *self.kind.locked() = kind;
        if let Some(peer) = self.server.clients.locked().get_mut(&self.owner.session) {
            peer.lines = kind.lines;
        }
        if self.server.endpoint.hub.name_client(self.owner, kind.name) && kind != CLAUDE_CODE {
            log::info(format!("claude: client {} is {}", self.owner.session, kind.name));
        }
    }
}

impl ClaudeServer {
    pub fn new(hub: Arc<Hub>, token: String, port: u16, lock_dir: PathBuf) -> Self {
        let endpoint = Endpoint::new(AGENT, hub, token, TokenIn::Header(AUTH_HEADER), Some(port));
        let path = lock_dir.join(format!("{port}.{LOCK_EXTENSION}"));
        let pid_in = PidIn::Field { extension: LOCK_EXTENSION, field: "pid" };
        Self {
            lockfile: DiscoveryFile::new(AGENT.name, lock_dir, path, pid_in),
            endpoint,
            port,
            clients: Mutex::new(HashMap::new()),
        }
    }

    /// Writes the lockfile with the current workspace folders, first
    /// sweeping dead editors' lockfiles when `sweep`.
    pub async fn write_lockfile(&self, sweep: bool) -> Result<PathBuf, DiscoveryError> {
        let contents = || {
            let lock = Lockfile::new(
                std::process::id(),
                self.endpoint.hub.workspace_folders(),
                self.endpoint.hub.options.ide_name.clone(),
                self.endpoint.token().to_owned(),
            );
            serde_json::to_vec_pretty(&lock).expect("a lockfile serializes")
        };
        self.lockfile.write(contents, sweep).await
    }

    /// Queues a notification for every client, its params as the client
    /// counts lines; returns how many it reached.
    pub fn broadcast(&self, method: &str, params: impl Fn(Lines) -> Value) -> usize {
        let texts: HashMap<Lines, String> =
            [Lines::FromZero, Lines::FromOne].into_iter().map(|l| (l, mcp::notification(method, &params(l)))).collect();
        let clients = self.clients.locked();
        clients.values().filter(|peer| peer.outbox.push(texts[&peer.lines].clone())).count()
    }
}

impl Protocol for ClaudeServer {
    type Client = Client;

    fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    fn subprotocol(&self) -> Option<&'static str> {
        Some(SUBPROTOCOL)
    }

    fn unauthenticated(&self) -> (CloseCode, &'static str) {
        (CloseCode::Policy, "Authentication failed")
    }

    fn names_clients(&self) -> bool {
        true
    }

    fn open(self: &Arc<Self>, outbox: &Outbox, owner: Owner) -> Client {
        let peer = Peer { outbox: outbox.clone(), lines: CLAUDE_CODE.lines };
        self.clients.locked().insert(owner.session, peer);
        let hub = self.endpoint.hub.clone();
        let deadline = self.endpoint.hub.spawn(async move {
            tokio::time::sleep(NAME_DEADLINE).await;
            hub.name_client(owner, AGENT.name);
        });
        Client {
            server: self.clone(),
            owner,
            outbox: outbox.clone(),
            pusher: Mutex::new(None),
            naming: Mutex::new(Some(AbortOnDrop(deadline))),
            kind: Mutex::new(CLAUDE_CODE),
        }
    }

    async fn message(self: &Arc<Self>, client: &Arc<Client>, text: String, held: &mut Held) -> Option<Outgoing> {
        let (id, method, params) = match mcp::decode(&text) {
            Ok(mcp::Incoming::Request { id, method, params }) => (id, method, params),
            Ok(mcp::Incoming::Notification { method, params }) => {
                client.name(CLAUDE_CODE);
                match method.as_str() {
                    // Once initialized, a client gets the selection: OpenCode
                    // sends nothing more.
                    "notifications/initialized" => client.start_pushing(false),
                    // Claude Code's handler comes a moment after ide_connected:
                    // the pusher starts anew from here (RESEND_AFTER_CONNECT).
                    "ide_connected" => {
                        let pid = params.get("pid").and_then(Value::as_u64);
                        log::info(format!("claude: ide_connected from pid {pid:?}"));
                        client.start_pushing(true);
                    }
                    _ => {}
                }
                return None;
            }
            Ok(mcp::Incoming::Response { .. }) => return None,
            Err(bad) => return Some(mcp::error(&bad.id, bad.code, &bad.message).into()),
        };
        drop(text);
        client.name(if method == "initialize" { protocol::client_kind(&params) } else { CLAUDE_CODE });
        // A client that skipped notifications/initialized gets the
        // selection once it lists the tools.
        if method == "tools/list" {
            client.start_pushing(false);
        }
        // openDiff waits for the user: its bytes now belong to the review.
        if method == "tools/call" && params.get("name").and_then(Value::as_str) == Some("openDiff") {
            held.release();
        }
        let hub = &self.endpoint.hub;
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
            Err(e) => {
                crate::log_debug!("claude: {method} failed: {e}");
                mcp::failed(&id, &e)
            }
        };
        Some(reply.into())
    }
}

/// Sends `selection_changed` from the one published selection: at once,
/// then on every change, at most one per `selection_interval_ms`, newest
/// state only (a slow client skips states, never queues them).
async fn push_selection(hub: Arc<Hub>, outbox: Outbox, lines: Lines) {
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
        // One encoding per way of counting lines, shared by every client
        // (Claude Code's with Copilot CLI's).
        let text = crate::serve::vscode::selection_changed(&state, lines);
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
pub fn start(hub: &Arc<Hub>) -> Result<Started, StartError> {
    let lock_dir = protocol::lock_dir_from_env().ok_or(StartError::NoDirectory(
        "claude: cannot find the Claude config directory: set CLAUDE_CONFIG_DIR or HOME",
    ))?;
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
        let mut status = base_status(Some(self.port), &self.lockfile.path, self.endpoint.hub.clients(AGENT.id));
        status["lockfile"] = status["discovery_file"].clone();
        status
    }

    /// Claude Code attaches to the editor whose port this is.
    /// (`OPENCODE_EDITOR_SSE_PORT` is not set: OpenCode dials a port it is
    /// given without the token, which is refused; it finds the lockfile
    /// instead, see lua/amp/opencode.lua.)
    fn terminal_env(&self) -> Vec<(&'static str, String)> {
        vec![("CLAUDE_CODE_SSE_PORT", self.port.to_string()), ("ENABLE_IDE_INTEGRATION", "true".into())]
    }

    fn workspace_changed(self: Arc<Self>) -> Announce {
        self.write_and_announce(false)
    }

    fn stopped(&self) {
        if let Err(e) = self.lockfile.remove() {
            log::warn(format!("cannot remove the Claude lockfile: {e}"));
        }
    }

    /// `at_mentioned`: lines `first..=last` (0-based), each client's way.
    fn mention(&self, path: &std::path::Path, first: usize, last: usize) -> usize {
        self.broadcast("at_mentioned", |lines| protocol::at_mentioned(path, first, last, lines))
    }
}
