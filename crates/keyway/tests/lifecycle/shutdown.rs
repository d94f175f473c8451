//! `shutdown` runs every accepted task; `shutdown_now` hands back exactly the
//! unstarted ones; refused work comes back to the caller. Drop counters prove every task is run
//! or dropped exactly once.

use crate::common;

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use common::{eventually, finishes, fixed_pool, hold_workers, spin, DropCount, Gate, Latch, HANG};
use keyway::{AdaptiveStrategy, Pool, SubmitError, TaskError};

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
    // Run half, drop the other half: every task is accounted for once. Alternate (the tasks
    // come back grouped by lane, in an order that varies between runs), so that some of the
    // tasks behind handles run whatever the order.
    let (run, dropped): (Vec<_>, Vec<_>) = pending
        .into_iter()
        .enumerate()
        .partition(|(i, _)| i % 2 == 0);
    for (_, task) in run {
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

/// The last task runs on a reserved thread while the workers park with a long `keep_alive`:
/// `shutdown` must not wait for it.
#[test]
fn shutdown_after_a_reserved_task_does_not_wait_for_keep_alive() {
    finishes("shutdown after a reserved-thread task", || {
        let pool = Pool::builder()
            .core_threads(1)
            .max_threads(1)
            .keep_alive(Duration::from_secs(24 * 3600))
            .reserved_threads(1)
            .build()
            .unwrap();
        common::reserved_ready(&pool);
        let gate = Gate::new();
        let started = Latch::new(1);
        let mut task: Box<dyn FnOnce() + Send> = {
            let t = common::held_task(&gate, &started);
            Box::new(move || {
                t();
            })
        };
        while let Err(e) = pool.try_execute(task) {
            task = e.into_inner();
            std::thread::yield_now();
        }
        started.wait();
        let closer = {
            let pool = pool.clone();
            std::thread::spawn(move || pool.shutdown())
        };
        eventually("intake stops", || pool.is_shutdown());
        gate.open();
        closer.join().unwrap();
    });
}

/// A production run queued by `dispatch`, handed back by `shutdown_now` and dropped: later
/// `dispatch` calls must say the executor refused, not `Pending`.
#[test]
fn dropped_queued_production_run_does_not_leave_dispatch_pending() {
    finishes("dispatch after a dropped queued run", || {
        let pool = Pool::builder()
            .core_threads(1)
            .max_threads(1)
            .reserved_threads(0)
            .build()
            .unwrap();
        let gate = common::hold_workers(&pool, 1);
        let strategy = AdaptiveStrategy::new(|| None::<fn()>, pool.clone());
        assert_eq!(
            strategy.dispatch().unwrap(),
            keyway::DispatchOutcome::Queued
        );
        let back = common::shutdown_now_while_held(&pool, &gate);
        assert_eq!(back.len(), 1, "the queued production run is handed back");
        drop(back);
        assert!(
            strategy.dispatch().is_err(),
            "dispatch on a shut-down pool answered {:?}",
            strategy.dispatch()
        );
        // Production itself is not stuck.
        assert_eq!(strategy.produce(), keyway::ProduceOutcome::Exhausted);
    });
}

/// The pool's OS threads alive now whose names start with `prefix`.
fn threads_named(prefix: &str) -> Vec<String> {
    std::fs::read_dir("/proc/self/task")
        .map(|dir| {
            dir.filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
                .map(|name| name.trim().to_owned())
                .filter(|name| name.starts_with(prefix))
                .collect()
        })
        .unwrap_or_default()
}

/// `shutdown` from outside returns only once every thread the pool started — workers, reserved
/// threads and the monitor — has exited (LeakSanitizer saw the thread-local state of a
/// reserved thread or the monitor still alive after `shutdown`).
///
/// Exactly: no worker or reserved thread still runs its thread-local destructors when
/// `shutdown` returns (each holds a `Live` token from `on_thread_start` that only its
/// thread-local destructor gives back). Then the OS threads leave the process's thread list: a
/// joined thread may still be listed for a moment, as the kernel wakes the joiner before it
/// delists the thread, so that part polls; a thread that was never joined never leaves.
#[test]
fn shutdown_joins_every_pool_thread() {
    struct Live(Arc<AtomicUsize>);
    impl Drop for Live {
        fn drop(&mut self) {
            self.0.fetch_sub(1, Ordering::SeqCst);
        }
    }
    thread_local! {
        static LIVE: std::cell::RefCell<Option<Live>> = const { std::cell::RefCell::new(None) };
    }
    for round in 0..20 {
        let prefix = format!("joinall{round}");
        let live = Arc::new(AtomicUsize::new(0));
        let counted = live.clone();
        let pool = Pool::builder()
            .core_threads(2)
            .reserved_threads(1)
            .thread_name(prefix.clone())
            .on_thread_start(move || {
                counted.fetch_add(1, Ordering::SeqCst);
                LIVE.with(|l| *l.borrow_mut() = Some(Live(counted.clone())));
            })
            .build()
            .unwrap();
        common::reserved_ready(&pool);
        assert_eq!(pool.submit(|| 1).unwrap().join().unwrap(), 1);
        pool.shutdown();
        assert_eq!(
            live.load(Ordering::SeqCst),
            0,
            "a pool thread was still running after shutdown returned"
        );
        eventually(
            &format!("the threads of {prefix} leave the process"),
            || threads_named(&prefix).is_empty(),
        );
    }
}

#[test]
fn drop_of_the_last_handle_runs_every_accepted_task() {
    for _ in 0..5 {
        let pool = fixed_pool(1);
        let ran = Arc::new(AtomicUsize::new(0));
        let gate = hold_workers(&pool, 1); // nothing below can run before the drop
        for i in 0..1000u32 {
            let ran = ran.clone();
            let task = move || {
                spin(200);
                ran.fetch_add(1, Ordering::SeqCst);
            };
            if i % 2 == 0 {
                pool.execute(task).unwrap();
            } else {
                pool.execute_sequential(i % 8, task).unwrap();
            }
        }
        assert_eq!(ran.load(Ordering::SeqCst), 0);
        gate.open();
        drop(pool);
        assert_eq!(ran.load(Ordering::SeqCst), 1000);
    }
}

#[test]
fn drop_of_the_last_handle_inside_a_task_does_not_deadlock() {
    let pool = fixed_pool(2);
    let gate = Gate::new();
    let (done_tx, done) = mpsc::channel();
    let (after_tx, after) = mpsc::channel();
    let last = pool.clone();
    let g = gate.clone();
    pool.execute(move || {
        g.wait();
        drop(last); // the last handle, on a pool thread: shuts down in the background
        done_tx.send(()).unwrap();
    })
    .unwrap();
    for _ in 0..10 {
        let after_tx = after_tx.clone();
        pool.execute_sequential("after", move || after_tx.send(()).unwrap())
            .unwrap();
    }
    drop(after_tx);
    drop(pool); // not the last handle: returns at once
    gate.open();
    done.recv_timeout(HANG)
        .expect("the drop inside the task returned");
    // Every accepted task still ran, in the background.
    assert_eq!(after.iter().count(), 10);
}

#[test]
fn shutdown_timeout_extremes() {
    let pool = fixed_pool(1);
    let gate = hold_workers(&pool, 1);
    pool.execute(|| ()).unwrap();
    let err = pool.shutdown_timeout(Duration::ZERO).unwrap_err();
    assert_eq!(err.pending_tasks(), 2);
    assert!(pool.is_shutdown());
    assert!(pool.execute(|| ()).is_err(), "intake stopped");
    gate.open();
    assert_eq!(pool.shutdown_timeout(Duration::MAX), Ok(()));
    assert_eq!(
        pool.shutdown_timeout(Duration::ZERO),
        Ok(()),
        "already done"
    );
}

#[test]
fn shutdown_timeout_inside_a_task_returns_at_once() {
    let pool = Pool::new().unwrap();
    let inner = pool.clone();
    let h = pool
        .submit(move || inner.shutdown_timeout(Duration::MAX))
        .unwrap();
    let err = h.join().unwrap().unwrap_err();
    assert!(err.pending_tasks() >= 1);
    assert_eq!(pool.shutdown_timeout(Duration::MAX), Ok(()));
}
