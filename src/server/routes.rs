//! The endpoints of the embedded target server.
//!
//! Each one simulates something a load test should be able to observe: a
//! fast answer (`/hi`), latency (`/sleep`, `/slow`), CPU and memory pressure
//! on the target (`/cpu`, `/alloc`), sizes (`/bytes`, `/echo`), statuses, and
//! broken behaviour (`/drop`, `/stall`, `/garbage`) that the tester must
//! count as errors without falling over. `/pause` stalls the whole server,
//! every connection at once, the way a garbage-collection pause or a full
//! disk would. Under `/api/` is a small JSON API for scenario tests (see
//! `api`); `/app` is a page whose script calls that API the way a web app
//! does (with `/app.css` beside it), so a real browser can record a session
//! against the server (`volley import har` is checked that way).
//!
//! Each endpoint is written once, for every protocol: [`answer`] takes a
//! protocol-neutral request and says what to send (a `Reply`) or which fault
//! to commit, and the HTTP/1.1 (`conn`), HTTP/2 (`h2`) and HTTP/3 (`h3`)
//! connections write that their own way ([`answer_parsed`] is the part
//! HTTP/2 and HTTP/3 share). Routing looks at the path only; the query string is
//! in the request for the endpoints that read it.

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant};

use http::header::{CONTENT_TYPE, HeaderValue};
use tokio::sync::OwnedSemaphorePermit;

use super::Shared;
use super::api::{self, Api};
use super::reply::{Answer, Body, Headers, Incoming, Reply};
use super::request::{Method, ParseError, parse_decimal};
use super::response::HI_BODY;

/// Longest wait or burn accepted by `/sleep`, `/cpu`, `/slow` and `/pause`.
const MAX_MS: u64 = 3_600_000;
/// Largest `/alloc`, in KiB (1 GiB).
const MAX_ALLOC_KB: u64 = 1024 * 1024;
/// Largest `/bytes` body (256 MiB).
const MAX_BYTES: u64 = 256 * 1024 * 1024;

const TEXT: Option<&[u8]> = Some(b"text/plain");
const JSON: Option<&[u8]> = Some(b"application/json");
const HTML: Option<&[u8]> = Some(b"text/html; charset=utf-8");
const CSS: Option<&[u8]> = Some(b"text/css");

/// The page at `/app`: its script logs in, looks around and creates a user
/// through `/api/`, one call after another, then sets its title to `done`.
const APP_PAGE: &[u8] = include_bytes!("app.html");
const APP_CSS: &[u8] = b"body { font-family: sans-serif; margin: 2em; }\npre { background: #eee; }\n";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Route {
    Hi,
    Sleep(u64),
    Cpu(u64),
    Alloc(u64),
    Status(u16),
    Bytes(u64),
    Echo,
    Stats,
    Drop,
    Stall,
    Garbage,
    Slow(u64),
    Pause(u64),
    Api(Api),
    App,
    AppCss,
    NotFound,
    /// A known endpoint with an unusable parameter; the message says why.
    BadParameter(&'static str),
}

impl Route {
    pub(super) fn of(path: &[u8]) -> Route {
        match path {
            b"/hi" => return Route::Hi,
            b"/echo" => return Route::Echo,
            b"/stats" => return Route::Stats,
            b"/drop" => return Route::Drop,
            b"/stall" => return Route::Stall,
            b"/garbage" => return Route::Garbage,
            b"/app" => return Route::App,
            b"/app.css" => return Route::AppCss,
            _ => {}
        }
        if let Some(rest) = path.strip_prefix(b"/api/") {
            return Route::Api(Api::of(rest));
        }
        let Some((prefix, arg)) = path
            .strip_prefix(b"/")
            .and_then(|p| p.iter().position(|&b| b == b'/').map(|i| p.split_at(i)))
        else {
            return Route::NotFound;
        };
        let arg = &arg[1..];
        let number = |max: u64, too_big: &'static str| match parse_decimal(arg) {
            None => Err("the path must end in a whole number\n"),
            Some(n) if n > max => Err(too_big),
            Some(n) => Ok(n),
        };
        let route = match prefix {
            b"sleep" => number(MAX_MS, "at most 3600000 ms\n").map(Route::Sleep),
            b"cpu" => number(MAX_MS, "at most 3600000 ms\n").map(Route::Cpu),
            b"slow" => number(MAX_MS, "at most 3600000 ms\n").map(Route::Slow),
            b"pause" => number(MAX_MS, "at most 3600000 ms\n").map(Route::Pause),
            b"alloc" => number(MAX_ALLOC_KB, "at most 1048576 KiB (1 GiB)\n").map(Route::Alloc),
            b"bytes" => number(MAX_BYTES, "at most 268435456 bytes (256 MiB)\n").map(Route::Bytes),
            b"status" => {
                const RANGE: &str = "the status must be 200 to 599\n";
                number(599, RANGE).and_then(|code| match u16::try_from(code) {
                    Ok(code) if code >= 200 => Ok(Route::Status(code)),
                    _ => Err(RANGE),
                })
            }
            _ => return Route::NotFound,
        };
        route.unwrap_or_else(Route::BadParameter)
    }

    /// Whether the request counts against the in-flight limit. `/stats` and
    /// `/pause` are the test's controls and must work on a saturated server;
    /// the fault endpoints keep their behaviour (a `/stall` holding a slot
    /// would shrink the server's capacity for as long as its client waits).
    pub(super) fn takes_slot(self) -> bool {
        !matches!(
            self,
            Route::Stats | Route::Pause(_) | Route::Drop | Route::Stall | Route::Garbage
        )
    }

    /// Whether the answer takes a while to come: an HTTP/1.1 connection
    /// writes the responses it has queued first, so that pipelined requests
    /// answered earlier are not held up by this one.
    pub(super) fn waits(self) -> bool {
        matches!(self, Route::Sleep(_) | Route::Cpu(_) | Route::Alloc(_))
    }
}

/// What the endpoint `route` answers to `req`. Endpoints that wait
/// ([`Route::waits`]) do it here; what they answer is written by the
/// protocol, which also takes care of in-flight slots and `/pause`.
/// A request answered by [`answer_parsed`].
pub(super) struct Answered<'a> {
    pub answer: Answer<'a>,
    /// A HEAD request: the reply's head only.
    pub head_only: bool,
    /// The server's in-flight slot, where it has a capacity and the
    /// endpoint counts against it: held (never read) until the reply is
    /// handed to the connection and this is dropped. No stream holds
    /// another's, so a plain wait cannot deadlock.
    _slot: Option<OwnedSemaphorePermit>,
}

/// Answers a request over HTTP/2 or HTTP/3, its head as the `http` crate
/// parsed it and its body read whole: counted as received, given its slot,
/// and answered.
pub(super) async fn answer_parsed<'a>(
    head: &'a http::request::Parts,
    body: &'a [u8],
    shared: &Arc<Shared>,
) -> Answered<'a> {
    shared.requests_received.fetch_add(1, Relaxed);
    let incoming = Incoming {
        method: Method::of(head.method.as_str()),
        method_name: head.method.as_str().as_bytes(),
        path: head.uri.path().as_bytes(),
        query: head.uri.query().unwrap_or_default().as_bytes(),
        content_type: head.headers.get(CONTENT_TYPE).map(HeaderValue::as_bytes),
        headers: Headers::Http2(&head.headers),
        body,
    };
    let route = Route::of(incoming.path);
    let slot = match &shared.limit {
        Some(limit) if route.takes_slot() => Arc::clone(limit).acquire_owned().await.ok(),
        _ => None,
    };
    Answered {
        answer: answer(route, &incoming, shared).await,
        head_only: incoming.head_only(),
        _slot: slot,
    }
}

/// The reply to a request refused before it was read whole (a body too
/// large): as over HTTP/1.1, not counted.
pub(super) fn refusal(error: ParseError) -> Reply<'static> {
    Reply::new(
        error.status(),
        TEXT,
        Body::Owned(format!("{error}\n").into_bytes()),
    )
}

pub(super) async fn answer<'a>(route: Route, req: &Incoming<'a>, shared: &Arc<Shared>) -> Answer<'a> {
    if let Some(log) = &shared.log {
        log.record(req);
    }
    let reply = match route {
        Route::Hi => Reply::new(200, TEXT, Body::Static(HI_BODY)),
        Route::Sleep(ms) => {
            tokio::time::sleep(Duration::from_millis(ms)).await;
            text(200, format!("slept {ms} ms\n"))
        }
        Route::Cpu(ms) => {
            // Spinning on an I/O thread would stall every other connection,
            // which is not what "a CPU-heavy endpoint" should simulate.
            let shared = Arc::clone(shared);
            let work =
                tokio::task::spawn_blocking(move || burn_cpu(Duration::from_millis(ms), &shared.stopping));
            match work.await {
                Ok(_) => text(200, format!("burned {ms} ms of CPU\n")),
                Err(_) => Reply::new(500, TEXT, Body::Static(b"cpu work failed\n")),
            }
        }
        Route::Alloc(kb) => {
            let shared = Arc::clone(shared);
            let work = tokio::task::spawn_blocking(move || touch_memory(kb, &shared.stopping));
            match work.await {
                Ok(Some(_)) => text(200, format!("allocated {kb} KiB\n")),
                _ => text(503, format!("could not allocate {kb} KiB\n")),
            }
        }
        Route::Status(code) => text(code, format!("status {code}\n")),
        Route::Bytes(n) => Reply::new(200, Some(b"application/octet-stream"), Body::Fill(n)),
        Route::Echo => Reply::new(200, req.content_type, Body::Borrowed(req.body)),
        Route::Stats => match serde_json::to_vec(&shared.snapshot()) {
            Ok(json) => Reply::new(200, JSON, Body::Owned(json)),
            Err(_) => Reply::new(500, TEXT, Body::Static(b"stats failed\n")),
        },
        Route::Drop => return Answer::Drop,
        Route::Stall => return Answer::Stall,
        Route::Garbage => return Answer::Garbage,
        Route::Slow(ms) => Reply::new(200, TEXT, Body::Drip(Duration::from_millis(ms))),
        Route::Api(endpoint) => api::reply(endpoint, req),
        Route::App => Reply::new(200, HTML, Body::Static(APP_PAGE)),
        Route::AppCss => Reply::new(200, CSS, Body::Static(APP_CSS)),
        Route::Pause(ms) => {
            // The pause starts now; this response is held by it like any
            // other and so goes out when it ends (later, if extended).
            shared
                .pause
                .extend(tokio::time::Instant::now() + Duration::from_millis(ms));
            text(200, format!("paused {ms} ms\n"))
        }
        Route::NotFound => Reply::new(404, TEXT, Body::Static(b"not found\n")),
        Route::BadParameter(why) => Reply::new(400, TEXT, Body::Static(why.as_bytes())),
    };
    Answer::Reply(reply)
}

fn text(status: u16, body: String) -> Reply<'static> {
    Reply::new(status, TEXT, Body::Owned(body.into_bytes()))
}

/// Spins doing arithmetic the optimiser cannot remove until `duration` has
/// passed or the server stops.
fn burn_cpu(duration: Duration, stopping: &AtomicBool) -> u64 {
    let start = Instant::now();
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    loop {
        // Enough work between clock reads that reading the clock is not
        // what the CPU spends its time on.
        for _ in 0..10_000 {
            x = black_box(x ^ (x << 13));
            x ^= x >> 7;
            x ^= x << 17;
        }
        if start.elapsed() >= duration || stopping.load(Relaxed) {
            return x;
        }
    }
}

/// Allocates `kb` KiB and writes every page, so the memory is really
/// resident, then reads it back. `None` if the allocation fails (rather than
/// aborting the process) or the server stops.
fn touch_memory(kb: u64, stopping: &AtomicBool) -> Option<u64> {
    const PAGE: usize = 4096;
    const STEP: usize = 1024 * 1024;
    let len = usize::try_from(kb.checked_mul(1024)?).ok()?;
    let mut memory: Vec<u8> = Vec::new();
    memory.try_reserve_exact(len).ok()?;
    // Written in steps with a non-zero value: zeroed memory could come from
    // untouched pages, and the steps let shutdown interrupt a big fill.
    while memory.len() < len {
        if stopping.load(Relaxed) {
            return None;
        }
        let step = (len - memory.len()).min(STEP);
        memory.resize(memory.len() + step, 0xa5);
    }
    let sum = memory
        .iter()
        .step_by(PAGE)
        .fold(0u64, |acc, &b| acc.wrapping_add(u64::from(b)));
    Some(black_box(sum) + black_box(&memory).len() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes() {
        assert_eq!(Route::of(b"/hi"), Route::Hi);
        assert_eq!(Route::of(b"/sleep/50"), Route::Sleep(50));
        assert_eq!(Route::of(b"/status/204"), Route::Status(204));
        assert_eq!(Route::of(b"/bytes/0"), Route::Bytes(0));
        assert_eq!(Route::of(b"/pause/300"), Route::Pause(300));
        assert_eq!(Route::of(b"/pause/3600000"), Route::Pause(MAX_MS));
        assert_eq!(Route::of(b"/api/users"), Route::Api(Api::Users));
        assert_eq!(Route::of(b"/api/users/7"), Route::Api(Api::User(Some(7))));
        assert_eq!(Route::of(b"/api/nope"), Route::Api(Api::NotFound));
        assert_eq!(Route::of(b"/app"), Route::App);
        assert_eq!(Route::of(b"/app.css"), Route::AppCss);
        assert_eq!(Route::of(b"/api"), Route::NotFound);
        assert_eq!(Route::of(b"/nope"), Route::NotFound);
        assert_eq!(Route::of(b"/hi/"), Route::NotFound);
        assert_eq!(Route::of(b"/nope/1"), Route::NotFound);
        assert_eq!(Route::of(b""), Route::NotFound);
        for bad in [
            &b"/sleep/x"[..],
            b"/sleep/",
            b"/sleep/-1",
            b"/sleep/1/2",
            b"/status/100",
            b"/status/600",
            b"/status/99999999999999999999999",
            b"/bytes/268435457",
            b"/alloc/1048577",
            b"/pause/3600001",
            b"/pause/x",
        ] {
            assert!(
                matches!(Route::of(bad), Route::BadParameter(_)),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn controls_and_faults_take_no_slot() {
        for free in ["/stats", "/pause/10", "/drop", "/stall", "/garbage"] {
            assert!(!Route::of(free.as_bytes()).takes_slot(), "{free}");
        }
        for limited in [
            "/hi",
            "/sleep/10",
            "/cpu/1",
            "/echo",
            "/bytes/1",
            "/slow/1",
            "/api/login",
            "/api/users/1",
            "/nope",
            "/sleep/x",
        ] {
            assert!(Route::of(limited.as_bytes()).takes_slot(), "{limited}");
        }
    }

    #[test]
    fn cpu_and_memory_work_finish() {
        let stopping = AtomicBool::new(false);
        let start = Instant::now();
        burn_cpu(Duration::from_millis(20), &stopping);
        assert!(start.elapsed() >= Duration::from_millis(20));
        assert!(touch_memory(100, &stopping).is_some());
        stopping.store(true, Relaxed);
        assert!(touch_memory(MAX_ALLOC_KB, &stopping).is_none());
    }
}
