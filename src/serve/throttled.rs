//! A feed of notifications made from the published editor state, at a
//! bounded rate: the first at once when the stream opens, then, after any
//! change, at most one per interval (a burst of changes is coalesced and
//! ends with the newest state), never the same one twice. The front-ends
//! whose event streams carry the selection (Copilot CLI's
//! `selection_changed`, the IDE companion's `ide/contextUpdate`) differ
//! only in what they watch and how they write it: their [`Source`].

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

use super::mcp_http::sse::Feed;

/// What a throttled feed reads and writes.
pub trait Source: Send + 'static {
    /// Waits for the next change of the state it reads; false once its
    /// publisher is gone (the feed ends).
    fn changed(&mut self) -> impl Future<Output = bool> + Send;
    /// The notification for the newest state, or None when that is the
    /// one sent last (nothing is sent, and the interval does not restart).
    fn compose(&mut self) -> Option<String>;
}

/// `source`'s notifications, at most one per `interval` after the first.
pub fn feed<S: Source>(source: S, interval: Duration) -> Feed {
    let throttle = Throttle { source, interval, pending: true, last_at: None };
    Box::pin(futures_util::stream::unfold(throttle, |mut throttle| async move {
        let text = throttle.next().await?;
        Some((text, throttle))
    }))
}

struct Throttle<S> {
    source: S,
    interval: Duration,
    /// A change not sent yet: sent at `last_at + interval`.
    pending: bool,
    last_at: Option<Instant>,
}

impl<S: Source> Throttle<S> {
    async fn next(&mut self) -> Option<String> {
        loop {
            if self.pending {
                if let Some(at) = self.last_at {
                    tokio::time::sleep_until(at + self.interval).await;
                }
                self.pending = false;
                if let Some(text) = self.source.compose() {
                    self.last_at = Some(Instant::now());
                    return Some(text);
                }
            } else if self.source.changed().await {
                self.pending = true;
            } else {
                return None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::StreamExt;
    use tokio::sync::watch;

    /// The newest number, as text; one it sent last is not sent again.
    struct Numbers {
        rx: watch::Receiver<u32>,
        sent: Option<u32>,
    }

    impl Source for Numbers {
        async fn changed(&mut self) -> bool {
            self.rx.changed().await.is_ok()
        }

        fn compose(&mut self) -> Option<String> {
            let now = *self.rx.borrow_and_update();
            (self.sent != Some(now)).then(|| {
                self.sent = Some(now);
                now.to_string()
            })
        }
    }

    #[test]
    fn first_at_once_then_one_per_interval_newest_only_never_twice() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        rt.block_on(async {
            let (tx, rx) = watch::channel(1);
            let interval = Duration::from_millis(60);
            let mut feed = feed(Numbers { rx, sent: None }, interval);
            let start = Instant::now();
            assert_eq!(feed.next().await.as_deref(), Some("1"), "at once");
            assert!(start.elapsed() < interval);
            // A burst: only its last state, one interval after the first.
            for n in 2..=5 {
                tx.send(n).unwrap();
            }
            assert_eq!(feed.next().await.as_deref(), Some("5"));
            assert!(start.elapsed() >= interval, "{:?}", start.elapsed());
            // The same state again is not sent; the next different one is.
            tx.send(5).unwrap();
            tx.send(6).unwrap();
            assert_eq!(feed.next().await.as_deref(), Some("6"));
            assert!(start.elapsed() >= interval * 2, "{:?}", start.elapsed());
            tx.send(6).unwrap();
            drop(tx);
            assert_eq!(feed.next().await, None, "the publisher is gone: the feed ends");
        });
    }
}
