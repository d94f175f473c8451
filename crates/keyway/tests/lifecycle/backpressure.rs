//! Waiting for room under `capacity`: every task runs exactly once, never more than `capacity`
//! accepted tasks are not done at once, waiters wake on release and on shutdown.

use crate::common;

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use common::{hold_workers, Latch, HANG};
use keyway::{Pool, SubmitError};

struct Unpark(std::thread::Thread);
impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark()
    }
}

fn block_on<F: Future>(f: F) -> F::Output {
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut f = std::pin::pin!(f);
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut Context::from_waker(&waker)) {
            return v;
        }
        std::thread::park();
    }
}

/// Counts tasks inside their body at once, and the most ever seen.
#[derive(Default)]
struct Inside {
    now: AtomicUsize,
    most: AtomicUsize,
}

impl Inside {
    fn enter(&self) {
        let n = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(n, Ordering::SeqCst);
    }
    fn leave(&self) {
        self.now.fetch_sub(1, Ordering::SeqCst);
    }
}

#[test]
fn many_producers_every_task_once_never_above_capacity() {
    const PRODUCERS: usize = 8;
    const EACH: usize = 300;
    for seed in 0..16usize {
        let capacity = 1 + seed % 4;
        // More threads than capacity, so only the capacity limits what runs at once.
        let pool = Pool::builder()
            .core_threads(capacity + 2)
            .max_threads(capacity + 4)
            .capacity(capacity)
            .build()
            .unwrap();
        let runs: Arc<Vec<AtomicUsize>> =
            Arc::new((0..PRODUCERS * EACH).map(|_| AtomicUsize::new(0)).collect());
        let inside = Arc::new(Inside::default());
        let start = Latch::new(1);
        let producers: Vec<_> = (0..PRODUCERS)
            .map(|p| {
                let (pool, runs, inside, start) =
                    (pool.clone(), runs.clone(), inside.clone(), start.clone());
                std::thread::spawn(move || {
                    start.wait();
                    for i in 0..EACH {
                        let id = p * EACH + i;
                        let (runs, inside) = (runs.clone(), inside.clone());
                        let task = move || {
                            inside.enter();
                            for _ in 0..(id % 5) {
                                std::thread::yield_now();
                            }
                            runs[id].fetch_add(1, Ordering::SeqCst);
                            inside.leave();
                        };
                        match (p + seed) % 4 {
                            // A lost wake-up shows as `Full` after `HANG`, not as a hang.
                            0 => pool
                                .wait_for_room(task, HANG, |t| pool.execute(t))
                                .expect("room came within HANG"),
                            1 => pool
                                .wait_for_room(task, HANG, |t| pool.execute_sequential(id % 3, t))
                                .unwrap(),
                            2 => block_on(pool.wait_for_room_async(task, |t| pool.submit(t)))
                                .map(drop)
                                .unwrap(),
                            _ => block_on(
                                pool.wait_for_room_async(task, |t| pool.execute_keyed([id % 4], t)),
                            )
                            .unwrap(),
                        }
                    }
                })
            })
            .collect();
        start.count_down();
        for p in producers {
            p.join().unwrap();
        }
        pool.shutdown();
        for (id, r) in runs.iter().enumerate() {
            assert_eq!(r.load(Ordering::SeqCst), 1, "task {id} (seed {seed})");
        }
        let most = inside.most.load(Ordering::SeqCst);
        assert!(
            most <= capacity,
            "{most} tasks ran at once under capacity {capacity}"
        );
    }
}

#[test]
fn timeout_extremes_and_waking_on_release() {
    let pool = Pool::builder()
        .core_threads(1)
        .max_threads(1)
        .capacity(1)
        .build()
        .unwrap();
    let gate = hold_workers(&pool, 1); // the one place is taken by a running task
    let err = pool.wait_for_room(|| 1, Duration::ZERO, |t| pool.submit(t));
    let task = match err {
        Err(SubmitError::Full(task)) => task,
        other => panic!("expected Full, got {other:?}"),
    };
    assert_eq!(task(), 1, "the task came back");
    let waiting = Latch::new(1);
    let waiter = {
        let (pool, waiting) = (pool.clone(), waiting.clone());
        std::thread::spawn(move || {
            waiting.count_down();
            pool.wait_for_room(|| 2, Duration::MAX, |t| pool.submit(t))
                .unwrap()
                .join()
                .unwrap()
        })
    };
    waiting.wait();
    gate.open();
    assert_eq!(waiter.join().unwrap(), 2);
    pool.shutdown();
}

#[test]
fn shutdown_wakes_waiters_with_the_task_handed_back() {
    let pool = Pool::builder()
        .core_threads(1)
        .max_threads(1)
        .capacity(1)
        .build()
        .unwrap();
    let gate = hold_workers(&pool, 1);
    let started = Latch::new(2);
    let blocking = {
        let (pool, started) = (pool.clone(), started.clone());
        std::thread::spawn(move || {
            started.count_down();
            matches!(pool.execute_wait(|| ()), Err(SubmitError::Shutdown(_)))
        })
    };
    let asynchronous = {
        let (pool, started) = (pool.clone(), started.clone());
        std::thread::spawn(move || {
            started.count_down();
            let out = block_on(pool.wait_for_room_async(|| 5, |t| pool.submit(t)));
            matches!(out, Err(SubmitError::Shutdown(_)))
        })
    };
    started.wait();
    assert!(pool.shutdown_timeout(Duration::ZERO).is_err()); // stops intake, held task runs on
    assert!(blocking.join().unwrap());
    assert!(asynchronous.join().unwrap());
    gate.open();
    pool.shutdown();
}

#[test]
fn waiting_inside_a_task_does_not_deadlock() {
    let pool = Pool::builder().capacity(1).build().unwrap();
    let inner = pool.clone();
    let h = pool
        .submit(move || matches!(inner.execute_wait(|| ()), Err(SubmitError::Full(_))))
        .unwrap();
    assert!(
        h.join().unwrap(),
        "a full pool refuses its own task's wait at once"
    );
    pool.shutdown();
}

#[test]
fn dropping_a_pending_future_drops_the_task_only() {
    let pool = Pool::builder()
        .core_threads(1)
        .max_threads(1)
        .capacity(1)
        .build()
        .unwrap();
    let gate = hold_workers(&pool, 1);
    let dropped = Arc::new(Mutex::new(false));
    struct OnDrop(Arc<Mutex<bool>>);
    impl Drop for OnDrop {
        fn drop(&mut self) {
            *self.0.lock().unwrap() = true;
        }
    }
    let token = OnDrop(dropped.clone());
    let mut fut = Box::pin(pool.wait_for_room_async(
        move || {
            let _t = &token;
        },
        |t| pool.execute(t),
    ));
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    assert!(fut
        .as_mut()
        .poll(&mut Context::from_waker(&waker))
        .is_pending());
    drop(fut);
    assert!(*dropped.lock().unwrap());
    gate.open();
    pool.execute_wait(|| ()).unwrap(); // the dropped waiter left no trace behind
    pool.shutdown();
}
