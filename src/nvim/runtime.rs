//! The plugin's one tokio runtime, shared by the Amp server and the OpenCtx
//! service. Made on first use and kept for the life of the process: each
//! service owns its tasks through a cancellation token and a task tracker,
//! so stopping one ends exactly its tasks (no runtime to tear down, no
//! polling), and a restart reuses the threads.

use std::sync::OnceLock;

use tokio::runtime::{Handle, Runtime};

static RUNTIME: OnceLock<Result<Runtime, String>> = OnceLock::new();

/// Worker threads: the server's connections and the OpenCtx providers
/// wait on I/O most of the time; two keep one free while the other parses
/// a large frame.
const WORKERS: usize = 2;
/// Threads for blocking file I/O (reads, temp files, fsync).
const MAX_BLOCKING: usize = 8;

/// The runtime's handle, the runtime made if it is not yet. Any thread:
/// [`prewarm`] makes it on the thread that maps the library while Neovim
/// starts, so that the server's start on the main thread finds it; a
/// caller that comes while it is being made waits for it.
pub fn handle() -> Result<Handle, String> {
    let made = RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(WORKERS)
            .max_blocking_threads(MAX_BLOCKING)
            .thread_name("amp-tokio")
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the tokio runtime: {e}"))
    });
    made.as_ref().map(|rt| rt.handle().clone()).map_err(Clone::clone)
}

/// Makes the runtime (its threads, its I/O driver) and the log's writer
/// thread off Neovim's main thread: `lua/amp/init.lua` calls it through
/// LuaJIT's FFI on the thread that maps the library during start-up, after
/// faulting the library's pages in there (`prefault`). No Neovim API is touched, and no file or
/// directory is made. Errors are kept for [`handle`] to report.
#[no_mangle]
pub extern "C" fn amp_core_prewarm() {
    let _ = std::panic::catch_unwind(|| {
        super::prefault::library_pages();
        crate::core::log::prepare();
        handle()
    });
}
