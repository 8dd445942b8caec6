//! Raw command-line flags, exactly as clap parses them; no logic here.
//!
//! `plan::RunSpec::from_args` checks them into a typed spec and
//! `RunSpec::resolve` makes the plan, so the same checks apply whichever
//! way a plan is built.

use clap::{Args, Parser, Subcommand, ValueEnum};
use std::net::SocketAddr;
use std::path::PathBuf;

#[derive(Debug, Parser)]
#[command(
    name = "volley",
    version,
    about = "An HTTP load tester: as fast as wrk, with numbers you can trust"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

/// `volley plan -n`'s help: what it counts.
pub const PLAN_ITERATIONS_HELP: &str = "Stop after exactly this many measured iterations of the plan's flow, \
     each sending every item's requests (-n 40 with a 10-request flow sends 400 requests)";

/// `volley plan -R`'s help: iterations per second, not requests.
pub const PLAN_RATE_HELP: &str = "Open model: N iterations of the plan's flow per second in all, each due at a fixed \
     time; latency counts from that time. With --stages, give -R alone: the stages are then in iterations per second";

/// `volley script --vus`'s help.
pub const SCRIPT_VUS_HELP: &str = "Virtual users, each running the script's iterations one after another \
     (overrides options.vus) [default: 1]";

/// `volley script -n`'s help.
pub const SCRIPT_ITERATIONS_HELP: &str = "Stop after exactly this many iterations, shared by all VUs \
     (overrides options.iterations) [default: 1 unless a duration is given]";

/// `volley script -R`'s help.
pub const SCRIPT_RATE_HELP: &str = "Open model: N iterations per second in all, each due at a fixed time and \
     started on a free VU; the first request's latency counts from that time";

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Load one or more URLs, one after another, and report.
    Run(Box<RunArgs>),
    /// Run the embedded target server (test and fault endpoints).
    Serve(ServeArgs),
    /// Run a plan file (drill's benchmark YAML): flows with per-step statistics.
    // A plan counts iterations of its flow (each sends every item's
    // requests), where `volley run` counts requests: the shared flags say so.
    #[command(
        mut_arg("requests", |a| a.help(PLAN_ITERATIONS_HELP)),
        mut_arg("rate", |a| a.help(PLAN_RATE_HELP))
    )]
    Plan(Box<PlanArgs>),
    /// Run virtual users written in Lua (k6's names: options, setup, default,
    /// teardown, http.get, check, group, sleep) against the URL's origin.
    #[command(
        mut_arg("connections", |a| a.visible_alias("vus").help(SCRIPT_VUS_HELP)),
        mut_arg("requests", |a| a.visible_alias("iterations").help(SCRIPT_ITERATIONS_HELP)),
        mut_arg("rate", |a| a.help(SCRIPT_RATE_HELP))
    )]
    Script(Box<ScriptArgs>),
    /// Render a saved JSON report as HTML.
    Report(ReportArgs),
    /// Compare two saved JSON reports: changes and whether they are significant.
    Compare(CompareArgs),
    /// Step through levels of load and report the knee: the five criteria.
    Step(Box<StepArgs>),
    /// Start the embedded server and run a short load test against it.
    Demo(DemoArgs),
    /// Merge the JSON reports of a sharded run (--shard I/N) into one report.
    Merge(MergeArgs),
    /// Run sharded on Kubernetes as an Indexed Job, through kubectl.
    #[command(subcommand)]
    K8s(K8sCommand),
    /// Write a plan file from what you have: a browser's HAR recording, an
    /// OpenAPI description, curl command lines or a Postman collection.
    Import(Box<ImportArgs>),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions(CompletionsArgs),
    /// Write a man page per command into a directory (for packagers).
    #[command(hide = true)]
    Man(ManArgs),
}

#[derive(Debug, Clone, Args)]
pub struct CompletionsArgs {
    /// The shell: bash, zsh, fish, elvish or powershell. For bash:
    /// `volley completions bash > ~/.local/share/bash-completion/completions/volley`.
    #[arg(value_name = "SHELL")]
    pub shell: clap_complete::Shell,
}

#[derive(Debug, Clone, Args)]
pub struct ManArgs {
    /// The directory to write volley.1, volley-run.1, ... into (made if missing).
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
}

/// How the workers wait on their sockets (`--io`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum IoChoice {
    /// io_uring where the kernel and the sandbox allow it, epoll otherwise.
    Auto,
    /// io_uring (still epoll, with a note, where it is refused).
    Uring,
    /// epoll readiness, as tokio drives it.
    Epoll,
}

/// What `volley import` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ImportKind {
    /// A HAR 1.2 file, as browsers' devtools export a session.
    Har,
    /// An OpenAPI 3.0 or 3.1 description (or Swagger 2.0), YAML or JSON.
    Openapi,
    /// curl command lines, as browsers' "Copy as cURL" writes them.
    Curl,
    /// A Postman collection (v2.1 or v2.0).
    Postman,
}

#[derive(Debug, Clone, Args)]
pub struct ImportArgs {
    /// What FILE holds.
    #[arg(value_enum, value_name = "KIND")]
    pub kind: ImportKind,
    /// The file to read; - reads standard input.
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// Write the plan to this file, long or binary bodies in files beside
    /// it [default: standard output, every body inline].
    #[arg(short = 'o', long, value_name = "PLAN.yml")]
    pub output: Option<PathBuf>,
    /// The base URL to write instead of the one the input gives.
    #[arg(long, value_name = "URL")]
    pub base: Option<String>,
    /// Write credentials (Authorization, API keys, tokens, cookies) as
    /// recorded, instead of as environment variables the plan reads.
    #[arg(long)]
    pub keep_secrets: bool,
    /// HAR: also keep the requests to this origin (repeatable), written as
    /// a plan of their own beside the main one (a plan runs against one origin).
    #[arg(long, value_name = "ORIGIN", help_heading = "HAR")]
    pub include_origin: Vec<String>,
    /// HAR: keep requests for images, fonts, stylesheets and scripts.
    #[arg(long, help_heading = "HAR")]
    pub include_assets: bool,
    /// HAR: send the recorded Cookie headers, instead of leaving cookies
    /// to volley's cookie jar (their values read from the environment,
    /// unless --keep-secrets).
    #[arg(long, help_heading = "HAR")]
    pub keep_cookies: bool,
    /// HAR: pause between pages as the recording did (delay items).
    #[arg(long, help_heading = "HAR")]
    pub think_time: bool,
    /// OpenAPI: only the operations with one of these tags.
    #[arg(long, value_delimiter = ',', value_name = "TAGS", help_heading = "OpenAPI")]
    pub tags: Vec<String>,
    /// OpenAPI: only these operations (operationId; repeatable or comma-separated).
    #[arg(long, value_delimiter = ',', value_name = "ID", help_heading = "OpenAPI")]
    pub operation: Vec<String>,
    /// Postman: an environment file whose variables fill the collection's.
    #[arg(long, value_name = "FILE", help_heading = "Postman")]
    pub env: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum K8sCommand {
    /// Print the manifests (ConfigMap with the plan file, Indexed Job).
    Manifest(K8sManifestArgs),
    /// Apply, follow the pods live, collect each shard's report, merge,
    /// delete the Job.
    Run(Box<K8sRunArgs>),
}

#[derive(Debug, Clone, Args)]
pub struct K8sManifestArgs {
    /// How the manifests are printed: yaml, or json (one JSON document per
    /// object, `---` between them).
    #[arg(long, value_enum, default_value_t = ManifestFormat::Yaml, value_name = "FORMAT")]
    pub output: ManifestFormat,
    #[command(flatten)]
    pub job: K8sOptions,
}

/// The manifests' format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ManifestFormat {
    Yaml,
    Json,
}

#[derive(Debug, Clone, Args)]
pub struct K8sOptions {
    /// How many pods (shards) share the load.
    #[arg(long, value_name = "N")]
    pub shards: u32,
    /// The container image with volley in it (see the Dockerfile).
    #[arg(long, default_value = "volley:latest", value_name = "IMAGE")]
    pub image: String,
    /// The Job's name (and its ConfigMap's prefix).
    #[arg(long, default_value = "volley")]
    pub name: String,
    /// CPU each pod requests, e.g. 2 or 500m.
    #[arg(long, value_name = "CPU")]
    pub cpu: Option<String>,
    /// Memory each pod requests, e.g. 512Mi.
    #[arg(long, value_name = "MEMORY")]
    pub memory: Option<String>,
    /// The shards start this long after the manifests are made.
    #[arg(long, default_value = "30s", value_name = "DURATION")]
    pub start_lead: String,
    /// Another file for the plan's ConfigMap, mounted next to it (repeatable).
    #[arg(long, value_name = "FILE")]
    pub with: Vec<PathBuf>,
    /// The pods' command: `run URL... [flags]` or `plan FILE.yml [flags]`.
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "COMMAND"
    )]
    pub command: Vec<String>,
}

#[derive(Debug, Clone, Args)]
pub struct K8sRunArgs {
    /// Leave the Job (and its pods' logs) in the cluster.
    #[arg(long)]
    pub keep: bool,
    /// Give up when the shards have not all finished after this long.
    #[arg(long, default_value = "1h", value_name = "DURATION")]
    pub timeout: String,
    /// The kubectl to run (its context and namespace are used as set).
    #[arg(long, default_value = "kubectl", value_name = "PATH")]
    pub kubectl: String,
    /// Write the merged JSON report to this file.
    #[arg(short = 'o', long, value_name = "FILE.json")]
    pub output: Option<PathBuf>,
    /// Write the merged report as HTML to this file.
    #[arg(long, value_name = "FILE.html")]
    pub html: Option<PathBuf>,
    /// Print the merged JSON report on stdout instead of the text report.
    #[arg(long)]
    pub json: bool,
    /// A criterion checked on the merged run (repeatable); a failure exits 3.
    #[arg(long = "threshold", value_name = "CRITERION")]
    pub thresholds: Vec<String>,
    #[command(flatten)]
    pub live: LiveMergeArgs,
    #[command(flatten)]
    pub job: K8sOptions,
}

#[derive(Debug, Clone, Args)]
pub struct MergeArgs {
    /// The shards' JSON reports (volley run --shard I/N -o shard-I.json),
    /// or with --follow their streams (--stream shard-I.jsonl).
    #[arg(value_name = "REPORT.json", required = true)]
    pub reports: Vec<PathBuf>,
    /// Follow the shards' --stream files while they are written: show the
    /// merged run live, then merge their finished reports.
    #[arg(long)]
    pub follow: bool,
    #[command(flatten)]
    pub live: LiveMergeArgs,
    /// Write the merged JSON report to this file.
    #[arg(short = 'o', long, value_name = "FILE.json")]
    pub output: Option<PathBuf>,
    /// Write the merged report as HTML to this file.
    #[arg(long, value_name = "FILE.html")]
    pub html: Option<PathBuf>,
    /// Print the merged JSON report on stdout instead of the text report.
    #[arg(long)]
    pub json: bool,
    /// A criterion checked on the merged run, besides the plan's own
    /// (repeatable); any failure exits 3.
    #[arg(long = "threshold", value_name = "CRITERION")]
    pub thresholds: Vec<String>,
    /// Merge even when shards are missing (the report says which).
    #[arg(long)]
    pub partial: bool,
}

/// How a live merge (`merge --follow`, `k8s run`) waits for its shards.
#[derive(Debug, Clone, Args)]
pub struct LiveMergeArgs {
    /// Show an interval this long after its first shard sent it, as
    /// partial, if some shards still have not.
    #[arg(long, default_value = "2s", value_name = "DURATION")]
    pub grace: String,
    /// A shard silent this long is gone [default: 3 intervals plus the
    /// pause between URLs, at least 10s].
    #[arg(long, value_name = "DURATION")]
    pub gone_after: Option<String>,
    /// Serve the merged run live in a browser at ADDR (default
    /// 127.0.0.1:5665; give it as --dashboard=ADDR).
    #[arg(
        long,
        value_name = "ADDR",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "127.0.0.1:5665"
    )]
    pub dashboard: Option<std::net::SocketAddr>,
}

#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    /// URLs to load (http:// or https://; host:port/path is read as
    /// http://), run one after another.
    #[arg(value_name = "URL")]
    pub urls: Vec<String>,
    /// Concurrent connections (each has one request in flight) [default: 50].
    #[arg(short = 'c', long)]
    pub connections: Option<usize>,
    /// Open model: N requests per second in all, each due at a fixed time;
    /// latency counts from that time. With --stages, give -R alone: the
    /// stages are then in requests per second.
    #[arg(short = 'R', long, value_name = "N", num_args = 0..=1)]
    pub rate: Option<Option<f64>>,
    /// Ramp the load linearly to each target over each span, from 0:
    /// "10s:100,30s:100,10s:0" (connections, or req/s with -R). Sets the duration.
    #[arg(long, value_name = "STAGES")]
    pub stages: Option<String>,
    /// Open model: open more connections, up to N in all, when every
    /// connection is busy and a request is due (instead of queueing it).
    #[arg(long, value_name = "N")]
    pub max_connections: Option<usize>,
    /// Worker threads; connections are spread evenly over them (never more
    /// threads than connections) [default: the cores this process may use].
    #[arg(short = 't', long)]
    pub threads: Option<usize>,
    /// Stop after exactly this many measured requests (finished or failed).
    #[arg(short = 'n', long)]
    pub requests: Option<u64>,
    /// Stop after this long (10s, 2m); with -n, whichever comes first
    /// [default: 10s unless -n is given].
    #[arg(short = 'd', long)]
    pub duration: Option<String>,
    /// Warm-up before measuring, left out of every statistic and shown on
    /// its own line: a duration (2s) or a request count (500).
    #[arg(short = 'w', long)]
    pub warmup: Option<String>,
    /// Quiet between two URLs.
    #[arg(long, default_value = "0s")]
    pub delay: String,
    /// HTTP method.
    #[arg(short = 'm', long, default_value = "GET")]
    pub method: String,
    /// Request header, "Name: value" or name=value (repeatable).
    #[arg(short = 'H', long = "header", value_name = "HEADER")]
    pub headers: Vec<String>,
    /// Request body; @FILE reads it from FILE, as curl's -d does.
    #[arg(short = 'b', long, conflicts_with = "body_file")]
    pub body: Option<String>,
    /// Request body read from a file.
    #[arg(long, value_name = "PATH")]
    pub body_file: Option<PathBuf>,
    /// A wrk Lua script (its setup, init, delay, request, response and
    /// done), run as wrk runs it; its arguments follow `--`.
    #[arg(short = 's', long, value_name = "FILE.lua")]
    pub script: Option<PathBuf>,
    /// The script's arguments (after `--`), handed to its `init(args)`.
    #[arg(last = true, value_name = "ARGS")]
    pub script_args: Vec<String>,
    /// Expected statuses, e.g. 200,304, 2xx or 200-299; others count as
    /// `status` errors [default: any 2xx or 3xx].
    #[arg(long)]
    pub status: Option<String>,
    /// Per-request timeout.
    #[arg(long, default_value = "30s")]
    pub timeout: String,
    /// Timeout for opening a connection (and its TLS handshake).
    #[arg(long, default_value = "10s")]
    pub connect_timeout: String,
    /// Open connections to HOST:PORT instead of the URL's address; the Host
    /// header and the TLS server name stay the URL's.
    #[arg(long, value_name = "HOST:PORT")]
    pub connect_to: Option<String>,
    /// A new connection for every request (sends Connection: close).
    #[arg(long)]
    pub no_keepalive: bool,
    /// HTTP/1.1 pipelining: send N requests at once on each connection and
    /// read their responses in order (-n stays exact).
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub pipeline: u32,
    /// Skip TLS certificate verification.
    #[arg(long)]
    pub insecure: bool,
    /// Speak HTTP/2: over TLS (ALPN h2) on https URLs, cleartext with prior
    /// knowledge (h2c) on http URLs. Without --http2 or --http1.1, https
    /// negotiates by ALPN.
    #[arg(long, conflicts_with = "http1_1")]
    pub http2: bool,
    /// Speak HTTP/3 (QUIC, over UDP) to https URLs; never chosen without
    /// this flag, whatever a server's Alt-Svc says (with -v, a run whose
    /// responses offer h3 there ends with a note).
    #[arg(long, conflicts_with_all = ["http1_1", "http2"])]
    pub http3: bool,
    /// Speak HTTP/1.1 only, also where the server offers HTTP/2.
    #[arg(long = "http1.1")]
    pub http1_1: bool,
    /// How the workers wait on their sockets: io_uring (completions, fewer
    /// system calls) where the kernel allows it, epoll otherwise; auto
    /// keeps --http2 runs over TLS, in the open model or with --no-batch on
    /// epoll, cheaper there. A refused io_uring (an old kernel, a
    /// container's seccomp profile) falls back to epoll with a note; set
    /// VOLLEY_IO=epoll where a sandbox kills a process that asks for
    /// io_uring.
    #[arg(
        long,
        value_enum,
        default_value = "auto",
        env = "VOLLEY_IO",
        value_name = "BACKEND"
    )]
    pub io: IoChoice,
    /// On io_uring, read each response as soon as it is in. By default a
    /// worker running plain HTTP/1.1 (kept alive, not pipelined, no plan)
    /// or plain HTTP/2 (no plan), in the closed model, with 8 or more
    /// requests in flight on at most 1,024 connections per thread, waits in
    /// the kernel for a few responses at once (a quarter of its requests in
    /// flight, at most half its connections and 32) or 500 us, whichever
    /// comes first: fewer system calls and wake-ups per request. The wait
    /// is never counted in latency: each response is timed to when the
    /// kernel received it (its receive timestamp), not to when the worker
    /// read it, so neither is the time a response waits for a worker too
    /// busy to read it at once, which counts without batches.
    #[arg(long)]
    pub no_batch: bool,
    /// HTTP/2 streams in flight per connection: -c 10 --streams 100 keeps
    /// 1000 requests in flight over 10 connections.
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub streams: usize,
    /// With --streams over HTTP/2 or HTTP/3: each connection sends its
    /// streams' requests in rounds, one write each, once every stream has
    /// its next one queued: less CPU per request for volley and for the
    /// server. Each response is still read as it arrives, and its latency
    /// counts from that write. Closed model only (not with -R).
    #[arg(long)]
    pub coalesce: bool,
    /// Trust the CA certificates in this PEM file, besides the system's
    /// roots (enough on its own where the system has none); a server
    /// certificate that is one of them is trusted without a chain.
    #[arg(long, value_name = "FILE")]
    pub cacert: Option<PathBuf>,
    /// Client certificate (PEM, leaf first) for servers that ask for one;
    /// give --key too.
    #[arg(long, value_name = "FILE")]
    pub cert: Option<PathBuf>,
    /// The client certificate's private key (PEM: PKCS#8, PKCS#1 or SEC1).
    #[arg(long, value_name = "FILE")]
    pub key: Option<PathBuf>,
    /// The TLS server name to send and verify, instead of the URL's host
    /// (the Host header stays the URL's).
    #[arg(long, value_name = "NAME")]
    pub sni: Option<String>,
    /// A full TLS handshake on every new connection: no session resumption.
    #[arg(long)]
    pub no_tls_resume: bool,
    /// With --http3: a connection that resumes a session sends its first
    /// requests as 0-RTT early data, before its handshake is done (the
    /// server may refuse them, and they go again after it).
    #[arg(long = "0rtt")]
    pub zero_rtt: bool,
    /// Write the JSON report to this file.
    #[arg(short = 'o', long, value_name = "FILE.json")]
    pub output: Option<PathBuf>,
    /// Write a self-contained HTML report with charts to this file.
    #[arg(long, value_name = "FILE.html")]
    pub html: Option<PathBuf>,
    /// Serve live charts of the run in a browser at ADDR (default
    /// 127.0.0.1:5665; give it as --dashboard=ADDR); read-only, it stops
    /// with the run.
    #[arg(
        long,
        value_name = "ADDR",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "127.0.0.1:5665"
    )]
    pub dashboard: Option<std::net::SocketAddr>,
    /// Print the JSON report on stdout instead of the text report.
    #[arg(long)]
    pub json: bool,
    /// Write each finished interval as a JSON line to FILE (- for stdout),
    /// for `volley merge --follow` to add the shards up live (docs/follow.md).
    #[arg(long, value_name = "FILE|-")]
    pub stream: Option<String>,
    /// Send the metrics every interval to a receiver (repeatable):
    /// prometheus=URL (remote write, e.g. http://127.0.0.1:9090/api/v1/write)
    /// or otlp=URL (OTLP over HTTP, /v1/metrics).
    #[arg(long = "out", value_name = "KIND=URL")]
    pub outputs: Vec<String>,
    /// Serve the metrics for Prometheus to scrape at ADDR (/metrics).
    #[arg(long, value_name = "ADDR")]
    pub metrics_addr: Option<SocketAddr>,
    /// The `run` label of every exported series (generated when not given;
    /// give the shards of one run the same id).
    #[arg(long, value_name = "ID")]
    pub run_id: Option<String>,
    /// A label on every exported series, key=value (repeatable).
    #[arg(long = "tag", value_name = "KEY=VALUE")]
    pub metric_tags: Vec<String>,
    /// Print only the summary.
    #[arg(short = 'q', long, conflicts_with = "verbose")]
    pub quiet: bool,
    /// Print more detail (the resolved plan, every status code, all percentiles).
    #[arg(short = 'v', long)]
    pub verbose: bool,
    /// Sampling interval of the per-interval log and series.
    #[arg(long, default_value = "1s")]
    pub interval: String,
    /// Watch this process (the target) during the run: RSS, CPU, threads
    /// and open files every interval (Linux).
    #[arg(long, value_name = "PID", conflicts_with = "spawn")]
    pub monitor_pid: Option<u32>,
    /// Start the target with this shell command, wait until the URL
    /// answers, watch it, and stop it at the end.
    #[arg(long, value_name = "CMD")]
    pub spawn: Option<String>,
    /// Pass/fail criterion checked on the finished run (repeatable):
    /// "p99<200ms", "errors<1%", "rps>5000", "mean<50ms"; any failure exits 3.
    #[arg(long = "threshold", value_name = "CRITERION")]
    pub thresholds: Vec<String>,
    /// Stop the run as soon as its totals so far break a threshold.
    #[arg(long, requires = "thresholds")]
    pub abort_on_fail: bool,
    /// Response-time distribution thresholds, as in Gatling's report.
    #[arg(long, default_value = "800ms,1200ms")]
    pub buckets: String,
    /// Run slice I of N of the load (0 <= I < N): N shards together equal
    /// the unsharded run; combine their reports with `volley merge`.
    #[arg(long, value_name = "I/N")]
    pub shard: Option<String>,
    /// Start at this instant: RFC 3339 in UTC (2026-11-23T14:00:00Z) or
    /// +30s from now; the shards of one run share it.
    #[arg(long, value_name = "TIME")]
    pub start_at: Option<String>,
    /// With --start-at: a run that comes up later than this past its start
    /// time fails instead of running a misaligned slice.
    #[arg(long, default_value = "1s", value_name = "DURATION")]
    pub start_tolerance: String,
}

#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// Address to listen on; port 0 picks a free port and prints it.
    #[arg(long, default_value = "127.0.0.1:3000")]
    pub addr: SocketAddr,
    /// Handle at most N requests at once; later ones wait for a slot (a server with a known capacity).
    #[arg(long, value_name = "N")]
    pub max_inflight: Option<usize>,
    /// Serve HTTPS with a self-signed certificate for localhost, 127.0.0.1 and ::1; ALPN offers h2 and http/1.1.
    #[arg(long)]
    pub tls: bool,
    /// Write the --tls certificate (PEM) to FILE before serving, for clients to trust.
    #[arg(long, value_name = "FILE", requires = "tls")]
    pub cert_out: Option<PathBuf>,
    /// Serve HTTP/3 too, on the UDP port of the same number, with the --tls certificate; HTTP/1.1 and HTTP/2 responses advertise it (Alt-Svc).
    #[arg(long, requires = "tls")]
    pub http3: bool,
}

#[derive(Debug, Clone, Args)]
pub struct DemoArgs {
    /// Seconds of load per demo URL.
    #[arg(short = 'd', long, default_value = "2s")]
    pub duration: String,
}

#[derive(Debug, Clone, Args)]
pub struct StepArgs {
    /// Levels of load, lightest first: connections, or req/s with --rate-steps.
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    pub levels: Option<Vec<f64>>,
    /// Geometric levels instead of --levels: from this load...
    #[arg(long, requires = "to", conflicts_with = "levels")]
    pub from: Option<f64>,
    /// ...up to this one...
    #[arg(long, requires = "from")]
    pub to: Option<f64>,
    /// ...each this many times the last.
    #[arg(long, default_value_t = 1.5)]
    pub factor: f64,
    /// Levels are arrival rates (req/s, the open model) instead of connections.
    #[arg(long)]
    pub rate_steps: bool,
    /// How long each level runs.
    #[arg(long, default_value = "10s")]
    pub step_duration: String,
    /// Run each level for this many requests instead (with --plan: this many
    /// iterations of the plan's flow, each sending every item's requests), or
    /// the duration, whichever first.
    #[arg(long, value_name = "N")]
    pub step_requests: Option<u64>,
    /// Ramp up to each level over this long (part of the level's duration).
    #[arg(long, value_name = "DURATION")]
    pub step_ramp: Option<String>,
    /// Quiet between levels.
    #[arg(long, default_value = "0s")]
    pub cooldown: String,
    /// The objective that decides the maximum load.
    #[arg(long, default_value = "p99<500ms,errors<1%")]
    pub slo: String,
    /// Stop once a level's error rate passes this.
    #[arg(long, default_value = "50%", value_name = "PERCENT")]
    pub stop_errors: String,
    /// Step a plan file (levels of concurrency or iterations per second)
    /// instead of one URL.
    #[arg(long, value_name = "FILE.yml")]
    pub plan: Option<std::path::PathBuf>,
    /// Everything `volley run` takes (one URL; not -n, -d or --stages).
    #[command(flatten)]
    pub run: RunArgs,
}

#[derive(Debug, Clone, Args)]
pub struct PlanArgs {
    /// The plan file (drill's benchmark format).
    #[arg(value_name = "FILE.yml")]
    pub file: PathBuf,
    /// Run only the plan items with one of these tags.
    #[arg(long, value_delimiter = ',')]
    pub tags: Vec<String>,
    /// Leave out the plan items with one of these tags.
    #[arg(long, value_delimiter = ',')]
    pub skip_tags: Vec<String>,
    /// The base URL, instead of the file's `base`.
    #[arg(long, value_name = "URL")]
    pub base: Option<String>,
    /// Print every tag of the plan's items (includes too) and exit.
    #[arg(long, conflicts_with_all = ["tags", "skip_tags", "list_tasks"])]
    pub list_tags: bool,
    /// Print the items --tags and --skip-tags keep, as YAML, and exit.
    #[arg(long)]
    pub list_tasks: bool,
    /// Everything `volley run` takes overrides the file: -c (concurrency),
    /// -n (iterations), -d (run_time), -R (iterations per second), --stages...
    #[command(flatten)]
    pub run: RunArgs,
}

#[derive(Debug, Clone, Args)]
pub struct ScriptArgs {
    /// The script of virtual users.
    #[arg(value_name = "FILE.lua")]
    pub file: PathBuf,
    /// Everything `volley run` takes, with the URL whose origin the VUs
    /// send to (paths in the script are relative to it): --vus (-c), -n,
    /// -d, --stages and -R override the script's options.
    #[command(flatten)]
    pub run: RunArgs,
}

#[derive(Debug, Clone, Args)]
pub struct CompareArgs {
    /// The baseline report (volley run -o A.json).
    pub a: PathBuf,
    /// The report to judge against it.
    pub b: PathBuf,
    /// Exit 3 if a metric changes significantly past this: "p99>+10%",
    /// "rps<-5%" (metrics: rps, mean, p50, p90, p99, errors, max; repeatable).
    #[arg(long = "fail-if", value_name = "RULE")]
    pub fail_if: Vec<String>,
    /// Changes smaller than this are noise, however significant (criterion.rs's idea).
    #[arg(long, default_value = "2%", value_name = "PERCENT")]
    pub noise: String,
    /// Also write both runs overlaid, with the verdicts, as one HTML page.
    #[arg(long, value_name = "FILE.html")]
    pub html: Option<PathBuf>,
}

#[derive(Debug, Clone, Args)]
pub struct ReportArgs {
    /// A saved report (volley run -o run.json).
    pub report: PathBuf,
    /// Where to write the HTML report.
    #[arg(long, value_name = "FILE.html")]
    pub html: PathBuf,
}
