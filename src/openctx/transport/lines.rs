//! A child's stdout or stderr read as `\n`-terminated lines, none held longer
//! than a cap: a provider that never ends its line cannot grow the editor's
//! memory. The framing is tokio-util's delimiter codec with a maximum length
//! (`AnyDelimiterCodec`, the bytes form of `LinesCodec`): a line over the cap
//! is reported once and the codec drops the rest of it as it arrives, then
//! reads on from the next line. The bytes form, not `LinesCodec` itself:
//! `LinesCodec` fails on a line that is not UTF-8, and these lines are handed
//! on as bytes (stdout's to the JSON parser, which reports such a line as not
//! a message; stderr's to the log, decoded lossily).
//!
//! The decoder is called directly rather than through `FramedRead`, which
//! ends its stream after any decoder error; an over-long line is not the end.

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio_util::codec::{AnyDelimiterCodec, AnyDelimiterCodecError, Decoder};

/// Bytes asked of the pipe per read (a pipe holds 64 KiB at most).
const READ_CHUNK: usize = 8 * 1024;

#[derive(Debug, PartialEq, Eq)]
pub(super) enum LineRead {
    /// One line, without its `\n` (the last line may lack one).
    Line(Bytes),
    /// A line longer than the cap: skipped, never held whole.
    TooLong,
    Eof,
}

pub(super) struct CappedLines<R> {
    reader: R,
    codec: AnyDelimiterCodec,
    buf: BytesMut,
    eof: bool,
}

impl<R: AsyncRead + Unpin> CappedLines<R> {
    /// Lines of at most `cap` bytes (the `\n` not counted).
    pub(super) fn new(reader: R, cap: usize) -> Self {
        CappedLines {
            reader,
            codec: AnyDelimiterCodec::new_with_max_length(b"\n".to_vec(), b"\n".to_vec(), cap),
            buf: BytesMut::new(),
            eof: false,
        }
    }

    /// The next line; [`LineRead::Eof`] once the pipe is closed and every
    /// line before it was returned.
    pub(super) async fn next(&mut self) -> std::io::Result<LineRead> {
        loop {
            let decoded =
                if self.eof { self.codec.decode_eof(&mut self.buf) } else { self.codec.decode(&mut self.buf) };
            match decoded {
                Ok(Some(line)) => return Ok(LineRead::Line(line)),
                Ok(None) if self.eof => return Ok(LineRead::Eof),
                Ok(None) => {}
                Err(AnyDelimiterCodecError::MaxChunkLengthExceeded) => return Ok(LineRead::TooLong),
                Err(AnyDelimiterCodecError::Io(e)) => return Err(e),
            }
            self.buf.reserve(READ_CHUNK);
            if self.reader.read_buf(&mut self.buf).await? == 0 {
                self.eof = true;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    /// `data` through a pipe that carries at most `chunk` bytes at a time.
    fn piped(data: Vec<u8>, chunk: usize) -> tokio::io::DuplexStream {
        let (mut tx, rx) = tokio::io::duplex(chunk);
        tokio::spawn(async move {
            tx.write_all(&data).await.unwrap();
        });
        rx
    }

    async fn all(data: &[u8], chunk: usize, cap: usize) -> Vec<LineRead> {
        let mut lines = CappedLines::new(piped(data.to_vec(), chunk), cap);
        let mut out = Vec::new();
        loop {
            let line = lines.next().await.unwrap();
            let eof = line == LineRead::Eof;
            out.push(line);
            if eof {
                return out;
            }
        }
    }

    fn line(s: &str) -> LineRead {
        LineRead::Line(Bytes::copy_from_slice(s.as_bytes()))
    }

    #[tokio::test]
    async fn capped_lines() {
        let data = b"short\nthis line is too long\nok\nlast";
        for chunk in [4, 1 << 16] {
            let got = all(data, chunk, 10).await;
            assert_eq!(got, [line("short"), LineRead::TooLong, line("ok"), line("last"), LineRead::Eof], "{chunk}");
        }
    }

    #[tokio::test]
    async fn at_the_cap_and_one_past() {
        for chunk in [3, 1 << 16] {
            let got = all(b"0123456789\n0123456789a\n\n0123456789", chunk, 10).await;
            assert_eq!(
                got,
                [line("0123456789"), LineRead::TooLong, line(""), line("0123456789"), LineRead::Eof],
                "{chunk}"
            );
            // One past at the very end, without a newline.
            let got = all(b"ok\n0123456789a", chunk, 10).await;
            assert_eq!(got, [line("ok"), LineRead::TooLong, LineRead::Eof], "{chunk}");
        }
    }

    #[tokio::test]
    async fn bytes_pass_through_unchanged() {
        // Not UTF-8, a carriage return, a lone `\r` at the end: as they came.
        let got = all(b"\xff\xfe\r\na\rb\n\r", 5, 10).await;
        assert_eq!(got, [LineRead::Line(Bytes::from_static(b"\xff\xfe\r")), line("a\rb"), line("\r"), LineRead::Eof]);
        assert_eq!(all(b"", 5, 10).await, [LineRead::Eof]);
    }

    #[tokio::test]
    async fn a_long_line_is_judged_before_it_has_all_arrived() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use std::sync::Arc;
        let (cap, pipe) = (1024, 4096);
        let (mut tx, rx) = tokio::io::duplex(pipe);
        let written = Arc::new(AtomicUsize::new(0));
        let counter = written.clone();
        tokio::spawn(async move {
            // 4 MiB without a newline, then a short line: each write waits
            // while the pipe is full, so `written` is at most what was read
            // plus one pipe.
            for _ in 0..(4 << 20) / pipe {
                tx.write_all(&[b'x'; 4096]).await.unwrap();
                counter.fetch_add(pipe, Ordering::SeqCst);
            }
            tx.write_all(b"\nafter\n").await.unwrap();
        });
        let mut lines = CappedLines::new(rx, cap);
        assert_eq!(lines.next().await.unwrap(), LineRead::TooLong);
        let seen = written.load(Ordering::SeqCst);
        assert!(seen <= cap + READ_CHUNK + 2 * pipe, "{seen} bytes written before the line was judged too long");
        assert_eq!(lines.next().await.unwrap(), line("after"));
        assert_eq!(written.load(Ordering::SeqCst), 4 << 20);
        assert_eq!(lines.next().await.unwrap(), LineRead::Eof);
    }
}
