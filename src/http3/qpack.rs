//! QPACK (RFC 9204) as volley needs it: requests encoded with the static
//! table and literals only, and response field sections decoded from the
//! same.
//!
//! volley tells the server its dynamic table has no room (capacity 0, the
//! protocol's default), so every field section it receives must have a
//! Required Insert Count of 0 and name only static entries or literals;
//! anything else is a decoding error, never a wait on an encoder stream.
//! Encoding needs no dynamic table either: the request is encoded once
//! before the run and sent as is on every stream.

use crate::http2::hpack::{self, HpackError};
use crate::http2::integer;

/// Why a field section could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("QPACK: {0}")]
pub struct QpackError(pub &'static str);

/// QPACK's integers and string literals are HPACK's (RFC 9204, 4.1.1), and
/// so are their errors.
impl From<HpackError> for QpackError {
    fn from(err: HpackError) -> QpackError {
        QpackError(err.0)
    }
}

/// RFC 9204 appendix A.
const STATIC_TABLE: [(&[u8], &[u8]); 99] = [
    (b":authority", b""),
    (b":path", b"/"),
    (b"age", b"0"),
    (b"content-disposition", b""),
    (b"content-length", b"0"),
    (b"cookie", b""),
    (b"date", b""),
    (b"etag", b""),
    (b"if-modified-since", b""),
    (b"if-none-match", b""),
    (b"last-modified", b""),
    (b"link", b""),
    (b"location", b""),
    (b"referer", b""),
    (b"set-cookie", b""),
    (b":method", b"CONNECT"),
    (b":method", b"DELETE"),
    (b":method", b"GET"),
    (b":method", b"HEAD"),
    (b":method", b"OPTIONS"),
    (b":method", b"POST"),
    (b":method", b"PUT"),
    (b":scheme", b"http"),
    (b":scheme", b"https"),
    (b":status", b"103"),
    (b":status", b"200"),
    (b":status", b"304"),
    (b":status", b"404"),
    (b":status", b"503"),
    (b"accept", b"*/*"),
    (b"accept", b"application/dns-message"),
    (b"accept-encoding", b"gzip, deflate, br"),
    (b"accept-ranges", b"bytes"),
    (b"access-control-allow-headers", b"cache-control"),
    (b"access-control-allow-headers", b"content-type"),
    (b"access-control-allow-origin", b"*"),
    (b"cache-control", b"max-age=0"),
    (b"cache-control", b"max-age=2592000"),
    (b"cache-control", b"max-age=604800"),
    (b"cache-control", b"no-cache"),
    (b"cache-control", b"no-store"),
    (b"cache-control", b"public, max-age=31536000"),
    (b"content-encoding", b"br"),
    (b"content-encoding", b"gzip"),
    (b"content-type", b"application/dns-message"),
    (b"content-type", b"application/javascript"),
    (b"content-type", b"application/json"),
    (b"content-type", b"application/x-www-form-urlencoded"),
    (b"content-type", b"image/gif"),
    (b"content-type", b"image/jpeg"),
    (b"content-type", b"image/png"),
    (b"content-type", b"text/css"),
    (b"content-type", b"text/html; charset=utf-8"),
    (b"content-type", b"text/plain"),
    (b"content-type", b"text/plain;charset=utf-8"),
    (b"range", b"bytes=0-"),
    (b"strict-transport-security", b"max-age=31536000"),
    (
        b"strict-transport-security",
        b"max-age=31536000; includesubdomains",
    ),
    (
        b"strict-transport-security",
        b"max-age=31536000; includesubdomains; preload",
    ),
    (b"vary", b"accept-encoding"),
    (b"vary", b"origin"),
    (b"x-content-type-options", b"nosniff"),
    (b"x-xss-protection", b"1; mode=block"),
    (b":status", b"100"),
    (b":status", b"204"),
    (b":status", b"206"),
    (b":status", b"302"),
    (b":status", b"400"),
    (b":status", b"403"),
    (b":status", b"421"),
    (b":status", b"425"),
    (b":status", b"500"),
    (b"accept-language", b""),
    (b"access-control-allow-credentials", b"FALSE"),
    (b"access-control-allow-credentials", b"TRUE"),
    (b"access-control-allow-headers", b"*"),
    (b"access-control-allow-methods", b"get"),
    (b"access-control-allow-methods", b"get, post, options"),
    (b"access-control-allow-methods", b"options"),
    (b"access-control-expose-headers", b"content-length"),
    (b"access-control-request-headers", b"content-type"),
    (b"access-control-request-method", b"get"),
    (b"access-control-request-method", b"post"),
    (b"alt-svc", b"clear"),
    (b"authorization", b""),
    (
        b"content-security-policy",
        b"script-src 'none'; object-src 'none'; base-uri 'none'",
    ),
    (b"early-data", b"1"),
    (b"expect-ct", b""),
    (b"forwarded", b""),
    (b"if-range", b""),
    (b"origin", b""),
    (b"purpose", b"prefetch"),
    (b"server", b""),
    (b"timing-allow-origin", b"*"),
    (b"upgrade-insecure-requests", b"1"),
    (b"user-agent", b""),
    (b"x-forwarded-for", b""),
    (b"x-frame-options", b"deny"),
    (b"x-frame-options", b"sameorigin"),
];

/// Starts a field section: Required Insert Count 0 and Base 0, as no
/// dynamic table is used.
pub fn start_section(out: &mut Vec<u8>) {
    out.extend_from_slice(&[0, 0]);
}

/// Appends one field line (`name` lower-case): a static entry by index
/// when name and value match one, the value literal after a static name
/// when only the name does, else both literal. No Huffman coding: the
/// request is encoded once, so its size matters more than the time.
pub fn put_field(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    let mut name_match = None;
    for (i, (n, v)) in STATIC_TABLE.iter().enumerate() {
        if *n == name {
            if *v == value {
                // Indexed field line, static: 1 1 index(6).
                integer(out, 0xc0, 6, i);
                return;
            }
            name_match.get_or_insert(i);
        }
    }
    match name_match {
        Some(i) => {
            // Literal with name reference, static, may be indexed: 0 1 0 1 index(4).
            integer(out, 0x50, 4, i);
        }
        None => {
            // Literal with literal name: 0 0 1 0 H=0 length(3).
            integer(out, 0x20, 3, name.len());
            out.extend_from_slice(name);
        }
    }
    integer(out, 0x00, 7, value.len());
    out.extend_from_slice(value);
}

fn static_entry(index: usize) -> Result<(&'static [u8], &'static [u8]), QpackError> {
    STATIC_TABLE
        .get(index)
        .copied()
        .ok_or(QpackError("static table index out of range"))
}

/// Decodes a response's field section. Returns `:status`; every field is
/// handed to `field` only when `want_fields` (a plan keeping headers),
/// else only the status is decoded and the rest skipped. `name` and
/// `value` are scratch buffers kept by the caller.
pub fn decode_response(
    block: &[u8],
    want_fields: bool,
    name: &mut Vec<u8>,
    value: &mut Vec<u8>,
    mut field: impl FnMut(&[u8], &[u8]),
) -> Result<u16, QpackError> {
    let mut pos = 0;
    if hpack::integer(block, &mut pos, 8)? != 0 {
        return Err(QpackError(
            "a field section refers to the dynamic table, which volley never allows",
        ));
    }
    // Sign and Delta Base: meaningless without a dynamic table.
    hpack::integer(block, &mut pos, 7)?;
    let mut status = None;
    let mut regular = false;
    while pos < block.len() {
        let first = block[pos];
        let (static_name, static_value) = if first & 0x80 != 0 {
            // Indexed field line.
            if first & 0x40 == 0 {
                return Err(QpackError("a dynamic table reference"));
            }
            let (n, v) = static_entry(hpack::integer(block, &mut pos, 6)?)?;
            (Some(n), Some(v))
        } else if first & 0x40 != 0 {
            // Literal with name reference.
            if first & 0x10 == 0 {
                return Err(QpackError("a dynamic table reference"));
            }
            let (n, _) = static_entry(hpack::integer(block, &mut pos, 4)?)?;
            (Some(n), None)
        } else if first & 0x20 != 0 {
            // Literal with literal name.
            (None, None)
        } else {
            // The post-base forms (0001, 0000): dynamic table only.
            return Err(QpackError("a dynamic table reference"));
        };
        let name: &[u8] = match static_name {
            Some(n) => n,
            None => {
                hpack::string(block, &mut pos, 3, Some(name))?;
                name
            }
        };
        let is_status = name == b":status";
        let value: &[u8] = match static_value {
            Some(v) => v,
            None => {
                let wanted = is_status || want_fields;
                hpack::string(block, &mut pos, 7, wanted.then_some(&mut *value))?;
                value
            }
        };
        if is_status {
            if regular || status.is_some() {
                return Err(QpackError("a misplaced or repeated :status"));
            }
            status = Some(parse_status(value)?);
        } else if name.first() == Some(&b':') {
            return Err(QpackError("an unknown pseudo-header in a response"));
        } else {
            regular = true;
            if want_fields {
                field(name, value);
            }
        }
    }
    status.ok_or(QpackError("a response without :status"))
}

fn parse_status(value: &[u8]) -> Result<u16, QpackError> {
    match value {
        [a @ b'1'..=b'9', b @ b'0'..=b'9', c @ b'0'..=b'9'] => {
            Ok(u16::from(a - b'0') * 100 + u16::from(b - b'0') * 10 + u16::from(c - b'0'))
        }
        _ => Err(QpackError("a :status that is not three digits")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_all(block: &[u8]) -> Result<(u16, Vec<(String, String)>), QpackError> {
        let (mut n, mut v) = (Vec::new(), Vec::new());
        let mut fields = Vec::new();
        let status = decode_response(block, true, &mut n, &mut v, |n, v| {
            fields.push((
                String::from_utf8_lossy(n).into_owned(),
                String::from_utf8_lossy(v).into_owned(),
            ))
        })?;
        Ok((status, fields))
    }

    #[test]
    fn what_is_encoded_decodes_to_the_same_fields() {
        let mut block = Vec::new();
        start_section(&mut block);
        put_field(&mut block, b":status", b"200"); // an exact static entry
        put_field(&mut block, b"content-type", b"application/json"); // exact
        put_field(&mut block, b"content-length", b"1234"); // name only
        put_field(&mut block, b"x-volley", &[b'v'; 200]); // literal, long
        assert_eq!(&block[..4], &[0, 0, 0xc0 | 25, 0xc0 | 46]);
        let (status, fields) = decode_all(&block).expect("decodes");
        assert_eq!(status, 200);
        assert_eq!(
            fields,
            [
                ("content-type".into(), "application/json".into()),
                ("content-length".into(), "1234".into()),
                ("x-volley".into(), "v".repeat(200)),
            ]
        );
    }

    #[test]
    fn a_status_outside_the_table_and_huffman_values_decode() {
        // :status by name reference (index 24), value "418" literal; then
        // a literal name and a Huffman-coded value ("www.example.com", the
        // RFC 7541 C.4.1 sample).
        let mut block = vec![0, 0, 0x50 | 0x0f, 0x09, 3, b'4', b'1', b'8'];
        block.extend_from_slice(&[0x20 | 4, b'h', b'o', b's', b't', 0x80 | 12]);
        block.extend_from_slice(&[
            0xf1, 0xe3, 0xc2, 0xe5, 0xf2, 0x3a, 0x6b, 0xa0, 0xab, 0x90, 0xf4, 0xff,
        ]);
        let (status, fields) = decode_all(&block).expect("decodes");
        assert_eq!(status, 418);
        assert_eq!(fields, [("host".into(), "www.example.com".into())]);
    }

    #[test]
    fn dynamic_references_and_broken_sections_are_errors() {
        let cases: [&[u8]; 8] = [
            &[0x02, 0x00, 0xc0 | 25],      // a Required Insert Count
            &[0, 0, 0x80 | 1],             // indexed, dynamic
            &[0, 0, 0x10],                 // indexed, post-base
            &[0, 0, 0x40 | 1, 1, b'x'],    // name reference, dynamic
            &[0, 0, 0xc0 | 63, 100],       // past the static table
            &[0, 0, 0x20 | 2, b'a'],       // a literal name cut short
            &[0, 0, 0xc0 | 2],             // no :status
            &[0, 0, 0xc0 | 25, 0xc0 | 25], // :status twice
        ];
        for block in cases {
            assert!(decode_all(block).is_err(), "{block:?}");
        }
    }

    #[test]
    fn only_the_status_is_decoded_when_no_fields_are_wanted() {
        let mut block = Vec::new();
        start_section(&mut block);
        put_field(&mut block, b":status", b"503");
        put_field(&mut block, b"server", b"volley");
        let (mut n, mut v) = (Vec::new(), Vec::new());
        let mut called = false;
        let status = decode_response(&block, false, &mut n, &mut v, |_, _| called = true);
        assert_eq!(status, Ok(503));
        assert!(!called);
    }
}
