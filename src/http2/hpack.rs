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
//! table on every response, so a new entry with the same name and encoded
//! value as a recent one is that entry again, shared rather than decoded or
//! copied. Evicted entries that nothing else shares are kept for their
//! buffers, so a steady run allocates nothing here. Once the table holds
//! nothing but those repeated fields, the same block leaves it as it found
//! it: such a block sent again byte for byte is answered from memory
//! ([`Repeat`]) rather than decoded. Huffman strings are decoded by
//! `httlib-huffman`.

use std::collections::VecDeque;
use std::rc::Rc;

/// The dynamic table size volley allows (the protocol default; volley
/// never announces another).
pub const TABLE_SIZE: usize = 4096;

/// A malformed header block; the connection cannot continue.
#[derive(Debug, PartialEq, Eq)]
pub struct HpackError(pub &'static str);

/// A dynamic table entry, shared by every place in the table that holds
/// the same field (see the module doc).
#[derive(Clone, Default)]
struct Entry {
    name: Vec<u8>,
    /// The static table index the name came from (through any dynamic
    /// entries that named it), or 0 for a name sent as a literal: compared
    /// as an integer before any bytes.
    static_name: usize,
    value: Vec<u8>,
    /// The value as it was encoded (Huffman flag, then bytes).
    encoded: Vec<u8>,
}

/// How many of the newest entries a new one is compared with.
const RECENT: usize = 8;

/// The longest block [`Repeat`] keeps: a usual response head is well under
/// it (nginx's is 49 bytes), and a hostile server's long blocks cost no
/// memory kept per connection.
const REPEAT_MAX: usize = 512;

/// The last block decoded for `:status` alone, and whether decoding it
/// again would change nothing. Decoding is a function of the table and
/// the block; a block that, decoded a second time, left the table's
/// entries (the same shared entries, in the same order) and size limit as
/// they were would do so every time after, giving the same `:status`, so
/// the decoder answers it from here until another block comes.
#[derive(Default)]
struct Repeat {
    block: Vec<u8>,
    /// The block's one `:status` value.
    status: Vec<u8>,
    /// Decoding `block` leaves the table as it is now.
    steady: bool,
    /// The table's entries before the block's last decode, to tell: held
    /// for the while, so none is reused as another entry meanwhile.
    before: Vec<Rc<Entry>>,
}

/// One connection's decoding state.
pub struct Decoder {
    /// Newest entry first.
    table: VecDeque<Rc<Entry>>,
    /// Evicted entries no place in the table shares, kept for their
    /// allocations.
    spare: Vec<Rc<Entry>>,
    size: usize,
    max_size: usize,
    name: Vec<u8>,
    value: Vec<u8>,
    repeat: Repeat,
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
            repeat: Repeat::default(),
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
        let again = !all && self.repeat.block == block;
        if again && self.repeat.steady {
            field(STATUS, &self.repeat.status);
            return Ok(());
        }
        if again {
            self.repeat.before.extend(self.table.iter().cloned());
        }
        let size_limit = self.max_size;
        let mut name = std::mem::take(&mut self.name);
        let mut value = std::mem::take(&mut self.value);
        let mut status = std::mem::take(&mut self.repeat.status);
        let mut statuses = 0;
        let mut seen = |n: &[u8], v: &[u8]| {
            if !all {
                // Unless `all`, only `:status` is handed on.
                statuses += 1;
                status.clear();
                status.extend_from_slice(v);
            }
            field(n, v)
        };
        let result = self.decode_into(block, all, &mut seen, &mut name, &mut value);
        self.name = name;
        self.value = value;
        self.repeat.status = status;
        let usable = result.is_ok() && !all && statuses == 1 && block.len() <= REPEAT_MAX;
        self.remember(block, usable, again, size_limit);
        result
    }

    /// Keeps `block` for the next one if it is `usable` (decoded for one
    /// `:status`), and, decoded `again`, whether it left the table as it
    /// was before ([`Repeat::before`], and the size limit `size_limit`).
    fn remember(&mut self, block: &[u8], usable: bool, again: bool, size_limit: usize) {
        let repeat = &mut self.repeat;
        repeat.steady = usable
            && again
            && self.max_size == size_limit
            && self.table.len() == repeat.before.len()
            && self
                .table
                .iter()
                .zip(&repeat.before)
                .all(|(a, b)| Rc::ptr_eq(a, b));
        if !again {
            repeat.block.clear();
            if usable {
                repeat.block.extend_from_slice(block);
            }
        }
        let mut before = std::mem::take(&mut repeat.before);
        for entry in before.drain(..) {
            self.recycle(entry);
        }
        self.repeat.before = before;
    }

    /// The dynamic table's fields, newest first.
    pub(crate) fn table_fields(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.table.iter().map(|e| (&e.name[..], &e.value[..]))
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
                // Literal with incremental indexing: always decoded. A name
                // from the static table is known by its index; any other is
                // read into `name`.
                let index = integer(block, &mut pos, 6)?;
                let static_name = self.static_name(index);
                if index == 0 {
                    string(block, &mut pos, 7, Some(name))?;
                } else if static_name == 0 {
                    name.clear();
                    name.extend_from_slice(self.entry(index)?.0);
                }
                let (huffman, bytes) = raw_string(block, &mut pos, 7)?;
                let entry = match self.twin(static_name, name, huffman, bytes) {
                    Some(twin) => twin,
                    None => self.new_entry(static_name, name, huffman, bytes)?,
                };
                if all || entry.name == STATUS {
                    field(&entry.name, &entry.value);
                }
                self.insert(entry);
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

    /// The static table index behind the name at `index` (0: a literal
    /// name, or an index no entry has).
    fn static_name(&self, index: usize) -> usize {
        match index.checked_sub(STATIC_TABLE.len() + 1) {
            None => index,
            Some(i) => self.table.get(i).map_or(0, |e| e.static_name),
        }
    }

    /// A recent entry with this name (its static index, else `name`) and
    /// this encoded value, to be inserted again as it is.
    fn twin(&self, static_name: usize, name: &[u8], huffman: bool, bytes: &[u8]) -> Option<Rc<Entry>> {
        self.table
            .iter()
            .take(RECENT)
            .find(|e| {
                e.static_name == static_name
                    && e.encoded.split_first() == Some((&(huffman as u8), bytes))
                    && (static_name != 0 || e.name == name)
            })
            .cloned()
    }

    /// A new entry, in a spare one's buffers when there is one.
    fn new_entry(
        &mut self,
        static_name: usize,
        name: &[u8],
        huffman: bool,
        bytes: &[u8],
    ) -> Result<Rc<Entry>, HpackError> {
        let mut shared = self.spare.pop().unwrap_or_default();
        // Spare entries are shared with nothing, so this never copies.
        let entry = Rc::make_mut(&mut shared);
        let static_entry = static_name.checked_sub(1).and_then(|i| STATIC_TABLE.get(i));
        entry.static_name = static_name;
        entry.name.clear();
        entry.name.extend_from_slice(static_entry.map_or(name, |e| e.0));
        entry.encoded.clear();
        entry.encoded.push(huffman as u8);
        entry.encoded.extend_from_slice(bytes);
        entry.value.clear();
        decode_string(huffman, bytes, &mut entry.value)?;
        Ok(shared)
    }

    fn insert(&mut self, entry: Rc<Entry>) {
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

    fn recycle(&mut self, entry: Rc<Entry>) {
        if Rc::strong_count(&entry) == 1 && self.spare.len() < 64 {
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
        // Each response's four fields are the first response's entries
        // again, shared (server, date, content-type, content-length), and
        // each knows its static name.
        let table: Vec<&Rc<Entry>> = decoder.table.iter().collect();
        for i in 0..4 {
            assert!(Rc::ptr_eq(table[i], table[i + 4]) && Rc::ptr_eq(table[i], table[i + 8]));
            assert_eq!(Rc::strong_count(table[i]), 3);
        }
        let names: Vec<usize> = table[..4].iter().map(|e| e.static_name).collect();
        assert_eq!(names, [28, 31, 33, 54]);
    }

    /// A name taken from a dynamic entry carries that entry's static index;
    /// a literal name has none. Equal values under different names stay
    /// separate entries, and an evicted entry still shared stays whole.
    #[test]
    fn names_decide_which_entries_are_shared() {
        let mut decoder = Decoder::default();
        // "date: a" with incremental indexing (static name 33), then a
        // literal name "x-y: a", then "date: a" named by dynamic entry 63
        // (the first, now second newest), then "x-y: a" named by 63 (the
        // literal one, now second newest).
        let block = [
            0x61, 0x01, b'a', 0x40, 0x03, b'x', b'-', b'y', 0x01, b'a', 0x7f, 0x00, 0x01, b'a', 0x7f, 0x00,
            0x01, b'a',
        ];
        let fields = decode_all(&mut decoder, &block);
        let expected = [("date", "a"), ("x-y", "a"), ("date", "a"), ("x-y", "a")];
        let expected: Vec<(String, String)> = expected
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect();
        assert_eq!(fields, expected);
        let names: Vec<usize> = decoder.table.iter().map(|e| e.static_name).collect();
        assert_eq!(names, [0, 33, 0, 33]);
        assert!(Rc::ptr_eq(&decoder.table[0], &decoder.table[2]));
        assert!(Rc::ptr_eq(&decoder.table[1], &decoder.table[3]));
        assert!(!Rc::ptr_eq(&decoder.table[0], &decoder.table[1]));
        // A size update of 40 bytes keeps only the newest entry (x-y: a, 36
        // bytes); the evicted one it shares is not reused while it lives.
        decoder.decode(&[0x3f, 0x09], true, |_, _| {}).unwrap();
        assert_eq!(decoder.table.len(), 1);
        assert_eq!(decoder.table[0].name, b"x-y");
        assert!(decoder.spare.iter().all(|e| Rc::strong_count(e) == 1));
        assert_eq!(decoder.spare.len(), 1, "only the date entry was free to keep");
    }

    /// The table as name and value pairs, newest first.
    fn table_of(decoder: &Decoder) -> Vec<(Vec<u8>, Vec<u8>)> {
        decoder
            .table
            .iter()
            .map(|e| (e.name.clone(), e.value.clone()))
            .collect()
    }

    /// The `:status` values a block gives, decoding only them.
    fn statuses_of(decoder: &mut Decoder, block: &[u8]) -> Vec<String> {
        let mut statuses = Vec::new();
        decoder
            .decode(block, false, |n, v| {
                assert_eq!(n, STATUS);
                statuses.push(String::from_utf8_lossy(v).into_owned());
            })
            .unwrap();
        statuses
    }

    /// Whether `block` would be answered from memory.
    fn remembers(decoder: &Decoder, block: &[u8]) -> bool {
        decoder.repeat.steady && decoder.repeat.block == block
    }

    /// A literal field added to the table (6.2.1), its name a static index
    /// (0: the literal name `x-name`) and its value not Huffman-coded.
    fn put_indexed_literal(block: &mut Vec<u8>, name: usize, value: &[u8]) {
        block.push(0x40 | name as u8);
        if name == 0 {
            block.extend_from_slice(&[6, b'x', b'-', b'n', b'a', b'm', b'e']);
        }
        block.push(value.len() as u8);
        block.extend_from_slice(value);
    }

    /// nginx's pattern: the same block again and again. Once the table is
    /// full of its entries the block is answered from memory, and the
    /// table stays what decoding every block whole makes it; a new date
    /// decodes again.
    #[test]
    fn a_repeated_block_is_answered_from_memory_once_steady() {
        let block_at = |second: u8| {
            let mut block = vec![0x88];
            put_indexed_literal(&mut block, 54, b"nginx/1.22.1");
            put_indexed_literal(&mut block, 33, &[b'0' + second % 10; 29]);
            put_indexed_literal(&mut block, 31, b"text/plain");
            put_indexed_literal(&mut block, 28, b"5");
            block
        };
        let mut memo = Decoder::default();
        let mut whole = Decoder::default();
        for second in 0..3u8 {
            let block = block_at(second);
            for round in 0..40 {
                assert_eq!(
                    remembers(&memo, &block),
                    round >= 20,
                    "second {second} round {round}"
                );
                assert_eq!(statuses_of(&mut memo, &block), ["200"]);
                decode_all(&mut whole, &block);
                assert_eq!(table_of(&memo), table_of(&whole), "second {second} round {round}");
                assert_eq!(memo.size, whole.size);
            }
        }
    }

    /// Blocks repeated and changed at random, some with size updates,
    /// decoded for `:status` alone and decoded whole: the same status and
    /// the same table after every block, with many answered from memory.
    #[test]
    fn answering_from_memory_changes_nothing() {
        let mut seed = 0x2545_f491_u64;
        let mut next = move |below: usize| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) as usize % below
        };
        let mut memo = Decoder::default();
        let mut whole = Decoder::default();
        let mut block = Vec::new();
        let mut remembered = 0;
        for round in 0..20_000 {
            if round == 0 || next(12) == 0 {
                block.clear();
                match next(6) {
                    0 => block.extend_from_slice(&[0x3f, 0xe1, 0x1f]), // 4,096
                    1 => block.extend_from_slice(&[0x3f, 0x8d, 0x02]), // 300
                    _ => {}
                }
                // Mostly one status; now and then none or two.
                for _ in 0..[1, 1, 1, 1, 0, 2][next(6)] {
                    block.push(0x88 + next(7) as u8);
                }
                for _ in 0..next(5) {
                    let name = [54, 33, 31, 28, 0][next(5)];
                    let value = vec![b'a' + next(3) as u8; next(90)];
                    put_indexed_literal(&mut block, name, &value);
                }
            }
            remembered += remembers(&memo, &block) as usize;
            let statuses = statuses_of(&mut memo, &block);
            let fields = decode_all(&mut whole, &block);
            let expected: Vec<&String> = fields
                .iter()
                .filter(|(n, _)| n == ":status")
                .map(|(_, v)| v)
                .collect();
            assert_eq!(statuses.iter().collect::<Vec<_>>(), expected, "round {round}");
            assert_eq!(table_of(&memo), table_of(&whole), "round {round}");
            assert_eq!(
                (memo.size, memo.max_size),
                (whole.size, whole.max_size),
                "round {round}"
            );
        }
        assert!(remembered > 5_000, "{remembered} blocks answered from memory");
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
