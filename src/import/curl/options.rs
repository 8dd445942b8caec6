//! curl's options, read from one command's words: the ones that shape
//! the request fill a [`Curl`]; the ones that change nothing curl sends
//! are noted as ignored; any other is an error naming it.

use super::Curl;
use super::body::{form_part, read_file, urlencoded};
use crate::import::Problem;
use crate::import::request;
use crate::import::shell::Command;

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
fn text(word: &[u8], line: usize) -> Result<String, Problem> {
    String::from_utf8(word.to_vec())
        .map_err(|_| Problem::on_line(line, "an option or URL that is not UTF-8 text"))
}

/// Reads one command's options.
pub(super) fn read_command(command: &Command) -> Result<Curl, Problem> {
    let line = command.line;
    let at = |message: String| Problem::on_line(line, message);
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
                    flag(&mut curl, &format!("-{c}"), line)?;
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
            flag(&mut curl, &option, line)?;
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
fn flag(curl: &mut Curl, option: &str, line: usize) -> Result<(), Problem> {
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
        _ if option_takes_value(option) => {
            return Err(Problem::on_line(line, format!("'{option}' needs a value")));
        }
        _ => return Err(Problem::on_line(line, unknown(option))),
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
    let at = |message: String| Problem::on_line(line, message);
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
