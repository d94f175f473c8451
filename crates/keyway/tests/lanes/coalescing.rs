//! Coalescing tasks replace the pending one, the newest always runs, order with
//! sequential tasks is kept, and replaced handles say `Coalesced`.

use crate::common;

use std::sync::{Arc, Mutex};

use common::Gate;
use keyway::TaskError;

#[test]
fn burst_on_busy_context_runs_few_and_always_the_last() {
    let pool = keyway::Pool::builder().core_threads(2).build().unwrap();
    let gate = Gate::new();
    let g = gate.clone();
    pool.execute_sequential("px", move || g.wait()).unwrap(); // keeps the context busy
    let ran = Arc::new(Mutex::new(Vec::new()));
    let handles: Vec<_> = (0..1000)
        .map(|i| {
            let ran = ran.clone();
            pool.submit_coalescing("px", move || {
                ran.lock().unwrap().push(i);
                i
            })
            .unwrap()
        })
        .collect();
    gate.open();
    let mut coalesced = 0;
    let mut values = Vec::new();
    for h in handles {
        match h.join() {
            Ok(v) => values.push(v),
            Err(TaskError::Coalesced) => coalesced += 1,
            Err(other) => panic!("unexpected outcome {other:?}"),
        }
    }
    pool.shutdown();
    let ran = ran.lock().unwrap();
    assert!(
        ran.len() < 1000 / 10,
        "coalescing ran {} of 1000 tasks",
        ran.len()
    );
    assert_eq!(ran.last(), Some(&999), "the last update was lost");
    assert_eq!(values, *ran, "handles and runs disagree");
    assert_eq!(coalesced + values.len(), 1000);
}

/// Coalescing replaces only a pending coalescing task at the back: never a sequential task, and
/// never across one, so order with the context's sequential tasks holds.
#[test]
fn order_with_sequential_tasks_is_kept() {
    let pool = keyway::Pool::builder().core_threads(1).build().unwrap();
    let gate = Gate::new();
    let g = gate.clone();
    pool.execute_sequential(1, move || g.wait()).unwrap();
    let log = Arc::new(Mutex::new(Vec::new()));
    let push = |tag: &'static str| {
        let log = log.clone();
        move || log.lock().unwrap().push(tag)
    };
    pool.execute_coalescing(1, push("c1")).unwrap();
    pool.execute_coalescing(1, push("c2")).unwrap(); // replaces c1
    pool.execute_sequential(1, push("s1")).unwrap();
    pool.execute_coalescing(1, push("c3")).unwrap(); // s1 stands between: no replacement
    pool.execute_coalescing(1, push("c4")).unwrap(); // replaces c3
    pool.execute_sequential(1, push("s2")).unwrap();
    pool.execute_coalescing(1, push("c5")).unwrap();
    gate.open();
    pool.shutdown();
    assert_eq!(*log.lock().unwrap(), vec!["c2", "s1", "c4", "s2", "c5"]);
}

/// Under contention from several submitters with the lane running, the newest coalescing task
/// of each burst still runs last; sequential tasks mixed in at random all run, and each
/// submitter's tasks run in its submission order. 100 seeds per run.
#[test]
fn newest_always_runs_under_contention() {
    use rand::{rngs::SmallRng, Rng, SeedableRng};
    for seed in 0..100u64 {
        let pool = keyway::Pool::builder()
            .core_threads(1 + seed as usize % 3)
            .lane_batch(1 + seed as usize % 4)
            .build()
            .unwrap();
        let last = Arc::new(Mutex::new(None));
        // Per submitter: the last stamp that ran, and how many sequential tasks ran.
        let seen = Arc::new(Mutex::new([(None::<u64>, 0u64); 3]));
        let producers: Vec<_> = (0..3)
            .map(|p| {
                let (pool, last, seen) = (pool.clone(), last.clone(), seen.clone());
                std::thread::spawn(move || {
                    let mut rng = SmallRng::seed_from_u64(seed * 31 + p as u64);
                    let mut sequential = 0;
                    for i in 0..300u64 {
                        let (last, seen) = (last.clone(), seen.clone());
                        let stamp = (p, i);
                        let coalescing = rng.gen_bool(0.8);
                        sequential += u64::from(!coalescing);
                        let task = move || {
                            let mut seen = seen.lock().unwrap();
                            let (prev, n) = &mut seen[p];
                            if prev.is_some_and(|prev| prev >= i) {
                                *n = u64::MAX; // order broken: fails the count check below
                            }
                            *prev = Some(i);
                            *n = n.saturating_add(u64::from(!coalescing));
                            *last.lock().unwrap() = Some(stamp);
                        };
                        if coalescing {
                            pool.execute_coalescing("feed", task).unwrap();
                        } else {
                            pool.execute_sequential("feed", task).unwrap();
                        }
                        if rng.gen_ratio(1, 50) {
                            std::thread::yield_now();
                        }
                    }
                    sequential
                })
            })
            .collect();
        let sequential: Vec<u64> = producers.into_iter().map(|p| p.join().unwrap()).collect();
        // After every producer returned, one more update: it must be the one left standing.
        let l = last.clone();
        pool.execute_coalescing("feed", move || *l.lock().unwrap() = Some((99, 99)))
            .unwrap();
        pool.shutdown();
        assert_eq!(
            *last.lock().unwrap(),
            Some((99, 99)),
            "seed {seed}: last update lost"
        );
        let ran: Vec<u64> = seen.lock().unwrap().iter().map(|&(_, n)| n).collect();
        assert_eq!(
            ran, sequential,
            "seed {seed}: a sequential task was lost or a submitter's order broken"
        );
    }
}

/// Typed messages coalesce as closures do, by key and through a pinned lane alike: a coalescing
/// message replaces only a pending coalescing message at the back, never a plain one nor one
/// behind a plain one, and the newest always runs.
#[test]
fn typed_messages_coalesce_by_key_and_through_a_pinned_lane() {
    let pool = keyway::Pool::builder().core_threads(1).build().unwrap();
    let gate = Gate::new();
    let g = gate.clone();
    let log = Arc::new(Mutex::new(Vec::new()));
    let l = log.clone();
    let lanes = pool.typed_lanes(move |key: &u8, msg: &'static str| match msg {
        "hold" => g.wait(),
        msg => l.lock().unwrap().push((*key, msg)),
    });
    let pinned = lanes.lane(2);
    for key in [1u8, 2] {
        lanes.send(key, "hold").unwrap(); // keeps the key's lane busy
    }
    let sends: [(&str, bool); 7] = [
        ("c1", true),
        ("c2", true), // replaces c1
        ("s1", false),
        ("c3", true), // s1 stands between: no replacement
        ("c4", true), // replaces c3
        ("s2", false),
        ("c5", true),
    ];
    for (msg, coalescing) in sends {
        if coalescing {
            lanes.send_coalescing(1, msg).unwrap();
            pinned.send_coalescing(msg).unwrap();
        } else {
            lanes.send(1, msg).unwrap();
            pinned.send(msg).unwrap();
        }
    }
    gate.open();
    pool.shutdown();
    let log = log.lock().unwrap();
    for key in [1u8, 2] {
        let ran: Vec<_> = log
            .iter()
            .filter(|(k, _)| *k == key)
            .map(|(_, m)| *m)
            .collect();
        assert_eq!(ran, ["c2", "s1", "c4", "s2", "c5"], "key {key}");
    }
}
