//! The requests the server answered, in the order they arrived: an opt-in
//! record ([`ServerOptions::log_requests`](super::ServerOptions)) for
//! tests that must see *what* a client sent, not only how much (a plan
//! imported from a browser's recording sends the same requests in the same
//! order as the browser did).
//!
//! A mutex per request is fine here: the log is off unless asked for, and
//! the server is the target, not the load generator. It keeps at most
//! [`MAX_ENTRIES`] requests and [`MAX_BODY`] bytes of each body, so a long
//! load test against a logging server stays bounded in memory.

use std::sync::Mutex;

use super::reply::Incoming;

/// Requests past this many are counted, not kept.
pub const MAX_ENTRIES: usize = 100_000;
/// Body bytes kept per request.
pub const MAX_BODY: usize = 64 * 1024;

/// One request as it arrived.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoggedRequest {
    /// The method as sent (`GET`, `PATCH`...).
    pub method: String,
    /// The path and, after `?`, the query string, as sent.
    pub target: String,
    /// The header fields' names, lowercased, in the order sent.
    pub header_names: Vec<String>,
    /// The body's first 64 KiB (`MAX_BODY`).
    pub body: Vec<u8>,
}

#[derive(Debug, Default)]
pub(super) struct RequestLog {
    entries: Mutex<Vec<LoggedRequest>>,
}

impl RequestLog {
    pub(super) fn record(&self, req: &Incoming<'_>) {
        let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
        let mut target = text(req.path);
        if !req.query.is_empty() {
            target.push('?');
            target.push_str(&text(req.query));
        }
        let entry = LoggedRequest {
            method: text(req.method_name),
            target,
            header_names: req
                .fields()
                .iter()
                .map(|(name, _)| name.to_ascii_lowercase())
                .collect(),
            body: req.body[..req.body.len().min(MAX_BODY)].to_vec(),
        };
        // A poisoned lock only means another request panicked mid-push;
        // the entries before it are still whole.
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if entries.len() < MAX_ENTRIES {
            entries.push(entry);
        }
    }

    pub(super) fn entries(&self) -> Vec<LoggedRequest> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}
