//! One HTTP/2 connection and the streams its lanes run on it.
//!
//! There is no connection task. A lane (one request loop's place on the
//! connection) starts its stream by appending frames to the connection's
//! write buffer, then polls for its response; while it waits it reads the
//! socket itself and handles every frame that arrived, completing and waking
//! the lanes they belong to. The lane that found the socket not ready is
//! the *driver*: its waker is the one the socket holds, and while it waits
//! the other lanes leave the reading to it. A lane reads until the socket
//! is drained, so a batch of responses is handled whole. A driver that
//! leaves while lanes still wait leaves the connection *orphaned*; unless a
//! lane reads again first (as one starting its next request at once does),
//! the worker's flush wakes a waiting lane to take over, and again if that
//! lane finds its own response done and leaves too.
//!
//! Lanes never write: they append frames and put the connection in the
//! worker's [`Outbox`], which the worker flushes once all the lanes it woke
//! have run, so the requests of a whole batch of responses go out in one
//! write.
//!
//! This module is the socket and its hand-off between lanes; what the
//! frames mean (streams, settings, windows) is the [`Machine`]'s.

use super::frame;
use super::group::Multiplexed;
use super::machine::{FLUSH_ACKS_AT, Machine};
use super::outbox::{Outbox, Pending, Rounds, Seat, WriteOut};
use super::outcome::Finished;
use super::request::H2Request;
use crate::net::Stream;
use crate::response::Capture;
use crate::sample::{ErrorDetail, ErrorKind, RequestError};
use crate::wake::keep_waker;
use std::cell::RefCell;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, ready};
use std::time::Instant;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Start size of the read buffer: room for a full frame and then some.
const READ_BUFFER: usize = 64 * 1024;
/// Read again only with at least this much room left (else compact first).
const MIN_READ_ROOM: usize = frame::MAX_FRAME + frame::HEAD_LEN;
/// A lane yields to the runtime after this many reads in one poll that
/// found bytes waiting: a server that sends frames faster than they are
/// handled (endless interim HEADERS, empty DATA frames) never leaves the
/// socket empty, and the request timeout, the run's deadline and the
/// worker's flush must still get their turn.
const YIELD_READS: u32 = 32;
struct Inner {
    io: Stream,
    /// The frame state machine; its `wbuf` is written out from `wpos`.
    m: Machine,
    rbuf: Vec<u8>,
    rstart: usize,
    rend: usize,
    wpos: usize,
    /// The lane whose waker the socket holds (see the module doc).
    driver: Option<usize>,
    /// `--coalesce`: requests wait to go out with the other streams'.
    rounds: Rounds,
}

/// One HTTP/2 connection, shared by the lanes of one [`super::Home`].
pub struct Conn {
    inner: RefCell<Inner>,
    seat: Seat<Conn>,
}

impl Pending for Conn {
    fn write_out(&self, cx: &mut Context<'_>) -> WriteOut {
        let mut inner = self.inner.borrow_mut();
        if inner.m.dead {
            // Nothing more is owed to a connection that failed. Waiting to
            // write to a server that never reads (a flood's replies) kept
            // the connection, its socket and the kernel's buffers for it
            // until the run ended: hundreds of them against a PING flood.
            inner.m.wbuf.clear();
            inner.wpos = 0;
            self.seat.leave();
            return WriteOut::Done;
        }
        let held = inner.hold();
        if inner.orphaned() {
            // No lane holds the socket's waker: wake one to read.
            if let Some(waker) = inner.m.a_waiting_waker() {
                waker.wake_by_ref();
            }
        }
        if let Some(until) = held {
            return WriteOut::Held(until);
        }
        match inner.poll_flush(cx) {
            Poll::Ready(Ok(())) => self.seat.leave(),
            Poll::Ready(Err(err)) => {
                inner.m.die(RequestError::from_io(err), usize::MAX);
                inner.m.wbuf.clear();
                self.seat.leave();
            }
            Poll::Pending => return WriteOut::Blocked,
        }
        WriteOut::Done
    }
}

impl Conn {
    /// Takes a connected stream and queues the preface and settings; they
    /// go out with the first request.
    pub fn new(io: Stream, lanes: usize, outbox: Rc<Outbox>) -> Rc<Conn> {
        let coalesce = outbox.coalesces();
        Rc::new_cyclic(|this| Conn {
            seat: Seat::new(outbox, this.clone()),
            inner: RefCell::new(Inner {
                io,
                m: Machine::new(lanes),
                rbuf: vec![0; READ_BUFFER],
                rstart: 0,
                rend: 0,
                wpos: 0,
                driver: None,
                rounds: Rounds::new(coalesce),
            }),
        })
    }

    /// Queues the connection for the worker's next flush if it has frames
    /// to write.
    fn queue(&self, inner: &Inner) {
        if inner.m.wbuf.len() > inner.wpos || inner.orphaned() {
            self.seat.enter();
        }
    }

    /// Ready when the server's stream limit leaves room for one more.
    pub fn poll_capacity(&self, cx: &mut Context<'_>) -> Poll<()> {
        if self.inner.borrow_mut().m.has_capacity(cx.waker()) {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }

    /// Opens the lane's next stream (see [`Machine::start`]); the rest of
    /// its body goes out from [`Conn::poll_response`].
    pub fn start(&self, lane: usize, request: &H2Request, capture: Option<Capture>) {
        let mut inner = self.inner.borrow_mut();
        inner.m.start(lane, request, capture);
        self.queue(&inner);
    }

    /// Drives the connection until the lane's stream has finished.
    pub fn poll_response(&self, lane: usize, body: &[u8], cx: &mut Context<'_>) -> Poll<Finished> {
        let mut guard = self.inner.borrow_mut();
        let inner = &mut *guard;
        let finished = inner.drive(lane, body, cx);
        self.queue(inner);
        finished
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
    /// server is told, and later frames for it are ignored.
    fn cancel(&self, lane: usize) {
        let mut inner = self.inner.borrow_mut();
        if inner.m.cancel(lane) {
            inner.let_go(lane);
            self.queue(&inner);
        }
    }
}

impl Inner {
    /// Reads and handles frames until the lane's stream has finished.
    fn drive(&mut self, lane: usize, body: &[u8], cx: &mut Context<'_>) -> Poll<Finished> {
        let inner = self;
        // Done by another lane's read, which left the socket drained.
        if inner.m.finished(lane) {
            return Poll::Ready(inner.finish(lane));
        }
        // Another lane holds the socket's waker, and its read handles every
        // stream's frames and wakes this lane when its stream ends. Reading
        // here as well would only take the socket's waker over from it.
        if inner.driver.is_some_and(|driver| driver != lane) {
            inner.m.send_body(lane, body);
            keep_waker(inner.m.waker(lane), cx.waker());
            return Poll::Pending;
        }
        // Otherwise read until the socket has nothing more, also once this
        // lane's own response is in: the whole batch of responses that has
        // arrived is handled before the worker's flush, so the requests it
        // frees go out in one write.
        let mut reads = 0u32;
        loop {
            if inner.m.dead && inner.m.finished(lane) {
                return Poll::Ready(inner.finish(lane));
            }
            inner.m.send_body(lane, body);
            if inner.m.pending_acks >= FLUSH_ACKS_AT
                && let Poll::Ready(Err(err)) = inner.poll_flush(cx)
            {
                inner.m.die(RequestError::from_io(err), lane);
                continue;
            }
            reads += 1;
            if reads > YIELD_READS {
                // The socket still has bytes: come back after the runtime
                // has run its timers and the other lanes.
                inner.driver = Some(lane);
                if inner.m.finished(lane) {
                    return Poll::Ready(inner.finish(lane));
                }
                *inner.m.waker(lane) = Some(cx.waker().clone());
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            match inner.poll_fill(cx) {
                Poll::Ready(Ok(0)) => inner.m.die(
                    RequestError::new(
                        ErrorKind::Reset,
                        ErrorDetail::Static("the server closed the HTTP/2 connection"),
                    ),
                    lane,
                ),
                Poll::Ready(Ok(_)) => {
                    if let Err(err) = inner.process(lane) {
                        inner.m.die(err, lane);
                    }
                }
                Poll::Ready(Err(err)) => inner.m.die(RequestError::from_io(err), lane),
                Poll::Pending => {
                    inner.driver = Some(lane);
                    if inner.m.finished(lane) {
                        return Poll::Ready(inner.finish(lane));
                    }
                    keep_waker(inner.m.waker(lane), cx.waker());
                    return Poll::Pending;
                }
            }
        }
    }

    /// Hands the lane's finished stream back and frees its place.
    fn finish(&mut self, lane: usize) -> Finished {
        let finished = self.m.finish(lane);
        self.let_go(lane);
        finished
    }

    /// The lane has no stream here any more. A leaving driver gives up the
    /// socket; the worker's next flush hands it to a waiting lane unless
    /// this one (or another) reads again first, as a lane starting its next
    /// request at once does.
    fn let_go(&mut self, lane: usize) {
        if self.driver == Some(lane) {
            self.driver = None;
        }
    }

    /// Streams wait here but no lane is registered to read the socket.
    fn orphaned(&self) -> bool {
        self.driver.is_none() && !self.m.dead && self.m.any_open()
    }

    /// With `--coalesce`: whether the queued requests wait, and until
    /// when (see [`Rounds`]). Acknowledgements and window updates the
    /// server may be waiting for are never held.
    fn hold(&mut self) -> Option<Option<Instant>> {
        if !self.rounds.on() {
            return None;
        }
        let m = &self.m;
        let urgent = m.dead || m.pending_acks > 0 || m.window_due;
        self.rounds.hold(m.tally(), urgent)
    }

    fn poll_flush(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        if self.rounds.on() && self.wpos < self.m.wbuf.len() {
            self.rounds.wrote(self.m.sent_stamps(), Instant::now());
        }
        while self.wpos < self.m.wbuf.len() {
            let n = ready!(Pin::new(&mut self.io).poll_write(cx, &self.m.wbuf[self.wpos..]))?;
            if n == 0 {
                return Poll::Ready(Err(std::io::ErrorKind::WriteZero.into()));
            }
            self.wpos += n;
        }
        self.m.wbuf.clear();
        self.wpos = 0;
        self.m.pending_acks = 0;
        self.m.window_due = false;
        Pin::new(&mut self.io).poll_flush(cx)
    }

    /// Reads what the socket has; 0 at its end.
    fn poll_fill(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<usize>> {
        if self.rbuf.len() - self.rend < MIN_READ_ROOM {
            self.rbuf.copy_within(self.rstart..self.rend, 0);
            self.rend -= self.rstart;
            self.rstart = 0;
        }
        let mut read = ReadBuf::new(&mut self.rbuf[self.rend..]);
        ready!(Pin::new(&mut self.io).poll_read(cx, &mut read))?;
        let n = read.filled().len();
        self.rend += n;
        // A stamped socket's read takes one received buffer: the streams
        // its bytes end were received when it was.
        self.m.stamp = self.io.received_at();
        Poll::Ready(Ok(n))
    }

    /// Handles every complete frame in the read buffer.
    fn process(&mut self, me: usize) -> Result<(), RequestError> {
        let mut consumed = 0;
        let result = self
            .m
            .receive(&self.rbuf[self.rstart..self.rend], &mut consumed, me);
        self.rstart += consumed;
        if self.rstart == self.rend {
            self.rstart = 0;
            self.rend = 0;
        }
        result
    }
}

/// For the fuzz targets: a connection with two lanes, each running
/// `request` again as soon as its stream ends, fed `bytes` as if the server
/// sent them, `piece` bytes per read. Everything a server's bytes reach
/// (frame parsing, the stream states, flow control, HPACK) runs as in a
/// real run; only the socket is bypassed.
#[doc(hidden)]
pub fn feed_server_bytes(io: Stream, request: &H2Request, bytes: &[u8], piece: usize) {
    const LANES: usize = 2;
    let outbox = Rc::new(Outbox::default());
    let conn = Conn::new(io, LANES, outbox.clone());
    for lane in 0..LANES {
        conn.start(lane, request, None);
    }
    let piece = piece.clamp(1, frame::MAX_FRAME);
    for chunk in bytes.chunks(piece) {
        let mut finished = [false; LANES];
        {
            let mut inner = conn.inner.borrow_mut();
            if inner.m.dead {
                break;
            }
            // As `poll_fill` makes room before a read.
            if inner.rbuf.len() - inner.rend < MIN_READ_ROOM {
                let (start, end) = (inner.rstart, inner.rend);
                inner.rbuf.copy_within(start..end, 0);
                inner.rend -= start;
                inner.rstart = 0;
            }
            let end = inner.rend;
            inner.rbuf[end..end + chunk.len()].copy_from_slice(chunk);
            inner.rend += chunk.len();
            if let Err(err) = inner.process(0) {
                inner.m.die(err, 0);
            }
            for (lane, done) in finished.iter_mut().enumerate() {
                inner.m.send_body(lane, &request.body);
                if inner.m.finished(lane) {
                    let _ = inner.finish(lane);
                    *done = true;
                }
            }
            // As if the replies were written out whole.
            inner.m.wbuf.clear();
            inner.wpos = 0;
            inner.m.pending_acks = 0;
            inner.m.window_due = false;
        }
        for (lane, done) in finished.into_iter().enumerate() {
            if done && conn.accepts_streams() {
                conn.start(lane, request, None);
            }
        }
    }
    // The outbox holds the connection until a worker's flush; none comes.
    outbox.forget();
}
