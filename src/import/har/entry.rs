//! What one HAR entry's request holds, as the plan needs it: whether it
//! is a CORS preflight or an asset the browser fetched for itself, the
//! header fields to send, and its body as recorded.

use super::LeftOut;
use crate::import::Problem;
use crate::import::doc::At;
use crate::import::request;
use base64::Engine as _;

pub(super) fn is_preflight(at: &At<'_>, req: &At<'_>, method: &str) -> Result<bool, Problem> {
    if at.opt_str("_resourceType")? == Some("preflight") {
        return Ok(true);
    }
    if method != "OPTIONS" {
        return Ok(false);
    }
    for field in req.list("headers")? {
        if field
            .str("name")?
            .eq_ignore_ascii_case("access-control-request-method")
        {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Whether the entry fetched an image, font, stylesheet, script or media:
/// by Chromium's resource type, else the response's type, else the path.
pub(super) fn is_asset(at: &At<'_>, path: &str) -> Result<bool, Problem> {
    if let Some(kind) = at.opt_str("_resourceType")? {
        return Ok(matches!(
            kind,
            "image" | "font" | "stylesheet" | "script" | "media" | "manifest" | "texttrack"
        ));
    }
    let mime = at
        .get("response")
        .and_then(|r| r.get("content"))
        .map(|c| c.opt_str("mimeType"))
        .transpose()?
        .flatten()
        .unwrap_or("")
        .to_ascii_lowercase();
    let mime = mime.split(';').next().unwrap_or("").trim();
    if mime.starts_with("image/")
        || mime.starts_with("font/")
        || mime.starts_with("audio/")
        || mime.starts_with("video/")
        || matches!(
            mime,
            "text/css"
                | "text/javascript"
                | "application/javascript"
                | "application/x-javascript"
                | "application/font-woff"
        )
    {
        return Ok(true);
    }
    let file = path
        .split('?')
        .next()
        .unwrap_or("")
        .rsplit('/')
        .next()
        .unwrap_or("");
    let extension = file
        .rsplit_once('.')
        .map(|(_, e)| e.to_ascii_lowercase())
        .unwrap_or_default();
    Ok(matches!(
        extension.as_str(),
        "png"
            | "jpg"
            | "jpeg"
            | "gif"
            | "svg"
            | "webp"
            | "avif"
            | "ico"
            | "bmp"
            | "css"
            | "js"
            | "mjs"
            | "map"
            | "woff"
            | "woff2"
            | "ttf"
            | "otf"
            | "eot"
            | "mp4"
            | "webm"
            | "mp3"
            | "ogg"
    ))
}

/// The header fields to send: those a replay must not copy dropped, and
/// `Cookie` left to the cookie jar unless kept.
pub(super) fn fields(
    req: &At<'_>,
    keep_cookies: bool,
    left: &mut LeftOut,
) -> Result<Vec<(String, String)>, Problem> {
    let mut out = Vec::new();
    for field in req.list("headers")? {
        let name = field.str("name")?;
        let value = field.str("value")?;
        if request::dropped_field(name).is_some() {
            let shown = if name.to_ascii_lowercase().starts_with("sec-") {
                "sec-*"
            } else {
                name
            };
            if !left.fields.iter().any(|f| f.eq_ignore_ascii_case(shown)) {
                left.fields.push(shown.to_string());
            }
            continue;
        }
        if name.eq_ignore_ascii_case("cookie") && !keep_cookies {
            left.cookies = true;
            continue;
        }
        if request::looks_templated(value) || request::looks_templated(name) {
            left.templated_fields += 1;
            continue;
        }
        out.push((name.to_string(), value.to_string()));
    }
    Ok(request::join_repeated(out))
}

/// What the recording holds of a request's body.
pub(super) enum Recorded {
    /// No `postData`.
    Absent,
    Held(Vec<u8>),
    /// A body it names but does not hold: file fields, or no params.
    NotHeld,
}

/// The body size the recording gives (`bodySize`, else the request's
/// `Content-Length`), when it gives one above 0.
pub(super) fn declared_size(req: &At<'_>) -> Result<Option<u64>, Problem> {
    let size = req.get("bodySize").and_then(|s| s.node.as_f64());
    if let Some(size) = size.filter(|s| *s > 0.0) {
        return Ok(Some(size as u64));
    }
    for field in req.list("headers")? {
        if field.str("name")?.eq_ignore_ascii_case("content-length") {
            return Ok(field.str("value")?.trim().parse().ok().filter(|n| *n > 0));
        }
    }
    Ok(None)
}

/// The request's body: `postData.text` (base64-decoded when marked so), or
/// its `params` form-encoded.
pub(super) fn body(req: &At<'_>) -> Result<Recorded, Problem> {
    let Some(post) = req.get("postData") else {
        return Ok(Recorded::Absent);
    };
    if let Some(text) = post.opt_str("text")? {
        let encoding = post.opt_str("encoding")?.or(post.opt_str("_encoding")?);
        if encoding == Some("base64") {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(text.trim())
                .map_err(|e| {
                    post.need("text")
                        .map_or_else(|p| p, |t| t.problem(format!("not base64: {e}")))
                })?;
            return Ok(Recorded::Held(bytes));
        }
        return Ok(Recorded::Held(text.as_bytes().to_vec()));
    }
    let params = post.list("params")?;
    if params.is_empty() {
        return Ok(Recorded::NotHeld);
    }
    let mut pairs = Vec::new();
    for param in &params {
        if param.get("fileName").is_some() {
            return Ok(Recorded::NotHeld);
        }
        pairs.push((param.str("name")?, param.opt_str("value")?.unwrap_or("")));
    }
    Ok(Recorded::Held(request::form_urlencoded(pairs).into_bytes()))
}
