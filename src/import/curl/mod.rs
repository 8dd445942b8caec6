//! `volley import curl`: curl command lines, one request per URL, as
//! browsers' "Copy as cURL" writes them (bash quoting, `\` line breaks,
//! several commands joined by ` ;`) or as people type them.
//!
//! The options that shape a request become its method, headers and body;
//! the ones that only change what curl does with the answer (`-s`, `-L`,
//! `-o FILE`...) are named in the header comment as ignored. Any other
//! option is an error naming it and its line: an option silently dropped
//! would make a plan that sends something else than the command did.
//! Credentials (`-u`) never go into the plan: the plan asks for an
//! environment variable, and the header says which to set; so does a shell
//! variable (`$API_KEY`), which the plan reads from the environment too.
//! `-F` fields and files become a `multipart/form-data` body, encoded as
//! curl encodes it. Windows' cmd.exe form of "Copy as cURL" is read too.

mod body;
mod options;
#[cfg(test)]
mod tests;
mod urls;

use super::plan::{Body, Item, Plan, Request, Step};
use super::request::{self, Base, FormPart, has_field};
use super::shell::{self, VAR_OPEN};
use super::{Input, Options, Problem};
use options::read_command;
use urls::{contains_var, references, url_parts};

/// What `--compressed` makes curl send.
const COMPRESSED: &str = "deflate, gzip, br, zstd";
/// One curl command, read.
#[derive(Default)]
struct Curl {
    method: Option<String>,
    urls: Vec<String>,
    headers: Vec<(String, String)>,
    /// `-d` and friends, in order, joined with `&` when sent.
    data: Vec<Vec<u8>>,
    /// `--json` parts, sent one after the other.
    json: Vec<Vec<u8>>,
    /// `-F` parts, sent as one multipart body.
    form: Vec<FormPart>,
    get: bool,
    head: bool,
    user: bool,
    compressed: bool,
    insecure: bool,
    globoff: bool,
    ignored: Vec<String>,
    dropped: Vec<String>,
}
pub fn import(input: &Input, options: &Options) -> Result<Plan, Problem> {
    let cmd = shell::is_cmd(&input.text);
    let commands = if cmd {
        shell::split_cmd(&input.text)?
    } else {
        shell::split(&input.text)?
    };
    if commands.is_empty() {
        return Err(Problem::at("line 1", "no curl command in the input"));
    }
    let mut requests = Vec::new();
    let mut ignored = Vec::new();
    let mut dropped = Vec::new();
    let mut insecure = false;
    let mut credentials = Vec::new();
    let mut variables: Vec<String> = Vec::new();
    for command in &commands {
        let curl = read_command(command)?;
        for option in &curl.ignored {
            if !ignored.contains(option) {
                ignored.push(option.clone());
            }
        }
        for name in &curl.dropped {
            if !dropped.contains(name) {
                dropped.push(name.clone());
            }
        }
        insecure |= curl.insecure;
        let at = |message: String| Problem::on_line(command.line, message);
        let mut headers = curl.headers.clone();
        if curl.user {
            let variable = if credentials.is_empty() {
                "CURL_BASIC_AUTH".to_string()
            } else {
                format!("CURL_BASIC_AUTH_{}", credentials.len() + 1)
            };
            headers.retain(|(n, _)| !n.eq_ignore_ascii_case("authorization"));
            headers.push(("Authorization".into(), format!("Basic {{{{ {variable} }}}}")));
            credentials.push((variable, command.line));
        }
        if curl.compressed && !has_field(&headers, "accept-encoding") {
            headers.push(("Accept-Encoding".into(), COMPRESSED.into()));
        }
        let (mut body, content_type) = if !curl.form.is_empty() {
            if !curl.data.is_empty() || !curl.json.is_empty() {
                return Err(at(
                    "-F and -d (or --json) cannot be mixed: curl refuses it too".into()
                ));
            }
            let (body, content_type) = request::multipart(&curl.form);
            headers.retain(|(n, v)| !n.eq_ignore_ascii_case("content-type") || v.contains("boundary="));
            if !has_field(&headers, "content-type") {
                headers.push(("Content-Type".into(), content_type));
            }
            (Some(body), "")
        } else if !curl.json.is_empty() {
            (Some(curl.json.concat()), "application/json")
        } else if !curl.data.is_empty() {
            (Some(curl.data.join(&b'&')), "application/x-www-form-urlencoded")
        } else {
            (None, "")
        };
        if !curl.json.is_empty() && !has_field(&headers, "accept") {
            headers.push(("Accept".into(), "application/json".into()));
        }
        let mut query_data = None;
        if curl.get {
            query_data = body.take();
        } else if body.is_some() && !has_field(&headers, "content-type") {
            headers.push(("Content-Type".into(), content_type.into()));
        }
        let method = curl.method.clone().unwrap_or_else(|| {
            if curl.head {
                "HEAD".into()
            } else if body.is_some() {
                "POST".into()
            } else {
                "GET".into()
            }
        });
        if curl.urls.is_empty() {
            return Err(at("the curl command has no URL".into()));
        }
        if method.contains(VAR_OPEN) {
            return Err(at("-X takes the method itself, not a shell variable".into()));
        }
        for (name, value) in &mut headers {
            if name.contains(VAR_OPEN) {
                return Err(at(format!(
                    "the header name '{}' is a shell variable: write the name",
                    references(name, &mut Vec::new())
                )));
            }
            if value.contains(VAR_OPEN) {
                *value = references(value, &mut variables);
            }
        }
        let body = match body {
            Some(bytes) if contains_var(&bytes) => {
                let text = String::from_utf8(bytes)
                    .map_err(|_| at("a body with a shell variable must be UTF-8 text".into()))?;
                if request::looks_templated(&text) {
                    return Err(at(
                        "a body with both a shell variable and '{{' cannot be a plan's template".into(),
                    ));
                }
                Some(Body::Template(references(&text, &mut variables)))
            }
            body => body.map(Body::Bytes),
        };
        for raw in &curl.urls {
            let (origin, mut path) = url_parts(
                raw,
                curl.globoff,
                options.base.as_ref(),
                &mut variables,
                command.line,
            )?;
            if let Some(data) = &query_data {
                path.push(if path.contains('?') { '&' } else { '?' });
                let data = request::literal_path(&String::from_utf8_lossy(data));
                path.push_str(&references(&data, &mut variables));
            }
            requests.push((
                origin,
                Request {
                    method: method.clone(),
                    url: path,
                    headers: headers.clone(),
                    body: body.clone(),
                },
            ));
        }
    }
    let first_origin = requests[0].0.clone();
    let base = options.base.clone().unwrap_or(Base {
        origin: first_origin.clone(),
        path: String::new(),
    });
    let mut header = vec![format!(
        "Imported by 'volley import curl' from {}: {} curl command(s){}.",
        input.name,
        commands.len(),
        if cmd { ", written for Windows' cmd.exe" } else { "" }
    )];
    if !variables.is_empty() {
        header.push(format!(
            "The commands read shell variables, which the plan reads from the environment when it runs: set {}.",
            variables.join(", ")
        ));
    }
    let mut items = Vec::new();
    let mut other_origins: Vec<String> = Vec::new();
    for (origin, request) in requests {
        if origin != first_origin {
            if !other_origins.contains(&origin) {
                other_origins.push(origin);
            }
            continue;
        }
        let request = Request {
            url: format!("{}{}", base.path, request.url),
            ..request
        };
        items.push(Item {
            name: request::item_name(&request.method, &request.url),
            tags: Vec::new(),
            step: Step::Request(request),
            comment: None,
        });
    }
    if !other_origins.is_empty() {
        header.push(format!(
            "Left out: the requests to other origins than {first_origin} ({}); a plan runs against one origin: import those commands on their own.",
            request::list_of(&other_origins, 5)
        ));
    }
    for (variable, line) in &credentials {
        header.push(format!(
            "Set {variable} to the base64 of the -u credentials of line {line}: export {variable}=$(printf %s 'USER:PASSWORD' | base64 -w0)"
        ));
    }
    if insecure {
        header.push(
            "The commands skip TLS verification (-k): run the plan with 'volley plan --insecure'.".into(),
        );
    }
    if !dropped.is_empty() {
        header.push(format!(
            "Header fields left out (the connection's own or a browser's, which volley sets or need not send): {}.",
            request::list_of(&dropped, 8)
        ));
    }
    if !ignored.is_empty() {
        header.push(format!(
            "Ignored curl options (they do not change what is sent): {}.",
            ignored.join(", ")
        ));
    }
    Ok(Plan {
        header,
        base: base.origin,
        items,
        suffix: None,
    })
}
