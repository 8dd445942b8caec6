//! `volley demo`: the embedded target on a free loopback port and a short,
//! bounded load test against a few of its endpoints, so a fresh checkout
//! shows what volley does with nothing but the repository.

use crate::cli::{Cli, Command};
use crate::plan::Plan;
use crate::report::text::thousands;
use crate::run::{Output, Verdict, execute};
use crate::server::{ServerOptions, spawn};
use clap::Parser;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

/// Why the demo could not run.
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    #[error("cannot start the embedded server")]
    Server(#[source] std::io::Error),
    /// `--duration` as the run's `-d` refused it.
    #[error(transparent)]
    Args(#[from] clap::Error),
    #[error(transparent)]
    Plan(#[from] crate::plan::PlanError),
    #[error(transparent)]
    Run(#[from] crate::run::RunError),
}

/// Runs the demo; `duration` is per URL (e.g. "2s").
pub fn run(duration: &str, stop: Arc<AtomicBool>) -> Result<Verdict, DemoError> {
    let server = spawn(ServerOptions {
        addr: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
        ..Default::default()
    })
    .map_err(DemoError::Server)?;
    let base = format!("http://{}", server.addr());
    println!("volley demo: embedded target on {base} (fast /hi, 10 ms /sleep/10, 16 KiB /bytes/16384)\n");
    let urls = [
        format!("{base}/hi"),
        format!("{base}/sleep/10"),
        format!("{base}/bytes/16384"),
    ];
    let mut argv = vec![
        "volley", "run", "-c", "16", "-d", duration, "-w", "500ms", "--delay", "500ms",
    ];
    argv.extend(urls.iter().map(String::as_str));
    let Command::Run(args) = Cli::try_parse_from(argv)?.command else {
        unreachable!("the demo builds a run command")
    };
    let plan = Plan::from_args(&args)?;
    let output = Output {
        json_stdout: false,
        file: None,
        html: None,
        detail: crate::report::text::Detail::Normal,
        sinks: Default::default(),
    };
    let (_report, verdict) = execute(plan, &output, stop)?;
    let stats = server.stats();
    println!(
        "\nthe target saw {} connections and answered {} requests",
        thousands(stats.connections_accepted),
        thousands(stats.requests_completed)
    );
    server.stop();
    Ok(verdict)
}
