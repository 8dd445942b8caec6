//! The pieces below everything else in the engine's request path: the
//! worker's context, borrowed by every loop and by the protocol driver,
//! and how an answer or a failure is recorded (`classify`).
//!
//! Latency runs from the ticket's intended time; the service time from the
//! actual send. Nothing here locks or allocates per request: the recorder
//! is this thread's own.

use super::Shared;
use super::feed::Ticket;
use crate::http1::response::KnownHead;
use crate::http2::{Home, Lane, Outbox};
use crate::http3;
use crate::net::Connector;
use crate::net::uring::Ring;
use crate::recorder::Recorder;
use crate::response::{BodySink, ResponseHead};
use crate::sample::{ErrorDetail, ErrorKind, Outcome, RequestError, Sample};
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

/// The worker's view of the run, borrowed by every connection loop.
pub struct WorkerCtx {
    pub shared: Arc<Shared>,
    pub connector: Connector,
    pub recorder: RefCell<Recorder>,
    pub sink: BodySink,
    /// Scenarios: iterations started by this worker (numbers them).
    pub iterations: std::cell::Cell<u64>,
    pub worker: usize,
    pub workers: usize,
    /// What the worker's loops share per protocol.
    pub lanes: Lanes,
}

/// What a worker's loops share, per protocol.
pub enum Lanes {
    /// Each loop owns its connection; the loops share the last response
    /// head read.
    Http1(KnownHead),
    Http2 {
        /// The connection group new loops join until it is full.
        home: RefCell<Option<Rc<Home>>>,
        /// Connections with frames to write, flushed once every ready loop
        /// has run (so a batch of requests is one write).
        outbox: Rc<Outbox>,
    },
    /// As HTTP/2's, and how the worker opens QUIC connections.
    Http3 {
        home: RefCell<Option<Rc<http3::Home>>>,
        outbox: Rc<Outbox>,
        dialer: http3::Dialer,
    },
}

impl Lanes {
    /// The shared parts of the run's protocol.
    pub fn of(shared: &Shared, ring: Option<&Rc<Ring>>) -> Lanes {
        match &shared.prepared {
            super::Prepared::Http1(_) => Lanes::Http1(KnownHead::default()),
            super::Prepared::Http2(_) => Lanes::Http2 {
                home: RefCell::new(None),
                outbox: Rc::new(outbox_for(shared)),
            },
            super::Prepared::Http3 { quic, .. } => Lanes::Http3 {
                home: RefCell::new(None),
                outbox: Rc::new(outbox_for(shared)),
                dialer: http3::Dialer::new(
                    shared.target.addrs.clone(),
                    quic.clone(),
                    shared.tls.as_ref().map(|t| t.server_name()).unwrap_or_default(),
                    shared.transport.connect_timeout,
                    ring.cloned(),
                ),
            },
        }
    }
}

/// The worker's outbox: one whose connections send in rounds with
/// `--coalesce`.
fn outbox_for(shared: &Shared) -> Outbox {
    match shared.transport.coalesce {
        true => Outbox::coalescing(),
        false => Outbox::default(),
    }
}

impl WorkerCtx {
    /// The last HTTP/1.1 response head the worker read.
    pub(super) fn known_head(&self) -> &KnownHead {
        let Lanes::Http1(known) = &self.lanes else {
            unreachable!("HTTP/1.1 responses only in an HTTP/1.1 run")
        };
        known
    }

    /// A lane on the newest HTTP/2 connection group, or on a new group.
    pub(super) fn next_lane(&self) -> Lane {
        let Lanes::Http2 { home, outbox } = &self.lanes else {
            unreachable!("HTTP/2 lanes only in an HTTP/2 run")
        };
        let mut home = home.borrow_mut();
        if let Some(lane) = home.as_ref().and_then(Lane::of) {
            return lane;
        }
        let fresh = Home::new(self.shared.transport.streams, outbox.clone());
        let lane = Lane::of(&fresh).expect("a new group has free lanes");
        *home = Some(fresh);
        lane
    }

    /// A lane on the newest HTTP/3 connection group, or on a new group.
    pub(super) fn next_h3_lane(&self) -> http3::Lane {
        let Lanes::Http3 { home, outbox, .. } = &self.lanes else {
            unreachable!("HTTP/3 lanes only in an HTTP/3 run")
        };
        let mut home = home.borrow_mut();
        if let Some(lane) = home.as_ref().and_then(http3::Lane::of) {
            return lane;
        }
        let fresh = http3::Home::new(self.shared.transport.streams, outbox.clone());
        let lane = http3::Lane::of(&fresh).expect("a new group has free lanes");
        *home = Some(fresh);
        lane
    }

    /// How the worker opens QUIC connections (in an HTTP/3 run).
    pub(super) fn dialer(&self) -> &http3::Dialer {
        let Lanes::Http3 { dialer, .. } = &self.lanes else {
            unreachable!("a dialer only in an HTTP/3 run")
        };
        dialer
    }

    /// Writes the frames (HTTP/2) or datagrams (HTTP/3) the loops queued
    /// this turn.
    pub(super) fn flush_frames(&self, cx: &mut std::task::Context<'_>) {
        match &self.lanes {
            Lanes::Http2 { outbox, .. } | Lanes::Http3 { outbox, .. } => outbox.flush(cx),
            Lanes::Http1(_) => {}
        }
    }
}

/// Records one answered request, received when its head says or else
/// now; returns the instant read.
pub(super) fn record_response(
    ctx: &WorkerCtx,
    ticket: Ticket,
    sent_at: Instant,
    head: ResponseHead,
) -> Instant {
    let now = Instant::now();
    // A request its connection held back (`--coalesce`, closed model only)
    // was sent when it went out, not when its ticket was taken.
    let (intended, sent_at) = head.sent_at.map_or((ticket.intended, sent_at), |t| (t, t));
    // A stamp from before the send (bytes a server sent unasked, read
    // with this response) cannot be its arrival: then it counts as read.
    let received = head.received_at.filter(|&at| at >= sent_at).unwrap_or(now);
    let (latency_us, service_us) = latency_and_service(intended, sent_at, received);
    let sample = Sample {
        latency_us,
        service_us,
        bytes: head.bytes,
        outcome: classify(ctx, head.status),
    };
    ctx.recorder.borrow_mut().record(&sample);
    ctx.shared.offered_h3(head.h3_offer);
    now
}

pub(super) fn micros_between(from: Instant, to: Instant) -> u64 {
    let elapsed = to.saturating_duration_since(from);
    // Not `as_micros`, which multiplies in 128 bits; a u64 of microseconds
    // lasts 584,000 years.
    elapsed.as_secs() * 1_000_000 + u64::from(elapsed.subsec_micros())
}

/// Microseconds from the intended send and from the actual one to `now`:
/// one subtraction when they are the same instant, as in the closed model.
fn latency_and_service(intended: Instant, sent_at: Instant, now: Instant) -> (u64, u64) {
    let latency = micros_between(intended, now);
    if sent_at == intended {
        return (latency, latency);
    }
    (latency, micros_between(sent_at, now))
}

/// Records `count` requests failed with `err`, keeping it as an example.
pub(super) fn fail(ctx: &WorkerCtx, err: &RequestError, ticket: Ticket, sent_at: Instant, count: u32) {
    let now = Instant::now();
    let mut recorder = ctx.recorder.borrow_mut();
    if recorder.wants_example(err.kind) {
        recorder.note_error(err);
    }
    let (latency_us, service_us) = latency_and_service(ticket.intended, sent_at, now);
    let sample = Sample {
        latency_us,
        service_us,
        bytes: 0,
        outcome: Outcome::Failed(err.kind),
    };
    for _ in 0..count {
        recorder.record(&sample);
    }
}

pub(super) fn classify(ctx: &WorkerCtx, status: u16) -> Outcome {
    if ctx.shared.success.contains(status) {
        return Outcome::Ok { status };
    }
    let mut recorder = ctx.recorder.borrow_mut();
    if recorder.wants_example(ErrorKind::Status) {
        recorder.note_error(&RequestError::new(ErrorKind::Status, ErrorDetail::Status(status)));
    }
    Outcome::BadStatus { status }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn latency_runs_from_the_intended_send_and_service_from_the_actual() {
        let intended = Instant::now();
        let now = intended + Duration::new(2, 345_678_901);
        assert_eq!(
            latency_and_service(intended, intended, now),
            (2_345_678, 2_345_678)
        );
        let sent_at = intended + Duration::from_micros(1_500);
        assert_eq!(
            latency_and_service(intended, sent_at, now),
            (2_345_678, 2_344_178)
        );
        // A clock read before the send (never expected) counts as zero.
        assert_eq!(micros_between(now, intended), 0);
    }
}
