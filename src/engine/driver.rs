//! One request loop's way to the server, whatever the protocol: a
//! [`Driver`] holds the loop's [`Wire::Way`] (its connection, or its lane
//! on a shared one) and the loop's timer, and its one `round_trip` bounds
//! each request by its deadline. Everything else (connecting when needed,
//! dropping a connection that failed or was closed, handing each response
//! on in order) is the protocol's, behind [`Wire`]. Nothing here locks or
//! allocates per request.

use super::deadline::LoopTimer;
use super::exchange::{Lost, Outgoing, Wire, WorkerCtx};
use crate::response::ResponseHead;
use crate::sample::RequestError;
use tokio::time::Instant;

/// One request loop's way to the server, and the timer that bounds its
/// requests, kept across requests and phases.
pub struct Driver<W: Wire> {
    pub(super) way: W::Way,
    pub(super) timer: LoopTimer,
}

impl<W: Wire> Driver<W> {
    /// The driver of the run's protocol for a new loop.
    pub(super) fn new(ctx: &WorkerCtx<W>) -> Driver<W> {
        Driver {
            way: W::way(ctx),
            timer: LoopTimer::new(),
        }
    }

    /// Sends a round and reads its responses, handing each response's head
    /// to `answered` in order, all before `deadline` (see
    /// [`Wire::round_trip`]). On an error returns how many requests of the
    /// round got no response (over HTTP/2 and HTTP/3 a round is one
    /// request).
    pub(super) async fn round_trip(
        &mut self,
        ctx: &WorkerCtx<W>,
        outgoing: Outgoing<'_, W::Request>,
        deadline: Instant,
        answered: impl FnMut(ResponseHead),
    ) -> Result<(), Lost> {
        let timer = self.timer.for_request(deadline, ctx.shared.transport.timeout);
        W::round_trip(&mut self.way, ctx, outgoing, timer, answered).await
    }

    /// Opens the loop's connection now if it has none (over HTTP/2 and
    /// HTTP/3: its group's), instead of at its first request.
    pub(super) async fn connect(&mut self, ctx: &WorkerCtx<W>) -> Result<(), RequestError> {
        W::connect(&mut self.way, ctx).await
    }

    /// Sends the next request on a new connection (a plan's
    /// `new_conn_per_iter`).
    pub(super) fn new_connection(&mut self) {
        W::new_connection(&mut self.way);
    }

    /// A new task polls the loop (a new phase, or after a yield): the
    /// timer must be polled once by it to wake it.
    pub(super) fn resume(&mut self) {
        self.timer.resume();
    }
}
