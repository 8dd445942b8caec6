//! Connecting a TCP socket on the worker's ring.
//!
//! The connect is one more operation of the turn's submission, and the
//! socket is the ring's from its first moment. Connected through tokio
//! instead, each socket costs a `connect`, a `getsockopt` and two
//! `epoll_ctl` (into tokio's epoll and out of it again, for the ring) on
//! top, and tokio's registration of it: a run without keep-alive connects
//! once per request, so that was a tenth of its CPU.

use super::{Inner, Kind, Ring, RingSocket, user_data};
use crate::wake::keep_waker;
use io_uring::{opcode, types};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

/// Where a slot's connect stands.
#[derive(Default)]
pub(super) enum Connect {
    /// Connected (or adopted connected).
    #[default]
    Done,
    /// In flight.
    Going {
        /// Where the kernel reads the address from, kept until it is done.
        _address: Box<SockAddr>,
    },
    /// Failed with this errno.
    Failed(i32),
}

impl Ring {
    /// A new TCP socket (`TCP_NODELAY` on: requests are small and latency
    /// matters more than segment count) connected to `addr` on this ring.
    /// Dropped before it is done, the connect is cancelled.
    pub fn connect(self: &Rc<Ring>, addr: SocketAddr) -> Connecting {
        let socket = Socket::new(
            Domain::for_address(addr),
            Type::STREAM.nonblocking(),
            Some(Protocol::TCP),
        )
        .and_then(|socket| {
            socket.set_tcp_nodelay(true)?;
            Ok(socket)
        });
        let socket = socket.map(|socket| {
            let socket = self.adopt_unconnected(OwnedFd::from(socket));
            self.inner.borrow_mut().start_connect(socket.index, addr);
            socket
        });
        Connecting { socket: Some(socket) }
    }
}

/// A connect in flight on the ring; its output is the connected socket.
pub struct Connecting {
    socket: Option<io::Result<RingSocket>>,
}

impl Future for Connecting {
    type Output = io::Result<RingSocket>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let socket = match self.socket.take().expect("polled after it was done") {
            Ok(socket) => socket,
            Err(err) => return Poll::Ready(Err(err)),
        };
        let mut inner = socket.ring.inner.borrow_mut();
        let slot = &mut inner.slots[socket.index];
        match slot.kind.stream().connect {
            Connect::Done => {
                drop(inner);
                Poll::Ready(Ok(socket))
            }
            Connect::Failed(errno) => {
                drop(inner);
                Poll::Ready(Err(io::Error::from_raw_os_error(errno)))
            }
            Connect::Going { .. } => {
                keep_waker(&mut slot.writer, cx.waker());
                drop(inner);
                self.socket = Some(Ok(socket));
                Poll::Pending
            }
        }
    }
}

impl Inner {
    /// Pushes slot `index`'s connect to `addr`.
    fn start_connect(&mut self, index: usize, addr: SocketAddr) {
        let fixed = index < self.registered;
        let slot = &mut self.slots[index];
        let Some(fd) = &slot.fd else { return };
        let addr = Box::new(SockAddr::from(addr));
        let entry = match fixed {
            true => opcode::Connect::new(types::Fixed(index as u32), addr.as_ptr().cast(), addr.len()),
            false => opcode::Connect::new(types::Fd(fd.as_raw_fd()), addr.as_ptr().cast(), addr.len()),
        }
        .build()
        .user_data(user_data(index, slot.generation, Kind::Connect));
        slot.kind.stream().connect = Connect::Going { _address: addr };
        // The address is the slot's until the connect completes: slots are
        // freed only with nothing in flight.
        self.issue(index, &entry);
    }

    /// Slot `index`'s connect completed with `result`: a connected socket
    /// starts receiving at once, so the first response finds a receive
    /// waiting.
    pub(super) fn connected(&mut self, index: usize, result: i32) {
        self.finished(index);
        let slot = &mut self.slots[index];
        slot.kind.stream().connect = match result {
            0 => Connect::Done,
            _ => Connect::Failed(-result),
        };
        if result == 0 && !slot.dropped {
            self.arm_receive(index);
        }
        self.slots[index].wake_writer();
    }

    /// Cancels slot `index`'s connect, if it is still going: a connect to
    /// an address that never answers would otherwise hold the slot for as
    /// long as the kernel retries (minutes).
    pub(super) fn cancel_connect(&mut self, index: usize) {
        let slot = &self.slots[index];
        if !slot.connecting() {
            return;
        }
        let entry = opcode::AsyncCancel::new(user_data(index, slot.generation, Kind::Connect))
            .build()
            .user_data(u64::MAX);
        self.push(&entry);
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{on_a_ring, until_nothing_in_flight};
    use super::*;
    use std::io::{Read, Write};
    use std::time::{Duration, Instant};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// Connected on the ring, the socket talks at once: the receive armed
    /// with the connect's completion finds the peer's answer.
    #[test]
    fn a_socket_connected_on_the_ring_talks() {
        on_a_ring(1, async |ring| {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = listener.local_addr().unwrap();
            let peer = std::thread::spawn(move || {
                let (mut conn, _) = listener.accept().unwrap();
                let mut asked = [0u8; 4];
                conn.read_exact(&mut asked).unwrap();
                conn.write_all(b"pong").unwrap();
                asked
            });
            let mut socket = ring.run(ring.connect(addr)).await.unwrap();
            ring.run(socket.write_all(b"ping")).await.unwrap();
            let mut answer = [0u8; 4];
            ring.run(socket.read_exact(&mut answer)).await.unwrap();
            assert_eq!(&answer, b"pong");
            assert_eq!(&peer.join().unwrap(), b"ping");
            drop(socket);
            // The receive armed after the answer ends with the shutdown,
            // on a later turn of the ring.
            until_nothing_in_flight(&ring, "the dropped socket's receive goes on").await;
            let inner = ring.inner.borrow();
            assert_eq!(inner.free.len(), inner.slots.len());
        });
    }

    /// A refused connect is the kernel's error, and its slot is freed.
    #[test]
    fn a_refused_connect_says_so_and_frees_its_slot() {
        on_a_ring(1, async |ring| {
            let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = closed.local_addr().unwrap();
            drop(closed);
            let err = ring
                .run(ring.connect(addr))
                .await
                .err()
                .expect("connected to a closed port");
            assert_eq!(err.kind(), io::ErrorKind::ConnectionRefused, "{err}");
            let inner = ring.inner.borrow();
            assert_eq!(inner.in_flight, 0);
            assert_eq!(inner.free.len(), inner.slots.len());
        });
    }

    /// A connect given up on (its timeout) is cancelled, not left to the
    /// kernel's retries: a listener whose queue is full answers no SYN.
    #[test]
    fn a_connect_given_up_on_is_cancelled() {
        on_a_ring(4, async |ring| {
            let listener = socket2::Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
            listener
                .bind(&SockAddr::from(SocketAddr::from(([127, 0, 0, 1], 0))))
                .unwrap();
            listener.listen(0).unwrap();
            let addr = listener.local_addr().unwrap().as_socket().unwrap();
            // Fills the queue (of one, for a backlog of 0), never accepted.
            let mut queued = Vec::new();
            let gave_up = loop {
                let attempt = tokio::time::timeout(Duration::from_millis(200), ring.connect(addr));
                match ring.run(attempt).await {
                    Ok(socket) => queued.push(socket.unwrap()),
                    Err(_) => break true,
                }
                if queued.len() > 8 {
                    break false;
                }
            };
            assert!(gave_up, "the listener's queue never filled");
            let began = Instant::now();
            while ring.inner.borrow().slots.iter().any(|slot| slot.connecting()) {
                assert!(began.elapsed() < Duration::from_secs(2), "the connect goes on");
                ring.run(tokio::time::sleep(Duration::from_millis(10))).await;
            }
            drop(queued);
        });
    }
}
