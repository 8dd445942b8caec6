//! A hand-written scanner for the response heads servers usually send:
//! `HTTP/1.0` or `HTTP/1.1`, a three-digit status, CRLF line ends, header
//! names made of token characters directly followed by a colon, at most
//! [`MOST_FIELDS`] fields, the whole head in the buffer.
//!
//! Why by hand: httparse is exact and general, and volley keeps it for
//! everything else, but for the few hundred bytes of a typical head it and
//! its header array took about half of the user-space instructions of a
//! kept-alive HTTP/1.1 request (some 2,000 of 4,200, counted by valgrind).
//! This scanner reads the head once, finds each line's end sixteen bytes
//! at a time, and hands each field straight to its caller.
//!
//! It accepts only heads that httparse accepts, reading them the same way
//! (the same status, the same field names and values, trailing blanks
//! trimmed from a value as httparse does); for anything else it declines
//! and httparse decides, so no response is judged differently. Unit tests
//! and the fuzz target for responses compare the two on the same bytes.

/// Fields a scanned head may have; a head with more goes to httparse.
pub const MOST_FIELDS: usize = 32;

/// What a scanned head's first line says, and its length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StatusLine {
    /// Bytes in the head, its blank line included.
    pub len: usize,
    /// `HTTP/1.0` rather than `HTTP/1.1`.
    pub http10: bool,
    pub status: u16,
}

/// Token characters (RFC 9110 section 5.6.2), the bytes of a field name.
const TOKEN: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        table[b] = c.is_ascii_alphanumeric()
            || matches!(
                c,
                b'!' | b'#'
                    | b'$'
                    | b'%'
                    | b'&'
                    | b'\''
                    | b'*'
                    | b'+'
                    | b'-'
                    | b'.'
                    | b'^'
                    | b'_'
                    | b'`'
                    | b'|'
                    | b'~'
            );
        b += 1;
    }
    table
};

/// Scans a complete head, handing each field's name and value to `field`
/// in order; `None` when this is not a head the scanner reads (incomplete,
/// unusual or invalid), and nothing may be concluded from the fields
/// handed on so far.
pub fn scan(buf: &[u8], mut field: impl FnMut(&[u8], &[u8])) -> Option<StatusLine> {
    let http10 = match buf.get(..9)? {
        b"HTTP/1.1 " => false,
        b"HTTP/1.0 " => true,
        _ => return None,
    };
    let digits = buf.get(9..12)?;
    if !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let status = digits.iter().fold(0u16, |n, d| n * 10 + u16::from(d - b'0'));
    // A reason phrase after a space, or none at all.
    let mut at = match *buf.get(12)? {
        b' ' => line_end(buf, 13)?,
        b'\r' if buf.get(13) == Some(&b'\n') => 14,
        _ => return None,
    };
    let mut fields = 0;
    loop {
        match buf.get(at..at + 2)? {
            b"\r\n" => {
                return Some(StatusLine {
                    len: at + 2,
                    http10,
                    status,
                });
            }
            _ if fields == MOST_FIELDS => return None,
            _ => {}
        }
        let mut name_len = 0;
        while TOKEN[usize::from(*buf.get(at + name_len)?)] {
            name_len += 1;
        }
        if name_len == 0 || buf[at + name_len] != b':' {
            return None;
        }
        let name = &buf[at..at + name_len];
        let mut start = at + name_len + 1;
        while matches!(buf.get(start), Some(b' ' | b'\t')) {
            start += 1;
        }
        let next = line_end(buf, start)?;
        let value = buf[start..next - 2].trim_ascii_end();
        field(name, value);
        fields += 1;
        at = next;
    }
}

/// Whether the field name `name` is `lower` (lowercase letters and `-`),
/// in any case. Setting each byte's 0x20 bit folds case exactly here: a
/// name is made of token characters, and the only other bytes that bit
/// could turn into a letter or `-` are controls, which no token holds.
/// Compared eight bytes at a time, as names are compared per field of
/// every response.
pub fn is_name<const N: usize>(name: &[u8], lower: &[u8; N]) -> bool {
    const FOLD: u64 = u64::from_ne_bytes([0x20; 8]);
    if name.len() != N {
        return false;
    }
    let word =
        |bytes: &[u8], at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("eight bytes"));
    if N < 8 {
        return name.iter().zip(lower).all(|(b, l)| b | 0x20 == *l);
    }
    // Words at every multiple of eight and one ending at the last byte
    // (overlapping the one before it when N is not a multiple of eight).
    (0..N / 8)
        .map(|i| i * 8)
        .chain([N - 8])
        .all(|at| word(name, at) | FOLD == word(lower, at))
}

/// Where the line that goes on at `from` ends, past its CRLF, when every
/// byte before the CR may be in a field value or a reason phrase (tab,
/// space, visible ASCII, or any byte above it); `None` otherwise, or when
/// the line does not end in `buf`.
fn line_end(buf: &[u8], from: usize) -> Option<usize> {
    let mut at = from;
    loop {
        let stop = at + first_control(buf.get(at..)?)?;
        match buf[stop] {
            b'\t' => at = stop + 1,
            b'\r' if buf.get(stop + 1) == Some(&b'\n') => return Some(stop + 2),
            _ => return None,
        }
    }
}

/// The first byte of `bytes` that is a control character (below 0x20, or
/// 0x7f): the bytes of a line are mostly visible text and a line end is
/// the first control but for tabs. Sixteen bytes at a time with SSE2 (which
/// every x86-64 processor has), then eight at a time.
fn first_control(bytes: &[u8]) -> Option<usize> {
    let mut at = 0;
    #[cfg(target_arch = "x86_64")]
    while let Some(chunk) = bytes.get(at..at + 16) {
        let marks = control_marks(chunk.try_into().expect("sixteen bytes"));
        if marks != 0 {
            return Some(at + marks.trailing_zeros() as usize);
        }
        at += 16;
    }
    first_control_by_words(&bytes[at..]).map(|i| at + i)
}

/// A bit for each byte of `chunk` that is a control character, the first
/// byte's lowest.
#[cfg(target_arch = "x86_64")]
fn control_marks(chunk: &[u8; 16]) -> u32 {
    use std::arch::x86_64::{
        _mm_cmpeq_epi8, _mm_loadu_si128, _mm_min_epu8, _mm_movemask_epi8, _mm_or_si128, _mm_set1_epi8,
    };
    // SAFETY: SSE2 is part of x86-64 itself, so every x86-64 processor
    // runs these; the load reads the sixteen bytes of `chunk` and needs no
    // alignment.
    unsafe {
        let v = _mm_loadu_si128(chunk.as_ptr().cast());
        // The unsigned minimum with 0x1f is the byte itself exactly when
        // it is below 0x20.
        let below_space = _mm_cmpeq_epi8(_mm_min_epu8(v, _mm_set1_epi8(0x1f)), v);
        let del = _mm_cmpeq_epi8(v, _mm_set1_epi8(0x7f));
        _mm_movemask_epi8(_mm_or_si128(below_space, del)) as u32
    }
}

/// [`first_control`] eight bytes at a time.
fn first_control_by_words(bytes: &[u8]) -> Option<usize> {
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    const HIGHS: u64 = u64::from_ne_bytes([0x80; 8]);
    let mut chunks = bytes.chunks_exact(8);
    let mut at = 0;
    for chunk in &mut chunks {
        let word = u64::from_le_bytes(chunk.try_into().expect("eight bytes"));
        // A byte below 0x20 borrows when 0x20 is taken from it; one equal
        // to 0x7f is zero once XORed with it. A borrow can only mark bytes
        // above the first true match, so the lowest mark is exact.
        let below_space = word.wrapping_sub(ONES * 0x20) & !word & HIGHS;
        let del = word ^ (ONES * 0x7f);
        let is_del = del.wrapping_sub(ONES) & !del & HIGHS;
        let marks = below_space | is_del;
        if marks != 0 {
            return Some(at + (marks.trailing_zeros() / 8) as usize);
        }
        at += 8;
    }
    let tail = chunks.remainder();
    tail.iter().position(|&b| b < 0x20 || b == 0x7f).map(|i| at + i)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A field's name and value, owned.
    type Field = (Vec<u8>, Vec<u8>);

    fn fields_of(head: &[u8]) -> Option<(StatusLine, Vec<Field>)> {
        let mut fields = Vec::new();
        let line = scan(head, |name, value| fields.push((name.to_vec(), value.to_vec())))?;
        Some((line, fields))
    }

    #[test]
    fn a_usual_head_is_scanned_field_by_field() {
        let head = b"HTTP/1.1 200 OK\r\nServer: nginx\r\nContent-Length:\t 5 \r\nX-Empty:\r\nAlt-Svc: h3=\":443\"\r\n\r\nhello";
        let (line, fields) = fields_of(head).unwrap();
        assert_eq!(
            line,
            StatusLine {
                len: head.len() - 5,
                http10: false,
                status: 200
            }
        );
        let fields: Vec<(&[u8], &[u8])> = fields.iter().map(|(n, v)| (&n[..], &v[..])).collect();
        let expected: [(&[u8], &[u8]); 4] = [
            (b"Server", b"nginx"),
            (b"Content-Length", b"5"),
            (b"X-Empty", b""),
            (b"Alt-Svc", b"h3=\":443\""),
        ];
        assert_eq!(fields, expected);
        let (line, fields) = fields_of(b"HTTP/1.0 404\r\n\r\n").unwrap();
        assert_eq!(
            (line.http10, line.status, line.len, fields.len()),
            (true, 404, 16, 0)
        );
    }

    #[test]
    fn unusual_or_incomplete_heads_are_declined() {
        let declined: [&[u8]; 12] = [
            b"HTTP/1.1 200 OK\r\nServer: x\r\n",
            b"HTTP/1.1 200 OK\r\nServer: x\r\n\r",
            b"HTTP/1.1 200 OK\nServer: x\n\n",
            b"\r\nHTTP/1.1 200 OK\r\n\r\n",
            b"HTTP/2.0 200 OK\r\n\r\n",
            b"HTTP/1.1 20x OK\r\n\r\n",
            b"HTTP/1.1  200 OK\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nServer : x\r\n\r\n",
            b"HTTP/1.1 200 OK\r\n folded\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nServer: a\x00b\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nServer: a\x7fb\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nServer: a\rb\r\n\r\n",
        ];
        for head in declined {
            assert_eq!(fields_of(head), None, "{:?}", String::from_utf8_lossy(head));
        }
        let mut many = b"HTTP/1.1 200 OK\r\n".to_vec();
        for i in 0..=MOST_FIELDS {
            many.extend_from_slice(format!("X-{i}: {i}\r\n").as_bytes());
        }
        many.extend_from_slice(b"\r\n");
        assert_eq!(fields_of(&many), None);
    }

    #[test]
    fn names_compare_in_any_case_and_only_whole() {
        assert!(is_name(b"Content-Length", b"content-length"));
        assert!(is_name(b"CONTENT-LENGTH", b"content-length"));
        assert!(is_name(b"alt-SVC", b"alt-svc"));
        assert!(is_name(b"Connection", b"connection"));
        assert!(!is_name(b"Content-Lengths", b"content-length"));
        assert!(!is_name(b"Content_Length", b"content-length"));
        assert!(!is_name(b"Connectiom", b"connection"));
        assert!(!is_name(b"alt-svd", b"alt-svc"));
        // Every token character against every position of each name.
        let lower = b"transfer-encoding";
        for at in 0..lower.len() {
            for b in (0..=255u8).filter(|b| TOKEN[usize::from(*b)]) {
                let mut name = *lower;
                name[at] = b;
                let same = b.to_ascii_lowercase() == lower[at];
                assert_eq!(is_name(&name, lower), same, "{at} {b}");
            }
        }
    }

    #[test]
    fn controls_are_found_at_every_offset() {
        // Visible bytes at the edges of the control ranges, and bytes above
        // 0x7f (negative to a signed comparison).
        let visible = [b' ', b'~', 0x80, 0xff, b'a', 0x21, 0x7e, 0x9f];
        for find in [first_control, first_control_by_words] {
            for len in 0..56 {
                for at in 0..len {
                    for control in [b'\r', b'\t', 0x00, 0x1f, 0x7f] {
                        let mut bytes: Vec<u8> = (0..len).map(|i| visible[i % visible.len()]).collect();
                        // Bytes that a borrow could wrongly mark lie above it.
                        bytes.iter_mut().skip(at + 1).for_each(|b| *b = 0x80);
                        bytes[at] = control;
                        assert_eq!(find(&bytes), Some(at), "{len} {at} {control}");
                    }
                }
                let line: Vec<u8> = (0..len).map(|i| visible[(i * 3) % visible.len()]).collect();
                assert_eq!(find(&line), None);
            }
        }
    }
}
