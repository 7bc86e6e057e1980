//! Atomic file replacement: readers see either the old or the new content, never a
//! half-written file, and the file keeps its permission bits and symlinks stay links.

use std::fs::{self, File, OpenOptions, Permissions};
use std::io::{self, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Mode given to files that do not exist yet.
const NEW_FILE_MODE: u32 = 0o644;

/// Symlink hops followed before giving up (matches Linux's MAXSYMLINKS).
const MAX_LINK_HOPS: usize = 40;

/// Replaces the contents of `path` atomically, keeping its mode (0o644 if new).
///
/// A symlink is followed (even a dangling one) and its final target is replaced, so
/// the link itself survives. Data goes to a temp file in the target's directory
/// (`.<name>.amp-<pid>-<hex>.tmp`, O_EXCL), is fsynced, gets exactly the original mode
/// regardless of umask, and is renamed over the target; the directory is then fsynced
/// (best effort, since the new content is already in place). On any error before the
/// rename the temp file is removed and the original is untouched. Ownership is not
/// copied: the file ends up owned by the writing user.
pub fn atomic_write(path: &Path, contents: &[u8]) -> io::Result<()> {
    let target = resolve_symlinks(path)?;
    let mode = match fs::metadata(&target) {
        Ok(m) => m.permissions().mode() & 0o7777,
        Err(e) if e.kind() == io::ErrorKind::NotFound => NEW_FILE_MODE,
        Err(e) => return Err(e),
    };
    replace_with_mode(&target, contents, mode)
}

/// Replaces the file at `target` (not following a symlink there) with
/// `contents`, with exactly `mode`: a temp file in the same directory
/// (O_EXCL), fsynced, renamed over `target`, then the directory fsynced.
/// On any error before the rename the temp file is removed and `target`
/// is untouched. Also used for lockfiles (mode 0600).
pub fn replace_with_mode(target: &Path, contents: &[u8], mode: u32) -> io::Result<()> {
    let (name, dir) = name_and_dir(target)?;
    let (mut file, tmp) = create_temp(dir, &name, mode)?;
    let result = (|| {
        file.write_all(contents)?;
        file.sync_all()?;
        file.set_permissions(Permissions::from_mode(mode))?;
        drop(file);
        fs::rename(&tmp, target)
    })();
    if let Err(e) = result {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
    remove_orphaned_temps(dir, &name);
    Ok(())
}

/// A temp file beside `target` for a replace that Neovim's `:write` fills:
/// reserved with O_EXCL (mode 0600), closed, named so that a crash leaves
/// it recognisable (see `remove_orphaned_temps`).
pub fn reserve_temp(target: &Path) -> io::Result<PathBuf> {
    let (name, dir) = name_and_dir(target)?;
    create_temp(dir, &name, 0o600).map(|(_, tmp)| tmp)
}

/// A temp file beside `target` holding `bytes`, fsynced (see `reserve_temp`).
pub fn write_temp(target: &Path, bytes: &[u8]) -> io::Result<PathBuf> {
    let (name, dir) = name_and_dir(target)?;
    let (mut file, tmp) = create_temp(dir, &name, 0o600)?;
    let written = file.write_all(bytes).and_then(|()| file.sync_all());
    if let Err(e) = written {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    Ok(tmp)
}

/// A temp file beside `target` whose bytes `write` writes (buffered, so a
/// big text is never copied whole), fsynced (see `reserve_temp`).
pub fn write_temp_with(target: &Path, write: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> io::Result<PathBuf> {
    let (name, dir) = name_and_dir(target)?;
    let (file, tmp) = create_temp(dir, &name, 0o600)?;
    let written = (|| {
        let mut out = io::BufWriter::with_capacity(64 * 1024, file);
        write(&mut out)?;
        out.into_inner().map_err(io::IntoInnerError::into_error)?.sync_all()
    })();
    if let Err(e) = written {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    Ok(tmp)
}

fn name_and_dir(target: &Path) -> io::Result<(String, &Path)> {
    let name = target
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, format!("no file name in {}", target.display())))?;
    let dir = match target.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    Ok((name.to_string_lossy().into_owned(), dir))
}

/// Whether replacing `path` by renaming a new file over it keeps everything
/// that makes it the same file, as Neovim's `'backupcopy'` "auto" decides:
/// not when it is a symlink or has other hard links, is owned by another
/// user or group, or its directory may not be written.
pub fn rename_keeps_identity(path: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::MetadataExt;
    let Ok(meta) = fs::symlink_metadata(path) else { return false };
    if !meta.file_type().is_file() || meta.nlink() > 1 {
        return false;
    }
    // SAFETY: plain getters without arguments.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    if meta.uid() != uid || meta.gid() != gid {
        return false;
    }
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let Ok(dir) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else { return false };
    // SAFETY: a valid NUL-terminated path; access() only reads it.
    unsafe { libc::access(dir.as_ptr(), libc::W_OK) == 0 }
}

/// Puts `tmp` (the new content, already written) in place of `target`: the
/// target's mode and extended attributes (ACLs included) are copied, `tmp`
/// is fsynced when `durable`, then renamed over `target`. On failure `tmp`
/// is removed and `target` is untouched.
pub fn finish_replace(tmp: &Path, target: &Path, durable: bool) -> io::Result<()> {
    let result = (|| {
        let meta = fs::metadata(target)?;
        fs::set_permissions(tmp, Permissions::from_mode(meta.permissions().mode() & 0o7777))?;
        copy_xattrs(target, tmp);
        if durable {
            File::open(tmp)?.sync_all()?;
        }
        fs::rename(tmp, target)
    })();
    if let Err(e) = result {
        let _ = fs::remove_file(tmp);
        return Err(e);
    }
    if let Ok((name, dir)) = name_and_dir(target) {
        if durable {
            if let Ok(d) = File::open(dir) {
                let _ = d.sync_all();
            }
        }
        remove_orphaned_temps(dir, &name);
    }
    Ok(())
}

/// Copies the extended attributes of `from` to `to`, best effort (as
/// Neovim's `:write` does when it renames: a label the user may not set is
/// left out).
#[cfg(target_os = "linux")]
fn copy_xattrs(from: &Path, to: &Path) {
    use std::os::unix::ffi::OsStrExt;
    let (Ok(from), Ok(to)) =
        (std::ffi::CString::new(from.as_os_str().as_bytes()), std::ffi::CString::new(to.as_os_str().as_bytes()))
    else {
        return;
    };
    // SAFETY: valid NUL-terminated paths and buffers of the sizes passed.
    unsafe {
        let size = libc::listxattr(from.as_ptr(), std::ptr::null_mut(), 0);
        if size <= 0 {
            return;
        }
        let mut names = vec![0u8; size as usize];
        let size = libc::listxattr(from.as_ptr(), names.as_mut_ptr().cast(), names.len());
        if size <= 0 {
            return;
        }
        for name in names[..size as usize].split(|&b| b == 0).filter(|n| !n.is_empty()) {
            let Ok(name) = std::ffi::CString::new(name) else { continue };
            let len = libc::getxattr(from.as_ptr(), name.as_ptr(), std::ptr::null_mut(), 0);
            if len < 0 {
                continue;
            }
            let mut value = vec![0u8; len as usize];
            let len = libc::getxattr(from.as_ptr(), name.as_ptr(), value.as_mut_ptr().cast(), value.len());
            if len >= 0 {
                libc::setxattr(to.as_ptr(), name.as_ptr(), value.as_ptr().cast(), len as usize, 0);
            }
        }
    }
}

#[cfg(not(target_os = "linux"))]
fn copy_xattrs(_from: &Path, _to: &Path) {}

/// Removes the temp files that writers killed mid-save left beside `target`
/// (see `remove_orphaned_temps`); best effort.
pub fn remove_orphaned_temps_of(target: &Path) {
    if let Ok((name, dir)) = name_and_dir(target) {
        remove_orphaned_temps(dir, &name);
    }
}

/// Removes temp files of earlier writes to `name` in `dir` whose writer
/// process is gone (a Neovim killed mid-save leaves one beside the intact
/// file). Another live process's temp file may be a save in progress: kept.
/// Best effort, after each successful replace.
fn remove_orphaned_temps(dir: &Path, name: &str) {
    let Ok(entries) = fs::read_dir(dir) else { return };
    let prefix = format!(".{name}.amp-");
    for entry in entries.flatten() {
        let file_name = entry.file_name();
        let Some(rest) = file_name.to_str().and_then(|n| n.strip_prefix(&prefix)).and_then(|r| r.strip_suffix(".tmp"))
        else {
            continue;
        };
        let writer = rest.split_once('-').and_then(|(pid, _)| pid.parse::<u32>().ok());
        if writer.is_some_and(|pid| pid != std::process::id() && !pid_alive(pid)) {
            let _ = fs::remove_file(entry.path());
        }
    }
}

/// Whether a process with this pid exists (signal 0 probe; EPERM means it exists).
///
/// Pid 0 and pids above `i32::MAX` are never alive: cast to `pid_t` they would address a
/// process group (or, for -1, every process) instead of one process.
pub fn pid_alive(pid: u32) -> bool {
    let Ok(p) = i32::try_from(pid) else {
        return false;
    };
    if p <= 0 {
        return false;
    }
    // SAFETY: kill with signal 0 sends nothing; it only checks existence/permission.
    if unsafe { libc::kill(p, 0) } == 0 {
        return true;
    }
    io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// Follows `path` through symlinks to the final non-link path (which may not exist).
fn resolve_symlinks(path: &Path) -> io::Result<PathBuf> {
    let mut current = path.to_path_buf();
    for _ in 0..MAX_LINK_HOPS {
        match fs::symlink_metadata(&current) {
            Ok(m) if m.file_type().is_symlink() => {
                let link = fs::read_link(&current)?;
                current = match current.parent() {
                    Some(parent) if link.is_relative() => parent.join(link),
                    _ => link,
                };
            }
            Ok(_) => return Ok(current),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(current),
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::new(io::ErrorKind::InvalidInput, format!("too many symlinks: {}", path.display())))
}

/// Creates `.<name>.amp-<pid>-<hex>.tmp` in `dir` with O_EXCL, retrying on
/// name clashes. The pid tells a later write whether the writer is gone.
fn create_temp(dir: &Path, name: &str, mode: u32) -> io::Result<(File, PathBuf)> {
    let mut last_err = None;
    for _ in 0..16 {
        let tmp = dir.join(format!(".{name}.amp-{}-{:016x}.tmp", std::process::id(), rand::random::<u64>()));
        match OpenOptions::new().write(true).create_new(true).mode(mode & 0o777).open(&tmp) {
            Ok(f) => return Ok((f, tmp)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last_err = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last_err.unwrap_or_else(|| io::Error::other("could not create temp file")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{symlink, MetadataExt};

    use crate::testutil::{dead_pid, in_child, mode, TempDir};

    #[test]
    fn finish_replace_keeps_mode_and_xattrs_and_removes_the_temp() {
        let dir = TempDir::new("finish");
        let target = dir.0.join("f");
        fs::write(&target, b"old").unwrap();
        fs::set_permissions(&target, Permissions::from_mode(0o640)).unwrap();
        let xattr = std::ffi::CString::new("user.amp-test").unwrap();
        let path = std::ffi::CString::new(target.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: valid NUL-terminated strings and a 4-byte value.
        let has_xattr = unsafe { libc::setxattr(path.as_ptr(), xattr.as_ptr(), b"kept".as_ptr().cast(), 4, 0) } == 0;
        let tmp = reserve_temp(&target).unwrap();
        assert!(tmp.file_name().unwrap().to_string_lossy().starts_with(".f.amp-"));
        fs::write(&tmp, b"new").unwrap();
        let before = fs::metadata(&target).unwrap().ino();
        finish_replace(&tmp, &target, true).unwrap();
        assert_eq!(fs::read(&target).unwrap(), b"new");
        assert_eq!(mode(&target), 0o640);
        assert_ne!(fs::metadata(&target).unwrap().ino(), before, "renamed into place");
        assert!(!tmp.exists());
        if has_xattr {
            let mut value = [0u8; 8];
            // SAFETY: as above, with a buffer of the size passed.
            let len = unsafe { libc::getxattr(path.as_ptr(), xattr.as_ptr(), value.as_mut_ptr().cast(), value.len()) };
            assert_eq!(&value[..len.max(0) as usize], b"kept");
        }
    }

    #[test]
    fn renaming_keeps_identity_only_for_a_plain_file_of_ours() {
        let dir = TempDir::new("identity");
        let plain = dir.0.join("plain");
        fs::write(&plain, b"x").unwrap();
        assert!(rename_keeps_identity(&plain));
        let linked = dir.0.join("linked");
        fs::hard_link(&plain, &linked).unwrap();
        assert!(!rename_keeps_identity(&plain), "a hard link would be broken");
        let single = dir.0.join("single");
        fs::write(&single, b"x").unwrap();
        let alias = dir.0.join("alias");
        symlink(&single, &alias).unwrap();
        assert!(!rename_keeps_identity(&alias), "a symlink would be replaced by a file");
        assert!(rename_keeps_identity(&single));
        assert!(!rename_keeps_identity(&dir.0.join("missing")));
    }

    #[test]
    fn a_write_removes_temp_files_of_dead_writers_to_the_same_file() {
        let dir = TempDir::new("orphans");
        let (dead, me) = (dead_pid(), std::process::id());
        let keep = [
            format!(".f.amp-{me}-01.tmp"),             // ours: maybe a write in progress
            ".f.amp-1-02.tmp".to_string(),             // a live process's
            ".f.amp-00ff00ff00ff00ff.tmp".to_string(), // no pid to check
            format!(".g.amp-{dead}-03.tmp"),           // another file's
        ];
        for name in keep.iter().chain([&format!(".f.amp-{dead}-00.tmp")]) {
            fs::write(dir.0.join(name), b"partial").unwrap();
        }
        atomic_write(&dir.0.join("f"), b"new").unwrap();
        let mut want: Vec<String> = keep.to_vec();
        want.push("f".into());
        want.sort();
        assert_eq!(names(&dir.0), want);
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> =
            fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        v.sort();
        v
    }

    fn with_mode(dir: &Path, name: &str, m: u32) -> PathBuf {
        let p = dir.join(name);
        fs::write(&p, b"old").unwrap();
        fs::set_permissions(&p, Permissions::from_mode(m)).unwrap();
        p
    }

    #[test]
    fn new_file_gets_0644() {
        let t = TempDir::new("new");
        let p = t.0.join("f.txt");
        atomic_write(&p, b"hello").unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"hello");
        assert_eq!(mode(&p), NEW_FILE_MODE);
        assert_eq!(names(&t.0), ["f.txt"]);
    }

    #[test]
    fn keeps_0755_and_0600() {
        let t = TempDir::new("modes");
        for (name, m) in [("x.sh", 0o755), ("secret", 0o600), ("ro", 0o444)] {
            let p = with_mode(&t.0, name, m);
            atomic_write(&p, b"new").unwrap();
            assert_eq!(fs::read(&p).unwrap(), b"new");
            assert_eq!(mode(&p), m, "{name}");
        }
        assert_eq!(names(&t.0), ["ro", "secret", "x.sh"]);
    }

    #[test]
    fn empty_and_repeated_writes() {
        let t = TempDir::new("empty");
        let p = with_mode(&t.0, "f", 0o640);
        atomic_write(&p, b"").unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"");
        atomic_write(&p, b"again").unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"again");
        assert_eq!(mode(&p), 0o640);
        assert_eq!(names(&t.0), ["f"]);
    }

    #[test]
    fn symlink_survives_and_target_updated() {
        let t = TempDir::new("link");
        let target = with_mode(&t.0, "real.txt", 0o600);
        let link = t.0.join("link.txt");
        symlink("real.txt", &link).unwrap(); // relative link
        let link2 = t.0.join("link2.txt");
        symlink(&link, &link2).unwrap(); // chain, absolute
        atomic_write(&link2, b"via link").unwrap();
        assert!(fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
        assert!(fs::symlink_metadata(&link2).unwrap().file_type().is_symlink());
        assert_eq!(fs::read(&target).unwrap(), b"via link");
        assert_eq!(mode(&target), 0o600);
        assert_eq!(names(&t.0), ["link.txt", "link2.txt", "real.txt"]);
    }

    #[test]
    fn symlink_into_other_directory_writes_temp_there() {
        let t = TempDir::new("linkdir");
        fs::create_dir(t.0.join("sub")).unwrap();
        let target = with_mode(&t.0.join("sub"), "real", 0o644);
        let link = t.0.join("link");
        symlink("sub/real", &link).unwrap();
        atomic_write(&link, b"x").unwrap();
        assert_eq!(fs::read(&target).unwrap(), b"x");
        assert_eq!(names(&t.0), ["link", "sub"]);
        assert_eq!(names(&t.0.join("sub")), ["real"]);
    }

    #[test]
    fn dangling_symlink_creates_target() {
        let t = TempDir::new("dangling");
        let link = t.0.join("link");
        symlink("absent", &link).unwrap();
        atomic_write(&link, b"made").unwrap();
        assert!(fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
        assert_eq!(fs::read(t.0.join("absent")).unwrap(), b"made");
        assert_eq!(mode(&t.0.join("absent")), NEW_FILE_MODE);
    }

    #[test]
    fn symlink_loop_is_an_error() {
        let t = TempDir::new("loop");
        symlink("b", t.0.join("a")).unwrap();
        symlink("a", t.0.join("b")).unwrap();
        assert!(atomic_write(&t.0.join("a"), b"x").is_err());
        assert_eq!(names(&t.0), ["a", "b"]);
    }

    #[test]
    fn missing_directory_fails_and_creates_nothing() {
        let t = TempDir::new("missing");
        let p = t.0.join("no").join("such").join("f");
        assert!(atomic_write(&p, b"x").is_err());
        assert!(!t.0.join("no").exists());
        assert!(names(&t.0).is_empty());
    }

    #[test]
    fn directory_target_fails_and_leaves_no_temp() {
        let t = TempDir::new("dirtarget");
        let d = t.0.join("d");
        fs::create_dir(&d).unwrap();
        assert!(atomic_write(&d, b"x").is_err());
        assert!(d.is_dir());
        assert_eq!(names(&t.0), ["d"]);
    }

    #[test]
    fn path_without_file_name_is_rejected() {
        assert_eq!(atomic_write(Path::new("/"), b"x").unwrap_err().kind(), io::ErrorKind::InvalidInput);
    }

    #[test]
    fn mode_ignores_umask() {
        if !in_child(module_path!(), "mode_ignores_umask") {
            return;
        }
        // SAFETY: umask only changes this (child) process's file-creation mask.
        unsafe { libc::umask(0o077) };
        let t = TempDir::new("umask");
        let p = with_mode(&t.0, "x", 0o755);
        atomic_write(&p, b"new").unwrap();
        assert_eq!(mode(&p), 0o755);
        let n = t.0.join("n");
        atomic_write(&n, b"new").unwrap();
        assert_eq!(mode(&n), 0o644);
    }
}
