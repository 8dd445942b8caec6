//! One HTTP/3 connection: a QUIC connection (quinn-proto's state machine)
//! on a connected UDP socket of its own, and the request streams its lanes
//! run on it.
//!
//! As over HTTP/2 there is no connection task: a lane opens its stream and
//! writes its request into the QUIC connection, then polls for its
//! response, and while it waits it receives the socket's datagrams, runs
//! the connection's timers and reads every stream that has data,
//! completing and waking the lanes they belong to. The last lane that found
//! the socket empty is the *driver*: the socket and the timer hold its
//! waker. Datagrams go out at the worker's flush (the connection queues
//! itself in the worker's [`Outbox`]), so the requests of a batch of
//! responses leave together, several datagrams per system call where the
//! kernel has GSO.
//!
//! quinn-proto does QUIC (packets, loss recovery, congestion and flow
//! control, TLS 1.3 through rustls); the HTTP/3 frames and QPACK are
//! volley's own ([`super::frame`], [`super::qpack`]), as its HPACK is.

use super::frame::{self, FrameReader, Piece};
use super::qpack;
use super::request::H3Request;
use super::udp::{Received, Socket};
use crate::http2::{Failure, Finished, Multiplexed, Outbox, Pending, Rounds, Seat, Tally, WriteOut};
use crate::net::uring::Ring;
use crate::response::{Capture, ResponseHead};
use crate::sample::{ErrorDetail, ErrorKind, RequestError};
use crate::wake::keep_waker;
use bytes::BytesMut;
use quinn_proto::{
    ClientConfig, ConnectionError, ConnectionHandle, DatagramEvent, Dir, Endpoint, EndpointConfig, Event,
    ReadError, StreamEvent, StreamId, VarInt, WriteError,
};
use std::cell::RefCell;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Instant;

/// The largest response field section volley accepts, advertised as
/// SETTINGS_MAX_FIELD_SECTION_SIZE (as HTTP/2's header list limit).
pub const MAX_FIELD_SECTION: usize = 256 * 1024;
/// How late a QUIC timer may run for its sleep not to be set again: the
/// granularity of tokio's timers and of QUIC's own (RFC 9002's kGranularity).
/// The acknowledgement timer a response sets often comes a fraction of a
/// millisecond before the loss-detection timer the sleep waits for.
const TIMER_SLACK: std::time::Duration = std::time::Duration::from_millis(1);
/// A lane yields to the runtime after this many receives in one poll that
/// found datagrams waiting (a flood must not starve timers and flushes).
const YIELD_READS: u32 = 32;

/// When a new connection must be up: `by`, the end of the connect
/// timeout (`timeout`, which the error names).
#[derive(Clone, Copy, Debug)]
pub struct Deadline {
    pub by: tokio::time::Instant,
    pub timeout: std::time::Duration,
}

/// Where a new connection lives in its worker: how many lanes share it,
/// the outbox its datagrams wait in for the worker's flush, and the ring
/// that drives its socket, when the worker has one.
pub struct Place<'a> {
    pub lanes: usize,
    pub outbox: Rc<Outbox>,
    pub ring: Option<&'a Rc<Ring>>,
}

/// A connection's finished handshake, as the report counts it.
#[derive(Clone, Copy, Debug)]
pub struct Handshake {
    /// From the first datagram to the handshake done.
    pub took: std::time::Duration,
    /// An earlier session resumed: no certificate was checked.
    pub resumed: bool,
    /// Requests went out as 0-RTT early data: whether the server took
    /// them (`None`: nothing was sent before the handshake).
    pub zero_rtt: Option<bool>,
}

#[derive(Default)]
struct LaneState {
    id: Option<StreamId>,
    /// Bytes of the request written into the stream.
    sent: usize,
    /// The request is all written and the stream finished.
    send_done: bool,
    reader: FrameReader,
    /// A HEADERS frame's field section, gathered until whole.
    block: Vec<u8>,
    /// The final status; 0 until it came.
    status: u16,
    bytes: u64,
    result: Option<Result<(), Failure>>,
    waker: Option<Waker>,
    capture: Option<Capture>,
    /// `--coalesce`: when the stream's request began to go out; `None`
    /// while it waits to.
    sent_at: Option<Instant>,
}

impl LaneState {
    fn open(&self) -> bool {
        self.id.is_some() && self.result.is_none()
    }
}

/// A stream the server opened towards volley: its control stream, QPACK
/// streams (unused, as volley allows no dynamic table), or others.
struct PeerStream {
    id: StreamId,
    /// The stream's type, once its first bytes came.
    kind: Option<u64>,
    head: Vec<u8>,
    reader: FrameReader,
    /// A control frame's payload (SETTINGS, GOAWAY), gathered.
    payload: Vec<u8>,
}

struct Inner {
    socket: Socket,
    endpoint: Endpoint,
    handle: ConnectionHandle,
    quic: quinn_proto::Connection,
    /// Wakes the driver for quinn-proto's next timer. It is set lazily:
    /// to a deadline no later than the next timer's (`armed`, give or take
    /// [`TIMER_SLACK`]), and set again only when the next timer comes
    /// earlier than that or it fired, because the loss-detection timer
    /// moves later with every packet sent, and resetting a tokio timer for
    /// each would cost more than the rare early wake it saves.
    timer: Pin<Box<tokio::time::Sleep>>,
    /// The deadline `timer` is set to; `None` when nothing waits on it.
    armed: Option<Instant>,
    /// The socket was found empty since the worker's last flush: a lane
    /// starting a stream in the same turn need not look again (see
    /// `catch_up`).
    caught_up: bool,
    /// A transmit the socket could not take yet.
    unsent: Option<quinn_proto::Transmit>,
    send_buf: Vec<u8>,
    /// What quinn-proto is handed of each received batch: one buffer the
    /// datagrams are split off, reclaimed whole once quinn-proto has
    /// dropped them (it keeps stream data only until the stream is read).
    /// A `BytesMut` of its own per datagram would be two allocations per
    /// datagram: its copy, and the shared header quinn-proto's first
    /// split of it makes.
    datagrams: BytesMut,
    /// The messages of the last receive, in `datagrams`.
    received: Vec<Received>,
    /// For stateless answers the endpoint would send (a client has none
    /// to send, but the call needs the room).
    spare: Vec<u8>,
    lanes: Vec<LaneState>,
    /// The control stream's preface still to write.
    control: Option<(StreamId, Vec<u8>, usize)>,
    peers: Vec<PeerStream>,
    /// A GOAWAY's limit: streams from this id on were not processed.
    goaway: Option<u64>,
    connected: bool,
    /// When the first datagram was made, for the handshake's time.
    began: Instant,
    /// The handshake checked the server's certificate: a full one, not a
    /// resumption (see `tls/observed.rs`).
    certificate_checked: bool,
    /// Streams may start before the handshake is done (0-RTT).
    early: bool,
    /// With `early`, when the handshake must be done (the connect timeout,
    /// which the error names).
    early_deadline: Option<(Instant, std::time::Duration)>,
    /// The finished handshake, until a lane records it.
    handshake: Option<Handshake>,
    /// Why the certificate verifier refused the server, if it did.
    refused: Option<rustls::Error>,
    dead: bool,
    /// Why the connection died, as a message for every stream it failed.
    death: Option<(ErrorKind, String)>,
    closing: bool,
    driver: Option<usize>,
    capacity_waiters: Vec<Waker>,
    /// Scratch for field names and values.
    name: Vec<u8>,
    value: Vec<u8>,
    /// `--coalesce`: requests wait to go out with the other streams'.
    rounds: Rounds,
}

/// One HTTP/3 connection, shared by the lanes of one [`super::Home`].
pub struct Conn {
    inner: RefCell<Inner>,
    seat: Seat<Conn>,
}

impl Pending for Conn {
    fn write_out(&self, cx: &mut Context<'_>) -> WriteOut {
        let mut inner = self.inner.borrow_mut();
        let held = inner.hold();
        let sent = match held {
            Some(_) => Poll::Ready(()),
            None => inner.poll_transmit(cx),
        };
        inner.caught_up = false;
        // Sending may have set a timer earlier than the one the driver
        // waits on: have it look again. (One set later, as loss detection
        // is with every packet, waits for the earlier to fire.)
        let earlier = inner.next_timer().is_some_and(|at| inner.wakes_late_for(at));
        if (earlier || inner.orphaned())
            && let Some(waker) = inner.a_waiting_waker()
        {
            waker.wake_by_ref();
        }
        if let Some(until) = held {
            return WriteOut::Held(until);
        }
        match sent {
            Poll::Ready(()) => {
                self.seat.leave();
                WriteOut::Done
            }
            Poll::Pending => WriteOut::Blocked,
        }
    }
}

impl Conn {
    /// Opens a QUIC connection to `addr`, at its `place` in the worker,
    /// and completes its handshake by `deadline`.
    ///
    /// With `early`, a connection that resumes a session with 0-RTT keys
    /// (only where `--0rtt` enabled early data) is handed back at once:
    /// its first streams go out as early data, and the handshake finishes,
    /// still by `deadline`, while its lanes drive it.
    pub async fn connect(
        addr: SocketAddr,
        config: ClientConfig,
        server_name: &str,
        place: Place<'_>,
        deadline: Deadline,
        early: bool,
    ) -> Result<Rc<Conn>, RequestError> {
        let conn = Conn::start_connecting(addr, config, server_name, place)?;
        if early && conn.inner.borrow().quic.has_0rtt() {
            let mut inner = conn.inner.borrow_mut();
            inner.early = true;
            inner.early_deadline = Some((deadline.by.into_std(), deadline.timeout));
            drop(inner);
            // The Initial goes out at the flush even if no stream starts.
            conn.queue();
            return Ok(conn);
        }
        let handshake = std::future::poll_fn(|cx| conn.poll_handshake(cx));
        match tokio::time::timeout_at(deadline.by, handshake).await {
            Ok(done) => done.map(|()| conn),
            Err(_) => Err(conn.inner.borrow().handshake_timeout(deadline.timeout)),
        }
    }

    /// The connection's handshake, once done, for the first lane to record
    /// it.
    pub fn take_handshake(&self) -> Option<Handshake> {
        self.inner.borrow_mut().handshake.take()
    }

    fn start_connecting(
        addr: SocketAddr,
        config: ClientConfig,
        server_name: &str,
        place: Place<'_>,
    ) -> Result<Rc<Conn>, RequestError> {
        let opened =
            Socket::open(addr, place.ring).map_err(|err| RequestError::io(ErrorKind::Connect, err))?;
        let mut endpoint = Endpoint::new(
            Arc::new(EndpointConfig::default()),
            None,
            !opened.may_fragment,
            None,
        );
        let began = Instant::now();
        let (handle, quic) = endpoint
            .connect(began, config, addr, server_name)
            .map_err(|err| {
                RequestError::new(ErrorKind::Connect, ErrorDetail::Text(format!("QUIC: {err}")))
            })?;
        let max_datagrams = opened.socket.max_datagrams();
        let rounds = Rounds::new(place.outbox.coalesces());
        Ok(Rc::new_cyclic(|this| Conn {
            seat: Seat::new(place.outbox, this.clone()),
            inner: RefCell::new(Inner {
                socket: opened.socket,
                endpoint,
                handle,
                quic,
                timer: Box::pin(tokio::time::sleep(std::time::Duration::ZERO)),
                armed: None,
                caught_up: false,
                unsent: None,
                send_buf: Vec::with_capacity(1500 * max_datagrams),
                datagrams: BytesMut::new(),
                received: Vec::new(),
                spare: Vec::new(),
                lanes: (0..place.lanes).map(|_| LaneState::default()).collect(),
                control: None,
                peers: Vec::new(),
                goaway: None,
                connected: false,
                began,
                certificate_checked: false,
                early: false,
                early_deadline: None,
                handshake: None,
                refused: None,
                dead: false,
                death: None,
                closing: false,
                driver: None,
                capacity_waiters: Vec::new(),
                name: Vec::new(),
                value: Vec::new(),
                rounds,
            }),
        }))
    }

    /// Drives the handshake: ready once the connection is up (its control
    /// stream opened), or with why it failed.
    fn poll_handshake(&self, cx: &mut Context<'_>) -> Poll<Result<(), RequestError>> {
        let mut inner = self.inner.borrow_mut();
        loop {
            let _ = inner.poll_transmit(cx);
            if inner.connected {
                return Poll::Ready(Ok(()));
            }
            if inner.dead {
                let (kind, message) = inner.death.clone().unwrap_or((ErrorKind::Connect, String::new()));
                // A handshake that fails is the connect's or TLS's failure.
                let kind = if kind == ErrorKind::Tls {
                    kind
                } else {
                    ErrorKind::Connect
                };
                return Poll::Ready(Err(RequestError::new(kind, ErrorDetail::Text(message))));
            }
            match inner.poll_receive(cx) {
                Poll::Ready(Ok(_)) => continue,
                Poll::Ready(Err(err)) => inner.socket_failed(err),
                Poll::Pending => match inner.poll_timer(cx, None) {
                    Poll::Ready(()) => continue,
                    Poll::Pending => return Poll::Pending,
                },
            }
        }
    }

    /// Queues the connection for the worker's next flush.
    fn queue(&self) {
        self.seat.enter();
    }

    /// Opens the lane's stream and writes its request: ready with `true`
    /// once it is open, `false` when the connection takes no more streams
    /// (the lane goes to another), pending while the server's stream limit
    /// is reached.
    pub fn poll_start(
        &self,
        lane: usize,
        request: &H3Request,
        capture: &mut Option<Capture>,
        cx: &mut Context<'_>,
    ) -> Poll<bool> {
        let mut inner = self.inner.borrow_mut();
        if inner.dead || inner.closing || inner.goaway.is_some() {
            inner.let_go(lane);
            return Poll::Ready(false);
        }
        let Some(id) = inner.quic.streams().open(Dir::Bi) else {
            // The server frees stream slots when it has our ACKs of the
            // streams that ended, and says so in MAX_STREAMS: a lane that
            // waits for one keeps the connection going (its socket and
            // timers), as nobody else may be left to.
            inner.capacity_waiters.push(cx.waker().clone());
            inner.lanes[lane].waker = Some(cx.waker().clone());
            inner.driver = Some(lane);
            inner.poll_io(cx);
            drop(inner);
            self.queue();
            return Poll::Pending;
        };
        let state = &mut inner.lanes[lane];
        state.id = Some(id);
        state.sent = 0;
        state.send_done = false;
        state.reader.reset();
        state.block.clear();
        state.status = 0;
        state.bytes = 0;
        state.result = None;
        state.capture = capture.take();
        state.sent_at = None;
        inner.send_request(lane, request);
        drop(inner);
        self.queue();
        Poll::Ready(true)
    }

    /// Drives the connection until the lane's stream has finished.
    pub fn poll_response(&self, lane: usize, request: &H3Request, cx: &mut Context<'_>) -> Poll<Finished> {
        let finished = self.inner.borrow_mut().drive(lane, request, cx);
        self.queue();
        finished
    }
}

impl Multiplexed for Conn {
    /// Whether a new stream may start here.
    fn accepts_streams(&self) -> bool {
        let inner = self.inner.borrow();
        !inner.dead && !inner.closing && inner.goaway.is_none()
    }

    /// Starts no more streams here (one connection per request).
    fn retire(&self) {
        self.inner.borrow_mut().closing = true;
    }

    /// The lane gave up on its stream (a timeout, or the run ended): the
    /// server is told, and later data for it is ignored.
    fn cancel(&self, lane: usize) {
        let mut inner = self.inner.borrow_mut();
        let state = &mut inner.lanes[lane];
        let Some(id) = state.id.filter(|_| state.result.is_none()) else {
            return;
        };
        state.result = Some(Err(Failure::Error(RequestError::protocol("cancelled"))));
        let code = VarInt::from_u64(frame::H3_REQUEST_CANCELLED).expect("a small code");
        let _ = inner.quic.send_stream(id).reset(code);
        let _ = inner.quic.recv_stream(id).stop(code);
        inner.lanes[lane].id = None;
        // A stream that timed out says the server may be gone (QUIC hears
        // of a crashed server only at the idle timeout): new streams go on
        // a new connection, while this one's finish here.
        inner.closing = true;
        inner.let_go(lane);
        drop(inner);
        self.queue();
    }
    /// Takes in whatever the socket holds without waiting, so a close the
    /// server sent while the connection sat idle is seen before a new
    /// stream starts on it.
    fn catch_up(&self) {
        let mut inner = self.inner.borrow_mut();
        if inner.caught_up {
            // A lane of this turn read the socket dry (typically this
            // lane, for the response it just finished): nothing sat
            // unread, and the socket keeps its driver's waker.
            return;
        }
        let waker = std::task::Waker::noop();
        let mut cx = Context::from_waker(waker);
        let mut seen = None;
        while let Poll::Ready(Ok(now)) = inner.poll_receive(&mut cx) {
            seen = Some(now);
        }
        inner.run_timers(seen);
        // The socket now holds the no-op waker, not the driver's: whoever
        // drove is no longer woken by it. Without a driver the worker's
        // next flush wakes a waiting lane to take the socket over (unless
        // this lane's own stream, starting now, reads first).
        inner.driver = None;
        drop(inner);
        self.queue();
    }
}

impl Drop for Inner {
    /// Closes the connection cleanly, as far as one send allows: the
    /// server learns at once rather than at its idle timeout.
    fn drop(&mut self) {
        if self.dead {
            return;
        }
        let code = VarInt::from_u64(frame::H3_NO_ERROR).expect("a small code");
        self.quic.close(Instant::now(), code, bytes::Bytes::new());
        self.unsent = None;
        let waker = std::task::Waker::noop();
        let _ = self.poll_transmit(&mut Context::from_waker(waker));
    }
}

impl Inner {
    /// Reads, runs timers and handles events until the lane's stream has
    /// finished.
    fn drive(&mut self, lane: usize, request: &H3Request, cx: &mut Context<'_>) -> Poll<Finished> {
        if self.lanes[lane].result.is_none() {
            self.send_request(lane, request);
            keep_waker(&mut self.lanes[lane].waker, cx.waker());
            // Everything that has arrived is handled before the worker's
            // flush, so the requests it frees go out together.
            self.driver = Some(lane);
            self.poll_io(cx);
            // Credit that came in (flow control) takes more of the body.
            self.send_request(lane, request);
        }
        match self.lanes[lane].result {
            Some(_) => Poll::Ready(self.finish(lane)),
            None => Poll::Pending,
        }
    }

    /// Hands the lane's finished stream back and frees its place.
    fn finish(&mut self, lane: usize) -> Finished {
        let state = &mut self.lanes[lane];
        let result = state.result.take().expect("finished");
        if let Some(id) = state.id.take()
            && !state.send_done
        {
            // Done before its body was all sent (a complete response, or a
            // failure): the rest is not sent, and the stream must still end
            // or it holds one of the server's stream credits for good.
            let code = VarInt::from_u64(frame::H3_REQUEST_CANCELLED).expect("a small code");
            let _ = self.quic.send_stream(id).reset(code);
            state.send_done = true;
        }
        let head = ResponseHead {
            status: state.status,
            bytes: state.bytes,
            close: false,
            // Alt-Svc offers HTTP/3 to clients not speaking it already.
            h3_offer: None,
            sent_at: state.sent_at.take(),
            received_at: None,
        };
        let capture = state.capture.take();
        self.let_go(lane);
        (result.map(|()| head), capture)
    }

    fn let_go(&mut self, lane: usize) {
        if self.driver == Some(lane) {
            self.driver = None;
        }
    }

    /// Streams wait here but no lane is registered to read the socket.
    fn orphaned(&self) -> bool {
        self.driver.is_none()
            && !self.dead
            && (self.lanes.iter().any(LaneState::open) || !self.capacity_waiters.is_empty())
    }

    fn a_waiting_waker(&self) -> Option<&Waker> {
        let driver = self.driver.and_then(|d| self.lanes[d].waker.as_ref());
        driver
            .or_else(|| {
                self.lanes
                    .iter()
                    .filter(|l| l.open())
                    .find_map(|l| l.waker.as_ref())
            })
            .or_else(|| self.capacity_waiters.first())
    }

    /// Receives what the socket has and runs due timers until neither has
    /// more (or after [`YIELD_READS`] receives, coming back at once); the
    /// socket and the timer then hold `cx`'s waker.
    fn poll_io(&mut self, cx: &mut Context<'_>) {
        // The clock as the last receive read it: the timers are checked
        // against it rather than against a reading of their own,
        // microseconds later.
        let mut seen = None;
        for _ in 0..YIELD_READS {
            match self.poll_receive(cx) {
                Poll::Ready(Ok(now)) => {
                    seen = Some(now);
                    continue;
                }
                Poll::Ready(Err(err)) => {
                    self.socket_failed(err);
                    continue;
                }
                Poll::Pending => self.caught_up = true,
            }
            if self.poll_timer(cx, seen.take()).is_pending() {
                return;
            }
        }
        cx.waker().wake_by_ref();
    }

    /// Writes what the QUIC connection will take of the lane's request,
    /// and finishes the stream once it is all in.
    fn send_request(&mut self, lane: usize, request: &H3Request) {
        let state = &mut self.lanes[lane];
        let Some(id) = state.id.filter(|_| !state.send_done && state.result.is_none()) else {
            return;
        };
        let mut stream = self.quic.send_stream(id);
        while state.sent < request.stream_len() {
            // The request's own bytes, referenced: `write` would copy them
            // into an allocation per stream.
            match stream.write_chunks(&mut [request.from(state.sent)]) {
                Ok(written) => state.sent += written.bytes,
                // Flow control: a Writable event wakes the lane for more.
                Err(WriteError::Blocked) => return,
                // The server stopped reading (it answered early, or reset
                // the stream): its response, or its reset, says the rest.
                Err(WriteError::Stopped(_) | WriteError::ClosedStream) => {
                    state.send_done = true;
                    return;
                }
            }
        }
        let _ = stream.finish();
        state.send_done = true;
    }

    /// Receives what the socket has and handles it, ready with the time it
    /// was handled at; pending when there is nothing.
    fn poll_receive(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<Instant>> {
        if self.dead {
            return Poll::Pending;
        }
        self.received.clear();
        std::task::ready!(self.socket.poll_recv(cx, &mut self.datagrams, &mut self.received))?;
        let now = Instant::now();
        // The handshake runs inside `handle_event`, on this thread, for
        // this connection alone: a certificate checked meanwhile was
        // this connection's, and why it was refused is picked up there
        // (quinn-proto keeps only its text).
        let handshaking = !self.connected;
        let checked = handshaking.then(crate::tls::verifications);
        let server = self.quic.remote_address();
        for message in &self.received {
            let mut bytes = self.datagrams.split_to(message.len);
            while !bytes.is_empty() {
                let data = bytes.split_to(message.stride.min(bytes.len()));
                if let Some(DatagramEvent::ConnectionEvent(_, event)) =
                    self.endpoint
                        .handle(now, server, None, message.ecn, data, &mut self.spare)
                {
                    if handshaking {
                        crate::tls::forget_refusal();
                    }
                    self.quic.handle_event(event);
                    if handshaking && let Some(err) = crate::tls::take_refusal() {
                        self.refused = Some(err);
                    }
                }
            }
        }
        if checked.is_some_and(|before| crate::tls::verifications() != before) {
            self.certificate_checked = true;
        }
        self.process_events();
        Poll::Ready(Ok(now))
    }

    /// Runs the connection's timers if due; ready when one fired (there
    /// may be more to do), else the driver's waker waits on the next.
    /// `seen`: the clock as just read, if it was.
    fn poll_timer(&mut self, cx: &mut Context<'_>, seen: Option<Instant>) -> Poll<()> {
        if self.run_timers(seen) {
            return Poll::Ready(());
        }
        if self.armed.is_none() {
            return Poll::Pending;
        }
        // Ready: it fired just now, and is handled on the next pass.
        self.timer.as_mut().poll(cx)
    }

    /// Handles the timers that are due and sets the sleep for the next;
    /// whether one was due. `seen`: the clock as just read, if it was;
    /// without it, the clock is read only where a timer may be due.
    fn run_timers(&mut self, seen: Option<Instant>) -> bool {
        let Some(next) = self.next_timer() else {
            self.arm(None);
            return false;
        };
        // The sleep runs toward a deadline no later than the next timer
        // (give or take the slack) and has not fired: the next timer is
        // not due.
        let asleep = !self.wakes_late_for(next) && !self.timer.is_elapsed();
        if asleep && seen.is_none() {
            return false;
        }
        let now = seen.unwrap_or_else(Instant::now);
        let mut fired = false;
        if next <= now {
            if self.quic.poll_timeout().is_some_and(|at| at <= now) {
                self.quic.handle_timeout(now);
                self.process_events();
                fired = true;
            }
            if let Some((by, timeout)) = self.early_deadline
                && by <= now
            {
                self.early_deadline = None;
                let err = self.handshake_timeout(timeout);
                let code = VarInt::from_u64(frame::H3_NO_ERROR).expect("a small code");
                self.quic.close(now, code, bytes::Bytes::new());
                self.die(err.kind, err.message());
                fired = true;
            }
        }
        let next = if fired { self.next_timer() } else { Some(next) };
        self.arm(next);
        fired
    }

    /// Whether the sleep would wake the driver too late for a timer at
    /// `at` (or not at all).
    fn wakes_late_for(&self, at: Instant) -> bool {
        self.armed.is_none_or(|armed| at + TIMER_SLACK < armed)
    }

    /// Sets the sleep for `next`, the next timer, where it would wake the
    /// driver too late for it, or has fired (an elapsed sleep is polled
    /// no more).
    fn arm(&mut self, next: Option<Instant>) {
        let elapsed = self.timer.is_elapsed();
        match next {
            Some(at) if elapsed || self.wakes_late_for(at) => {
                self.armed = Some(at);
                self.timer.as_mut().reset(tokio::time::Instant::from_std(at));
            }
            None if elapsed => self.armed = None,
            _ => {}
        }
    }

    /// When the driver must wake next: quinn-proto's next timer, or the end
    /// of an early (0-RTT) connection's handshake time.
    fn next_timer(&mut self) -> Option<Instant> {
        let quic = self.quic.poll_timeout();
        match self.early_deadline {
            Some((by, _)) => Some(quic.map_or(by, |at| at.min(by))),
            None => quic,
        }
    }

    /// Why a handshake not done by its deadline failed: the server sent
    /// handshake messages but never finished (TLS stalled, as it can over
    /// TCP), or it never answered (a connect error, as a silent port is).
    fn handshake_timeout(&self, timeout: std::time::Duration) -> RequestError {
        if self.quic.stats().frame_rx.crypto > 0 {
            RequestError::new(ErrorKind::Tls, ErrorDetail::HandshakeTimeout(timeout))
        } else {
            RequestError::new(ErrorKind::Connect, ErrorDetail::ConnectTimeout(timeout))
        }
    }

    /// With `--coalesce`: whether the queued requests wait, and until
    /// when (see [`Rounds`]). The acknowledgements quinn-proto queues go
    /// out with the requests, so nothing waits where the server may be
    /// waiting for them: before the handshake is done, while a response
    /// is arriving in parts (the server's congestion window needs them),
    /// or while lanes wait for the stream credit they bring back. Small
    /// responses arrive whole, and their acknowledgements wait at most a
    /// round, far below the 25 ms a QUIC peer allows.
    fn hold(&mut self) -> Option<Option<Instant>> {
        if !self.rounds.on() {
            return None;
        }
        let arriving = self.lanes.iter().any(|l| l.open() && l.bytes > 0);
        let urgent = self.dead || !self.connected || arriving || !self.capacity_waiters.is_empty();
        let tally = Tally::of(self.lanes.iter().map(|l| (l.id.is_some(), l.open(), l.sent_at)));
        self.rounds.hold(tally, urgent)
    }

    /// Sends every datagram the connection has; pending while the socket
    /// is full (`cx` woken when it has room).
    fn poll_transmit(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        // One reading of the clock for all the datagrams of this flush, as
        // quinn's own driver does: they are built microseconds apart. A
        // reading each (and one more for the `None` that ends the loop)
        // made the clock 2.6-3.6% of a run's CPU; 2.2-2.9% this way.
        let now = Instant::now();
        if self.rounds.on() {
            let streams = self.lanes.iter_mut().filter(|l| l.id.is_some());
            self.rounds.wrote(streams.map(|l| &mut l.sent_at), now);
        }
        loop {
            if self.unsent.is_none() {
                self.send_buf.clear();
                self.unsent = self
                    .quic
                    .poll_transmit(now, self.socket.max_datagrams(), &mut self.send_buf);
            }
            let Some(transmit) = &self.unsent else {
                return Poll::Ready(());
            };
            match self
                .socket
                .poll_send(cx, transmit, &self.send_buf[..transmit.size])
            {
                Poll::Ready(Ok(())) => self.unsent = None,
                Poll::Pending => return Poll::Pending,
                // Path MTU probes larger than the path: expected, and lost
                // like any datagram.
                Poll::Ready(Err(err)) if err.raw_os_error() == Some(libc::EMSGSIZE) => self.unsent = None,
                Poll::Ready(Err(err)) => {
                    self.unsent = None;
                    self.socket_failed(err);
                    return Poll::Ready(());
                }
            }
        }
    }

    /// The socket failed (a refused port shows up here): the connection
    /// is over.
    fn socket_failed(&mut self, err: io::Error) {
        let kind = match self.connected {
            false => ErrorKind::Connect,
            true => RequestError::from_io(io::Error::from(err.kind())).kind,
        };
        self.die(kind, err.to_string());
    }

    /// Ends the connection: every open stream fails with `message`.
    fn die(&mut self, kind: ErrorKind, message: String) {
        if self.dead {
            return;
        }
        self.dead = true;
        for state in self.lanes.iter_mut().filter(|l| l.open()) {
            let err = RequestError::new(kind, ErrorDetail::Text(message.clone()));
            state.result = Some(Err(Failure::Error(err)));
            if let Some(waker) = &state.waker {
                waker.wake_by_ref();
            }
        }
        for waker in self.capacity_waiters.drain(..) {
            waker.wake();
        }
        self.death = Some((kind, message));
    }

    /// Handles everything the connection has to say after new datagrams
    /// or a timer.
    fn process_events(&mut self) {
        while let Some(event) = self.quic.poll_endpoint_events() {
            if let Some(event) = self.endpoint.handle_event(self.handle, event) {
                self.quic.handle_event(event);
            }
        }
        while let Some(event) = self.quic.poll() {
            match event {
                Event::Connected => self.on_connected(),
                Event::ConnectionLost { reason } => {
                    let (kind, message) = describe_loss(&reason, self.connected, self.refused.as_ref());
                    self.die(kind, message);
                }
                Event::Stream(StreamEvent::Readable { id }) => self.readable(id),
                Event::Stream(StreamEvent::Opened { dir: Dir::Uni }) => {
                    while let Some(id) = self.quic.streams().accept(Dir::Uni) {
                        self.peers.push(PeerStream {
                            id,
                            kind: None,
                            head: Vec::new(),
                            reader: FrameReader::default(),
                            payload: Vec::new(),
                        });
                        self.readable(id);
                    }
                }
                Event::Stream(StreamEvent::Opened { dir: Dir::Bi }) => {
                    // A server may not open request streams (RFC 9114 6.1).
                    self.close_with(0x103, "the server opened a bidirectional stream");
                }
                Event::Stream(StreamEvent::Writable { id }) => {
                    if let Some(state) = self.lanes.iter().find(|l| l.id == Some(id))
                        && let Some(waker) = &state.waker
                    {
                        waker.wake_by_ref();
                    }
                }
                Event::Stream(StreamEvent::Stopped { id, error_code }) => self.stopped(id, error_code),
                Event::Stream(StreamEvent::Available { dir: Dir::Bi }) => {
                    for waker in self.capacity_waiters.drain(..) {
                        waker.wake();
                    }
                }
                _ => {}
            }
        }
    }

    /// The server stopped reading a request stream (it answered without
    /// the rest of the body, as RFC 9114 4.1 allows): the stream is reset,
    /// as RFC 9000 3.5 requires. quinn-proto leaves that to its user;
    /// without it the body still goes out, counted against the server's
    /// connection window, until every upload on the connection stalls.
    fn stopped(&mut self, id: StreamId, code: VarInt) {
        let _ = self.quic.send_stream(id).reset(code);
        if let Some(state) = self.lanes.iter_mut().find(|l| l.id == Some(id)) {
            state.send_done = true;
        }
    }

    fn on_connected(&mut self) {
        self.connected = true;
        self.early_deadline = None;
        let zero_rtt = self.early.then(|| self.quic.accepted_0rtt());
        if zero_rtt == Some(false) {
            self.send_rejected_again();
        }
        self.handshake = Some(Handshake {
            took: self.began.elapsed(),
            resumed: !self.certificate_checked,
            zero_rtt,
        });
        if let Some(id) = self.quic.streams().open(Dir::Uni) {
            self.control = Some((id, frame::control_stream_preface(MAX_FIELD_SECTION), 0));
            self.write_control();
        }
    }

    /// The server refused the 0-RTT data: quinn-proto has forgotten the
    /// streams sent in it (their ids are given out again from the first),
    /// and the server processed none of them, so each waiting lane's
    /// request goes again, from its start, on a stream opened now. A lane
    /// for which the server's new limit leaves no stream is refused, and
    /// its request goes to another connection as a refused stream's does.
    fn send_rejected_again(&mut self) {
        for state in self.lanes.iter_mut().filter(|l| l.open()) {
            match self.quic.streams().open(Dir::Bi) {
                Some(id) => {
                    state.id = Some(id);
                    state.sent = 0;
                    state.send_done = false;
                }
                None => {
                    // Its old id may now be another lane's stream.
                    state.id = None;
                    state.result = Some(Err(Failure::Refused));
                }
            }
            if let Some(waker) = &state.waker {
                waker.wake_by_ref();
            }
        }
    }

    fn write_control(&mut self) {
        if let Some((id, preface, sent)) = &mut self.control
            && *sent < preface.len()
            && let Ok(n) = self.quic.send_stream(*id).write(&preface[*sent..])
        {
            *sent += n;
        }
    }

    /// Closes the connection with an HTTP/3 error: the server broke the
    /// protocol.
    fn close_with(&mut self, code: u64, why: &'static str) {
        let code = VarInt::from_u64(code).expect("a small code");
        self.quic
            .close(Instant::now(), code, bytes::Bytes::from_static(why.as_bytes()));
        self.die(ErrorKind::Protocol, format!("HTTP/3: {why}"));
    }

    /// Reads a stream that has data: a lane's response, or one of the
    /// server's own streams.
    fn readable(&mut self, id: StreamId) {
        if id.dir() == Dir::Bi {
            if let Some(lane) = self
                .lanes
                .iter()
                .position(|l| l.id == Some(id) && l.result.is_none())
            {
                self.read_response(lane, id);
            }
        } else if let Some(peer) = self.peers.iter().position(|p| p.id == id) {
            self.read_peer(peer);
        }
    }

    /// Reads what lane `lane`'s stream has and handles its frames.
    fn read_response(&mut self, lane: usize, id: StreamId) {
        let mut recv = self.quic.recv_stream(id);
        let Ok(mut chunks) = recv.read(true) else {
            return;
        };
        let state = &mut self.lanes[lane];
        let mut outcome = None;
        loop {
            match chunks.next(usize::MAX) {
                Ok(Some(chunk)) => {
                    state.bytes += chunk.bytes.len() as u64;
                    if let Err(err) = on_response_bytes(state, &chunk.bytes, &mut self.name, &mut self.value)
                    {
                        outcome = Some(Err(Failure::Error(err)));
                        break;
                    }
                }
                Ok(None) => {
                    outcome = Some(if state.status != 0 && state.reader.at_boundary() {
                        Ok(())
                    } else {
                        Err(Failure::Error(RequestError::new(
                            ErrorKind::Reset,
                            ErrorDetail::Static("the HTTP/3 stream ended before the response was complete"),
                        )))
                    });
                    break;
                }
                Err(ReadError::Blocked) => break,
                Err(ReadError::Reset(code)) => {
                    outcome = Some(Err(match code.into_inner() {
                        frame::H3_REQUEST_REJECTED => Failure::Refused,
                        code => Failure::Error(RequestError::new(
                            ErrorKind::Reset,
                            ErrorDetail::Text(format!(
                                "the server reset the HTTP/3 stream ({})",
                                error_name(code)
                            )),
                        )),
                    }));
                    break;
                }
            }
        }
        let _ = chunks.finalize();
        if let Some(outcome) = outcome {
            let failed = outcome.is_err();
            state.result = Some(outcome);
            if let Some(waker) = &state.waker {
                waker.wake_by_ref();
            }
            if failed {
                // Nothing more from this stream is wanted.
                let code = VarInt::from_u64(frame::H3_REQUEST_CANCELLED).expect("a small code");
                let _ = self.quic.recv_stream(id).stop(code);
            }
        }
    }

    /// Reads one of the server's unidirectional streams: the control
    /// stream's SETTINGS and GOAWAY are read, the rest is dropped.
    fn read_peer(&mut self, index: usize) {
        let id = self.peers[index].id;
        let mut recv = self.quic.recv_stream(id);
        let Ok(mut chunks) = recv.read(true) else {
            return;
        };
        let mut goaway = None;
        let mut violation = None;
        let peer = &mut self.peers[index];
        while let Ok(Some(chunk)) = chunks.next(usize::MAX) {
            let mut bytes = &chunk.bytes[..];
            if peer.kind.is_none() {
                peer.head.extend_from_slice(bytes);
                let Some((kind, len)) = frame::varint(&peer.head) else {
                    continue;
                };
                peer.kind = Some(kind);
                let skip = len - (peer.head.len() - bytes.len());
                bytes = &bytes[skip..];
            }
            if peer.kind != Some(frame::CONTROL_STREAM) {
                continue;
            }
            let mut pos = 0;
            while let Some(piece) = peer.reader.next(bytes, &mut pos) {
                let Piece::Payload { kind, range, last } = piece else {
                    continue;
                };
                if kind == frame::GOAWAY || kind == frame::SETTINGS {
                    if peer.payload.len() + range.len() > 64 * 1024 {
                        violation = Some("a control frame too large");
                        break;
                    }
                    peer.payload.extend_from_slice(&bytes[range]);
                }
                if last {
                    match kind {
                        frame::GOAWAY => goaway = frame::varint(&peer.payload).map(|(v, _)| v),
                        frame::DATA | frame::HEADERS | frame::PUSH_PROMISE => {
                            violation = Some("a request frame on the control stream")
                        }
                        _ => {}
                    }
                    peer.payload.clear();
                }
            }
        }
        let _ = chunks.finalize();
        if let Some(why) = violation {
            self.close_with(frame::H3_FRAME_UNEXPECTED, why);
        }
        if let Some(limit) = goaway {
            self.on_goaway(limit);
        }
    }

    /// The server takes no streams from `limit` on: those already open
    /// above it were not processed and go again elsewhere.
    fn on_goaway(&mut self, limit: u64) {
        self.goaway = Some(self.goaway.map_or(limit, |old| old.min(limit)));
        for state in &mut self.lanes {
            if state.open() && state.id.is_some_and(|id| VarInt::from(id).into_inner() >= limit) {
                state.result = Some(Err(Failure::Refused));
                if let Some(waker) = &state.waker {
                    waker.wake_by_ref();
                }
            }
        }
        for waker in self.capacity_waiters.drain(..) {
            waker.wake();
        }
    }
}

/// Handles bytes of a response stream: frames in order, the field section
/// decoded when whole, body bytes counted (and kept for a plan).
fn on_response_bytes(
    state: &mut LaneState,
    bytes: &[u8],
    name: &mut Vec<u8>,
    value: &mut Vec<u8>,
) -> Result<(), RequestError> {
    let mut pos = 0;
    while let Some(piece) = state.reader.next(bytes, &mut pos) {
        match piece {
            Piece::Start { kind, len } => match kind {
                frame::HEADERS if len as usize > MAX_FIELD_SECTION => {
                    return Err(RequestError::protocol(
                        "an HTTP/3 field section larger than the 256 KiB volley allows",
                    ));
                }
                frame::HEADERS => state.block.clear(),
                frame::DATA if state.status == 0 => {
                    return Err(RequestError::protocol(
                        "HTTP/3 DATA before the response's HEADERS",
                    ));
                }
                frame::SETTINGS | frame::GOAWAY | frame::PUSH_PROMISE | 0x03 | 0x0d => {
                    return Err(RequestError::protocol(
                        "an HTTP/3 control frame on a request stream",
                    ));
                }
                _ => {}
            },
            Piece::Payload { kind, range, last } => match kind {
                frame::HEADERS => {
                    state.block.extend_from_slice(&bytes[range]);
                    if last {
                        on_field_section(state, name, value)?;
                    }
                }
                frame::DATA => {
                    if let Some(capture) = &mut state.capture {
                        capture.keep_body(&bytes[range]);
                    }
                }
                _ => {}
            },
        }
    }
    Ok(())
}

/// For the fuzz targets: a response stream's bytes as a server sent them,
/// handed to the stream's reader `piece` bytes at a time (with a plan's
/// capture when `capture`), until it fails or the bytes end; then the end
/// of stream is judged as a run would judge it.
#[doc(hidden)]
pub fn feed_response_stream(bytes: &[u8], piece: usize, capture: bool) {
    let mut state = LaneState {
        capture: capture.then(Capture::default),
        ..LaneState::default()
    };
    if let Some(capture) = &mut state.capture {
        capture.clear(true);
    }
    let (mut name, mut value) = (Vec::new(), Vec::new());
    for chunk in bytes.chunks(piece.max(1)) {
        state.bytes += chunk.len() as u64;
        if on_response_bytes(&mut state, chunk, &mut name, &mut value).is_err() {
            return;
        }
    }
    // As at the stream's end: complete only with a final status, between
    // frames.
    let _complete = state.status != 0 && state.reader.at_boundary();
}

/// A whole field section: an interim response (1xx) is passed over, the
/// final one sets the status; trailers after it are ignored.
fn on_field_section(
    state: &mut LaneState,
    name: &mut Vec<u8>,
    value: &mut Vec<u8>,
) -> Result<(), RequestError> {
    if state.status != 0 {
        return Ok(()); // trailers
    }
    let capture = &mut state.capture;
    let want = capture.is_some();
    // The field section's size as RFC 9114 4.2.2 counts it, of what is
    // kept. The frame is within MAX_FIELD_SECTION, but one-byte references
    // to the static table decode to some 70 times that: past the limit
    // volley advertised nothing more is copied, and the response fails.
    let mut size = 0usize;
    let status = qpack::decode_response(&state.block, want, name, value, |n, v| {
        size += n.len() + v.len() + 32;
        if size > MAX_FIELD_SECTION {
            return;
        }
        if let Some(capture) = capture.as_mut() {
            capture.add_header(std::str::from_utf8(n).unwrap_or_default(), v);
        }
    })
    .map_err(|err| RequestError::new(ErrorKind::Protocol, ErrorDetail::Text(err.to_string())))?;
    if size > MAX_FIELD_SECTION {
        return Err(RequestError::protocol(
            "an HTTP/3 field section larger than the 256 KiB volley allows",
        ));
    }
    if !(100..200).contains(&status) {
        state.status = status;
    } else if let Some(capture) = capture {
        // The interim response's fields are not the response's.
        capture.headers.clear();
        capture.set_cookies.clear();
    }
    Ok(())
}

/// The name of an HTTP/3 error code (RFC 9114 8.1), or its number.
fn error_name(code: u64) -> String {
    const NAMES: [&str; 17] = [
        "H3_NO_ERROR",
        "H3_GENERAL_PROTOCOL_ERROR",
        "H3_INTERNAL_ERROR",
        "H3_STREAM_CREATION_ERROR",
        "H3_CLOSED_CRITICAL_STREAM",
        "H3_FRAME_UNEXPECTED",
        "H3_FRAME_ERROR",
        "H3_EXCESSIVE_LOAD",
        "H3_ID_ERROR",
        "H3_SETTINGS_ERROR",
        "H3_MISSING_SETTINGS",
        "H3_REQUEST_REJECTED",
        "H3_REQUEST_CANCELLED",
        "H3_REQUEST_INCOMPLETE",
        "H3_MESSAGE_ERROR",
        "H3_CONNECT_ERROR",
        "H3_VERSION_FALLBACK",
    ];
    match code.checked_sub(0x100).and_then(|i| NAMES.get(i as usize)) {
        Some(name) => (*name).to_string(),
        None if (0x200..0x300).contains(&code) => format!("QPACK error 0x{code:x}"),
        None => format!("error 0x{code:x}"),
    }
}

/// What a lost connection means for the streams on it, and the words for
/// it: a handshake that never completes is the connect's failure (or TLS's,
/// when either side refused the handshake; `refused` is why volley's
/// verifier did), an idle timeout or a close afterwards the stream's.
fn describe_loss(
    reason: &ConnectionError,
    connected: bool,
    refused: Option<&rustls::Error>,
) -> (ErrorKind, String) {
    let kind = |after: ErrorKind| if connected { after } else { ErrorKind::Connect };
    match reason {
        ConnectionError::TimedOut if !connected => (
            ErrorKind::Connect,
            "the QUIC handshake timed out (no answer from the server)".to_string(),
        ),
        ConnectionError::TimedOut => (
            ErrorKind::Timeout,
            "the QUIC connection went idle past its timeout".to_string(),
        ),
        ConnectionError::ApplicationClosed(close) => (
            kind(ErrorKind::Reset),
            format!(
                "the server closed the HTTP/3 connection ({})",
                error_name(close.error_code.into_inner())
            ),
        ),
        ConnectionError::ConnectionClosed(close) => {
            // CRYPTO_ERROR codes (0x100-0x1ff) carry the TLS alert the
            // server sent: worded as over TCP, where rustls reports it as
            // received, so a server that wants a client certificate says
            // to pass --cert and --key (quinn's text only gives the number).
            let code = u64::from(close.error_code);
            if (0x100..0x200).contains(&code) {
                let alert = rustls::AlertDescription::from(code as u8);
                (
                    ErrorKind::Tls,
                    crate::tls::describe(&rustls::Error::AlertReceived(alert)),
                )
            } else {
                (
                    kind(ErrorKind::Protocol),
                    format!("the server closed the QUIC connection: {close}"),
                )
            }
        }
        ConnectionError::TransportError(err) => {
            let code = u64::from(err.code);
            match refused {
                // The certificate volley refused, worded as over TCP.
                Some(refused) if (0x100..0x200).contains(&code) => {
                    (ErrorKind::Tls, crate::tls::describe(refused))
                }
                _ if (0x100..0x200).contains(&code) => (ErrorKind::Tls, format!("QUIC: {err}")),
                _ => (kind(ErrorKind::Protocol), format!("QUIC: {err}")),
            }
        }
        ConnectionError::Reset => (
            kind(ErrorKind::Reset),
            "the server reset the QUIC connection (stateless reset)".to_string(),
        ),
        other => (kind(ErrorKind::Reset), format!("QUIC: {other}")),
    }
}
