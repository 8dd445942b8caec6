//! Opening connections: TCP with a connect timeout, optionally wrapped in
//! TLS as configured by [`crate::tls::TlsSetup`], each driven by tokio's
//! epoll reactor or by the worker's io_uring ([`uring`]).

pub mod uring;

use crate::cli::IoChoice;
use crate::recorder::Recorder;
use crate::sample::{ErrorDetail, ErrorKind, RequestError};
use crate::target::Target;
use crate::tls::TlsSetup;
use std::cell::{Cell, RefCell};
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use uring::{Ring, RingSocket};

/// How a run's workers wait on their sockets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// Completions, through one io_uring per worker ([`uring`]).
    Uring,
    /// Readiness, through tokio's epoll reactor.
    Epoll,
}

impl Backend {
    /// As the header and the reports name it.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Uring => "io_uring",
            Backend::Epoll => "epoll",
        }
    }
}

/// A run's backend, and why io_uring was refused where it was wanted.
#[derive(Clone, Debug)]
pub struct Io {
    pub backend: Backend,
    pub refused: Option<String>,
    /// Rings may wait for a few completions at once (not `--no-batch`).
    pub batch: bool,
}

impl Io {
    /// Settles `--io` on this machine: io_uring only where [`uring::probe`]
    /// runs what the backend needs; never an error. `auto` leaves on epoll
    /// a run of HTTP/2 that cannot wait for batches of responses
    /// (`unbatched_http2`: over TLS, in the open model, or with
    /// `--no-batch`): there, with many streams per connection, the ring
    /// measured up to 15% more CPU per request (bench/vs-shb.sh). Plain
    /// HTTP/2 in the closed model waits for batches on the ring: 0.62x
    /// epoll's CPU per request at 10 connections of 10 streams, with lower
    /// p50 and p99, and about the same at 50 of one, with a lower p50;
    /// over HTTP/1.1 the ring costs a little less, and over HTTP/3 0.86x at
    /// one stream per connection, about the same at ten (bench/vs-h3.sh).
    pub fn settle(asked: IoChoice, unbatched_http2: bool, batch: bool) -> Io {
        if asked == IoChoice::Epoll || (asked == IoChoice::Auto && unbatched_http2) {
            return Io {
                backend: Backend::Epoll,
                refused: None,
                batch,
            };
        }
        match uring::probe() {
            Ok(()) => Io {
                backend: Backend::Uring,
                refused: None,
                batch,
            },
            Err(err) => Io {
                backend: Backend::Epoll,
                refused: Some(format!(
                    "io_uring is not available here ({err}): running on epoll"
                )),
                batch,
            },
        }
    }
}

/// A connection to the target, plain or TLS.
pub enum Stream {
    Plain(Transport),
    Tls(Box<TlsStream<Transport>>),
}

/// The socket under a [`Stream`], and how the worker waits on it.
pub enum Transport {
    /// Readiness, through tokio's epoll reactor.
    Epoll(TcpStream),
    /// Completions, through the worker's ring.
    Uring(RingSocket),
}

impl AsyncRead for Transport {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Transport::Epoll(s) => Pin::new(s).poll_read(cx, buf),
            Transport::Uring(s) => Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Transport {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Transport::Epoll(s) => Pin::new(s).poll_write(cx, buf),
            Transport::Uring(s) => Pin::new(s).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Transport::Epoll(s) => Pin::new(s).poll_flush(cx),
            Transport::Uring(s) => Pin::new(s).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Transport::Epoll(s) => Pin::new(s).poll_shutdown(cx),
            Transport::Uring(s) => Pin::new(s).poll_shutdown(cx),
        }
    }
}

impl Stream {
    /// When the kernel received the bytes read last, where it stamps them
    /// (a plain connection on a ring that stamps: see
    /// [`Ring::stamp_receives`]).
    pub fn received_at(&self) -> Option<std::time::Instant> {
        match self {
            Stream::Plain(Transport::Uring(socket)) => socket.received_at(),
            _ => None,
        }
    }

    /// The ring socket under a plain connection on io_uring.
    pub fn ring_socket(&mut self) -> Option<&mut RingSocket> {
        match self {
            Stream::Plain(Transport::Uring(socket)) => Some(socket),
            _ => None,
        }
    }
}

impl AsyncRead for Stream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

/// The closed model's first wait after a failed connect, before the
/// loop's next try; it doubles with each failed try, up to
/// [`BACKOFF_AT_MOST`], and a successful connect sets it back.
pub const BACKOFF_FIRST: Duration = Duration::from_millis(10);

/// The longest wait between failed connects: a target that comes back is
/// found within a second.
pub const BACKOFF_AT_MOST: Duration = Duration::from_secs(1);

/// Opens connections to one target for one worker.
pub struct Connector {
    addrs: Vec<SocketAddr>,
    /// The address that answered last, tried first next time, so a host
    /// resolving to an unused ::1 before 127.0.0.1 costs one failure, not one
    /// per connection.
    preferred: Cell<usize>,
    tls: Option<TlsSetup>,
    connect_timeout: Duration,
    /// The worker's ring, when the run's sockets are driven by io_uring.
    ring: Option<Rc<Ring>>,
    /// While the worker's connects fail: the wait before its next try
    /// ([`Connector::back_off`]). `None` while they succeed.
    backoff: Cell<Option<Duration>>,
}

impl Connector {
    pub fn new(target: &Target, tls: Option<TlsSetup>, connect_timeout: Duration) -> Connector {
        Connector {
            addrs: target.addrs.clone(),
            preferred: Cell::new(0),
            tls,
            connect_timeout,
            ring: None,
            backoff: Cell::new(None),
        }
    }

    /// The same connector, its sockets handed to `ring` once connected.
    pub fn on_ring(self, ring: Rc<Ring>) -> Connector {
        Connector {
            ring: Some(ring),
            ..self
        }
    }

    /// The same connector, connecting to `addr` alone (the server a
    /// script's `setup()` gave its thread).
    pub fn to(self, addr: SocketAddr) -> Connector {
        Connector {
            addrs: vec![addr],
            preferred: Cell::new(0),
            ..self
        }
    }

    /// The worker's ring, if its sockets run on one.
    pub fn ring(&self) -> Option<&Rc<Ring>> {
        self.ring.as_ref()
    }

    /// Connects and handshakes (for TLS), both within the one connect
    /// timeout; a finished handshake is recorded in `recorder` (this
    /// worker's own: borrowed only after the handshake, never across an
    /// await).
    ///
    /// A failed connect starts (or continues) a series of failures, whose
    /// time the recorder counts as refused and after which the loop waits
    /// ([`Connector::back_off`]); a successful one ends it.
    pub async fn connect(&self, recorder: &RefCell<Recorder>) -> Result<Stream, RequestError> {
        let deadline = tokio::time::Instant::now() + self.connect_timeout;
        let connected = match tokio::time::timeout_at(deadline, self.connect_transport()).await {
            Ok(result) => result,
            Err(_) => Err(RequestError::new(
                ErrorKind::Connect,
                ErrorDetail::ConnectTimeout(self.connect_timeout),
            )),
        };
        let transport = match connected {
            Ok(transport) => {
                if self.backoff.get().is_some() {
                    self.backoff.set(None);
                    recorder.borrow_mut().connects_restored(Instant::now());
                }
                transport
            }
            Err(err) => {
                if self.backoff.get().is_none() {
                    self.backoff.set(Some(BACKOFF_FIRST));
                    // A timed-out connect was refused from its start.
                    let now = Instant::now();
                    let began = match err.detail {
                        ErrorDetail::ConnectTimeout(took) => now.checked_sub(took).unwrap_or(now),
                        _ => now,
                    };
                    recorder.borrow_mut().connects_refused(began);
                }
                return Err(err);
            }
        };
        let Some(tls) = &self.tls else {
            return Ok(Stream::Plain(transport));
        };
        let connected = Instant::now();
        match tokio::time::timeout_at(deadline, tls.handshake(transport)).await {
            Ok(Ok(stream)) => {
                let resumed = stream.get_ref().1.handshake_kind() == Some(rustls::HandshakeKind::Resumed);
                recorder
                    .borrow_mut()
                    .record_handshake(connected.elapsed(), resumed);
                Ok(Stream::Tls(Box::new(stream)))
            }
            Ok(Err(err)) => Err(RequestError::io(ErrorKind::Tls, err)),
            Err(_) => Err(RequestError::new(
                ErrorKind::Tls,
                ErrorDetail::HandshakeTimeout(self.connect_timeout),
            )),
        }
    }

    /// The closed model, after a request that failed with `err`: when it
    /// was a failed connect and the worker's connects are failing, waits
    /// before the loop's next try, so that a dead target is tried a few
    /// times a second rather than as fast as the kernel refuses (hundreds
    /// of thousands of times a second, each counted as an error, and a
    /// storm for a target that comes back). The wait doubles with each
    /// failed try up to [`BACKOFF_AT_MOST`]. Returns at once otherwise: a
    /// worker whose connects succeed does nothing more. The phase's end and
    /// Ctrl-C end the wait, as they end every loop.
    pub async fn back_off(&self, err: &RequestError) {
        if err.kind != ErrorKind::Connect {
            return;
        }
        let Some(wait) = self.backoff.get() else {
            return;
        };
        self.backoff.set(Some((wait * 2).min(BACKOFF_AT_MOST)));
        tokio::time::sleep(wait).await;
    }

    /// A connected socket, as this worker drives it: connected on its
    /// ring, or through tokio's reactor.
    async fn connect_transport(&self) -> Result<Transport, RequestError> {
        if let Some(ring) = &self.ring {
            return self
                .connect_any(|addr| ring.connect(addr))
                .await
                .map(Transport::Uring);
        }
        let tcp = self.connect_any(TcpStream::connect).await?;
        // Requests are small and latency matters more than segment count.
        let _ = tcp.set_nodelay(true);
        Ok(Transport::Epoll(tcp))
    }

    /// Connects with `connect` to the target's addresses in turn, from the
    /// one that answered last.
    async fn connect_any<S, F>(&self, connect: impl Fn(SocketAddr) -> F) -> Result<S, RequestError>
    where
        F: Future<Output = io::Result<S>>,
    {
        let first = self.preferred.get();
        let mut last_err = None;
        for i in 0..self.addrs.len() {
            let index = (first + i) % self.addrs.len();
            match connect(self.addrs[index]).await {
                Ok(stream) => {
                    self.preferred.set(index);
                    return Ok(stream);
                }
                Err(err) => last_err = Some(err),
            }
        }
        let err = last_err.unwrap_or_else(|| io::Error::other("no address to connect to"));
        Err(RequestError::io(ErrorKind::Connect, err))
    }
}
