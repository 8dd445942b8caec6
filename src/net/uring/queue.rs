//! The ring's two queues: operations pushed, counted in flight per slot
//! and submitted at the end of the turn (or when the queue fills), and
//! completions reaped and handed to the socket each is for, whose task is
//! woken; then a dropped socket's slot is freed once the kernel is done
//! with it, and a dropped ring cancels what is left.

use super::{
    BUFFER_GROUP, CANCEL_WAIT, GENERATION_MASK, Inner, Kind, SlotKind, enter, slot_of, timer, user_data,
};
use io_uring::{IoUring, cqueue, opcode, squeue, types};
use std::io;
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

impl Inner {
    /// Reaps the receives that the sockets' shutdowns ended (each dropped
    /// socket is shut down), whose ends wait as completions or as deferred
    /// work, until none is left or `began` is `CANCEL_WAIT` ago. Why before
    /// a cancel of all that is left: for each operation such a cancel
    /// ends, the kernel scans every one still armed, ended or not, so with
    /// 4,000 receives it took about 0.14 s of CPU at the end of a run; this
    /// takes their ends in one kernel entry per 20 (as many as the kernel
    /// runs at each).
    pub(super) fn take_ended_receives(&mut self, began: Instant) {
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
    pub(super) fn cancel_everything(&mut self) {
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

    /// Pushes one entry, submitting first when the queue is full.
    pub(super) fn push(&mut self, entry: &squeue::Entry) {
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
    pub(super) fn queue_send(&mut self, index: usize, data: &[u8]) {
        let slot = &mut self.slots[index];
        slot.queued.extend_from_slice(data);
        if !slot.listed {
            slot.listed = true;
            self.to_send.push(index);
        }
    }

    pub(super) fn arm_receive(&mut self, index: usize) {
        let slot = &mut self.slots[index];
        let Some(fd) = &slot.fd else { return };
        let fixed = index < self.registered;
        let entry = match (&self.datagrams, &self.stamping) {
            (Some(receiving), _) if slot.is_datagram() => receiving.entry(fixed, index, fd.as_raw_fd()),
            (_, Some(stamping)) if slot.stamped() => stamping.entry(fixed, index, fd.as_raw_fd()),
            _ => match fixed {
                true => opcode::RecvMulti::new(types::Fixed(index as u32), BUFFER_GROUP).build(),
                false => opcode::RecvMulti::new(types::Fd(fd.as_raw_fd()), BUFFER_GROUP).build(),
            },
        }
        .user_data(user_data(index, slot.generation, Kind::Receive));
        slot.receiving = true;
        self.issue(index, &entry);
    }

    /// Ends slot `index`'s multishot receive: it completes, cancelled, and
    /// the slot is freed with it. One cancel per slot: each one makes the
    /// kernel look through every operation in flight.
    pub(super) fn cancel_receive(&mut self, index: usize) {
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
    pub(super) fn wake_reader(&mut self, index: usize) {
        if let Some(waker) = self.slots[index].reader.take() {
            self.readers_waiting -= 1;
            waker.wake();
        }
    }

    /// A kept send on slot `index` failed, or went out only in part: the
    /// socket is broken for every later write. A completion for a socket
    /// since dropped (an older `generation`) is nobody's.
    pub(super) fn kept_send_failed(&mut self, index: usize, generation: u32, result: i32) {
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
    pub(super) fn finished(&mut self, index: usize) {
        self.slots[index].in_flight -= 1;
        self.in_flight -= 1;
    }

    /// Pushes an operation on slot `index`'s socket, counted in flight
    /// until its last completion.
    pub(super) fn issue(&mut self, index: usize, entry: &squeue::Entry) {
        self.slots[index].in_flight += 1;
        self.in_flight += 1;
        self.push(entry);
    }

    /// Runs the completion work the kernel deferred (the receives that
    /// found data), when it says there is some: one `io_uring_enter` for
    /// the whole batch. The eventfd that told us is never read: tokio
    /// watches it edge-triggered, and each batch writes to it again.
    pub(super) fn run_deferred(&mut self) {
        if self.uring.submission().taskrun() {
            self.enter_quietly();
        }
    }

    /// Submits what is pushed (running the deferred completion work too),
    /// with the eventfd quiet: the completions this posts are reaped by
    /// this turn, and a signal for them only woke tokio's reactor for a
    /// turn with nothing to do. Work the kernel queued meanwhile went
    /// unsignalled: [`Self::work_left`] tells the turn to take it.
    pub(super) fn enter_quietly(&mut self) {
        self.quietly(|entry, uring| entry.submit(uring));
    }

    /// Submits what is pushed and waits in the kernel until `want`
    /// completions are posted or `linger` has passed, with the eventfd
    /// quiet as in [`Self::enter_quietly`].
    pub(super) fn wait_in_kernel(&mut self, want: usize, linger: Duration) {
        let linger = types::Timespec::from(linger);
        let args = types::SubmitArgs::new().timespec(&linger);
        self.quietly(|entry, uring| entry.submit_and_wait(uring, want, &args));
    }

    /// Enters the kernel through `enter` with the eventfd's signal off
    /// meanwhile: what this side reaps itself needs no signal.
    pub(super) fn quietly(&mut self, enter: impl FnOnce(&enter::Entry, &mut IoUring) -> io::Result<usize>) {
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
    pub(super) fn work_left(&mut self) -> bool {
        self.uring.submission().taskrun() || !self.uring.completion().is_empty()
    }

    /// Starts the sends queued this turn, then submits everything pushed.
    pub(super) fn submit(&mut self) {
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
    pub(super) fn start_sends(&mut self) {
        let mut listed = std::mem::take(&mut self.to_send);
        for index in listed.drain(..) {
            let slot = &mut self.slots[index];
            slot.listed = false;
            // A send in flight starts the next when it completes.
            if slot.sends > 0 || slot.queued.is_empty() || slot.dropped {
                continue;
            }
            std::mem::swap(&mut slot.queued, &mut slot.sending);
            match &mut slot.kind {
                SlotKind::Stream(stream) => {
                    stream.sent = 0;
                    self.start_send(index);
                }
                SlotKind::Datagram(_) => self.start_datagram_sends(index),
            }
        }
        self.to_send = listed;
    }

    pub(super) fn reap(&mut self) {
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

    pub(super) fn received(&mut self, index: usize, result: i32, flags: u32) {
        let last = !cqueue::more(flags);
        if last {
            self.finished(index);
        }
        let slot = &mut self.slots[index];
        slot.receiving &= !last;
        if slot.is_datagram() && result >= 0 {
            self.datagram_received(index, result, flags);
            return;
        }
        if result > 0 {
            let id = cqueue::buffer_select(flags).expect("a multishot receive picks a buffer");
            let len = match &self.stamping {
                Some(stamping) if slot.stamped() => {
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

    pub(super) fn sent(&mut self, index: usize, result: i32) {
        self.finished(index);
        if self.slots[index].is_datagram() {
            self.datagram_sent(index, result);
            return;
        }
        let slot = &mut self.slots[index];
        slot.sends -= 1;
        if result < 0 {
            slot.broken = Some(-result);
            slot.sending.clear();
        } else {
            let sent = &mut slot.kind.stream().sent;
            *sent += result as usize;
            if *sent < slot.sending.len() && !slot.dropped {
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
    pub(super) fn release(&mut self, index: usize) {
        let slot = &mut self.slots[index];
        let buffers = match &mut self.datagrams {
            Some(receiving) if slot.is_datagram() => &mut receiving.buffers,
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
        // What only its kind held (a connect's address, a UDP socket's
        // batches and message headers) goes with it.
        slot.kind = SlotKind::default();
        slot.generation = slot.generation.wrapping_add(1);
        slot.queued = Vec::new();
        slot.sending = Vec::new();
        self.readers_waiting -= usize::from(slot.reader.take().is_some());
        slot.writer = None;
        self.free.push(index);
    }
}
