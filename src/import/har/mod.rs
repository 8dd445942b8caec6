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

mod entry;
#[cfg(test)]
mod tests;
mod time;

use super::doc::{self, At};
use super::plan::{Body, Item, Plan, Request, Step};
use super::request::{self, Base};
use super::{Input, Options as All, Problem};
use entry::{Recorded, body, declared_size, fields, is_asset, is_preflight};
use std::time::Duration;
use time::rfc3339;
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
