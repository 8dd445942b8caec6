//! The response reader on scripted byte pieces: framing, limits, capture.

use super::*;
use crate::http1::head;

/// Feeds the reader from fixed pieces, one piece per read, to exercise
/// every partial-input path.
struct Pieces(std::collections::VecDeque<Vec<u8>>);

impl AsyncRead for Pieces {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        if let Some(mut piece) = self.0.pop_front() {
            let n = piece.len().min(buf.remaining());
            buf.put_slice(&piece[..n]);
            if n < piece.len() {
                self.0.push_front(piece.split_off(n));
            }
        }
        std::task::Poll::Ready(Ok(()))
    }
}

fn pieces(parts: &[&[u8]]) -> Pieces {
    Pieces(parts.iter().map(|p| p.to_vec()).collect())
}

fn read(parts: &[&[u8]], head: bool) -> Result<ResponseHead, RequestError> {
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let mut reader = ResponseReader::default();
    rt.block_on(reader.read_response(
        &mut pieces(parts),
        &BodySink::default(),
        &KnownHead::default(),
        head,
    ))
}

#[test]
fn content_length_split_across_reads() {
    let head = read(
        &[b"HTTP/1.1 200 OK\r\nContent-", b"Length: 5\r\n\r\nwo", b"rld"],
        false,
    )
    .unwrap();
    assert_eq!(
        head,
        ResponseHead {
            status: 200,
            bytes: 43,
            close: false,
            h3_offer: None,
            sent_at: None,
            received_at: None,
        }
    );
}

#[test]
fn chunked_with_trailers_byte_by_byte() {
    let whole = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n3;x=y\r\nabc\r\n0\r\nT: 1\r\n\r\n";
    let parts: Vec<&[u8]> = whole.chunks(1).collect();
    let head = read(&parts, false).unwrap();
    assert_eq!(head.status, 200);
    assert_eq!(head.bytes, whole.len() as u64);
}

#[test]
fn close_delimited_body_reads_to_eof() {
    let head = read(&[b"HTTP/1.0 200 OK\r\n\r\n", b"abc", b"def"], false).unwrap();
    assert_eq!(head.bytes, 25);
    assert!(head.close);
}

#[test]
fn head_and_204_have_no_body() {
    let head = read(&[b"HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\n"], true).unwrap();
    assert_eq!(head.status, 200);
    let head = read(&[b"HTTP/1.1 204 No Content\r\nContent-Length: 99\r\n\r\n"], false).unwrap();
    assert_eq!(head.status, 204);
}

#[test]
fn interim_100_is_skipped_and_close_is_seen() {
    let head = read(
        &[b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"],
        false,
    )
    .unwrap();
    assert_eq!(head.status, 201);
    assert!(head.close);
}

#[test]
fn pipelined_responses_keep_leftover_bytes() {
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let mut reader = ResponseReader::default();
    let mut input = pieces(&[
        b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\naHTTP/1.1 404 NF\r\nContent-Length: 2\r\n\r\nbb",
    ]);
    let sink = BodySink::default();
    let known = KnownHead::default();
    let first = rt
        .block_on(reader.read_response(&mut input, &sink, &known, false))
        .unwrap();
    let second = rt
        .block_on(reader.read_response(&mut input, &sink, &known, false))
        .unwrap();
    assert_eq!((first.status, second.status), (200, 404));
    assert!(reader.buffered().is_empty());
}

#[test]
fn large_body_goes_through_the_sink_and_stops_at_its_end() {
    let body = vec![b'x'; 200_000];
    let mut first = b"HTTP/1.1 200 OK\r\nContent-Length: 200000\r\n\r\n".to_vec();
    first.extend_from_slice(&body);
    let next = b"HTTP/1.1 204 No Content\r\n\r\n";
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let mut reader = ResponseReader::default();
    let sink = BodySink::default();
    let known = KnownHead::default();
    let mut input = pieces(&[&first, next]);
    let head = rt
        .block_on(reader.read_response(&mut input, &sink, &known, false))
        .unwrap();
    assert_eq!(head.bytes, first.len() as u64);
    assert!(
        reader.buf.len() <= INITIAL_BUFFER,
        "the body did not grow the head buffer"
    );
    let head = rt
        .block_on(reader.read_response(&mut input, &sink, &known, false))
        .unwrap();
    assert_eq!(
        head.status, 204,
        "the next response was not swallowed by the body skip"
    );
}

#[test]
fn capture_keeps_headers_body_and_cookies() {
    let whole = b"HTTP/1.1 200 OK\r\nSet-Cookie: session=abc; Path=/\r\nX-Token: t1\r\nTransfer-Encoding: chunked\r\n\r\n4\r\n{\"a\"\r\n3\r\n:1}\r\n0\r\n\r\n";
    let parts: Vec<&[u8]> = whole.chunks(7).collect();
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let mut reader = ResponseReader::default();
    let mut capture = Capture::default();
    capture.clear(true);
    let head = rt
        .block_on(reader.read_response_into(
            &mut pieces(&parts),
            &BodySink::default(),
            &KnownHead::default(),
            false,
            Some(&mut capture),
        ))
        .unwrap();
    assert_eq!(head.bytes, whole.len() as u64);
    assert_eq!(capture.body, br#"{"a":1}"#);
    assert_eq!(capture.set_cookies, vec!["session=abc".to_string()]);
    assert!(
        capture
            .headers
            .contains(&("x-token".to_string(), "t1".to_string()))
    );
    // Without `full` only the cookies are kept.
    let mut light = Capture::default();
    let mut reader = ResponseReader::default();
    rt.block_on(reader.read_response_into(
        &mut pieces(&[whole]),
        &BodySink::default(),
        &KnownHead::default(),
        false,
        Some(&mut light),
    ))
    .unwrap();
    assert!(light.body.is_empty() && light.headers.is_empty());
    assert_eq!(light.set_cookies.len(), 1);
}

#[test]
fn errors_have_the_right_kind() {
    let garbage = read(&[b"NOT HTTP AT ALL\r\n\r\n"], false).unwrap_err();
    assert_eq!(garbage.kind, ErrorKind::Protocol);
    let eof = read(&[], false).unwrap_err();
    assert_eq!(eof.kind, ErrorKind::Reset);
    assert!(eof.message().contains("before any response"));
    let short = read(&[b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc"], false).unwrap_err();
    assert_eq!(short.kind, ErrorKind::Reset);
    let bad_len = read(&[b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n"], false).unwrap_err();
    assert_eq!(bad_len.kind, ErrorKind::Protocol);
    let signed = read(&[b"HTTP/1.1 200 OK\r\nContent-Length: +2\r\n\r\nab"], false).unwrap_err();
    assert_eq!(signed.kind, ErrorKind::Protocol);
    let empty_size = read(
        &[b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\r\n"],
        false,
    )
    .unwrap_err();
    assert_eq!(empty_size.kind, ErrorKind::Protocol);
}

#[test]
fn an_alt_svc_that_offers_http3_is_noted() {
    let offered =
        b"HTTP/1.1 200 OK\r\nalt-svc: h3-29=\":1\", h3=\":8443\"; ma=86400\r\nContent-Length: 0\r\n\r\n";
    assert_eq!(read(&[offered], false).unwrap().h3_offer, Some(8443));
    let plain = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
    assert_eq!(read(&[plain], false).unwrap().h3_offer, None);
}

/// Polls `poll_whole_response` until it is ready, on pieces where an empty
/// one stands for a read that finds nothing yet (`Pending`).
fn poll_whole(
    known: &KnownHead,
    reader: &mut ResponseReader,
    stream: &mut Gappy,
    head: bool,
) -> Result<Option<ResponseHead>, RequestError> {
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    for _ in 0..100 {
        if let Poll::Ready(done) = reader.poll_whole_response(stream, &mut cx, head, known) {
            return done;
        }
    }
    panic!("poll_whole_response never became ready");
}

/// Pieces with gaps: an empty piece makes one read `Pending`.
struct Gappy(std::collections::VecDeque<Vec<u8>>);

impl AsyncRead for Gappy {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        match self.0.pop_front() {
            Some(piece) if piece.is_empty() => Poll::Pending,
            Some(mut piece) => {
                let n = piece.len().min(buf.remaining());
                buf.put_slice(&piece[..n]);
                if n < piece.len() {
                    self.0.push_front(piece.split_off(n));
                }
                Poll::Ready(Ok(()))
            }
            None => Poll::Ready(Ok(())),
        }
    }
}

fn gappy(parts: &[&[u8]]) -> Gappy {
    Gappy(parts.iter().map(|p| p.to_vec()).collect())
}

#[test]
fn whole_responses_are_polled_in_order_across_gaps() {
    let first = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";
    let second = b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
    let mut both = first.to_vec();
    both.extend_from_slice(second);
    // Gaps inside the head, inside the body and between the two responses.
    let (a, rest) = both.split_at(10);
    let (b, rest) = rest.split_at(30);
    let mut stream = gappy(&[b"", a, b"", b, b"", rest]);
    let mut reader = ResponseReader::with_capacity(SMALL_BUFFER);
    let known = KnownHead::default();
    let one = poll_whole(&known, &mut reader, &mut stream, false)
        .unwrap()
        .unwrap();
    assert_eq!(one, read(&[first], false).unwrap());
    let two = poll_whole(&known, &mut reader, &mut stream, false)
        .unwrap()
        .unwrap();
    assert_eq!(two, read(&[second], false).unwrap());
    assert!(two.close);
    assert_eq!(reader.buffered(), b"");
}

/// The worker's last head answers a response that begins with its bytes,
/// for the same kind of request, and no other.
#[test]
fn a_known_head_answers_only_the_same_head() {
    let get = b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc";
    let head_len = get.len() - 3;
    // The same head for a HEAD request (no body), then heads that begin
    // as the known one does but go on otherwise.
    let cases: [(&[u8], bool); 6] = [
        (get, false),
        (get, false),
        (&get[..head_len], true),
        (get, false),
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabc",
            false,
        ),
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: 30\r\n\r\n012345678901234567890123456789",
            false,
        ),
    ];
    let known = KnownHead::default();
    let mut reader = ResponseReader::with_capacity(SMALL_BUFFER);
    for (i, (whole, is_head)) in cases.into_iter().enumerate() {
        let mut stream = gappy(&[whole]);
        let head = poll_whole(&known, &mut reader, &mut stream, is_head)
            .unwrap()
            .unwrap();
        assert_eq!(head, read(&[whole], is_head).unwrap(), "case {i}");
        let last = known.last.borrow();
        let (bytes, was_head, _) = last.as_ref().unwrap();
        let head_end = whole.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
        assert_eq!((&bytes[..], *was_head), (&whole[..head_end], is_head), "case {i}");
    }
}

#[test]
fn responses_the_poll_does_not_take_are_left_for_the_general_read() {
    let big_body = format!(
        "HTTP/1.1 200 OK\r\nContent-Length: 600\r\n\r\n{}",
        "x".repeat(600)
    );
    let cases: [&[u8]; 4] = [
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
        b"HTTP/1.1 200 OK\r\n\r\nuntil the end",
        big_body.as_bytes(),
    ];
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    for whole in cases {
        let mut stream = gappy(&[whole]);
        let mut reader = ResponseReader::with_capacity(SMALL_BUFFER);
        assert_eq!(
            poll_whole(&KnownHead::default(), &mut reader, &mut stream, false).unwrap(),
            None
        );
        // Nothing was consumed: the general read sees the whole response.
        let head = rt
            .block_on(reader.read_response(&mut stream, &BodySink::default(), &KnownHead::default(), false))
            .unwrap();
        assert_eq!(head, read(&[whole], false).unwrap());
    }
    // A HEAD response has no body whatever its Content-Length says.
    let whole = b"HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\n";
    let mut reader = ResponseReader::with_capacity(SMALL_BUFFER);
    let head = poll_whole(&KnownHead::default(), &mut reader, &mut gappy(&[whole]), true)
        .unwrap()
        .unwrap();
    assert_eq!(head, read(&[whole], true).unwrap());
    assert_eq!(head.bytes, whole.len() as u64);
}

#[test]
fn a_close_or_a_bad_head_during_the_poll_is_an_error() {
    let cases: [(&[u8], &str); 3] = [
        (b"", "before any response"),
        (b"HTTP/1.1 200 OK\r\nContent-", "middle of the response head"),
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhel",
            "middle of the response body",
        ),
    ];
    for (sent, says) in cases {
        let mut reader = ResponseReader::with_capacity(SMALL_BUFFER);
        let err = poll_whole(&KnownHead::default(), &mut reader, &mut gappy(&[sent]), false).unwrap_err();
        assert_eq!(err.kind, ErrorKind::Reset, "{sent:?}");
        assert!(err.message().contains(says), "{sent:?}: {}", err.message());
    }
    let mut reader = ResponseReader::with_capacity(SMALL_BUFFER);
    let err = poll_whole(
        &KnownHead::default(),
        &mut reader,
        &mut gappy(&[b"NOT HTTP\r\n\r\n"]),
        false,
    )
    .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Protocol);
}

/// Heads servers send, and some they should not, as seeds for mutation.
const SEED_HEADS: [&[u8]; 8] = [
    b"HTTP/1.1 200 OK\r\nServer: nginx/1.22.1\r\nDate: Thu, 26 Nov 2026 23:00:00 GMT\r\nContent-Type: text/plain\r\nContent-Length: 5\r\nConnection: keep-alive\r\n\r\n",
    b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\nConnection: Keep-Alive, x\r\n\r\n",
    b"HTTP/1.1 204 No Content\r\nContent-Length: 12\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip , chunked\r\nContent-Length: 3\r\n\r\n",
    b"HTTP/1.1 101\r\nConnection: upgrade\r\n\r\n",
    b"HTTP/1.1 200 \xe9t\xe9\r\nContent-Length: +2\r\nX:\t\r\nAlt-Svc: h3=\":4433\"; ma=60\r\n\r\n",
    b"HTTP/1.1 200 OK\r\ncontent-length: 7\r\nCONTENT-LENGTH: 8\r\nconnection: close\r\n\r\n",
    b"HTTP/1.1 304 Not Modified\r\nConnection: close, keep-alive\r\nX-Tab:\ta\tb \t\r\n\r\n",
];

#[test]
fn the_scanner_reads_every_head_as_httparse_does() {
    // Every seed, cut at every length, with one byte changed (to each of
    // the bytes that matter to a head, and one drawn from a fixed
    // sequence), dropped or doubled at every place, as a response to GET
    // and to HEAD.
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut scanned = 0;
    for seed in SEED_HEADS {
        let mut variants: Vec<Vec<u8>> = (0..=seed.len()).map(|n| seed[..n].to_vec()).collect();
        for at in 0..seed.len() {
            let random = (next() >> 8) as u8;
            for byte in [
                b'\r', b'\n', b' ', b'\t', b':', b',', 0, 0x7f, 0x80, b'a', b'0', random,
            ] {
                let mut changed = seed.to_vec();
                changed[at] = byte;
                variants.push(changed);
            }
            let mut dropped = seed.to_vec();
            dropped.remove(at);
            variants.push(dropped);
            let mut doubled = seed.to_vec();
            doubled.insert(at, seed[at]);
            variants.push(doubled);
        }
        for bytes in variants {
            for head_request in [false, true] {
                assert!(
                    scanner_agrees_with_httparse(&bytes, head_request),
                    "{:?}",
                    String::from_utf8_lossy(&bytes)
                );
                scanned += usize::from(head::scan(&bytes, |_, _| {}).is_some());
            }
        }
    }
    // The comparison means something only if the scanner took many of them.
    assert!(scanned > 5_000, "the scanner took only {scanned} heads");
}

#[test]
fn a_response_is_read_in_place_exactly_when_the_poll_would_read_it_whole() {
    let big_body = format!(
        "HTTP/1.1 200 OK\r\nContent-Length: 600\r\n\r\n{}",
        "x".repeat(600)
    );
    let ok = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
    let cases: [(&[u8], bool); 9] = [
        (ok, false),
        (ok, false),
        (&ok[..ok.len() - 1], false),
        (&ok[..ok.len() - 2], true),
        (b"HTTP/1.1 204 No Content\r\n\r\nHTTP/1.1 200", false),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            false,
        ),
        (
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
            false,
        ),
        (big_body.as_bytes(), false),
        (b"HTTP/1.1 2OO OK\r\n\r\n", false),
    ];
    let (in_place_known, copied_known) = (KnownHead::default(), KnownHead::default());
    for (i, (bytes, is_head)) in cases.into_iter().enumerate() {
        let reader = ResponseReader::with_capacity(SMALL_BUFFER);
        let in_place = reader.whole_response_in_place(bytes, is_head, &in_place_known);
        // The copying poll on the same bytes, then nothing more.
        let mut copying = ResponseReader::with_capacity(SMALL_BUFFER);
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        let copied = copying.poll_whole_response(&mut gappy(&[bytes, b""]), &mut cx, is_head, &copied_known);
        let expected = match copied {
            Poll::Ready(Ok(Some(head))) => Some(head),
            _ => None,
        };
        assert_eq!(in_place, expected, "case {i}");
        if let Some(head) = in_place {
            assert!(head.bytes as usize <= bytes.len(), "case {i}");
        }
    }
    // A reader that holds bytes reads nothing in place.
    let mut holding = ResponseReader::with_capacity(SMALL_BUFFER);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    let partial = holding.poll_whole_response(
        &mut gappy(&[b"HTTP/1.1 200", b""]),
        &mut cx,
        false,
        &in_place_known,
    );
    assert!(partial.is_pending());
    assert_eq!(holding.whole_response_in_place(ok, false, &in_place_known), None);
}
