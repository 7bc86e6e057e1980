//! A session's SSE stream (`GET /mcp`), the only way notifications reach
//! Gemini CLI: the session's queued notifications (diff decisions) and
//! `ide/contextUpdate` from the one published selection and visible files.
//!
//! The stream is a response body polled by hyper: nothing runs while the
//! client does not read, and the watch channels keep only the newest state,
//! so a slow client skips states, never queues them.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use serde_json::Value;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::protocol::{context_update, Recency};
use super::sessions::Inbox;
use crate::amp::context::{PublishedSelection, PublishedVisibleFiles};
use crate::core::log;
use crate::mcp;

pub type Body = UnsyncBoxBody<Bytes, Infallible>;

/// What the stream reads.
pub struct Feeds {
    pub selection: watch::Receiver<Option<Arc<PublishedSelection>>>,
    pub visible: watch::Receiver<Option<Arc<PublishedVisibleFiles>>>,
    /// At most one `ide/contextUpdate` per this long.
    pub interval: Duration,
    /// A comment line this often keeps proxies quiet and finds dead clients.
    pub keepalive: Duration,
    /// The server stops.
    pub closing: CancellationToken,
}

struct State {
    inbox: Inbox,
    feeds: Feeds,
    recency: Recency,
    /// The last context sent (the same one is not sent twice).
    sent: Option<Value>,
    /// A context change not sent yet: sent at `last_at + interval`.
    pending: bool,
    last_at: Option<Instant>,
    keepalive: tokio::time::Interval,
}

/// One SSE event carrying a JSON-RPC message.
pub fn event(json: &str) -> Bytes {
    Bytes::from(format!("event: message\ndata: {json}\n\n"))
}

/// The body of a session's stream. The context is sent once at once.
pub fn stream(inbox: Inbox, mut feeds: Feeds) -> Body {
    let keepalive = tokio::time::interval_at(Instant::now() + feeds.keepalive, feeds.keepalive);
    feeds.selection.mark_changed();
    let state =
        State { inbox, feeds, recency: Recency::default(), sent: None, pending: true, last_at: None, keepalive };
    let frames = futures_util::stream::unfold(state, |mut st| async move {
        let bytes = next(&mut st).await?;
        Some((Ok::<_, Infallible>(Frame::data(bytes)), st))
    });
    StreamBody::new(frames).boxed_unsync()
}

async fn next(st: &mut State) -> Option<Bytes> {
    loop {
        let due = st.last_at.map_or_else(Instant::now, |at| at + st.feeds.interval);
        let rx = st.inbox.rx.as_mut()?;
        tokio::select! {
            biased;
            () = st.feeds.closing.cancelled() => return None,
            () = st.inbox.session.ended.cancelled() => return None,
            queued = rx.recv() => return queued.map(|text| event(&text)),
            () = tokio::time::sleep_until(due), if st.pending => {
                st.pending = false;
                if let Some(bytes) = context(st) {
                    st.last_at = Some(Instant::now());
                    return Some(bytes);
                }
            }
            changed = st.feeds.selection.changed(), if !st.pending => {
                changed.ok()?;
                st.pending = true;
            }
            changed = st.feeds.visible.changed(), if !st.pending => {
                changed.ok()?;
                st.pending = true;
            }
            _ = st.keepalive.tick() => return Some(Bytes::from_static(b": keepalive\n\n")),
        }
    }
}

/// The `ide/contextUpdate` event for the newest state, unless it is the
/// one sent last.
fn context(st: &mut State) -> Option<Bytes> {
    let selection = st.feeds.selection.borrow_and_update().clone();
    let visible = st.feeds.visible.borrow_and_update().clone();
    let now_ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
    let files = visible.as_ref().map_or(&[][..], |v| v.raw.as_slice());
    let params = context_update(selection.as_ref().map(|s| &s.raw), files, &mut st.recency, now_ms);
    // Timestamps change on every call: compare without them.
    let mut key = params.clone();
    if let Some(files) = key["workspaceState"]["openFiles"].as_array_mut() {
        for f in files {
            f.as_object_mut().map(|o| o.remove("timestamp"));
        }
    }
    if st.sent.as_ref() == Some(&key) {
        return None;
    }
    st.sent = Some(key);
    let text = mcp::notification("ide/contextUpdate", &params);
    crate::log_debug!("gemini: contextUpdate {}", log::untrusted(&text));
    Some(event(&text))
}
