//! Tasks of one context scheduled with `schedule_sequential` run in due order (ties: in
//! scheduling order) whatever the interval; a task's own timeout (`Timing::timeout`) beside its
//! executor's. (The rate bound over sliding windows is in `schedule_window.rs`.)

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use keyway::{ExecutorConfig, Pool, Scheduler, TaskError, Timing};
use rand::{Rng, SeedableRng};

/// Inverted pairs in `log` (run order) by (due, scheduling order).
fn inversions(log: &[(u64, usize)]) -> usize {
    let mut n = 0;
    for i in 0..log.len() {
        for j in i + 1..log.len() {
            if log[i] > log[j] {
                n += 1;
            }
        }
    }
    n
}

#[test]
fn tasks_of_one_context_run_in_due_order_whatever_the_interval() {
    let configs = [
        ("unlimited", ExecutorConfig::unlimited()),
        ("limited", ExecutorConfig::with_tps(20_000.0)),
        (
            "exact",
            ExecutorConfig::with_tps(20_000.0).early_dispatch(false),
        ),
    ];
    for interval in [10, 50, 200].map(Duration::from_millis) {
        let pool = Pool::builder()
            .core_threads(4)
            .max_threads(4)
            .build()
            .unwrap();
        let mut b = Scheduler::builder(&pool).interval(interval);
        for (name, config) in &configs {
            b = b.executor(*name, config.clone());
        }
        let s = b.build().unwrap();
        let mut rng = rand::rngs::SmallRng::seed_from_u64(interval.as_millis() as u64);
        // All due after the interval running now (none arrives late for a running interval).
        let base = Instant::now() + (interval * 2).max(Duration::from_millis(150));
        let mut logs = Vec::new();
        let mut handles = Vec::new();
        for (name, _) in &configs {
            let ctx_logs: Vec<_> = (0..8).map(|_| Arc::new(Mutex::new(Vec::new()))).collect();
            for seq in 0..2000usize {
                let ctx = rng.gen_range(0..8usize);
                // Over four intervals, in whole milliseconds: many ties.
                let after = rng.gen_range(0..4 * interval.as_millis() as u64);
                let log = ctx_logs[ctx].clone();
                let at = Timing::at(base + Duration::from_millis(after));
                handles.push(
                    s.schedule_sequential(name, at, ctx, move || {
                        log.lock().unwrap().push((after, seq))
                    })
                    .unwrap(),
                );
            }
            logs.push((*name, ctx_logs));
        }
        for h in handles {
            h.join().unwrap();
        }
        for (name, ctx_logs) in logs {
            let inverted: usize = ctx_logs
                .iter()
                .map(|l| inversions(&l.lock().unwrap()))
                .sum();
            assert_eq!(inverted, 0, "{name}, interval {interval:?}: inverted pairs");
        }
        s.shutdown();
    }
}

#[test]
fn a_task_timeout_beside_the_executor_default() {
    let pool = Pool::new().unwrap();
    let s = Scheduler::builder(&pool)
        .interval(Duration::from_millis(10))
        // Paused, with an executor timeout of an hour: only a task's own timeout can end it.
        .executor(
            "paused",
            ExecutorConfig::with_tps(0.0).timeout(Duration::from_secs(3600)),
        )
        // Never early, and a zero timeout: a task released when due has already missed it.
        .executor(
            "exact",
            ExecutorConfig::unlimited()
                .early_dispatch(false)
                .timeout(Duration::ZERO),
        )
        .build()
        .unwrap();
    let now = Timing::after(Duration::ZERO);
    let own = s
        .schedule_with("paused", now.timeout(Duration::from_millis(20)), || ())
        .unwrap();
    let zero = s
        .schedule_with("paused", now.timeout(Duration::ZERO), || ())
        .unwrap();
    let default = s.schedule_with("paused", now, || ()).unwrap();
    assert!(matches!(own.join(), Err(TaskError::TimedOut)));
    assert!(matches!(zero.join(), Err(TaskError::TimedOut)));
    assert!(!default.is_finished()); // the hour has not passed
                                     // `Duration::MAX` overflows: no timeout for that task, though its executor's is zero.
    let later = Timing::after(Duration::from_millis(20));
    let no_timeout = s
        .schedule_with("exact", later.timeout(Duration::MAX), || "ran")
        .unwrap();
    let executor_default = s.schedule_with("exact", later, || "ran").unwrap();
    assert_eq!(no_timeout.join().unwrap(), "ran");
    assert!(matches!(executor_default.join(), Err(TaskError::TimedOut)));
    let st = s.stats("paused").unwrap();
    assert_eq!(st.timed_out, 2);
    drop(default);
    let _ = s.shutdown_now();
}

/// Late arrivals (due in the interval already running) compete best first, among themselves
/// and with what is carried over, not in arrival order.
#[test]
fn late_arrivals_go_best_first() {
    let pool = Pool::builder()
        .core_threads(2)
        .max_threads(2)
        .build()
        .unwrap();
    let s = Scheduler::builder(&pool)
        .executor("x", ExecutorConfig::with_tps(20.0)) // one every 50 ms
        .build()
        .unwrap();
    // Once this one has run, the interval it ran in has started: what follows arrives late.
    s.schedule("x", Duration::ZERO, || ())
        .unwrap()
        .join()
        .unwrap();
    let log = Arc::new(Mutex::new(Vec::new()));
    let mut prios: Vec<i64> = (0..40).collect();
    use rand::seq::SliceRandom;
    prios.shuffle(&mut rand::rngs::SmallRng::seed_from_u64(7));
    let handles: Vec<_> = prios
        .iter()
        .map(|&p| {
            let log = log.clone();
            // One context: they run in the order they are released.
            let now = Timing::after(Duration::ZERO).priority(p);
            s.schedule_sequential("x", now, 0, move || log.lock().unwrap().push(p))
                .unwrap()
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let log = log.lock().unwrap().clone();
    // The first one or two may go before the rest have arrived; from then on, best first.
    let rest = &log[2..];
    assert!(
        rest.windows(2).all(|w| w[0] > w[1]),
        "not best first: {log:?}"
    );
    assert!(
        log[..3].contains(&39),
        "the best was not among the first: {log:?}"
    );
    s.shutdown();
}
