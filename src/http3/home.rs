//! HTTP/3's side of the lanes a worker's request loops share, as HTTP/2's
//! are shared (a [`Home`] is a [`Group`] of lanes, whose round trip both
//! protocols use; see [`crate::http2::Group`]): how a worker opens QUIC
//! connections ([`Dialer`]); how a stream starts and ends on one is the
//! connection's own (`Streams` in [`super::conn`]).

use super::conn::{Conn, Deadline, Place};
use crate::http2::{Dial, Group, Lane, Outbox};
use crate::net::uring::Ring;
use crate::recorder::Recorder;
use crate::sample::RequestError;
use quinn_proto::ClientConfig;
use std::cell::{Cell, RefCell};
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

/// Where and how a worker opens its QUIC connections.
pub struct Dialer {
    pub addrs: Vec<SocketAddr>,
    pub config: ClientConfig,
    pub server_name: String,
    pub connect_timeout: Duration,
    /// The address that answered last, tried first.
    preferred: Cell<usize>,
    /// The worker's ring, when its sockets are driven by io_uring.
    ring: Option<Rc<Ring>>,
}

impl Dialer {
    pub fn new(
        addrs: Vec<SocketAddr>,
        config: ClientConfig,
        server_name: String,
        connect_timeout: Duration,
        ring: Option<Rc<Ring>>,
    ) -> Dialer {
        Dialer {
            addrs,
            config,
            server_name,
            connect_timeout,
            preferred: Cell::new(0),
            ring,
        }
    }

    /// A new connection with its handshake done, within the connect
    /// timeout; the handshake goes to `recorder`. With `early`, one that
    /// can send 0-RTT data comes back before its handshake is done (which
    /// a lane records later, see [`Conn::record_handshake`]).
    async fn dial(
        &self,
        lanes: usize,
        outbox: &Rc<Outbox>,
        recorder: &RefCell<Recorder>,
        early: bool,
    ) -> Result<Rc<Conn>, RequestError> {
        let deadline = Deadline {
            by: tokio::time::Instant::now() + self.connect_timeout,
            timeout: self.connect_timeout,
        };
        let first = self.preferred.get();
        let mut last_err = None;
        for i in 0..self.addrs.len() {
            let index = (first + i) % self.addrs.len();
            let connect = Conn::connect(
                self.addrs[index],
                self.config.clone(),
                &self.server_name,
                Place {
                    lanes,
                    outbox: outbox.clone(),
                    ring: self.ring.as_ref(),
                },
                deadline,
                early,
            );
            match connect.await {
                Ok(conn) => {
                    self.preferred.set(index);
                    conn.record_handshake(recorder);
                    return Ok(conn);
                }
                // Out of time: no address after it gets any.
                Err(err) if tokio::time::Instant::now() >= deadline.by => return Err(err),
                Err(err) => last_err = Some(err),
            }
        }
        Err(last_err.unwrap_or_else(|| RequestError::protocol("no address to connect to")))
    }
}

/// The HTTP/3 connection a group of lanes shares.
pub type Home = Group<Conn>;

/// One request loop's place on a home's HTTP/3 connections.
pub type H3Lane = Lane<Conn>;

impl Dial<Conn> for Dialer {
    async fn dial(
        &self,
        home: &Home,
        recorder: &RefCell<Recorder>,
        early: bool,
    ) -> Result<Rc<Conn>, RequestError> {
        Dialer::dial(self, home.lanes(), home.outbox(), recorder, early).await
    }
}
