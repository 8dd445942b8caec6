//! The engine allocates nothing per request, over HTTP/1.1 or HTTP/2, for
//! `volley run`'s one request and for a plan's requests rendered per
//! iteration: a counting global allocator sees the same number of
//! allocations for 2,000 requests as for 20,000.
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
    // A test that failed while holding the lock leaves it poisoned; the
    // next one measures all the same.
    let alone = ALONE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let mut child = Command::new(env!("CARGO_BIN_EXE_volley"))
        .args(["serve", "--addr", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stdin(Stdio::null())
        .spawn()
        .expect("volley serve starts");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let base = line
        .trim()
        .rsplit(' ')
        .next()
        .expect("serve prints its address")
        .to_string();
    assert!(base.starts_with("http://127.0.0.1:"), "{line}");
    Target {
        child,
        base,
        _alone: alone,
    }
}

fn allocations_for(requests: u64, url: &str, protocol: &[&str]) -> u64 {
    let n = requests.to_string();
    // One interval covers the whole run, so per-interval work is the same.
    let mut args = vec![
        "volley",
        "run",
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
