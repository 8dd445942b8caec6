//! UDP sockets on the worker's ring, for HTTP/3's QUIC connections.
//!
//! A connected UDP socket gets a multishot `recvmsg`, into buffers of its
//! own group (datagram buffers) that each hold the largest message GRO
//! may make of datagrams the kernel joined, with the control data that
//! says where it joined them (the segment size). Each completion is one
//! such message. Datagrams to send are copied into the socket's queue
//! and go out at the end of the turn, a send operation per batch (several
//! datagrams of one size go as one GSO send, as quinn-udp sends them over
//! epoll), in the one `io_uring_enter` that submits the whole turn.
//! Readiness costs a `sendmsg` per connection per turn, and a `recvmmsg`
//! and an `epoll_wait` per connection woken; on the ring all of a turn's
//! connections share one system call.

use super::{Inner, Kind, Provided, Ring, RingSocket, SEND_QUEUE, SlotKind, send, user_data};
use crate::wake::keep_waker;
use io_uring::{IoUring, cqueue, opcode, squeue, types};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::rc::Rc;
use std::task::{Context, Poll};

/// Room a datagram buffer keeps for control data: GRO's segment size, and
/// whatever else the socket's options ask for (the TOS byte, packet
/// information: 24 to 32 bytes each), which is skipped.
const CONTROL_ROOM: usize = 128;
/// A datagram buffer: the kernel's header of the message (16 bytes), its
/// control data and the largest payload GRO makes (under 64 KiB).
const DATAGRAM_BUFFER_SIZE: usize = 64 * 1024 + 256;
/// Datagram buffers per worker: two per connection, between these bounds.
/// Small responses write only the first page of each (the rest is never
/// made resident); 128 hold 8 MiB once large responses fill them.
const MIN_DATAGRAM_BUFFERS: usize = 32;
const MAX_DATAGRAM_BUFFERS: usize = 128;
const DATAGRAM_GROUP: u16 = 1;

/// What only a UDP socket's slot holds: its queued datagrams' batches
/// (`queued` holds their bytes) and the message headers of its GSO sends.
#[derive(Default)]
pub(super) struct DatagramSlot {
    batches: Vec<Batch>,
    /// The message headers of the GSO batches in flight.
    headers: Vec<GsoHeader>,
    /// A GSO send failed (a device without segmentation offload).
    gso_refused: bool,
}

impl SlotKind {
    /// A UDP socket's own part: a slot is made one when its socket is
    /// adopted as a [`RingDatagram`], and only its calls come here.
    fn datagram(&mut self) -> &mut DatagramSlot {
        match self {
            SlotKind::Datagram(datagram) => datagram,
            SlotKind::Stream(_) => unreachable!("a TCP socket's slot used as a UDP socket's"),
        }
    }
}

/// Where a ring's UDP sockets receive: the datagram buffers, and the
/// message header their `recvmsg` names (the kernel reads only its name
/// and control lengths).
pub(super) struct Receiving {
    pub(super) buffers: Provided,
    header: Box<libc::msghdr>,
}

impl Receiving {
    /// Buffers for about `connections` sockets, registered with `uring`.
    pub(super) fn new(connections: usize, uring: &IoUring) -> io::Result<Receiving> {
        let count = (connections * 2)
            .next_power_of_two()
            .clamp(MIN_DATAGRAM_BUFFERS, MAX_DATAGRAM_BUFFERS);
        let buffers = Provided::with(count, DATAGRAM_BUFFER_SIZE, DATAGRAM_GROUP);
        buffers.register(uring)?;
        // SAFETY: zero is a valid msghdr (null pointers, no lengths).
        let mut header: Box<libc::msghdr> = Box::new(unsafe { std::mem::zeroed() });
        header.msg_controllen = CONTROL_ROOM as _;
        Ok(Receiving { buffers, header })
    }

    /// The multishot receive of slot `index`'s socket.
    pub(super) fn entry(&self, fixed: bool, index: usize, fd: i32) -> squeue::Entry {
        let header = &raw const *self.header;
        match fixed {
            true => opcode::RecvMsgMulti::new(types::Fixed(index as u32), header, DATAGRAM_GROUP).build(),
            false => opcode::RecvMsgMulti::new(types::Fd(fd), header, DATAGRAM_GROUP).build(),
        }
    }

    /// Hands `each` the message in buffer `id` (`len` bytes written), if
    /// it holds one whole: a payload cut short (no room) is a lost
    /// datagram, as an empty one carries nothing for QUIC.
    fn read(&self, id: u16, len: u32, each: &mut impl FnMut(&[u8], usize)) -> bool {
        let Ok(message) = types::RecvMsgOut::parse(self.buffers.bytes(id, len as usize), &self.header) else {
            return false;
        };
        let payload = message.payload_data();
        if message.is_payload_truncated() || payload.is_empty() {
            return false;
        }
        // Where GRO joined datagrams, the size of each (the last may be
        // shorter); without it the message is one datagram.
        let stride = control_messages(message.control_data())
            .find(|(level, kind, _)| (*level, *kind) == (libc::SOL_UDP, libc::UDP_GRO))
            .and_then(|(_, _, data)| int_of(data))
            .filter(|size| *size > 0)
            .map_or(payload.len(), |size| size as usize);
        each(payload, stride);
        true
    }
}

/// The control messages in `control`, as the kernel lays them out
/// (`cmsghdr`s, each padded to the alignment of its length field): level,
/// type and data of each.
pub(super) fn control_messages(control: &[u8]) -> impl Iterator<Item = (i32, i32, &[u8])> {
    const LEN: usize = size_of::<usize>();
    const HEADER: usize = LEN + 2 * size_of::<i32>();
    let mut rest = control;
    std::iter::from_fn(move || {
        if rest.len() < HEADER {
            return None;
        }
        let len = usize::from_ne_bytes(rest[..LEN].try_into().ok()?);
        let level = i32::from_ne_bytes(rest[LEN..LEN + 4].try_into().ok()?);
        let kind = i32::from_ne_bytes(rest[LEN + 4..HEADER].try_into().ok()?);
        if len < HEADER || len > rest.len() {
            return None;
        }
        let data = &rest[HEADER..len];
        rest = &rest[len.next_multiple_of(LEN).min(rest.len())..];
        Some((level, kind, data))
    })
}

/// A native `int` at the start of `data`.
fn int_of(data: &[u8]) -> Option<i32> {
    Some(i32::from_ne_bytes(data.get(..4)?.try_into().ok()?))
}

/// A connected UDP socket driven by its worker's [`Ring`].
pub struct RingDatagram {
    socket: RingSocket,
}

impl Ring {
    /// Takes over a connected UDP socket (GRO on or off, as its owner
    /// chose: each message says where GRO joined datagrams). The first
    /// one registers the datagram buffers.
    pub fn adopt_datagram(self: &Rc<Ring>, fd: OwnedFd) -> io::Result<RingDatagram> {
        {
            let mut inner = self.inner.borrow_mut();
            if inner.datagrams.is_none() {
                inner.datagrams = Some(Receiving::new(inner.connections, &inner.uring)?);
            }
        }
        Ok(RingDatagram {
            socket: self.adopt_as(fd, true),
        })
    }
}

impl RingDatagram {
    /// Hands `each` every message received since the last call, in order,
    /// with its stride (one datagram, or several of `stride` bytes that
    /// GRO joined, the last possibly shorter): ready with how many there
    /// were, pending (`cx` woken by the next) when there were none, or the
    /// error that ended the socket's receives (an unreachable port, for
    /// one).
    pub fn poll_recv(
        &self,
        cx: &mut Context<'_>,
        mut each: impl FnMut(&[u8], usize),
    ) -> Poll<io::Result<usize>> {
        let index = self.socket.index;
        let mut inner = self.socket.ring.inner.borrow_mut();
        let inner = &mut *inner;
        let slot = &mut inner.slots[index];
        let receiving = inner.datagrams.as_mut().expect("made with the first UDP socket");
        let mut count = 0;
        while let Some((id, len)) = slot.received.pop_front() {
            count += usize::from(receiving.read(id, len, &mut each));
            receiving.buffers.give_back(id);
        }
        if count == 0 {
            if let Some(errno) = slot.ended {
                return Poll::Ready(Err(io::Error::from_raw_os_error(errno)));
            }
            inner.readers_waiting += usize::from(slot.reader.is_none());
            keep_waker(&mut slot.reader, cx.waker());
        }
        // A receive ended for want of buffers: armed again, now that
        // these are back (the datagrams it missed wait in the socket).
        if !slot.receiving && slot.ended.is_none() {
            inner.arm_receive(index);
        }
        match count {
            0 => Poll::Pending,
            count => Poll::Ready(Ok(count)),
        }
    }

    /// Queues `contents` for the end of the turn: datagrams of `segment`
    /// bytes each, the last one possibly shorter (a GSO batch). Pending
    /// (`cx` woken when there is room) while the queue is full, or the
    /// error an earlier send met.
    pub fn poll_send(&self, cx: &mut Context<'_>, contents: &[u8], segment: usize) -> Poll<io::Result<()>> {
        let index = self.socket.index;
        let mut inner = self.socket.ring.inner.borrow_mut();
        let inner = &mut *inner;
        let slot = &mut inner.slots[index];
        if let Some(errno) = slot.broken {
            return Poll::Ready(Err(io::Error::from_raw_os_error(errno)));
        }
        if !slot.queued.is_empty() && slot.queued.len() + contents.len() > SEND_QUEUE {
            keep_waker(&mut slot.writer, cx.waker());
            return Poll::Pending;
        }
        slot.queued.extend_from_slice(contents);
        let segment = segment.clamp(1, usize::from(u16::MAX));
        let datagram = slot.kind.datagram();
        match contents.len() > segment && !datagram.gso_refused {
            true => datagram.batches.push(Batch {
                len: contents.len() as u32,
                segment: segment as u16,
            }),
            // One datagram, or a batch the device cannot segment: each
            // datagram alone.
            false => datagram
                .batches
                .extend(contents.chunks(segment).map(|datagram| Batch {
                    len: datagram.len() as u32,
                    segment: 0,
                })),
        }
        if !slot.listed {
            slot.listed = true;
            inner.to_send.push(index);
        }
        Poll::Ready(Ok(()))
    }

    /// Whether a GSO send failed on this socket: batches then go out a
    /// datagram per send, and whoever builds them should build single
    /// datagrams.
    pub fn gso_refused(&self) -> bool {
        self.socket.ring.inner.borrow_mut().slots[self.socket.index]
            .kind
            .datagram()
            .gso_refused
    }
}

/// Datagrams queued to send together: `len` bytes, in datagrams of
/// `segment` bytes (GSO; the last may be shorter), or one datagram when
/// `segment` is 0.
#[derive(Clone, Copy, Debug)]
pub(super) struct Batch {
    len: u32,
    segment: u16,
}

/// The message header of a GSO send: the kernel reads it when the send
/// runs, which may be after the submit that handed it over (a socket
/// without room), so it stays in the slot until the send completes.
pub(super) struct GsoHeader {
    msg: libc::msghdr,
    iov: libc::iovec,
    /// One control message, UDP_SEGMENT's 16-bit size (24 bytes on 64-bit
    /// Linux), aligned as `cmsghdr` wants.
    control: [u64; 4],
}

impl Default for GsoHeader {
    fn default() -> GsoHeader {
        // SAFETY: plain C structs and integers, for which zero is valid.
        unsafe { std::mem::zeroed() }
    }
}

impl GsoHeader {
    /// Points the header at `bytes`, to go as datagrams of `segment`
    /// bytes. Neither may move until the send completes.
    fn point(&mut self, bytes: &[u8], segment: u16) -> *const libc::msghdr {
        self.iov = libc::iovec {
            iov_base: bytes.as_ptr().cast_mut().cast(),
            iov_len: bytes.len(),
        };
        self.control = [0; 4];
        // SAFETY: zero is a valid msghdr; its pointers are set below.
        self.msg = unsafe { std::mem::zeroed() };
        self.msg.msg_iov = &raw mut self.iov;
        self.msg.msg_iovlen = 1;
        self.msg.msg_control = self.control.as_mut_ptr().cast();
        // SAFETY: CMSG_* compute sizes and walk the buffer set just above,
        // which has room for one control message with a u16.
        unsafe {
            self.msg.msg_controllen = libc::CMSG_SPACE(size_of::<u16>() as u32) as _;
            let cmsg = libc::CMSG_FIRSTHDR(&raw const self.msg);
            (*cmsg).cmsg_level = libc::SOL_UDP;
            (*cmsg).cmsg_type = libc::UDP_SEGMENT;
            (*cmsg).cmsg_len = libc::CMSG_LEN(size_of::<u16>() as u32) as _;
            std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<u16>(), segment);
        }
        &raw const self.msg
    }
}

/// Send errors after which the socket still works: the datagram is lost,
/// as datagrams may be, and QUIC sends again what mattered in it. Too
/// large for the path (a path MTU probe), no room in the socket's or the
/// device's queue, or (for a GSO send) a device without segmentation
/// offload.
const DATAGRAM_LOST: [i32; 5] = [
    libc::EMSGSIZE,
    libc::EAGAIN,
    libc::ENOBUFS,
    libc::EIO,
    libc::EINVAL,
];

impl Inner {
    /// Sends slot `index`'s datagrams (its `sending`, in `batches`), one
    /// operation per batch; the last to complete frees the queue.
    pub(super) fn start_datagram_sends(&mut self, index: usize) {
        let slot = &mut self.slots[index];
        let Some(fd) = slot.fd.as_ref().map(AsRawFd::as_raw_fd) else {
            return;
        };
        let generation = slot.generation;
        let mut batches = std::mem::take(&mut slot.kind.datagram().batches);
        // Every header before any send points at one: none of this slot's
        // sends is in flight, and none may move once pointed at.
        let gso = batches.iter().filter(|b| b.segment > 0).count();
        slot.kind.datagram().headers.resize_with(gso, GsoHeader::default);
        let fixed = index < self.registered;
        let (mut offset, mut header) = (0, 0);
        for batch in &batches {
            // Inside `sending`, which stays put (no write reaches it) until
            // the last of these sends completes.
            let slot = &mut self.slots[index];
            let bytes = &slot.sending[offset..offset + batch.len as usize];
            offset += bytes.len();
            let entry = match batch.segment {
                0 => send(fixed, index, fd, bytes, 0),
                segment => {
                    let msg = slot.kind.datagram().headers[header].point(bytes, segment);
                    header += 1;
                    send_msg(fixed, index, fd, msg)
                }
            }
            .user_data(user_data(index, generation, Kind::Send));
            self.slots[index].sends += 1;
            self.issue(index, &entry);
        }
        batches.clear();
        let slot = &mut self.slots[index];
        slot.kind.datagram().batches = batches;
        if slot.sends == 0 {
            slot.sending.clear();
        }
    }

    /// One of slot `index`'s datagram sends completed.
    pub(super) fn datagram_sent(&mut self, index: usize, result: i32) {
        let slot = &mut self.slots[index];
        slot.sends -= 1;
        if result < 0 {
            match DATAGRAM_LOST.contains(&-result) {
                true => slot.kind.datagram().gso_refused |= matches!(-result, libc::EIO | libc::EINVAL),
                false => {
                    slot.broken.get_or_insert(-result);
                }
            }
        }
        if slot.sends > 0 {
            return;
        }
        slot.sending.clear();
        if !slot.queued.is_empty() && !slot.listed && !slot.dropped {
            slot.listed = true;
            self.to_send.push(index);
        }
        self.slots[index].wake_writer();
    }

    /// A message came for slot `index` (`result` bytes of its buffer
    /// written; an error is handled as for a stream).
    pub(super) fn datagram_received(&mut self, index: usize, result: i32, flags: u32) {
        let slot = &mut self.slots[index];
        if let (Some(id), Some(receiving)) = (cqueue::buffer_select(flags), &mut self.datagrams) {
            match slot.dropped {
                true => receiving.buffers.give_back(id),
                false => slot.received.push_back((id, result as u32)),
            }
        }
        self.wake_reader(index);
    }
}

/// A `sendmsg` of `msg` on slot `index`'s socket, as [`send`] sends.
fn send_msg(fixed: bool, index: usize, fd: i32, msg: *const libc::msghdr) -> squeue::Entry {
    match fixed {
        true => opcode::SendMsg::new(types::Fixed(index as u32), msg).build(),
        false => opcode::SendMsg::new(types::Fd(fd), msg).build(),
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::runtime_for_rings;
    use super::*;
    use std::net::UdpSocket;
    use std::time::Duration;

    fn connected_to(addr: std::net::SocketAddr) -> OwnedFd {
        let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
        socket.connect(addr).unwrap();
        socket.set_nonblocking(true).unwrap();
        OwnedFd::from(socket)
    }

    /// Datagrams through a ring socket and back from an echo: a GSO batch
    /// leaves as separate datagrams of its segment size, each comes back
    /// whole and in order, and the slot is freed once dropped.
    #[test]
    fn a_ring_datagram_socket_sends_batches_and_receives_datagrams() {
        let Some(rt) = runtime_for_rings() else {
            return;
        };
        let echo = UdpSocket::bind("127.0.0.1:0").unwrap();
        echo.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let addr = echo.local_addr().unwrap();
        let echoing = std::thread::spawn(move || {
            let mut sizes = Vec::new();
            let mut buf = [0u8; 2048];
            for _ in 0..5 {
                let (n, from) = echo.recv_from(&mut buf).unwrap();
                sizes.push(n);
                echo.send_to(&buf[..n], from).unwrap();
            }
            sizes
        });
        rt.block_on(async {
            let ring = Ring::new(2).unwrap();
            let socket = ring.adopt_datagram(connected_to(addr)).unwrap();
            let batch: Vec<u8> = (0..350u32).map(|i| (i % 251) as u8).collect();
            let single = [7u8; 20];
            let mut got: Vec<Vec<u8>> = Vec::new();
            ring.run(async {
                std::future::poll_fn(|cx| socket.poll_send(cx, &batch, 100))
                    .await
                    .unwrap();
                std::future::poll_fn(|cx| socket.poll_send(cx, &single, 1200))
                    .await
                    .unwrap();
                while got.len() < 5 {
                    let n = std::future::poll_fn(|cx| socket.poll_recv(cx, |d, _| got.push(d.to_vec())))
                        .await
                        .unwrap();
                    assert!(n > 0);
                }
            })
            .await;
            let mut expected: Vec<Vec<u8>> = batch.chunks(100).map(<[u8]>::to_vec).collect();
            expected.push(single.to_vec());
            assert_eq!(got, expected);
            assert!(!socket.gso_refused());
            drop(socket);
            // The cancelled receive frees the slot.
            ring.run(tokio::time::sleep(Duration::from_millis(50))).await;
            let inner = ring.inner.borrow();
            assert_eq!(inner.free.len(), inner.slots.len());
            assert_eq!(inner.in_flight, 0);
        });
        assert_eq!(echoing.join().unwrap(), [100, 100, 100, 50, 20]);
    }

    /// With GRO on, a GSO batch of four datagrams on loopback arrives as
    /// one message, and its segment size says where to split it (past the
    /// other control messages quinn-udp's options ask for).
    #[test]
    fn a_ring_datagram_socket_receives_what_gro_joined_with_its_segment_size() {
        let Some(rt) = runtime_for_rings() else {
            return;
        };
        let receiver = UdpSocket::bind("127.0.0.1:0").unwrap();
        let sender = UdpSocket::bind("127.0.0.1:0").unwrap();
        receiver.connect(sender.local_addr().unwrap()).unwrap();
        receiver.set_nonblocking(true).unwrap();
        // quinn-udp's socket options: GRO, the TOS byte and packet
        // information on receives.
        quinn_udp::UdpSocketState::new((&receiver).into()).unwrap();
        let sending = quinn_udp::UdpSocketState::new((&sender).into()).unwrap();
        let batch: Vec<u8> = (0..350u32).map(|i| (i % 251) as u8).collect();
        let transmit = quinn_udp::Transmit {
            destination: receiver.local_addr().unwrap(),
            ecn: Some(quinn_udp::EcnCodepoint::Ect0),
            contents: &batch,
            segment_size: Some(100),
            src_ip: None,
        };
        let mut messages: Vec<(Vec<u8>, usize)> = Vec::new();
        rt.block_on(async {
            let ring = Ring::new(2).unwrap();
            let socket = ring.adopt_datagram(OwnedFd::from(receiver)).unwrap();
            sending.try_send((&sender).into(), &transmit).unwrap();
            ring.run(async {
                while messages.iter().map(|(bytes, _)| bytes.len()).sum::<usize>() < batch.len() {
                    let receive = std::future::poll_fn(|cx| {
                        socket.poll_recv(cx, |d, stride| messages.push((d.to_vec(), stride)))
                    });
                    tokio::time::timeout(Duration::from_secs(5), receive)
                        .await
                        .expect("the batch arrives")
                        .unwrap();
                }
            })
            .await;
        });
        let datagrams: Vec<usize> = messages
            .iter()
            .flat_map(|(bytes, stride)| bytes.chunks(*stride).map(<[u8]>::len))
            .collect();
        assert_eq!(datagrams, [100, 100, 100, 50]);
        assert_eq!(
            messages
                .iter()
                .flat_map(|(bytes, _)| bytes.clone())
                .collect::<Vec<u8>>(),
            batch
        );
        if sending.max_gso_segments() > 1 {
            assert_eq!(messages.len(), 1, "GRO joined the batch");
        }
    }

    /// A port nobody listens on: the kernel's refusal ends the receive,
    /// and reading says so.
    #[test]
    fn a_ring_datagram_socket_reports_a_refused_port() {
        let Some(rt) = runtime_for_rings() else {
            return;
        };
        // A port just freed: nothing listens there.
        let addr = UdpSocket::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
        rt.block_on(async {
            let ring = Ring::new(1).unwrap();
            let socket = ring.adopt_datagram(connected_to(addr)).unwrap();
            let outcome = ring
                .run(async {
                    std::future::poll_fn(|cx| socket.poll_send(cx, b"hello", 1200))
                        .await
                        .unwrap();
                    let receive = std::future::poll_fn(|cx| socket.poll_recv(cx, |_, _| {}));
                    tokio::time::timeout(Duration::from_secs(5), receive).await
                })
                .await;
            let err = outcome.expect("refused in time").unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::ConnectionRefused, "{err}");
        });
    }
}
