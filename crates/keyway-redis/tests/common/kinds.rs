//! The two kinds of handler, so that one test runs for both: a sync handler, and the same
//! code as an async handler whose future awaits before and after it (so that it gives its
//! thread up and is woken again, in its key's lane, around the handler's work).

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use keyway_redis::stream::{
    Delivery, HandlerError, StreamConsumer, StreamConsumerBuilder, StreamError,
};

/// Which kind of handler a test builds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Sync,
    Async,
}

impl Kind {
    /// The kind named by `KW_STREAM_HANDLER` (`async` or `sync`, the default): the member
    /// processes of the fault tests take it from there.
    pub fn from_env() -> Self {
        match std::env::var("KW_STREAM_HANDLER").as_deref() {
            Ok("async") => Kind::Async,
            _ => Kind::Sync,
        }
    }
}

/// Builds a consumer whose handler runs `handler`, as a sync handler or inside an async one.
pub fn build<H>(
    b: StreamConsumerBuilder,
    pool: &keyway::Pool,
    kind: Kind,
    handler: H,
) -> Result<StreamConsumer, StreamError>
where
    H: Fn(&Delivery, &[u8]) -> Result<(), HandlerError> + Send + Sync + 'static,
{
    match kind {
        Kind::Sync => b.build(pool, handler),
        Kind::Async => {
            let handler = Arc::new(handler);
            b.build_async(pool, move |d, payload| {
                let handler = Arc::clone(&handler);
                async move {
                    woken_from_another_thread().await;
                    let result = handler(&d, &payload);
                    keyway::yield_now().await;
                    result
                }
            })
        }
    }
}

/// A future that is pending once, and woken by another thread.
pub fn woken_from_another_thread() -> impl Future<Output = ()> + Send {
    Elsewhere { started: false }
}

struct Elsewhere {
    started: bool,
}

impl Future for Elsewhere {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.started {
            return Poll::Ready(());
        }
        self.started = true;
        let waker = cx.waker().clone();
        std::thread::spawn(move || waker.wake());
        Poll::Pending
    }
}

/// A latch that async handlers await: opened by the test (or when dropped, through
/// [`AsyncLatch::open`] by an `OpenOnDrop`-like guard), or once `n` futures wait on it.
#[derive(Default)]
pub struct AsyncLatch {
    state: Mutex<LatchState>,
}

#[derive(Default)]
struct LatchState {
    open: bool,
    waiting: usize,
    wakers: Vec<Waker>,
}

impl AsyncLatch {
    /// Opens the latch: every waiting future completes.
    pub fn open(&self) {
        let wakers = {
            let mut st = self.state.lock().unwrap();
            st.open = true;
            std::mem::take(&mut st.wakers)
        };
        wakers.into_iter().for_each(Waker::wake);
    }

    /// How many futures have arrived at the latch.
    pub fn arrived(&self) -> usize {
        self.state.lock().unwrap().waiting
    }

    /// Waits until the latch is open; the `n`th future to arrive opens it (`usize::MAX`:
    /// only [`open`](Self::open) does).
    pub fn wait(self: &Arc<Self>, n: usize) -> impl Future<Output = ()> + Send {
        LatchWait {
            latch: Arc::clone(self),
            n,
            arrived: false,
        }
    }
}

struct LatchWait {
    latch: Arc<AsyncLatch>,
    n: usize,
    arrived: bool,
}

impl Future for LatchWait {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let first = !std::mem::replace(&mut self.arrived, true);
        let mut st = self.latch.state.lock().unwrap();
        if first {
            st.waiting += 1;
            if st.waiting >= self.n {
                st.open = true;
            }
        }
        if st.open {
            let wakers = std::mem::take(&mut st.wakers);
            drop(st);
            wakers.into_iter().for_each(Waker::wake);
            return Poll::Ready(());
        }
        st.wakers.push(cx.waker().clone());
        Poll::Pending
    }
}

/// Opens its latch when dropped (a failing test must not leave futures waiting).
pub struct OpenAsyncOnDrop(pub Arc<AsyncLatch>);

impl Drop for OpenAsyncOnDrop {
    fn drop(&mut self) {
        self.0.open();
    }
}
