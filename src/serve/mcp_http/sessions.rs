//! MCP Streamable HTTP sessions: `initialize` makes one (its id in the
//! `Mcp-Session-Id` header), `DELETE /mcp` ends it. Each session has one
//! queue of notifications for the client, which its SSE stream (`GET /mcp`)
//! drains; at most one stream at a time.
//!
//! A session is an agent's connection for the registry: it counts as
//! connected while its event stream is open (or reopens within
//! [`STREAM_GRACE`]: clients reconnect a dropped stream), and is gone when
//! it ends or its stream stays closed past the grace.

use crate::core::sync::LockExt;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::core::review::Owner;
use crate::serve::registry::Connection;
use crate::serve::token;

/// Sessions at once, per front-end: `initialize` past it drops the oldest
/// session that has no SSE stream open (a client that went away without
/// DELETE). There is always one, as fewer streams than sessions may be open.
pub const MAX_SESSIONS: usize = 32;
/// SSE streams at once, per front-end: one more is refused (503).
pub const MAX_SSE_STREAMS: usize = 16;
/// Notifications queued for one session whose stream is not open or not
/// read: past it they are dropped (and logged).
pub const SESSION_QUEUE: usize = 256;
/// How long a session's stream may stay closed before its client counts as
/// gone (its reviews close).
pub const STREAM_GRACE: Duration = Duration::from_secs(2);

pub struct Session {
    pub id: String,
    /// Its reviews are this owner's.
    pub owner: Owner,
    outbound: mpsc::Sender<String>,
    /// The queue's other end; taken by the open SSE stream, given back
    /// when the stream ends.
    inbox: Mutex<Option<mpsc::Receiver<String>>>,
    /// Cancelled when the session ends: its stream closes.
    pub ended: CancellationToken,
    created: Instant,
    /// The registry's entry while the client counts as connected.
    pub connection: Mutex<Option<Connection>>,
    /// Bumped whenever a stream opens: a grace timer started at a stream's
    /// close ends the connection only if no stream opened since.
    streams_opened: AtomicUsize,
}

impl Session {
    /// Queues a notification; false when the queue is full (dropped).
    pub fn send(&self, text: String) -> bool {
        self.outbound.try_send(text).is_ok()
    }

    fn has_stream(&self) -> bool {
        self.inbox.locked().is_none()
    }

    /// Ends the registry's entry, for `reason`; whether there was one.
    pub fn disconnect(&self, reason: &str) -> bool {
        let connection = self.connection.locked().take();
        connection.map(|c| c.end(reason)).is_some()
    }

    /// Whether the client counts as connected (the registry's entry).
    pub fn connected(&self) -> bool {
        self.connection.locked().is_some()
    }

    /// The streams opened so far (see [`Inbox`]).
    pub fn streams_opened(&self) -> usize {
        self.streams_opened.load(Ordering::Relaxed)
    }
}

/// The SSE stream's hold on a session's queue: given back on drop, so a
/// client that reconnects its stream gets what was queued meanwhile.
pub struct Inbox {
    pub session: Arc<Session>,
    pub rx: Option<mpsc::Receiver<String>>,
    streams: Arc<AtomicUsize>,
    /// Told when the stream closes (see [`Sessions::open_stream`]).
    on_close: Option<Box<dyn FnOnce(Arc<Session>) + Send>>,
}

impl Drop for Inbox {
    fn drop(&mut self) {
        *self.session.inbox.locked() = self.rx.take();
        self.streams.fetch_sub(1, Ordering::Relaxed);
        if let Some(on_close) = self.on_close.take() {
            on_close(self.session.clone());
        }
    }
}

#[derive(Debug, PartialEq, Eq)]
pub enum Refused {
    /// No such session (ended, evicted or never made): 404, the client
    /// starts a new one.
    Unknown,
    /// Too many sessions or streams: 503.
    Full,
    /// The session's stream is open already: 409.
    StreamOpen,
}

#[derive(Default)]
pub struct Sessions {
    map: Mutex<HashMap<String, Arc<Session>>>,
    streams: Arc<AtomicUsize>,
}

impl Sessions {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Session>>> {
        self.map.locked()
    }

    /// A new session of `agent` (CSPRNG id), making room as [`MAX_SESSIONS`] says.
    pub fn create(&self, agent: &'static str) -> Result<Arc<Session>, Refused> {
        let mut map = self.map();
        if map.len() >= MAX_SESSIONS {
            let oldest_idle = map.values().filter(|s| !s.has_stream()).min_by_key(|s| s.created).map(|s| s.id.clone());
            let evicted = oldest_idle.and_then(|id| map.remove(&id)).ok_or(Refused::Full)?;
            end(&evicted, "session evicted (too many sessions)");
        }
        let (outbound, inbox) = mpsc::channel(SESSION_QUEUE);
        let session = Arc::new(Session {
            id: token::generate_token(),
            owner: Owner::new(agent),
            outbound,
            inbox: Mutex::new(Some(inbox)),
            ended: CancellationToken::new(),
            created: Instant::now(),
            connection: Mutex::new(None),
            streams_opened: AtomicUsize::new(0),
        });
        map.insert(session.id.clone(), session.clone());
        Ok(session)
    }

    pub fn get(&self, id: &str) -> Result<Arc<Session>, Refused> {
        self.map().get(id).cloned().ok_or(Refused::Unknown)
    }

    /// Ends session `id`; whether there was one.
    pub fn end(&self, id: &str, reason: &str) -> bool {
        let removed = self.map().remove(id);
        removed.map(|s| end(&s, reason)).is_some()
    }

    /// Ends every session (the server stops).
    pub fn end_all(&self) {
        let all: Vec<_> = self.map().drain().map(|(_, s)| s).collect();
        for s in all {
            end(&s, "server shutting down");
        }
    }

    /// Opens session `id`'s SSE stream: its queue, held until dropped;
    /// `on_close` runs when the stream closes.
    pub fn open_stream(
        &self,
        id: &str,
        on_close: impl FnOnce(Arc<Session>) + Send + 'static,
    ) -> Result<Inbox, Refused> {
        let session = self.get(id)?;
        let mut inbox = session.inbox.locked();
        if inbox.is_none() {
            return Err(Refused::StreamOpen);
        }
        if self.streams.fetch_add(1, Ordering::Relaxed) >= MAX_SSE_STREAMS {
            self.streams.fetch_sub(1, Ordering::Relaxed);
            return Err(Refused::Full);
        }
        let rx = inbox.take();
        drop(inbox);
        session.streams_opened.fetch_add(1, Ordering::Relaxed);
        Ok(Inbox { session, rx, streams: self.streams.clone(), on_close: Some(Box::new(on_close)) })
    }

    pub fn count(&self) -> usize {
        self.map().len()
    }

    /// Every session now (for a notification to all of a front-end's clients).
    pub fn all(&self) -> Vec<Arc<Session>> {
        self.map().values().cloned().collect()
    }

    pub fn streams(&self) -> usize {
        self.streams.load(Ordering::Relaxed)
    }
}

fn end(session: &Session, reason: &str) {
    session.ended.cancel();
    session.disconnect(reason);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open(sessions: &Sessions, id: &str) -> Result<Inbox, Refused> {
        sessions.open_stream(id, |_| {})
    }

    #[test]
    fn one_stream_per_session_and_the_queue_survives_a_reconnect() {
        let sessions = Sessions::default();
        let s = sessions.create("Gemini").unwrap();
        assert_eq!(s.id.len(), 43);
        assert_eq!(s.owner.agent, "Gemini");
        let closed = Arc::new(AtomicUsize::new(0));
        let counted = closed.clone();
        let mut inbox = sessions
            .open_stream(&s.id, move |_| {
                counted.fetch_add(1, Ordering::Relaxed);
            })
            .unwrap();
        assert_eq!(open(&sessions, &s.id).err(), Some(Refused::StreamOpen));
        assert_eq!(sessions.streams(), 1);
        assert!(s.send("a".into()));
        assert_eq!(inbox.rx.as_mut().unwrap().try_recv().unwrap(), "a");
        drop(inbox);
        assert_eq!(closed.load(Ordering::Relaxed), 1);
        assert_eq!(sessions.streams(), 0);
        assert!(s.send("b".into()));
        let mut again = open(&sessions, &s.id).unwrap();
        assert_eq!(again.rx.as_mut().unwrap().try_recv().unwrap(), "b");
        assert_eq!(s.streams_opened(), 2);
        assert_eq!(open(&sessions, "nope").err(), Some(Refused::Unknown));
        assert!(sessions.end(&s.id, "deleted"));
        assert!(s.ended.is_cancelled());
        assert!(!sessions.end(&s.id, "deleted"));
        assert_eq!(sessions.get(&s.id).err(), Some(Refused::Unknown));
    }

    #[test]
    fn session_and_stream_limits() {
        let sessions = Sessions::default();
        let all: Vec<_> = (0..MAX_SESSIONS).map(|_| sessions.create("Gemini").unwrap()).collect();
        let streams: Vec<_> = all[1..=MAX_SSE_STREAMS].iter().map(|s| open(&sessions, &s.id).unwrap()).collect();
        assert_eq!(open(&sessions, &all[MAX_SSE_STREAMS + 1].id).err(), Some(Refused::Full));
        // Full: the oldest session without a stream goes.
        let newer = sessions.create("Gemini").unwrap();
        assert!(all[0].ended.is_cancelled());
        assert_eq!(sessions.count(), MAX_SESSIONS);
        assert!(sessions.get(&newer.id).is_ok());
        drop(streams);
        sessions.end_all();
        assert!(all.iter().all(|s| s.ended.is_cancelled()) && sessions.count() == 0);
    }
}
