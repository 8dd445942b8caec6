//! Chunked request bodies for the embedded server: the chunks decoded into
//! one contiguous body, and the bounds that keep a client from making a
//! connection buffer without end (tiny chunks, endless trailers).

use super::{MAX_BODY, ParseError};
use httparse::Status;

/// Chunk-size lines and trailers around a chunked body may add this much to
/// the raw request; a body cut into absurdly small chunks can exceed it and
/// gets a `413`, which bounds what one connection can make us buffer.
pub(super) const CHUNK_OVERHEAD: usize = 1024 * 1024;
/// Trailer section after the last chunk.
const MAX_TRAILERS: usize = 16 * 1024;

/// Decodes chunks from `*next` on, appending their data to `out`. Returns the
/// request's total length once the last chunk and trailers are in.
pub(super) fn decode_chunks(
    buf: &[u8],
    next: &mut usize,
    out: &mut Vec<u8>,
    head_len: usize,
) -> Result<Option<usize>, ParseError> {
    loop {
        let rest = buf.get(*next..).unwrap_or_default();
        let (line_len, size) = match httparse::parse_chunk_size(rest) {
            Ok(Status::Complete(parsed)) => parsed,
            Ok(Status::Partial) => return wait_for_chunks(buf, head_len),
            Err(_) => return Err(ParseError::Malformed),
        };
        let data = rest.get(line_len..).unwrap_or_default();
        if size == 0 {
            return match end_of_trailers(data)? {
                Some(end) => Ok(Some(*next + line_len + end)),
                None => wait_for_chunks(buf, head_len),
            };
        }
        let size = match usize::try_from(size) {
            Ok(size) if size <= MAX_BODY - out.len() => size,
            _ => return Err(ParseError::BodyTooLarge),
        };
        let Some(chunk) = data.get(..size + 2) else {
            return wait_for_chunks(buf, head_len);
        };
        let (chunk, crlf) = chunk.split_at(size);
        if crlf != b"\r\n" {
            return Err(ParseError::Malformed);
        }
        out.extend_from_slice(chunk);
        *next += line_len + size + 2;
    }
}

fn wait_for_chunks(buf: &[u8], head_len: usize) -> Result<Option<usize>, ParseError> {
    if buf.len() > head_len + MAX_BODY + CHUNK_OVERHEAD {
        Err(ParseError::BodyTooLarge)
    } else {
        Ok(None)
    }
}

/// Trailer fields are ignored; only their end (an empty line) matters.
fn end_of_trailers(data: &[u8]) -> Result<Option<usize>, ParseError> {
    let mut line_start = 0;
    while let Some(nl) = data[line_start..].iter().position(|&b| b == b'\n') {
        let line_end = line_start + nl + 1;
        if matches!(&data[line_start..line_end], b"\r\n" | b"\n") {
            return Ok(Some(line_end));
        }
        line_start = line_end;
        if line_start > MAX_TRAILERS {
            return Err(ParseError::HeadTooLarge);
        }
    }
    if data.len() > MAX_TRAILERS {
        return Err(ParseError::HeadTooLarge);
    }
    Ok(None)
}
