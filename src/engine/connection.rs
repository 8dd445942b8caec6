//! The general request loop.
//!
//! Every load model and every protocol runs through `connection_loop`: it
//! asks the [`Feed`] for a ticket and, by the run's [`Workload`], either
//! sends the run's pre-built request (one, or a pipelined round) and
//! records each response, or hands the ticket to [`iteration::run`], which
//! walks a plan file's steps, or to [`script::round`], where a wrk script
//! writes the round, or to [`users::iteration`], where a virtual user runs
//! one iteration. All send through the loop's [`Driver`] and
//! record with the pieces in [`super::exchange`], so the loop and the
//! protocols never call each other back. Where the protocol has a fast
//! path for the phase (`FastPath`), the loop's requests take it instead,
//! and each it cannot take comes back here.

use super::Workload;
use super::driver::Driver;
use super::exchange::{Outgoing, WorkerCtx, fail, record_response, send_time};
use super::fast_path::FastPath;
use super::feed::{Feed, Ticket, YIELD_EVERY};
use super::iteration::{self, IterationState};
use super::script::{self, ScriptLoop, Stopped};
use super::users::{self, VuLoop};
use futures_util::StreamExt;
use futures_util::future::Either;
use futures_util::stream::FuturesUnordered;
use std::task::Poll;
use std::time::Instant;

/// What a loop keeps across requests and phases: its protocol driver (and
/// so its connection) and, for a plan file, the scenario's per-connection
/// buffers and variables (both made on first use).
pub struct LoopSlot<W: FastPath> {
    driver: Option<Driver<W>>,
    iteration: Option<Box<IterationState>>,
    script: Option<Box<ScriptLoop>>,
    vu: Option<Box<VuLoop>>,
}

impl<W: FastPath> Default for LoopSlot<W> {
    fn default() -> Self {
        LoopSlot {
            driver: None,
            iteration: None,
            script: None,
            vu: None,
        }
    }
}

/// How many connections the open model adds in one turn of the worker at
/// most (`--max-connections`). A target that stalls for a few milliseconds
/// leaves every connection busy while a hundred tickets fall due: adding a
/// connection for each at once took the worker's thread for 10-20 ms of
/// handshakes (about 0.25 ms each on loopback in a VM) and made the pacer
/// that late; a few per turn still adds them all within milliseconds.
const ADD_PER_TURN: usize = 4;

/// Runs every connection's loop until the feed runs dry; returns the slots
/// (so warm-up connections carry over into the measured phase). In the open
/// model the pacer may ask for more connections while it runs.
///
/// The loops run outside tokio's cooperative budget: the budget belongs to
/// the one task polling all of them, so with thousands of connections it ran
/// out after 128 operations and every other ready connection was polled,
/// refused and re-woken in vain (10,000 connections: 45k req/s and most
/// connections starved; without the budget 137k req/s). `YIELD_EVERY`
/// keeps the fairness the budget gave.
pub async fn drive<W: FastPath>(
    ctx: &WorkerCtx<W>,
    slots: Vec<LoopSlot<W>>,
    feed: &Feed,
) -> Vec<LoopSlot<W>> {
    let mut next_index = slots.len();
    let mut loops = loop_set(
        slots
            .into_iter()
            .enumerate()
            .map(|(i, slot)| connection_loop(ctx, i, slot, feed)),
    );
    let mut done = Vec::with_capacity(next_index);
    let all = std::future::poll_fn(|cx| {
        // A few new connections per turn: each handshake takes the worker's
        // thread (on loopback the kernel runs it inside `connect`), and the
        // pacer must get its turn between them.
        let mut added = 0;
        while added < ADD_PER_TURN && feed.take_add_request(cx.waker()) {
            loops.push(Either::Left(connection_loop(
                ctx,
                next_index,
                LoopSlot::default(),
                feed,
            )));
            next_index += 1;
            added += 1;
        }
        if added == ADD_PER_TURN {
            // More may be asked for: come back after the pacer's turn.
            cx.waker().wake_by_ref();
        }
        loop {
            // Every loop has ended once only the idle member is left.
            if loops.len() <= 1 {
                ctx.flush(cx);
                return Poll::Ready(());
            }
            match loops.poll_next_unpin(cx) {
                Poll::Ready(Some(slot)) => done.push(slot),
                Poll::Ready(None) => continue,
                Poll::Pending => {
                    ctx.flush(cx);
                    return Poll::Pending;
                }
            }
        }
    });
    tokio::task::coop::unconstrained(all).await;
    done
}

/// The set the worker polls its loops in: `loops`, and a member that never
/// wakes. `FuturesUnordered` hands the worker back to the runtime, and
/// wakes it at once, whenever it has polled as many futures as it holds,
/// which a worker with one connection did at every response: a second turn
/// of the runtime for nothing, with an `epoll_wait` of its own. With the
/// idle member among them, that happens only where a loop is polled twice
/// in one call, as it still should.
fn loop_set<S, F: Future<Output = S>>(
    loops: impl Iterator<Item = F>,
) -> FuturesUnordered<Either<F, std::future::Pending<S>>> {
    let set: FuturesUnordered<_> = loops.map(Either::Left).collect();
    set.push(Either::Right(std::future::pending()));
    set
}

/// Opens every loop's connection at once, before a phase starts, for at
/// most `within`; a connection not open by then (or that failed) is opened
/// by its loop's first request, which counts any failure.
///
/// The open model needs this: its schedule starts at full rate, and a loop
/// that first connects when its first ticket arrives is busy for the
/// handshake while tickets keep falling due, so the pacer asks for more
/// connections, whose handshakes take the worker's thread in turn. At
/// 40,000 req/s on one worker that cascade opened hundreds of connections
/// in the first milliseconds and made the pacer 5-40 ms late.
pub async fn open_connections<W: FastPath>(
    ctx: &WorkerCtx<W>,
    slots: &mut [LoopSlot<W>],
    within: std::time::Duration,
) {
    let opening: FuturesUnordered<_> = slots
        .iter_mut()
        .map(|slot| async {
            let driver = slot.driver.get_or_insert_with(|| Driver::new(ctx));
            // A failure here is counted when the loop's first request retries.
            let _ = driver.connect(ctx).await;
        })
        .collect();
    let all = opening.collect::<()>();
    let _ = tokio::time::timeout(within, tokio::task::coop::unconstrained(all)).await;
}

/// The general request loop: take a ticket, send, read, record, until the feed
/// says stop. Each round sends up to `--pipeline` requests in one write (one
/// without pipelining) and reads their responses in order.
async fn connection_loop<W: FastPath>(
    ctx: &WorkerCtx<W>,
    index: usize,
    mut slot: LoopSlot<W>,
    feed: &Feed,
) -> LoopSlot<W> {
    let driver = slot.driver.get_or_insert_with(|| Driver::new(ctx));
    let workload = &ctx.shared.workload;
    if let Workload::Fixed(request) = workload {
        let general = async |driver: &mut Driver<W>, ticket| {
            send_fixed(ctx, driver, request, ticket).await;
        };
        if W::run_fast(ctx, driver, feed, general).await {
            return slot;
        }
    }
    // This task is new to the loop's timer (a new phase).
    driver.resume();
    let mut since_yield = 0u32;
    let mut answered_at = None;
    while let Some(ticket) = feed.next(index, answered_at).await {
        since_yield += ticket.count;
        if since_yield >= YIELD_EVERY {
            since_yield = 0;
            tokio::task::yield_now().await;
        }
        answered_at = match workload {
            Workload::Flow(scenario) => {
                iteration::run(ctx, driver, &mut slot.iteration, ticket, scenario).await;
                None
            }
            Workload::Fixed(request) => send_fixed(ctx, driver, request, ticket).await,
            Workload::Script => {
                let Some(script) = &ctx.script else { break };
                match script::round(ctx, script, driver, &mut slot.script, ticket).await {
                    Ok(answered_at) => answered_at,
                    Err(Stopped) => break,
                }
            }
            Workload::Users => {
                let Some(vus) = &ctx.users else { break };
                users::iteration(ctx, vus, driver, &mut slot.vu, ticket, index).await;
                None
            }
        };
    }
    slot
}

/// One round of the run's pre-built `request`: `ticket.count` requests (a
/// pipelined round over HTTP/1.1), each response recorded as it comes.
/// Every response must be complete within the request timeout of the
/// actual send. Returns when the round's last response was read, if every
/// one was.
async fn send_fixed<W: FastPath>(
    ctx: &WorkerCtx<W>,
    driver: &mut Driver<W>,
    request: &W::Request,
    ticket: Ticket,
) -> Option<Instant> {
    let open_model = ctx.shared.model.is_open();
    let sent_at = send_time(ctx, ticket);
    let deadline = tokio::time::Instant::from_std(sent_at + ctx.shared.transport.timeout);
    let outgoing = Outgoing::Fixed {
        request,
        count: ticket.count,
    };
    let mut answered_at = None;
    let round = driver.round_trip(ctx, outgoing, deadline, |head| {
        answered_at = Some(record_response(ctx, ticket, sent_at, head));
    });
    match round.await {
        Ok(()) => answered_at,
        Err(lost) => {
            fail(ctx, &lost.err, ticket, sent_at, lost.count);
            if !open_model {
                ctx.connector.back_off(&lost.err).await;
            }
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wake::CountingWaker;
    use std::cell::RefCell;
    use std::rc::Rc;
    use std::sync::Arc;
    use std::task::{Context, Waker};

    #[test]
    fn polling_the_only_loop_woken_does_not_wake_the_worker_again() {
        // A loop waiting for its response: it keeps the waker it was given.
        let parked: Rc<RefCell<Option<Waker>>> = Rc::default();
        let waiting = {
            let parked = parked.clone();
            std::future::poll_fn(move |cx| {
                *parked.borrow_mut() = Some(cx.waker().clone());
                Poll::<()>::Pending
            })
        };
        let mut loops = loop_set(std::iter::once(waiting));
        // The worker's waker, counting its wakes.
        let worker = Arc::new(CountingWaker::default());
        let waker = Waker::from(worker.clone());
        let mut cx = Context::from_waker(&waker);
        assert!(loops.poll_next_unpin(&mut cx).is_pending());
        // Its response came: the loop is woken, and through it the worker.
        parked
            .borrow()
            .as_ref()
            .expect("the loop was polled")
            .wake_by_ref();
        let wakes = worker.wakes();
        assert!(loops.poll_next_unpin(&mut cx).is_pending());
        assert_eq!(
            worker.wakes(),
            wakes,
            "polling the one loop that was woken woke the worker for another turn"
        );
    }
}
