//! A running front-end as the session sees it: what `status()` shows of
//! it, the variables that attach an agent started in the editor's
//! terminal, and what it does when the workspace changes or the session
//! stops. Each agent's module has a `start(&Arc<Hub>)` that binds its
//! listener, spawns its accept loop and writes its discovery file.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;

use serde_json::Value;

use super::discovery::DiscoveryError;
use super::registry::Agent;

pub trait FrontEnd: Send + Sync {
    fn agent(&self) -> Agent;

    /// `status().agents[<id>]`: `enabled`, where it listens, its discovery
    /// file, its clients.
    fn status(&self) -> Value;

    /// The variables that attach an agent started in this editor's terminal
    /// to this editor (set in Neovim's environment while the session runs).
    fn terminal_env(&self) -> Vec<(&'static str, String)>;

    /// The workspace folders changed: the discovery file is rewritten.
    fn workspace_changed(self: Arc<Self>) -> Announce;

    /// The session stops (its tasks are gone): the discovery file is
    /// removed. A quick unlink, run on the main thread before Neovim exits.
    fn stopped(&self);

    /// `:Amp ref`: lines `first..=last` (0-based) of `path` added to the
    /// agent's prompt, where its protocol can; how many clients got it.
    fn mention(&self, _path: &Path, _first: usize, _last: usize) -> usize {
        0
    }

    /// `text` to the agent's prompt (`submit`: as if the user sent it),
    /// where its protocol can; how many clients got it.
    fn send_text(&self, _submit: bool, _text: &str) -> usize {
        0
    }
}

/// A discovery file being written.
pub type Announce = Pin<Box<dyn Future<Output = Result<PathBuf, DiscoveryError>> + Send>>;

/// `write` of `agent`'s discovery file, logged once it is on disk with
/// where the front-end listens (`at`: "127.0.0.1:4242", a socket's path).
pub fn announce(
    agent: Agent,
    at: String,
    write: impl Future<Output = Result<PathBuf, DiscoveryError>> + Send + 'static,
) -> Announce {
    Box::pin(async move {
        let path = write.await?;
        crate::core::log::info(format!("{}: listening on {at}, discovery file {}", agent.id, path.display()));
        Ok(path)
    })
}

/// What `status()` shows of every front-end: enabled, where it listens, its
/// discovery file and its clients now; each adds what is its own.
pub fn base_status(port: Option<u16>, discovery_file: &Path, clients: usize) -> Value {
    serde_json::json!({
        "enabled": true,
        "port": port,
        "discovery_file": discovery_file.to_string_lossy(),
        "clients": clients,
    })
}

/// Why a front-end did not start (the session stops and says so).
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The directory of its discovery file is unknown: the sentence says
    /// which one and the variables that set it.
    #[error("{0}")]
    NoDirectory(&'static str),
    #[error(transparent)]
    Listen(#[from] super::listener::ListenError),
    /// An option of the front-end's own that it cannot work with.
    #[error(transparent)]
    Option(Box<dyn std::error::Error + Send + Sync>),
}

/// A front-end that started: itself, and the first write of its discovery
/// file (the session tells `User AmpServerStarted` once every one is on disk).
pub struct Started {
    pub front_end: Arc<dyn FrontEnd>,
    pub announce: Announce,
}
