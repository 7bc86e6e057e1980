//! The GitHub Copilot CLI front-end: its private Unix socket, its nonce and
//! lockfile (`~/.copilot/ide/<uuid>.lock`, `$COPILOT_HOME/ide`), its tools
//! over the shared MCP-over-HTTP server (`serve::mcp_http`), and its feed
//! of `selection_changed`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;

use super::protocol::{self, Lockfile, AUTH_HEADER, AUTH_SCHEME, LOCK_EXTENSION};
use super::tools;
use crate::core::log;
use crate::mcp;
use crate::serve::admission::TokenIn;
use crate::serve::budget::Held;
use crate::serve::discovery::{pid_alive, DiscoveryError, DiscoveryFile, PidIn};
use crate::serve::endpoint::Endpoint;
use crate::serve::front_end::{announce, base_status, Announce, FrontEnd, StartError, Started};
use crate::serve::hub::Hub;
use crate::serve::listener::listen_unix;
use crate::serve::mcp_http::sessions::{Session, STREAM_GRACE};
use crate::serve::mcp_http::sse::Feed;
use crate::serve::mcp_http::{self, McpHttp};
use crate::serve::registry::Agent;
use crate::serve::unix_peers::{self, Peers};

pub const AGENT: Agent = Agent { id: "copilot", name: "Copilot" };

pub struct CopilotServer {
    pub endpoint: Endpoint,
    pub http: McpHttp,
    pub socket: PathBuf,
    pub lockfile: DiscoveryFile,
    opening: tools::Opening,
    /// The processes connected to the socket, listed for `STREAM_GRACE`
    /// after their last connection (Copilot renews its connection now and
    /// then; a client counts as connected across that too:
    /// `mcp_http::sessions`). `lua/amp/route.lua` finds the terminal a
    /// Copilot runs in from them.
    peers: Arc<Peers>,
}

impl CopilotServer {
    pub fn new(hub: Arc<Hub>, nonce: String, socket: PathBuf, lock_dir: PathBuf, lock_name: String) -> Self {
        let token_in = TokenIn::Scheme { header: AUTH_HEADER, scheme: AUTH_SCHEME };
        // A Unix socket: the Host must still be a loopback name (Node
        // sends "localhost"), with no port to compare.
        let endpoint = Endpoint::new(AGENT, hub, nonce, token_in, None);
        let path = lock_dir.join(lock_name);
        let pid_in = PidIn::Field { extension: LOCK_EXTENSION, field: "pid" };
        Self {
            lockfile: DiscoveryFile::new(AGENT.name, lock_dir, path, pid_in),
            endpoint,
            http: McpHttp::default(),
            socket,
            opening: tools::Opening::default(),
            peers: Peers::new(STREAM_GRACE),
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
                self.endpoint.token(),
                std::process::id(),
                now_ms,
                self.endpoint.hub.workspace_folders(),
                self.endpoint.hub.options.ide_name.clone(),
            );
            serde_json::to_vec_pretty(&lock).expect("a lockfile serializes")
        };
        self.lockfile.write(contents, sweep).await
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
    fn endpoint(&self) -> &Endpoint {
        &self.endpoint
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
    ) -> Result<Value, mcp::RequestError> {
        // open_diff waits for the user: its place and bytes go back first.
        if tools::waits_for_user(method, &params) {
            held.release();
        }
        let hub = &self.endpoint.hub;
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
        Some(super::context::feed(&self.endpoint.hub))
    }

    /// Copilot asks `server/discover` before `initialize`, without a
    /// session: "method not found" and it goes on with `initialize`.
    fn sessionless(&self, method: &str) -> Option<mcp::RequestError> {
        (method == "server/discover").then(|| mcp::RequestError::NoMethod(method.to_owned()))
    }
}

/// Starts the Copilot CLI front-end: its own socket (in a private
/// directory) and nonce, its lockfile in `~/.copilot/ide/`. Main thread,
/// inside the runtime.
pub fn start(hub: &Arc<Hub>) -> Result<Started, StartError> {
    let lock_dir = protocol::lock_dir_from_env().ok_or(StartError::NoDirectory(
        "copilot: cannot find the Copilot config directory: set COPILOT_HOME or HOME",
    ))?;
    // SAFETY: geteuid cannot fail.
    let uid = unsafe { libc::geteuid() };
    let (dir, socket) = protocol::socket_path_from_env(uid, std::process::id());
    let listener = listen_unix(AGENT.id, &dir, &socket)?;
    let mut random = [0u8; 16];
    rand::RngCore::fill_bytes(&mut rand::rngs::OsRng, &mut random);
    let nonce = crate::serve::token::generate_token();
    let server = Arc::new(CopilotServer::new(hub.clone(), nonce, socket, lock_dir, protocol::lock_name(random)));
    mcp_http::spawn_accepting(server.clone(), unix_peers::Tracked::new(listener, server.peers.clone()));
    let announce = server.clone().write_and_announce(true);
    Ok(Started { front_end: server, announce })
}

impl CopilotServer {
    fn write_and_announce(self: Arc<Self>, sweep: bool) -> Announce {
        let at = self.socket.to_string_lossy().into_owned();
        announce(AGENT, at, async move { self.write_lockfile(sweep).await })
    }
}

impl FrontEnd for CopilotServer {
    fn agent(&self) -> Agent {
        AGENT
    }

    fn status(&self) -> Value {
        // A socket, no port.
        let mut status = base_status(None, &self.lockfile.path, self.endpoint.hub.clients(AGENT.id));
        status["socket"] = self.socket.to_string_lossy().into();
        status["lockfile"] = self.lockfile.path.to_string_lossy().into();
        status["sessions"] = self.http.sessions.count().into();
        status["pids"] = self.peers.pids().into();
        // open_diff calls being answered (waiting for the user or shown soon).
        status["opening"] = self.opening.count().into();
        status
    }

    /// Copilot connects to the lockfile whose workspace folder is its
    /// working folder: a terminal started in the workspace needs nothing.
    fn terminal_env(&self) -> Vec<(&'static str, String)> {
        Vec::new()
    }

    fn workspace_changed(self: Arc<Self>) -> Announce {
        self.write_and_announce(false)
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
