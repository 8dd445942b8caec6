//! Entry points for the fuzz targets in `fuzz/` (cargo-fuzz): each takes
//! arbitrary bytes and runs one parser or state machine over them the way
//! a run would. Not part of volley's API; hidden from its documentation.
//!
//! A target passes when these return at all: any panic, hang or memory
//! blow-up is a finding.

use crate::http1::ResponseReader;
use crate::http1::response::KnownHead;
use crate::http2::H2Request;
use crate::net::{Stream, Transport};
use crate::request::{Fields, Request};
use crate::response::BodySink;
use crate::scenario::template::{Names, RenderError, Scope, Template, VarRef};
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, ReadBuf};

/// Hands out the input `piece` bytes per read, then the end of stream.
struct Pieces<'a> {
    rest: &'a [u8],
    piece: usize,
}

impl AsyncRead for Pieces<'_> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let n = self.piece.min(self.rest.len()).min(buf.remaining());
        buf.put_slice(&self.rest[..n]);
        self.rest = &self.rest[n..];
        Poll::Ready(Ok(()))
    }
}

thread_local! {
    static RUNTIME: tokio::runtime::Runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a fuzzing runtime");
    static LISTENER: std::net::TcpListener =
        std::net::TcpListener::bind("127.0.0.1:0").expect("a loopback listener for the fuzz targets");
}

/// The first input byte picks the read size (1 to 256 bytes, so split
/// heads and chunk lines are tried), the rest is what a server sent.
fn split(data: &[u8]) -> (usize, &[u8]) {
    match data.split_first() {
        Some((first, rest)) => (usize::from(*first) + 1, rest),
        None => (1, data),
    }
}

/// HTTP/1.1 responses, read one after another from one connection (as
/// pipelining does) until the input ends or fails to parse; every fourth
/// read size answers a HEAD request. Where volley's head scanner takes the
/// input's first head, httparse must read it the same way; and the
/// responses read with the worker's last head remembered must be those
/// read without.
pub fn http1_responses(data: &[u8]) {
    let (piece, rest) = split(data);
    let head_request = piece % 4 == 0;
    assert!(
        crate::http1::response::scanner_agrees_with_httparse(rest, head_request),
        "volley's head scanner and httparse read a head differently"
    );
    let read_all = |remember: bool| {
        let mut stream = Pieces { rest, piece };
        let mut reader = ResponseReader::default();
        let (sink, known) = (BodySink::default(), KnownHead::default());
        let mut heads = Vec::new();
        RUNTIME.with(|rt| {
            rt.block_on(async {
                loop {
                    let fresh = KnownHead::default();
                    let known = if remember { &known } else { &fresh };
                    let read = reader
                        .read_response(&mut stream, &sink, known, head_request)
                        .await;
                    heads.push(read.as_ref().map_err(|e| e.message()).cloned());
                    if read.is_err() {
                        break;
                    }
                }
            })
        });
        heads
    };
    assert_eq!(
        read_all(true),
        read_all(false),
        "remembering the last head changed a response"
    );
    // Read in place (as from a ring's buffer) only what the fast path's
    // poll reads whole from its own buffer, and the same way.
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    let mut copying = ResponseReader::default();
    let copied =
        match copying.poll_whole_response(&mut &rest[..], &mut cx, head_request, &KnownHead::default()) {
            std::task::Poll::Ready(Ok(Some(head))) => Some(head),
            _ => None,
        };
    let in_place =
        ResponseReader::default().whole_response_in_place(rest, head_request, &KnownHead::default());
    assert_eq!(in_place, copied, "a response read in place differs from its copy");
}

/// An HTTP/2 connection (two streams, a request with a body) fed the input
/// as the server's bytes after the preface.
pub fn http2_server_bytes(data: &[u8]) {
    let (piece, rest) = split(data);
    let fields = Fields::default();
    let request = H2Request::new(&Request {
        method: "POST",
        https: false,
        authority: "fuzz.test",
        path: b"/fuzz",
        url_auth: None,
        fields: &fields,
        overrides: Default::default(),
        body: b"hello",
    })
    .expect("a valid request");
    let io = RUNTIME.with(|rt| {
        let _entered = rt.enter();
        LISTENER.with(|listener| {
            let client = std::net::TcpStream::connect(listener.local_addr().expect("bound"))
                .expect("loopback connect");
            drop(listener.accept().expect("loopback accept"));
            client.set_nonblocking(true).expect("non-blocking socket");
            tokio::net::TcpStream::from_std(client).expect("a tokio socket")
        })
    });
    crate::http2::conn::feed_server_bytes(Stream::Plain(Transport::Epoll(io)), &request, rest, piece * 64);
}

/// HPACK header blocks: the input split at 0xff bytes into blocks, each
/// decoded as many times as its first byte says (a server repeating its
/// block) by two decoders, so the dynamic table carries over: one decodes
/// every field, the other only `:status`, as volley does, answering
/// repeated blocks from memory. Both must give the same statuses and
/// tables.
pub fn hpack_blocks(data: &[u8]) {
    use crate::http2::hpack::Decoder;
    let (mut whole, mut status_only) = (Decoder::default(), Decoder::default());
    for chunk in data.split(|b| *b == 0xff) {
        let Some((times, block)) = chunk.split_first() else {
            continue;
        };
        for _ in 0..=times % 32 {
            let (mut expected, mut statuses) = (Vec::new(), Vec::new());
            let decoded = whole.decode(block, true, |n, v| {
                if n == b":status" {
                    expected.push(v.to_vec());
                }
            });
            let decoded_alone = status_only.decode(block, false, |_, v| statuses.push(v.to_vec()));
            // Values skipped undecoded are not checked: only the decoder
            // reading everything may fail on a bad Huffman string.
            assert!(
                decoded.is_err() || decoded_alone.is_ok(),
                "only the status decoder failed"
            );
            if decoded.is_err() {
                return;
            }
            assert_eq!(expected, statuses, "the two decoders read other statuses");
            assert!(
                whole.table_fields().eq(status_only.table_fields()),
                "the tables differ"
            );
        }
    }
}

/// An HTTP/3 response stream's bytes (frames, QPACK field sections,
/// bodies) read as they arrive, in pieces of the size the first byte picks;
/// odd sizes read with a plan's capture of headers and body.
pub fn http3_stream(data: &[u8]) {
    let (piece, rest) = split(data);
    crate::http3::feed_response_stream(rest, piece, piece % 2 == 1);
}

/// QPACK field sections: the input decoded as one response's section,
/// every field handed over.
pub fn qpack_section(data: &[u8]) {
    let (mut name, mut value) = (Vec::new(), Vec::new());
    let mut fields = 0usize;
    let _ = crate::http3::qpack::decode_response(data, true, &mut name, &mut value, |_, _| fields += 1);
}

/// A plan file, loaded as `volley run --plan` loads it (from a file in a
/// private temporary folder, so its includes resolve there).
pub fn plan_file(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if crate::scenario::file::parse(std::path::Path::new("fuzz.yml"), text).is_err() {
        return;
    }
    thread_local! {
        static DIR: ScratchDir = ScratchDir::new();
    }
    DIR.with(|dir| {
        let path = dir.0.join("plan.yml");
        if std::fs::write(&path, text).is_ok() {
            let _ = crate::scenario::load(&path, &Default::default(), None);
        }
    });
}

/// A thread's folder for plan files, removed with the thread (a test's
/// thread; fuzz/run.sh gives libFuzzer's process, which exits without
/// running its main thread's destructors, a temporary folder of its own).
struct ScratchDir(std::path::PathBuf);

impl ScratchDir {
    fn new() -> ScratchDir {
        static MADE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let nth = MADE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("volley-fuzz-{}-{nth}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a temporary folder for plan files");
        ScratchDir(dir)
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Names known to a template: `prev` (an earlier response), a base URL and
/// `with_items` values.
struct FuzzNames;

impl Names for FuzzNames {
    fn var(&self, name: &str) -> Option<usize> {
        (name == "prev").then_some(0)
    }
    fn base(&self) -> Option<&str> {
        Some("http://127.0.0.1:1")
    }
    fn has_items(&self) -> bool {
        true
    }
}

/// Every reference renders as the same JSON document.
struct FuzzScope(serde_json::Value);

impl Scope for FuzzScope {
    fn write(&self, var: &VarRef, out: &mut Vec<u8>) -> Result<(), RenderError> {
        let value = crate::scenario::template::json_path(&self.0, &var.path)
            .ok_or_else(|| RenderError::NoValue(var.text.clone()))?;
        crate::scenario::template::write_value(value, out);
        Ok(())
    }
}

/// A template: compiled, then rendered.
pub fn template(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(template) = Template::compile(text, &FuzzNames) {
        let scope = FuzzScope(serde_json::json!({"id": 7, "items": [1, "two", {"three": 3}], "s": "x"}));
        let mut out = Vec::new();
        let _ = template.render(&scope, &mut out);
    }
}

/// The criteria parsers of the command line: `--threshold` (one
/// criterion), `--slo` (a comma list), `--stages` and `--status`.
pub fn cli_criteria(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = crate::slo::parse_criterion(text);
    let _ = crate::slo::parse_criteria(text);
    let _ = crate::shape::parse_stages(text);
    let _ = crate::plan::StatusSet::parse(text);
}
