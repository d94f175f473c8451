//! Auxiliary threads come when work is stuck, retire after `keep_alive`, the core
//! grows after repeated need, and `max_threads` is never exceeded.

use crate::common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{eventually, Gate, Latch};

/// OS threads of this process whose name starts with `prefix`.
fn os_threads(prefix: &str) -> usize {
    std::fs::read_dir("/proc/self/task")
        .map(|dir| {
            dir.filter_map(|e| e.ok())
                .filter(|e| {
                    std::fs::read_to_string(e.path().join("comm"))
                        .is_ok_and(|name| name.starts_with(prefix) && !name.contains("monitor"))
                })
                .count()
        })
        .unwrap_or(0)
}

/// Submits `tasks` held tasks on contexts `0..tasks` and returns once `at_once` of them run at
/// the same time (with few core threads, only auxiliary threads make that possible).
fn burst(
    pool: &keyway::Pool,
    tasks: usize,
    at_once: usize,
) -> (Gate, Vec<keyway::TaskHandle<bool>>) {
    let gate = Gate::new();
    let entered = Latch::new(at_once);
    let handles = (0..tasks)
        .map(|i| {
            pool.submit_sequential(i, common::held_task(&gate, &entered))
                .unwrap()
        })
        .collect();
    entered.wait();
    (gate, handles)
}

/// Opens the gate and checks every held task was released by it, not by its timeout.
fn release(gate: Gate, handles: Vec<keyway::TaskHandle<bool>>) {
    gate.open();
    for h in handles {
        assert!(h.join().unwrap(), "a held task was released by its timeout");
    }
}

#[test]
fn auxiliary_threads_retire_and_max_holds() {
    const MAX: usize = 4;
    let pool = keyway::Pool::builder()
        .core_threads(1)
        .max_threads(MAX)
        .keep_alive(Duration::from_millis(50))
        .monitor_period(Duration::from_millis(5))
        .blocked_after(Duration::from_millis(5))
        .core_growth_after(1_000)
        .thread_name("kwaux")
        .build()
        .unwrap();
    // Sample thread counts for the whole test.
    let stop = Arc::new(AtomicBool::new(false));
    let most = Arc::new(AtomicUsize::new(0));
    let sampler = {
        let (stop, most, pool) = (stop.clone(), most.clone(), pool.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let s = pool.stats();
                most.fetch_max(s.core_threads + s.auxiliary_threads, Ordering::Relaxed);
                most.fetch_max(os_threads("kwaux"), Ordering::Relaxed);
                std::thread::yield_now();
            }
        })
    };
    // Ten tasks that block until all ten are in: only possible if threads are added, and only
    // MAX can be, so the gate opens by its own hand later.
    // MAX tasks run at once: only possible once auxiliary threads were added.
    let (gate, handles) = burst(&pool, 10, MAX);
    assert!(pool.stats().auxiliary_threads >= MAX - 1);
    release(gate, handles);
    eventually("auxiliary threads retire", || {
        pool.stats().auxiliary_threads == 0
    });
    eventually("their OS threads exit", || os_threads("kwaux") == 1);
    stop.store(true, Ordering::Relaxed);
    sampler.join().unwrap();
    assert!(most.load(Ordering::Relaxed) <= MAX, "max_threads exceeded");
    assert!(most.load(Ordering::Relaxed) >= MAX);
    // And they come back on demand.
    let (gate, again) = burst(&pool, 2, 2);
    release(gate, again);
    pool.shutdown();
}

#[test]
fn core_grows_after_repeated_auxiliary_need() {
    let pool = keyway::Pool::builder()
        .core_threads(1)
        .max_threads(3)
        .keep_alive(Duration::from_millis(20))
        .monitor_period(Duration::from_millis(5))
        .blocked_after(Duration::from_millis(5))
        .core_growth_after(2)
        .build()
        .unwrap();
    for _round in 0..2 {
        let (gate, hs) = burst(&pool, 2, 2);
        release(gate, hs);
        eventually("auxiliary threads retire", || {
            pool.stats().auxiliary_threads == 0
        });
    }
    let stats = pool.stats();
    assert!(stats.auxiliary_started >= 2, "{stats:?}");
    assert_eq!(stats.core_threads, 2, "core did not grow: {stats:?}");
    pool.shutdown();
}
