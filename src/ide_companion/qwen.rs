//! Qwen Code's flavor of the IDE-companion front-end (checked against Qwen
//! Code 0.24.4). Qwen reads the port from `QWEN_CODE_IDE_SERVER_PORT`, then
//! `$QWEN_HOME/ide/<port>.lock` (`~/.qwen/ide/` by default); without the
//! variable it takes the newest `<digits>.lock` there whose `workspacePath`
//! holds its cwd. It deletes a file whose `ppid` is not a running process,
//! and connects outside VS Code's terminal only when the file has
//! `ideInfo`.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::flavor::Flavor;
use crate::serve::discovery::PidIn;
use crate::serve::front_end::{StartError, Started};
use crate::serve::hub::Hub;
use crate::serve::registry::Agent;

pub const QWEN: Flavor = Flavor {
    agent: Agent { id: "qwen", name: "Qwen" },
    discovery_dir: discovery_dir_from_env,
    file_name: |port| format!("{port}.{LOCK_EXTENSION}"),
    pid_in: PidIn::Field { extension: LOCK_EXTENSION, field: "ppid" },
    ppid: true,
    terminal_env,
};

const LOCK_EXTENSION: &str = "lock";

/// Starts the Qwen Code front-end. Main thread, inside the runtime.
pub fn start(hub: &Arc<Hub>) -> Result<Started, StartError> {
    super::server::start(hub, &QWEN)
}

/// Qwen's directory (`Storage.getGlobalQwenDir`) joined with `ide`:
/// `$QWEN_HOME` when set and non-empty (`~` and `~/...` are the home
/// directory's, a relative path is `cwd`'s), else `<home>/.qwen`.
pub fn discovery_dir(qwen_home: Option<&OsStr>, home: Option<&Path>, cwd: &Path) -> Option<PathBuf> {
    let base = match qwen_home.filter(|d| !d.is_empty()).map(Path::new) {
        // (`~q` is a relative path: its first component is not `~`.)
        Some(dir) => match dir.strip_prefix("~") {
            Ok(rest) => home?.join(rest),
            Err(_) => cwd.join(dir),
        },
        None => home?.join(".qwen"),
    };
    Some(base.join("ide"))
}

fn discovery_dir_from_env() -> Result<PathBuf, StartError> {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    discovery_dir(std::env::var_os("QWEN_HOME").as_deref(), dirs::home_dir().as_deref(), &cwd)
        .ok_or(StartError::NoDirectory("qwen: cannot find the Qwen directory: set QWEN_HOME or HOME"))
}

/// The port picks this editor's lockfile; the workspace is what Qwen checks
/// its cwd against when it has no lockfile to read.
fn terminal_env(port: u16, workspace: &str) -> Vec<(&'static str, String)> {
    vec![("QWEN_CODE_IDE_SERVER_PORT", port.to_string()), ("QWEN_CODE_IDE_WORKSPACE_PATH", workspace.to_owned())]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lockfile_is_the_port_in_qwen_home() {
        let (home, cwd) = (Some(Path::new("/h")), Path::new("/c"));
        let dir = |q: Option<&str>| discovery_dir(q.map(OsStr::new), home, cwd);
        assert_eq!(dir(None), Some(PathBuf::from("/h/.qwen/ide")));
        assert_eq!(dir(Some("")), Some(PathBuf::from("/h/.qwen/ide")));
        assert_eq!(dir(Some("/q")), Some(PathBuf::from("/q/ide")));
        assert_eq!(dir(Some("~")), Some(PathBuf::from("/h/ide")));
        assert_eq!(dir(Some("~/q")), Some(PathBuf::from("/h/q/ide")));
        assert_eq!(dir(Some("~q")), Some(PathBuf::from("/c/~q/ide")));
        assert_eq!(dir(Some("rel")), Some(PathBuf::from("/c/rel/ide")));
        assert_eq!(discovery_dir(None, None, cwd), None);
        assert_eq!((QWEN.file_name)(4242), "4242.lock");
    }

    #[test]
    fn terminals_get_the_port_and_the_workspace() {
        assert_eq!(
            (QWEN.terminal_env)(4242, "/w/a:/w/b"),
            [
                ("QWEN_CODE_IDE_SERVER_PORT", "4242".to_owned()),
                ("QWEN_CODE_IDE_WORKSPACE_PATH", "/w/a:/w/b".to_owned())
            ]
        );
    }
}
