//! Shutting down a pool with a scheduler built on it: no accepted task is lost whatever the
//! drop order; `Pool::shutdown` shuts the scheduler down first; `Pool::shutdown_now` hands
//! back what the scheduler held too.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use keyway::{ExecutorConfig, Pool, Scheduler, Timing};

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
