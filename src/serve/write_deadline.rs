//! A client that stops reading is dropped, whatever its protocol: a write
//! to it that makes no progress for [`WRITE_TIMEOUT`] fails. The WebSocket
//! loop bounds each send with it; HTTP connections (hyper owns their
//! writes) run over [`WriteDeadline`], so a client that never reads its
//! answers or its event stream holds its connection no longer than that.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Sleep;

/// How long a write may wait for the client to read.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(15);

/// A connection that can be closed with a reset: what was queued for a
/// client that stopped reading is discarded at once rather than kept by the
/// kernel (megabytes, for minutes) trying to deliver it.
pub trait Abort {
    fn abort_on_close(&self);
}

impl Abort for tokio::net::TcpStream {
    fn abort_on_close(&self) {
        let _ = self.set_zero_linger();
    }
}

/// A Unix socket's queued bytes go with it when it is closed.
impl Abort for tokio::net::UnixStream {
    fn abort_on_close(&self) {}
}

/// `S` whose writes fail once one has been pending for `limit`.
pub struct WriteDeadline<S> {
    inner: S,
    limit: Duration,
    /// Armed when a write first returns `Pending`, disarmed by progress.
    stalled: Option<Pin<Box<Sleep>>>,
}

impl<S: Abort> WriteDeadline<S> {
    pub fn new(inner: S, limit: Duration) -> Self {
        Self { inner, limit, stalled: None }
    }

    /// A pending write: ready with an error once the deadline passed (and
    /// the connection will be reset when closed).
    fn check(&mut self, cx: &mut Context<'_>) -> Poll<io::Error> {
        let limit = self.limit;
        let sleep = self.stalled.get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        match sleep.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready({
                self.inner.abort_on_close();
                io::Error::new(io::ErrorKind::TimedOut, format!("the client read nothing for {} s", limit.as_secs()))
            }),
            Poll::Pending => Poll::Pending,
        }
    }

    fn progress<T>(&mut self, cx: &mut Context<'_>, polled: Poll<io::Result<T>>) -> Poll<io::Result<T>> {
        match polled {
            Poll::Ready(result) => {
                self.stalled = None;
                Poll::Ready(result)
            }
            Poll::Pending => self.check(cx).map(Err),
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for WriteDeadline<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Abort + Unpin> AsyncWrite for WriteDeadline<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.progress(cx, polled)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.progress(cx, polled)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let polled = Pin::new(&mut self.inner).poll_flush(cx);
        self.progress(cx, polled)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    impl Abort for tokio::io::DuplexStream {
        fn abort_on_close(&self) {}
    }

    #[tokio::test]
    async fn a_write_nobody_reads_fails_after_the_limit() {
        let (a, _b) = tokio::io::duplex(64);
        let mut slow = WriteDeadline::new(a, Duration::from_millis(100));
        let started = std::time::Instant::now();
        let err = slow.write_all(&[0u8; 1024]).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        assert!(started.elapsed() >= Duration::from_millis(100));
    }

    #[tokio::test]
    async fn progress_rearms_the_deadline() {
        let (a, mut b) = tokio::io::duplex(16);
        let mut w = WriteDeadline::new(a, Duration::from_millis(200));
        let reader = tokio::spawn(async move {
            let mut got = 0;
            let mut buf = [0u8; 16];
            while got < 256 {
                tokio::time::sleep(Duration::from_millis(20)).await;
                got += tokio::io::AsyncReadExt::read(&mut b, &mut buf).await.unwrap();
            }
        });
        // 256 bytes through a 16-byte pipe read every 20 ms: slow, never stalled.
        w.write_all(&[1u8; 256]).await.unwrap();
        reader.await.unwrap();
    }
}
