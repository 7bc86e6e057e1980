//! The discovery file on disk: written 0600 in a 0700 directory, atomically
//! (the Amp lockfile's writer), and other editors' files of dead processes
//! removed. Blocking I/O: called from `spawn_blocking`.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::protocol::{pid_of_file_name, Discovery};
use crate::amp::lockfile;

/// Writes `discovery` to `path` (in `dir`).
pub fn write(dir: &Path, path: &Path, discovery: &Discovery) -> std::io::Result<PathBuf> {
    let json = serde_json::to_vec_pretty(discovery).map_err(std::io::Error::other)?;
    lockfile::write_named(dir, path, &json)
}

/// Removes the discovery files in `dir` whose pid (from the file name, as
/// Gemini reads it) is not alive; only regular files of ours. Returns them.
pub fn remove_stale(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = fs::read_dir(dir) else { return Vec::new() };
    // SAFETY: getuid cannot fail.
    let uid = unsafe { libc::getuid() };
    let mut removed = Vec::new();
    for entry in entries.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(pid_of_file_name) else { continue };
        let path = entry.path();
        let ours = fs::symlink_metadata(&path).is_ok_and(|m| m.is_file() && m.uid() == uid);
        if ours && !lockfile::pid_alive(pid) && lockfile::remove(&path).is_ok() {
            removed.push(path);
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gemini::protocol::file_name;
    use crate::testutil::{dead_pid, mode, TempDir};

    #[test]
    fn written_private_and_stale_files_of_dead_pids_removed() {
        let root = TempDir::new("gemini-discovery");
        let dir = root.0.join("gemini").join("ide");
        let path = dir.join(file_name(std::process::id(), 7));
        let d = Discovery::new(7, &["/w".into()], "tok".into());
        write(&dir, &path, &d).unwrap();
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(&dir), 0o700);
        let read: serde_json::Value = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
        assert_eq!(read["authToken"], "tok");
        let stale = dir.join(file_name(dead_pid(), 8));
        fs::write(&stale, "{}").unwrap();
        let other = dir.join("notes.json");
        fs::write(&other, "{}").unwrap();
        assert_eq!(remove_stale(&dir), vec![stale.clone()]);
        assert!(path.exists() && other.exists() && !stale.exists());
        assert!(remove_stale(&root.0.join("absent")).is_empty());
    }
}
