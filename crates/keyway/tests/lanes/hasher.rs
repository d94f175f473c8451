//! `PoolBuilder::hasher`: the user's hasher is what hashes context keys, on every path, and a
//! hasher under which every key collides (what hash flooding aims at) costs speed, never
//! correctness.

use crate::common;

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use common::{Gate, HANG};
use keyway::{Pool, SubmitError};

/// A `BuildHasher` that counts the hashers it builds.
#[derive(Clone, Default)]
struct Counting {
    built: Arc<AtomicUsize>,
    inner: RandomState,
}

impl BuildHasher for Counting {
    type Hasher = std::collections::hash_map::DefaultHasher;
    fn build_hasher(&self) -> Self::Hasher {
        self.built.fetch_add(1, Ordering::SeqCst);
        self.inner.build_hasher()
    }
}

/// Every key hashes to the same value.
#[derive(Clone, Copy, Default)]
struct Colliding;

struct Zero;

impl Hasher for Zero {
    fn finish(&self) -> u64 {
        0
    }
    fn write(&mut self, _: &[u8]) {}
}

impl BuildHasher for Colliding {
    type Hasher = Zero;
    fn build_hasher(&self) -> Zero {
        Zero
    }
}

#[test]
fn the_chosen_hasher_hashes_every_kind_of_key() {
    let counting = Counting::default();
    let built = counting.built.clone();
    let pool = Pool::builder().hasher(counting).build().unwrap();
    let mut last = built.load(Ordering::SeqCst);
    let mut grew = |what: &str| {
        let now = built.load(Ordering::SeqCst);
        assert!(now > last, "{what} did not use the pool's hasher");
        last = now;
    };
    pool.execute_sequential("ctx", || ()).unwrap();
    grew("execute_sequential");
    pool.submit_coalescing(7u32, || ()).unwrap().join().unwrap();
    grew("submit_coalescing");
    pool.submit_keyed(["a", "b"], || ())
        .unwrap()
        .join()
        .unwrap();
    grew("submit_keyed");
    let lane = pool.lane(String::from("lane"));
    lane.submit(|| ()).unwrap().join().unwrap();
    grew("lane");
    let typed = pool.typed_lanes(|_: &u64, _: ()| ());
    typed.send(1, ()).unwrap();
    grew("typed_lanes");
    let _ = pool.context_hash(&"ctx");
    grew("context_hash");
    drop((lane, typed));
    pool.shutdown();
}

/// Many clients' keys, all colliding: each key still has its own lane (its tasks in order, other
/// keys' tasks in parallel with them).
#[test]
fn colliding_keys_keep_order_per_key_and_parallelism_across_keys() {
    let pool = Pool::builder()
        .core_threads(4)
        .max_threads(8)
        .hasher(Colliding)
        .build()
        .unwrap();
    assert_eq!(pool.context_hash(&1u64), pool.context_hash(&2u64));

    // Order per key, under contention from four submitting threads.
    for seed in 0..20u64 {
        const KEYS: u64 = 64;
        let logs: Arc<Vec<Mutex<Vec<u64>>>> =
            Arc::new((0..KEYS).map(|_| Mutex::new(Vec::new())).collect());
        let submitters: Vec<_> = (0..4u64)
            .map(|t| {
                let (pool, logs) = (pool.clone(), logs.clone());
                std::thread::spawn(move || {
                    for i in 0..500u64 {
                        let key = (i * 7 + t * 13 + seed) % KEYS;
                        let logs = logs.clone();
                        pool.execute_sequential(key, move || {
                            common::spin((i % 5) as u32 * 50);
                            logs[key as usize].lock().unwrap().push(t << 32 | i);
                        })
                        .unwrap();
                    }
                })
            })
            .collect();
        for s in submitters {
            s.join().unwrap();
        }
        let done: Vec<_> = (0..KEYS)
            .map(|k| pool.submit_sequential(k, || ()).unwrap())
            .collect();
        for d in done {
            d.join().unwrap();
        }
        let mut total = 0;
        for log in logs.iter() {
            let log = log.lock().unwrap();
            total += log.len();
            for t in 0..4u64 {
                let mine: Vec<_> = log.iter().filter(|&&x| x >> 32 == t).collect();
                assert!(
                    mine.windows(2).all(|w| w[0] < w[1]),
                    "seed {seed}: out of order"
                );
            }
        }
        assert_eq!(total, 4 * 500);
    }

    // Two colliding keys are still two lanes: a task of key 2 releases a task of key 1 that is
    // waiting for it. Were they one lane, the second could never start.
    let gate = Gate::new();
    let g = gate.clone();
    let waiting = pool
        .submit_sequential(1u64, move || g.wait_for(HANG))
        .unwrap();
    pool.submit_sequential(2u64, move || gate.open())
        .unwrap()
        .join()
        .unwrap();
    assert!(waiting.join().unwrap(), "colliding keys shared a lane");
    pool.shutdown();
}

/// A hasher that panics is contained like a key whose `Hash` panics: the task comes back.
#[test]
fn a_panicking_hasher_hands_the_task_back() {
    #[derive(Clone, Copy)]
    struct Exploding;
    impl BuildHasher for Exploding {
        type Hasher = Zero;
        fn build_hasher(&self) -> Zero {
            panic!("no hasher today")
        }
    }
    let pool = Pool::builder().hasher(Exploding).build().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let err = pool
        .execute_sequential("k", move || tx.send(5).unwrap())
        .unwrap_err();
    assert!(matches!(err, SubmitError::KeyPanicked(_)));
    err.into_inner()();
    assert_eq!(rx.recv().unwrap(), 5);
    let err = pool.submit_keyed(["a", "b"], || 6).unwrap_err();
    assert_eq!(err.into_inner()(), 6);
    // Plain tasks do not hash: the pool is unharmed.
    assert_eq!(pool.submit(|| 7).unwrap().join().unwrap(), 7);
    pool.shutdown();
}

/// The standard library's keyed hasher, end to end with multi-key tasks: conservation of a
/// total moved between accounts.
#[test]
fn random_state_runs_multi_key_transfers() {
    let pool = Pool::builder().hasher(RandomState::new()).build().unwrap();
    const ACCOUNTS: usize = 16;
    let balances: Arc<Vec<Mutex<i64>>> = Arc::new((0..ACCOUNTS).map(|_| Mutex::new(100)).collect());
    let handles: Vec<_> = (0..2000usize)
        .map(|i| {
            let (from, to) = (i % ACCOUNTS, (i * 7 + 3) % ACCOUNTS);
            let balances = balances.clone();
            pool.submit_keyed([from, to], move || {
                // Both keys held: nobody else touches these two accounts now.
                let amount = (i % 10) as i64;
                *balances[from].try_lock().unwrap() -= amount;
                *balances[to].try_lock().unwrap() += amount;
            })
            .unwrap()
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let total: i64 = balances.iter().map(|b| *b.lock().unwrap()).sum();
    assert_eq!(total, 100 * ACCOUNTS as i64);
    pool.shutdown();
}

/// One hasher (one seed) per pool: a typed lane's `LaneDepth::context_hash` is the key's
/// `Pool::context_hash`, so a user can tell which key is backed up.
#[test]
fn typed_lanes_hash_keys_as_the_pool_does() {
    for pool in [
        Pool::builder().core_threads(1).build().unwrap(),
        Pool::builder()
            .core_threads(1)
            .hasher(RandomState::new())
            .build()
            .unwrap(),
    ] {
        let gate = Gate::new();
        let g = gate.clone();
        let (started, running) = std::sync::mpsc::channel();
        let lanes = pool.typed_lanes(move |_: &u64, _: u32| {
            let _ = started.send(());
            g.wait()
        });
        lanes.send(5, 0).unwrap();
        // The first message runs (and holds the lane): the next nine wait in the lane's queue,
        // not in a chunk its runner took already.
        running.recv().unwrap();
        for m in 1..10 {
            lanes.send(5, m).unwrap();
        }
        let deepest = &pool.stats().largest_lanes;
        assert_eq!(deepest.len(), 1, "{deepest:?}");
        assert_eq!(deepest[0].context_hash, pool.context_hash(&5u64));
        gate.open();
        drop(lanes);
        pool.shutdown();
    }
}
