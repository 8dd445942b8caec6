//! The endpoints of the embedded target server.
//!
//! Each one simulates something a load test should be able to observe: a
//! fast answer (`/hi`), latency (`/sleep`, `/slow`), CPU and memory pressure
//! on the target (`/cpu`, `/alloc`), sizes (`/bytes`, `/echo`), statuses, and
//! broken behaviour (`/drop`, `/stall`, `/garbage`) that the tester must
//! count as errors without falling over. `/pause` stalls the whole server,
//! every connection at once, the way a garbage-collection pause or a full
//! disk would. Under `/api/` is a small JSON API for scenario tests (see
//! `api`).
//!
//! Routing looks at the path only; the query string is in the request head
//! for the endpoints that read it.

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant};

use super::api::{self, Api};
use super::conn::{COPY_LIMIT, Conn, Next};
use super::request::{Method, Request, parse_decimal};
use super::response::{self, Persistence};

/// Longest wait or burn accepted by `/sleep`, `/cpu`, `/slow` and `/pause`.
const MAX_MS: u64 = 3_600_000;
/// Largest `/alloc`, in KiB (1 GiB).
const MAX_ALLOC_KB: u64 = 1024 * 1024;
/// Largest `/bytes` body (256 MiB).
const MAX_BYTES: u64 = 256 * 1024 * 1024;
/// The body `/slow` drips, one byte at a time.
const SLOW_BODY: &[u8] = b"0123456789";
/// What `/garbage` sends: no status line, then bytes no parser can like.
const GARBAGE: &[u8] = b"NOT HTTP AT ALL\r\n\r\n\x00\xff\xfe\x01\x80\x7f\r\n\x1b[0m\xc3\x28";
/// `/bytes` bodies are cut from this, so no body is built per request.
static FILL: [u8; COPY_LIMIT] = [b'x'; COPY_LIMIT];

const TEXT: Option<&[u8]> = Some(b"text/plain");
const JSON: Option<&[u8]> = Some(b"application/json");

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Route {
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
    NotFound,
    /// A known endpoint with an unusable parameter; the message says why.
    BadParameter(&'static str),
}

impl Route {
    fn of(path: &[u8]) -> Route {
        match path {
            b"/hi" => return Route::Hi,
            b"/echo" => return Route::Echo,
            b"/stats" => return Route::Stats,
            b"/drop" => return Route::Drop,
            b"/stall" => return Route::Stall,
            b"/garbage" => return Route::Garbage,
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
    fn takes_slot(self) -> bool {
        !matches!(
            self,
            Route::Stats | Route::Pause(_) | Route::Drop | Route::Stall | Route::Garbage
        )
    }
}

/// Answers one request, first waiting for an in-flight slot if the server
/// has a limit and the endpoint counts against it.
pub(super) async fn respond(conn: &mut Conn, req: &Request) -> Next {
    let path = conn.input.request().get(req.head.path.clone());
    let route = Route::of(path.unwrap_or_default());
    let slot = if route.takes_slot() {
        match conn.slot().await {
            Ok(slot) => slot,
            Err(_) => return Next::Done,
        }
    } else {
        None
    };
    let next = answer(conn, req, route).await;
    conn.out.release_when_written(slot);
    next
}

/// Responses are queued on `conn.out` and written by the connection loop,
/// except where an endpoint needs the socket itself.
async fn answer(conn: &mut Conn, req: &Request, route: Route) -> Next {
    let head_only = req.head.method == Method::Head;
    let persistence = Persistence::for_request(&req.head);
    match route {
        Route::Hi => {
            conn.out.bytes(response::hi(persistence, head_only));
            conn.out.finish();
            Next::after(persistence)
        }
        Route::Sleep(ms) => {
            if conn.flush().await.is_err() {
                return Next::Done;
            }
            tokio::time::sleep(Duration::from_millis(ms)).await;
            let body = format!("slept {ms} ms\n");
            conn.out
                .respond(200, TEXT, body.as_bytes(), head_only, persistence)
        }
        Route::Cpu(ms) => {
            // Spinning on an I/O thread would stall every other connection,
            // which is not what "a CPU-heavy endpoint" should simulate.
            if conn.flush().await.is_err() {
                return Next::Done;
            }
            let shared = conn.shared.clone();
            let work =
                tokio::task::spawn_blocking(move || burn_cpu(Duration::from_millis(ms), &shared.stopping));
            match work.await {
                Ok(_) => {
                    let body = format!("burned {ms} ms of CPU\n");
                    conn.out
                        .respond(200, TEXT, body.as_bytes(), head_only, persistence)
                }
                Err(_) => conn
                    .out
                    .respond(500, TEXT, b"cpu work failed\n", head_only, persistence),
            }
        }
        Route::Alloc(kb) => {
            if conn.flush().await.is_err() {
                return Next::Done;
            }
            let shared = conn.shared.clone();
            let work = tokio::task::spawn_blocking(move || touch_memory(kb, &shared.stopping));
            let (status, body) = match work.await {
                Ok(Some(_)) => (200, format!("allocated {kb} KiB\n")),
                _ => (503, format!("could not allocate {kb} KiB\n")),
            };
            conn.out
                .respond(status, TEXT, body.as_bytes(), head_only, persistence)
        }
        Route::Status(code) => {
            let body = format!("status {code}\n");
            conn.out
                .respond(code, TEXT, body.as_bytes(), head_only, persistence)
        }
        Route::Bytes(n) => send_bytes(conn, n, head_only, persistence).await,
        Route::Echo => {
            let Conn {
                stream, input, out, ..
            } = conn;
            let body = input.body(req);
            let content_type = req
                .head
                .content_type
                .clone()
                .and_then(|range| input.request().get(range));
            out.head(200, content_type, body.len() as u64, persistence);
            if !head_only && out.body(stream, body).await.is_err() {
                return Next::Done;
            }
            out.finish();
            Next::after(persistence)
        }
        Route::Stats => match serde_json::to_vec(&conn.shared.snapshot()) {
            Ok(json) => conn.out.respond(200, JSON, &json, head_only, persistence),
            Err(_) => conn
                .out
                .respond(500, TEXT, b"stats failed\n", head_only, persistence),
        },
        Route::Drop => Next::Close,
        Route::Stall => {
            if conn.flush().await.is_ok() {
                conn.wait_for_eof().await;
            }
            Next::Done
        }
        Route::Garbage => {
            conn.out.bytes(GARBAGE);
            Next::Close
        }
        Route::Slow(ms) => drip(conn, ms, head_only, persistence).await,
        Route::Api(endpoint) => api::answer(conn, req, endpoint, head_only, persistence),
        Route::Pause(ms) => {
            // The pause starts now; this response is held by it like any
            // other and so goes out when it ends (later, if extended).
            conn.shared
                .pause
                .extend(tokio::time::Instant::now() + Duration::from_millis(ms));
            let body = format!("paused {ms} ms\n");
            conn.out
                .respond(200, TEXT, body.as_bytes(), head_only, persistence)
        }
        Route::NotFound => conn
            .out
            .respond(404, TEXT, b"not found\n", head_only, persistence),
        Route::BadParameter(why) => conn
            .out
            .respond(400, TEXT, why.as_bytes(), head_only, persistence),
    }
}

async fn send_bytes(conn: &mut Conn, n: u64, head_only: bool, persistence: Persistence) -> Next {
    conn.out
        .head(200, Some(b"application/octet-stream"), n, persistence);
    if !head_only {
        let mut left = n;
        while left > 0 {
            let piece = left.min(FILL.len() as u64) as usize;
            if conn.out.body(&mut conn.stream, &FILL[..piece]).await.is_err() {
                return Next::Done;
            }
            left -= piece as u64;
        }
    }
    conn.out.finish();
    Next::after(persistence)
}

/// `/slow`: the head at once, then the body one byte at a time, the last
/// byte `ms` after the head.
async fn drip(conn: &mut Conn, ms: u64, head_only: bool, persistence: Persistence) -> Next {
    conn.out.head(200, TEXT, SLOW_BODY.len() as u64, persistence);
    if head_only {
        conn.out.finish();
        return Next::after(persistence);
    }
    if conn.flush().await.is_err() {
        return Next::Done;
    }
    let start = tokio::time::Instant::now();
    let total = Duration::from_millis(ms);
    let steps = SLOW_BODY.len() as u32;
    for (i, byte) in (1..).zip(SLOW_BODY) {
        // Deadlines from one start, so timer lateness does not add up.
        tokio::time::sleep_until(start + total * i / steps).await;
        let byte = std::slice::from_ref(byte);
        if conn.out.write_direct(&mut conn.stream, byte).await.is_err() {
            return Next::Done;
        }
    }
    conn.out.finish();
    Next::after(persistence)
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
