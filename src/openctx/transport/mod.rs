//! How the OpenCtx client reaches providers: HTTP endpoints ([`http`]), JS
//! modules run by one long-lived Node process ([`node`]) and MCP servers spoken
//! to over stdio ([`mcp`]).
//!
//! Every transport is cheap to clone (an `Arc` inside), `Send + Sync`, and
//! cancel-safe: the caller applies its own deadline with `tokio::time::timeout`,
//! and a call future dropped at any point leaves the transport usable. The
//! child-process transports never write to the child from the caller's future:
//! a writer task owns the child's stdin, so a dropped call cannot leave half a
//! line behind; its pending slot is removed by a drop guard and a late answer is
//! ignored.
//!
//! The shared machinery for children that speak newline-delimited JSON with
//! numeric ids ([`ChildConn`]) lives here; the Node host protocol is JSON-RPC
//! without the `jsonrpc` member, so one reader serves both.

pub mod http;
pub mod mcp;
pub mod node;

use std::collections::HashMap;
use std::fmt;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, oneshot, watch};

/// Why a provider call failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProviderError {
    /// The call exceeded its deadline (set by the caller).
    Timeout,
    /// Connect/spawn/IO failure, HTTP status other than 2xx, the process died.
    Transport(String),
    /// The answer does not have the protocol's shape (garbage, neither `result` nor `error`).
    Protocol(String),
    /// The provider's own `{error: {code, message}}`.
    Provider { code: i64, message: String },
    /// A JS module could not be imported (or has no provider in it).
    Import(String),
    /// A JS provider's method threw (or its promise rejected).
    Threw(String),
}

impl fmt::Display for ProviderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProviderError::Timeout => write!(f, "timed out"),
            ProviderError::Transport(m) => write!(f, "transport error: {m}"),
            ProviderError::Protocol(m) => write!(f, "protocol error: {m}"),
            ProviderError::Provider { code, message } => {
                write!(f, "provider error {code}: {message}")
            }
            ProviderError::Import(m) => write!(f, "import failed: {m}"),
            ProviderError::Threw(m) => write!(f, "provider threw: {m}"),
        }
    }
}

impl std::error::Error for ProviderError {}

/// `{code?, message?}` (or anything else a peer put in `error`) as a [`ProviderError::Provider`].
pub(crate) fn provider_error(error: &Value) -> ProviderError {
    match error {
        Value::Object(o) => ProviderError::Provider {
            code: o.get("code").and_then(|c| c.as_i64().or_else(|| c.as_f64().map(|f| f as i64))).unwrap_or(0),
            message: match o.get("message") {
                Some(Value::String(s)) => s.clone(),
                Some(v) => v.to_string(),
                None => error.to_string(),
            },
        },
        Value::String(s) => ProviderError::Provider { code: 0, message: s.clone() },
        other => ProviderError::Provider { code: 0, message: other.to_string() },
    }
}

/// A protocol answer `{result}` / `{error}` as the call's outcome. `error: null`
/// counts as absent; `result: null` is a result.
pub(crate) fn outcome_of(message: &serde_json::Map<String, Value>) -> Result<Value, ProviderError> {
    match message.get("error") {
        Some(e) if !e.is_null() => Err(provider_error(e)),
        _ => match message.get("result") {
            Some(r) => Ok(r.clone()),
            None => Err(ProviderError::Protocol("answer has neither `result` nor `error`".into())),
        },
    }
}

/// An answer of the Node host: as [`outcome_of`], and an error with
/// `kind: "import"` / `"threw"` (node/openctx-host.mjs) is labelled so.
pub(crate) fn host_outcome_of(message: &serde_json::Map<String, Value>) -> Result<Value, ProviderError> {
    let outcome = outcome_of(message);
    let kind = message.get("error").and_then(|e| e.get("kind")).and_then(Value::as_str);
    match (outcome, kind) {
        (Err(ProviderError::Provider { code, message }), Some(kind @ ("import" | "threw"))) => {
            let message = if code != 0 { format!("{message} (code {code})") } else { message };
            Err(if kind == "import" { ProviderError::Import(message) } else { ProviderError::Threw(message) })
        }
        (outcome, _) => outcome,
    }
}

/// An error and its `source()` chain on one line (reqwest's top-level messages
/// alone say little: "error sending request").
pub(crate) fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let s_text = s.to_string();
        if !out.contains(&s_text) {
            out.push_str(": ");
            out.push_str(&s_text);
        }
        source = s.source();
    }
    out
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The largest stdout line accepted from a child (one JSON message).
const MAX_MESSAGE_BYTES: usize = 32 * 1024 * 1024;
/// The largest stderr line read from a child; longer ones are cut.
const MAX_STDERR_LINE_BYTES: usize = 64 * 1024;
/// Lines queued for a child's stdin before callers wait.
const WRITE_QUEUE: usize = 256;

#[derive(Debug, PartialEq, Eq)]
enum LineRead {
    /// `buf` holds one line, without its `\n` (the last line may lack one).
    Line,
    /// The line was longer than the cap: it was skipped, `buf` is empty.
    TooLong,
    Eof,
}

/// Reads one `\n`-terminated line into `buf` (cleared first), never holding more
/// than `cap` bytes. Not cancel-safe; only reader tasks call it.
async fn read_line_capped<R: AsyncBufRead + Unpin>(
    r: &mut R,
    buf: &mut Vec<u8>,
    cap: usize,
) -> std::io::Result<LineRead> {
    buf.clear();
    let mut too_long = false;
    let mut any = false;
    loop {
        let available = r.fill_buf().await?;
        if available.is_empty() {
            return Ok(if too_long {
                LineRead::TooLong
            } else if any {
                LineRead::Line
            } else {
                LineRead::Eof
            });
        }
        any = true;
        let (chunk, found, used) = match available.iter().position(|&b| b == b'\n') {
            Some(i) => (&available[..i], true, i + 1),
            None => (available, false, available.len()),
        };
        if !too_long {
            if buf.len() + chunk.len() > cap {
                too_long = true;
                buf.clear();
            } else {
                buf.extend_from_slice(chunk);
            }
        }
        r.consume(used);
        if found {
            return Ok(if too_long { LineRead::TooLong } else { LineRead::Line });
        }
    }
}

/// How to start a child that speaks newline-delimited JSON on stdin/stdout.
#[derive(Debug, Clone)]
pub(crate) struct ChildSpec {
    pub program: String,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    pub cwd: Option<PathBuf>,
    /// Names the child in errors and log lines ("node" → "node exited (…)").
    pub label: String,
    /// JSON-RPC 2.0 peer (MCP): add `"jsonrpc": "2.0"` to our replies and tell the
    /// peer about abandoned requests with `notifications/cancelled`.
    pub jsonrpc: bool,
}

type Reply = oneshot::Sender<Result<Value, ProviderError>>;

struct SharedState {
    /// Set once the child is gone (or going): no new requests are accepted.
    dead: Option<String>,
    pending: HashMap<u64, Reply>,
    kill: Option<oneshot::Sender<()>>,
}

struct Shared {
    label: String,
    state: Mutex<SharedState>,
    /// stdout lines that were not JSON messages (tests check it stays 0).
    stray_lines: AtomicU64,
}

impl Shared {
    /// Marks the child dead and fails every pending call with `error`.
    fn fail_all(&self, error: ProviderError) {
        let pending: Vec<Reply> = {
            let mut st = lock(&self.state);
            if st.dead.is_none() {
                st.dead = Some(match &error {
                    ProviderError::Transport(m) => m.clone(),
                    other => other.to_string(),
                });
            }
            st.pending.drain().map(|(_, tx)| tx).collect()
        };
        for tx in pending {
            let _ = tx.send(Err(error.clone()));
        }
    }

    /// Asks the waiter task to kill the child (idempotent).
    fn kill(&self) {
        if let Some(k) = lock(&self.state).kill.take() {
            let _ = k.send(());
        }
    }
}

/// One running child process with a writer task (owns stdin), a reader task
/// (routes stdout answers to pending calls by id, answers the peer's requests),
/// a stderr task (to the plugin log) and a waiter task (owns the `Child`, reaps
/// it, fails every pending call when it exits).
///
/// The child runs in its own process group, which is killed as a whole (an
/// `npx` wrapper's grandchild must not outlive it). Dropping the last
/// reference kills it too.
pub(crate) struct ChildConn {
    pid: Option<u32>,
    jsonrpc: bool,
    writer: mpsc::Sender<Vec<u8>>,
    shared: Arc<Shared>,
    exited: watch::Receiver<bool>,
    next_id: AtomicU64,
}

pub(crate) enum RequestError {
    /// The child was already dead: nothing was sent (the caller may restart and
    /// retry); the message comes back.
    NotSent(ProviderError, Value),
    Failed(ProviderError),
}

impl ChildConn {
    /// Spawns the child and its tasks. Must run inside a tokio runtime.
    pub(crate) fn spawn(spec: &ChildSpec) -> Result<Arc<ChildConn>, ProviderError> {
        let mut cmd = tokio::process::Command::new(&spec.program);
        cmd.args(&spec.args)
            .envs(spec.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        if let Some(cwd) = &spec.cwd {
            cmd.current_dir(cwd);
        }
        #[cfg(unix)]
        cmd.process_group(0);
        let mut child = cmd.spawn().map_err(|e| {
            ProviderError::Transport(format!("failed to start {} (`{}`): {e}", spec.label, spec.program))
        })?;
        let pid = child.id();
        let (Some(stdin), Some(stdout), Some(stderr)) = (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            // Cannot happen with all three piped; the child is killed on drop.
            return Err(ProviderError::Transport(format!("{}: stdio pipes missing", spec.label)));
        };
        crate::core::log::info(format!(
            "openctx: started {} (pid {})",
            spec.label,
            pid.map_or("?".into(), |p| p.to_string())
        ));

        let (kill_tx, kill_rx) = oneshot::channel::<()>();
        let shared = Arc::new(Shared {
            label: spec.label.clone(),
            state: Mutex::new(SharedState { dead: None, pending: HashMap::new(), kill: Some(kill_tx) }),
            stray_lines: AtomicU64::new(0),
        });
        let (writer, mut write_rx) = mpsc::channel::<Vec<u8>>(WRITE_QUEUE);
        let (exited_tx, exited) = watch::channel(false);

        // Writer: the only owner of stdin. Ends when every sender is gone (the
        // conn was dropped) or a write fails (the child is gone).
        {
            let shared = shared.clone();
            let mut stdin = stdin;
            tokio::spawn(async move {
                while let Some(line) = write_rx.recv().await {
                    let r = async {
                        stdin.write_all(&line).await?;
                        stdin.flush().await
                    }
                    .await;
                    if let Err(e) = r {
                        crate::log_debug!("openctx: {}: write to stdin failed: {e}", shared.label);
                        shared.kill();
                        break;
                    }
                }
            });
        }

        // Reader: answers to pending calls; the peer's requests get a reply.
        {
            let shared = shared.clone();
            let reply_to = writer.downgrade();
            let jsonrpc = spec.jsonrpc;
            tokio::spawn(async move {
                let mut reader = BufReader::new(stdout);
                let mut buf = Vec::new();
                loop {
                    match read_line_capped(&mut reader, &mut buf, MAX_MESSAGE_BYTES).await {
                        Ok(LineRead::Line) => handle_line(&shared, &buf, jsonrpc, &reply_to),
                        Ok(LineRead::TooLong) => {
                            shared.stray_lines.fetch_add(1, Ordering::Relaxed);
                            crate::core::log::warn(format!(
                                "openctx: {}: dropped a stdout message over {} MiB",
                                shared.label,
                                MAX_MESSAGE_BYTES >> 20
                            ));
                        }
                        Ok(LineRead::Eof) => break,
                        Err(e) => {
                            crate::log_debug!("openctx: {}: read from stdout failed: {e}", shared.label);
                            break;
                        }
                    }
                }
                // stdout closed: the child is gone or broken either way.
                shared.kill();
            });
        }

        // stderr → log.
        {
            let label = spec.label.clone();
            tokio::spawn(async move {
                let mut reader = BufReader::new(stderr);
                let mut buf = Vec::new();
                while let Ok(r) = read_line_capped(&mut reader, &mut buf, MAX_STDERR_LINE_BYTES).await {
                    match r {
                        LineRead::Eof => break,
                        LineRead::TooLong => {
                            crate::core::log::info(format!("openctx: {label} stderr: (a very long line)"))
                        }
                        LineRead::Line => {
                            let text = String::from_utf8_lossy(&buf);
                            let text = text.trim_end_matches('\r');
                            if !text.is_empty() {
                                crate::core::log::info(format!(
                                    "openctx: {label} stderr: {}",
                                    crate::core::text::cut(text, 2000)
                                ));
                            }
                        }
                    }
                }
            });
        }

        // Waiter: owns the Child; always reaps it (no orphan left to tokio's
        // SIGCHLD-based orphan queue), kills the whole group, fails pending calls.
        {
            let shared = shared.clone();
            tokio::spawn(async move {
                let killed;
                let status = tokio::select! {
                    status = child.wait() => { killed = false; status }
                    _ = kill_rx => {
                        killed = true;
                        kill_group(pid);
                        let _ = child.start_kill();
                        child.wait().await
                    }
                };
                // Whatever the group leader left behind (npx's real server, a
                // provider's subprocess) goes with it.
                kill_group(pid);
                let how = match &status {
                    Ok(s) => s.to_string(),
                    Err(e) => format!("wait failed: {e}"),
                };
                let message = format!("{} exited ({how})", shared.label);
                if killed {
                    crate::core::log::info(format!("openctx: {message}"));
                } else {
                    crate::core::log::warn(format!("openctx: {message}"));
                }
                shared.fail_all(ProviderError::Transport(message));
                let _ = exited_tx.send(true);
            });
        }

        Ok(Arc::new(ChildConn { pid, jsonrpc: spec.jsonrpc, writer, shared, exited, next_id: AtomicU64::new(1) }))
    }

    pub(crate) fn pid(&self) -> Option<u32> {
        self.pid
    }

    /// True once the child exited, was killed, or its pipes broke.
    pub(crate) fn is_dead(&self) -> bool {
        lock(&self.shared.state).dead.is_some() || *self.exited.borrow()
    }

    #[cfg(test)]
    pub(crate) fn stray_lines(&self) -> u64 {
        self.shared.stray_lines.load(Ordering::Relaxed)
    }

    /// Sends `message` (an object) with a fresh `id` member and waits for the
    /// answer with that id.
    pub(crate) async fn request_inner(&self, mut message: Value) -> Result<Value, RequestError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        {
            let mut st = lock(&self.shared.state);
            if let Some(reason) = &st.dead {
                return Err(RequestError::NotSent(ProviderError::Transport(reason.clone()), message));
            }
            st.pending.insert(id, tx);
        }
        let mut guard = PendingGuard { conn: self, id, sent: false, done: false };
        message["id"] = json!(id);
        let mut line = serde_json::to_vec(&message)
            .map_err(|e| RequestError::Failed(ProviderError::Protocol(format!("cannot encode request: {e}"))))?;
        line.push(b'\n');
        if self.writer.send(line).await.is_err() {
            return Err(RequestError::Failed(self.dead_error()));
        }
        guard.sent = true;
        let outcome = match rx.await {
            Ok(outcome) => outcome,
            Err(_) => Err(self.dead_error()),
        };
        guard.done = true;
        outcome.map_err(RequestError::Failed)
    }

    /// A request; the outcome is the answer's `result`, or its `error`.
    pub(crate) async fn request(&self, message: Value) -> Result<Value, ProviderError> {
        self.request_inner(message).await.map_err(|e| match e {
            RequestError::NotSent(e, _) | RequestError::Failed(e) => e,
        })
    }

    /// Sends a message that expects no answer.
    pub(crate) async fn notify(&self, message: Value) -> Result<(), ProviderError> {
        let mut line = serde_json::to_vec(&message).map_err(|e| ProviderError::Protocol(e.to_string()))?;
        line.push(b'\n');
        self.writer.send(line).await.map_err(|_| self.dead_error())
    }

    fn dead_error(&self) -> ProviderError {
        let reason = lock(&self.shared.state).dead.clone();
        ProviderError::Transport(reason.unwrap_or_else(|| format!("{} exited", self.shared.label)))
    }

    /// Kills the child and fails every pending call with `reason` (idempotent).
    pub(crate) fn kill(&self, reason: &str) {
        self.shared.fail_all(ProviderError::Transport(reason.to_string()));
        self.shared.kill();
    }

    /// Kills the child and waits (at most `wait`) until it is reaped.
    pub(crate) async fn shutdown(&self, reason: &str, wait: Duration) {
        self.kill(reason);
        let mut exited = self.exited.clone();
        let _ = tokio::time::timeout(wait, exited.wait_for(|e| *e)).await;
    }
}

impl Drop for ChildConn {
    fn drop(&mut self) {
        self.shared.fail_all(ProviderError::Transport(format!("{} was shut down", self.shared.label)));
        self.shared.kill();
    }
}

/// Removes a call's pending slot when its future ends or is dropped; tells a
/// JSON-RPC peer that an abandoned request is no longer wanted.
struct PendingGuard<'a> {
    conn: &'a ChildConn,
    id: u64,
    sent: bool,
    done: bool,
}

impl Drop for PendingGuard<'_> {
    fn drop(&mut self) {
        lock(&self.conn.shared.state).pending.remove(&self.id);
        if self.sent && !self.done && self.conn.jsonrpc {
            let note = json!({
                "jsonrpc": "2.0",
                "method": "notifications/cancelled",
                "params": {"requestId": self.id, "reason": "the client stopped waiting"},
            });
            if let Ok(mut line) = serde_json::to_vec(&note) {
                line.push(b'\n');
                let _ = self.conn.writer.try_send(line);
            }
        }
    }
}

/// One stdout line from the child: an answer to route, a request to answer, a
/// notification to ignore.
fn handle_line(shared: &Shared, line: &[u8], jsonrpc: bool, reply_to: &mpsc::WeakSender<Vec<u8>>) {
    let trimmed = line.strip_suffix(b"\r").unwrap_or(line);
    if trimmed.iter().all(|b| b.is_ascii_whitespace()) {
        return;
    }
    let message = match serde_json::from_slice::<Value>(trimmed) {
        Ok(Value::Object(m)) => m,
        _ => {
            shared.stray_lines.fetch_add(1, Ordering::Relaxed);
            let text = String::from_utf8_lossy(trimmed);
            crate::core::log::warn(format!(
                "openctx: {}: not a JSON message on stdout: {}",
                shared.label,
                crate::core::text::cut(&text, 500)
            ));
            return;
        }
    };
    let id = message.get("id").filter(|id| !id.is_null());
    if let Some(method) = message.get("method").and_then(Value::as_str) {
        match id {
            Some(id) => {
                let reply = answer_peer_request(method, id.clone(), jsonrpc);
                crate::log_debug!("openctx: {}: answered the peer's request {method}", shared.label);
                if let (Some(tx), Ok(mut bytes)) = (reply_to.upgrade(), serde_json::to_vec(&reply)) {
                    bytes.push(b'\n');
                    let _ = tx.try_send(bytes);
                }
            }
            None => crate::log_debug!("openctx: {}: notification {method}", shared.label),
        }
        return;
    }
    let Some(id) = id.and_then(|id| id.as_u64().or_else(|| id.as_str().and_then(|s| s.parse().ok()))) else {
        crate::log_debug!("openctx: {}: message without a usable id ignored", shared.label);
        return;
    };
    let outcome = if jsonrpc { outcome_of(&message) } else { host_outcome_of(&message) };
    let tx = lock(&shared.state).pending.remove(&id);
    match tx {
        Some(tx) => {
            let _ = tx.send(outcome);
        }
        // The caller stopped waiting (timeout): nothing to do.
        None => crate::log_debug!("openctx: {}: late answer to request {id} dropped", shared.label),
    }
}

/// Minimal answers to a peer's requests, so a server waiting for one does not stall.
fn answer_peer_request(method: &str, id: Value, jsonrpc: bool) -> Value {
    let mut reply = match method {
        "ping" => json!({"id": id, "result": {}}),
        "roots/list" => json!({"id": id, "result": {"roots": []}}),
        _ => {
            json!({"id": id, "error": {"code": -32601, "message": format!("method not supported by this client: {method}")}})
        }
    };
    if jsonrpc {
        reply["jsonrpc"] = json!("2.0");
    }
    reply
}

/// SIGKILL to the child's process group (the child is its group's leader).
fn kill_group(pid: Option<u32>) {
    #[cfg(unix)]
    if let Some(pid) = pid.and_then(|p| i32::try_from(p).ok()).filter(|p| *p > 1) {
        // SAFETY: kill(2) with a negative pid signals that process group only;
        // the group is ours (process_group(0) at spawn).
        unsafe {
            libc::kill(-pid, libc::SIGKILL);
        }
    }
    #[cfg(not(unix))]
    let _ = pid;
}

#[cfg(test)]
pub(crate) mod test_support {
    use std::path::{Path, PathBuf};

    /// The repository root, also when these files are `#[path]`-included by
    /// another crate (then `file!()` is absolute).
    pub(crate) fn repo_root() -> PathBuf {
        let file = Path::new(file!());
        if file.is_absolute() {
            file.ancestors().nth(4).expect("src/openctx/transport/mod.rs").to_path_buf()
        } else {
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        }
    }

    /// SIGKILL to one process (a child the test's transport spawned).
    pub(crate) fn kill9(pid: u32) {
        // SAFETY: kill(2) has no memory-safety preconditions.
        unsafe {
            libc::kill(pid as i32, libc::SIGKILL);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_is_readable() {
        assert_eq!(ProviderError::Timeout.to_string(), "timed out");
        assert_eq!(ProviderError::Transport("HTTP 500 from x".into()).to_string(), "transport error: HTTP 500 from x");
        assert_eq!(ProviderError::Protocol("garbage".into()).to_string(), "protocol error: garbage");
        assert_eq!(
            ProviderError::Provider { code: -32000, message: "nope".into() }.to_string(),
            "provider error -32000: nope"
        );
    }

    #[test]
    fn outcomes() {
        let m = |v: Value| v.as_object().unwrap().clone();
        assert_eq!(outcome_of(&m(json!({"result": [1]}))), Ok(json!([1])));
        assert_eq!(outcome_of(&m(json!({"result": null}))), Ok(Value::Null));
        assert_eq!(outcome_of(&m(json!({"error": null, "result": 2}))), Ok(json!(2)));
        assert_eq!(
            outcome_of(&m(json!({"error": {"code": 7, "message": "x"}}))),
            Err(ProviderError::Provider { code: 7, message: "x".into() })
        );
        assert_eq!(
            outcome_of(&m(json!({"error": "plain"}))),
            Err(ProviderError::Provider { code: 0, message: "plain".into() })
        );
        assert!(matches!(outcome_of(&m(json!({"id": 1}))), Err(ProviderError::Protocol(_))));
    }

    #[tokio::test]
    async fn capped_lines() {
        let data = b"short\nthis line is too long\nok\nlast".to_vec();
        let mut r = BufReader::with_capacity(4, &data[..]);
        let mut buf = Vec::new();
        assert_eq!(read_line_capped(&mut r, &mut buf, 10).await.unwrap(), LineRead::Line);
        assert_eq!(buf, b"short");
        assert_eq!(read_line_capped(&mut r, &mut buf, 10).await.unwrap(), LineRead::TooLong);
        assert_eq!(read_line_capped(&mut r, &mut buf, 10).await.unwrap(), LineRead::Line);
        assert_eq!(buf, b"ok");
        assert_eq!(read_line_capped(&mut r, &mut buf, 10).await.unwrap(), LineRead::Line);
        assert_eq!(buf, b"last");
        assert_eq!(read_line_capped(&mut r, &mut buf, 10).await.unwrap(), LineRead::Eof);
    }
}
