//! volley: an HTTP load tester.
//!
//! The data flows one way (see `ARCHITECTURE.md`): CLI flags are
//! resolved into a [`plan::Plan`], the [`engine`] runs it on per-thread
//! workers, each worker records [`sample::Sample`]s into its own
//! [`recorder::Recorder`], snapshots are merged by the [`collector`], and the
//! [`report`] is rendered from one `Report` value.

pub mod cli;
pub mod collector;
pub mod command;
pub mod compare;
pub mod demo;
pub mod engine;
pub mod error;
pub mod follow;
#[doc(hidden)]
pub mod fuzzing;
pub mod histogram;
pub mod http1;
pub mod http2;
pub mod http3;
pub mod import;
pub mod k8s;
pub mod merge;
pub mod monitor;
pub mod net;
pub mod plan;
pub mod recorder;
pub mod report;
pub mod request;
pub mod response;
pub mod run;
pub mod sample;
pub mod scenario;
pub mod script;
pub mod server;
pub mod shape;
/// `--shard` is part of the plan (a plan split by value); kept at its old path.
pub use plan::shard;
pub mod sink;
pub mod slo;
pub mod step;
pub mod sys;
pub mod target;
pub mod thresholds;
pub mod tls;
pub mod vu;
pub mod wake;
