//! One integration test binary (faster to link than one per file): each
//! module drives the real code against the embedded target on 127.0.0.1:0.

mod compare;
mod credentials;
mod docs;
mod follow;
mod fuzz_inputs;
mod h3_hostile;
mod h3_interop;
mod h3_resume;
mod hostile;
mod hostile_h2;
mod html;
mod http2;
mod http3;
mod http3_parity;
mod import;
mod import_browser;
mod import_interop;
mod io;
mod k8s;
mod load;
mod metrics;
mod monitor;
mod otlp;
mod pacing;
mod plan;
mod plan_drill;
mod plan_list;
mod receivers;
mod run;
mod server;
mod server_h2;
mod shard;
mod support;
mod thresholds;
mod tls;
