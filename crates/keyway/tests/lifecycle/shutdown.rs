//! `shutdown` runs every accepted task; `shutdown_now` hands back exactly the
//! unstarted ones; refused work comes back to the caller. Drop counters prove every task is run
//! or dropped exactly once.

use crate::common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use common::{DropCount, Gate, Latch};
use keyway::{SubmitError, TaskError};

#[test]
fn shutdown_runs_everything_accepted() {
    let pool = keyway::Pool::builder().core_threads(2).build().unwrap();
    let gate = common::hold_workers(&pool, 2);
    let ran = Arc::new(AtomicU64::new(0));
    let drops = DropCount::default();
    for i in 0..10_000u64 {
        let (r, t) = (ran.clone(), drops.token());
        let task = move || {
            let _t = t;
            r.fetch_add(1, Ordering::Relaxed);
        };
        match i % 3 {
            0 => pool.execute(task).unwrap(),
            1 => pool.execute_sequential(i % 17, task).unwrap(),
            _ => pool.lane(i % 5).execute(task).unwrap(),
        }
    }
    let closer = {
        let pool = pool.clone();
        std::thread::spawn(move || pool.shutdown())
    };
    common::eventually("intake stops", || pool.is_shutdown());
    let refused = pool.execute(|| ()).unwrap_err();
    assert!(matches!(refused, SubmitError::Shutdown(_)));
    gate.open();
    closer.join().unwrap();
    assert_eq!(ran.load(Ordering::Relaxed), 10_000);
    assert_eq!(drops.live(), 0);
    assert_eq!(
        pool.stats().core_threads + pool.stats().auxiliary_threads,
        0
    );
}

#[test]
fn shutdown_now_hands_back_exactly_the_unstarted_tasks() {
    let pool = common::fixed_pool(1);
    let gate = Gate::new();
    let held = Latch::new(1);
    let running = pool
        .submit_sequential("ctx-0", common::held_task(&gate, &held))
        .unwrap();
    held.wait();
    let ran = Arc::new(AtomicU64::new(0));
    let drops = DropCount::default();
    let typed = {
        let r = ran.clone();
        pool.typed_lanes(move |_k: &u32, t: common::Token| {
            drop(t);
            r.fetch_add(1, Ordering::Relaxed);
        })
    };
    let mut handles = Vec::new();
    for i in 0..1_000u32 {
        if i % 4 == 3 {
            typed.send(i % 9, drops.token()).map_err(|_| ()).unwrap();
            continue;
        }
        let (r, t) = (ran.clone(), drops.token());
        let task = move || {
            let _t = t;
            r.fetch_add(1, Ordering::Relaxed);
        };
        match i % 4 {
            0 => pool.execute(task).unwrap(),
            1 => pool
                .execute_sequential(format!("ctx-{}", i % 7), task)
                .unwrap(),
            _ => handles.push(pool.submit_sequential(i % 3, task).unwrap()),
        }
    }
    let pending = common::shutdown_now_while_held(&pool, &gate);
    assert!(
        running.join().unwrap(),
        "the running task was released by its timeout"
    );
    assert_eq!(
        ran.load(Ordering::Relaxed),
        0,
        "a task started after shutdown_now"
    );
    assert_eq!(pending.len(), 1_000);
    assert_eq!(drops.live(), 1_000);
    // Run half, drop the other half: every task is accounted for once.
    let mut pending = pending;
    let dropped = pending.split_off(500);
    for task in pending {
        task.run().unwrap();
    }
    drop(dropped);
    assert_eq!(ran.load(Ordering::Relaxed), 500);
    assert_eq!(drops.live(), 0);
    let mut ok = 0;
    for h in handles {
        match h.join() {
            Ok(()) => ok += 1,
            Err(TaskError::Rejected) => {}
            Err(other) => panic!("unexpected outcome {other:?}"),
        }
    }
    assert!(ok > 0);
}

/// Submitters racing `shutdown_now`: every task is either refused (and handed back), run, or
/// handed back by `shutdown_now` — exactly once.
#[test]
fn no_task_lost_when_shutdown_now_races_submitters() {
    for seed in 0..10u64 {
        let pool = keyway::Pool::builder().core_threads(2).build().unwrap();
        let ran = Arc::new(AtomicU64::new(0));
        let refused = Arc::new(AtomicU64::new(0));
        let accepted = Arc::new(AtomicU64::new(0));
        let go = Latch::new(1);
        let submitters: Vec<_> = (0..3)
            .map(|s| {
                let (pool, ran, refused, accepted, go) = (
                    pool.clone(),
                    ran.clone(),
                    refused.clone(),
                    accepted.clone(),
                    go.clone(),
                );
                std::thread::spawn(move || {
                    go.wait();
                    for i in 0..50_000u64 {
                        let r = ran.clone();
                        let task = move || {
                            r.fetch_add(1, Ordering::Relaxed);
                        };
                        let result = if (i + s) % 2 == 0 {
                            pool.execute_sequential(i % 13, task)
                        } else {
                            pool.execute(task)
                        };
                        match result {
                            Ok(()) => accepted.fetch_add(1, Ordering::Relaxed),
                            Err(e) => {
                                e.into_inner()(); // ours to run
                                refused.fetch_add(1, Ordering::Relaxed)
                            }
                        };
                    }
                })
            })
            .collect();
        go.count_down();
        for _ in 0..(seed * 2_000) {
            std::hint::spin_loop();
        }
        let pending = pool.shutdown_now();
        for s in submitters {
            s.join().unwrap();
        }
        let handed_back = pending.len() as u64;
        let ran_by_pool = ran.load(Ordering::Relaxed) - refused.load(Ordering::Relaxed);
        assert_eq!(
            ran_by_pool + handed_back,
            accepted.load(Ordering::Relaxed),
            "seed {seed}: accepted tasks lost or duplicated"
        );
        assert_eq!(
            accepted.load(Ordering::Relaxed) + refused.load(Ordering::Relaxed),
            150_000
        );
    }
}

#[test]
fn capacity_refuses_with_the_task_handed_back() {
    let pool = keyway::Pool::builder()
        .core_threads(1)
        .max_threads(1)
        .capacity(10)
        .build()
        .unwrap();
    let gate = common::hold_workers(&pool, 1);
    let ran = Arc::new(AtomicU64::new(0));
    for _ in 0..9 {
        let r = ran.clone();
        pool.execute_sequential(1, move || {
            r.fetch_add(1, Ordering::Relaxed);
        })
        .unwrap();
    }
    let r = ran.clone();
    let full = pool
        .execute_sequential(1, move || {
            r.fetch_add(100, Ordering::Relaxed);
        })
        .unwrap_err();
    assert!(matches!(full, SubmitError::Full(_)));
    assert!(full.to_string().contains("capacity"));
    full.into_inner()();
    assert_eq!(ran.load(Ordering::Relaxed), 100);
    gate.open();
    pool.shutdown();
    assert_eq!(ran.load(Ordering::Relaxed), 109);
}

#[test]
fn dropping_every_handle_shuts_down_gracefully() {
    let ran = Arc::new(AtomicU64::new(0));
    {
        let pool = keyway::Pool::builder().core_threads(2).build().unwrap();
        for i in 0..1_000u64 {
            let r = ran.clone();
            pool.execute_sequential(i % 10, move || {
                r.fetch_add(1, Ordering::Relaxed);
            })
            .unwrap();
        }
    }
    common::eventually("accepted tasks run after the pool is dropped", || {
        ran.load(Ordering::Relaxed) == 1_000
    });
}
