//! A child process that speaks newline-delimited JSON with numeric ids on
//! stdin/stdout ([`ChildConn`]): the Node host (JSON-RPC without the
//! `jsonrpc` member) and MCP servers (JSON-RPC 2.0) share it.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::AsyncWriteExt;
use tokio::sync::{mpsc, oneshot, watch};

use super::error::{host_outcome_of, outcome_of, ProviderError};
use super::lines::{CappedLines, LineRead};
use crate::core::sync::LockExt;

/// The largest stdout line accepted from a child (one JSON message).
const MAX_MESSAGE_BYTES: usize = 32 * 1024 * 1024;
/// The largest stderr line read from a child; a longer one is logged as "(a very long line)".
const MAX_STDERR_LINE_BYTES: usize = 64 * 1024;
/// Lines queued for a child's stdin before callers wait.
const WRITE_QUEUE: usize = 256;

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

/// The calls waiting for the child's answers, and whether it is still alive.
struct Calls {
    /// Set once the child is gone (or going): no new requests are accepted.
    dead: Option<String>,
    pending: HashMap<u64, Reply>,
    kill: Option<oneshot::Sender<()>>,
}

/// What the connection and its tasks (reader, writer, waiter) share.
struct ChildState {
    label: String,
    calls: Mutex<Calls>,
    /// stdout lines that were not JSON messages (tests check it stays 0).
    stray_lines: AtomicU64,
}

impl ChildState {
    /// Marks the child dead and fails every pending call with `error`.
    fn fail_all(&self, error: ProviderError) {
        let pending: Vec<Reply> = {
            let mut st = self.calls.locked();
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
        if let Some(k) = self.calls.locked().kill.take() {
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
    shared: Arc<ChildState>,
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
        let shared = Arc::new(ChildState {
            label: spec.label.clone(),
            calls: Mutex::new(Calls { dead: None, pending: HashMap::new(), kill: Some(kill_tx) }),
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
                let mut lines = CappedLines::new(stdout, MAX_MESSAGE_BYTES);
                loop {
                    match lines.next().await {
                        Ok(LineRead::Line(line)) => handle_line(&shared, &line, jsonrpc, &reply_to),
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
                let mut lines = CappedLines::new(stderr, MAX_STDERR_LINE_BYTES);
                while let Ok(r) = lines.next().await {
                    match r {
                        LineRead::Eof => break,
                        LineRead::TooLong => {
                            crate::core::log::info(format!("openctx: {label} stderr: (a very long line)"))
                        }
                        LineRead::Line(line) => {
                            let text = String::from_utf8_lossy(&line);
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
        self.shared.calls.locked().dead.is_some() || *self.exited.borrow()
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
            let mut st = self.shared.calls.locked();
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
        let reason = self.shared.calls.locked().dead.clone();
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
        self.conn.shared.calls.locked().pending.remove(&self.id);
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
fn handle_line(shared: &ChildState, line: &[u8], jsonrpc: bool, reply_to: &mpsc::WeakSender<Vec<u8>>) {
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
    let tx = shared.calls.locked().pending.remove(&id);
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
mod tests {
    use super::*;

    const LIMIT: Duration = Duration::from_secs(30);

    /// A real child: `sh -c script`, newline-delimited JSON on its stdio.
    fn sh(script: &str) -> Arc<ChildConn> {
        let spec = ChildSpec {
            program: "sh".into(),
            args: vec!["-c".into(), script.into()],
            env: Vec::new(),
            cwd: None,
            label: "sh".into(),
            jsonrpc: false,
        };
        ChildConn::spawn(&spec).expect("sh starts")
    }

    #[tokio::test]
    async fn a_message_at_the_cap_is_read_and_one_byte_past_is_dropped() {
        // Each answer line is `{"id":N,"result":"x…x"}`: 20 bytes around the x's.
        let script = format!(
            r#"n={MAX_MESSAGE_BYTES}
               answer() {{ printf '{{"id":%s,"result":"' "$1"; head -c "$2" /dev/zero | tr '\0' x; printf '"}}\n'; }}
               read -r _; answer 1 $((n - 20))
               read -r _; answer 2 $((n - 19)); printf '{{"id":2,"result":"after"}}\n'
               exec cat >/dev/null"#
        );
        let conn = sh(&script);
        tokio::time::timeout(LIMIT, async {
            let at_cap = conn.request(json!({"method": "a"})).await.unwrap();
            assert_eq!(at_cap.as_str().map(str::len), Some(MAX_MESSAGE_BYTES - 20));
            assert_eq!(conn.stray_lines(), 0);
            // One byte more: dropped (and counted), the next line is read as usual.
            assert_eq!(conn.request(json!({"method": "b"})).await.unwrap(), json!("after"));
            assert_eq!(conn.stray_lines(), 1);
        })
        .await
        .expect("test timed out");
        conn.shutdown("test over", Duration::from_secs(2)).await;
        assert!(conn.is_dead());
    }

    #[tokio::test]
    async fn the_peers_requests_are_answered_and_garbage_is_counted() {
        // The child asks us `roots/list` and `ping`, then answers our request
        // with our two replies; a line that is not JSON comes first.
        let conn = sh(r#"read -r _
               echo 'not json'
               echo '{"id":7,"method":"roots/list"}'; read -r roots
               echo '{"id":"p","method":"ping"}'; read -r ping
               echo '{"id":8,"method":"no/such"}'; read -r unknown
               printf '{"id":1,"result":[%s,%s,%s]}\n' "$roots" "$ping" "$unknown"
               exec cat >/dev/null"#);
        let replies = tokio::time::timeout(LIMIT, conn.request(json!({"method": "a"}))).await.unwrap().unwrap();
        assert_eq!(replies[0], json!({"id": 7, "result": {"roots": []}}));
        assert_eq!(replies[1], json!({"id": "p", "result": {}}));
        assert_eq!(replies[2]["id"], 8);
        assert_eq!(replies[2]["error"]["code"], -32601);
        assert_eq!(conn.stray_lines(), 1);
        conn.kill("test over");
    }

    #[tokio::test]
    async fn a_child_that_exits_fails_its_pending_calls() {
        let conn = sh("read -r _; exit 3");
        let e = tokio::time::timeout(LIMIT, conn.request(json!({"method": "a"}))).await.unwrap().unwrap_err();
        assert!(matches!(&e, ProviderError::Transport(m) if m.starts_with("sh exited")), "{e:?}");
        let e = conn.request(json!({"method": "b"})).await.unwrap_err();
        assert!(matches!(&e, ProviderError::Transport(m) if m.starts_with("sh exited")), "{e:?}");
        assert!(conn.is_dead());
    }
}
