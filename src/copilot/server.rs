//! The GitHub Copilot CLI front-end: its private Unix socket, its nonce and
//! lockfile (`~/.copilot/ide/<uuid>.lock`, `$COPILOT_HOME/ide`), its tools
//! over the shared MCP-over-HTTP server (`serve::mcp_http`), and its feed
//! of `selection_changed`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde_json::{json, Value};
use tokio::net::{UnixListener, UnixStream};

use super::protocol::{self, Lockfile, AUTH_HEADER, AUTH_SCHEME, LOCK_EXTENSION};
use super::tools;
use crate::core::log;
use crate::mcp;
use crate::serve::admission::{Policy, TokenIn};
use crate::serve::budget::Held;
use crate::serve::discovery::{pid_alive, DiscoveryError, DiscoveryFile, PidIn};
use crate::serve::front_end::{Announce, FrontEnd, Started};
use crate::serve::hub::Hub;
use crate::serve::listener::{accept_loop, bind_unix, HandshakeSlot};
use crate::serve::mcp_http::sessions::{Session, STREAM_GRACE};
use crate::serve::mcp_http::sse::Feed;
use crate::serve::mcp_http::{self, McpHttp};
use crate::serve::registry::Agent;

pub const AGENT: Agent = Agent { id: "copilot", name: "Copilot" };

pub struct CopilotServer {
    pub hub: Arc<Hub>,
    policy: Policy,
    pub http: McpHttp,
    pub socket: PathBuf,
    pub lockfile: DiscoveryFile,
    opening: tools::Opening,
    /// The processes connected to the socket (the kernel's `SO_PEERCRED`):
    /// their open connections and when their last one closed.
    /// `lua/amp/route.lua` finds the terminal a Copilot runs in from them
    /// (a Unix socket has no port to look up in /proc/net/tcp).
    peers: Mutex<HashMap<u32, (usize, Instant)>>,
}

/// A connection's place in [`CopilotServer::peers`], given back on drop.
struct Peer {
    server: Arc<CopilotServer>,
    pid: u32,
}

impl Drop for Peer {
    fn drop(&mut self) {
        let mut peers = self.server.peers.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((n, since)) = peers.get_mut(&self.pid) {
            *n -= 1;
            *since = Instant::now();
        }
    }
}

impl CopilotServer {
    pub fn new(hub: Arc<Hub>, nonce: String, socket: PathBuf, lock_dir: PathBuf, lock_name: String) -> Self {
        let policy = Policy {
            token: nonce,
            token_in: TokenIn::Scheme { header: AUTH_HEADER, scheme: AUTH_SCHEME },
            allowed_origins: hub.options.allowed_origins.clone(),
            // A Unix socket: the Host must still be a loopback name (Node
            // sends "localhost"), with no port to compare.
            port: None,
        };
        let path = lock_dir.join(lock_name);
        let pid_in = PidIn::Field { extension: LOCK_EXTENSION, field: "pid" };
        Self {
            lockfile: DiscoveryFile::new(AGENT.name, lock_dir, path, pid_in),
            hub,
            policy,
            http: McpHttp::default(),
            socket,
            opening: tools::Opening::default(),
            peers: Mutex::default(),
        }
    }

    /// Writes the lockfile with the current workspace folders, first
    /// sweeping dead editors' lockfiles and sockets when `sweep`.
    pub async fn write_lockfile(&self, sweep: bool) -> Result<PathBuf, DiscoveryError> {
        if sweep {
            if let Some(dir) = self.socket.parent().map(Path::to_path_buf) {
                let _ = tokio::task::spawn_blocking(move || remove_dead_sockets(&dir)).await;
            }
        }
        let contents = || {
            let now_ms =
                std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
            let lock = Lockfile::new(
                &self.socket,
                &self.policy.token,
                std::process::id(),
                now_ms,
                self.hub.workspace_folders(),
                self.hub.options.ide_name.clone(),
            );
            serde_json::to_vec_pretty(&lock).expect("a lockfile serializes")
        };
        self.lockfile.write(contents, sweep).await
    }

    fn peer(self: &Arc<Self>, stream: &UnixStream) -> Option<Peer> {
        let pid = u32::try_from(stream.peer_cred().ok()?.pid()?).ok()?;
        let mut peers = self.peers.lock().unwrap_or_else(|p| p.into_inner());
        // Forget the peers gone for longer than the grace: the map stays
        // as small as the set of live clients.
        peers.retain(|_, (n, since)| *n > 0 || since.elapsed() < STREAM_GRACE);
        peers.entry(pid).or_insert((0, Instant::now())).0 += 1;
        Some(Peer { server: self.clone(), pid })
    }

    /// The processes connected now, or within the last `STREAM_GRACE`:
    /// Copilot renews its connection now and then (a client counts as
    /// connected across that too: `mcp_http::sessions`).
    fn peer_pids(&self) -> Vec<u32> {
        let peers = self.peers.lock().unwrap_or_else(|p| p.into_inner());
        let mut pids: Vec<u32> = peers
            .iter()
            .filter(|(_, (n, since))| *n > 0 || since.elapsed() < STREAM_GRACE)
            .map(|(pid, _)| *pid)
            .collect();
        pids.sort_unstable();
        pids
    }

    /// Queues a notification for every connected session; how many it reached.
    fn broadcast(&self, method: &str, params: &Value) -> usize {
        let text = mcp::notification(method, params);
        self.http.sessions.all().iter().filter(|s| s.connected() && s.send(text.clone())).count()
    }
}

/// Removes the sockets of editors that died (`<pid>.sock` in our private
/// directory, sockets only).
fn remove_dead_sockets(dir: &Path) {
    use std::os::unix::fs::FileTypeExt;
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(protocol::pid_of_socket_name) else { continue };
        let is_socket = entry.file_type().is_ok_and(|t| t.is_socket());
        if is_socket && !pid_alive(pid) && std::fs::remove_file(entry.path()).is_ok() {
            log::info(format!("copilot: removed the stale socket {}", entry.path().display()));
        }
    }
}

impl mcp_http::Protocol for CopilotServer {
    fn agent(&self) -> Agent {
        AGENT
    }

    fn hub(&self) -> &Arc<Hub> {
        &self.hub
    }

    fn policy(&self) -> &Policy {
        &self.policy
    }

    fn http(&self) -> &McpHttp {
        &self.http
    }

    async fn request(
        self: &Arc<Self>,
        session: &Arc<Session>,
        method: &str,
        params: Value,
        held: &mut Held,
    ) -> Result<Value, (i64, String)> {
        // open_diff waits for the user: its place and bytes go back first.
        if tools::waits_for_user(method, &params) {
            held.release();
        }
        let hub = &self.hub;
        let cx = tools::Context {
            editor: hub.editor.as_ref(),
            owner: session.owner,
            workspace_folders: hub.workspace_folders(),
            current_selection: hub.state.selection().map(|s| s.raw.clone()),
            latest_selection: hub.state.latest_range().map(|s| s.raw.clone()),
            opening: &self.opening,
        };
        tools::answer(method, &params, &cx).await
    }

    fn feed(self: &Arc<Self>, _session: &Arc<Session>) -> Option<Feed> {
        Some(super::context::feed(&self.hub))
    }

    /// Copilot asks `server/discover` before `initialize`, without a
    /// session: "method not found" and it goes on with `initialize`.
    fn sessionless(&self, method: &str) -> Option<(i64, String)> {
        (method == "server/discover").then(|| (mcp::METHOD_NOT_FOUND, format!("method not found: {method}")))
    }
}

/// Accepts Copilot CLI connections until the session stops; the sessions
/// end with it (their event streams close).
pub async fn accept(listener: UnixListener, server: Arc<CopilotServer>) {
    let hub = server.hub.clone();
    let serving = server.clone();
    let serve = move |stream: UnixStream, slot: HandshakeSlot| {
        let peer = serving.peer(&stream);
        let serving = serving.clone();
        async move {
            mcp_http::serve(serving, stream, slot).await;
            drop(peer);
        }
    };
    accept_loop(listener, AGENT.id, hub.handshakes.clone(), &hub.tasks, serve).await;
    server.http.sessions.end_all();
}

/// Starts the Copilot CLI front-end: its own socket (in a private
/// directory) and nonce, its lockfile in `~/.copilot/ide/`. Main thread,
/// inside the runtime.
pub fn start(hub: &Arc<Hub>) -> Result<Started, String> {
    let lock_dir = protocol::lock_dir_from_env()
        .ok_or("copilot: cannot find the Copilot config directory: set COPILOT_HOME or HOME")?;
    // SAFETY: geteuid cannot fail.
    let uid = unsafe { libc::geteuid() };
    let (dir, socket) = protocol::socket_path_from_env(uid, std::process::id());
    let cannot = |e: std::io::Error| format!("copilot: cannot listen on {}: {e}", socket.display());
    let listener = bind_unix(&dir, &socket).map_err(cannot)?;
    let listener = UnixListener::from_std(listener).map_err(cannot)?;
    let mut random = [0u8; 16];
    rand::RngCore::fill_bytes(&mut rand::rngs::OsRng, &mut random);
    let nonce = crate::serve::token::generate_token();
    let server = Arc::new(CopilotServer::new(hub.clone(), nonce, socket, lock_dir, protocol::lock_name(random)));
    hub.spawn(accept(listener, server.clone()));
    let announce = server.clone().write_sweeping(true);
    Ok(Started { front_end: server, announce })
}

impl CopilotServer {
    fn write_sweeping(self: Arc<Self>, sweep: bool) -> Announce {
        Box::pin(async move {
            let path = self.write_lockfile(sweep).await?;
            log::info(format!("copilot: listening on {}, lockfile {}", self.socket.display(), path.display()));
            Ok(path)
        })
    }
}

impl FrontEnd for CopilotServer {
    fn agent(&self) -> Agent {
        AGENT
    }

    fn status(&self) -> Value {
        json!({
            "enabled": true,
            "socket": self.socket.to_string_lossy(),
            "lockfile": self.lockfile.path.to_string_lossy(),
            "discovery_file": self.lockfile.path.to_string_lossy(),
            "clients": self.hub.clients(AGENT.id),
            "sessions": self.http.sessions.count(),
            "pids": self.peer_pids(),
        })
    }

    /// Copilot connects to the lockfile whose workspace folder is its
    /// working folder: a terminal started in the workspace needs nothing.
    fn terminal_env(&self) -> Vec<(&'static str, String)> {
        Vec::new()
    }

    fn workspace_changed(self: Arc<Self>) -> Announce {
        self.write_sweeping(false)
    }

    fn stopped(&self) {
        self.http.sessions.end_all();
        if let Err(e) = self.lockfile.remove() {
            log::warn(format!("cannot remove the Copilot lockfile: {e}"));
        }
        if let Err(e) = crate::serve::discovery::remove(&self.socket) {
            log::warn(format!("cannot remove the Copilot socket: {e}"));
        }
    }

    /// `add_selection`: Copilot types `@file:first-last` into its prompt.
    fn mention(&self, path: &Path, first: usize, last: usize) -> usize {
        self.broadcast("add_selection", &protocol::add_selection(path, first, last))
    }
}
