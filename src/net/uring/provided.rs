//! The ring's provided buffers: memory that receives write into, handed
//! to the kernel through a ring of its own, from which it picks a buffer
//! for each completion of a multishot receive; a buffer goes back once
//! its bytes are read. Shared by all of a worker's sockets, so memory is
//! per worker, not per connection.

use io_uring::IoUring;
use io_uring::types::BufRingEntry;
use std::alloc::Layout;
use std::io;
use std::sync::atomic::{AtomicU16, Ordering};

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
/// The group a stream socket's receive names to take one of these.
pub(super) const BUFFER_GROUP: u16 = 0;

/// The provided buffers: their memory, and the ring through which the
/// kernel is handed them (and picks them for receives).
pub(super) struct Provided {
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
    pub(super) fn new(connections: usize) -> Provided {
        let count = (connections * 2)
            .next_power_of_two()
            .clamp(MIN_BUFFERS, MAX_BUFFERS);
        Provided::with(count, BUFFER_SIZE, BUFFER_GROUP)
    }

    /// `count` buffers (a power of two) of `size` bytes, as group `group`.
    /// The memory is allocated zeroed, so a page is only made resident
    /// once a receive writes to it.
    pub(super) fn with(count: usize, size: usize, group: u16) -> Provided {
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
    pub(super) fn register(&self, uring: &IoUring) -> io::Result<()> {
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

    pub(super) fn bytes(&self, id: u16, len: usize) -> &[u8] {
        let start = usize::from(id) * self.size;
        &self.memory[start..start + len]
    }

    /// Gives the memory up for lost, never freed: the kernel may still
    /// write to it (see `Drop for Ring`).
    pub(super) fn leak(&mut self) {
        std::mem::forget(std::mem::replace(&mut self.memory, Box::new([])));
        self.entries = std::ptr::null_mut();
    }

    /// Hands buffer `id` (back) to the kernel.
    pub(super) fn give_back(&mut self, id: u16) {
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
