//! `volley import openapi`: an OpenAPI 3.0 or 3.1 description (YAML or
//! JSON; Swagger 2.0 too) as one plan item per operation, in the order the
//! document lists them, named by `operationId` and tagged with the
//! operation's tags, so `volley plan --tags` picks them as `--tags` picks
//! operations here.
//!
//! Path and query parameters and bodies are filled by [`schema`]: the
//! description's examples first, made-up values last; required parameters
//! are always sent, optional ones when the description gives a value for
//! them. `servers[0]` is the base (`--base` replaces it). Security schemes
//! become header fields (or query parameters) holding `{{ NAME }}`
//! placeholders, filled from the environment when the plan runs: a secret
//! is never written into the plan, and the header comment says what to set.
//!
//! The document is read as a tree of values rather than through a typed
//! OpenAPI crate: one reader then covers 2.0, 3.0 and 3.1 (each crate
//! covers one), tolerates the extensions real documents carry, and names
//! the JSON pointer of whatever is wrong.

mod choice;
pub mod schema;
mod security;

use super::doc::{self, At, Node};
use super::plan::{Body, Item, Plan, Request, Step};
use super::request::{self, Base};
use super::{Input, Options as All, Problem};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

/// OpenAPI-only options.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Only operations with one of these tags.
    pub tags: Vec<String>,
    /// Only these operations (by `operationId`).
    pub operations: Vec<String>,
}

/// How many `$ref`s in a row may be followed (more is a cycle).
const MAX_HOPS: usize = 32;

/// The methods a path item may have, as OpenAPI names them.
const METHODS: &[&str] = &[
    "get", "put", "post", "delete", "options", "head", "patch", "trace",
];

/// What a path parameter's value may hold unescaped (RFC 3986 unreserved).
const PATH_VALUE: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// The document, with what reading it needs.
pub struct Spec<'a> {
    root: At<'a>,
    /// Swagger 2.0 (definitions, `in: body`, `securityDefinitions`).
    v2: bool,
}

impl<'a> Spec<'a> {
    /// Follows `$ref`s (local ones: `#/components/...`) to the node meant.
    pub fn resolve(&self, mut at: At<'a>) -> Result<At<'a>, Problem> {
        for _ in 0..MAX_HOPS {
            let Some(reference) = at.get("$ref") else {
                return Ok(at);
            };
            let target = reference.text()?;
            let Some(pointer) = target.strip_prefix('#') else {
                return Err(reference.problem(format!(
                    "'{target}' is in another file: bundle the description into one file first"
                )));
            };
            at = self
                .root
                .pointer(pointer)
                .ok_or_else(|| reference.problem(format!("'{target}' points nowhere")))?;
        }
        Err(at.problem("$refs that go round in a circle"))
    }
}

/// One operation, read.
struct Operation {
    name: String,
    tags: Vec<String>,
    summary: Option<String>,
    request: Request,
}

/// What the header says after the operations are read.
#[derive(Default)]
pub(super) struct Notes {
    /// Environment variables the plan's placeholders need, with what each is.
    pub(super) variables: Vec<(String, String)>,
    pub(super) no_body: Vec<String>,
    pub(super) deprecated: usize,
}

pub fn import(input: &Input, options: &All) -> Result<Plan, Problem> {
    let document = doc::parse(&input.text)?;
    let root = At::root(&document);
    let (v2, version) = match (root.get("openapi"), root.get("swagger")) {
        (Some(v), _) => (false, format!("OpenAPI {}", version_text(&v))),
        (None, Some(v)) if version_text(&v).starts_with('2') => {
            (true, format!("Swagger {}", version_text(&v)))
        }
        _ => {
            return Err(root.problem(
                "not an OpenAPI description: it has no 'openapi' (3.x) or 'swagger' (2.0) version",
            ));
        }
    };
    if !v2 && !version.starts_with("OpenAPI 3") {
        return Err(root.need("openapi")?.problem(format!(
            "{version} is not supported (3.0 and 3.1 are, and Swagger 2.0)"
        )));
    }
    let spec = Spec {
        root: root.clone(),
        v2,
    };
    let base = base(&spec, options.base.as_ref())?;
    let selection = &options.openapi;
    let mut notes = Notes::default();
    let mut operations = Vec::new();
    let mut total = 0;
    for (path, item) in root.object("paths")? {
        let item = spec.resolve(item)?;
        let shared_params = item.list("parameters")?;
        for (method, op) in item.members()? {
            if !METHODS.contains(&method) {
                continue;
            }
            total += 1;
            let id = op.opt_str("operationId")?;
            let tags: Vec<String> = op
                .list("tags")?
                .iter()
                .map(|t| t.text().map(|t| t.replace(',', " ")))
                .collect::<Result<_, _>>()?;
            let chosen = (selection.tags.is_empty() || tags.iter().any(|t| selection.tags.contains(t)))
                && (selection.operations.is_empty()
                    || id.is_some_and(|id| selection.operations.iter().any(|o| o == id)));
            if !chosen {
                continue;
            }
            let found = Found {
                path,
                method,
                op: &op,
                shared: &shared_params,
                tags,
            };
            operations.push(operation(&spec, found, &base, &mut notes)?);
        }
    }
    for wanted in &selection.operations {
        if !operations.iter().any(|o| o.name == *wanted) {
            return Err(Problem::usage(format!(
                "--operation {wanted}: the description has no operation with that operationId"
            )));
        }
    }
    if operations.is_empty() {
        return Err(match selection.tags.is_empty() {
            true => root.problem("the description has no operation ('paths' is empty)"),
            false => Problem::usage(format!(
                "--tags {}: no operation has one of these tags",
                selection.tags.join(",")
            )),
        });
    }
    let info = root.get("info");
    let title = info
        .as_ref()
        .and_then(|i| i.opt_str("title").ok().flatten())
        .unwrap_or("untitled");
    let api_version = info
        .as_ref()
        .and_then(|i| i.opt_str("version").ok().flatten())
        .unwrap_or("");
    let mut header = vec![format!(
        "Imported by 'volley import openapi' from {} ({version}: {title} {api_version}): {} operation(s) of {total}.",
        input.name,
        operations.len()
    )];
    if !notes.variables.is_empty() {
        let list: Vec<String> = notes
            .variables
            .iter()
            .map(|(name, what)| format!("{name} ({what})"))
            .collect();
        header.push(format!(
            "Set these environment variables before running it (the plan holds no secret): {}.",
            list.join("; ")
        ));
    }
    header.push(
        "Optional parameters are sent only where the description gives them an example or a default.".into(),
    );
    if !notes.no_body.is_empty() {
        header.push(format!(
            "Sent without a body (no JSON, form or text body to make one from): {}.",
            request::list_of(&notes.no_body, 8)
        ));
    }
    if notes.deprecated > 0 {
        header.push(format!(
            "{} deprecated operation(s) are included.",
            notes.deprecated
        ));
    }
    let items = operations
        .into_iter()
        .map(|op| Item {
            name: op.name,
            tags: op.tags,
            step: Step::Request(op.request),
            comment: op.summary,
        })
        .collect();
    Ok(Plan {
        header,
        base: base.origin,
        items,
        suffix: None,
    })
}

fn version_text(at: &At<'_>) -> String {
    match at.node {
        Node::String(s) => s.clone(),
        other => other.to_json().to_string(),
    }
}

/// The base: `--base`, else the first server (3.x, its variables at their
/// defaults) or `schemes`, `host` and `basePath` (2.0).
fn base(spec: &Spec<'_>, given: Option<&Base>) -> Result<Base, Problem> {
    let root = &spec.root;
    let (url, at) = if spec.v2 {
        let Some(host) = root.opt_str("host")? else {
            return given
                .cloned()
                .ok_or_else(|| root.problem("the description names no 'host': give --base URL"));
        };
        let scheme = match root
            .get("schemes")
            .and_then(|s| s.node.as_array().map(<[Node]>::to_vec))
        {
            Some(schemes) if !schemes.iter().any(|s| s.as_str() == Some("https")) => "http",
            _ => "https",
        };
        let base_path = root.opt_str("basePath")?.unwrap_or("");
        (format!("{scheme}://{host}{base_path}"), root.clone())
    } else {
        let servers = root.list("servers")?;
        let Some(server) = servers.first() else {
            return given
                .cloned()
                .ok_or_else(|| root.problem("the description names no server: give --base URL"));
        };
        let mut url = server.str("url")?.to_string();
        for (name, variable) in server.object("variables")? {
            let default = variable.str("default")?;
            url = url.replace(&format!("{{{name}}}"), default);
        }
        (url, server.clone())
    };
    if let Some(given) = given {
        // A relative server keeps its path under the given origin.
        return Ok(match (given.path.is_empty(), url.starts_with('/')) {
            (true, true) => Base {
                origin: given.origin.clone(),
                path: url.trim_end_matches('/').to_string(),
            },
            _ => given.clone(),
        });
    }
    if url.starts_with('/') || !url.contains("://") {
        return Err(at.problem(format!(
            "the server '{url}' is relative: give --base URL (its origin)"
        )));
    }
    Base::parse(&url).map_err(|e| at.problem(e.to_string()))
}

/// A parameter, resolved.
struct Parameter<'a> {
    at: At<'a>,
    name: &'a str,
    location: &'a str,
    required: bool,
}

/// An operation as the walk over the paths found it.
struct Found<'f, 'd> {
    path: &'f str,
    method: &'f str,
    op: &'f At<'d>,
    /// The parameters its path item declares for all its operations.
    shared: &'f [At<'d>],
    tags: Vec<String>,
}

/// The request an operation makes, its parameters and body filled in.
fn operation(
    spec: &Spec<'_>,
    found: Found<'_, '_>,
    base: &Base,
    notes: &mut Notes,
) -> Result<Operation, Problem> {
    let Found {
        path,
        method,
        op,
        shared,
        tags,
    } = found;
    let method_upper = method.to_ascii_uppercase();
    let name = match op.opt_str("operationId")? {
        Some(id) => id.to_string(),
        None => format!("{method_upper} {path}"),
    };
    // The operation's parameters replace the path item's of the same name and place.
    let mut parameters: Vec<Parameter<'_>> = Vec::new();
    for at in shared.iter().cloned().chain(op.list("parameters")?) {
        let at = spec.resolve(at)?;
        let parameter = Parameter {
            name: at.str("name")?,
            location: at.str("in")?,
            required: at.opt_bool("required")?.unwrap_or(false),
            at,
        };
        parameters.retain(|p| !(p.name == parameter.name && p.location == parameter.location));
        parameters.push(parameter);
    }
    let mut url = path.to_string();
    let mut query: Vec<(String, String)> = Vec::new();
    let mut headers: Vec<(String, String)> = Vec::new();
    let mut cookies: Vec<String> = Vec::new();
    let mut body = None;
    let mut form: Vec<(String, String)> = Vec::new();
    for p in &parameters {
        let needed = p.required || matches!(p.location, "path" | "body");
        let given = parameter_value(spec, &p.at, needed)?;
        let Some(value) = given else { continue };
        match p.location {
            "path" => {
                let text = utf8_percent_encode(&scalar_text(&value), PATH_VALUE).to_string();
                url = url.replace(&format!("{{{}}}", p.name), &text);
            }
            "query" => query_pairs(p.name, &value, &mut query),
            "header"
                if !["accept", "content-type", "authorization"]
                    .contains(&p.name.to_ascii_lowercase().as_str()) =>
            {
                headers.push((p.name.to_string(), scalar_text(&value)));
            }
            "cookie" => cookies.push(format!("{}={}", p.name, scalar_text(&value))),
            "body" if spec.v2 => {
                body = Some((json_content_type(spec, op), value.to_json_text().into_bytes()))
            }
            "formData" if spec.v2 => form.push((p.name.to_string(), scalar_text(&value))),
            _ => {}
        }
    }
    if let Some(unfilled) = url.find('{').map(|at| &url[at..]) {
        return Err(op.problem(format!("the path parameter in '{unfilled}' is not declared")));
    }
    if !form.is_empty() {
        body = Some((
            "application/x-www-form-urlencoded".to_string(),
            request::form_urlencoded(form.iter().map(|(k, v)| (k.as_str(), v.as_str()))).into_bytes(),
        ));
    }
    if !spec.v2
        && let Some(request_body) = op.get("requestBody")
    {
        let request_body = spec.resolve(request_body)?;
        body = request_body_value(spec, &request_body)?;
        if body.is_none() {
            notes.no_body.push(name.clone());
        }
    }
    security::fields(spec, op, &mut headers, &mut query, &mut cookies, notes)?;
    if !cookies.is_empty() {
        headers.push(("Cookie".into(), cookies.join("; ")));
    }
    let (content_type, bytes) = match body {
        Some((content_type, bytes)) => (Some(content_type), Some(bytes)),
        None => (None, None),
    };
    if let Some(content_type) = content_type {
        headers.push(("Content-Type".into(), content_type));
    }
    let mut target = format!("{}{}", base.path, request::literal_path(&url));
    if !query.is_empty() {
        target.push('?');
        let pairs: Vec<String> = query
            .iter()
            .map(|(k, v)| {
                // A placeholder stays as written, to be filled when the plan runs.
                let value = if v.starts_with("{{") {
                    v.clone()
                } else {
                    encode_query(v)
                };
                format!("{}={value}", encode_query(k))
            })
            .collect();
        target.push_str(&pairs.join("&"));
    }
    let deprecated = op.opt_bool("deprecated")?.unwrap_or(false);
    if deprecated {
        notes.deprecated += 1;
    }
    Ok(Operation {
        name,
        tags,
        summary: op.opt_str("summary")?.map(str::to_string),
        request: Request {
            method: method_upper,
            url: target,
            headers: request::join_repeated(headers),
            body: bytes.map(Body::Bytes),
        },
    })
}

fn encode_query(text: &str) -> String {
    url::form_urlencoded::byte_serialize(text.as_bytes())
        .collect::<String>()
        .replace('+', "%20")
}

/// A parameter's value: its own example, else its schema's explicit value;
/// a made-up one only when `needed`.
fn parameter_value(spec: &Spec<'_>, at: &At<'_>, needed: bool) -> Result<Option<Node>, Problem> {
    if let Some(example) = schema::given_example(spec, at)? {
        return Ok(Some(example));
    }
    // Swagger 2.0 puts the schema's keywords on the parameter itself.
    let schema_at = match at.get("schema") {
        Some(schema) => schema,
        None if spec.v2 || at.get("type").is_some() => at.clone(),
        None => return Ok(needed.then(|| Node::String("string".into()))),
    };
    if let Some(value) = schema::explicit(spec, &schema_at)? {
        return Ok(Some(value));
    }
    if !needed {
        return Ok(None);
    }
    schema::value(spec, &schema_at).map(Some)
}

/// A value as a parameter's text: strings bare, the rest as JSON.
fn scalar_text(value: &Node) -> String {
    match value {
        Node::String(s) => s.clone(),
        Node::Null => String::new(),
        Node::Array(items) => items.iter().map(scalar_text).collect::<Vec<_>>().join(","),
        other => other.to_json_text(),
    }
}

/// A query parameter's pairs: a list repeats the name (OpenAPI's default
/// `form` style, exploded), an object gives its members as pairs.
fn query_pairs(name: &str, value: &Node, out: &mut Vec<(String, String)>) {
    match value {
        Node::Array(items) => {
            for item in items {
                out.push((name.to_string(), scalar_text(item)));
            }
        }
        Node::Object(members) => {
            for (key, value) in members {
                out.push((key.clone(), scalar_text(value)));
            }
        }
        value => out.push((name.to_string(), scalar_text(value))),
    }
}

/// Swagger 2.0's body content type: JSON unless `consumes` says otherwise.
fn json_content_type(spec: &Spec<'_>, op: &At<'_>) -> String {
    let consumes = op.get("consumes").or_else(|| spec.root.get("consumes"));
    consumes
        .and_then(|c| {
            c.node.as_array().and_then(|c| {
                c.iter()
                    .filter_map(Node::as_str)
                    .find(|t| t.contains("json"))
                    .map(str::to_string)
            })
        })
        .unwrap_or_else(|| "application/json".into())
}

/// A 3.x request body: JSON, a form or text, from the first media type of
/// those that volley can make a body for.
fn request_body_value(spec: &Spec<'_>, body: &At<'_>) -> Result<Option<(String, Vec<u8>)>, Problem> {
    let content = body.object("content")?;
    let rank = |media: &str| -> Option<u8> {
        let essence = media.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
        if essence == "application/json" {
            Some(0)
        } else if essence.ends_with("+json") || essence.ends_with("/json") {
            Some(1)
        } else if essence == "application/x-www-form-urlencoded" {
            Some(2)
        } else if essence.starts_with("text/") {
            Some(3)
        } else if essence == "multipart/form-data" {
            Some(4)
        } else {
            None
        }
    };
    let Some((media, at)) = content
        .iter()
        .filter_map(|(media, at)| rank(media).map(|r| (r, *media, at)))
        .min_by_key(|(r, _, _)| *r)
        .map(|(_, media, at)| (media, at))
    else {
        return Ok(None);
    };
    let value = match schema::given_example(spec, at)? {
        Some(value) => value,
        None => match at.get("schema") {
            Some(schema) => schema::value(spec, &schema)?,
            None => Node::Object(Vec::new()),
        },
    };
    let essence = media.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    let bytes = if essence == "application/x-www-form-urlencoded" {
        let pairs: Vec<(String, String)> = match &value {
            Node::Object(members) => members.iter().map(|(k, v)| (k.clone(), scalar_text(v))).collect(),
            _ => Vec::new(),
        };
        request::form_urlencoded(pairs.iter().map(|(k, v)| (k.as_str(), v.as_str()))).into_bytes()
    } else if essence.starts_with("text/") {
        scalar_text(&value).into_bytes()
    } else if essence == "multipart/form-data" {
        // A part per member, and per item of an array member (OpenAPI's
        // default encoding of arrays in a form, as curl's repeated -F
        // sends them): text as it is, anything else as JSON.
        let part = |name: &str, value: &Node| request::FormPart {
            name: name.to_string(),
            value: match value {
                Node::String(text) => text.clone().into_bytes(),
                other => other.to_json_text().into_bytes(),
            },
            filename: None,
            content_type: None,
        };
        let parts: Vec<request::FormPart> = match &value {
            Node::Object(members) => members
                .iter()
                .flat_map(|(name, value)| match value {
                    Node::Array(items) => items.iter().map(|item| part(name, item)).collect(),
                    value => vec![part(name, value)],
                })
                .collect(),
            _ => Vec::new(),
        };
        let (bytes, content_type) = request::multipart(&parts);
        return Ok(Some((content_type, bytes)));
    } else {
        match json_text_example(spec, at, &value)? {
            Some(text) => text.as_bytes().to_vec(),
            None => value.to_json_text().into_bytes(),
        }
    };
    Ok(Some((media.to_string(), bytes)))
}

/// An example written as the JSON text of an object or array (`"example":
/// "{\"name\": \"Fluffy\"}"`), as some descriptions give one, where the
/// schema is not a string's: that text is the body, rather than a JSON
/// string holding it.
fn json_text_example<'v>(
    spec: &Spec<'_>,
    media: &At<'_>,
    value: &'v Node,
) -> Result<Option<&'v str>, Problem> {
    let Node::String(text) = value else {
        return Ok(None);
    };
    if let Some(schema) = media.get("schema")
        && spec.resolve(schema)?.opt_str("type")? == Some("string")
    {
        return Ok(None);
    }
    let parsed: Option<serde_json::Value> = serde_json::from_str(text).ok();
    Ok(parsed
        .filter(|json| json.is_object() || json.is_array())
        .map(|_| text.as_str()))
}

#[cfg(test)]
mod tests;
