//! Waiting without shutting down: `wait_idle` sees every task of concurrent producers, waits
//! for a held task and wakes many waiters, returns at once inside a task, and the lanes the
//! tasks used are freed right after it returns.

use crate::common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{eventually, fixed_pool, hold_workers, spin, Latch};
use keyway::Pool;

#[test]
fn wait_idle_sees_every_task_of_concurrent_producers() {
    for round in 0..20 {
        let pool = Pool::builder().core_threads(2).build().unwrap();
        let ran = Arc::new(AtomicUsize::new(0));
        let producers: Vec<_> = (0..4)
            .map(|p| {
                let (pool, ran) = (pool.clone(), ran.clone());
                std::thread::spawn(move || {
                    for i in 0..250u32 {
                        let ran = ran.clone();
                        let task = move || {
                            spin(i % 50 * 20);
                            ran.fetch_add(1, Ordering::SeqCst);
                        };
                        match i % 3 {
                            0 => pool.execute(task).unwrap(),
                            1 => pool.execute_sequential((p, i % 7), task).unwrap(),
                            _ => pool.execute_keyed([i % 5, i % 11], task).unwrap(),
                        }
                    }
                })
            })
            .collect();
        for p in producers {
            p.join().unwrap();
        }
        assert!(pool.wait_idle());
        assert_eq!(ran.load(Ordering::SeqCst), 1000, "round {round}");
        assert!(!pool.is_shutdown());
        pool.execute(|| ()).unwrap(); // still open
        assert!(pool.wait_idle());
    }
}

#[test]
fn wait_idle_waits_for_a_held_task_and_many_waiters_wake() {
    let pool = fixed_pool(1);
    let gate = hold_workers(&pool, 1);
    let queued = Arc::new(AtomicUsize::new(0));
    for _ in 0..10 {
        let queued = queued.clone();
        pool.execute_sequential("k", move || {
            queued.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap();
    }
    assert!(!pool.wait_idle_timeout(Duration::ZERO));
    let waiting = Latch::new(4);
    let waiters: Vec<_> = (0..4)
        .map(|_| {
            let (pool, queued, waiting) = (pool.clone(), queued.clone(), waiting.clone());
            std::thread::spawn(move || {
                waiting.count_down();
                assert!(pool.wait_idle_timeout(Duration::MAX));
                assert_eq!(queued.load(Ordering::SeqCst), 10);
            })
        })
        .collect();
    waiting.wait();
    gate.open();
    for w in waiters {
        w.join().unwrap();
    }
    assert!(pool.wait_idle_timeout(Duration::ZERO));
    pool.shutdown();
    assert!(pool.wait_idle(), "a shut-down pool is idle");
}

/// `wait_idle` counts tasks, not lanes: when it returns, every task ran, and the lanes those
/// tasks used are let go by their runners right after (with `idle_lanes(0)`, freed), while a
/// lane pinned by a `Lane` handle stays. It may return while a runner is still letting its lane
/// go, so the lane count is awaited, never read once.
#[test]
fn wait_idle_counts_tasks_and_the_lanes_they_used_are_freed_right_after() {
    let pool = Pool::builder()
        .core_threads(2)
        .idle_lanes(0)
        .build()
        .unwrap();
    let pinned = pool.lane("pinned");
    let ran = Arc::new(AtomicUsize::new(0));
    for round in 0..20 {
        for key in 0..500u32 {
            let ran = ran.clone();
            pool.execute_sequential(key, move || {
                ran.fetch_add(1, Ordering::Relaxed);
            })
            .unwrap();
        }
        let r = ran.clone();
        pinned
            .execute(move || {
                r.fetch_add(1, Ordering::Relaxed);
            })
            .unwrap();
        assert!(pool.wait_idle());
        assert_eq!(ran.load(Ordering::Relaxed), (round + 1) * 501);
        eventually("the lanes of finished tasks are freed", || {
            pool.stats().live_lanes == 1
        });
    }
    drop(pinned);
    eventually("the unpinned lane is freed", || {
        pool.stats().live_lanes == 0
    });
    pool.shutdown();
}

#[test]
fn wait_idle_inside_a_task_returns_at_once() {
    let pool = Pool::new().unwrap();
    let inner = pool.clone();
    let h = pool
        .submit(move || (inner.wait_idle(), inner.wait_idle_timeout(Duration::MAX)))
        .unwrap();
    assert_eq!(h.join().unwrap(), (false, false));
    assert!(pool.wait_idle());
}
