//! A context with 100,000 queued tasks does not keep another context's task from
//! running within a few batches (counted in tasks, not time).

use crate::common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

const BATCH: usize = 32;

/// `core` workers, `core` contexts with 100,000 queued tasks each, and one more context with
/// a single task. Every worker stays busy (none is parked, so no wake-up latency enters the
/// count): the single task must start within a few batches of each worker.
fn busy_contexts_do_not_starve_another(core: usize) {
    // max_threads = core: no auxiliary thread may help, fairness alone must do it.
    let pool = keyway::Pool::builder()
        .core_threads(core)
        .max_threads(core)
        .lane_batch(BATCH)
        .build()
        .unwrap();
    let done_a = Arc::new(AtomicU64::new(0));
    // Hold every worker so that everything below is queued before anything runs.
    let gate = common::hold_workers(&pool, core);
    for i in 0..100_000 * core {
        let d = done_a.clone();
        pool.execute_sequential(("A", i % core), move || {
            d.fetch_add(1, Ordering::Relaxed);
        })
        .unwrap();
    }
    let seen = Arc::new(AtomicU64::new(u64::MAX));
    let (d, s) = (done_a.clone(), seen.clone());
    let b = pool
        .submit_sequential(("B", 0), move || {
            s.store(d.load(Ordering::Relaxed), Ordering::Relaxed)
        })
        .unwrap();
    gate.open();
    b.join().unwrap();
    let a_before_b = seen.load(Ordering::Relaxed);
    pool.shutdown();
    assert_eq!(done_a.load(Ordering::Relaxed), 100_000 * core as u64);
    let bound = 3 * BATCH as u64 * core as u64;
    assert!(
        a_before_b <= bound,
        "B waited for {a_before_b} busy tasks (bound {bound})"
    );
}

#[test]
fn one_thread() {
    busy_contexts_do_not_starve_another(1);
}

#[test]
fn two_threads() {
    busy_contexts_do_not_starve_another(2);
}

/// One thread, and never more: no auxiliary thread may help, fairness alone must do it.
fn one_thread_pool() -> keyway::Pool {
    keyway::Pool::builder()
        .core_threads(1)
        .max_threads(1)
        .build()
        .unwrap()
}

/// A task from outside the pool that tells the busy context to stop, and says how far `count`
/// had got when it ran.
fn stop_from_outside(
    pool: &keyway::Pool,
    stop: &Arc<AtomicU64>,
    count: &Arc<AtomicU64>,
) -> keyway::TaskHandle<u64> {
    let (stop, count) = (stop.clone(), count.clone());
    pool.submit(move || {
        stop.store(1, Ordering::Relaxed);
        count.load(Ordering::Relaxed)
    })
    .unwrap()
}

/// A lane whose tasks keep submitting to it from inside the pool (its own deque) still lets an
/// outside task through.
#[test]
fn self_feeding_lane_does_not_starve_outside_work() {
    let pool = one_thread_pool();
    let stop = Arc::new(AtomicU64::new(0));
    let runs = Arc::new(AtomicU64::new(0));
    fn feed(pool: keyway::Pool, stop: Arc<AtomicU64>, runs: Arc<AtomicU64>) {
        if stop.load(Ordering::Relaxed) == 0 {
            runs.fetch_add(1, Ordering::Relaxed);
            let p = pool.clone();
            let _ = pool.execute_sequential("loop", move || feed(p, stop, runs));
        }
    }
    let (p, s, r) = (pool.clone(), stop.clone(), runs.clone());
    pool.execute_sequential("loop", move || feed(p, s, r))
        .unwrap();
    let loops = stop_from_outside(&pool, &stop, &runs).join().unwrap();
    pool.shutdown();
    assert!(
        loops < 10_000,
        "the outside task waited for {loops} self-fed tasks"
    );
}

/// A one-thread pool, where `spin` submits a future of one context that yields until an outside
/// task, submitted right after it, says stop; checks how many yields that task waited for. A
/// future woken by its own poll is resumed at once by its worker (in place, or from the
/// worker's continuation slot), but only for a bounded streak: then it goes behind the queued
/// work, and the injector is looked at first every so often, so the outside task gets through.
/// Both are queued while the worker is held, so the count does not depend on timing.
fn yields_before_outside_work(spin: impl FnOnce(&keyway::Pool, Arc<AtomicU64>, Arc<AtomicU64>)) {
    let pool = one_thread_pool();
    let (stop, yields) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let gate = common::hold_workers(&pool, 1);
    spin(&pool, stop.clone(), yields.clone());
    let outside = stop_from_outside(&pool, &stop, &yields);
    gate.open();
    let waited = outside.join().unwrap();
    pool.shutdown();
    assert!(
        waited < 10_000,
        "the outside task waited for {waited} yields of another context's future"
    );
}

/// Yields until told to stop; at most a million times, so that a scheduler that never lets the
/// outside task in fails the test instead of hanging it.
async fn yield_until(stop: Arc<AtomicU64>, yields: Arc<AtomicU64>) {
    while stop.load(Ordering::Relaxed) == 0 && yields.load(Ordering::Relaxed) < 1_000_000 {
        yields.fetch_add(1, Ordering::Relaxed);
        keyway::yield_now().await;
    }
}

#[test]
fn a_yielding_future_does_not_starve_outside_work() {
    yields_before_outside_work(|pool, stop, yields| {
        drop(
            pool.spawn_sequential("spin", yield_until(stop, yields))
                .unwrap(),
        );
    });
}

#[test]
fn a_yielding_async_typed_lane_does_not_starve_outside_work() {
    yields_before_outside_work(|pool, stop, yields| {
        let lanes = pool.typed_lanes_async(move |_: &u8, ()| {
            let (stop, yields) = (stop.clone(), yields.clone());
            async move {
                // Many yielding messages: each yields a few times, until told to stop.
                for _ in 0..4 {
                    if stop.load(Ordering::Relaxed) != 0 {
                        break;
                    }
                    yields.fetch_add(1, Ordering::Relaxed);
                    keyway::yield_now().await;
                }
            }
        });
        for _ in 0..100_000 {
            lanes.send(0, ()).unwrap();
        }
    });
}
