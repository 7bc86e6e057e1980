//! The plugin's log file, written by a background thread.
//!
//! Logging must never block the editor or write to stdout (in the TUI, stdout
//! is the UI's RPC channel), so callers only push a line onto a channel; one
//! thread appends it to the file. Lines below the configured level are dropped
//! before any formatting cost is paid by the writer.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{mpsc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

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

static MIN_LEVEL: AtomicU8 = AtomicU8::new(Level::Info as u8);
static SINK: Mutex<Option<mpsc::Sender<String>>> = Mutex::new(None);
static PATH: Mutex<Option<PathBuf>> = Mutex::new(None);

/// Points the log at `path` (appending) and sets the level. Idempotent: a new
/// path replaces the old writer thread, which ends when its channel closes.
pub fn init(path: PathBuf, level: Level) {
    MIN_LEVEL.store(level as u8, Ordering::Relaxed);
    {
        let mut current = PATH.lock().unwrap_or_else(|p| p.into_inner());
        if current.as_ref() == Some(&path) {
            return; // same file: keep the writer
        }
        *current = Some(path.clone());
    }
    let (tx, rx) = mpsc::channel::<String>();
    let spawned = std::thread::Builder::new().name("amp-log".into()).spawn(move || {
        if let Some(dir) = path.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let Ok(mut file) = OpenOptions::new().create(true).append(true).open(&path) else { return };
        while let Ok(line) = rx.recv() {
            let _ = file.write_all(line.as_bytes());
        }
    });
    if spawned.is_ok() {
        *SINK.lock().unwrap_or_else(|p| p.into_inner()) = Some(tx);
    }
}

pub fn enabled(level: Level) -> bool {
    level as u8 >= MIN_LEVEL.load(Ordering::Relaxed)
}

pub fn write(level: Level, message: impl AsRef<str>) {
    if !enabled(level) {
        return;
    }
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    let line = format!("{}.{:03} {:5} {}\n", now.as_secs(), now.subsec_millis(), level.name(), message.as_ref());
    if let Some(tx) = SINK.lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
        let _ = tx.send(line);
    }
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
