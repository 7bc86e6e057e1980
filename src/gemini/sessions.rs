//! MCP Streamable HTTP sessions: `initialize` makes one (its id in the
//! `Mcp-Session-Id` header), `DELETE /mcp` ends it. Each session has one
//! queue of notifications for the client (the decisions of its diffs),
//! which its SSE stream (`GET /mcp`) drains; at most one stream at a time.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::amp::token;
use crate::core::review::Owner;

/// Sessions at once: `initialize` past it drops the oldest session that has
/// no SSE stream open (a client that went away without DELETE). There is
/// always one, as fewer streams than sessions may be open.
pub const MAX_SESSIONS: usize = 32;
/// SSE streams at once, all sessions together: one more is refused (503).
pub const MAX_SSE_STREAMS: usize = 16;
/// Notifications queued for one session whose stream is not open or not
/// read: past it they are dropped (and logged).
pub const SESSION_QUEUE: usize = 256;

pub struct Session {
    pub id: String,
    /// Its reviews are its own, and close when it ends.
    pub owner: Owner,
    outbound: mpsc::Sender<String>,
    /// The queue's other end; taken by the open SSE stream, given back
    /// when the stream ends.
    inbox: Mutex<Option<mpsc::Receiver<String>>>,
    /// Cancelled when the session ends: its stream closes.
    pub ended: CancellationToken,
    created: Instant,
}

impl Session {
    /// Queues a notification; false when the queue is full (dropped).
    pub fn send(&self, text: String) -> bool {
        self.outbound.try_send(text).is_ok()
    }

    fn has_stream(&self) -> bool {
        self.inbox.lock().unwrap_or_else(|p| p.into_inner()).is_none()
    }
}

/// The SSE stream's hold on a session's queue: given back on drop, so a
/// client that reconnects its stream gets what was queued meanwhile.
pub struct Inbox {
    pub session: Arc<Session>,
    pub rx: Option<mpsc::Receiver<String>>,
    streams: Arc<AtomicUsize>,
}

impl Drop for Inbox {
    fn drop(&mut self) {
        *self.session.inbox.lock().unwrap_or_else(|p| p.into_inner()) = self.rx.take();
        self.streams.fetch_sub(1, Ordering::Relaxed);
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
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A new session (CSPRNG id), making room as [`MAX_SESSIONS`] says.
    pub fn create(&self) -> Result<Arc<Session>, Refused> {
        let mut map = self.map();
        if map.len() >= MAX_SESSIONS {
            let oldest_idle = map.values().filter(|s| !s.has_stream()).min_by_key(|s| s.created).map(|s| s.id.clone());
            let evicted = oldest_idle.and_then(|id| map.remove(&id)).ok_or(Refused::Full)?;
            evicted.ended.cancel();
        }
        let (outbound, inbox) = mpsc::channel(SESSION_QUEUE);
        let session = Arc::new(Session {
            id: token::generate_token(),
            owner: Owner::new("Gemini"),
            outbound,
            inbox: Mutex::new(Some(inbox)),
            ended: CancellationToken::new(),
            created: Instant::now(),
        });
        map.insert(session.id.clone(), session.clone());
        Ok(session)
    }

    pub fn get(&self, id: &str) -> Result<Arc<Session>, Refused> {
        self.map().get(id).cloned().ok_or(Refused::Unknown)
    }

    /// Ends session `id`; whether there was one.
    pub fn end(&self, id: &str) -> bool {
        let removed = self.map().remove(id);
        removed.map(|s| s.ended.cancel()).is_some()
    }

    /// Ends every session (the server stops).
    pub fn end_all(&self) {
        for (_, s) in self.map().drain() {
            s.ended.cancel();
        }
    }

    /// Opens session `id`'s SSE stream: its queue, held until dropped.
    pub fn open_stream(&self, id: &str) -> Result<Inbox, Refused> {
        let session = self.get(id)?;
        let mut inbox = session.inbox.lock().unwrap_or_else(|p| p.into_inner());
        if inbox.is_none() {
            return Err(Refused::StreamOpen);
        }
        if self.streams.fetch_add(1, Ordering::Relaxed) >= MAX_SSE_STREAMS {
            self.streams.fetch_sub(1, Ordering::Relaxed);
            return Err(Refused::Full);
        }
        let rx = inbox.take();
        drop(inbox);
        Ok(Inbox { session, rx, streams: self.streams.clone() })
    }

    pub fn count(&self) -> usize {
        self.map().len()
    }

    pub fn streams(&self) -> usize {
        self.streams.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_stream_per_session_and_the_queue_survives_a_reconnect() {
        let sessions = Sessions::default();
        let s = sessions.create().unwrap();
        assert_eq!(s.id.len(), 43);
        let mut inbox = sessions.open_stream(&s.id).unwrap();
        assert_eq!(sessions.open_stream(&s.id).err(), Some(Refused::StreamOpen));
        assert_eq!(sessions.streams(), 1);
        assert!(s.send("a".into()));
        assert_eq!(inbox.rx.as_mut().unwrap().try_recv().unwrap(), "a");
        drop(inbox);
        assert_eq!(sessions.streams(), 0);
        assert!(s.send("b".into()));
        let mut again = sessions.open_stream(&s.id).unwrap();
        assert_eq!(again.rx.as_mut().unwrap().try_recv().unwrap(), "b");
        assert_eq!(sessions.open_stream("nope").err(), Some(Refused::Unknown));
        assert!(sessions.end(&s.id));
        assert!(s.ended.is_cancelled());
        assert!(!sessions.end(&s.id));
        assert_eq!(sessions.get(&s.id).err(), Some(Refused::Unknown));
    }

    #[test]
    fn session_and_stream_limits() {
        let sessions = Sessions::default();
        let all: Vec<_> = (0..MAX_SESSIONS).map(|_| sessions.create().unwrap()).collect();
        let streams: Vec<_> = all[1..=MAX_SSE_STREAMS].iter().map(|s| sessions.open_stream(&s.id).unwrap()).collect();
        assert_eq!(sessions.open_stream(&all[MAX_SSE_STREAMS + 1].id).err(), Some(Refused::Full));
        // Full: the oldest session without a stream goes.
        let newer = sessions.create().unwrap();
        assert!(all[0].ended.is_cancelled());
        assert_eq!(sessions.count(), MAX_SESSIONS);
        assert!(sessions.get(&newer.id).is_ok());
        drop(streams);
        sessions.end_all();
        assert!(all.iter().all(|s| s.ended.is_cancelled()) && sessions.count() == 0);
    }
}
