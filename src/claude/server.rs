//! The Claude Code front-end's server: its own port, token and lockfile
//! (`~/.claude/ide/<port>.lock`), on the same runtime and under the same
//! rules as the Amp server. It borrows from the Amp server's [`Shared`]
//! what is one for all protocols: the published selection (one snapshot
//! serves every protocol), the workspace folders, the pending-handshake
//! limit, the options' limits and the shutdown signal.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, Semaphore};
use tokio::time::timeout;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::Message;

use super::protocol::{self, Lockfile, AUTH_HEADER, LOCK_EXTENSION, SUBPROTOCOL};
use super::tools;
use crate::amp::connection::{budget_cost, close, finish, upgrade_with, UpgradePolicy, Ws, WRITE_TIMEOUT};
use crate::amp::context::{PublishedSelection, RawSelection};
use crate::amp::handshake::TokenIn;
use crate::amp::lockfile;
use crate::amp::server::{HandshakeSlot, Shared};
use crate::core::log;
use crate::core::review::{Owner, ReviewEnd};
use crate::mcp;

/// When the selection is sent again after a client connects (see [`push_selection`]).
const RESEND_AFTER_CONNECT: [Duration; 2] = [Duration::from_millis(500), Duration::from_millis(2000)];

/// Requests of one client answered at once; the socket is not read past it.
const MAX_IN_FLIGHT: usize = 16;

pub struct ClaudeServer {
    pub core: Arc<Shared>,
    pub token: String,
    pub port: u16,
    pub lock_dir: PathBuf,
    clients: Mutex<HashMap<u64, mpsc::Sender<String>>>,
    next_client_id: AtomicU64,
    lock_writes: tokio::sync::Mutex<()>,
}

impl ClaudeServer {
    pub fn new(core: Arc<Shared>, token: String, port: u16, lock_dir: PathBuf) -> Self {
        Self {
            core,
            token,
            port,
            lock_dir,
            clients: Mutex::new(HashMap::new()),
            next_client_id: AtomicU64::new(1),
            lock_writes: tokio::sync::Mutex::new(()),
        }
    }

    pub fn lockfile_path(&self) -> PathBuf {
        self.lock_dir.join(format!("{}.{LOCK_EXTENSION}", self.port))
    }

    pub fn client_count(&self) -> usize {
        self.clients.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// Removes dead editors' lockfiles, then writes ours (atomically, 0600 in 0700).
    pub async fn write_lockfile(self: &Arc<Self>, clean_stale: bool) -> Result<PathBuf, lockfile::LockfileError> {
        let _guard = self.lock_writes.lock().await;
        let lock = Lockfile::new(
            std::process::id(),
            self.core.workspace_folders(),
            self.core.options.ide_name.clone(),
            self.token.clone(),
        );
        let (dir, path) = (self.lock_dir.clone(), self.lockfile_path());
        lockfile::write_off_thread("Claude", dir.clone(), move || {
            if clean_stale {
                for removed in lockfile::remove_stale_with_extension(&dir, LOCK_EXTENSION) {
                    log::info(format!("removed stale Claude lockfile {}", removed.display()));
                }
            }
            let json = serde_json::to_vec_pretty(&lock).map_err(std::io::Error::other)?;
            lockfile::write_named(&dir, &path, &json)
        })
        .await
    }

    /// Queues a notification for every client; returns how many it reached.
    /// A client whose queue is full is skipped (its connection closes when
    /// its queue stays full: see [`serve`]).
    pub fn broadcast(&self, method: &str, params: &Value) -> usize {
        let text = mcp::notification(method, params);
        let clients = self.clients.lock().unwrap_or_else(|p| p.into_inner());
        clients.values().filter(|tx| tx.try_send(text.clone()).is_ok()).count()
    }

    fn current_selection(&self) -> Option<RawSelection> {
        self.core.selection.borrow().as_ref().map(|s| s.raw.clone())
    }

    fn latest_selection(&self) -> Option<RawSelection> {
        self.core.latest_range.lock().unwrap_or_else(|p| p.into_inner()).as_ref().map(|s| s.raw.clone())
    }
}

/// Accepts connections until shutdown, under the Amp server's handshake limits.
pub async fn accept_loop(listener: TcpListener, server: Arc<ClaudeServer>) {
    let core = server.core.clone();
    core.accept_connections(listener, "claude", move |stream, slot| serve(stream, server.clone(), slot)).await
}

async fn serve(stream: TcpStream, server: Arc<ClaudeServer>, slot: HandshakeSlot) {
    let options = &server.core.options;
    let policy = UpgradePolicy {
        token: &server.token,
        allowed_origins: &options.allowed_origins,
        max_frame_bytes: options.max_frame_bytes,
        handshake_timeout_ms: options.handshake_timeout_ms,
        token_in: TokenIn::Header(AUTH_HEADER),
        subprotocol: Some(SUBPROTOCOL),
    };
    let cancel = slot.cancel.clone();
    let upgraded = tokio::select! {
        upgraded = upgrade_with(stream, &policy) => upgraded,
        _ = cancel.notified() => return,
    };
    let Some((ws, authenticated)) = upgraded else { return };
    if !authenticated {
        log::limited("claude wrong token", log::Level::Warn, "claude: client rejected: wrong or missing auth token");
        tokio::select! {
            _ = close(ws, CloseCode::Policy, "Authentication failed") => {}
            _ = cancel.notified() => {}
        }
        return;
    }
    drop(slot);
    let (outbound, queue) = mpsc::channel(options.send_queue);
    let admitted = {
        let mut clients = server.clients.lock().unwrap_or_else(|p| p.into_inner());
        (clients.len() < options.max_clients).then(|| {
            let id = server.next_client_id.fetch_add(1, Ordering::Relaxed);
            clients.insert(id, outbound.clone());
            (id, clients.len())
        })
    };
    let Some((id, count)) = admitted else {
        close(ws, CloseCode::Again, "Too many clients").await;
        return;
    };
    log::info(format!("claude: client {id} connected ({count} connected)"));
    // Its reviews are its own, and go with it.
    let owner = Owner::new("Claude");
    let ended = run(ws, &server, outbound, queue, owner).await;
    // (A stopping server closes every review itself, and its main thread
    // waits for this task: no editor call then.)
    if !server.core.closing.is_cancelled() {
        let _ = server.core.editor.close_reviews(owner, ReviewEnd::Disconnected).await;
    }
    let count = {
        let mut clients = server.clients.lock().unwrap_or_else(|p| p.into_inner());
        clients.remove(&id);
        clients.len()
    };
    log::info(format!("claude: client {id} disconnected: {ended} ({count} connected)"));
}

async fn run(
    mut ws: Ws,
    server: &Arc<ClaudeServer>,
    outbound: mpsc::Sender<String>,
    mut queue: mpsc::Receiver<String>,
    owner: Owner,
) -> String {
    let in_flight = Arc::new(Semaphore::new(MAX_IN_FLIGHT));
    let ping_every = Duration::from_millis(server.core.options.ping_interval_ms);
    let mut keepalive = tokio::time::interval_at(tokio::time::Instant::now() + ping_every, ping_every);
    let mut last_heard = Instant::now();
    let mut pusher: Option<tokio::task::JoinHandle<Option<()>>> = None;
    let ended = loop {
        tokio::select! {
            frame = ws.next(), if in_flight.available_permits() > 0 => {
                last_heard = Instant::now();
                match frame {
                    Some(Ok(Message::Text(text))) => match mcp::decode(&text) {
                        Ok(mcp::Incoming::Request { id, method, params }) => {
                            // The in-flight byte budget of every client of every
                            // protocol: a request that does not fit is refused
                            // rather than queued.
                            let cost = budget_cost(text.len(), server.core.options.max_inflight_bytes);
                            let Ok(held) = server.core.budget.clone().try_acquire_many_owned(cost) else {
                                let _ = outbound.try_send(mcp::error(&id, mcp::INTERNAL_ERROR, "busy: too many bytes of requests in flight"));
                                continue;
                            };
                            // Clients that send no ide_connected (OpenCode) get the
                            // selection once they list the tools.
                            if method == "tools/list" && pusher.is_none() {
                                pusher = Some(server.core.spawn(push_selection(server.clone(), outbound.clone())));
                            }
                            let permit = in_flight.clone().try_acquire_owned().expect("guarded by available_permits");
                            let core = server.core.clone();
                            let (server, outbound) = (server.clone(), outbound.clone());
                            core.spawn(async move {
                                let reply = answer(&server, owner, &id, &method, &params).await;
                                drop(permit);
                                let _ = outbound.send(reply).await;
                                drop(held);
                            });
                        }
                        // The selection is pushed from ide_connected on (and sent
                        // again shortly after: see RESEND_AFTER_CONNECT).
                        Ok(mcp::Incoming::Notification { method, params }) if method == "ide_connected" => {
                            let pid = params.get("pid").and_then(Value::as_u64);
                            log::info(format!("claude: ide_connected from pid {pid:?}"));
                            if pusher.is_none() {
                                pusher = Some(server.core.spawn(push_selection(server.clone(), outbound.clone())));
                            }
                        }
                        Ok(mcp::Incoming::Notification { .. }) => {}
                        Ok(mcp::Incoming::Response { .. }) => {}
                        Err(bad) => {
                            let _ = outbound.try_send(mcp::error(&bad.id, bad.code, &bad.message));
                        }
                    },
                    Some(Ok(Message::Binary(_))) => {
                        close(ws, CloseCode::Unsupported, "Binary frames are not supported").await;
                        break "sent a binary frame".to_string();
                    }
                    Some(Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_))) => {}
                    Some(Ok(Message::Close(_))) | None => {
                        finish(ws).await;
                        break "closed by the client".into();
                    }
                    Some(Err(e)) => {
                        let reason = format!("connection error: {}", log::untrusted(&e.to_string()));
                        close(ws, CloseCode::Protocol, "Protocol violation").await;
                        break reason;
                    }
                }
            }
            Some(text) = queue.recv() => {
                match timeout(WRITE_TIMEOUT, ws.send(Message::Text(text))).await {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => break format!("write failed: {e}"),
                    Err(_) => break "stopped reading (write timed out)".into(),
                }
            }
            _ = keepalive.tick() => {
                if last_heard.elapsed() > ping_every * 2 + Duration::from_secs(5) {
                    break "keepalive timed out".into();
                }
                if timeout(WRITE_TIMEOUT, ws.send(Message::Ping(Vec::new()))).await.map_or(true, |r| r.is_err()) {
                    break "keepalive ping failed".into();
                }
            }
            () = server.core.closing.cancelled() => {
                close(ws, CloseCode::Away, "Neovim is shutting down").await;
                break "server shutting down".into();
            }
        }
    };
    if let Some(pusher) = pusher {
        pusher.abort();
    }
    ended
}

async fn answer(server: &Arc<ClaudeServer>, owner: Owner, id: &Value, method: &str, params: &Value) -> String {
    let cx = tools::Context {
        editor: server.core.editor.as_ref(),
        owner,
        workspace_folders: server.core.workspace_folders(),
        current_selection: server.current_selection(),
        latest_selection: server.latest_selection(),
    };
    crate::log_debug!("claude: {method} {}", log::untrusted(&params.to_string()));
    match tools::answer(method, params, &cx).await {
        Ok(result) => mcp::result(id, result),
        Err((code, message)) => {
            crate::log_debug!("claude: {method} failed: {message}");
            mcp::error(id, code, &message)
        }
    }
}

/// Sends `selection_changed` from the one published selection: at once,
/// then on every change, at most one per `selection_interval_ms`, newest
/// state only (a slow client skips states, never queues them).
async fn push_selection(server: Arc<ClaudeServer>, outbound: mpsc::Sender<String>) {
    let interval = Duration::from_millis(server.core.options.selection_interval_ms);
    let mut selection = server.core.selection.subscribe();
    selection.mark_changed();
    let mut sent: Option<Arc<PublishedSelection>> = None;
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
        let text = mcp::notification("selection_changed", &protocol::selection(&state.raw));
        crate::log_debug!("claude: selection_changed {}", log::untrusted(&text));
        if outbound.send(text).await.is_err() {
            return;
        }
        last_at = Some(tokio::time::Instant::now());
        sent = Some(state);
    }
}

/// `at_mentioned` for every client: lines are 0-based, end inclusive.
pub fn at_mentioned(server: &ClaudeServer, path: &std::path::Path, line_start: usize, line_end: usize) -> usize {
    server.broadcast("at_mentioned", &protocol::at_mentioned(path, line_start, line_end))
}

pub fn status(server: &ClaudeServer) -> Value {
    json!({
        "enabled": true,
        "port": server.port,
        "lockfile": server.lockfile_path().to_string_lossy(),
        "clients": server.client_count(),
    })
}
