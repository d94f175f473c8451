//! Task handles: join, await from any executor, cancel, and every outcome told apart.

use crate::common;

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use common::Gate;
use keyway::TaskError;

/// A minimal executor: proves the handle is a plain `Future` needing no runtime.
fn block_on<F: Future>(fut: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut fut = pin!(fut);
    loop {
        match fut.as_mut().poll(&mut cx) {
            Poll::Ready(v) => return v,
            Poll::Pending => std::thread::park(),
        }
    }
}

#[test]
fn handles_are_futures() {
    let pool = keyway::Pool::new().unwrap();
    let handles: Vec<_> = (0..100u64)
        .map(|i| pool.submit_sequential(i % 3, move || i * 2).unwrap())
        .collect();
    let total: u64 = block_on(async {
        let mut sum = 0;
        for h in handles {
            sum += h.await.unwrap();
        }
        sum
    });
    assert_eq!(total, (0..100u64).map(|i| i * 2).sum());
    pool.shutdown();
}

#[test]
fn cancel_only_before_start() {
    let pool = keyway::Pool::builder().core_threads(1).build().unwrap();
    let gate = Gate::new();
    let started = common::Latch::new(1);
    let (g, s) = (gate.clone(), started.clone());
    let running = pool
        .submit_sequential("c", move || {
            s.count_down();
            g.wait()
        })
        .unwrap();
    let queued = pool.submit_sequential("c", || "ran").unwrap();
    let kept = pool.submit_sequential("c", || "kept").unwrap();
    assert!(queued.cancel());
    assert!(!queued.cancel(), "second cancel reports nothing to cancel");
    started.wait();
    assert!(!running.cancel(), "a running task cannot be cancelled");
    gate.open();
    assert!(matches!(queued.join(), Err(TaskError::Cancelled)));
    assert_eq!(kept.join().unwrap(), "kept");
    running.join().unwrap();
    pool.shutdown();
}

#[test]
fn join_timeout_gives_the_handle_back() {
    let pool = keyway::Pool::builder().core_threads(1).build().unwrap();
    let gate = Gate::new();
    let g = gate.clone();
    let h = pool.submit(move || g.wait()).unwrap();
    let h = h
        .join_timeout(std::time::Duration::from_millis(1))
        .unwrap_err();
    gate.open();
    h.join().unwrap();
    pool.shutdown();
}

#[test]
fn outcomes_are_told_apart() {
    let pool = keyway::Pool::builder()
        .core_threads(1)
        .max_threads(1)
        .build()
        .unwrap();
    let gate = Gate::new();
    let g = gate.clone();
    pool.execute_sequential("k", move || g.wait()).unwrap();
    let panicked = pool
        .submit_sequential("k", || -> () { panic!("x") })
        .unwrap();
    let ran = pool.submit_sequential("k", || 1).unwrap();
    let cancelled = pool.submit_sequential("k", || 2).unwrap();
    let coalesced = pool.submit_coalescing("k", || 3).unwrap();
    let newest = pool.submit_coalescing("k", || 4).unwrap();
    assert!(cancelled.cancel());
    gate.open();
    assert!(matches!(panicked.join(), Err(TaskError::Panicked(_))));
    assert_eq!(ran.join().unwrap(), 1);
    assert!(matches!(cancelled.join(), Err(TaskError::Cancelled)));
    assert!(matches!(coalesced.join(), Err(TaskError::Coalesced)));
    assert_eq!(newest.join().unwrap(), 4);
    pool.shutdown();
}
