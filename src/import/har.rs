//! `volley import har`: a browser session recorded as HAR 1.2 (Chromium's,
//! Firefox's and Playwright's exports), replayed as its requests in order.
//!
//! The plan runs against one origin: the one the session's first page was
//! loaded from. Requests to other origins are left out (or, with
//! `--include-origin`, written as a plan of their own), and so are what a
//! browser fetches for itself: images, fonts, stylesheets and scripts
//! (unless `--include-assets`), CORS preflights, `data:` and `blob:` URLs.
//! Header fields that belong to the connection or the browser are dropped;
//! `Cookie` is left to volley's cookie jar (`--keep-cookies` replays the
//! recorded ones). Each item is tagged with its page; `--think-time` adds
//! the pauses between pages as `delay` items. The header comment counts
//! everything left out, and why.

use super::doc::{self, At};
use super::plan::{Body, Item, Plan, Request, Step};
use super::request::{self, Base};
use super::{Input, Options as All, Problem};
use base64::Engine as _;
use std::time::Duration;

/// HAR-only options.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Origins to keep besides the main one, each in a plan of its own.
    pub include_origin: Vec<String>,
    pub include_assets: bool,
    pub keep_cookies: bool,
    pub think_time: bool,
}

/// A page of the recording.
struct Page {
    id: String,
    title: String,
    tag: String,
    started: Option<f64>,
}

/// An entry worth replaying.
struct Entry {
    page: Option<usize>,
    /// Seconds since the epoch, and the entry's total time in seconds.
    started: Option<f64>,
    origin: String,
    request: Request,
}

/// What was left out, counted for the header.
#[derive(Default)]
struct LeftOut {
    assets: usize,
    preflights: usize,
    not_http: usize,
    unanswered: usize,
    /// Other origins and how many requests went to each.
    origins: Vec<(String, usize)>,
    fields: Vec<String>,
    templated_fields: usize,
    cookies: bool,
    /// The requests whose body the recording does not hold: each one's
    /// name, and the size the recording gives it when it gives one.
    bodies_missing: Vec<String>,
}

pub fn import(input: &Input, options: &All) -> Result<Vec<Plan>, Problem> {
    let har = &options.har;
    let document = doc::parse_json(&input.text)?;
    let root = At::root(&document);
    let log = root.get("log").ok_or_else(|| {
        root.problem("not a HAR file: it has no 'log' object (a HAR file is JSON with log.entries)")
    })?;
    let pages = pages(&log)?;
    let mut left = LeftOut::default();
    let mut entries = Vec::new();
    let mut all_ends: Vec<(Option<usize>, f64)> = Vec::new();
    let raw_entries = log.need("entries")?.items()?;
    for at in &raw_entries {
        let req = at.need("request")?;
        let url = req.str("url")?;
        let page = match at.opt_str("pageref")? {
            Some(id) => pages.iter().position(|p| p.id == id),
            None => None,
        };
        let started = at.opt_str("startedDateTime")?.and_then(rfc3339);
        let time = at
            .get("time")
            .and_then(|t| t.node.as_f64())
            .unwrap_or(0.0)
            .max(0.0)
            / 1000.0;
        if let Some(started) = started {
            all_ends.push((page, started + time));
        }
        let Ok((origin, path)) = request::split_url(url) else {
            left.not_http += 1;
            continue;
        };
        let method = req.str("method")?.to_ascii_uppercase();
        if is_preflight(at, &req, &method)? {
            left.preflights += 1;
            continue;
        }
        if !har.include_assets && is_asset(at, &path)? {
            left.assets += 1;
            continue;
        }
        // Browsers write status 0 for a request that never had an answer;
        // Playwright writes -1.
        if at
            .get("response")
            .and_then(|r| r.get("status"))
            .and_then(|s| s.node.as_f64())
            .is_some_and(|s| s <= 0.0)
        {
            left.unanswered += 1;
            continue;
        }
        let declared = declared_size(&req)?;
        let headers = fields(&req, har.keep_cookies, &mut left)?;
        let body = match body(&req)? {
            Recorded::Held(bytes) if !bytes.is_empty() || declared.is_none() => Some(bytes),
            Recorded::Held(_) | Recorded::Absent if declared.is_none() => None,
            _ => {
                let size = declared.map(|n| format!(" ({n} bytes)")).unwrap_or_default();
                let name = request::item_name(&method, &request::literal_path(&path));
                left.bodies_missing.push(format!("{name}{size}"));
                None
            }
        };
        entries.push(Entry {
            page,
            started,
            origin,
            request: Request {
                method,
                url: request::literal_path(&path),
                headers,
                body: body.map(Body::Bytes),
            },
        });
    }
    let Some(main) = main_origin(&raw_entries, &entries) else {
        return Err(log.problem("the recording has no HTTP request to replay"));
    };
    for entry in &entries {
        if entry.origin != main && !har.include_origin.contains(&entry.origin) {
            match left.origins.iter_mut().find(|(o, _)| *o == entry.origin) {
                Some((_, n)) => *n += 1,
                None => left.origins.push((entry.origin.clone(), 1)),
            }
        }
    }
    for origin in &har.include_origin {
        if !entries.iter().any(|e| e.origin == *origin) {
            return Err(Problem::usage(format!(
                "--include-origin {origin}: the recording has no request to it"
            )));
        }
    }
    let creator = log
        .get("creator")
        .map(|c| {
            let name = c.opt_str("name").ok().flatten().unwrap_or("an unknown tool");
            let version = c.opt_str("version").ok().flatten().unwrap_or("");
            format!("{name} {version}").trim().to_string()
        })
        .unwrap_or_else(|| "an unknown tool".into());
    let mut plans = Vec::new();
    let mut origins = vec![main.clone()];
    origins.extend(har.include_origin.iter().filter(|o| **o != main).cloned());
    for (index, origin) in origins.iter().enumerate() {
        let base = match (&options.base, index) {
            (Some(base), 0) => base.clone(),
            _ => Base {
                origin: origin.clone(),
                path: String::new(),
            },
        };
        let mine: Vec<&Entry> = entries.iter().filter(|e| e.origin == *origin).collect();
        let (items, delays) = items(&mine, &pages, &all_ends, &base, har.think_time);
        let mut header = vec![format!(
            "Imported by 'volley import har' from {} (HAR by {creator}): the {} request(s) to {origin}, of {} recorded.",
            input.name,
            mine.len(),
            raw_entries.len()
        )];
        if index == 0 {
            header.extend(notes(&left, har, &origins[1..]));
        } else {
            header.push(format!(
                "The rest of the recording (the requests to {main}) is in the main plan."
            ));
        }
        if har.think_time {
            header.push(format!(
                "{delays} delay item(s) between pages, from the recording's timings (--think-time)."
            ));
        }
        plans.push(Plan {
            header,
            base: base.origin,
            items,
            suffix: (index > 0).then(|| origin_suffix(origin)),
        });
    }
    Ok(plans)
}

/// The pages, each with a tag from its title (or id), unique.
fn pages(log: &At<'_>) -> Result<Vec<Page>, Problem> {
    let mut pages: Vec<Page> = Vec::new();
    for at in log.list("pages")? {
        let id = at.str("id")?.to_string();
        let title = at.opt_str("title")?.unwrap_or("").to_string();
        let mut tag = request::slug(&title);
        if tag.is_empty() {
            tag = request::slug(&id);
        }
        if tag.is_empty() {
            tag = format!("page-{}", pages.len() + 1);
        }
        let mut unique = tag.clone();
        let mut n = 2;
        while pages.iter().any(|p| p.tag == unique) {
            unique = format!("{tag}-{n}");
            n += 1;
        }
        let started = at.opt_str("startedDateTime")?.and_then(rfc3339);
        pages.push(Page {
            id,
            title,
            tag: unique,
            started,
        });
    }
    Ok(pages)
}

/// The origin of the first page's document, else of the first request.
fn main_origin(raw: &[At<'_>], entries: &[Entry]) -> Option<String> {
    let document = raw.iter().find_map(|at| {
        let request = at.get("request")?;
        let url = request.opt_str("url").ok()??;
        let resource = at.opt_str("_resourceType").ok().flatten();
        let mime = at
            .get("response")
            .and_then(|r| r.get("content"))
            .and_then(|c| c.opt_str("mimeType").ok().flatten())
            .unwrap_or("");
        let is_document =
            resource == Some("document") || (resource.is_none() && mime.starts_with("text/html"));
        is_document
            .then(|| request::split_url(url).ok().map(|(o, _)| o))
            .flatten()
    });
    document.or_else(|| entries.first().map(|e| e.origin.clone()))
}

fn is_preflight(at: &At<'_>, req: &At<'_>, method: &str) -> Result<bool, Problem> {
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
fn is_asset(at: &At<'_>, path: &str) -> Result<bool, Problem> {
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
fn fields(req: &At<'_>, keep_cookies: bool, left: &mut LeftOut) -> Result<Vec<(String, String)>, Problem> {
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
enum Recorded {
    /// No `postData`.
    Absent,
    Held(Vec<u8>),
    /// A body it names but does not hold: file fields, or no params.
    NotHeld,
}

/// The body size the recording gives (`bodySize`, else the request's
/// `Content-Length`), when it gives one above 0.
fn declared_size(req: &At<'_>) -> Result<Option<u64>, Problem> {
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
fn body(req: &At<'_>) -> Result<Recorded, Problem> {
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

/// The plan's items for one origin's entries: requests in order, a comment
/// where a page starts, and with think time a delay before each page after
/// the first. Returns the items and how many delays they hold.
fn items(
    entries: &[&Entry],
    pages: &[Page],
    ends: &[(Option<usize>, f64)],
    base: &Base,
    think_time: bool,
) -> (Vec<Item>, usize) {
    let mut items = Vec::new();
    let mut delays = 0;
    let mut last_page: Option<Option<usize>> = None;
    for entry in entries {
        let page = entry.page;
        let tags: Vec<String> = page.map(|p| vec![pages[p].tag.clone()]).unwrap_or_default();
        let mut comment = None;
        if last_page != Some(page) {
            if let Some(p) = page {
                let title = if pages[p].title.is_empty() {
                    &pages[p].id
                } else {
                    &pages[p].title
                };
                comment = Some(format!("page {}: {title}", p + 1));
            }
            if think_time
                && let (Some(Some(previous)), Some(p)) = (last_page, page)
                && let Some(pause) = pause_between(previous, p, entry, pages, ends)
            {
                items.push(Item {
                    name: format!("Think before {}", pages[p].tag),
                    tags: tags.clone(),
                    step: Step::Delay(pause),
                    comment: comment.take(),
                });
                delays += 1;
            }
            last_page = Some(page);
        }
        let request = Request {
            url: format!("{}{}", base.path, entry.request.url),
            ..entry.request.clone()
        };
        items.push(Item {
            name: request::item_name(&request.method, &request.url),
            tags,
            step: Step::Request(request),
            comment,
        });
    }
    (items, delays)
}

/// The pause before page `next`: from the end of the last request of page
/// `previous` (of any origin) to the start of `next`.
fn pause_between(
    previous: usize,
    next: usize,
    first: &Entry,
    pages: &[Page],
    ends: &[(Option<usize>, f64)],
) -> Option<Duration> {
    let ended = ends
        .iter()
        .filter(|(p, _)| *p == Some(previous))
        .map(|(_, end)| *end)
        .fold(None, |max: Option<f64>, end| {
            Some(max.map_or(end, |m| m.max(end)))
        })?;
    let start = pages[next].started.or(first.started)?;
    let pause = start - ended;
    (pause >= 0.001).then(|| Duration::from_secs_f64(pause.min(3600.0)))
}

/// The header's notes on what was left out.
fn notes(left: &LeftOut, har: &Options, included: &[String]) -> Vec<String> {
    let mut notes = Vec::new();
    if left.assets > 0 {
        notes.push(format!(
            "Left out: {} request(s) for images, fonts, stylesheets and scripts (--include-assets keeps them).",
            left.assets
        ));
    }
    if !left.origins.is_empty() {
        let origins: Vec<String> = left.origins.iter().map(|(o, n)| format!("{o} ({n})")).collect();
        notes.push(format!(
            "Left out: the requests to other origins: {} (--include-origin ORIGIN writes a plan of their own).",
            request::list_of(&origins, 6)
        ));
    }
    for origin in included {
        notes.push(format!(
            "The requests to {origin} are in a plan of their own (--include-origin)."
        ));
    }
    if left.preflights > 0 {
        notes.push(format!(
            "Left out: {} CORS preflight(s), which only a browser sends.",
            left.preflights
        ));
    }
    if left.not_http > 0 {
        notes.push(format!(
            "Left out: {} request(s) that are not HTTP (data:, blob:, ws:...).",
            left.not_http
        ));
    }
    if left.unanswered > 0 {
        notes.push(format!(
            "Left out: {} request(s) the browser never had an answer to (status 0), or Playwright (status -1).",
            left.unanswered
        ));
    }
    if left.cookies && !har.keep_cookies {
        notes.push(
            "Cookie headers are left to volley's cookie jar (cookies set by the responses ride along); \
             cookies the browser had before the recording are not sent: --keep-cookies sends the recorded ones."
                .into(),
        );
    }
    if !left.fields.is_empty() {
        notes.push(format!(
            "Header fields left out (the connection's own or a browser's, which volley sets or need not send): {}.",
            request::list_of(&left.fields, 12)
        ));
    }
    if left.templated_fields > 0 {
        notes.push(format!(
            "Left out: {} header field(s) whose value holds '{{{{', which a plan would read as a template.",
            left.templated_fields
        ));
    }
    if !left.bodies_missing.is_empty() {
        notes.push(format!(
            "{} request(s) had a body the recording does not hold (a file upload?): they are sent without one: {}.",
            left.bodies_missing.len(),
            request::list_of(&left.bodies_missing, 6)
        ));
    }
    notes
}

/// `https://cdn.example.com:8443` as a file name part: `cdn.example.com-8443`.
fn origin_suffix(origin: &str) -> String {
    let host = origin.split("://").nth(1).unwrap_or(origin);
    host.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect::<String>()
        .trim_matches('-')
        .to_string()
}

/// Seconds since the epoch of an RFC 3339 time (`2024-05-01T10:00:00.123Z`,
/// `...+02:00`), as HAR writes them; `None` if it is not one.
pub fn rfc3339(text: &str) -> Option<f64> {
    let text = text.trim();
    let number = |s: &str| -> Option<i64> { s.bytes().all(|b| b.is_ascii_digit()).then(|| s.parse().ok())? };
    let (date, time) = text.split_once(['T', 't', ' '])?;
    let mut date = date.splitn(3, '-');
    let (year, month, day) = (
        number(date.next()?)?,
        number(date.next()?)?,
        number(date.next()?)?,
    );
    let (clock, offset) = match time.find(['Z', 'z', '+', '-']) {
        Some(at) => (&time[..at], &time[at..]),
        None => (time, "Z"),
    };
    let mut parts = clock.splitn(3, ':');
    let (hour, minute) = (number(parts.next()?)?, number(parts.next()?)?);
    let seconds: f64 = parts.next().unwrap_or("0").parse().ok()?;
    let offset_minutes = match offset {
        "Z" | "z" => 0,
        _ => {
            let sign = if offset.starts_with('-') { -1 } else { 1 };
            let (h, m) = offset[1..].split_once(':').unwrap_or((&offset[1..], "0"));
            sign * (number(h)? * 60 + number(m)?)
        }
    };
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) {
        return None;
    }
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some((days * 86_400 + hour * 3600 + minute * 60 - offset_minutes * 60) as f64 + seconds)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// HAR files in the shape Chromium's devtools and Firefox export them
    /// (written for these tests; the real browser's recording is checked
    /// in the integration tests).
    const CHROMIUM: &str = include_str!("../../tests/fixtures/import/chromium.har");
    const FIREFOX: &str = include_str!("../../tests/fixtures/import/firefox.har");

    fn import_with(text: &str, har: Options) -> Result<Vec<Plan>, Problem> {
        let input = Input {
            name: "session.har".into(),
            text: text.into(),
        };
        import(
            &input,
            &All {
                har,
                ..All::default()
            },
        )
    }

    fn requests(plan: &Plan) -> Vec<(String, String, Vec<String>)> {
        plan.items
            .iter()
            .filter_map(|i| match &i.step {
                Step::Request(r) => Some((r.method.clone(), r.url.clone(), i.tags.clone())),
                Step::Delay(_) => None,
            })
            .collect()
    }

    fn request<'p>(plan: &'p Plan, url: &str) -> &'p Request {
        plan.items
            .iter()
            .find_map(|i| match &i.step {
                Step::Request(r) if r.url == url => Some(r),
                _ => None,
            })
            .unwrap_or_else(|| panic!("no request for {url}"))
    }

    #[test]
    fn a_chromium_recording_keeps_the_pages_own_requests() {
        let plans = import_with(CHROMIUM, Options::default()).unwrap();
        assert_eq!(plans.len(), 1);
        let plan = &plans[0];
        assert_eq!(plan.base, "http://shop.test");
        let first = vec!["http-shop-test".to_string()];
        let second = vec!["checkout".to_string()];
        assert_eq!(
            requests(plan),
            [
                ("GET".into(), "/".into(), first.clone()),
                ("POST".into(), "/api/cart".into(), first.clone()),
                (
                    "GET".into(),
                    "/api/cart?expand=items&note=%7B%7Bx%7D%7D".into(),
                    first
                ),
                ("GET".into(), "/checkout".into(), second.clone()),
                ("PUT".into(), "/api/order/7".into(), second),
            ]
        );
        let cart = request(plan, "/api/cart");
        assert_eq!(
            cart.headers,
            [
                ("content-type".to_string(), "application/json".to_string()),
                ("accept".into(), "application/json".into()),
                ("x-csrf".into(), "t0k3n".into()),
                ("user-agent".into(), "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36".into()),
            ]
        );
        assert_eq!(
            cart.body,
            Some(Body::Bytes(b"{\"sku\":\"A-1\",\"qty\":2}".to_vec()))
        );
        assert_eq!(
            request(plan, "/api/cart?expand=items&note=%7B%7Bx%7D%7D").headers[0],
            ("accept".into(), "application/json, text/plain".into())
        );
        assert_eq!(
            request(plan, "/api/order/7").body,
            Some(Body::Bytes(vec![0, 1, 2, 255]))
        );
        assert_eq!(
            plan.items[0].comment.as_deref(),
            Some("page 1: http://shop.test/")
        );
        assert_eq!(plan.items[3].comment.as_deref(), Some("page 2: Checkout"));
        let header = plan.header.join("\n");
        for said in [
            "WebInspector 537.36",
            "the 5 request(s) to http://shop.test, of 12 recorded",
            "3 request(s) for images, fonts, stylesheets and scripts",
            "http://api.shop.test (1)",
            "1 CORS preflight",
            "1 request(s) that are not HTTP",
            "never had an answer to (status 0)",
            "cookie jar",
            ":authority",
            "sec-*",
            "upgrade-insecure-requests",
            "priority",
            "content-length",
        ] {
            assert!(
                header.contains(said),
                "the header does not say {said:?}:\n{header}"
            );
        }
    }

    #[test]
    fn options_keep_what_is_left_out_by_default() {
        let plans = import_with(
            CHROMIUM,
            Options {
                include_origin: vec!["http://api.shop.test".into()],
                include_assets: true,
                keep_cookies: true,
                think_time: true,
            },
        )
        .unwrap();
        assert_eq!(plans.len(), 2);
        let main = &plans[0];
        assert!(requests(main).iter().any(|(_, url, _)| url == "/style.css"));
        assert_eq!(
            request(main, "/")
                .headers
                .iter()
                .find(|(n, _)| n == "cookie")
                .unwrap()
                .1,
            "theme=dark; consent=yes"
        );
        let delays: Vec<Duration> = main
            .items
            .iter()
            .filter_map(|i| match i.step {
                Step::Delay(d) => Some(d),
                Step::Request(_) => None,
            })
            .collect();
        // Page 2 starts at 5.000 s; page 1's last request ended at 1.7205 s.
        assert_eq!(delays.len(), 1);
        assert!((delays[0].as_secs_f64() - 3.2795).abs() < 0.001, "{delays:?}");
        let api = &plans[1];
        assert_eq!(api.suffix.as_deref(), Some("api.shop.test"));
        assert_eq!(api.base, "http://api.shop.test");
        assert_eq!(requests(api).len(), 1, "the preflight stays out");
        assert!(
            main.header
                .iter()
                .any(|h| h.contains("http://api.shop.test are in a plan of their own"))
        );
    }

    #[test]
    fn a_firefox_recording_with_form_params_and_offsets() {
        let plans = import_with(
            FIREFOX,
            Options {
                think_time: true,
                ..Options::default()
            },
        )
        .unwrap();
        let plan = &plans[0];
        assert_eq!(plan.base, "http://shop.test");
        let urls: Vec<String> = requests(plan).into_iter().map(|(_, url, _)| url).collect();
        assert_eq!(urls, ["/", "/login", "/account"]);
        let login = request(plan, "/login");
        assert_eq!(
            login.body,
            Some(Body::Bytes(b"user=ann+lee&next=%2Fa%26b".to_vec()))
        );
        assert!(
            login
                .headers
                .iter()
                .all(|(n, _)| n != "Host" && n != "Connection" && !n.starts_with("Sec-"))
        );
        assert_eq!(plan.items[0].tags, ["volley-shop"]);
        assert!(plan.header.iter().any(|h| h.contains("Firefox 128.0")));
    }

    #[test]
    fn bad_recordings_say_where() {
        for (text, place, says) in [
            ("{\"entries\": []}", "/", "not a HAR file"),
            ("{\"log\": {}}", "/log", "'entries' is missing"),
            ("{\"log\": {\"entries\": {}}}", "/log/entries", "must be a list"),
            (
                "{\"log\": {\"entries\": [{\"request\": {\"method\": \"GET\"}}]}}",
                "/log/entries/0/request",
                "'url' is missing",
            ),
            (
                "{\"log\": {\"entries\": [{\"request\": {\"method\": 1, \"url\": \"http://h/\"}}]}}",
                "/log/entries/0/request/method",
                "must be a string",
            ),
            ("{\"log\": {\"entries\": []}}", "/log", "no HTTP request"),
            ("{\"log\": ", "line 1", "not valid JSON"),
        ] {
            let problem = import_with(text, Options::default()).unwrap_err();
            assert_eq!(problem.place, place, "{text}: {problem}");
            assert!(problem.message.contains(says), "{text}: {problem}");
        }
        let nowhere = import_with(
            CHROMIUM,
            Options {
                include_origin: vec!["http://nope.test".into()],
                ..Options::default()
            },
        );
        assert!(nowhere.unwrap_err().message.contains("no request to it"));
    }

    #[test]
    fn unanswered_requests_and_bodies_not_held_are_said() {
        let entry = |method: &str, path: &str, status: i32, request_extra: &str| {
            format!(
                r#"{{"request": {{"method": "{method}", "url": "http://h.test{path}"{request_extra}}}, "response": {{"status": {status}}}}}"#
            )
        };
        let empty = r#", "postData": {"mimeType": "text/plain", "text": ""}"#;
        let har = format!(
            r#"{{"log": {{"entries": [{}, {}, {}, {}, {}]}}}}"#,
            entry("GET", "/", 200, r#", "headers": []"#),
            entry("GET", "/hang", -1, ""),
            entry("POST", "/empty", 201, &format!(r#", "bodySize": 7{empty}"#)),
            entry(
                "POST",
                "/sized",
                201,
                &format!(r#", "headers": [{{"name": "Content-Length", "value": "5"}}]{empty}"#)
            ),
            entry(
                "POST",
                "/kept",
                201,
                r#", "bodySize": 7, "postData": {"mimeType": "text/plain", "text": "1234567"}"#
            ),
        );
        let plans = import_with(&har, Options::default()).unwrap();
        let urls: Vec<String> = requests(&plans[0]).into_iter().map(|(_, url, _)| url).collect();
        assert_eq!(
            urls,
            ["/", "/empty", "/sized", "/kept"],
            "Playwright's -1 is no answer"
        );
        assert_eq!(request(&plans[0], "/empty").body, None);
        assert_eq!(
            request(&plans[0], "/kept").body,
            Some(Body::Bytes(b"1234567".to_vec()))
        );
        let header = plans[0].header.join("\n");
        assert!(
            header.contains("1 request(s) the browser never had an answer to"),
            "{header}"
        );
        assert!(
            header.contains("2 request(s) had a body the recording does not hold")
                && header.contains("POST /empty (7 bytes), POST /sized (5 bytes)"),
            "{header}"
        );
    }

    #[test]
    fn times_as_har_writes_them() {
        assert_eq!(rfc3339("1970-01-01T00:00:00Z"), Some(0.0));
        assert_eq!(rfc3339("2024-05-01T12:00:00.5+02:00"), Some(1_714_557_600.5));
        assert_eq!(
            rfc3339("2024-05-01T10:00:00.500Z"),
            rfc3339("2024-05-01T12:00:00.5+02:00")
        );
        assert_eq!(rfc3339("2000-03-01T00:00:00-00:30"), Some(951_870_600.0));
        assert_eq!(rfc3339("yesterday"), None);
        assert_eq!(rfc3339("2024-13-01T00:00:00Z"), None);
    }
}
