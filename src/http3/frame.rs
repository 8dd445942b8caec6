//! HTTP/3 framing (RFC 9114 section 7): QUIC's variable-length integers,
//! frame headers, and the client's SETTINGS.
//!
//! Frames arrive on QUIC streams in pieces of any size, so the reader here
//! is incremental: [`FrameReader`] takes whatever bytes a stream gave and
//! says where each frame's payload starts and how long it is, without
//! copying or allocating; a payload may span many reads.

/// Frame types volley reads or writes.
pub const DATA: u64 = 0x00;
pub const HEADERS: u64 = 0x01;
pub const SETTINGS: u64 = 0x04;
pub const PUSH_PROMISE: u64 = 0x05;
pub const GOAWAY: u64 = 0x07;

/// Unidirectional stream types (section 6.2).
pub const CONTROL_STREAM: u64 = 0x00;

/// Settings (section 7.2.4.1 and RFC 9204).
pub const SETTING_QPACK_MAX_TABLE_CAPACITY: u64 = 0x01;
pub const SETTING_MAX_FIELD_SECTION_SIZE: u64 = 0x06;
pub const SETTING_QPACK_BLOCKED_STREAMS: u64 = 0x07;

/// The largest value a QUIC varint holds.
pub const MAX_VARINT: u64 = (1 << 62) - 1;

/// Error codes (section 8.1) volley sends or recognises.
pub const H3_NO_ERROR: u64 = 0x100;
pub const H3_FRAME_UNEXPECTED: u64 = 0x105;
pub const H3_REQUEST_CANCELLED: u64 = 0x10c;
pub const H3_REQUEST_REJECTED: u64 = 0x10b;

/// Appends `value` as a QUIC variable-length integer (RFC 9000 16).
pub fn put_varint(out: &mut Vec<u8>, value: u64) {
    debug_assert!(value <= MAX_VARINT);
    if value < 1 << 6 {
        out.push(value as u8);
    } else if value < 1 << 14 {
        out.extend_from_slice(&(value as u16 | 0x4000).to_be_bytes());
    } else if value < 1 << 30 {
        out.extend_from_slice(&(value as u32 | 0x8000_0000).to_be_bytes());
    } else {
        out.extend_from_slice(&(value | 0xc000_0000_0000_0000).to_be_bytes());
    }
}

/// Reads a varint at the start of `bytes`: its value and length, or `None`
/// when `bytes` holds only part of it.
pub fn varint(bytes: &[u8]) -> Option<(u64, usize)> {
    let first = *bytes.first()?;
    let len = 1usize << (first >> 6);
    let raw = bytes.get(..len)?;
    let mut value = u64::from(first & 0x3f);
    for b in &raw[1..] {
        value = (value << 8) | u64::from(*b);
    }
    Some((value, len))
}

/// Appends a frame header: type and payload length.
pub fn put_header(out: &mut Vec<u8>, kind: u64, len: usize) {
    put_varint(out, kind);
    put_varint(out, len as u64);
}

/// What the client's control stream starts with: its type and a SETTINGS
/// frame. volley's decoder has no dynamic table (capacity 0, no blocked
/// streams: the defaults, said outright), so the server's header blocks
/// are static-table references and literals only.
pub fn control_stream_preface(max_field_section: usize) -> Vec<u8> {
    let mut settings = Vec::new();
    put_varint(&mut settings, SETTING_QPACK_MAX_TABLE_CAPACITY);
    put_varint(&mut settings, 0);
    put_varint(&mut settings, SETTING_QPACK_BLOCKED_STREAMS);
    put_varint(&mut settings, 0);
    put_varint(&mut settings, SETTING_MAX_FIELD_SECTION_SIZE);
    put_varint(&mut settings, max_field_section as u64);
    let mut out = Vec::new();
    put_varint(&mut out, CONTROL_STREAM);
    put_header(&mut out, SETTINGS, settings.len());
    out.extend_from_slice(&settings);
    out
}

/// Where a stream's frames stand between reads.
#[derive(Debug, Default, Clone)]
pub struct FrameReader {
    /// A frame header split across reads, gathered here (at most two
    /// 8-byte varints).
    partial: [u8; 16],
    partial_len: usize,
    /// The frame being read and the payload bytes still to come.
    kind: u64,
    remaining: u64,
    in_frame: bool,
}

/// One step of reading a stream's bytes.
#[derive(Debug, PartialEq, Eq)]
pub enum Piece {
    /// A frame begins: its type and payload length.
    Start { kind: u64, len: u64 },
    /// Payload bytes of the current frame, `bytes[range]` of the input;
    /// `last` when they end it.
    Payload {
        kind: u64,
        range: std::ops::Range<usize>,
        last: bool,
    },
}

impl FrameReader {
    pub fn reset(&mut self) {
        *self = FrameReader::default();
    }

    /// Whether the stream is between frames (a clean place for it to end).
    pub fn at_boundary(&self) -> bool {
        !self.in_frame && self.partial_len == 0
    }

    /// The next piece of `bytes` from `*pos`, advancing it; `None` when
    /// `bytes` is used up (a header split across reads is kept).
    pub fn next(&mut self, bytes: &[u8], pos: &mut usize) -> Option<Piece> {
        if self.in_frame {
            let rest = &bytes[*pos..];
            if rest.is_empty() && self.remaining > 0 {
                return None;
            }
            let take = (self.remaining.min(rest.len() as u64)) as usize;
            let range = *pos..*pos + take;
            *pos += take;
            self.remaining -= take as u64;
            let last = self.remaining == 0;
            self.in_frame = !last;
            return Some(Piece::Payload {
                kind: self.kind,
                range,
                last,
            });
        }
        // A header: from the gathered part plus the new bytes.
        while *pos < bytes.len() && self.partial_len < self.partial.len() {
            let gathered = &self.partial[..self.partial_len];
            if let Some((kind, klen)) = varint(gathered)
                && let Some((len, llen)) = varint(&gathered[klen..])
            {
                debug_assert_eq!(klen + llen, self.partial_len);
                return Some(self.start(kind, len));
            }
            self.partial[self.partial_len] = bytes[*pos];
            self.partial_len += 1;
            *pos += 1;
        }
        let gathered = &self.partial[..self.partial_len];
        if let Some((kind, klen)) = varint(gathered)
            && let Some((len, _)) = varint(&gathered[klen..])
        {
            return Some(self.start(kind, len));
        }
        None
    }

    fn start(&mut self, kind: u64, len: u64) -> Piece {
        self.partial_len = 0;
        self.kind = kind;
        self.remaining = len;
        self.in_frame = true;
        Piece::Start { kind, len }
    }
}

#[cfg(test)]
/// The settings in a SETTINGS payload, as (identifier, value) pairs;
/// `None` if it is malformed.
pub fn settings(payload: &[u8]) -> Option<Vec<(u64, u64)>> {
    let mut pairs = Vec::new();
    let mut pos = 0;
    while pos < payload.len() {
        let (id, a) = varint(&payload[pos..])?;
        let (value, b) = varint(&payload[pos + a..])?;
        pos += a + b;
        pairs.push((id, value));
    }
    Some(pairs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip_at_every_length() {
        for value in [
            0,
            37,
            63,
            64,
            15293,
            16383,
            16384,
            494_878_333,
            (1 << 30) - 1,
            1 << 30,
            MAX_VARINT,
        ] {
            let mut out = Vec::new();
            put_varint(&mut out, value);
            assert_eq!(varint(&out), Some((value, out.len())), "{value}");
            assert_eq!(varint(&out[..out.len() - 1]), None, "{value} cut short");
        }
        // RFC 9000's sample encodings.
        assert_eq!(
            varint(&[0xc2, 0x19, 0x7c, 0x5e, 0xff, 0x14, 0xe8, 0x8c]),
            Some((151_288_809_941_952_652, 8))
        );
        assert_eq!(varint(&[0x9d, 0x7f, 0x3e, 0x7d]), Some((494_878_333, 4)));
        assert_eq!(varint(&[0x7b, 0xbd]), Some((15293, 2)));
        assert_eq!(varint(&[0x25]), Some((37, 1)));
    }

    /// Feeds `bytes` in pieces of `step` and gathers (type, payload) pairs.
    fn frames(bytes: &[u8], step: usize) -> Vec<(u64, Vec<u8>)> {
        let mut reader = FrameReader::default();
        let mut out: Vec<(u64, Vec<u8>)> = Vec::new();
        for chunk in bytes.chunks(step) {
            let mut pos = 0;
            while let Some(piece) = reader.next(chunk, &mut pos) {
                match piece {
                    Piece::Start { kind, .. } => out.push((kind, Vec::new())),
                    Piece::Payload { range, .. } => {
                        out.last_mut().unwrap().1.extend_from_slice(&chunk[range])
                    }
                }
            }
        }
        assert!(reader.at_boundary());
        out
    }

    #[test]
    fn frames_are_read_whole_however_the_bytes_are_split() {
        let mut bytes = Vec::new();
        put_header(&mut bytes, HEADERS, 3);
        bytes.extend_from_slice(b"abc");
        put_header(&mut bytes, 0x21, 0); // reserved, empty
        put_header(&mut bytes, DATA, 300);
        bytes.extend(std::iter::repeat_n(7u8, 300));
        let expected = vec![(HEADERS, b"abc".to_vec()), (0x21, vec![]), (DATA, vec![7; 300])];
        for step in [1, 2, 3, 5, 64, bytes.len()] {
            assert_eq!(frames(&bytes, step), expected, "step {step}");
        }
    }

    #[test]
    fn the_control_stream_preface_is_a_settings_frame() {
        let preface = control_stream_preface(65536);
        assert_eq!(preface[0], CONTROL_STREAM as u8);
        let mut reader = FrameReader::default();
        let mut pos = 1;
        assert_eq!(
            reader.next(&preface, &mut pos),
            Some(Piece::Start {
                kind: SETTINGS,
                len: 9
            })
        );
        let Some(Piece::Payload {
            range, last: true, ..
        }) = reader.next(&preface, &mut pos)
        else {
            panic!("a payload");
        };
        assert_eq!(settings(&preface[range]), Some(vec![(1, 0), (7, 0), (6, 65536)]));
        assert_eq!(settings(&[0x06]), None);
    }
}
