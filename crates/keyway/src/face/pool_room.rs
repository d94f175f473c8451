//! Submission that waits for room when the pool's [`capacity`](crate::PoolBuilder::capacity) is
//! reached, blocking or as a future (the engine's `waiters.rs` holds the wake-up protocol).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use super::pool::Pool;
use crate::engine::waiters::RoomWait;
use crate::error::SubmitError;
use crate::task::TaskHandle;

impl Pool {
    /// Like [`execute`](Pool::execute), but when the pool's
    /// [`capacity`](crate::PoolBuilder::capacity) is reached it waits for room instead of
    /// refusing. Still refused (task handed back) after shutdown.
    ///
    /// Called from one of the pool's own threads it does not wait (the calling task holds a
    /// place itself, so room might never come): a full pool refuses as `execute` does.
    ///
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use std::sync::Arc;
    /// let pool = keyway::Pool::builder().capacity(2).build().unwrap();
    /// let ran = Arc::new(AtomicUsize::new(0));
    /// for _ in 0..100 {
    ///     let ran = ran.clone();
    ///     // Never more than 2 tasks queued or running; the producer waits instead.
    ///     pool.execute_wait(move || { ran.fetch_add(1, Ordering::Relaxed); }).unwrap();
    /// }
    /// pool.shutdown();
    /// assert_eq!(ran.load(Ordering::Relaxed), 100);
    /// ```
    pub fn execute_wait<F>(&self, f: F) -> Result<(), SubmitError<F>>
    where
        F: FnOnce() + Send + 'static,
    {
        self.wait_for_room(f, Duration::MAX, |f| self.execute(f))
    }

    /// Like [`submit`](Pool::submit), waiting for room as [`execute_wait`](Pool::execute_wait)
    /// does: the same as `pool.wait_for_room(f, Duration::MAX, |f| pool.submit(f))`, which
    /// [`wait_for_room`](Pool::wait_for_room) shows and which can also bound the wait.
    ///
    /// ```
    /// # #![allow(deprecated)]
    /// let pool = keyway::Pool::builder().capacity(1).build().unwrap();
    /// let handles: Vec<_> = (0..10).map(|i| pool.submit_wait(move || i * 2).unwrap()).collect();
    /// let doubled: Vec<i32> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    /// assert_eq!(doubled, (0..10).map(|i| i * 2).collect::<Vec<_>>());
    /// ```
    #[deprecated(note = "use `pool.wait_for_room(f, Duration::MAX, |f| pool.submit(f))`")]
    pub fn submit_wait<F, T>(&self, f: F) -> Result<TaskHandle<T>, SubmitError<F>>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        self.wait_for_room(f, Duration::MAX, |f| self.submit(f))
    }

    /// Calls `attempt(task)` — any submission of this pool: `execute`, `submit_sequential`, a
    /// [`Lane`](crate::Lane)'s `execute`… — and while it is refused with
    /// [`SubmitError::Full`], waits for room and tries again, for at most `timeout`. Returns the
    /// first outcome that is not `Full`, or `Full` (task handed back) when `timeout` passed.
    /// `Duration::ZERO` tries without waiting; a timeout too long to represent
    /// (`Duration::MAX`) waits as long as it takes. Called from one of the pool's own threads it
    /// does not wait (see [`execute_wait`](Pool::execute_wait)).
    ///
    /// Waiting submitters are not served in order: each release of room wakes them all, and
    /// whoever admits first wins.
    ///
    /// ```
    /// use std::time::Duration;
    /// let pool = keyway::Pool::builder().capacity(1).build().unwrap();
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// for i in 0..20 {
    ///     let tx = tx.clone();
    ///     let task = move || tx.send(i).unwrap();
    ///     pool.wait_for_room(task, Duration::from_secs(60), |t| pool.execute_sequential("log", t))
    ///         .unwrap();
    /// }
    /// drop(tx);
    /// assert_eq!(rx.iter().collect::<Vec<_>>(), (0..20).collect::<Vec<_>>());
    /// ```
    pub fn wait_for_room<F, R, A>(
        &self,
        task: F,
        timeout: Duration,
        mut attempt: A,
    ) -> Result<R, SubmitError<F>>
    where
        A: FnMut(F) -> Result<R, SubmitError<F>>,
    {
        // The first look needs no registration: without contention it is the only one.
        let mut task = match attempt(task) {
            Err(SubmitError::Full(task)) => task,
            other => return other,
        };
        if self.registry().on_own_thread() {
            return Err(SubmitError::Full(task));
        }
        let deadline = Instant::now().checked_add(timeout);
        let mut wait = self.registry().waiters.wait_for_room();
        loop {
            match attempt(task) {
                Err(SubmitError::Full(back)) => task = back,
                other => return other,
            }
            if !wait.sleep(deadline) {
                return Err(SubmitError::Full(task));
            }
        }
    }

    /// The async form of [`wait_for_room`](Pool::wait_for_room): a future that calls
    /// `attempt(task)`, and while it is refused with [`SubmitError::Full`] waits (without
    /// blocking its thread) until room is released, then tries again. It resolves to the first
    /// outcome that is not `Full`. It needs no particular runtime: a release wakes the task's
    /// waker. Dropping the future drops the task if it was not admitted yet. For a deadline,
    /// race it with your runtime's timer.
    ///
    /// ```
    /// use std::future::Future;
    /// use std::sync::Arc;
    /// use std::task::{Context, Poll, Wake, Waker};
    /// # struct Unpark(std::thread::Thread);
    /// # impl Wake for Unpark { fn wake(self: Arc<Self>) { self.0.unpark() } }
    /// # fn block_on<F: Future>(f: F) -> F::Output {
    /// #     let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    /// #     let mut f = std::pin::pin!(f);
    /// #     loop {
    /// #         if let Poll::Ready(v) = f.as_mut().poll(&mut Context::from_waker(&waker)) { return v; }
    /// #         std::thread::park();
    /// #     }
    /// # }
    /// let pool = keyway::Pool::builder().capacity(1).build().unwrap();
    /// let handles: Vec<_> = (0..10u32)
    ///     .map(|i| block_on(pool.wait_for_room_async(move || i + 1, |t| pool.submit(t))).unwrap())
    ///     .collect();
    /// let total: u32 = handles.into_iter().map(|h| h.join().unwrap()).sum();
    /// assert_eq!(total, 55);
    /// ```
    pub fn wait_for_room_async<F, R, A>(&self, task: F, attempt: A) -> WaitForRoom<'_, F, A>
    where
        A: FnMut(F) -> Result<R, SubmitError<F>>,
    {
        WaitForRoom {
            pool: self,
            task: Some(task),
            attempt,
            wait: None,
        }
    }
}

/// The future [`Pool::wait_for_room_async`] returns: resolves to the first outcome of its
/// submission that is not [`SubmitError::Full`] (see there for an example).
#[must_use = "futures do nothing unless polled"]
pub struct WaitForRoom<'a, F, A> {
    pool: &'a Pool,
    task: Option<F>,
    attempt: A,
    wait: Option<RoomWait<'a>>,
}

// Nothing is pinned in place: `task` and `attempt` are only moved or called through `&mut`.
impl<F, A> Unpin for WaitForRoom<'_, F, A> {}

impl<F, R, A> Future for WaitForRoom<'_, F, A>
where
    A: FnMut(F) -> Result<R, SubmitError<F>>,
{
    type Output = Result<R, SubmitError<F>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        loop {
            let Some(task) = this.task.take() else {
                panic!("WaitForRoom polled after it resolved");
            };
            match (this.attempt)(task) {
                Err(SubmitError::Full(back)) => this.task = Some(back),
                other => {
                    this.wait = None;
                    return Poll::Ready(other);
                }
            }
            match &mut this.wait {
                // Registered before that look: park unless a release came in between.
                Some(wait) => {
                    if !wait.park(cx.waker()) {
                        return Poll::Pending;
                    }
                }
                // Register, then look again (waiters.rs, Rule 1).
                None => this.wait = Some(this.pool.registry().waiters.wait_for_room()),
            }
        }
    }
}

impl<F, A> std::fmt::Debug for WaitForRoom<'_, F, A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WaitForRoom")
            .field("admitted", &self.task.is_none())
            .finish_non_exhaustive()
    }
}
