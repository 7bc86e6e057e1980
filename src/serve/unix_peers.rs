//! The processes connected to a front-end's Unix socket, from the kernel's
//! `SO_PEERCRED`: a Unix socket has no port to look up in /proc/net/tcp, so
//! this is how the editor finds the terminal an agent on a socket runs in
//! (`lua/amp/route.lua`, through the front-end's `status().pids`).
//!
//! [`Tracked`] is the socket's listener for the one accept loop
//! (`listener::accept_loop`): each connection it accepts holds its peer's
//! place until it closes; a peer stays listed for `grace` after its last
//! connection, so a client that renews its connection never drops out.

use crate::core::sync::LockExt;
use std::collections::HashMap;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{UnixListener, UnixStream};

use super::listener::Accept;
use super::write_deadline::Abort;

/// The peers' pids: their open connections and when their last one closed.
#[derive(Debug)]
pub struct Peers {
    grace: Duration,
    map: Mutex<HashMap<u32, (usize, Instant)>>,
}

impl Peers {
    pub fn new(grace: Duration) -> Arc<Self> {
        Arc::new(Self { grace, map: Mutex::default() })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u32, (usize, Instant)>> {
        self.map.locked()
    }

    fn enter(self: &Arc<Self>, pid: u32) -> PeerPlace {
        let mut map = self.lock();
        // Forget the peers gone for longer than the grace: the map stays as
        // small as the set of live clients.
        map.retain(|_, (n, since)| *n > 0 || since.elapsed() < self.grace);
        map.entry(pid).or_insert((0, Instant::now())).0 += 1;
        PeerPlace { peers: self.clone(), pid }
    }

    /// The processes connected now or within the grace, sorted.
    pub fn pids(&self) -> Vec<u32> {
        let mut pids: Vec<u32> = self
            .lock()
            .iter()
            .filter(|(_, (n, since))| *n > 0 || since.elapsed() < self.grace)
            .map(|(pid, _)| *pid)
            .collect();
        pids.sort_unstable();
        pids
    }
}

/// A connection's place in [`Peers`], given back when it closes.
#[derive(Debug)]
struct PeerPlace {
    peers: Arc<Peers>,
    pid: u32,
}

impl Drop for PeerPlace {
    fn drop(&mut self) {
        if let Some((n, since)) = self.peers.lock().get_mut(&self.pid) {
            *n -= 1;
            *since = Instant::now();
        }
    }
}

/// A Unix socket listener that records its peers in [`Peers`] (and, as
/// the plain one, refuses other users' processes).
pub struct Tracked {
    listener: UnixListener,
    peers: Arc<Peers>,
}

impl Tracked {
    pub fn new(listener: UnixListener, peers: Arc<Peers>) -> Self {
        Self { listener, peers }
    }
}

impl Accept for Tracked {
    type Stream = PeerStream;

    async fn accept_one(&self) -> io::Result<Option<(PeerStream, String)>> {
        let Some((stream, peer)) = self.listener.accept_one().await? else { return Ok(None) };
        let pid = stream.peer_cred().ok().and_then(|c| c.pid()).and_then(|p| u32::try_from(p).ok());
        let place = pid.map(|pid| self.peers.enter(pid));
        Ok(Some((PeerStream { stream, _place: place }, peer)))
    }
}

/// An accepted connection that holds its peer's place while it is open.
#[derive(Debug)]
pub struct PeerStream {
    stream: UnixStream,
    _place: Option<PeerPlace>,
}

impl AsyncRead for PeerStream {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for PeerStream {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}

impl Abort for PeerStream {
    fn abort_on_close(&self) {
        self.stream.abort_on_close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_peer_is_listed_while_connected_and_for_the_grace_after() {
        let t = crate::testutil::TempDir::new("unix-peers");
        let (dir, path) = (t.0.join("sock"), t.0.join("sock").join("s.sock"));
        let listener = UnixListener::from_std(super::super::listener::bind_unix(&dir, &path).unwrap()).unwrap();
        let peers = Peers::new(Duration::from_millis(300));
        let tracked = Tracked::new(listener, peers.clone());
        assert!(peers.pids().is_empty());
        let me = std::process::id();
        let _client = UnixStream::connect(&path).await.unwrap();
        let (first, _) = tracked.accept_one().await.unwrap().expect("our own uid");
        let _again = UnixStream::connect(&path).await.unwrap();
        let (second, _) = tracked.accept_one().await.unwrap().expect("our own uid");
        assert_eq!(peers.pids(), vec![me]);
        drop(first);
        assert_eq!(peers.pids(), vec![me], "one connection of the peer is still open");
        drop(second);
        assert_eq!(peers.pids(), vec![me], "listed for the grace after its last connection");
        tokio::time::sleep(Duration::from_millis(400)).await;
        assert!(peers.pids().is_empty(), "gone once the grace is over");
    }
}
