//! Idle lanes: by default a lane is freed once idle, so memory does not grow with the contexts
//! ever used (a lane handle pins its lane until dropped); `PoolBuilder::idle_lanes` and
//! `keep_idle` keep idle lanes (and a typed lane's state) between touches; their extremes; the
//! memory an idle key costs.

use crate::common;

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::counting::live_bytes;
use common::{eventually, Gate};
use keyway::{KeyState, Pool, PoolBuilder, TypedLanes};

use crate::serial;

const KEYS: u32 = 1_000_000;

/// Counts of a typed lanes table with a state per key: states made, states let go of (and the
/// touches they had seen, summed).
#[derive(Clone, Default)]
struct Counts {
    made: Arc<AtomicUsize>,
    released: Arc<AtomicUsize>,
    touches_released: Arc<AtomicU64>,
}

fn counted_lanes(pool: &Pool, counts: &Counts) -> TypedLanes<u32, (), u32> {
    let (made, released, touches) = (
        counts.made.clone(),
        counts.released.clone(),
        counts.touches_released.clone(),
    );
    let state = KeyState::new(move |_: &u32| {
        made.fetch_add(1, Ordering::Relaxed);
        0u32
    })
    .on_idle(move |_: &u32, n: u32| {
        released.fetch_add(1, Ordering::Relaxed);
        touches.fetch_add(u64::from(n), Ordering::Relaxed);
    });
    pool.typed_lanes_with_state(state, |_: &u32, n: &mut u32, ()| *n += 1)
}

/// Touches each of `keys` keys `rounds` times, every lane idle again between two rounds.
fn touch(pool: &Pool, lanes: &TypedLanes<u32, (), u32>, keys: u32, rounds: u32) {
    for _ in 0..rounds {
        for key in 0..keys {
            lanes.send(key, ()).unwrap();
        }
        assert!(pool.wait_idle());
    }
}

fn builder() -> PoolBuilder {
    Pool::builder().core_threads(2).max_threads(2)
}

#[test]
fn a_million_keys_touched_three_times_make_a_million_states_with_keep_idle() {
    let _serial = serial();
    let pool = builder()
        .keep_idle(Duration::from_secs(600))
        .build()
        .unwrap();
    let counts = Counts::default();
    let lanes = counted_lanes(&pool, &counts);
    let before = live_bytes();
    touch(&pool, &lanes, KEYS, 1);
    eventually("every lane idle and kept", || {
        pool.stats().live_lanes == KEYS as usize
    });
    let per_key = (live_bytes() - before) / i64::from(KEYS);
    println!("an idle typed lane with a u32 key and a u32 state: {per_key} bytes");
    assert!(
        per_key <= 320,
        "{per_key} bytes per idle key (documented: about 280)"
    );
    touch(&pool, &lanes, KEYS, 2);
    assert_eq!(counts.made.load(Ordering::Relaxed), KEYS as usize);
    assert_eq!(pool.stats().live_lanes, KEYS as usize);
    pool.shutdown(); // frees every lane: each state goes to `on_idle`
    assert_eq!(counts.released.load(Ordering::Relaxed), KEYS as usize);
    assert_eq!(
        counts.touches_released.load(Ordering::Relaxed),
        3 * u64::from(KEYS),
        "every touch reached its key's one state"
    );
}

#[test]
fn by_default_a_million_keys_make_a_new_state_at_nearly_every_touch() {
    let _serial = serial();
    let pool = builder().build().unwrap();
    let counts = Counts::default();
    let lanes = counted_lanes(&pool, &counts);
    touch(&pool, &lanes, KEYS, 3);
    let made = counts.made.load(Ordering::Relaxed);
    println!("default settings, 1,000,000 keys x 3 touches: {made} states");
    // At most the default cache (4,096 idle lanes) keeps its state from one round to the next.
    assert!(made >= 3 * KEYS as usize - 2 * 4096, "{made}");
    pool.shutdown();
    assert_eq!(counts.released.load(Ordering::Relaxed), made);
}

#[test]
fn idle_lanes_zero_frees_a_lane_as_soon_as_it_is_idle() {
    let _serial = serial();
    for keep in [None, Some(Duration::MAX)] {
        let mut b = builder().idle_lanes(0);
        if let Some(keep) = keep {
            b = b.keep_idle(keep);
        }
        let pool = b.build().unwrap();
        let counts = Counts::default();
        let lanes = counted_lanes(&pool, &counts);
        for round in 1..=2 {
            touch(&pool, &lanes, 1000, 1);
            // `wait_idle` returns once the tasks are done; a lane's runner frees the lane just
            // after (it failed here once as 1,999 states: one lane not yet freed was touched).
            eventually("every idle lane freed", || pool.stats().live_lanes == 0);
            assert_eq!(
                counts.made.load(Ordering::Relaxed),
                1000 * round,
                "{keep:?}"
            );
        }
        pool.shutdown();
    }
}

#[test]
fn idle_lanes_max_keeps_every_idle_lane_until_the_monitor_frees_it() {
    let _serial = serial();
    // No bound on the count, and the default keep (the monitor's next look) frees them.
    let pool = builder()
        .idle_lanes(usize::MAX)
        .monitor_period(Duration::from_millis(1))
        .build()
        .unwrap();
    let counts = Counts::default();
    let lanes = counted_lanes(&pool, &counts);
    touch(&pool, &lanes, 10_000, 1);
    eventually("the monitor freed every idle lane", || {
        pool.stats().live_lanes == 0
    });
    // A lane leaves the count when the monitor takes it out of its table; its state is
    // released just after, on the monitor's thread.
    eventually("every freed lane's state is released", || {
        counts.released.load(Ordering::Relaxed) == 10_000
    });
    // Kept from one touch to the next while the monitor is off.
    let pool = builder()
        .idle_lanes(usize::MAX)
        .monitor_period(Duration::MAX)
        .build()
        .unwrap();
    let counts = Counts::default();
    let lanes = counted_lanes(&pool, &counts);
    touch(&pool, &lanes, 10_000, 3);
    assert_eq!(counts.made.load(Ordering::Relaxed), 10_000);
    pool.shutdown();
}

#[test]
fn keep_idle_zero_frees_at_the_next_look_and_max_never_before_shutdown() {
    let _serial = serial();
    let fast = |keep| {
        builder()
            .keep_idle(keep)
            .monitor_period(Duration::from_millis(1))
            .build()
            .unwrap()
    };
    let pool = fast(Duration::ZERO);
    let counts = Counts::default();
    let lanes = counted_lanes(&pool, &counts);
    touch(&pool, &lanes, 10_000, 1);
    eventually("freed at the monitor's next look", || {
        pool.stats().live_lanes == 0
    });
    pool.shutdown();

    let pool = fast(Duration::MAX);
    let counts = Counts::default();
    let lanes = counted_lanes(&pool, &counts);
    touch(&pool, &lanes, 10_000, 1);
    // Not a synchronisation: a stretch of ~100 monitor looks, after which none may have freed
    // a lane.
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(pool.stats().live_lanes, 10_000);
    touch(&pool, &lanes, 10_000, 1);
    assert_eq!(counts.made.load(Ordering::Relaxed), 10_000);
    pool.shutdown();
    assert_eq!(counts.released.load(Ordering::Relaxed), 10_000);
    assert_eq!(pool.stats().live_lanes, 0);
}

#[test]
fn async_typed_lanes_own_their_state_across_touches() {
    let _serial = serial();
    let pool = builder()
        .keep_idle(Duration::from_secs(600))
        .build()
        .unwrap();
    let made = Arc::new(AtomicUsize::new(0));
    let m = made.clone();
    let (saved, rx) = std::sync::mpsc::channel();
    let state = KeyState::new(move |_: &u32| {
        m.fetch_add(1, Ordering::Relaxed);
        Vec::<u32>::new()
    })
    .on_idle(move |key: &u32, log: Vec<u32>| saved.send((*key, log)).unwrap());
    let lanes = pool.typed_lanes_async_with_state(state, |_: &u32, mut log: Vec<u32>, n: u32| {
        async move {
            keyway::yield_now().await; // the state is held across an await
            log.push(n);
            log
        }
    });
    const KEYS: u32 = 10_000;
    for round in 0..3 {
        for key in 0..KEYS {
            lanes.send(key, round).unwrap();
        }
        assert!(pool.wait_idle());
    }
    assert_eq!(made.load(Ordering::Relaxed), KEYS as usize);
    pool.shutdown();
    let saved: Vec<_> = rx.try_iter().collect();
    assert_eq!(saved.len(), KEYS as usize);
    assert!(saved.iter().all(|(_, log)| *log == [0, 1, 2]));
}

#[test]
fn a_million_contexts_used_once_leave_no_lanes() {
    let _serial = serial();
    let pool = keyway::Pool::builder().core_threads(2).build().unwrap();
    for i in 0..1_000_000u64 {
        pool.execute_sequential(i, || ()).unwrap();
    }
    eventually("every lane is freed", || {
        let s = pool.stats();
        s.unfinished_tasks() == 0 && s.live_lanes == 0
    });
    pool.shutdown();
    assert_eq!(pool.stats().live_lanes, 0);
}

#[test]
fn lane_handles_pin_their_lane_until_dropped() {
    let _serial = serial();
    let pool = keyway::Pool::builder().core_threads(1).build().unwrap();
    let lane = pool.lane("pinned");
    lane.submit(|| ()).unwrap().join().unwrap();
    assert_eq!(pool.stats().live_lanes, 1);
    let again = lane.clone();
    drop(lane);
    assert_eq!(pool.stats().live_lanes, 1);
    drop(again);
    // Freed by the unpin if the lane is idle, else by its runner the moment it runs dry
    // (`join` returns when the task finished, possibly before the runner let go of the lane).
    eventually("unpinned idle lane freed", || pool.stats().live_lanes == 0);
    // A lane dropped while busy is freed once it runs dry.
    let gate = Gate::new();
    let lane = pool.lane("busy");
    let g = gate.clone();
    lane.execute(move || g.wait()).unwrap();
    drop(lane);
    gate.open();
    eventually("busy lane freed after its work", || {
        pool.stats().live_lanes == 0
    });
    pool.shutdown();
}

#[test]
fn lanes_whose_futures_complete_at_once_are_freed_once_idle() {
    let _serial = serial();
    // Idle lanes are not cached: each must leave its table the moment its last future is done,
    // whether a runner polled it alone or a lane went on from one future to the next.
    let pool = builder().idle_lanes(0).build().unwrap();
    let mut submitted = 0;
    for _ in 0..3 {
        for key in 0..2_000u64 {
            // One future per key, then keys with a backlog of futures and closures after them.
            let futures = if key % 4 == 0 { 3 } else { 1 };
            for _ in 0..futures {
                pool.execute_async_sequential(key, async {}).unwrap();
            }
            submitted += futures;
            if key % 8 == 0 {
                pool.execute_sequential(key, || ()).unwrap();
                submitted += 1;
            }
        }
        assert!(pool.wait_idle());
        eventually("every lane of futures freed", || {
            pool.stats().live_lanes == 0
        });
        assert_eq!(pool.stats().completed_tasks, submitted);
    }
    pool.shutdown();
}
