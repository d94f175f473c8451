//! Shutting the pool down from async code: [`Pool::shutdown_async`] starts the graceful
//! shutdown at once and hands back a [`ShutdownFuture`] that completes once the pool has
//! stopped. The wait itself is a thread of the pool's (`keyway-shutdown`), one per pool however
//! many callers await it, which runs the same close-and-wait as [`Pool::shutdown`] and then wakes
//! every caller: no runtime's blocking pool is needed, and none is held.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use parking_lot::Mutex;

use super::pool::Pool;
use crate::task::contain;

impl Pool {
    /// The async form of [`shutdown`](Pool::shutdown): intake stops before this returns (once
    /// the pool's [`Scheduler`](crate::Scheduler)s have handed over what they hold, if any),
    /// and the returned [`ShutdownFuture`] completes once every accepted task has run (every
    /// future completed, awaits included) and the pool's threads have exited. Awaiting it holds
    /// no thread of the caller's runtime: no `spawn_blocking` is needed.
    ///
    /// Any number of callers may call it and await their futures at once, with or without
    /// [`shutdown`](Pool::shutdown) beside them: every future completes when the one shutdown
    /// is done. The shutdown goes on whether the future is awaited or dropped.
    ///
    /// Awaited (or polled) on one of the pool's own threads — inside a task or a future of
    /// this pool, which cannot wait for itself — it completes at once, as `shutdown` returns
    /// there; the pool still finishes in the background, and a future obtained there and
    /// awaited elsewhere waits for it.
    ///
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use std::sync::Arc;
    /// let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    /// let pool = keyway::Pool::new().unwrap();
    /// let saved = Arc::new(AtomicUsize::new(0));
    /// rt.block_on(async {
    ///     for account in 0..50u32 {
    ///         let saved = saved.clone();
    ///         pool.spawn_sequential(account % 5, async move {
    ///             saved.fetch_add(1, Ordering::Relaxed);
    ///         })
    ///         .unwrap();
    ///     }
    ///     pool.shutdown_async().await; // no spawn_blocking
    /// });
    /// assert_eq!(saved.load(Ordering::Relaxed), 50);
    /// assert!(pool.spawn(async {}).is_err()); // intake stopped
    /// ```
    pub fn shutdown_async(&self) -> ShutdownFuture {
        let stopped = match &self.users {
            Some(users) => users.shut_down_in_background(),
            None => {
                let registry = self.registry().clone();
                registry.close();
                Stopped::start(move || {
                    let _ = registry.close_and_wait(None);
                })
            }
        };
        ShutdownFuture {
            pool: self.clone(),
            stopped,
        }
    }
}

/// A shutdown under way, as a future: completes once the pool has stopped (see
/// [`Pool::shutdown_async`]). Dropping it does not stop the shutdown.
///
/// ```
/// let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).build().unwrap();
/// let pool = keyway::Pool::new().unwrap();
/// let (tx, rx) = tokio::sync::oneshot::channel();
/// pool.execute(move || tx.send("last words").unwrap()).unwrap();
/// let stopping: keyway::ShutdownFuture = pool.shutdown_async();
/// // Awaited from a tokio task; the task accepted before it still runs.
/// let said = rt.block_on(async move {
///     tokio::spawn(stopping).await.unwrap();
///     rx.await.unwrap()
/// });
/// assert_eq!(said, "last words");
/// ```
#[must_use = "the shutdown goes on either way; await the future to know when it is done"]
pub struct ShutdownFuture {
    pool: Pool,
    stopped: Arc<Stopped>,
}

impl std::fmt::Debug for ShutdownFuture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShutdownFuture")
            .field("pool", &self.pool.name())
            .field("done", &self.stopped.state.lock().done)
            .finish()
    }
}

impl Future for ShutdownFuture {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        // On one of the pool's own threads the pool cannot stop before this returns.
        if self.pool.registry().on_own_thread() {
            return Poll::Ready(());
        }
        let mut state = self.stopped.state.lock();
        if state.done {
            return Poll::Ready(());
        }
        if !state.wakers.iter().any(|w| w.will_wake(cx.waker())) {
            state.wakers.push(cx.waker().clone());
        }
        Poll::Pending
    }
}

/// One pool's background shutdown: done once the close-and-wait returned; the futures
/// awaiting it leave their wakers here.
#[derive(Default)]
pub(crate) struct Stopped {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    done: bool,
    wakers: Vec<Waker>,
}

impl Stopped {
    /// Runs `wait` (a close-and-wait) on a thread of its own, then wakes every awaiting future.
    /// With no thread to be had, `wait` runs here, on the caller's thread.
    pub(crate) fn start(wait: impl FnOnce() + Send + 'static) -> Arc<Stopped> {
        let stopped = Arc::new(Stopped::default());
        let job = Arc::new(Mutex::new(Some(wait)));
        let (done, taken) = (stopped.clone(), job.clone());
        let spawned = std::thread::Builder::new()
            .name("keyway-shutdown".into())
            .spawn(move || {
                if let Some(wait) = taken.lock().take() {
                    wait();
                }
                done.finish();
            });
        if spawned.is_err() {
            if let Some(wait) = job.lock().take() {
                wait();
            }
            stopped.finish();
        }
        stopped
    }

    fn finish(&self) {
        let wakers = {
            let mut state = self.state.lock();
            state.done = true;
            std::mem::take(&mut state.wakers)
        };
        // The callers' wakers are their runtimes' code: contained.
        for waker in wakers {
            contain("a shutdown future's waker", move || waker.wake());
        }
    }
}
