//! The first of a worker's jobs to finish (its phase deadline, the look at
//! the stop flag, the pacer, the connections, the interval tick), as
//! `tokio::select!` with `biased` finds it, except that a job is polled only
//! when its own waker has fired.
//!
//! Why not `select!`: it polls every job each time the worker's task is
//! woken, and the task is woken for every batch of responses, often one
//! response over HTTP/2. Each wake then polled three idle timers as well as
//! the connections; `perf` put those polls (and the waker each re-registers)
//! at about 5% of the worker's user-space time over h2c. Here a job's
//! waker marks the job and wakes the task, and a wake polls only the marked
//! jobs, in the order given (so ties go to the earlier job, as `biased`).

use futures_util::task::AtomicWaker;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, Wake, Waker};

/// A job of the race: any future with the race's output, pinned where the
/// caller keeps it.
pub type Job<'a, T> = Pin<&'a mut dyn Future<Output = T>>;

/// One job's waker: marks the job, then wakes the task running the race.
struct Mark {
    woken: AtomicBool,
    task: Arc<AtomicWaker>,
}

impl Wake for Mark {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::Release);
        self.task.wake();
    }
}

/// Runs `jobs` until one finishes, and returns its output; the others are
/// left as they are (the caller drops them). Each job is polled first at
/// once, then only when its waker fired; marked jobs are polled in order.
/// Allocates its wakers once, nothing per wake.
pub async fn first<T, const N: usize>(mut jobs: [Job<'_, T>; N]) -> T {
    let task = Arc::new(AtomicWaker::new());
    let marks: [Arc<Mark>; N] = std::array::from_fn(|_| {
        Arc::new(Mark {
            woken: AtomicBool::new(true),
            task: task.clone(),
        })
    });
    let wakers: [Waker; N] = std::array::from_fn(|i| Waker::from(marks[i].clone()));
    std::future::poll_fn(|cx| {
        // Registered before the marks are read, so a wake in between is
        // not lost.
        task.register(cx.waker());
        for ((job, mark), waker) in jobs.iter_mut().zip(&marks).zip(&wakers) {
            if mark.woken.swap(false, Ordering::Acquire)
                && let Poll::Ready(out) = job.as_mut().poll(&mut Context::from_waker(waker))
            {
                return Poll::Ready(out);
            }
        }
        Poll::Pending
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;
    use std::pin::pin;

    /// A job that counts its polls and finishes on its `ready`-th, waking
    /// itself each time before that when `spin` is set.
    fn counted<'a>(polls: &'a Cell<u32>, ready: u32, spin: bool, out: u32) -> impl Future<Output = u32> + 'a {
        std::future::poll_fn(move |cx| {
            polls.set(polls.get() + 1);
            if polls.get() >= ready {
                return Poll::Ready(out);
            }
            if spin {
                cx.waker().wake_by_ref();
            }
            Poll::Pending
        })
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    #[test]
    fn a_job_nobody_woke_is_polled_once() {
        let (idle, busy) = (Cell::new(0), Cell::new(0));
        let won = runtime().block_on(async {
            let idle_job = pin!(counted(&idle, u32::MAX, false, 1));
            let busy_job = pin!(counted(&busy, 50, true, 2));
            first([idle_job as Job<'_, u32>, busy_job]).await
        });
        assert_eq!(won, 2);
        assert_eq!(busy.get(), 50);
        assert_eq!(idle.get(), 1, "the idle job was polled again without a wake");
    }

    #[test]
    fn jobs_ready_together_go_to_the_earlier_one() {
        let (a, b) = (Cell::new(0), Cell::new(0));
        let won = runtime().block_on(async {
            let late_deadline = pin!(counted(&a, 3, true, 1));
            let other = pin!(counted(&b, 3, true, 2));
            first([late_deadline as Job<'_, u32>, other]).await
        });
        assert_eq!(won, 1);
        assert_eq!((a.get(), b.get()), (3, 2));
    }

    #[test]
    fn a_timer_wakes_its_own_job() {
        let started = std::time::Instant::now();
        let (never, spins) = (Cell::new(0), Cell::new(0));
        let won = runtime().block_on(async {
            let idle = pin!(counted(&never, u32::MAX, false, 0));
            let timer = pin!(async {
                tokio::time::sleep(std::time::Duration::from_millis(30)).await;
                7
            });
            let spinner = pin!(async {
                // Yields to the runtime a bounded number of times, then waits.
                for _ in 0..1000 {
                    spins.set(spins.get() + 1);
                    tokio::task::yield_now().await;
                }
                std::future::pending::<u32>().await
            });
            first([idle as Job<'_, u32>, timer, spinner]).await
        });
        assert_eq!(won, 7);
        assert!(started.elapsed() >= std::time::Duration::from_millis(30));
        assert_eq!(never.get(), 1);
    }
}
