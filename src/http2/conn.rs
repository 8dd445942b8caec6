//! One HTTP/2 connection and the streams its lanes run on it.
//!
//! There is no connection task. A lane (one request loop's place on the
//! connection) starts its stream by appending frames to the connection's
//! write buffer, then polls for its response; while it waits it reads the
//! socket itself and handles every frame that arrived, completing and waking
//! the lanes they belong to. The last lane that found the socket not ready
//! is the *driver*: its waker is the one the socket holds. A lane reads
//! until the socket is drained, so a batch of responses is handled whole. A
//! driver that leaves while lanes still wait leaves the connection
//! *orphaned*; unless a lane reads again first (as one starting its next
//! request at once does), the worker's flush wakes a waiting lane to take
//! over, and again if that lane finds its own response done and leaves too.
//!
//! Lanes never write: they append frames and put the connection in the
//! worker's [`Outbox`], which the worker flushes once all the lanes it woke
//! have run, so the requests of a whole batch of responses go out in one
//! write.

use super::frame::{self, FrameHead};
use super::request::H2Request;
use crate::http1::{Capture, ResponseHead};
use crate::net::Stream;
use crate::sample::{ErrorDetail, ErrorKind, RequestError};
use std::cell::{Cell, RefCell};
use std::pin::Pin;
use std::rc::{Rc, Weak};
use std::task::{Context, Poll, Waker, ready};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Why a stream ended without a response.
#[derive(Debug)]
pub enum Failure {
    /// The server did not process it (REFUSED_STREAM, or above a GOAWAY's
    /// last stream): safe to send again on another connection.
    Refused,
    Error(RequestError),
}

/// A finished stream: its outcome and the capture it was lent.
pub type Finished = (Result<ResponseHead, Failure>, Option<Capture>);

/// Start size of the read buffer: room for a full frame and then some.
const READ_BUFFER: usize = 64 * 1024;
/// Read again only with at least this much room left (else compact first).
const MIN_READ_ROOM: usize = frame::MAX_FRAME + frame::HEAD_LEN;
/// Stream ids stop short of 2^31 so a long run moves to a new connection.
const LAST_STREAM_ID: u32 = (1 << 31) - 64;
/// Windows volley grants are the largest allowed; it returns what the server
/// used once half is gone, so flow control never stalls a response.
const REFILL_AT: u32 = frame::MAX_WINDOW / 2;
/// A lane yields to the runtime after this many reads in one poll that
/// found bytes waiting: a server that sends frames faster than they are
/// handled (endless interim HEADERS, empty DATA frames) never leaves the
/// socket empty, and the request timeout, the run's deadline and the
/// worker's flush must still get their turn.
const YIELD_READS: u32 = 32;
/// Control-frame replies (PING and SETTINGS acknowledgements) that may wait
/// unwritten. A server that sends more without reading the replies is
/// flooding the connection (the attacks servers guard against the same
/// way): it is a connection error, not a reason to grow the write buffer.
const MAX_PENDING_ACKS: u32 = 4096;
/// Past half of [`MAX_PENDING_ACKS`] the replies are written at once
/// rather than at the worker's next flush.
const FLUSH_ACKS_AT: u32 = MAX_PENDING_ACKS / 2;
/// The largest response header list volley accepts, advertised as
/// SETTINGS_MAX_HEADER_LIST_SIZE; a header block (HEADERS plus its
/// CONTINUATION frames) is capped at the same size.
pub const MAX_HEADER_LIST: usize = 256 * 1024;

#[derive(Default)]
struct LaneState {
    /// The lane's open stream; 0 when it has none.
    id: u32,
    status: u16,
    bytes: u64,
    result: Option<Result<(), Failure>>,
    waker: Option<Waker>,
    send_window: i64,
    body_len: usize,
    body_sent: usize,
    recv_unacked: u32,
    capture: Option<Capture>,
}

impl LaneState {
    fn open(&self) -> bool {
        self.id != 0 && self.result.is_none()
    }

    fn sending(&self) -> bool {
        self.open() && self.body_sent < self.body_len
    }
}

/// How a connection's requests use the server's HPACK dynamic table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Table {
    /// The next request adds its fields ([`super::request::Indexed::first`]).
    Fresh,
    /// The fields are in the table: requests name them by index.
    Primed,
    /// The server allows a smaller table than volley's fields need: plain
    /// literals only, after emptying the table once (`update_due`).
    Off { update_due: bool },
}

impl Table {
    /// The header block to send for `request`, and a dynamic table size
    /// update (to 0) to put before it when one is due.
    fn pick<'r>(&mut self, request: &'r H2Request) -> (Option<u8>, &'r [u8]) {
        match (*self, &request.indexed) {
            (Table::Off { update_due: true }, _) => {
                *self = Table::Off { update_due: false };
                (Some(0x20), &request.block)
            }
            (Table::Fresh, Some(indexed)) => {
                *self = Table::Primed;
                (None, &indexed.first)
            }
            (Table::Primed, Some(indexed)) => (None, &indexed.repeat),
            _ => (None, &request.block),
        }
    }
}

struct Inner {
    io: Stream,
    table: Table,
    rbuf: Vec<u8>,
    rstart: usize,
    rend: usize,
    wbuf: Vec<u8>,
    wpos: usize,
    decoder: super::hpack::Decoder,
    lanes: Vec<LaneState>,
    next_id: u32,
    active: usize,
    peer_max_streams: usize,
    /// The server's initial stream window.
    peer_window: i64,
    /// The connection's send window.
    send_window: i64,
    peer_max_frame: usize,
    recv_unacked: u32,
    /// No new streams: the server sent GOAWAY, or the run asked for one
    /// connection per request.
    closing: bool,
    dead: bool,
    driver: Option<usize>,
    /// A header block arriving over CONTINUATION frames.
    block: Vec<u8>,
    continuing: Option<(u32, bool)>,
    capacity_waiters: Vec<Waker>,
    /// PING and SETTINGS acknowledgements queued since the write buffer
    /// was last written out whole.
    pending_acks: u32,
}

/// One HTTP/2 connection, shared by the lanes of one [`super::Home`].
pub struct Conn {
    inner: RefCell<Inner>,
    outbox: Rc<Outbox>,
    /// Itself, to enter the outbox.
    this: Weak<Conn>,
    /// In the outbox already.
    queued: Cell<bool>,
}

/// A worker's connections with frames waiting to be written.
#[derive(Default)]
pub struct Outbox {
    dirty: RefCell<Vec<Rc<Conn>>>,
    /// The previous flush's list, kept for its allocation.
    spare: RefCell<Vec<Rc<Conn>>>,
}

impl Outbox {
    /// Writes every waiting connection's frames; a connection whose socket
    /// is full stays queued and `cx` is woken when it can take more.
    pub fn flush(&self, cx: &mut Context<'_>) {
        let mut conns = std::mem::take(&mut *self.spare.borrow_mut());
        std::mem::swap(&mut conns, &mut *self.dirty.borrow_mut());
        for conn in conns.drain(..) {
            let mut inner = conn.inner.borrow_mut();
            let flushed = inner.poll_flush(cx);
            if inner.orphaned() {
                // No lane holds the socket's waker: wake one to read.
                if let Some(waker) = inner
                    .lanes
                    .iter()
                    .find(|l| l.open())
                    .and_then(|l| l.waker.as_ref())
                {
                    waker.wake_by_ref();
                }
            }
            match flushed {
                Poll::Ready(Ok(())) => conn.queued.set(false),
                Poll::Ready(Err(err)) => {
                    inner.die(RequestError::from_io(err), usize::MAX);
                    inner.wbuf.clear();
                    conn.queued.set(false);
                }
                Poll::Pending => {
                    drop(inner);
                    self.dirty.borrow_mut().push(conn);
                }
            }
        }
        *self.spare.borrow_mut() = conns;
    }
}

impl Conn {
    /// Takes a connected stream and queues the preface and settings; they
    /// go out with the first request.
    pub fn new(io: Stream, lanes: usize, outbox: Rc<Outbox>) -> Rc<Conn> {
        let mut wbuf = Vec::with_capacity(4096);
        wbuf.extend_from_slice(frame::PREFACE);
        frame::put_settings(
            &mut wbuf,
            &[
                (frame::SETTINGS_ENABLE_PUSH, 0),
                (frame::SETTINGS_INITIAL_WINDOW_SIZE, frame::MAX_WINDOW),
                (frame::SETTINGS_MAX_HEADER_LIST_SIZE, MAX_HEADER_LIST as u32),
            ],
        );
        frame::put_window_update(&mut wbuf, 0, frame::MAX_WINDOW - 65_535);
        Rc::new_cyclic(|this| Conn {
            outbox,
            this: this.clone(),
            queued: Cell::new(false),
            inner: RefCell::new(Inner {
                io,
                table: Table::Fresh,
                rbuf: vec![0; READ_BUFFER],
                rstart: 0,
                rend: 0,
                wbuf,
                wpos: 0,
                decoder: super::hpack::Decoder::default(),
                lanes: (0..lanes).map(|_| LaneState::default()).collect(),
                next_id: 1,
                active: 0,
                peer_max_streams: usize::MAX,
                peer_window: 65_535,
                send_window: 65_535,
                peer_max_frame: frame::MAX_FRAME,
                recv_unacked: 0,
                closing: false,
                dead: false,
                driver: None,
                block: Vec::new(),
                continuing: None,
                capacity_waiters: Vec::new(),
                pending_acks: 0,
            }),
        })
    }

    /// Queues the connection for the worker's next flush if it has frames
    /// to write.
    fn queue(&self, inner: &Inner) {
        if (inner.wbuf.len() > inner.wpos || inner.orphaned()) && !self.queued.get() {
            self.queued.set(true);
            if let Some(this) = self.this.upgrade() {
                self.outbox.dirty.borrow_mut().push(this);
            }
        }
    }

    /// Whether a new stream may start here.
    pub fn accepts_streams(&self) -> bool {
        let inner = self.inner.borrow();
        !inner.dead && !inner.closing && inner.next_id < LAST_STREAM_ID
    }

    /// Whether any lane still has a stream here.
    pub fn idle(&self) -> bool {
        self.inner.borrow().active == 0
    }

    /// Starts no more streams here (one connection per request).
    pub fn retire(&self) {
        self.inner.borrow_mut().closing = true;
    }

    /// Ready when the server's stream limit leaves room for one more.
    pub fn poll_capacity(&self, cx: &mut Context<'_>) -> Poll<()> {
        let mut inner = self.inner.borrow_mut();
        if inner.active < inner.peer_max_streams || inner.dead || inner.closing {
            return Poll::Ready(());
        }
        inner.capacity_waiters.push(cx.waker().clone());
        Poll::Pending
    }

    /// Opens the lane's next stream: HEADERS (split into CONTINUATION when
    /// the block is larger than a frame) and as much body as the windows
    /// allow; the rest goes out from [`Conn::poll_response`].
    pub fn start(&self, lane: usize, request: &H2Request, capture: Option<Capture>) {
        let mut guard = self.inner.borrow_mut();
        let inner = &mut *guard;
        let id = inner.next_id;
        inner.next_id += 2;
        inner.active += 1;
        let peer_window = inner.peer_window;
        let state = &mut inner.lanes[lane];
        debug_assert!(state.id == 0, "a lane has one stream at a time");
        *state = LaneState {
            id,
            send_window: peer_window,
            body_len: request.body.len(),
            capture,
            waker: state.waker.take(),
            ..LaneState::default()
        };
        let end_stream = if request.body.is_empty() {
            frame::END_STREAM
        } else {
            0
        };
        let (size_update, block) = inner.table.pick(request);
        let with_update;
        let block = match size_update {
            Some(update) => {
                with_update = [&[update][..], block].concat();
                &with_update[..]
            }
            None => block,
        };
        let max = inner.peer_max_frame;
        let mut chunks = block.chunks(max).peekable();
        let first = chunks.next().unwrap_or_default();
        let last = chunks.peek().is_none();
        let flags = end_stream | if last { frame::END_HEADERS } else { 0 };
        frame::put_head(&mut inner.wbuf, first.len(), frame::HEADERS, flags, id);
        inner.wbuf.extend_from_slice(first);
        while let Some(chunk) = chunks.next() {
            let flags = if chunks.peek().is_none() {
                frame::END_HEADERS
            } else {
                0
            };
            frame::put_head(&mut inner.wbuf, chunk.len(), frame::CONTINUATION, flags, id);
            inner.wbuf.extend_from_slice(chunk);
        }
        inner.send_body(lane, &request.body);
        self.queue(inner);
    }

    /// Drives the connection until the lane's stream has finished.
    pub fn poll_response(&self, lane: usize, body: &[u8], cx: &mut Context<'_>) -> Poll<Finished> {
        let mut guard = self.inner.borrow_mut();
        let inner = &mut *guard;
        let finished = inner.drive(lane, body, cx);
        self.queue(inner);
        finished
    }

    /// The lane gave up on its stream (a timeout, or the run ended): the
    /// server is told, and later frames for it are ignored.
    pub fn cancel(&self, lane: usize) {
        let mut guard = self.inner.borrow_mut();
        let inner = &mut *guard;
        let state = &inner.lanes[lane];
        if state.id == 0 {
            return;
        }
        if state.open() && !inner.dead {
            frame::put_rst_stream(&mut inner.wbuf, state.id, frame::CANCEL);
        }
        inner.release(lane);
        self.queue(inner);
    }
}

impl Inner {
    /// Reads and handles frames until the lane's stream has finished.
    fn drive(&mut self, lane: usize, body: &[u8], cx: &mut Context<'_>) -> Poll<Finished> {
        let inner = self;
        // Done by another lane's read, which left the socket drained.
        if inner.lanes[lane].result.is_some() {
            return Poll::Ready(inner.finish(lane));
        }
        // Otherwise read until the socket has nothing more, also once this
        // lane's own response is in: the whole batch of responses that has
        // arrived is handled before the worker's flush, so the requests it
        // frees go out in one write.
        let mut reads = 0u32;
        loop {
            if inner.dead && inner.lanes[lane].result.is_some() {
                return Poll::Ready(inner.finish(lane));
            }
            inner.send_body(lane, body);
            if inner.pending_acks >= FLUSH_ACKS_AT
                && let Poll::Ready(Err(err)) = inner.poll_flush(cx)
            {
                inner.die(RequestError::from_io(err), lane);
                continue;
            }
            reads += 1;
            if reads > YIELD_READS {
                // The socket still has bytes: come back after the runtime
                // has run its timers and the other lanes.
                inner.driver = Some(lane);
                if inner.lanes[lane].result.is_some() {
                    return Poll::Ready(inner.finish(lane));
                }
                inner.lanes[lane].waker = Some(cx.waker().clone());
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            match inner.poll_fill(cx) {
                Poll::Ready(Ok(0)) => inner.die(
                    RequestError::new(
                        ErrorKind::Reset,
                        ErrorDetail::Static("the server closed the HTTP/2 connection"),
                    ),
                    lane,
                ),
                Poll::Ready(Ok(_)) => {
                    if let Err(err) = inner.process(lane) {
                        inner.die(err, lane);
                    }
                }
                Poll::Ready(Err(err)) => inner.die(RequestError::from_io(err), lane),
                Poll::Pending => {
                    inner.driver = Some(lane);
                    if inner.lanes[lane].result.is_some() {
                        return Poll::Ready(inner.finish(lane));
                    }
                    let waker = &mut inner.lanes[lane].waker;
                    if !waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                        *waker = Some(cx.waker().clone());
                    }
                    return Poll::Pending;
                }
            }
        }
    }

    /// Wakes a lane for something another lane's read found.
    fn wake(&mut self, lane: usize, me: usize) {
        if lane != me
            && let Some(waker) = &self.lanes[lane].waker
        {
            waker.wake_by_ref();
        }
    }

    fn complete(&mut self, lane: usize, result: Result<(), Failure>, me: usize) {
        self.lanes[lane].result = Some(result);
        self.wake(lane, me);
    }

    /// Hands the lane's finished stream back and frees its place.
    fn finish(&mut self, lane: usize) -> Finished {
        let state = &mut self.lanes[lane];
        let result = state.result.take().expect("finish is called on a finished lane");
        if result.is_ok() && state.body_sent < state.body_len {
            // The server answered before taking the whole body.
            frame::put_rst_stream(&mut self.wbuf, state.id, frame::CANCEL);
        }
        let head = ResponseHead {
            status: state.status,
            bytes: state.bytes,
            close: false,
        };
        let capture = state.capture.take();
        self.release(lane);
        (result.map(|()| head), capture)
    }

    fn release(&mut self, lane: usize) {
        let state = &mut self.lanes[lane];
        state.id = 0;
        state.result = None;
        state.capture = None;
        self.active -= 1;
        if let Some(waiter) = self.capacity_waiters.pop() {
            waiter.wake();
        }
        // A leaving driver gives up the socket; the worker's next flush
        // hands it to a waiting lane unless this one (or another) reads
        // again first, as a lane starting its next request at once does.
        if self.driver == Some(lane) {
            self.driver = None;
        }
    }

    /// Streams wait here but no lane is registered to read the socket.
    fn orphaned(&self) -> bool {
        self.driver.is_none() && !self.dead && self.lanes.iter().any(|l| l.open())
    }

    /// Fails every open stream: the connection is gone.
    fn die(&mut self, err: RequestError, me: usize) {
        self.dead = true;
        let message = err.message();
        for lane in 0..self.lanes.len() {
            if self.lanes[lane].open() {
                let copy = RequestError::new(err.kind, ErrorDetail::Text(message.clone()));
                self.complete(lane, Err(Failure::Error(copy)), me);
            }
        }
        for waiter in self.capacity_waiters.drain(..) {
            waiter.wake();
        }
    }

    /// Sends as much of the lane's body as both windows allow.
    fn send_body(&mut self, lane: usize, body: &[u8]) {
        let state = &mut self.lanes[lane];
        while state.sending() {
            let room = state
                .send_window
                .min(self.send_window)
                .min(self.peer_max_frame as i64);
            if room <= 0 {
                return; // a WINDOW_UPDATE will wake this lane
            }
            let n = (room as usize).min(state.body_len - state.body_sent);
            let end = state.body_sent + n;
            let flags = if end == state.body_len {
                frame::END_STREAM
            } else {
                0
            };
            frame::put_head(&mut self.wbuf, n, frame::DATA, flags, state.id);
            self.wbuf.extend_from_slice(&body[state.body_sent..end]);
            state.body_sent = end;
            state.send_window -= n as i64;
            self.send_window -= n as i64;
        }
    }

    fn poll_flush(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        while self.wpos < self.wbuf.len() {
            let n = ready!(Pin::new(&mut self.io).poll_write(cx, &self.wbuf[self.wpos..]))?;
            if n == 0 {
                return Poll::Ready(Err(std::io::ErrorKind::WriteZero.into()));
            }
            self.wpos += n;
        }
        self.wbuf.clear();
        self.wpos = 0;
        self.pending_acks = 0;
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
        Poll::Ready(Ok(n))
    }

    /// Handles every complete frame in the read buffer.
    fn process(&mut self, me: usize) -> Result<(), RequestError> {
        // Taken out so frames can be borrowed while the state changes.
        let rbuf = std::mem::take(&mut self.rbuf);
        let result = self.process_frames(&rbuf, me);
        self.rbuf = rbuf;
        if self.rstart == self.rend {
            self.rstart = 0;
            self.rend = 0;
        }
        result
    }

    fn process_frames(&mut self, rbuf: &[u8], me: usize) -> Result<(), RequestError> {
        loop {
            let available = &rbuf[self.rstart..self.rend];
            if available.len() < frame::HEAD_LEN {
                return Ok(());
            }
            let head = FrameHead::parse(available);
            if head.len > frame::MAX_FRAME {
                return Err(RequestError::protocol(
                    "HTTP/2 frame larger than the maximum frame size",
                ));
            }
            let Some(payload) = available.get(frame::HEAD_LEN..frame::HEAD_LEN + head.len) else {
                return Ok(());
            };
            self.rstart += frame::HEAD_LEN + head.len;
            self.handle(head, payload, me)?;
        }
    }

    /// The open lane whose stream is `id`.
    fn lane_of(&self, id: u32) -> Option<usize> {
        self.lanes.iter().position(|l| l.id == id && l.result.is_none())
    }

    fn handle(&mut self, head: FrameHead, payload: &[u8], me: usize) -> Result<(), RequestError> {
        if self.continuing.is_some() && head.kind != frame::CONTINUATION {
            return Err(RequestError::protocol(
                "HTTP/2 header block interrupted before its CONTINUATION",
            ));
        }
        // A stream volley has not opened yet is idle: a frame on it (other
        // than PRIORITY) is a connection error (RFC 9113 section 5.1).
        if head.stream >= self.next_id
            && head.kind != frame::PRIORITY_FRAME
            && head.kind <= frame::CONTINUATION
        {
            return Err(RequestError::protocol(
                "HTTP/2 frame on a stream volley never opened",
            ));
        }
        let lane = self.lane_of(head.stream).filter(|_| head.stream != 0);
        if let Some(lane) = lane {
            self.lanes[lane].bytes += (frame::HEAD_LEN + head.len) as u64;
        }
        match head.kind {
            frame::DATA => self.on_data(head, payload, lane, me),
            frame::HEADERS => {
                if head.stream == 0 {
                    return Err(RequestError::protocol("HTTP/2 HEADERS frame on stream 0"));
                }
                let fragment = frame::unpad(payload, head.flags, true)
                    .ok_or_else(|| RequestError::protocol("HTTP/2 HEADERS padding longer than the frame"))?;
                let end_stream = head.flags & frame::END_STREAM != 0;
                if head.flags & frame::END_HEADERS != 0 {
                    self.on_header_block(fragment, lane, end_stream, me)
                } else {
                    self.block.clear();
                    self.block.extend_from_slice(fragment);
                    self.continuing = Some((head.stream, end_stream));
                    Ok(())
                }
            }
            frame::CONTINUATION => {
                let Some((stream, end_stream)) = self.continuing else {
                    return Err(RequestError::protocol(
                        "HTTP/2 CONTINUATION without a header block",
                    ));
                };
                if stream != head.stream {
                    return Err(RequestError::protocol("HTTP/2 CONTINUATION on another stream"));
                }
                if self.block.len() + payload.len() > MAX_HEADER_LIST {
                    return Err(RequestError::protocol(
                        "HTTP/2 header block larger than 256 KiB (endless CONTINUATION frames)",
                    ));
                }
                self.block.extend_from_slice(payload);
                if head.flags & frame::END_HEADERS == 0 {
                    return Ok(());
                }
                self.continuing = None;
                let block = std::mem::take(&mut self.block);
                let result = self.on_header_block(&block, lane, end_stream, me);
                self.block = block;
                result
            }
            frame::RST_STREAM => {
                if payload.len() != 4 {
                    return Err(RequestError::protocol("HTTP/2 RST_STREAM of the wrong size"));
                }
                if let Some(lane) = lane {
                    let code = frame::read_u32(payload);
                    let failure = if code == frame::REFUSED_STREAM {
                        Failure::Refused
                    } else {
                        Failure::Error(RequestError::new(
                            ErrorKind::Reset,
                            ErrorDetail::Text(format!(
                                "the server reset the stream (HTTP/2 error code {code:#x})"
                            )),
                        ))
                    };
                    self.complete(lane, Err(failure), me);
                }
                Ok(())
            }
            frame::SETTINGS => self.on_settings(head, payload, me),
            frame::PING => {
                if payload.len() != 8 {
                    return Err(RequestError::protocol("HTTP/2 PING of the wrong size"));
                }
                if head.flags & frame::ACK == 0 {
                    self.count_ack(
                        "the server flooded the HTTP/2 connection with PING frames without reading the replies",
                    )?;
                    frame::put_ping_ack(&mut self.wbuf, payload);
                }
                Ok(())
            }
            frame::GOAWAY => {
                if payload.len() < 8 {
                    return Err(RequestError::protocol("HTTP/2 GOAWAY too short"));
                }
                let last = frame::read_u31(payload);
                self.closing = true;
                for lane in 0..self.lanes.len() {
                    if self.lanes[lane].open() && self.lanes[lane].id > last {
                        self.complete(lane, Err(Failure::Refused), me);
                    }
                }
                Ok(())
            }
            frame::WINDOW_UPDATE => {
                if payload.len() != 4 {
                    return Err(RequestError::protocol("HTTP/2 WINDOW_UPDATE of the wrong size"));
                }
                let increment = frame::read_u31(payload) as i64;
                let max = frame::MAX_WINDOW as i64;
                if head.stream == 0 {
                    if increment == 0 {
                        return Err(RequestError::protocol("HTTP/2 WINDOW_UPDATE of zero"));
                    }
                    self.send_window += increment;
                    if self.send_window > max {
                        return Err(RequestError::protocol(
                            "HTTP/2 WINDOW_UPDATE overflowed the window",
                        ));
                    }
                } else if let Some(lane) = lane {
                    let window = &mut self.lanes[lane].send_window;
                    *window += increment;
                    if increment == 0 || *window > max {
                        let what = if increment == 0 {
                            "HTTP/2 WINDOW_UPDATE of zero on the stream"
                        } else {
                            "HTTP/2 WINDOW_UPDATE overflowed the stream's window"
                        };
                        self.complete(lane, Err(Failure::Error(RequestError::protocol(what))), me);
                        frame::put_rst_stream(&mut self.wbuf, head.stream, frame::PROTOCOL_ERROR);
                    }
                }
                self.wake_senders(me);
                Ok(())
            }
            frame::PUSH_PROMISE => Err(RequestError::protocol(
                "HTTP/2 server push arrived though volley disabled it",
            )),
            _ => Ok(()), // PRIORITY and unknown frame types are ignored
        }
    }

    fn on_data(
        &mut self,
        head: FrameHead,
        payload: &[u8],
        lane: Option<usize>,
        me: usize,
    ) -> Result<(), RequestError> {
        if head.stream == 0 {
            return Err(RequestError::protocol("HTTP/2 DATA frame on stream 0"));
        }
        // Flow control counts whole frames, also those of cancelled streams.
        self.recv_unacked += head.len as u32;
        if self.recv_unacked >= REFILL_AT {
            frame::put_window_update(&mut self.wbuf, 0, self.recv_unacked);
            self.recv_unacked = 0;
        }
        let data = frame::unpad(payload, head.flags, false)
            .ok_or_else(|| RequestError::protocol("HTTP/2 DATA padding longer than the frame"))?;
        let Some(lane) = lane else { return Ok(()) };
        let state = &mut self.lanes[lane];
        state.recv_unacked += head.len as u32;
        if state.recv_unacked >= REFILL_AT {
            frame::put_window_update(&mut self.wbuf, state.id, state.recv_unacked);
            state.recv_unacked = 0;
        }
        if let Some(capture) = state.capture.as_mut().filter(|c| c.full) {
            capture.keep_body(data);
        }
        if head.flags & frame::END_STREAM != 0 {
            self.complete(lane, Ok(()), me);
        }
        Ok(())
    }

    /// Decodes a complete header block (always: the decoder's table must
    /// follow every block, also those of streams nobody waits for).
    fn on_header_block(
        &mut self,
        block: &[u8],
        lane: Option<usize>,
        end_stream: bool,
        me: usize,
    ) -> Result<(), RequestError> {
        let mut status = None;
        let mut capture = lane.and_then(|l| self.lanes[l].capture.as_mut());
        // Set-Cookie is kept from every response a plan reads, the rest only
        // for captured ones; neither when nobody captures.
        let wanted = capture.is_some();
        // The header list size (RFC 9113 section 6.5.2) of what is kept; a
        // server past the limit volley advertised is not copied further.
        let mut listed = 0usize;
        self.decoder
            .decode(block, wanted, |name, value| {
                listed += name.len() + value.len() + 32;
                if listed > MAX_HEADER_LIST {
                    return;
                }
                if name == b":status" {
                    // Three digits, as in HTTP/1.1; anything else is
                    // treated as a missing status.
                    status = Some(value)
                        .filter(|v| v.len() == 3 && v.iter().all(u8::is_ascii_digit))
                        .and_then(|v| std::str::from_utf8(v).ok())
                        .and_then(|s| s.parse::<u16>().ok());
                } else if let Some(capture) = capture.as_deref_mut()
                    && !name.starts_with(b":")
                {
                    capture.add_header(&String::from_utf8_lossy(name), value);
                }
            })
            .map_err(|_| RequestError::protocol("HTTP/2 response headers failed to decode (HPACK)"))?;
        if listed > MAX_HEADER_LIST {
            return Err(RequestError::protocol(
                "HTTP/2 response header list larger than the 256 KiB volley allows",
            ));
        }
        let Some(lane) = lane else { return Ok(()) };
        let state = &mut self.lanes[lane];
        match status {
            // RFC 9113 section 8.6: HTTP/2 has no 101 (Switching Protocols).
            Some(101) => {
                let err =
                    RequestError::protocol("HTTP/2 response with status 101, which HTTP/2 does not allow");
                self.complete(lane, Err(Failure::Error(err)), me);
                return Ok(());
            }
            // Informational (100 Continue, 103 Early Hints): the final
            // response follows.
            Some(100..=199) if !end_stream => return Ok(()),
            Some(status) if state.status == 0 => state.status = status,
            // After the final response only trailers (ending the stream)
            // may follow.
            Some(_) if !end_stream => {
                let err = RequestError::protocol("HTTP/2 second final response HEADERS on one stream");
                self.complete(lane, Err(Failure::Error(err)), me);
                return Ok(());
            }
            Some(_) => {}
            None if state.status == 0 => {
                let err = RequestError::protocol("HTTP/2 response without a :status");
                self.complete(lane, Err(Failure::Error(err)), me);
                return Ok(());
            }
            None => {} // trailers
        }
        if end_stream {
            self.complete(lane, Ok(()), me);
        }
        Ok(())
    }

    fn on_settings(&mut self, head: FrameHead, payload: &[u8], me: usize) -> Result<(), RequestError> {
        if head.stream != 0 || !payload.len().is_multiple_of(6) {
            return Err(RequestError::protocol("malformed HTTP/2 SETTINGS frame"));
        }
        if head.flags & frame::ACK != 0 {
            return Ok(());
        }
        for setting in payload.chunks_exact(6) {
            let id = u16::from_be_bytes([setting[0], setting[1]]);
            let value = frame::read_u32(&setting[2..]);
            match id {
                frame::SETTINGS_HEADER_TABLE_SIZE
                    if (value as usize) < super::hpack::TABLE_SIZE
                        && !matches!(self.table, Table::Off { .. }) =>
                {
                    self.table = Table::Off { update_due: true };
                }
                frame::SETTINGS_MAX_CONCURRENT_STREAMS => {
                    self.peer_max_streams = value as usize;
                    for waiter in self.capacity_waiters.drain(..) {
                        waiter.wake();
                    }
                }
                frame::SETTINGS_INITIAL_WINDOW_SIZE => {
                    if value > frame::MAX_WINDOW {
                        return Err(RequestError::protocol("HTTP/2 initial window size above 2^31-1"));
                    }
                    let delta = value as i64 - self.peer_window;
                    self.peer_window = value as i64;
                    for state in self.lanes.iter_mut().filter(|l| l.open()) {
                        state.send_window += delta;
                    }
                    self.wake_senders(me);
                }
                frame::SETTINGS_MAX_FRAME_SIZE => {
                    if !(frame::MAX_FRAME as u32..=(1 << 24) - 1).contains(&value) {
                        return Err(RequestError::protocol("HTTP/2 max frame size out of range"));
                    }
                    self.peer_max_frame = value as usize;
                }
                _ => {}
            }
        }
        self.count_ack(
            "the server flooded the HTTP/2 connection with SETTINGS frames without reading the replies",
        )?;
        frame::put_settings_ack(&mut self.wbuf);
        Ok(())
    }

    /// Counts one queued acknowledgement; too many unwritten is a flood.
    fn count_ack(&mut self, flood: &'static str) -> Result<(), RequestError> {
        if self.pending_acks >= MAX_PENDING_ACKS {
            return Err(RequestError::protocol(flood));
        }
        self.pending_acks += 1;
        Ok(())
    }

    /// Wakes lanes with body left to send (a window opened).
    fn wake_senders(&mut self, me: usize) {
        for lane in 0..self.lanes.len() {
            if self.lanes[lane].sending() {
                self.wake(lane, me);
            }
        }
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
            if inner.dead {
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
                inner.die(err, 0);
            }
            for (lane, done) in finished.iter_mut().enumerate() {
                inner.send_body(lane, &request.body);
                if inner.lanes[lane].result.is_some() {
                    let _ = inner.finish(lane);
                    *done = true;
                }
            }
            // As if the replies were written out whole.
            inner.wbuf.clear();
            inner.wpos = 0;
            inner.pending_acks = 0;
        }
        for (lane, done) in finished.into_iter().enumerate() {
            if done && conn.accepts_streams() {
                conn.start(lane, request, None);
            }
        }
    }
    // The outbox holds the connection until a worker's flush; none comes.
    outbox.dirty.borrow_mut().clear();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_index_after_the_first_until_the_server_shrinks_the_table() {
        let request = H2Request::from_http1(b"GET / HTTP/1.1\r\nHost: a.test\r\n\r\n", true).unwrap();
        let indexed = request.indexed.clone().unwrap();
        let mut table = Table::Fresh;
        assert_eq!(table.pick(&request), (None, &indexed.first[..]));
        assert_eq!(table.pick(&request), (None, &indexed.repeat[..]));
        assert_eq!(table.pick(&request), (None, &indexed.repeat[..]));
        // SETTINGS_HEADER_TABLE_SIZE below 4096: empty the table once, then
        // literals only.
        table = Table::Off { update_due: true };
        assert_eq!(table.pick(&request), (Some(0x20), &request.block[..]));
        assert_eq!(table.pick(&request), (None, &request.block[..]));
    }
}
