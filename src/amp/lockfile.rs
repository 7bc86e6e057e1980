//! The lockfile through which the Amp CLI finds this editor:
//! `<dir>/<port>.json` with the port, the auth token, our pid, the
//! workspace folders and the editor's name. Written like every discovery
//! file (`serve::discovery`: atomic, 0600 in 0700).

use serde::{Deserialize, Serialize};
use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use crate::serve::discovery::{amp_data_dir, amp_data_dir_from_env, PidIn};

/// Contents of a lockfile, serialized with the camelCase field names the CLI expects.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Lockfile {
    /// TCP port of the WebSocket server on 127.0.0.1.
    pub port: u16,
    /// Secret clients must present.
    pub auth_token: String,
    /// Pid of the editor process; used to detect stale lockfiles.
    pub pid: u32,
    /// Absolute workspace roots, so the CLI can pick the right editor.
    pub workspace_folders: Vec<String>,
    /// Human-readable editor name, e.g. "Neovim (nvim 0.11.4)".
    pub ide_name: String,
}

/// How the lockfiles of editors that are gone are recognised.
pub const PID_IN: PidIn = PidIn::Field { extension: "json", field: "pid" };

/// Where lockfiles live, computed purely from the given environment values:
/// `ide/` in the plugin's data directory (`serve::discovery::amp_data_dir`:
/// `$AMP_DATA_HOME/amp`, `$XDG_DATA_HOME/amp`, `~/.local/share/amp`).
pub fn lock_dir(amp_data_home: Option<&OsStr>, xdg_data_home: Option<&OsStr>, home: Option<&Path>) -> Option<PathBuf> {
    Some(amp_data_dir(amp_data_home, xdg_data_home, home)?.join("ide"))
}

/// [`lock_dir`] applied to the real process environment and home directory.
pub fn lock_dir_from_env() -> Option<PathBuf> {
    Some(amp_data_dir_from_env()?.join("ide"))
}

/// Path of the lockfile for `port`: `<dir>/<port>.json`.
pub fn path_for(dir: &Path, port: u16) -> PathBuf {
    dir.join(format!("{port}.json"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_dir_prefers_amp_data_home() {
        let d = lock_dir(Some(OsStr::new("/amp")), Some(OsStr::new("/xdg")), Some(Path::new("/h")));
        assert_eq!(d, Some(PathBuf::from("/amp/amp/ide")));
    }

    #[test]
    fn lock_dir_amp_data_home_may_be_relative() {
        let d = lock_dir(Some(OsStr::new("rel")), None, None);
        assert_eq!(d, Some(PathBuf::from("rel/amp/ide")));
    }

    #[test]
    fn lock_dir_empty_amp_falls_back_to_xdg() {
        let d = lock_dir(Some(OsStr::new("")), Some(OsStr::new("/xdg")), Some(Path::new("/h")));
        assert_eq!(d, Some(PathBuf::from("/xdg/amp/ide")));
    }

    #[test]
    fn lock_dir_ignores_empty_or_relative_xdg() {
        let h = Some(Path::new("/h"));
        let want = Some(PathBuf::from("/h/.local/share/amp/ide"));
        assert_eq!(lock_dir(None, Some(OsStr::new("")), h), want);
        assert_eq!(lock_dir(None, Some(OsStr::new("rel/xdg")), h), want);
        assert_eq!(lock_dir(None, None, h), want);
    }

    #[test]
    fn lock_dir_none_without_any_source() {
        assert_eq!(lock_dir(None, None, None), None);
        assert_eq!(lock_dir(Some(OsStr::new("")), Some(OsStr::new("x")), None), None);
    }

    #[test]
    fn path_for_port() {
        assert_eq!(path_for(Path::new("/d"), 8080), PathBuf::from("/d/8080.json"));
    }

    #[test]
    fn serialized_with_the_cli_s_camelcase_names() {
        let lock = Lockfile {
            port: 41234,
            auth_token: "tok".into(),
            pid: 1,
            workspace_folders: vec!["/w/a".into(), "/w/b c".into()],
            ide_name: "Neovim (nvim 0.11.4)".into(),
        };
        let v = serde_json::to_value(&lock).unwrap();
        let mut keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        keys.sort();
        assert_eq!(keys, ["authToken", "ideName", "pid", "port", "workspaceFolders"]);
        assert_eq!(v["workspaceFolders"][1], "/w/b c");
        assert_eq!(serde_json::from_value::<Lockfile>(v).unwrap(), lock);
    }
}
