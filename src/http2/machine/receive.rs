//! What the server's frames do to the [`Machine`]: each frame read, checked
//! and applied to its stream or to the connection (RFC 9113 section 6).

use super::{Failure, MAX_HEADER_LIST, MAX_PENDING_ACKS, Machine, REFILL_AT, Table};
use crate::http2::frame::{self, FrameHead};
use crate::sample::{ErrorDetail, ErrorKind, RequestError};

impl Machine {
    /// Handles every complete frame at the start of `bytes` (what the server
    /// sent), counting what it used in `consumed` (also when a frame fails:
    /// what follows a connection error is never read). `reading` is the
    /// lane doing the read: the streams it finishes for other lanes wake
    /// them, its own needs no wake.
    pub fn receive(
        &mut self,
        bytes: &[u8],
        consumed: &mut usize,
        reading: usize,
    ) -> Result<(), RequestError> {
        self.reading = reading;
        loop {
            let available = &bytes[*consumed..];
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
            *consumed += frame::HEAD_LEN + head.len;
            self.handle(head, payload)?;
        }
    }

    /// The open lane whose stream is `id`.
    fn lane_of(&self, id: u32) -> Option<usize> {
        self.lanes.iter().position(|l| l.id == id && l.result.is_none())
    }

    fn handle(&mut self, head: FrameHead, payload: &[u8]) -> Result<(), RequestError> {
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
            frame::DATA => self.on_data(head, payload, lane),
            frame::HEADERS => {
                if head.stream == 0 {
                    return Err(RequestError::protocol("HTTP/2 HEADERS frame on stream 0"));
                }
                let fragment = frame::unpad(payload, head.flags, true)
                    .ok_or_else(|| RequestError::protocol("HTTP/2 HEADERS padding longer than the frame"))?;
                let end_stream = head.flags & frame::END_STREAM != 0;
                if head.flags & frame::END_HEADERS != 0 {
                    self.on_header_block(fragment, lane, end_stream)
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
                let result = self.on_header_block(&block, lane, end_stream);
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
                    self.complete(lane, Err(failure));
                }
                Ok(())
            }
            frame::SETTINGS => self.on_settings(head, payload),
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
                        self.complete(lane, Err(Failure::Refused));
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
                        self.complete(lane, Err(Failure::Error(RequestError::protocol(what))));
                        frame::put_rst_stream(&mut self.wbuf, head.stream, frame::PROTOCOL_ERROR);
                    }
                }
                self.wake_senders();
                Ok(())
            }
            frame::PUSH_PROMISE => Err(RequestError::protocol(
                "HTTP/2 server push arrived though volley disabled it",
            )),
            _ => Ok(()), // PRIORITY and unknown frame types are ignored
        }
    }

    fn on_data(&mut self, head: FrameHead, payload: &[u8], lane: Option<usize>) -> Result<(), RequestError> {
        if head.stream == 0 {
            return Err(RequestError::protocol("HTTP/2 DATA frame on stream 0"));
        }
        // Flow control counts whole frames, also those of cancelled streams.
        self.recv_unacked += head.len as u32;
        if self.recv_unacked >= REFILL_AT {
            frame::put_window_update(&mut self.wbuf, 0, self.recv_unacked);
            self.recv_unacked = 0;
            self.window_due = true;
        }
        let data = frame::unpad(payload, head.flags, false)
            .ok_or_else(|| RequestError::protocol("HTTP/2 DATA padding longer than the frame"))?;
        let Some(lane) = lane else { return Ok(()) };
        let state = &mut self.lanes[lane];
        state.recv_unacked += head.len as u32;
        if state.recv_unacked >= REFILL_AT {
            frame::put_window_update(&mut self.wbuf, state.id, state.recv_unacked);
            state.recv_unacked = 0;
            self.window_due = true;
        }
        if let Some(capture) = state.capture.as_mut().filter(|c| c.full) {
            capture.keep_body(data);
        }
        if head.flags & frame::END_STREAM != 0 {
            self.complete(lane, Ok(()));
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
    ) -> Result<(), RequestError> {
        let mut status = None;
        let mut capture = lane.and_then(|l| self.lanes[l].capture.as_mut());
        // Set-Cookie is kept from every response a plan reads, the rest only
        // for captured ones; neither when nobody captures.
        let wanted = capture.is_some();
        // The connection's first response is decoded whole, once, for an
        // `Alt-Svc` that offers HTTP/3 (`-v` notes it).
        let look = !self.alt_svc_looked && lane.is_some();
        self.alt_svc_looked |= look;
        let mut h3_offer = None;
        // The header list size (RFC 9113 section 6.5.2) of what is kept; a
        // server past the limit volley advertised is not copied further.
        let mut listed = 0usize;
        self.decoder
            .decode(block, wanted || look, |name, value| {
                if look && name == b"alt-svc" {
                    h3_offer = h3_offer.or_else(|| crate::response::h3_offer(value));
                }
                // Only what is kept counts, as when only `:status` is
                // decoded.
                if !wanted && name != b":status" {
                    return;
                }
                listed += name.len() + value.len() + 32;
                if listed > MAX_HEADER_LIST {
                    return;
                }
                if name == b":status" {
                    // Three digits, as in HTTP/1.1; anything else is
                    // treated as a missing status.
                    status = match *value {
                        [a, b, c] if value.iter().all(u8::is_ascii_digit) => {
                            Some(u16::from(a - b'0') * 100 + u16::from(b - b'0') * 10 + u16::from(c - b'0'))
                        }
                        _ => None,
                    };
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
        state.h3_offer = state.h3_offer.or(h3_offer);
        match status {
            // RFC 9113 section 8.6: HTTP/2 has no 101 (Switching Protocols).
            Some(101) => {
                let err =
                    RequestError::protocol("HTTP/2 response with status 101, which HTTP/2 does not allow");
                self.complete(lane, Err(Failure::Error(err)));
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
                self.complete(lane, Err(Failure::Error(err)));
                return Ok(());
            }
            Some(_) => {}
            None if state.status == 0 => {
                let err = RequestError::protocol("HTTP/2 response without a :status");
                self.complete(lane, Err(Failure::Error(err)));
                return Ok(());
            }
            None => {} // trailers
        }
        if end_stream {
            self.complete(lane, Ok(()));
        }
        Ok(())
    }

    fn on_settings(&mut self, head: FrameHead, payload: &[u8]) -> Result<(), RequestError> {
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
                    if (value as usize) < crate::http2::hpack::TABLE_SIZE
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
                    self.wake_senders();
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
}
