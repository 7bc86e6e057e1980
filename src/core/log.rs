//! The plugin's log file, written by a background thread.
//!
//! Logging must never block the editor or write to stdout (in the TUI, stdout
//! is the UI's RPC channel), so callers only push a line onto a channel; one
//! thread appends it to the file. Lines below the configured level are dropped
//! before any formatting cost is paid by the writer.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{mpsc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::sync::LockExt;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub enum Level {
    Trace = 0,
    Debug = 1,
    Info = 2,
    Warn = 3,
    Error = 4,
}

impl Level {
    pub fn parse(name: &str) -> Option<Level> {
        Some(match name.to_ascii_lowercase().as_str() {
            "trace" => Level::Trace,
            "debug" => Level::Debug,
            "info" => Level::Info,
            "warn" | "warning" => Level::Warn,
            "error" => Level::Error,
            _ => return None,
        })
    }
    fn name(self) -> &'static str {
        match self {
            Level::Trace => "TRACE",
            Level::Debug => "DEBUG",
            Level::Info => "INFO",
            Level::Warn => "WARN",
            Level::Error => "ERROR",
        }
    }
}

/// Default cap of the log file; past it the file becomes `<file>.1`
/// (replacing the previous one) and a new file is started.
pub const DEFAULT_MAX_BYTES: u64 = 10 * 1024 * 1024;
/// Longest message written; the rest is cut (a line is never a flood).
const MAX_MESSAGE_CHARS: usize = 4096;
/// Lines waiting for the writer thread; past it lines are dropped (and
/// counted) rather than queued without bound. Counted in [`QUEUED`] over
/// an unbounded channel rather than by a `sync_channel`, which allocates
/// all 10,000 slots up front: ~0.2 ms of page faults on Neovim's main
/// thread when the server starts.
const QUEUE_LINES: usize = 10_000;
static QUEUED: Backlog = Backlog::new(QUEUE_LINES);

/// Lines sent to the writer and not yet taken, bounded.
struct Backlog {
    lines: AtomicUsize,
    limit: usize,
}

impl Backlog {
    const fn new(limit: usize) -> Self {
        Self { lines: AtomicUsize::new(0), limit }
    }

    /// Whether one more line may be queued (then it counts until `taken`).
    fn admit(&self) -> bool {
        if self.lines.fetch_add(1, Ordering::Relaxed) >= self.limit {
            self.lines.fetch_sub(1, Ordering::Relaxed);
            return false;
        }
        true
    }

    /// A line admitted was taken off the queue (or never reached it).
    fn taken(&self) {
        self.lines.fetch_sub(1, Ordering::Relaxed);
    }
}

static MIN_LEVEL: AtomicU8 = AtomicU8::new(Level::Info as u8);
static MAX_BYTES: AtomicU64 = AtomicU64::new(DEFAULT_MAX_BYTES);
static DROPPED: AtomicU64 = AtomicU64::new(0);
static SINK: Mutex<Option<mpsc::Sender<String>>> = Mutex::new(None);
static PATH: Mutex<Option<PathBuf>> = Mutex::new(None);

/// Sets the size cap of the log file (bytes; at least 4 KiB).
pub fn set_max_bytes(max: u64) {
    MAX_BYTES.store(max.max(4096), Ordering::Relaxed);
}

/// Points the log at `path` (appending) and sets the level. Idempotent: a new
/// path replaces the old writer thread, which ends when its channel closes.
pub fn init(path: PathBuf, level: Level) {
    if let Some(job) = point_at(path, level) {
        hand_over(job);
    }
}

/// [`init`] whose writer is woken later, by [`wake_writer`]: the lines
/// meanwhile wait in its channel. Waking a thread costs the caller
/// 10-40 µs on a virtual machine; the server's start on Neovim's main
/// thread leaves it to a thread of the runtime.
pub fn init_deferred(path: PathBuf, level: Level) {
    if let Some(job) = point_at(path, level) {
        *WAITING.locked() = Some(job);
    }
}

/// Gives the writer its job if [`init_deferred`] left one (else nothing).
pub fn wake_writer() {
    let job = WAITING.locked().take();
    if let Some(job) = job {
        hand_over(job);
    }
}

/// The level, and for a new path the channel lines go to from now on
/// and the writer's job (None: the same file, its writer kept).
fn point_at(path: PathBuf, level: Level) -> Option<WriterJob> {
    MIN_LEVEL.store(level as u8, Ordering::Relaxed);
    switch_to(path)
}

/// For a new path: its directory made, the channel lines go to from now
/// on, and the writer's job. None for the current path.
///
/// The directory is made here, on the caller's thread (Neovim's main
/// thread in the plugin), not by the writer: Neovim makes the same
/// directory (`stdpath("state")`, for swap files) on its main thread, and
/// its `mkdir -p` raced by another thread fails with E303 "file already
/// exists". A stat when it is there.
fn switch_to(path: PathBuf) -> Option<WriterJob> {
    {
        let mut current = PATH.locked();
        if current.as_ref() == Some(&path) {
            return None; // same file: keep the writer
        }
        *current = Some(path.clone());
    }
    if let Some(dir) = path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    let (tx, rx) = mpsc::channel::<String>();
    *SINK.locked() = Some(tx);
    Some((path, rx))
}

/// Starts writing `job`: on the spare writer made by `prepare`, if any;
/// else on a new thread. When no thread can be made, lines are dropped.
fn hand_over(job: WriterJob) {
    let spare = SPARE.locked().take();
    let job = match spare {
        Some(spare) => spare.send(job).err().map(|mpsc::SendError(job)| job),
        None => Some(job),
    };
    if let Some((path, rx)) = job {
        if !spawn_writer(move || write_lines(path, rx)) {
            *SINK.locked() = None;
        }
    }
}

/// A writer's job [`init_deferred`] left for [`wake_writer`].
static WAITING: Mutex<Option<WriterJob>> = Mutex::new(None);

/// A writer thread's work: a file, and the lines to append to it.
type WriterJob = (PathBuf, mpsc::Receiver<String>);

/// The writer thread `prepare` made, waiting for its job.
static SPARE: Mutex<Option<mpsc::Sender<WriterJob>>> = Mutex::new(None);

/// Makes the writer thread ahead of [`init`], idle until `init` gives it
/// its file: spawning a thread is ~40 µs of the caller's, and `init` runs
/// on Neovim's main thread when the server starts, while this runs on the
/// thread that maps the library during start-up (`nvim::runtime`).
pub fn prepare() {
    let mut spare = SPARE.locked();
    if spare.is_some() {
        return;
    }
    let (tx, rx) = mpsc::channel::<WriterJob>();
    if spawn_writer(move || {
        if let Ok((path, lines)) = rx.recv() {
            write_lines(path, lines);
        }
    }) {
        *spare = Some(tx);
    }
}

fn spawn_writer(work: impl FnOnce() + Send + 'static) -> bool {
    std::thread::Builder::new().name("amp-log".into()).spawn(work).is_ok()
}

/// Appends each line received to the file at `path` until the channel closes.
/// (Its directory was made by [`point_at`].)
fn write_lines(path: PathBuf, rx: mpsc::Receiver<String>) {
    let Some(mut file) = RotatingFile::open(path) else { return };
    while let Ok(line) = rx.recv() {
        QUEUED.taken();
        let dropped = DROPPED.swap(0, Ordering::Relaxed);
        if dropped > 0 {
            file.write(&stamp(
                Level::Warn,
                &format!("log: {dropped} lines dropped (written faster than the disk took them)"),
            ));
        }
        file.write(&line);
    }
}

/// The log file and its size; rotated to `<file>.1` when a line would take
/// it past [`MAX_BYTES`].
struct RotatingFile {
    path: PathBuf,
    file: File,
    size: u64,
}

impl RotatingFile {
    fn open(path: PathBuf) -> Option<Self> {
        let file = OpenOptions::new().create(true).append(true).open(&path).ok()?;
        let size = file.metadata().map(|m| m.len()).unwrap_or(0);
        Some(Self { path, file, size })
    }

    fn write(&mut self, line: &str) {
        let max = MAX_BYTES.load(Ordering::Relaxed);
        if self.size > 0 && self.size + line.len() as u64 > max {
            self.rotate();
        }
        if self.file.write_all(line.as_bytes()).is_ok() {
            self.size += line.len() as u64;
        }
    }

    /// `<file>` becomes `<file>.1` (one old file is kept) and a new
    /// `<file>` is started. On failure the file is emptied instead, so the
    /// cap holds either way.
    fn rotate(&mut self) {
        let old = rotated_path(&self.path);
        let fresh = std::fs::rename(&self.path, &old)
            .ok()
            .and_then(|_| OpenOptions::new().create(true).append(true).open(&self.path).ok());
        match fresh {
            Some(file) => self.file = file,
            None => {
                let _ = self.file.set_len(0);
            }
        }
        self.size = 0;
    }
}

/// Where the previous log file is kept: `<file>.1`.
pub fn rotated_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".1");
    PathBuf::from(name)
}

pub fn enabled(level: Level) -> bool {
    level as u8 >= MIN_LEVEL.load(Ordering::Relaxed)
}

fn stamp(level: Level, message: &str) -> String {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    format!("{} {:5} {}\n", local_time(now), level.name(), escape(message, MAX_MESSAGE_CHARS))
}

/// `2026-11-23 09:52:19.123` in local time (what `:Amp log` shows a person);
/// the seconds since the epoch when the C library cannot say.
fn local_time(since_epoch: Duration) -> String {
    let secs = since_epoch.as_secs() as libc::time_t;
    // SAFETY: localtime_r only writes the struct we own.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    if unsafe { libc::localtime_r(&secs, &mut tm) }.is_null() {
        return format!("{}.{:03}", since_epoch.as_secs(), since_epoch.subsec_millis());
    }
    format!(
        "{:04}-{:02}-{:02} {:02}:{:02}:{:02}.{:03}",
        tm.tm_year + 1900,
        tm.tm_mon + 1,
        tm.tm_mday,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec,
        since_epoch.subsec_millis()
    )
}

pub fn write(level: Level, message: impl AsRef<str>) {
    if !enabled(level) {
        return;
    }
    let line = stamp(level, message.as_ref());
    if let Some(tx) = SINK.locked().as_ref() {
        if !QUEUED.admit() {
            DROPPED.fetch_add(1, Ordering::Relaxed);
        } else if tx.send(line).is_err() {
            QUEUED.taken(); // the writer is gone
        }
    }
}

/// `text` fit for one log line: control characters (newlines, escape
/// sequences, ...) escaped, `\` doubled, and cut after `max_chars`
/// characters with a note of the original length. For whatever a peer sent
/// (headers, URIs, error texts): it can neither forge log lines nor fill
/// the disk with one of them.
pub fn escape(text: &str, max_chars: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max_chars + 32));
    for (chars, c) in text.chars().enumerate() {
        if chars == max_chars {
            out.push_str(&format!("... ({} bytes in all)", text.len()));
            return out;
        }
        match c {
            '\\' => out.push_str("\\\\"),
            c if c.is_control() || c == '\u{2028}' || c == '\u{2029}' => out.extend(c.escape_default()),
            c => out.push(c),
        }
    }
    out
}

/// [`escape`] with the cap for a single value a peer chose (200 characters).
pub fn untrusted(text: &str) -> String {
    escape(text, 200)
}

/// How many lines of one kind are written per window before the rest are
/// only counted.
const BURST: u32 = 10;
const WINDOW: Duration = Duration::from_secs(10);

struct Burst {
    started: Instant,
    written: u32,
    suppressed: u64,
}

static BURSTS: Mutex<Option<HashMap<&'static str, Burst>>> = Mutex::new(None);

/// Logs `message` unless more than [`BURST`] lines of this `kind` were
/// logged in the last [`WINDOW`]: a flood of refused connections writes a
/// few lines and then one line saying how many were left out.
pub fn limited(kind: &'static str, level: Level, message: impl AsRef<str>) {
    if !enabled(level) {
        return;
    }
    let note = {
        let mut bursts = BURSTS.locked();
        let burst = bursts.get_or_insert_with(HashMap::new).entry(kind).or_insert_with(|| Burst {
            started: Instant::now(),
            written: 0,
            suppressed: 0,
        });
        let mut note = None;
        if burst.started.elapsed() >= WINDOW {
            if burst.suppressed > 0 {
                note = Some(burst.suppressed);
            }
            *burst = Burst { started: Instant::now(), written: 0, suppressed: 0 };
        }
        if burst.written >= BURST {
            burst.suppressed += 1;
            return;
        }
        burst.written += 1;
        note
    };
    if let Some(n) = note {
        write(level, format!("{n} more '{kind}' messages were not logged (at most {BURST} per {}s)", WINDOW.as_secs()));
    }
    let message = message.as_ref();
    write(level, message);
}

pub fn error(message: impl AsRef<str>) {
    write(Level::Error, message)
}
pub fn warn(message: impl AsRef<str>) {
    write(Level::Warn, message)
}
pub fn info(message: impl AsRef<str>) {
    write(Level::Info, message)
}
pub fn debug(message: impl AsRef<str>) {
    write(Level::Debug, message)
}

/// `log::debug(format!(...))` that formats only when the debug level is on:
/// the per-message lines (an agent's every request, every selection sent)
/// cost nothing at the default level.
#[macro_export]
macro_rules! log_debug {
    ($($arg:tt)*) => {
        if $crate::core::log::enabled($crate::core::log::Level::Debug) {
            $crate::core::log::debug(format!($($arg)*))
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Held by the tests that point the process's log somewhere or set its
    /// level: they would see each other's lines and levels otherwise.
    static GLOBAL_LOG: Mutex<()> = Mutex::new(());

    #[test]
    fn a_new_log_path_has_its_directory_made_by_the_caller_not_the_writer() {
        let _global = GLOBAL_LOG.locked();
        let tmp = std::env::temp_dir().join(format!("amp-log-dir-{}", std::process::id()));
        let path = tmp.join("a").join("b").join("amp.log");
        let job = switch_to(path.clone());
        // No writer was given the job: the directory is the caller's work.
        assert!(path.parent().is_some_and(Path::is_dir), "made before switch_to returned");
        assert!(job.is_some_and(|(p, _)| p == path));
        assert!(switch_to(path).is_none(), "the current path again keeps its writer");
        *PATH.locked() = None;
        *SINK.locked() = None;
        let _ = std::fs::remove_dir_all(tmp);
    }

    #[test]
    fn the_backlog_admits_its_limit_and_refuses_one_past_until_a_line_is_taken() {
        let backlog = Backlog::new(QUEUE_LINES);
        assert!((0..QUEUE_LINES).all(|_| backlog.admit()), "up to the limit");
        assert!(!backlog.admit(), "one past the limit");
        assert!(!backlog.admit(), "a refused line does not count");
        backlog.taken();
        assert!(backlog.admit(), "room again once the writer took one");
        assert!(!backlog.admit());
    }

    #[test]
    fn log_debug_formats_only_at_the_debug_level() {
        let _global = GLOBAL_LOG.locked();
        struct Counted<'a>(&'a std::cell::Cell<u32>);
        impl std::fmt::Display for Counted<'_> {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                self.0.set(self.0.get() + 1);
                f.write_str("x")
            }
        }
        let formatted = std::cell::Cell::new(0);
        let before = MIN_LEVEL.load(Ordering::Relaxed);
        MIN_LEVEL.store(Level::Info as u8, Ordering::Relaxed);
        crate::log_debug!("{}", Counted(&formatted));
        assert_eq!(formatted.get(), 0);
        MIN_LEVEL.store(Level::Debug as u8, Ordering::Relaxed);
        crate::log_debug!("{}", Counted(&formatted));
        assert_eq!(formatted.get(), 1);
        MIN_LEVEL.store(before, Ordering::Relaxed);
    }

    #[test]
    fn escape_cuts_and_escapes_control_characters() {
        assert_eq!(escape("a\nb\r\u{1b}[31mc\\", 100), "a\\nb\\r\\u{1b}[31mc\\\\");
        let long = "x".repeat(1000);
        let cut = untrusted(&long);
        assert!(cut.starts_with(&"x".repeat(200)), "{cut}");
        assert!(cut.ends_with("... (1000 bytes in all)"), "{cut}");
        assert!(cut.len() < 230);
        assert_eq!(untrusted("é✓"), "é✓");
    }

    #[test]
    fn the_spare_writer_takes_the_first_file_a_new_thread_the_next_and_a_deferred_one_waits() {
        let _global = GLOBAL_LOG.locked();
        let t = crate::testutil::TempDir::new("logspare");
        let read = |path: &Path, text: &str| {
            let deadline = Instant::now() + Duration::from_secs(5);
            while Instant::now() < deadline {
                if std::fs::read_to_string(path).is_ok_and(|s| s.contains(text)) {
                    return true;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            false
        };
        prepare();
        assert!(SPARE.locked().is_some(), "prepare made a writer");
        let first = t.0.join("first.log");
        init(first.clone(), Level::Info);
        assert!(SPARE.locked().is_none(), "init took the spare writer");
        info("line for the spare writer");
        assert!(read(&first, "line for the spare writer"));
        let second = t.0.join("second.log");
        init(second.clone(), Level::Info);
        info("line for a new writer");
        assert!(read(&second, "line for a new writer"));
        assert!(!std::fs::read_to_string(&first).unwrap().contains("line for a new writer"));
        // A deferred writer: lines wait in its channel until it is woken.
        let third = t.0.join("third.log");
        init_deferred(third.clone(), Level::Info);
        info("line before the wake");
        std::thread::sleep(Duration::from_millis(50));
        assert!(!third.exists(), "no writer before wake_writer");
        wake_writer();
        info("line after the wake");
        assert!(read(&third, "line before the wake") && read(&third, "line after the wake"));
        assert!(WAITING.locked().is_none());
        *PATH.locked() = None;
        *SINK.locked() = None;
    }

    #[test]
    fn rotating_file_keeps_one_old_file_under_the_cap() {
        let t = crate::testutil::TempDir::new("logrot");
        let path = t.0.join("amp.log");
        set_max_bytes(4096);
        let mut f = RotatingFile::open(path.clone()).unwrap();
        let line = format!("{}\n", "y".repeat(99));
        for _ in 0..200 {
            f.write(&line);
        }
        let size = std::fs::metadata(&path).unwrap().len();
        let old = std::fs::metadata(rotated_path(&path)).unwrap().len();
        assert!(size <= 4096 && old <= 4096, "{size} {old}");
        assert!(!t.0.join("amp.log.2").exists());
        set_max_bytes(DEFAULT_MAX_BYTES);
    }
}
