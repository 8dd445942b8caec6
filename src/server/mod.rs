//! The embedded target server behind `volley serve`.
//!
//! volley needs a target it controls: the demo points at it, and the load
//! tester's own tests drive it on 127.0.0.1 port 0. Besides ordinary endpoints
//! (`/hi`, `/sleep/{ms}`, `/cpu/{ms}`, `/bytes/{n}`, `/echo`, ...) and a small
//! JSON API under `/api/` (log in, list, fetch, create) for scenario tests, it
//! has fault endpoints that answer with invalid bytes, close a keep-alive
//! connection mid-stream or never answer. Those need raw control of the
//! socket, which hyper's server does not give, so HTTP/1.1 is served by hand
//! on tokio and `httparse`. HTTP/2 comes from the `h2` crate, which leaves
//! the socket to us: on the plain listener by prior knowledge (h2c), and
//! over TLS (`--tls`, a self-signed certificate) by ALPN. Both protocols run
//! the same endpoints.
//!
//! Two server-wide controls let tests shape the target as a whole: `/pause`
//! holds every response for a while (a stall the tester must see in its
//! latencies), and [`ServerOptions::max_inflight`] gives the server a known
//! capacity (a knee a rate-stepping test can find).
//!
//! Layout: this file owns the listener, the lifecycle (spawn, run, stop),
//! the counters and the choice of protocol per connection; `preface` tells
//! h2c from HTTP/1.1, `tls` sets up TLS. `conn` runs an HTTP/1.1 connection
//! (`request` parses requests, `response` writes heads), `h2` an HTTP/2 one.
//! `routes` implements the endpoints, `api` the JSON ones, against the
//! protocol-neutral requests and replies of `reply`; `pause` holds the pause,
//! `log` the optional log of requests; `app.html` is the page at `/app`.

mod api;
mod conn;
mod h2;
mod h3;
mod log;
mod pause;
mod preface;
mod reply;
mod request;
mod response;
mod routes;
mod tls;

use std::future::Future;
use std::io::{self, Write as _};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::{Semaphore, oneshot};
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;

pub use log::LoggedRequest;
use log::RequestLog;
use pause::Pause;
use preface::Protocol;
use tls::Tls;

/// How the server is started. More options may join these; construct with
/// `..Default::default()` to stay compatible.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerOptions {
    /// Where to listen; port 0 picks a free port (see [`ServerHandle::addr`]).
    pub addr: SocketAddr,
    /// At most this many requests are handled at once across the server;
    /// later ones wait, in arrival order, for a slot before their handler
    /// runs. A slot is held from the handler's start until its response is
    /// written. `/stats`, `/pause` and the fault endpoints (`/drop`, `/stall`,
    /// `/garbage`) take no slot, so they answer (or misbehave) as usual while
    /// the server is saturated. `None` (the default) is unlimited; `Some(0)`
    /// is an error.
    pub max_inflight: Option<usize>,
    /// Serve HTTPS instead of plain HTTP: a self-signed certificate for
    /// `localhost`, `127.0.0.1` and `::1` is made at start (see
    /// [`ServerHandle::cert_pem`]), and ALPN offers `h2` and `http/1.1`.
    /// Without it the listener serves HTTP/1.1 and, by prior knowledge,
    /// HTTP/2 (h2c).
    pub tls: bool,
    /// Where to write that certificate, PEM-encoded, before serving, so
    /// clients elsewhere can trust it. Needs `tls`.
    pub cert_out: Option<PathBuf>,
    /// Serve HTTP/3 as well, on the UDP port of the same number, with the
    /// same certificate; the HTTP/1.1 and HTTP/2 responses then advertise
    /// it (`Alt-Svc: h3=":PORT"`). Needs `tls`.
    pub http3: bool,
    /// Keep a log of the requests answered, in arrival order (see
    /// [`ServerHandle::requests`]); off by default, as it costs a lock per
    /// request.
    pub log_requests: bool,
}

impl Default for ServerOptions {
    fn default() -> Self {
        Self {
            addr: SocketAddr::from(([127, 0, 0, 1], 3000)),
            max_inflight: None,
            tls: false,
            cert_out: None,
            http3: false,
            log_requests: false,
        }
    }
}

/// The server's counters at one moment, as served by `/stats`.
///
/// Requests that could not be parsed (answered with a 4xx and a close) are in
/// neither request counter, so `requests_completed <= requests_received`.
/// The request counters count HTTP/2 streams like HTTP/1.1 requests; an
/// HTTP/2 response counts as completed once its last frame is handed to the
/// connection.
#[derive(Clone, Copy, Debug, Default, serde::Serialize, PartialEq, Eq)]
pub struct StatsSnapshot {
    pub connections_accepted: u64,
    /// Connections whose handling ended, whichever side closed.
    pub connections_closed: u64,
    /// Connections served as HTTP/1.1, plain or over TLS.
    pub http1_connections: u64,
    /// Connections served as HTTP/2: h2c, or `h2` chosen by ALPN. Those
    /// closed before they showed a protocol (or finished a TLS handshake)
    /// are in neither count.
    pub h2_connections: u64,
    /// Connections served as HTTP/3 (QUIC), with their handshake done.
    pub h3_connections: u64,
    /// Requests parsed (head and body complete).
    pub requests_received: u64,
    /// Responses fully written to the socket. The fault endpoints (`/drop`,
    /// `/stall`, `/garbage`) never complete.
    pub requests_completed: u64,
}

/// State shared by the accept loop and every connection of one server.
/// Atomics are fine here: this is the target, not the load generator.
#[derive(Debug, Default)]
struct Shared {
    connections_accepted: AtomicU64,
    connections_closed: AtomicU64,
    http1_connections: AtomicU64,
    h2_connections: AtomicU64,
    h3_connections: AtomicU64,
    requests_received: AtomicU64,
    requests_completed: AtomicU64,
    /// Set at shutdown so CPU and memory work running on blocking threads,
    /// which cannot be cancelled from outside, gives up early.
    stopping: AtomicBool,
    /// Set by `/pause`, checked before every write of a response.
    pause: Pause,
    /// The in-flight slots of [`ServerOptions::max_inflight`]; `None` is
    /// unlimited, which costs a request nothing but this check. tokio's
    /// semaphore is fair, so waiting requests get slots in arrival order.
    limit: Option<Arc<Semaphore>>,
    /// The requests answered, when [`ServerOptions::log_requests`] asks.
    log: Option<RequestLog>,
    /// `h3=":PORT"`, once the server also listens for HTTP/3: its
    /// HTTP/1.1 and HTTP/2 responses carry it as `Alt-Svc`.
    alt_svc: std::sync::OnceLock<http::HeaderValue>,
}

impl Shared {
    /// # Errors
    ///
    /// `InvalidInput` for an in-flight limit of 0, or one too large for a
    /// semaphore.
    fn new(opts: &ServerOptions) -> io::Result<Self> {
        let invalid = |why: String| io::Error::new(io::ErrorKind::InvalidInput, why);
        let limit = match opts.max_inflight {
            None => None,
            Some(0) => {
                return Err(invalid(
                    "the in-flight limit (--max-inflight) must be at least 1".into(),
                ));
            }
            Some(n) if n > Semaphore::MAX_PERMITS => {
                return Err(invalid(format!(
                    "the in-flight limit (--max-inflight) must be at most {}, not {n}",
                    Semaphore::MAX_PERMITS
                )));
            }
            Some(n) => Some(Arc::new(Semaphore::new(n))),
        };
        Ok(Self {
            limit,
            log: opts.log_requests.then(RequestLog::default),
            ..Self::default()
        })
    }

    fn snapshot(&self) -> StatsSnapshot {
        StatsSnapshot {
            connections_accepted: self.connections_accepted.load(Relaxed),
            connections_closed: self.connections_closed.load(Relaxed),
            http1_connections: self.http1_connections.load(Relaxed),
            h2_connections: self.h2_connections.load(Relaxed),
            h3_connections: self.h3_connections.load(Relaxed),
            requests_received: self.requests_received.load(Relaxed),
            requests_completed: self.requests_completed.load(Relaxed),
        }
    }
}

/// Worker threads of the runtime started by [`spawn`]: enough for a loopback
/// target, few enough to leave the cores to the load generator.
const SPAWN_WORKERS: usize = 2;
/// Pending-connection queue; load tests open thousands of connections at
/// once (the kernel caps it at `somaxconn`).
const BACKLOG: u32 = 4096;
/// How long a stopping runtime waits for blocking work (`/cpu`, `/alloc`),
/// which checks `Shared::stopping` often and normally ends within a
/// millisecond.
const RUNTIME_GRACE: Duration = Duration::from_millis(500);
/// Pause after an accept error such as "too many open files", so the loop
/// does not spin while the condition lasts.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// A server running on its own thread; stops when dropped.
pub struct ServerHandle {
    addr: SocketAddr,
    /// The certificate's PEM when serving TLS.
    cert_pem: Option<String>,
    shared: Arc<Shared>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl std::fmt::Debug for ServerHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerHandle")
            .field("addr", &self.addr)
            .field("tls", &self.cert_pem.is_some())
            .finish_non_exhaustive()
    }
}

impl ServerHandle {
    /// The bound address, with port 0 resolved.
    #[must_use]
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The server's base URL: `http://ADDR`, or `https://ADDR` with TLS.
    #[must_use]
    pub fn url(&self) -> String {
        base_url(self.cert_pem.is_some(), self.addr)
    }

    /// The self-signed certificate, PEM-encoded, when the server serves
    /// TLS; a client that trusts it can verify the server as `localhost`,
    /// `127.0.0.1` or `::1`.
    #[must_use]
    pub fn cert_pem(&self) -> Option<&str> {
        self.cert_pem.as_deref()
    }

    /// The same numbers as `/stats`.
    #[must_use]
    pub fn stats(&self) -> StatsSnapshot {
        self.shared.snapshot()
    }

    /// The requests answered so far, in arrival order, when the server was
    /// started with [`ServerOptions::log_requests`] (empty otherwise). A
    /// request is logged as it is handed to its endpoint, before its answer
    /// goes out, so a client holding a response finds its request here.
    #[must_use]
    pub fn requests(&self) -> Vec<LoggedRequest> {
        self.shared
            .log
            .as_ref()
            .map(RequestLog::entries)
            .unwrap_or_default()
    }

    /// Stops accepting, closes every connection (stalled ones included) and
    /// joins the server thread.
    pub fn stop(mut self) {
        self.shut_down();
    }

    fn shut_down(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            // The thread only panics if the runtime does, and then there is
            // nothing left to clean up.
            let _ = thread.join();
        }
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        self.shut_down();
    }
}

/// Binds synchronously (so errors such as "address in use" come back here)
/// and serves on its own OS thread running a tokio multi-thread runtime with
/// 2 worker threads, so a load generator in the same process and the server
/// don't share a runtime.
///
/// # Errors
///
/// The options are invalid (an in-flight limit of 0, a certificate file
/// without TLS), or setting up TLS, writing the certificate, building the
/// runtime, binding (the message names the address) or starting the thread
/// failed.
pub fn spawn(opts: ServerOptions) -> io::Result<ServerHandle> {
    let (shared, tls) = prepare(&opts)?;
    let cert_pem = tls.as_ref().map(|tls| tls.cert_pem.clone());
    let (stop, stopped) = oneshot::channel::<()>();
    let (bound, bind_result) = std::sync::mpsc::sync_channel::<io::Result<SocketAddr>>(1);
    // The runtime is built and bound on the server thread itself, so that a
    // failure never drops a runtime on the caller's thread, which tokio
    // forbids when the caller is itself async.
    let thread = std::thread::Builder::new().name("volley-server".into()).spawn({
        let shared = Arc::clone(&shared);
        move || {
            let started: io::Result<_> = (|| {
                let runtime = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(SPAWN_WORKERS)
                    .thread_name("volley-server-worker")
                    .enable_all()
                    .build()?;
                let (listener, quic) = {
                    let _context = runtime.enter();
                    let listener = bind(opts.addr)?;
                    let quic = bind_quic(&opts, &shared, tls.as_ref(), listener.local_addr()?)?;
                    (listener, quic)
                };
                let addr = listener.local_addr()?;
                Ok((runtime, listener, quic, addr))
            })();
            let (runtime, listener, quic) = match started {
                Ok((runtime, listener, quic, addr)) => {
                    let _ = bound.send(Ok(addr));
                    (runtime, listener, quic)
                }
                Err(e) => {
                    let _ = bound.send(Err(e));
                    return;
                }
            };
            // A dropped sender means the handle is gone: stop as well.
            let shutdown = async {
                let _ = stopped.await;
            };
            runtime.block_on(serve(listener, quic, shutdown, shared, tls));
            runtime.shutdown_timeout(RUNTIME_GRACE);
        }
    })?;
    let addr = match bind_result.recv() {
        Ok(Ok(addr)) => addr,
        Ok(Err(e)) => {
            let _ = thread.join();
            return Err(e);
        }
        Err(_) => {
            let _ = thread.join();
            return Err(io::Error::other("the server thread ended before binding"));
        }
    };
    Ok(ServerHandle {
        addr,
        cert_pem,
        shared,
        stop: Some(stop),
        thread: Some(thread),
    })
}

/// Serves connections from `listener`, HTTP/1.1 and h2c, until `shutdown`
/// resolves, then closes them all. The caller binds, so it controls the address and sees bind
/// errors itself.
///
/// # Errors
///
/// None at present: failures to accept are retried, and a connection's
/// errors end only that connection. The `Result` leaves room for options
/// (such as TLS setup) that can fail.
pub async fn run(listener: TcpListener, shutdown: impl Future<Output = ()>) -> io::Result<()> {
    serve(listener, None, shutdown, Arc::new(Shared::default()), None).await;
    Ok(())
}

/// `volley serve`: binds `opts.addr`, prints
/// `volley serve: listening on http://ADDR` (`https://` with TLS; the bound
/// address, so port 0 shows the real port) and serves until Ctrl-C.
///
/// # Errors
///
/// The options are invalid (an in-flight limit of 0, a certificate file
/// without TLS), or setting up TLS, writing the certificate, building the
/// runtime or binding failed; a bind error's message names the address.
pub fn serve_forever(opts: ServerOptions) -> io::Result<()> {
    let (shared, tls) = prepare(&opts)?;
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let (listener, quic) = {
        let _context = runtime.enter();
        let listener = bind(opts.addr)?;
        let quic = bind_quic(&opts, &shared, tls.as_ref(), listener.local_addr()?)?;
        (listener, quic)
    };
    let addr = listener.local_addr()?;
    {
        // A closed stdout (say, piped into `head -1`) is no reason to stop
        // serving, so failures to print are ignored.
        let mut stdout = io::stdout().lock();
        let _ = writeln!(
            stdout,
            "volley serve: listening on {}{}",
            base_url(tls.is_some(), addr),
            if quic.is_some() {
                " (HTTP/3 too, on UDP)"
            } else {
                ""
            }
        );
        let _ = stdout.flush();
    }
    let shutdown = async {
        if tokio::signal::ctrl_c().await.is_err() {
            // Without a signal handler there is no Ctrl-C to wait for; the
            // process is then stopped by being killed.
            std::future::pending::<()>().await;
        }
    };
    runtime.block_on(serve(listener, quic, shutdown, shared, tls));
    runtime.shutdown_timeout(RUNTIME_GRACE);
    Ok(())
}

/// What a server needs before it binds: its shared state and, with TLS, a
/// certificate, written to `cert_out` when asked.
fn prepare(opts: &ServerOptions) -> io::Result<(Arc<Shared>, Option<Tls>)> {
    if opts.cert_out.is_some() && !opts.tls {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "a certificate file (--cert-out) needs TLS (--tls)",
        ));
    }
    if opts.http3 && !opts.tls {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "HTTP/3 (--http3) needs TLS (--tls): QUIC is always encrypted",
        ));
    }
    let shared = Arc::new(Shared::new(opts)?);
    let tls = opts.tls.then(Tls::self_signed).transpose()?;
    if let (Some(path), Some(tls)) = (&opts.cert_out, &tls) {
        std::fs::write(path, &tls.cert_pem).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot write the certificate to '{}': {e}", path.display()),
            )
        })?;
    }
    Ok((shared, tls))
}

fn base_url(tls: bool, addr: SocketAddr) -> String {
    let scheme = if tls { "https" } else { "http" };
    format!("{scheme}://{addr}")
}

/// Binds with an explicit backlog (std's is small for a load-test target)
/// and an error that names the address. Needs a runtime context.
fn bind(addr: SocketAddr) -> io::Result<TcpListener> {
    let named = |e: io::Error| io::Error::new(e.kind(), format!("cannot listen on {addr}: {e}"));
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()
    } else {
        TcpSocket::new_v6()
    }
    .map_err(named)?;
    // Lets `volley serve` restart at once on the port it just used, while
    // old connections sit in TIME_WAIT.
    socket.set_reuseaddr(true).map_err(named)?;
    socket.bind(addr).map_err(named)?;
    socket.listen(BACKLOG).map_err(named)
}

/// With `opts.http3`, a QUIC endpoint on the UDP port `tcp` has, which
/// the TCP responses then advertise (`Alt-Svc`). Needs a runtime context.
fn bind_quic(
    opts: &ServerOptions,
    shared: &Shared,
    tls: Option<&Tls>,
    tcp: SocketAddr,
) -> io::Result<Option<quinn::Endpoint>> {
    let Some(tls) = tls.filter(|_| opts.http3) else {
        return Ok(None);
    };
    let named =
        |e: io::Error| io::Error::new(e.kind(), format!("cannot listen for HTTP/3 on UDP {tcp}: {e}"));
    let socket = std::net::UdpSocket::bind(tcp).map_err(named)?;
    let runtime = quinn::default_runtime().ok_or_else(|| io::Error::other("no async runtime for QUIC"))?;
    let endpoint = quinn::Endpoint::new(
        h3::endpoint_config(tcp),
        Some(h3::server_config(tls)?),
        socket,
        runtime,
    )
    .map_err(named)?;
    let advert = http::HeaderValue::from_str(&format!("h3=\":{}\"", tcp.port()))
        .expect("a port makes a valid field value");
    let _ = shared.alt_svc.set(advert);
    Ok(Some(endpoint))
}

async fn serve(
    listener: TcpListener,
    quic: Option<quinn::Endpoint>,
    shutdown: impl Future<Output = ()>,
    shared: Arc<Shared>,
    tls: Option<Tls>,
) {
    let acceptor = tls.map(|tls| tls.acceptor);
    let mut connections = JoinSet::new();
    if let Some(endpoint) = &quic {
        connections.spawn(h3::serve(endpoint.clone(), Arc::clone(&shared)));
    }
    let mut shutdown = std::pin::pin!(shutdown);
    let mut reported_accept_error = false;
    loop {
        tokio::select! {
            biased;
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    shared.connections_accepted.fetch_add(1, Relaxed);
                    connections.spawn(connection(stream, Arc::clone(&shared), acceptor.clone()));
                }
                Err(e) if is_per_connection(&e) => {}
                Err(e) => {
                    // Resource exhaustion (EMFILE and the like) is the
                    // operator's to fix; say so once, on stderr.
                    if !reported_accept_error {
                        reported_accept_error = true;
                        eprintln!("volley serve: accepting connections failed: {e} (retrying)");
                    }
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                }
            },
            // Reaps finished connections so the set does not grow with every
            // connection ever accepted.
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    drop(listener);
    if let Some(endpoint) = &quic {
        endpoint.close(quinn::VarInt::from_u32(0x100), b"the server is stopping");
    }
    shared.stopping.store(true, Relaxed);
    // Aborting drops each connection's future wherever it waits (a read, a
    // sleep, a stall), which closes its socket.
    connections.shutdown().await;
}

/// Errors that concern one failed incoming connection, not the listener.
fn is_per_connection(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::Interrupted
            | io::ErrorKind::WouldBlock
    )
}

/// A connection's byte stream: plain TCP, or TLS over it.
trait Io: AsyncRead + AsyncWrite + Unpin + Send + 'static {}

impl<T: AsyncRead + AsyncWrite + Unpin + Send + 'static> Io for T {}

fn connection(
    stream: TcpStream,
    shared: Arc<Shared>,
    tls: Option<TlsAcceptor>,
) -> impl Future<Output = ()> + Send {
    /// Counts the close however the task ends. Created before the task is
    /// spawned, so a task aborted at shutdown before it ever ran still counts.
    struct Closed(Arc<Shared>);
    impl Drop for Closed {
        fn drop(&mut self) {
            self.0.connections_closed.fetch_add(1, Relaxed);
        }
    }
    let closed = Closed(Arc::clone(&shared));
    async move {
        let _closed = closed;
        // Responses are written whole or deliberately in pieces (`/slow`);
        // either way Nagle's delay would only distort the timings.
        let _ = stream.set_nodelay(true);
        match tls {
            None => {
                let mut stream = stream;
                let mut read = Vec::with_capacity(conn::BUF_SIZE);
                if let Some(protocol) = preface::sniff(&mut stream, &mut read).await {
                    serve_as(protocol, stream, shared, read).await;
                }
            }
            // A failed handshake ends the connection; the client sees why.
            Some(acceptor) => {
                if let Ok(stream) = acceptor.accept(stream).await {
                    serve_as(tls::negotiated(&stream), stream, shared, Vec::new()).await;
                }
            }
        }
    }
}

/// Serves `protocol` on `stream`, whose first bytes, already read, are in
/// `read`.
async fn serve_as(protocol: Protocol, stream: impl Io, shared: Arc<Shared>, read: Vec<u8>) {
    match protocol {
        Protocol::Http1 => {
            shared.http1_connections.fetch_add(1, Relaxed);
            conn::serve(stream, shared, read).await;
        }
        Protocol::Http2 => {
            shared.h2_connections.fetch_add(1, Relaxed);
            h2::serve(preface::Rewind::new(read, stream), shared).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limited(max_inflight: Option<usize>) -> io::Result<Shared> {
        Shared::new(&ServerOptions {
            max_inflight,
            ..ServerOptions::default()
        })
    }

    #[test]
    fn in_flight_limit_is_validated() {
        assert!(limited(None).unwrap().limit.is_none());
        let shared = limited(Some(4)).unwrap();
        assert_eq!(shared.limit.as_ref().map(|l| l.available_permits()), Some(4));
        for bad in [0, usize::MAX] {
            let err = limited(Some(bad)).expect_err("rejected");
            assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
            assert!(err.to_string().contains("--max-inflight"), "{err}");
        }
    }
}
