//! [`yield_now`]: a future's way to let other work run before it goes on.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// Gives the thread back once: the first poll wakes its own task and returns `Pending`, the next
/// one is `Ready`. On keyway's pool the woken future is queued again behind the work already
/// waiting, so a long-running future of one lane can let other lanes run; its own lane stays held
/// (the next task of its context still waits for it to complete). It works under any executor.
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
