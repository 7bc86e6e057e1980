//! The Gemini CLI front-end: its port, token and discovery file
//! (`$TMPDIR/gemini/ide/gemini-ide-server-<pid>-<port>.json`), its tools
//! over the shared MCP-over-HTTP server (`serve::mcp_http`), and its feed
//! of `ide/contextUpdate`.

use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;

use serde_json::Value;

use super::protocol::{self, Discovery};
use super::tools::{self, Diffs};
use crate::core::log;
use crate::serve::admission::{Policy, TokenIn};
use crate::serve::budget::Held;
use crate::serve::discovery::{DiscoveryError, DiscoveryFile, PidIn};
use crate::serve::front_end::{announce, base_status, Announce, FrontEnd, Started};
use crate::serve::hub::Hub;
use crate::serve::listener::{listen_loopback, PortChoice};
use crate::serve::mcp_http::sessions::Session;
use crate::serve::mcp_http::sse::Feed;
use crate::serve::mcp_http::{self, McpHttp};
use crate::serve::registry::Agent;

pub const AGENT: Agent = Agent { id: "gemini", name: "Gemini" };

pub struct GeminiServer {
    pub hub: Arc<Hub>,
    pub port: u16,
    policy: Policy,
    pub http: McpHttp,
    pub diffs: Arc<Diffs>,
    pub discovery: DiscoveryFile,
}

impl GeminiServer {
    pub fn new(hub: Arc<Hub>, token: String, port: u16, dir: PathBuf) -> Self {
        let policy = Policy {
            token,
            token_in: TokenIn::Scheme { header: "authorization", scheme: "Bearer" },
            allowed_origins: hub.options.allowed_origins.clone(),
            port: Some(port),
        };
        let path = dir.join(protocol::file_name(std::process::id(), port));
        Self {
            discovery: DiscoveryFile::new(AGENT.name, dir, path, PidIn::Name(protocol::pid_of_file_name)),
            hub,
            port,
            policy,
            http: McpHttp::default(),
            diffs: Arc::new(Diffs::default()),
        }
    }

    /// Writes the discovery file with the current workspace folders, first
    /// sweeping dead editors' files when `sweep`.
    pub async fn write_discovery(&self, sweep: bool) -> Result<PathBuf, DiscoveryError> {
        let contents = || {
            let file = Discovery::new(self.port, &self.hub.workspace_folders(), self.policy.token.clone());
            serde_json::to_vec_pretty(&file).expect("a discovery file serializes")
        };
        self.discovery.write(contents, sweep).await
    }
}

impl mcp_http::Protocol for GeminiServer {
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
        _held: &mut Held,
    ) -> Result<Value, (i64, String)> {
        let target = session.clone();
        let notify: tools::Notify = Arc::new(move |method, params| {
            if !target.send(crate::mcp::notification(method, &params)) {
                log::warn(format!("gemini: {method} dropped: the client's queue is full"));
            }
        });
        let hub = self.hub.clone();
        let spawn = move |task: Pin<Box<dyn std::future::Future<Output = ()> + Send>>| {
            hub.spawn(task);
        };
        let cx = tools::Context {
            editor: self.hub.editor.clone(),
            workspace_folders: self.hub.workspace_folders(),
            diffs: self.diffs.clone(),
            notify,
            spawn: &spawn,
            owner: session.owner,
        };
        tools::answer(method, &params, &cx).await
    }

    fn feed(self: &Arc<Self>, _session: &Arc<Session>) -> Option<Feed> {
        Some(super::context::feed(&self.hub))
    }
}

/// Starts the Gemini CLI front-end: its own loopback port and token, its
/// discovery file in `$TMPDIR/gemini/ide/`. Main thread, inside the runtime.
pub fn start(hub: &Arc<Hub>) -> Result<Started, String> {
    let dir = protocol::discovery_dir_from_env();
    let (listener, port) = listen_loopback(AGENT.id, PortChoice::default())?;
    let server = Arc::new(GeminiServer::new(hub.clone(), crate::serve::token::generate_token(), port, dir));
    mcp_http::spawn_accepting(server.clone(), listener);
    let announce = server.clone().write_and_announce(true);
    Ok(Started { front_end: server, announce })
}

impl GeminiServer {
    fn write_and_announce(self: Arc<Self>, sweep: bool) -> Announce {
        let at = format!("127.0.0.1:{}", self.port);
        announce(AGENT, at, async move { self.write_discovery(sweep).await })
    }
}

impl FrontEnd for GeminiServer {
    fn agent(&self) -> Agent {
        AGENT
    }

    fn status(&self) -> Value {
        let mut status = base_status(Some(self.port), &self.discovery.path, self.hub.clients(AGENT.id));
        status["sessions"] = self.http.sessions.count().into();
        status["workspace_path"] = protocol::workspace_path(&self.hub.workspace_folders()).into();
        status["pid"] = std::process::id().into();
        status
    }

    /// With the pid, Gemini picks this editor's discovery file first
    /// instead of guessing the editor from its ancestor processes.
    fn terminal_env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("GEMINI_CLI_IDE_SERVER_PORT", self.port.to_string()),
            ("GEMINI_CLI_IDE_WORKSPACE_PATH", protocol::workspace_path(&self.hub.workspace_folders())),
            ("GEMINI_CLI_IDE_PID", std::process::id().to_string()),
        ]
    }

    fn workspace_changed(self: Arc<Self>) -> Announce {
        self.write_and_announce(false)
    }

    fn stopped(&self) {
        self.http.sessions.end_all();
        if let Err(e) = self.discovery.remove() {
            log::warn(format!("cannot remove the Gemini discovery file: {e}"));
        }
    }
}
