//! Where an HTTP/1.1 response's body bytes go while it is read: into the
//! worker's [`BodySink`] or a plan's [`Capture`].

use crate::response::{BodySink, Capture, MAX_KEPT_BODY, SINK_SIZE};
use crate::sample::RequestError;
use tokio::io::{AsyncRead, AsyncReadExt};

/// Where body bytes go: dropped into the sink, or kept (up to the cap;
/// the rest goes to the sink).
pub(super) enum BodyDest<'a> {
    Sink(&'a BodySink),
    Keep(&'a mut Capture, &'a BodySink),
}

impl BodyDest<'_> {
    /// Takes buffered body bytes.
    pub(super) fn take(&mut self, bytes: &[u8]) {
        if let BodyDest::Keep(capture, _) = self {
            capture.keep_body(bytes);
        }
    }

    /// Reads at most `max` more body bytes from the stream; 0 at its end.
    pub(super) async fn read<S: AsyncRead + Unpin>(
        &mut self,
        stream: &mut S,
        max: u64,
    ) -> Result<usize, RequestError> {
        match self {
            BodyDest::Sink(sink) => sink.discard(stream, max).await,
            BodyDest::Keep(capture, sink) => {
                let room = MAX_KEPT_BODY - capture.body.len().min(MAX_KEPT_BODY);
                if capture.overflowed || room == 0 {
                    let got = sink.discard(stream, max).await?;
                    capture.overflowed |= got > 0;
                    return Ok(got);
                }
                let out = &mut capture.body;
                let want = usize::try_from(max)
                    .unwrap_or(usize::MAX)
                    .min(SINK_SIZE)
                    .min(room);
                let old = out.len();
                out.resize(old + want, 0);
                let got = stream.read(&mut out[old..]).await.map_err(RequestError::from_io);
                out.truncate(old + *got.as_ref().unwrap_or(&0));
                got
            }
        }
    }
}
