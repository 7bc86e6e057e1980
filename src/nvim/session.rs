//! One running session: the serving layer (`serve::hub`) on the plugin's
//! runtime, the front-ends of the enabled agents, and the editor's events
//! in.
//!
//! `start` and `stop` run on the main thread. Binding a loopback socket is
//! a non-blocking syscall and is done here so `start` can return the port;
//! discovery files are written on the runtime, and `User AmpServerStarted`
//! fires once every one is on disk, so a listener can read them at once.

use crate::core::sync::LockExt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Map, Value};
use tokio::runtime::Handle;

use crate::core::log;
use crate::nvim::bridge;
use crate::nvim::events;
use crate::serve::front_end::{FrontEnd, StartError, Started};
use crate::serve::hub::Hub;
use crate::serve::options::ServerOptions;

/// Every agent the plugin serves, in the order `status()` lists them: its
/// id (the key in `setup({ agents = ... })`) and how it starts.
type Start = fn(&Arc<Hub>) -> Result<Started, StartError>;
const FRONT_ENDS: &[(&str, Start)] = &[
    ("amp", crate::amp::server::start),
    ("claude", crate::claude::server::start),
    ("gemini", crate::ide_companion::gemini::start),
    ("qwen", crate::ide_companion::qwen::start),
    ("mcp", crate::mcp_server::server::start),
    ("copilot", crate::copilot::server::start),
    ("codex", crate::codex::server::start),
    ("tap", crate::tap::client::start),
];

struct Session {
    runtime: Handle,
    hub: Arc<Hub>,
    /// The front-ends of the enabled agents.
    front_ends: Vec<Arc<dyn FrontEnd>>,
}

impl Session {
    fn front_end(&self, id: &str) -> Option<&Arc<dyn FrontEnd>> {
        self.front_ends.iter().find(|f| f.agent().id == id)
    }

    /// Amp's port and lockfile (the amp.nvim API's `port` and `lockfile`),
    /// when Amp is served.
    fn amp_info(&self) -> Value {
        let amp = self.front_end(crate::amp::server::AGENT.id).map(|f| f.status());
        let field = |name: &str| amp.as_ref().and_then(|s| s.get(name).cloned()).unwrap_or(Value::Null);
        json!({ "port": field("port"), "lockfile": field("lockfile") })
    }
}

static CURRENT: Mutex<Option<Session>> = Mutex::new(None);
/// The last error of a session that is gone, for `status()`.
static LAST_ERROR: Mutex<Option<String>> = Mutex::new(None);

/// How long `stop` waits for clients to receive their close frames.
const CLOSE_WAIT: Duration = Duration::from_millis(150);

fn current() -> std::sync::MutexGuard<'static, Option<Session>> {
    CURRENT.locked()
}

pub fn start(options: ServerOptions) -> Result<Value, String> {
    if let Some(session) = current().as_ref() {
        return Ok(session.amp_info());
    }
    if let Some(file) = &options.log_file {
        log::set_max_bytes(options.log_max_bytes);
        // Its writer is woken by the runtime (below).
        log::init_deferred(PathBuf::from(file), log::Level::parse(&options.log_level).unwrap_or(log::Level::Info));
    }
    crate::core::filetext::set_read_options(options.read_options.clone());
    raise_nofile_limit();
    let runtime = super::runtime::handle().map_err(remember)?;
    bridge::open().map_err(remember)?;
    let hub = Arc::new(Hub::new(options, Arc::new(super::editor::Neovim)));
    // What the user looks at is read when a client first needs it, not
    // here (see `EditorState::context_ready`).
    hub.state.set_context_reader(|| {
        // The selection first: a reader waits for the visible files.
        let _ = bridge::post(|| {
            selection_changed();
            visible_files_changed();
        });
    });

    // The session's tasks are spawned on the plugin's runtime (Hub::spawn),
    // those of the start as one (Tasks::hold).
    let _in_runtime = runtime.enter();
    hub.tasks.hold();
    let mut front_ends = Vec::new();
    let mut announced = Vec::new();
    for (id, start) in FRONT_ENDS {
        if !hub.options.agents.enabled(id) {
            continue;
        }
        match start(&hub) {
            Ok(Started { front_end, announce }) => {
                front_ends.push(front_end);
                announced.push(announce);
            }
            Err(e) => {
                // What started so far stops with the session's tasks.
                hub.tasks.stop(&runtime, Duration::ZERO);
                bridge::close();
                return Err(remember(e.to_string()));
            }
        }
    }
    // The file watcher (its commands are queued until it runs), with the
    // announcements in one task.
    let watcher = hub.options.watch_files.then(|| hub.state.file_watch.start()).flatten().map(|commands| {
        let debounce = Duration::from_millis(hub.options.watch_debounce_ms);
        let (closing, editor) = (hub.tasks.closing.clone(), hub.editor.clone());
        async move { closing.run_until_cancelled(crate::core::filewatch::run(commands, debounce, editor)).await }
    });
    let session = Session { runtime, hub: hub.clone(), front_ends };
    let mut info = session.amp_info();
    let started = info.clone();
    let announcing = {
        let hub = hub.clone();
        async move {
            let mut written = true;
            for announce in announced {
                if let Err(e) = announce.await {
                    hub.record_error(e);
                    written = false;
                }
            }
            if written {
                let _ = bridge::post(move || events::fire("AmpServerStarted", &started));
            }
        }
    };
    hub.spawn_detached(async move {
        match watcher {
            Some(watcher) => {
                tokio::join!(announcing, watcher);
            }
            None => announcing.await,
        }
    });
    // The log's writer is woken there too.
    hub.tasks.release(log::wake_writer);
    // What a terminal of this Neovim needs to attach its agent (empty when
    // Amp alone is served: its CLI finds the lockfile), so the caller
    // does not ask status() for it.
    let env: Map<String, Value> =
        session.front_ends.iter().flat_map(|f| f.terminal_env()).map(|(k, v)| (k.to_owned(), v.into())).collect();
    info["env"] = Value::Object(env);
    *current() = Some(session);
    // The loaded buffers, for the file watcher. Both lists start out
    // empty: with no named buffer (Neovim started without a file) there is
    // nothing to add.
    if crate::nvim::files::any_named_buffer() {
        buffers_changed();
    }
    Ok(info)
}

fn remember(message: String) -> String {
    log::error(&message);
    // A start that failed spawns no task to wake the log's writer.
    log::wake_writer();
    *LAST_ERROR.locked() = Some(message.clone());
    message
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

/// Stops the session: clients get a close frame, its tasks end, the
/// discovery files go. Idempotent, and bounded in time so Neovim's exit
/// never hangs.
pub fn stop() {
    let Some(session) = current().take() else { return };
    // (Woken by the start's task already, unless that never ran.)
    log::wake_writer();
    let hub = session.hub.clone();
    // Every front-end's clients get their close frames; bounded, and no
    // task survives it.
    hub.tasks.stop(&session.runtime, CLOSE_WAIT);
    bridge::close();
    // With the tasks gone no late write can bring a file back. An unlink is
    // one quick syscall, and the files must be gone before Neovim exits, so
    // it is done here rather than on a runtime that no longer runs.
    for front_end in &session.front_ends {
        front_end.stopped();
    }
    if let Some(e) = hub.last_error() {
        *LAST_ERROR.locked() = Some(e);
    }
    log::info("server stopped");
    events::fire("AmpServerStopped", &session.amp_info());
}

/// Whether a session runs (`status().running`, without the rest).
pub fn running() -> bool {
    current().is_some()
}

pub fn status() -> Value {
    let guard = current();
    let last_error = || LAST_ERROR.locked().clone();
    match guard.as_ref() {
        Some(s) => {
            let hub = &s.hub;
            let mut agents = Map::new();
            for (id, _) in FRONT_ENDS {
                let status = match s.front_end(id) {
                    Some(front_end) => {
                        let mut status = front_end.status();
                        let env: Map<String, Value> =
                            front_end.terminal_env().into_iter().map(|(k, v)| (k.to_owned(), v.into())).collect();
                        status["env"] = Value::Object(env);
                        status["name"] = front_end.agent().name.into();
                        status
                    }
                    None => json!({ "enabled": false }),
                };
                agents.insert((*id).to_owned(), status);
            }
            let amp = s.amp_info();
            json!({
                "running": true,
                "port": amp["port"],
                "lockfile": amp["lockfile"],
                "workspace_folders": hub.workspace_folders(),
                "clients": s.front_end("amp").map_or(0, |_| hub.clients("amp")),
                "last_error": hub.last_error().or_else(last_error),
                "version": env!("CARGO_PKG_VERSION"),
                "agents": agents,
                // What the server enforces, defaults filled in.
                "options": hub.options.config_json(FRONT_ENDS.iter().map(|(id, _)| *id)),
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

/// New workspace folders (`DirChanged`): every discovery file is rewritten
/// so agents match the editor to their own cwd.
pub fn set_workspace_folders(folders: Vec<String>) -> Result<(), String> {
    let guard = current();
    let Some(session) = guard.as_ref() else { return Ok(()) };
    session.hub.state.set_workspace_folders(folders);
    let _in_runtime = session.runtime.enter();
    for front_end in &session.front_ends {
        let (hub, write) = (session.hub.clone(), front_end.clone().workspace_changed());
        session.hub.spawn(async move {
            if let Err(e) = write.await {
                hub.record_error(e);
            }
        });
    }
    Ok(())
}

/// `send_message` / `send_to_prompt`: `text` to every connected client
/// whose protocol carries text to the prompt (`submit`: as if the user sent
/// it); how many got it.
pub fn send_text(submit: bool, text: &str) -> usize {
    let guard = current();
    let Some(session) = guard.as_ref() else { return 0 };
    session.front_ends.iter().map(|f| f.send_text(submit, text)).sum()
}

/// `:Amp ref`: tells every connected client whose protocol can to add lines
/// `line_start..=line_end` (0-based) of `path` to its prompt; how many got it.
pub fn at_mentioned(path: &str, line_start: usize, line_end: usize) -> usize {
    let guard = current();
    let Some(session) = guard.as_ref() else { return 0 };
    let path = std::path::Path::new(path);
    session.front_ends.iter().map(|f| f.mention(path, line_start, line_end)).sum()
}

/// Reads the selection and publishes it (called from cursor autocmds).
pub fn selection_changed() {
    let guard = current();
    let Some(session) = guard.as_ref() else { return };
    if let Some(selection) = crate::nvim::context::read_selection() {
        session.hub.state.publish_selection(selection);
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
        session.hub.state.publish_cursor(path, row.saturating_sub(1), col, line)
    });
}

/// Reads the visible files and publishes them (called from window autocmds).
pub fn visible_files_changed() {
    let guard = current();
    let Some(session) = guard.as_ref() else { return };
    session.hub.state.publish_visible_files(crate::nvim::context::read_visible_files());
}

/// The set of loaded buffers may have changed: note their names (see
/// `LoadedBuffers`) and re-aim the file watcher.
pub fn buffers_changed() {
    let guard = current();
    let Some(session) = guard.as_ref() else { return };
    let (names, files) = crate::nvim::files::loaded_buffers();
    session.hub.state.loaded_buffers.set(names);
    session.hub.state.file_watch.tell(crate::core::filewatch::WatchCommand::SetFiles(files));
}

/// Neovim wrote `path` (BufWritePost): that write is not an outside change.
pub fn buffer_written(path: &str) {
    if let Some(session) = current().as_ref() {
        session.hub.state.file_watch.note_written(std::path::Path::new(path));
    }
}

/// `:Amp take`: replace the buffer of `path` with the disk's text (undoable).
pub fn take_disk_version(path: &str) -> Result<(), String> {
    let guard = current();
    let session = guard.as_ref().ok_or("the server is not running")?;
    let watch = &session.hub.state.file_watch;
    if !watch.is_on() {
        return Err("file watching is off (watch.enabled = false)".into());
    }
    watch.tell(crate::core::filewatch::WatchCommand::Take(path.into()));
    Ok(())
}
