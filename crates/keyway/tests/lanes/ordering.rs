//! Per-context order and mutual exclusion under contention.

use crate::common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// What each context's tasks check: no overlap (flag), and per-submitter order (last seq).
struct Checker {
    running: Vec<AtomicBool>,
    last: Vec<Vec<AtomicU64>>, // [context][submitter]
    overlaps: AtomicU64,
    disorders: AtomicU64,
    ran: AtomicU64,
}

impl Checker {
    fn new(contexts: usize, submitters: usize) -> Arc<Self> {
        Arc::new(Checker {
            running: (0..contexts).map(|_| AtomicBool::new(false)).collect(),
            last: (0..contexts)
                .map(|_| (0..submitters).map(|_| AtomicU64::new(0)).collect())
                .collect(),
            overlaps: AtomicU64::new(0),
            disorders: AtomicU64::new(0),
            ran: AtomicU64::new(0),
        })
    }

    /// The body of every task: enter the context, check order, work, leave.
    fn task(&self, ctx: usize, submitter: usize, seq: u64, work: u32) {
        if self.running[ctx].swap(true, Ordering::AcqRel) {
            self.overlaps.fetch_add(1, Ordering::Relaxed);
        }
        let last = &self.last[ctx][submitter];
        if last.load(Ordering::Relaxed) + 1 != seq {
            self.disorders.fetch_add(1, Ordering::Relaxed);
        }
        last.store(seq, Ordering::Relaxed);
        common::spin(work);
        self.ran.fetch_add(1, Ordering::Relaxed);
        self.running[ctx].store(false, Ordering::Release);
    }

    fn assert_clean(&self, expected: u64) {
        assert_eq!(
            self.overlaps.load(Ordering::SeqCst),
            0,
            "tasks of one context overlapped"
        );
        assert_eq!(
            self.disorders.load(Ordering::SeqCst),
            0,
            "a context ran tasks out of order"
        );
        assert_eq!(self.ran.load(Ordering::SeqCst), expected, "tasks missing");
    }
}

/// How the submitters reach the lanes.
#[derive(Clone, Copy, Debug)]
enum Via {
    Pool,
    LaneHandle,
    Typed,
}

fn run(
    seed: u64,
    threads: usize,
    batch: usize,
    submitters: usize,
    contexts: usize,
    per_ctx: u64,
    via: Via,
) {
    let pool = keyway::Pool::builder()
        .core_threads(threads)
        .lane_batch(batch)
        .build()
        .unwrap();
    let checker = Checker::new(contexts, submitters);
    let typed = {
        let checker = checker.clone();
        pool.typed_lanes(
            move |ctx: &usize, (submitter, seq, work): (usize, u64, u32)| {
                checker.task(*ctx, submitter, seq, work)
            },
        )
    };
    let start = Arc::new(std::sync::Barrier::new(submitters));
    let producers: Vec<_> = (0..submitters)
        .map(|s| {
            let (pool, checker, start, typed) =
                (pool.clone(), checker.clone(), start.clone(), typed.clone());
            std::thread::spawn(move || {
                let mut rng = SmallRng::seed_from_u64(seed ^ (s as u64 * 0x9E37));
                let lanes: Vec<_> = (0..contexts).map(|c| pool.lane(c)).collect();
                let mut seq = vec![0u64; contexts];
                let submit = |ctx: usize, n: u64, work: u32| {
                    let c = checker.clone();
                    match via {
                        Via::Pool => pool
                            .execute_sequential(ctx, move || c.task(ctx, s, n, work))
                            .unwrap(),
                        Via::LaneHandle => {
                            lanes[ctx].execute(move || c.task(ctx, s, n, work)).unwrap()
                        }
                        Via::Typed => typed.send(ctx, (s, n, work)).unwrap(),
                    }
                };
                start.wait();
                for _ in 0..per_ctx * contexts as u64 {
                    let ctx = rng.gen_range(0..contexts);
                    if seq[ctx] < per_ctx {
                        seq[ctx] += 1;
                        submit(ctx, seq[ctx], rng.gen_range(0..40));
                    }
                }
                // Whatever the random walk skipped, in order.
                for (ctx, n) in seq.iter_mut().enumerate() {
                    while *n < per_ctx {
                        *n += 1;
                        submit(ctx, *n, 1);
                    }
                }
            })
        })
        .collect();
    for p in producers {
        p.join().unwrap();
    }
    drop(typed);
    pool.shutdown();
    checker.assert_clean(submitters as u64 * contexts as u64 * per_ctx);
}

/// The reference workload: 8 submitting threads × 100 contexts × 10,000 tasks per context and
/// submitter (8,000,000 tasks).
#[test]
fn eight_submitters_hundred_contexts_ten_thousand_each() {
    run(1, 2, 32, 8, 100, 10_000, Via::Pool);
}

/// Many seeds (100 per run), pool sizes, batch sizes and submission paths, smaller each.
#[test]
fn many_seeds_sizes_and_paths() {
    for seed in 0..100u64 {
        let threads = [1, 2, 3, 4][seed as usize % 4];
        let batch = [1, 3, 32][seed as usize % 3];
        let via = [Via::Pool, Via::LaneHandle, Via::Typed][(seed / 4) as usize % 3];
        run(seed, threads, batch, 4, 16, 240, via);
    }
}

/// Happens-before order across threads: a task submitted after another submission returned,
/// on another thread, runs after it.
#[test]
fn order_follows_happens_before_across_threads() {
    let pool = keyway::Pool::builder().core_threads(2).build().unwrap();
    let log = Arc::new(std::sync::Mutex::new(Vec::new()));
    for round in 0..200u32 {
        let (tx, rx) = std::sync::mpsc::channel();
        let p = pool.clone();
        let l = log.clone();
        std::thread::spawn(move || {
            p.execute_sequential("ctx", move || l.lock().unwrap().push(2 * round))
                .unwrap();
            tx.send(()).unwrap();
        });
        rx.recv().unwrap(); // the other thread's submission returned
        let l = log.clone();
        pool.execute_sequential("ctx", move || l.lock().unwrap().push(2 * round + 1))
            .unwrap();
    }
    pool.shutdown();
    assert_eq!(*log.lock().unwrap(), (0..400).collect::<Vec<_>>());
}
