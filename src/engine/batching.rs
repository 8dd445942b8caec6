//! Whether a worker's ring waits for a few completions at once
//! ([`Batch`]), and for how many: only where every response is read with
//! the kernel's receive stamp, so that waiting moves no latency. That is
//! the HTTP/1.1 fast path ([`super::lean_h1`]) and plain HTTP/2, whose
//! connection reads a stamped socket one received buffer at a time.

use super::Shared;
use super::exchange::WorkerCtx;
use super::fast_path::FastPath;
use super::feed::Feed;
use crate::net::uring::{Batch, MAX_BUFFERS};
use std::time::Duration;

/// Responses a worker needs in flight for its ring to wait for batches:
/// with fewer, a batch is one completion and the wait's timer costs more
/// than it saves.
const BATCH_FROM: usize = 8;
/// Connections past which a worker does not wait for batches: its ring's
/// receive buffers are then fewer than its connections, and run dry
/// between two waits once every connection has a response waiting, so the
/// receives that find none end and are armed again over and over (at
/// 10,000 connections on one thread, 7 such receives per request and 0.6x
/// the requests; at 4,000, some runs 0.9 per request and 1.2x the CPU per
/// request, others none).
const BATCH_UP_TO: usize = MAX_BUFFERS;
/// Completions a ring waits for at most: a quarter of its responses in
/// flight, and no more than half its connections, up to this, so that most
/// of them stay busy with the server while it waits. (32 measured 0.90x the
/// CPU per request of 8 at 4,000 connections and 0.95x at 50, where a batch
/// is 12. Over h2c at 10 connections of 10 streams, waiting for all ten
/// connections took 0.80x the CPU per request of waiting for five, but
/// 1.9x the p99 and 0.77x the requests a second: every connection's next
/// requests waited for the slowest one. Five measured 0.68x the CPU of no
/// batches, with lower p50 and p99 and more requests a second.)
const BATCH_AT_MOST: usize = 32;
/// How long a ring waits for a batch at most, whatever came meanwhile:
/// a bound on each loop's wait, not on its latency (each response is timed
/// by the kernel's receive stamp).
const BATCH_LINGER: Duration = Duration::from_micros(500);

/// Whether a worker of `connections` may wait for batches of completions:
/// then its ring must stamp what it receives from the start
/// ([`crate::net::uring::Ring::stamp_receives`]).
pub(super) fn may_batch<W: FastPath>(shared: &Shared<W>, connections: usize) -> bool {
    let in_flight = connections * shared.transport.streams;
    shared.transport.io.batch
        && in_flight >= BATCH_FROM
        && connections <= BATCH_UP_TO
        && W::reads_stamped(shared)
}

/// The batches a worker's ring waits for in a phase of `feed`, for its
/// `connections`: only where every response is read as the kernel stamped
/// it (over HTTP/1.1, where every loop takes the fast path).
pub(super) fn batch<W: FastPath>(ctx: &WorkerCtx<W>, feed: &Feed, connections: usize) -> Option<Batch> {
    let shared = &ctx.shared;
    if !may_batch(shared, connections) {
        return None;
    }
    let stamped = W::stamped_in(ctx, feed);
    let in_flight = connections * shared.transport.streams;
    stamped.then(|| Batch {
        readers: connections,
        size: (in_flight / 4).min(connections / 2).clamp(1, BATCH_AT_MOST) as u32,
        linger: BATCH_LINGER,
    })
}
