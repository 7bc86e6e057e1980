//! Listening: loopback TCP or a private Unix socket, one accept loop for
//! every front-end, and the handshake slots that bound the connections not
//! yet admitted.
//!
//! A connection holds a slot from accept until its protocol admits it (a
//! WebSocket upgrade with the right token, the first authenticated HTTP
//! request). When more than `max_pending_handshakes` are pending the
//! oldest is told to go, so a flood of silent or token-less connections,
//! from any local user, holds a bounded number of descriptors; the accept
//! loop itself waits while the slots' tasks hold as many sockets as a
//! burst may, and the kernel's backlog holds the newcomers meanwhile.

use crate::core::sync::LockExt;
use std::collections::VecDeque;
use std::future::Future;
use std::io;
use std::net::{Ipv4Addr, SocketAddr, TcpListener as StdTcpListener};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::Notify;

use super::tasks::Tasks;
use crate::core::log;

/// How many times `max_pending_handshakes` may be pending for a moment when
/// none of them is old enough to be dropped (a burst of real clients).
const PENDING_BURST_FACTOR: usize = 4;

/// Back-off after a failed accept (EMFILE and friends), instead of spinning.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// The connections between accept and admission, all front-ends together.
#[derive(Debug)]
pub struct Handshakes {
    max: usize,
    /// A handshake not finished by then is dropped by its protocol; a
    /// connection younger than a quarter of it is not dropped for room
    /// unless a whole burst is pending.
    pub timeout: Duration,
    pending: Mutex<Pending>,
    ended: Notify,
}

#[derive(Debug, Default)]
struct Pending {
    next_id: u64,
    queue: VecDeque<(u64, Arc<Notify>, Instant)>,
    /// Handshake tasks alive, those told to go included: each holds a socket
    /// until its task runs and ends.
    live: usize,
}

/// A connection's place among the pending handshakes: `cancel` fires when
/// it is dropped to make room; dropping the slot (admission, or the end of
/// the connection) frees the place.
pub struct HandshakeSlot {
    handshakes: Arc<Handshakes>,
    id: u64,
    pub cancel: Arc<Notify>,
}

impl Drop for HandshakeSlot {
    fn drop(&mut self) {
        let mut pending = self.handshakes.lock();
        pending.queue.retain(|(id, _, _)| *id != self.id);
        pending.live -= 1;
        drop(pending);
        self.handshakes.ended.notify_waiters();
    }
}

impl Handshakes {
    pub fn new(max: usize, timeout: Duration) -> Self {
        Self { max: max.max(1), timeout, pending: Mutex::default(), ended: Notify::new() }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Pending> {
        self.pending.locked()
    }

    /// A place for a connection that starts its handshake; the oldest
    /// pending one is told to go when there are too many (see the module).
    pub fn begin(self: &Arc<Self>) -> HandshakeSlot {
        let cancel = Arc::new(Notify::new());
        let young = self.timeout / 4;
        let mut pending = self.lock();
        pending.next_id += 1;
        pending.live += 1;
        let id = pending.next_id;
        pending.queue.push_back((id, cancel.clone(), Instant::now()));
        while pending.queue.len() > self.max {
            let oldest_is_young = pending.queue.front().is_some_and(|(_, _, since)| since.elapsed() < young);
            if oldest_is_young && pending.queue.len() <= self.max.saturating_mul(PENDING_BURST_FACTOR) {
                break;
            }
            if let Some((_, oldest, _)) = pending.queue.pop_front() {
                // notify_one keeps the wake-up if the task is not waiting yet.
                oldest.notify_one();
            }
        }
        HandshakeSlot { handshakes: self.clone(), id, cancel }
    }

    /// Waits while the handshake tasks alive hold as many sockets as a
    /// burst may.
    pub async fn room(&self) {
        let most = self.max.saturating_mul(PENDING_BURST_FACTOR + 1);
        loop {
            let ended = self.ended.notified();
            if self.lock().live < most {
                return;
            }
            let _ = tokio::time::timeout(Duration::from_millis(100), ended).await;
        }
    }

    pub fn pending(&self) -> usize {
        self.lock().queue.len()
    }
}

/// A listener the accept loop can take connections from.
pub trait Accept: Send + Sync + 'static {
    type Stream: AsyncRead + AsyncWrite + Unpin + Send + 'static;

    /// The next connection and a description of its peer for the log;
    /// `Ok(None)` for a peer refused here (another user on a Unix socket).
    fn accept_one(&self) -> impl Future<Output = io::Result<Option<(Self::Stream, String)>>> + Send;
}

impl Accept for TcpListener {
    type Stream = tokio::net::TcpStream;

    async fn accept_one(&self) -> io::Result<Option<(Self::Stream, String)>> {
        let (stream, peer) = self.accept().await?;
        let _ = stream.set_nodelay(true);
        Ok(Some((stream, peer.to_string())))
    }
}

impl Accept for UnixListener {
    type Stream = tokio::net::UnixStream;

    /// Only processes of our own user: the socket's directory is private
    /// already, and this holds even if its modes were loosened.
    async fn accept_one(&self) -> io::Result<Option<(Self::Stream, String)>> {
        let (stream, _) = self.accept().await?;
        let cred = stream.peer_cred()?;
        // SAFETY: geteuid cannot fail.
        let me = unsafe { libc::geteuid() };
        if cred.uid() != me {
            log::limited(
                "foreign peer",
                log::Level::Warn,
                format!("refused a connection from uid {} on a private socket", cred.uid()),
            );
            return Ok(None);
        }
        Ok(Some((stream, format!("pid {}", cred.pid().unwrap_or(0)))))
    }
}

/// Accepts connections until `tasks` close, each served by `serve` as one
/// of the session's tasks while holding a handshake slot until it is
/// admitted. `agent` names the front-end in the log.
pub async fn accept_loop<L, F, Fut>(
    listener: L,
    agent: &'static str,
    handshakes: Arc<Handshakes>,
    tasks: &Tasks,
    serve: F,
) where
    L: Accept,
    F: Fn(L::Stream, HandshakeSlot) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    loop {
        tokio::select! {
            () = handshakes.room() => {}
            () = tasks.closing.cancelled() => return,
        }
        tokio::select! {
            accepted = listener.accept_one() => match accepted {
                Ok(Some((stream, peer))) => {
                    log::limited("connection from", log::Level::Debug, format!("{agent}: connection from {peer}"));
                    let slot = handshakes.begin();
                    tasks.spawn(serve(stream, slot));
                }
                Ok(None) => {}
                Err(e) => {
                    log::limited("accept failed", log::Level::Warn, format!("{agent}: accept failed: {e}"));
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                }
            },
            () = tasks.closing.cancelled() => return,
        }
    }
}

/// Where a TCP front-end listens on 127.0.0.1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PortChoice {
    /// 0 lets the system pick.
    pub port: u16,
    /// Try each port of the range in order (overrides `port`).
    pub range: Option<(u16, u16)>,
    /// The previous session's port (0: none), tried first: an agent that
    /// reconnects to the port it knew finds the restarted server.
    pub preferred: u16,
}

/// A non-blocking listener on 127.0.0.1 as `choice` says (a non-blocking
/// bind: fine on the main thread, so `start` can return the port).
pub fn bind_loopback(choice: PortChoice) -> io::Result<StdTcpListener> {
    let ports: Vec<u16> = match choice.range {
        Some((lo, hi)) => (lo..=hi).collect(),
        None => vec![choice.port],
    };
    let preferred = choice.preferred;
    let order = (preferred != 0)
        .then_some(preferred)
        .into_iter()
        .chain(ports.into_iter().filter(|&p| preferred == 0 || p != preferred));
    let mut last = None;
    for port in order {
        match StdTcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, port))) {
            Ok(l) => {
                l.set_nonblocking(true)?;
                return Ok(l);
            }
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::other("no port to try")))
}

/// Why a front-end has no listener (`agent`: its id).
#[derive(Debug, thiserror::Error)]
pub enum ListenError {
    #[error("{agent}: cannot listen on 127.0.0.1: {source}")]
    Loopback { agent: &'static str, source: io::Error },
    #[error("{agent}: cannot listen on {}: {source}", path.display())]
    Unix { agent: &'static str, path: PathBuf, source: io::Error },
}

/// [`bind_loopback`] as a tokio listener for `agent`'s front-end, and its
/// port (errors name the agent). Inside the runtime, on the main thread.
pub fn listen_loopback(agent: &'static str, choice: PortChoice) -> Result<(TcpListener, u16), ListenError> {
    let cannot = |source| ListenError::Loopback { agent, source };
    let listener = bind_loopback(choice).map_err(cannot)?;
    let port = listener.local_addr().map_err(cannot)?.port();
    Ok((TcpListener::from_std(listener).map_err(cannot)?, port))
}

/// A Unix socket at `path` in the private directory `dir` (0700, ours, no
/// symbolic link: `discovery::ensure_dir`), the socket itself 0600. A
/// socket file left by an editor that died is replaced; any other file
/// there is an error.
pub fn bind_unix(dir: &Path, path: &Path) -> io::Result<std::os::unix::net::UnixListener> {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    super::discovery::ensure_dir(dir)?;
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_socket() => std::fs::remove_file(path)?,
        Ok(_) => {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("{} exists and is not a socket", path.display()),
            ))
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let listener = std::os::unix::net::UnixListener::bind(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    listener.set_nonblocking(true)?;
    Ok(listener)
}

/// [`bind_unix`] as a tokio listener for `agent`'s front-end (errors name
/// the agent and the socket). Inside the runtime, on the main thread.
pub fn listen_unix(agent: &'static str, dir: &Path, path: &Path) -> Result<UnixListener, ListenError> {
    let cannot = |source| ListenError::Unix { agent, path: path.to_path_buf(), source };
    UnixListener::from_std(bind_unix(dir, path).map_err(cannot)?).map_err(cannot)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_oldest_pending_handshake_goes_when_too_many_wait() {
        let handshakes = Arc::new(Handshakes::new(2, Duration::ZERO));
        let first = handshakes.begin();
        let _second = handshakes.begin();
        assert_eq!(handshakes.pending(), 2);
        let _third = handshakes.begin();
        assert_eq!(handshakes.pending(), 2);
        tokio::time::timeout(Duration::from_secs(1), first.cancel.notified()).await.expect("the oldest is told");
        drop(first);
        assert_eq!(handshakes.lock().live, 2);
    }

    #[tokio::test]
    async fn a_burst_of_young_handshakes_gets_in() {
        let handshakes = Arc::new(Handshakes::new(2, Duration::from_secs(60)));
        let slots: Vec<_> = (0..2 * PENDING_BURST_FACTOR).map(|_| handshakes.begin()).collect();
        assert_eq!(handshakes.pending(), 2 * PENDING_BURST_FACTOR);
        let _one_more = handshakes.begin();
        assert_eq!(handshakes.pending(), 2 * PENDING_BURST_FACTOR, "past a burst the oldest goes");
        drop(slots);
        assert_eq!(handshakes.pending(), 1);
    }

    #[test]
    fn the_preferred_port_first_then_the_range() {
        let taken = bind_loopback(PortChoice::default()).unwrap();
        let port = taken.local_addr().unwrap().port();
        let free = bind_loopback(PortChoice::default()).unwrap();
        let free_port = free.local_addr().unwrap().port();
        drop(free);
        let got = bind_loopback(PortChoice { preferred: free_port, ..Default::default() }).unwrap();
        assert_eq!(got.local_addr().unwrap().port(), free_port);
        assert!(bind_loopback(PortChoice { port, ..Default::default() }).is_err());
        let in_range = bind_loopback(PortChoice { range: Some((port, port)), preferred: port, ..Default::default() });
        assert!(in_range.is_err(), "the one port of the range is taken");
    }

    #[tokio::test]
    async fn a_unix_socket_is_private_and_replaces_a_dead_one() {
        use std::os::unix::fs::PermissionsExt;
        let t = crate::testutil::TempDir::new("unix-listener");
        let dir = t.0.join("sock");
        let path = dir.join("s.sock");
        drop(bind_unix(&dir, &path).unwrap());
        let listener = UnixListener::from_std(bind_unix(&dir, &path).unwrap()).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777, 0o700);
        let client = tokio::net::UnixStream::connect(&path).await.unwrap();
        let (_stream, peer) = listener.accept_one().await.unwrap().expect("our own uid");
        assert!(peer.starts_with("pid "), "{peer}");
        drop(client);
        std::fs::write(dir.join("plain"), b"").unwrap();
        assert!(bind_unix(&dir, &dir.join("plain")).is_err(), "never removes a file that is no socket");
    }
}
