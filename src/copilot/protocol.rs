//! GitHub Copilot CLI's IDE protocol as plain data: the lockfile and where
//! it and the socket live, the tools we list, the answers Copilot
//! validates, the notifications we send. No Neovim API, no I/O.
//!
//! Checked against Copilot CLI 1.0.102: it lists `$COPILOT_HOME/ide/*.lock`
//! (`~/.copilot/ide/`), validates each file's schema, skips files whose pid
//! is not alive or whose socket does not answer, and connects to the one
//! whose `workspaceFolders` holds a folder EQUAL to its working folder.
//! Positions are VS Code's (0-based lines, UTF-16 characters:
//! `serve::vscode`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::{json, Value};

use crate::core::uri::path_to_file_uri;
use crate::mcp::listed_tool;

/// The lockfiles' extension (`<uuid>.lock`).
pub const LOCK_EXTENSION: &str = "lock";
/// The header that carries the lockfile's secret, as `Nonce <secret>`.
pub const AUTH_HEADER: &str = "authorization";
pub const AUTH_SCHEME: &str = "Nonce";
/// The longest Unix socket path (`sun_path` holds 108 bytes with its NUL).
const MAX_SOCKET_PATH: usize = 107;

/// The lockfile's content.
#[derive(Serialize, Debug, Clone, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Lockfile {
    pub socket_path: String,
    /// How Copilot reaches `socket_path`: "pipe" is a Unix socket (a named
    /// pipe on Windows).
    pub scheme: &'static str,
    /// Sent verbatim with every request.
    pub headers: BTreeMap<&'static str, String>,
    pub pid: u32,
    /// Milliseconds since the epoch: a fresh file's socket gets a few
    /// retries when it does not answer at once.
    pub timestamp: u64,
    pub workspace_folders: Vec<String>,
    pub ide_name: String,
    // `isTrusted` is left out: Copilot then asks its own folder-trust
    // question instead of taking the editor's word (Neovim has no
    // workspace trust to pass on).
}

impl Lockfile {
    pub fn new(socket: &Path, nonce: &str, pid: u32, timestamp: u64, folders: Vec<String>, ide_name: String) -> Self {
        let headers = BTreeMap::from([("Authorization", format!("{AUTH_SCHEME} {nonce}"))]);
        Self {
            socket_path: socket.to_string_lossy().into_owned(),
            scheme: "pipe",
            headers,
            pid,
            timestamp,
            workspace_folders: folders,
            ide_name,
        }
    }
}

/// Where lockfiles live: `$COPILOT_HOME/ide` when set and non-empty, else
/// `<home>/.copilot/ide`.
pub fn lock_dir(copilot_home: Option<&std::ffi::OsStr>, home: Option<&Path>) -> Option<PathBuf> {
    match copilot_home.filter(|d| !d.is_empty()) {
        Some(dir) => Some(PathBuf::from(dir).join("ide")),
        None => Some(home?.join(".copilot").join("ide")),
    }
}

pub fn lock_dir_from_env() -> Option<PathBuf> {
    lock_dir(std::env::var_os("COPILOT_HOME").as_deref(), dirs::home_dir().as_deref())
}

/// A lockfile's name: a random UUID (version 4) from 16 CSPRNG bytes.
pub fn lock_name(random: [u8; 16]) -> String {
    let mut b = random;
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!("{}-{}-{}-{}-{}.{LOCK_EXTENSION}", &hex[0..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..32])
}

/// The private directory of the socket and its path: `amp-nvim-<uid>/copilot/<pid>.sock`
/// under `$XDG_RUNTIME_DIR` (a per-user directory already), else under
/// `$TMPDIR` (else `/tmp`); under `/tmp` when that path would be too long
/// for a Unix socket. (`serve::listener::bind_unix` makes both directories
/// 0700 and refuses them when they belong to someone else.)
pub fn socket_path(
    runtime_dir: Option<&std::ffi::OsStr>,
    tmpdir: Option<&std::ffi::OsStr>,
    uid: u32,
    pid: u32,
) -> (PathBuf, PathBuf) {
    let base = runtime_dir
        .filter(|d| !d.is_empty())
        .or(tmpdir.filter(|d| !d.is_empty()))
        .map_or_else(|| PathBuf::from("/tmp"), PathBuf::from);
    let at = |base: PathBuf| {
        let dir = base.join(format!("amp-nvim-{uid}")).join("copilot");
        let path = dir.join(format!("{pid}.sock"));
        (dir, path)
    };
    let (dir, path) = at(base);
    if path.as_os_str().len() <= MAX_SOCKET_PATH {
        (dir, path)
    } else {
        at(PathBuf::from("/tmp"))
    }
}

pub fn socket_path_from_env(uid: u32, pid: u32) -> (PathBuf, PathBuf) {
    socket_path(std::env::var_os("XDG_RUNTIME_DIR").as_deref(), std::env::var_os("TMPDIR").as_deref(), uid, pid)
}

/// The pid of one of our sockets (`<pid>.sock`), for sweeping dead editors'.
pub fn pid_of_socket_name(name: &str) -> Option<u32> {
    let digits = name.strip_suffix(".sock")?;
    (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())).then(|| digits.parse().ok()).flatten()
}

/// The `tools/list` result. Copilot offers `get_selection` and
/// `get_diagnostics` to the model; it calls `open_diff` and `close_diff`
/// from its edit-permission dialog and `update_session_name` itself.
pub fn tools() -> Value {
    let string = |d: &str| json!({ "type": "string", "description": d });
    json!({ "tools": [
        listed_tool("get_selection", "Get the text the user selected in Neovim (or the cursor's file and position), with its file and 0-based range", json!({}), &[]),
        listed_tool("get_diagnostics", "Get the diagnostics (errors, warnings) Neovim knows, for one file or for every file", json!({
            "uri": string("Optional file URI or path; without it, every file's diagnostics"),
        }), &[]),
        listed_tool("open_diff", "Show a proposed new text of a file for review in Neovim and wait for the user's decision (SAVED or REJECTED)", json!({
            "original_file_path": string("The absolute path of the file"),
            "new_file_contents": string("The proposed text of the whole file"),
            "tab_name": string("The review's name"),
        }), &["original_file_path", "new_file_contents", "tab_name"]),
        listed_tool("close_diff", "Close the review named tab_name (the user decided in the terminal)", json!({
            "tab_name": string("The review's name"),
        }), &["tab_name"]),
        listed_tool("update_session_name", "Tell Neovim the session's name", json!({
            "name": string("The session's name"),
        }), &["name"]),
    ] })
}

/// `open_diff`'s answer text (Copilot validates `success`, `result`,
/// `trigger` and `message`). On SAVED Copilot writes its own proposal.
pub fn open_diff_text(saved: bool) -> String {
    let (result, trigger, message) = if saved {
        ("SAVED", "accepted_in_neovim", "The user accepted the proposal in Neovim (:w)")
    } else {
        ("REJECTED", "rejected_in_neovim", "The user rejected the proposal in Neovim")
    };
    json!({ "success": true, "result": result, "trigger": trigger, "message": message }).to_string()
}

/// `close_diff`'s answer text.
pub fn close_diff_text(tab_name: &str, was_open: bool) -> String {
    let message = if was_open { "The review was closed" } else { "No such review is open" };
    json!({ "success": true, "already_closed": !was_open, "tab_name": tab_name, "message": message }).to_string()
}

/// `add_selection`: lines `first..=last` (0-based) of `path` for the
/// prompt. Copilot types `@<file>:<first+1>-<last+1>` into its input.
pub fn add_selection(path: &Path, first: usize, last: usize) -> Value {
    json!({
        "filePath": path.to_string_lossy(),
        "fileUrl": path_to_file_uri(path),
        "selection": {
            "start": { "line": first, "character": 0 },
            "end": { "line": last, "character": 0 },
        },
        "selectedText": null,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsStr;

    #[test]
    fn lockfile_has_the_fields_copilot_validates() {
        let lock = Lockfile::new(Path::new("/r/s.sock"), "n0nce", 42, 1700, vec!["/w".into()], "Neovim".into());
        assert_eq!(
            serde_json::to_value(&lock).unwrap(),
            json!({"socketPath": "/r/s.sock", "scheme": "pipe", "headers": {"Authorization": "Nonce n0nce"},
                   "pid": 42, "timestamp": 1700, "workspaceFolders": ["/w"], "ideName": "Neovim"})
        );
    }

    #[test]
    fn lock_dir_follows_copilot_home() {
        assert_eq!(lock_dir(Some(OsStr::new("/c")), Some(Path::new("/h"))), Some(PathBuf::from("/c/ide")));
        assert_eq!(lock_dir(Some(OsStr::new("")), Some(Path::new("/h"))), Some(PathBuf::from("/h/.copilot/ide")));
        assert_eq!(lock_dir(None, Some(Path::new("/h"))), Some(PathBuf::from("/h/.copilot/ide")));
        assert_eq!(lock_dir(None, None), None);
    }

    #[test]
    fn lock_names_are_version_4_uuids() {
        let name = lock_name([0xff; 16]);
        assert_eq!(name, "ffffffff-ffff-4fff-bfff-ffffffffffff.lock");
        assert_eq!(lock_name([0; 16]), "00000000-0000-4000-8000-000000000000.lock");
    }

    #[test]
    fn the_socket_is_in_a_directory_of_ours_and_short_enough() {
        let (dir, path) = socket_path(Some(OsStr::new("/run/user/5")), Some(OsStr::new("/t")), 5, 77);
        assert_eq!(dir, PathBuf::from("/run/user/5/amp-nvim-5/copilot"));
        assert_eq!(path, PathBuf::from("/run/user/5/amp-nvim-5/copilot/77.sock"));
        assert_eq!(socket_path(None, Some(OsStr::new("/t")), 0, 1).1, PathBuf::from("/t/amp-nvim-0/copilot/1.sock"));
        assert_eq!(socket_path(None, None, 0, 1).1, PathBuf::from("/tmp/amp-nvim-0/copilot/1.sock"));
        let long = "/x".repeat(60);
        assert_eq!(socket_path(None, Some(OsStr::new(&long)), 0, 1).1, PathBuf::from("/tmp/amp-nvim-0/copilot/1.sock"));
        assert_eq!(pid_of_socket_name("123.sock"), Some(123));
        for other in ["x.sock", ".sock", "12.lock", "12"] {
            assert_eq!(pid_of_socket_name(other), None, "{other}");
        }
    }

    #[test]
    fn answers_copilot_validates() {
        let saved: Value = serde_json::from_str(&open_diff_text(true)).unwrap();
        assert_eq!((saved["success"].as_bool(), saved["result"].as_str()), (Some(true), Some("SAVED")));
        assert!(saved["trigger"].is_string() && saved["message"].is_string());
        let rejected: Value = serde_json::from_str(&open_diff_text(false)).unwrap();
        assert_eq!(rejected["result"], "REJECTED");
        let closed: Value = serde_json::from_str(&close_diff_text("t", true)).unwrap();
        assert_eq!(
            closed,
            json!({"success": true, "already_closed": false, "tab_name": "t", "message": "The review was closed"})
        );
        assert_eq!(serde_json::from_str::<Value>(&close_diff_text("t", false)).unwrap()["already_closed"], true);
        let names: Vec<String> =
            tools()["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap().to_owned()).collect();
        assert_eq!(names, ["get_selection", "get_diagnostics", "open_diff", "close_diff", "update_session_name"]);
    }

    #[test]
    fn a_mention_is_an_add_selection_of_lines() {
        let v = add_selection(Path::new("/w/a b.rs"), 2, 4);
        assert_eq!(v["fileUrl"], "file:///w/a%20b.rs");
        assert_eq!(v["selection"]["start"]["line"], 2);
        assert_eq!(v["selection"]["end"]["line"], 4);
        assert!(v["selectedText"].is_null());
    }
}
