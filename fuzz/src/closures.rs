//! The pool built from random settings, and closures submitted every way the pool takes them.

use std::sync::{Arc, Mutex};

use keyway::{PendingTask, Pool, TaskHandle};

use crate::input::{Body, Kind, Settings};
use crate::probes::{key, BombPayload, Out, Probe};

/// Builds the pool; `None` when the builder refuses the settings (it must answer with a
/// `BuildError`, never panic).
pub fn build(s: &Settings) -> Option<Pool> {
    let mut b = Pool::builder();
    // Thread counts small unless the input asks for a huge one (which must be a BuildError).
    if let Some(c) = &s.core_threads {
        b = b.core_threads(c.get(3));
    }
    if let Some(c) = &s.max_threads {
        b = b.max_threads(c.get(4));
    }
    if let Some(d) = s.keep_alive {
        b = b.keep_alive(d.get());
    }
    if let Some(c) = &s.core_growth_after {
        b = b.core_growth_after(c.get(4));
    }
    if let Some(d) = s.monitor_period {
        b = b.monitor_period(d.get());
    }
    if let Some(d) = s.blocked_after {
        b = b.blocked_after(d.get());
    }
    if let Some(c) = &s.lane_batch {
        b = b.lane_batch(c.get(64));
    }
    if let Some(c) = &s.capacity {
        b = b.capacity(c.get(16));
    }
    if let Some(c) = &s.reserved_threads {
        b = b.reserved_threads(c.get(2));
    }
    if let Some(c) = &s.min_reserved_threads {
        b = b.min_reserved_threads(c.get(2));
    }
    if let Some(d) = s.reserved_idle_timeout {
        b = b.reserved_idle_timeout(d.get());
    }
    if s.panic_hook {
        b = b.panic_hook(|_| {});
    }
    match b.build() {
        Ok(pool) => Some(pool),
        Err(e) => {
            assert!(!e.to_string().is_empty());
            None
        }
    }
}

/// Spins a little.
pub fn spin(n: u8) {
    let mut x = 0u64;
    for i in 0..u64::from(n) * 100 {
        x = std::hint::black_box(x.wrapping_add(i));
    }
}

/// A closure task doing `body`, carrying `probe`; what `shutdown_now` hands back inside it goes
/// to `back`.
pub fn task(
    probe: Probe,
    body: Body,
    pool: Pool,
    back: Arc<Mutex<Vec<PendingTask>>>,
    result_bomb: bool,
) -> impl FnOnce() -> Out + Send + 'static {
    move || {
        // The whole probe moves into the closure (not just its field): it is dropped with the
        // closure, run or not.
        let mut probe = probe;
        probe.ran = true;
        act(body, &pool, &back);
        Out(result_bomb)
    }
}

/// What a closure task's `body` does, on its pool; what `shutdown_now` hands back inside it
/// goes to `back`.
pub fn act(body: Body, pool: &Pool, back: &Mutex<Vec<PendingTask>>) {
    match body {
        Body::Quick => {}
        Body::Panic => panic!("fuzz: task panics"),
        Body::PanicBombPayload => std::panic::panic_any(BombPayload),
        Body::Spin(n) => spin(n),
        Body::Shutdown => pool.shutdown(),
        Body::ShutdownNow => {
            let got = pool.shutdown_now();
            back.lock().unwrap().extend(got);
        }
    }
}

/// Submits `task` as `kind`: `Some(handle if any)` if accepted, `None` if refused.
pub fn submit<F>(pool: &Pool, kind: Kind, task: F) -> Option<Option<TaskHandle<Out>>>
where
    F: FnOnce() -> Out + Send + 'static,
{
    let plain = |f: F| move || drop(f());
    match kind {
        Kind::Execute => pool.execute(plain(task)).ok().map(|()| None),
        Kind::Submit => pool.submit(task).ok().map(Some),
        Kind::ExecuteSequential(k) => pool
            .execute_sequential(key(k), plain(task))
            .ok()
            .map(|()| None),
        Kind::SubmitSequential(k) => pool.submit_sequential(key(k), task).ok().map(Some),
        Kind::SubmitCoalescing(k) => pool.submit_coalescing(key(k), task).ok().map(Some),
        Kind::ExecuteKeyed(a, b) => pool
            .execute_keyed([key(a), key(b)], plain(task))
            .ok()
            .map(|()| None),
        Kind::SubmitKeyed(a, b) => pool.submit_keyed([key(a), key(b)], task).ok().map(Some),
        Kind::LaneHandle(id) => pool
            .lane(u32::from(id % 4))
            .execute(plain(task))
            .ok()
            .map(|()| None),
        Kind::TryExecute => pool.try_execute(plain(task)).ok().map(|()| None),
    }
}
