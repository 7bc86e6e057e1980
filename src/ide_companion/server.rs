//! One IDE-companion front-end (a [`Flavor`]: Gemini CLI, Qwen Code): its
//! port, token and discovery file, its tools over the shared MCP-over-HTTP
//! server (`serve::mcp_http`), and its feed of `ide/contextUpdate`.

use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;

use serde_json::Value;

use super::flavor::Flavor;
use super::protocol::{self, Discovery};
use super::tools::{self, Diffs};
use crate::core::log;
use crate::serve::admission::TokenIn;
use crate::serve::budget::Held;
use crate::serve::discovery::{DiscoveryError, DiscoveryFile};
use crate::serve::endpoint::Endpoint;
use crate::serve::front_end::{announce, base_status, Announce, FrontEnd, StartError, Started};
use crate::serve::hub::Hub;
use crate::serve::listener::{listen_loopback, PortChoice};
use crate::serve::mcp_http::sessions::Session;
use crate::serve::mcp_http::sse::Feed;
use crate::serve::mcp_http::{self, McpHttp};
use crate::serve::registry::Agent;

pub struct CompanionServer {
    pub flavor: &'static Flavor,
    pub endpoint: Endpoint,
    pub port: u16,
    pub http: McpHttp,
    pub diffs: Arc<Diffs>,
    pub discovery: DiscoveryFile,
}

impl CompanionServer {
    pub fn new(flavor: &'static Flavor, hub: Arc<Hub>, token: String, port: u16, dir: PathBuf) -> Self {
        let token_in = TokenIn::Scheme { header: "authorization", scheme: "Bearer" };
        let endpoint = Endpoint::new(flavor.agent, hub, token, token_in, Some(port));
        let path = dir.join((flavor.file_name)(port));
        Self {
            discovery: DiscoveryFile::new(flavor.agent.name, dir, path, flavor.pid_in),
            flavor,
            endpoint,
            port,
            http: McpHttp::default(),
            diffs: Arc::new(Diffs::default()),
        }
    }

    /// Writes the discovery file with the current workspace folders, first
    /// sweeping dead editors' files when `sweep`.
    pub async fn write_discovery(&self, sweep: bool) -> Result<PathBuf, DiscoveryError> {
        let contents = || {
            let ppid = self.flavor.ppid.then(std::process::id);
            let folders = self.endpoint.hub.workspace_folders();
            let file = Discovery::new(self.port, &folders, self.endpoint.token().to_owned(), ppid);
            serde_json::to_vec_pretty(&file).expect("a discovery file serializes")
        };
        self.discovery.write(contents, sweep).await
    }
}

impl mcp_http::Protocol for CompanionServer {
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
        _held: &mut Held,
    ) -> Result<Value, crate::mcp::RequestError> {
        let (target, agent) = (session.clone(), self.flavor.agent.id);
        let notify: tools::Notify = Arc::new(move |method, params| {
            if !target.send(crate::mcp::notification(method, &params)) {
                log::warn(format!("{agent}: {method} dropped: the client's queue is full"));
            }
        });
        let hub = self.endpoint.hub.clone();
        let spawn = move |task: Pin<Box<dyn std::future::Future<Output = ()> + Send>>| {
            hub.spawn(task);
        };
        let cx = tools::Context {
            editor: self.endpoint.hub.editor.clone(),
            workspace_folders: self.endpoint.hub.workspace_folders(),
            diffs: self.diffs.clone(),
            notify,
            spawn: &spawn,
            owner: session.owner,
        };
        tools::answer(method, &params, &cx).await
    }

    fn feed(self: &Arc<Self>, _session: &Arc<Session>) -> Option<Feed> {
        Some(super::context::feed(&self.endpoint.hub, self.flavor.agent.id))
    }
}

/// Starts `flavor`'s front-end: its own loopback port and token, its
/// discovery file. Main thread, inside the runtime.
pub fn start(hub: &Arc<Hub>, flavor: &'static Flavor) -> Result<Started, StartError> {
    let dir = (flavor.discovery_dir)()?;
    let (listener, port) = listen_loopback(flavor.agent.id, PortChoice::default())?;
    let token = crate::serve::token::generate_token();
    let server = Arc::new(CompanionServer::new(flavor, hub.clone(), token, port, dir));
    mcp_http::spawn_accepting(server.clone(), listener);
    let announce = server.clone().write_and_announce(true);
    Ok(Started { front_end: server, announce })
}

impl CompanionServer {
    fn write_and_announce(self: Arc<Self>, sweep: bool) -> Announce {
        let at = format!("127.0.0.1:{}", self.port);
        announce(self.flavor.agent, at, async move { self.write_discovery(sweep).await })
    }
}

impl FrontEnd for CompanionServer {
    fn agent(&self) -> Agent {
        self.flavor.agent
    }

    fn status(&self) -> Value {
        let mut status =
            base_status(Some(self.port), &self.discovery.path, self.endpoint.hub.clients(self.flavor.agent.id));
        status["sessions"] = self.http.sessions.count().into();
        status["workspace_path"] = protocol::workspace_path(&self.endpoint.hub.workspace_folders()).into();
        status["pid"] = std::process::id().into();
        status
    }

    fn terminal_env(&self) -> Vec<(&'static str, String)> {
        (self.flavor.terminal_env)(self.port, &protocol::workspace_path(&self.endpoint.hub.workspace_folders()))
    }

    fn workspace_changed(self: Arc<Self>) -> Announce {
        self.write_and_announce(false)
    }

    fn stopped(&self) {
        self.http.sessions.end_all();
        if let Err(e) = self.discovery.remove() {
            log::warn(format!("cannot remove the {} discovery file: {e}", self.flavor.agent.name));
        }
    }
}
