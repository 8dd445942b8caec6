//! How a stream on a shared connection ended, HTTP/2's and HTTP/3's alike:
//! the one vocabulary their state machines hand the lanes, so that the
//! lanes' round trip (see [`super::group`]) is written once for both.

use crate::response::{Capture, ResponseHead};
use crate::sample::RequestError;

/// Why a stream ended without a response.
#[derive(Debug)]
pub enum Failure {
    /// The server did not process it (HTTP/2's REFUSED_STREAM, HTTP/3's
    /// H3_REQUEST_REJECTED, or above a GOAWAY's limit): safe to send
    /// again.
    Refused,
    Error(RequestError),
}

/// A finished stream: its outcome and the capture it was lent.
pub type Finished = (Result<ResponseHead, Failure>, Option<Capture>);
