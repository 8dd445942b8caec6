//! One Postman request as a plan request: its URL (a string or its
//! parts), header fields, body (raw, urlencoded, GraphQL) and inherited
//! authorization, with the collection's variables filled in.

use super::{Notes, Variables, fill, fill_secret, value_text};
use crate::import::Problem;
use crate::import::doc::{self, At};
use crate::import::plan::{Body, Request};
use crate::import::request;

pub(super) fn read_request(
    at: &At<'_>,
    name: &str,
    auth: Option<At<'_>>,
    variables: &Variables,
    notes: &mut Notes,
) -> Result<(String, Request, bool), Problem> {
    // A request may be just its URL.
    let (method, url_text, headers_at, body_at) = match at.node {
        doc::Node::String(url) => ("GET".to_string(), url.clone(), Vec::new(), None),
        _ => {
            let url = match at.get("url") {
                Some(url) => match url.node {
                    doc::Node::String(s) => s.clone(),
                    _ => url_from_parts(&url, notes)?,
                },
                None => return Err(at.problem("'url' is missing")),
            };
            (
                at.opt_str("method")?.unwrap_or("GET").to_ascii_uppercase(),
                url,
                at.list("header")?,
                at.get("body"),
            )
        }
    };
    // `--base` stands for a server named by a variable, path and all.
    let host_end = host_end(&url_text);
    let based = variables.host.is_some() && url_text[..host_end].contains("{{");
    let url_text = match &variables.host {
        Some(base) if based => format!("{}{}{}", base.origin, base.path, &url_text[host_end..]),
        _ => url_text,
    };
    let filled = fill(&url_text, variables, notes);
    // An unfilled origin (`{{ BASE_URL }}/users`) is refused: the plan's
    // base must be known when it is written.
    let with_scheme = if filled.contains("://") {
        filled.clone()
    } else {
        format!("http://{filled}")
    };
    let (origin, path) = request::split_url(&with_scheme).map_err(|e| {
        at.problem(format!(
            "the URL of '{name}' ({e}): give its variables values (--env FILE) so it names a server"
        ))
    })?;
    let path = unescape_placeholders(&request::literal_path(&path));
    let mut headers = Vec::new();
    for header in headers_at {
        if header.opt_bool("disabled")? == Some(true) {
            notes.disabled += 1;
            continue;
        }
        let key = header.str("key")?;
        if request::dropped_field(key).is_some() {
            continue;
        }
        let value = header.opt_str("value")?.unwrap_or("");
        let value = if request::is_secret_field(key) {
            fill_secret(value, variables, notes)
        } else {
            fill(value, variables, notes)
        };
        headers.push((key.to_string(), value));
    }
    let body = match body_at {
        Some(body) => read_body(&body, name, &mut headers, variables, notes)?,
        None => None,
    };
    if let Some(auth) = auth {
        auth_fields(&auth, name, &mut headers, notes)?;
    }
    Ok((
        origin,
        Request {
            method,
            url: path,
            headers: request::join_repeated(headers),
            body,
        },
        based,
    ))
}

/// Where a URL's server ends: the first `/` or `?` after its scheme.
fn host_end(url: &str) -> usize {
    let start = url.find("://").map_or(0, |i| i + 3);
    url[start..].find(['/', '?']).map_or(url.len(), |end| start + end)
}

/// `split_url` percent-encodes the braces of placeholders put into the
/// path; they go back to being placeholders.
fn unescape_placeholders(path: &str) -> String {
    path.replace("%7B%7B%20", "{{ ")
        .replace("%20%7D%7D", " }}")
        .replace("%7B%7B", "{{")
        .replace("%7D%7D", "}}")
}

/// A URL given as its parts (`host`, `path`, `query`).
fn url_from_parts(url: &At<'_>, notes: &mut Notes) -> Result<String, Problem> {
    let raw = url.opt_str("raw")?;
    if let Some(raw) = raw
        && url.get("query").is_none()
    {
        return Ok(raw.to_string());
    }
    let join = |at: Option<At<'_>>, separator: &str| -> Result<String, Problem> {
        Ok(match at {
            None => String::new(),
            Some(at) => match at.node {
                doc::Node::String(s) => s.clone(),
                _ => at
                    .items()?
                    .iter()
                    .map(|p| p.text().map(str::to_string))
                    .collect::<Result<Vec<_>, _>>()?
                    .join(separator),
            },
        })
    };
    // `raw` without its query (rebuilt below from the enabled parameters),
    // else the URL from its parts.
    let mut text = match raw {
        Some(raw) => raw.split('?').next().unwrap_or(raw).to_string(),
        None => {
            let protocol = url.opt_str("protocol")?.unwrap_or("https");
            let host = join(url.get("host"), ".")?;
            let port = url.opt_str("port")?.map(|p| format!(":{p}")).unwrap_or_default();
            let path = join(url.get("path"), "/")?;
            let host = if host.contains("://") || host.starts_with("{{") {
                host
            } else {
                format!("{protocol}://{host}")
            };
            format!("{host}{port}/{}", path.trim_start_matches('/'))
        }
    };
    let mut pairs = Vec::new();
    for q in url.list("query")? {
        if q.opt_bool("disabled")? == Some(true) {
            notes.disabled += 1;
            continue;
        }
        let key = q.opt_str("key")?.unwrap_or("");
        match q.opt_str("value")? {
            Some(value) => pairs.push(format!("{key}={value}")),
            None => pairs.push(key.to_string()),
        }
    }
    if !pairs.is_empty() {
        text.push('?');
        text.push_str(&pairs.join("&"));
    }
    Ok(text)
}

fn read_body(
    body: &At<'_>,
    name: &str,
    headers: &mut Vec<(String, String)>,
    variables: &Variables,
    notes: &mut Notes,
) -> Result<Option<Body>, Problem> {
    let content_type = |headers: &mut Vec<(String, String)>, value: &str| {
        if !request::has_field(headers, "content-type") {
            headers.push(("Content-Type".into(), value.into()));
        }
    };
    let text = match body.opt_str("mode")?.unwrap_or("raw") {
        "raw" => {
            let raw = body.opt_str("raw")?.unwrap_or("");
            if raw.is_empty() {
                return Ok(None);
            }
            let language = body
                .get("options")
                .and_then(|o| o.get("raw"))
                .and_then(|r| r.opt_str("language").ok().flatten());
            match language {
                Some("json") => content_type(headers, "application/json"),
                Some("xml") => content_type(headers, "application/xml"),
                Some("text") => content_type(headers, "text/plain"),
                _ => {}
            }
            fill(raw, variables, notes)
        }
        "urlencoded" => {
            let mut pairs = Vec::new();
            for field in body.list("urlencoded")? {
                if field.opt_bool("disabled")? == Some(true) {
                    continue;
                }
                pairs.push((
                    field.str("key")?.to_string(),
                    field.opt_str("value")?.unwrap_or("").to_string(),
                ));
            }
            content_type(headers, "application/x-www-form-urlencoded");
            fill(
                &request::form_urlencoded(pairs.iter().map(|(k, v)| (k.as_str(), v.as_str()))),
                variables,
                notes,
            )
        }
        "graphql" => {
            let graphql = body.need("graphql")?;
            let query = graphql.opt_str("query")?.unwrap_or("");
            let variables_text = graphql.opt_str("variables")?.unwrap_or("").trim();
            let vars: serde_json::Value = if variables_text.is_empty() {
                serde_json::Value::Object(Default::default())
            } else {
                serde_json::from_str(variables_text)
                    .map_err(|e| graphql.problem(format!("'variables' is not JSON: {e}")))?
            };
            content_type(headers, "application/json");
            fill(
                &serde_json::json!({"query": query, "variables": vars}).to_string(),
                variables,
                notes,
            )
        }
        _ => {
            notes.no_body.push(format!("'{name}'"));
            return Ok(None);
        }
    };
    Ok(Some(Body::Template(text)))
}

/// Postman's `auth` as header fields (or query) with placeholders.
fn auth_fields(
    auth: &At<'_>,
    name: &str,
    headers: &mut Vec<(String, String)>,
    notes: &mut Notes,
) -> Result<(), Problem> {
    let kind = auth.opt_str("type")?.unwrap_or("noauth");
    let mut note = |variable: &str, what: &str| {
        if !notes.variables.iter().any(|(v, _)| v == variable) {
            notes.variables.push((variable.to_string(), what.to_string()));
        }
    };
    match kind {
        "noauth" => {}
        "bearer" => {
            headers.retain(|(n, _)| !n.eq_ignore_ascii_case("authorization"));
            headers.push(("Authorization".into(), "Bearer {{ POSTMAN_TOKEN }}".into()));
            note("POSTMAN_TOKEN", "the bearer token");
        }
        "basic" => {
            headers.retain(|(n, _)| !n.eq_ignore_ascii_case("authorization"));
            headers.push(("Authorization".into(), "Basic {{ POSTMAN_BASIC_AUTH }}".into()));
            note("POSTMAN_BASIC_AUTH", "the base64 of USER:PASSWORD");
        }
        "apikey" => {
            // v2.1 lists the settings as key/value pairs.
            let mut key = "X-API-Key".to_string();
            let mut place = "header".to_string();
            for setting in auth.list("apikey")? {
                match setting.opt_str("key")? {
                    Some("key") => key = value_text(&setting),
                    Some("in") => place = value_text(&setting),
                    _ => {}
                }
            }
            if place == "query" {
                notes
                    .auth_skipped
                    .push(format!("'{name}' (an API key in the query)"));
            } else {
                headers.push((key, "{{ POSTMAN_API_KEY }}".into()));
                note("POSTMAN_API_KEY", "the API key");
            }
        }
        other => notes.auth_skipped.push(format!("'{name}' ({other})")),
    }
    Ok(())
}
