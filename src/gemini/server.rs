//! The Gemini CLI front-end's server: its own port, token and discovery
//! file (`$TMPDIR/gemini/ide/gemini-ide-server-<pid>-<port>.json`), on the
//! same runtime and under the same rules as the Amp server. It borrows
//! from the Amp server's [`Shared`] what is one for all protocols: the
//! published selection and visible files, the workspace folders, the
//! pending-handshake limit and deadline, the in-flight byte budget, the
//! tasks and the shutdown signal.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use serde_json::{json, Value};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

use super::discovery;
use super::http::{self, MAX_REQUESTS_IN_FLIGHT};
use super::protocol::{self, Discovery};
use super::sessions::Sessions;
use super::tools::Diffs;
use crate::amp::lockfile::{self, LockfileError};
use crate::amp::server::{HandshakeSlot, Shared};
use crate::core::log;

pub struct GeminiServer {
    pub core: Arc<Shared>,
    pub token: String,
    pub port: u16,
    pub dir: PathBuf,
    pub sessions: Sessions,
    pub diffs: Arc<Diffs>,
    pub in_flight: Arc<Semaphore>,
    writes: tokio::sync::Mutex<()>,
}

impl GeminiServer {
    pub fn new(core: Arc<Shared>, token: String, port: u16, dir: PathBuf) -> Self {
        Self {
            core,
            token,
            port,
            dir,
            sessions: Sessions::default(),
            diffs: Arc::new(Diffs::default()),
            in_flight: Arc::new(Semaphore::new(MAX_REQUESTS_IN_FLIGHT)),
            writes: tokio::sync::Mutex::new(()),
        }
    }

    pub fn discovery_path(&self) -> PathBuf {
        self.dir.join(protocol::file_name(std::process::id(), self.port))
    }

    /// Removes dead editors' discovery files (`clean_stale`), then writes
    /// ours with the current workspace folders (atomically, 0600 in 0700).
    pub async fn write_discovery(self: &Arc<Self>, clean_stale: bool) -> Result<PathBuf, LockfileError> {
        let _guard = self.writes.lock().await;
        let file = Discovery::new(self.port, &self.core.workspace_folders(), self.token.clone());
        let (dir, path) = (self.dir.clone(), self.discovery_path());
        lockfile::write_off_thread("Gemini", dir.clone(), move || {
            if clean_stale {
                for removed in discovery::remove_stale(&dir) {
                    log::info(format!("removed stale Gemini discovery file {}", removed.display()));
                }
            }
            discovery::write(&dir, &path, &file)
        })
        .await
    }
}

/// Accepts connections until shutdown, under the Amp server's handshake limits.
/// The sessions end with the server (their event streams close).
pub async fn accept_loop(listener: TcpListener, server: Arc<GeminiServer>) {
    let core = server.core.clone();
    let serving = server.clone();
    core.accept_connections(listener, "gemini", move |stream, slot| serve(stream, serving.clone(), slot)).await;
    server.sessions.end_all();
}

/// One connection: HTTP/1.1 with keep-alive. It counts as a pending
/// handshake until its first request's headers are in (a flood of silent
/// connections drops the oldest); a request's headers must arrive within
/// `handshake_timeout_ms`, idle keep-alive time included.
async fn serve(stream: TcpStream, server: Arc<GeminiServer>, slot: HandshakeSlot) {
    let cancel = slot.cancel.clone();
    let closing = server.core.closing.clone();
    let header_timeout = Duration::from_millis(server.core.options.handshake_timeout_ms);
    let slot = std::sync::Mutex::new(Some(slot));
    let service = service_fn(move |req| {
        // The first request is in: no longer a pending handshake.
        slot.lock().unwrap_or_else(|p| p.into_inner()).take();
        http::handle(req, server.clone())
    });
    let mut builder = http1::Builder::new();
    // Headers of a request: 64 KiB at most (hyper's buffer), in time.
    builder.timer(TokioTimer::new()).header_read_timeout(header_timeout).max_buf_size(MAX_HEADER_BYTES);
    let conn = builder.serve_connection(TokioIo::new(stream), service);
    tokio::pin!(conn);
    tokio::select! {
        served = conn.as_mut() => {
            if let Err(e) = served {
                crate::log_debug!("gemini: connection ended: {}", log::untrusted(&e.to_string()));
            }
        }
        // Dropped to make room for newer connections (still pending only).
        () = cancel.notified() => {}
        () = closing.cancelled() => {
            conn.as_mut().graceful_shutdown();
            let _ = conn.await;
        }
    }
}

/// hyper's read buffer, so the most a request's headers may take.
const MAX_HEADER_BYTES: usize = 64 * 1024;

pub fn status(server: &GeminiServer) -> Value {
    json!({
        "enabled": true,
        "port": server.port,
        "clients": server.sessions.streams(),
        "sessions": server.sessions.count(),
        "discovery_file": server.discovery_path().to_string_lossy(),
        "workspace_path": protocol::workspace_path(&server.core.workspace_folders()),
        "pid": std::process::id(),
    })
}
