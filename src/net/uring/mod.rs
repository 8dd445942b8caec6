//! io_uring sockets: one ring per worker thread, every socket of that
//! worker driven through completions instead of readiness.
//!
//! tokio stays the executor (its timers, `select!`), while the pacer sleeps
//! on the ring itself (`timer`);
//! the ring's own descriptor (or the eventfd it signals) sits in tokio's
//! epoll, readable when completions are waiting. [`Ring::run`] wraps a
//! worker's phase: before each poll it reaps the completions (waking the
//! loops they belong to), and after it submits, in one `io_uring_enter`,
//! every send that poll queued. The wakes a turn gives itself stay in the
//! turn (`turn`), and the completions its own `io_uring_enter` posts do not
//! signal the eventfd, so a turn of the worker costs one `epoll_wait` and
//! one or two `io_uring_enter` however many connections it served, where
//! readiness costs a `write` and a `read` per request.
//!
//! Receives are multishot, into a ring of buffers the kernel picks from
//! (provided buffers) shared by all the worker's sockets: memory is per
//! worker, not per connection, and a receive is armed once per connection,
//! not once per response. Writes are copied into a small per-connection
//! queue and sent at the end of the turn, all of a connection's writes of
//! one turn in one send. The closed model's own HTTP/1.1 request is not
//! copied: it goes from the run's bytes, which the ring keeps a handle on,
//! and its send posts no completion unless it fails (there is no buffer
//! to take back), so a request and its response cost one completion.
//!
//! A worker whose every request loop waits for a response may instead
//! wait in `io_uring_enter` for a few completions at once ([`Batch`]): one
//! kernel entry and one wake for several responses. Its stream sockets then
//! have the kernel stamp what they receive (`stamp`), so that each response
//! is still timed from its arrival, not from the end of the wait.
//!
//! A [`RingSocket`] is `AsyncRead + AsyncWrite`, so HTTP/1.1, HTTP/2 and
//! TLS run over it unchanged; a [`RingDatagram`] carries HTTP/3's UDP
//! (`datagram`). Written by hand rather than through a
//! completion runtime: it is the worker's I/O loop, the product's core, and
//! it must keep tokio's timers and the pacer as they are.
//!
//! Here are the ring, its turn and the table of slots, one per socket (what
//! every socket keeps, then its kind's own part: `socket`'s for TCP,
//! `datagram`'s for UDP); `queue` pushes, submits and reaps the ring's
//! operations, `provided` holds the provided buffers, and `connect` the
//! connects made on the ring.

mod connect;
mod datagram;
mod enter;
mod provided;
mod queue;
mod socket;
mod stamp;
mod timer;
mod turn;

pub use connect::Connecting;
pub use datagram::RingDatagram;
pub use provided::MAX_BUFFERS;
pub use socket::RingSocket;
pub use timer::RingSleep;

use bytes::Bytes;
use datagram::DatagramSlot;
use io_uring::{IoUring, cqueue, opcode, squeue, types};
use provided::{BUFFER_GROUP, Provided};
use socket::StreamSlot;
use std::cell::RefCell;
use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::rc::Rc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;
use tokio::io::unix::AsyncFd;
use turn::TurnWaker;

/// Passes of one turn of [`Ring::run`] at most: a turn whose every pass
/// wakes more (a server that never lets up) gives tokio the thread back
/// after this many, so its timers (the request timeout, the run's end) run.
const MAX_PASSES: usize = 8;
/// Submission queue entries: a turn queues at most a send per connection
/// (and a receive for the few re-armed); a fuller queue is submitted early.
const QUEUE_ENTRIES: u32 = 1024;
/// Completion queue entries: a multishot receive per connection and the
/// turn's sends may all complete between two reaps (10,000 connections); a
/// full queue spills into the kernel's overflow list, allocated per entry.
const COMPLETION_ENTRIES: u32 = 32 * 1024;
/// Sockets a ring registers with the kernel (registered files skip a
/// descriptor lookup per operation); more use plain descriptors.
const REGISTERED_FILES: u32 = 16 * 1024;
/// A connection's queued writes at most; a writer past it waits for the
/// send in flight (a large body goes out in pieces of this size).
const SEND_QUEUE: usize = 64 * 1024;
/// How long dropping a ring waits for the kernel to cancel what is still in
/// flight before it gives the buffers up for lost (never freed).
const CANCEL_WAIT: Duration = Duration::from_millis(500);

/// What a completion is for, in its `user_data`: the slot's index in the
/// low 32 bits, its generation's low 30 bits above, the kind in the top
/// two (both set: a connect).
const SEND_BIT: u64 = 1 << 63;
/// A kept send ([`RingSocket::send_kept`]): its completion comes only when
/// it failed.
const KEPT_BIT: u64 = 1 << 62;
const GENERATION_MASK: u32 = 0x3fff_ffff;

/// What a completion says it is for.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    Receive,
    Send,
    KeptSend,
    Connect,
}

fn user_data(index: usize, generation: u32, kind: Kind) -> u64 {
    let kind = match kind {
        Kind::Receive => 0,
        Kind::Send => SEND_BIT,
        Kind::KeptSend => KEPT_BIT,
        Kind::Connect => SEND_BIT | KEPT_BIT,
    };
    kind | (u64::from(generation & GENERATION_MASK) << 32) | index as u64
}

fn slot_of(user_data: u64) -> (usize, u32, Kind) {
    let index = (user_data & 0xffff_ffff) as usize;
    let generation = ((user_data >> 32) as u32) & GENERATION_MASK;
    let kind = match (user_data & SEND_BIT != 0, user_data & KEPT_BIT != 0) {
        (true, true) => Kind::Connect,
        (true, false) => Kind::Send,
        (false, true) => Kind::KeptSend,
        (false, false) => Kind::Receive,
    };
    (index, generation, kind)
}

/// One socket's state in the ring, kept until the kernel is done with it:
/// what every socket has, and what only its kind has (`kind`).
#[derive(Default)]
struct Slot {
    fd: Option<OwnedFd>,
    generation: u32,
    /// Buffers received and not yet read: id and length (of the bytes
    /// received, which a stamped buffer holds from `stamp::PAYLOAD_AT`).
    /// A UDP socket receives a message per buffer, from the datagram
    /// buffers.
    received: VecDeque<(u16, u32)>,
    receiving: bool,
    /// End of the stream (0) or the receive's error (an errno).
    ended: Option<i32>,
    reader: Option<Waker>,
    writer: Option<Waker>,
    /// Written since the last send was submitted (a UDP socket's: its
    /// batches of datagrams).
    queued: Vec<u8>,
    /// Handed to the kernel.
    sending: Vec<u8>,
    /// Sends of `sending` in flight: at most one for a TCP socket, one per
    /// batch for a UDP socket's.
    sends: u32,
    /// A send's error (an errno): every later write fails with it.
    broken: Option<i32>,
    /// Listed in `Inner::to_send`.
    listed: bool,
    /// The socket was dropped; the slot is freed with its last operation.
    dropped: bool,
    /// Its receive is being cancelled.
    cancelling: bool,
    /// Operations in flight in the kernel.
    in_flight: u32,
    kind: SlotKind,
}

/// What only one kind of socket keeps in its slot.
enum SlotKind {
    /// A TCP socket's ([`RingSocket`]).
    Stream(StreamSlot),
    /// A UDP socket's ([`RingDatagram`]).
    Datagram(DatagramSlot),
}

impl Default for SlotKind {
    fn default() -> Self {
        SlotKind::Stream(StreamSlot::default())
    }
}

impl Slot {
    fn wake_writer(&mut self) {
        if let Some(waker) = self.writer.take() {
            waker.wake();
        }
    }

    fn is_datagram(&self) -> bool {
        matches!(self.kind, SlotKind::Datagram(_))
    }

    /// Whether the kernel stamps what the socket receives (`stamp`).
    fn stamped(&self) -> bool {
        matches!(&self.kind, SlotKind::Stream(stream) if stream.stamped)
    }

    /// Whether the ring's connect of the socket is still going.
    fn connecting(&self) -> bool {
        matches!(&self.kind, SlotKind::Stream(stream) if matches!(stream.connect, connect::Connect::Going { .. }))
    }
}

struct Inner {
    uring: IoUring,
    /// How this thread names the ring when it enters it.
    entry: enter::Entry,
    slots: Vec<Slot>,
    free: Vec<usize>,
    provided: Provided,
    /// Where UDP sockets receive, made with the first of them.
    datagrams: Option<datagram::Receiving>,
    /// Sockets the ring was made for (sizes the datagram buffers).
    connections: usize,
    /// Slots with queued bytes to send at the end of the turn.
    to_send: Vec<usize>,
    /// Entries pushed and not yet submitted.
    unsubmitted: bool,
    /// Operations in flight, all slots together.
    in_flight: u64,
    /// Completions reaped, handled after the queue is released.
    reaped: Vec<cqueue::Entry>,
    /// Slots below this index have their socket in the ring's table of
    /// registered files, at the slot's index.
    registered: usize,
    /// The ring signals an eventfd (its completion work is deferred).
    signalled: bool,
    /// The pacer's sleep.
    timer: timer::TimerSlot,
    /// Sockets whose task waits for bytes (a reader's waker is kept).
    readers_waiting: usize,
    /// Stream sockets adopted from now on have what they receive stamped.
    stamping: Option<stamp::Stamping>,
    /// A socket refused the stamps: the ring no longer waits for batches.
    stamps_refused: bool,
    /// What kept sends were sent from: held until the ring is gone, after
    /// `uring` (declared first, so dropped first, closing the ring).
    kept: Vec<Bytes>,
    /// Completions reaped for sends, kept or not.
    #[cfg(test)]
    send_completions: usize,
}

/// What tokio's reactor watches to learn that the ring has work: the
/// ring's own descriptor (readable with completions waiting), or, when the
/// kernel defers completion work until asked, an eventfd it signals when
/// the first work of a batch is queued.
enum Watched {
    Ring(RawFd),
    Event(OwnedFd),
}

impl AsRawFd for Watched {
    fn as_raw_fd(&self) -> RawFd {
        match self {
            Watched::Ring(fd) => *fd,
            Watched::Event(fd) => fd.as_raw_fd(),
        }
    }
}

/// One worker's ring. Not `Send`: a ring belongs to the thread that made
/// it (it is set up for a single issuer).
pub struct Ring {
    /// First, so it leaves tokio's reactor before the ring's fd closes.
    ready: AsyncFd<Watched>,
    inner: RefCell<Inner>,
    batch: std::cell::Cell<Option<Batch>>,
}

/// How a ring waits for its completions in a batch.
#[derive(Clone, Copy, Debug)]
pub struct Batch {
    /// The worker's sockets that responses come on: the ring waits in the
    /// kernel only while every one of them waits for bytes.
    pub readers: usize,
    /// Completions it waits for at most.
    pub size: u32,
    /// How long it waits at most.
    pub linger: Duration,
}

impl Ring {
    /// A ring for about `connections` sockets, its buffers registered, on
    /// this thread's runtime.
    pub fn new(connections: usize) -> io::Result<Rc<Ring>> {
        let (uring, deferred) = build_uring()?;
        let provided = Provided::new(connections);
        provided.register(&uring)?;
        // Without a table (a low descriptor limit) sockets go by descriptor.
        let registered = match uring.submitter().register_files_sparse(REGISTERED_FILES) {
            Ok(()) => REGISTERED_FILES as usize,
            Err(_) => 0,
        };
        let watched = match deferred {
            true => {
                // SAFETY: a plain syscall; the descriptor is owned at once.
                let raw = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
                if raw < 0 {
                    return Err(io::Error::last_os_error());
                }
                // SAFETY: `raw` is a fresh descriptor nobody else owns.
                let event = unsafe { OwnedFd::from_raw_fd(raw) };
                uring.submitter().register_eventfd(event.as_raw_fd())?;
                Watched::Event(event)
            }
            false => Watched::Ring(uring.as_raw_fd()),
        };
        // SAFETY: the descriptor is open until `ready` drops: an eventfd
        // it owns, or the ring's, which `inner` closes after `ready`
        // (declared first) has left the reactor.
        let ready = unsafe { AsyncFd::register_with_interest(watched, tokio::io::Interest::READABLE) }?;
        // Last, when nothing can fail any more: a ring given up above
        // leaves nothing in the thread's table (only `Drop` takes it out).
        let entry = enter::Entry::register(&uring);
        Ok(Rc::new(Ring {
            ready,
            inner: RefCell::new(Inner {
                uring,
                entry,
                slots: Vec::new(),
                free: Vec::new(),
                provided,
                datagrams: None,
                connections,
                to_send: Vec::new(),
                unsubmitted: false,
                in_flight: 0,
                reaped: Vec::with_capacity(QUEUE_ENTRIES as usize),
                registered,
                signalled: deferred,
                timer: timer::TimerSlot::default(),
                readers_waiting: 0,
                stamping: None,
                stamps_refused: false,
                kept: Vec::new(),
                #[cfg(test)]
                send_completions: 0,
            }),
            batch: std::cell::Cell::new(None),
        }))
    }

    /// Takes over a stream socket connected elsewhere (the tests'; a
    /// run's are connected on the ring, see [`Ring::connect`]).
    #[cfg(test)]
    fn adopt(self: &Rc<Ring>, fd: OwnedFd) -> RingSocket {
        self.adopt_as(fd, false)
    }

    /// Takes over a connected socket, a UDP one if `datagram`.
    fn adopt_as(self: &Rc<Ring>, fd: OwnedFd, datagram: bool) -> RingSocket {
        let socket = self.adopt_unconnected_as(fd, datagram);
        // Armed at once, so the first response finds it waiting.
        self.inner.borrow_mut().arm_receive(socket.index);
        socket
    }

    /// Takes over a stream socket not yet connected: nothing is armed.
    fn adopt_unconnected(self: &Rc<Ring>, fd: OwnedFd) -> RingSocket {
        self.adopt_unconnected_as(fd, false)
    }

    fn adopt_unconnected_as(self: &Rc<Ring>, fd: OwnedFd, datagram: bool) -> RingSocket {
        let mut inner = self.inner.borrow_mut();
        let index = match inner.free.pop() {
            Some(index) => index,
            None => {
                inner.slots.push(Slot::default());
                inner.slots.len() - 1
            }
        };
        if index < inner.registered
            && inner
                .uring
                .submitter()
                .register_files_update(index as u32, &[fd.as_raw_fd()])
                .is_err()
        {
            // The table refused it: this and later slots go by descriptor.
            inner.registered = index;
        }
        let stamped = !datagram
            && inner.stamping.is_some()
            && match stamp::enable(fd.as_raw_fd()) {
                Ok(()) => true,
                Err(_) => {
                    inner.stamps_refused = true;
                    false
                }
            };
        let kind = match datagram {
            true => SlotKind::Datagram(DatagramSlot::default()),
            false => SlotKind::Stream(StreamSlot {
                stamped,
                ..StreamSlot::default()
            }),
        };
        let slot = &mut inner.slots[index];
        let generation = slot.generation;
        *slot = Slot {
            fd: Some(fd),
            generation,
            kind,
            ..Slot::default()
        };
        RingSocket {
            ring: self.clone(),
            index,
        }
    }

    /// Runs `work` on this ring: completions are reaped before each poll
    /// of it, and what the poll queued is submitted after it.
    ///
    /// `work` is polled with a turn's own waker: what a turn wakes (the loops
    /// its completions are for, and through them the worker's task) asks
    /// for another pass of the same turn, not for another turn of tokio's
    /// reactor. A turn ends when a pass woke nothing and the kernel holds
    /// nothing more, or after a few passes, when tokio gets the thread
    /// back to run its timers first.
    pub async fn run<F: Future>(&self, work: F) -> F::Output {
        let mut work = std::pin::pin!(work);
        let (turn, waker) = TurnWaker::new();
        std::future::poll_fn(|cx| {
            let mut in_turn = Context::from_waker(&waker);
            for _ in 0..MAX_PASSES {
                turn.begin(cx);
                self.poll_completions(cx);
                let out = work.as_mut().poll(&mut in_turn);
                if out.is_pending() && !turn.woken() && self.wait_for_batch() {
                    // The sends went out with the wait; the next pass
                    // reaps what it waited for.
                    turn.end();
                    continue;
                }
                let left = {
                    let mut inner = self.inner.borrow_mut();
                    inner.submit();
                    inner.work_left()
                };
                let again = turn.end();
                if out.is_ready() {
                    return out;
                }
                if !again && !left {
                    return Poll::Pending;
                }
            }
            cx.waker().wake_by_ref();
            Poll::Pending
        })
        .await
    }

    /// Has the kernel stamp what the stream sockets adopted from now on
    /// receive, for [`RingSocket::received_at`]; needed to wait for batches.
    pub fn stamp_receives(&self) {
        self.inner.borrow_mut().stamping = Some(stamp::Stamping::new());
    }

    /// Sets how the ring waits for completions (`None`: in tokio's reactor,
    /// as for any other descriptor).
    pub fn set_batch(&self, batch: Option<Batch>) {
        self.batch.set(batch);
    }

    /// With a batch set and every loop waiting for bytes: waits in the
    /// kernel for the batch's completions, or its linger, and says so
    /// (`true`: the turn goes on with another pass).
    fn wait_for_batch(&self) -> bool {
        let Some(batch) = self.batch.get() else {
            return false;
        };
        let mut inner = self.inner.borrow_mut();
        // Unstamped, a response read after the wait would be timed late.
        let stamped = inner.stamping.is_some() && !inner.stamps_refused;
        if !stamped || inner.readers_waiting < batch.readers.max(1) {
            return false;
        }
        let responses = (batch.size as usize).min(inner.readers_waiting);
        let before = inner.in_flight;
        inner.start_sends();
        // Each send started here posts a completion of its own, which is
        // not what the wait is for.
        let sends = (inner.in_flight - before) as usize;
        inner.wait_in_kernel(responses + sends, batch.linger);
        true
    }

    /// Reaps every completion, running the work the kernel deferred, and
    /// asks tokio to wake this task when the ring signals more.
    fn poll_completions(&self, cx: &mut Context<'_>) {
        // The signal is taken (an error means the reactor lost the fd:
        // then the ring is reaped each turn anyway).
        while let Poll::Ready(Ok(mut guard)) = self.ready.poll_read_ready(cx) {
            guard.clear_ready();
        }
        let mut inner = self.inner.borrow_mut();
        inner.run_deferred();
        inner.reap();
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        let inner = self.inner.get_mut();
        inner.cancel_everything();
        inner.entry.unregister(&inner.uring);
    }
}

/// The ring with the features the backend uses, and whether its
/// completion work is deferred until this thread asks for it (6.1 and
/// later: the kernel then runs a whole batch of receives in one go, when
/// the worker enters the ring, instead of interrupting it for each). Older
/// kernels get the next best; what a kernel lacks only costs speed, except
/// the provided buffers and multishot receive, which [`probe`] checks.
fn build_uring() -> io::Result<(IoUring, bool)> {
    let deferred = IoUring::builder()
        .setup_cqsize(COMPLETION_ENTRIES)
        .setup_single_issuer()
        .setup_defer_taskrun()
        .setup_taskrun_flag()
        .build(QUEUE_ENTRIES);
    if let Ok(uring) = deferred {
        return Ok((uring, true));
    }
    let cooperative = IoUring::builder()
        .setup_cqsize(COMPLETION_ENTRIES)
        .setup_single_issuer()
        .setup_coop_taskrun()
        .build(QUEUE_ENTRIES);
    match cooperative {
        Ok(uring) => Ok((uring, false)),
        Err(_) => Ok((
            IoUring::builder()
                .setup_cqsize(COMPLETION_ENTRIES)
                .build(QUEUE_ENTRIES)?,
            false,
        )),
    }
}

/// A send of `bytes` (which must stay put until it completes) on slot
/// `index`'s socket, by its place in the table of registered files when it
/// has one (`fixed`), else by descriptor.
fn send(fixed: bool, index: usize, fd: RawFd, bytes: &[u8], flags: i32) -> squeue::Entry {
    let (at, len) = (bytes.as_ptr(), bytes.len() as u32);
    match fixed {
        true => opcode::Send::new(types::Fixed(index as u32), at, len),
        false => opcode::Send::new(types::Fd(fd), at, len),
    }
    .flags(flags)
    .build()
}

/// Whether this kernel (and this process's sandbox) runs what the backend
/// needs: a ring, provided buffers and a multishot receive, tried on a
/// socket pair. The error says what was refused.
pub fn probe() -> io::Result<()> {
    let (mut uring, _) = build_uring()?;
    let mut provided = Provided::new(1);
    // `provided` outlives the ring (dropped after it, below).
    provided.register(&uring)?;
    let (left, right) = std::os::unix::net::UnixStream::pair()?;
    use std::io::Write;
    (&left).write_all(b"x")?;
    let entry = opcode::RecvMulti::new(types::Fd(right.as_raw_fd()), BUFFER_GROUP)
        .build()
        .user_data(1);
    // SAFETY: the socket and the buffers outlive the operation: it is
    // cancelled and reaped below before either is dropped.
    unsafe { uring.submission().push(&entry) }.map_err(io::Error::other)?;
    uring.submit_and_wait(1)?;
    let cqe = uring
        .completion()
        .next()
        .ok_or_else(|| io::Error::other("no completion"))?;
    let result = cqe.result();
    if result < 0 {
        return Err(io::Error::from_raw_os_error(-result));
    }
    if cqueue::more(cqe.flags()) {
        // Still armed: end it before the socket and buffers go.
        let cancel = opcode::AsyncCancel2::new(types::CancelBuilder::any())
            .build()
            .user_data(2);
        // SAFETY: a cancel points at no memory.
        unsafe { uring.submission().push(&cancel) }.map_err(io::Error::other)?;
        uring.submit_and_wait(2)?;
    }
    if let Some(id) = cqueue::buffer_select(cqe.flags()) {
        provided.give_back(id);
    }
    drop(uring);
    drop(provided);
    Ok(())
}

#[cfg(test)]
pub(super) mod tests;
