//! Which HTTP a run speaks, settled once before it starts.
//!
//! `--http1.1`, `--http2` and `--http3` decide it outright (on http URLs
//! `--http2` is h2c with prior knowledge; `--http3` needs https). Otherwise http URLs speak HTTP/1.1 and https
//! URLs what the server picks by ALPN, learnt from one probe connection
//! before the load starts, so that every connection of the run, and the
//! report, agree on one protocol.

use crate::http1::RequestBytes;
use crate::http2::H2Request;
use crate::http3::H3Request;
use crate::net::{Connector, Stream};
use crate::plan::{HttpVersion, Plan};
use crate::recorder::Recorder;
use crate::target::Target;
use crate::tls::TlsSetup;
use std::cell::RefCell;

/// The protocol driver the request loop uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    Http1,
    Http2,
    Http3,
}

/// What a run prepares for the protocol it speaks, once, before it starts:
/// its one request, encoded as that protocol sends it (and only so).
pub enum Prepared {
    /// The request's bytes, a pipelined round of them.
    Http1(RequestBytes),
    /// The request's HPACK block and body.
    Http2(H2Request),
    /// The request's frames, and QUIC's client configuration (TLS
    /// included) every connection of the run is opened with.
    Http3 {
        request: H3Request,
        quic: quinn_proto::ClientConfig,
    },
}

/// A run's protocol and the TLS setup that offers it.
pub struct Settled {
    pub protocol: Protocol,
    pub tls: Option<TlsSetup>,
    /// As reports name it: `http/1.1`, `h2`, `h2c` or `h3`.
    pub name: &'static str,
}

const ALPN_HTTP1: &[u8] = b"http/1.1";
const ALPN_H2: &[u8] = b"h2";

/// Why the run cannot speak the protocol asked of it.
#[derive(Debug, thiserror::Error)]
pub enum ProtocolError {
    #[error(transparent)]
    Tls(#[from] crate::tls::TlsError),
    #[error("cannot start a runtime")]
    Runtime(#[source] std::io::Error),
    /// The target's origin and why the probe failed.
    #[error("--streams needs HTTP/2, but the probe connection to {0} failed: {1}")]
    ProbeFailed(String, String),
    #[error("--streams needs HTTP/2, but {0} chose HTTP/1.1 in the TLS handshake")]
    ChoseHttp1(String),
    #[error("--streams needs HTTP/2: add --http2 (h2c on http URLs)")]
    NeedsHttp2,
    #[error("--http3 needs an https:// URL: HTTP/3 runs over QUIC, which is always encrypted")]
    Http3NeedsHttps,
    #[error(transparent)]
    Quic(#[from] crate::http3::NoQuic),
}

pub fn settle(plan: &Plan, target: &Target) -> Result<Settled, ProtocolError> {
    // Built once (it reads the system's roots); the run's own offers only
    // the protocol settled on.
    let offering_both = match target.tls {
        true => Some(TlsSetup::new(
            target,
            &plan.transport.tls,
            &[ALPN_H2, ALPN_HTTP1],
        )?),
        false => None,
    };
    if plan.transport.http == HttpVersion::Http3 && !target.tls {
        return Err(ProtocolError::Http3NeedsHttps);
    }
    let (protocol, probe_failed) = match (plan.transport.http, &offering_both) {
        (HttpVersion::Http1, _) | (HttpVersion::Auto, None) => (Protocol::Http1, None),
        (HttpVersion::Http2, _) => (Protocol::Http2, None),
        (HttpVersion::Http3, _) => (Protocol::Http3, None),
        (HttpVersion::Auto, Some(tls)) => probe(plan, target, tls.clone())?,
    };
    if protocol == Protocol::Http1 && plan.transport.streams > 1 {
        return Err(match (plan.transport.http, target.tls, probe_failed) {
            (HttpVersion::Auto, true, Some(why)) => ProtocolError::ProbeFailed(target.origin.clone(), why),
            (HttpVersion::Auto, true, None) => ProtocolError::ChoseHttp1(target.origin.clone()),
            _ => ProtocolError::NeedsHttp2,
        });
    }
    let alpn = match protocol {
        Protocol::Http1 => ALPN_HTTP1,
        Protocol::Http2 => ALPN_H2,
        Protocol::Http3 => crate::http3::ALPN,
    };
    let tls = offering_both.map(|tls| tls.with_alpn(&[alpn]));
    let name = match (protocol, target.tls) {
        (Protocol::Http1, _) => "http/1.1",
        (Protocol::Http2, true) => "h2",
        (Protocol::Http2, false) => "h2c",
        (Protocol::Http3, _) => "h3",
    };
    Ok(Settled { protocol, tls, name })
}

/// Offers both by ALPN on one connection and keeps the server's choice;
/// a target that cannot be reached is left to the run to report, but the
/// probe's own error is returned beside HTTP/1.1 so a message that depends
/// on the choice can name the real cause.
fn probe(plan: &Plan, target: &Target, tls: TlsSetup) -> Result<(Protocol, Option<String>), ProtocolError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(ProtocolError::Runtime)?;
    let connector = Connector::new(target, Some(tls), plan.transport.connect_timeout);
    // The probe's handshake is not part of the run's figures.
    let unrecorded = RefCell::new(Recorder::with_steps(0));
    let chosen = runtime.block_on(async {
        match connector.connect(&unrecorded).await {
            Ok(Stream::Tls(stream)) if stream.get_ref().1.alpn_protocol() == Some(ALPN_H2) => Ok(true),
            Ok(_) => Ok(false),
            Err(err) => Err(err.message()),
        }
    });
    Ok(match chosen {
        Ok(true) => (Protocol::Http2, None),
        Ok(false) => (Protocol::Http1, None),
        Err(why) => (Protocol::Http1, Some(why)),
    })
}
