//! The bodies curl builds from files and fields: `@FILE` read now (the
//! plan carries the bytes), `--data-urlencode`'s forms encoded, and `-F`'s
//! parts with the file names and types curl gives them.

use crate::import::Problem;
use crate::import::request::FormPart;

/// `@FILE` of `-d`: read now (the plan carries the bytes).
pub(super) fn read_file(name: &[u8], line: usize) -> Result<Vec<u8>, Problem> {
    let name = String::from_utf8_lossy(name);
    if name == "-" {
        return Err(Problem::on_line(
            line,
            "'@-' reads the body from standard input: put it in a file and give @FILE",
        ));
    }
    std::fs::read(&*name).map_err(|e| Problem::on_line(line, format!("cannot read '{name}': {e}")))
}

/// `--data-urlencode`'s forms: `content`, `=content`, `name=content`,
/// `@file`, `name@file`.
pub(super) fn urlencoded(value: &[u8], line: usize) -> Result<Vec<u8>, Problem> {
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
pub(super) fn form_part(spec: &str, literal: bool, line: usize) -> Result<FormPart, Problem> {
    let at = |message: String| Problem::on_line(line, message);
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
