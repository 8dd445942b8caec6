//! Sending batches to a receiver from a thread of its own, so that a slow
//! or dead receiver never holds up the run.
//!
//! The collecting thread offers each interval's batch to a bounded queue
//! and moves on; when the queue is full the batch is dropped and counted.
//! The delivery thread posts each batch over HTTP (hyper's client on a
//! single-threaded tokio runtime: a well-kept client for a once-a-second
//! POST; the load path is elsewhere), retrying with backoff while the
//! receiver was last seen healthy and trying once while it is known to be
//! down, so a dead receiver cannot back the queue up. The first failure
//! prints one warning line; the report counts what was not delivered.

use super::model::Batch;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Batches waiting for the receiver (one per interval).
const QUEUE: usize = 16;
/// How long one attempt may take, connection included.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(2);
/// Waits before each retry while the receiver is thought healthy.
const BACKOFF: [Duration; 3] = [
    Duration::from_millis(250),
    Duration::from_millis(500),
    Duration::from_secs(1),
];
/// How long the end of the run waits for the queue to drain.
const FLUSH_LIMIT: Duration = Duration::from_secs(5);

/// One HTTP request to make.
pub struct Post {
    pub body: Vec<u8>,
    pub headers: Vec<(&'static str, &'static str)>,
}

/// What a receiver answered to a failed post.
pub enum Failure {
    /// No answer (down, refused, timed out): worth retrying.
    Unreachable(String),
    /// An HTTP error status, with the start of its body.
    Status(u16, String),
}

/// Why a batch could not be encoded for its wire.
#[derive(Debug, thiserror::Error)]
pub enum EncodeError {
    #[error("cannot compress a remote-write batch")]
    Compress(#[source] snap::Error),
}

/// A wire format: turns batches into posts and may adapt to a refusal.
pub trait Wire: Send + 'static {
    fn encode(&self, batch: &Batch) -> Result<Post, EncodeError>;
    /// A refusal the format can work around (e.g. native histograms turned
    /// off): adapt and return true to resend the batch at once.
    fn adapt(&mut self, _status: u16, _body: &str) -> bool {
        false
    }
    /// What the report records about the format's choices.
    fn mode(&self) -> Option<&'static str> {
        None
    }
}

/// What became of the batches offered to one output.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    pub offered: u64,
    pub delivered: u64,
    pub mode: Option<&'static str>,
}

struct Shared {
    tally: Mutex<Tally>,
    /// Set when the run's end stops waiting: no more attempts.
    give_up: AtomicBool,
    /// Whether the one warning line was printed (by either side).
    warned: AtomicBool,
    /// `NAME output URL`, for that line.
    label: String,
}

impl Shared {
    fn tally(&self) -> std::sync::MutexGuard<'_, Tally> {
        self.tally.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// One line, the first time only: the report counts the rest.
    fn warn(&self, reason: &str) {
        if !self.warned.swap(true, Ordering::SeqCst) {
            eprintln!(
                "warning: {}: {reason}; retrying with backoff, undelivered batches are counted in the report",
                self.label
            );
        }
    }
}

/// One output's queue and delivery thread.
pub struct Delivery {
    queue: Option<SyncSender<Arc<Batch>>>,
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl Delivery {
    /// Starts the delivery thread for `url`; `name` prefixes its warnings.
    pub fn start(
        name: &str,
        url: url::Url,
        wire: Box<dyn Wire>,
        priority: crate::sys::ThreadPriority,
    ) -> Result<Delivery, crate::sink::SinkError> {
        let (queue, batches) = sync_channel(QUEUE);
        let shared = Arc::new(Shared {
            tally: Mutex::new(Tally::default()),
            give_up: AtomicBool::new(false),
            warned: AtomicBool::new(false),
            label: format!("{name} output {url}"),
        });
        let worker = Worker {
            url,
            wire,
            shared: Arc::clone(&shared),
        };
        let thread = std::thread::Builder::new()
            .name(format!("volley-{name}"))
            .spawn(move || {
                priority.apply();
                worker.run(batches)
            })
            .map_err(|source| crate::sink::SinkError::Thread {
                label: format!("{name} output"),
                source,
            })?;
        Ok(Delivery {
            queue: Some(queue),
            shared,
            thread: Some(thread),
        })
    }

    /// Queues a batch without waiting; a full queue drops it (counted).
    pub fn offer(&self, batch: Arc<Batch>) {
        self.shared.tally().offered += 1;
        let full = self
            .queue
            .as_ref()
            .is_some_and(|queue| matches!(queue.try_send(batch), Err(TrySendError::Full(_))));
        if full {
            self.shared.warn(&format!(
                "the receiver is slower than the interval ({QUEUE} batches wait)"
            ));
        }
    }

    /// Closes the queue and waits (bounded) for what is in it to be sent.
    pub fn finish(&mut self) -> Tally {
        self.queue = None;
        let deadline = Instant::now() + FLUSH_LIMIT;
        if let Some(thread) = self.thread.take() {
            while !thread.is_finished() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
            self.shared.give_up.store(true, Ordering::SeqCst);
            if thread.is_finished() {
                let _ = thread.join();
            }
        }
        self.shared.tally().clone()
    }
}

impl Drop for Delivery {
    fn drop(&mut self) {
        self.shared.give_up.store(true, Ordering::SeqCst);
    }
}

struct Worker {
    url: url::Url,
    wire: Box<dyn Wire>,
    shared: Arc<Shared>,
}

type Client =
    hyper_util::client::legacy::Client<hyper_util::client::legacy::connect::HttpConnector, Full<Bytes>>;

impl Worker {
    fn run(mut self, batches: Receiver<Arc<Batch>>) {
        let Ok(runtime) = tokio::runtime::Builder::new_current_thread().enable_all().build() else {
            self.shared.warn("cannot start its runtime; nothing is sent");
            return;
        };
        let client: Client =
            hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new()).build_http();
        let mut healthy = true;
        self.shared.tally().mode = self.wire.mode();
        while let Ok(batch) = batches.recv() {
            if self.shared.give_up.load(Ordering::SeqCst) {
                continue;
            }
            let delivered = runtime.block_on(self.deliver(&client, &batch, healthy));
            healthy = delivered;
            let mut tally = self.shared.tally();
            tally.delivered += u64::from(delivered);
            tally.mode = self.wire.mode();
        }
    }

    /// Posts one batch, retrying with backoff when `retry`.
    async fn deliver(&mut self, client: &Client, batch: &Batch, retry: bool) -> bool {
        let mut waits = BACKOFF.iter();
        loop {
            let failure = match self.wire.encode(batch) {
                Ok(post) => match self.post(client, post).await {
                    Ok(()) => return true,
                    Err(failure) => failure,
                },
                Err(e) => {
                    self.warn(&crate::error::line(&e));
                    return false;
                }
            };
            let reason = match failure {
                Failure::Status(status, body) if self.wire.adapt(status, &body) => continue,
                // A client error will not go away by sending it again.
                Failure::Status(status, body) if (400..500).contains(&status) => {
                    self.warn(&format!("refused with {status}: {body}"));
                    return false;
                }
                Failure::Status(status, body) => format!("answered {status}: {body}"),
                Failure::Unreachable(why) => why,
            };
            self.warn(&reason);
            let next = if retry { waits.next() } else { None };
            match next {
                Some(wait) if !self.shared.give_up.load(Ordering::SeqCst) => tokio::time::sleep(*wait).await,
                _ => return false,
            }
        }
    }

    async fn post(&self, client: &Client, post: Post) -> Result<(), Failure> {
        let mut request = http::Request::post(self.url.as_str());
        for (name, value) in post.headers {
            request = request.header(name, value);
        }
        let request = request
            .body(Full::new(Bytes::from(post.body)))
            .map_err(|e| Failure::Unreachable(e.to_string()))?;
        let attempt = async {
            let response = client.request(request).await.map_err(|e| {
                // hyper's own message is generic ("client error"); the
                // innermost cause says what happened (connection refused).
                let mut cause: &dyn std::error::Error = &e;
                while let Some(source) = cause.source() {
                    cause = source;
                }
                Failure::Unreachable(cause.to_string())
            })?;
            let status = response.status().as_u16();
            let body = response
                .into_body()
                .collect()
                .await
                .map(|b| b.to_bytes())
                .unwrap_or_default();
            if (200..300).contains(&status) {
                Ok(())
            } else {
                let text = String::from_utf8_lossy(&body[..body.len().min(200)]);
                Err(Failure::Status(status, text.trim().to_string()))
            }
        };
        tokio::time::timeout(ATTEMPT_TIMEOUT, attempt)
            .await
            .unwrap_or_else(|_| {
                Err(Failure::Unreachable(format!(
                    "no answer within {ATTEMPT_TIMEOUT:?}"
                )))
            })
    }

    fn warn(&self, reason: &str) {
        self.shared.warn(reason);
    }
}
