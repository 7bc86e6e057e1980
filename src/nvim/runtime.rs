//! The plugin's one tokio runtime, shared by the Amp server and the OpenCtx
//! service. Made on first use and kept for the life of the process: each
//! service owns its tasks through a cancellation token and a task tracker,
//! so stopping one ends exactly its tasks (no runtime to tear down, no
//! polling), and a restart reuses the threads.

use std::sync::OnceLock;

use tokio::runtime::{Handle, Runtime};

static RUNTIME: OnceLock<Runtime> = OnceLock::new();

/// Worker threads: the server's connections and the OpenCtx providers
/// wait on I/O most of the time; two keep one free while the other parses
/// a large frame.
const WORKERS: usize = 2;
/// Threads for blocking file I/O (reads, temp files, fsync).
const MAX_BLOCKING: usize = 8;

/// The runtime's handle, the runtime made if it is not yet.
pub fn handle() -> Result<Handle, String> {
    if let Some(rt) = RUNTIME.get() {
        return Ok(rt.handle().clone());
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(WORKERS)
        .max_blocking_threads(MAX_BLOCKING)
        .thread_name("amp-tokio")
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the tokio runtime: {e}"))?;
    // Another thread cannot have made one meanwhile: this runs on the main thread.
    Ok(RUNTIME.get_or_init(|| rt).handle().clone())
}
