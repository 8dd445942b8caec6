//! HTTP/3 for the embedded target server (`volley serve --tls --http3`):
//! QUIC on the UDP port of the same number as the TCP listener's, with the
//! same certificate, answering through the same endpoints (the TCP
//! listener's responses advertise it in `Alt-Svc`).
//!
//! quinn runs QUIC and the `h3` crate HTTP/3 (this is the test target, not
//! the load generator, so well-kept crates do it all). Each connection is
//! a task and each request stream a task of its own, as over HTTP/2, with
//! the same counting, in-flight slots and `/pause`. The fault endpoints
//! mean what they can over QUIC:
//! - `/drop` closes the connection at once (CONNECTION_CLOSE with
//!   H3_INTERNAL_ERROR): every stream on it fails;
//! - `/garbage` closes it as a peer that met a malformed frame would
//!   (H3_FRAME_ERROR);
//! - `/stall` never answers its stream; the connection's other streams go
//!   on.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

use bytes::{Buf, Bytes};
use h3::server::RequestStream;
use http::header::CONTENT_LENGTH;
use tokio::task::JoinSet;

use super::reply::{self, Answer, Body, Reply, SLOW_BODY};
use super::request::{MAX_BODY, ParseError};
use super::routes;
use super::{Shared, h2::response_head};

type Stream = RequestStream<h3_quinn::BidiStream<Bytes>, Bytes>;

/// HTTP/3 error codes the faults close with (RFC 9114 8.1).
const H3_INTERNAL_ERROR: u32 = 0x102;
const H3_FRAME_ERROR: u32 = 0x106;

/// The endpoint's configuration: its stateless-reset key (and the key its
/// connection ids are checked with) is derived from the address it serves, so a server that crashes and comes back on the
/// same address answers its lost connections' packets with resets the
/// clients accept (as a production server does with a key it keeps); a
/// fresh random key would make them wait out their idle timeout instead.
/// The target serves tests and demos on this machine, where such a key
/// protects nothing.
pub(super) fn endpoint_config(addr: std::net::SocketAddr) -> quinn::EndpointConfig {
    let seed = format!("volley serve stateless reset key for {addr}");
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, seed.as_bytes());
    let mut config = quinn::EndpointConfig::new(Arc::new(key));
    // Connection ids the next server on this address still recognises as
    // its own (it answers only those with a reset): their check key comes
    // from the address too.
    let cid_key = ring::digest::digest(&ring::digest::SHA256, seed.as_bytes());
    let cid_key = u64::from_le_bytes(cid_key.as_ref()[..8].try_into().expect("8 bytes"));
    config.cid_generator(move || Box::new(quinn_proto::HashedConnectionIdGenerator::from_key(cid_key)));
    config
}

/// A QUIC server configuration for `tls`'s certificate, offering `h3`.
pub(super) fn server_config(tls: &super::tls::Tls) -> std::io::Result<quinn::ServerConfig> {
    let mut config = tls.rustls_config(&[b"h3"])?;
    config.max_early_data_size = u32::MAX;
    let quic = quinn::crypto::rustls::QuicServerConfig::try_from(config)
        .map_err(|e| std::io::Error::other(format!("cannot set up QUIC: {e}")))?;
    let mut server = quinn::ServerConfig::with_crypto(Arc::new(quic));
    let mut transport = quinn::TransportConfig::default();
    // Many streams per connection, as a load test's client opens them.
    transport.max_concurrent_bidi_streams(quinn::VarInt::from_u32(256));
    transport.stream_receive_window(quinn::VarInt::from_u32(2 * 1024 * 1024));
    server.transport_config(Arc::new(transport));
    Ok(server)
}

/// Accepts QUIC connections on `endpoint` until it is closed.
pub(super) async fn serve(endpoint: quinn::Endpoint, shared: Arc<Shared>) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            incoming = endpoint.accept() => match incoming {
                Some(incoming) => {
                    connections.spawn(connection(incoming, Arc::clone(&shared)));
                }
                None => break,
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    connections.shutdown().await;
}

async fn connection(incoming: quinn::Incoming, shared: Arc<Shared>) {
    let Ok(quic) = incoming.await else {
        return;
    };
    shared.connections_accepted.fetch_add(1, Relaxed);
    shared.h3_connections.fetch_add(1, Relaxed);
    let closer = quic.clone();
    if let Ok(mut h3) = h3::server::builder()
        .build::<_, Bytes>(h3_quinn::Connection::new(quic))
        .await
    {
        let mut streams = JoinSet::new();
        loop {
            tokio::select! {
                accepted = h3.accept() => match accepted {
                    Ok(Some(resolver)) => {
                        let (shared, closer) = (Arc::clone(&shared), closer.clone());
                        streams.spawn(async move {
                            if let Ok((request, stream)) = resolver.resolve_request().await {
                                answer(request, stream, &shared, &closer).await;
                            }
                        });
                    }
                    Ok(None) | Err(_) => break,
                },
                Some(_) = streams.join_next(), if !streams.is_empty() => {}
            }
        }
        streams.shutdown().await;
    }
    shared.connections_closed.fetch_add(1, Relaxed);
}

/// Answers one request stream.
async fn answer(
    request: http::Request<()>,
    mut stream: Stream,
    shared: &Arc<Shared>,
    quic: &quinn::Connection,
) {
    let (head, ()) = request.into_parts();
    let body = match read_body(&mut stream, &head.headers).await {
        Ok(body) => body,
        Err(Some(e)) => {
            let _ = send(&mut stream, routes::refusal(e), false, shared).await;
            return;
        }
        Err(None) => return,
    };
    let answered = routes::answer_parsed(&head, &body, shared).await;
    match answered.answer {
        Answer::Reply(reply) => {
            if send(&mut stream, reply, answered.head_only, shared).await.is_ok() {
                shared.requests_completed.fetch_add(1, Relaxed);
            }
        }
        Answer::Drop => {
            shared.pause.hold().await;
            quic.close(quinn::VarInt::from_u32(H3_INTERNAL_ERROR), b"dropped");
        }
        Answer::Garbage => {
            shared.pause.hold().await;
            quic.close(quinn::VarInt::from_u32(H3_FRAME_ERROR), b"garbage");
        }
        // Held until the connection goes.
        Answer::Stall => {
            quic.closed().await;
        }
    }
}

/// Reads a request body whole: `Err(Some(_))` when it is too large (the
/// request is answered, not counted), `Err(None)` when the stream failed.
async fn read_body(stream: &mut Stream, headers: &http::HeaderMap) -> Result<Vec<u8>, Option<ParseError>> {
    let declared = headers
        .get(CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|len| len > MAX_BODY as u64) {
        return Err(Some(ParseError::BodyTooLarge));
    }
    let mut all = Vec::new();
    while let Some(mut data) = stream.recv_data().await.map_err(|_| None)? {
        if all.len() + data.remaining() > MAX_BODY {
            return Err(Some(ParseError::BodyTooLarge));
        }
        while data.has_remaining() {
            let chunk = data.chunk();
            all.extend_from_slice(chunk);
            let n = chunk.len();
            data.advance(n);
        }
    }
    Ok(all)
}

/// Writes `reply` on its stream, the head after any pause, then the body.
async fn send(stream: &mut Stream, reply: Reply<'_>, head_only: bool, shared: &Shared) -> Result<(), ()> {
    let head = response_head(&reply);
    let has_body = reply.sends_body(head_only) && reply.body.len() > 0;
    shared.pause.hold().await;
    stream.send_response(head).await.map_err(drop)?;
    if has_body {
        match reply.body {
            Body::Static(bytes) => send_data(stream, Bytes::from_static(bytes), shared).await?,
            Body::Owned(bytes) => send_data(stream, Bytes::from(bytes), shared).await?,
            Body::Borrowed(bytes) => send_data(stream, Bytes::copy_from_slice(bytes), shared).await?,
            Body::Fill(n) => {
                for piece in reply::fill(n) {
                    send_data(stream, Bytes::from_static(piece), shared).await?;
                }
            }
            Body::Drip(total) => {
                for (sent, (due, byte)) in (1..).zip(reply::drip(tokio::time::Instant::now(), total)) {
                    tokio::time::sleep_until(due).await;
                    send_data(stream, Bytes::from_static(byte), shared).await?;
                    if sent == SLOW_BODY.len() {
                        break;
                    }
                }
            }
        }
    }
    stream.finish().await.map_err(drop)
}

async fn send_data(stream: &mut Stream, data: Bytes, shared: &Shared) -> Result<(), ()> {
    shared.pause.hold().await;
    stream.send_data(data).await.map_err(drop)
}
