//! volley's own HTTP/3 client (RFC 9114), used by the request loop in
//! place of HTTP/2's when a run is given `--http3`.
//!
//! QUIC itself is quinn-proto's state machine, which does no I/O: each
//! connection has a connected UDP socket of its own, driven by the worker
//! that owns it (on its io_uring ring, or through epoll with GSO and GRO
//! where the kernel has them: `udp`), in the same shape as volley's HTTP/2: no connection task, streams read
//! by whichever lane is waiting, datagrams sent at the worker's flush. The
//! HTTP/3 framing and QPACK are written here, as HPACK is for HTTP/2: the
//! request is encoded once before the run, and only `:status` is decoded
//! from a response unless a plan keeps its headers.
//!
//! Layout: `frame` reads and writes frames and varints; `qpack` encodes
//! requests and decodes responses' field sections; `request` encodes a
//! [`crate::request::Request`]; `udp` is a connection's socket; `conn` is
//! one QUIC connection and its streams; `home` shares connections among a worker's request loops.

mod conn;
pub(crate) mod frame;
mod home;
mod machine;
pub(crate) mod qpack;
mod request;
mod udp;

pub use conn::Conn;
pub use home::{Dialer, H3Lane, Home};
pub use machine::feed_response_stream;
pub use request::H3Request;

/// The ALPN protocol id of HTTP/3.
pub const ALPN: &[u8] = b"h3";

/// Why TLS's configuration cannot carry QUIC (it does not offer TLS 1.3,
/// or its cipher suites lack QUIC's initial one).
#[derive(Debug, thiserror::Error)]
#[error("TLS cannot run QUIC: {0}")]
pub struct NoQuic(#[from] quinn_proto::crypto::rustls::NoInitialCipherSuite);

/// A QUIC client configuration over `tls` (TLS 1.3 is required; ALPN
/// must offer `h3`).
pub fn client_config(tls: std::sync::Arc<rustls::ClientConfig>) -> Result<quinn_proto::ClientConfig, NoQuic> {
    let quic = quinn_proto::crypto::rustls::QuicClientConfig::try_from(tls)?;
    let mut config = quinn_proto::ClientConfig::new(std::sync::Arc::new(quic));
    let mut transport = quinn_proto::TransportConfig::default();
    // Responses of a load test are read as they come: windows large enough
    // that flow control never holds one back on a fast link.
    transport.stream_receive_window(quinn_proto::VarInt::from_u32(4 * 1024 * 1024));
    transport.receive_window(quinn_proto::VarInt::from_u32(16 * 1024 * 1024));
    config.transport_config(std::sync::Arc::new(transport));
    Ok(config)
}
