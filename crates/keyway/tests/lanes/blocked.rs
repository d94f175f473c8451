//! A worker blocked in one task does not hold back the work queued behind it.
//! Blocked tasks wait on a gate that only the other tasks open: if the pool failed to move the
//! work, the gate would time out and the test fail (no wall-clock assertion).

use crate::common;

use std::time::Duration;

use common::{Gate, Latch, HANG};

fn pool(core: usize, monitor: Duration) -> keyway::Pool {
    keyway::Pool::builder()
        .core_threads(core)
        .max_threads(core + 2)
        .monitor_period(monitor)
        .blocked_after(monitor)
        .build()
        .unwrap()
}

/// Both core threads blocked; the tasks queued behind them (on other contexts) still finish,
/// which needs the monitor to move them and add an auxiliary thread.
#[test]
fn monitor_moves_work_from_blocked_workers() {
    let pool = pool(2, Duration::from_millis(20));
    let others_done = Gate::new();
    let started = Latch::new(2);
    let blockers: Vec<_> = (0..2)
        .map(|i| {
            let (done, started, p) = (others_done.clone(), started.clone(), pool.clone());
            pool.submit_sequential(("blocker", i), move || {
                // Queue work behind this worker (own deque), then block.
                for j in 0..50 {
                    p.execute_sequential(("other", i, j), || ()).unwrap();
                }
                started.count_down();
                done.wait_for(HANG)
            })
            .unwrap()
        })
        .collect();
    started.wait();
    let finished = Latch::new(100);
    for j in 0..100 {
        let f = finished.clone();
        pool.execute_sequential(("late", j), move || f.count_down())
            .unwrap();
    }
    finished.wait();
    others_done.open();
    for b in blockers {
        assert!(
            b.join().unwrap(),
            "a blocked task was released only by its timeout"
        );
    }
    let stats = pool.stats();
    assert!(
        stats.auxiliary_started >= 1,
        "no auxiliary thread was added: {stats:?}"
    );
    pool.shutdown();
}

/// The reference case: 2 core threads, one task that sleeps (2 s here) on one context; tasks
/// queued behind it on other contexts finish before it wakes.
#[test]
fn sleeping_task_does_not_hold_back_other_contexts() {
    let pool = pool(2, Duration::from_millis(20));
    let woke = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let started = Latch::new(1);
    let (p, w, s) = (pool.clone(), woke.clone(), started.clone());
    let sleeper = pool
        .submit_sequential("sleepy", move || {
            let after: Vec<_> = (0..20)
                .map(|j| {
                    let w = w.clone();
                    p.submit_sequential(("behind", j), move || {
                        w.load(std::sync::atomic::Ordering::SeqCst)
                    })
                    .unwrap()
                })
                .collect();
            s.count_down();
            std::thread::sleep(Duration::from_secs(2));
            w.store(true, std::sync::atomic::Ordering::SeqCst);
            after
        })
        .unwrap();
    started.wait();
    let after = sleeper.join().unwrap();
    for h in after {
        assert!(
            !h.join().unwrap(),
            "a task queued behind the sleeper ran after it woke"
        );
    }
    pool.shutdown();
}

/// `keyway::blocking` hands the queued work off at once: with one core thread and a monitor
/// too slow to help, the work behind the blocking call still runs.
#[test]
fn blocking_hands_off_at_once() {
    let pool = pool(1, Duration::from_secs(3600));
    let others_done = Gate::new();
    let (done, p) = (others_done.clone(), pool.clone());
    let finished = Latch::new(30);
    let f = finished.clone();
    let blocker = pool
        .submit(move || {
            for _ in 0..30 {
                let f = f.clone();
                p.execute(move || f.count_down()).unwrap();
            }
            keyway::blocking(|| done.wait_for(HANG))
        })
        .unwrap();
    finished.wait();
    others_done.open();
    assert!(blocker.join().unwrap());
    pool.shutdown();
}

/// A future that computes for a while between frequent yields is making progress, not blocked:
/// its worker resumes it in place after a yield (up to a streak of resumptions in one poll job),
/// and each resumption counts as progress for the monitor, as the queued poll it replaces would
/// have. So the monitor never marks its worker blocked, though the streak (32 resumptions of
/// 15 ms each) lasts longer than `blocked_after`. The stats are sampled while it runs: a miss
/// could only hide a breach, never invent one.
#[test]
fn a_future_that_yields_often_is_not_taken_for_a_blocked_worker() {
    use std::time::Instant;
    let pool = keyway::Pool::builder()
        .core_threads(1)
        .max_threads(3)
        .monitor_period(Duration::from_millis(10))
        .blocked_after(Duration::from_millis(200))
        .build()
        .unwrap();
    let computing = pool
        .spawn_sequential("compute", async {
            for _ in 0..40 {
                let start = Instant::now();
                while start.elapsed() < Duration::from_millis(15) {
                    std::hint::spin_loop();
                }
                keyway::yield_now().await;
            }
        })
        .unwrap();
    let mut most_blocked = 0;
    while !computing.is_finished() {
        most_blocked = most_blocked.max(pool.stats().blocked_threads);
        std::thread::sleep(Duration::from_millis(2));
    }
    computing.join().unwrap();
    assert_eq!(
        most_blocked, 0,
        "a yielding future's worker was taken for blocked"
    );
    pool.shutdown();
}
