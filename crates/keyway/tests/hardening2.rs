//! User code in the bookkeeping paths: a panic in a waker, in an output's or a payload's drop,
//! in a key's `Clone` or `Drop`, or in a coordinator hook must not skip a finish count, a lane's
//! release or the scheduler's count of an ended task. Each test is one reproduced defect; a hang
//! is turned into a failure by `finishes`, which runs the scenario on its own thread and gives
//! up after `HANG`.

mod common;

use std::future::Future;
use std::hash::{Hash, Hasher};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::channel;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use common::{eventually, finishes, Gate, PanicOnDrop};

/// How long a scenario may take before it is called a hang.
const HANG: Duration = Duration::from_secs(20);
use keyway::{Coordinator, ExecutorConfig, Pool, Scheduler, TaskError, Timing};

/// A waker that panics when woken.
struct PanicWaker;

impl Wake for PanicWaker {
    fn wake(self: Arc<Self>) {
        panic!("PanicWaker woken");
    }
}

fn panic_waker() -> Waker {
    Waker::from(Arc::new(PanicWaker))
}

/// Polls `fut` once with a waker that panics when woken; true if it is still pending.
fn poll_with_panicking_waker<F: Future + Unpin>(fut: &mut F) -> bool {
    let waker = panic_waker();
    let mut cx = Context::from_waker(&waker);
    Pin::new(fut).poll(&mut cx).is_pending()
}

/// The pool is idle, and its monitor, which had marked a task blocked, sees no blocked worker
/// once the task is over: the worker's "inside a task" state is right.
fn no_blocked_worker_after_a_blocked_task(pool: &Pool) {
    let (tx, rx) = channel();
    let p = pool.clone();
    pool.execute(move || {
        // The monitor marks this task blocked (it stays in it well past `blocked_after`).
        let mut seen = false;
        for _ in 0..20_000 {
            if p.stats().blocked_threads >= 1 {
                seen = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        tx.send(seen).unwrap();
    })
    .unwrap();
    assert!(
        rx.recv_timeout(HANG).unwrap(),
        "the monitor never saw a blocking task as blocked"
    );
    assert!(pool.wait_idle_timeout(HANG));
    eventually("no blocked worker once idle", || {
        pool.stats().blocked_threads == 0
    });
}

// ---- item 1 ----------------------------------------------------------------------------------

/// A lane future's handle awaited with a waker that panics on wake: the lane still goes on and
/// shutdown returns.
#[test]
fn lane_future_handle_waker_panic_does_not_stall_the_lane() {
    finishes("lane future with a panicking handle waker", || {
        let pool = Pool::builder().core_threads(1).build().unwrap();
        let gate = Gate::new();
        let g = gate.clone();
        let mut handle = pool
            .spawn_sequential("k", async move {
                g.wait();
                5
            })
            .unwrap();
        assert!(poll_with_panicking_waker(&mut handle));
        gate.open();
        assert_eq!(
            pool.submit_sequential("k", || 7).unwrap().join().unwrap(),
            7
        );
        pool.shutdown();
        assert_eq!(pool.stats().blocked_threads, 0);
    });
}

// ---- item 2 ----------------------------------------------------------------------------------

/// A `wait_for_room_async` waiter whose waker panics, woken by a lane task's finish: the lane
/// is released all the same.
#[test]
fn room_waiter_waker_panic_does_not_stall_the_lane() {
    finishes("room waiter with a panicking waker", || {
        let pool = Pool::builder().core_threads(1).capacity(1).build().unwrap();
        let gate = Gate::new();
        let g = gate.clone();
        pool.execute_sequential("k", move || g.wait()).unwrap();
        let mut wait = Box::pin(pool.wait_for_room_async(|| (), |t| pool.execute(t)));
        assert!(poll_with_panicking_waker(&mut wait));
        gate.open();
        // The finish woke the waiter (its waker panicked); the lane must still be free.
        let mut got = None;
        for _ in 0..1000 {
            match pool.submit_sequential("k", || 7) {
                Ok(h) => {
                    got = Some(h.join().unwrap());
                    break;
                }
                Err(keyway::SubmitError::Full(_)) => {
                    assert!(pool.wait_idle_timeout(HANG));
                }
                Err(e) => panic!("refused: {e:?}"),
            }
        }
        assert_eq!(got, Some(7));
        drop(wait);
        pool.shutdown();
    });
}

/// Several room waiters: one panicking waker does not keep the others from being woken.
#[test]
fn room_waiter_waker_panic_does_not_starve_the_others() {
    finishes("room waiters behind a panicking waker", || {
        let pool = Pool::builder().core_threads(1).capacity(1).build().unwrap();
        let gate = Gate::new();
        let g = gate.clone();
        pool.execute(move || g.wait()).unwrap();
        let mut bad = Box::pin(pool.wait_for_room_async(|| (), |t| pool.execute(t)));
        assert!(poll_with_panicking_waker(&mut bad));
        // A well-behaved waiter behind it, on a thread of its own.
        let p = pool.clone();
        let good = std::thread::spawn(move || {
            futures::executor::block_on(p.wait_for_room_async(|| 3, |t| p.submit(t)))
                .unwrap()
                .join()
                .unwrap()
        });
        // Wait until the good waiter is registered: the pool stays full until the gate opens.
        gate.open();
        assert_eq!(good.join().unwrap(), 3);
        drop(bad);
        pool.shutdown();
    });
}

// ---- items 3 and 4 ---------------------------------------------------------------------------

/// A lane future finishing in its first poll with an output whose drop panics (its handle
/// dropped): the launch is still counted; shutdown returns.
#[test]
fn lane_future_output_drop_panic_in_first_poll_is_counted() {
    finishes("output drop panic in a first poll", || {
        let pool = Pool::builder().core_threads(1).build().unwrap();
        let gate = Gate::new();
        let g = gate.clone();
        pool.execute_sequential("k", move || g.wait()).unwrap();
        drop(pool.spawn_sequential("k", async { PanicOnDrop }).unwrap());
        gate.open();
        assert_eq!(
            pool.submit_sequential("k", || 7).unwrap().join().unwrap(),
            7
        );
        pool.shutdown();
    });
}

/// A future that waits for an outside wake-up once, then completes with `PanicOnDrop`.
struct WakeOnceThenPanicOnDrop {
    waker: Arc<Mutex<Option<Waker>>>,
    polled: bool,
}

impl Future for WakeOnceThenPanicOnDrop {
    type Output = PanicOnDrop;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<PanicOnDrop> {
        if self.polled {
            return Poll::Ready(PanicOnDrop);
        }
        self.polled = true;
        *self.waker.lock().unwrap() = Some(cx.waker().clone());
        Poll::Pending
    }
}

/// The same panic in a later poll: the worker's progress state stays right (the monitor still
/// sees a blocked task, and no blocked worker once idle); shutdown returns.
#[test]
fn lane_future_output_drop_panic_in_later_poll_keeps_progress_right() {
    finishes("output drop panic in a later poll", || {
        let pool = Pool::builder()
            .core_threads(1)
            .monitor_period(Duration::from_millis(1))
            .blocked_after(Duration::from_millis(5))
            .build()
            .unwrap();
        let slot = Arc::new(Mutex::new(None::<Waker>));
        let fut = WakeOnceThenPanicOnDrop {
            waker: slot.clone(),
            polled: false,
        };
        drop(pool.spawn_sequential("k", fut).unwrap());
        eventually("the future parked", || slot.lock().unwrap().is_some());
        slot.lock().unwrap().take().unwrap().wake();
        assert_eq!(
            pool.submit_sequential("k", || 7).unwrap().join().unwrap(),
            7
        );
        no_blocked_worker_after_a_blocked_task(&pool);
        pool.shutdown();
    });
}

// ---- item 5 ----------------------------------------------------------------------------------

/// A task panics with a payload whose drop panics: shutdown returns.
#[test]
fn panic_payload_drop_panic_is_contained() {
    finishes("payload drop panic", || {
        let pool = Pool::builder().core_threads(1).build().unwrap();
        pool.execute(|| std::panic::panic_any(PanicOnDrop)).unwrap();
        assert!(pool.wait_idle_timeout(HANG));
        assert_eq!(pool.submit(|| 1).unwrap().join().unwrap(), 1);
        pool.shutdown();
    });
}

/// The same in a lane, with the context's next task in the same chunk: it runs, the lane goes
/// on, shutdown returns.
#[test]
fn panic_payload_drop_panic_in_a_lane_keeps_the_lane() {
    finishes("payload drop panic in a lane", || {
        let pool = Pool::builder().core_threads(1).build().unwrap();
        let gate = Gate::new();
        let g = gate.clone();
        pool.execute_sequential("k", move || g.wait()).unwrap();
        pool.execute_sequential("k", || std::panic::panic_any(PanicOnDrop))
            .unwrap();
        let next = pool.submit_sequential("k", || 7).unwrap();
        gate.open();
        assert_eq!(next.join().unwrap(), 7);
        assert_eq!(
            pool.submit_sequential("k", || 8).unwrap().join().unwrap(),
            8
        );
        pool.shutdown();
    });
}

// ---- scheduler: items 6 to 10 ----------------------------------------------------------------

fn scheduler(pool: &Pool) -> Scheduler {
    Scheduler::builder(pool)
        .interval(Duration::from_millis(10))
        .executor("jobs", ExecutorConfig::unlimited())
        .build()
        .unwrap()
}

/// Item 6: a scheduled task released to the pool, handed back by `Pool::shutdown_now` and
/// dropped, is counted ended (rejected): the scheduler's shutdown returns.
#[test]
fn scheduled_task_handed_back_by_the_pool_is_counted() {
    finishes("scheduled task handed back by the pool", || {
        let pool = Pool::builder().core_threads(1).build().unwrap();
        let s = scheduler(&pool);
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

/// Item 7: `schedule_sequential` with a key whose `Clone` panics: the task ends (rejected), it
/// is not left pending, the scheduler's shutdown returns.
#[test]
fn scheduled_sequential_key_clone_panic_ends_the_task() {
    finishes("key clone panic", || {
        let pool = Pool::new().unwrap();
        let s = scheduler(&pool);
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

/// Item 8: a due task released while a bounded pool is full waits for room: it runs.
#[test]
fn scheduled_task_waits_for_room_in_a_full_pool() {
    finishes("scheduled task on a full pool", || {
        let pool = Pool::builder().core_threads(1).capacity(1).build().unwrap();
        let s = scheduler(&pool);
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

/// Item 9: a `schedule_sequential` task whose key's drop panics, handed back by the
/// scheduler's `shutdown_now`: `shutdown_now` returns it.
#[test]
fn scheduler_shutdown_now_contains_a_key_drop_panic() {
    finishes("key drop panic in shutdown_now", || {
        let pool = Pool::new().unwrap();
        let s = scheduler(&pool);
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
        let s = scheduler(&pool);
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

/// Item 10: a coordinator's `join` panic in `build` is an error, not a panic.
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
        let s = scheduler(&pool);
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

// ---- decided: a handle waker's panic after a scheduled task ran ------------------------------

/// Decided: a scheduled task that ran is counted `ran`, even when the waker of whoever awaits
/// its handle panics as the task finishes (the waker is the awaiting executor's business; its
/// panic is contained and logged, it does not change how the task ended).
#[test]
fn scheduled_task_whose_handle_waker_panics_counts_as_ran() {
    finishes("scheduled task with a panicking handle waker", || {
        let pool = Pool::new().unwrap();
        let s = scheduler(&pool);
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
            let s = scheduler(&pool);
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

/// `Scheduler::shutdown` and `shutdown_now` return once the scheduler's thread is gone, not
/// only done (found by the `pool_mixed` fuzz target: LeakSanitizer saw the thread's
/// thread-local destructors still pending after a run had ended).
#[cfg(target_os = "linux")]
#[test]
fn scheduler_shutdown_returns_once_its_thread_is_gone() {
    finishes("scheduler threads gone at shutdown", || {
        let pool = Pool::new().unwrap();
        for i in 0..200 {
            let name = format!("kw-sched-{i}");
            let s = Scheduler::builder(&pool)
                .interval(Duration::from_millis(10))
                .executor("jobs", ExecutorConfig::unlimited())
                .thread_name(name.clone())
                .build()
                .unwrap();
            if i % 2 == 0 {
                s.shutdown();
            } else {
                assert!(s.shutdown_now().is_empty());
            }
            assert!(
                !thread_alive(&name),
                "{name} still runs after its shutdown returned"
            );
        }
        pool.shutdown();
    });
}

/// Whether a thread of this process named `name` is still in user space (Linux:
/// `/proc/self/task/*`). A thread that has entered the kernel's exit (`PF_EXITING` in its
/// flags) is done with everything a join waits for (its thread-local destructors ran), though
/// it may stay listed a little longer, most of all under load: the joiner it woke can run
/// before it is gone from the list. Such a thread does not count.
#[cfg(target_os = "linux")]
fn thread_alive(name: &str) -> bool {
    const PF_EXITING: u64 = 0x4;
    let tasks = std::fs::read_dir("/proc/self/task").unwrap();
    tasks.flatten().any(|t| {
        let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        if comm.trim_end() != name {
            return false;
        }
        let stat = std::fs::read_to_string(t.path().join("stat")).unwrap_or_default();
        // After the name in parentheses: state, ppid, pgrp, session, tty_nr, tpgid, flags.
        let flags = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(6))
            .and_then(|f| f.parse::<u64>().ok());
        // Gone from the list meanwhile (no stat), or exiting: not alive.
        flags.is_some_and(|f| f & PF_EXITING == 0)
    })
}

/// `Pool::shutdown` called in a pool task, with a scheduler attached, cannot wait there: a
/// thread finishes it in the background. A later `Pool::shutdown` that waits returns once that
/// thread is gone, not only done (found by the `pool_mixed` fuzz target: LeakSanitizer saw the
/// finishing thread still alive after the run had ended).
#[cfg(target_os = "linux")]
#[test]
fn pool_shutdown_returns_once_a_background_finisher_is_gone() {
    finishes("background shutdown finishers gone", || {
        for _ in 0..50 {
            let pool = Pool::new().unwrap();
            let s = scheduler(&pool);
            let h = s.schedule("jobs", Duration::from_millis(5), || 1).unwrap();
            let (tx, rx) = channel();
            let p = pool.clone();
            pool.execute(move || {
                p.shutdown(); // on a pool thread: finished in the background
                tx.send(()).unwrap();
            })
            .unwrap();
            rx.recv().unwrap();
            pool.shutdown();
            assert!(
                !thread_alive("keyway-shutdown"),
                "the background finisher still runs after pool.shutdown() returned"
            );
            assert_eq!(h.join().unwrap(), 1);
        }
    });
}

// ---- decided: a task that is never due at a graceful shutdown --------------------------------

/// Decided: `Scheduler::shutdown` ends a task that is never due (`Duration::MAX`) as rejected
/// instead of waiting for ever.
#[test]
fn scheduler_shutdown_ends_a_never_due_task() {
    finishes("shutdown with a never-due task", || {
        let pool = Pool::new().unwrap();
        let s = scheduler(&pool);
        let h = s.schedule("jobs", Duration::MAX, || 1).unwrap();
        s.shutdown();
        assert!(matches!(h.join(), Err(TaskError::Rejected)));
        let st = s.stats("jobs").unwrap();
        assert_eq!((st.pending, st.rejected), (0, 1));
        pool.shutdown();
    });
}

/// A never-due task cancelled through its handle is counted `cancelled`, not `rejected`, when
/// a shutdown ends it: by the graceful shutdown's sweep of never-due tasks, or by
/// `shutdown_now`, which hands back nothing for it (found by the `pool_mixed` fuzz target).
#[test]
fn a_cancelled_never_due_task_is_counted_cancelled_at_shutdown() {
    finishes("cancelled never-due tasks at shutdown", || {
        let pool = Pool::new().unwrap();
        for now in [false, true] {
            let s = scheduler(&pool);
            let h = s.schedule("jobs", Duration::MAX, || 1).unwrap();
            assert!(h.cancel());
            if now {
                assert!(s.shutdown_now().is_empty());
            } else {
                s.shutdown();
            }
            assert!(matches!(h.join(), Err(TaskError::Cancelled)));
            let st = s.stats("jobs").unwrap();
            assert_eq!(
                (st.cancelled, st.rejected, st.pending),
                (1, 0, 0),
                "shutdown_now: {now}, {st:?}"
            );
        }
        pool.shutdown();
    });
}

/// A task released to the pool, cancelled there while queued, and run once its timeout has
/// passed is counted `cancelled` (as its handle says), not `timed_out` (found by the
/// `pool_mixed` fuzz target).
#[test]
fn a_released_task_cancelled_then_past_its_timeout_is_counted_cancelled() {
    finishes("cancelled task past its timeout", || {
        let pool = common::fixed_pool(1);
        let timeout = Duration::from_millis(30);
        let s = Scheduler::builder(&pool)
            .interval(Duration::from_millis(10))
            .executor("jobs", ExecutorConfig::unlimited().timeout(timeout))
            .build()
            .unwrap();
        let gate = common::hold_workers(&pool, 1);
        let h = s.schedule("jobs", Duration::ZERO, || 1).unwrap();
        eventually("the task queued on the pool", || {
            pool.stats().waiting_tasks == 1
        });
        assert!(h.cancel());
        // Not a synchronisation: the task's deadline must be behind when the pool runs it.
        std::thread::sleep(timeout * 2);
        gate.open();
        s.shutdown();
        assert!(matches!(h.join(), Err(TaskError::Cancelled)));
        let st = s.stats("jobs").unwrap();
        assert_eq!(
            (st.cancelled, st.timed_out, st.pending),
            (1, 0, 0),
            "{st:?}"
        );
        pool.shutdown();
    });
}

// ---- decided: the last handle of a scheduler with a paused executor is dropped ---------------

/// Decided: dropping the last `Scheduler` handle while an executor is paused at 0 TPS ends that
/// executor's tasks as rejected (nobody can resume it any more), so its thread exits instead of
/// waiting for ever.
#[test]
fn dropping_the_last_scheduler_ends_a_paused_executors_tasks() {
    finishes("drop of the last scheduler with a paused executor", || {
        let pool = Pool::new().unwrap();
        let s = Scheduler::builder(&pool)
            .interval(Duration::from_millis(10))
            .executor("paused", ExecutorConfig::with_tps(0.0))
            .build()
            .unwrap();
        let h = s.schedule("paused", Duration::ZERO, || 1).unwrap();
        drop(s);
        assert!(matches!(h.join(), Err(TaskError::Rejected)));
        pool.shutdown();
    });
}
