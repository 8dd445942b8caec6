//! The request loop's third workload: a wrk script's round. Each round
//! asks the worker's Lua state for what the script defines, and only that:
//! `delay()` before the send, `request()` for the text (else the text
//! `init` built, read once), `response()` with each answer's status,
//! headers and body (which are kept only when it is defined).
//!
//! The text's requests go out as one round ([`Outgoing::Written`]):
//! pipelined over HTTP/1.1, one stream after another over HTTP/2 and
//! HTTP/3. With `response()` defined they go one at a time, so that each
//! response's headers and body reach it before the next is read.
//!
//! A callback that fails, or a `request()` whose text is not a request,
//! is counted as a `script` error with its message, and stops the run:
//! its report still comes.

use super::driver::Driver;
use super::exchange::{Outgoing, Wire, WorkerCtx, fail, record_response, send_time};
use super::feed::Ticket;
use crate::request::Fields;
use crate::response::Capture;
use crate::sample::{ErrorDetail, ErrorKind, RequestError};
use crate::script::RequestText;
use crate::script::state::describe;
use crate::script::worker::ScriptWorker;
use mlua::Value;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// What a loop keeps from round to round: its text, the fields of its
/// requests over HTTP/2 and HTTP/3, and where responses are kept for
/// `response()`.
#[derive(Default)]
pub struct ScriptLoop {
    text: RequestText,
    fields: Fields,
    capture: Capture,
}

/// The loop is to end: the script stopped its thread, or failed.
pub struct Stopped;

/// One round of the script on the loop's driver.
pub async fn round<W: Wire>(
    ctx: &WorkerCtx<W>,
    script: &ScriptWorker,
    driver: &mut Driver<W>,
    kept: &mut Option<Box<ScriptLoop>>,
    ticket: Ticket,
) -> Result<Option<Instant>, Stopped> {
    if script.stopped() {
        return Err(Stopped);
    }
    let ScriptLoop {
        text: written,
        fields,
        capture,
    } = &mut **kept.get_or_insert_with(Box::default);
    if let Some(delay) = &script.delay {
        let ms = delay
            .call::<f64>(())
            .map_err(|e| failed(ctx, "delay", &e, ticket))?;
        if ms > 0.0 {
            tokio::time::sleep(Duration::from_secs_f64(ms / 1000.0)).await;
        }
    }
    let text = match &script.request {
        Some(request) => {
            let value = request
                .call::<Value>(())
                .map_err(|e| failed(ctx, "request", &e, ticket))?;
            let read = match &value {
                Value::String(s) => written.read(&s.as_bytes()).map_err(|e| e.to_string()),
                other => Err(format!("a {}, not the text of a request", other.type_name())),
            };
            if let Err(message) = read {
                return Err(stop_with(ctx, format!("request() returned {message}"), ticket));
            }
            &*written
        }
        None => &script.fixed,
    };
    // A closed model's ticket holds what is left of `-n`: no more than
    // that goes out (a text's depth is the run's pipelining, so this only
    // cuts the last round). An open model's ticket is one text.
    let count = match ctx.shared.model.is_open() {
        true => text.count,
        false => text.count.min(ticket.count as usize),
    };
    // With `response()`, one request at a time (see the module's doc).
    let step = if script.response.is_some() { 1 } else { count };
    let mut answered_at = None;
    let mut first = 0;
    while first < count {
        let requests = first..(first + step).min(count);
        first = requests.end;
        let parts = Parts {
            text,
            fields: &mut *fields,
            capture: &mut *capture,
        };
        answered_at = send(ctx, script, driver, parts, requests, ticket).await?;
        if answered_at.is_none() {
            break;
        }
    }
    Ok(answered_at)
}

/// A round's text and the loop's buffers.
struct Parts<'a> {
    text: &'a RequestText,
    fields: &'a mut Fields,
    capture: &'a mut Capture,
}

/// Sends `requests` of the text and records each answer (handing it to
/// `response()` where the script has one). Returns when the last answer was
/// read, if every one was.
async fn send<W: Wire>(
    ctx: &WorkerCtx<W>,
    script: &ScriptWorker,
    driver: &mut Driver<W>,
    parts: Parts<'_>,
    requests: std::ops::Range<usize>,
    ticket: Ticket,
) -> Result<Option<Instant>, Stopped> {
    let open_model = ctx.shared.model.is_open();
    let sent_at = send_time(ctx, ticket);
    let reads = script.response.is_some();
    parts.capture.clear(reads);
    parts.capture.for_script = reads;
    let count = requests.len() as u32;
    let outgoing = Outgoing::Written {
        text: parts.text,
        requests,
        fields: parts.fields,
        capture: reads.then_some(&mut *parts.capture),
        target: &ctx.shared.target,
    };
    let deadline = tokio::time::Instant::from_std(sent_at + ctx.shared.transport.timeout);
    let mut answered_at = None;
    let mut status = 0;
    let round = driver.round_trip(ctx, outgoing, deadline, |head| {
        status = head.status;
        answered_at = Some(record_response(ctx, ticket, sent_at, head));
    });
    if let Err(lost) = round.await {
        fail(ctx, &lost.err, ticket, sent_at, lost.count.min(count));
        if !open_model {
            ctx.connector.back_off(&lost.err).await;
        }
        return Ok(None);
    }
    if let Some(response) = &script.response {
        let capture = &*parts.capture;
        let call = || -> mlua::Result<()> {
            let headers = script
                .lua
                .create_table_with_capacity(0, capture.flat_ends.len())?;
            for (name, value) in capture.flat_headers() {
                // As `&str`, pushed straight onto Lua's stack (bytes that are
                // not UTF-8 go through a string handle of their own).
                match (std::str::from_utf8(name), std::str::from_utf8(value)) {
                    (Ok(name), Ok(value)) => headers.raw_set(name, value)?,
                    _ => {
                        headers.raw_set(script.lua.create_string(name)?, script.lua.create_string(value)?)?
                    }
                }
            }
            headers.set_metatable(Some(script.any_case.clone()))?;
            let body = script.lua.create_string(&capture.body)?;
            response.call::<()>((status, headers, body))
        };
        call().map_err(|e| failed(ctx, "response", &e, ticket))?;
    }
    if script.stopped() {
        return Err(Stopped);
    }
    Ok(answered_at)
}

/// Counts a callback's failure as a `script` error and stops the run.
fn failed<W: Wire>(ctx: &WorkerCtx<W>, callback: &str, err: &mlua::Error, ticket: Ticket) -> Stopped {
    stop_with(ctx, format!("{callback}(): {}", describe(err)), ticket)
}

/// Counts `message` as a `script` error (the round it ended) and stops the
/// run.
fn stop_with<W: Wire>(ctx: &WorkerCtx<W>, message: String, ticket: Ticket) -> Stopped {
    let err = RequestError::new(ErrorKind::Script, ErrorDetail::Text(message));
    fail(ctx, &err, ticket, Instant::now(), 1);
    ctx.shared.stop.store(true, Ordering::Relaxed);
    Stopped
}
