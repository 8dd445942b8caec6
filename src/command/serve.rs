//! `volley serve` and `volley demo`: the embedded target, alone or under a
//! short run.

use super::{CommandError, Outcome, ended};
use crate::cli::{DemoArgs, ServeArgs};
use crate::server::{ServerOptions, serve_forever};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

/// `volley serve`: until it is stopped. Options the server refuses are bad
/// usage, like a bad flag.
pub fn serve(args: ServeArgs) -> Result<Outcome, CommandError> {
    serve_forever(ServerOptions {
        addr: args.addr,
        max_inflight: args.max_inflight,
        tls: args.tls,
        cert_out: args.cert_out,
        http3: args.http3,
        ..Default::default()
    })
    .map_err(|err| match err.kind() {
        std::io::ErrorKind::InvalidInput => CommandError::usage(err),
        _ => CommandError::failed(err),
    })?;
    Ok(Outcome::Served)
}

/// `volley demo`: the embedded target and a short run against it.
pub fn demo(args: &DemoArgs, stop: Arc<AtomicBool>) -> Result<Outcome, CommandError> {
    let verdict = crate::demo::run(&args.duration, stop).map_err(CommandError::failed)?;
    ended(verdict, None)
}
