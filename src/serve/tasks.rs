//! The lifetime of one running session's tasks: every listener, connection,
//! pusher and request of every front-end is spawned here, and one stop ends
//! them all, bounded in time so Neovim's exit never hangs.

use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::core::sync::LockExt;

#[derive(Debug, Default)]
pub struct Tasks {
    /// Cancelled when the session stops: connections send their close
    /// frames and end, accept loops return.
    pub closing: CancellationToken,
    /// Cancelled once connections had their moment to close: every task
    /// still running is dropped.
    stopped: CancellationToken,
    tracker: TaskTracker,
    /// Tasks [`Tasks::spawn_detached`] keeps while the session starts
    /// ([`Tasks::hold`]), spawned together by [`Tasks::release`].
    held: Mutex<Option<Held>>,
}

/// Tasks waiting for [`Tasks::release`].
#[derive(Default)]
struct Held(Vec<Pin<Box<dyn Future<Output = ()> + Send>>>);

impl std::fmt::Debug for Held {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} held tasks", self.0.len())
    }
}

impl Tasks {
    /// Runs `task` until it ends or the session stops ([`Tasks::stop`]
    /// waits for it a moment, then drops it).
    pub fn spawn<F>(&self, task: F) -> tokio::task::JoinHandle<Option<F::Output>>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.tracker.spawn(self.stopped.clone().run_until_cancelled_owned(task))
    }

    /// [`Tasks::spawn`] for a task nobody joins; between [`Tasks::hold`]
    /// and [`Tasks::release`] it is kept and spawned with the others.
    pub fn spawn_detached<F>(&self, task: F)
    where
        F: Future + Send + 'static,
    {
        let mut held = self.held.locked();
        match held.as_mut() {
            Some(held) => {
                let stopped = self.stopped.clone();
                held.0.push(Box::pin(async move {
                    stopped.run_until_cancelled_owned(task).await;
                }));
            }
            None => {
                drop(held);
                self.tracker.spawn(self.stopped.clone().run_until_cancelled_owned(async move {
                    task.await;
                }));
            }
        }
    }

    /// From now until [`Tasks::release`], [`Tasks::spawn_detached`] keeps
    /// its tasks: the session's start on Neovim's main thread spawns them
    /// as one. Each task spawned from outside the runtime wakes one of its
    /// threads, 10-40 µs of the caller's on a virtual machine; a task of
    /// the runtime spawns the rest.
    pub fn hold(&self) {
        *self.held.locked() = Some(Held::default());
    }

    /// Spawns the tasks kept since [`Tasks::hold`], with one wake-up of the
    /// runtime; `first` runs before them, on the thread that spawns them.
    pub fn release(&self, first: impl FnOnce() + Send + 'static) {
        let held = self.held.locked().take().unwrap_or_default();
        let tracker = self.tracker.clone();
        self.tracker.spawn(async move {
            first();
            for task in held.0 {
                tracker.spawn(task);
            }
        });
    }

    pub fn is_closing(&self) -> bool {
        self.closing.is_cancelled()
    }

    /// Tells every task to close, waits at most `grace` (on the calling
    /// thread, which needs no runtime: the main thread, without block_on)
    /// for them to end, then drops what is left.
    pub fn stop(&self, runtime: &tokio::runtime::Handle, grace: Duration) {
        self.closing.cancel();
        self.tracker.close();
        let (ended, wait) = std::sync::mpsc::channel();
        let tracker = self.tracker.clone();
        runtime.spawn(async move {
            tracker.wait().await;
            let _ = ended.send(());
        });
        let _ = wait.recv_timeout(grace);
        self.stopped.cancel();
    }
}

/// A task that ends with its owner (a connection's pusher): aborted when
/// this is dropped.
#[derive(Debug)]
pub struct AbortOnDrop<T>(pub tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_closes_waits_a_moment_and_drops_the_rest() {
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        let tasks = std::sync::Arc::new(Tasks::default());
        let _in = runtime.enter();
        let closing = tasks.closing.clone();
        let polite = tasks.spawn(async move { closing.cancelled().await });
        let stubborn = tasks.spawn(std::future::pending::<()>());
        let started = std::time::Instant::now();
        tasks.stop(runtime.handle(), Duration::from_millis(200));
        assert!(started.elapsed() < Duration::from_secs(2));
        assert_eq!(runtime.block_on(polite).unwrap(), Some(()));
        assert_eq!(runtime.block_on(stubborn).unwrap(), None, "dropped at stop");
        assert!(tasks.is_closing());
    }

    #[test]
    fn held_tasks_wait_for_the_release_and_end_with_the_session() {
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        let tasks = std::sync::Arc::new(Tasks::default());
        let _in = runtime.enter();
        let (ran_tx, ran) = std::sync::mpsc::channel::<&str>();
        tasks.hold();
        for name in ["a", "b"] {
            let ran_tx = ran_tx.clone();
            tasks.spawn_detached(async move {
                let _ = ran_tx.send(name);
            });
        }
        let closing = tasks.closing.clone();
        tasks.spawn_detached(async move { closing.cancelled().await });
        assert!(ran.recv_timeout(Duration::from_millis(100)).is_err(), "held until the release");
        let first = ran_tx.clone();
        tasks.release(move || {
            let _ = first.send("first");
        });
        let order: Vec<&str> = (0..3).map(|_| ran.recv_timeout(Duration::from_secs(2)).unwrap()).collect();
        assert_eq!(order[0], "first");
        assert!(order.contains(&"a") && order.contains(&"b"));
        // Not held any more: spawned at once.
        let late = ran_tx.clone();
        tasks.spawn_detached(async move {
            let _ = late.send("late");
        });
        assert_eq!(ran.recv_timeout(Duration::from_secs(2)).unwrap(), "late");
        // The held task that waits for the session's end is tracked: stop ends it.
        let started = std::time::Instant::now();
        tasks.stop(runtime.handle(), Duration::from_secs(5));
        assert!(started.elapsed() < Duration::from_secs(2), "the tracked tasks ended at once");
    }
}
