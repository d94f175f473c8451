//! What an operator reads from a running pool: `Pool::metrics` names the lane a slow task
//! holds and sees the wait behind it grow, its queue-wait histogram shifts when the pool is
//! saturated, `Stats::largest_lanes` still finds a deep lane among thousands of idle ones
//! (through the watch list, not a walk of every lane), and listed lanes carry their key's
//! printed label where the key's type allows.

use crate::common;

use std::time::{Duration, Instant};

use common::{eventually, Gate, Latch};
use keyway::Pool;

/// A pool with one worker that times every task.
fn timed_pool() -> Pool {
    Pool::builder()
        .core_threads(1)
        .max_threads(1)
        .metrics(true)
        .metrics_sampling(1)
        .build()
        .unwrap()
}

#[test]
fn a_lane_behind_a_slow_task_is_named_longest_running_and_its_wait_grows() {
    let pool = timed_pool();
    let (gate, started) = (Gate::new(), Latch::new(1));
    let (g, s) = (gate.clone(), started.clone());
    pool.execute_sequential("stuck", move || {
        s.count_down();
        g.wait();
    })
    .unwrap();
    started.wait();
    for _ in 0..3 {
        pool.execute_sequential("stuck", || ()).unwrap();
    }
    let first = pool.metrics();
    let running = first
        .longest_running
        .first()
        .expect("a running task listed");
    assert_eq!(running.context_hash, Some(pool.context_hash(&"stuck")));
    let waited = first.oldest_waiting.expect("three timed tasks wait");
    assert_eq!(first.stats.largest_lanes[0].queued, 3);
    assert_eq!(
        first.stats.largest_lanes[0].context_hash,
        pool.context_hash(&"stuck")
    );
    // Time passes while the lane stays blocked: the same wait, older.
    eventually("the oldest wait to grow", || {
        let later = pool.metrics();
        later.oldest_waiting.is_some_and(|w| w > waited)
            && later.longest_running[0].running_for > running.running_for
            && later.longest_running[0].context_hash == running.context_hash
    });
    gate.open();
    pool.wait_idle();
    let done = pool.metrics();
    assert_eq!(done.oldest_waiting, None, "nothing waits any more");
    assert_eq!(done.queue_wait.count(), 4);
    assert_eq!(done.run_time.count(), 4);
    assert!(done.run_time.quantile(1.0).unwrap() >= running.running_for);
    pool.shutdown();
}

#[test]
fn the_queue_wait_histogram_shifts_when_the_pool_is_saturated() {
    const HELD: Duration = Duration::from_millis(100);
    // Unsaturated: each task submitted once the one before is done.
    let idle = timed_pool();
    for _ in 0..200 {
        idle.submit(|| ()).unwrap().join().unwrap();
    }
    let calm = idle.metrics().queue_wait;
    idle.shutdown();
    // Saturated: 200 tasks queue behind one that holds the only worker for `HELD` after the
    // last of them was submitted, so each of them waits at least that long.
    let busy = timed_pool();
    let (gate, started) = (Gate::new(), Latch::new(1));
    let (g, s) = (gate.clone(), started.clone());
    busy.execute(move || {
        s.count_down();
        g.wait();
    })
    .unwrap();
    started.wait();
    for _ in 0..200 {
        busy.execute(|| ()).unwrap();
    }
    let last = Instant::now();
    eventually("the hold to last", || last.elapsed() >= HELD);
    gate.open();
    busy.wait_idle();
    let saturated = busy.metrics().queue_wait;
    busy.shutdown();
    assert_eq!((calm.count(), saturated.count()), (200, 201));
    let (calm_p50, busy_p50) = (
        calm.quantile(0.5).unwrap(),
        saturated.quantile(0.5).unwrap(),
    );
    assert!(busy_p50 >= HELD, "saturated p50 {busy_p50:?}");
    assert!(busy_p50 > calm_p50, "p50 {calm_p50:?} -> {busy_p50:?}");
    assert!(saturated.quantile(0.01).unwrap() >= HELD);
}

#[test]
fn a_deep_lane_is_listed_among_thousands_of_idle_ones() {
    let pool = Pool::builder()
        .core_threads(1)
        .max_threads(1)
        .idle_lanes(100_000)
        .keep_idle(Duration::from_secs(3600))
        .build()
        .unwrap();
    for k in 0..5_000u32 {
        pool.execute_sequential(k, || ()).unwrap();
    }
    pool.wait_idle();
    assert!(pool.stats().live_lanes >= 5_000);
    // "hot": a gate, 100 quick tasks, then a second gate: its runner uses up whole batches
    // (what puts a lane on the watch list) and stops at the second gate with 100 queued.
    let (first, second, at_second) = (Gate::new(), Gate::new(), Latch::new(1));
    let g = first.clone();
    pool.execute_sequential("hot", move || g.wait()).unwrap();
    for _ in 0..100 {
        pool.execute_sequential("hot", || ()).unwrap();
    }
    let (g, s) = (second.clone(), at_second.clone());
    pool.execute_sequential("hot", move || {
        s.count_down();
        g.wait();
    })
    .unwrap();
    for _ in 0..100 {
        pool.execute_sequential("hot", || ()).unwrap();
    }
    first.open();
    at_second.wait();
    let deepest = pool.stats().largest_lanes;
    assert_eq!(deepest.len(), 1, "{deepest:?}");
    assert_eq!(deepest[0].context_hash, pool.context_hash(&"hot"));
    // Those behind the gate, less the rest of the batch the runner holds (not counted).
    assert!((68..=100).contains(&deepest[0].queued), "{deepest:?}");
    second.open();
    pool.shutdown();
}

#[test]
fn a_lane_piling_up_before_it_ever_ran_is_found_by_the_monitor() {
    let pool = Pool::builder()
        .core_threads(1)
        .max_threads(1)
        .monitor_period(Duration::from_millis(2))
        .blocked_after(Duration::from_secs(3600))
        .build()
        .unwrap();
    let gate = common::hold_workers(&pool, 1);
    // 1,000 lanes with one task each, and one with 100: none has run.
    for k in 0..1_000u32 {
        pool.execute_sequential(k, || ()).unwrap();
    }
    for _ in 0..100 {
        pool.execute_sequential("deep", || ()).unwrap();
    }
    eventually("the monitor to find the deep lane", || {
        pool.stats().largest_lanes.first()
            == Some(&keyway::LaneDepth {
                context_hash: pool.context_hash(&"deep"),
                queued: 100,
                label: pool.lane_label(&"deep"),
            })
    });
    gate.open();
    pool.shutdown();
}

#[test]
fn an_untimed_pool_counts_but_does_not_time() {
    let pool = Pool::builder()
        .core_threads(1)
        .max_threads(1)
        .capacity(1)
        .build()
        .unwrap();
    let (gate, started) = (Gate::new(), Latch::new(1));
    let (g, s) = (gate.clone(), started.clone());
    pool.execute(move || {
        s.count_down();
        g.wait();
    })
    .unwrap();
    started.wait();
    assert!(pool.execute(|| ()).is_err(), "capacity 1 is taken");
    let m = pool.metrics();
    assert!(!m.timed);
    assert_eq!((m.submitted_tasks, m.refused_tasks), (1, 1));
    assert_eq!(m.queue_wait.count(), 0);
    assert!(m.longest_running.is_empty());
    gate.open();
    pool.shutdown();
    // After shutdown: refused, and counted.
    assert!(pool.execute(|| ()).is_err());
    assert_eq!(pool.metrics().refused_tasks, 2);
}

#[test]
fn tasks_handed_back_by_shutdown_now_are_counted() {
    let pool = timed_pool();
    let gate = common::hold_workers(&pool, 1);
    for k in 0..5 {
        pool.execute_sequential(k, || ()).unwrap();
    }
    let back = common::shutdown_now_while_held(&pool, &gate);
    assert_eq!(back.len(), 5);
    let m = pool.metrics();
    assert_eq!(m.handed_back_tasks, 5);
    // Handed back, they wait with the caller now: once dropped, nothing waits.
    drop(back);
    assert_eq!(pool.metrics().oldest_waiting, None);
}

/// A key type the pool prints only once told to (`label_keys`).
#[derive(Debug, Hash, PartialEq, Eq, Clone)]
struct Account {
    id: u32,
}

/// A key type whose `Debug` panics: its lane is listed without a label, and the snapshot and
/// the pool go on.
#[derive(Hash, PartialEq, Eq, Clone)]
struct Unprintable;

impl std::fmt::Debug for Unprintable {
    fn fmt(&self, _: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        panic!("this key cannot be printed")
    }
}

/// Holds lane `key` behind a task that waits for the returned gate, with `behind` more tasks
/// queued after it.
fn block_lane<K>(pool: &Pool, key: K, behind: usize) -> Gate
where
    K: std::hash::Hash + Eq + Clone + Send + Sync + 'static,
{
    let (gate, started) = (Gate::new(), Latch::new(1));
    let (g, s) = (gate.clone(), started.clone());
    pool.execute_sequential(key.clone(), move || {
        s.count_down();
        g.wait();
    })
    .unwrap();
    started.wait();
    for _ in 0..behind {
        pool.execute_sequential(key.clone(), || ()).unwrap();
    }
    gate
}

#[test]
fn listed_lanes_carry_their_keys_label_where_the_key_type_allows() {
    // Three workers, three stuck lanes: a string key (labelled by every pool), a key of a
    // type named with `label_keys`, and one whose `Debug` panics.
    let pool = Pool::builder()
        .core_threads(3)
        .max_threads(3)
        .metrics(true)
        .metrics_sampling(1)
        .label_keys::<Account>()
        .label_keys::<Unprintable>()
        .build()
        .unwrap();
    let long = "k".repeat(100);
    let gates = [
        block_lane(&pool, long.clone(), 3),
        block_lane(&pool, Account { id: 42 }, 2),
        block_lane(&pool, Unprintable, 1),
    ];
    let m = pool.metrics();
    let depth = |queued: usize| {
        m.stats
            .largest_lanes
            .iter()
            .find(|d| d.queued == queued)
            .copied()
            .expect("the lane listed")
    };
    let string = depth(3).label.expect("a String key is labelled");
    assert!(string.is_truncated() && string.as_str().len() <= 48);
    assert!(string.as_str().starts_with("\"kkk"), "{string}");
    assert_eq!(Some(string), pool.lane_label(&long));
    assert_eq!(
        depth(2).label.map(|l| l.to_string()).as_deref(),
        Some("Account { id: 42 }")
    );
    assert_eq!(depth(1).label, None, "a Debug that panics gives no label");
    // The longest-running tasks (timed, every one here) name their lanes the same way.
    let running: Vec<_> = m.longest_running.iter().map(|r| r.label).collect();
    assert_eq!(running.len(), 3);
    assert!(running.contains(&Some(string)));
    assert!(running.contains(&pool.lane_label(&Account { id: 42 })));
    assert!(running.contains(&None));
    assert!(m.to_string().contains(", key "), "{m}");
    // A pool not told of `Account` lists that lane by hash only.
    let plain = Pool::builder()
        .core_threads(1)
        .max_threads(1)
        .build()
        .unwrap();
    let gate = block_lane(&plain, Account { id: 42 }, 1);
    let d = plain.stats().largest_lanes[0];
    assert_eq!(d.context_hash, plain.context_hash(&Account { id: 42 }));
    assert_eq!(d.label, None);
    gate.open();
    plain.shutdown();
    for g in gates {
        g.open();
    }
    pool.shutdown();
}

/// A task of several keys, or of none, is timed like a one-key task: with every task sampled,
/// the queue-wait and run-time histograms count each.
#[test]
fn multi_key_and_keyless_tasks_are_timed() {
    let pool = timed_pool();
    for i in 0..5u32 {
        pool.execute_keyed([i, i + 1], || ()).unwrap();
        pool.execute_keyed([i, i + 1, i + 2], || ()).unwrap();
    }
    pool.execute_keyed(Vec::<u32>::new(), || ()).unwrap();
    pool.wait_idle();
    let m = pool.metrics();
    assert_eq!(m.queue_wait.count(), 11);
    assert_eq!(m.run_time.count(), 11);
    pool.shutdown();
}
