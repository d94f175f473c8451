//! User code in the scheduler's bookkeeping paths: a key whose `Clone` or `Drop` panics, a
//! coordinator whose `join` or `share` panics, a handle's waker or a result's or payload's drop
//! that panics, and a task handed back by the pool must not skip the scheduler's count of an
//! ended task, leave it waiting or kill its thread. Each test is one reproduced defect; a hang
//! is turned into a failure by `finishes`.

use crate::common;

use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::channel;
use std::sync::Arc;
use std::time::Duration;

use common::{
    eventually, finishes, jobs_scheduler, poll_with_panicking_waker, Gate, PanicOnDrop, HANG,
};
use keyway::{Coordinator, ExecutorConfig, Pool, Scheduler, TaskError, Timing};

#[test]
fn scheduled_task_handed_back_by_the_pool_is_counted() {
    finishes("scheduled task handed back by the pool", || {
        let pool = Pool::builder().core_threads(1).build().unwrap();
        let s = jobs_scheduler(&pool);
        let (go_tx, go_rx) = channel::<()>();
        let p = pool.clone();
        let (back_tx, back_rx) = channel();
        let (started_tx, started_rx) = channel();
        pool.execute(move || {
            started_tx.send(()).unwrap();
            go_rx.recv().unwrap();
            // From inside a task: hands back what is queued, at once.
            back_tx.send(p.shutdown_now().len()).unwrap();
        })
        .unwrap();
        started_rx.recv_timeout(HANG).unwrap();
        let h = s.schedule("jobs", Duration::ZERO, || 1).unwrap();
        eventually("the task released to the pool", || {
            pool.stats().waiting_tasks >= 1
        });
        go_tx.send(()).unwrap();
        assert_eq!(back_rx.recv_timeout(HANG).unwrap(), 1);
        assert!(matches!(h.join(), Err(TaskError::Rejected)));
        s.shutdown();
        let st = s.stats("jobs").unwrap();
        assert_eq!((st.pending, st.rejected), (0, 1));
    });
}

/// A key whose `Clone` panics, and whose `Drop` panics once armed.
struct BadKey {
    id: u32,
    panic_on_clone: bool,
    panic_on_drop: Arc<AtomicBool>,
}

impl Clone for BadKey {
    fn clone(&self) -> Self {
        if self.panic_on_clone {
            panic!("BadKey cloned");
        }
        BadKey {
            id: self.id,
            panic_on_clone: false,
            panic_on_drop: self.panic_on_drop.clone(),
        }
    }
}

impl Drop for BadKey {
    fn drop(&mut self) {
        if self.panic_on_drop.load(Ordering::SeqCst) && !std::thread::panicking() {
            panic!("BadKey dropped");
        }
    }
}

impl PartialEq for BadKey {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id
    }
}
impl Eq for BadKey {}
impl Hash for BadKey {
    fn hash<H: Hasher>(&self, h: &mut H) {
        self.id.hash(h)
    }
}

/// `schedule_sequential` with a key whose `Clone` panics: the task ends (rejected), it
/// is not left pending, the scheduler's shutdown returns.
#[test]
fn scheduled_sequential_key_clone_panic_ends_the_task() {
    finishes("key clone panic", || {
        let pool = Pool::new().unwrap();
        let s = jobs_scheduler(&pool);
        let key = BadKey {
            id: 1,
            panic_on_clone: true,
            panic_on_drop: Arc::new(AtomicBool::new(false)),
        };
        let h = s
            .schedule_sequential("jobs", Timing::after(Duration::ZERO), key, || 1)
            .unwrap();
        assert!(matches!(h.join(), Err(TaskError::Rejected)));
        s.shutdown();
        let st = s.stats("jobs").unwrap();
        assert_eq!((st.pending, st.rejected), (0, 1));
        pool.shutdown();
    });
}

/// A due task released while a bounded pool is full waits for room: it runs.
#[test]
fn scheduled_task_waits_for_room_in_a_full_pool() {
    finishes("scheduled task on a full pool", || {
        let pool = Pool::builder().core_threads(1).capacity(1).build().unwrap();
        let s = jobs_scheduler(&pool);
        let gate = Gate::new();
        let g = gate.clone();
        pool.execute(move || g.wait()).unwrap();
        let h = s.schedule("jobs", Duration::ZERO, || 1).unwrap();
        // Give the driver time to reach the task while the pool is full (a refusal shows at
        // once; a task waiting for room shows nothing). This bound only gives the defect its
        // chance: no outcome depends on it.
        let h = match h.join_timeout(Duration::from_millis(300)) {
            Ok(r) => panic!("ended while the pool was full: {r:?}"),
            Err(h) => h,
        };
        gate.open();
        assert_eq!(h.join().unwrap(), 1);
        s.shutdown();
        assert_eq!(s.stats("jobs").unwrap().rejected, 0);
        pool.shutdown();
    });
}

/// A `schedule_sequential` task whose key's drop panics, handed back by the
/// scheduler's `shutdown_now`: `shutdown_now` returns it.
#[test]
fn scheduler_shutdown_now_contains_a_key_drop_panic() {
    finishes("key drop panic in shutdown_now", || {
        let pool = Pool::new().unwrap();
        let s = jobs_scheduler(&pool);
        let armed = Arc::new(AtomicBool::new(false));
        let key = BadKey {
            id: 1,
            panic_on_clone: false,
            panic_on_drop: armed.clone(),
        };
        let _h = s
            .schedule_sequential("jobs", Timing::after(Duration::from_secs(3600)), key, || 1)
            .unwrap();
        armed.store(true, Ordering::SeqCst);
        let back = s.shutdown_now();
        armed.store(false, Ordering::SeqCst);
        assert_eq!(back.len(), 1);
        drop(back);
        s.shutdown();
        assert_eq!(s.stats("jobs").unwrap().pending, 0);
        pool.shutdown();
    });
}

/// A key whose `Drop` panics, while its clones' do not: only the scheduler's own copy panics.
#[derive(PartialEq, Eq, Hash)]
struct SchedulerKeyBomb {
    id: u32,
    bomb: bool,
}

impl Clone for SchedulerKeyBomb {
    fn clone(&self) -> Self {
        SchedulerKeyBomb {
            id: self.id,
            bomb: false,
        }
    }
}

impl Drop for SchedulerKeyBomb {
    fn drop(&mut self) {
        if self.bomb && !std::thread::panicking() {
            panic!("the scheduler's key dropped");
        }
    }
}

/// Scheduled sequential tasks whose key's `Drop` panics where the scheduler drops it: once the
/// task is released to the pool (one-shot tasks), and when a repeating task ends. Every task
/// runs and is counted as it ended, the scheduler keeps releasing, and both shutdowns return.
#[test]
fn scheduled_keys_whose_drop_panics_end_contained_on_every_path() {
    finishes("key drop panics on the run and cancel paths", || {
        let pool = Pool::new().unwrap();
        let s = jobs_scheduler(&pool);
        let key = |id| SchedulerKeyBomb { id, bomb: true };
        let handles: Vec<_> = (0..20)
            .map(|i| {
                s.schedule_sequential(
                    "jobs",
                    Timing::after(Duration::from_millis(1)),
                    key(i % 3),
                    move || i,
                )
                .unwrap()
            })
            .collect();
        for (i, h) in handles.into_iter().enumerate() {
            assert_eq!(h.join().unwrap(), i as u32);
        }
        let ticks = Arc::new(AtomicUsize::new(0));
        let t = ticks.clone();
        let every = s
            .schedule_sequential_at_fixed_rate(
                "jobs",
                Timing::after(Duration::ZERO),
                Duration::from_millis(1),
                key(7),
                move || {
                    t.fetch_add(1, Ordering::SeqCst);
                },
            )
            .unwrap();
        eventually("the repeating task ran", || {
            ticks.load(Ordering::SeqCst) >= 3
        });
        assert!(every.cancel());
        s.shutdown();
        let st = s.stats("jobs").unwrap();
        assert_eq!((st.pending, st.panicked, st.rejected), (0, 0, 0), "{st:?}");
        assert!(st.ran >= 23, "{st:?}");
        pool.shutdown();
    });
}

/// A coordinator whose `join` panics.
struct PanickingJoin;

impl Coordinator for PanickingJoin {
    fn join(&self, _executor: &str, _limit: f64) {
        panic!("join panicked");
    }
    fn leave(&self, _executor: &str) {}
    fn share(&self, _executor: &str, limit: f64) -> f64 {
        limit
    }
}

/// A coordinator's `join` panic in `build` is an error, not a panic.
#[test]
fn coordinator_join_panic_in_build_is_an_error() {
    finishes("coordinator join panic in build", || {
        let pool = Pool::new().unwrap();
        let built = Scheduler::builder(&pool)
            .executor("jobs", ExecutorConfig::with_tps(10.0))
            .coordinator(PanickingJoin)
            .build();
        assert!(built.is_err());
        pool.shutdown();
    });
}

/// Found by the `pool_mixed` fuzz target: an executor built paused (0 TPS) whose coordinator's
/// `share` always panics. The panic kept the last share, 0, through `set_tps(1000)`: the task
/// never ran and the graceful shutdown waited for it for ever. Now a panicking `share` keeps
/// the last fraction of the limit, or the whole limit when there was none.
#[test]
fn a_paused_executor_whose_share_panics_resumes_after_set_tps() {
    struct PanickingShare;
    impl Coordinator for PanickingShare {
        fn join(&self, _executor: &str, _limit: f64) {}
        fn leave(&self, _executor: &str) {}
        fn share(&self, _executor: &str, _limit: f64) -> f64 {
            panic!("share panics")
        }
    }
    finishes("a paused executor whose share panics, resumed", || {
        let pool = Pool::new().unwrap();
        let s = Scheduler::builder(&pool)
            .interval(Duration::from_millis(10))
            .executor("jobs", ExecutorConfig::with_tps(0.0))
            .coordinator(PanickingShare)
            .build()
            .unwrap();
        let h = s.schedule("jobs", Duration::ZERO, || 7).unwrap();
        s.set_tps("jobs", 1000.0).unwrap();
        assert_eq!(h.join().unwrap(), 7);
        s.shutdown();
        pool.shutdown();
    });
}

/// Found by the `pool_mixed` fuzz target: a `schedule_sequential` refused (the scheduler shut
/// down) with a key whose `Drop` panics. The key was dropped as the call returned, after the
/// refusal was formed: the panic unwound past the error and the task leaked. Now the call
/// returns the error, and the task in it is dropped once, by whoever drops the error.
#[test]
fn a_refused_scheduled_task_whose_key_drop_panics_is_handed_back() {
    #[derive(Clone, PartialEq, Eq, Hash)]
    struct Key(bool);
    impl Drop for Key {
        fn drop(&mut self) {
            if self.0 && !std::thread::panicking() {
                panic!("key drop panics");
            }
        }
    }
    struct Probe(Arc<AtomicUsize>);
    impl Drop for Probe {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    finishes("a refused scheduled task with a panicking key drop", || {
        let pool = Pool::new().unwrap();
        let s = jobs_scheduler(&pool);
        let _ = pool.shutdown_now(); // shuts the scheduler down too
        for repeating in [false, true] {
            let drops = Arc::new(AtomicUsize::new(0));
            let probe = Probe(drops.clone());
            let err = if repeating {
                let f = move || {
                    let _ = &probe;
                };
                let every = Duration::from_millis(1);
                s.schedule_sequential_at_fixed_rate(
                    "jobs",
                    Timing::after(Duration::ZERO),
                    every,
                    Key(true),
                    f,
                )
                .map(drop)
                .unwrap_err()
                .to_string()
            } else {
                let f = move || drop(probe);
                s.schedule_sequential("jobs", Timing::after(Duration::ZERO), Key(true), f)
                    .map(drop)
                    .unwrap_err()
                    .to_string()
            };
            assert!(err.contains("shut down"), "{err}");
            assert_eq!(
                drops.load(Ordering::SeqCst),
                1,
                "repeating {repeating}: the refused task leaked"
            );
        }
    });
}

// ---- a handle waker's panic after a scheduled task ran ------------------------------

/// A scheduled task that ran is counted `ran`, even when the waker of whoever awaits
/// its handle panics as the task finishes (the waker is the awaiting executor's business; its
/// panic is contained and logged, it does not change how the task ended).
#[test]
fn scheduled_task_whose_handle_waker_panics_counts_as_ran() {
    finishes("scheduled task with a panicking handle waker", || {
        let pool = Pool::new().unwrap();
        let s = jobs_scheduler(&pool);
        let gate = Gate::new();
        let g = gate.clone();
        let mut h = s
            .schedule("jobs", Duration::ZERO, move || {
                g.wait();
                1
            })
            .unwrap();
        assert!(poll_with_panicking_waker(&mut h));
        gate.open();
        s.shutdown();
        let st = s.stats("jobs").unwrap();
        assert_eq!((st.ran, st.cancelled, st.pending), (1, 0, 0));
        pool.shutdown();
    });
}

/// The same for the drop of what a scheduled task leaves when nobody holds its handle (found by
/// the `pool_mixed` fuzz target): a result whose drop panics, a panic payload whose drop
/// panics. The task ran (or panicked): it is counted so, not `cancelled`.
#[test]
fn scheduled_task_whose_result_or_payload_drop_panics_is_counted_as_it_ended() {
    finishes(
        "scheduled task with a panicking result or payload drop",
        || {
            let pool = Pool::new().unwrap();
            let s = jobs_scheduler(&pool);
            let at = Timing::after(Duration::ZERO);
            drop(s.schedule_with("jobs", at, || PanicOnDrop).unwrap());
            let panics = || -> u8 { std::panic::panic_any(PanicOnDrop) };
            drop(s.schedule_with("jobs", at, panics).unwrap());
            s.shutdown();
            let st = s.stats("jobs").unwrap();
            assert_eq!(
                (st.ran, st.panicked, st.cancelled, st.pending),
                (1, 1, 0, 0),
                "{st:?}"
            );
            pool.shutdown();
        },
    );
}
