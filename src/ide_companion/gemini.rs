//! Gemini CLI's flavor of the IDE-companion front-end (checked against
//! Gemini CLI 0.61.0): its discovery file is
//! `$TMPDIR/gemini/ide/gemini-ide-server-<pid>-<port>.json`, and a terminal
//! started here is told the port, the workspace and this editor's pid.

use std::path::PathBuf;
use std::sync::Arc;

use super::flavor::Flavor;
use crate::serve::discovery::PidIn;
use crate::serve::front_end::{StartError, Started};
use crate::serve::hub::Hub;
use crate::serve::registry::Agent;

pub const GEMINI: Flavor = Flavor {
    agent: Agent { id: "gemini", name: "Gemini" },
    discovery_dir: || Ok(discovery_dir_from_env()),
    file_name: |port| file_name(std::process::id(), port),
    pid_in: PidIn::Name(pid_of_file_name),
    ppid: false,
    terminal_env,
};

/// Starts the Gemini CLI front-end. Main thread, inside the runtime.
pub fn start(hub: &Arc<Hub>) -> Result<Started, StartError> {
    super::server::start(hub, &GEMINI)
}

/// The discovery file's name: Gemini CLI 0.61 lists
/// `$TMPDIR/gemini/ide/` for names matching `gemini-ide-server-<pid>-<port>.json`
/// and prefers the one whose pid is its IDE's (`GEMINI_CLI_IDE_PID`).
pub fn file_name(pid: u32, port: u16) -> String {
    format!("gemini-ide-server-{pid}-{port}.json")
}

/// The pid in a discovery file's name, when it is one.
pub fn pid_of_file_name(name: &str) -> Option<u32> {
    let rest = name.strip_prefix("gemini-ide-server-")?.strip_suffix(".json")?;
    let (pid, port) = rest.split_once('-')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    (digits(pid) && digits(port)).then(|| pid.parse().ok()).flatten()
}

/// Where discovery files live: `os.tmpdir()` of Node, which is `$TMPDIR`
/// when set (trailing slash dropped), else `/tmp`.
pub fn discovery_dir(tmpdir: Option<&std::ffi::OsStr>) -> PathBuf {
    // (Node strips a trailing slash; joining a PathBuf ignores it anyway.)
    let base = tmpdir.filter(|d| !d.is_empty()).map_or_else(|| PathBuf::from("/tmp"), PathBuf::from);
    base.join("gemini").join("ide")
}

pub fn discovery_dir_from_env() -> PathBuf {
    discovery_dir(std::env::var_os("TMPDIR").as_deref())
}

/// With the pid, Gemini picks this editor's discovery file first instead
/// of guessing the editor from its ancestor processes.
fn terminal_env(port: u16, workspace: &str) -> Vec<(&'static str, String)> {
    vec![
        ("GEMINI_CLI_IDE_SERVER_PORT", port.to_string()),
        ("GEMINI_CLI_IDE_WORKSPACE_PATH", workspace.to_owned()),
        ("GEMINI_CLI_IDE_PID", std::process::id().to_string()),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn discovery_file_name_carries_the_pid_and_port() {
        assert_eq!(file_name(12, 4242), "gemini-ide-server-12-4242.json");
        assert_eq!(pid_of_file_name("gemini-ide-server-12-4242.json"), Some(12));
        for other in ["gemini-ide-server-12.json", "gemini-ide-server-x-1.json", "gemini-ide-server-1-.json", "a.json"]
        {
            assert_eq!(pid_of_file_name(other), None, "{other}");
        }
        assert_eq!((GEMINI.file_name)(7), file_name(std::process::id(), 7));
    }

    #[test]
    fn discovery_dir_is_node_tmpdir() {
        use std::ffi::OsStr;
        assert_eq!(discovery_dir(Some(OsStr::new("/t"))), PathBuf::from("/t/gemini/ide"));
        assert_eq!(discovery_dir(Some(OsStr::new("/t/"))), PathBuf::from("/t/gemini/ide"));
        assert_eq!(discovery_dir(Some(OsStr::new(""))), PathBuf::from("/tmp/gemini/ide"));
        assert_eq!(discovery_dir(None), PathBuf::from("/tmp/gemini/ide"));
    }

    #[test]
    fn terminals_get_the_port_the_workspace_and_the_pid() {
        let env = (GEMINI.terminal_env)(4242, "/w/a:/w/b");
        assert_eq!(
            env,
            [
                ("GEMINI_CLI_IDE_SERVER_PORT", "4242".to_owned()),
                ("GEMINI_CLI_IDE_WORKSPACE_PATH", "/w/a:/w/b".to_owned()),
                ("GEMINI_CLI_IDE_PID", std::process::id().to_string()),
            ]
        );
    }
}
