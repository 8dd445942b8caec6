//! HTTP/2 connections of the embedded target server: by prior knowledge on
//! the plain listener (h2c), or chosen by ALPN over TLS.
//!
//! The `h2` crate does the framing, HPACK and flow control. This module runs
//! each request stream through the same endpoints as HTTP/1.1
//! (`routes::answer`) and writes what they answer as HTTP/2 frames, with the
//! same counting, in-flight slots and `/pause`. Each stream is a task of its
//! own, so the streams of one connection are served concurrently, as an
//! HTTP/2 client expects.
//!
//! The fault endpoints keep their meaning as well as HTTP/2 allows:
//! - `/drop` closes the connection abruptly: no GOAWAY, no RST_STREAM, no
//!   TLS close_notify, and frames not yet written are lost. Every stream on
//!   it fails, as every request on a dropped HTTP/1.1 connection would.
//! - `/garbage` writes bytes that are no HTTP/2 frame on the connection,
//!   then closes it: the client's frame decoder fails, the HTTP/2 version of
//!   a response that is not HTTP.
//! - `/stall` never answers its stream, while the connection's other
//!   streams go on; its task ends only when the client resets the stream or
//!   the connection closes. (Holding the whole connection is what `/pause`
//!   is for.)

use std::future::poll_fn;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

use bytes::Bytes;
// `::h2` is the crate, not this module.
use ::h2::server::{Builder, SendResponse};
use ::h2::{Reason, RecvStream, SendStream};
use http::header::{ALT_SVC, CONTENT_LENGTH, CONTENT_TYPE, HeaderName, HeaderValue, SERVER};
use tokio::io::AsyncWriteExt as _;
use tokio::task::JoinSet;

use super::reply::{self, Answer, Body, GARBAGE, Reply, SLOW_BODY, is_bodiless};
use super::request::{MAX_BODY, ParseError};
use super::routes;
use super::{Io, Shared};

/// Streams a client may have open at once on one connection, advertised in
/// SETTINGS_MAX_CONCURRENT_STREAMS. A load tester multiplexing requests
/// should find the connection's limit well above its usual concurrency.
const MAX_CONCURRENT_STREAMS: u32 = 256;
/// Flow-control windows for what clients send: the protocol's 64 KiB
/// default would make an upload to `/echo` wait a round trip per 64 KiB.
const STREAM_WINDOW: u32 = 1024 * 1024;
const CONNECTION_WINDOW: u32 = 16 * 1024 * 1024;

/// A fault endpoint's demand to end the connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fault {
    /// `/drop`: close it abruptly.
    Drop,
    /// `/garbage`: bytes that are not HTTP/2, then a close.
    Garbage,
}

/// How a stream's task ended: `None` when answered (or given up on), a
/// fault when one asks to end the connection. The fault's stream handle
/// comes with it and is kept until the connection is gone: dropping it
/// would reset the stream (RST_STREAM), a clean HTTP/2 answer the fault
/// must not give.
type Ending = Option<(Fault, SendResponse<Bytes>)>;

/// Serves HTTP/2 on `io`, which must start with the client's preface,
/// until the client goes away or a fault endpoint ends the connection.
pub(super) async fn serve(mut io: impl Io, shared: Arc<Shared>) {
    // The HTTP/2 connection only borrows `io`, so that a fault can take the
    // socket back from it.
    let Some((fault, _stream)) = run(&mut io, &shared).await else {
        return;
    };
    // Ending a connection answers a request too, so it waits out a pause
    // like any response.
    shared.pause.hold().await;
    if fault == Fault::Garbage {
        let _ = io.write_all(GARBAGE).await;
        let _ = io.shutdown().await;
    }
    // Dropping `io` closes the socket.
}

/// Runs the HTTP/2 connection until it closes or a stream asks for a fault.
/// Returning drops the connection, unpolled, so nothing more is written,
/// and aborts the streams still running.
async fn run(io: &mut impl Io, shared: &Arc<Shared>) -> Ending {
    let handshake = Builder::new()
        .max_concurrent_streams(MAX_CONCURRENT_STREAMS)
        .initial_window_size(STREAM_WINDOW)
        .initial_connection_window_size(CONNECTION_WINDOW)
        .handshake::<_, Bytes>(io);
    let Ok(mut connection) = handshake.await else {
        return None;
    };
    let mut streams = JoinSet::new();
    loop {
        tokio::select! {
            // Accepting also drives the connection: it reads frames and
            // writes what the streams send.
            accepted = connection.accept() => match accepted {
                Some(Ok((request, respond))) => {
                    streams.spawn(stream(request, respond, Arc::clone(shared)));
                }
                Some(Err(_)) | None => return None,
            },
            Some(ended) = streams.join_next(), if !streams.is_empty() => {
                if let Ok(fault @ Some(_)) = ended {
                    return fault;
                }
            }
        }
    }
}

/// Answers one request stream.
async fn stream(
    request: http::Request<RecvStream>,
    mut respond: SendResponse<Bytes>,
    shared: Arc<Shared>,
) -> Ending {
    let (head, mut body) = request.into_parts();
    let body = match read_body(&mut body, &head.headers).await {
        Ok(body) => body,
        Err(BodyError::TooLarge) => {
            let reply = routes::refusal(ParseError::BodyTooLarge);
            let _ = send(&mut respond, reply, false, &shared).await;
            return None;
        }
        Err(BodyError::Gone) => return None,
    };
    let answered = routes::answer_parsed(&head, &body, &shared).await;
    match answered.answer {
        Answer::Reply(reply) => {
            if send(&mut respond, reply, answered.head_only, &shared)
                .await
                .is_ok()
            {
                shared.requests_completed.fetch_add(1, Relaxed);
            }
            None
        }
        Answer::Drop => Some((Fault::Drop, respond)),
        Answer::Garbage => Some((Fault::Garbage, respond)),
        Answer::Stall => {
            let _ = poll_fn(|cx| respond.poll_reset(cx)).await;
            None
        }
    }
}

enum BodyError {
    /// Larger than the server accepts.
    TooLarge,
    /// The stream was reset or the connection failed.
    Gone,
}

/// Reads a request body whole, giving the flow-control window back as it
/// goes so the client can keep sending.
async fn read_body(body: &mut RecvStream, headers: &http::HeaderMap) -> Result<Vec<u8>, BodyError> {
    let declared = headers
        .get(CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|len| len > MAX_BODY as u64) {
        return Err(BodyError::TooLarge);
    }
    let mut all = Vec::new();
    while let Some(data) = body.data().await {
        let data = data.map_err(|_| BodyError::Gone)?;
        let _ = body.flow_control().release_capacity(data.len());
        if all.len() + data.len() > MAX_BODY {
            return Err(BodyError::TooLarge);
        }
        all.extend_from_slice(&data);
    }
    Ok(all)
}

/// Writes `reply` on its stream: the head after any pause, then the body
/// as flow control lets it through. `Err` means the stream or connection
/// went away first.
async fn send(
    respond: &mut SendResponse<Bytes>,
    reply: Reply<'_>,
    head_only: bool,
    shared: &Shared,
) -> Result<(), ::h2::Error> {
    let mut head = response_head(&reply);
    // Serving HTTP/3 too, the server says so, as over HTTP/1.1.
    if let Some(alt_svc) = shared.alt_svc.get() {
        head.headers_mut().insert(ALT_SVC, alt_svc.clone());
    }
    let has_body = reply.sends_body(head_only) && reply.body.len() > 0;
    shared.pause.hold().await;
    let mut stream = respond.send_response(head, !has_body)?;
    if has_body {
        send_body(&mut stream, reply.body, shared).await?;
    }
    Ok(())
}

/// The head of `reply` as `http` types (HTTP/2's and HTTP/3's): its
/// status, `server`, and for a response with a body its type and length.
pub(super) fn response_head(reply: &Reply<'_>) -> http::Response<()> {
    let mut head = http::Response::new(());
    *head.status_mut() =
        http::StatusCode::from_u16(reply.status).unwrap_or(http::StatusCode::INTERNAL_SERVER_ERROR);
    let fields = head.headers_mut();
    fields.insert(SERVER, HeaderValue::from_static("volley"));
    if !is_bodiless(reply.status) {
        // A content type copied from a request (`/echo`) that is no valid
        // field value is left out, as is any such field below.
        if let Some(value) = reply.content_type.and_then(|ct| HeaderValue::from_bytes(ct).ok()) {
            fields.insert(CONTENT_TYPE, value);
        }
        fields.insert(CONTENT_LENGTH, HeaderValue::from(reply.body.len()));
    }
    for (name, value) in &reply.fields {
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(value),
        ) {
            fields.append(name, value);
        }
    }
    head
}

async fn send_body(
    stream: &mut SendStream<Bytes>,
    body: Body<'_>,
    shared: &Shared,
) -> Result<(), ::h2::Error> {
    match body {
        Body::Static(bytes) => send_data(stream, Bytes::from_static(bytes), true, shared).await,
        Body::Owned(bytes) => send_data(stream, Bytes::from(bytes), true, shared).await,
        Body::Borrowed(bytes) => send_data(stream, Bytes::copy_from_slice(bytes), true, shared).await,
        Body::Fill(n) => {
            let mut pieces = reply::fill(n).peekable();
            while let Some(piece) = pieces.next() {
                let last = pieces.peek().is_none();
                send_data(stream, Bytes::from_static(piece), last, shared).await?;
            }
            Ok(())
        }
        Body::Drip(total) => {
            for (sent, (due, byte)) in (1..).zip(reply::drip(tokio::time::Instant::now(), total)) {
                tokio::time::sleep_until(due).await;
                let last = sent == SLOW_BODY.len();
                send_data(stream, Bytes::from_static(byte), last, shared).await?;
            }
            Ok(())
        }
    }
}

/// Sends `data` in frames as the stream's flow-control window allows, each
/// after any pause; `last` ends the stream with the last frame. Waiting for
/// the window rather than handing `h2` everything at once keeps a large
/// body from being buffered whole.
async fn send_data(
    stream: &mut SendStream<Bytes>,
    mut data: Bytes,
    last: bool,
    shared: &Shared,
) -> Result<(), ::h2::Error> {
    while !data.is_empty() {
        stream.reserve_capacity(data.len());
        let granted = match poll_fn(|cx| stream.poll_capacity(cx)).await {
            Some(granted) => granted?,
            // The stream is closed for sending: reset by the client.
            None => return Err(Reason::STREAM_CLOSED.into()),
        };
        let frame = data.split_to(granted.min(data.len()));
        shared.pause.hold().await;
        stream.send_data(frame, last && data.is_empty())?;
    }
    Ok(())
}
