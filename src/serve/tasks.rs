//! The lifetime of one running session's tasks: every listener, connection,
//! pusher and request of every front-end is spawned here, and one stop ends
//! them all, bounded in time so Neovim's exit never hangs.

use std::future::Future;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

#[derive(Debug, Default)]
pub struct Tasks {
    /// Cancelled when the session stops: connections send their close
    /// frames and end, accept loops return.
    pub closing: CancellationToken,
    /// Cancelled once connections had their moment to close: every task
    /// still running is dropped.
    stopped: CancellationToken,
    tracker: TaskTracker,
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
}
