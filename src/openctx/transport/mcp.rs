//! MCP servers as OpenCtx providers: the server runs as a child process spoken
//! to over stdio (newline-delimited JSON-RPC 2.0); its resources become
//! mentions and items.
//!
//! Mapping (as the OpenCtx repository's MCP bridge):
//! - `meta` → `{name: serverInfo.name, mentions: {label: name}}` (no annotations;
//!   no `mentions` when the server has no resources capability);
//! - `mentions {query}` → `resources/list` (following `nextCursor`, capped),
//!   filtered by the query (case-insensitive substring of name, uri or
//!   description; title prefix matches first) → `[{title, uri, description?, data?}]`;
//! - `items {mention}` → `resources/read {uri: mention.uri}` → one item per text
//!   content `{title, url, ai: {content}}`; blob contents are skipped;
//! - `annotations` → `[]`.
//!
//! The server starts on the first call; `initialize` → `notifications/initialized`
//! runs in a task of its own, so a caller that times out during the handshake does
//! not abort it. The server's notifications are ignored; its requests get a
//! minimal answer (`ping`, `roots/list`) or a JSON-RPC error. A dead server is
//! restarted on the next call.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Map, Value};
use tokio::sync::watch;

use super::{ChildConn, ChildSpec, ProviderError, RequestError};
use crate::core::sync::LockExt;

pub const MCP_PROTOCOL_VERSION: &str = "2024-11-05";
/// The handshake may include `npx` installing the server the first time.
const INIT_TIMEOUT: Duration = Duration::from_secs(60);
/// `resources/list` pages followed at most, and resources kept at most.
const MAX_PAGES: usize = 50;
const MAX_RESOURCES: usize = 10_000;
const SHUTDOWN_WAIT: Duration = Duration::from_secs(1);

#[derive(Debug, Clone)]
struct ServerInfo {
    name: String,
    resources: bool,
}

type Ready = Option<Result<ServerInfo, ProviderError>>;

struct Session {
    conn: Arc<ChildConn>,
    ready: watch::Receiver<Ready>,
}

impl Session {
    fn usable(&self) -> bool {
        !self.conn.is_dead() && !matches!(&*self.ready.borrow(), Some(Err(_)))
    }
}

struct McpInner {
    spec: ChildSpec,
    fallback_name: String,
    session: Mutex<Option<Arc<Session>>>,
}

/// One MCP server used as an OpenCtx provider. Cheap to clone.
#[derive(Clone)]
pub struct McpProvider {
    inner: Arc<McpInner>,
}

fn rpc(method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "method": method, "params": params})
}

/// A failure of one step: whether a retry on a fresh process may help.
enum Step {
    NotSent(ProviderError),
    Failed(ProviderError),
}

impl From<RequestError> for Step {
    fn from(e: RequestError) -> Self {
        match e {
            RequestError::NotSent(e, _) => Step::NotSent(e),
            RequestError::Failed(e) => Step::Failed(e),
        }
    }
}

impl From<ProviderError> for Step {
    fn from(e: ProviderError) -> Self {
        Step::Failed(e)
    }
}

impl McpProvider {
    pub fn new(command: String, args: Vec<String>, env: Vec<(String, String)>, cwd: Option<PathBuf>) -> Self {
        let fallback_name =
            Path::new(&command).file_name().map_or(command.clone(), |n| n.to_string_lossy().into_owned());
        let spec = ChildSpec {
            label: format!(
                "MCP server `{}`",
                std::iter::once(&command).chain(&args).cloned().collect::<Vec<_>>().join(" ")
            ),
            program: command,
            args,
            env,
            cwd,
            jsonrpc: true,
        };
        McpProvider { inner: Arc::new(McpInner { spec, fallback_name, session: Mutex::new(None) }) }
    }

    /// Speaks OpenCtx on top of MCP (see the module documentation). Cancel-safe.
    pub async fn call(&self, method: &str, params: Value) -> Result<Value, ProviderError> {
        match method {
            "annotations" => return Ok(json!([])),
            "meta" | "mentions" | "items" => {}
            other => {
                return Err(ProviderError::Provider {
                    code: -32601,
                    message: format!("MCP provider has no method {other}"),
                })
            }
        }
        // A server found dead before anything was sent is replaced once.
        let mut last = None;
        for _ in 0..2 {
            let session = self.session()?;
            let info = Self::ready(&session).await?;
            let step = match method {
                "meta" => Ok(meta(&info)),
                "mentions" => mentions(&session.conn, &info, &params).await,
                _ => items(&session.conn, &params).await,
            };
            match step {
                Ok(v) => return Ok(v),
                Err(Step::Failed(e)) => return Err(e),
                Err(Step::NotSent(e)) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| ProviderError::Transport(format!("{} keeps dying", self.inner.spec.label))))
    }

    /// The server's start-up: spawns it if none runs and waits for the MCP
    /// handshake (`npx` may first install the server). The caller gives it a
    /// longer deadline than a call (`openctx.startup_timeout_ms`). Cancel-safe:
    /// the handshake runs detached and a later call finds it done.
    pub async fn start(&self) -> Result<(), ProviderError> {
        let session = self.session()?;
        Self::ready(&session).await.map(|_| ())
    }

    /// Kills the server (pending calls fail). A later call starts a new one.
    pub async fn shutdown(&self) {
        let session = self.inner.session.locked().take();
        if let Some(s) = session {
            s.conn.shutdown(&format!("{} shut down", self.inner.spec.label), SHUTDOWN_WAIT).await;
        }
    }

    /// The running server's pid, if one is running.
    pub fn pid(&self) -> Option<u32> {
        self.inner.session.locked().as_ref().filter(|s| s.usable()).and_then(|s| s.conn.pid())
    }

    fn session(&self) -> Result<Arc<Session>, ProviderError> {
        let mut slot = self.inner.session.locked();
        if let Some(s) = slot.as_ref().filter(|s| s.usable()) {
            return Ok(s.clone());
        }
        let conn = ChildConn::spawn(&self.inner.spec)?;
        let (tx, ready) = watch::channel(None);
        let session = Arc::new(Session { conn: conn.clone(), ready });
        *slot = Some(session.clone());
        drop(slot);
        let fallback_name = self.inner.fallback_name.clone();
        let label = self.inner.spec.label.clone();
        tokio::spawn(async move {
            let outcome = initialize(&conn, fallback_name).await;
            if let Err(e) = &outcome {
                crate::core::log::warn(format!("openctx: {label}: initialize failed: {e}"));
                conn.kill(&format!("{label}: initialize failed: {e}"));
            }
            let _ = tx.send(Some(outcome));
        });
        Ok(session)
    }

    async fn ready(session: &Session) -> Result<ServerInfo, ProviderError> {
        let mut rx = session.ready.clone();
        let ready = rx
            .wait_for(Option::is_some)
            .await
            .map_err(|_| ProviderError::Transport("the MCP handshake was abandoned".into()))?;
        match &*ready {
            Some(r) => r.clone(),
            None => Err(ProviderError::Transport("the MCP handshake was abandoned".into())),
        }
    }
}

async fn initialize(conn: &ChildConn, fallback_name: String) -> Result<ServerInfo, ProviderError> {
    let request = rpc(
        "initialize",
        json!({
            "protocolVersion": MCP_PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "amp.nvim-rs", "version": env!("CARGO_PKG_VERSION")},
        }),
    );
    let result = match tokio::time::timeout(INIT_TIMEOUT, conn.request(request)).await {
        Ok(r) => r?,
        Err(_) => {
            return Err(ProviderError::Transport(format!("no answer to initialize within {}s", INIT_TIMEOUT.as_secs())))
        }
    };
    let Some(result) = result.as_object() else {
        return Err(ProviderError::Protocol("the initialize result is not an object".into()));
    };
    let name = result
        .get("serverInfo")
        .and_then(|s| s.get("name"))
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .map_or(fallback_name, str::to_owned);
    let resources = result.get("capabilities").and_then(|c| c.get("resources")).is_some_and(|r| !r.is_null());
    conn.notify(rpc("notifications/initialized", json!({}))).await?;
    Ok(ServerInfo { name, resources })
}

fn meta(info: &ServerInfo) -> Value {
    if info.resources {
        json!({"name": info.name, "mentions": {"label": info.name}})
    } else {
        json!({"name": info.name})
    }
}

async fn mentions(conn: &ChildConn, info: &ServerInfo, params: &Value) -> Result<Value, Step> {
    if !info.resources {
        return Ok(json!([]));
    }
    let mut resources: Vec<Value> = Vec::new();
    let mut cursor: Option<Value> = None;
    for page in 0.. {
        if page == MAX_PAGES {
            crate::core::log::warn(format!(
                "openctx: MCP server {}: resources/list has more than {MAX_PAGES} pages; using the first",
                info.name
            ));
            break;
        }
        let mut list_params = Map::new();
        if let Some(c) = cursor.take() {
            list_params.insert("cursor".into(), c);
        }
        let result = match conn.request_inner(rpc("resources/list", Value::Object(list_params))).await {
            Ok(r) => r,
            // Only the first request may be retried on a fresh process.
            Err(e) if page == 0 => return Err(e.into()),
            Err(RequestError::NotSent(e, _)) | Err(RequestError::Failed(e)) => return Err(Step::Failed(e)),
        };
        let Some(list) = result.get("resources").and_then(Value::as_array) else {
            return Err(Step::Failed(ProviderError::Protocol("resources/list result has no `resources` array".into())));
        };
        resources.extend(list.iter().cloned());
        if resources.len() >= MAX_RESOURCES {
            resources.truncate(MAX_RESOURCES);
            break;
        }
        match result.get("nextCursor") {
            Some(c) if !c.is_null() && c.as_str() != Some("") => cursor = Some(c.clone()),
            _ => break,
        }
    }
    let query = params.get("query").and_then(Value::as_str).unwrap_or("").trim().to_lowercase();
    let mut prefix = Vec::new();
    let mut other = Vec::new();
    for r in &resources {
        let Some(uri) = r.get("uri").and_then(Value::as_str) else {
            continue;
        };
        let name = r.get("name").and_then(Value::as_str).filter(|n| !n.is_empty()).unwrap_or(uri);
        let description = r.get("description").and_then(Value::as_str);
        let title_lower = name.to_lowercase();
        let is_prefix = title_lower.starts_with(&query);
        let matches = query.is_empty()
            || title_lower.contains(&query)
            || uri.to_lowercase().contains(&query)
            || description.is_some_and(|d| d.to_lowercase().contains(&query));
        if !matches {
            continue;
        }
        let mut m = Map::new();
        m.insert("title".into(), json!(name));
        m.insert("uri".into(), json!(uri));
        if let Some(d) = description {
            m.insert("description".into(), json!(d));
        }
        if let Some(mime) = r.get("mimeType").and_then(Value::as_str) {
            m.insert("data".into(), json!({"mimeType": mime}));
        }
        if is_prefix && !query.is_empty() {
            prefix.push(Value::Object(m));
        } else {
            other.push(Value::Object(m));
        }
    }
    prefix.extend(other);
    Ok(Value::Array(prefix))
}

async fn items(conn: &ChildConn, params: &Value) -> Result<Value, Step> {
    let Some(mention) = params.get("mention").filter(|m| m.is_object()) else {
        return Ok(json!([]));
    };
    let Some(uri) = mention.get("uri").and_then(Value::as_str) else {
        return Err(Step::Failed(ProviderError::Protocol("items: the mention has no uri".into())));
    };
    let result = conn.request_inner(rpc("resources/read", json!({"uri": uri}))).await?;
    let Some(contents) = result.get("contents").and_then(Value::as_array) else {
        return Err(Step::Failed(ProviderError::Protocol("resources/read result has no `contents` array".into())));
    };
    let mention_title = mention.get("title").and_then(Value::as_str).filter(|t| !t.is_empty());
    let single = contents.len() == 1;
    let items: Vec<Value> = contents
        .iter()
        .filter_map(|c| {
            let text = c.get("text").and_then(Value::as_str)?;
            let content_uri = c.get("uri").and_then(Value::as_str).unwrap_or(uri);
            let title = match mention_title {
                Some(t) if single || content_uri == uri => t,
                _ => content_uri,
            };
            Some(json!({"title": title, "url": content_uri, "ai": {"content": text}}))
        })
        .collect();
    Ok(Value::Array(items))
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{kill9, repo_root};
    use super::*;

    const LIMIT: Duration = Duration::from_secs(20);

    fn fixtures() -> PathBuf {
        repo_root().join("tests/fixtures/openctx")
    }

    /// `@modelcontextprotocol/server-everything`'s entry point, installed by
    /// `npm ci --prefix tests/fixtures/openctx`. Missing is a failure, not a skip.
    fn everything_entry() -> PathBuf {
        let entry = fixtures().join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
        assert!(
            entry.is_file(),
            "{} is missing: run `npm ci --prefix tests/fixtures/openctx` (test dependency of the MCP transport tests)",
            entry.display()
        );
        entry
    }

    fn everything() -> McpProvider {
        let entry = everything_entry();
        // No arguments: the server speaks stdio by default.
        McpProvider::new("node".into(), vec![entry.to_string_lossy().into_owned()], vec![], Some(fixtures()))
    }

    fn paged(forever: bool) -> McpProvider {
        let script = fixtures().join("mcp-paged-server.mjs");
        let env = if forever { vec![("PAGED_FOREVER".to_string(), "1".to_string())] } else { vec![] };
        McpProvider::new("node".into(), vec![script.to_string_lossy().into_owned()], env, None)
    }

    fn titles(v: &Value) -> Vec<String> {
        v.as_array().unwrap().iter().map(|m| m["title"].as_str().unwrap().to_string()).collect()
    }

    #[tokio::test]
    async fn mcp_everything_server() {
        tokio::time::timeout(LIMIT, async {
            let p = everything();
            assert_eq!(p.pid(), None);
            // annotations never start the server.
            assert_eq!(p.call("annotations", json!({"uri": "file:///a", "content": ""})).await.unwrap(), json!([]));
            assert_eq!(p.pid(), None);

            let meta = p.call("meta", json!({})).await.unwrap();
            assert_eq!(meta["name"], "mcp-servers/everything");
            assert_eq!(meta["mentions"]["label"], "mcp-servers/everything");
            assert!(meta.get("annotations").is_none());

            let all = p.call("mentions", json!({})).await.unwrap();
            let all_titles = titles(&all);
            assert!(all_titles.contains(&"features.md".to_string()), "{all_titles:?}");
            assert!(all_titles.len() >= 5, "{all_titles:?}");
            let features = all.as_array().unwrap().iter().find(|m| m["title"] == "features.md").unwrap().clone();
            assert_eq!(features["uri"], "demo://resource/static/document/features.md");
            assert_eq!(features["data"]["mimeType"], "text/markdown");
            assert!(features["description"].as_str().unwrap().contains("features.md"));

            // The query filters, case-insensitively, by name, uri or description.
            let q = p.call("mentions", json!({"query": "FEAT"})).await.unwrap();
            assert_eq!(titles(&q), vec!["features.md"]);
            let q = p.call("mentions", json!({"query": "static/document"})).await.unwrap();
            assert_eq!(q.as_array().unwrap().len(), all_titles.len());
            let q = p.call("mentions", json!({"query": "no such resource anywhere"})).await.unwrap();
            assert_eq!(q, json!([]));

            let items = p.call("items", json!({"mention": features})).await.unwrap();
            let items = items.as_array().unwrap();
            assert_eq!(items.len(), 1);
            assert_eq!(items[0]["title"], "features.md");
            assert_eq!(items[0]["url"], "demo://resource/static/document/features.md");
            let content = items[0]["ai"]["content"].as_str().unwrap();
            assert!(content.contains("Everything Server"), "{content:.200}");
            // items without a mention: nothing to read.
            assert_eq!(p.call("items", json!({"message": "hi"})).await.unwrap(), json!([]));

            let e = p.call("tools", json!({})).await.unwrap_err();
            assert!(matches!(e, ProviderError::Provider { code: -32601, .. }), "{e:?}");

            // A missing resource: the server's JSON-RPC error.
            let e = p.call("items", json!({"mention": {"title": "x", "uri": "demo://nope"}})).await.unwrap_err();
            assert!(matches!(e, ProviderError::Provider { .. }), "{e:?}");

            // Killed: the next call starts (and initializes) a new server.
            let pid = p.pid().unwrap();
            kill9(pid);
            tokio::time::sleep(Duration::from_millis(100)).await;
            let q = p.call("mentions", json!({"query": "feat"})).await.unwrap();
            assert_eq!(titles(&q), vec!["features.md"]);
            let new_pid = p.pid().unwrap();
            assert_ne!(new_pid, pid);

            // Calls dropped at any point (even during the handshake of a fresh
            // server) leave it usable.
            p.shutdown().await;
            assert_eq!(p.pid(), None);
            for us in [10, 100, 1_000, 10_000, 100_000] {
                let _ = tokio::time::timeout(Duration::from_micros(us), p.call("mentions", json!({}))).await;
            }
            assert_eq!(titles(&p.call("mentions", json!({"query": "features"})).await.unwrap()), vec!["features.md"]);
            p.shutdown().await;
        })
        .await
        .expect("test timed out");
    }

    #[tokio::test]
    async fn mcp_pagination_server_requests_and_cancellation() {
        tokio::time::timeout(LIMIT, async {
            let p = paged(false);
            let meta = p.call("meta", json!({})).await.unwrap();
            assert_eq!(meta, json!({"name": "paged", "mentions": {"label": "paged"}}));

            // Three pages followed.
            let all = p.call("mentions", json!({})).await.unwrap();
            assert_eq!(all.as_array().unwrap().len(), 9);
            assert_eq!(all[0], json!({"title": "Resource 0", "uri": "paged://res/0", "description": "even number 0", "data": {"mimeType": "text/plain"}}));
            assert_eq!(all[1], json!({"title": "Resource 1", "uri": "paged://res/1", "data": {"mimeType": "text/plain"}}));
            // Description matches count; title prefix matches come first.
            let q = p.call("mentions", json!({"query": "EVEN"})).await.unwrap();
            assert_eq!(titles(&q), vec!["Resource 0", "Resource 2", "Resource 4", "Resource 6", "Resource 8"]);
            let q = p.call("mentions", json!({"query": "res"})).await.unwrap();
            assert_eq!(q.as_array().unwrap().len(), 9);

            // Text contents become items; the blob is skipped.
            let items = p.call("items", json!({"mention": all[3]})).await.unwrap();
            assert_eq!(
                items,
                json!([{"title": "Resource 3", "url": "paged://res/3", "ai": {"content": "text of paged://res/3"}}])
            );

            // A read that never answers is cancelled by the caller's timeout; the
            // server is told, and keeps working.
            let r = tokio::time::timeout(
                Duration::from_millis(200),
                p.call("items", json!({"mention": {"title": "slow", "uri": "paged://slow"}})),
            )
            .await;
            assert!(r.is_err());

            // What the server saw: our answers to its requests during initialize,
            // notifications/initialized, the cancellation.
            let report = p.call("items", json!({"mention": {"title": "report", "uri": "paged://report"}})).await.unwrap();
            let seen: Value = serde_json::from_str(report[0]["ai"]["content"].as_str().unwrap()).unwrap();
            assert_eq!(seen["initialized"], true);
            assert_eq!(seen["replies"]["ping"]["result"], json!({}));
            assert_eq!(seen["replies"]["ping"]["jsonrpc"], "2.0");
            assert_eq!(seen["replies"]["roots/list"]["result"], json!({"roots": []}));
            assert_eq!(seen["replies"]["sampling/createMessage"]["error"]["code"], -32601);
            assert_eq!(seen["cancelled"].as_array().unwrap().len(), 1, "{seen}");
            p.shutdown().await;

            // A server whose pages never end: capped, not an endless loop.
            let p = paged(true);
            let all = p.call("mentions", json!({})).await.unwrap();
            assert_eq!(all.as_array().unwrap().len(), MAX_PAGES * 3);
            p.shutdown().await;
        })
        .await
        .expect("test timed out");
    }

    #[tokio::test]
    async fn mcp_spawn_failure_and_server_that_exits() {
        tokio::time::timeout(LIMIT, async {
            let p = McpProvider::new("/nonexistent/mcp-server".into(), vec![], vec![], None);
            let e = p.call("meta", json!({})).await.unwrap_err();
            assert!(matches!(&e, ProviderError::Transport(m) if m.contains("failed to start")), "{e:?}");

            // A "server" that exits at once: the handshake fails with "… exited".
            let p = McpProvider::new("node".into(), vec!["-e".into(), "process.exit(3)".into()], vec![], None);
            let e = p.call("meta", json!({})).await.unwrap_err();
            assert!(matches!(&e, ProviderError::Transport(m) if m.contains("exited")), "{e:?}");
        })
        .await
        .expect("test timed out");
    }
}
