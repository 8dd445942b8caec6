//! The ring's stream socket ([`RingSocket`], TCP's): `AsyncRead` from the
//! provided buffers the kernel received into (or in place, for the fast
//! paths), `AsyncWrite` into the socket's queue that the turn sends, and
//! the kept send of the closed model's request; with the part of a slot
//! only a stream socket has ([`StreamSlot`]) and the ring's operations on
//! it. Dropping one ends its receive, resetting the connection where
//! bytes came that nobody will read.

use super::connect::Connect;
use super::{Inner, Kind, Provided, Ring, SEND_QUEUE, Slot, SlotKind, send, stamp, user_data};
use crate::wake::keep_waker;
use bytes::Bytes;
use io_uring::squeue;
use std::io;
use std::os::fd::AsRawFd;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::Instant;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The largest kept send. With the request before it answered, that much
/// finds room in the socket's buffer (4 KiB at the smallest) and goes at
/// once; a large body could wait for room, still going when the next send
/// comes (a server may answer before it has read the whole request), and
/// the two would mix on the wire.
const KEPT_UP_TO: usize = 4096;
/// Buffers a ring keeps for kept sends at most (a run sends one request
/// from one buffer); past them, sends are copied into the socket's queue.
const MAX_KEPT: usize = 8;

/// What only a stream socket's slot holds.
#[derive(Default)]
pub(super) struct StreamSlot {
    /// The kernel stamps what the socket receives (`stamp`).
    pub(super) stamped: bool,
    /// When the kernel received the buffer read last, where stamped.
    pub(super) read_stamp: Option<Instant>,
    /// Bytes of the front buffer already read.
    pub(super) consumed: usize,
    /// Bytes of `sending` sent (a short send goes on from there).
    pub(super) sent: usize,
    /// Its connect, where the ring connected it.
    pub(super) connect: Connect,
}

impl SlotKind {
    /// A stream socket's own part. A UDP socket's slot is read and written
    /// only through [`super::RingDatagram`]'s calls, never as a stream's.
    pub(super) fn stream(&mut self) -> &mut StreamSlot {
        match self {
            SlotKind::Stream(stream) => stream,
            SlotKind::Datagram(_) => unreachable!("a UDP socket's slot used as a stream's"),
        }
    }
}

impl Inner {
    /// Gives up on dropped slot `index`'s socket while its peer still
    /// sends: its receive is cancelled and its close made a reset.
    pub(super) fn abandon(&mut self, index: usize) {
        if let Some(fd) = &self.slots[index].fd {
            reset_on_close(fd);
        }
        self.cancel_receive(index);
    }

    /// For a read of slot `index` that found nothing received: `Ready`
    /// once its stream has ended (`Ok` at its end, else its error), else
    /// `Pending`, the task woken when bytes come.
    pub(super) fn wait_to_read(&mut self, index: usize, cx: &Context<'_>) -> Poll<io::Result<()>> {
        let slot = &mut self.slots[index];
        if let Some(errno) = slot.ended {
            return Poll::Ready(match errno {
                0 => Ok(()),
                errno => Err(io::Error::from_raw_os_error(errno)),
            });
        }
        self.readers_waiting += usize::from(slot.reader.is_none());
        keep_waker(&mut slot.reader, cx.waker());
        if !slot.receiving {
            self.arm_receive(index);
        }
        Poll::Pending
    }

    pub(super) fn start_send(&mut self, index: usize) {
        let slot = &mut self.slots[index];
        let Some(fd) = &slot.fd else { return };
        let rest = &slot.sending[slot.kind.stream().sent..];
        let fixed = index < self.registered;
        let entry = send(fixed, index, fd.as_raw_fd(), rest, libc::MSG_NOSIGNAL).user_data(user_data(
            index,
            slot.generation,
            Kind::Send,
        ));
        slot.sends += 1;
        self.issue(index, &entry);
    }

    /// A kept send of `bytes[..len]` on slot `index`, if nothing of the
    /// slot's is queued or in flight to go before it (see
    /// [`RingSocket::send_kept`]).
    pub(super) fn send_kept(&mut self, index: usize, bytes: &Bytes, len: usize) -> bool {
        let slot = &self.slots[index];
        let Some(fd) = &slot.fd else { return false };
        if len > KEPT_UP_TO
            || slot.is_datagram()
            || slot.broken.is_some()
            || slot.sends > 0
            || !slot.queued.is_empty()
        {
            return false;
        }
        if !self
            .kept
            .iter()
            .any(|kept| kept.as_ptr() == bytes.as_ptr() && kept.len() >= len)
        {
            if self.kept.len() >= MAX_KEPT {
                return false;
            }
            self.kept.push(bytes.clone());
        }
        // MSG_WAITALL: the kernel sends the rest of a short send itself, so
        // the one completion is a failure's.
        let entry = send(
            index < self.registered,
            index,
            fd.as_raw_fd(),
            &bytes[..len],
            libc::MSG_NOSIGNAL | libc::MSG_WAITALL,
        )
        .flags(squeue::Flags::SKIP_SUCCESS)
        .user_data(user_data(index, slot.generation, Kind::KeptSend));
        self.push(&entry);
        true
    }
}

/// A connected socket driven by its worker's [`Ring`].
pub struct RingSocket {
    pub(super) ring: Rc<Ring>,
    pub(super) index: usize,
}

impl AsyncRead for RingSocket {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let mut inner = self.ring.inner.borrow_mut();
        let inner = &mut *inner;
        if inner.slots[self.index].received.is_empty() {
            return inner.wait_to_read(self.index, cx);
        }
        let Slot { received, kind, .. } = &mut inner.slots[self.index];
        let stream = kind.stream();
        while buf.remaining() > 0 {
            let Some(&(id, len)) = received.front() else {
                break;
            };
            let bytes = &front_bytes(stream, &inner.provided, &inner.stamping, id, len)[stream.consumed..];
            let n = bytes.len().min(buf.remaining());
            buf.put_slice(&bytes[..n]);
            stream.consumed += n;
            if stream.consumed == len as usize {
                received.pop_front();
                stream.consumed = 0;
                inner.provided.give_back(id);
                if stream.stamped {
                    // One buffer per read, so that what a read returns
                    // was all received at its stamp (`received_at`).
                    break;
                }
            }
        }
        Poll::Ready(Ok(()))
    }
}

impl RingSocket {
    /// Lets `take` read the oldest received bytes where the kernel put
    /// them, in the ring's buffer, and consumes as many as it says (at most
    /// all it was given): the fast path reads a whole response there
    /// instead of copying it out first. `None`, without calling `take`,
    /// when nothing received is waiting.
    pub fn take_in_place<T>(&mut self, take: impl FnOnce(&[u8]) -> (usize, T)) -> Option<T> {
        let mut inner = self.ring.inner.borrow_mut();
        let inner = &mut *inner;
        let Slot { received, kind, .. } = &mut inner.slots[self.index];
        let stream = kind.stream();
        let &(id, len) = received.front()?;
        let waiting = &front_bytes(stream, &inner.provided, &inner.stamping, id, len)[stream.consumed..];
        let (n, out) = take(waiting);
        stream.consumed += n.min(waiting.len());
        if stream.consumed == len as usize {
            received.pop_front();
            stream.consumed = 0;
            inner.provided.give_back(id);
        }
        Some(out)
    }

    /// When the kernel received the bytes read last (the buffer the last
    /// read took bytes from), on a ring that stamps them
    /// ([`Ring::stamp_receives`]).
    pub fn received_at(&self) -> Option<Instant> {
        match &self.ring.inner.borrow().slots[self.index].kind {
            SlotKind::Stream(stream) => stream.read_stamp,
            SlotKind::Datagram(_) => None,
        }
    }

    /// Whether nothing received waits to be read and the stream goes on:
    /// then, as for a read that found nothing, the task is woken when
    /// bytes come.
    pub fn nothing_received(&mut self, cx: &Context<'_>) -> bool {
        let mut inner = self.ring.inner.borrow_mut();
        inner.slots[self.index].received.is_empty() && inner.wait_to_read(self.index, cx).is_pending()
    }

    /// Queues all of `data` for the end of the turn, or none of it: `false`
    /// when an earlier send failed or the queue lacks room, so a caller can
    /// take the general write path with nothing sent.
    pub fn queue_whole(&mut self, data: &[u8]) -> bool {
        let mut inner = self.ring.inner.borrow_mut();
        let slot = &inner.slots[self.index];
        if slot.broken.is_some() || SEND_QUEUE.saturating_sub(slot.queued.len()) < data.len() {
            return false;
        }
        inner.queue_send(self.index, data);
        true
    }

    /// Sends `bytes[..len]` from where they are, with the turn's other
    /// sends, and with no completion at all when the send succeeds: the
    /// ring keeps a handle on `bytes` (which never change) for as long as
    /// the kernel may read them, so it has no buffer to take back. A
    /// failed send breaks the socket for later writes, as any send's
    /// failure does. `false` (nothing sent) when the send is larger than a
    /// few kilobytes, something of this socket's is queued or in flight to
    /// go first, an earlier send failed, or the ring keeps too many buffers
    /// already: then the caller queues a copy.
    ///
    /// Only for a connection whose next send waits for the peer's answer
    /// to this one (a request, then its response): with no completion,
    /// the ring cannot know that this send has gone when the next comes.
    pub fn send_kept(&mut self, bytes: &Bytes, len: usize) -> bool {
        self.ring.inner.borrow_mut().send_kept(self.index, bytes, len)
    }
}

impl AsyncWrite for RingSocket {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        let mut inner = self.ring.inner.borrow_mut();
        let slot = &mut inner.slots[self.index];
        if let Some(errno) = slot.broken {
            return Poll::Ready(Err(io::Error::from_raw_os_error(errno)));
        }
        let room = SEND_QUEUE.saturating_sub(slot.queued.len());
        if room == 0 {
            keep_waker(&mut slot.writer, cx.waker());
            return Poll::Pending;
        }
        let n = data.len().min(room);
        inner.queue_send(self.index, &data[..n]);
        Poll::Ready(Ok(n))
    }

    /// Queued bytes go out at the end of the turn, in order: nothing to
    /// wait for here but an earlier send's failure.
    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let inner = self.ring.inner.borrow();
        Poll::Ready(match inner.slots[self.index].broken {
            Some(errno) => Err(io::Error::from_raw_os_error(errno)),
            None => Ok(()),
        })
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.poll_flush(cx)
    }
}

impl Drop for RingSocket {
    fn drop(&mut self) {
        let mut inner = self.ring.inner.borrow_mut();
        let slot = &mut inner.slots[self.index];
        slot.dropped = true;
        slot.queued.clear();
        if !slot.is_datagram()
            && !slot.received.is_empty()
            && let Some(fd) = &slot.fd
        {
            // Bytes came that nobody will read. The kernel resets a socket
            // closed with bytes unread, but these left its queue for the
            // ring's buffers, so it would close it gracefully: a server
            // still sending (a flood, a response cut short) would then go on
            // holding its unsent bytes for a peer that has gone, waiting on
            // a window that never opens. Hundreds of connections failed
            // against such a server held gigabytes of the kernel's TCP
            // memory, and every other connection on the machine lost
            // packets.
            reset_on_close(fd);
        }
        if slot.in_flight == 0 {
            inner.release(self.index);
            return;
        }
        if slot.is_datagram() {
            // A UDP socket has no end of stream to end its receive with.
            inner.cancel_receive(self.index);
            return;
        }
        if slot.connecting() {
            // Nothing else is in flight before the connect is done.
            inner.cancel_connect(self.index);
            return;
        }
        if let Some(fd) = &slot.fd {
            // Ends the armed receive (it completes with the end of stream),
            // so the slot and its descriptor are freed with it; a plain close
            // would leave the kernel's reference, and the receive, waiting
            // on the peer.
            // SAFETY: a plain syscall on a descriptor this slot owns.
            unsafe { libc::shutdown(fd.as_raw_fd(), libc::SHUT_RDWR) };
        }
    }
}

/// Makes the socket's close a reset (no lingering): its peer learns at
/// once that the connection is gone, and both sides' buffers are freed.
pub(super) fn reset_on_close(socket: &impl AsRawFd) {
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: a plain syscall with a pointer to a live linger and its size.
    // Its failure leaves a graceful close, as before.
    unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&raw const linger).cast(),
            size_of::<libc::linger>() as libc::socklen_t,
        )
    };
}

/// The bytes of a stream's oldest received buffer, `id` holding `len` of
/// them; a stamped buffer's stamp becomes the stream's when it is first read.
fn front_bytes<'a>(
    slot: &mut StreamSlot,
    provided: &'a Provided,
    stamping: &Option<stamp::Stamping>,
    id: u16,
    len: u32,
) -> &'a [u8] {
    let len = len as usize;
    match stamping {
        Some(stamping) if slot.stamped => {
            let buffer = provided.bytes(id, stamp::PAYLOAD_AT + len);
            if slot.consumed == 0 {
                slot.read_stamp = stamping.received_at(buffer);
            }
            &buffer[stamp::PAYLOAD_AT..]
        }
        _ => provided.bytes(id, len),
    }
}
