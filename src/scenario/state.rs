//! A plan's runtime state for one iteration on one connection: its
//! variables, kept responses, cookies and the buffers each request is
//! rendered into. No I/O and no clock: the engine's plan driver sends what
//! this renders and hands back what came in, so everything a plan file
//! means (templates, `assign`, `assert`, cookies, `with_items`) is decided
//! here, and the engine keeps only its send loop.

use super::template::{RenderError, Scope, Source, Template, VarRef, json_path, write_value};
use super::{Body, Items, RequestStep, Scenario};
use crate::request::Fields;
use crate::response::Capture;
use serde_json::Value;
use std::cell::OnceCell;

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

/// A connection's scenario state, reused across its iterations (its
/// buffers keep their memory, so a steady run renders without allocating).
#[derive(Debug, Default)]
pub struct IterationState {
    vars: Vec<Option<Var>>,
    /// Cookies set during this iteration, `name=value`.
    cookies: Vec<String>,
    /// The iteration's number across all workers (`{{ iteration }}`).
    iteration: u64,
    url: Vec<u8>,
    body: Vec<u8>,
    /// The rendered header fields (and the cookie line).
    fields: Fields,
    /// Where the response of a request that assigns is kept.
    capture: Capture,
    /// The order `with_items` values are drawn in.
    order: Vec<usize>,
    rng: u64,
}

/// A rendered request's parts, with the capture its response goes to.
pub struct Rendered<'s> {
    /// The request's target: a path, with its query.
    pub path: &'s [u8],
    pub fields: &'s Fields,
    pub body: &'s [u8],
    pub capture: &'s mut Capture,
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
    fn write(&self, var: &VarRef, out: &mut Vec<u8>) -> Result<(), RenderError> {
        let missing = || RenderError::NoValue(var.text.clone());
        match &var.source {
            // Numbers are written in place: no String per request.
            Source::Iteration => write_number(out, self.iteration),
            Source::Index => write_number(out, self.index as u64),
            Source::Item => write_value(
                json_path(self.item.ok_or_else(missing)?, &var.path).ok_or_else(missing)?,
                out,
            ),
            Source::Var(slot) => match self.vars.get(*slot).and_then(Option::as_ref) {
                None => return Err(RenderError::NotAssigned(var.text.clone())),
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
                            .ok_or_else(|| RenderError::BodyNotJson(var.text.clone()))?;
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
                        return Err(RenderError::NotAResponsePart(var.text.clone()));
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
    /// A fresh state for `scenario`'s variables; `seed` drives the
    /// shuffling of items.
    pub fn new(scenario: &Scenario, seed: u64) -> IterationState {
        IterationState {
            vars: (0..scenario.vars).map(|_| None).collect(),
            rng: seed | 1,
            ..IterationState::default()
        }
    }

    /// Starts iteration number `iteration`: no variable and no cookie
    /// survives from the one before.
    pub fn begin(&mut self, iteration: u64) {
        self.iteration = iteration;
        self.vars.iter_mut().for_each(|v| *v = None);
        self.cookies.clear();
    }

    /// The iteration's values as a template sees them between requests.
    fn scope(&self) -> IterScope<'_> {
        IterScope {
            vars: &self.vars,
            item: None,
            index: 0,
            iteration: self.iteration,
        }
    }

    /// Renders `template` as text with the iteration's values.
    // A step's failure in words, as text: the engine records it as the
    // step's error text, and an `exec` step's command comes through here
    // on its way to `exec::run`, whose failures are words of the same kind.
    pub fn render_text(&self, template: &Template) -> Result<String, String> {
        template.render_string(&self.scope()).map_err(|e| e.to_string())
    }

    /// Gives variable `slot` a text value.
    pub fn set_text(&mut self, slot: usize, text: String) {
        self.vars[slot] = Some(Var::Text(text));
    }

    /// Checks an `assert`: `Err` holds the failure as users read it.
    // A step's failure in words: its message is the error text the report
    // records for the step.
    pub fn check(&self, name: &str, key: &VarRef, expected: &Template) -> Result<(), String> {
        let scope = self.scope();
        let mut actual = Vec::new();
        let outcome = scope
            .write(key, &mut actual)
            .and_then(|_| expected.render_string(&scope));
        match outcome {
            Ok(want) if String::from_utf8_lossy(&actual).trim() == want.trim() => Ok(()),
            Ok(want) => Err(format!(
                "assert '{name}' failed: {} is '{}', expected '{}'",
                key.text,
                String::from_utf8_lossy(&actual).trim(),
                want.trim()
            )),
            Err(e) => Err(format!("assert '{name}' failed: {e}")),
        }
    }

    /// Draws `items` for one request step: how many requests it sends;
    /// the k-th of them takes the value [`picked`](Self::picked)`(k)`.
    pub fn draw(&mut self, items: &Items) -> usize {
        self.order.clear();
        self.order.extend(0..items.values.len());
        if items.shuffle {
            for i in (1..self.order.len()).rev() {
                let j = (self.next_random() % (i as u64 + 1)) as usize;
                self.order.swap(i, j);
            }
        }
        items.pick.unwrap_or(items.values.len())
    }

    /// The index of the item the k-th request of the last draw takes.
    pub fn picked(&self, k: usize) -> usize {
        self.order[k]
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

    /// Renders a step's request (with its item `index`, if it has items)
    /// for a target whose origin is `origin`, ready for its response: the
    /// capture is emptied and keeps the whole response when the step
    /// assigns it. `Err` says why it cannot be sent.
    pub fn render(
        &mut self,
        request: &RequestStep,
        index: Option<usize>,
        origin: &str,
    ) -> Result<Rendered<'_>, String> {
        let IterationState {
            vars,
            cookies,
            iteration,
            url,
            body,
            fields,
            capture,
            ..
        } = self;
        let item = match (index, &request.items) {
            (Some(i), Some(items)) => items.values.get(i),
            _ => None,
        };
        let scope = IterScope {
            vars,
            item,
            index: index.unwrap_or(0),
            iteration: *iteration,
        };
        url.clear();
        request.url.render(&scope, url).map_err(|e| e.to_string())?;
        let path_at = url.len()
            - strip_origin(url, origin)
                .ok_or_else(|| {
                    format!(
                        "'{}' is not on the plan's origin {origin}",
                        crate::target::mask_password(&String::from_utf8_lossy(url)),
                    )
                })?
                .len();
        body.clear();
        match &request.body {
            Body::None => {}
            Body::Template(t) => t.render(&scope, body).map_err(|e| e.to_string())?,
            Body::Bytes(bytes) => body.extend_from_slice(bytes),
        }
        // The same request and override rules as `volley run`'s; only the
        // header values and the cookie line are the plan's own. The jar's
        // cookies join the item's own `Cookie` pairs in that one field
        // (the item's pair wins a name both hold), so neither is lost.
        fields.clear();
        let is_cookie = |name: &str| name.eq_ignore_ascii_case("cookie");
        let mut cookie_sent = false;
        for (name, value) in &request.headers {
            if !is_cookie(name) {
                fields
                    .push_with(name, |out| value.render(&scope, out))
                    .map_err(|e| e.to_string())?;
            } else if !cookie_sent {
                cookie_sent = true;
                fields
                    .push_with(name, |out| {
                        let start = out.len();
                        for (_, value) in request.headers.iter().filter(|(n, _)| is_cookie(n)) {
                            if out.len() > start {
                                out.extend_from_slice(b"; ");
                            }
                            value.render(&scope, out)?;
                        }
                        let explicit = start..out.len();
                        for cookie in cookies.iter() {
                            let name = cookie.split('=').next().unwrap_or_default();
                            if !has_cookie(&out[explicit.clone()], name.as_bytes()) {
                                if out.len() > start {
                                    out.extend_from_slice(b"; ");
                                }
                                out.extend_from_slice(cookie.as_bytes());
                            }
                        }
                        Ok::<(), RenderError>(())
                    })
                    .map_err(|e| e.to_string())?;
            }
        }
        if !cookies.is_empty() && !cookie_sent {
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
        capture.clear(request.assign.is_some());
        Ok(Rendered {
            path: &url[path_at..],
            fields,
            body,
            capture,
        })
    }

    /// Whether the last response's body was longer than volley keeps for
    /// a variable (the step fails rather than assign part of it).
    pub fn overflowed(&self) -> bool {
        self.capture.overflowed
    }

    /// Takes in the response to `request` (its status; its headers and
    /// body are in the capture): its cookies replace those of the same
    /// name, and it is assigned when the step says so.
    pub fn answered(&mut self, request: &RequestStep, status: u16) {
        for cookie in self.capture.set_cookies.drain(..) {
            let name = cookie.split('=').next().unwrap_or_default();
            self.cookies.retain(|c| c.split('=').next() != Some(name));
            self.cookies.push(cookie);
        }
        if let Some(slot) = request.assign {
            self.vars[slot] = Some(Var::Response(Box::new(Kept {
                status,
                headers: std::mem::take(&mut self.capture.headers),
                body: std::mem::take(&mut self.capture.body),
                json: OnceCell::new(),
            })));
        }
    }
}

/// Whether a `Cookie` field's value (`a=1; b=2`) holds a pair named `name`.
fn has_cookie(value: &[u8], name: &[u8]) -> bool {
    value.split(|&b| b == b';').any(|pair| {
        let pair = pair.trim_ascii_start();
        let key = pair.split(|&b| b == b'=').next().unwrap_or_default();
        key.trim_ascii_end() == name
    })
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
    use crate::scenario::{Step, StepKind, TagFilter, load};

    const ORIGIN: &str = "http://127.0.0.1:3000";

    /// A plan file's steps, loaded as a run loads them.
    fn scenario(text: &str) -> Scenario {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plan.yml");
        std::fs::write(&path, format!("base: '{ORIGIN}'\nplan:\n{text}")).unwrap();
        load(&path, &TagFilter::default(), None).unwrap()
    }

    fn request(step: &Step) -> &RequestStep {
        match &step.kind {
            StepKind::Request(r) => r,
            other => panic!("not a request: {other:?}"),
        }
    }

    /// Renders `step`'s request and answers it with `status`, `headers`
    /// and `body` as the engine would hand them back; returns the path.
    fn exchange(
        state: &mut IterationState,
        step: &Step,
        index: Option<usize>,
        (status, headers, body): (u16, &[(&str, &str)], &str),
    ) -> (String, Vec<(String, String)>) {
        let rendered = state.render(request(step), index, ORIGIN).unwrap();
        let sent = (
            String::from_utf8(rendered.path.to_vec()).unwrap(),
            rendered
                .fields
                .iter()
                .map(|(n, v)| {
                    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
                    (text(n), text(v))
                })
                .collect(),
        );
        let capture = rendered.capture;
        for (name, value) in headers {
            if name.eq_ignore_ascii_case("set-cookie") {
                capture.set_cookies.push(value.to_string());
            }
            if capture.full {
                capture.headers.push((name.to_string(), value.to_string()));
            }
        }
        if capture.full {
            capture.body.extend_from_slice(body.as_bytes());
        }
        state.answered(request(step), status);
        sent
    }

    #[test]
    fn an_iteration_keeps_responses_cookies_and_items_without_io() {
        let plan = scenario(
            "  - name: Log in
    request: {url: '/login?i={{ iteration }}'}
    assign: login
  - name: Token
    assign: {key: token, value: '{{ login.body.token }}'}
  - name: Status
    assert: {key: login.status, value: 200}
  - name: Fetch
    request:
      url: '/users/{{ item }}?t={{ token }}&n={{ index }}'
      headers: {X-Type: '{{ login.headers.content-type }}'}
    with_items: [7, 8, 9]
",
        );
        let mut state = IterationState::new(&plan, 42);
        state.begin(5);
        let login = (
            200,
            &[("content-type", "application/json"), ("set-cookie", "sid=a1")][..],
            r#"{"token": "xyz"}"#,
        );
        let (path, _) = exchange(&mut state, &plan.steps[0], None, login);
        assert_eq!(path, "/login?i=5");
        let StepKind::Assign { slot, value } = &plan.steps[1].kind else {
            panic!()
        };
        let token = state.render_text(value).unwrap();
        assert_eq!(token, "xyz");
        state.set_text(*slot, token);
        let StepKind::Assert { key, expected } = &plan.steps[2].kind else {
            panic!()
        };
        assert_eq!(state.check("Status", key, expected), Ok(()));
        let fetch = &plan.steps[3];
        let items = request(fetch).items.as_ref().unwrap();
        assert_eq!(state.draw(items), 3);
        let second = state.picked(1);
        let (path, fields) = exchange(&mut state, fetch, Some(second), (200, &[], ""));
        assert_eq!(path, "/users/8?t=xyz&n=1");
        assert_eq!(
            fields,
            [
                ("X-Type".to_string(), "application/json".to_string()),
                ("Cookie".to_string(), "sid=a1".to_string())
            ]
        );

        // A failed check says what it saw; a new iteration forgets all.
        let failed = (500, &[("set-cookie", "sid=b2")][..], "{}");
        exchange(&mut state, &plan.steps[0], None, failed);
        assert_eq!(
            state.check("Status", key, expected).unwrap_err(),
            "assert 'Status' failed: login.status is '500', expected '200'"
        );
        state.begin(6);
        let err = state.render(request(fetch), Some(0), ORIGIN).err().unwrap();
        assert!(err.contains("not assigned"), "{err}");
        assert!(state.cookies.is_empty());
    }

    #[test]
    fn an_items_own_cookie_joins_the_jars_in_one_field() {
        let plan = scenario(
            "  - name: Before
    request: {url: /c1, headers: {X-A: x, Cookie: 'a=1; b=2'}}
  - name: Session
    request: {url: /}
  - name: After
    request: {url: /c2, headers: {X-A: x, Cookie: 'a=1; b=2'}}
",
        );
        let mut state = IterationState::new(&plan, 1);
        state.begin(0);
        let plain = (200, &[][..], "");
        let cookie = |fields: &[(String, String)]| -> Vec<String> {
            fields
                .iter()
                .filter(|(n, _)| n.eq_ignore_ascii_case("cookie"))
                .map(|(_, v)| v.clone())
                .collect()
        };
        let (_, before) = exchange(&mut state, &plan.steps[0], None, plain);
        assert_eq!(cookie(&before), ["a=1; b=2"]);
        let sets = (200, &[("set-cookie", "sid=s1"), ("set-cookie", "b=9")][..], "");
        exchange(&mut state, &plan.steps[1], None, sets);
        let (_, after) = exchange(&mut state, &plan.steps[2], None, plain);
        // One field, the item's pairs first; its `b` wins over the jar's.
        assert_eq!(cookie(&after), ["a=1; b=2; sid=s1"]);
        assert_eq!(after[0], ("X-A".to_string(), "x".to_string()), "{after:?}");
    }

    #[test]
    fn a_url_off_the_plans_origin_is_refused() {
        let plan = scenario("  - name: Away\n    request: {url: 'http://u:pw@127.0.0.2/x'}\n");
        let mut state = IterationState::new(&plan, 1);
        state.begin(0);
        let err = state.render(request(&plan.steps[0]), None, ORIGIN).err().unwrap();
        assert_eq!(
            err,
            "'http://u:***@127.0.0.2/x' is not on the plan's origin http://127.0.0.1:3000"
        );
    }

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
