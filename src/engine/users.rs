//! The request loop's fourth workload: virtual users. Each request loop is
//! one VU and each ticket one iteration of it: the worker's Lua state
//! resumes the VU's coroutine, and each command it yields is performed
//! here, on the loop's driver (a request) or its timer (a sleep), until
//! the iteration ends. So the closed feed gives a fixed number of VUs (a
//! ramp of them with stages) and iterations shared by all of them (`-n`),
//! and the open feed iterations at a rate.
//!
//! Each request is recorded in the totals and under its name; the first
//! of an iteration is measured from the iteration's intended start. A
//! failed request is the VU's to handle (its response has an `error`); a
//! Lua error ends the iteration alone, counted as a `script` error with
//! its `file:line: message`.

use super::driver::Driver;
use super::exchange::{Outgoing, Wire, WorkerCtx, classify, fail, micros_between};
use super::feed::Ticket;
use crate::request::{Fields, Overrides, Request};
use crate::response::Capture;
use crate::sample::{ErrorDetail, ErrorKind, Outcome, RequestError, Sample};
use crate::vu::VuWorker;
use crate::vu::command::{Call, Command};
use crate::vu::response::Response;
use std::time::Instant;

/// What a VU keeps from iteration to iteration: its id, how many
/// iterations it has begun, its cookies and its buffers.
pub struct VuLoop {
    id: u64,
    iterations: u64,
    /// `name=value` of each cookie the server set, in the order set.
    cookies: Vec<(String, String)>,
    fields: Fields,
    capture: Capture,
}

/// The function an iteration runs.
const EXEC: &str = "default";

/// Runs one iteration of the VU of loop `index` on the loop's driver.
pub async fn iteration<W: Wire>(
    ctx: &WorkerCtx<W>,
    users: &VuWorker,
    driver: &mut Driver<W>,
    kept: &mut Option<Box<VuLoop>>,
    ticket: Ticket,
    index: usize,
) {
    let vu = &mut **kept.get_or_insert_with(|| {
        Box::new(VuLoop {
            // Loop i of worker w: VUs 1..=N over all workers.
            id: (index * ctx.workers + ctx.worker + 1) as u64,
            iterations: 0,
            cookies: Vec::new(),
            fields: Fields::default(),
            capture: Capture::default(),
        })
    });
    let number = vu.iterations;
    vu.iterations += 1;
    let mut intended = Some(ticket.intended);
    let mut command = users.begin(vu.id, number, EXEC);
    loop {
        users.take_checks(|check, held| ctx.recorder.borrow_mut().record_check(check, held));
        command = match command {
            Ok(Command::End(None)) => break,
            Ok(Command::End(Some(message))) | Err(message) => {
                let err = RequestError::new(ErrorKind::Script, ErrorDetail::Text(message));
                fail(ctx, &err, ticket, Instant::now(), 1);
                break;
            }
            Ok(Command::Sleep(pause)) => {
                tokio::time::sleep(pause).await;
                users.step(vu.id, mlua::Value::Nil)
            }
            Ok(Command::Http(call)) => match send(ctx, driver, vu, &call, &mut intended).await {
                Ok(response) => users.step(vu.id, response),
                Err(message) => Err(message),
            },
        };
    }
    ctx.recorder.borrow_mut().record_iteration();
}

/// Sends the VU's `call` and records it under its name; the first request
/// of an iteration counts from `intended`. A request that got no response
/// gives a response whose `error` says why; a call that cannot be sent at
/// all is the iteration's error.
async fn send<W: Wire>(
    ctx: &WorkerCtx<W>,
    driver: &mut Driver<W>,
    vu: &mut VuLoop,
    call: &Call,
    intended: &mut Option<Instant>,
) -> Result<Response, String> {
    let target = &ctx.shared.target;
    let path = path_on(target, &call.url)?;
    vu.fields.clear();
    for (name, value) in &call.headers {
        vu.fields.push(name, value.as_bytes());
    }
    let cookie_given = call.headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("cookie"));
    if !vu.cookies.is_empty() && !cookie_given {
        let jar: Vec<String> = vu.cookies.iter().map(|(n, v)| format!("{n}={v}")).collect();
        vu.fields.push("Cookie", jar.join("; ").as_bytes());
    }
    let request = Request {
        method: &call.method,
        https: target.tls,
        authority: &target.host_header,
        path: path.as_bytes(),
        url_auth: target.basic_auth.as_ref().map(|auth| auth.header_value()),
        fields: &vu.fields,
        overrides: Overrides::of(call.headers.iter().map(|(n, _)| n.as_str())),
        body: &call.body,
    };
    let name = match &call.name {
        Some(name) => format!("{}{name}", call.group),
        None => format!("{}{} {path}", call.group, call.method),
    };
    let stat = {
        let mut recorder = ctx.recorder.borrow_mut();
        let stat = users_stat(ctx, &name);
        recorder.ensure_step(stat);
        stat
    };
    vu.capture.clear(true);
    vu.capture.for_script = true;
    let started = Instant::now();
    let from = intended.take().unwrap_or(started);
    let timeout = call.timeout.unwrap_or(ctx.shared.transport.timeout);
    let deadline = tokio::time::Instant::from_std(started + timeout);
    let outgoing = Outgoing::Rendered {
        request: &request,
        capture: &mut vu.capture,
    };
    let mut answer = None;
    let result = driver
        .round_trip(ctx, outgoing, deadline, |head| answer = Some(head))
        .await;
    let now = Instant::now();
    let mut response = Response {
        url: call.url.clone(),
        duration_ms: now.saturating_duration_since(started).as_secs_f64() * 1000.0,
        ..Response::default()
    };
    match (result, answer) {
        (Ok(()), Some(head)) => {
            let outcome = classify(ctx, head.status);
            let sample = Sample {
                latency_us: micros_between(from, now),
                service_us: micros_between(started, now),
                bytes: head.bytes,
                outcome,
            };
            ctx.recorder.borrow_mut().record_step(stat, &sample);
            ctx.shared.offered_h3(head.h3_offer);
            response.status = head.status;
            if !matches!(outcome, Outcome::Ok { .. }) {
                response.error = Some(ErrorKind::Status.name());
            }
            keep_cookies(&mut vu.cookies, &vu.capture);
            response.flat = std::mem::take(&mut vu.capture.flat);
            response.ends = std::mem::take(&mut vu.capture.flat_ends);
            response.body = std::mem::take(&mut vu.capture.body);
        }
        (result, _) => {
            let err = match result {
                Err(lost) => lost.err,
                Ok(()) => RequestError::new(
                    ErrorKind::Protocol,
                    ErrorDetail::Static("the request ended without a response"),
                ),
            };
            {
                let mut recorder = ctx.recorder.borrow_mut();
                recorder.note_step_error(stat, &err);
                let us = micros_between(from, now);
                recorder.record_step(
                    stat,
                    &Sample {
                        latency_us: us,
                        service_us: micros_between(started, now),
                        bytes: 0,
                        outcome: Outcome::Failed(err.kind),
                    },
                );
            }
            response.error = Some(err.kind.name());
            if !ctx.shared.model.is_open() {
                ctx.connector.back_off(&err).await;
            }
        }
    }
    Ok(response)
}

/// The index of request name `name` for this run.
fn users_stat<W: Wire>(ctx: &WorkerCtx<W>, name: &str) -> usize {
    let users = ctx.shared.users.as_ref().expect("a VU run has its script");
    ctx.seen_names.borrow_mut().index(&users.requests, name)
}

/// The path and query to send for `url`: a path as it is, or an absolute
/// URL on the run's origin.
fn path_on(target: &crate::target::Target, url: &str) -> Result<String, String> {
    if url.starts_with('/') {
        return Ok(url.to_string());
    }
    let parsed = url::Url::parse(url).map_err(|e| format!("'{url}' is not a URL: {e}"))?;
    let wanted = url::Url::parse(&target.origin).map_err(|e| e.to_string())?;
    if parsed.origin() != wanted.origin() {
        return Err(format!(
            "'{url}' is not on {} (a run's VUs send to the origin of its URL)",
            target.origin
        ));
    }
    let mut path = parsed.path().to_string();
    if let Some(query) = parsed.query() {
        path.push('?');
        path.push_str(query);
    }
    Ok(path)
}

/// Keeps each cookie a response set (a later one replaces one of the same
/// name; an empty value or `Max-Age=0` removes it).
fn keep_cookies(jar: &mut Vec<(String, String)>, capture: &Capture) {
    for (name, value) in capture.flat_headers() {
        if !name.eq_ignore_ascii_case(b"set-cookie") {
            continue;
        }
        let value = String::from_utf8_lossy(value);
        let mut attributes = value.split(';');
        let Some((cookie, content)) = attributes.next().and_then(|pair| pair.trim().split_once('=')) else {
            continue;
        };
        let expired = attributes.any(|a| a.trim().eq_ignore_ascii_case("max-age=0"));
        jar.retain(|(kept, _)| kept != cookie.trim());
        if !expired && !content.is_empty() {
            jar.push((cookie.trim().to_string(), content.trim().to_string()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_vu_sends_paths_and_urls_on_the_runs_origin() {
        let target = crate::target::Target::parse("http://127.0.0.1:8080/base").unwrap();
        assert_eq!(path_on(&target, "/a?b=1").unwrap(), "/a?b=1");
        assert_eq!(path_on(&target, "http://127.0.0.1:8080/x?y").unwrap(), "/x?y");
        let err = path_on(&target, "http://127.0.0.1:9090/x").unwrap_err();
        assert!(err.contains("is not on http://127.0.0.1:8080"), "{err}");
        assert!(path_on(&target, "nonsense").is_err());
    }

    #[test]
    fn cookies_are_kept_replaced_and_removed() {
        let mut capture = Capture {
            for_script: true,
            ..Capture::default()
        };
        capture.add_header("Set-Cookie", b"session=abc; Path=/; HttpOnly");
        capture.add_header("set-cookie", b"theme=dark");
        capture.add_header("Content-Type", b"text/plain");
        let mut jar = Vec::new();
        keep_cookies(&mut jar, &capture);
        assert_eq!(
            jar,
            [
                ("session".to_string(), "abc".to_string()),
                ("theme".to_string(), "dark".to_string())
            ]
        );
        capture.clear(true);
        capture.add_header("Set-Cookie", b"session=def");
        capture.add_header("Set-Cookie", b"theme=; Max-Age=0");
        keep_cookies(&mut jar, &capture);
        assert_eq!(jar, [("session".to_string(), "def".to_string())]);
    }
}
