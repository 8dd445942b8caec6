//! The lean HTTP/1.1 client path.
//!
//! Written by hand rather than on hyper's client because the engine's rule is
//! no heap allocation per request (ARCHITECTURE.md): hyper
//! builds a `Request`, a `HeaderMap` and boxed body frames for every exchange,
//! while a load generator sends the same bytes again and again. Here the
//! request is serialised once before the run ([`request`]) and responses are
//! parsed in place from a reused buffer with httparse ([`response`]); the
//! buffer keeps any bytes past one response, so pipelining needs no copy.

pub mod body;
pub mod head;
mod parse;
pub mod request;
pub mod response;

pub use request::RequestBytes;
pub use response::ResponseReader;
