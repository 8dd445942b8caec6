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

mod connect;
mod datagram;
mod enter;
mod stamp;
mod timer;
mod turn;

pub use connect::Connecting;
pub use datagram::RingDatagram;
pub use timer::RingSleep;

use crate::wake::keep_waker;
use bytes::Bytes;
use io_uring::types::BufRingEntry;
use io_uring::{IoUring, cqueue, opcode, squeue, types};
use std::alloc::Layout;
use std::cell::RefCell;
use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicU16, Ordering};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
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
/// Provided receive buffers per worker: two per connection, between these
/// bounds, each this large. Responses of a few hundred bytes take one each
/// and a buffer goes back as soon as its bytes are read; a receive that
/// finds none left ends and is armed again when its socket is next read.
/// 50 connections hold 256 KiB, 512 and more 2 MiB, per worker.
const MIN_BUFFERS: usize = 128;
/// The most buffers a worker's pool holds: up to this many connections it
/// has at least one for each, whatever they all have waiting.
pub const MAX_BUFFERS: usize = 1024;
const BUFFER_SIZE: usize = 2048;
/// Sockets a ring registers with the kernel (registered files skip a
/// descriptor lookup per operation); more use plain descriptors.
const REGISTERED_FILES: u32 = 16 * 1024;
const BUFFER_GROUP: u16 = 0;
/// A connection's queued writes at most; a writer past it waits for the
/// send in flight (a large body goes out in pieces of this size).
const SEND_QUEUE: usize = 64 * 1024;
/// The largest kept send. With the request before it answered, that much
/// finds room in the socket's buffer (4 KiB at the smallest) and goes at
/// once; a large body could wait for room, still going when the next send
/// comes (a server may answer before it has read the whole request), and
/// the two would mix on the wire.
const KEPT_UP_TO: usize = 4096;
/// Buffers a ring keeps for kept sends at most (a run sends one request
/// from one buffer); past them, sends are copied into the socket's queue.
const MAX_KEPT: usize = 8;
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

/// The provided buffers: their memory, and the ring through which the
/// kernel is handed them (and picks them for receives).
struct Provided {
    entries: *mut BufRingEntry,
    /// Buffers, a power of two.
    count: usize,
    /// Bytes in each.
    size: usize,
    /// The group a receive names to take one of these.
    group: u16,
    memory: Box<[u8]>,
    /// The ring's tail as this side last published it.
    tail: u16,
}

impl Provided {
    fn layout(count: usize) -> Layout {
        // The kernel wants the ring page-aligned.
        Layout::from_size_align(count * size_of::<BufRingEntry>(), 4096).expect("a valid layout")
    }

    /// Buffers for `connections` stream sockets.
    fn new(connections: usize) -> Provided {
        let count = (connections * 2)
            .next_power_of_two()
            .clamp(MIN_BUFFERS, MAX_BUFFERS);
        Provided::with(count, BUFFER_SIZE, BUFFER_GROUP)
    }

    /// `count` buffers (a power of two) of `size` bytes, as group `group`.
    /// The memory is allocated zeroed, so a page is only made resident
    /// once a receive writes to it.
    fn with(count: usize, size: usize, group: u16) -> Provided {
        // SAFETY: a non-zero size; null is checked below.
        let entries = unsafe { std::alloc::alloc_zeroed(Self::layout(count)) }.cast::<BufRingEntry>();
        if entries.is_null() {
            std::alloc::handle_alloc_error(Self::layout(count));
        }
        let mut provided = Provided {
            entries,
            count,
            size,
            group,
            memory: vec![0u8; count * size].into_boxed_slice(),
            tail: 0,
        };
        for id in 0..count {
            provided.give_back(id as u16);
        }
        provided
    }

    /// Registers the buffers with `uring` as their group.
    fn register(&self, uring: &IoUring) -> io::Result<()> {
        // SAFETY: the entries stay allocated, unmoved, until the ring is
        // gone (`Drop for Ring` waits for the kernel or leaks them).
        unsafe {
            uring.submitter().register_buf_ring_with_flags(
                self.entries as u64,
                self.count as u16,
                self.group,
                0,
            )
        }
    }

    fn bytes(&self, id: u16, len: usize) -> &[u8] {
        let start = usize::from(id) * self.size;
        &self.memory[start..start + len]
    }

    /// Gives the memory up for lost, never freed: the kernel may still
    /// write to it (see `Drop for Ring`).
    fn leak(&mut self) {
        std::mem::forget(std::mem::replace(&mut self.memory, Box::new([])));
        self.entries = std::ptr::null_mut();
    }

    /// Hands buffer `id` (back) to the kernel.
    fn give_back(&mut self, id: u16) {
        let at = usize::from(self.tail & (self.count as u16).wrapping_sub(1));
        let addr = self.memory.as_ptr() as u64 + (usize::from(id) * self.size) as u64;
        // SAFETY: `at` < BUFFERS, inside the allocation; the kernel reads an
        // entry only once the tail below covers it, so writing it is ours.
        let entry = unsafe { &mut *self.entries.add(at) };
        entry.set_addr(addr);
        entry.set_len(self.size as u32);
        entry.set_bid(id);
        self.tail = self.tail.wrapping_add(1);
        // SAFETY: the tail is a u16 inside the first entry, aligned, shared
        // with the kernel, which reads it: published with release ordering
        // so the entry written above is seen first.
        unsafe {
            let tail = BufRingEntry::tail(self.entries).cast::<AtomicU16>();
            (*tail).store(self.tail, Ordering::Release);
        }
    }
}

impl Drop for Provided {
    fn drop(&mut self) {
        if self.entries.is_null() {
            return; // leaked, see `Drop for Ring`
        }
        // SAFETY: allocated in `new` with this layout; the ring is dropped
        // (or the kernel is done with it) before this runs, see `Ring`.
        unsafe { std::alloc::dealloc(self.entries.cast(), Self::layout(self.count)) };
    }
}

/// One socket's state in the ring, kept until the kernel is done with it.
#[derive(Default)]
struct Slot {
    fd: Option<OwnedFd>,
    generation: u32,
    /// Buffers received and not yet read: id and length (of the bytes
    /// received, which a stamped buffer holds from `stamp::PAYLOAD_AT`).
    received: VecDeque<(u16, u32)>,
    /// The kernel stamps what the socket receives (`stamp`).
    stamped: bool,
    /// When the kernel received the buffer read last, where stamped.
    read_stamp: Option<Instant>,
    /// Bytes of the front buffer already read.
    consumed: usize,
    receiving: bool,
    /// End of the stream (0) or the receive's error (an errno).
    ended: Option<i32>,
    reader: Option<Waker>,
    writer: Option<Waker>,
    /// Written since the last send was submitted.
    queued: Vec<u8>,
    /// Handed to the kernel; `sent` of it done.
    sending: Vec<u8>,
    sent: usize,
    /// Sends of `sending` in flight: at most one for a TCP socket, one per
    /// batch for a UDP socket's.
    sends: u32,
    /// A UDP socket's ([`RingDatagram`]): it receives a message per
    /// buffer, from the datagram buffers, and `queued` holds these batches
    /// of datagrams.
    datagram: bool,
    batches: Vec<datagram::Batch>,
    /// The message headers of the GSO batches in flight.
    headers: Vec<datagram::GsoHeader>,
    /// A GSO send failed (a device without segmentation offload).
    gso_refused: bool,
    /// A send's error (an errno): every later write fails with it.
    broken: Option<i32>,
    /// Listed in `Inner::to_send`.
    listed: bool,
    /// The socket was dropped; the slot is freed with its last operation.
    dropped: bool,
    /// Its receive is being cancelled.
    cancelling: bool,
    /// Its connect, where the ring connected it.
    connect: connect::Connect,
    /// Operations in flight in the kernel.
    in_flight: u32,
}

impl Slot {
    fn wake_writer(&mut self) {
        if let Some(waker) = self.writer.take() {
            waker.wake();
        }
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
        let slot = &mut inner.slots[index];
        let generation = slot.generation;
        *slot = Slot {
            fd: Some(fd),
            generation,
            datagram,
            stamped,
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

impl Inner {
    /// Reaps the receives that the sockets' shutdowns ended (each dropped
    /// socket is shut down), whose ends wait as completions or as deferred
    /// work, until none is left or `began` is `CANCEL_WAIT` ago. Why before
    /// a cancel of all that is left: for each operation such a cancel
    /// ends, the kernel scans every one still armed, ended or not, so with
    /// 4,000 receives it took about 0.14 s of CPU at the end of a run; this
    /// takes their ends in one kernel entry per 20 (as many as the kernel
    /// runs at each).
    fn take_ended_receives(&mut self, began: Instant) {
        loop {
            self.reap();
            if self.in_flight == 0 || !self.uring.submission().taskrun() || began.elapsed() >= CANCEL_WAIT {
                return;
            }
            self.enter_quietly();
        }
    }

    /// Cancels every operation in flight and waits for their last
    /// completions: until then the kernel may still write into the
    /// buffers and read the send queues.
    fn cancel_everything(&mut self) {
        let began = Instant::now();
        self.take_ended_receives(began);
        if self.in_flight == 0 {
            return;
        }
        let cancel = opcode::AsyncCancel2::new(types::CancelBuilder::any())
            .build()
            .user_data(u64::MAX);
        self.push(&cancel);
        while self.in_flight > 0 && began.elapsed() < CANCEL_WAIT {
            let _ = self.uring.submit_and_wait(1);
            self.reap();
        }
        if self.in_flight > 0 {
            // Better a leak than memory the kernel may still write.
            self.provided.leak();
            if let Some(receiving) = &mut self.datagrams {
                receiving.buffers.leak();
            }
            let slots = std::mem::take(&mut self.slots);
            std::mem::forget(slots);
        }
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

impl Inner {
    /// Pushes one entry, submitting first when the queue is full.
    fn push(&mut self, entry: &squeue::Entry) {
        loop {
            // SAFETY: every entry pushed points only at memory the ring
            // keeps alive until its completion: a slot's send queue (slots
            // are freed only with no operation in flight) and the provided
            // buffers (kept until the ring is done).
            if unsafe { self.uring.submission().push(entry) }.is_ok() {
                self.unsubmitted = true;
                return;
            }
            let _ = self.entry.submit(&mut self.uring);
        }
    }

    /// Adds `data` to socket `index`'s queue, sent at the end of the turn.
    fn queue_send(&mut self, index: usize, data: &[u8]) {
        let slot = &mut self.slots[index];
        slot.queued.extend_from_slice(data);
        if !slot.listed {
            slot.listed = true;
            self.to_send.push(index);
        }
    }

    /// For a read of slot `index` that found nothing received: `Ready`
    /// once its stream has ended (`Ok` at its end, else its error), else
    /// `Pending`, the task woken when bytes come.
    fn wait_to_read(&mut self, index: usize, cx: &Context<'_>) -> Poll<io::Result<()>> {
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

    fn arm_receive(&mut self, index: usize) {
        let slot = &mut self.slots[index];
        let Some(fd) = &slot.fd else { return };
        let fixed = index < self.registered;
        let entry = match (&self.datagrams, &self.stamping) {
            (Some(receiving), _) if slot.datagram => receiving.entry(fixed, index, fd.as_raw_fd()),
            (_, Some(stamping)) if slot.stamped => stamping.entry(fixed, index, fd.as_raw_fd()),
            _ => match fixed {
                true => opcode::RecvMulti::new(types::Fixed(index as u32), BUFFER_GROUP).build(),
                false => opcode::RecvMulti::new(types::Fd(fd.as_raw_fd()), BUFFER_GROUP).build(),
            },
        }
        .user_data(user_data(index, slot.generation, Kind::Receive));
        slot.receiving = true;
        self.issue(index, &entry);
    }

    fn start_send(&mut self, index: usize) {
        let slot = &mut self.slots[index];
        let Some(fd) = &slot.fd else { return };
        let rest = &slot.sending[slot.sent..];
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
    fn send_kept(&mut self, index: usize, bytes: &Bytes, len: usize) -> bool {
        let slot = &self.slots[index];
        let Some(fd) = &slot.fd else { return false };
        if len > KEPT_UP_TO
            || slot.datagram
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

    /// Gives up on dropped slot `index`'s socket while its peer still
    /// sends: its receive is cancelled and its close made a reset.
    fn abandon(&mut self, index: usize) {
        if let Some(fd) = &self.slots[index].fd {
            reset_on_close(fd);
        }
        self.cancel_receive(index);
    }

    /// Ends slot `index`'s multishot receive: it completes, cancelled, and
    /// the slot is freed with it. One cancel per slot: each one makes the
    /// kernel look through every operation in flight.
    fn cancel_receive(&mut self, index: usize) {
        let slot = &mut self.slots[index];
        if !slot.receiving || slot.cancelling {
            return;
        }
        slot.cancelling = true;
        let entry = opcode::AsyncCancel::new(user_data(index, slot.generation, Kind::Receive))
            .build()
            .user_data(u64::MAX);
        self.push(&entry);
    }

    /// Wakes the task waiting to read slot `index`'s socket, if one is,
    /// which then waits no more.
    fn wake_reader(&mut self, index: usize) {
        if let Some(waker) = self.slots[index].reader.take() {
            self.readers_waiting -= 1;
            waker.wake();
        }
    }

    /// A kept send on slot `index` failed, or went out only in part: the
    /// socket is broken for every later write. A completion for a socket
    /// since dropped (an older `generation`) is nobody's.
    fn kept_send_failed(&mut self, index: usize, generation: u32, result: i32) {
        let Some(slot) = self.slots.get_mut(index) else {
            return;
        };
        if slot.fd.is_none() || slot.generation & GENERATION_MASK != generation {
            return;
        }
        slot.broken
            .get_or_insert(if result < 0 { -result } else { libc::EPIPE });
        slot.wake_writer();
        self.wake_reader(index);
    }

    /// An operation on slot `index`'s socket had its last completion.
    fn finished(&mut self, index: usize) {
        self.slots[index].in_flight -= 1;
        self.in_flight -= 1;
    }

    /// Pushes an operation on slot `index`'s socket, counted in flight
    /// until its last completion.
    fn issue(&mut self, index: usize, entry: &squeue::Entry) {
        self.slots[index].in_flight += 1;
        self.in_flight += 1;
        self.push(entry);
    }

    /// Runs the completion work the kernel deferred (the receives that
    /// found data), when it says there is some: one `io_uring_enter` for
    /// the whole batch. The eventfd that told us is never read: tokio
    /// watches it edge-triggered, and each batch writes to it again.
    fn run_deferred(&mut self) {
        if self.uring.submission().taskrun() {
            self.enter_quietly();
        }
    }

    /// Submits what is pushed (running the deferred completion work too),
    /// with the eventfd quiet: the completions this posts are reaped by
    /// this turn, and a signal for them only woke tokio's reactor for a
    /// turn with nothing to do. Work the kernel queued meanwhile went
    /// unsignalled: [`Self::work_left`] tells the turn to take it.
    fn enter_quietly(&mut self) {
        self.quietly(|entry, uring| entry.submit(uring));
    }

    /// Submits what is pushed and waits in the kernel until `want`
    /// completions are posted or `linger` has passed, with the eventfd
    /// quiet as in [`Self::enter_quietly`].
    fn wait_in_kernel(&mut self, want: usize, linger: Duration) {
        let linger = types::Timespec::from(linger);
        let args = types::SubmitArgs::new().timespec(&linger);
        self.quietly(|entry, uring| entry.submit_and_wait(uring, want, &args));
    }

    /// Enters the kernel through `enter` with the eventfd's signal off
    /// meanwhile: what this side reaps itself needs no signal.
    fn quietly(&mut self, enter: impl FnOnce(&enter::Entry, &mut IoUring) -> io::Result<usize>) {
        if self.signalled {
            self.uring.completion().disable_eventfd();
        }
        // An interrupted or busy entry leaves the entries queued for the
        // next one; nothing here waits on its result.
        let _ = enter(&self.entry, &mut self.uring);
        if self.signalled {
            self.uring.completion().enable_eventfd();
            // Against the kernel's flag-then-signal: either it sees the
            // signal back on, or `work_left` sees its flag.
            std::sync::atomic::fence(Ordering::SeqCst);
        }
        self.unsubmitted = false;
    }

    /// Whether completion work or completions are waiting that no signal
    /// may announce.
    fn work_left(&mut self) -> bool {
        self.uring.submission().taskrun() || !self.uring.completion().is_empty()
    }

    /// Starts the sends queued this turn, then submits everything pushed.
    fn submit(&mut self) {
        // Twice at most: a send completed in the first pass may have had
        // more queued behind it (listed again by `sent`), which goes out
        // now rather than at a turn that may be long in coming.
        for _ in 0..2 {
            self.start_sends();
            if self.unsubmitted || self.uring.submission().taskrun() {
                // With deferred work pending this also runs it (the crate
                // adds GETEVENTS): sends and receives done inline are
                // reaped now, their loops woken for another pass of this
                // turn.
                self.enter_quietly();
                self.reap();
            }
            if self.to_send.is_empty() {
                return;
            }
        }
    }

    /// Pushes the sends of the sockets listed in `to_send`.
    fn start_sends(&mut self) {
        let mut listed = std::mem::take(&mut self.to_send);
        for index in listed.drain(..) {
            let slot = &mut self.slots[index];
            slot.listed = false;
            // A send in flight starts the next when it completes.
            if slot.sends > 0 || slot.queued.is_empty() || slot.dropped {
                continue;
            }
            std::mem::swap(&mut slot.queued, &mut slot.sending);
            slot.sent = 0;
            match slot.datagram {
                true => self.start_datagram_sends(index),
                false => self.start_send(index),
            }
        }
        self.to_send = listed;
    }

    fn reap(&mut self) {
        let mut reaped = std::mem::take(&mut self.reaped);
        reaped.extend(self.uring.completion());
        if let Some(stamping) = &mut self.stamping
            && !reaped.is_empty()
        {
            stamping.read_clocks();
        }
        for cqe in reaped.drain(..) {
            if cqe.user_data() == u64::MAX {
                continue; // the cancel-all of `Drop`
            }
            let (index, generation, kind) = slot_of(cqe.user_data());
            if index == timer::TIMER_INDEX {
                self.timer_completed(generation);
                continue;
            }
            #[cfg(test)]
            {
                self.send_completions += usize::from(matches!(kind, Kind::Send | Kind::KeptSend));
            }
            match kind {
                Kind::Send => self.sent(index, cqe.result()),
                Kind::Receive => self.received(index, cqe.result(), cqe.flags()),
                Kind::Connect => self.connected(index, cqe.result()),
                Kind::KeptSend => {
                    // Not counted in flight: the slot may be gone.
                    self.kept_send_failed(index, generation, cqe.result());
                    continue;
                }
            }
            let slot = &mut self.slots[index];
            if slot.dropped && slot.in_flight == 0 {
                self.release(index);
            }
        }
        self.reaped = reaped;
    }

    fn received(&mut self, index: usize, result: i32, flags: u32) {
        let last = !cqueue::more(flags);
        if last {
            self.finished(index);
        }
        let slot = &mut self.slots[index];
        slot.receiving &= !last;
        if slot.datagram && result >= 0 {
            self.datagram_received(index, result, flags);
            return;
        }
        if result > 0 {
            let id = cqueue::buffer_select(flags).expect("a multishot receive picks a buffer");
            let len = match &self.stamping {
                Some(stamping) if slot.stamped => {
                    stamping.payload_len(self.provided.bytes(id, result as usize))
                }
                _ => result as usize,
            };
            if slot.dropped || len == 0 {
                self.provided.give_back(id);
            } else {
                slot.received.push_back((id, len as u32));
            }
            // A stamped receive's end of stream is a message of no bytes.
            if len == 0 && !slot.dropped {
                slot.ended = Some(0);
            }
        } else if result == 0 {
            slot.ended = Some(0);
        } else if -result != libc::ENOBUFS {
            slot.ended = Some(-result);
        }
        if slot.dropped && result > 0 {
            // The peer goes on sending after the shutdown of `Drop`, which
            // ends a receive only once the peer stops: a server that
            // streams without end would keep the receive, and with it the
            // socket and every byte the kernel queues for it, until the run
            // ends.
            self.abandon(index);
            return;
        }
        // ENOBUFS: every buffer is taken; re-armed when this socket is read
        // next, by then buffers are back.
        self.wake_reader(index);
    }

    fn sent(&mut self, index: usize, result: i32) {
        self.finished(index);
        if self.slots[index].datagram {
            self.datagram_sent(index, result);
            return;
        }
        let slot = &mut self.slots[index];
        slot.sends -= 1;
        if result < 0 {
            slot.broken = Some(-result);
            slot.sending.clear();
        } else {
            slot.sent += result as usize;
            if slot.sent < slot.sending.len() && !slot.dropped {
                // A short send (the socket's buffer filled): the rest now.
                self.start_send(index);
                return;
            }
            slot.sending.clear();
            if !slot.queued.is_empty() && !slot.listed {
                slot.listed = true;
                self.to_send.push(index);
            }
        }
        self.slots[index].wake_writer();
    }

    /// Frees a dropped socket's slot once the kernel is done with it.
    fn release(&mut self, index: usize) {
        let slot = &mut self.slots[index];
        let buffers = match &mut self.datagrams {
            Some(receiving) if slot.datagram => &mut receiving.buffers,
            _ => &mut self.provided,
        };
        for (id, _) in slot.received.drain(..) {
            buffers.give_back(id);
        }
        if index < self.registered {
            // The table's reference would keep the socket open.
            let _ = self.uring.submitter().register_files_update(index as u32, &[-1]);
        }
        slot.fd = None;
        slot.connect = connect::Connect::default();
        slot.generation = slot.generation.wrapping_add(1);
        slot.queued = Vec::new();
        slot.sending = Vec::new();
        slot.batches = Vec::new();
        slot.headers = Vec::new();
        self.readers_waiting -= usize::from(slot.reader.take().is_some());
        slot.writer = None;
        self.free.push(index);
    }
}

/// A connected socket driven by its worker's [`Ring`].
pub struct RingSocket {
    ring: Rc<Ring>,
    index: usize,
}

impl AsyncRead for RingSocket {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let mut inner = self.ring.inner.borrow_mut();
        let inner = &mut *inner;
        if inner.slots[self.index].received.is_empty() {
            return inner.wait_to_read(self.index, cx);
        }
        let slot = &mut inner.slots[self.index];
        while buf.remaining() > 0 {
            let Some(&(id, len)) = slot.received.front() else {
                break;
            };
            let bytes = &front_bytes(slot, &inner.provided, &inner.stamping, id, len)[slot.consumed..];
            let n = bytes.len().min(buf.remaining());
            buf.put_slice(&bytes[..n]);
            slot.consumed += n;
            if slot.consumed == len as usize {
                slot.received.pop_front();
                slot.consumed = 0;
                inner.provided.give_back(id);
                if slot.stamped {
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
        let slot = &mut inner.slots[self.index];
        let &(id, len) = slot.received.front()?;
        let waiting = &front_bytes(slot, &inner.provided, &inner.stamping, id, len)[slot.consumed..];
        let (n, out) = take(waiting);
        slot.consumed += n.min(waiting.len());
        if slot.consumed == len as usize {
            slot.received.pop_front();
            slot.consumed = 0;
            inner.provided.give_back(id);
        }
        Some(out)
    }

    /// When the kernel received the bytes read last (the buffer the last
    /// read took bytes from), on a ring that stamps them
    /// ([`Ring::stamp_receives`]).
    pub fn received_at(&self) -> Option<Instant> {
        self.ring.inner.borrow().slots[self.index].read_stamp
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
        if !slot.datagram
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
        if slot.datagram {
            // A UDP socket has no end of stream to end its receive with.
            inner.cancel_receive(self.index);
            return;
        }
        if matches!(slot.connect, connect::Connect::Going { .. }) {
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
fn reset_on_close(socket: &impl AsRawFd) {
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

/// The bytes of `slot`'s oldest received buffer, `id` holding `len` of
/// them; a stamped buffer's stamp becomes the slot's when it is first read.
fn front_bytes<'a>(
    slot: &mut Slot,
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
pub(super) mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A runtime for a test of rings, or `None` (the test skipped) where
    /// this kernel or sandbox refuses io_uring.
    pub(in crate::net::uring) fn runtime_for_rings() -> Option<tokio::runtime::Runtime> {
        if let Err(err) = probe() {
            eprintln!("io_uring unavailable here ({err}): skipped");
            return None;
        }
        Some(
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap(),
        )
    }

    /// Runs `test` with a fresh ring for `connections` sockets, on a
    /// runtime of its own; skipped where io_uring is refused.
    pub(in crate::net::uring) fn on_a_ring(connections: usize, test: impl AsyncFnOnce(Rc<Ring>)) {
        let Some(rt) = runtime_for_rings() else {
            return;
        };
        rt.block_on(async { test(Ring::new(connections).unwrap()).await });
    }

    #[test]
    fn user_data_round_trips() {
        assert_eq!(slot_of(user_data(7, 3, Kind::Send)), (7, 3, Kind::Send));
        assert_eq!(
            slot_of(user_data(123_456, GENERATION_MASK, Kind::Receive)),
            (123_456, GENERATION_MASK, Kind::Receive)
        );
        assert_eq!(
            slot_of(user_data(5, GENERATION_MASK + 2, Kind::KeptSend)),
            (5, 1, Kind::KeptSend)
        );
        assert_eq!(slot_of(user_data(9, 2, Kind::Connect)), (9, 2, Kind::Connect));
    }

    /// Echo through a ring socket: many writes, reads larger than one
    /// provided buffer, the end of stream, and the slot reused after.
    #[test]
    fn a_ring_socket_reads_writes_and_ends() {
        on_a_ring(2, echo_through);
    }

    /// The same where the kernel stamps what the sockets receive: the
    /// bytes come whole and in order from behind each buffer's stamp.
    #[test]
    fn a_stamped_ring_socket_reads_writes_and_ends() {
        on_a_ring(2, async |ring| {
            ring.stamp_receives();
            echo_through(ring).await;
        });
    }

    /// A socket on `ring` connected to a loopback peer that `peer` plays
    /// on a thread of its own (joined by the caller).
    fn with_peer(
        ring: &Rc<Ring>,
        peer: impl FnOnce(std::net::TcpStream) + Send + 'static,
    ) -> (RingSocket, std::thread::JoinHandle<()>) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let thread = std::thread::spawn(move || peer(listener.accept().unwrap().0));
        let tcp = std::net::TcpStream::connect(addr).unwrap();
        tcp.set_nonblocking(true).unwrap();
        (ring.adopt(OwnedFd::from(tcp)), thread)
    }

    /// A kept send goes out from the caller's bytes and posts no
    /// completion; it waits its turn behind queued bytes (refused); once
    /// the peer has reset the connection, a kept send's failure breaks the
    /// socket for every later write.
    #[test]
    fn a_kept_send_posts_no_completion_and_its_failure_breaks_the_socket() {
        use std::io::{Read, Write};
        on_a_ring(2, async |ring| {
            let (close, closing) = std::sync::mpsc::channel::<()>();
            let (mut socket, peer) = with_peer(&ring, move |mut peer| {
                let mut got = [0u8; 5];
                peer.read_exact(&mut got).unwrap();
                assert_eq!(&got, b"ping!");
                peer.write_all(b"pong").unwrap();
                closing.recv().unwrap();
                // Closed with bytes unread and no lingering: a reset.
                reset_on_close(&peer);
            });
            let bytes = Bytes::from_static(b"ping!and more");
            assert!(socket.send_kept(&bytes, 5));
            let mut got = [0u8; 4];
            ring.run(socket.read_exact(&mut got)).await.unwrap();
            assert_eq!(&got, b"pong");
            assert_eq!(ring.inner.borrow().send_completions, 0);
            assert!(socket.queue_whole(b"abc"));
            assert!(!socket.send_kept(&bytes, 5), "sent ahead of queued bytes");
            ring.run(tokio::time::sleep(Duration::from_millis(20))).await;
            assert_eq!(ring.inner.borrow().send_completions, 1, "the queued bytes' send");

            close.send(()).unwrap();
            peer.join().unwrap();
            let mut rest = [0u8; 8];
            let ended = ring.run(socket.read(&mut rest)).await;
            assert!(matches!(ended, Ok(0) | Err(_)), "{ended:?}");
            assert!(socket.send_kept(&bytes, 5));
            ring.run(tokio::time::sleep(Duration::from_millis(50))).await;
            assert!(!socket.send_kept(&bytes, 5), "a broken socket took a kept send");
            assert!(!socket.queue_whole(b"x"));
            assert!(ring.run(socket.write(b"x")).await.is_err());
            // The ring keeps the one buffer it sent from.
            assert_eq!(ring.inner.borrow().kept.len(), 1);
        });
    }

    /// A peer that, once it has read the 2 bytes the test sends (the
    /// socket then asks for stamps: bytes that came before have none),
    /// writes "first" 5 ms later and "second" 60 ms after that.
    fn first_then_second(mut peer: std::net::TcpStream) {
        use std::io::{Read, Write};
        peer.read_exact(&mut [0u8; 2]).unwrap();
        std::thread::sleep(Duration::from_millis(5));
        peer.write_all(b"first").unwrap();
        std::thread::sleep(Duration::from_millis(60));
        peer.write_all(b"second").unwrap();
    }

    /// A stamped socket says when the kernel received what it read last,
    /// not when it was reaped or read: bytes left waiting 40 ms are read with a
    /// stamp from before the wait, and each later buffer with its own.
    #[test]
    fn a_stamped_socket_reads_with_when_the_kernel_received_the_bytes() {
        on_a_ring(1, async |ring| {
            ring.stamp_receives();
            let connected = Instant::now();
            let (mut socket, peer) = with_peer(&ring, first_then_second);
            ring.run(async {
                socket.write_all(b"go").await.unwrap();
                // The turn ends, and sends it.
                tokio::task::yield_now().await;
                // Blocking, so the bytes are not even reaped before it
                // ends (as in a wait for a batch): a stamp taken when they
                // were reaped would fail the test as one taken when read.
                std::thread::sleep(Duration::from_millis(40));
                let mut buf = [0u8; 64];
                let n = socket.read(&mut buf).await.unwrap();
                let read_at = Instant::now();
                assert_eq!(&buf[..n], b"first");
                let first = socket.received_at().expect("the first bytes are stamped");
                assert!(first >= connected, "stamped before the connection was made");
                assert!(
                    read_at.duration_since(first) >= Duration::from_millis(30),
                    "stamped {:?} before they were read, not at their arrival",
                    read_at.duration_since(first)
                );
                let n = socket.read(&mut buf).await.unwrap();
                assert_eq!(&buf[..n], b"second");
                let second = socket.received_at().expect("the second bytes are stamped");
                assert!(second.duration_since(first) >= Duration::from_millis(50));
                assert!(second <= Instant::now());
                assert_eq!(socket.read(&mut buf).await.unwrap(), 0, "the stream has ended");
            })
            .await;
            peer.join().unwrap();
        });
    }

    /// A stamped socket's read returns one received buffer at most, though
    /// more wait and the caller has room: what a read returns was all
    /// received at the one stamp it reports (an HTTP/2 connection times the
    /// streams those bytes end by it).
    #[test]
    fn a_stamped_read_takes_one_buffer_with_its_own_stamp() {
        on_a_ring(1, async |ring| {
            ring.stamp_receives();
            let (mut socket, peer) = with_peer(&ring, first_then_second);
            ring.run(async {
                socket.write_all(b"go").await.unwrap();
                // The turn ends, and sends it.
                tokio::task::yield_now().await;
                // Each arrives while the worker is blocked, and is reaped
                // into a buffer of its own by the yield after.
                std::thread::sleep(Duration::from_millis(30));
                tokio::task::yield_now().await;
                std::thread::sleep(Duration::from_millis(90));
                tokio::task::yield_now().await;
                let mut buf = [0u8; 64];
                let n = socket.read(&mut buf).await.unwrap();
                assert_eq!(&buf[..n], b"first", "a read took more than one buffer");
                let first = socket.received_at().expect("stamped");
                let n = socket.read(&mut buf).await.unwrap();
                assert_eq!(&buf[..n], b"second");
                let second = socket.received_at().expect("stamped");
                assert!(
                    second.duration_since(first) >= Duration::from_millis(50),
                    "the second buffer's stamp is not its own: {:?} after the first",
                    second.duration_since(first)
                );
            })
            .await;
            peer.join().unwrap();
        });
    }

    /// A ring waiting in the kernel for a batch that never comes (a server
    /// that answers nothing) still gives tokio its turn within a few
    /// lingers, so its timers (the request timeout, the run's end) run on
    /// time; and bytes that come end the wait.
    #[test]
    fn a_ring_waiting_for_a_batch_lets_timers_run_and_wakes_for_bytes() {
        on_a_ring(1, async |ring| {
            ring.stamp_receives();
            ring.set_batch(Some(Batch {
                readers: 1,
                size: 8,
                linger: Duration::from_micros(500),
            }));
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = listener.local_addr().unwrap();
            let peer = std::thread::spawn(move || {
                use std::io::Write;
                let (mut peer, _) = listener.accept().unwrap();
                std::thread::sleep(Duration::from_millis(150));
                peer.write_all(b"late").unwrap();
                std::thread::sleep(Duration::from_millis(50));
            });
            let tcp = std::net::TcpStream::connect(addr).unwrap();
            tcp.set_nonblocking(true).unwrap();
            let mut socket = ring.adopt(OwnedFd::from(tcp));
            let began = Instant::now();
            let mut buf = [0u8; 16];
            let timer = ring
                .run(async {
                    tokio::select! {
                        _ = socket.read(&mut buf) => None,
                        _ = tokio::time::sleep(Duration::from_millis(50)) => Some(began.elapsed()),
                    }
                })
                .await;
            let timer = timer.expect("the timer fired before any bytes came");
            assert!(
                timer < Duration::from_millis(80),
                "the timer fired after {timer:?}"
            );
            let n = ring.run(socket.read(&mut buf)).await.unwrap();
            assert_eq!(&buf[..n], b"late");
            let read = began.elapsed();
            assert!(read < Duration::from_millis(190), "read after {read:?}");
            assert!(socket.received_at().is_some());
            peer.join().unwrap();
        });
    }

    async fn echo_through(ring: Rc<Ring>) {
        {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = listener.local_addr().unwrap();
            let echo = std::thread::spawn(move || {
                for _ in 0..2 {
                    let (mut peer, _) = listener.accept().unwrap();
                    std::io::copy(&mut peer.try_clone().unwrap(), &mut peer).unwrap();
                }
            });
            for _ in 0..2 {
                let tcp = std::net::TcpStream::connect(addr).unwrap();
                tcp.set_nonblocking(true).unwrap();
                let mut socket = ring.adopt(OwnedFd::from(tcp));
                let sent: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
                let mut got = Vec::new();
                ring.run(async {
                    for piece in sent.chunks(10_000) {
                        socket.write_all(piece).await.unwrap();
                    }
                    let mut buf = [0u8; 6000];
                    while got.len() < sent.len() {
                        let n = socket.read(&mut buf).await.unwrap();
                        assert!(n > 0, "ended early");
                        got.extend_from_slice(&buf[..n]);
                    }
                })
                .await;
                assert_eq!(got, sent);
                drop(socket);
            }
            // Both sockets' slots came back once their receives ended.
            ring.run(tokio::time::sleep(Duration::from_millis(50))).await;
            let inner = ring.inner.borrow();
            assert_eq!(inner.free.len(), inner.slots.len());
            assert_eq!(inner.in_flight, 0);
            echo.join().unwrap();
        }
    }

    /// A peer that goes on sending after its socket was dropped does not
    /// keep it: the bytes left unread make the close a reset, a receive
    /// still running is cancelled at the bytes that come after the drop,
    /// and the slot is freed, so the peer's writes fail instead of waiting
    /// with the kernel's buffers full until the ring ends. (Without either
    /// of the two, the peer's writes block here until its write timeout.)
    #[test]
    fn a_dropped_socket_is_closed_though_its_peer_keeps_sending() {
        on_a_ring(2, async |ring| {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = listener.local_addr().unwrap();
            let peer = std::thread::spawn(move || {
                let (mut conn, _) = listener.accept().unwrap();
                conn.set_write_timeout(Some(Duration::from_secs(3))).unwrap();
                let block = [7u8; 64 * 1024];
                let began = Instant::now();
                while began.elapsed() < Duration::from_secs(10) {
                    if let Err(err) = std::io::Write::write_all(&mut conn, &block) {
                        return Some(err);
                    }
                }
                None
            });
            let tcp = std::net::TcpStream::connect(addr).unwrap();
            tcp.set_nonblocking(true).unwrap();
            let mut socket = ring.adopt(OwnedFd::from(tcp));
            let mut buf = [0u8; 1000];
            let n = ring.run(socket.read(&mut buf)).await.unwrap();
            assert!(n > 0, "the peer sent nothing");
            drop(socket);
            let began = Instant::now();
            while ring.inner.borrow().in_flight > 0 {
                assert!(
                    began.elapsed() < Duration::from_secs(5),
                    "the dropped socket's receive goes on"
                );
                ring.run(tokio::time::sleep(Duration::from_millis(10))).await;
            }
            let inner = ring.inner.borrow();
            assert_eq!(inner.free.len(), inner.slots.len());
            drop(inner);
            let failed = peer.join().unwrap().expect("the peer could write for 10 s");
            assert!(
                matches!(
                    failed.kind(),
                    io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe
                ),
                "{failed}"
            );
        });
    }

    /// Rings made one after another on a thread each enter by the
    /// thread's table of registered rings: a dropped ring leaves the table
    /// (which holds 16), or the 17th would go by its descriptor.
    #[test]
    fn a_dropped_ring_leaves_the_threads_table_of_registered_rings() {
        let Some(rt) = runtime_for_rings() else {
            return;
        };
        rt.block_on(async {
            for made in 0..40 {
                let ring = Ring::new(2).unwrap();
                if !ring.inner.borrow().entry.is_registered() {
                    assert_eq!(made, 0, "ring {made} found the table full");
                    eprintln!("this kernel registers no rings (before 5.18): skipped");
                    return;
                }
                if made == 39 {
                    echo_through(ring).await;
                }
            }
        });
    }

    /// Past the rings a thread's table holds (16), a ring goes by its
    /// descriptor and works the same.
    #[test]
    fn rings_past_the_threads_table_go_by_their_descriptor() {
        let Some(rt) = runtime_for_rings() else {
            return;
        };
        rt.block_on(async {
            let rings: Vec<_> = (0..20).map(|_| Ring::new(2).unwrap()).collect();
            let Some(unregistered) = rings
                .iter()
                .find(|ring| !ring.inner.borrow().entry.is_registered())
            else {
                eprintln!("this kernel's table took 20 rings: skipped");
                return;
            };
            echo_through(unregistered.clone()).await;
        });
    }

    /// The sockets a ring outlives were each shut down, which ends their
    /// receives: the ring takes those ends as they come, more than the
    /// kernel runs in one entry, and leaves nothing for a cancel of all.
    #[test]
    fn the_receives_of_dropped_sockets_end_without_a_cancel() {
        const SOCKETS: usize = 50;
        on_a_ring(SOCKETS, async |ring| {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = listener.local_addr().unwrap();
            let (done, finished) = std::sync::mpsc::channel::<()>();
            let peers = std::thread::spawn(move || {
                let held: Vec<_> = (0..SOCKETS).map(|_| listener.accept().unwrap().0).collect();
                finished.recv().unwrap();
                drop(held);
            });
            let mut sockets: Vec<RingSocket> = (0..SOCKETS)
                .map(|_| {
                    let tcp = std::net::TcpStream::connect(addr).unwrap();
                    tcp.set_nonblocking(true).unwrap();
                    ring.adopt(OwnedFd::from(tcp))
                })
                .collect();
            let mut buf = [0u8; 8];
            for socket in &mut sockets {
                let read = std::future::poll_fn(|cx| {
                    Poll::Ready(Pin::new(&mut *socket).poll_read(cx, &mut ReadBuf::new(&mut buf)))
                });
                assert!(
                    ring.run(read).await.is_pending(),
                    "a byte came from a silent peer"
                );
            }
            // A turn that waits submits the receives armed above.
            ring.run(tokio::time::sleep(Duration::from_millis(20))).await;
            assert_eq!(ring.inner.borrow().in_flight as usize, SOCKETS);
            drop(sockets);
            ring.inner.borrow_mut().take_ended_receives(Instant::now());
            assert_eq!(ring.inner.borrow().in_flight, 0, "receives left for the cancel");
            done.send(()).unwrap();
            peers.join().unwrap();
        });
    }

    /// Work that wakes itself at every poll (a server that never lets up)
    /// still gives tokio the thread back between turns, so its timers run;
    /// without the bound on passes this test would never end, so it runs
    /// on a thread of its own and fails after 20 s.
    #[test]
    fn a_turn_that_keeps_waking_itself_lets_tokio_timers_run() {
        let (done, finished) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            on_a_ring(1, async |ring| {
                let polls = std::cell::Cell::new(0u64);
                let spinner = std::future::poll_fn(|cx| {
                    polls.set(polls.get() + 1);
                    cx.waker().wake_by_ref();
                    Poll::<()>::Pending
                });
                ring.run(async {
                    tokio::select! {
                        _ = spinner => {}
                        _ = tokio::time::sleep(Duration::from_millis(20)) => {}
                    }
                })
                .await;
                assert!(polls.get() > MAX_PASSES as u64, "{} polls", polls.get());
            });
            let _ = done.send(());
        });
        finished
            .recv_timeout(Duration::from_secs(20))
            .expect("the timer never ran, or the test failed");
    }

    /// Bytes read in place are consumed as far as the reader says, the
    /// rest left for the next read in place or by copy, in order.
    #[test]
    fn received_bytes_are_read_in_place_then_by_copy() {
        on_a_ring(1, async |ring| {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let tcp = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
            tcp.set_nonblocking(true).unwrap();
            let (mut peer, _) = listener.accept().unwrap();
            let mut socket = ring.adopt(OwnedFd::from(tcp));
            let called = std::cell::Cell::new(false);
            let nothing = socket.take_in_place(|_| {
                called.set(true);
                (0, ())
            });
            assert!(nothing.is_none() && !called.get(), "nothing received: not called");
            let cx = Context::from_waker(std::task::Waker::noop());
            assert!(socket.nothing_received(&cx));
            std::io::Write::write_all(&mut peer, b"first,second,rest").unwrap();
            // A read into no room arms the receive and returns once bytes
            // are in the ring's buffer, taking none of them.
            let waited = ring.run(tokio::time::timeout(Duration::from_secs(5), socket.read(&mut [])));
            assert_eq!(waited.await.unwrap().unwrap(), 0);
            assert!(!socket.nothing_received(&cx));
            let seen = socket.take_in_place(|bytes| (6, bytes.to_vec())).unwrap();
            assert_eq!(seen, b"first,second,rest");
            let seen = socket.take_in_place(|bytes| (7, bytes.to_vec())).unwrap();
            assert_eq!(seen, b"second,rest", "the first six were consumed");
            let mut buf = [0u8; 16];
            let n = ring.run(socket.read(&mut buf)).await.unwrap();
            assert_eq!(&buf[..n], b"rest", "what was left is read by copy");
            std::io::Write::write_all(&mut peer, b"more").unwrap();
            ring.run(socket.read(&mut [])).await.unwrap();
            // Saying more than it was given consumes what it was given.
            assert_eq!(
                socket.take_in_place(|bytes| (usize::MAX, bytes.to_vec())),
                Some(b"more".to_vec())
            );
            assert_eq!(socket.take_in_place(|bytes| (0, bytes.len())), None);
            assert!(socket.nothing_received(&cx), "all read, the stream goes on");
            drop(peer);
            assert_eq!(ring.run(socket.read(&mut buf)).await.unwrap(), 0);
            assert!(!socket.nothing_received(&cx), "the stream has ended");
        });
    }
}
