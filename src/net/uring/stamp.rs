//! When the kernel received each buffer of a stream socket, so that a
//! worker that waits for a batch of completions before reading them still
//! times each response from its arrival.
//!
//! A ring that batches sleeps in `io_uring_enter` until several responses
//! are in (or a short linger has passed): one kernel entry and one wake for
//! the lot instead of one each, the saving shb makes by default. Timed when
//! read, a response that came early in the wait would count the wait as
//! the server's. So the stream sockets of a batching ring ask the kernel to
//! stamp what they receive (`SO_TIMESTAMPNS`, read in the same multishot
//! `recvmsg` that takes the bytes), and a response's latency ends at the
//! stamp of the buffer that completed it. Over HTTP/1.1 without
//! pipelining a connection has one response coming at a time, so that
//! stamp is its last byte's arrival: exact, whatever the batching.
//!
//! The kernel stamps with the real-time clock; both clocks are read at
//! each reap, and a stamp becomes an [`Instant`] by its age on that
//! reading.

use super::BUFFER_GROUP;
use super::datagram::control_messages;
use io_uring::{opcode, squeue, types};
use std::io;
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

/// Control data a stamped buffer holds: one `cmsghdr` (16 bytes on 64-bit
/// Linux) and its `timespec` (16).
const CONTROL_ROOM: usize = 32;
/// Where a stamped buffer's payload starts: after the kernel's header of
/// the message (16 bytes) and the control data's room.
pub(super) const PAYLOAD_AT: usize = 16 + CONTROL_ROOM;
/// A stamp older than this against the clocks' last reading means the
/// real-time clock was set in between: it is not used.
const OLDEST: Duration = Duration::from_secs(60);

/// A ring's receive stamps: the message header their `recvmsg` names, and
/// the clocks' last reading.
pub(super) struct Stamping {
    header: Box<libc::msghdr>,
    clocks: (Instant, i128),
}

impl Stamping {
    pub(super) fn new() -> Stamping {
        // SAFETY: zero is a valid msghdr (null pointers, no lengths).
        let mut header: Box<libc::msghdr> = Box::new(unsafe { std::mem::zeroed() });
        header.msg_controllen = CONTROL_ROOM as _;
        Stamping {
            header,
            clocks: (Instant::now(), realtime_nanos()),
        }
    }

    /// A multishot `recvmsg` into the provided buffers, each buffer then
    /// holding the message's header, its stamp and the bytes.
    pub(super) fn entry(&self, fixed: bool, index: usize, fd: RawFd) -> squeue::Entry {
        let header = &raw const *self.header;
        match fixed {
            true => opcode::RecvMsgMulti::new(types::Fixed(index as u32), header, BUFFER_GROUP).build(),
            false => opcode::RecvMsgMulti::new(types::Fd(fd), header, BUFFER_GROUP).build(),
        }
    }

    /// Reads both clocks, for the stamps of the completions reaped now.
    pub(super) fn read_clocks(&mut self) {
        self.clocks = (Instant::now(), realtime_nanos());
    }

    /// The bytes received in a stamped `buffer` (as the completion filled
    /// it): 0 at the end of the stream.
    pub(super) fn payload_len(&self, buffer: &[u8]) -> usize {
        types::RecvMsgOut::parse(buffer, &self.header).map_or(0, |message| message.payload_data().len())
    }

    /// When the kernel received the bytes of a stamped `buffer`, if it
    /// said.
    pub(super) fn received_at(&self, buffer: &[u8]) -> Option<Instant> {
        let message = types::RecvMsgOut::parse(buffer, &self.header).ok()?;
        let (_, _, data) = control_messages(message.control_data())
            .find(|&(level, kind, _)| level == libc::SOL_SOCKET && kind == libc::SCM_TIMESTAMPNS)?;
        let seconds = i64::from_ne_bytes(data.get(..8)?.try_into().ok()?);
        let nanos = i64::from_ne_bytes(data.get(8..16)?.try_into().ok()?);
        let stamp = i128::from(seconds) * 1_000_000_000 + i128::from(nanos);
        let (instant, realtime) = self.clocks;
        let age = u64::try_from((realtime - stamp).max(0)).ok()?;
        let age = Duration::from_nanos(age);
        if age > OLDEST {
            return None;
        }
        instant.checked_sub(age)
    }
}

/// Asks the kernel to stamp what `fd` receives.
pub(super) fn enable(fd: RawFd) -> io::Result<()> {
    let on: libc::c_int = 1;
    // SAFETY: a plain syscall with a pointer to a live int and its size.
    let done = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPNS,
            (&raw const on).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    match done {
        0 => Ok(()),
        _ => Err(io::Error::last_os_error()),
    }
}

/// The real-time clock, in nanoseconds since the epoch.
fn realtime_nanos() -> i128 {
    // SAFETY: zero is a valid timespec, filled by the call.
    let mut now: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: a plain vDSO call writing into `now`.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut now) };
    i128::from(now.tv_sec) * 1_000_000_000 + i128::from(now.tv_nsec)
}
