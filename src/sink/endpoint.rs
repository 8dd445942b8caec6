//! A small read-only HTTP endpoint on a thread of its own: what the live
//! dashboard and the Prometheus scrape endpoint both are.
//!
//! hyper (with hyper-util's tokio glue) because these are plain web
//! endpoints, not the load path: a well-kept server gets HTTP details
//! (keep-alive, chunking, bad requests) right that a hand-written one would
//! have to relearn, and tokio is already a dependency. Each endpoint runs on
//! its own thread's single-threaded runtime, so nothing of it runs on the
//! engine's or the collector's threads.

use super::SinkError;
use http::{Request, Response};
use hyper::body::{Body, Incoming};
use std::convert::Infallible;
use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use tokio::sync::watch;

/// A serving endpoint; dropping it stops accepting and ends its thread.
pub struct Running {
    stop: watch::Sender<bool>,
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}

/// What an endpoint is called in its thread's name and its error lines.
pub struct Naming {
    /// The thread's name, e.g. `volley-dashboard`.
    pub thread: &'static str,
    /// The prefix of setup errors, e.g. `dashboard`.
    pub label: &'static str,
    /// What it serves, in the error when its address cannot be bound,
    /// e.g. `the dashboard`.
    pub served: &'static str,
    /// What to give instead of an address that cannot be bound.
    pub hint: &'static str,
    /// Where its thread runs.
    pub priority: crate::sys::ThreadPriority,
}

/// Binds `addr` now, so that a bad address fails before the run, then
/// answers every request with `route` from a thread of its own.
pub fn start<B, R>(addr: SocketAddr, naming: Naming, route: R) -> Result<(Running, SocketAddr), SinkError>
where
    R: Fn(&Request<Incoming>) -> Response<B> + Send + Sync + 'static,
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let (label, priority) = (naming.label, naming.priority);
    let listener = TcpListener::bind(addr)
        .and_then(|l| l.set_nonblocking(true).map(|()| l))
        .map_err(|source| SinkError::Bind {
            served: naming.served,
            addr,
            hint: naming.hint,
            source,
        })?;
    let bound = listener.local_addr().map_err(|e| SinkError::Address(label, e))?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .map_err(|e| SinkError::Runtime(label, e))?;
    let (stop, mut stopped) = watch::channel(false);
    let route = Arc::new(route);
    std::thread::Builder::new()
        .name(naming.thread.into())
        .spawn(move || {
            priority.apply();
            runtime.block_on(async move {
                let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
                    return;
                };
                loop {
                    let accepted = tokio::select! {
                        accepted = listener.accept() => accepted,
                        _ = stopped.changed() => return,
                    };
                    let Ok((socket, _)) = accepted else { continue };
                    let route = Arc::clone(&route);
                    let service = hyper::service::service_fn(move |request| {
                        let response = route(&request);
                        async move { Ok::<_, Infallible>(response) }
                    });
                    tokio::spawn(async move {
                        let io = hyper_util::rt::TokioIo::new(socket);
                        let _ = hyper::server::conn::http1::Builder::new()
                            .serve_connection(io, service)
                            .await;
                    });
                }
            });
        })
        .map_err(|source| SinkError::Thread {
            label: label.to_string(),
            source,
        })?;
    Ok((Running { stop }, bound))
}
