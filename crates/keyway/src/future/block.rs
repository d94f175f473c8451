//! A minimal `block_on`: runs a future on the calling thread, parking it while the future waits.
//! Used for futures handed back by `shutdown_now` and for async typed-lane messages run by the
//! caller.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::Thread;

struct Unpark(Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// Polls `fut` on this thread until it completes.
pub(crate) fn block_on<F: Future>(fut: F) -> F::Output {
    let mut fut = pin!(fut);
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    loop {
        match fut.as_mut().poll(&mut cx) {
            Poll::Ready(value) => return value,
            Poll::Pending => std::thread::park(),
        }
    }
}

#[cfg(all(test, not(loom)))] // `futures` is a dev-dependency only outside loom (see Cargo.toml)
mod tests {
    #[test]
    fn block_on_waits_for_a_wake_from_another_thread() {
        let (tx, rx) = futures::channel::oneshot::channel();
        let t = std::thread::spawn(move || tx.send(7).unwrap());
        assert_eq!(super::block_on(rx).unwrap(), 7);
        t.join().unwrap();
    }
}
