//! Which protocols have a fast path, and when it applies: the run asks
//! its [`Wire`] (through [`FastPath`]) instead of checking which protocol
//! it speaks. A protocol without one (HTTP/3) takes the defaults: every
//! request goes the general way.

use super::Shared;
use super::driver::Driver;
use super::exchange::{Wire, WorkerCtx};
use super::feed::{Feed, Ticket};
use super::h1::H1;
use super::multiplexed::{H2, H3};
use super::{lean_h1, lean_h2};

/// A protocol's fast path for the run's own request in the closed model,
/// and what it lets the worker's ring do.
#[allow(async_fn_in_trait)]
pub trait FastPath: Wire {
    /// Runs a loop's requests on the fast path until the phase's budget is
    /// spent, handing each request it cannot take to `general`: `false`,
    /// with nothing done, where the run or the phase allows no fast path.
    async fn run_fast(
        _ctx: &WorkerCtx<Self>,
        _driver: &mut Driver<Self>,
        _feed: &Feed,
        _general: impl AsyncFnMut(&mut Driver<Self>, Ticket),
    ) -> bool {
        false
    }

    /// Whether the run's settings let its responses be read with the
    /// kernel's receive stamps, so that a worker's ring may wait for a few
    /// completions at once (see [`super::batching`]).
    fn reads_stamped(_shared: &Shared<Self>) -> bool {
        false
    }

    /// Whether in a phase of `feed` every response is read as the kernel
    /// stamped it.
    fn stamped_in(ctx: &WorkerCtx<Self>, feed: &Feed) -> bool {
        lean_h1::steady_on_a_ring(ctx, feed)
    }
}

impl FastPath for H1 {
    async fn run_fast(
        ctx: &WorkerCtx<H1>,
        driver: &mut Driver<H1>,
        feed: &Feed,
        general: impl AsyncFnMut(&mut Driver<H1>, Ticket),
    ) -> bool {
        let Some((closed, request)) = lean_h1::applies(ctx, feed) else {
            return false;
        };
        lean_h1::run(ctx, driver, closed, request, general).await;
        true
    }

    fn reads_stamped(shared: &Shared<H1>) -> bool {
        lean_h1::settings_fit(shared)
    }

    /// Only where every loop takes the fast path.
    fn stamped_in(ctx: &WorkerCtx<H1>, feed: &Feed) -> bool {
        lean_h1::applies(ctx, feed).is_some()
    }
}

impl FastPath for H2 {
    async fn run_fast(
        ctx: &WorkerCtx<H2>,
        driver: &mut Driver<H2>,
        feed: &Feed,
        general: impl AsyncFnMut(&mut Driver<H2>, Ticket),
    ) -> bool {
        let Some((closed, request)) = lean_h2::applies(ctx, feed) else {
            return false;
        };
        lean_h2::run(ctx, driver, closed, request, general).await;
        true
    }

    fn reads_stamped(shared: &Shared<H2>) -> bool {
        lean_h2::reads_stamped_sockets(shared)
    }
}

/// HTTP/3 has no fast path: its connection logic, on quinn-proto's state
/// machine, costs far more per request than the general loop's layers.
impl FastPath for H3 {}
