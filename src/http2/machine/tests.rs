//! The frame state machine fed a server's frames written by hand, one
//! behaviour at a time (RST_STREAM, GOAWAY, SETTINGS, CONTINUATION, the
//! flow-control windows), without a socket.

use super::*;
use crate::http2::frame::FrameHead;

#[test]
fn requests_index_after_the_first_until_the_server_shrinks_the_table() {
    let request = get_on(true);
    let indexed = request.indexed.clone().unwrap();
    let mut table = Table::Fresh;
    assert_eq!(table.pick(&request), (None, &indexed.first[..]));
    assert_eq!(table.pick(&request), (None, &indexed.repeat[..]));
    assert_eq!(table.pick(&request), (None, &indexed.repeat[..]));
    // SETTINGS_HEADER_TABLE_SIZE below 4096: empty the table once, then
    // literals only.
    table = Table::Off { update_due: true };
    assert_eq!(table.pick(&request), (Some(0x20), &request.block[..]));
    assert_eq!(table.pick(&request), (None, &request.block[..]));
}

// The server's side of the tests below: frames written by hand, fed to
// a machine whose lanes have started GET requests (ids 1, 3, 5, ...).

/// HPACK for `:status: 200` (static table index 8).
const STATUS_200: u8 = 0x88;

fn get() -> H2Request {
    get_on(false)
}

/// `GET /` to a.test, over https or http.
fn get_on(https: bool) -> H2Request {
    let fields = crate::request::Fields::default();
    H2Request::new(&crate::request::Request {
        method: "GET",
        https,
        authority: "a.test",
        path: b"/",
        url_auth: None,
        fields: &fields,
        overrides: Default::default(),
        body: b"",
    })
    .unwrap()
}

/// A machine with `lanes` streams open, what it queued so far cleared.
fn started(lanes: usize, request: &H2Request) -> Machine {
    let mut m = Machine::new(lanes);
    for lane in 0..lanes {
        m.start(lane, request, None);
    }
    m.wbuf.clear();
    m
}

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    frame::put_head(&mut out, payload.len(), kind, flags, stream);
    out.extend_from_slice(payload);
    out
}

fn feed(m: &mut Machine, bytes: &[u8]) -> Result<(), RequestError> {
    let mut consumed = 0;
    let result = m.receive(bytes, &mut consumed, usize::MAX);
    if result.is_ok() {
        assert_eq!(consumed, bytes.len(), "whole frames are consumed");
    }
    result
}

/// The frames the machine queued to send: (kind, flags, stream, payload).
fn sent(m: &Machine) -> Vec<(u8, u8, u32, Vec<u8>)> {
    let mut frames = Vec::new();
    let mut at = 0;
    while at < m.wbuf.len() {
        let head = FrameHead::parse(&m.wbuf[at..]);
        let payload = m.wbuf[at + frame::HEAD_LEN..at + frame::HEAD_LEN + head.len].to_vec();
        frames.push((head.kind, head.flags, head.stream, payload));
        at += frame::HEAD_LEN + head.len;
    }
    frames
}

/// How a lane's stream ended, as the tests compare it.
#[derive(Debug, PartialEq)]
enum Ended {
    Status(u16),
    Refused,
    /// The error's message.
    Failed(String),
}

fn outcome(m: &mut Machine, lane: usize) -> Ended {
    assert!(m.finished(lane), "lane {lane} has not finished");
    match m.finish(lane).0 {
        Ok(head) => Ended::Status(head.status),
        Err(Failure::Refused) => Ended::Refused,
        Err(Failure::Error(e)) => Ended::Failed(e.message()),
    }
}

#[test]
fn rst_stream_refused_may_be_retried_other_codes_fail_the_stream() {
    let mut m = started(3, &get());
    let refused = frame::REFUSED_STREAM.to_be_bytes();
    feed(&mut m, &frame(frame::RST_STREAM, 0, 1, &refused)).unwrap();
    assert_eq!(outcome(&mut m, 0), Ended::Refused);
    feed(&mut m, &frame(frame::RST_STREAM, 0, 3, &2u32.to_be_bytes())).unwrap();
    let Ended::Failed(failed) = outcome(&mut m, 1) else {
        panic!("stream 3 should have failed");
    };
    assert!(
        failed.contains("reset the stream") && failed.contains("0x2"),
        "{failed}"
    );
    assert!(!m.finished(2), "other streams go on");
    // A RST_STREAM of the wrong size is a connection error.
    assert!(feed(&mut m, &frame(frame::RST_STREAM, 0, 5, &[0; 3])).is_err());
}

#[test]
fn goaway_refuses_the_streams_above_its_last_and_lets_the_rest_finish() {
    let mut m = started(3, &get());
    let mut payload = 3u32.to_be_bytes().to_vec(); // last stream 3
    payload.extend_from_slice(&0u32.to_be_bytes());
    feed(&mut m, &frame(frame::GOAWAY, 0, 0, &payload)).unwrap();
    assert!(!m.accepts_streams(), "no new stream after GOAWAY");
    assert_eq!(outcome(&mut m, 2), Ended::Refused, "stream 5 > 3");
    assert!(!m.finished(0) && !m.finished(1));
    let done = frame::END_STREAM | frame::END_HEADERS;
    feed(&mut m, &frame(frame::HEADERS, done, 1, &[STATUS_200])).unwrap();
    feed(&mut m, &frame(frame::HEADERS, done, 3, &[STATUS_200])).unwrap();
    assert_eq!(outcome(&mut m, 0), Ended::Status(200));
    assert_eq!(outcome(&mut m, 1), Ended::Status(200));
    assert!(m.idle());
    assert!(
        feed(&mut m, &frame(frame::GOAWAY, 0, 0, &[0; 7])).is_err(),
        "too short"
    );
}

#[test]
fn settings_change_the_windows_the_frame_size_the_stream_limit_and_are_acknowledged() {
    let mut request = get();
    request.body = vec![7; 10];
    let mut m = Machine::new(2);
    let settings = |pairs: &[(u16, u32)]| {
        let mut out = Vec::new();
        frame::put_settings(&mut out, pairs);
        out
    };
    // A zero initial window holds the body back; the ACK is queued.
    feed(&mut m, &settings(&[(frame::SETTINGS_INITIAL_WINDOW_SIZE, 0)])).unwrap();
    m.wbuf.clear();
    m.start(0, &request, None);
    let kinds: Vec<u8> = sent(&m).iter().map(|f| f.0).collect();
    assert_eq!(kinds, [frame::HEADERS], "no DATA within a zero window");
    // Opening the initial window moves the open stream's window too.
    m.wbuf.clear();
    feed(&mut m, &settings(&[(frame::SETTINGS_INITIAL_WINDOW_SIZE, 4)])).unwrap();
    m.send_body(0, &request.body);
    let frames = sent(&m);
    assert_eq!((frames[0].0, frames[0].1), (frame::SETTINGS, frame::ACK));
    assert_eq!((frames[1].0, frames[1].3.len()), (frame::DATA, 4));
    // A stream limit of 1 leaves no room for a second stream.
    feed(&mut m, &settings(&[(frame::SETTINGS_MAX_CONCURRENT_STREAMS, 1)])).unwrap();
    let waker = Waker::noop();
    assert!(!m.has_capacity(waker));
    // A larger frame size lets a big header block go in one HEADERS.
    feed(&mut m, &settings(&[(frame::SETTINGS_MAX_FRAME_SIZE, 20_000)])).unwrap();
    assert_eq!(m.peer_max_frame, 20_000);
    // A small header table turns indexing off.
    feed(&mut m, &settings(&[(frame::SETTINGS_HEADER_TABLE_SIZE, 0)])).unwrap();
    assert_eq!(m.table, Table::Off { update_due: true });
    // Out of range: connection errors.
    for bad in [
        (frame::SETTINGS_MAX_FRAME_SIZE, 100),
        (frame::SETTINGS_INITIAL_WINDOW_SIZE, frame::MAX_WINDOW + 1),
    ] {
        assert!(feed(&mut Machine::new(1), &settings(&[bad])).is_err(), "{bad:?}");
    }
    assert!(
        feed(&mut m, &frame(frame::SETTINGS, 0, 1, &[])).is_err(),
        "SETTINGS on a stream"
    );
}

#[test]
fn continuation_completes_a_header_block_and_nothing_may_interrupt_it() {
    // `:status: 200` then a literal `x: y` (without indexing), split.
    let block = [STATUS_200, 0x00, 0x01, b'x', 0x01, b'y'];
    let mut m = started(1, &get());
    feed(&mut m, &frame(frame::HEADERS, frame::END_STREAM, 1, &block[..2])).unwrap();
    assert!(!m.finished(0), "the block is not complete yet");
    feed(&mut m, &frame(frame::CONTINUATION, 0, 1, &block[2..4])).unwrap();
    feed(
        &mut m,
        &frame(frame::CONTINUATION, frame::END_HEADERS, 1, &block[4..]),
    )
    .unwrap();
    assert_eq!(outcome(&mut m, 0), Ended::Status(200));

    let interrupted = |second: Vec<u8>| {
        let mut m = started(2, &get());
        feed(&mut m, &frame(frame::HEADERS, 0, 1, &block[..2])).unwrap();
        feed(&mut m, &second).unwrap_err().message()
    };
    let other = interrupted(frame(frame::CONTINUATION, frame::END_HEADERS, 3, &block[2..]));
    assert!(other.contains("another stream"), "{other}");
    let data = interrupted(frame(frame::DATA, 0, 1, b"x"));
    assert!(data.contains("interrupted"), "{data}");
    let mut m = started(1, &get());
    let stray = feed(&mut m, &frame(frame::CONTINUATION, frame::END_HEADERS, 1, &block));
    assert!(stray.unwrap_err().message().contains("without a header block"));
}

#[test]
fn flow_control_windows_hold_the_body_and_are_refilled_for_the_server() {
    let mut request = get();
    request.body = vec![7; 70_000];
    let mut m = Machine::new(1);
    m.wbuf.clear(); // the preface and volley's settings
    m.start(0, &request, None);
    let data = |m: &Machine| -> usize {
        sent(m)
            .iter()
            .filter(|f| f.0 == frame::DATA)
            .map(|f| f.3.len())
            .sum()
    };
    // Both windows start at 65,535: the rest waits for WINDOW_UPDATE.
    assert_eq!(data(&m), 65_535);
    assert!(sent(&m).iter().all(|f| f.3.len() <= frame::MAX_FRAME));
    m.wbuf.clear();
    // The stream's window alone is not enough: the connection's is spent.
    let more = 10_000u32.to_be_bytes();
    feed(&mut m, &frame(frame::WINDOW_UPDATE, 0, 1, &more)).unwrap();
    m.send_body(0, &request.body);
    assert_eq!(data(&m), 0);
    feed(&mut m, &frame(frame::WINDOW_UPDATE, 0, 0, &more)).unwrap();
    m.send_body(0, &request.body);
    assert_eq!(data(&m), 70_000 - 65_535);
    assert_eq!(sent(&m).last().unwrap().1 & frame::END_STREAM, frame::END_STREAM);

    // What the server sends is granted back once half the window is used.
    m.wbuf.clear();
    feed(
        &mut m,
        &frame(frame::HEADERS, frame::END_HEADERS, 1, &[STATUS_200]),
    )
    .unwrap();
    // (Half of the largest window is a gigabyte: start just short of it.)
    m.recv_unacked = REFILL_AT - 100;
    m.lanes[0].recv_unacked = REFILL_AT - 100;
    feed(&mut m, &frame(frame::DATA, 0, 1, &[0; 50])).unwrap();
    assert!(sent(&m).is_empty(), "nothing granted before half is used");
    feed(&mut m, &frame(frame::DATA, 0, 1, &[0; 50])).unwrap();
    let granted: Vec<(u32, u32)> = sent(&m)
        .iter()
        .filter(|f| f.0 == frame::WINDOW_UPDATE)
        .map(|f| (f.2, frame::read_u31(&f.3)))
        .collect();
    assert_eq!(granted, [(0, REFILL_AT), (1, REFILL_AT)]);

    // Overflowing a window: the connection's is a connection error, a
    // stream's fails that stream with RST_STREAM.
    let max = frame::MAX_WINDOW.to_be_bytes();
    assert!(feed(&mut started(1, &get()), &frame(frame::WINDOW_UPDATE, 0, 0, &max)).is_err());
    m.wbuf.clear();
    feed(&mut m, &frame(frame::WINDOW_UPDATE, 0, 1, &max)).unwrap();
    assert!(matches!(outcome(&mut m, 0), Ended::Failed(why) if why.contains("overflowed")));
    assert_eq!(sent(&m)[0].0, frame::RST_STREAM);
}

/// Two lanes, `unsent` of them with a request waiting to go out.
fn tally(unsent: usize, awaiting: bool) -> crate::http2::Tally {
    crate::http2::Tally {
        unsent,
        lanes: 2,
        awaiting,
    }
}

#[test]
fn coalesced_rounds_know_what_went_out_and_stamp_each_response_with_its_write() {
    let request = get();
    let mut m = Machine::new(2);
    m.start(0, &request, None);
    assert_eq!(m.tally(), tally(1, false), "lane 1 has not queued yet");
    m.start(1, &request, None);
    assert_eq!(
        m.tally(),
        tally(2, false),
        "both lanes queued: the round goes out"
    );
    let first_write = Instant::now();
    let mut rounds = crate::http2::Rounds::new(true);
    rounds.wrote(m.sent_stamps(), first_write);
    assert_eq!(m.tally(), tally(0, true));
    // Stream 1 is answered; its lane queues its next request, which waits
    // for stream 3's response.
    let done = frame::END_STREAM | frame::END_HEADERS;
    feed(&mut m, &frame(frame::HEADERS, done, 1, &[STATUS_200])).unwrap();
    let (result, _) = m.finish(0);
    assert_eq!(result.unwrap().sent_at, Some(first_write));
    m.start(0, &request, None);
    assert_eq!(m.tally(), tally(1, true));
    feed(&mut m, &frame(frame::HEADERS, done, 3, &[STATUS_200])).unwrap();
    assert_eq!(m.tally(), tally(1, false), "nothing written waits any more");
    let _ = m.finish(1);
    // The held request is stamped with the later write, not its queueing.
    let second_write = first_write + std::time::Duration::from_millis(5);
    rounds.wrote(m.sent_stamps(), second_write);
    feed(&mut m, &frame(frame::HEADERS, done, 5, &[STATUS_200])).unwrap();
    let (result, _) = m.finish(0);
    assert_eq!(result.unwrap().sent_at, Some(second_write));
}

/// Where the socket's receives are stamped, a stream is timed by the stamp
/// of the bytes that ended it, however long it waited to be read; one ended
/// by later bytes, by theirs.
#[test]
fn a_stream_ends_with_the_stamp_of_the_bytes_that_ended_it() {
    let mut m = started(2, &get());
    let early = std::time::Instant::now();
    let late = early + std::time::Duration::from_millis(3);
    let answered = |stream| {
        frame(
            frame::HEADERS,
            frame::END_HEADERS | frame::END_STREAM,
            stream,
            &[STATUS_200],
        )
    };
    m.stamp = Some(early);
    feed(&mut m, &answered(1)).unwrap();
    // The second stream's headers come with the first's, its end later.
    feed(
        &mut m,
        &frame(frame::HEADERS, frame::END_HEADERS, 3, &[STATUS_200]),
    )
    .unwrap();
    m.stamp = Some(late);
    feed(&mut m, &frame(frame::DATA, frame::END_STREAM, 3, b"hi")).unwrap();
    let received = |m: &mut Machine, lane| match m.finish(lane).0 {
        Ok(head) => head.received_at,
        Err(_) => panic!("lane {lane} was not answered"),
    };
    assert_eq!(received(&mut m, 0), Some(early));
    assert_eq!(received(&mut m, 1), Some(late));
    // Unstamped (TLS, epoll): none, and the engine times it as read.
    m.start(0, &get(), None);
    m.stamp = None;
    feed(&mut m, &answered(5)).unwrap();
    assert_eq!(received(&mut m, 0), None);
}
