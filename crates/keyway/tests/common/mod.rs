//! Helpers shared by the integration tests: exact synchronisation, never sleeps.
#![allow(dead_code)]

pub mod counting;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// How long a test waits for something that should happen at once before it calls it a hang.
pub const HANG: Duration = Duration::from_secs(60);

/// A count-down latch.
#[derive(Clone)]
pub struct Latch(Arc<(Mutex<usize>, Condvar)>);

impl Latch {
    pub fn new(count: usize) -> Self {
        Latch(Arc::new((Mutex::new(count), Condvar::new())))
    }

    pub fn count_down(&self) {
        let (m, c) = &*self.0;
        let mut n = m.lock().unwrap();
        *n = n.saturating_sub(1);
        if *n == 0 {
            c.notify_all();
        }
    }

    /// Waits until the count reaches zero; false if `timeout` passed first.
    pub fn wait_for(&self, timeout: Duration) -> bool {
        let (m, c) = &*self.0;
        let n = m.lock().unwrap();
        let (n, _) = c.wait_timeout_while(n, timeout, |n| *n > 0).unwrap();
        *n == 0
    }

    pub fn wait(&self) {
        assert!(
            self.wait_for(HANG),
            "latch not released within {HANG:?}: hang"
        );
    }

    pub fn count(&self) -> usize {
        *self.0 .0.lock().unwrap()
    }
}

/// A gate: tasks wait at it until it is opened.
#[derive(Clone)]
pub struct Gate(Latch);

impl Gate {
    pub fn new() -> Self {
        Gate(Latch::new(1))
    }
    pub fn open(&self) {
        self.0.count_down()
    }
    pub fn wait(&self) {
        self.0.wait()
    }
    /// Waits at most `timeout`; true if the gate opened.
    pub fn wait_for(&self, timeout: Duration) -> bool {
        self.0.wait_for(timeout)
    }
}

/// Polls `cond` until it holds; panics after `HANG`. For state the pool changes on its own
/// schedule (threads retiring), where no event can be waited on.
pub fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + HANG;
    while !cond() {
        assert!(Instant::now() < deadline, "never happened: {what}");
        std::thread::yield_now();
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Counts live instances: proves each task is run or dropped exactly once.
#[derive(Clone, Default)]
pub struct DropCount(Arc<std::sync::atomic::AtomicUsize>);

pub struct Token(Arc<std::sync::atomic::AtomicUsize>, AtomicBool);

impl DropCount {
    pub fn token(&self) -> Token {
        self.0.fetch_add(1, Ordering::SeqCst);
        Token(self.0.clone(), AtomicBool::new(false))
    }
    pub fn live(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

impl Drop for Token {
    fn drop(&mut self) {
        assert!(!self.1.swap(true, Ordering::SeqCst), "dropped twice");
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Small deterministic work, so tasks take varying time.
#[inline(never)]
pub fn spin(n: u32) -> u64 {
    let mut x = 0u64;
    for i in 0..n {
        x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i as u64));
    }
    x
}

/// A pool of exactly `n` threads: no auxiliary thread may help.
pub fn fixed_pool(n: usize) -> keyway::Pool {
    keyway::Pool::builder()
        .core_threads(n)
        .max_threads(n)
        .build()
        .unwrap()
}

/// A task that counts `started` down, then waits at `gate` (at most `HANG`); it returns whether
/// the gate opened (false: released by the timeout).
pub fn held_task(gate: &Gate, started: &Latch) -> impl FnOnce() -> bool + Send + 'static + use<> {
    let (gate, started) = (gate.clone(), started.clone());
    move || {
        started.count_down();
        gate.wait_for(HANG)
    }
}

/// Occupies `n` workers of `pool` with held tasks and returns, once all of them run, the gate
/// that releases them.
pub fn hold_workers(pool: &keyway::Pool, n: usize) -> Gate {
    let gate = Gate::new();
    let started = Latch::new(n);
    for _ in 0..n {
        let task = held_task(&gate, &started);
        pool.execute(move || {
            task();
        })
        .unwrap();
    }
    started.wait();
    gate
}

/// Calls `shutdown_now` on another thread while `gate` holds a running task, opens the gate once
/// intake has stopped, and returns what `shutdown_now` handed back.
pub fn shutdown_now_while_held(pool: &keyway::Pool, gate: &Gate) -> Vec<keyway::PendingTask> {
    let stopper = {
        let pool = pool.clone();
        std::thread::spawn(move || pool.shutdown_now())
    };
    eventually("intake stops", || pool.is_shutdown());
    gate.open();
    stopper.join().unwrap()
}

/// Starts the pool's reserved thread (they start lazily: the first `try_execute` that finds
/// none idle starts one) and waits until one is parked idle.
pub fn reserved_ready(pool: &keyway::Pool) {
    if let Err(e) = pool.try_execute(|| ()) {
        assert!(matches!(e, keyway::TryExecuteError::Busy(_)));
    }
    eventually("a reserved thread is idle", || {
        pool.stats().idle_reserved_threads >= 1
    });
}

/// Runs `scenario` on its own thread; fails the test if it panics or has not returned within
/// `HANG` (the thread is then leaked: it is hung).
pub fn finishes<R: Send + 'static>(what: &str, scenario: impl FnOnce() -> R + Send + 'static) -> R {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(scenario));
        let _ = tx.send(r);
    });
    match rx.recv_timeout(HANG) {
        Ok(Ok(r)) => r,
        Ok(Err(p)) => std::panic::resume_unwind(p),
        Err(_) => panic!("hang: {what} did not return within {HANG:?}"),
    }
}

/// A value whose `Drop` panics (unless the thread is already unwinding).
pub struct PanicOnDrop;

impl Drop for PanicOnDrop {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            panic!("PanicOnDrop dropped");
        }
    }
}

/// A waker that panics when woken.
pub struct PanicWaker;

impl std::task::Wake for PanicWaker {
    fn wake(self: Arc<Self>) {
        panic!("PanicWaker woken");
    }
}

pub fn panic_waker() -> std::task::Waker {
    std::task::Waker::from(Arc::new(PanicWaker))
}

/// Polls `fut` once with a waker that panics when woken; true if it is still pending.
pub fn poll_with_panicking_waker<F: std::future::Future + Unpin>(fut: &mut F) -> bool {
    let waker = panic_waker();
    let mut cx = std::task::Context::from_waker(&waker);
    std::pin::Pin::new(fut).poll(&mut cx).is_pending()
}

/// A scheduler on `pool` with one unlimited executor, `jobs`, and a 10 ms interval.
pub fn jobs_scheduler(pool: &keyway::Pool) -> keyway::Scheduler {
    keyway::Scheduler::builder(pool)
        .interval(Duration::from_millis(10))
        .executor("jobs", keyway::ExecutorConfig::unlimited())
        .build()
        .unwrap()
}
