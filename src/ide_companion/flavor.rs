//! What tells one agent of the IDE-companion wire format from another:
//! its name, its discovery file (directory, name, schema, where the stale
//! sweep finds the editor's pid) and the variables that attach a terminal
//! started in this editor. Everything else (the server, the tools, the
//! context feed, the reviews) is the same code for every flavor.

use std::path::PathBuf;

use crate::serve::discovery::PidIn;
use crate::serve::registry::Agent;

pub struct Flavor {
    pub agent: Agent,
    /// Where its discovery files live, from the environment; `Err`: a
    /// one-line reason the front-end cannot start.
    pub discovery_dir: fn() -> Result<PathBuf, crate::serve::front_end::StartError>,
    /// This editor's discovery file name for its port.
    pub file_name: fn(port: u16) -> String,
    /// Where the stale sweep reads another editor's pid.
    pub pid_in: PidIn,
    /// Whether the discovery file names the editor's pid as `ppid` (Qwen
    /// deletes a file whose `ppid` is not a running process).
    pub ppid: bool,
    /// The variables that attach an agent started in this editor's
    /// terminal, given the port and the `:`-joined workspace folders.
    pub terminal_env: fn(port: u16, workspace_path: &str) -> Vec<(&'static str, String)>,
}

impl std::fmt::Debug for Flavor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Flavor").field("agent", &self.agent).finish_non_exhaustive()
    }
}
