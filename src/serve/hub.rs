//! One running session's serving layer, the part every front-end stands
//! on: the editor and its published state, the session's options and
//! tasks, the handshake slots, the in-flight byte budget and the registry
//! of connected agents. A front-end holds an `Arc<Hub>` and adds only its
//! own codec, tools and discovery file.

use crate::core::sync::LockExt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::budget::Budget;
use super::listener::Handshakes;
use super::options::ServerOptions;
use super::registry::{Agent, Connection, Registry, TooMany};
use super::tasks::Tasks;
use crate::core::editor::Editor;
use crate::core::file_ops::FileAccess;
use crate::core::log;
use crate::core::published::EditorState;
use crate::core::review::Owner;

pub struct Hub {
    pub options: ServerOptions,
    /// The editor every request reads and changes.
    pub editor: Arc<dyn Editor>,
    pub state: EditorState,
    pub tasks: Tasks,
    pub handshakes: Arc<Handshakes>,
    pub budget: Budget,
    registry: Arc<Registry>,
    last_error: Mutex<Option<String>>,
}

impl Hub {
    pub fn new(options: ServerOptions, editor: Arc<dyn Editor>) -> Self {
        let handshakes =
            Handshakes::new(options.max_pending_handshakes, Duration::from_millis(options.handshake_timeout_ms));
        Self {
            state: EditorState::new(options.workspace_folders.clone()),
            budget: Budget::new(options.max_inflight_bytes),
            handshakes: Arc::new(handshakes),
            tasks: Tasks::default(),
            registry: Arc::default(),
            last_error: Mutex::new(None),
            editor,
            options,
        }
    }

    /// Runs `task` as one of the session's tasks (see [`Tasks::spawn`]).
    pub fn spawn<F>(&self, task: F) -> tokio::task::JoinHandle<Option<F::Output>>
    where
        F: std::future::Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.tasks.spawn(task)
    }

    /// Runs `task`, which nobody joins, as one of the session's tasks (see
    /// [`Tasks::spawn_detached`]: while the session starts, with the others).
    pub fn spawn_detached<F>(&self, task: F)
    where
        F: std::future::Future + Send + 'static,
    {
        self.tasks.spawn_detached(task)
    }

    /// Registers `owner`, a client of `agent`, at most `server.max_clients`
    /// per agent.
    pub fn connect(&self, agent: Agent, owner: Owner) -> Result<Connection, TooMany> {
        self.registry.connect(agent, owner, self.options.max_clients, self.editor.clone())
    }

    /// Registers `owner` as [`Hub::connect`] does, announced later by
    /// [`Hub::name_client`] (a front-end whose clients say who they are).
    pub fn register(&self, agent: Agent, owner: Owner) -> Result<Connection, TooMany> {
        self.registry.register(agent, owner, self.options.max_clients, self.editor.clone())
    }

    /// Announces the registered client `owner` as `name`, once; false when
    /// it was announced already or is gone.
    pub fn name_client(&self, owner: Owner, name: &'static str) -> bool {
        self.registry.name(owner.session, name, self.editor.as_ref())
    }

    /// Clients of the agent `id` connected now.
    pub fn clients(&self, agent_id: &str) -> usize {
        self.registry.count(agent_id)
    }

    pub fn workspace_folders(&self) -> Vec<String> {
        self.state.workspace_folders()
    }

    /// How agents' reads and edits reach files and buffers (`core::file_ops`).
    pub fn files(&self) -> FileAccess<'_> {
        FileAccess {
            editor: self.editor.as_ref(),
            watch: &self.state.file_watch,
            loaded: &self.state.loaded_buffers,
            max_file_bytes: self.options.max_file_bytes,
            write_autocmds: self.options.write_autocmds,
        }
    }

    /// Logs `message` as an error and keeps it for `status()`.
    pub fn record_error(&self, message: impl std::fmt::Display) {
        let message = message.to_string();
        log::error(&message);
        *self.last_error.locked() = Some(message);
    }

    pub fn last_error(&self) -> Option<String> {
        self.last_error.locked().clone()
    }
}
