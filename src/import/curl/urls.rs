//! URLs as curl requests them, and shell variables in them: a variable's
//! mark becomes a reference to the environment variable of its name.

use crate::import::Problem;
use crate::import::request::{self, Base};
use crate::import::shell::{VAR_CLOSE, VAR_OPEN};

/// Whether bytes hold a shell variable's mark.
pub(super) fn contains_var(bytes: &[u8]) -> bool {
    let mut mark = [0; 4];
    let mark = VAR_OPEN.encode_utf8(&mut mark).as_bytes();
    bytes.windows(mark.len()).any(|w| w == mark)
}

/// Text with each shell variable's mark as a reference to the environment
/// variable of that name (`{{ API_KEY }}`); the names are added to `names`.
pub(super) fn references(text: &str, names: &mut Vec<String>) -> String {
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
/// stands for it. `line` is the command's, for the problem.
pub(super) fn url_parts(
    raw: &str,
    globoff: bool,
    base: Option<&Base>,
    names: &mut Vec<String>,
    line: usize,
) -> Result<(String, String), Problem> {
    let host_start = raw.find("://").map_or(0, |i| i + 3);
    let host_end = raw[host_start..]
        .find(['/', '?'])
        .map_or(raw.len(), |e| host_start + e);
    let mut raw = raw.to_string();
    if raw[..host_end].contains(VAR_OPEN) {
        let Some(base) = base else {
            return Err(Problem::on_line(
                line,
                format!(
                    "the server of '{}' is a shell variable: give the server with --base URL",
                    references(&raw, &mut Vec::new())
                ),
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
    let url = curl_url(&plain, globoff, line)?;
    let (origin, path) = request::split_url(&url).map_err(|e| Problem::on_line(line, e.to_string()))?;
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
fn curl_url(raw: &str, globoff: bool, line: usize) -> Result<String, Problem> {
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
                return Err(Problem::on_line(
                    line,
                    format!(
                        "'{raw}' uses curl's URL globbing ('{c}'), which makes many requests: escape it (\\{c}) or give -g"
                    ),
                ));
            }
            c => out.push(c),
        }
    }
    Ok(out)
}
