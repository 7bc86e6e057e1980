//! The lockfile through which the Amp CLI discovers this editor.
//!
//! One JSON file per running server, `<dir>/<port>.json`, holding the port, the auth
//! token and our pid. It contains a secret, so the directory is 0700 and the file 0600,
//! and it is written atomically so the CLI never reads a half-written file.

use serde::{Deserialize, Serialize};
use std::ffi::OsStr;
use std::fs::{self, File, Permissions};
use std::io::{self, Read};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

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

/// Why a protocol's lockfile (or discovery file) was not written.
#[derive(Debug, thiserror::Error)]
pub enum LockfileError {
    /// The file system refused (no space, permissions, ...).
    #[error("cannot write the {agent} lockfile in {}: {source}", dir.display())]
    Write {
        agent: &'static str,
        dir: PathBuf,
        #[source]
        source: io::Error,
    },
    /// The blocking writer task panicked or was cancelled.
    #[error("the {agent} lockfile writer failed: {source}")]
    Writer {
        agent: &'static str,
        #[source]
        source: tokio::task::JoinError,
    },
}

/// Runs `write` off the async workers (it fsyncs), its failure told as
/// `agent`'s lockfile in `dir`.
pub async fn write_off_thread(
    agent: &'static str,
    dir: PathBuf,
    write: impl FnOnce() -> io::Result<PathBuf> + Send + 'static,
) -> Result<PathBuf, LockfileError> {
    match tokio::task::spawn_blocking(write).await {
        Ok(written) => written.map_err(|source| LockfileError::Write { agent, dir, source }),
        Err(source) => Err(LockfileError::Writer { agent, source }),
    }
}

/// Largest lockfile `remove_stale` will read; real ones are a few hundred bytes.
const MAX_LOCKFILE_BYTES: u64 = 64 * 1024;

/// Where lockfiles live, computed purely from the given environment values.
///
/// `$AMP_DATA_HOME/amp/ide` if set and non-empty, else `$XDG_DATA_HOME/amp/ide` if set,
/// non-empty and absolute (per the XDG spec relative values are ignored), else
/// `<home>/.local/share/amp/ide`; `None` when nothing applies.
pub fn lock_dir(amp_data_home: Option<&OsStr>, xdg_data_home: Option<&OsStr>, home: Option<&Path>) -> Option<PathBuf> {
    let base = if let Some(amp) = amp_data_home.filter(|v| !v.is_empty()) {
        PathBuf::from(amp)
    } else if let Some(xdg) = xdg_data_home.filter(|v| !v.is_empty() && Path::new(v).is_absolute()) {
        PathBuf::from(xdg)
    } else {
        home?.join(".local").join("share")
    };
    Some(base.join("amp").join("ide"))
}

/// [`lock_dir`] applied to the real process environment and home directory.
pub fn lock_dir_from_env() -> Option<PathBuf> {
    let amp = std::env::var_os("AMP_DATA_HOME");
    let xdg = std::env::var_os("XDG_DATA_HOME");
    let home = dirs::home_dir();
    lock_dir(amp.as_deref(), xdg.as_deref(), home.as_deref())
}

/// Creates `dir` (and missing ancestors) and makes `dir` and its parent mode 0700.
///
/// Only those two (`amp/ide` and `amp`) are tightened; shared ancestors such as
/// `~/.local/share` keep their modes. Neither may be a symbolic link: a link
/// would have the chmod land on whatever it points to (a shared 1777 directory
/// made private, or another user's trap), so a linked `amp` or `ide` is an
/// error that names it. The modes are set with `fchmod` on descriptors opened
/// with `O_NOFOLLOW | O_DIRECTORY`, `ide` relative to `amp`'s descriptor, so
/// swapping in a link after the check changes nothing either.
pub fn ensure_dir(dir: &Path) -> io::Result<()> {
    // Refuse a linked `amp` before create_dir_all creates `ide` through it.
    let parent = dir.parent().filter(|p| !p.as_os_str().is_empty() && *p != Path::new("/"));
    for d in parent.into_iter().chain(std::iter::once(dir)) {
        refuse_symlink(d)?;
    }
    fs::create_dir_all(dir)?;
    match parent {
        Some(parent) => {
            let amp = open_dir_nofollow(None, parent)?;
            make_private(&amp, parent)?;
            let name = dir.file_name().ok_or_else(|| io::Error::other(format!("{} has no name", dir.display())))?;
            let ide = open_dir_nofollow(Some(&amp), Path::new(name)).map_err(|e| named(dir, e))?;
            make_private(&ide, dir)
        }
        None => make_private(&open_dir_nofollow(None, dir)?, dir),
    }
}

/// Mode 0700 on the open directory `path`, which must be ours: a directory
/// another user made first (Gemini's is under the shared `$TMPDIR`) could
/// be emptied, renamed or swapped by them, secret files and all. Root could
/// chmod it anyway, so ownership is checked, not left to `fchmod`.
fn make_private(dir: &File, path: &Path) -> io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: geteuid cannot fail.
    let me = unsafe { libc::geteuid() };
    let owner = dir.metadata()?.uid();
    if owner != me {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("{} belongs to another user (uid {owner}): the lockfile directory must be yours", path.display()),
        ));
    }
    dir.set_permissions(Permissions::from_mode(0o700))
}

/// An error naming `path` when it is a symbolic link (absent is fine).
fn refuse_symlink(path: &Path) -> io::Result<()> {
    match fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_symlink() => Err(symlink_error(path)),
        _ => Ok(()),
    }
}

fn symlink_error(path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::PermissionDenied,
        format!(
            "{} is a symbolic link: the lockfile directory must be a real directory \
             (its mode is never changed through a link); replace the link with a directory",
            path.display()
        ),
    )
}

fn named(path: &Path, e: io::Error) -> io::Error {
    if e.raw_os_error() == Some(libc::ELOOP) || e.raw_os_error() == Some(libc::ENOTDIR) {
        symlink_error(path)
    } else {
        e
    }
}

/// Opens the directory `path` (relative to `at` when given) without
/// following a final symbolic link.
fn open_dir_nofollow(at: Option<&File>, path: &Path) -> io::Result<File> {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::io::{AsRawFd, FromRawFd};
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(io::Error::other)?;
    let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    let dirfd = at.map_or(libc::AT_FDCWD, |f| f.as_raw_fd());
    // SAFETY: a valid NUL-terminated path and a descriptor we own (or AT_FDCWD).
    let fd = unsafe { libc::openat(dirfd, c.as_ptr(), flags) };
    if fd < 0 {
        return Err(named(path, io::Error::last_os_error()));
    }
    // SAFETY: `fd` was just opened and is owned by nobody else.
    Ok(unsafe { File::from_raw_fd(fd) })
}

/// Path of the lockfile for `port`: `<dir>/<port>.json`.
pub fn path_for(dir: &Path, port: u16) -> PathBuf {
    dir.join(format!("{port}.json"))
}

/// Atomically writes `lock` to `<dir>/<port>.json` with mode 0600 and returns that path.
///
/// Writes a 0600 temp file created with O_EXCL, fsyncs it, renames it into place and
/// fsyncs the directory (best effort: once renamed the file is in place, so a failing
/// directory fsync is not reported). The temp file is removed on error.
pub fn write(dir: &Path, lock: &Lockfile) -> io::Result<PathBuf> {
    let json = serde_json::to_vec_pretty(lock).map_err(io::Error::other)?;
    write_named(dir, &path_for(dir, lock.port), &json)
}

/// [`write`] for any protocol's lockfile: `bytes` to `path` (in `dir`),
/// 0600 in a 0700 directory, atomically.
pub fn write_named(dir: &Path, path: &Path, bytes: &[u8]) -> io::Result<PathBuf> {
    ensure_dir(dir)?;
    // Exactly 0600 whatever the umask: the file holds the auth token.
    crate::core::fsutil::replace_with_mode(path, bytes, 0o600)?;
    Ok(path.to_path_buf())
}

/// Deletes a lockfile; a file that is already gone counts as success.
pub fn remove(path: &Path) -> io::Result<()> {
    match fs::remove_file(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

pub use crate::core::fsutil::pid_alive;

/// Minimal view of a lockfile: anything with a numeric `pid` counts.
#[derive(Deserialize)]
struct PidOnly {
    pid: u32,
}

/// Deletes lockfiles in `dir` whose pid is no longer alive and returns their paths.
///
/// Only regular `*.json` files whose content has a numeric `pid` are considered; other
/// files, temp files, symlinks and lockfiles of live processes are left alone.
/// A missing or unreadable directory yields an empty list.
pub fn remove_stale(dir: &Path) -> Vec<PathBuf> {
    remove_stale_with_extension(dir, "json")
}

/// [`remove_stale`] for lockfiles named `*.<extension>` (Claude Code's are `.lock`).
pub fn remove_stale_with_extension(dir: &Path, extension: &str) -> Vec<PathBuf> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut removed = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        let is_json = path.extension() == Some(OsStr::new(extension));
        let is_file = entry.file_type().map(|t| t.is_file()).unwrap_or(false);
        if !is_json || !is_file {
            continue;
        }
        let Some(pid) = read_pid(&path) else { continue };
        if !pid_alive(pid) && remove(&path).is_ok() {
            removed.push(path);
        }
    }
    removed
}

/// Reads the `pid` of a lockfile, or `None` if it is too big or does not parse.
fn read_pid(path: &Path) -> Option<u32> {
    let mut buf = Vec::new();
    File::open(path).ok()?.take(MAX_LOCKFILE_BYTES + 1).read_to_end(&mut buf).ok()?;
    if buf.len() as u64 > MAX_LOCKFILE_BYTES {
        return None;
    }
    serde_json::from_slice::<PidOnly>(&buf).ok().map(|p| p.pid)
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::testutil::{dead_pid, in_child, mode, TempDir};

    fn sample(port: u16, pid: u32) -> Lockfile {
        Lockfile {
            port,
            auth_token: "tok".into(),
            pid,
            workspace_folders: vec!["/w/a".into(), "/w/b c".into()],
            ide_name: "Neovim (nvim 0.11.4)".into(),
        }
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> =
            fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        v.sort();
        v
    }

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
    fn lock_dir_from_env_ends_in_amp_ide() {
        if let Some(d) = lock_dir_from_env() {
            assert!(d.ends_with("amp/ide"));
        }
    }

    #[test]
    fn path_for_port() {
        assert_eq!(path_for(Path::new("/d"), 8080), PathBuf::from("/d/8080.json"));
        assert_eq!(path_for(Path::new("/d"), 0), PathBuf::from("/d/0.json"));
    }

    #[test]
    fn ensure_dir_modes_only_on_ide_and_amp() {
        let t = TempDir::new("ensure");
        fs::set_permissions(&t.0, Permissions::from_mode(0o755)).unwrap();
        let amp = t.0.join("amp");
        let ide = amp.join("ide");
        ensure_dir(&ide).unwrap();
        assert_eq!(mode(&ide), 0o700);
        assert_eq!(mode(&amp), 0o700);
        assert_eq!(mode(&t.0), 0o755);
        // Idempotent, and tightens pre-existing loose modes.
        fs::set_permissions(&ide, Permissions::from_mode(0o777)).unwrap();
        fs::set_permissions(&amp, Permissions::from_mode(0o755)).unwrap();
        ensure_dir(&ide).unwrap();
        assert_eq!(mode(&ide), 0o700);
        assert_eq!(mode(&amp), 0o700);
    }

    #[test]
    fn ensure_dir_refuses_a_directory_of_another_user() {
        // SAFETY: geteuid cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            return; // only root can give a directory to another user here
        }
        let t = TempDir::new("ensure-owner");
        let shared = t.0.join("gemini");
        fs::create_dir(&shared).unwrap();
        fs::set_permissions(&shared, Permissions::from_mode(0o777)).unwrap();
        std::os::unix::fs::chown(&shared, Some(65534), Some(65534)).unwrap();
        let e = ensure_dir(&shared.join("ide")).unwrap_err();
        assert!(e.to_string().contains("belongs to another user (uid 65534)"), "{e}");
        assert_eq!(mode(&shared), 0o777);
        assert!(write_named(&shared.join("ide"), &shared.join("ide").join("x.json"), b"{}").is_err());
        assert!(!shared.join("ide").join("x.json").exists());
    }

    #[test]
    fn ensure_dir_never_chmods_through_a_symlink() {
        let t = TempDir::new("ensure-link");
        // A shared sticky world-writable directory, like /tmp.
        let shared = t.0.join("shared");
        fs::create_dir(&shared).unwrap();
        fs::set_permissions(&shared, Permissions::from_mode(0o1777)).unwrap();
        fs::create_dir(shared.join("ide")).unwrap();
        fs::set_permissions(shared.join("ide"), Permissions::from_mode(0o1777)).unwrap();

        // `amp` is a link to it.
        let base = t.0.join("data");
        fs::create_dir(&base).unwrap();
        std::os::unix::fs::symlink(&shared, base.join("amp")).unwrap();
        let e = ensure_dir(&base.join("amp").join("ide")).unwrap_err();
        assert!(e.to_string().contains("is a symbolic link"), "{e}");
        assert!(e.to_string().contains("amp"), "{e}");
        assert_eq!(mode(&shared), 0o1777);
        assert_eq!(mode(&shared.join("ide")), 0o1777);
        assert!(write(&base.join("amp").join("ide"), &sample(4242, 1)).is_err());
        assert!(!shared.join("ide").join("4242.json").exists());

        // `ide` is a link to it.
        let base2 = t.0.join("data2");
        fs::create_dir_all(base2.join("amp")).unwrap();
        std::os::unix::fs::symlink(&shared, base2.join("amp").join("ide")).unwrap();
        let e = ensure_dir(&base2.join("amp").join("ide")).unwrap_err();
        assert!(e.to_string().contains("is a symbolic link"), "{e}");
        assert_eq!(mode(&shared), 0o1777);

        // The nofollow open itself refuses a link (the race after the check).
        let e = open_dir_nofollow(None, &base.join("amp")).unwrap_err();
        assert!(e.to_string().contains("is a symbolic link"), "{e}");
        assert_eq!(mode(&shared), 0o1777);
    }

    #[test]
    fn write_creates_0600_file_with_camelcase_json() {
        let t = TempDir::new("write");
        let dir = t.0.join("amp").join("ide");
        let lock = sample(41234, std::process::id());
        let p = write(&dir, &lock).unwrap();
        assert_eq!(p, dir.join("41234.json"));
        assert_eq!(mode(&p), 0o600);
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&t.0.join("amp")), 0o700);
        let v: serde_json::Value = serde_json::from_slice(&fs::read(&p).unwrap()).unwrap();
        let obj = v.as_object().unwrap();
        let mut keys: Vec<&str> = obj.keys().map(String::as_str).collect();
        keys.sort();
        assert_eq!(keys, ["authToken", "ideName", "pid", "port", "workspaceFolders"]);
        assert_eq!(v["port"], 41234);
        assert_eq!(v["authToken"], "tok");
        assert_eq!(v["workspaceFolders"][1], "/w/b c");
        let back: Lockfile = serde_json::from_slice(&fs::read(&p).unwrap()).unwrap();
        assert_eq!(back, lock);
        assert_eq!(names(&dir), ["41234.json"]);
    }

    #[test]
    fn write_overwrites_and_leaves_no_temp_files() {
        let t = TempDir::new("overwrite");
        let mut lock = sample(5000, 1);
        write(&t.0, &lock).unwrap();
        lock.workspace_folders = vec!["/other".into()];
        let p = write(&t.0, &lock).unwrap();
        let back: Lockfile = serde_json::from_slice(&fs::read(&p).unwrap()).unwrap();
        assert_eq!(back.workspace_folders, ["/other"]);
        assert_eq!(names(&t.0), ["5000.json"]);
    }

    #[test]
    fn write_tightens_existing_loose_file() {
        let t = TempDir::new("loose");
        let p = path_for(&t.0, 7);
        fs::write(&p, b"{}").unwrap();
        fs::set_permissions(&p, Permissions::from_mode(0o644)).unwrap();
        write(&t.0, &sample(7, 1)).unwrap();
        assert_eq!(mode(&p), 0o600);
    }

    #[test]
    fn write_fails_cleanly_when_target_is_a_directory() {
        let t = TempDir::new("dirtarget");
        fs::create_dir(path_for(&t.0, 9)).unwrap();
        fs::write(path_for(&t.0, 9).join("x"), b"").unwrap();
        assert!(write(&t.0, &sample(9, 1)).is_err());
        assert_eq!(names(&t.0), ["9.json"]);
    }

    #[test]
    fn write_mode_ignores_umask() {
        if !in_child(module_path!(), "write_mode_ignores_umask") {
            return;
        }
        // SAFETY: umask only changes this (child) process's file-creation mask.
        unsafe { libc::umask(0o277) };
        let t = TempDir::new("umask");
        let p = write(&t.0, &sample(1, 1)).unwrap();
        assert_eq!(mode(&p), 0o600);
        assert_eq!(mode(&t.0), 0o700);
    }

    #[test]
    fn remove_is_idempotent() {
        let t = TempDir::new("remove");
        let p = write(&t.0, &sample(3, 1)).unwrap();
        remove(&p).unwrap();
        assert!(!p.exists());
        remove(&p).unwrap();
        remove(&t.0.join("never-existed.json")).unwrap();
    }

    #[test]
    fn pid_alive_cases() {
        assert!(pid_alive(std::process::id()));
        assert!(!pid_alive(0));
        assert!(!pid_alive(u32::MAX)); // would be kill(-1, 0)
        assert!(!pid_alive(i32::MAX as u32 + 1));
        assert!(!pid_alive(dead_pid()));
        // pid 1 exists but may belong to another user: EPERM still means alive.
        assert!(pid_alive(1));
    }

    #[test]
    fn remove_stale_removes_dead_keeps_live_and_others() {
        let t = TempDir::new("stale");
        let dead = write(&t.0, &sample(1111, dead_pid())).unwrap();
        let live = write(&t.0, &sample(2222, std::process::id())).unwrap();
        // Only a pid field: still counts as a lockfile.
        let minimal = t.0.join("3333.json");
        fs::write(&minimal, format!("{{\"pid\": {}}}", dead_pid())).unwrap();
        fs::write(t.0.join("garbage.json"), b"not json").unwrap();
        fs::write(t.0.join("nopid.json"), b"{\"port\": 1}").unwrap();
        fs::write(t.0.join("strpid.json"), b"{\"pid\": \"12\"}").unwrap();
        fs::write(t.0.join("negpid.json"), b"{\"pid\": -1}").unwrap();
        fs::write(t.0.join(".4444.json.abc.tmp"), b"{\"pid\": 0}").unwrap();
        fs::write(t.0.join("5555.txt"), b"{\"pid\": 0}").unwrap();
        fs::create_dir(t.0.join("6666.json")).unwrap();
        std::os::unix::fs::symlink(&dead, t.0.join("7777.json")).unwrap();

        let mut removed = remove_stale(&t.0);
        removed.sort();
        let mut want = vec![dead.clone(), minimal.clone()];
        want.sort();
        assert_eq!(removed, want);
        assert!(live.exists());
        assert_eq!(
            names(&t.0),
            [
                ".4444.json.abc.tmp",
                "2222.json",
                "5555.txt",
                "6666.json",
                "7777.json",
                "garbage.json",
                "negpid.json",
                "nopid.json",
                "strpid.json"
            ]
        );
        // Second pass finds nothing more.
        assert!(remove_stale(&t.0).is_empty());
    }

    #[test]
    fn remove_stale_missing_dir_is_empty() {
        let t = TempDir::new("missing");
        assert!(remove_stale(&t.0.join("nope")).is_empty());
    }

    #[test]
    fn remove_stale_skips_oversized_file() {
        let t = TempDir::new("big");
        let mut body = format!("{{\"pid\": {}, \"x\": \"", dead_pid()).into_bytes();
        body.resize(body.len() + MAX_LOCKFILE_BYTES as usize, b'a');
        body.extend_from_slice(b"\"}");
        fs::write(t.0.join("1.json"), &body).unwrap();
        assert!(remove_stale(&t.0).is_empty());
    }
}
