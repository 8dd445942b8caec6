//! The plan an import makes, and its YAML: the format `volley plan` runs
//! (drill's), written so that any value reads back exactly as it was.
//!
//! A value is written plain only when no YAML reader could take it for
//! anything but that text (`/api/users`, `GET /a`); anything that could be
//! a number, a boolean, null, an alias (`*x`), a comment or a key (`a: b`)
//! is quoted: single quotes when the text is printable on one line,
//! double quotes with escapes otherwise. Bodies go inline when short and
//! textual, and into files beside the plan when long or binary (or as
//! `hex:` when the plan goes to standard output). After writing, the text
//! is read back with the plan reader and compared item by item
//! ([`check_reads_back`]): a plan that would not run as imported is a bug
//! reported as such, never a file written.

use crate::scenario::file::{self, ActionDef, BodyDef};
use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

/// Bodies longer than this go to a file of their own (when there is a
/// plan file to put it beside).
pub const INLINE_BODY_MAX: usize = 4096;

/// A plan, ready to write.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Plan {
    /// The comment header: where the plan came from, what was left out or
    /// skipped, what to set. One line each, without the `# `.
    pub header: Vec<String>,
    /// The plan's `base` (an origin, or an environment template).
    pub base: String,
    pub items: Vec<Item>,
    /// Where the file goes, relative to `-o`: `None` for the main plan,
    /// a suffix (`cdn.example.com`) for one more origin's.
    pub suffix: Option<String>,
}

/// One plan item.
#[derive(Debug, Clone, PartialEq)]
pub struct Item {
    pub name: String,
    pub tags: Vec<String>,
    pub step: Step,
    /// A comment line written above the item.
    pub comment: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    Request(Request),
    Delay(Duration),
}

/// A request. `url` and header values are template text: an importer
/// escapes recorded text ([`super::request::literal_path`]) and writes
/// `{{ NAME }}` only where it means a placeholder.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    pub method: String,
    /// A path (with its query) on the plan's base.
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub body: Option<Body>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Body {
    /// Bytes sent as they are (never read as a template).
    Bytes(Vec<u8>),
    /// Text with `{{ }}` placeholders in it.
    Template(String),
}

impl Plan {
    /// How many request items the plan has.
    pub fn requests(&self) -> usize {
        self.items
            .iter()
            .filter(|i| matches!(i.step, Step::Request(_)))
            .count()
    }
}

/// Where bodies that do not go inline are put.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Bodies {
    /// In files under this folder (relative to the plan's).
    Beside(String),
    /// Nowhere else: inline, binary ones as `hex:`.
    Inline,
}

/// A plan as text, with the body files it names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendered {
    pub yaml: String,
    /// Body files: path relative to the plan's folder, and contents.
    pub files: Vec<(String, Vec<u8>)>,
}

/// Writes `plan` as YAML.
pub fn render(plan: &Plan, bodies: &Bodies) -> Rendered {
    let mut out = String::new();
    for line in &plan.header {
        let _ = writeln!(out, "# {}", one_line(line));
    }
    let _ = writeln!(out, "base: {}", scalar(&plan.base));
    out.push_str("concurrency: 1\niterations: 1\nplan:\n");
    let mut files = Vec::new();
    for (index, item) in plan.items.iter().enumerate() {
        if index > 0 {
            out.push('\n');
        }
        if let Some(comment) = &item.comment {
            let _ = writeln!(out, "  # {}", one_line(comment));
        }
        let _ = writeln!(out, "  - name: {}", scalar(&item.name));
        match &item.step {
            Step::Request(request) => {
                out.push_str("    request:\n");
                let _ = writeln!(out, "      url: {}", scalar(&request.url));
                if request.method != "GET" {
                    let _ = writeln!(out, "      method: {}", scalar(&request.method));
                }
                if !request.headers.is_empty() {
                    out.push_str("      headers:\n");
                    for (name, value) in &request.headers {
                        let _ = writeln!(out, "        {}: {}", scalar(name), scalar(value));
                    }
                }
                match &request.body {
                    None => {}
                    Some(Body::Template(text)) => {
                        let _ = writeln!(out, "      body: {}", scalar(text));
                    }
                    Some(Body::Bytes(bytes)) => {
                        write_body(&mut out, &mut files, bytes, index, item, request, bodies)
                    }
                }
            }
            Step::Delay(delay) => {
                let _ = writeln!(out, "    delay:\n      seconds: {}", seconds(*delay));
            }
        }
        if !item.tags.is_empty() {
            let tags: Vec<String> = item.tags.iter().map(|t| scalar(t)).collect();
            let _ = writeln!(out, "    tags: [{}]", tags.join(", "));
        }
    }
    Rendered { yaml: out, files }
}

fn write_body(
    out: &mut String,
    files: &mut Vec<(String, Vec<u8>)>,
    bytes: &[u8],
    index: usize,
    item: &Item,
    request: &Request,
    bodies: &Bodies,
) {
    let textual = std::str::from_utf8(bytes).ok().filter(|t| is_textual(t));
    let text = textual.filter(|t| !super::request::looks_templated(t));
    match (text, bodies) {
        (Some(text), Bodies::Inline) => {
            let _ = writeln!(out, "      body: {}", scalar(text));
        }
        (Some(text), Bodies::Beside(_)) if text.len() <= INLINE_BODY_MAX => {
            let _ = writeln!(out, "      body: {}", scalar(text));
        }
        (_, Bodies::Beside(folder)) => {
            let content_type = request
                .headers
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case("content-type"))
                .map(|(_, v)| v.as_str());
            let name = format!(
                "{folder}/{:03}-{}.{}",
                index + 1,
                super::request::slug(&item.name),
                extension(content_type, textual.is_some())
            );
            let _ = writeln!(out, "      body:\n        file: {}", scalar(&name));
            files.push((name, bytes.to_vec()));
        }
        (None, Bodies::Inline) => {
            let mut hex = String::with_capacity(bytes.len() * 2);
            for b in bytes {
                let _ = write!(hex, "{b:02x}");
            }
            let _ = writeln!(out, "      body:\n        hex: {hex}");
        }
    }
}

/// Text a YAML scalar carries as it is: no control characters but tabs
/// and line ends.
fn is_textual(text: &str) -> bool {
    !text
        .chars()
        .any(|c| c.is_control() && !matches!(c, '\t' | '\n' | '\r'))
}

/// A body file's extension from its content type.
fn extension(content_type: Option<&str>, textual: bool) -> &'static str {
    let essence = content_type
        .and_then(|c| c.split(';').next())
        .map(|c| c.trim().to_ascii_lowercase())
        .unwrap_or_default();
    match essence.as_str() {
        t if t == "application/json" || t.ends_with("+json") => "json",
        t if t.ends_with("/xml") || t.ends_with("+xml") => "xml",
        "application/x-www-form-urlencoded" => "form",
        "text/html" => "html",
        "text/csv" => "csv",
        t if t.starts_with("text/") => "txt",
        _ if textual => "txt",
        _ => "bin",
    }
}

/// Seconds as the plan reader takes them (`1.25`).
fn seconds(delay: Duration) -> String {
    let text = format!("{:.3}", delay.as_secs_f64());
    let text = text.trim_end_matches('0').trim_end_matches('.');
    if text.is_empty() { "0".into() } else { text.into() }
}

/// A comment's text on one line.
fn one_line(text: &str) -> String {
    text.replace(['\r', '\n'], " ")
}

/// Words a YAML reader might take for a boolean or null.
const KEYWORDS: &[&str] = &["y", "n", "yes", "no", "on", "off", "true", "false", "null", "~"];

/// `text` as a YAML scalar that reads back as exactly this text.
pub fn scalar(text: &str) -> String {
    if is_plain(text) {
        return text.to_string();
    }
    if text
        .chars()
        .all(|c| c == '\t' || (is_printable(c) && c != '\u{85}' && !c.is_control()))
    {
        return format!("'{}'", text.replace('\'', "''"));
    }
    double_quoted(text)
}

/// Whether `text` can be written without quotes: it starts with a letter,
/// `/` or `_`, holds only characters with no meaning to YAML anywhere in a
/// plain scalar (no `:`, `#`, `,`, brackets, braces or quotes at the start),
/// does not end in a space, and is no keyword.
fn is_plain(text: &str) -> bool {
    let Some(first) = text.chars().next() else {
        return false;
    };
    (first.is_ascii_alphabetic() || first == '/' || first == '_')
        && !text.ends_with(' ')
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || " _-./()+;=~^@%&?*'!$".contains(c))
        && !KEYWORDS.contains(&text.to_ascii_lowercase().as_str())
}

/// YAML's printable characters (YAML 1.2, section 5.1), less the byte
/// order mark, which a reader may drop.
fn is_printable(c: char) -> bool {
    matches!(c, '\u{20}'..='\u{7e}' | '\u{a0}'..='\u{d7ff}' | '\u{e000}'..='\u{fffd}' | '\u{10000}'..)
        && c != '\u{feff}'
}

fn double_quoted(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\0' => out.push_str("\\0"),
            c if is_printable(c) && c != '\u{2028}' && c != '\u{2029}' => out.push(c),
            c if (c as u32) < 0x100 => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if (c as u32) < 0x10000 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => {
                let _ = write!(out, "\\U{:08x}", c as u32);
            }
        }
    }
    out.push('"');
    out
}

/// How a written plan reads back differently from the plan it was written
/// from.
#[derive(Debug, thiserror::Error)]
pub enum ReadBackError {
    #[error(transparent)]
    Unreadable(#[from] file::FileError),
    #[error("'base' reads back as {0:?}")]
    Base(Option<String>),
    #[error("{read} items read back, not {wrote}")]
    Count { read: usize, wrote: usize },
    #[error("item {number} ('{name}'): its {what} reads back differently")]
    Item {
        number: usize,
        name: String,
        what: &'static str,
    },
}

/// Reads `rendered` back with the plan reader (as the file `path`) and
/// checks it says what `plan` says; an `Err` is a bug in the writer.
pub fn check_reads_back(plan: &Plan, rendered: &Rendered, path: &Path) -> Result<(), ReadBackError> {
    if super::request::looks_templated(&plan.base) {
        // The reader fills a templated base from the environment at once;
        // the rest reads the same under any base.
        let plain = Plan {
            base: "http://base.invalid".into(),
            ..plan.clone()
        };
        let bodies = match rendered.files.first() {
            Some((name, _)) => Bodies::Beside(name.split('/').next().unwrap_or_default().to_string()),
            None => Bodies::Inline,
        };
        return check_reads_back(&plain, &render(&plain, &bodies), path);
    }
    let read = file::parse(path, &rendered.yaml)?;
    if read.settings.base.as_deref() != Some(plan.base.as_str()) {
        return Err(ReadBackError::Base(read.settings.base));
    }
    if read.items.len() != plan.items.len() {
        return Err(ReadBackError::Count {
            read: read.items.len(),
            wrote: plan.items.len(),
        });
    }
    for (index, (wrote, read)) in plan.items.iter().zip(&read.items).enumerate() {
        let differs = |what: &'static str| {
            Err(ReadBackError::Item {
                number: index + 1,
                name: wrote.name.clone(),
                what,
            })
        };
        if read.name != wrote.name {
            return differs("name");
        }
        if read.tags != wrote.tags {
            return differs("tags");
        }
        match (&wrote.step, &read.action) {
            (Step::Delay(d), ActionDef::Delay(r)) if (d.as_secs_f64() - r.as_secs_f64()).abs() < 0.001 => {}
            (Step::Request(w), ActionDef::Request { request: r, .. }) => {
                if r.url != w.url {
                    return differs("url");
                }
                if r.method != w.method {
                    return differs("method");
                }
                if r.headers != w.headers {
                    return differs("headers");
                }
                let body_same = match (&w.body, &r.body) {
                    (None, None) => true,
                    (Some(Body::Template(t)), Some(BodyDef::Text(r))) => t == r,
                    (Some(Body::Bytes(b)), Some(BodyDef::Text(r))) => b == r.as_bytes(),
                    (Some(Body::Bytes(b)), Some(BodyDef::Bytes(r))) => b == r,
                    (Some(Body::Bytes(b)), Some(BodyDef::File(f))) => rendered
                        .files
                        .iter()
                        .any(|(name, bytes)| f.ends_with(name) && bytes == b),
                    _ => false,
                };
                if !body_same {
                    return differs("body");
                }
            }
            _ => return differs("step"),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(url: &str, headers: &[(&str, &str)], body: Option<Body>) -> Item {
        Item {
            name: "GET /x".into(),
            tags: vec![],
            step: Step::Request(Request {
                method: "POST".into(),
                url: url.into(),
                headers: headers
                    .iter()
                    .map(|(n, v)| (n.to_string(), v.to_string()))
                    .collect(),
                body,
            }),
            comment: None,
        }
    }

    /// Strings that mean something else to YAML, or need escapes.
    const AWKWARD: &[&str] = &[
        "yes",
        "No",
        "ON",
        "y",
        "~",
        "null",
        "true",
        "1e3",
        "0x1F",
        ".inf",
        "-1",
        "+1",
        "010",
        "1_000",
        ": ",
        "a: b",
        "a:b",
        "*star",
        "&anchor",
        "!tag",
        "%directive",
        "@at",
        "`tick",
        "#hash",
        "a #b",
        "- item",
        "? key",
        "[1]",
        "{a}",
        "{{ x }}",
        "'",
        "''",
        "\"",
        "\\",
        "a\\nb",
        "|",
        ">",
        "<<",
        " lead",
        "trail ",
        "",
        " ",
        "tab\there",
        "line\nbreak",
        "cr\rlf",
        "nul\0",
        "\u{7f}del",
        "\u{85}nel",
        "\u{feff}bom",
        "\u{2028}ls",
        "zoë",
        "日本",
        "emoji 😀",
        "\u{1}",
        "a,b",
        "a]b",
        "--- doc",
        "...",
    ];

    #[test]
    fn awkward_values_read_back_as_written() {
        let mut items = Vec::new();
        for (i, text) in AWKWARD.iter().enumerate() {
            let mut item = request(
                &format!("/x/{i}"),
                &[("X-Value", text), ("X-N", &i.to_string())],
                Some(Body::Template(text.to_string())),
            );
            item.name = format!("{i} {text}");
            item.tags = vec![text.to_string(), "t".into()];
            items.push(item);
        }
        let plan = Plan {
            header: vec!["a header\nthat spans lines".into()],
            base: "http://127.0.0.1:3000".into(),
            items,
            suffix: None,
        };
        let rendered = render(&plan, &Bodies::Inline);
        check_reads_back(&plan, &rendered, Path::new("plan.yml"))
            .unwrap_or_else(|e| panic!("{e}\n{}", rendered.yaml));
        for text in AWKWARD {
            let quoted = scalar(text);
            let node = crate::scenario::yaml::parse(&format!("k: {quoted}\n"))
                .unwrap()
                .root;
            let read = node
                .as_mapping()
                .unwrap()
                .get_scalar("k")
                .map(|s| s.as_str().to_string());
            assert_eq!(read.as_deref(), Some(*text), "{quoted}");
            if text.is_empty()
                || AWKWARD.iter().take(14).any(|t| t == text)
                || text.starts_with(['*', '&', '!', ':'])
            {
                assert_ne!(&quoted, text, "{text} must be quoted");
            }
        }
    }

    #[test]
    fn random_text_reads_back() {
        // A fixed-seed generator over characters YAML treats specially.
        let alphabet: Vec<char> = " :#'\"\\-?*&!%@`{}[],|>\n\t\r\0\u{85}\u{feff}aZ09_/.éあ😀"
            .chars()
            .collect();
        let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
        let mut items = Vec::new();
        for i in 0..400 {
            let mut text = String::new();
            for _ in 0..(i % 13) {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                text.push(alphabet[(seed % alphabet.len() as u64) as usize]);
            }
            let mut item = request(
                "/",
                &[("X-R", &text)],
                Some(Body::Bytes(text.clone().into_bytes())),
            );
            item.name = format!("n{i}{text}");
            items.push(item);
        }
        let plan = Plan {
            base: "http://h".into(),
            items,
            ..Plan::default()
        };
        for bodies in [Bodies::Inline, Bodies::Beside("p.bodies".into())] {
            let rendered = render(&plan, &bodies);
            check_reads_back(&plan, &rendered, Path::new("p.yml")).unwrap_or_else(|e| panic!("{e}"));
        }
    }

    #[test]
    fn bodies_go_inline_beside_or_as_hex() {
        let long = "x".repeat(INLINE_BODY_MAX + 1);
        let plan = Plan {
            base: "http://h".into(),
            items: vec![
                request("/a", &[], Some(Body::Bytes(b"{\"a\":1}".to_vec()))),
                request(
                    "/b",
                    &[("Content-Type", "application/json")],
                    Some(Body::Bytes(long.clone().into_bytes())),
                ),
                request("/c", &[], Some(Body::Bytes(vec![0, 1, 255]))),
                request("/d", &[], Some(Body::Bytes(b"{{ not a template }}".to_vec()))),
            ],
            ..Plan::default()
        };
        let beside = render(&plan, &Bodies::Beside("plan.bodies".into()));
        assert!(beside.yaml.contains("body: '{\"a\":1}'"), "{}", beside.yaml);
        let names: Vec<&str> = beside.files.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "plan.bodies/002-get-x.json",
                "plan.bodies/003-get-x.bin",
                "plan.bodies/004-get-x.txt"
            ]
        );
        check_reads_back(&plan, &beside, Path::new("plan.yml")).unwrap();
        let inline = render(&plan, &Bodies::Inline);
        assert!(inline.files.is_empty());
        assert!(inline.yaml.contains("hex: 0001ff"), "{}", inline.yaml);
        check_reads_back(&plan, &inline, Path::new("plan.yml")).unwrap();
        assert_eq!(seconds(Duration::from_millis(1250)), "1.25");
        assert_eq!(seconds(Duration::ZERO), "0");
    }
}
