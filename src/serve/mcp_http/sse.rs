//! A session's SSE stream (`GET /mcp`), the only way notifications reach an
//! MCP-over-HTTP client: the session's queued notifications (answers that
//! come later, such as a diff's decision) and the front-end's own feed of
//! the editor's context (Gemini's `ide/contextUpdate`, Copilot's
//! `selection_changed`).
//!
//! The stream is a response body polled by hyper: nothing runs while the
//! client does not read, and a feed reads the published state from watch
//! channels, so a slow client skips states, never queues them.

use std::convert::Infallible;
use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::sessions::Inbox;

pub type Body = UnsyncBoxBody<Bytes, Infallible>;

/// A front-end's notifications about the editor's state, each a JSON-RPC
/// message, for one stream.
pub type Feed = Pin<Box<dyn Stream<Item = String> + Send>>;

/// One SSE event carrying a JSON-RPC message.
pub fn event(json: &str) -> Bytes {
    Bytes::from(format!("event: message\ndata: {json}\n\n"))
}

struct State {
    inbox: Inbox,
    feed: Option<Feed>,
    closing: CancellationToken,
    keepalive: tokio::time::Interval,
}

/// The body of a session's stream: its queue, `feed`, and a comment line
/// every `keepalive` (keeps proxies quiet and finds dead clients), until
/// the session ends or `closing` (the server stops).
pub fn stream(inbox: Inbox, feed: Option<Feed>, keepalive: Duration, closing: CancellationToken) -> Body {
    let keepalive = tokio::time::interval_at(Instant::now() + keepalive, keepalive);
    let state = State { inbox, feed, closing, keepalive };
    let frames = futures_util::stream::unfold(state, |mut st| async move {
        let bytes = next(&mut st).await?;
        Some((Ok::<_, Infallible>(Frame::data(bytes)), st))
    });
    StreamBody::new(frames).boxed_unsync()
}

async fn next(st: &mut State) -> Option<Bytes> {
    let rx = st.inbox.rx.as_mut()?;
    tokio::select! {
        biased;
        () = st.closing.cancelled() => None,
        () = st.inbox.session.ended.cancelled() => None,
        queued = rx.recv() => queued.map(|text| event(&text)),
        fed = async { st.feed.as_mut().expect("guarded").next().await }, if st.feed.is_some() => {
            match fed {
                Some(text) => Some(event(&text)),
                None => {
                    st.feed = None;
                    Some(Bytes::from_static(b": feed ended\n\n"))
                }
            }
        }
        _ = st.keepalive.tick() => Some(Bytes::from_static(b": keepalive\n\n")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_sse_messages() {
        assert_eq!(event("{}"), Bytes::from("event: message\ndata: {}\n\n"));
    }

    #[tokio::test]
    async fn queued_and_fed_messages_until_the_session_ends() {
        let sessions = super::super::sessions::Sessions::default();
        let session = sessions.create("Test").unwrap();
        let inbox = sessions.open_stream(&session.id, |_| {}).unwrap();
        let feed: Feed = Box::pin(futures_util::stream::iter(vec!["fed".to_owned()]));
        assert!(session.send("queued".into()));
        let mut body = stream(inbox, Some(feed), Duration::from_secs(60), CancellationToken::new());
        let mut got = Vec::new();
        for _ in 0..3 {
            let frame = body.frame().await.unwrap().unwrap();
            got.push(String::from_utf8(frame.into_data().unwrap().to_vec()).unwrap());
        }
        assert_eq!(got[0], "event: message\ndata: queued\n\n");
        assert_eq!(got[1], "event: message\ndata: fed\n\n");
        assert_eq!(got[2], ": feed ended\n\n");
        sessions.end(&session.id, "deleted");
        assert!(body.frame().await.is_none(), "the stream ends with its session");
    }
}
