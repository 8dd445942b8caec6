//! The scenario driver: one iteration of a plan on one connection.
//!
//! It is the request loop's other workload: where a plain run sends
//! the same pre-built bytes, an iteration walks the plan's steps and sends
//! each request as the scenario's [`IterationState`] renders it (with the
//! iteration's variables, items and cookies), then records each response
//! in its step's statistics as well as the totals. What a step means is
//! decided in the scenario layer; this keeps the sends, the clock and the
//! recording. A failed request ends the iteration (later steps depend on
//! it); a failed assertion is counted and the iteration goes on.

use super::driver::Driver;
use super::exchange::{Outgoing, Wire, WorkerCtx, classify, micros_between};
use super::feed::Ticket;
use crate::request::Request;
use crate::sample::{ErrorDetail, ErrorKind, Outcome, RequestError, Sample};
pub use crate::scenario::state::IterationState;
use crate::scenario::{RequestStep, Scenario, Step, StepKind};
use std::time::Instant;

/// One iteration's walk through its steps on one connection.
struct Walk<'a, W: Wire> {
    ctx: &'a WorkerCtx<W>,
    driver: &'a mut Driver<W>,
    state: &'a mut IterationState,
    /// The open model's intended start, until the first request takes it.
    intended: Option<Instant>,
}

/// Runs one iteration of `scenario` through the loop's driver, with the
/// state `kept` from the connection's previous iteration (none at first).
pub async fn run<W: Wire>(
    ctx: &WorkerCtx<W>,
    driver: &mut Driver<W>,
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
    state.begin(iteration);
    // The first request is measured from the iteration's intended start
    // (the open model's schedule); the rest from their own sends.
    let mut walk = Walk {
        ctx,
        driver,
        state: &mut state,
        intended: Some(ticket.intended),
    };
    for step in &scenario.steps {
        let started = Instant::now();
        // Inline, not an async fn per step: a step's future holds the
        // request's round trip, and one more async layer would move it
        // once more per request.
        let ok = match &step.kind {
            StepKind::Delay(d) => {
                tokio::time::sleep(*d).await;
                true
            }
            StepKind::Assign { slot, value } => match walk.state.render_text(value) {
                Ok(text) => {
                    walk.state.set_text(*slot, text);
                    true
                }
                Err(e) => {
                    let message = format!("'{}': {e}", step.name);
                    walk.fail(step.stat, &text_error(ErrorKind::Assert, message), started);
                    false
                }
            },
            StepKind::Assert { key, expected } => {
                if let Err(message) = walk.state.check(&step.name, key, expected) {
                    walk.fail(step.stat, &text_error(ErrorKind::Assert, message), started);
                }
                true
            }
            StepKind::Exec { command, assign } => {
                // Boxed: a child process's future is kilobytes, and an
                // unboxed one would widen every connection loop's future
                // (10,000 connections: 64 MB became 218 MB of peak RSS)
                // even in runs with no `exec`; one allocation beside a
                // process spawn is nothing.
                Box::pin(walk.exec(step, command, *assign, started)).await
            }
            StepKind::Request(request) => walk.send_all(step.stat, request).await,
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

impl<W: Wire> Walk<'_, W> {
    /// Records a failed step (and notes its example).
    fn fail(&self, stat: usize, err: &RequestError, from: Instant) {
        let mut recorder = self.ctx.recorder.borrow_mut();
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

    /// Runs an `exec` step: in its item's statistics only (not a request),
    /// its output assigned; false if it failed, which ends the iteration.
    async fn exec(
        &mut self,
        step: &Step,
        command: &crate::scenario::template::Template,
        assign: Option<usize>,
        started: Instant,
    ) -> bool {
        let result = match self.state.render_text(command) {
            Ok(command) => crate::scenario::exec::run(&command, self.ctx.shared.transport.timeout).await,
            Err(e) => Err(e),
        };
        let us = micros_between(started, Instant::now());
        let mut sample = Sample {
            latency_us: us,
            service_us: us,
            bytes: 0,
            outcome: Outcome::Ok { status: 0 },
        };
        let mut recorder = self.ctx.recorder.borrow_mut();
        match result {
            Ok(output) => {
                sample.bytes = output.len() as u64;
                recorder.record_step_only(step.stat, &sample);
                if let Some(slot) = assign {
                    self.state.set_text(slot, output);
                }
                true
            }
            Err(message) => {
                let err = text_error(ErrorKind::Exec, format!("'{}': {message}", step.name));
                sample.outcome = Outcome::Failed(ErrorKind::Exec);
                recorder.note_step_only_error(step.stat, &err);
                recorder.record_step_only(step.stat, &sample);
                false
            }
        }
    }

    /// Sends a request step once, or once per drawn item; false if one
    /// failed.
    async fn send_all(&mut self, stat: usize, request: &RequestStep) -> bool {
        let Some(items) = &request.items else {
            return self.send_one(stat, request, None).await;
        };
        let count = self.state.draw(items);
        for k in 0..count {
            let index = self.state.picked(k);
            if !self.send_one(stat, request, Some(index)).await {
                return false;
            }
        }
        true
    }

    /// Renders, sends and records one request (with item `index`).
    async fn send_one(&mut self, stat: usize, request: &RequestStep, index: Option<usize>) -> bool {
        let started = Instant::now();
        let ctx = self.ctx;
        let target = &ctx.shared.target;
        let rendered = match self.state.render(request, index, &target.origin) {
            Ok(rendered) => rendered,
            Err(e) => {
                self.fail(stat, &text_error(ErrorKind::Assert, e), started);
                return false;
            }
        };
        let from = self.intended.take().unwrap_or(started);
        let sent = Request::to(
            target,
            &request.method,
            rendered.path,
            rendered.fields,
            request.overrides,
            rendered.body,
        );
        let outgoing = Outgoing::Rendered {
            request: &sent,
            capture: rendered.capture,
        };
        let deadline = tokio::time::Instant::now() + ctx.shared.transport.timeout;
        let mut answer = None;
        let result = self
            .driver
            .round_trip(ctx, outgoing, deadline, |head| answer = Some(head))
            .await
            .map_err(|lost| lost.err)
            .and_then(|()| answer.ok_or_else(unanswered));
        let now = Instant::now();
        match result {
            Ok(_) if self.state.overflowed() => {
                let message = format!(
                    "a response body assigned to a variable is over the {} MiB volley keeps",
                    crate::response::MAX_KEPT_BODY >> 20
                );
                self.fail(stat, &text_error(ErrorKind::Assert, message), from);
                false
            }
            Ok(head) => {
                // Held back by its connection (`--coalesce`, closed model
                // only): sent when it went out.
                let (from, started) = head.sent_at.map_or((from, started), |t| (t, t));
                let sample = Sample {
                    latency_us: micros_between(from, now),
                    service_us: micros_between(started, now),
                    bytes: head.bytes,
                    outcome: classify(ctx, head.status),
                };
                ctx.recorder.borrow_mut().record_step(stat, &sample);
                ctx.shared.offered_h3(head.h3_offer);
                self.state.answered(request, head.status);
                true
            }
            Err(err) => {
                self.fail(stat, &err, from);
                if !ctx.shared.model.is_open() {
                    ctx.connector.back_off(&err).await;
                }
                false
            }
        }
    }
}

/// A step's failure described in words.
fn text_error(kind: ErrorKind, message: String) -> RequestError {
    RequestError::new(kind, ErrorDetail::Text(message))
}

/// A round trip of one request ends with its answer or an error; this
/// stands for the error should it ever end with neither.
fn unanswered() -> RequestError {
    RequestError::new(
        ErrorKind::Protocol,
        ErrorDetail::Static("the request ended without a response"),
    )
}
