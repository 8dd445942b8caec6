//! A [`Request`] as HTTP/3 sends it: a HEADERS frame and, with a body, a
//! DATA frame, both encoded once.
//!
//! The fields are those HTTP/2 would send (the same pseudo-headers, names
//! lower-cased, connection-specific fields dropped, the same checks); only
//! the header block differs: QPACK with the static table and literals,
//! which depends on no connection's state (see [`super::qpack`]).

use super::frame;
use super::qpack;
use crate::request::Request;
use crate::sample::{ErrorDetail, ErrorKind, RequestError};

/// A request's frames, ready to write on a new stream.
#[derive(Clone, Debug, Default)]
pub struct H3Request {
    /// The HEADERS frame, header included, then the DATA frame's header
    /// when there is a body.
    pub head: Vec<u8>,
    pub body: Vec<u8>,
    /// A HEAD request's response has no body.
    pub is_head: bool,
    /// The field section while it is encoded (kept for its allocation).
    block: Vec<u8>,
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
        self.body.clear();
        self.body.extend_from_slice(request.body);
        self.is_head = request.is_head();
        Ok(())
    }

    /// All the bytes the stream carries: head, then body.
    pub fn stream_len(&self) -> usize {
        self.head.len() + self.body.len()
    }

    /// The bytes from `offset` on, up to the end of the part they are in.
    pub fn from(&self, offset: usize) -> &[u8] {
        match offset.checked_sub(self.head.len()) {
            None => &self.head[offset..],
            Some(in_body) => &self.body[in_body..],
        }
    }
}
