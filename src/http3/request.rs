//! A [`Request`] as HTTP/3 sends it: a HEADERS frame and, with a body, a
//! DATA frame, both encoded once and shared by every stream that sends
//! them.
//!
//! The fields are those HTTP/2 would send (the same pseudo-headers, names
//! lower-cased, connection-specific fields dropped, the same checks); only
//! the header block differs: QPACK with the static table and literals,
//! which depends on no connection's state (see [`super::qpack`]).

use super::frame;
use super::qpack;
use crate::request::Request;
use crate::sample::{ErrorDetail, ErrorKind, RequestError};
use bytes::{Bytes, BytesMut};

/// A request's frames, ready to write on a new stream.
#[derive(Clone, Debug, Default)]
pub struct H3Request {
    /// All the bytes the stream carries: the HEADERS frame, then with a
    /// body the DATA frame. `Bytes`, so that each stream is handed a
    /// reference to them (quinn-proto keeps what it is given until it is
    /// acknowledged) rather than a copy of its own.
    stream: Bytes,
    /// A HEAD request's response has no body.
    pub is_head: bool,
    /// The field section and the frames while they are encoded (kept for
    /// their allocations; `frames` is taken back once quinn-proto has let
    /// go of the last request encoded in it).
    block: Vec<u8>,
    head: Vec<u8>,
    frames: BytesMut,
}

impl H3Request {
    /// The run's one request, encoded once before the run.
    pub fn new(request: &Request) -> Result<H3Request, RequestError> {
        let mut encoded = H3Request::default();
        encoded.encode(request)?;
        Ok(encoded)
    }

    /// Encodes `request` into this one, reusing its buffers (a plan's
    /// request, for each send).
    pub fn encode(&mut self, request: &Request) -> Result<(), RequestError> {
        let mut block = std::mem::take(&mut self.block);
        block.clear();
        qpack::start_section(&mut block);
        crate::http2::each_field(request, |name, value| {
            let lower;
            let name = if name.iter().any(u8::is_ascii_uppercase) {
                lower = name.to_ascii_lowercase();
                &lower[..]
            } else {
                name
            };
            qpack::put_field(&mut block, name, value)
        })
        .map_err(|_| {
            RequestError::new(
                ErrorKind::Protocol,
                ErrorDetail::Static("request cannot be sent over HTTP/3"),
            )
        })?;
        self.head.clear();
        frame::put_header(&mut self.head, frame::HEADERS, block.len());
        self.head.extend_from_slice(&block);
        self.block = block;
        if !request.body.is_empty() {
            frame::put_header(&mut self.head, frame::DATA, request.body.len());
        }
        // The last request's bytes are let go of first, so that `frames`
        // is the only one left holding them when quinn-proto has too.
        self.stream = Bytes::new();
        self.frames.clear();
        self.frames.extend_from_slice(&self.head);
        self.frames.extend_from_slice(request.body);
        self.stream = self.frames.split().freeze();
        self.is_head = request.is_head();
        Ok(())
    }

    /// All the bytes the stream carries.
    pub fn stream_len(&self) -> usize {
        self.stream.len()
    }

    /// The bytes from `offset` on: a reference to them, not a copy.
    pub fn from(&self, offset: usize) -> Bytes {
        self.stream.slice(offset..)
    }
}
