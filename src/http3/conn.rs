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
//! volley's own ([`super::frame`], [`super::qpack`]), as its HPACK is. The
//! streams' logic is [`super::machine`]'s, with no socket: this module is
//! its socket, its sleep and the hand-off between lanes.

use super::machine::{Handshake, Machine, Opened};
use super::request::H3Request;
use super::udp::{Received, Socket};
use crate::http2::{Finished, Multiplexed, Outbox, Pending, Rounds, Seat, Streams, WriteOut};
use crate::net::uring::Ring;
use crate::recorder::Recorder;
use crate::request::Request;
use crate::response::Capture;
use crate::sample::{ErrorDetail, ErrorKind, RequestError};
use bytes::BytesMut;
use quinn_proto::ClientConfig;
use std::cell::RefCell;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};
use std::time::Instant;

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

/// A connection's socket side: its UDP socket, the sleep for its next
/// timer, the datagrams in and out, and which lane drives it; `m` is the
/// rest, its state machine.
struct Inner {
    socket: Socket,
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
    /// The lane whose waker the socket and the timer hold, if any.
    driver: Option<usize>,
    /// `--coalesce`: requests wait to go out with the other streams'.
    rounds: Rounds,
    m: Machine,
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
        let earlier = inner.m.next_timer().is_some_and(|at| inner.wakes_late_for(at));
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
        if early && conn.inner.borrow().m.quic.has_0rtt() {
            let mut inner = conn.inner.borrow_mut();
            inner.m.early = true;
            inner.m.early_deadline = Some((deadline.by.into_std(), deadline.timeout));
            drop(inner);
            // The Initial goes out at the flush even if no stream starts.
            conn.queue();
            return Ok(conn);
        }
        let handshake = std::future::poll_fn(|cx| conn.poll_handshake(cx));
        match tokio::time::timeout_at(deadline.by, handshake).await {
            Ok(done) => done.map(|()| conn),
            Err(_) => Err(conn.inner.borrow().m.handshake_timeout(deadline.timeout)),
        }
    }

    /// The connection's handshake, once done, for the first lane to record
    /// it.
    pub fn take_handshake(&self) -> Option<Handshake> {
        self.inner.borrow_mut().m.handshake.take()
    }

    fn start_connecting(
        addr: SocketAddr,
        config: ClientConfig,
        server_name: &str,
        place: Place<'_>,
    ) -> Result<Rc<Conn>, RequestError> {
        let opened =
            Socket::open(addr, place.ring).map_err(|err| RequestError::io(ErrorKind::Connect, err))?;
        let machine = Machine::connect(
            Instant::now(),
            config,
            addr,
            server_name,
            place.lanes,
            opened.may_fragment,
        )?;
        let max_datagrams = opened.socket.max_datagrams();
        let rounds = Rounds::new(place.outbox.coalesces());
        Ok(Rc::new_cyclic(|this| Conn {
            seat: Seat::new(place.outbox, this.clone()),
            inner: RefCell::new(Inner {
                socket: opened.socket,
                timer: Box::pin(tokio::time::sleep(std::time::Duration::ZERO)),
                armed: None,
                caught_up: false,
                unsent: None,
                send_buf: Vec::with_capacity(1500 * max_datagrams),
                datagrams: BytesMut::new(),
                received: Vec::new(),
                driver: None,
                rounds,
                m: machine,
            }),
        }))
    }

    /// Drives the handshake: ready once the connection is up (its control
    /// stream opened), or with why it failed.
    fn poll_handshake(&self, cx: &mut Context<'_>) -> Poll<Result<(), RequestError>> {
        let mut inner = self.inner.borrow_mut();
        loop {
            let _ = inner.poll_transmit(cx);
            if inner.m.connected {
                return Poll::Ready(Ok(()));
            }
            if inner.m.dead {
                let (kind, message) = inner
                    .m
                    .death
                    .clone()
                    .unwrap_or((ErrorKind::Connect, String::new()));
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
                Poll::Ready(Err(err)) => inner.m.transport_failed(err),
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

    /// Records the connection's handshake if it is done and nobody has
    /// yet. QUIC's handshake is TCP's and TLS's in one, timed from its first
    /// datagram.
    pub fn record_handshake(&self, recorder: &RefCell<Recorder>) {
        if let Some(handshake) = self.take_handshake() {
            let mut recorder = recorder.borrow_mut();
            recorder.record_handshake(handshake.took, handshake.resumed);
            if let Some(accepted) = handshake.zero_rtt {
                recorder.record_zero_rtt(accepted);
            }
        }
    }
}

impl Streams for Conn {
    type Request = H3Request;
    const REFUSED: &'static str = "the server refused the HTTP/3 stream";

    fn encode(into: &mut H3Request, request: &Request<'_>) -> Result<(), RequestError> {
        into.encode(request)
    }

    /// Opens the lane's stream and writes its request: ready with `true`
    /// once it is open, `false` when the connection takes no more streams
    /// (the lane goes to another), pending while the server's stream limit
    /// is reached.
    fn poll_start(
        &self,
        lane: usize,
        request: &H3Request,
        capture: &mut Option<Capture>,
        cx: &mut Context<'_>,
    ) -> Poll<bool> {
        let mut inner = self.inner.borrow_mut();
        let opened = inner.m.open_stream(lane, request, capture, cx.waker());
        let started = match opened {
            Opened::Started => Poll::Ready(true),
            Opened::Closed => {
                inner.let_go(lane);
                return Poll::Ready(false);
            }
            Opened::Full => {
                // The server frees stream slots when it has our ACKs of the
                // streams that ended, and says so in MAX_STREAMS: a lane
                // that waits for one keeps the connection going (its socket
                // and timers), as nobody else may be left to.
                inner.driver = Some(lane);
                inner.poll_io(cx);
                Poll::Pending
            }
        };
        drop(inner);
        self.queue();
        started
    }

    /// Drives the connection until the lane's stream has finished.
    fn poll_response(&self, lane: usize, request: &H3Request, cx: &mut Context<'_>) -> Poll<Finished> {
        let finished = self.inner.borrow_mut().drive(lane, request, cx);
        self.queue();
        finished
    }

    /// A connection that sent its first streams as 0-RTT data finished its
    /// handshake while they ran: the first lane to see it done records it.
    fn settled(&self, recorder: &RefCell<Recorder>) {
        self.record_handshake(recorder);
    }
}

impl Multiplexed for Conn {
    /// Whether a new stream may start here.
    fn accepts_streams(&self) -> bool {
        self.inner.borrow().m.accepts_streams()
    }

    /// Starts no more streams here (one connection per request).
    fn retire(&self) {
        self.inner.borrow_mut().m.closing = true;
    }

    /// The lane gave up on its stream (a timeout, or the run ended): the
    /// server is told, and later data for it is ignored.
    fn cancel(&self, lane: usize) {
        let mut inner = self.inner.borrow_mut();
        if !inner.m.cancel(lane) {
            return;
        }
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
        if self.m.dead {
            return;
        }
        self.m.close(Instant::now());
        self.unsent = None;
        let waker = std::task::Waker::noop();
        let _ = self.poll_transmit(&mut Context::from_waker(waker));
    }
}

impl Inner {
    /// Reads, runs timers and handles events until the lane's stream has
    /// finished.
    fn drive(&mut self, lane: usize, request: &H3Request, cx: &mut Context<'_>) -> Poll<Finished> {
        if !self.m.finished(lane) {
            self.m.send_request(lane, request);
            self.m.wait(lane, cx.waker());
            // Everything that has arrived is handled before the worker's
            // flush, so the requests it frees go out together.
            self.driver = Some(lane);
            self.poll_io(cx);
            // Credit that came in (flow control) takes more of the body.
            self.m.send_request(lane, request);
        }
        if !self.m.finished(lane) {
            return Poll::Pending;
        }
        let finished = self.m.finish(lane);
        self.let_go(lane);
        Poll::Ready(finished)
    }

    fn let_go(&mut self, lane: usize) {
        if self.driver == Some(lane) {
            self.driver = None;
        }
    }

    /// Streams wait here but no lane is registered to read the socket.
    fn orphaned(&self) -> bool {
        self.driver.is_none() && !self.m.dead && (self.m.any_open() || !self.m.capacity_waiters.is_empty())
    }

    fn a_waiting_waker(&self) -> Option<&Waker> {
        self.m.a_waiting_waker(self.driver)
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
                    self.m.transport_failed(err);
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

    /// Receives what the socket has and handles it, ready with the time it
    /// was handled at; pending when there is nothing.
    fn poll_receive(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<Instant>> {
        if self.m.dead {
            return Poll::Pending;
        }
        self.received.clear();
        std::task::ready!(self.socket.poll_recv(cx, &mut self.datagrams, &mut self.received))?;
        let now = Instant::now();
        let checked = self.m.receiving();
        for message in &self.received {
            let mut bytes = self.datagrams.split_to(message.len);
            while !bytes.is_empty() {
                let data = bytes.split_to(message.stride.min(bytes.len()));
                self.m.receive(now, message.ecn, data);
            }
        }
        self.m.received(checked);
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
        let Some(next) = self.m.next_timer() else {
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
        let fired = next <= now && self.m.on_timers(now);
        let next = if fired { self.m.next_timer() } else { Some(next) };
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
        let (tally, urgent) = self.m.tally();
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
            self.rounds.wrote(self.m.sent_stamps(), now);
        }
        loop {
            if self.unsent.is_none() {
                self.send_buf.clear();
                self.unsent = self
                    .m
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
                    self.m.transport_failed(err);
                    return Poll::Ready(());
                }
            }
        }
    }
}
