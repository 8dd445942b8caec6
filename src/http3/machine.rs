//! One HTTP/3 connection's state machine, with no socket and no clock of
//! its own: quinn-proto's QUIC connection, the request streams its lanes
//! run on it, the server's control stream (SETTINGS, GOAWAY), a 0-RTT
//! handshake the server refused, and what the connection's end means for
//! each stream. Datagrams come in through [`Machine::receive`] and go out
//! through quinn-proto's `poll_transmit`; its timers run when
//! [`Machine::on_timers`] is called. [`super::conn`] owns the socket and
//! the sleep, and hands the connection between lanes, so every sequence of
//! what a server may send is testable here without either (see the tests).

mod loss;
mod stream;
#[cfg(test)]
mod tests;

use super::frame::{self, FrameReader, Piece};
use super::request::H3Request;
use crate::http2::{Failure, Finished, Tally};
use crate::response::{Capture, ResponseHead};
use crate::sample::{ErrorDetail, ErrorKind, RequestError};
use bytes::BytesMut;
use loss::{describe_loss, error_name};
use quinn_proto::{
    ClientConfig, ConnectionHandle, DatagramEvent, Dir, EcnCodepoint, Endpoint, EndpointConfig, Event,
    ReadError, StreamEvent, StreamId, VarInt, WriteError,
};
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::task::Waker;
use std::time::Instant;
pub use stream::feed_response_stream;
use stream::{LaneState, PeerStream, on_response_bytes};

/// The largest response field section volley accepts, advertised as
/// SETTINGS_MAX_FIELD_SECTION_SIZE (as HTTP/2's header list limit).
pub const MAX_FIELD_SECTION: usize = 256 * 1024;

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

/// What a lane's new stream found (see [`Machine::open_stream`]).
pub enum Opened {
    /// The stream is open and its request written as far as it goes.
    Started,
    /// The server's stream limit is reached: the lane waits for credit
    /// (its waker is kept to be woken when it comes).
    Full,
    /// The connection takes no more streams: the lane goes to another.
    Closed,
}

/// One HTTP/3 connection's state (see the module's doc).
pub struct Machine {
    pub(super) endpoint: Endpoint,
    pub(super) handle: ConnectionHandle,
    pub(super) quic: quinn_proto::Connection,
    /// For stateless answers the endpoint would send (a client has none
    /// to send, but the call needs the room).
    spare: Vec<u8>,
    pub(super) lanes: Vec<LaneState>,
    /// The control stream's preface still to write.
    control: Option<(StreamId, Vec<u8>, usize)>,
    peers: Vec<PeerStream>,
    /// A GOAWAY's limit: streams from this id on were not processed.
    pub(super) goaway: Option<u64>,
    pub(super) connected: bool,
    /// When the first datagram was made, for the handshake's time.
    began: Instant,
    /// The handshake checked the server's certificate: a full one, not a
    /// resumption (see `tls/observed.rs`).
    certificate_checked: bool,
    /// Streams may start before the handshake is done (0-RTT).
    pub(super) early: bool,
    /// With `early`, when the handshake must be done (the connect timeout,
    /// which the error names).
    pub(super) early_deadline: Option<(Instant, std::time::Duration)>,
    /// The finished handshake, until a lane records it.
    pub(super) handshake: Option<Handshake>,
    /// Why the certificate verifier refused the server, if it did.
    refused: Option<rustls::Error>,
    pub(super) dead: bool,
    /// Why the connection died, as a message for every stream it failed.
    pub(super) death: Option<(ErrorKind, String)>,
    pub(super) closing: bool,
    pub(super) capacity_waiters: Vec<Waker>,
    /// Scratch for field names and values.
    name: Vec<u8>,
    value: Vec<u8>,
}

impl Machine {
    /// A new client connection to `addr` (as `server_name`) for `lanes`
    /// lanes, its first datagram made at `now`; `may_fragment` says
    /// whether the path may fragment datagrams (then QUIC's own path MTU
    /// discovery is off).
    pub fn connect(
        now: Instant,
        config: ClientConfig,
        addr: SocketAddr,
        server_name: &str,
        lanes: usize,
        may_fragment: bool,
    ) -> Result<Machine, RequestError> {
        let mut endpoint = Endpoint::new(Arc::new(EndpointConfig::default()), None, !may_fragment, None);
        let (handle, quic) = endpoint.connect(now, config, addr, server_name).map_err(|err| {
            RequestError::new(ErrorKind::Connect, ErrorDetail::Text(format!("QUIC: {err}")))
        })?;
        Ok(Machine {
            endpoint,
            handle,
            quic,
            spare: Vec::new(),
            lanes: (0..lanes).map(|_| LaneState::default()).collect(),
            control: None,
            peers: Vec::new(),
            goaway: None,
            connected: false,
            began: now,
            certificate_checked: false,
            early: false,
            early_deadline: None,
            handshake: None,
            refused: None,
            dead: false,
            death: None,
            closing: false,
            capacity_waiters: Vec::new(),
            name: Vec::new(),
            value: Vec::new(),
        })
    }

    /// Whether a new stream may start here.
    pub fn accepts_streams(&self) -> bool {
        !self.dead && !self.closing && self.goaway.is_none()
    }

    /// Opens lane `lane`'s stream and writes what QUIC takes of its
    /// `request`, with the `capture` a plan lent it; `waker` is kept to be
    /// woken when the stream's credit comes, if it has none yet.
    pub fn open_stream(
        &mut self,
        lane: usize,
        request: &H3Request,
        capture: &mut Option<Capture>,
        waker: &Waker,
    ) -> Opened {
        if !self.accepts_streams() {
            return Opened::Closed;
        }
        let Some(id) = self.quic.streams().open(Dir::Bi) else {
            self.capacity_waiters.push(waker.clone());
            self.lanes[lane].waker = Some(waker.clone());
            return Opened::Full;
        };
        let state = &mut self.lanes[lane];
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
        self.send_request(lane, request);
        Opened::Started
    }

    /// Whether lane `lane`'s stream has finished (see [`Self::finish`]).
    pub fn finished(&self, lane: usize) -> bool {
        self.lanes[lane].result.is_some()
    }

    /// Keeps `waker` to be woken when lane `lane`'s stream moves on.
    pub fn wait(&mut self, lane: usize, waker: &Waker) {
        crate::wake::keep_waker(&mut self.lanes[lane].waker, waker);
    }

    /// Lane `lane` gave up on its stream (a timeout, or the run ended):
    /// the server is told, and later data for it is ignored. Whether there
    /// was a stream to give up.
    pub fn cancel(&mut self, lane: usize) -> bool {
        let state = &mut self.lanes[lane];
        let Some(id) = state.id.filter(|_| state.result.is_none()) else {
            return false;
        };
        state.result = Some(Err(Failure::Error(RequestError::protocol("cancelled"))));
        let code = VarInt::from_u64(frame::H3_REQUEST_CANCELLED).expect("a small code");
        let _ = self.quic.send_stream(id).reset(code);
        let _ = self.quic.recv_stream(id).stop(code);
        self.lanes[lane].id = None;
        // A stream that timed out says the server may be gone (QUIC hears
        // of a crashed server only at the idle timeout): new streams go on
        // a new connection, while this one's finish here.
        self.closing = true;
        true
    }

    /// Where a batch of received datagrams starts: what the handshake's
    /// check of the certificate had counted before (see [`Self::received`]).
    pub fn receiving(&self) -> Option<u64> {
        (!self.connected).then(crate::tls::verifications)
    }

    /// Takes in one datagram from the server, received at `now`.
    ///
    /// The handshake runs inside `handle_event`, on this thread, for this
    /// connection alone: a certificate checked meanwhile was this
    /// connection's, and why it was refused is picked up here (quinn-proto
    /// keeps only its text).
    pub fn receive(&mut self, now: Instant, ecn: Option<EcnCodepoint>, data: BytesMut) {
        let server = self.quic.remote_address();
        let handshaking = !self.connected;
        if let Some(DatagramEvent::ConnectionEvent(_, event)) =
            self.endpoint
                .handle(now, server, None, ecn, data, &mut self.spare)
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

    /// After a batch of datagrams (begun where [`Self::receiving`] said):
    /// handles what they brought.
    pub fn received(&mut self, checked: Option<u64>) {
        if checked.is_some_and(|before| crate::tls::verifications() != before) {
            self.certificate_checked = true;
        }
        self.process_events();
    }

    /// Runs the timers due at `now` (quinn-proto's, and the end of an
    /// early connection's handshake time); whether one was.
    pub fn on_timers(&mut self, now: Instant) -> bool {
        let mut fired = false;
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
        fired
    }

    /// Closes the connection cleanly (its last datagrams still to be
    /// sent), where it has not died.
    pub fn close(&mut self, now: Instant) {
        if !self.dead {
            let code = VarInt::from_u64(frame::H3_NO_ERROR).expect("a small code");
            self.quic.close(now, code, bytes::Bytes::new());
        }
    }

    /// Whether a lane's stream is open.
    pub fn any_open(&self) -> bool {
        self.lanes.iter().any(LaneState::open)
    }

    /// A waker of a lane whose stream is open, or of one waiting for a
    /// stream's credit; `driver`'s first.
    pub fn a_waiting_waker(&self, driver: Option<usize>) -> Option<&Waker> {
        let driver = driver.and_then(|d| self.lanes[d].waker.as_ref());
        driver
            .or_else(|| {
                self.lanes
                    .iter()
                    .filter(|l| l.open())
                    .find_map(|l| l.waker.as_ref())
            })
            .or_else(|| self.capacity_waiters.first())
    }

    /// With `--coalesce`: the streams' state as [`crate::http2::Rounds`]
    /// counts it, and whether nothing may wait (see `conn`'s `hold`).
    pub fn tally(&self) -> (Tally, bool) {
        let arriving = self.lanes.iter().any(|l| l.open() && l.bytes > 0);
        let urgent = self.dead || !self.connected || arriving || !self.capacity_waiters.is_empty();
        let tally = Tally::of(self.lanes.iter().map(|l| (l.id.is_some(), l.open(), l.sent_at)));
        (tally, urgent)
    }

    /// The streams' send stamps, for `--coalesce`'s rounds.
    pub fn sent_stamps(&mut self) -> impl Iterator<Item = &mut Option<Instant>> {
        self.lanes
            .iter_mut()
            .filter(|l| l.id.is_some())
            .map(|l| &mut l.sent_at)
    }

    /// Hands the lane's finished stream back and frees its place.
    pub fn finish(&mut self, lane: usize) -> Finished {
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
        (result.map(|()| head), capture)
    }

    /// Writes what the QUIC connection will take of the lane's request,
    /// and finishes the stream once it is all in.
    pub fn send_request(&mut self, lane: usize, request: &H3Request) {
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

    /// When the driver must wake next: quinn-proto's next timer, or the end
    /// of an early (0-RTT) connection's handshake time.
    pub fn next_timer(&mut self) -> Option<Instant> {
        let quic = self.quic.poll_timeout();
        match self.early_deadline {
            Some((by, _)) => Some(quic.map_or(by, |at| at.min(by))),
            None => quic,
        }
    }

    /// Why a handshake not done by its deadline failed: the server sent
    /// handshake messages but never finished (TLS stalled, as it can over
    /// TCP), or it never answered (a connect error, as a silent port is).
    pub fn handshake_timeout(&self, timeout: std::time::Duration) -> RequestError {
        if self.quic.stats().frame_rx.crypto > 0 {
            RequestError::new(ErrorKind::Tls, ErrorDetail::HandshakeTimeout(timeout))
        } else {
            RequestError::new(ErrorKind::Connect, ErrorDetail::ConnectTimeout(timeout))
        }
    }

    /// The connection's socket failed (a refused port shows up here):
    /// the connection is over.
    pub fn transport_failed(&mut self, err: io::Error) {
        let kind = match self.connected {
            false => ErrorKind::Connect,
            true => RequestError::from_io(io::Error::from(err.kind())).kind,
        };
        self.die(kind, err.to_string());
    }

    /// Ends the connection: every open stream fails with `message`.
    pub fn die(&mut self, kind: ErrorKind, message: String) {
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
    pub fn close_with(&mut self, code: u64, why: &'static str) {
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
