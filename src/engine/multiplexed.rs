//! HTTP/2 and HTTP/3 on the seam: request loops are lanes of a group
//! sharing one connection (`--streams` of them), one stream each at a
//! time (see [`crate::http2::Group`]). The two differ only in how a
//! connection is opened (TCP and TLS through the worker's [`Connector`],
//! or QUIC through its [`Dialer`]) and in their frames; their round trip
//! is written once, here and in the group's [`Lane`].

use super::deadline::Timer;
use super::exchange::{Lost, Outgoing, Wire, WorkerCtx};
use super::protocol::{ProtocolError, Settled};
use super::{EngineError, Shared};
use crate::http2::{self, Dial, Group, H2Request, Lane, Outbox, Streams};
use crate::http3::{self, Dialer, H3Request};
use crate::net::uring::Ring;
use crate::plan::Transport;
use crate::recorder::Recorder;
use crate::request::Request;
use crate::response::ResponseHead;
use crate::sample::RequestError;
use std::cell::RefCell;
use std::rc::Rc;
use std::task::Context;

/// HTTP/2 (h2 over TLS, h2c on plain TCP).
pub struct H2;

/// HTTP/3, over QUIC.
pub struct H3;

/// What a worker's loops share over a multiplexed protocol.
pub struct Lanes<C: Streams> {
    /// The connection group new loops join until it is full.
    home: RefCell<Option<Rc<Group<C>>>>,
    /// Connections with frames to write, flushed once every ready loop
    /// has run (so a batch of requests is one write).
    outbox: Rc<Outbox>,
    /// Loops per connection (`--streams`).
    streams: usize,
}

impl<C: Streams> Lanes<C> {
    fn new(transport: &Transport) -> Lanes<C> {
        // With `--coalesce` the worker's connections send in rounds.
        let outbox = match transport.coalesce {
            true => Outbox::coalescing(),
            false => Outbox::default(),
        };
        Lanes {
            home: RefCell::new(None),
            outbox: Rc::new(outbox),
            streams: transport.streams,
        }
    }

    /// A lane on the newest connection group, or on a new group.
    fn next_lane(&self) -> Lane<C> {
        let mut home = self.home.borrow_mut();
        if let Some(lane) = home.as_ref().and_then(Lane::of) {
            return lane;
        }
        let fresh = Group::new(self.streams, self.outbox.clone());
        let lane = Lane::of(&fresh).expect("a new group has free lanes");
        *home = Some(fresh);
        lane
    }
}

/// What a worker's HTTP/3 loops share: their lanes, and how the worker
/// opens QUIC connections.
pub struct H3Lanes {
    lanes: Lanes<http3::Conn>,
    dialer: Dialer,
}

/// [`Wire::round_trip`] over either protocol: a request on the lane's
/// stream (a script's several, one after another), on a connection
/// `dialer` opens when the group has none.
async fn round_trip<C: Streams>(
    lane: &mut Lane<C>,
    dialer: &impl Dial<C>,
    recorder: &RefCell<Recorder>,
    keepalive: bool,
    outgoing: Outgoing<'_, C::Request>,
    mut timer: Timer<'_>,
    mut answered: impl FnMut(ResponseHead),
) -> Result<(), Lost> {
    let (request, capture) = match outgoing {
        Outgoing::Fixed { request, .. } => {
            let exchange = lane.round_trip(dialer, recorder, request, None, keepalive);
            return one(timer.within(exchange).await, answered);
        }
        Outgoing::Rendered { request, capture } => (request, capture),
        Outgoing::Written {
            text,
            requests,
            fields,
            mut capture,
            target,
        } => {
            // One stream per request, in turn.
            let count = requests.len() as u32;
            for (done, index) in requests.enumerate() {
                let request = text.request(index, target, fields);
                let exchange =
                    lane.round_trip_rendered(dialer, recorder, &request, capture.as_deref_mut(), keepalive);
                if let Err(mut lost) = one(timer.within(exchange).await, &mut answered) {
                    lost.count = count - done as u32;
                    return Err(lost);
                }
            }
            return Ok(());
        }
    };
    let exchange = lane.round_trip_rendered(dialer, recorder, request, Some(capture), keepalive);
    one(timer.within(exchange).await, answered)
}

/// Hands on one request's answer, or counts it lost.
fn one(
    result: Result<ResponseHead, RequestError>,
    mut answered: impl FnMut(ResponseHead),
) -> Result<(), Lost> {
    match result {
        Ok(head) => {
            answered(head);
            Ok(())
        }
        Err(err) => Err(Lost { err, count: 1 }),
    }
}

impl Wire for H2 {
    type Request = H2Request;
    type Setup = ();
    type Lanes = Lanes<http2::conn::Conn>;
    type Way = http2::H2Lane;

    fn encode(request: &Request<'_>, _transport: &Transport) -> Result<H2Request, EngineError> {
        H2Request::new(request).map_err(|e| EngineError::Http2Request(e.message()))
    }

    fn setup(_settled: &Settled) -> Result<(), EngineError> {
        Ok(())
    }

    fn lanes(shared: &Shared<H2>, _ring: Option<&Rc<Ring>>) -> Self::Lanes {
        Lanes::new(&shared.transport)
    }

    fn way(ctx: &WorkerCtx<H2>) -> http2::H2Lane {
        ctx.lanes.next_lane()
    }

    async fn connect(lane: &mut http2::H2Lane, ctx: &WorkerCtx<H2>) -> Result<(), RequestError> {
        lane.connect(&ctx.connector, &ctx.recorder).await
    }

    fn new_connection(lane: &mut http2::H2Lane) {
        lane.new_connection();
    }

    async fn round_trip(
        lane: &mut http2::H2Lane,
        ctx: &WorkerCtx<H2>,
        outgoing: Outgoing<'_, H2Request>,
        timer: Timer<'_>,
        answered: impl FnMut(ResponseHead),
    ) -> Result<(), Lost> {
        let keepalive = ctx.shared.transport.keepalive;
        round_trip(
            lane,
            &ctx.connector,
            &ctx.recorder,
            keepalive,
            outgoing,
            timer,
            answered,
        )
        .await
    }

    fn flush(lanes: &Self::Lanes, cx: &mut Context<'_>) {
        lanes.outbox.flush(cx);
    }
}

impl Wire for H3 {
    type Request = H3Request;
    /// QUIC's client configuration (TLS included) every connection of the
    /// run is opened with.
    type Setup = quinn_proto::ClientConfig;
    type Lanes = H3Lanes;
    type Way = http3::H3Lane;

    fn encode(request: &Request<'_>, _transport: &Transport) -> Result<H3Request, EngineError> {
        H3Request::new(request).map_err(|e| EngineError::Http3Request(e.message()))
    }

    fn setup(settled: &Settled) -> Result<quinn_proto::ClientConfig, EngineError> {
        let tls = settled.tls.as_ref().ok_or(ProtocolError::Http3NeedsHttps)?;
        Ok(http3::client_config(tls.client_config()).map_err(ProtocolError::Quic)?)
    }

    fn lanes(shared: &Shared<H3>, ring: Option<&Rc<Ring>>) -> H3Lanes {
        H3Lanes {
            lanes: Lanes::new(&shared.transport),
            dialer: Dialer::new(
                shared.target.addrs.clone(),
                shared.setup.clone(),
                shared.tls.as_ref().map(|t| t.server_name()).unwrap_or_default(),
                shared.transport.connect_timeout,
                ring.cloned(),
            ),
        }
    }

    fn way(ctx: &WorkerCtx<H3>) -> http3::H3Lane {
        ctx.lanes.lanes.next_lane()
    }

    async fn connect(lane: &mut http3::H3Lane, ctx: &WorkerCtx<H3>) -> Result<(), RequestError> {
        lane.connect(&ctx.lanes.dialer, &ctx.recorder).await
    }

    fn new_connection(lane: &mut http3::H3Lane) {
        lane.new_connection();
    }

    async fn round_trip(
        lane: &mut http3::H3Lane,
        ctx: &WorkerCtx<H3>,
        outgoing: Outgoing<'_, H3Request>,
        timer: Timer<'_>,
        answered: impl FnMut(ResponseHead),
    ) -> Result<(), Lost> {
        let keepalive = ctx.shared.transport.keepalive;
        let dialer = &ctx.lanes.dialer;
        round_trip(lane, dialer, &ctx.recorder, keepalive, outgoing, timer, answered).await
    }

    fn flush(lanes: &H3Lanes, cx: &mut Context<'_>) {
        lanes.lanes.outbox.flush(cx);
    }
}
