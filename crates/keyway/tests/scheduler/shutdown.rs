//! Shutting down a pool with a scheduler built on it: no accepted task is lost whatever the
//! drop order; `Pool::shutdown` shuts the scheduler down first; `Pool::shutdown_now` hands
//! back what the scheduler held too.

use crate::common;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{eventually, finishes, jobs_scheduler};
use keyway::{ExecutorConfig, Pool, Scheduler, TaskError, Timing};

const TASKS: usize = 100_000;

fn pool() -> Pool {
    Pool::builder()
        .core_threads(2)
        .max_threads(4)
        .build()
        .unwrap()
}

/// One unlimited executor and one limited to 200,000 per second (2,000 per 10 ms interval), so
/// that when the handles go many scheduled tasks are not due, or not released, yet.
fn scheduler(pool: &Pool) -> Scheduler {
    Scheduler::builder(pool)
        .interval(Duration::from_millis(10))
        .executor("any", ExecutorConfig::unlimited())
        .executor("limited", ExecutorConfig::with_tps(200_000.0))
        .build()
        .unwrap()
}

/// Submits `TASKS` tasks of every kind, each counting itself in `ran` when it runs.
fn submit_every_kind(pool: &Pool, s: &Scheduler, ran: &Arc<AtomicUsize>) {
    for i in 0..TASKS {
        let ran = ran.clone();
        let count = move || {
            ran.fetch_add(1, Ordering::Relaxed);
        };
        let later = Timing::after(Duration::from_millis((i % 300) as u64));
        match i % 9 {
            0 => pool.execute(count).unwrap(),
            1 => drop(pool.submit(count).unwrap()),
            2 => pool.execute_sequential(i % 64, count).unwrap(),
            3 => pool.execute_keyed([i % 64, (i + 7) % 64], count).unwrap(),
            4 => drop(pool.spawn(async move { count() }).unwrap()),
            5 => drop(
                pool.spawn_sequential(i % 64, async move { count() })
                    .unwrap(),
            ),
            6 => s.execute_with("any", later, count).unwrap(),
            7 => drop(s.schedule_with("limited", later, count).unwrap()),
            _ => drop(
                s.schedule_sequential("limited", later, i % 64, count)
                    .unwrap(),
            ),
        }
    }
}

#[test]
fn no_accepted_task_is_lost_whatever_the_drop_order() {
    for pool_first in [true, false] {
        let ran = Arc::new(AtomicUsize::new(0));
        let pool = pool();
        let s = scheduler(&pool);
        submit_every_kind(&pool, &s, &ran);
        // As at the end of `main`: the handles go, in one order or the other.
        let dropping = std::time::Instant::now();
        if pool_first {
            drop(pool);
            drop(s);
        } else {
            drop(s);
            drop(pool);
        }
        println!(
            "pool first: {pool_first}; the drops took {:?}",
            dropping.elapsed()
        );
        assert_eq!(
            ran.load(Ordering::Relaxed),
            TASKS,
            "lost tasks, {} dropped first",
            if pool_first { "pool" } else { "scheduler" }
        );
    }
}

/// A scheduler clone kept by the user keeps the pool open for it after the pool's handle is
/// gone; its drop (the last user-held handle) then waits.
#[test]
fn a_scheduler_outliving_its_pool_handle_still_schedules_and_waits_at_its_drop() {
    let ran = Arc::new(AtomicUsize::new(0));
    let pool = pool();
    let s = scheduler(&pool);
    drop(pool);
    for i in 0..1000u64 {
        let ran = ran.clone();
        s.execute_with(
            "limited",
            Timing::after(Duration::from_millis(i % 200)),
            move || {
                ran.fetch_add(1, Ordering::Relaxed);
            },
        )
        .unwrap();
    }
    drop(s);
    assert_eq!(ran.load(Ordering::Relaxed), 1000);
}

/// Schedules `n` tasks on `executor`, the `i`th `delay(i)` ahead, each counting itself in `ran`.
fn counted(
    s: &Scheduler,
    executor: &str,
    n: u64,
    delay: impl Fn(u64) -> Duration,
    ran: &Arc<AtomicUsize>,
) -> Vec<keyway::TaskHandle<usize>> {
    (0..n)
        .map(|i| {
            let ran = ran.clone();
            s.schedule(executor, delay(i), move || {
                ran.fetch_add(1, Ordering::Relaxed)
            })
            .unwrap()
        })
        .collect()
}

#[test]
fn pool_shutdown_shuts_attached_schedulers_down_first() {
    let ran = Arc::new(AtomicUsize::new(0));
    let pool = pool();
    let s = scheduler(&pool);
    let handles = counted(
        &s,
        "limited",
        2000,
        |i| Duration::from_millis(i % 200),
        &ran,
    );
    pool.shutdown();
    // Every scheduled task ran (none refused by a pool closed under it), before it returned.
    assert_eq!(ran.load(Ordering::Relaxed), 2000);
    assert!(handles.into_iter().all(|h| h.join().is_ok()));
    assert!(s.is_shutdown());
    assert!(s.schedule("any", Duration::ZERO, || ()).is_err());
    let st = s.stats("limited").unwrap();
    assert_eq!((st.ran, st.rejected), (2000, 0));
}

#[test]
fn pool_shutdown_now_hands_back_what_the_scheduler_held() {
    let pool = pool();
    let s = scheduler(&pool);
    let handles: Vec<_> = (0..10u32)
        .map(|i| {
            s.schedule("any", Duration::from_secs(3600), move || i)
                .unwrap()
        })
        .collect();
    let back = pool.shutdown_now();
    assert_eq!(back.len(), 10);
    assert!(s.is_shutdown());
    for task in back {
        task.run().unwrap();
    }
    let got: Vec<u32> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    assert_eq!(got, (0..10).collect::<Vec<_>>());
}

/// `shutdown_timeout` with a scheduler still holding tasks: `Err` if they could not all be
/// handed over in time, and they still run (in the background), none refused.
#[test]
fn pool_shutdown_timeout_with_a_scheduler_loses_nothing() {
    let ran = Arc::new(AtomicUsize::new(0));
    let pool = pool();
    let s = scheduler(&pool);
    let handles = counted(
        &s,
        "any",
        500,
        |i| Duration::from_millis(100 + i % 100),
        &ran,
    );
    assert!(pool.shutdown_timeout(Duration::ZERO).is_err());
    assert!(handles.into_iter().all(|h| h.join().is_ok()));
    assert_eq!(ran.load(Ordering::Relaxed), 500);
    assert!(pool.shutdown_timeout(Duration::MAX).is_ok());
}

// ---- the pool shuts down while an executor is paused at 0 TPS ------------------------
//
// A shutdown the pool starts (`Pool::shutdown`, `shutdown_timeout`, the drop of its last handle)
// does not wait for a pause that no one will lift: the tasks of an executor paused at 0 TPS end
// `Rejected` (counted so); every other task still runs. `Scheduler::shutdown` alone still waits
// for `set_tps` to resume the executor.

/// A scheduler with an executor paused at 0 TPS (no timeout) and an unlimited one.
fn paused(pool: &Pool) -> Scheduler {
    Scheduler::builder(pool)
        .interval(Duration::from_millis(10))
        .executor("paused", ExecutorConfig::with_tps(0.0))
        .executor("any", ExecutorConfig::unlimited())
        .build()
        .unwrap()
}

/// The paused executor's `n` tasks ended `Rejected`, counted so, and nothing else was lost.
fn all_rejected(s: &Scheduler, handles: Vec<keyway::TaskHandle<usize>>) {
    let n = handles.len() as u64;
    for h in handles {
        assert!(matches!(h.join(), Err(keyway::TaskError::Rejected)));
    }
    let st = s.stats("paused").unwrap();
    assert_eq!(
        (st.scheduled, st.rejected, st.ran, st.pending),
        (n, n, 0, 0),
        "{st:?}"
    );
}

#[test]
fn pool_shutdown_ends_a_paused_executors_tasks_rejected() {
    let ran = Arc::new(AtomicUsize::new(0));
    let pool = pool();
    let s = paused(&pool);
    let waiting = counted(&s, "paused", 3, |_| Duration::ZERO, &ran);
    let running = counted(&s, "any", 3, |i| Duration::from_millis(5 * i), &ran);
    let p = pool.clone();
    common::finishes("Pool::shutdown with a paused executor", move || {
        p.shutdown()
    });
    assert!(running.into_iter().all(|h| h.join().is_ok()));
    assert_eq!(ran.load(Ordering::Relaxed), 3);
    all_rejected(&s, waiting);
}

/// With no bound (`Duration::MAX`), `shutdown_timeout` returns `Ok` too: nothing is left.
#[test]
fn pool_shutdown_timeout_unbounded_ends_a_paused_executors_tasks() {
    let ran = Arc::new(AtomicUsize::new(0));
    let pool = pool();
    let s = paused(&pool);
    let waiting = counted(&s, "paused", 2, |i| Duration::from_millis(10 * i), &ran);
    let p = pool.clone();
    let done = common::finishes(
        "Pool::shutdown_timeout(MAX) with a paused executor",
        move || p.shutdown_timeout(Duration::MAX),
    );
    assert!(done.is_ok());
    all_rejected(&s, waiting);
}

/// Several threads shut the pool down at once, one of them already blocked in
/// `Scheduler::shutdown` (which waits for the pause): all return.
#[test]
fn pool_shutdown_from_several_threads_ends_a_pause() {
    let ran = Arc::new(AtomicUsize::new(0));
    let pool = pool();
    let s = paused(&pool);
    let waiting = counted(&s, "paused", 4, |_| Duration::ZERO, &ran);
    let s2 = s.clone();
    let p = pool.clone();
    common::finishes("several shutdowns with a paused executor", move || {
        let blocked = std::thread::spawn(move || s2.shutdown());
        let start = Arc::new(std::sync::Barrier::new(4));
        let callers: Vec<_> = (0..4)
            .map(|_| {
                let (p, start) = (p.clone(), start.clone());
                std::thread::spawn(move || {
                    start.wait();
                    p.shutdown();
                })
            })
            .collect();
        for c in callers {
            c.join().unwrap();
        }
        blocked.join().unwrap();
    });
    all_rejected(&s, waiting);
}

/// From inside a task (a pool task, and a scheduled one): the shutdown cannot wait there and
/// returns at once; the paused tasks still end `Rejected`, and a shutdown from outside returns.
#[test]
fn pool_shutdown_from_inside_a_task_ends_a_pause() {
    for scheduled in [false, true] {
        let ran = Arc::new(AtomicUsize::new(0));
        let pool = pool();
        let s = paused(&pool);
        let waiting = counted(&s, "paused", 2, |_| Duration::ZERO, &ran);
        let p = pool.clone();
        let inside = move || p.shutdown();
        if scheduled {
            s.schedule("any", Duration::from_millis(5), inside)
                .unwrap()
                .join()
                .unwrap();
        } else {
            pool.submit(inside).unwrap().join().unwrap();
        }
        let s2 = s.clone();
        common::finishes(
            "the paused tasks after a shutdown inside a task",
            move || all_rejected(&s2, waiting),
        );
        let p = pool.clone();
        common::finishes("Pool::shutdown after one inside a task", move || {
            p.shutdown()
        });
    }
}

/// `Scheduler::shutdown` alone waits for the pause: resumed by `set_tps`, the task runs.
#[test]
fn scheduler_shutdown_waits_for_set_tps_to_resume_a_pause() {
    let ran = Arc::new(AtomicUsize::new(0));
    let pool = pool();
    let s = paused(&pool);
    let waiting = counted(&s, "paused", 2, |_| Duration::ZERO, &ran);
    let s2 = s.clone();
    let shutting = std::thread::spawn(move || s2.shutdown());
    s.set_tps("paused", 1000.0).unwrap();
    common::finishes("Scheduler::shutdown after set_tps", move || {
        shutting.join().unwrap()
    });
    assert!(waiting.into_iter().all(|h| h.join().is_ok()));
    assert_eq!(ran.load(Ordering::Relaxed), 2);
    pool.shutdown();
}

// ---- a task that is never due at a graceful shutdown --------------------------------

/// `Scheduler::shutdown` ends a task that is never due (`Duration::MAX`) as rejected
/// instead of waiting for ever.
#[test]
fn scheduler_shutdown_ends_a_never_due_task() {
    finishes("shutdown with a never-due task", || {
        let pool = Pool::new().unwrap();
        let s = jobs_scheduler(&pool);
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
            let s = jobs_scheduler(&pool);
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

// ---- the last handle of a scheduler with a paused executor is dropped ---------------

/// Dropping the last `Scheduler` handle while an executor is paused at 0 TPS ends that
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
