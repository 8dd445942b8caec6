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

/// A waker for tests that counts the wakes that reach it, by value or by
/// reference.
#[cfg(test)]
#[derive(Default)]
pub struct CountingWaker(std::sync::atomic::AtomicUsize);

#[cfg(test)]
impl CountingWaker {
    /// The wakes so far.
    pub fn wakes(&self) -> usize {
        self.0.load(std::sync::atomic::Ordering::SeqCst)
    }
}

#[cfg(test)]
impl std::task::Wake for CountingWaker {
    fn wake(self: std::sync::Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &std::sync::Arc<Self>) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn a_waker_of_the_same_task_is_kept_and_another_replaces_it() {
        let first = Arc::new(CountingWaker::default());
        let second = Arc::new(CountingWaker::default());
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
        assert_eq!(first.wakes(), 0);
        assert_eq!(second.wakes(), 1);
    }
}
