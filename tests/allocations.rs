//! The engine allocates nothing per request, over HTTP/1.1 or HTTP/2, for
//! `volley run`'s one request and for a plan's requests rendered per
//! iteration: a counting global allocator sees the same number of
//! allocations for 2,000 requests as for 20,000. Over HTTP/3 what is left
//! per request is quinn-proto's own: its state for each new stream, a
//! fixed number of allocations (see [`QUINN_PER_STREAM`]), and with
//! several streams on a connection its record of packets carrying more than
//! one stream's frames ([`QUINN_SHARED_PACKET`]); volley adds none.
//! (Its own test binary, so the allocator counts only this process: the
//! target runs as a separate `volley serve` process on 127.0.0.1.)

use clap::Parser;
use std::alloc::{GlobalAlloc, Layout, System};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use volley::cli::{Cli, Command as VolleyCommand};
use volley::engine::{self, Silent};
use volley::plan::Plan;

struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

// SAFETY: forwards to the system allocator; only counts calls.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller upholds GlobalAlloc\'s contract; passed through unchanged.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller upholds GlobalAlloc\'s contract; passed through unchanged.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller upholds GlobalAlloc\'s contract; passed through unchanged.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller upholds GlobalAlloc\'s contract; passed through unchanged.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// `volley serve` on a free port, stopped when dropped. It also holds this
/// binary's one lock: the allocation counter is the whole process's, so
/// the tests measure one at a time.
struct Target {
    child: Child,
    base: String,
    _alone: MutexGuard<'static, ()>,
}

static ALONE: Mutex<()> = Mutex::new(());

impl Drop for Target {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn target() -> Target {
    serve(&[])
}

/// `volley serve --tls --http3`: HTTPS, and HTTP/3 on the UDP port of the
/// same number.
fn h3_target() -> Target {
    serve(&["--tls", "--http3"])
}

fn serve(options: &[&str]) -> Target {
    // A test that failed while holding the lock leaves it poisoned; the
    // next one measures all the same.
    let alone = ALONE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let mut child = Command::new(env!("CARGO_BIN_EXE_volley"))
        .args(["serve", "--addr", "127.0.0.1:0"])
        .args(options)
        .stdout(Stdio::piped())
        .stdin(Stdio::null())
        .spawn()
        .expect("volley serve starts");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let base = line
        .split_whitespace()
        .find(|word| word.starts_with("http"))
        .expect("serve prints its address")
        .to_string();
    assert!(base.contains("://127.0.0.1:"), "{line}");
    Target {
        child,
        base,
        _alone: alone,
    }
}

fn allocations_for(requests: u64, url: &str, protocol: &[&str]) -> u64 {
    let n = requests.to_string();
    // One interval covers the whole run, so per-interval work is the same.
    // One thread: its 8 connections are enough for HTTP/1.1 on io_uring to
    // wait for batches of responses, read by their receive stamps.
    let mut args = vec![
        "volley",
        "run",
        "-n",
        &n,
        "-c",
        "8",
        "-t",
        "1",
        "--interval",
        "60s",
    ];
    args.extend_from_slice(protocol);
    args.push(url);
    let cli = Cli::try_parse_from(args);
    let VolleyCommand::Run(args) = cli.unwrap().command else {
        unreachable!()
    };
    let plan = Plan::from_args(&args).unwrap();
    allocations_of_run(&plan, requests)
}

/// Allocations made while `plan` runs against its first URL, all of whose
/// `requests` must succeed.
fn allocations_of_run(plan: &Plan, requests: u64) -> u64 {
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    let result = engine::run(
        plan,
        &plan.request.targets[0],
        Arc::new(AtomicBool::new(false)),
        &mut Silent,
    )
    .unwrap();
    let spent = ALLOCATIONS.load(Ordering::Relaxed) - before;
    assert_eq!(result.total.ok, requests);
    spent
}

#[test]
fn allocations_do_not_grow_with_requests() {
    let target = target();
    // HTTP/1.1, and HTTP/2 (h2c) with several streams per connection, on
    // each I/O backend (io_uring runs as epoll where it is refused).
    let protocols: [&[&str]; 4] = [
        &["--io", "uring"],
        &["--io", "uring", "--http2", "--streams", "4"],
        &["--io", "epoll"],
        &["--io", "epoll", "--http2", "--streams", "4"],
    ];
    for protocol in protocols {
        for path in ["/hi", "/bytes/100000"] {
            let url = format!("{}{path}", target.base);
            allocations_for(500, &url, protocol); // Warm any one-time initialisation.
            let small = allocations_for(2_000, &url, protocol);
            let large = allocations_for(20_000, &url, protocol);
            // 18,000 more requests; a per-request allocation would add >= 18,000.
            assert!(
                large <= small + 100,
                "{protocol:?} {path}: {small} allocations for 2,000 requests, {large} for 20,000"
            );
        }
    }
}

/// quinn-proto's allocations for each stream a request opens, which no
/// setting of its avoids (it pools its receive halves, not its send
/// halves): the send half's state, boxed (`streams::Send::new`, from
/// `SendStream::write_chunks`); its buffer's queue of unacknowledged
/// chunks, grown from empty by the first write (`SendBuffer::write`); and
/// the set of acknowledged ranges, a B-tree whose first node comes with
/// the first ACK (`SendBuffer::ack`).
const QUINN_PER_STREAM: f64 = 3.0;

/// With several streams on a connection quinn-proto also allocates for a
/// packet that carries more than one STREAM frame: its record of the
/// frames sent (`StreamMetaVec`, inline for one) moves to the heap, and
/// grows at the third (`StreamsState::write_stream_frames`). At most two
/// allocations per packet of three requests' frames: 2/3 per request.
const QUINN_SHARED_PACKET: f64 = 2.0 / 3.0;

#[test]
fn http3_allocates_only_quinn_protos_stream_state_per_request() {
    let target = h3_target();
    let protocols: [(&[&str], f64); 2] = [
        (&["--http3", "--insecure"], QUINN_PER_STREAM),
        (
            &["--http3", "--insecure", "--streams", "4"],
            QUINN_PER_STREAM + QUINN_SHARED_PACKET,
        ),
    ];
    for (protocol, floor) in protocols {
        // /bytes/100000 takes some 70 datagrams per response: anything
        // allocated per datagram shows many times over.
        for path in ["/hi", "/bytes/100000"] {
            let url = format!("{}{path}", target.base);
            allocations_for(500, &url, protocol); // Warm any one-time initialisation.
            let small = allocations_for(2_000, &url, protocol);
            let large = allocations_for(20_000, &url, protocol);
            let per_request = large.saturating_sub(small) as f64 / 18_000.0;
            eprintln!(
                "{protocol:?} {path}: {small} allocations for 2,000 requests, {large} for 20,000: {per_request:.3} per request"
            );
            // A margin for what varies with timing and grows with the
            // packets in flight: nodes of quinn-proto's B-tree of sent
            // packets (`SentPackets::insert`), and volley's receive buffer
            // replaced when quinn-proto still holds part of it (with 4
            // streams and /bytes/100000, 0.17 per request). Half an
            // allocation, so a slower machine's timing does not fail it,
            // while one more allocation of volley's own per request (let
            // alone per datagram) still does.
            assert!(
                per_request <= floor + 0.5,
                "{protocol:?} {path}: {small} allocations for 2,000 requests, {large} for 20,000: {per_request:.3} per request"
            );
        }
    }
}

/// A plan's requests are rendered into each connection's reused buffers
/// and encoded for the run's protocol on every send; none of it allocates
/// once the buffers have grown.
fn plan_allocations_for(requests: u64, file: &std::path::Path, protocol: &[&str]) -> u64 {
    let n = requests.to_string();
    let file = file.to_str().unwrap();
    let mut args = vec![
        "volley",
        "plan",
        file,
        "-n",
        &n,
        "-c",
        "8",
        "-t",
        "2",
        "--interval",
        "60s",
    ];
    args.extend_from_slice(protocol);
    let VolleyCommand::Plan(args) = Cli::try_parse_from(args).unwrap().command else {
        unreachable!()
    };
    let plan = Plan::from_plan_args(&args).unwrap();
    allocations_of_run(&plan, requests)
}

#[test]
fn plan_requests_allocate_nothing_per_request() {
    let target = target();
    let dir = std::env::temp_dir().join(format!("volley-allocations-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("plan.yml");
    // A rendered header value and a body, so every part of the request is
    // written per send.
    let plan = format!(
        "base: '{}'\nplan:\n  - name: post\n    request:\n      url: /hi?i={{{{ iteration }}}}\n      method: POST\n      body: 'n={{{{ iteration }}}}'\n      headers:\n        X-Iteration: '{{{{ iteration }}}}'\n",
        target.base
    );
    std::fs::write(&file, plan).unwrap();
    let protocols: [&[&str]; 4] = [
        &["--io", "uring"],
        &["--io", "uring", "--http2", "--streams", "4"],
        &["--io", "epoll"],
        &["--io", "epoll", "--http2", "--streams", "4"],
    ];
    for protocol in protocols {
        plan_allocations_for(500, &file, protocol);
        let small = plan_allocations_for(2_000, &file, protocol);
        let large = plan_allocations_for(20_000, &file, protocol);
        eprintln!("plan {protocol:?}: {small} allocations for 2,000 requests, {large} for 20,000");
        assert!(
            large <= small + 100,
            "plan {protocol:?}: {small} allocations for 2,000 requests, {large} for 20,000"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
