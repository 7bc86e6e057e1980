//! The Codex CLI front-end: two private Unix sockets in a directory of
//! this Neovim's own, which `:Amp open codex` gives Codex as its `TMPDIR`:
//!
//! - `codex-ipc/ipc-<uid>.sock`, where Codex's `/ide` asks for the editor's
//!   context (only with `codex.ide_context`: Codex's protocol is private),
//!   answered from the one published editor state;
//! - `amp/hook.sock`, where our `PreToolUse` hook hands over each
//!   `apply_patch` for review and waits for the user's decision.
//!
//! Neither protocol carries a token: who may talk is settled by the
//! sockets' privacy (0600 in 0700 directories of ours, under a random
//! name) and by the peer's uid, checked on every accept
//! (`serve::listener`), as Codex itself checks ours. The desktop app, VS
//! Code's extension and other editors keep the default `$TMPDIR`, so none
//! of them is disturbed.
//!
//! Every frame is a u32 little-endian length and a body, read with a cap
//! where its bytes arrive (the length is checked before any body byte is
//! read): [`MAX_IPC_FRAME_BYTES`] for Codex's requests and our hook's
//! header, the announced size (at most [`MAX_PATCH_BYTES`]) for a patch,
//! whose share of the byte budget is taken before it is read.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::UnixStream;
use tokio::time::timeout;
use tokio_util::codec::{FramedRead, FramedWrite, LengthDelimitedCodec};

use super::hook;
use super::launch::{codex_args, hook_command, HOOK_SOCKET_VAR, HOOK_TIMEOUT_VAR};
use super::protocol::{self, DecodeError, HookAnswer, HookHeader, Incoming, MAX_IPC_FRAME_BYTES, MAX_PATCH_BYTES};
use crate::core::log;
use crate::core::review::{Owner, ReviewEnd};
use crate::serve::front_end::{Announce, FrontEnd, StartError, Started};
use crate::serve::hub::Hub;
use crate::serve::listener::{accept_loop, listen_unix, HandshakeSlot};
use crate::serve::registry::Agent;
use crate::serve::write_deadline::WRITE_TIMEOUT;

pub const AGENT: Agent = Agent { id: "codex", name: "Codex" };

/// Largest frame we send: an `ide-context` answer, a rewritten patch.
const MAX_SENT_FRAME_BYTES: usize = 4 * MAX_PATCH_BYTES;
/// How long Codex's hook may wait for the user, past `review.timeout_ms`:
/// Codex lets a patch through when its hook times out, so it must never
/// time out before the review does.
const HOOK_TIMEOUT_MARGIN_SECS: u64 = 60;
/// Our hook gives up (and denies) this long after `review.timeout_ms`,
/// well before Codex's timeout of it.
const HOOK_OWN_MARGIN_MS: u64 = 30_000;
/// Socket paths longer than this (of 107 bytes a Unix socket path may
/// have) are made under /tmp instead of `$TMPDIR`.
const MAX_SOCKET_PATH: usize = 100;
/// The private directories' names: `amp-codex-<pid>-<random hex>`.
const ROOT_PREFIX: &str = "amp-codex-";

/// Where this Neovim's Codex sockets are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Paths {
    /// Codex's `TMPDIR`: private to this Neovim.
    pub root: PathBuf,
    pub ipc_socket: PathBuf,
    pub hook_socket: PathBuf,
}

impl Paths {
    pub fn new(base: &Path, pid: u32, tag: u32, uid: u32) -> Self {
        let root = base.join(format!("{ROOT_PREFIX}{pid}-{tag:08x}"));
        Self {
            ipc_socket: root.join("codex-ipc").join(format!("ipc-{uid}.sock")),
            hook_socket: root.join("amp").join("hook.sock"),
            root,
        }
    }

    fn fit(&self) -> bool {
        [&self.ipc_socket, &self.hook_socket].iter().all(|p| p.as_os_str().len() <= MAX_SOCKET_PATH)
    }
}

/// The directory for the private root: the system's temp directory
/// (`$TMPDIR`, else /tmp), or /tmp when socket paths would not fit there.
fn choose_paths() -> Paths {
    let (pid, tag) = (std::process::id(), rand::random::<u32>());
    // SAFETY: geteuid cannot fail.
    let uid = unsafe { libc::geteuid() };
    let paths = Paths::new(&std::env::temp_dir(), pid, tag, uid);
    if paths.fit() {
        paths
    } else {
        Paths::new(Path::new("/tmp"), pid, tag, uid)
    }
}

/// Removes the private directories of Neovims that are gone, under `base`:
/// only directories of ours (no link followed), named as ours.
pub fn sweep_stale(base: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(base) else { return Vec::new() };
    // SAFETY: geteuid cannot fail.
    let me = unsafe { libc::geteuid() };
    let mut removed = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(pid_of_root) else { continue };
        let path = entry.path();
        let ours = std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir() && m.uid() == me);
        if ours && !crate::core::fsutil::pid_alive(pid) && std::fs::remove_dir_all(&path).is_ok() {
            removed.push(path);
        }
    }
    removed
}

/// The pid in a private directory's name, when it is one.
fn pid_of_root(name: &str) -> Option<u32> {
    let (pid, tag) = name.strip_prefix(ROOT_PREFIX)?.split_once('-')?;
    let digits = !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit());
    let hex = tag.len() == 8 && tag.bytes().all(|b| b.is_ascii_hexdigit());
    (digits && hex).then(|| pid.parse().ok()).flatten()
}

pub struct CodexServer {
    pub hub: Arc<Hub>,
    pub paths: Paths,
    /// Codex's `/ide` is served.
    ide_context: bool,
    /// The ids `initialize` hands out.
    next_client: AtomicU64,
}

fn codec(max: usize) -> LengthDelimitedCodec {
    LengthDelimitedCodec::builder().little_endian().length_field_type::<u32>().max_frame_length(max).new_codec()
}

type Reader = FramedRead<OwnedReadHalf, LengthDelimitedCodec>;
type Writer = FramedWrite<OwnedWriteHalf, LengthDelimitedCodec>;

fn framed(stream: UnixStream, max_read: usize) -> (Reader, Writer) {
    let (read, write) = stream.into_split();
    (FramedRead::new(read, codec(max_read)), FramedWrite::new(write, codec(MAX_SENT_FRAME_BYTES)))
}

/// Sends one frame; `Err`: why the client is dropped.
async fn send(writer: &mut Writer, frame: Vec<u8>) -> Result<(), String> {
    match timeout(WRITE_TIMEOUT, writer.send(Bytes::from(frame))).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(format!("write failed: {e}")),
        Err(_) => Err("stopped reading (write timed out)".into()),
    }
}

impl CodexServer {
    /// The answer to one frame of Codex's IDE client; `None`: nothing to
    /// answer. `Err`: the frame is no message (the client is dropped).
    fn answer(&self, frame: &[u8]) -> Result<Option<Vec<u8>>, DecodeError> {
        let Incoming::Request { id, method, params } = protocol::decode(frame)? else { return Ok(None) };
        crate::log_debug!("codex: {method} {}", log::untrusted(&params.to_string()));
        let answer = match method.as_str() {
            "initialize" => {
                protocol::success(&id, protocol::initialized(self.next_client.fetch_add(1, Ordering::Relaxed)))
            }
            "ide-context" => {
                let state = &self.hub.state;
                let (selection, visible) = (state.selection(), state.visible_files());
                let codex_root = protocol::workspace_root(&params);
                let folders = self.hub.workspace_folders();
                let roots: Vec<&Path> =
                    codex_root.as_deref().into_iter().chain(folders.iter().map(|f| Path::new(f.as_str()))).collect();
                let visible = visible.as_ref().map_or(&[][..], |v| v.raw.as_slice());
                protocol::success(&id, protocol::ide_context(selection.as_ref().map(|s| &s.raw), visible, &roots))
            }
            _ => protocol::failure(&id, "no-handler-for-request"),
        };
        Ok(Some(answer))
    }

    /// The hook's timeout in Codex: longer than any review.
    fn hook_timeout_secs(&self) -> u64 {
        self.hub.options.review_timeout_ms.div_ceil(1000) + HOOK_TIMEOUT_MARGIN_SECS
    }

    /// What `:Amp open codex` adds to Codex's command, and its environment.
    fn open(&self) -> Value {
        let options = &self.hub.options;
        let nvim = options.nvim_program.as_deref().unwrap_or("nvim");
        let plugin = options.plugin_directory.as_deref().unwrap_or(".");
        let command = hook_command(nvim, plugin);
        json!({
            "args": codex_args(&command, self.hook_timeout_secs()),
            "env": {
                "TMPDIR": self.paths.root.to_string_lossy(),
                HOOK_SOCKET_VAR: self.paths.hook_socket.to_string_lossy(),
                HOOK_TIMEOUT_VAR: (options.review_timeout_ms + HOOK_OWN_MARGIN_MS).to_string(),
            },
        })
    }
}

/// Serves one connection of Codex's IDE client: requests answered in
/// order, one at a time, until it hangs up.
async fn serve_ipc(server: Arc<CodexServer>, stream: UnixStream, slot: HandshakeSlot) {
    let hub = server.hub.clone();
    let (mut reader, mut writer) = framed(stream, MAX_IPC_FRAME_BYTES);
    // Until its first frame it holds a handshake slot.
    let first = tokio::select! {
        first = timeout(hub.handshakes.timeout, reader.next()) => first,
        _ = slot.cancel.notified() => return,
        () = hub.tasks.closing.cancelled() => return,
    };
    let mut next = match first {
        Ok(Some(Ok(frame))) => Some(frame),
        Ok(Some(Err(e))) => {
            log::limited("codex frame", log::Level::Warn, format!("codex: IDE client dropped: {e}"));
            return;
        }
        Ok(None) | Err(_) => return,
    };
    drop(slot);
    let connection = match hub.connect(AGENT, Owner::new(AGENT.name)) {
        Ok(connection) => connection,
        Err(too_many) => {
            log::limited("too many clients", log::Level::Warn, format!("codex: client rejected: {too_many}"));
            return;
        }
    };
    // Its requests see the editor's state (read when the first client comes).
    hub.state.context_ready().await;
    let ended = loop {
        let frame = match next.take() {
            Some(frame) => frame,
            None => tokio::select! {
                frame = reader.next() => match frame {
                    Some(Ok(frame)) => frame,
                    Some(Err(e)) => break format!("bad frame: {e}"),
                    None => break "closed by the client".to_owned(),
                },
                () = hub.tasks.closing.cancelled() => break "server shutting down".to_owned(),
            },
        };
        // Its share of the in-flight budget until its answer is sent;
        // nothing more is read meanwhile.
        let Ok(share) = hub.budget.take(frame.len()).await else { break "server shutting down".to_owned() };
        let answer = server.answer(&frame);
        drop(frame);
        match answer {
            Ok(Some(answer)) => {
                if let Err(e) = send(&mut writer, answer).await {
                    break e;
                }
            }
            Ok(None) => {}
            Err(e) => break format!("sent no message: {}", log::untrusted(&e.to_string())),
        }
        drop(share);
    };
    connection.end(&ended);
}

/// Serves one run of our hook: its header, then (once told to send it)
/// its patch, within the handshake deadline; then the review, and the
/// answer. A hook that goes away (Codex interrupted) closes its reviews.
async fn serve_hook(server: Arc<CodexServer>, stream: UnixStream, slot: HandshakeSlot) {
    let hub = server.hub.clone();
    let (mut reader, mut writer) = framed(stream, MAX_IPC_FRAME_BYTES);
    let received = tokio::select! {
        received = timeout(hub.handshakes.timeout, receive_patch(&hub, &mut reader, &mut writer)) => received,
        _ = slot.cancel.notified() => return,
        () = hub.tasks.closing.cancelled() => return,
    };
    let (header, patch) = match received {
        Ok(Ok(Some(request))) => request,
        Ok(Ok(None)) => return,
        Ok(Err(e)) => {
            log::limited("codex hook", log::Level::Warn, format!("codex: hook dropped: {}", log::untrusted(&e)));
            return;
        }
        Err(_) => {
            log::limited("codex hook", log::Level::Warn, "codex: hook dropped: no patch within the handshake deadline");
            return;
        }
    };
    drop(slot);
    let owner = Owner::new(AGENT.name);
    let wait = Duration::from_millis(hub.options.review_timeout_ms);
    let answer = tokio::select! {
        answer = hook::review(hub.editor.as_ref(), owner, wait, &header.cwd, &patch) => answer,
        // The hook sends nothing more: this is it going away.
        _ = reader.next() => {
            log::info("codex: the hook went away before the user decided (Codex interrupted)");
            let _ = hub.editor.close_reviews(owner, ReviewEnd::Disconnected).await;
            return;
        }
        () = hub.tasks.closing.cancelled() => return,
    };
    drop(patch);
    let outcome = match &answer {
        HookAnswer::Apply => "applied as proposed".to_owned(),
        HookAnswer::Rewrite(_) => "applied with the user's changes".to_owned(),
        HookAnswer::Deny(why) => format!("denied: {why}"),
    };
    log::info(format!("codex: patch {outcome}"));
    if let Err(e) = send(&mut writer, answer.to_frame()).await {
        log::warn(format!("codex: the hook did not get its answer: {e}"));
    }
}

/// The hook's header and patch; `Ok(None)`: refused (the hook was told
/// why) or gone.
async fn receive_patch(
    hub: &Hub,
    reader: &mut Reader,
    writer: &mut Writer,
) -> Result<Option<(HookHeader, String)>, String> {
    let Some(frame) = reader.next().await else { return Ok(None) };
    let frame = frame.map_err(|e| format!("bad header frame: {e}"))?;
    let value: Value = serde_json::from_slice(&frame).map_err(|e| format!("the header is not JSON: {e}"))?;
    let header: HookHeader = serde_json::from_value(value.clone()).map_err(|e| format!("bad header: {e}"))?;
    let size = value.get("patch_bytes").and_then(Value::as_u64).ok_or("the header has no patch_bytes")?;
    if size > MAX_PATCH_BYTES as u64 {
        let why =
            format!("the patch is {size} bytes, more than Neovim reviews ({MAX_PATCH_BYTES}); it was not applied");
        send(writer, HookAnswer::Deny(why).to_frame()).await?;
        return Ok(None);
    }
    let size = size as usize;
    // The patch's share of the budget before any byte of it is read.
    let share = hub.budget.take(size).await.map_err(|_| "server shutting down")?;
    reader.decoder_mut().set_max_frame_length(size);
    send(writer, json!({ "decision": "send" }).to_string().into_bytes()).await?;
    let Some(frame) = reader.next().await else { return Ok(None) };
    let frame = frame.map_err(|e| format!("bad patch frame (announced {size} bytes): {e}"))?;
    if frame.len() != size {
        return Err(format!("the patch has {} bytes, {size} announced", frame.len()));
    }
    let patch = match String::from_utf8(frame.to_vec()) {
        Ok(patch) => patch,
        Err(_) => {
            send(writer, HookAnswer::Deny("the patch is not UTF-8 text; it was not applied".into()).to_frame()).await?;
            return Ok(None);
        }
    };
    // From here the review's limits hold its texts.
    drop(share);
    Ok(Some((header, patch)))
}

/// Starts the Codex front-end: its private directory and sockets. Main
/// thread, inside the runtime (binding is a quick, non-blocking syscall).
pub fn start(hub: &Arc<Hub>) -> Result<Started, StartError> {
    let paths = choose_paths();
    let bind = |path: &Path| listen_unix(AGENT.id, path.parent().expect("a socket path has a directory"), path);
    let hook_listener = bind(&paths.hook_socket)?;
    let ipc_listener = if hub.options.codex_ide_context { Some(bind(&paths.ipc_socket)?) } else { None };
    let server = Arc::new(CodexServer {
        hub: hub.clone(),
        ide_context: ipc_listener.is_some(),
        paths,
        next_client: AtomicU64::new(1),
    });
    let serving = server.clone();
    let serve = move |stream, slot| serve_hook(serving.clone(), stream, slot);
    hub.spawn_detached({
        let hub = hub.clone();
        async move { accept_loop(hook_listener, AGENT.id, hub.handshakes.clone(), &hub.tasks, serve).await }
    });
    if let Some(listener) = ipc_listener {
        let serving = server.clone();
        let serve = move |stream, slot| serve_ipc(serving.clone(), stream, slot);
        hub.spawn_detached({
            let hub = hub.clone();
            async move { accept_loop(listener, AGENT.id, hub.handshakes.clone(), &hub.tasks, serve).await }
        });
    }
    let announced = server.clone();
    let announce: Announce = Box::pin(async move {
        let base = announced.paths.root.parent().map(Path::to_path_buf).unwrap_or_default();
        if let Ok(removed) = tokio::task::spawn_blocking(move || sweep_stale(&base)).await {
            for dir in removed {
                log::info(format!("codex: removed {} of a Neovim that is gone", dir.display()));
            }
        }
        let paths = &announced.paths;
        let ipc = if announced.ide_context { paths.ipc_socket.display().to_string() } else { "off".into() };
        log::info(format!("codex: hook socket {}, IDE context {ipc}", paths.hook_socket.display()));
        Ok(paths.hook_socket.clone())
    });
    Ok(Started { front_end: server, announce })
}

impl FrontEnd for CodexServer {
    fn agent(&self) -> Agent {
        AGENT
    }

    fn status(&self) -> Value {
        json!({
            "enabled": true,
            "clients": self.hub.clients(AGENT.id),
            "socket": self.paths.hook_socket.to_string_lossy(),
            "ipc_socket": self.ide_context.then(|| self.paths.ipc_socket.to_string_lossy()),
            "ide_context": self.ide_context,
            "tmpdir": self.paths.root.to_string_lossy(),
            "open": self.open(),
        })
    }

    /// Nothing in Neovim's own environment: Codex's `TMPDIR` and our
    /// hook's socket are for the terminal `:Amp open codex` starts (a
    /// `TMPDIR` for every terminal would move other agents' files).
    fn terminal_env(&self) -> Vec<(&'static str, String)> {
        Vec::new()
    }

    /// Nothing names the workspace: `ide-context` reads it when asked.
    fn workspace_changed(self: Arc<Self>) -> Announce {
        Box::pin(async move { Ok(self.paths.hook_socket.clone()) })
    }

    /// The sockets go; their directories too when empty (a Codex still
    /// running may keep files in its `TMPDIR`: swept once this Neovim is gone).
    fn stopped(&self) {
        for socket in [&self.paths.hook_socket, &self.paths.ipc_socket] {
            let _ = std::fs::remove_file(socket);
            if let Some(dir) = socket.parent() {
                let _ = std::fs::remove_dir(dir);
            }
        }
        let _ = std::fs::remove_dir(&self.paths.root);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{dead_pid, TempDir};

    #[test]
    fn paths_are_private_and_short_enough() {
        let paths = Paths::new(Path::new("/tmp"), 42, 0xabc, 1000);
        assert_eq!(paths.root, PathBuf::from("/tmp/amp-codex-42-00000abc"));
        assert_eq!(paths.ipc_socket, PathBuf::from("/tmp/amp-codex-42-00000abc/codex-ipc/ipc-1000.sock"));
        assert_eq!(paths.hook_socket, PathBuf::from("/tmp/amp-codex-42-00000abc/amp/hook.sock"));
        assert!(paths.fit());
        assert!(!Paths::new(&Path::new("/tmp").join("x".repeat(60)), 42, 1, 1000).fit());
        assert_eq!(pid_of_root("amp-codex-42-00000abc"), Some(42));
        for other in ["amp-codex-42", "amp-codex-x-00000abc", "amp-codex-42-abc", "amp-codex-42-0000zzzz", "other"] {
            assert_eq!(pid_of_root(other), None, "{other}");
        }
    }

    #[test]
    fn the_directories_of_neovims_that_are_gone_are_swept_and_only_those() {
        let base = TempDir::new("codex-sweep");
        let dead = base.0.join(format!("amp-codex-{}-0000beef", dead_pid()));
        let alive = base.0.join(format!("amp-codex-{}-0000beef", std::process::id()));
        let not_ours = base.0.join(format!("amp-codex-{}-nothex!", dead_pid()));
        for d in [&dead, &alive, &not_ours] {
            std::fs::create_dir_all(d.join("codex-ipc")).unwrap();
        }
        std::fs::write(dead.join("codex-ipc").join("leftover"), b"x").unwrap();
        let link = base.0.join(format!("amp-codex-{}-0000cafe", dead_pid()));
        std::os::unix::fs::symlink(&alive, &link).unwrap();
        assert_eq!(sweep_stale(&base.0), vec![dead.clone()]);
        assert!(!dead.exists() && alive.exists() && not_ours.exists());
        assert!(std::fs::symlink_metadata(&link).is_ok(), "a link is left alone");
    }
}
