//! The ring's tests: sockets on it against real peers on 127.0.0.1.

use super::socket::reset_on_close;
use super::*;
use std::pin::Pin;
use std::time::Instant;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt, ReadBuf};

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

/// Turns the ring until no operation is in flight: a dropped socket's
/// last receive completes after the drop, on a later turn. Fails the
/// test past five seconds.
pub(in crate::net::uring) async fn until_nothing_in_flight(ring: &Ring, why: &str) {
    let began = Instant::now();
    while ring.inner.borrow().in_flight > 0 {
        assert!(began.elapsed() < Duration::from_secs(5), "{why}");
        ring.run(tokio::time::sleep(Duration::from_millis(10))).await;
    }
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
        until_nothing_in_flight(&ring, "the dropped socket's receive goes on").await;
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
