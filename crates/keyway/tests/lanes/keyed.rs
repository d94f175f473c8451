//! Multi-key tasks: exclusion and order per key, no deadlock, and a
//! waiting task holds no thread.

use crate::common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use common::{Gate, Latch, HANG};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

const KEYS: usize = 64;

struct Check {
    busy: Vec<AtomicBool>,
    /// Per key and submitter: the last sequence number run.
    last: Vec<Vec<AtomicU64>>,
    overlaps: AtomicU64,
    disorders: AtomicU64,
    ran: AtomicU64,
}

impl Check {
    fn new(submitters: usize) -> Arc<Self> {
        Arc::new(Check {
            busy: (0..KEYS).map(|_| AtomicBool::new(false)).collect(),
            last: (0..KEYS)
                .map(|_| (0..submitters).map(|_| AtomicU64::new(0)).collect())
                .collect(),
            overlaps: AtomicU64::new(0),
            disorders: AtomicU64::new(0),
            ran: AtomicU64::new(0),
        })
    }

    fn task(&self, keys: &[usize], submitter: usize, seq: u64, work: u32) {
        for &k in keys {
            if self.busy[k].swap(true, Ordering::AcqRel) {
                self.overlaps.fetch_add(1, Ordering::Relaxed);
            }
            let last = &self.last[k][submitter];
            if last.load(Ordering::Relaxed) >= seq {
                self.disorders.fetch_add(1, Ordering::Relaxed);
            }
            last.store(seq, Ordering::Relaxed);
        }
        common::spin(work);
        for &k in keys {
            self.busy[k].store(false, Ordering::Release);
        }
        self.ran.fetch_add(1, Ordering::Relaxed);
    }
}

fn run(seed: u64, threads: usize, submitters: usize, tasks: u64) {
    let pool = keyway::Pool::builder()
        .core_threads(threads)
        .lane_batch(1 + seed as usize % 8)
        .build()
        .unwrap();
    let check = Check::new(submitters);
    let start = Arc::new(std::sync::Barrier::new(submitters));
    let producers: Vec<_> = (0..submitters)
        .map(|s| {
            let (pool, check, start) = (pool.clone(), check.clone(), start.clone());
            std::thread::spawn(move || {
                let mut rng = SmallRng::seed_from_u64(seed * 1_000 + s as u64);
                start.wait();
                for seq in 1..=tasks / submitters as u64 {
                    let n = rng.gen_range(1..=4);
                    let keys: Vec<usize> = (0..n).map(|_| rng.gen_range(0..KEYS)).collect();
                    let work = rng.gen_range(0..30);
                    let c = check.clone();
                    let mine = keys.clone();
                    let mut distinct = mine.clone();
                    distinct.sort_unstable();
                    distinct.dedup();
                    pool.execute_keyed(keys, move || c.task(&distinct, s, seq, work))
                        .unwrap();
                    drop(mine);
                }
            })
        })
        .collect();
    for p in producers {
        p.join().unwrap();
    }
    // A hang here is a deadlock: the whole run must finish.
    let done = Latch::new(1);
    let d = done.clone();
    let waiter = std::thread::spawn(move || {
        pool.shutdown();
        d.count_down();
    });
    assert!(done.wait_for(HANG), "seed {seed}: keyed tasks deadlocked");
    waiter.join().unwrap();
    let expected = (tasks / submitters as u64) * submitters as u64;
    assert_eq!(
        check.overlaps.load(Ordering::SeqCst),
        0,
        "seed {seed}: tasks sharing a key overlapped"
    );
    assert_eq!(
        check.disorders.load(Ordering::SeqCst),
        0,
        "seed {seed}: a key ran tasks out of submission order"
    );
    assert_eq!(
        check.ran.load(Ordering::SeqCst),
        expected,
        "seed {seed}: tasks missing"
    );
}

/// The reference workload: 4 threads submit 200,000 tasks over random sets of 1–4 keys of 64.
#[test]
fn four_submitters_two_hundred_thousand_tasks() {
    run(0, 2, 4, 200_000);
}

/// Many seeds (100 per run), pool sizes and batch sizes, smaller each.
#[test]
fn many_seeds_never_deadlock_or_disorder() {
    for seed in 1..=100u64 {
        run(seed, 1 + seed as usize % 4, 2 + seed as usize % 3, 2_400);
    }
}

/// A task waiting on a busy key holds no worker: with 2 threads and no auxiliary thread allowed,
/// 1,000 tasks waiting for a key held by a sleeping task do not stop tasks on other keys.
#[test]
fn waiting_tasks_hold_no_thread() {
    let pool = common::fixed_pool(2);
    let gate = Gate::new();
    let held = Latch::new(1);
    let holder = pool
        .submit_keyed(["hot".to_string()], common::held_task(&gate, &held))
        .unwrap();
    held.wait();
    let waited = Arc::new(AtomicU64::new(0));
    for i in 0..1_000 {
        let w = waited.clone();
        let other = format!("side-{}", i % 50);
        pool.execute_keyed(["hot".to_string(), other], move || {
            w.fetch_add(1, Ordering::Relaxed);
        })
        .unwrap();
    }
    let free = Latch::new(500);
    for i in 0..500 {
        let f = free.clone();
        pool.execute_keyed(
            [format!("cold-{i}"), format!("cold-{}", i + 1)],
            move || f.count_down(),
        )
        .unwrap();
    }
    free.wait(); // would hang if the waiting tasks occupied the free worker
    assert_eq!(
        waited.load(Ordering::Relaxed),
        0,
        "a task ran while its key was held"
    );
    gate.open();
    assert!(
        holder.join().unwrap(),
        "the holder was released by its timeout"
    );
    pool.shutdown();
    assert_eq!(waited.load(Ordering::Relaxed), 1_000);
}

/// `shutdown_now` hands back each parked multi-key task exactly once.
#[test]
fn shutdown_now_hands_back_multi_key_tasks_once() {
    let pool = common::fixed_pool(1);
    let gate = Gate::new();
    let held = Latch::new(1);
    let task = common::held_task(&gate, &held);
    pool.execute_keyed([0u32], move || {
        task();
    })
    .unwrap();
    held.wait();
    let ran = Arc::new(AtomicU64::new(0));
    for i in 0..300u32 {
        let r = ran.clone();
        pool.execute_keyed([0, 1 + i % 5, 10 + i % 3], move || {
            r.fetch_add(1, Ordering::Relaxed);
        })
        .unwrap();
    }
    let pending = common::shutdown_now_while_held(&pool, &gate);
    assert_eq!(pending.len(), 300);
    for t in pending {
        t.run().unwrap();
    }
    assert_eq!(ran.load(Ordering::Relaxed), 300);
}
