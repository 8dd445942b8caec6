//! A QUIC connection's UDP socket, as its worker drives it: through tokio's
//! epoll readiness, with quinn-udp's batched system calls (GSO for sends,
//! GRO and `recvmmsg` for receives), or on the worker's io_uring ring,
//! where the sends and receives of all its connections share the turn's
//! one system call ([`crate::net::uring::RingDatagram`]).

use crate::net::uring::{Ring, RingDatagram};
use bytes::BytesMut;
use std::cell::RefCell;
use std::io::{self, IoSliceMut};
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::rc::Rc;
use std::task::{Context, Poll};
use tokio::io::Interest;
use tokio::net::UdpSocket;

/// Room for one GRO batch of datagrams (what one received message holds).
const RECV_BUFFER: usize = 64 * 1024;
/// Messages one receive asks for. More than one, so that a receive that
/// gets fewer knows the socket's queue is empty (see `poll_recv`).
const RECV_BATCH: usize = 4;

thread_local! {
    /// Where a worker's epoll connections receive: one area per thread
    /// rather than per connection (a receive's bytes are copied out at
    /// once), so 1,000 connections do not hold 1,000 x 256 KiB.
    static RECV_AREA: RefCell<Box<[u8]>> =
        RefCell::new(vec![0; RECV_BUFFER * RECV_BATCH].into_boxed_slice());
}

/// The options quinn-udp turns on for control messages the ring's
/// receive does not read: the TOS byte (ECN) and packet information. An
/// IPv4 socket has only the first two; an IPv6 socket may have all four
/// (the IPv4 ones serve addresses mapped into IPv6).
const UNREAD_CONTROL_MESSAGES: [(libc::c_int, libc::c_int); 4] = [
    (libc::IPPROTO_IP, libc::IP_RECVTOS),
    (libc::IPPROTO_IP, libc::IP_PKTINFO),
    (libc::IPPROTO_IPV6, libc::IPV6_RECVTCLASS),
    (libc::IPPROTO_IPV6, libc::IPV6_RECVPKTINFO),
];

/// One received message: the next `len` bytes of the connection's
/// receive buffer, datagrams of `stride` bytes each (the last may be
/// shorter) where GRO joined several.
#[derive(Clone, Copy, Debug)]
pub struct Received {
    pub len: usize,
    pub stride: usize,
    pub ecn: Option<quinn_proto::EcnCodepoint>,
}

/// A connected UDP socket and how it is driven.
pub enum Socket {
    Epoll {
        socket: UdpSocket,
        state: quinn_udp::UdpSocketState,
    },
    Ring {
        socket: RingDatagram,
        /// Datagrams one send may batch (GSO) on this kernel.
        gso: usize,
    },
}

/// What the socket settles for quinn-proto.
pub struct Opened {
    pub socket: Socket,
    /// The kernel may fragment datagrams (then no path MTU discovery).
    pub may_fragment: bool,
}

impl Socket {
    /// A UDP socket connected to `addr` (the kernel then routes only that
    /// server's datagrams here and reports an unreachable port as a
    /// refused connection), on `ring` if the worker has one.
    pub fn open(addr: SocketAddr, ring: Option<&Rc<Ring>>) -> io::Result<Opened> {
        let local: SocketAddr = match addr {
            SocketAddr::V4(_) => (std::net::Ipv4Addr::UNSPECIFIED, 0).into(),
            SocketAddr::V6(_) => (std::net::Ipv6Addr::UNSPECIFIED, 0).into(),
        };
        let std_socket = std::net::UdpSocket::bind(local)?;
        std_socket.connect(addr)?;
        std_socket.set_nonblocking(true)?;
        // Its options (don't fragment, GRO, ECN) whichever drives it.
        let state = quinn_udp::UdpSocketState::new((&std_socket).into())?;
        let may_fragment = state.may_fragment();
        let socket = match ring {
            Some(ring) => {
                // The ring reads only GRO's segment size from a receive's
                // control data; each other control message (the packet's
                // TOS byte and addresses, which quinn-udp's epoll path
                // reads) costs the kernel work per receive for nothing.
                let unread = match addr {
                    SocketAddr::V4(_) => &UNREAD_CONTROL_MESSAGES[..2],
                    SocketAddr::V6(_) => &UNREAD_CONTROL_MESSAGES[..],
                };
                for &(level, name) in unread {
                    // Best effort: at worst the kernel keeps sending a
                    // control message the ring ignores.
                    let _ = set_int_option(&std_socket, level, name, 0);
                }
                Socket::Ring {
                    gso: state.max_gso_segments().max(1),
                    socket: ring.adopt_datagram(OwnedFd::from(std_socket))?,
                }
            }
            None => Socket::Epoll {
                socket: UdpSocket::from_std(std_socket)?,
                state,
            },
        };
        Ok(Opened { socket, may_fragment })
    }

    /// Datagrams one transmit may batch now: fewer once a GSO send failed
    /// (a device without segmentation offload).
    pub fn max_datagrams(&self) -> usize {
        match self {
            Socket::Epoll { state, .. } => state.max_gso_segments().max(1),
            Socket::Ring { socket, .. } if socket.gso_refused() => 1,
            Socket::Ring { gso, .. } => *gso,
        }
    }

    /// Appends what the socket has to `into`, a [`Received`] per message
    /// to `messages`; pending (`cx` woken) while there is nothing.
    pub fn poll_recv(
        &self,
        cx: &mut Context<'_>,
        into: &mut BytesMut,
        messages: &mut Vec<Received>,
    ) -> Poll<io::Result<()>> {
        match self {
            Socket::Epoll { socket, state } => poll_recv_epoll(socket, state, cx, into, messages),
            Socket::Ring { socket, .. } => {
                let received = socket.poll_recv(cx, |message, stride| {
                    into.extend_from_slice(message);
                    messages.push(Received {
                        len: message.len(),
                        stride,
                        ecn: None,
                    });
                });
                received.map_ok(drop)
            }
        }
    }

    /// Sends (or, on a ring, queues for the end of the turn) one transmit
    /// of quinn-proto's, whose bytes are `contents`; pending (`cx` woken)
    /// while the socket has no room.
    pub fn poll_send(
        &self,
        cx: &mut Context<'_>,
        transmit: &quinn_proto::Transmit,
        contents: &[u8],
    ) -> Poll<io::Result<()>> {
        match self {
            Socket::Epoll { socket, state } => {
                let datagram = quinn_udp::Transmit {
                    destination: transmit.destination,
                    ecn: transmit
                        .ecn
                        .and_then(|e| quinn_udp::EcnCodepoint::from_bits(e as u8)),
                    contents,
                    segment_size: transmit.segment_size,
                    src_ip: transmit.src_ip,
                };
                loop {
                    match socket.try_io(Interest::WRITABLE, || state.try_send(socket.into(), &datagram)) {
                        Err(err) if err.kind() == io::ErrorKind::WouldBlock => {
                            std::task::ready!(socket.poll_send_ready(cx))?;
                        }
                        done => return Poll::Ready(done),
                    }
                }
            }
            Socket::Ring { socket, .. } => {
                socket.poll_send(cx, contents, transmit.segment_size.unwrap_or(contents.len()))
            }
        }
    }
}

/// Receives up to [`RECV_BATCH`] messages with one `recvmmsg`.
fn poll_recv_epoll(
    socket: &UdpSocket,
    state: &quinn_udp::UdpSocketState,
    cx: &mut Context<'_>,
    into: &mut BytesMut,
    messages: &mut Vec<Received>,
) -> Poll<io::Result<()>> {
    loop {
        std::task::ready!(socket.poll_recv_ready(cx))?;
        let mut meta = [quinn_udp::RecvMeta::default(); RECV_BATCH];
        let mut count = 0;
        let received = RECV_AREA.with_borrow_mut(|area| {
            let mut pieces = area.chunks_mut(RECV_BUFFER);
            let mut bufs: [IoSliceMut; RECV_BATCH] =
                std::array::from_fn(|_| IoSliceMut::new(pieces.next().expect("RECV_BATCH pieces")));
            let received = socket.try_io(Interest::READABLE, || {
                count = state.recv(socket.into(), &mut bufs, &mut meta)?;
                // Fewer messages than asked for: the socket's queue was
                // empty when the kernel looked, and every datagram arriving
                // from now on raises readiness anew (tokio's epoll is
                // edge-triggered). So the readiness is cleared now, as a
                // `WouldBlock` does, sparing the receive that would only
                // find the queue empty: one system call of about three per
                // request with one stream.
                match count < RECV_BATCH {
                    true => Err(io::ErrorKind::WouldBlock.into()),
                    false => Ok(()),
                }
            });
            for (piece, meta) in area.chunks(RECV_BUFFER).zip(&meta[..count]) {
                into.extend_from_slice(&piece[..meta.len]);
            }
            received
        });
        match received {
            Ok(()) => {}
            Err(err) if err.kind() == io::ErrorKind::WouldBlock && count > 0 => {}
            // `try_io` cleared the readiness: wait for the next.
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => continue,
            Err(err) => return Poll::Ready(Err(err)),
        }
        messages.extend(meta[..count].iter().map(|meta| {
            Received {
                len: meta.len,
                stride: if meta.stride == 0 { meta.len } else { meta.stride },
                ecn: meta
                    .ecn
                    .and_then(|e| quinn_proto::EcnCodepoint::from_bits(e as u8)),
            }
        }));
        return Poll::Ready(Ok(()));
    }
}

/// Sets an `int` socket option.
fn set_int_option(
    socket: &std::net::UdpSocket,
    level: libc::c_int,
    name: libc::c_int,
    value: libc::c_int,
) -> io::Result<()> {
    // SAFETY: a plain syscall with a pointer to a live int of the size given.
    let done = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            level,
            name,
            (&raw const value).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    match done {
        0 => Ok(()),
        _ => Err(io::Error::last_os_error()),
    }
}
