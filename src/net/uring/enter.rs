//! The ring's own kernel entries, through its registered descriptor.
//!
//! Every `io_uring_enter` names the ring by a descriptor the kernel must
//! look up in the process's table, and a worker's process has several
//! threads, so the lookup takes and drops a reference on the ring's file
//! each time. Since 5.18 a thread may register the ring once (in a table
//! of its own) and then name it by that table's index, which skips both.
//! The `io-uring` crate keeps such an index only inside a borrowed
//! `Submitter`, which a ring stored beside its own state cannot hold, so
//! the entry is made here: the same system call the crate makes, with the
//! index when registration worked, else with the descriptor.
//!
//! The table is the calling thread's: a [`Ring`](super::Ring) is made,
//! entered and dropped on one thread (it is not `Send`), which is what
//! makes the index safe to keep.

use io_uring::{EnterFlags, IoUring, types::SubmitArgs};
use std::io;
use std::os::fd::AsRawFd;

/// `IORING_REGISTER_RING_FDS` and its inverse (`io_uring_register`).
const REGISTER_RING_FDS: libc::c_uint = 20;
const UNREGISTER_RING_FDS: libc::c_uint = 21;

/// The kernel's `io_uring_rsrc_update`: one entry of the thread's table.
#[repr(C)]
struct RingFdUpdate {
    offset: u32,
    resv: u32,
    data: u64,
}

/// How the ring is named when this thread enters it.
pub(super) struct Entry {
    /// The ring's index in this thread's table of registered rings, or
    /// `None` (a kernel before 5.18, or a full table): the descriptor.
    registered: Option<u32>,
}

impl Entry {
    /// Registers `uring` in this thread's table where the kernel allows
    /// it; a refusal only costs the lookups.
    pub(super) fn register(uring: &IoUring) -> Entry {
        let mut update = RingFdUpdate {
            offset: u32::MAX, // the kernel picks a free index
            resv: 0,
            data: uring.as_raw_fd() as u64,
        };
        // SAFETY: the kernel reads and writes `update`, one entry, and
        // nothing else.
        let done = unsafe {
            libc::syscall(
                libc::SYS_io_uring_register,
                uring.as_raw_fd(),
                REGISTER_RING_FDS,
                &mut update as *mut RingFdUpdate,
                1,
            )
        };
        Entry {
            registered: (done == 1).then_some(update.offset),
        }
    }

    /// Whether the ring goes by its index in this thread's table.
    #[cfg(test)]
    pub(super) fn is_registered(&self) -> bool {
        self.registered.is_some()
    }

    /// Submits what is queued, running the completion work the kernel
    /// deferred when it says there is some (as the crate's `submit`).
    pub(super) fn submit(&self, uring: &mut IoUring) -> io::Result<usize> {
        let (pending, deferred) = queued(uring);
        let flags = match deferred {
            true => EnterFlags::GETEVENTS,
            false => EnterFlags::empty(),
        };
        self.enter(uring, pending, 0, flags, None)
    }

    /// Submits what is queued and waits until `want` completions are
    /// posted or the time in `args` has passed (as the crate's
    /// `submit_with_args`).
    pub(super) fn submit_and_wait(
        &self,
        uring: &mut IoUring,
        want: usize,
        args: &SubmitArgs,
    ) -> io::Result<usize> {
        let (pending, _) = queued(uring);
        let flags = EnterFlags::GETEVENTS | EnterFlags::EXT_ARG;
        self.enter(uring, pending, want as u32, flags, Some(args))
    }

    fn enter(
        &self,
        uring: &IoUring,
        to_submit: u32,
        want: u32,
        flags: EnterFlags,
        args: Option<&SubmitArgs>,
    ) -> io::Result<usize> {
        let (ring, flags) = match self.registered {
            Some(index) => (index as libc::c_int, flags | EnterFlags::REGISTERED_RING),
            None => (uring.as_raw_fd(), flags),
        };
        // `SubmitArgs` is the kernel's `io_uring_getevents_arg`, as the
        // crate passes it (a transparent wrapper).
        let (arg, size) = match args {
            Some(args) => (
                args as *const SubmitArgs as *const libc::c_void,
                size_of::<SubmitArgs>(),
            ),
            None => (std::ptr::null(), 0),
        };
        // SAFETY: the entries queued point only at memory the ring keeps
        // alive (see `Inner::push`), and `arg` at `size` readable bytes.
        let entered = unsafe {
            libc::syscall(
                libc::SYS_io_uring_enter,
                ring,
                to_submit,
                want,
                flags.bits(),
                arg,
                size,
            )
        };
        match entered {
            -1 => Err(io::Error::last_os_error()),
            entered => Ok(entered as usize),
        }
    }

    /// Takes the ring out of this thread's table, so the table does not
    /// keep the ring's file open once its descriptor closes.
    pub(super) fn unregister(&mut self, uring: &IoUring) {
        let Some(index) = self.registered.take() else {
            return;
        };
        let update = RingFdUpdate {
            offset: index,
            resv: 0,
            data: 0,
        };
        // SAFETY: the kernel reads `update`, one entry.
        unsafe {
            libc::syscall(
                libc::SYS_io_uring_register,
                uring.as_raw_fd(),
                UNREGISTER_RING_FDS,
                &update as *const RingFdUpdate,
                1,
            );
        }
    }
}

/// Entries queued for the kernel, and whether completion work it deferred
/// (or completions it could not post) waits for an entry that asks for
/// events.
fn queued(uring: &mut IoUring) -> (u32, bool) {
    let queue = uring.submission();
    (queue.len() as u32, queue.taskrun() || queue.cq_overflow())
}
