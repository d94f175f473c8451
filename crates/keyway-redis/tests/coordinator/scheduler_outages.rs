//! The Redis outage rule, with tasks: a keyway `Scheduler` whose executor's share comes from a
//! `RedisCoordinator` keeps running tasks at its last share while Redis is killed (and
//! restarted empty) and while it is paused, and no task is lost or run twice.

use crate::common;

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::*;
use keyway::{ExecutorConfig, Pool, Scheduler, Timing};

/// Tasks scheduled, all due at once; the limit lets 20 run per 100 ms interval.
const TASKS: usize = 1_200;
const TPS: f64 = 200.0;

#[test]
fn tasks_keep_running_through_redis_outages_exactly_once() {
    let Some(mut server) = RedisServer::start() else {
        return;
    };
    let coordinator = coordinator(&server.url(), 0.0);
    let pool = Pool::new().unwrap();
    // The most tasks any interval was allowed: never above the whole limit, outage or not.
    let max_quota = Arc::new(AtomicU64::new(0));
    let quotas = Arc::clone(&max_quota);
    let scheduler = Scheduler::builder(&pool)
        .interval(Duration::from_millis(100))
        .interval_hook(move |report| {
            quotas.fetch_max(report.quota.unwrap_or(u64::MAX), Ordering::AcqRel);
        })
        .executor(EXECUTOR, ExecutorConfig::with_tps(TPS))
        .coordinator(coordinator)
        .build()
        .unwrap();
    let runs: Arc<Vec<AtomicU32>> = Arc::new((0..TASKS).map(|_| AtomicU32::new(0)).collect());
    let ran = Arc::new(AtomicU64::new(0));
    for i in 0..TASKS {
        let (runs, ran) = (Arc::clone(&runs), Arc::clone(&ran));
        scheduler
            .execute_with(EXECUTOR, Timing::after(Duration::ZERO), move || {
                runs[i].fetch_add(1, Ordering::AcqRel);
                ran.fetch_add(1, Ordering::AcqRel);
            })
            .unwrap();
    }
    let ran_now = || ran.load(Ordering::Acquire);
    // Alone in its group: after the cold-start wait the process has the whole limit.
    wait_for("tasks to start running", || ran_now() >= 40);

    server.kill();
    let at_kill = ran_now();
    // 100 more tasks is 5 intervals at the whole limit: only a kept share gets there.
    wait_for("tasks to go on running while Redis is dead", || {
        ran_now() >= at_kill + 100
    });
    server.restart();

    server.pause();
    let at_pause = ran_now();
    wait_for("tasks to go on running while Redis is paused", || {
        ran_now() >= at_pause + 100
    });
    server.resume();

    wait_for("every task to run", || ran_now() == TASKS as u64);
    scheduler.shutdown();
    pool.shutdown();
    let counts: Vec<u32> = runs.iter().map(|r| r.load(Ordering::Acquire)).collect();
    let wrong: Vec<(usize, u32)> = counts
        .iter()
        .copied()
        .enumerate()
        .filter(|&(_, n)| n != 1)
        .collect();
    assert!(wrong.is_empty(), "tasks not run exactly once: {wrong:?}");
    let stats = scheduler.stats(EXECUTOR).unwrap();
    assert_eq!(stats.timed_out, 0);
    assert_eq!((stats.ran, stats.scheduled), (TASKS as u64, TASKS as u64));
    let max_quota = max_quota.load(Ordering::Acquire);
    assert!(
        max_quota <= 20,
        "an interval was allowed {max_quota} tasks (limit: 20)"
    );
}
