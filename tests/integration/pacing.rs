//! The open model keeps its schedule: its connections are open before the
//! schedule starts, and the run's other threads stay out of the workers'
//! way.

use crate::support::{self, stdout, volley};
use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use volley::collector::SeriesRow;
use volley::engine::Observer;

/// When a tiny HTTP/1.1 server on loopback accepted each connection and
/// first read a request.
#[derive(Default)]
struct Seen {
    accepted: Vec<Instant>,
    first_request: Option<Instant>,
}

/// Serves `200 ok` to every request on every connection, noting when.
fn noting_server() -> (String, Arc<Mutex<Seen>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Seen::default()));
    let noted = Arc::clone(&seen);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            noted.lock().unwrap().accepted.push(Instant::now());
            let noted = Arc::clone(&noted);
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                // Each request fits one read; volley sends one at a time.
                while let Ok(n) = stream.read(&mut buf) {
                    if n == 0 {
                        return;
                    }
                    noted
                        .lock()
                        .unwrap()
                        .first_request
                        .get_or_insert_with(Instant::now);
                    if stream
                        .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                        .is_err()
                    {
                        return;
                    }
                }
            });
        }
    });
    (url, seen)
}

#[test]
fn an_open_model_run_opens_its_connections_before_its_schedule_starts() {
    let (url, seen) = noting_server();
    // 20 req/s: a connection opened on demand would come 50 ms after the
    // one before it.
    let out = volley(&["run", "-R", "20", "-c", "6", "-t", "1", "-d", "400ms", "-q", &url]);
    assert!(out.status.success(), "{}", stdout(&out));
    let seen = seen.lock().unwrap();
    let first = seen.first_request.expect("a request arrived");
    let open_by_then = seen
        .accepted
        .iter()
        .filter(|at| **at <= first + Duration::from_millis(30))
        .count();
    assert_eq!(
        open_by_then,
        6,
        "all six connections were open when the first request came ({} in all)",
        seen.accepted.len()
    );
}

/// Notes, on each finished interval, whether the thread it is told on runs
/// in the background.
struct Where(Arc<Mutex<Vec<bool>>>);

impl Observer for Where {
    fn row(&mut self, _row: &SeriesRow, _steps: &[SeriesRow]) {
        self.0.lock().unwrap().push(volley::sys::in_background());
    }
}

/// Runs `args` through the engine in this process; the threads its rows
/// were told on.
fn collecting_threads(args: &[&str]) -> Vec<bool> {
    use clap::Parser;
    let cli = volley::cli::Cli::parse_from(args);
    let volley::cli::Command::Run(args) = cli.command else {
        unreachable!("a run command line")
    };
    let plan = volley::plan::Plan::from_args(&args).expect("a valid plan");
    let seen = Arc::new(Mutex::new(Vec::new()));
    let mut observer = Where(Arc::clone(&seen));
    let stop = Arc::new(AtomicBool::new(false));
    let result =
        volley::engine::run(&plan, &plan.request.targets[0], stop, &mut observer).expect("the run runs");
    assert!(result.total.requests > 0);
    let seen = seen.lock().unwrap().clone();
    assert!(!seen.is_empty(), "rows were emitted");
    seen
}

#[test]
fn the_open_models_collecting_thread_runs_behind_its_workers() {
    let server = support::target();
    let url = support::url(&server, "/hi");
    let open = collecting_threads(&[
        "volley",
        "run",
        "-R",
        "200",
        "-c",
        "2",
        "-t",
        "1",
        "-d",
        "300ms",
        "--interval",
        "100ms",
        &url,
    ]);
    assert!(open.iter().all(|&b| b), "open model: {open:?}");
    // The closed model has no schedule to protect: its live views keep
    // pace with workers that fill every core.
    let closed = collecting_threads(&[
        "volley",
        "run",
        "-c",
        "2",
        "-t",
        "1",
        "-d",
        "300ms",
        "--interval",
        "100ms",
        &url,
    ]);
    assert!(closed.iter().all(|&b| !b), "closed model: {closed:?}");
    // The thread calling the engine is never moved into the background: the
    // workers of its next run would inherit that.
    assert!(!volley::sys::in_background());
}
