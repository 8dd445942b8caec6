//! A connection's frame state machine: it takes the server's bytes and
//! gives each lane's finished stream, and queues the frames to send (the
//! requests, their bodies within the flow-control windows, the replies to
//! PING and SETTINGS) in a buffer for whoever owns the socket. No socket
//! here, so every frame sequence a server may send is testable on its own;
//! [`super::conn`] reads and writes, and hands the socket between lanes.

use super::frame;
use super::outcome::{Failure, Finished};
use super::request::H2Request;
use crate::response::{Capture, ResponseHead};
use crate::sample::{ErrorDetail, RequestError};
use std::task::Waker;
use std::time::Instant;

/// Stream ids stop short of 2^31 so a long run moves to a new connection.
const LAST_STREAM_ID: u32 = (1 << 31) - 64;
/// Windows volley grants are the largest allowed; it returns what the server
/// used once half is gone, so flow control never stalls a response.
const REFILL_AT: u32 = frame::MAX_WINDOW / 2;
/// Control-frame replies (PING and SETTINGS acknowledgements) that may wait
/// unwritten. A server that sends more without reading the replies is
/// flooding the connection (the attacks servers guard against the same
/// way): it is a connection error, not a reason to grow the write buffer.
const MAX_PENDING_ACKS: u32 = 4096;
/// Past half of [`MAX_PENDING_ACKS`] the replies are written at once
/// rather than at the worker's next flush.
pub const FLUSH_ACKS_AT: u32 = MAX_PENDING_ACKS / 2;
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
    /// The port its response's `Alt-Svc` offers HTTP/3 on.
    h3_offer: Option<u16>,
    /// When the kernel received the bytes that ended the response, where
    /// the socket's receives are stamped.
    received_at: Option<Instant>,
    /// `--coalesce`: when the stream's request began to go out; `None`
    /// while it waits in the write buffer.
    sent_at: Option<Instant>,
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

/// One connection's streams and settings, as both ends have declared them.
pub struct Machine {
    table: Table,
    /// Frames to send; the socket's owner writes them out from `wpos`.
    pub wbuf: Vec<u8>,
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
    pub closing: bool,
    pub dead: bool,
    /// A header block arriving over CONTINUATION frames.
    block: Vec<u8>,
    continuing: Option<(u32, bool)>,
    capacity_waiters: Vec<Waker>,
    /// PING and SETTINGS acknowledgements queued since the write buffer
    /// was last written out whole.
    pub pending_acks: u32,
    /// A WINDOW_UPDATE is queued: the server may be waiting for it to send
    /// more, so it is never held back (`--coalesce`).
    pub window_due: bool,
    /// The lane whose call is handling frames: the streams it finishes for
    /// others wake them, its own is seen on return.
    reading: usize,
    /// A response's header block was decoded whole for its `Alt-Svc`: the
    /// connection's first, and only that one, since blocks are otherwise
    /// decoded no further than `:status` unless a plan keeps them.
    alt_svc_looked: bool,
    /// When the kernel received the bytes being handled, where the socket's
    /// receives are stamped: a response ended by them was received then,
    /// however long it waited to be read.
    pub stamp: Option<Instant>,
}

impl Machine {
    /// A connection with `lanes` places; the preface and settings are
    /// queued and go out with the first request.
    pub fn new(lanes: usize) -> Machine {
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
        Machine {
            table: Table::Fresh,
            wbuf,
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
            block: Vec::new(),
            continuing: None,
            capacity_waiters: Vec::new(),
            pending_acks: 0,
            window_due: false,
            reading: usize::MAX,
            alt_svc_looked: false,
            stamp: None,
        }
    }

    /// Whether a new stream may start here.
    pub fn accepts_streams(&self) -> bool {
        !self.dead && !self.closing && self.next_id < LAST_STREAM_ID
    }

    /// Whether any lane still has a stream here.
    #[cfg(test)]
    pub fn idle(&self) -> bool {
        self.active == 0
    }

    /// Whether the server's stream limit leaves room for one more; if not,
    /// `waker` is woken when a place frees up.
    pub fn has_capacity(&mut self, waker: &Waker) -> bool {
        if self.active < self.peer_max_streams || self.dead || self.closing {
            return true;
        }
        self.capacity_waiters.push(waker.clone());
        false
    }

    /// Where the lanes stand for `--coalesce`'s rounds.
    pub fn tally(&self) -> super::outbox::Tally {
        super::outbox::Tally::of(self.lanes.iter().map(|l| (l.id != 0, l.open(), l.sent_at)))
    }

    /// When each lane's stream was sent (`--coalesce`), for
    /// [`super::Rounds::wrote`] to stamp.
    pub fn sent_stamps(&mut self) -> impl Iterator<Item = &mut Option<Instant>> {
        self.lanes
            .iter_mut()
            .filter(|l| l.id != 0)
            .map(|l| &mut l.sent_at)
    }

    /// Whether any lane waits for its stream.
    pub fn any_open(&self) -> bool {
        self.lanes.iter().any(|l| l.open())
    }

    /// Whether the lane's stream has finished (its result waits in
    /// [`Machine::finish`]).
    pub fn finished(&self, lane: usize) -> bool {
        self.lanes[lane].result.is_some()
    }

    /// The lane's waker: the one to wake for it, if it is registered.
    pub fn waker(&mut self, lane: usize) -> &mut Option<Waker> {
        &mut self.lanes[lane].waker
    }

    /// The waker of some lane still waiting for its stream.
    pub fn a_waiting_waker(&self) -> Option<&Waker> {
        self.lanes
            .iter()
            .find(|l| l.open())
            .and_then(|l| l.waker.as_ref())
    }

    /// Opens the lane's next stream: HEADERS (split into CONTINUATION when
    /// the block is larger than a frame) and as much body as the windows
    /// allow; the rest goes out from [`Machine::send_body`].
    pub fn start(&mut self, lane: usize, request: &H2Request, capture: Option<Capture>) {
        let id = self.next_id;
        self.next_id += 2;
        self.active += 1;
        let peer_window = self.peer_window;
        let state = &mut self.lanes[lane];
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
        let (size_update, block) = self.table.pick(request);
        let with_update;
        let block = match size_update {
            Some(update) => {
                with_update = [&[update][..], block].concat();
                &with_update[..]
            }
            None => block,
        };
        let max = self.peer_max_frame;
        let mut chunks = block.chunks(max).peekable();
        let first = chunks.next().unwrap_or_default();
        let last = chunks.peek().is_none();
        let flags = end_stream | if last { frame::END_HEADERS } else { 0 };
        frame::put_head(&mut self.wbuf, first.len(), frame::HEADERS, flags, id);
        self.wbuf.extend_from_slice(first);
        while let Some(chunk) = chunks.next() {
            let flags = if chunks.peek().is_none() {
                frame::END_HEADERS
            } else {
                0
            };
            frame::put_head(&mut self.wbuf, chunk.len(), frame::CONTINUATION, flags, id);
            self.wbuf.extend_from_slice(chunk);
        }
        self.send_body(lane, &request.body);
    }

    /// The lane gave up on its stream (a timeout, or the run ended): the
    /// server is told, and later frames for it are ignored. False when the
    /// lane had no stream.
    pub fn cancel(&mut self, lane: usize) -> bool {
        let state = &self.lanes[lane];
        if state.id == 0 {
            return false;
        }
        if state.open() && !self.dead {
            frame::put_rst_stream(&mut self.wbuf, state.id, frame::CANCEL);
        }
        self.release(lane);
        true
    }

    /// Wakes a lane for something another lane's read found.
    fn wake(&mut self, lane: usize) {
        if lane != self.reading
            && let Some(waker) = &self.lanes[lane].waker
        {
            waker.wake_by_ref();
        }
    }

    fn complete(&mut self, lane: usize, result: Result<(), Failure>) {
        self.lanes[lane].received_at = self.stamp;
        self.lanes[lane].result = Some(result);
        self.wake(lane);
    }

    /// Hands the lane's finished stream back and frees its place.
    pub fn finish(&mut self, lane: usize) -> Finished {
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
            h3_offer: state.h3_offer,
            sent_at: state.sent_at,
            received_at: state.received_at,
        };
        let capture = state.capture.take();
        self.release(lane);
        (result.map(|()| head), capture)
    }

    /// Frees the lane's place (its stream is over or given up).
    pub fn release(&mut self, lane: usize) {
        let state = &mut self.lanes[lane];
        state.id = 0;
        state.result = None;
        state.capture = None;
        state.h3_offer = None;
        state.sent_at = None;
        state.received_at = None;
        self.active -= 1;
        if let Some(waiter) = self.capacity_waiters.pop() {
            waiter.wake();
        }
    }

    /// Fails every open stream: the connection is gone.
    /// `reading` is the lane whose call found the failure (it is not woken:
    /// it is running); `usize::MAX` when none is.
    pub fn die(&mut self, err: RequestError, reading: usize) {
        self.reading = reading;
        self.dead = true;
        let message = err.message();
        for lane in 0..self.lanes.len() {
            if self.lanes[lane].open() {
                let copy = RequestError::new(err.kind, ErrorDetail::Text(message.clone()));
                self.complete(lane, Err(Failure::Error(copy)));
            }
        }
        for waiter in self.capacity_waiters.drain(..) {
            waiter.wake();
        }
    }

    /// Sends as much of the lane's body as both windows allow.
    pub fn send_body(&mut self, lane: usize, body: &[u8]) {
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

    /// Wakes lanes with body left to send (a window opened).
    fn wake_senders(&mut self) {
        for lane in 0..self.lanes.len() {
            if self.lanes[lane].sending() {
                self.wake(lane);
            }
        }
    }
}

mod receive;
#[cfg(test)]
mod tests;
