//! The scenario driver: one iteration of a plan on one connection.
//!
//! It is the request loop's other protocol driver: where a plain run sends
//! the same pre-built bytes, an iteration walks the plan's steps, renders
//! each request into a reused buffer (with the iteration's variables,
//! items and cookies), and records each response in its step's statistics
//! as well as the totals. A failed request ends the iteration (later steps
//! depend on it); a failed assertion is counted and the iteration goes on.

use super::driver::{Driver, Outgoing};
use super::exchange::{WorkerCtx, classify, micros_between};
use super::feed::Ticket;
use crate::http1::{self, Capture};
use crate::request::{Fields, Request};
use crate::sample::{ErrorDetail, ErrorKind, Outcome, RequestError, Sample};
use crate::scenario::template::{Scope, Source, VarRef, json_path, write_value};
use crate::scenario::{Body, RequestStep, Scenario, StepKind};
use serde_json::Value;
use std::cell::OnceCell;
use std::time::Instant;

/// A response kept by `assign`.
#[derive(Debug)]
struct Kept {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    /// The body parsed as JSON on first use.
    json: OnceCell<Option<Value>>,
}

/// A variable's value.
#[derive(Debug)]
enum Var {
    Text(String),
    Response(Box<Kept>),
}

/// A connection's scenario state, reused across its iterations.
#[derive(Debug, Default)]
pub struct IterationState {
    vars: Vec<Option<Var>>,
    /// Cookies set during this iteration, `name=value`.
    cookies: Vec<String>,
    url: Vec<u8>,
    body: Vec<u8>,
    /// The rendered header fields (and the cookie line).
    fields: Fields,
    capture: Capture,
    order: Vec<usize>,
    rng: u64,
}

/// The values visible to a template at one point of an iteration.
struct IterScope<'a> {
    vars: &'a [Option<Var>],
    item: Option<&'a Value>,
    index: usize,
    iteration: u64,
}

impl Kept {
    fn json(&self) -> Option<&Value> {
        self.json
            .get_or_init(|| serde_json::from_slice(&self.body).ok())
            .as_ref()
    }
}

impl Scope for IterScope<'_> {
    fn write(&self, var: &VarRef, out: &mut Vec<u8>) -> Result<(), String> {
        let missing = || format!("'{{{{ {} }}}}' has no value", var.text);
        match &var.source {
            // Numbers are written in place: no String per request.
            Source::Iteration => write_number(out, self.iteration),
            Source::Index => write_number(out, self.index as u64),
            Source::Item => write_value(
                json_path(self.item.ok_or_else(missing)?, &var.path).ok_or_else(missing)?,
                out,
            ),
            Source::Var(slot) => match self.vars.get(*slot).and_then(Option::as_ref) {
                None => return Err(format!("'{}' is not assigned (its request failed?)", var.text)),
                Some(Var::Text(text)) if var.path.is_empty() => out.extend_from_slice(text.as_bytes()),
                Some(Var::Text(text)) => {
                    let value: Value = serde_json::from_str(text).map_err(|_| missing())?;
                    write_value(json_path(&value, &var.path).ok_or_else(missing)?, out);
                }
                Some(Var::Response(kept)) => match var.path.first().map(String::as_str) {
                    Some("status") => write_number(out, u64::from(kept.status)),
                    Some("body") if var.path.len() == 1 => out.extend_from_slice(&kept.body),
                    Some("body") => {
                        let json = kept
                            .json()
                            .ok_or_else(|| format!("the body of '{}' is not JSON", var.text))?;
                        write_value(json_path(json, &var.path[1..]).ok_or_else(missing)?, out);
                    }
                    Some("headers") if var.path.len() == 2 => {
                        let name = var.path[1].to_ascii_lowercase();
                        let value = kept
                            .headers
                            .iter()
                            .find(|(n, _)| *n == name)
                            .ok_or_else(missing)?;
                        out.extend_from_slice(value.1.as_bytes());
                    }
                    _ => {
                        return Err(format!(
                            "'{}': use .status, .body[.path] or .headers.name",
                            var.text
                        ));
                    }
                },
            },
        }
        Ok(())
    }
}

/// Appends `n` in decimal (through `io::Write`, which grows `out` and
/// allocates nothing else).
fn write_number(out: &mut Vec<u8>, n: u64) {
    use std::io::Write as _;
    let _ = write!(out, "{n}");
}

impl IterationState {
    fn new(scenario: &Scenario, seed: u64) -> IterationState {
        IterationState {
            vars: (0..scenario.vars).map(|_| None).collect(),
            rng: seed | 1,
            ..IterationState::default()
        }
    }

    /// xorshift64: enough to shuffle items, no dependency needed.
    fn next_random(&mut self) -> u64 {
        let mut x = self.rng;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng = x;
        x
    }
}

/// Records a failed step (and notes its example).
fn fail_step(ctx: &WorkerCtx, stat: usize, err: &RequestError, from: Instant) {
    let mut recorder = ctx.recorder.borrow_mut();
    recorder.note_step_error(stat, err);
    let us = micros_between(from, Instant::now());
    recorder.record_step(
        stat,
        &Sample {
            latency_us: us,
            service_us: us,
            bytes: 0,
            outcome: Outcome::Failed(err.kind),
        },
    );
}

/// Runs one iteration of `scenario` through the loop's driver, with the
/// state `kept` from the connection's previous iteration (none at first).
pub async fn run(
    ctx: &WorkerCtx,
    driver: &mut Driver,
    kept: &mut Option<Box<IterationState>>,
    ticket: Ticket,
    scenario: &Scenario,
) {
    let number = ctx.iterations.get();
    ctx.iterations.set(number + 1);
    let iteration = number * ctx.workers as u64 + ctx.worker as u64;
    let mut state = kept
        .take()
        .unwrap_or_else(|| Box::new(IterationState::new(scenario, 0x9E37_79B9_7F4A_7C15 ^ iteration)));
    state.vars.iter_mut().for_each(|v| *v = None);
    state.cookies.clear();
    // The first request is measured from the iteration's intended start
    // (the open model's schedule); the rest from their own sends.
    let mut intended = Some(ticket.intended);
    for step in &scenario.steps {
        let started = Instant::now();
        let ok = match &step.kind {
            StepKind::Delay(d) => {
                tokio::time::sleep(*d).await;
                true
            }
            StepKind::Assign { slot: var, value } => {
                let scope = IterScope {
                    vars: &state.vars,
                    item: None,
                    index: 0,
                    iteration,
                };
                match value.render_string(&scope) {
                    Ok(text) => {
                        state.vars[*var] = Some(Var::Text(text));
                        true
                    }
                    Err(e) => {
                        let err = RequestError::new(
                            ErrorKind::Assert,
                            ErrorDetail::Text(format!("'{}': {e}", step.name)),
                        );
                        fail_step(ctx, step.stat, &err, started);
                        false
                    }
                }
            }
            StepKind::Assert { key, expected } => {
                check(
                    ctx, &state, step.stat, &step.name, key, expected, iteration, started,
                );
                true
            }
            StepKind::Exec { command, assign } => {
                // Boxed: a child process's future is kilobytes, and an
                // unboxed one would widen every connection loop's future
                // (10,000 connections: 64 MB became 218 MB of peak RSS)
                // even in runs with no `exec`; one allocation beside a
                // process spawn is nothing.
                Box::pin(exec(ctx, &mut state, step, command, *assign, iteration, started)).await
            }
            StepKind::Request(request) => {
                send_all(
                    ctx,
                    driver,
                    &mut state,
                    step.stat,
                    request,
                    iteration,
                    &mut intended,
                )
                .await
            }
        };
        if !ok {
            break;
        }
    }
    if scenario.settings.new_conn_per_iter == Some(true) {
        driver.new_connection();
    }
    *kept = Some(state);
}

/// Runs an `exec` step: in its item's statistics only (not a request),
/// its output assigned; false if it failed, which ends the iteration.
async fn exec(
    ctx: &WorkerCtx,
    state: &mut IterationState,
    step: &crate::scenario::Step,
    command: &crate::scenario::template::Template,
    assign: Option<usize>,
    iteration: u64,
    started: Instant,
) -> bool {
    let scope = IterScope {
        vars: &state.vars,
        item: None,
        index: 0,
        iteration,
    };
    let result = match command.render_string(&scope) {
        Ok(command) => crate::scenario::exec::run(&command, ctx.shared.transport.timeout).await,
        Err(e) => Err(e),
    };
    let us = micros_between(started, Instant::now());
    let mut sample = Sample {
        latency_us: us,
        service_us: us,
        bytes: 0,
        outcome: Outcome::Ok { status: 0 },
    };
    let mut recorder = ctx.recorder.borrow_mut();
    match result {
        Ok(output) => {
            sample.bytes = output.len() as u64;
            recorder.record_step_only(step.stat, &sample);
            if let Some(var) = assign {
                state.vars[var] = Some(Var::Text(output));
            }
            true
        }
        Err(message) => {
            let err = RequestError::new(
                ErrorKind::Exec,
                ErrorDetail::Text(format!("'{}': {message}", step.name)),
            );
            sample.outcome = Outcome::Failed(ErrorKind::Exec);
            recorder.note_step_only_error(step.stat, &err);
            recorder.record_step_only(step.stat, &sample);
            false
        }
    }
}

/// Compares an assigned value with the expected text.
#[allow(clippy::too_many_arguments)]
fn check(
    ctx: &WorkerCtx,
    state: &IterationState,
    stat: usize,
    name: &str,
    key: &VarRef,
    expected: &crate::scenario::template::Template,
    iteration: u64,
    started: Instant,
) {
    let scope = IterScope {
        vars: &state.vars,
        item: None,
        index: 0,
        iteration,
    };
    let mut actual = Vec::new();
    let outcome = scope
        .write(key, &mut actual)
        .and_then(|_| expected.render_string(&scope));
    let message = match outcome {
        Ok(want) if String::from_utf8_lossy(&actual).trim() == want.trim() => return,
        Ok(want) => format!(
            "assert '{name}' failed: {} is '{}', expected '{}'",
            key.text,
            String::from_utf8_lossy(&actual).trim(),
            want.trim()
        ),
        Err(e) => format!("assert '{name}' failed: {e}"),
    };
    let err = RequestError::new(ErrorKind::Assert, ErrorDetail::Text(message));
    fail_step(ctx, stat, &err, started);
}

/// Sends a request step once, or once per picked item; false if one failed.
async fn send_all(
    ctx: &WorkerCtx,
    driver: &mut Driver,
    state: &mut IterationState,
    stat: usize,
    request: &RequestStep,
    iteration: u64,
    intended: &mut Option<Instant>,
) -> bool {
    let Some(items) = &request.items else {
        return send_one(ctx, driver, state, stat, request, None, 0, iteration, intended).await;
    };
    state.order.clear();
    state.order.extend(0..items.values.len());
    if items.shuffle {
        for i in (1..state.order.len()).rev() {
            let j = (state.next_random() % (i as u64 + 1)) as usize;
            state.order.swap(i, j);
        }
    }
    let count = items.pick.unwrap_or(items.values.len());
    for k in 0..count {
        let index = state.order[k];
        if !send_one(
            ctx,
            driver,
            state,
            stat,
            request,
            Some(&items.values[index]),
            index,
            iteration,
            intended,
        )
        .await
        {
            return false;
        }
    }
    true
}

/// Renders, sends and records one request.
#[allow(clippy::too_many_arguments)]
async fn send_one(
    ctx: &WorkerCtx,
    driver: &mut Driver,
    state: &mut IterationState,
    stat: usize,
    request: &RequestStep,
    item: Option<&Value>,
    index: usize,
    iteration: u64,
    intended: &mut Option<Instant>,
) -> bool {
    let started = Instant::now();
    let path_at = match render(ctx, state, request, item, index, iteration) {
        Ok(at) => at,
        Err(e) => {
            let err = RequestError::new(ErrorKind::Assert, ErrorDetail::Text(e));
            fail_step(ctx, stat, &err, started);
            return false;
        }
    };
    let from = intended.take().unwrap_or(started);
    let full = request.assign.is_some();
    state.capture.clear(full);
    let target = &ctx.shared.target;
    let path = &state.url[path_at..];
    let sent = Request::to(
        target,
        &request.method,
        path,
        &state.fields,
        request.overrides,
        &state.body,
    );
    let outgoing = Outgoing::Rendered {
        request: &sent,
        capture: &mut state.capture,
    };
    let deadline = tokio::time::Instant::now() + ctx.shared.transport.timeout;
    let mut answer = None;
    let result = driver
        .round_trip(ctx, outgoing, deadline, |head| answer = Some(head))
        .await
        .map_err(|lost| lost.err)
        .and_then(|()| answer.ok_or_else(unanswered));
    let now = Instant::now();
    match result {
        Ok(_) if state.capture.overflowed => {
            let err = RequestError::new(
                ErrorKind::Assert,
                ErrorDetail::Text(format!(
                    "a response body assigned to a variable is over the {} MiB volley keeps",
                    http1::body::MAX_KEPT_BODY >> 20
                )),
            );
            fail_step(ctx, stat, &err, from);
            false
        }
        Ok(head) => {
            for cookie in state.capture.set_cookies.drain(..) {
                let name = cookie.split('=').next().unwrap_or_default().to_string();
                state
                    .cookies
                    .retain(|c| c.split('=').next() != Some(name.as_str()));
                state.cookies.push(cookie);
            }
            let outcome = classify(ctx, head.status);
            let sample = Sample {
                latency_us: micros_between(from, now),
                service_us: micros_between(started, now),
                bytes: head.bytes,
                outcome,
            };
            ctx.recorder.borrow_mut().record_step(stat, &sample);
            if let Some(var) = request.assign {
                state.vars[var] = Some(Var::Response(Box::new(Kept {
                    status: head.status,
                    headers: std::mem::take(&mut state.capture.headers),
                    body: std::mem::take(&mut state.capture.body),
                    json: OnceCell::new(),
                })));
            }
            true
        }
        Err(err) => {
            fail_step(ctx, stat, &err, from);
            false
        }
    }
}

/// A round trip of one request ends with its answer or an error; this
/// stands for the error should it ever end with neither.
fn unanswered() -> RequestError {
    RequestError::new(
        ErrorKind::Protocol,
        ErrorDetail::Static("the request ended without a response"),
    )
}

/// Renders the parts of a step's request into `state`'s buffers (its URL,
/// header fields and body); returns where in the URL its path starts.
fn render(
    ctx: &WorkerCtx,
    state: &mut IterationState,
    request: &RequestStep,
    item: Option<&Value>,
    index: usize,
    iteration: u64,
) -> Result<usize, String> {
    let IterationState {
        vars,
        cookies,
        url,
        body,
        fields,
        ..
    } = state;
    let scope = IterScope {
        vars,
        item,
        index,
        iteration,
    };
    url.clear();
    request.url.render(&scope, url)?;
    let target = &ctx.shared.target;
    let path = strip_origin(url, &target.origin).ok_or_else(|| {
        format!(
            "'{}' is not on the plan's origin {}",
            crate::target::mask_password(&String::from_utf8_lossy(url)),
            target.origin
        )
    })?;
    let path_at = url.len() - path.len();
    body.clear();
    match &request.body {
        Body::None => {}
        Body::Template(t) => t.render(&scope, body)?,
        Body::Bytes(bytes) => body.extend_from_slice(bytes),
    }
    // The same request and override rules as `volley run`'s; only the
    // header values and the cookie line are the plan's own.
    fields.clear();
    for (name, value) in &request.headers {
        fields.push_with(name, |out| value.render(&scope, out))?;
    }
    if !cookies.is_empty() {
        fields.push_with("Cookie", |out| {
            for (i, cookie) in cookies.iter().enumerate() {
                if i > 0 {
                    out.extend_from_slice(b"; ");
                }
                out.extend_from_slice(cookie.as_bytes());
            }
            Ok::<(), String>(())
        })?;
    }
    Ok(path_at)
}

/// The path of `url`: itself when relative, or what follows the origin when
/// absolute on `origin`; `None` for another origin.
fn strip_origin<'u>(url: &'u [u8], origin: &str) -> Option<&'u [u8]> {
    if url.starts_with(b"http://") || url.starts_with(b"https://") {
        let rest = url.strip_prefix(origin.as_bytes())?;
        (rest.is_empty() || rest[0] == b'/' || rest[0] == b'?').then_some(rest)
    } else {
        Some(url)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_are_stripped_or_refused() {
        let origin = "http://127.0.0.1:3000";
        assert_eq!(strip_origin(b"/a?b", origin), Some(&b"/a?b"[..]));
        assert_eq!(strip_origin(b"http://127.0.0.1:3000/x", origin), Some(&b"/x"[..]));
        assert_eq!(strip_origin(b"http://127.0.0.1:3000", origin), Some(&b""[..]));
        assert_eq!(strip_origin(b"http://127.0.0.1:30001/x", origin), None);
        assert_eq!(strip_origin(b"https://example.test/x", origin), None);
    }
}
