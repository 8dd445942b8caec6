//! volley: an HTTP load tester.
//!
//! The data flows one way (see `shared/architecture.md`): CLI flags are
//! resolved into a plan, the engine runs it on per-thread workers, and the
//! report is rendered from one `Report` value.

pub mod server;
