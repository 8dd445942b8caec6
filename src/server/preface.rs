//! Telling HTTP/2 from HTTP/1.1 on a plain connection.
//!
//! Without TLS there is no ALPN to say which protocol a client speaks. An
//! HTTP/2 client that knows the server speaks it ("prior knowledge", h2c)
//! opens with a fixed preface that no HTTP/1.1 request starts with, so the
//! first bytes decide. They are read rather than peeked at: peeking at a
//! preface that arrives in pieces would spin until the rest came. The bytes
//! read are handed on: to the HTTP/1.1 connection as the start of its input,
//! or replayed to the HTTP/2 server through [`Rewind`].

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, ReadBuf};

/// What an HTTP/2 connection starts with (RFC 9113 section 3.4).
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Protocol {
    Http1,
    Http2,
}

/// Reads from `stream` into `read` until its bytes either are the HTTP/2
/// preface or cannot be. `None` when the client closed (or the read failed)
/// before saying.
pub(super) async fn sniff(stream: &mut (impl AsyncRead + Unpin), read: &mut Vec<u8>) -> Option<Protocol> {
    loop {
        if let Some(protocol) = decide(read) {
            return Some(protocol);
        }
        match stream.read_buf(read).await {
            Ok(0) | Err(_) => return None,
            Ok(_) => {}
        }
    }
}

/// The protocol the first bytes of a connection show, if they show one yet.
fn decide(start: &[u8]) -> Option<Protocol> {
    let n = start.len().min(PREFACE.len());
    if start[..n] != PREFACE[..n] {
        Some(Protocol::Http1)
    } else if n == PREFACE.len() {
        Some(Protocol::Http2)
    } else {
        None
    }
}

/// A stream whose first reads return bytes already read from it.
pub(super) struct Rewind<S> {
    read: Vec<u8>,
    /// How much of `read` has been returned again.
    at: usize,
    inner: S,
}

impl<S> Rewind<S> {
    pub(super) fn new(read: Vec<u8>, inner: S) -> Self {
        Self { read, at: 0, inner }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Rewind<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if this.at < this.read.len() {
            let n = buf.remaining().min(this.read.len() - this.at);
            buf.put_slice(&this.read[this.at..this.at + n]);
            this.at += n;
            if this.at == this.read.len() {
                // Replayed: the buffer is not needed for the rest of the
                // connection's life.
                this.read = Vec::new();
                this.at = 0;
            }
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Rewind<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt as _;

    #[test]
    fn the_first_bytes_decide() {
        assert_eq!(decide(b""), None);
        assert_eq!(decide(b"PRI * HTTP/2.0\r\n"), None);
        assert_eq!(decide(PREFACE), Some(Protocol::Http2));
        assert_eq!(
            decide(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00"),
            Some(Protocol::Http2)
        );
        assert_eq!(decide(b"G"), Some(Protocol::Http1));
        assert_eq!(decide(b"POST / HTTP/1.1\r\n"), Some(Protocol::Http1));
        assert_eq!(decide(b"PRI * HTTP/1.1\r\n\r\n"), Some(Protocol::Http1));
    }

    #[tokio::test]
    async fn a_preface_in_pieces_is_read_whole_and_replayed() {
        let (mut client, mut server) = tokio::io::duplex(64);
        let sender = tokio::spawn(async move {
            for piece in PREFACE.chunks(5) {
                client.write_all(piece).await.unwrap();
                tokio::task::yield_now().await;
            }
            client.write_all(b"after").await.unwrap();
        });
        let mut read = Vec::new();
        assert_eq!(sniff(&mut server, &mut read).await, Some(Protocol::Http2));
        sender.await.unwrap();
        let mut replayed = Vec::new();
        Rewind::new(read, server)
            .read_to_end(&mut replayed)
            .await
            .unwrap();
        assert_eq!(replayed, [PREFACE, b"after"].concat());
    }

    #[tokio::test]
    async fn a_close_before_the_first_byte_is_no_protocol() {
        let (client, mut server) = tokio::io::duplex(64);
        drop(client);
        assert_eq!(sniff(&mut server, &mut Vec::new()).await, None);
    }
}
