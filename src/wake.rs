//! Keeping the waker of a task that waits: the one helper every waiting
//! place in the client (a ring socket, an HTTP/2 or HTTP/3 lane, the open
//! model's pacer) uses.

use std::task::Waker;

/// Keeps `waker` in `kept`, unless what is kept already wakes the same
/// task: a task polled again and again (a lane at every batch of frames)
/// would otherwise clone its waker, and drop the old one, at each poll.
pub fn keep_waker(kept: &mut Option<Waker>, waker: &Waker) {
    match kept {
        Some(old) if old.will_wake(waker) => {}
        _ => *kept = Some(waker.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::Wake;

    struct Counting(AtomicUsize);

    impl Wake for Counting {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn a_waker_of_the_same_task_is_kept_and_another_replaces_it() {
        let first = Arc::new(Counting(AtomicUsize::new(0)));
        let second = Arc::new(Counting(AtomicUsize::new(0)));
        let mut kept = None;
        keep_waker(&mut kept, &Waker::from(first.clone()));
        let clones = Arc::strong_count(&first);
        keep_waker(&mut kept, &Waker::from(first.clone()));
        assert_eq!(
            Arc::strong_count(&first),
            clones,
            "the kept waker was replaced by its twin"
        );
        keep_waker(&mut kept, &Waker::from(second.clone()));
        kept.take().unwrap().wake();
        assert_eq!(first.0.load(Ordering::SeqCst), 0);
        assert_eq!(second.0.load(Ordering::SeqCst), 1);
    }
}
