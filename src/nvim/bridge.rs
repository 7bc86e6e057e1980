//! The only door between the tokio threads and Neovim's main thread.
//!
//! Neovim's API may only be called on the main thread, and nvim-oxi keeps the
//! Lua state in a thread-local, so tokio tasks never touch the editor: they
//! hand a closure to [`on_main`] and await its answer. Jobs travel over a std
//! channel; one libuv async handle wakes the main loop. libuv coalesces wake-ups,
//! so the callback drains the channel with `try_recv`, and it runs the jobs
//! from a `vim.schedule` callback rather than inside the uv callback, where
//! textlock and other restrictions apply. That callback is one Lua function
//! made once (nvim-oxi's `schedule` boxes a new closure per call and never
//! frees it).
//!
//! The door has a gate, shared by its users (the Amp server and the OpenCtx
//! service each [`open`] and [`close`] it once). When the last user closes
//! it, and always at [`shutdown`] (`VimLeavePre`), it shuts under a write
//! lock, so no thread can call `AsyncHandle::send` afterwards (a send after
//! Neovim closed its loop is a use-after-free), and queued jobs are dropped
//! so a later session never runs a stale one.

use std::cell::{Cell, RefCell};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{mpsc, OnceLock, RwLock};

use nvim_oxi::libuv::AsyncHandle;

use crate::core::log;
use crate::core::sync::RwLockExt;

type Job = Box<dyn FnOnce() + Send + 'static>;

/// Jobs run for at most about this long per main-loop turn (a job that
/// started is never cut short), so a flood of requests cannot freeze the UI:
/// the rest run on a later turn, after Neovim has looked at its input.
/// A count would not do: 64 jobs of 2 ms each are a 128 ms freeze.
pub const TURN_BUDGET: std::time::Duration = std::time::Duration::from_millis(4);

/// Why a job did not run or did not answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BridgeError {
    /// The server is stopping or Neovim is exiting.
    #[error("the editor is shutting down")]
    Closed,
    /// The job panicked on the main thread (the panic is logged).
    #[error("the editor failed to run the request (see :Amp log)")]
    Failed,
}

struct Door {
    jobs: mpsc::Sender<Job>,
    wake: AsyncHandle,
}

/// `Some` while the gate is open. Created once per process: nvim-oxi 0.6 cannot
/// close a uv handle, so one handle serves every start/stop cycle.
static GATE: RwLock<Option<&'static Door>> = RwLock::new(None);
/// How many users have the gate open (main thread only).
static USERS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
static DOOR: OnceLock<Door> = OnceLock::new();

thread_local! {
    /// `vim.schedule` and the drain function handed to it, made once.
    static SCHEDULER: RefCell<Option<(mlua::Function, mlua::Function)>> = const { RefCell::new(None) };
    /// The receiving end lives on the main thread only.
    static INBOX: RefCell<Option<mpsc::Receiver<Job>>> = const { RefCell::new(None) };
    /// A drain is already scheduled for this main-loop turn.
    static DRAIN_SCHEDULED: Cell<bool> = const { Cell::new(false) };
}

/// Opens the gate. Main thread only (creates the uv handle on first use).
pub fn open() -> Result<(), String> {
    if SCHEDULER.with(|s| s.borrow().is_none()) {
        let lua = crate::nvim::lua::lua().map_err(|e| format!("no Lua state: {e}"))?;
        let make = || -> mlua::Result<(mlua::Function, mlua::Function)> {
            let schedule: mlua::Function = lua.globals().get::<mlua::Table>("vim")?.get("schedule")?;
            let drain_fn = lua.create_function(|_, _: mlua::MultiValue| {
                DRAIN_SCHEDULED.with(|s| s.set(false));
                drain();
                Ok(())
            })?;
            Ok((schedule, drain_fn))
        };
        let pair = make().map_err(|e| format!("cannot set up vim.schedule: {e}"))?;
        SCHEDULER.with(|s| *s.borrow_mut() = Some(pair));
    }
    let door = match DOOR.get() {
        Some(door) => door,
        None => {
            let (tx, rx) = mpsc::channel::<Job>();
            INBOX.with(|inbox| *inbox.borrow_mut() = Some(rx));
            let wake =
                AsyncHandle::new(schedule_drain).map_err(|e| format!("cannot create the libuv async handle: {e}"))?;
            DOOR.get_or_init(|| Door { jobs: tx, wake })
        }
    };
    *GATE.write_locked() = Some(door);
    USERS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    Ok(())
}

/// One user is done with the gate; the last one closes it. Main thread only.
pub fn close() {
    let before = USERS
        .fetch_update(std::sync::atomic::Ordering::Relaxed, std::sync::atomic::Ordering::Relaxed, |n| n.checked_sub(1))
        .unwrap_or(0);
    if before <= 1 {
        shutdown();
    }
}

/// Closes the gate for everyone and drops every queued job (Neovim is
/// exiting). Main thread only; idempotent.
pub fn shutdown() {
    USERS.store(0, std::sync::atomic::Ordering::Relaxed);
    *GATE.write_locked() = None;
    INBOX.with(|inbox| {
        if let Some(rx) = inbox.borrow().as_ref() {
            while rx.try_recv().is_ok() {}
        }
    });
}

/// Queues `job` for the main thread without waiting for it.
pub fn post(job: impl FnOnce() + Send + 'static) -> Result<(), BridgeError> {
    let gate = GATE.read_locked();
    let door = gate.ok_or(BridgeError::Closed)?;
    door.jobs.send(Box::new(job)).map_err(|_| BridgeError::Closed)?;
    // Sent while holding the read lock: `close` cannot complete in between.
    door.wake.send().map_err(|_| BridgeError::Closed)
}

/// Runs `f` on the main thread and returns its result.
pub async fn on_main<T, F>(f: F) -> Result<T, BridgeError>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let (tx, rx) = tokio::sync::oneshot::channel();
    post(move || {
        let _ = tx.send(f());
    })?;
    // A dropped sender means the job panicked or was discarded by `close`.
    rx.await.map_err(|_| BridgeError::Failed)
}

/// The uv callback: schedules one drain per main-loop turn.
fn schedule_drain() {
    if DRAIN_SCHEDULED.with(|s| s.replace(true)) {
        return;
    }
    let scheduled = SCHEDULER.with(|s| match s.borrow().as_ref() {
        Some((schedule, drain_fn)) => schedule.call::<()>(drain_fn.clone()).is_ok(),
        None => false,
    });
    if !scheduled {
        DRAIN_SCHEDULED.with(|s| s.set(false));
        log::error("cannot schedule main-thread work");
    }
}

fn drain() {
    let started = std::time::Instant::now();
    loop {
        let job = INBOX.with(|inbox| inbox.borrow().as_ref().and_then(|rx| rx.try_recv().ok()));
        let Some(job) = job else { return };
        if let Err(panic) = catch_unwind(AssertUnwindSafe(job)) {
            log::error(format!("main-thread job panicked: {}", panic_message(&panic)));
        }
        if started.elapsed() >= TURN_BUDGET {
            // Leave the rest for a later turn so typing stays responsive. The
            // wake-up goes through libuv, not straight to vim.schedule: a
            // callback scheduled from a scheduled callback can run in the
            // same round of event processing, before any key is read; the
            // async handle fires only when Neovim next polls its loop, which
            // is also when it reads input.
            rearm();
            return;
        }
    }
}

/// Wakes the main loop again for the jobs left in the queue (main thread).
fn rearm() {
    // Closed (None): the queue was emptied and nothing new can come in.
    let gate = GATE.read_locked();
    if let Some(door) = *gate {
        if door.wake.send().is_err() {
            drop(gate);
            schedule_drain();
        }
    }
}

/// The text of a caught panic, for the log.
pub fn panic_message(panic: &Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic".to_string()
    }
}
