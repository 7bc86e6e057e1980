//! The MCP server front-end: its port, token and discovery file
//! (`<data>/amp/mcp/<port>.json`), the requests of its MCP sessions over
//! `serve::mcp_http` (tools from `crate::editor_tools`, resources from
//! `super::resources`), and each session's feed of resource updates.

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use tokio::sync::watch;
use tokio::time::Instant;

use super::protocol::{self, Discovery};
use super::resources;
use crate::core::log;
use crate::core::published::{SelectionSnapshot, VisibleFilesSnapshot};
use crate::core::sync::LockExt;
use crate::editor_tools;
use crate::mcp::{self, RequestError};
use crate::serve::admission::TokenIn;
use crate::serve::budget::Held;
use crate::serve::discovery::{DiscoveryError, DiscoveryFile, PidIn};
use crate::serve::endpoint::Endpoint;
use crate::serve::front_end::{announce, base_status, Announce, FrontEnd, StartError, Started};
use crate::serve::hub::Hub;
use crate::serve::listener::{listen_loopback, PortChoice};
use crate::serve::mcp_http::sessions::Session;
use crate::serve::mcp_http::sse::Feed;
use crate::serve::mcp_http::{self, McpHttp};
use crate::serve::registry::Agent;

pub const AGENT: Agent = Agent { id: "mcp", name: "MCP" };

/// While a tool waits for the user, a client that asked for progress
/// (`_meta.progressToken`) is told this often that it still runs (clients
/// reset their request timeout on progress).
pub const PROGRESS_EVERY: Duration = Duration::from_secs(10);

/// What the server knows of each MCP session's client.
#[derive(Default)]
struct Client {
    /// `clientInfo.name` from `initialize` (cut, one line).
    name: String,
    selection: bool,
    open_files: bool,
}

pub struct McpServer {
    pub endpoint: Endpoint,
    pub port: u16,
    pub http: McpHttp,
    pub discovery: DiscoveryFile,
    /// By session (`Owner::session`); removed when the session ends.
    clients: Mutex<HashMap<u64, Client>>,
}

impl McpServer {
    pub fn new(hub: Arc<Hub>, token: String, port: u16, dir: PathBuf) -> Self {
        let token_in = TokenIn::Scheme { header: "authorization", scheme: "Bearer" };
        let endpoint = Endpoint::new(AGENT, hub, token, token_in, Some(port));
        let path = dir.join(protocol::file_name(port));
        Self {
            discovery: DiscoveryFile::new(AGENT.name, dir, path, PidIn::Field { extension: "json", field: "pid" }),
            endpoint,
            port,
            http: McpHttp::default(),
            clients: Mutex::default(),
        }
    }

    fn clients(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Client>> {
        self.clients.locked()
    }

    /// Writes the discovery file with the current workspace folders, first
    /// sweeping dead editors' files when `sweep`.
    pub async fn write_discovery(&self, sweep: bool) -> Result<PathBuf, DiscoveryError> {
        let contents = || {
            let file = Discovery {
                port: self.port,
                url: protocol::url(self.port),
                auth_token: self.endpoint.token().to_owned(),
                pid: std::process::id(),
                workspace_folders: self.endpoint.hub.workspace_folders(),
                ide_name: self.endpoint.hub.options.ide_name.clone(),
                max_request_bytes: self.endpoint.hub.options.max_frame_bytes,
            };
            serde_json::to_vec_pretty(&file).expect("a discovery file serializes")
        };
        self.discovery.write(contents, sweep).await
    }

    /// `initialize`: the session's client is remembered (its name names its
    /// reviews) until the session ends.
    fn initialized(self: &Arc<Self>, session: &Arc<Session>, params: &Value) {
        let name = params["clientInfo"]["name"].as_str().unwrap_or_default();
        let name: String = crate::core::text::cut(name, 40).chars().filter(|c| !c.is_control()).collect();
        log::info(format!("mcp: {} started a session", if name.is_empty() { "a client" } else { &name }));
        self.clients().insert(session.owner.session, Client { name, ..Client::default() });
        let (server, session) = (self.clone(), session.clone());
        self.endpoint.hub.spawn(async move {
            tokio::select! {
                () = session.ended.cancelled() => {}
                () = server.endpoint.hub.tasks.closing.cancelled() => {}
            }
            server.clients().remove(&session.owner.session);
        });
    }

    fn subscribe(&self, session: &Session, params: &Value, on: bool) -> Result<Value, RequestError> {
        let uri = params.get("uri").and_then(Value::as_str).unwrap_or_default();
        if !resources::subscribable(uri) {
            return Err(RequestError::NotSubscribable([resources::SELECTION, resources::OPEN_FILES]));
        }
        let mut clients = self.clients();
        let client = clients.entry(session.owner.session).or_default();
        if uri == resources::SELECTION {
            client.selection = on;
        } else {
            client.open_files = on;
        }
        Ok(json!({}))
    }

    async fn call_tool(&self, session: &Arc<Session>, params: &Value, held: &mut Held) -> Result<Value, RequestError> {
        let (name, args) = mcp::tool_call(params)?;
        let client = self.clients().get(&session.owner.session).map(|c| c.name.clone()).unwrap_or_default();
        let cx = editor_tools::Context { hub: &self.endpoint.hub, owner: session.owner, client: &client };
        let call = editor_tools::call(&name, &args, &cx, held);
        let outcome = match params.pointer("/_meta/progressToken").cloned() {
            None => call.await,
            Some(token) => with_progress(call, session, token, PROGRESS_EVERY).await,
        };
        match outcome {
            Some(outcome) => Ok(protocol::tool_result(outcome)),
            // MCP: an unknown tool is an invalid parameter.
            None => Err(RequestError::UnlistedTool(crate::core::text::cut(&name, 100).to_owned())),
        }
    }
}

/// Runs `work`, telling the session's client `notifications/progress`
/// `every` ([`PROGRESS_EVERY`]) until it is done.
async fn with_progress<F: std::future::Future>(work: F, session: &Session, token: Value, every: Duration) -> F::Output {
    tokio::pin!(work);
    let mut ticks = tokio::time::interval_at(Instant::now() + every, every);
    let mut progress = 0u64;
    loop {
        tokio::select! {
            // Done: no more progress, even when a tick is due too.
            biased;
            done = &mut work => return done,
            _ = ticks.tick() => {
                progress += 1;
                let note = json!({ "progressToken": token, "progress": progress, "message": "waiting for the user in Neovim" });
                session.send(mcp::notification("notifications/progress", &note));
            }
        }
    }
}

impl mcp_http::Protocol for McpServer {
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
    ) -> Result<Value, RequestError> {
        match method {
            "initialize" => {
                self.initialized(session, &params);
                Ok(protocol::initialize_result(&params))
            }
            "ping" => Ok(json!({})),
            "tools/list" => Ok(protocol::tools_list()),
            "tools/call" => self.call_tool(session, &params, held).await,
            "resources/list" => resources::list(&self.endpoint.hub).await,
            "resources/templates/list" => Ok(json!({ "resourceTemplates": [] })),
            "resources/read" => resources::read(&self.endpoint.hub, &params).await,
            "resources/subscribe" => self.subscribe(session, &params, true),
            "resources/unsubscribe" => self.subscribe(session, &params, false),
            "prompts/list" => Ok(json!({ "prompts": [] })),
            other => Err(RequestError::NoMethod(crate::core::text::cut(other, 100).to_owned())),
        }
    }

    fn feed(self: &Arc<Self>, session: &Arc<Session>) -> Option<Feed> {
        let state = Updates {
            server: self.clone(),
            session: session.owner.session,
            selection: self.endpoint.hub.state.subscribe_selection(),
            visible: self.endpoint.hub.state.subscribe_visible_files(),
            interval: Duration::from_millis(self.endpoint.hub.options.selection_interval_ms.max(50)),
            changed: (false, false),
            last_at: None,
            out: VecDeque::new(),
        };
        Some(Box::pin(futures_util::stream::unfold(state, |mut st| async move {
            let text = st.next().await?;
            Some((text, st))
        })))
    }
}

/// A stream's `notifications/resources/updated`, for the resources its
/// session subscribed to: at most one per resource per interval.
struct Updates {
    server: Arc<McpServer>,
    session: u64,
    selection: watch::Receiver<Option<Arc<SelectionSnapshot>>>,
    visible: watch::Receiver<Option<Arc<VisibleFilesSnapshot>>>,
    interval: Duration,
    /// The selection, the visible files changed since the last tell.
    changed: (bool, bool),
    last_at: Option<Instant>,
    out: VecDeque<String>,
}

impl Updates {
    async fn next(&mut self) -> Option<String> {
        loop {
            if let Some(text) = self.out.pop_front() {
                return Some(text);
            }
            if self.changed != (false, false) {
                if let Some(at) = self.last_at {
                    tokio::time::sleep_until(at + self.interval).await;
                }
                let (selection, files) = std::mem::take(&mut self.changed);
                let wanted = self.server.clients().get(&self.session).map(|c| (c.selection, c.open_files));
                let (sub_selection, sub_files) = wanted.unwrap_or_default();
                for (uri, changed, subscribed) in
                    [(resources::SELECTION, selection, sub_selection), (resources::OPEN_FILES, files, sub_files)]
                {
                    if changed && subscribed {
                        self.out
                            .push_back(mcp::notification("notifications/resources/updated", &json!({ "uri": uri })));
                    }
                }
                self.last_at = Some(Instant::now());
                continue;
            }
            tokio::select! {
                r = self.selection.changed() => { r.ok()?; self.changed.0 = true; }
                r = self.visible.changed() => { r.ok()?; self.changed.1 = true; }
            }
        }
    }
}

/// Starts the MCP server: its own loopback port and token, its discovery
/// file in `<data>/amp/mcp/`. Main thread, inside the runtime.
pub fn start(hub: &Arc<Hub>) -> Result<Started, StartError> {
    let dir = protocol::discovery_dir_from_env().ok_or(StartError::NoDirectory(
        "mcp: no directory for the discovery file (set $HOME, $XDG_DATA_HOME or $AMP_DATA_HOME)",
    ))?;
    let (listener, port) = listen_loopback(AGENT.id, PortChoice::default())?;
    let server = Arc::new(McpServer::new(hub.clone(), crate::serve::token::generate_token(), port, dir));
    mcp_http::spawn_accepting(server.clone(), listener);
    let announce = server.clone().write_and_announce(true);
    Ok(Started { front_end: server, announce })
}

impl McpServer {
    fn write_and_announce(self: Arc<Self>, sweep: bool) -> Announce {
        let at = format!("127.0.0.1:{}", self.port);
        announce(AGENT, at, async move { self.write_discovery(sweep).await })
    }
}

impl FrontEnd for McpServer {
    fn agent(&self) -> Agent {
        AGENT
    }

    fn status(&self) -> Value {
        let mut status = base_status(Some(self.port), &self.discovery.path, self.endpoint.hub.clients(AGENT.id));
        status["url"] = protocol::url(self.port).into();
        status["sessions"] = self.http.sessions.count().into();
        status["pid"] = std::process::id().into();
        status
    }

    /// The stdio entry point started by an agent in this editor's terminal
    /// picks this Neovim first.
    fn terminal_env(&self) -> Vec<(&'static str, String)> {
        vec![(protocol::PORT_ENV, self.port.to_string())]
    }

    fn workspace_changed(self: Arc<Self>) -> Announce {
        self.write_and_announce(false)
    }

    fn stopped(&self) {
        self.http.sessions.end_all();
        if let Err(e) = self.discovery.remove() {
            log::warn(format!("cannot remove the MCP discovery file: {e}"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serve::mcp_http::sessions::Sessions;

    #[tokio::test]
    async fn a_tool_that_waits_tells_its_client_progress_until_it_is_done() {
        let sessions = Sessions::default();
        let session = sessions.create("MCP").unwrap();
        let mut inbox = sessions.open_stream(&session.id, |_| {}).unwrap();
        let rx = inbox.rx.as_mut().unwrap();
        // Done once two progress notifications were sent.
        let work = async {
            while rx.len() < 2 {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            "done"
        };
        assert_eq!(with_progress(work, &session, json!("tok"), Duration::from_millis(50)).await, "done");
        let sent: Vec<Value> =
            std::iter::from_fn(|| rx.try_recv().ok()).map(|t| serde_json::from_str(&t).unwrap()).collect();
        assert_eq!(sent.len(), 2, "{sent:?}");
        assert_eq!(sent[1]["method"], "notifications/progress");
        assert_eq!(
            (sent[1]["params"]["progressToken"].clone(), sent[1]["params"]["progress"].clone()),
            (json!("tok"), json!(2))
        );
    }
}
