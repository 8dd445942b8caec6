//! The HTTP/3 state machine driven without a socket: its datagrams are
//! carried by hand to and from a QUIC server endpoint of quinn-proto's in
//! the same thread, whose HTTP/3 side each test writes as the server it
//! plays (an answer, a reset, a GOAWAY, a protocol violation).

use super::*;
use crate::request::{Fields, Overrides, Request};
use crate::target::Target;
use quinn_proto::{Connection, ConnectionHandle, ServerConfig};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::collections::HashMap;
use std::time::Duration;

const SERVER: &str = "127.0.0.1:4433";
const CLIENT: &str = "127.0.0.1:50000";

/// A response's field section: QPACK's prefix with no dynamic table, then
/// `:status 200` from the static table (index 25).
const STATUS_200: [u8; 3] = [0x00, 0x00, 0xc0 | 25];

/// What the test's server does with each request stream volley opens.
#[derive(Clone, Copy, PartialEq)]
enum Play {
    /// A 200 with a five-byte body.
    Answer,
    /// Resets it with H3_REQUEST_REJECTED: never processed.
    Reject,
    /// A DATA frame before any HEADERS.
    DataFirst,
    /// Answers only the first request stream, as a server that has sent
    /// a GOAWAY with a limit of 4 does.
    GoingAway,
}

/// A client [`Machine`] and a quinn-proto server, on one clock.
struct Pair {
    client: Machine,
    server: Endpoint,
    conns: HashMap<ConnectionHandle, Connection>,
    now: Instant,
    play: Play,
    /// Request streams the server has answered or refused, in order.
    served: Vec<StreamId>,
}

fn addr(text: &str) -> SocketAddr {
    text.parse().expect("an address")
}

/// A self-signed certificate for `localhost`, and its key.
fn certificate() -> (CertificateDer<'static>, PrivateKeyDer<'static>) {
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).expect("a certificate");
    let key = PrivateKeyDer::try_from(certified.signing_key.serialize_der()).expect("a key");
    (certified.cert.der().clone(), key)
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A server's QUIC configuration with `cert`: a session of its own, and
/// 0-RTT data taken where `early`.
fn server_config(cert: &CertificateDer<'static>, key: &PrivateKeyDer<'static>, early: bool) -> ServerConfig {
    let mut tls = rustls::ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .expect("TLS 1.3")
        .with_no_client_auth()
        .with_single_cert(vec![cert.clone()], key.clone_key())
        .expect("the server's certificate");
    tls.alpn_protocols = vec![b"h3".to_vec()];
    if early {
        tls.max_early_data_size = u32::MAX;
    }
    let quic = quinn_proto::crypto::rustls::QuicServerConfig::try_from(tls).expect("QUIC over TLS 1.3");
    ServerConfig::with_crypto(Arc::new(quic))
}

/// A client configuration trusting `cert`, offering 0-RTT data when it
/// can resume a session (as `--0rtt` does).
fn client_config(cert: &CertificateDer<'static>) -> ClientConfig {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert.clone()).expect("a root");
    let mut tls = rustls::ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .expect("TLS 1.3")
        .with_root_certificates(roots)
        .with_no_client_auth();
    tls.alpn_protocols = vec![b"h3".to_vec()];
    tls.enable_early_data = true;
    crate::http3::client_config(Arc::new(tls)).expect("a QUIC client configuration")
}

/// The one request every test sends: a GET of `/`.
fn request() -> H3Request {
    let target = Target::parse("https://localhost:4433/").expect("a target");
    let fields = Fields::default();
    let request = Request::to(&target, "GET", b"/", &fields, Overrides::default(), b"");
    H3Request::new(&request).expect("an HTTP/3 request")
}

impl Pair {
    /// A connection with its handshake done.
    fn connected(lanes: usize, play: Play) -> Pair {
        let (cert, key) = certificate();
        let mut pair = Pair::new(
            client_config(&cert),
            server_config(&cert, &key, false),
            lanes,
            play,
        );
        pair.pump();
        assert!(pair.client.connected, "the handshake did not finish");
        pair
    }

    /// A connection whose first datagram is made, to a server of
    /// `server_config`.
    fn new(client_config: ClientConfig, server_config: ServerConfig, lanes: usize, play: Play) -> Pair {
        let now = Instant::now();
        let client = Machine::connect(now, client_config, addr(SERVER), "localhost", lanes, false)
            .expect("the connection starts");
        let server = Endpoint::new(
            Arc::new(EndpointConfig::default()),
            Some(Arc::new(server_config)),
            true,
            None,
        );
        Pair {
            client,
            server,
            conns: HashMap::new(),
            now,
            play,
            served: Vec::new(),
        }
    }

    /// Carries datagrams both ways, and lets the server play its part,
    /// until neither side has anything to send (at most 200 rounds; the
    /// clock moves a millisecond a round, firing timers that fall due).
    fn pump(&mut self) {
        for _ in 0..200 {
            let mut moved = false;
            let mut buf = Vec::new();
            while let Some(transmit) = self.client.quic.poll_transmit(self.now, 10, &mut buf) {
                moved = true;
                let size = transmit.segment_size.unwrap_or(transmit.size);
                for datagram in buf[..transmit.size].chunks(size) {
                    self.deliver_to_server(datagram);
                }
                buf.clear();
            }
            let mut to_client = Vec::new();
            for conn in self.conns.values_mut() {
                while let Some(transmit) = conn.poll_transmit(self.now, 10, &mut buf) {
                    let size = transmit.segment_size.unwrap_or(transmit.size);
                    to_client.extend(buf[..transmit.size].chunks(size).map(<[u8]>::to_vec));
                    buf.clear();
                }
            }
            if !to_client.is_empty() {
                moved = true;
                let checked = self.client.receiving();
                for datagram in to_client {
                    self.client.receive(self.now, None, BytesMut::from(&datagram[..]));
                }
                self.client.received(checked);
            }
            self.serve();
            if !moved {
                return;
            }
            self.now += Duration::from_millis(1);
            self.client.on_timers(self.now);
            for conn in self.conns.values_mut() {
                if conn.poll_timeout().is_some_and(|at| at <= self.now) {
                    conn.handle_timeout(self.now);
                }
            }
        }
        panic!("the connection never went quiet");
    }

    /// Hands the server one datagram from volley.
    fn deliver_to_server(&mut self, datagram: &[u8]) {
        let mut response = Vec::new();
        let event = self.server.handle(
            self.now,
            addr(CLIENT),
            None,
            None,
            BytesMut::from(datagram),
            &mut response,
        );
        match event {
            Some(DatagramEvent::NewConnection(incoming)) => {
                let (handle, conn) = self
                    .server
                    .accept(incoming, self.now, &mut response, None)
                    .expect("the server accepts the connection");
                self.conns.insert(handle, conn);
            }
            Some(DatagramEvent::ConnectionEvent(handle, event)) => {
                if let Some(conn) = self.conns.get_mut(&handle) {
                    conn.handle_event(event);
                }
            }
            _ => {}
        }
    }

    /// The server's side: its endpoint's bookkeeping, and each request
    /// stream answered as `play` says once its request has all come.
    fn serve(&mut self) {
        for (&handle, conn) in &mut self.conns {
            while let Some(event) = conn.poll_endpoint_events() {
                if let Some(event) = self.server.handle_event(handle, event) {
                    conn.handle_event(event);
                }
            }
            while conn.poll().is_some() {}
            while let Some(id) = conn.streams().accept(Dir::Bi) {
                let mut recv = conn.recv_stream(id);
                if let Ok(mut chunks) = recv.read(true) {
                    while let Ok(Some(_)) = chunks.next(usize::MAX) {}
                    let _ = chunks.finalize();
                }
                self.served.push(id);
                answer(conn, id, self.play);
            }
        }
    }

    /// The server's connection (there is one).
    fn server_conn(&mut self) -> &mut Connection {
        self.conns.values_mut().next().expect("a server connection")
    }

    /// Starts lane `lane`'s request.
    fn start(&mut self, lane: usize) -> Opened {
        let waker = std::task::Waker::noop();
        self.client.open_stream(lane, &request(), &mut None, waker)
    }
}

/// Answers request stream `id` as `play` says.
fn answer(conn: &mut Connection, id: StreamId, play: Play) {
    let mut send = conn.send_stream(id);
    match play {
        Play::GoingAway if VarInt::from(id).into_inner() >= 4 => {}
        Play::Answer | Play::GoingAway => {
            let mut bytes = vec![frame::HEADERS as u8, STATUS_200.len() as u8];
            bytes.extend_from_slice(&STATUS_200);
            bytes.extend_from_slice(&[frame::DATA as u8, 5]);
            bytes.extend_from_slice(b"hello");
            send.write(&bytes).expect("the response fits the stream's window");
            send.finish().expect("the stream finishes");
        }
        Play::Reject => {
            let _ = send.reset(VarInt::from_u64(frame::H3_REQUEST_REJECTED).expect("a small code"));
        }
        Play::DataFirst => {
            send.write(&[frame::DATA as u8, 2, b'h', b'i']).expect("room");
            send.finish().expect("the stream finishes");
        }
    }
}

/// The server's control stream: its type, an empty SETTINGS, then
/// `frames`.
fn control_stream(conn: &mut Connection, frames: &[u8]) {
    let id = conn.streams().open(Dir::Uni).expect("a unidirectional stream");
    let mut bytes = vec![frame::CONTROL_STREAM as u8, frame::SETTINGS as u8, 0];
    bytes.extend_from_slice(frames);
    conn.send_stream(id).write(&bytes).expect("room");
}

#[test]
fn a_handshake_is_recorded_once() {
    let mut pair = Pair::connected(1, Play::Answer);
    let handshake = pair
        .client
        .handshake
        .take()
        .expect("the handshake, to be recorded");
    assert!(handshake.took > Duration::ZERO);
    assert_eq!(handshake.zero_rtt, None, "nothing went as early data");
    assert!(pair.client.handshake.is_none());
}

#[test]
fn an_answered_stream_gives_its_status_and_every_byte() {
    let mut pair = Pair::connected(2, Play::Answer);
    assert!(matches!(pair.start(0), Opened::Started));
    assert!(matches!(pair.start(1), Opened::Started));
    pair.pump();
    for lane in 0..2 {
        assert!(pair.client.finished(lane), "lane {lane} never finished");
        let (result, _) = pair.client.finish(lane);
        let head = result.expect("a response");
        assert_eq!(head.status, 200);
        // The HEADERS frame (2 + 3 bytes) and the DATA frame (2 + 5).
        assert_eq!(head.bytes, 12);
    }
    assert_eq!(pair.served.len(), 2);
    assert!(pair.client.accepts_streams());
}

#[test]
fn a_rejected_stream_is_refused_and_the_connection_goes_on() {
    let mut pair = Pair::connected(1, Play::Reject);
    assert!(matches!(pair.start(0), Opened::Started));
    pair.pump();
    let (result, _) = pair.client.finish(0);
    assert!(matches!(result, Err(Failure::Refused)), "{result:?}");
    // A refusal is the stream's, not the connection's: the next goes here.
    assert!(pair.client.accepts_streams());
    pair.play = Play::Answer;
    assert!(matches!(pair.start(0), Opened::Started));
    pair.pump();
    let (result, _) = pair.client.finish(0);
    assert_eq!(result.expect("the second is answered").status, 200);
}

#[test]
fn a_goaway_refuses_the_streams_above_its_limit_and_takes_no_more() {
    let mut pair = Pair::connected(2, Play::GoingAway);
    // Both streams open before the server reads either; its GOAWAY then
    // says it processes only the first (client stream 0).
    let waker = std::task::Waker::noop();
    for lane in 0..2 {
        assert!(matches!(
            pair.client.open_stream(lane, &request(), &mut None, waker),
            Opened::Started
        ));
    }
    control_stream(pair.server_conn(), &[frame::GOAWAY as u8, 1, 4]);
    pair.pump();
    assert!(!pair.client.accepts_streams(), "a GOAWAY takes no more streams");
    let (first, _) = pair.client.finish(0);
    assert_eq!(first.expect("stream 0 is below the limit").status, 200);
    let (second, _) = pair.client.finish(1);
    assert!(matches!(second, Err(Failure::Refused)), "{second:?}");
    assert!(matches!(pair.start(0), Opened::Closed));
}

#[test]
fn a_server_that_opens_a_request_stream_breaks_the_connection() {
    let mut pair = Pair::connected(1, Play::Answer);
    assert!(matches!(pair.start(0), Opened::Started));
    let conn = pair.server_conn();
    let id = conn.streams().open(Dir::Bi).expect("a stream");
    conn.send_stream(id).write(b"x").expect("room");
    pair.pump();
    assert!(pair.client.dead);
    let (result, _) = pair.client.finish(0);
    let Err(Failure::Error(err)) = result else {
        panic!("the stream should fail with the connection: {result:?}");
    };
    assert_eq!(err.kind, ErrorKind::Protocol);
    assert!(err.message().contains("bidirectional"), "{}", err.message());
}

#[test]
fn data_before_headers_fails_the_stream() {
    let mut pair = Pair::connected(1, Play::DataFirst);
    assert!(matches!(pair.start(0), Opened::Started));
    pair.pump();
    let (result, _) = pair.client.finish(0);
    let Err(Failure::Error(err)) = result else {
        panic!("DATA first should fail the stream: {result:?}");
    };
    assert!(err.message().contains("DATA before"), "{}", err.message());
}

#[test]
fn a_control_frame_too_large_closes_the_connection() {
    let mut pair = Pair::connected(1, Play::Answer);
    // A frame of an unknown type is skipped, but a SETTINGS past 64 KiB is
    // refused as it comes.
    let mut frames = vec![frame::SETTINGS as u8];
    frames.extend_from_slice(&[0x80, 0x01, 0x10, 0x00]); // length 69,632
    frames.extend(std::iter::repeat_n(0u8, 69_632));
    control_stream(pair.server_conn(), &frames);
    pair.pump();
    assert!(pair.client.dead);
    let (kind, message) = pair.client.death.clone().expect("why it died");
    assert_eq!(kind, ErrorKind::Protocol);
    assert!(message.contains("control frame too large"), "{message}");
}

#[test]
fn a_cancelled_stream_is_reset_and_the_connection_retired() {
    let mut pair = Pair::connected(1, Play::Answer);
    assert!(matches!(pair.start(0), Opened::Started));
    assert!(pair.client.cancel(0));
    assert!(!pair.client.cancel(0), "nothing left to cancel");
    assert!(!pair.client.accepts_streams(), "a timed-out server may be gone");
}

#[test]
fn a_dead_connection_fails_every_open_stream_with_its_reason() {
    let mut pair = Pair::connected(2, Play::Answer);
    for lane in 0..2 {
        assert!(matches!(pair.start(lane), Opened::Started));
    }
    pair.client
        .transport_failed(io::Error::from(io::ErrorKind::ConnectionRefused));
    for lane in 0..2 {
        let (result, _) = pair.client.finish(lane);
        assert!(matches!(result, Err(Failure::Error(_))), "{result:?}");
    }
    assert!(matches!(pair.start(0), Opened::Closed));
}

#[test]
fn a_request_in_refused_0rtt_data_is_sent_again_once_connected() {
    let (cert, key) = certificate();
    let client = client_config(&cert);
    // A first connection leaves a session ticket that allows early data.
    let mut first = Pair::new(client.clone(), server_config(&cert, &key, true), 1, Play::Answer);
    first.pump();
    assert!(first.client.connected);
    // A server that does not know the session (another one's, or one that
    // forgot it) refuses the early data: the request in it was never
    // processed, and goes again on a stream opened once connected.
    let mut second = Pair::new(client, server_config(&cert, &key, true), 1, Play::Answer);
    assert!(
        second.client.quic.has_0rtt(),
        "the session was resumed with 0-RTT keys"
    );
    second.client.early = true;
    assert!(
        matches!(second.start(0), Opened::Started),
        "a stream in 0-RTT data"
    );
    second.pump();
    let handshake = second.client.handshake.take().expect("the handshake");
    assert_eq!(
        handshake.zero_rtt,
        Some(false),
        "the server refused the early data"
    );
    // The lane, woken, writes its request again on its new stream (as its
    // connection's `drive` does).
    assert!(!second.client.finished(0), "the request waits to go again");
    second.client.send_request(0, &request());
    second.pump();
    let (result, _) = second.client.finish(0);
    assert_eq!(result.expect("sent again, and answered").status, 200);
    assert_eq!(second.served.len(), 1, "the server processed the request once");
}
