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

use super::plan::{Body, Item, Plan, Request, Step};
use super::request::{self, Base, FormPart, has_field};
use super::shell::{self, Command, VAR_CLOSE, VAR_OPEN};
use super::{Input, Options, Problem};

/// What `--compressed` makes curl send.
const COMPRESSED: &str = "deflate, gzip, br, zstd";

/// Options that take a value and change nothing curl sends.
const IGNORED_WITH_VALUE: &[&str] = &[
    "-o",
    "--output",
    "-m",
    "--max-time",
    "--connect-timeout",
    "--retry",
    "--retry-delay",
    "--retry-max-time",
    "-w",
    "--write-out",
    "-D",
    "--dump-header",
    "--trace",
    "--trace-ascii",
    "--stderr",
    "--max-redirs",
];

/// Options without a value that change nothing curl sends.
const IGNORED: &[&str] = &[
    "-s",
    "--silent",
    "-S",
    "--show-error",
    "-v",
    "--verbose",
    "-i",
    "--include",
    "-L",
    "--location",
    "-f",
    "--fail",
    "--fail-with-body",
    "-O",
    "--remote-name",
    "-#",
    "--progress-bar",
    "-N",
    "--no-buffer",
    "--http1.1",
    "--http2",
    "--http2-prior-knowledge",
    "-q",
    "--disable",
    "--compressed-ssh",
    "--no-progress-meter",
    "--raw",
    "--tr-encoding",
    "--path-as-is",
];

/// Every short option that takes a value (for `-XPOST`-style bundles).
const SHORT_WITH_VALUE: &str = "XHdubAeomwDTFK";

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
        let at = |message: String| Problem::at(format!("line {}", command.line), message);
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
            let (origin, mut path) =
                url_parts(raw, curl.globoff, options.base.as_ref(), &mut variables).map_err(at)?;
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

fn text(word: &[u8], line: usize) -> Result<String, Problem> {
    String::from_utf8(word.to_vec())
        .map_err(|_| Problem::at(format!("line {line}"), "an option or URL that is not UTF-8 text"))
}

/// Reads one command's options.
fn read_command(command: &Command) -> Result<Curl, Problem> {
    let line = command.line;
    let at = |message: String| Problem::at(format!("line {line}"), message);
    let mut words = command.words.iter();
    let program = text(words.next().expect("a command has a word"), line)?;
    if program != "curl" && !program.ends_with("/curl") && program != "curl.exe" {
        return Err(at(format!(
            "'{program}' is not curl: only curl command lines can be imported"
        )));
    }
    let mut curl = Curl::default();
    let mut options_end = false;
    while let Some(word) = words.next() {
        let word_text = text(word, line);
        let is_option = !options_end && word.len() > 1 && word[0] == b'-';
        if !is_option {
            curl.urls.push(word_text?);
            continue;
        }
        let word = word_text?;
        if word == "--" {
            options_end = true;
            continue;
        }
        // `-sSL`, `-XPOST`, `-HAccept:x`: split a bundle of short options.
        let (option, attached) = if word.starts_with("--") {
            (word.clone(), None)
        } else {
            let mut chars = word[1..].chars();
            let mut option = String::new();
            let mut attached = None;
            while let Some(c) = chars.next() {
                let rest: String = chars.clone().collect();
                if SHORT_WITH_VALUE.contains(c) && !rest.is_empty() {
                    option = format!("-{c}");
                    attached = Some(rest);
                    break;
                }
                if chars.clone().next().is_some() {
                    // A flag in a bundle: take it now.
                    flag(&mut curl, &format!("-{c}")).map_err(at)?;
                } else {
                    option = format!("-{c}");
                }
            }
            (option, attached)
        };
        if option.is_empty() {
            continue;
        }
        let takes_value = option_takes_value(&option);
        if !takes_value {
            if attached.is_some() {
                return Err(at(format!("'{word}': '{option}' takes no value")));
            }
            flag(&mut curl, &option).map_err(at)?;
            continue;
        }
        let value: Vec<u8> = match attached {
            Some(value) => value.into_bytes(),
            None => words
                .next()
                .cloned()
                .ok_or_else(|| at(format!("'{option}' needs a value")))?,
        };
        valued(&mut curl, &option, value, line)?;
    }
    Ok(curl)
}

fn option_takes_value(option: &str) -> bool {
    matches!(
        option,
        "-X" | "--request"
            | "-H"
            | "--header"
            | "-d"
            | "--data"
            | "--data-ascii"
            | "--data-raw"
            | "--data-binary"
            | "--data-urlencode"
            | "--json"
            | "-u"
            | "--user"
            | "-b"
            | "--cookie"
            | "-A"
            | "--user-agent"
            | "-e"
            | "--referer"
            | "--url"
            | "-F"
            | "--form"
            | "--form-string"
    ) || IGNORED_WITH_VALUE.contains(&option)
        || (option.len() == 2 && SHORT_WITH_VALUE.contains(&option[1..]))
}

/// An option without a value.
// A leaf parser: its message is the value.
fn flag(curl: &mut Curl, option: &str) -> Result<(), String> {
    match option {
        "-G" | "--get" => curl.get = true,
        "-I" | "--head" => curl.head = true,
        "-k" | "--insecure" => curl.insecure = true,
        "--compressed" => curl.compressed = true,
        "-g" | "--globoff" => curl.globoff = true,
        _ if IGNORED.contains(&option) => {
            if !curl.ignored.iter().any(|o| o == option) {
                curl.ignored.push(option.to_string());
            }
        }
        _ if option_takes_value(option) => return Err(format!("'{option}' needs a value")),
        _ => return Err(unknown(option)),
    }
    Ok(())
}

fn unknown(option: &str) -> String {
    format!(
        "curl option '{option}' is not supported by volley import (supported: -X, -H, -d, --data-raw, \
         --data-binary, --data-urlencode, --json, -F, --form-string, -G, -I, -u, -b, -A, -e, --compressed, -k, --url, -g)"
    )
}

/// An option with its value.
fn valued(curl: &mut Curl, option: &str, value: Vec<u8>, line: usize) -> Result<(), Problem> {
    let at = |message: String| Problem::at(format!("line {line}"), message);
    let as_text = |value: &[u8]| text(value, line);
    match option {
        "-X" | "--request" => curl.method = Some(as_text(&value)?.to_ascii_uppercase()),
        "--url" => curl.urls.push(as_text(&value)?),
        "-H" | "--header" => {
            let header = as_text(&value)?;
            if header.starts_with('@') {
                return Err(at(format!(
                    "'-H {header}' reads headers from a file: give them as -H 'Name: value'"
                )));
            }
            if let Some((name, value)) = header.split_once(':') {
                let (name, value) = (name.trim(), value.trim());
                if value.is_empty() {
                    // `-H 'Name:'` removes a header curl would send.
                    return Ok(());
                }
                // A browser's copy names pseudo-headers without their colon.
                if name.eq_ignore_ascii_case("authority")
                    || (request::dropped_field(name).is_some() && !name.eq_ignore_ascii_case("host"))
                {
                    if !curl.dropped.iter().any(|d| d.eq_ignore_ascii_case(name)) {
                        curl.dropped.push(name.to_string());
                    }
                    return Ok(());
                }
                curl.headers.push((name.into(), value.into()));
            } else if let Some(name) = header.strip_suffix(';') {
                curl.headers.push((name.trim().into(), String::new()));
            } else {
                return Err(at(format!("'-H {header}' is not a header: write 'Name: value'")));
            }
            curl.headers = request::join_repeated(std::mem::take(&mut curl.headers));
        }
        "-d" | "--data" | "--data-ascii" => {
            let data = match value.strip_prefix(b"@") {
                Some(file) => {
                    let mut bytes = read_file(file, line)?;
                    bytes.retain(|b| *b != b'\r' && *b != b'\n');
                    bytes
                }
                None => value,
            };
            curl.data.push(data);
        }
        "--data-raw" => curl.data.push(value),
        "--data-binary" => curl.data.push(match value.strip_prefix(b"@") {
            Some(file) => read_file(file, line)?,
            None => value,
        }),
        "--json" => curl.json.push(match value.strip_prefix(b"@") {
            Some(file) => read_file(file, line)?,
            None => value,
        }),
        "--data-urlencode" => curl.data.push(urlencoded(&value, line)?),
        "-u" | "--user" => curl.user = true,
        "-F" | "--form" => curl.form.push(form_part(&as_text(&value)?, false, line)?),
        "--form-string" => curl.form.push(form_part(&as_text(&value)?, true, line)?),
        "-b" | "--cookie" => {
            let cookie = as_text(&value)?;
            if !cookie.contains('=') {
                return Err(at(format!(
                    "'-b {cookie}' reads cookies from a file: give them as -b 'name=value' (volley's cookie jar keeps the ones responses set)"
                )));
            }
            curl.headers.push(("Cookie".into(), cookie));
            curl.headers = request::join_repeated(std::mem::take(&mut curl.headers));
        }
        "-A" | "--user-agent" => curl.headers.push(("User-Agent".into(), as_text(&value)?)),
        "-e" | "--referer" => {
            let referer = as_text(&value)?;
            let referer = referer.strip_suffix(";auto").unwrap_or(&referer);
            if !referer.is_empty() {
                curl.headers.push(("Referer".into(), referer.into()));
            }
        }
        _ if IGNORED_WITH_VALUE.contains(&option) => {
            if !curl.ignored.iter().any(|o| o == option) {
                curl.ignored.push(option.to_string());
            }
        }
        _ => return Err(at(unknown(option))),
    }
    Ok(())
}

/// `@FILE` of `-d`: read now (the plan carries the bytes).
fn read_file(name: &[u8], line: usize) -> Result<Vec<u8>, Problem> {
    let name = String::from_utf8_lossy(name);
    if name == "-" {
        return Err(Problem::at(
            format!("line {line}"),
            "'@-' reads the body from standard input: put it in a file and give @FILE",
        ));
    }
    std::fs::read(&*name)
        .map_err(|e| Problem::at(format!("line {line}"), format!("cannot read '{name}': {e}")))
}

/// `--data-urlencode`'s forms: `content`, `=content`, `name=content`,
/// `@file`, `name@file`.
fn urlencoded(value: &[u8], line: usize) -> Result<Vec<u8>, Problem> {
    let encode = |bytes: &[u8]| -> String { url::form_urlencoded::byte_serialize(bytes).collect() };
    let eq = value.iter().position(|&b| b == b'=');
    let at = value.iter().position(|&b| b == b'@');
    Ok(match (eq, at) {
        (Some(eq), at) if at.is_none_or(|at| eq < at) => {
            let (name, content) = (&value[..eq], &value[eq + 1..]);
            if name.is_empty() {
                encode(content).into_bytes()
            } else {
                [name, b"=", encode(content).as_bytes()].concat()
            }
        }
        (_, Some(at)) => {
            let content = read_file(&value[at + 1..], line)?;
            let name = &value[..at];
            if name.is_empty() {
                encode(&content).into_bytes()
            } else {
                [name, b"=", encode(&content).as_bytes()].concat()
            }
        }
        _ => encode(value).into_bytes(),
    })
}

/// `-F`'s forms: `name=value`, `name=@file` (a file, sent with its name),
/// `name=<file` (a field whose value is the file's), each with `;type=`
/// and `;filename=`; `--form-string` takes the value as it is.
fn form_part(spec: &str, literal: bool, line: usize) -> Result<FormPart, Problem> {
    let at = |message: String| Problem::at(format!("line {line}"), message);
    let Some((name, content)) = spec.split_once('=') else {
        return Err(at(format!(
            "'-F {spec}' is not a form field: write -F 'name=value'"
        )));
    };
    let mut part = FormPart {
        name: name.to_string(),
        value: Vec::new(),
        filename: None,
        content_type: None,
    };
    if literal {
        part.value = content.as_bytes().to_vec();
        return Ok(part);
    }
    // The value (or file), then curl's `;type=`-style options.
    let (value, options) = match content.strip_prefix('"') {
        Some(quoted) => {
            let mut value = String::new();
            let mut chars = quoted.chars();
            loop {
                match chars.next() {
                    Some('\\') => value.extend(chars.next()),
                    Some('"') => break,
                    Some(c) => value.push(c),
                    None => return Err(at(format!("'-F {spec}': a \" quote is never closed"))),
                }
            }
            (value, chars.as_str().to_string())
        }
        None => {
            let mut value = content.to_string();
            let mut options = String::new();
            for option in [";type=", ";filename=", ";headers=", ";encoder="] {
                if let Some(at) = value.find(option) {
                    options = format!("{}{options}", &value[at..]);
                    value.truncate(at);
                }
            }
            (value, options)
        }
    };
    for option in options.split(';').filter(|o| !o.is_empty()) {
        match option.split_once('=') {
            Some(("type", t)) => part.content_type = Some(t.to_string()),
            Some(("filename", f)) => part.filename = Some(f.trim_matches('"').to_string()),
            _ => {
                return Err(at(format!(
                    "'-F {spec}': the part option '{option}' is not supported"
                )));
            }
        }
    }
    if let Some(file) = value.strip_prefix('@') {
        part.value = read_file(file.as_bytes(), line)?;
        let base = file.rsplit(['/', '\\']).next().unwrap_or(file);
        part.filename.get_or_insert_with(|| base.to_string());
        part.content_type
            .get_or_insert_with(|| content_type_of(base).to_string());
    } else if let Some(file) = value.strip_prefix('<') {
        part.value = read_file(file.as_bytes(), line)?;
    } else {
        part.value = value.into_bytes();
    }
    Ok(part)
}

/// The type curl gives a file part by its name's extension.
fn content_type_of(file: &str) -> &'static str {
    let extension = file
        .rsplit_once('.')
        .map(|(_, e)| e.to_ascii_lowercase())
        .unwrap_or_default();
    match extension.as_str() {
        "gif" => "image/gif",
        "jpg" | "jpeg" => "image/jpeg",
        "png" => "image/png",
        "svg" => "image/svg+xml",
        "txt" => "text/plain",
        "htm" | "html" => "text/html",
        "pdf" => "application/pdf",
        "xml" => "application/xml",
        _ => "application/octet-stream",
    }
}

/// Whether bytes hold a shell variable's mark.
fn contains_var(bytes: &[u8]) -> bool {
    let mut mark = [0; 4];
    let mark = VAR_OPEN.encode_utf8(&mut mark).as_bytes();
    bytes.windows(mark.len()).any(|w| w == mark)
}

/// Text with each shell variable's mark as a reference to the environment
/// variable of that name (`{{ API_KEY }}`); the names are added to `names`.
fn references(text: &str, names: &mut Vec<String>) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(open) = rest.find(VAR_OPEN) {
        out.push_str(&rest[..open]);
        let after = &rest[open + VAR_OPEN.len_utf8()..];
        let close = after.find(VAR_CLOSE).unwrap_or(after.len());
        let name = &after[..close];
        if !names.iter().any(|n| n == name) {
            names.push(name.to_string());
        }
        out.push_str(&format!("{{{{ {name} }}}}"));
        rest = after.get(close + VAR_CLOSE.len_utf8()..).unwrap_or("");
    }
    out.push_str(rest);
    out
}

/// A URL's origin and path (template text, ready for a plan) as curl would
/// request it; a shell variable in the path becomes a reference, and one
/// that gives the server (`$BASE_URL/users`) needs `--base`, which then
/// stands for it.
// A leaf parser: its message is the value.
fn url_parts(
    raw: &str,
    globoff: bool,
    base: Option<&Base>,
    names: &mut Vec<String>,
) -> Result<(String, String), String> {
    let host_start = raw.find("://").map_or(0, |i| i + 3);
    let host_end = raw[host_start..]
        .find(['/', '?'])
        .map_or(raw.len(), |e| host_start + e);
    let mut raw = raw.to_string();
    if raw[..host_end].contains(VAR_OPEN) {
        let Some(base) = base else {
            return Err(format!(
                "the server of '{}' is a shell variable: give the server with --base URL",
                references(&raw, &mut Vec::new())
            ));
        };
        raw = format!("{}{}", base.origin, &raw[host_end..]);
    }
    // Each variable's mark as a word a URL keeps as it is, while parsed.
    let mut found = Vec::new();
    let marked = references(&raw, &mut found);
    let mut plain = marked.clone();
    for (i, name) in found.iter().enumerate() {
        plain = plain.replace(&format!("{{{{ {name} }}}}"), &format!("VOLLEYVAR{i}X"));
    }
    let url = curl_url(&plain, globoff)?;
    let (origin, path) = request::split_url(&url)?;
    let mut path = request::literal_path(&path);
    for (i, name) in found.iter().enumerate() {
        path = path.replace(&format!("VOLLEYVAR{i}X"), &format!("{{{{ {name} }}}}"));
        if !names.contains(name) {
            names.push(name.clone());
        }
    }
    Ok((origin, path))
}

/// The URL curl would request: `http://` when no scheme is given, curl's
/// glob escapes (`\[`, `\{`, which "Copy as cURL" writes) undone; an
/// unescaped glob range or set, which would be many requests, is an error.
// A leaf parser: its message is the value.
fn curl_url(raw: &str, globoff: bool) -> Result<String, String> {
    let with_scheme = if raw.contains("://") {
        raw.to_string()
    } else {
        format!("http://{raw}")
    };
    if globoff {
        return Ok(with_scheme);
    }
    // The host's brackets (an IPv6 address) are not a glob.
    let host_end = with_scheme
        .find("://")
        .map(|i| i + 3)
        .and_then(|start| with_scheme[start..].find(['/', '?']).map(|e| start + e))
        .unwrap_or(with_scheme.len());
    let (head, rest) = with_scheme.split_at(host_end);
    let mut out = head.to_string();
    let mut chars = rest.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek().is_some_and(|n| "[]{}".contains(*n)) => {
                out.push(chars.next().expect("peeked"));
            }
            '[' | '{' => {
                return Err(format!(
                    "'{raw}' uses curl's URL globbing ('{c}'), which makes many requests: escape it (\\{c}) or give -g"
                ));
            }
            c => out.push(c),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(text: &str) -> Result<Plan, Problem> {
        let input = Input {
            name: "curl.txt".into(),
            text: text.into(),
        };
        import(&input, &Options::default())
    }

    fn requests(plan: &Plan) -> Vec<&Request> {
        plan.items
            .iter()
            .filter_map(|i| match &i.step {
                Step::Request(r) => Some(r),
                Step::Delay(_) => None,
            })
            .collect()
    }

    #[test]
    fn a_browser_copy_becomes_a_request() {
        let plan = plan(
            "curl 'http://127.0.0.1:3000/api/users?page=2' \\\n  -H 'accept: */*' \\\n  -H 'sec-ch-ua: \"Chromium\"' \\\n  -H 'authority: 127.0.0.1:3000' \\\n  -b 'session=sess-bob' \\\n  --data-raw $'{\"name\":\"O\\'Brien\"}' \\\n  --compressed ;\ncurl 'http://127.0.0.1:3000/api/me' -X 'DELETE' -H 'x-empty;'",
        )
        .unwrap();
        assert_eq!(plan.base, "http://127.0.0.1:3000");
        let r = requests(&plan);
        assert_eq!(r[0].method, "POST");
        assert_eq!(r[0].url, "/api/users?page=2");
        assert_eq!(
            r[0].headers,
            [
                ("accept".to_string(), "*/*".to_string()),
                ("Cookie".into(), "session=sess-bob".into()),
                ("Accept-Encoding".into(), COMPRESSED.into()),
                ("Content-Type".into(), "application/x-www-form-urlencoded".into()),
            ]
        );
        assert_eq!(r[0].body, Some(Body::Bytes(b"{\"name\":\"O'Brien\"}".to_vec())));
        assert_eq!((r[1].method.as_str(), r[1].body.as_ref()), ("DELETE", None));
        assert_eq!(r[1].headers, [("x-empty".to_string(), String::new())]);
        assert!(
            plan.header
                .iter()
                .any(|h| h.contains("sec-ch-ua") && h.contains("authority")),
            "{:?}",
            plan.header
        );
    }

    #[test]
    fn data_options_as_curl_sends_them() {
        let plan = plan(
            "curl -sS http://h/a -d a=1 -d 'b=2' --data-urlencode 'q=x y&z' --data-urlencode =v/w\n\
             curl -G http://h/b?x=1 -d y=2\n\
             curl --json '{\"a\":1}' h/c -XPUT\n\
             curl -I http://h/d -u bob:secret\n\
             curl -A agent -e 'http://h/;auto' --url http://h/e -k",
        )
        .unwrap();
        let r = requests(&plan);
        assert_eq!(r[0].body, Some(Body::Bytes(b"a=1&b=2&q=x+y%26z&v%2Fw".to_vec())));
        assert_eq!(
            (r[1].method.as_str(), r[1].url.as_str(), r[1].body.as_ref()),
            ("GET", "/b?x=1&y=2", None)
        );
        assert_eq!(r[2].method, "PUT");
        assert!(
            r[2].headers
                .contains(&("Content-Type".into(), "application/json".into()))
        );
        assert!(
            r[2].headers
                .contains(&("Accept".into(), "application/json".into()))
        );
        assert_eq!(r[3].method, "HEAD");
        assert_eq!(
            r[3].headers,
            [(
                "Authorization".to_string(),
                "Basic {{ CURL_BASIC_AUTH }}".to_string()
            )]
        );
        assert_eq!(
            r[4].headers,
            [
                ("User-Agent".to_string(), "agent".to_string()),
                ("Referer".into(), "http://h/".into())
            ]
        );
        let header = plan.header.join("\n");
        assert!(!header.contains("secret") && !header.contains("bob"), "{header}");
        assert!(header.contains("CURL_BASIC_AUTH"), "{header}");
        assert!(header.contains("--insecure"), "{header}");
        assert!(header.contains("-s, -S"), "{header}");
    }

    #[test]
    fn globs_brackets_and_templates() {
        let r = plan("curl 'http://h/a\\[1\\]?q=\\{\\{x\\}\\}'").unwrap();
        assert_eq!(requests(&r)[0].url, "/a[1]?q=%7B%7Bx%7D%7D");
        assert!(
            plan("curl 'http://h/a[1-3]'")
                .unwrap_err()
                .message
                .contains("globbing")
        );
        let ipv6 = plan("curl -g 'http://[::1]:8080/x{y}'").unwrap();
        assert_eq!(ipv6.base, "http://[::1]:8080");
        assert_eq!(plan("curl 'http://[::1]/z'").unwrap().base, "http://[::1]");
    }

    #[test]
    fn shell_variables_become_environment_references() {
        let plan = plan(
            "curl \"https://api.test/v1/$ACCOUNT/items?limit=${LIMIT}\" \\\n  -H \"Authorization: Bearer $API_KEY\" \\\n  -d \"{\\\"owner\\\": \\\"$OWNER\\\"}\"",
        )
        .unwrap();
        let r = requests(&plan)[0];
        assert_eq!(r.url, "/v1/{{ ACCOUNT }}/items?limit={{ LIMIT }}");
        assert_eq!(
            r.headers[0],
            ("Authorization".into(), "Bearer {{ API_KEY }}".into())
        );
        assert_eq!(
            r.body,
            Some(Body::Template("{\"owner\": \"{{ OWNER }}\"}".into()))
        );
        let header = plan.header.join("\n");
        assert!(header.contains("set API_KEY, OWNER, ACCOUNT, LIMIT"), "{header}");
        // A variable that names the server is what --base gives.
        let input = Input {
            name: "curl.txt".into(),
            text: "curl \"$BASE_URL/users\"".into(),
        };
        let options = Options {
            base: Some(Base::parse("http://127.0.0.1:3000/api").unwrap()),
            ..Options::default()
        };
        let based = import(&input, &options).unwrap();
        assert_eq!(
            (based.base.as_str(), requests(&based)[0].url.as_str()),
            ("http://127.0.0.1:3000", "/api/users")
        );
    }

    #[test]
    fn form_fields_and_files_are_a_multipart_body() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("notes.txt");
        std::fs::write(&file, "line one\n").unwrap();
        let value = dir.path().join("v");
        std::fs::write(&value, "from a file").unwrap();
        let plan = plan(&format!(
            "curl http://h.test/up -F name=ann -F 'doc=@{};type=text/markdown' -F 'raw=@{}' -F 'v=<{}' --form-string 'lit=@x;type=y'",
            file.display(),
            file.display(),
            value.display()
        ))
        .unwrap();
        let r = requests(&plan)[0];
        assert_eq!(r.method, "POST");
        let boundary = "------------------------volley0000000000000000";
        assert_eq!(
            r.headers,
            [(
                "Content-Type".to_string(),
                format!("multipart/form-data; boundary={boundary}")
            )]
        );
        let expected = format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"name\"\r\n\r\nann\r\n\
             --{boundary}\r\nContent-Disposition: form-data; name=\"doc\"; filename=\"notes.txt\"\r\nContent-Type: text/markdown\r\n\r\nline one\n\r\n\
             --{boundary}\r\nContent-Disposition: form-data; name=\"raw\"; filename=\"notes.txt\"\r\nContent-Type: text/plain\r\n\r\nline one\n\r\n\
             --{boundary}\r\nContent-Disposition: form-data; name=\"v\"\r\n\r\nfrom a file\r\n\
             --{boundary}\r\nContent-Disposition: form-data; name=\"lit\"\r\n\r\n@x;type=y\r\n\
             --{boundary}--\r\n"
        );
        assert_eq!(r.body, Some(Body::Bytes(expected.into_bytes())));
    }

    #[test]
    fn windows_copy_as_curl_cmd_is_read() {
        let plan = plan(
            "curl ^\"http://h.test/api?q=1^\" ^\r\n  -H ^\"accept: application/json^\" ^\r\n  --data-raw ^\"^{^\\^\"a^\\^\":1^}^\"",
        )
        .unwrap();
        let r = requests(&plan)[0];
        assert_eq!((r.method.as_str(), r.url.as_str()), ("POST", "/api?q=1"));
        assert_eq!(r.body, Some(Body::Bytes(b"{\"a\":1}".to_vec())));
        assert!(plan.header[0].contains("cmd.exe"), "{:?}", plan.header);
    }

    #[test]
    fn other_origins_are_left_out_and_said() {
        let plan = plan("curl http://a.test/1; curl http://b.test/2; curl http://a.test/3").unwrap();
        assert_eq!(requests(&plan).len(), 2);
        assert!(
            plan.header.iter().any(|h| h.contains("http://b.test")),
            "{:?}",
            plan.header
        );
    }

    #[test]
    fn unknown_options_and_bad_commands_are_errors() {
        for (text, says) in [
            ("curl -F a http://h/", "not a form field"),
            ("curl -F a=b -d c http://h/", "cannot be mixed"),
            ("curl --proxy-user a:b http://h/", "'--proxy-user'"),
            ("curl $BASE/a", "--base"),
            ("curl -X \"$M\" http://h/", "not a shell variable"),
            ("curl -sZ http://h/", "'-Z'"),
            ("wget http://h/", "not curl"),
            ("curl -X", "needs a value"),
            ("curl -b cookies.txt http://h/", "from a file"),
            ("curl -H nonsense http://h/", "not a header"),
            ("curl -s", "no URL"),
            ("", "no curl command"),
        ] {
            let problem = plan(text).unwrap_err();
            assert!(problem.message.contains(says), "{text}: {problem}");
        }
        assert_eq!(
            plan("curl http://h/\ncurl --nope http://h/").unwrap_err().place,
            "line 2"
        );
    }
}
