//! HTTP/2 frame headers and the control frames a client sends.

/// What a client sends first on every connection.
pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
pub const HEAD_LEN: usize = 9;
/// The largest frame payload volley accepts (it never raises the default).
pub const MAX_FRAME: usize = 16_384;

pub const DATA: u8 = 0x0;
pub const HEADERS: u8 = 0x1;
pub const RST_STREAM: u8 = 0x3;
pub const SETTINGS: u8 = 0x4;
pub const PUSH_PROMISE: u8 = 0x5;
pub const PING: u8 = 0x6;
pub const GOAWAY: u8 = 0x7;
pub const WINDOW_UPDATE: u8 = 0x8;
pub const CONTINUATION: u8 = 0x9;
pub const PRIORITY_FRAME: u8 = 0x2;

pub const END_STREAM: u8 = 0x1;
pub const ACK: u8 = 0x1;
pub const END_HEADERS: u8 = 0x4;
pub const PADDED: u8 = 0x8;
pub const PRIORITY: u8 = 0x20;

pub const SETTINGS_HEADER_TABLE_SIZE: u16 = 0x1;
pub const SETTINGS_ENABLE_PUSH: u16 = 0x2;
pub const SETTINGS_MAX_CONCURRENT_STREAMS: u16 = 0x3;
pub const SETTINGS_INITIAL_WINDOW_SIZE: u16 = 0x4;
pub const SETTINGS_MAX_FRAME_SIZE: u16 = 0x5;
pub const SETTINGS_MAX_HEADER_LIST_SIZE: u16 = 0x6;

/// RST_STREAM / GOAWAY codes volley acts on.
pub const REFUSED_STREAM: u32 = 0x7;
pub const CANCEL: u32 = 0x8;
pub const PROTOCOL_ERROR: u32 = 0x1;

/// The largest flow-control window.
pub const MAX_WINDOW: u32 = (1 << 31) - 1;

/// A parsed frame header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameHead {
    pub len: usize,
    pub kind: u8,
    pub flags: u8,
    pub stream: u32,
}

impl FrameHead {
    pub fn parse(bytes: &[u8]) -> FrameHead {
        FrameHead {
            len: (bytes[0] as usize) << 16 | (bytes[1] as usize) << 8 | bytes[2] as usize,
            kind: bytes[3],
            flags: bytes[4],
            stream: read_u31(&bytes[5..9]),
        }
    }
}

/// A 31-bit big-endian value (the top bit is reserved).
pub fn read_u31(bytes: &[u8]) -> u32 {
    u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) & 0x7fff_ffff
}

pub fn read_u32(bytes: &[u8]) -> u32 {
    u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]])
}

pub fn put_head(out: &mut Vec<u8>, len: usize, kind: u8, flags: u8, stream: u32) {
    debug_assert!(len < 1 << 24);
    out.extend_from_slice(&[(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags]);
    out.extend_from_slice(&stream.to_be_bytes());
}

pub fn put_settings(out: &mut Vec<u8>, settings: &[(u16, u32)]) {
    put_head(out, settings.len() * 6, SETTINGS, 0, 0);
    for (id, value) in settings {
        out.extend_from_slice(&id.to_be_bytes());
        out.extend_from_slice(&value.to_be_bytes());
    }
}

pub fn put_settings_ack(out: &mut Vec<u8>) {
    put_head(out, 0, SETTINGS, ACK, 0);
}

pub fn put_window_update(out: &mut Vec<u8>, stream: u32, increment: u32) {
    put_head(out, 4, WINDOW_UPDATE, 0, stream);
    out.extend_from_slice(&increment.to_be_bytes());
}

pub fn put_ping_ack(out: &mut Vec<u8>, payload: &[u8]) {
    put_head(out, 8, PING, ACK, 0);
    out.extend_from_slice(payload);
}

pub fn put_rst_stream(out: &mut Vec<u8>, stream: u32, code: u32) {
    put_head(out, 4, RST_STREAM, 0, stream);
    out.extend_from_slice(&code.to_be_bytes());
}

/// Strips a padded frame's padding (and a HEADERS frame's priority block)
/// from its payload; `None` when the padding is longer than the frame.
pub fn unpad(payload: &[u8], flags: u8, has_priority: bool) -> Option<&[u8]> {
    let mut body = payload;
    let mut pad = 0usize;
    if flags & PADDED != 0 {
        pad = *body.first()? as usize;
        body = &body[1..];
    }
    if has_priority && flags & PRIORITY != 0 {
        body = body.get(5..)?;
    }
    body.get(..body.len().checked_sub(pad)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_round_trips() {
        let mut out = Vec::new();
        put_head(&mut out, 70_000, HEADERS, END_HEADERS | END_STREAM, 0x7fff_fffd);
        assert_eq!(out.len(), HEAD_LEN);
        let head = FrameHead::parse(&out);
        assert_eq!(
            head,
            FrameHead {
                len: 70_000,
                kind: HEADERS,
                flags: END_HEADERS | END_STREAM,
                stream: 0x7fff_fffd
            }
        );
    }

    #[test]
    fn padding_and_priority_are_stripped() {
        // pad length 2, priority block of 5, "ab", two padding bytes
        let payload = [2, 0, 0, 0, 1, 16, b'a', b'b', 0, 0];
        assert_eq!(unpad(&payload, PADDED | PRIORITY, true), Some(&b"ab"[..]));
        assert_eq!(unpad(b"xy", 0, true), Some(&b"xy"[..]));
        assert_eq!(unpad(&[9, b'a'], PADDED, false), None);
    }
}
