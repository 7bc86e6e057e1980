//! One running server: its tasks on the plugin's runtime, listener, lockfile and clients.
//!
//! `start` and `stop` run on the main thread. Binding the loopback socket is a
//! non-blocking syscall and is done here so `start` can return the port; the
//! lockfile is written on the runtime, and `User AmpServerStarted` fires once
//! it is on disk, so a listener can read it at once.

use std::net::{Ipv4Addr, SocketAddr, TcpListener as StdListener};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use tokio::runtime::Handle;

use crate::amp::options::ServerOptions;
use crate::amp::server::{accept_loop, Shared};
use crate::amp::{lockfile, token};
use crate::claude::server::ClaudeServer;
use crate::core::log;
use crate::gemini::server::GeminiServer;
use crate::nvim::bridge;
use crate::nvim::events;

struct Session {
    runtime: Handle,
    shared: Arc<Shared>,
    /// The Claude Code front-end, when `agents.claude` is on.
    claude: Option<Arc<ClaudeServer>>,
    /// The Gemini CLI front-end, when `agents.gemini` is on.
    gemini: Option<Arc<GeminiServer>>,
}

static CURRENT: Mutex<Option<Session>> = Mutex::new(None);
/// The last error of a session that is gone, for `status()`.
static LAST_ERROR: Mutex<Option<String>> = Mutex::new(None);

/// How long `stop` waits for clients to receive their close frames.
const CLOSE_WAIT: Duration = Duration::from_millis(150);

fn current() -> std::sync::MutexGuard<'static, Option<Session>> {
    CURRENT.lock().unwrap_or_else(|p| p.into_inner())
}

pub fn start(options: ServerOptions) -> Result<Value, String> {
    if let Some(session) = current().as_ref() {
        return Ok(started_info(&session.shared));
    }
    if let Some(file) = &options.log_file {
        log::set_max_bytes(options.log_max_bytes);
        log::init(PathBuf::from(file), log::Level::parse(&options.log_level).unwrap_or(log::Level::Info));
    }
    crate::core::filetext::set_read_options(options.read_options.clone());
    raise_nofile_limit();
    let lock_dir = lockfile::lock_dir_from_env()
        .ok_or("cannot find a data directory for the lockfile: set XDG_DATA_HOME or HOME")?;
    // Made here, on the main thread, before any thread of ours exists: a
    // thread creating `$XDG_DATA_HOME` while Neovim's own `mkdir -p` does
    // makes Neovim's fail (E739). A few syscalls; the runtime's write only
    // finds the directory there.
    if let Err(e) = lockfile::ensure_dir(&lock_dir) {
        log::warn(format!("cannot create the lockfile directory {}: {e}", lock_dir.display()));
    }
    let listener = bind(&options).map_err(|e| remember(format!("cannot listen on 127.0.0.1: {e}")))?;
    let port = listener.local_addr().map_err(|e| e.to_string())?.port();
    let runtime = super::runtime::handle().map_err(remember)?;
    bridge::open().map_err(remember)?;
    let shared =
        Arc::new(Shared::new(options, Arc::new(super::editor::Neovim), token::generate_token(), port, lock_dir));

    // The server's tasks are spawned on the plugin's runtime (Shared::spawn).
    let _in_runtime = runtime.enter();
    listener.set_nonblocking(true).map_err(|e| e.to_string())?;
    let listener = tokio::net::TcpListener::from_std(listener).map_err(|e| e.to_string())?;
    // With agents.amp off the shared state still runs (it feeds the other
    // protocols), but no Amp client is accepted and no Amp lockfile written.
    let amp_on = shared.options.agents.amp;
    if amp_on {
        shared.spawn(accept_loop(listener, shared.clone()));
    }
    if shared.options.watch_files {
        if let Some(commands) = shared.file_watch.start() {
            let debounce = Duration::from_millis(shared.options.watch_debounce_ms);
            let (closing, editor) = (shared.closing.clone(), shared.editor.clone());
            shared.spawn(async move {
                closing.run_until_cancelled(crate::core::filewatch::run(commands, debounce, editor)).await
            });
        }
    }
    let announce = shared.clone();
    shared.spawn(async move {
        let dir = announce.lock_dir.clone();
        if let Ok(removed) = tokio::task::spawn_blocking(move || lockfile::remove_stale(&dir)).await {
            for path in removed {
                log::info(format!("removed stale lockfile {}", path.display()));
            }
        }
        if !announce.options.agents.amp {
            let data = started_info(&announce);
            let _ = bridge::post(move || events::fire("AmpServerStarted", &data));
            return;
        }
        match announce.write_lockfile().await {
            Ok(path) => {
                log::info(format!("listening on 127.0.0.1:{}, lockfile {}", announce.port, path.display()));
                let data = started_info(&announce);
                let _ = bridge::post(move || events::fire("AmpServerStarted", &data));
            }
            Err(e) => announce.record_error(e),
        }
    });
    let claude = if shared.options.agents.claude { Some(start_claude(&shared).map_err(remember)?) } else { None };
    let gemini = if shared.options.agents.gemini { Some(start_gemini(&shared).map_err(remember)?) } else { None };
    let info = started_info(&shared);
    *current() = Some(Session { runtime, shared, claude, gemini });
    // What the user looks at right now, for the first client.
    visible_files_changed();
    selection_changed();
    buffers_changed();
    Ok(info)
}

/// A listener on 127.0.0.1 on a port the system picks, for a front-end
/// (`protocol` names it in errors); the caller has entered the runtime.
fn listen_on_loopback(protocol: &str) -> Result<(tokio::net::TcpListener, u16), String> {
    let cannot = |e: std::io::Error| format!("{protocol}: cannot listen on 127.0.0.1: {e}");
    let listener = StdListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0))).map_err(cannot)?;
    let port = listener.local_addr().map_err(cannot)?.port();
    listener.set_nonblocking(true).map_err(cannot)?;
    Ok((tokio::net::TcpListener::from_std(listener).map_err(cannot)?, port))
}

/// The Claude Code front-end: its own loopback port and token, its lockfile
/// in `~/.claude/ide/` (or `$CLAUDE_CONFIG_DIR/ide/`), fed from `shared`.
fn start_claude(shared: &Arc<Shared>) -> Result<Arc<ClaudeServer>, String> {
    let lock_dir = crate::claude::protocol::lock_dir_from_env()
        .ok_or("cannot find the Claude config directory: set CLAUDE_CONFIG_DIR or HOME")?;
    let (listener, port) = listen_on_loopback("claude")?;
    let server = Arc::new(ClaudeServer::new(shared.clone(), token::generate_token(), port, lock_dir));
    shared.spawn(crate::claude::server::accept_loop(listener, server.clone()));
    let announce = server.clone();
    shared.spawn(async move {
        match announce.write_lockfile(true).await {
            Ok(path) => {
                log::info(format!("claude: listening on 127.0.0.1:{}, lockfile {}", announce.port, path.display()))
            }
            Err(e) => announce.core.record_error(e),
        }
    });
    Ok(server)
}

/// The Gemini CLI front-end: its own loopback port and token, its discovery
/// file in `$TMPDIR/gemini/ide/`, fed from `shared`.
fn start_gemini(shared: &Arc<Shared>) -> Result<Arc<GeminiServer>, String> {
    let dir = crate::gemini::protocol::discovery_dir_from_env();
    let (listener, port) = listen_on_loopback("gemini")?;
    let server = Arc::new(GeminiServer::new(shared.clone(), token::generate_token(), port, dir));
    shared.spawn(crate::gemini::server::accept_loop(listener, server.clone()));
    let announce = server.clone();
    shared.spawn(async move {
        match announce.write_discovery(true).await {
            Ok(path) => log::info(format!(
                "gemini: listening on 127.0.0.1:{}, discovery file {}",
                announce.port,
                path.display()
            )),
            Err(e) => announce.core.record_error(e),
        }
    });
    Ok(server)
}

fn started_info(shared: &Shared) -> Value {
    json!({ "port": shared.port, "lockfile": shared.lockfile_path().to_string_lossy() })
}

fn remember(message: String) -> String {
    log::error(&message);
    *LAST_ERROR.lock().unwrap_or_else(|p| p.into_inner()) = Some(message.clone());
    message
}

fn bind(options: &ServerOptions) -> std::io::Result<StdListener> {
    let ports: Vec<u16> = match options.port_range {
        Some((lo, hi)) => (lo..=hi).collect(),
        None => vec![options.port],
    };
    // The previous server's port first (a restart keeps the port the agent
    // knows); when someone else took it, the configured ones as usual.
    let preferred = options.preferred_port;
    let order = (preferred != 0)
        .then_some(preferred)
        .into_iter()
        .chain(ports.into_iter().filter(|&p| preferred == 0 || p != preferred));
    let mut last = None;
    for port in order {
        match StdListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, port))) {
            Ok(l) => return Ok(l),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::other("no port to try")))
}

/// Raises the soft limit of open files to the hard limit, once: a flood of
/// connections should meet the handshake limits, not `EMFILE` (which would
/// also stop Neovim from opening files). Only ever raised, never lowered.
fn raise_nofile_limit() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        // SAFETY: plain syscalls on a local struct.
        unsafe {
            if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 || lim.rlim_cur >= lim.rlim_max {
                return;
            }
            let old = lim.rlim_cur;
            lim.rlim_cur = lim.rlim_max;
            if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) == 0 {
                log::info(format!("open files limit raised from {old} to {}", lim.rlim_cur));
            } else {
                log::warn(format!("cannot raise the open files limit from {old}: {}", std::io::Error::last_os_error()));
            }
        }
    });
}

/// Stops the server: clients get a close frame, its tasks end, the
/// lockfile goes. Idempotent, and bounded in time so Neovim's exit never hangs.
pub fn stop() {
    let Some(session) = current().take() else { return };
    let shared = session.shared.clone();
    // Every protocol's clients get their close frames; bounded, and no task
    // survives it (the Claude server's tasks are the shared state's too).
    shared.stop(&session.runtime, CLOSE_WAIT);
    bridge::close();
    // With the server's tasks gone no late write can bring the file back. An
    // unlink is one quick syscall, and the file must be gone before Neovim
    // exits, so it is done here rather than on a runtime that no longer runs.
    if let Err(e) = lockfile::remove(&shared.lockfile_path()) {
        log::warn(format!("cannot remove the lockfile: {e}"));
    }
    if let Some(claude) = &session.claude {
        if let Err(e) = lockfile::remove(&claude.lockfile_path()) {
            log::warn(format!("cannot remove the Claude lockfile: {e}"));
        }
    }
    if let Some(gemini) = &session.gemini {
        gemini.sessions.end_all();
        if let Err(e) = lockfile::remove(&gemini.discovery_path()) {
            log::warn(format!("cannot remove the Gemini discovery file: {e}"));
        }
    }
    if let Some(e) = shared.last_error.lock().unwrap_or_else(|p| p.into_inner()).clone() {
        *LAST_ERROR.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
    }
    log::info("server stopped");
    events::fire(
        "AmpServerStopped",
        &json!({ "port": shared.port, "lockfile": shared.lockfile_path().to_string_lossy() }),
    );
}

pub fn status() -> Value {
    let guard = current();
    let last_error = || LAST_ERROR.lock().unwrap_or_else(|p| p.into_inner()).clone();
    match guard.as_ref() {
        Some(s) => {
            let shared = &s.shared;
            let error = shared.last_error.lock().unwrap_or_else(|p| p.into_inner()).clone().or_else(last_error);
            json!({
                "running": true,
                "port": shared.port,
                "lockfile": shared.lockfile_path().to_string_lossy(),
                "workspace_folders": shared.workspace_folders(),
                "clients": shared.client_count(),
                "last_error": error,
                "version": env!("CARGO_PKG_VERSION"),
                "agents": {
                    "amp": { "enabled": shared.options.agents.amp, "port": shared.port, "lockfile": shared.lockfile_path().to_string_lossy(), "clients": shared.client_count() },
                    "claude": s.claude.as_deref().map_or(json!({ "enabled": false }), crate::claude::server::status),
                    "gemini": s.gemini.as_deref().map_or(json!({ "enabled": false }), crate::gemini::server::status),
                },
            })
        }
        None => json!({
            "running": false,
            "clients": 0,
            "last_error": last_error(),
            "version": env!("CARGO_PKG_VERSION"),
        }),
    }
}

/// New workspace folders (`DirChanged`): the lockfile is rewritten so the
/// CLI matches the editor to its own cwd.
pub fn set_workspace_folders(folders: Vec<String>) -> Result<(), String> {
    let guard = current();
    let Some(session) = guard.as_ref() else { return Ok(()) };
    *session.shared.workspace.write().unwrap_or_else(|p| p.into_inner()) = folders;
    let shared = session.shared.clone();
    let _in_runtime = session.runtime.enter();
    session.shared.spawn(async move {
        if let Err(e) = shared.write_lockfile().await {
            shared.record_error(e);
        }
    });
    if let Some(claude) = session.claude.clone() {
        session.shared.spawn(async move {
            if let Err(e) = claude.write_lockfile(false).await {
                claude.core.record_error(e);
            }
        });
    }
    if let Some(gemini) = session.gemini.clone() {
        session.shared.spawn(async move {
            if let Err(e) = gemini.write_discovery(false).await {
                gemini.core.record_error(e);
            }
        });
    }
    Ok(())
}

/// Queues a notification for every client; returns how many it reached.
pub fn broadcast(name: &str, payload: &Value) -> usize {
    current().as_ref().map_or(0, |s| s.shared.broadcast(name, payload))
}

/// `:Amp ref`: tells connected Claude clients to add lines `line_start..=line_end`
/// (0-based) of `path` to the prompt; returns how many clients it reached.
pub fn at_mentioned(path: &str, line_start: usize, line_end: usize) -> usize {
    let guard = current();
    let Some(claude) = guard.as_ref().and_then(|s| s.claude.as_ref()) else { return 0 };
    crate::claude::server::at_mentioned(claude, std::path::Path::new(path), line_start, line_end)
}

/// Reads the selection and publishes it (called from cursor autocmds).
pub fn selection_changed() {
    let guard = current();
    let Some(session) = guard.as_ref() else { return };
    if let Some(selection) = crate::nvim::context::read_selection() {
        session.shared.publish_selection(selection);
    }
}

/// Publishes the cursor of the current window, whose buffer shows the file
/// `path`, outside Visual mode. The per-keystroke path: the cursor and its
/// line are read through the C API, and nothing is allocated when the cursor
/// did not change.
pub fn cursor_moved(path: &[u8]) {
    let guard = current();
    let Some(session) = guard.as_ref() else { return };
    crate::nvim::bulk::with_cursor_line(|row, col, line| {
        session.shared.publish_cursor(path, row.saturating_sub(1), col, line)
    });
}

/// Reads the visible files and publishes them (called from window autocmds).
pub fn visible_files_changed() {
    let guard = current();
    let Some(session) = guard.as_ref() else { return };
    session.shared.publish_visible_files(crate::nvim::context::read_visible_files());
}

/// The set of loaded buffers may have changed: note their names (see
/// `Shared::maybe_loaded`) and re-aim the file watcher.
pub fn buffers_changed() {
    let guard = current();
    let Some(session) = guard.as_ref() else { return };
    let (names, files) = crate::nvim::files::loaded_buffers();
    session.shared.loaded_buffers.set(names);
    session.shared.file_watch.tell(crate::core::filewatch::WatchCommand::SetFiles(files));
}

/// Neovim wrote `path` (BufWritePost): that write is not an outside change.
pub fn buffer_written(path: &str) {
    if let Some(session) = current().as_ref() {
        session.shared.file_watch.note_written(std::path::Path::new(path));
    }
}

/// `:Amp take`: replace the buffer of `path` with the disk's text (undoable).
pub fn take_disk_version(path: &str) -> Result<(), String> {
    let guard = current();
    let session = guard.as_ref().ok_or("the server is not running")?;
    if !session.shared.file_watch.is_on() {
        return Err("file watching is off (watch.enabled = false)".into());
    }
    session.shared.file_watch.tell(crate::core::filewatch::WatchCommand::Take(path.into()));
    Ok(())
}
