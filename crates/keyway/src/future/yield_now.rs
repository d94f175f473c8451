//! [`yield_now`]: a future's way to let other work run before it goes on.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// Gives the thread back once: the first poll wakes its own task and returns `Pending`, the next
/// one is `Ready`. It works under any executor.
///
/// On keyway's pool a future that wakes itself is resumed at once by the same worker, its
/// caches still warm, for a bounded streak of such continuations (32 in a row); past it, the
/// future goes behind the work already queued, and the worker looks at work from outside the
/// pool first every so often. So a long-running future of one lane that yields lets other lanes
/// and outside work run, within a bounded number of yields rather than at every one. Its own
/// lane stays held throughout: the next task of its context still waits for it to complete.
///
/// ```
/// let pool = keyway::Pool::new().unwrap();
/// let handle = pool
///     .spawn_sequential("account-7", async {
///         let mut total = 0u64;
///         for chunk in 0..4u64 {
///             total += chunk;
///             keyway::yield_now().await; // other lanes may run here
///         }
///         total
///     })
///     .unwrap();
/// assert_eq!(handle.join().unwrap(), 6);
/// ```
#[doc(alias = "yield")]
pub fn yield_now() -> YieldNow {
    YieldNow { yielded: false }
}

/// The future [`yield_now`] returns.
///
/// ```
/// let ready = futures::executor::block_on(keyway::yield_now());
/// assert_eq!(ready, ());
/// ```
#[derive(Debug)]
#[must_use = "futures do nothing unless awaited"]
pub struct YieldNow {
    yielded: bool,
}

impl Future for YieldNow {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if std::mem::replace(&mut self.yielded, true) {
            Poll::Ready(())
        } else {
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }
}
