//! What the formats share on the way to a plan's request: URLs split into
//! the plan's origin and a path, the header fields a replay must not send
//! (hop-by-hop fields, a browser's own), names and tags for items, and the
//! escaping that keeps recorded text from being read as a `{{ }}` template.

use std::fmt::Write as _;

/// `--base` or an input's base URL: an origin, and a path prefix below it
/// (an OpenAPI server's `/api/v3`), since a plan's `base` is an origin and
/// its request URLs are whole paths.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Base {
    pub origin: String,
    /// The path below the origin, without a trailing `/` ("" for none).
    pub path: String,
}

/// Why a URL cannot go into a plan. The URL is shown with any password
/// masked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UrlError {
    /// Not a URL at all; the parser's reason.
    Unparsable { shown: String, reason: url::ParseError },
    /// A scheme other than http:// and https://.
    Scheme { shown: String },
    /// A user name or password, which a plan never holds.
    Credentials { shown: String },
    /// A base URL with a query string (a base is an origin and a path).
    Query { shown: String },
}

impl std::fmt::Display for UrlError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            UrlError::Unparsable { shown, reason } => write!(f, "'{shown}' is not a URL ({reason})"),
            UrlError::Scheme { shown } => write!(f, "'{shown}' is not an http:// or https:// URL"),
            UrlError::Credentials { shown } => {
                write!(f, "'{shown}' holds credentials: they are not written into a plan")
            }
            UrlError::Query { shown } => {
                write!(f, "'{shown}' has a query string: give an origin and path only")
            }
        }
    }
}

impl std::error::Error for UrlError {}

impl Base {
    pub fn parse(text: &str) -> Result<Base, UrlError> {
        let url = parse_url(text)?;
        let path = url.path().trim_end_matches('/').to_string();
        if url.query().is_some() {
            return Err(UrlError::Query {
                shown: crate::target::mask_password(text).into_owned(),
            });
        }
        Ok(Base {
            origin: url.origin().ascii_serialization(),
            path,
        })
    }
}

fn parse_url(text: &str) -> Result<url::Url, UrlError> {
    let shown = || crate::target::mask_password(text).into_owned();
    let url = url::Url::parse(text.trim()).map_err(|reason| UrlError::Unparsable {
        shown: shown(),
        reason,
    })?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(UrlError::Scheme { shown: shown() });
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(UrlError::Credentials { shown: shown() });
    }
    Ok(url)
}

/// The origin of a URL (`https://example.com:8443`), or of a bare host.
pub fn origin_of(text: &str) -> Result<String, UrlError> {
    let with_scheme = if text.contains("://") {
        text.to_string()
    } else {
        format!("https://{text}")
    };
    Ok(parse_url(&with_scheme)?.origin().ascii_serialization())
}

/// An absolute URL split into its origin and its path with the query
/// (the fragment dropped: it never leaves the browser).
pub fn split_url(text: &str) -> Result<(String, String), UrlError> {
    let url = parse_url(text)?;
    let mut path = url.path().to_string();
    if let Some(query) = url.query() {
        path.push('?');
        path.push_str(query);
    }
    Ok((url.origin().ascii_serialization(), path))
}

/// Whether text would be read as a template by the plan reader.
pub fn looks_templated(text: &str) -> bool {
    text.contains("{{")
}

/// A recorded URL path as template text: braces percent-encoded where they
/// would open a template (a URL never needs them raw).
pub fn literal_path(path: &str) -> String {
    if looks_templated(path) {
        path.replace('{', "%7B").replace('}', "%7D")
    } else {
        path.to_string()
    }
}

/// Header fields a replay must not copy: hop-by-hop fields (RFC 9110
/// section 7.6.1), the framing volley does itself, HTTP/2 pseudo-fields,
/// and what only a browser sends (client hints and fetch metadata,
/// `Upgrade-Insecure-Requests`, `Priority`, prefetch purposes).
pub fn dropped_field(name: &str) -> Option<&'static str> {
    let lower = name.to_ascii_lowercase();
    let lower = lower.as_str();
    if lower.starts_with(':') {
        return Some("HTTP/2 pseudo-header");
    }
    match lower {
        "host" | "connection" | "keep-alive" | "proxy-connection" | "transfer-encoding" | "te"
        | "trailer" | "upgrade" | "content-length" | "expect" => Some("connection-level"),
        "upgrade-insecure-requests" | "priority" | "purpose" | "x-client-data" => Some("browser-only"),
        _ if lower.starts_with("sec-") => Some("browser-only"),
        _ => None,
    }
}

/// Header fields with repeated names joined into one (a plan's headers
/// are a YAML mapping): `; ` for `Cookie`, `, ` for the rest (RFC 9110
/// section 5.3). The first spelling of a name is kept.
pub fn join_repeated(fields: Vec<(String, String)>) -> Vec<(String, String)> {
    let mut joined: Vec<(String, String)> = Vec::with_capacity(fields.len());
    for (name, value) in fields {
        match joined.iter_mut().find(|(n, _)| n.eq_ignore_ascii_case(&name)) {
            Some((_, existing)) => {
                existing.push_str(if name.eq_ignore_ascii_case("cookie") {
                    "; "
                } else {
                    ", "
                });
                existing.push_str(&value);
            }
            None => joined.push((name, value)),
        }
    }
    joined
}

/// Whether `fields` has one named `name` (any case).
pub fn has_field(fields: &[(String, String)], name: &str) -> bool {
    fields.iter().any(|(n, _)| n.eq_ignore_ascii_case(name))
}

/// An item's name from its request: `POST /api/users` (the query left out,
/// so the requests to one endpoint share a row in the report).
pub fn item_name(method: &str, path: &str) -> String {
    let path = path.split('?').next().unwrap_or(path);
    let mut name = format!("{method} {path}");
    if name.chars().count() > 100 {
        name = name.chars().take(97).collect::<String>() + "...";
    }
    name
}

/// A tag from free text: lower case, words joined by `-` (`Volley shop:
/// one user` is `volley-shop-one-user`), at most 40 characters.
pub fn slug(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars().flat_map(char::to_lowercase) {
        if c.is_alphanumeric() {
            out.push(c);
        } else if !out.is_empty() && !out.ends_with('-') {
            out.push('-');
        }
    }
    let mut out: String = out.trim_end_matches('-').chars().take(40).collect();
    if out.ends_with('-') {
        out.pop();
    }
    out
}

/// An environment variable's name from free text: `garden_auth` is
/// `GARDEN_AUTH`, `api-key` is `API_KEY`.
pub fn env_name(text: &str) -> String {
    let mut out = String::new();
    let mut previous_lower = false;
    for c in text.chars() {
        if c.is_ascii_alphanumeric() {
            // `bearerAuth` is BEARER_AUTH.
            if c.is_ascii_uppercase() && previous_lower {
                out.push('_');
            }
            out.push(c.to_ascii_uppercase());
            previous_lower = c.is_ascii_lowercase() || c.is_ascii_digit();
        } else {
            if !out.is_empty() && !out.ends_with('_') {
                out.push('_');
            }
            previous_lower = false;
        }
    }
    let out = out.trim_end_matches('_').to_string();
    match out.chars().next() {
        None => "VALUE".into(),
        Some(c) if c.is_ascii_digit() => format!("V_{out}"),
        Some(_) => out,
    }
}

/// A name with its case and separators dropped: `X-API-Key` is `xapikey`.
fn squashed(name: &str) -> String {
    name.chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

/// Whether a header field carries a credential: `Authorization`,
/// `Proxy-Authorization`, and API keys and tokens by name (`X-API-Key`,
/// `api-key`, `X-Auth-Token`, `X-Client-Secret`...).
pub fn is_secret_field(name: &str) -> bool {
    let name = squashed(name);
    matches!(
        name.as_str(),
        "authorization" | "proxyauthorization" | "xauth" | "xauthkey" | "xkey"
    ) || ["apikey", "token", "secret", "password", "passwd"]
        .iter()
        .any(|word| name.contains(word))
}

/// Whether a query parameter carries a credential (`api_key`, `apikey`,
/// `key`, `access_token`, `client_secret`, `sig`...).
pub fn is_secret_parameter(name: &str) -> bool {
    let name = squashed(name);
    matches!(name.as_str(), "key" | "sig" | "signature" | "auth")
        || ["apikey", "token", "secret", "password", "passwd"]
            .iter()
            .any(|word| name.contains(word))
}

/// `application/x-www-form-urlencoded` text of name/value pairs.
pub fn form_urlencoded<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> String {
    let mut out = url::form_urlencoded::Serializer::new(String::new());
    for (name, value) in pairs {
        out.append_pair(name, value);
    }
    out.finish()
}

/// One part of a `multipart/form-data` body (curl's `-F`, an OpenAPI
/// form).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FormPart {
    pub name: String,
    pub value: Vec<u8>,
    /// A file's name (`-F f=@path` sends its base name).
    pub filename: Option<String>,
    pub content_type: Option<String>,
}

/// The parts as one `multipart/form-data` body, laid out as curl lays it
/// out, and its `Content-Type`. The boundary is one no part holds.
pub fn multipart(parts: &[FormPart]) -> (Vec<u8>, String) {
    let holds = |boundary: &str| {
        parts
            .iter()
            .any(|p| p.value.windows(boundary.len()).any(|w| w == boundary.as_bytes()))
    };
    let mut n = 0;
    let boundary = loop {
        let boundary = format!("------------------------volley{n:016x}");
        if !holds(&boundary) {
            break boundary;
        }
        n += 1;
    };
    let quoted = |text: &str| text.replace('"', "%22").replace(['\r', '\n'], " ");
    let mut body = Vec::new();
    for part in parts {
        body.extend_from_slice(
            format!(
                "--{boundary}\r\nContent-Disposition: form-data; name=\"{}\"",
                quoted(&part.name)
            )
            .as_bytes(),
        );
        if let Some(filename) = &part.filename {
            body.extend_from_slice(format!("; filename=\"{}\"", quoted(filename)).as_bytes());
        }
        body.extend_from_slice(b"\r\n");
        if let Some(content_type) = &part.content_type {
            body.extend_from_slice(format!("Content-Type: {content_type}\r\n").as_bytes());
        }
        body.extend_from_slice(b"\r\n");
        body.extend_from_slice(&part.value);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    (body, format!("multipart/form-data; boundary={boundary}"))
}

/// A short description of a list for a header note: `a, b and 3 more`.
pub fn list_of(items: &[String], most: usize) -> String {
    let mut out = String::new();
    for (i, item) in items.iter().take(most).enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        out.push_str(item);
    }
    if items.len() > most {
        let _ = write!(out, " and {} more", items.len() - most);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_split_into_origin_and_path() {
        assert_eq!(
            split_url("http://127.0.0.1:3000/api/users?page=2#top").unwrap(),
            ("http://127.0.0.1:3000".into(), "/api/users?page=2".into())
        );
        assert_eq!(
            split_url("https://example.com").unwrap(),
            ("https://example.com".into(), "/".into())
        );
        assert!(matches!(
            split_url("ftp://example.com/x"),
            Err(UrlError::Scheme { .. })
        ));
        assert_eq!(
            split_url("http://u:secret@example.com/").unwrap_err(),
            UrlError::Credentials {
                shown: "http://u:***@example.com/".into()
            }
        );
        assert!(matches!(
            Base::parse("http://example.com/api?x=1"),
            Err(UrlError::Query { .. })
        ));
        assert_eq!(origin_of("cdn.example.com").unwrap(), "https://cdn.example.com");
        assert_eq!(origin_of("http://a.test:80/x").unwrap(), "http://a.test");
        let base = Base::parse("https://greenhouse.test/api/v2/").unwrap();
        assert_eq!(
            (base.origin.as_str(), base.path.as_str()),
            ("https://greenhouse.test", "/api/v2")
        );
    }

    #[test]
    fn fields_a_replay_keeps() {
        for dropped in [
            ":authority",
            "Host",
            "connection",
            "Content-Length",
            "sec-ch-ua",
            "Sec-Fetch-Mode",
            "priority",
        ] {
            assert!(dropped_field(dropped).is_some(), "{dropped}");
        }
        for kept in [
            "Accept",
            "Authorization",
            "Cookie",
            "User-Agent",
            "Referer",
            "x-secret",
        ] {
            assert!(dropped_field(kept).is_none(), "{kept}");
        }
        let joined = join_repeated(vec![
            ("Accept".into(), "a".into()),
            ("cookie".into(), "x=1".into()),
            ("accept".into(), "b".into()),
            ("Cookie".into(), "y=2".into()),
        ]);
        assert_eq!(
            joined,
            [
                ("Accept".into(), "a, b".into()),
                ("cookie".into(), "x=1; y=2".into())
            ]
        );
    }

    #[test]
    fn names_tags_and_variables() {
        assert_eq!(item_name("GET", "/api/users?page=2"), "GET /api/users");
        assert_eq!(slug("Volley shop: one user!"), "volley-shop-one-user");
        assert_eq!(slug("  "), "");
        assert_eq!(env_name("garden_auth"), "GARDEN_AUTH");
        assert_eq!(env_name("api-key.v2"), "API_KEY_V2");
        assert_eq!(env_name("2fa"), "V_2FA");
        assert_eq!(env_name("bearerAuth"), "BEARER_AUTH");
        assert_eq!(env_name("APIKey"), "APIKEY");
        assert_eq!(env_name("--"), "VALUE");
        assert_eq!(literal_path("/a/{{b}}"), "/a/%7B%7Bb%7D%7D");
        assert_eq!(literal_path("/a/{b}"), "/a/{b}");
        assert_eq!(form_urlencoded([("a b", "c&d")]), "a+b=c%26d");
        assert_eq!(
            list_of(&["a".into(), "b".into(), "c".into()], 2),
            "a, b and 1 more"
        );
    }
}
