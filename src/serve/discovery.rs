//! Discovery files: how an agent finds this editor (Amp's and Claude's
//! lockfiles, Gemini's and Qwen's discovery files, Copilot's `.lock`).
//! Each holds a secret, so every one is written the same way: atomically
//! (an agent never reads half a file), 0600 in a 0700 directory that must
//! be ours and no symbolic link; each is removed on stop and on exit, and
//! the files of editors that died are swept, only regular files of ours.

use std::ffi::OsStr;
use std::fs::{self, File, Permissions};
use std::io::{self, Read};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Why a discovery file was not written.
#[derive(Debug, thiserror::Error)]
pub enum DiscoveryError {
    /// The file system refused (no space, permissions, ...).
    #[error("cannot write the {agent} discovery file in {}: {source}", dir.display())]
    Write {
        agent: &'static str,
        dir: PathBuf,
        #[source]
        source: io::Error,
    },
    /// The blocking writer task panicked or was cancelled.
    #[error("the {agent} discovery file writer failed: {source}")]
    Writer {
        agent: &'static str,
        #[source]
        source: tokio::task::JoinError,
    },
}

/// Where a discovery file's editor pid is, for sweeping the files of
/// editors that are gone.
#[derive(Debug, Clone, Copy)]
pub enum PidIn {
    /// Files named `*.<extension>` whose JSON object has the pid in `field`
    /// (Amp, Claude: `pid`; Qwen: `ppid`).
    Field { extension: &'static str, field: &'static str },
    /// The pid is part of the file's name (Gemini's
    /// `gemini-ide-server-<pid>-<port>.json`).
    Name(fn(&str) -> Option<u32>),
}

/// The directory of this plugin's own data, where Amp's lockfiles (`ide/`)
/// and the MCP server's discovery files (`mcp/`) live:
/// `$AMP_DATA_HOME/amp` if set and non-empty, else `$XDG_DATA_HOME/amp` if
/// set, non-empty and absolute (per the XDG spec relative values are
/// ignored), else `<home>/.local/share/amp`; `None` when nothing applies.
pub fn amp_data_dir(
    amp_data_home: Option<&OsStr>,
    xdg_data_home: Option<&OsStr>,
    home: Option<&Path>,
) -> Option<PathBuf> {
    let base = if let Some(amp) = amp_data_home.filter(|v| !v.is_empty()) {
        PathBuf::from(amp)
    } else if let Some(xdg) = xdg_data_home.filter(|v| !v.is_empty() && Path::new(v).is_absolute()) {
        PathBuf::from(xdg)
    } else {
        home?.join(".local").join("share")
    };
    Some(base.join("amp"))
}

/// [`amp_data_dir`] of the real process environment and home directory.
pub fn amp_data_dir_from_env() -> Option<PathBuf> {
    let amp = std::env::var_os("AMP_DATA_HOME");
    let xdg = std::env::var_os("XDG_DATA_HOME");
    amp_data_dir(amp.as_deref(), xdg.as_deref(), dirs::home_dir().as_deref())
}

/// One front-end's discovery file: where it goes, and one writer at a
/// time, so an older write never lands last.
#[derive(Debug)]
pub struct DiscoveryFile {
    /// Who reads it, for messages ("Amp", "Claude", ...).
    pub agent: &'static str,
    pub dir: PathBuf,
    pub path: PathBuf,
    pid_in: PidIn,
    writes: tokio::sync::Mutex<()>,
}

impl DiscoveryFile {
    pub fn new(agent: &'static str, dir: PathBuf, path: PathBuf, pid_in: PidIn) -> Self {
        Self { agent, dir, path, pid_in, writes: tokio::sync::Mutex::new(()) }
    }

    /// Writes what `contents` gives (atomically, 0600 in 0700, off the
    /// async workers: it fsyncs), first sweeping other editors' files of
    /// dead pids when `sweep`. `contents` runs once the writes before this
    /// one are done, so the newest state is what lands last.
    pub async fn write(&self, contents: impl FnOnce() -> Vec<u8>, sweep: bool) -> Result<PathBuf, DiscoveryError> {
        let _one_at_a_time = self.writes.lock().await;
        let bytes = contents();
        let (agent, dir, path, pid_in) = (self.agent, self.dir.clone(), self.path.clone(), self.pid_in);
        let written = tokio::task::spawn_blocking(move || {
            if sweep {
                for removed in remove_stale(&dir, pid_in) {
                    crate::core::log::info(format!("removed the stale {agent} discovery file {}", removed.display()));
                }
            }
            write_named(&dir, &path, &bytes)
        })
        .await;
        match written {
            Ok(written) => written.map_err(|source| DiscoveryError::Write { agent, dir: self.dir.clone(), source }),
            Err(source) => Err(DiscoveryError::Writer { agent, source }),
        }
    }

    /// Removes the file (a quick unlink, fine on the main thread at exit);
    /// a file already gone counts as removed.
    pub fn remove(&self) -> io::Result<()> {
        remove(&self.path)
    }
}

/// Largest discovery file `remove_stale` reads; real ones are a few hundred bytes.
const MAX_DISCOVERY_FILE_BYTES: u64 = 64 * 1024;

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

/// `bytes` to `path` (in `dir`), 0600 in a 0700 directory, atomically:
/// a 0600 temp file beside it, fsynced, renamed into place.
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

/// Deletes the discovery files in `dir` whose editor (found as `pid_in`
/// says) is no longer alive, and returns their paths. Only regular files
/// of ours: other users' files, symbolic links, temp files, files that do
/// not parse and files of live editors are left alone. A missing or
/// unreadable directory yields an empty list.
pub fn remove_stale(dir: &Path, pid_in: PidIn) -> Vec<PathBuf> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    // SAFETY: geteuid cannot fail.
    let me = unsafe { libc::geteuid() };
    let mut removed = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        let ours = fs::symlink_metadata(&path).is_ok_and(|m| m.is_file() && m.uid() == me);
        if !ours {
            continue;
        }
        let pid = match pid_in {
            PidIn::Field { extension, field } => {
                if path.extension().and_then(|e| e.to_str()) != Some(extension) {
                    continue;
                }
                read_pid(&path, field)
            }
            PidIn::Name(pid_of) => entry.file_name().to_str().and_then(pid_of),
        };
        if pid.is_some_and(|pid| !pid_alive(pid)) && remove(&path).is_ok() {
            removed.push(path);
        }
    }
    removed
}

/// The pid in `field` of a discovery file, or `None` if it is too big or
/// does not parse.
fn read_pid(path: &Path, field: &str) -> Option<u32> {
    let mut buf = Vec::new();
    File::open(path).ok()?.take(MAX_DISCOVERY_FILE_BYTES + 1).read_to_end(&mut buf).ok()?;
    if buf.len() as u64 > MAX_DISCOVERY_FILE_BYTES {
        return None;
    }
    let value: serde_json::Value = serde_json::from_slice(&buf).ok()?;
    value.get(field)?.as_u64().and_then(|pid| u32::try_from(pid).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::testutil::{dead_pid, in_child, mode, TempDir};

    const JSON_PID: PidIn = PidIn::Field { extension: "json", field: "pid" };

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> =
            fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        v.sort();
        v
    }

    fn lock(dir: &Path, name: &str, pid: u32) -> PathBuf {
        write_named(dir, &dir.join(name), format!("{{\"pid\": {pid}, \"authToken\": \"tok\"}}").as_bytes()).unwrap()
    }

    #[test]
    fn ensure_dir_modes_only_on_the_file_dir_and_its_parent() {
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
        let ide = base.join("amp").join("ide");
        assert!(write_named(&ide, &ide.join("4242.json"), b"{}").is_err());
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
    fn written_0600_in_0700_atomically_over_a_loose_old_file() {
        let t = TempDir::new("write");
        let dir = t.0.join("amp").join("ide");
        let p = lock(&dir, "41234.json", 1);
        assert_eq!(mode(&p), 0o600);
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&t.0.join("amp")), 0o700);
        fs::set_permissions(&p, Permissions::from_mode(0o644)).unwrap();
        write_named(&dir, &p, b"{\"pid\": 2}").unwrap();
        assert_eq!(mode(&p), 0o600);
        assert_eq!(fs::read(&p).unwrap(), b"{\"pid\": 2}");
        assert_eq!(names(&dir), ["41234.json"], "no temp file is left");
    }

    #[test]
    fn write_fails_cleanly_when_target_is_a_directory() {
        let t = TempDir::new("dirtarget");
        fs::create_dir(t.0.join("9.json")).unwrap();
        fs::write(t.0.join("9.json").join("x"), b"").unwrap();
        assert!(write_named(&t.0, &t.0.join("9.json"), b"{}").is_err());
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
        let p = lock(&t.0, "1.json", 1);
        assert_eq!(mode(&p), 0o600);
        assert_eq!(mode(&t.0), 0o700);
    }

    #[tokio::test]
    async fn a_discovery_file_sweeps_writes_and_removes() {
        let t = TempDir::new("discovery-file");
        let dir = t.0.join("ide");
        let stale = lock(&dir, "1.json", dead_pid());
        let file = DiscoveryFile::new("Test", dir.clone(), dir.join("2.json"), JSON_PID);
        assert_eq!(file.write(|| b"{\"pid\": 3}".to_vec(), false).await.unwrap(), dir.join("2.json"));
        assert!(stale.exists(), "no sweep asked");
        file.write(|| b"{\"pid\": 4}".to_vec(), true).await.unwrap();
        assert!(!stale.exists());
        assert_eq!(fs::read(&file.path).unwrap(), b"{\"pid\": 4}");
        file.remove().unwrap();
        file.remove().unwrap();
        assert!(names(&dir).is_empty());
        let blocked = DiscoveryFile::new("Test", t.0.join("f"), t.0.join("f").join("x"), JSON_PID);
        fs::write(t.0.join("f"), b"a file where the directory goes").unwrap();
        let e = blocked.write(|| b"{}".to_vec(), false).await.unwrap_err();
        assert!(e.to_string().starts_with("cannot write the Test discovery file in"), "{e}");
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
        let dead = lock(&t.0, "1111.json", dead_pid());
        let live = lock(&t.0, "2222.json", std::process::id());
        // Only a pid field: still counts.
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

        let mut removed = remove_stale(&t.0, JSON_PID);
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
        assert!(remove_stale(&t.0, JSON_PID).is_empty());
        assert!(remove_stale(&t.0.join("nope"), JSON_PID).is_empty());
    }

    #[test]
    fn remove_stale_reads_the_pid_where_the_agent_puts_it() {
        let t = TempDir::new("stale-kinds");
        let qwen = t.0.join("1.lock");
        fs::write(&qwen, format!("{{\"ppid\": {}}}", dead_pid())).unwrap();
        let live_qwen = t.0.join("2.lock");
        fs::write(&live_qwen, format!("{{\"ppid\": {}}}", std::process::id())).unwrap();
        assert_eq!(remove_stale(&t.0, PidIn::Field { extension: "lock", field: "ppid" }), vec![qwen]);
        fn by_name(name: &str) -> Option<u32> {
            name.strip_prefix("server-")?.strip_suffix(".json")?.parse().ok()
        }
        let named = t.0.join(format!("server-{}.json", dead_pid()));
        fs::write(&named, b"{}").unwrap();
        fs::write(t.0.join(format!("server-{}.json", std::process::id())), b"{}").unwrap();
        assert_eq!(remove_stale(&t.0, PidIn::Name(by_name)), vec![named]);
        assert!(live_qwen.exists());
    }

    #[test]
    fn remove_stale_leaves_other_users_files_alone() {
        // SAFETY: geteuid cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            return; // only root can give a file to another user here
        }
        let t = TempDir::new("stale-owner");
        let theirs = t.0.join("1.json");
        fs::write(&theirs, format!("{{\"pid\": {}}}", dead_pid())).unwrap();
        std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
        assert!(remove_stale(&t.0, JSON_PID).is_empty());
        assert!(theirs.exists());
    }

    #[test]
    fn remove_stale_skips_oversized_file() {
        let t = TempDir::new("big");
        let mut body = format!("{{\"pid\": {}, \"x\": \"", dead_pid()).into_bytes();
        body.resize(body.len() + MAX_DISCOVERY_FILE_BYTES as usize, b'a');
        body.extend_from_slice(b"\"}");
        fs::write(t.0.join("1.json"), &body).unwrap();
        assert!(remove_stale(&t.0, JSON_PID).is_empty());
    }
}
