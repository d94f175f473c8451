//! Hostile but legal use of the public API: each test is one reproduced defect. A hang
//! is turned into a failure by `finishes`, which runs the scenario on its own thread and gives up
//! after `HANG`.

use crate::common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::channel;
use std::sync::{Arc, Barrier, Mutex};
use std::time::Duration;

use common::{eventually, finishes, Gate, Latch, PanicOnDrop, HANG};
use keyway::{AdaptiveStrategy, PendingTask, Pool};

/// The pool (whose only worker met a panicking drop) still runs plain and lane work.
fn still_runs_plain_and_lane_work(pool: &Pool) {
    assert_eq!(pool.submit(|| 1).unwrap().join().unwrap(), 1);
    assert_eq!(
        pool.submit_sequential("ctx", || 2).unwrap().join().unwrap(),
        2
    );
}

// ---- defect 1 --------------------------------------------------------------------------------

/// `reserved_idle_timeout(Duration::MAX)`: the reserved thread must not die computing its
/// deadline, and a task handed to it must run.
#[test]
fn reserved_idle_timeout_max_runs_the_handed_task() {
    finishes("try_execute with reserved_idle_timeout(MAX)", || {
        let pool = Pool::builder()
            .core_threads(1)
            .reserved_threads(1)
            .reserved_idle_timeout(Duration::MAX)
            .build()
            .unwrap();
        common::reserved_ready(&pool);
        let (tx, rx) = channel();
        let mut task = move || tx.send(()).unwrap();
        while let Err(e) = pool.try_execute(task) {
            task = e.into_inner();
            std::thread::yield_now();
        }
        rx.recv_timeout(HANG)
            .expect("the task handed to the reserved thread never ran");
        pool.shutdown();
    });
}

// ---- defect 2 --------------------------------------------------------------------------------

/// A result whose `Drop` panics, dropped on the worker (its handle is gone): the worker lives on.
#[test]
fn result_drop_panic_does_not_kill_the_worker() {
    finishes("pool after a panicking result drop", || {
        let pool = common::fixed_pool(1);
        let gate = common::hold_workers(&pool, 1);
        drop(pool.submit(|| PanicOnDrop).unwrap());
        drop(pool.submit_sequential("ctx", || PanicOnDrop).unwrap());
        gate.open();
        still_runs_plain_and_lane_work(&pool);
        pool.shutdown();
    });
}

/// A cancelled task whose capture panics when dropped (the worker drops it unrun).
#[test]
fn capture_drop_panic_on_the_cancelled_path_does_not_kill_the_worker() {
    finishes("pool after a panicking capture drop", || {
        let pool = common::fixed_pool(1);
        let gate = common::hold_workers(&pool, 1);
        let bomb = PanicOnDrop;
        let plain = pool
            .submit(move || {
                let _keep = &bomb;
            })
            .unwrap();
        assert!(plain.cancel());
        let bomb = PanicOnDrop;
        let laned = pool
            .submit_sequential("ctx", move || {
                let _keep = &bomb;
            })
            .unwrap();
        assert!(laned.cancel());
        gate.open();
        still_runs_plain_and_lane_work(&pool);
        pool.shutdown();
    });
}

/// The same on a reserved thread: a result drop that panics does not kill it.
#[test]
fn result_drop_panic_on_a_reserved_thread_is_contained() {
    finishes("reserved thread after a panicking capture drop", || {
        let pool = Pool::builder()
            .core_threads(1)
            .reserved_threads(1)
            .min_reserved_threads(1)
            .build()
            .unwrap();
        for round in 0..2 {
            common::reserved_ready(&pool);
            let (tx, rx) = channel();
            let bomb = PanicOnDrop;
            let mut task: Box<dyn FnOnce() + Send> = Box::new(move || {
                let _keep = bomb;
                tx.send(round).unwrap();
            });
            while let Err(e) = pool.try_execute(task) {
                task = e.into_inner();
                std::thread::yield_now();
            }
            assert_eq!(rx.recv_timeout(HANG).unwrap(), round);
        }
        pool.shutdown();
    });
}

// ---- defect 3 (pool side) and 4 --------------------------------------------------------------

/// `shutdown_now` from a plain task on a worker returns (it does not wait for its own thread)
/// and hands back the tasks queued behind it.
#[test]
fn shutdown_now_from_a_plain_task_returns() {
    finishes("shutdown_now from a task", || {
        let pool = common::fixed_pool(2);
        let gate = Gate::new();
        let started = Latch::new(1);
        let (tx, rx) = channel();
        let p = pool.clone();
        let task = common::held_task(&gate, &started);
        pool.execute(move || {
            task();
            tx.send(p.shutdown_now()).unwrap();
        })
        .unwrap();
        started.wait();
        let other = common::hold_workers(&pool, 1);
        let ran = Arc::new(AtomicUsize::new(0));
        for _ in 0..10 {
            let r = ran.clone();
            pool.execute(move || {
                r.fetch_add(1, Ordering::SeqCst);
            })
            .unwrap();
        }
        gate.open();
        other.open();
        let back = rx
            .recv_timeout(HANG)
            .expect("shutdown_now inside a task hung");
        assert_eq!(back.len() + ran.load(Ordering::SeqCst), 10);
        drop(back);
    });
}

/// `shutdown_now` from a task on a reserved thread returns.
#[test]
fn shutdown_now_from_a_reserved_thread_returns() {
    finishes("shutdown_now from a reserved thread", || {
        let pool = Pool::builder()
            .core_threads(1)
            .reserved_threads(1)
            .build()
            .unwrap();
        common::reserved_ready(&pool);
        let (tx, rx) = channel();
        let p = pool.clone();
        let mut task: Box<dyn FnOnce() + Send> = Box::new(move || {
            tx.send(p.shutdown_now().len()).unwrap();
        });
        while let Err(e) = pool.try_execute(task) {
            task = e.into_inner();
            std::thread::yield_now();
        }
        rx.recv_timeout(HANG)
            .expect("shutdown_now on a reserved thread hung");
    });
}

/// Several `shutdown_now` callers at once — two workers, a reserved thread and an outside
/// thread: each returns, and every unstarted task is handed back exactly once overall.
#[test]
fn concurrent_shutdown_now_callers_each_return_and_hand_back_once() {
    for seed in 0..5 {
        finishes("concurrent shutdown_now", move || {
            let pool = Pool::builder()
                .core_threads(2)
                .max_threads(2)
                .reserved_threads(1)
                .build()
                .unwrap();
            common::reserved_ready(&pool);
            let callers = 4;
            let barrier = Arc::new(Barrier::new(callers));
            let results: Arc<Mutex<Vec<Vec<PendingTask>>>> = Arc::default();
            let started = Latch::new(2);
            // Two workers, each in a task that calls shutdown_now.
            for _ in 0..2 {
                let (p, b, r, s) = (
                    pool.clone(),
                    barrier.clone(),
                    results.clone(),
                    started.clone(),
                );
                pool.execute(move || {
                    s.count_down();
                    b.wait();
                    let back = p.shutdown_now();
                    r.lock().unwrap().push(back);
                })
                .unwrap();
            }
            started.wait();
            // Queued behind them: each must be run or handed back, exactly once.
            let ran = Arc::new(AtomicUsize::new(0));
            let accepted = 50 + seed * 7;
            for i in 0..accepted {
                let r = ran.clone();
                let task = move || {
                    r.fetch_add(1, Ordering::SeqCst);
                };
                if i % 2 == 0 {
                    pool.execute(task).unwrap();
                } else {
                    pool.execute_sequential(i % 3, task).unwrap();
                }
            }
            // A reserved thread.
            let (p, b, r) = (pool.clone(), barrier.clone(), results.clone());
            let mut task: Box<dyn FnOnce() + Send> = Box::new(move || {
                b.wait();
                let back = p.shutdown_now();
                r.lock().unwrap().push(back);
            });
            while let Err(e) = pool.try_execute(task) {
                task = e.into_inner();
                std::thread::yield_now();
            }
            // An outside thread.
            barrier.wait();
            let back = pool.shutdown_now();
            eventually("every caller returned", || {
                results.lock().unwrap().len() == 3
            });
            let mut all: Vec<PendingTask> = back;
            for v in results.lock().unwrap().drain(..) {
                all.extend(v);
            }
            let handed_back = all.len();
            for t in all {
                t.run().unwrap();
            }
            // Run or handed back (and then run here): each exactly once.
            assert_eq!(ran.load(Ordering::SeqCst), accepted, "seed {seed}");
            assert!(handed_back <= accepted);
        });
    }
}

// ---- defect 6 --------------------------------------------------------------------------------

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

// ---- defect 10 -------------------------------------------------------------------------------

/// Every knob at its extremes: `build` returns a pool or a `BuildError`, never panics; a pool
/// that builds runs tasks and shuts down.
#[test]
fn builder_extremes_never_panic() {
    type Knob = fn(keyway::PoolBuilder) -> keyway::PoolBuilder;
    let big = usize::MAX;
    let cases: Vec<(&str, Knob)> = vec![
        ("max_threads(MAX)", |b| b.max_threads(usize::MAX)),
        ("core_threads(MAX / 2)", |b| b.core_threads(usize::MAX / 2)),
        ("core_threads(MAX)", |b| b.core_threads(usize::MAX)),
        ("core and max (MAX)", |b| {
            b.core_threads(usize::MAX).max_threads(usize::MAX)
        }),
        ("max_threads(1 << 40)", |b| b.max_threads(1 << 40)),
        ("max_threads(1 << 20)", |b| b.max_threads(1 << 20)),
        ("keep_alive(MAX)", |b| b.keep_alive(Duration::MAX)),
        ("keep_alive(ZERO)", |b| b.keep_alive(Duration::ZERO)),
        ("monitor_period(MAX)", |b| b.monitor_period(Duration::MAX)),
        ("blocked_after(MAX)", |b| b.blocked_after(Duration::MAX)),
        ("reserved_idle_timeout(MAX)", |b| {
            b.reserved_idle_timeout(Duration::MAX)
        }),
        ("lane_batch(MAX)", |b| b.lane_batch(usize::MAX)),
        ("capacity(MAX)", |b| b.capacity(usize::MAX)),
        ("capacity(0)", |b| b.capacity(0)),
        ("core_growth_after(MAX)", |b| {
            b.core_growth_after(usize::MAX)
        }),
        ("reserved_threads(MAX)", |b| b.reserved_threads(usize::MAX)),
        ("min_reserved_threads(MAX)", |b| {
            b.reserved_threads(usize::MAX)
                .min_reserved_threads(usize::MAX)
        }),
        ("min_reserved_threads(MAX) alone", |b| {
            b.min_reserved_threads(usize::MAX)
        }),
        ("thread_name with NUL", |b| b.thread_name("bad\0name")),
        ("thread_name empty", |b| b.thread_name("")),
    ];
    let _ = big;
    for (name, knob) in cases {
        let outcome = finishes(name, move || {
            let built = std::panic::catch_unwind(|| knob(Pool::builder().core_threads(1)).build());
            let pool = match built {
                Err(_) => return Err(format!("{name}: build panicked")),
                Ok(Err(e)) => {
                    assert!(!e.to_string().is_empty());
                    return Ok(());
                }
                Ok(Ok(pool)) => pool,
            };
            assert_eq!(pool.submit(|| 1).unwrap().join().unwrap(), 1, "{name}");
            assert_eq!(
                pool.submit_sequential(7, || 2).unwrap().join().unwrap(),
                2,
                "{name}"
            );
            let _ = pool.try_execute(|| ());
            pool.shutdown();
            Ok(())
        });
        if let Err(why) = outcome {
            panic!("{why}");
        }
    }
}

/// Huge thread counts are refused with an error naming the setting.
#[test]
fn huge_thread_counts_are_build_errors() {
    for (builder, setting) in [
        (Pool::builder().max_threads(usize::MAX), "max_threads"),
        (Pool::builder().core_threads(usize::MAX / 2), "core_threads"),
        (
            Pool::builder().core_threads(1 << 30).max_threads(1 << 30),
            "core_threads",
        ),
    ] {
        let err = builder.build().unwrap_err();
        assert!(err.to_string().contains(setting), "{err}");
    }
}

// ---- defect 11 -------------------------------------------------------------------------------

#[test]
fn join_timeout_max_does_not_panic() {
    finishes("join_timeout(MAX)", || {
        let pool = Pool::new().unwrap();
        let handle = pool.submit(|| 5).unwrap();
        assert_eq!(handle.join_timeout(Duration::MAX).ok().unwrap().unwrap(), 5);
        let gate = common::hold_workers(&pool, pool.stats().core_threads);
        let slow = pool.submit(|| 6).unwrap();
        let slow = slow.join_timeout(Duration::ZERO).unwrap_err();
        gate.open();
        assert_eq!(slow.join_timeout(Duration::MAX).ok().unwrap().unwrap(), 6);
        pool.shutdown();
    });
}

// ---- defect 12 -------------------------------------------------------------------------------

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

// ---- every thread joined ---------------------------------------------------------------------

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
