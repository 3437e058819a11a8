//! A connection's wakes of its own making, handled where they happen.
//!
//! hyper reads a request's body through a channel to the handler that lives in the same
//! task: when the handler first asks for the body it is not there yet, and hyper, in the
//! same poll, hands it over — waking the task that is already running. Tokio treats that
//! wake as a yield: the task goes to the back of the worker's queue and another worker is
//! woken to share the work, which steals the connection and serves the rest of the request
//! on another core (measured: two futex calls and a move between cores per `POST`, none
//! per `GET`). [`OwnWakes`] polls its future again in place when the future woke itself
//! while being polled, and passes on every other wake, so a request with a body stays on
//! the worker that read it.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::task::{Context, Poll, Wake, Waker};

use futures_util::task::AtomicWaker;

/// How many times in a row a future that keeps waking itself is polled again in place
/// before it goes back to the scheduler like any other woken task.
const POLLS_IN_PLACE: usize = 4;

/// Not being polled: a wake goes to the task.
const IDLE: u8 = 0;
/// Being polled: a wake is noted and answered by polling again.
const POLLING: u8 = 1;
/// Being polled, and woken since the poll began.
const WOKEN: u8 = 2;

/// `F`, polled again in place when it wakes itself during a poll (at most
/// [`POLLS_IN_PLACE`] times in a row).
pub struct OwnWakes<F> {
    future: Pin<Box<F>>,
    wakes: Arc<Wakes>,
    waker: Waker,
}

/// What the future's waker knows: whether a poll is under way, and the task's waker.
struct Wakes {
    state: AtomicU8,
    task: AtomicWaker,
}

impl Wake for Wakes {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        // During a poll the wake is noted for the poll's end; otherwise it is the task's.
        if self.state.compare_exchange(POLLING, WOKEN, Ordering::AcqRel, Ordering::Acquire) == Err(IDLE) {
            self.task.wake();
        }
    }
}

impl<F: Future> OwnWakes<F> {
    /// `future`, whose own wakes are answered in place.
    pub fn new(future: F) -> Self {
        let wakes = Arc::new(Wakes { state: AtomicU8::new(IDLE), task: AtomicWaker::new() });
        let waker = Waker::from(Arc::clone(&wakes));
        Self { future: Box::pin(future), wakes, waker }
    }
}

impl<F: Future> Future for OwnWakes<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = &mut *self;
        this.wakes.task.register(cx.waker());
        let mut inner = Context::from_waker(&this.waker);
        for _ in 0..POLLS_IN_PLACE {
            this.wakes.state.store(POLLING, Ordering::Release);
            let polled = this.future.as_mut().poll(&mut inner);
            // Woken during the poll: the state says so, and the wake was kept back.
            let woken = this.wakes.state.swap(IDLE, Ordering::AcqRel) == WOKEN;
            match polled {
                Poll::Ready(output) => return Poll::Ready(output),
                Poll::Pending if woken => {}
                Poll::Pending => return Poll::Pending,
            }
        }
        // Still waking itself: its turn again comes through the scheduler.
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    /// Counts the task's wakes.
    struct Counted(AtomicUsize);

    impl Wake for Counted {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// A future that wakes itself during its first `own` polls, then waits for `ready`.
    struct SelfWaking {
        own: usize,
        polls: usize,
        waker: Option<Waker>,
        ready: Arc<std::sync::atomic::AtomicBool>,
    }

    impl Future for SelfWaking {
        type Output = usize;

        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<usize> {
            self.polls += 1;
            if self.ready.load(Ordering::SeqCst) {
                return Poll::Ready(self.polls);
            }
            self.waker = Some(cx.waker().clone());
            if self.polls <= self.own {
                cx.waker().wake_by_ref();
            }
            Poll::Pending
        }
    }

    fn poll_once<F: Future>(future: &mut Pin<Box<OwnWakes<F>>>, task: &Arc<Counted>) -> Poll<F::Output> {
        let waker = Waker::from(Arc::clone(task));
        future.as_mut().poll(&mut Context::from_waker(&waker))
    }

    #[test]
    fn a_wake_during_the_poll_is_a_poll_again_not_a_wake_of_the_task() {
        let ready = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let task = Arc::new(Counted(AtomicUsize::new(0)));
        let mut future =
            Box::pin(OwnWakes::new(SelfWaking { own: 1, polls: 0, waker: None, ready: Arc::clone(&ready) }));
        assert!(poll_once(&mut future, &task).is_pending());
        // Polled twice in place (the wake of the first poll), the task never woken.
        assert_eq!(future.future.polls, 2);
        assert_eq!(task.0.load(Ordering::SeqCst), 0);
        // A wake from outside, between polls, is the task's.
        ready.store(true, Ordering::SeqCst);
        future.future.waker.take().expect("the waker it kept").wake();
        assert_eq!(task.0.load(Ordering::SeqCst), 1);
        assert_eq!(poll_once(&mut future, &task), Poll::Ready(3));
    }

    #[test]
    fn a_future_that_keeps_waking_itself_goes_back_to_the_scheduler() {
        let ready = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let task = Arc::new(Counted(AtomicUsize::new(0)));
        let mut future =
            Box::pin(OwnWakes::new(SelfWaking { own: usize::MAX, polls: 0, waker: None, ready: Arc::clone(&ready) }));
        assert!(poll_once(&mut future, &task).is_pending());
        assert_eq!(future.future.polls, POLLS_IN_PLACE);
        // Its wake was not lost: the task was woken to poll it again.
        assert_eq!(task.0.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn a_wake_from_another_thread_during_the_poll_is_never_lost() {
        // A future that another thread wakes while it is being polled, then finishes.
        let ready = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let task = Arc::new(Counted(AtomicUsize::new(0)));
        for _ in 0..200 {
            ready.store(false, Ordering::SeqCst);
            let flag = Arc::clone(&ready);
            let mut future = Box::pin(OwnWakes::new(std::future::poll_fn(move |cx| {
                if flag.load(Ordering::SeqCst) {
                    return Poll::Ready(());
                }
                let (waker, flag) = (cx.waker().clone(), Arc::clone(&flag));
                std::thread::spawn(move || {
                    flag.store(true, Ordering::SeqCst);
                    waker.wake();
                });
                Poll::Pending
            })));
            let before = task.0.load(Ordering::SeqCst);
            let mut polls = 0;
            // Each Pending is followed by a wake of the task, or it was polled to the end in
            // place: never Pending with nobody left to wake it.
            while poll_once(&mut future, &task).is_pending() {
                polls += 1;
                assert!(polls < 1000, "the wake was lost");
                let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
                while task.0.load(Ordering::SeqCst) == before + polls - 1 {
                    assert!(std::time::Instant::now() < deadline, "the wake was lost");
                    std::thread::yield_now();
                }
            }
        }
    }
}
