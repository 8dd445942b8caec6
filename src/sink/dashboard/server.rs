//! The dashboard's HTTP side: the page at `/`, Server-Sent Events at
//! `/events`, served by [`crate::sink::endpoint`] (hyper on its own thread),
//! so nothing of it runs on the engine's or the collector's threads.
//!
//! The [`Hub`] keeps every event published so far (one per interval, so
//! memory grows with the number of intervals, not requests) and a bounded
//! queue per browser. A browser whose queue is full is dropped rather than
//! buffered for; a page opened later gets the whole history first.

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use hyper::body::{Body, Frame, Incoming};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// Events a browser may fall behind by before it is dropped.
const CLIENT_QUEUE: usize = 64;

/// The events of a run and the browsers following them.
#[derive(Default)]
pub struct Hub {
    state: Mutex<HubState>,
    /// Event streams still being written to a browser.
    streams: AtomicUsize,
}

#[derive(Default)]
struct HubState {
    history: Vec<Bytes>,
    /// The last full interval event: its figures so far replace the ones
    /// before, so the history keeps only each interval's row.
    latest: Option<Bytes>,
    clients: Vec<mpsc::Sender<Bytes>>,
    closed: bool,
}

fn message(event: &str, data: &str) -> Bytes {
    Bytes::from(format!("event: {event}\ndata: {data}\n\n"))
}

impl Hub {
    fn state(&self) -> MutexGuard<'_, HubState> {
        // A panic elsewhere cannot leave the history half-written: pushes are
        // single calls, so a poisoned lock's data is still whole.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Offers an event to every browser; those that cannot take it now
    /// are dropped.
    fn send(state: &mut HubState, message: &Bytes) {
        state.clients.retain(|c| c.try_send(message.clone()).is_ok());
    }

    /// Publishes an event that a later page needs too (a run starts or
    /// ends): it is kept in the history.
    pub fn publish(&self, event: &str, data: &str) {
        let message = message(event, data);
        let mut state = self.state();
        state.latest = None;
        state.history.push(message.clone());
        Self::send(&mut state, &message);
    }

    /// Publishes an interval: browsers get the full event; the history
    /// keeps the compact one (the row) and only the latest full event.
    pub fn publish_interval(&self, full: (&str, &str), compact: (&str, &str)) {
        let message = message(full.0, full.1);
        let mut state = self.state();
        state.history.push(self::message(compact.0, compact.1));
        state.latest = Some(message.clone());
        Self::send(&mut state, &message);
    }

    /// No more events: every stream ends once it has sent what it holds.
    pub fn close(&self) {
        let mut state = self.state();
        state.closed = true;
        state.clients.clear();
    }

    /// The history so far and, while the run goes on, a queue of what follows.
    fn subscribe(&self) -> (Bytes, Option<mpsc::Receiver<Bytes>>) {
        let mut state = self.state();
        let mut history = state.history.concat();
        history.extend_from_slice(state.latest.as_deref().unwrap_or_default());
        let history = Bytes::from(history);
        if state.closed {
            return (history, None);
        }
        let (tx, rx) = mpsc::channel(CLIENT_QUEUE);
        state.clients.push(tx);
        (history, Some(rx))
    }

    /// Waits, at most `limit`, until every browser has been sent the end.
    pub fn drain(&self, limit: Duration) {
        let deadline = Instant::now() + limit;
        while self.streams.load(Ordering::Acquire) > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// One browser's event stream: the history, then each new event.
struct EventStream {
    history: Option<Bytes>,
    live: Option<mpsc::Receiver<Bytes>>,
    hub: Arc<Hub>,
}

impl Drop for EventStream {
    fn drop(&mut self) {
        self.hub.streams.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A response body: a whole page, or an event stream.
enum Reply {
    Whole(Option<Bytes>),
    Events(EventStream),
}

impl Body for Reply {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.get_mut() {
            Reply::Whole(bytes) => Poll::Ready(bytes.take().map(|b| Ok(Frame::data(b)))),
            Reply::Events(stream) => {
                if let Some(history) = stream.history.take().filter(|h| !h.is_empty()) {
                    return Poll::Ready(Some(Ok(Frame::data(history))));
                }
                match &mut stream.live {
                    Some(rx) => rx.poll_recv(cx).map(|event| event.map(|e| Ok(Frame::data(e)))),
                    None => Poll::Ready(None),
                }
            }
        }
    }
}

fn respond(status: StatusCode, content_type: &str, body: Reply) -> Response<Reply> {
    let mut response = Response::new(body);
    *response.status_mut() = status;
    let headers = response.headers_mut();
    if let Ok(value) = content_type.parse() {
        headers.insert(header::CONTENT_TYPE, value);
    }
    headers.insert(header::CACHE_CONTROL, http::HeaderValue::from_static("no-store"));
    response
}

fn route(request: &Request<Incoming>, hub: &Arc<Hub>, page: &Bytes) -> Response<Reply> {
    let text = |status, message: &str| {
        respond(
            status,
            "text/plain; charset=utf-8",
            Reply::Whole(Some(Bytes::from(message.to_string()))),
        )
    };
    if request.method() != Method::GET {
        return text(StatusCode::METHOD_NOT_ALLOWED, "the dashboard is read-only\n");
    }
    match request.uri().path() {
        "/" => respond(
            StatusCode::OK,
            "text/html; charset=utf-8",
            Reply::Whole(Some(page.clone())),
        ),
        "/events" => {
            let (history, live) = hub.subscribe();
            hub.streams.fetch_add(1, Ordering::AcqRel);
            let stream = EventStream {
                history: Some(history),
                live,
                hub: Arc::clone(hub),
            };
            respond(StatusCode::OK, "text/event-stream", Reply::Events(stream))
        }
        _ => text(StatusCode::NOT_FOUND, "not found: the dashboard is at /\n"),
    }
}

/// The running server; dropping it stops accepting and ends its thread.
pub type Server = crate::sink::endpoint::Running;

/// Binds `addr` now (so a bad address fails before the run) and serves
/// from a thread of its own.
pub fn start(
    addr: SocketAddr,
    hub: Arc<Hub>,
    page: String,
    priority: crate::sys::ThreadPriority,
) -> Result<(Server, SocketAddr), crate::sink::SinkError> {
    let page = Bytes::from(page);
    crate::sink::endpoint::start(
        addr,
        crate::sink::endpoint::Naming {
            thread: "volley-dashboard",
            label: "dashboard",
            served: "the dashboard",
            hint: "pick another address: --dashboard=127.0.0.1:PORT",
            priority,
        },
        move |request| route(request, &hub, &page),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_browser_that_falls_behind_is_dropped_not_buffered_for() {
        let hub = Hub::default();
        let (_, Some(mut slow)) = hub.subscribe() else {
            panic!("open hub")
        };
        for i in 0..CLIENT_QUEUE + 10 {
            hub.publish("interval", &i.to_string());
        }
        assert!(hub.state().clients.is_empty(), "the slow browser was dropped");
        let mut got = 0;
        while slow.try_recv().is_ok() {
            got += 1;
        }
        assert_eq!(got, CLIENT_QUEUE, "it keeps only what fit in its queue");
        assert_eq!(hub.state().history.len(), CLIENT_QUEUE + 10);
    }

    #[test]
    fn the_history_keeps_rows_and_only_the_latest_full_interval() {
        let hub = Hub::default();
        hub.publish("run", "{}");
        hub.publish_interval(("interval", "full 1"), ("row", "1"));
        hub.publish_interval(("interval", "full 2"), ("row", "2"));
        let (history, _) = hub.subscribe();
        assert_eq!(
            &history[..],
            &b"event: run\ndata: {}\n\nevent: row\ndata: 1\n\nevent: row\ndata: 2\n\nevent: interval\ndata: full 2\n\n"[..]
        );
        hub.publish("run_done", "{}");
        let (history, _) = hub.subscribe();
        assert!(
            !String::from_utf8_lossy(&history).contains("full"),
            "a finished run's summary replaces it"
        );
    }

    #[test]
    fn a_late_browser_gets_the_history_first_and_nothing_after_the_end() {
        let hub = Hub::default();
        hub.publish("run", "{}");
        hub.publish("interval", "1");
        let (history, live) = hub.subscribe();
        assert_eq!(
            &history[..],
            b"event: run\ndata: {}\n\nevent: interval\ndata: 1\n\n"
        );
        assert!(live.is_some());
        hub.close();
        let (_, live) = hub.subscribe();
        assert!(live.is_none(), "after the end a stream is the history alone");
    }
}
