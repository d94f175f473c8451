//! Unit tests of multi-key edge cases: duplicates, no keys, one key.

use std::sync::{Arc, Mutex};

use crate::Pool;

#[test]
fn duplicate_keys_count_once() {
    let pool = Pool::builder().core_threads(2).build().unwrap();
    let h = pool.submit_keyed(["a", "a", "b", "a"], || 1).unwrap();
    assert_eq!(h.join().unwrap(), 1);
    pool.shutdown();
    assert_eq!(pool.stats().live_lanes, 0);
}

#[test]
fn no_keys_is_a_plain_task() {
    let pool = Pool::builder().core_threads(1).build().unwrap();
    let h = pool.submit_keyed(Vec::<u32>::new(), || "plain").unwrap();
    assert_eq!(h.join().unwrap(), "plain");
    pool.shutdown();
}

#[test]
fn one_key_is_the_sequential_lane() {
    let pool = Pool::builder()
        .core_threads(2)
        .lane_batch(1)
        .build()
        .unwrap();
    let log = Arc::new(Mutex::new(Vec::new()));
    for i in 0..200 {
        let log = log.clone();
        let push = move || log.lock().unwrap().push(i);
        if i % 2 == 0 {
            pool.execute_keyed([7u64], push).unwrap();
        } else {
            pool.execute_sequential(7u64, push).unwrap();
        }
    }
    pool.shutdown();
    assert_eq!(*log.lock().unwrap(), (0..200).collect::<Vec<_>>());
}

/// Rule 6, arrival by completion: a chain of 2-key tasks on busy keys, each made ready by the
/// completion of the one before it on a shared key (no lane job). With `lane_batch` 1 every
/// ready task is queued instead of run in a row (both paths). Each key's tasks run in
/// submission order and never overlap, single-key tasks in between keep their place, and every
/// lane is let go at the end.
#[test]
fn chained_multi_key_tasks_keep_order_on_every_key() {
    for batch in [1, 64] {
        let pool = Pool::builder()
            .core_threads(2)
            .lane_batch(batch)
            .build()
            .unwrap();
        let (started_tx, started) = std::sync::mpsc::channel();
        let (release, gate) = std::sync::mpsc::channel::<()>();
        pool.execute_sequential(0u32, move || {
            started_tx.send(()).unwrap();
            gate.recv().unwrap();
        })
        .unwrap();
        started.recv().unwrap(); // key 0 is busy: everything below queues behind it
        let logs: Arc<Vec<Mutex<Vec<u32>>>> =
            Arc::new((0..4).map(|_| Mutex::new(Vec::new())).collect());
        let busy: Arc<Vec<std::sync::atomic::AtomicBool>> =
            Arc::new((0..4).map(|_| Default::default()).collect());
        let mut expected = vec![Vec::new(); 4];
        for i in 0..400u32 {
            let keys = keys_of(i);
            for &k in &keys {
                expected[k as usize].push(i);
            }
            let (logs, busy) = (logs.clone(), busy.clone());
            let body = move || {
                use std::sync::atomic::Ordering::SeqCst;
                for &k in &keys {
                    assert!(!busy[k as usize].swap(true, SeqCst), "key {k} overlapped");
                }
                for &k in &keys {
                    logs[k as usize].lock().unwrap().push(i);
                }
                for &k in &keys {
                    busy[k as usize].store(false, SeqCst);
                }
            };
            pool.execute_keyed(keys_of(i), body).unwrap();
        }
        release.send(()).unwrap();
        pool.shutdown();
        for k in 0..4 {
            assert_eq!(
                *logs[k].lock().unwrap(),
                expected[k],
                "key {k} out of submission order (batch {batch})"
            );
        }
        assert_eq!(pool.stats().live_lanes, 0, "a lane was never let go");
        assert_eq!(
            pool.stats().panicked_tasks,
            0,
            "two tasks sharing a key overlapped"
        );
    }
}

/// The keys `chained_multi_key_tasks_keep_order_on_every_key` gives task `i`.
fn keys_of(i: u32) -> Vec<u32> {
    let mut keys = match i % 5 {
        4 => vec![i % 4],
        _ => vec![i % 4, (i / 4 + 1 + i % 4) % 4],
    };
    keys.dedup();
    keys
}

/// A key whose `Hash` or `Eq` (against an equal key: a lane look-up, not de-duplication) panics.
#[derive(Debug)]
struct Touchy {
    id: u32,
    bad_hash: bool,
    bad_eq: bool,
}

impl std::hash::Hash for Touchy {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        assert!(!self.bad_hash, "bad hash");
        self.id.hash(state);
    }
}

impl PartialEq for Touchy {
    fn eq(&self, other: &Self) -> bool {
        assert!(
            !(self.id == other.id && (self.bad_eq || other.bad_eq)),
            "bad eq"
        );
        self.id == other.id
    }
}

impl Eq for Touchy {}

fn touchy(id: u32) -> Touchy {
    Touchy {
        id,
        bad_hash: false,
        bad_eq: false,
    }
}

/// The two-key submission path: a key's `Hash` panicking, or its `Eq` panicking when its lane
/// is looked up (after the other key's lane may have been created), hands the task back
/// unqueued; no lane is left behind and the pool's accounting stays exact.
#[test]
fn two_key_look_up_panics_hand_the_task_back() {
    let pool = Pool::builder().core_threads(1).build().unwrap();
    let (started_tx, started) = std::sync::mpsc::channel();
    let (release, gate) = std::sync::mpsc::channel::<()>();
    // Key 1's lane exists (busy), so looking it up again compares keys.
    pool.execute_sequential(touchy(1), move || {
        started_tx.send(()).unwrap();
        gate.recv().unwrap();
    })
    .unwrap();
    started.recv().unwrap();
    let bad_hash = Touchy {
        bad_hash: true,
        ..touchy(3)
    };
    for (i, bad) in [
        bad_hash,
        Touchy {
            bad_eq: true,
            ..touchy(1)
        },
    ]
    .into_iter()
    .enumerate()
    {
        let (a, b) = if i == 0 {
            (touchy(9), bad)
        } else {
            (bad, touchy(9))
        };
        let ran = Arc::new(Mutex::new(false));
        let r = ran.clone();
        let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            pool.execute_keyed([a, b], move || *r.lock().unwrap() = true)
        }));
        let Ok(Err(crate::SubmitError::KeyPanicked(task))) = out else {
            panic!("case {i}: the key's panic was not contained as KeyPanicked");
        };
        task();
        assert!(
            *ran.lock().unwrap(),
            "case {i}: the task was not handed back intact"
        );
    }
    release.send(()).unwrap();
    pool.submit_keyed([touchy(9), touchy(1)], || ())
        .unwrap()
        .join()
        .unwrap();
    pool.shutdown();
    assert_eq!(pool.stats().live_lanes, 0, "lanes outlived shutdown");
}

/// A multi-key task made ready by a lane's runner (its key was busy) goes back to the running
/// worker's stash once done: the runner gives up its reference before the run, so the worker
/// holds the last one (a reference kept across the run sent most cells back to the allocator).
#[test]
fn a_task_a_runner_made_ready_is_recycled() {
    // One thread, never more: every task below runs on it, one after the other.
    let pool = Pool::builder()
        .core_threads(1)
        .max_threads(1)
        .build()
        .unwrap();
    let before = pool.submit(super::cells::stashed).unwrap().join().unwrap();
    let release = super::test::hold_lane(&pool, "busy");
    // Lane "busy" reaches the task through its runner, after lane "idle" arrived at submission.
    let ran = pool.submit_keyed(["busy", "idle"], || ()).unwrap();
    release.send(()).unwrap();
    ran.join().unwrap();
    let after = pool.submit(super::cells::stashed).unwrap().join().unwrap();
    assert_eq!(after, before + 1, "the cell went back to the allocator");
    pool.shutdown();
}

/// The cells of a burst of multi-key tasks queued behind a busy key (thousands in flight) are
/// reused by the next burst: the depot keeps them instead of freeing all but 1,024.
#[test]
fn the_cells_of_a_burst_are_reused_by_the_next_one() {
    const BURST: usize = 4096;
    let pool = Pool::builder()
        .core_threads(1)
        .max_threads(1)
        .build()
        .unwrap();
    let burst = |pool: &Pool| {
        let release = super::test::hold_lane(pool, "busy");
        // The worker is held: no cell comes back while the burst is submitted.
        let fresh = super::cells::fresh();
        let mut last = None;
        for _ in 0..BURST {
            last = Some(pool.submit_keyed(["busy", "other"], || ()).unwrap());
        }
        let fresh = super::cells::fresh() - fresh;
        release.send(()).unwrap();
        last.unwrap().join().unwrap();
        // The last cell is recycled after its handle completes: a task behind it waits for it.
        pool.submit_keyed(["busy"], || ()).unwrap().join().unwrap();
        fresh
    };
    burst(&pool);
    let again = burst(&pool);
    assert!(
        again < BURST / 4,
        "{again} of {BURST} cells allocated again"
    );
    pool.shutdown();
}
