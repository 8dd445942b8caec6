//! One request stream's state on an HTTP/3 connection, and how the bytes
//! of a response stream are read: frames in order, the field section
//! decoded when whole, body bytes counted (and kept for a plan). Also the
//! state of a stream the server opened (its control stream). No QUIC
//! here: [`super::Machine`] reads the streams and hands their bytes on.

use super::MAX_FIELD_SECTION;
use crate::http2::Failure;
use crate::http3::frame::{self, FrameReader, Piece};
use crate::http3::qpack;
use crate::response::Capture;
use crate::sample::{ErrorDetail, ErrorKind, RequestError};
use quinn_proto::StreamId;
use std::task::Waker;
use std::time::Instant;

#[derive(Default)]
pub struct LaneState {
    pub id: Option<StreamId>,
    /// Bytes of the request written into the stream.
    pub sent: usize,
    /// The request is all written and the stream finished.
    pub send_done: bool,
    pub reader: FrameReader,
    /// A HEADERS frame's field section, gathered until whole.
    pub block: Vec<u8>,
    /// The final status; 0 until it came.
    pub status: u16,
    pub bytes: u64,
    pub result: Option<Result<(), Failure>>,
    pub waker: Option<Waker>,
    pub capture: Option<Capture>,
    /// `--coalesce`: when the stream's request began to go out; `None`
    /// while it waits to.
    pub sent_at: Option<Instant>,
}

impl LaneState {
    pub fn open(&self) -> bool {
        self.id.is_some() && self.result.is_none()
    }
}

/// A stream the server opened towards volley: its control stream, QPACK
/// streams (unused, as volley allows no dynamic table), or others.
pub struct PeerStream {
    pub id: StreamId,
    /// The stream's type, once its first bytes came.
    pub kind: Option<u64>,
    pub head: Vec<u8>,
    pub reader: FrameReader,
    /// A control frame's payload (SETTINGS, GOAWAY), gathered.
    pub payload: Vec<u8>,
}

/// Handles bytes of a response stream: frames in order, the field section
/// decoded when whole, body bytes counted (and kept for a plan).
pub fn on_response_bytes(
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
        capture.clear_headers();
        capture.set_cookies.clear();
    }
    Ok(())
}
