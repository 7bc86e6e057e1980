//! The one check every read or open an agent asks for goes through, off
//! the editor's main thread: the path must be a regular file (or, to be
//! opened, a directory) on a file system that holds data, no bigger than a
//! cap; it is read with that cap enforced while reading (`take(cap + 1)`),
//! never trusting the size `stat` gives.
//!
//! Why: a FIFO blocks whoever opens it until a writer comes; a device can
//! be endless (`/dev/zero`); a procfs or sysfs file is a regular file whose
//! `stat` size is 0 or 4096 while reading it yields whatever the kernel
//! makes up (`/proc/self/pagemap` yields gigabytes). Neovim's `:edit` of
//! any of these freezes the editor or fills its memory, so nothing reaches
//! the main thread before this check, and the main thread re-checks with
//! one `stat` ([`CheckedPath::still_same`]) that it is still that file
//! right before Neovim reads it.

use std::fs::{File, FileType, Metadata, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long checking or reading one file may take before the request
/// gives up (a hung network file system; the blocking thread is left to
/// finish on its own).
pub const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// The default of `edits.max_file_bytes`: the largest file an agent may
/// read, edit or open.
pub const DEFAULT_MAX_FILE_BYTES: u64 = 32 * 1024 * 1024;

/// Bytes read at a time when a file is read through only to learn that it
/// is no longer than its size says.
const SCRATCH_BYTES: usize = 64 * 1024;

/// What the caller does with the file: decides the wording of a refusal
/// and the name of the limit it gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Use {
    /// `readFile` / `editFile`, capped by `edits.max_file_bytes`.
    ReadOrEdit,
    /// `openURI` / `openFile` (`:edit`), capped by `edits.max_file_bytes`.
    Open,
    /// The left side of a review (`core::review::MAX_REVIEW_BYTES`).
    Review,
    /// The file watcher's reload of a buffer (its own cap; logged only).
    Reload,
}

/// What a checked path is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    File,
    Directory,
}

/// A path checked off the main thread: a regular file within the cap (or a
/// directory, where one may be opened) on a file system that holds data.
/// Only [`check`] makes one, so an editor call that takes it cannot be
/// given a path nobody checked.
#[derive(Debug, Clone)]
pub struct CheckedPath {
    path: PathBuf,
    kind: Kind,
    meta: Metadata,
    cap: u64,
}

impl CheckedPath {
    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn into_path(self) -> PathBuf {
        self.path
    }

    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// The file's metadata as checked (of the open descriptor).
    pub fn metadata(&self) -> &Metadata {
        &self.meta
    }

    /// Right before the editor reads the path (main thread: one `stat`, no
    /// read): still the same file or directory, and no bigger than the cap.
    /// Someone could have put a FIFO or a procfs link in its place since the
    /// check.
    pub fn still_same(&self) -> Result<(), NotSame> {
        let now = std::fs::metadata(&self.path).map_err(|source| NotSame::Gone { path: self.path.clone(), source })?;
        let same = now.dev() == self.meta.dev()
            && now.ino() == self.meta.ino()
            && now.file_type() == self.meta.file_type()
            && (self.kind == Kind::Directory || now.len() <= self.cap);
        if same {
            Ok(())
        } else {
            Err(NotSame::Swapped { path: self.path.clone() })
        }
    }

    /// A checked path for the unit tests' fake editor.
    #[cfg(test)]
    pub fn for_tests(path: &Path) -> CheckedPath {
        let meta = std::fs::metadata(path).expect("a test file");
        let kind = if meta.is_dir() { Kind::Directory } else { Kind::File };
        CheckedPath { path: path.to_path_buf(), kind, meta, cap: u64::MAX }
    }
}

/// Why a checked path may not be read any more ([`CheckedPath::still_same`]).
#[derive(Debug, thiserror::Error)]
pub enum NotSame {
    /// It cannot be `stat`ed now (removed, permission taken away).
    #[error("cannot open {}: {source}", path.display())]
    Gone { path: PathBuf, source: io::Error },
    /// Another file (or a bigger one) is in its place.
    #[error("{} changed while it was being opened; nothing was opened: try again", path.display())]
    Swapped { path: PathBuf },
}

/// A refusal of `path` for a use: the error a caller passes on, its
/// message [`Refused::message`].
#[derive(Debug, thiserror::Error)]
#[error("{}", refused.message(path, *usage))]
pub struct FileRefusal {
    pub path: PathBuf,
    pub usage: Use,
    pub refused: Refused,
}

/// Why a path may not be read or opened.
#[derive(Debug)]
pub enum Refused {
    /// `stat`, `open` or `read` failed (not found, permission denied, ...).
    Io(io::Error),
    /// A FIFO, socket, device, or a directory where a file is needed: what it is.
    Kind(&'static str),
    /// On a file system whose files the kernel makes up as they are read
    /// (procfs, sysfs, ...): its name.
    PseudoFs(&'static str),
    /// Bigger than the cap (by `stat`, or found while reading).
    TooBig { size: u64, cap: u64 },
    /// Reading it gave more bytes than `stat` said it has.
    LongerThanStat { size: u64 },
    /// Not done within [`READ_TIMEOUT`].
    TimedOut,
}

impl Refused {
    pub fn is_not_found(&self) -> bool {
        matches!(self, Refused::Io(e) if e.kind() == io::ErrorKind::NotFound)
    }

    /// The refusal of `path` for `usage`, as an error.
    pub fn of(self, path: &Path, usage: Use) -> FileRefusal {
        FileRefusal { path: path.to_path_buf(), usage, refused: self }
    }

    /// The refusal in one line, as the agent is told it.
    pub fn message(&self, path: &Path, usage: Use) -> String {
        let p = path.display();
        match (self, usage) {
            (Refused::Io(e), Use::Review) => format!("cannot review {p}: {e}"),
            (Refused::Io(e), _) => io_message(path, e),
            (Refused::Kind(what), Use::ReadOrEdit | Use::Reload) => {
                format!("{p} is {what}: only regular files can be read or edited")
            }
            (Refused::Kind(what), Use::Open) => {
                format!("cannot open {p}: it is {what}; only regular files and directories are opened")
            }
            (Refused::Kind(what), Use::Review) => format!("cannot review {p}: it is {what}, not a regular file"),
            (Refused::PseudoFs(fs), Use::ReadOrEdit | Use::Reload) => format!(
                "{p} is on {fs}, whose files the kernel makes up as they are read: only files on disk can be read or edited"
            ),
            (Refused::PseudoFs(fs), Use::Open) => format!(
                "cannot open {p}: it is on {fs}, whose files the kernel makes up as they are read; only files on disk are opened"
            ),
            (Refused::PseudoFs(fs), Use::Review) => {
                format!("cannot review {p}: it is on {fs}, whose files the kernel makes up as they are read")
            }
            (Refused::TooBig { size, cap }, Use::ReadOrEdit | Use::Reload) => format!(
                "{p} is {size} bytes, more than the {cap} bytes an agent may read or edit at once (edits.max_file_bytes)"
            ),
            (Refused::TooBig { size, cap }, Use::Open) => {
                format!("cannot open {p}: it is {size} bytes, more than the {cap} bytes an agent may open (edits.max_file_bytes)")
            }
            (Refused::TooBig { size, cap }, Use::Review) => {
                format!("cannot review {p}: {size} bytes is more than a review shows ({cap})")
            }
            (Refused::LongerThanStat { size }, _) => format!(
                "{p} gave more bytes when read than its size ({size} bytes) says: it is being written, or it is not a file on disk; nothing was done with it"
            ),
            (Refused::TimedOut, _) => format!("reading {p} took too long"),
        }
    }
}

impl From<io::Error> for Refused {
    fn from(e: io::Error) -> Self {
        Refused::Io(e)
    }
}

/// The one-line message of an I/O error on `path`.
pub fn io_message(path: &Path, e: &io::Error) -> String {
    match e.kind() {
        io::ErrorKind::NotFound => format!("file not found: {}", path.display()),
        io::ErrorKind::PermissionDenied => format!("permission denied: {}", path.display()),
        _ if path.is_dir() => format!("{} is a directory", path.display()),
        _ => format!("cannot read {}: {e}", path.display()),
    }
}

/// What a file is when it is neither a regular file nor a directory: the
/// one description of special files.
pub fn special_kind(kind: &FileType) -> Option<&'static str> {
    if kind.is_file() || kind.is_dir() {
        None
    } else if kind.is_fifo() {
        Some("a FIFO (named pipe)")
    } else if kind.is_socket() {
        Some("a socket")
    } else if kind.is_char_device() {
        Some("a character device")
    } else if kind.is_block_device() {
        Some("a block device")
    } else {
        Some("not a regular file")
    }
}

/// Kernel file systems whose files hold no data of their own: reading one
/// runs kernel code that makes the bytes up (`statfs`'s `f_type`, from
/// `linux/magic.h`). Their `stat` sizes say nothing (0 or 4096), and
/// some are endless (`/proc/self/pagemap`, `/sys/kernel/tracing/trace_pipe`).
const PSEUDO_FILESYSTEMS: &[(u32, &str)] = &[
    (0x9fa0, "procfs"),
    (0x6265_6572, "sysfs"),
    (0x6462_6720, "debugfs"),
    (0x7472_6163, "tracefs"),
    (0x7363_6673, "securityfs"),
    (0x0027_e0eb, "cgroupfs"),
    (0x6367_7270, "cgroup2fs"),
    (0x6265_6570, "configfs"),
    (0xde5e_81e4, "efivarfs"),
    (0x6165_676c, "pstore"),
    (0xcafe_4a11, "bpffs"),
    (0x1cd1, "devpts"),
    (0x4249_4e4d, "binfmt_misc"),
    (0xf97c_ff8c, "selinuxfs"),
    (0x4341_5d53, "smackfs"),
    (0x6573_5543, "fusectl"),
    (0x6e73_6673, "nsfs"),
    (0x0904_1934, "anon_inodefs"),
    (0x1980_0202, "mqueue"),
    (0x6759_6969, "rpc_pipefs"),
];

/// The pseudo-filesystem `file` is on, if it is on one.
#[cfg(target_os = "linux")]
fn pseudo_filesystem(file: &File) -> Option<&'static str> {
    use std::os::fd::AsRawFd;
    // SAFETY: a zeroed statfs is a valid out-parameter; the descriptor is open.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: as above; fstatfs only writes `st`.
    if unsafe { libc::fstatfs(file.as_raw_fd(), &mut st) } != 0 {
        return None;
    }
    // f_type is a signed word; the magic numbers are 32-bit.
    let magic = (st.f_type as i64 as u64 & 0xffff_ffff) as u32;
    PSEUDO_FILESYSTEMS.iter().find(|(m, _)| *m == magic).map(|(_, name)| *name)
}

#[cfg(not(target_os = "linux"))]
fn pseudo_filesystem(_file: &File) -> Option<&'static str> {
    None
}

/// Whether a directory is acceptable to the caller, and whether the file
/// must be read through to learn that it holds no more than `stat` says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wanted {
    pub directory_ok: bool,
    /// Read the file through (64 KiB at a time, nothing kept): needed when
    /// the editor will read the file itself.
    pub read_through: bool,
}

/// Checks `path` for `usage` with the cap `cap` (see [`Wanted`]); off the
/// async workers, within [`READ_TIMEOUT`].
pub async fn check(path: &Path, cap: u64, wanted: Wanted) -> Result<CheckedPath, Refused> {
    let path = path.to_path_buf();
    blocking(move || check_blocking(&path, cap, wanted)).await
}

/// The bytes of the regular file `path`, at most `cap` of them (checked as
/// [`check`] does; `take(cap + 1)` while reading), within [`READ_TIMEOUT`].
pub async fn read(path: &Path, cap: u64) -> Result<Vec<u8>, Refused> {
    let path = path.to_path_buf();
    blocking(move || read_blocking(&path, cap)).await
}

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> Result<T, Refused> + Send + 'static) -> Result<T, Refused> {
    match tokio::time::timeout(READ_TIMEOUT, tokio::task::spawn_blocking(f)).await {
        Ok(Ok(result)) => result,
        Ok(Err(e)) => Err(Refused::Io(io::Error::other(format!("the reader task failed: {e}")))),
        Err(_) => Err(Refused::TimedOut),
    }
}

/// The checks, on an open descriptor: the kind by `stat` first (a socket
/// cannot be opened, a device is never opened), then opened without
/// blocking (a FIFO swapped in meanwhile does not block) and checked again
/// on the descriptor, with its file system.
fn open_checked(path: &Path, cap: u64, directory_ok: bool) -> Result<(File, CheckedPath), Refused> {
    let before = std::fs::metadata(path)?;
    refuse_kind(&before.file_type(), directory_ok)?;
    let file =
        OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC).open(path)?;
    let meta = file.metadata()?;
    refuse_kind(&meta.file_type(), directory_ok)?;
    if let Some(fs) = pseudo_filesystem(&file) {
        return Err(Refused::PseudoFs(fs));
    }
    let kind = if meta.is_dir() { Kind::Directory } else { Kind::File };
    if kind == Kind::File && meta.len() > cap {
        return Err(Refused::TooBig { size: meta.len(), cap });
    }
    Ok((file, CheckedPath { path: path.to_path_buf(), kind, meta, cap }))
}

fn refuse_kind(kind: &FileType, directory_ok: bool) -> Result<(), Refused> {
    if let Some(what) = special_kind(kind) {
        return Err(Refused::Kind(what));
    }
    if kind.is_dir() && !directory_ok {
        return Err(Refused::Kind("a directory"));
    }
    Ok(())
}

fn check_blocking(path: &Path, cap: u64, wanted: Wanted) -> Result<CheckedPath, Refused> {
    let (file, checked) = open_checked(path, cap, wanted.directory_ok)?;
    if checked.kind == Kind::File && wanted.read_through {
        read_within(file, checked.meta.len(), cap, None)?;
    }
    Ok(checked)
}

fn read_blocking(path: &Path, cap: u64) -> Result<Vec<u8>, Refused> {
    let (file, checked) = open_checked(path, cap, false)?;
    let size = checked.meta.len();
    let mut bytes = Vec::with_capacity(size.min(cap) as usize + 1);
    read_within(file, size, cap, Some(&mut bytes))?;
    Ok(bytes)
}

/// Reads `from` to its end, at most `cap + 1` bytes (into `keep`, or 64 KiB
/// at a time into nothing), and refuses it when it gave more than `cap`
/// bytes or more than `size`, what `stat` said it holds.
fn read_within(from: impl Read, size: u64, cap: u64, keep: Option<&mut Vec<u8>>) -> Result<(), Refused> {
    let mut limited = from.take(cap.saturating_add(1));
    let read = match keep {
        Some(bytes) => limited.read_to_end(bytes)? as u64,
        None => {
            let mut scratch = vec![0u8; SCRATCH_BYTES];
            let mut total = 0u64;
            loop {
                match limited.read(&mut scratch) {
                    Ok(0) => break total,
                    Ok(n) => total += n as u64,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e.into()),
                }
            }
        }
    };
    if read > cap {
        return Err(Refused::TooBig { size: read, cap });
    }
    if read > size {
        return Err(Refused::LongerThanStat { size });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::TempDir;

    const ANY: Wanted = Wanted { directory_ok: false, read_through: true };

    #[tokio::test]
    async fn a_regular_file_within_the_cap_is_read_and_one_byte_more_is_refused() {
        let dir = TempDir::new("checked-cap");
        let file = dir.0.join("f");
        std::fs::write(&file, b"12345").unwrap();
        assert_eq!(read(&file, 5).await.unwrap(), b"12345");
        let too_big = read(&file, 4).await.unwrap_err();
        assert!(matches!(too_big, Refused::TooBig { size: 5, cap: 4 }), "{too_big:?}");
        assert!(too_big.message(&file, Use::ReadOrEdit).contains("edits.max_file_bytes"));
        assert!(check(&file, 5, ANY).await.is_ok());
        assert!(matches!(check(&file, 4, ANY).await, Err(Refused::TooBig { .. })));
    }

    #[tokio::test]
    async fn procfs_files_fifos_devices_and_directories_are_refused_without_reading_them() {
        let dir = TempDir::new("checked-kinds");
        for path in ["/proc/self/pagemap", "/proc/self/status", "/sys/kernel/mm/transparent_hugepage/enabled"] {
            let path = Path::new(path);
            if !path.exists() {
                continue;
            }
            let started = std::time::Instant::now();
            let refused = read(path, 1 << 30).await.unwrap_err();
            assert!(matches!(refused, Refused::PseudoFs(_)), "{path:?}: {refused:?}");
            assert!(started.elapsed() < Duration::from_secs(1), "read {path:?} through");
            let message = refused.message(path, Use::Open);
            assert!(message.starts_with("cannot open") && message.contains("fs, whose files"), "{message}");
        }
        let fifo = dir.0.join("pipe");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let refused = check(&fifo, 100, ANY).await.unwrap_err();
        assert!(refused.message(&fifo, Use::ReadOrEdit).contains("FIFO"), "{refused:?}");
        assert!(matches!(read(Path::new("/dev/zero"), 100).await, Err(Refused::Kind("a character device"))));
        assert!(matches!(read(&dir.0, 100).await, Err(Refused::Kind("a directory"))));
        let opened = check(&dir.0, 100, Wanted { directory_ok: true, read_through: true }).await.unwrap();
        assert_eq!(opened.kind(), Kind::Directory);
        assert!(read(&dir.0.join("missing"), 100).await.unwrap_err().is_not_found());
    }

    #[test]
    fn a_file_that_reads_longer_than_its_size_is_refused_and_reading_stops_past_the_cap() {
        // What a kernel file on a file system not listed above would do.
        let mut kept = Vec::new();
        let refused = read_within(std::io::repeat(b'x'), 0, 1000, Some(&mut kept)).unwrap_err();
        assert!(matches!(refused, Refused::TooBig { size: 1001, cap: 1000 }), "{refused:?}");
        assert_eq!(kept.len(), 1001, "read no further than the cap + 1");
        let refused = read_within(std::io::repeat(b'x'), 0, 200_000, None).unwrap_err();
        assert!(matches!(refused, Refused::TooBig { size: 200_001, .. }), "{refused:?}");
        let refused = read_within(&b"12345"[..], 3, 10, None).unwrap_err();
        assert!(matches!(refused, Refused::LongerThanStat { size: 3 }), "{refused:?}");
        let message = refused.message(Path::new("/x"), Use::Open);
        assert!(message.contains("more bytes when read than its size (3 bytes)"), "{message}");
        assert!(read_within(&b"12345"[..], 5, 5, None).is_ok());
    }

    #[tokio::test]
    async fn the_main_thread_recheck_notices_a_swapped_file() {
        let dir = TempDir::new("checked-swap");
        let file = dir.0.join("f");
        std::fs::write(&file, b"small").unwrap();
        let checked = check(&file, 10, ANY).await.unwrap();
        assert!(checked.still_same().is_ok());
        std::fs::remove_file(&file).unwrap();
        std::os::unix::fs::symlink("/proc/self/pagemap", &file).unwrap();
        let swapped = checked.still_same().unwrap_err();
        assert!(matches!(swapped, NotSame::Swapped { .. }), "{swapped:?}");
        assert!(swapped.to_string().ends_with("changed while it was being opened; nothing was opened: try again"));
        std::fs::remove_file(&file).unwrap();
        std::fs::write(&file, b"small").unwrap();
        let checked = check(&file, 10, ANY).await.unwrap();
        std::fs::write(&file, b"now too big").unwrap();
        assert!(checked.still_same().is_err(), "grew past the cap");
    }
}
