//! volley's own HTTP/2 client driver (RFC 9113), used by the one request
//! loop in place of the HTTP/1.1 reader when a run speaks HTTP/2.
//!
//! Written by hand for the same reason as the HTTP/1.1 path: a load
//! generator's cost per request is the product. Clients built on the `h2`
//! crate run a connection task beside the request tasks, hop over channels
//! and allocate header maps per request, and land at about half of h2load's
//! rate (oha's issue #538). Here each connection's frames are read by
//! whichever of its streams is waiting, in place, into reused buffers;
//! requests are HPACK-encoded once before the run; several streams' frames
//! go out in one write.
//!
//! Layout: `frame` reads and writes frame headers and control frames;
//! `request` encodes a [`crate::request::Request`] as a header block;
//! `hpack` decodes response header blocks;
//! `machine` is one connection's frame state machine (bytes in, finished
//! streams and frames to send out, no socket); `conn` is its socket and the
//! hand-off of that socket between the lanes; `outbox` holds the worker's
//! connections with frames to write; `group` shares connections among the
//! request loops of a worker (HTTP/3's too), with the lanes' round trip,
//! and `home` is HTTP/2's side of it; `outcome` is how a stream ended.

pub(crate) mod conn;
mod frame;
mod group;
mod home;
pub(crate) mod hpack;
mod machine;
mod outbox;
mod outcome;
mod request;

pub use group::{Dial, Group, Lane, Multiplexed, Open, Streams};
pub use home::{H2Lane, Home, StartAtOnce, Started};
pub use outbox::{Outbox, Pending, Rounds, Seat, Tally, WriteOut};
pub use outcome::{Failure, Finished};
pub use request::H2Request;
pub(crate) use request::{each_field, integer};
