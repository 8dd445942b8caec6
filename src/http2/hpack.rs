//! HPACK (RFC 7541) decoding of response header blocks.
//!
//! Written here rather than taken from a crate: the HPACK crates on
//! crates.io allocate per field or rebuild their Huffman tables per string
//! (a profile of one showed 80% of volley's time there). A load generator
//! needs little of a response's headers: `:status` always, everything only
//! for a plan's captured responses. So values that are neither indexed nor
//! wanted are skipped undecoded; only fields the server adds to the dynamic
//! table are always decoded (their decoded size drives eviction). Servers
//! such as nginx add the same fields (server, date, content-type) to the
//! table on every response, so a new entry whose encoded value matches a
//! recent entry's copies that entry's decoded value instead of decoding it
//! again. Evicted entries' buffers are reused, so a steady run allocates
//! nothing here. Huffman strings are decoded by `httlib-huffman`.

use std::collections::VecDeque;

/// The dynamic table size volley allows (the protocol default; volley
/// never announces another).
pub const TABLE_SIZE: usize = 4096;

/// A malformed header block; the connection cannot continue.
#[derive(Debug, PartialEq, Eq)]
pub struct HpackError(pub &'static str);

/// A dynamic table entry.
#[derive(Default)]
struct Entry {
    name: Vec<u8>,
    value: Vec<u8>,
    /// The value as it was encoded (Huffman flag, then bytes).
    encoded: Vec<u8>,
}

/// How many of the newest entries a new one is compared with.
const RECENT: usize = 8;

/// One connection's decoding state.
pub struct Decoder {
    /// Newest entry first.
    table: VecDeque<Entry>,
    /// Evicted entries, kept for their allocations.
    spare: Vec<Entry>,
    size: usize,
    max_size: usize,
    name: Vec<u8>,
    value: Vec<u8>,
}

impl Default for Decoder {
    fn default() -> Self {
        Decoder {
            table: VecDeque::new(),
            spare: Vec::new(),
            size: 0,
            max_size: TABLE_SIZE,
            name: Vec::new(),
            value: Vec::new(),
        }
    }
}

const STATUS: &[u8] = b":status";

impl Decoder {
    /// Decodes `block`, calling `field` for `:status` and, with `all`, for
    /// every field.
    pub fn decode(
        &mut self,
        block: &[u8],
        all: bool,
        mut field: impl FnMut(&[u8], &[u8]),
    ) -> Result<(), HpackError> {
        let mut name = std::mem::take(&mut self.name);
        let mut value = std::mem::take(&mut self.value);
        let result = self.decode_into(block, all, &mut field, &mut name, &mut value);
        self.name = name;
        self.value = value;
        result
    }

    fn decode_into(
        &mut self,
        block: &[u8],
        all: bool,
        field: &mut impl FnMut(&[u8], &[u8]),
        name: &mut Vec<u8>,
        value: &mut Vec<u8>,
    ) -> Result<(), HpackError> {
        let mut pos = 0;
        while pos < block.len() {
            let first = block[pos];
            if first & 0x80 != 0 {
                // Indexed field.
                let (n, v) = self.entry(integer(block, &mut pos, 7)?)?;
                if all || n == STATUS {
                    field(n, v);
                }
            } else if first & 0x40 != 0 {
                // Literal with incremental indexing: always decoded.
                let index = integer(block, &mut pos, 6)?;
                let mut new = self.spare.pop().unwrap_or_default();
                new.name.clear();
                if index == 0 {
                    string(block, &mut pos, 7, Some(&mut new.name))?;
                } else {
                    new.name.extend_from_slice(self.entry(index)?.0);
                }
                let (huffman, bytes) = raw_string(block, &mut pos, 7)?;
                new.encoded.clear();
                new.encoded.push(huffman as u8);
                new.encoded.extend_from_slice(bytes);
                new.value.clear();
                match self
                    .table
                    .iter()
                    .take(RECENT)
                    .find(|e| e.encoded == new.encoded && e.name == new.name)
                {
                    Some(same) => new.value.extend_from_slice(&same.value),
                    None => decode_string(huffman, bytes, &mut new.value)?,
                }
                if all || new.name == STATUS {
                    field(&new.name, &new.value);
                }
                self.insert(new);
            } else if first & 0x20 != 0 {
                // Dynamic table size update.
                let size = integer(block, &mut pos, 5)?;
                if size > TABLE_SIZE {
                    return Err(HpackError("table size update above the allowed size"));
                }
                self.max_size = size;
                self.evict(0);
            } else {
                // Literal without indexing, or never indexed.
                let index = integer(block, &mut pos, 4)?;
                let field_name: &[u8] = if index == 0 {
                    string(block, &mut pos, 7, Some(name))?;
                    name
                } else {
                    self.entry(index)?.0
                };
                if all || field_name == STATUS {
                    string(block, &mut pos, 7, Some(value))?;
                    field(field_name, value);
                } else {
                    string(block, &mut pos, 7, None)?;
                }
            }
        }
        Ok(())
    }

    fn entry(&self, index: usize) -> Result<(&[u8], &[u8]), HpackError> {
        if let Some(&(n, v)) = index.checked_sub(1).and_then(|i| STATIC_TABLE.get(i)) {
            return Ok((n, v));
        }
        let entry = index
            .checked_sub(STATIC_TABLE.len() + 1)
            .and_then(|i| self.table.get(i))
            .ok_or(HpackError("header index out of range"))?;
        Ok((&entry.name, &entry.value))
    }

    fn insert(&mut self, entry: Entry) {
        let size = entry_size(&entry);
        if size > self.max_size {
            // Too large for any table: it empties the table (4.4).
            self.evict(self.max_size);
            self.recycle(entry);
            return;
        }
        self.evict(size);
        self.size += size;
        self.table.push_front(entry);
    }

    /// Evicts the oldest entries until `room` more bytes fit.
    fn evict(&mut self, room: usize) {
        while self.size + room > self.max_size {
            let Some(old) = self.table.pop_back() else { break };
            self.size -= entry_size(&old);
            self.recycle(old);
        }
    }

    fn recycle(&mut self, entry: Entry) {
        if self.spare.len() < 64 {
            self.spare.push(entry);
        }
    }
}

fn entry_size(entry: &Entry) -> usize {
    entry.name.len() + entry.value.len() + 32
}

fn truncated() -> HpackError {
    HpackError("header block truncated")
}

/// An integer with an N-bit prefix (5.1). QPACK's integers are the same
/// (RFC 9204, 4.1.1), so its decoder reads them here too.
pub(crate) fn integer(block: &[u8], pos: &mut usize, prefix: u32) -> Result<usize, HpackError> {
    let max = (1usize << prefix) - 1;
    let mut value = (*block.get(*pos).ok_or_else(truncated)? as usize) & max;
    *pos += 1;
    if value < max {
        return Ok(value);
    }
    let mut shift = 0;
    loop {
        let byte = *block.get(*pos).ok_or_else(truncated)?;
        *pos += 1;
        value += ((byte & 0x7f) as usize) << shift;
        if byte & 0x80 == 0 {
            return Ok(value);
        }
        shift += 7;
        if shift > 28 {
            return Err(HpackError("header integer too large"));
        }
    }
}

/// A string literal (5.2) as encoded: whether it is Huffman-coded, and its
/// bytes. Its length has a `prefix`-bit prefix and the Huffman flag is the
/// bit just above: 7 in HPACK, also 3 in QPACK's literal names.
pub(crate) fn raw_string<'b>(
    block: &'b [u8],
    pos: &mut usize,
    prefix: u32,
) -> Result<(bool, &'b [u8]), HpackError> {
    let huffman = block.get(*pos).ok_or_else(truncated)? & (1 << prefix) != 0;
    let len = integer(block, pos, prefix)?;
    let bytes = block
        .get(*pos..(*pos).saturating_add(len))
        .ok_or_else(truncated)?;
    *pos += len;
    Ok((huffman, bytes))
}

fn decode_string(huffman: bool, bytes: &[u8], out: &mut Vec<u8>) -> Result<(), HpackError> {
    if huffman {
        httlib_huffman::decode(bytes, out, httlib_huffman::DecoderSpeed::FiveBits)
            .map_err(|_| HpackError("invalid Huffman string"))
    } else {
        out.extend_from_slice(bytes);
        Ok(())
    }
}

/// A string literal with a `prefix`-bit length (see [`raw_string`]),
/// decoded into `out` (cleared first), or skipped when `None`.
pub(crate) fn string(
    block: &[u8],
    pos: &mut usize,
    prefix: u32,
    out: Option<&mut Vec<u8>>,
) -> Result<(), HpackError> {
    let (huffman, bytes) = raw_string(block, pos, prefix)?;
    if let Some(out) = out {
        out.clear();
        decode_string(huffman, bytes, out)?;
    }
    Ok(())
}

/// RFC 7541 appendix A.
const STATIC_TABLE: [(&[u8], &[u8]); 61] = [
    (b":authority", b""),
    (b":method", b"GET"),
    (b":method", b"POST"),
    (b":path", b"/"),
    (b":path", b"/index.html"),
    (b":scheme", b"http"),
    (b":scheme", b"https"),
    (b":status", b"200"),
    (b":status", b"204"),
    (b":status", b"206"),
    (b":status", b"304"),
    (b":status", b"400"),
    (b":status", b"404"),
    (b":status", b"500"),
    (b"accept-charset", b""),
    (b"accept-encoding", b"gzip, deflate"),
    (b"accept-language", b""),
    (b"accept-ranges", b""),
    (b"accept", b""),
    (b"access-control-allow-origin", b""),
    (b"age", b""),
    (b"allow", b""),
    (b"authorization", b""),
    (b"cache-control", b""),
    (b"content-disposition", b""),
    (b"content-encoding", b""),
    (b"content-language", b""),
    (b"content-length", b""),
    (b"content-location", b""),
    (b"content-range", b""),
    (b"content-type", b""),
    (b"cookie", b""),
    (b"date", b""),
    (b"etag", b""),
    (b"expect", b""),
    (b"expires", b""),
    (b"from", b""),
    (b"host", b""),
    (b"if-match", b""),
    (b"if-modified-since", b""),
    (b"if-none-match", b""),
    (b"if-range", b""),
    (b"if-unmodified-since", b""),
    (b"last-modified", b""),
    (b"link", b""),
    (b"location", b""),
    (b"max-forwards", b""),
    (b"proxy-authenticate", b""),
    (b"proxy-authorization", b""),
    (b"range", b""),
    (b"referer", b""),
    (b"refresh", b""),
    (b"retry-after", b""),
    (b"server", b""),
    (b"set-cookie", b""),
    (b"strict-transport-security", b""),
    (b"transfer-encoding", b""),
    (b"user-agent", b""),
    (b"vary", b""),
    (b"via", b""),
    (b"www-authenticate", b""),
];

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_all(decoder: &mut Decoder, block: &[u8]) -> Vec<(String, String)> {
        let mut out = Vec::new();
        decoder
            .decode(block, true, |n, v| {
                out.push((
                    String::from_utf8_lossy(n).into_owned(),
                    String::from_utf8_lossy(v).into_owned(),
                ))
            })
            .unwrap();
        out
    }

    /// Encodes with an independent implementation (httlib-hpack), with
    /// Huffman and each kind of indexing, and checks the round trip,
    /// including the dynamic table across blocks and evictions.
    #[test]
    fn decodes_what_another_encoder_wrote() {
        use httlib_hpack::Encoder;
        let mut encoder = Encoder::with_dynamic_size(TABLE_SIZE as u32);
        let mut decoder = Decoder::default();
        let flag_sets = [
            Encoder::HUFFMAN_VALUE | Encoder::WITH_INDEXING | Encoder::BEST_FORMAT,
            Encoder::HUFFMAN_NAME | Encoder::HUFFMAN_VALUE,
            Encoder::NEVER_INDEXED,
            Encoder::WITH_INDEXING | Encoder::HUFFMAN_NAME,
        ];
        for round in 0..200usize {
            let fields: Vec<(Vec<u8>, Vec<u8>)> = vec![
                (b":status".to_vec(), format!("{}", 200 + round % 7).into_bytes()),
                (
                    b"date".to_vec(),
                    format!("Sat, 21 Nov 2026 11:{:02}:{:02} GMT", round / 60, round % 60).into_bytes(),
                ),
                (
                    format!("x-custom-{}", round % 13).into_bytes(),
                    vec![b'v'; round % 300],
                ),
                (
                    b"set-cookie".to_vec(),
                    format!("session={round}; Path=/").into_bytes(),
                ),
            ];
            let mut block = Vec::new();
            for (i, (n, v)) in fields.iter().enumerate() {
                let flags = flag_sets[(round + i) % flag_sets.len()];
                encoder.encode((n.clone(), v.clone(), flags), &mut block).unwrap();
            }
            let decoded = decode_all(&mut decoder, &block);
            let expected: Vec<(String, String)> = fields
                .iter()
                .map(|(n, v)| {
                    (
                        String::from_utf8_lossy(n).into_owned(),
                        String::from_utf8_lossy(v).into_owned(),
                    )
                })
                .collect();
            assert_eq!(decoded, expected, "round {round}");
        }
        assert!(decoder.size <= TABLE_SIZE);
    }

    /// A block nginx 1.22 sent, which adds every field to the table again on
    /// each response: the second and third decodes reuse the first's values.
    #[test]
    fn decodes_nginx_reindexing_the_same_fields() {
        let hex = "887689aa6355e580ae212e1f6196dc34fd2820a9a4fdd41004e2810dc69cb8db8a62d1bf5f87497ca58ae819aa5c0135";
        let block: Vec<u8> = (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
            .collect();
        let mut decoder = Decoder::default();
        for _ in 0..3 {
            let fields = decode_all(&mut decoder, &block);
            let names: Vec<&str> = fields.iter().map(|(n, _)| n.as_str()).collect();
            assert_eq!(
                names,
                [":status", "server", "date", "content-type", "content-length"]
            );
            assert_eq!(fields[0].1, "200");
            assert_eq!(fields[1].1, "nginx/1.22.1");
            assert!(fields[2].1.ends_with(" GMT"), "{}", fields[2].1);
            assert_eq!(fields[3].1, "text/plain");
            assert_eq!(fields[4].1, "5");
        }
        assert_eq!(decoder.table.len(), 12);
    }

    #[test]
    fn only_status_unless_all() {
        // :status 200 (indexed), then "server: x" literal without indexing.
        let block = [0x88, 0x0f, 0x27, 0x01, b'x'];
        let mut seen = Vec::new();
        Decoder::default()
            .decode(&block, false, |n, v| seen.push((n.to_vec(), v.to_vec())))
            .unwrap();
        assert_eq!(seen, vec![(b":status".to_vec(), b"200".to_vec())]);
    }

    #[test]
    fn malformed_blocks_are_errors() {
        let mut decoder = Decoder::default();
        assert!(decoder.decode(&[0xff], true, |_, _| {}).is_err()); // truncated integer
        assert!(decoder.decode(&[0x80 | 70], true, |_, _| {}).is_err()); // no such index
        assert!(
            decoder
                .decode(&[0x0f, 0x27, 0x05, b'x'], true, |_, _| {})
                .is_err()
        ); // short string
        assert!(decoder.decode(&[0x3f, 0xe1, 0x7f], true, |_, _| {}).is_err()); // size above 4096
    }
}
