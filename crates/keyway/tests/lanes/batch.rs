//! Batched submission (`Lane::execute_all`, `Contexts::execute_all`): per-context order and
//! exclusion under contention, the coalescing rule around a batch, refusals handed back in
//! order, exact accounting when a batch races `shutdown` and `shutdown_now`, panics contained.

use crate::common;

use std::hash::{Hash, Hasher};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use common::{hold_workers, Latch};
use keyway::{Pool, SubmitError};

/// Appends `i` to `log` when run.
fn logging(log: &Arc<Mutex<Vec<u64>>>, i: u64) -> impl FnOnce() + Send + 'static + use<> {
    let log = log.clone();
    move || log.lock().unwrap().push(i)
}

/// Per context: the sequence numbers in the order they ran, and a flag that catches two tasks of
/// the context running at once.
#[derive(Default)]
struct Context {
    ran: Mutex<Vec<u64>>,
    busy: AtomicBool,
    overlaps: AtomicU64,
}

impl Context {
    fn task(self: &Arc<Self>, seq: u64) -> impl FnOnce() + Send + 'static + use<> {
        let cx = self.clone();
        move || {
            if cx.busy.swap(true, Ordering::AcqRel) {
                cx.overlaps.fetch_add(1, Ordering::Relaxed);
            }
            cx.ran.lock().unwrap().push(seq);
            std::hint::black_box((0..50).sum::<u64>());
            cx.busy.store(false, Ordering::Release);
        }
    }
}

/// Several producers, each owning some contexts, mix single tasks, batches of every length
/// (empty, one, 64, longer than one internal run) and flushes: every context runs all its tasks
/// in submission order, one at a time.
#[test]
fn batches_keep_per_context_order_and_exclusion_under_contention() {
    let pool = Pool::builder().core_threads(2).build().unwrap();
    let producers = 3u64;
    let contexts_each = 8u64;
    let cxs: Vec<Arc<Context>> = (0..producers * contexts_each)
        .map(|_| Arc::new(Context::default()))
        .collect();
    let sizes = [0usize, 1, 3, 64, 2_500, 7];
    std::thread::scope(|s| {
        for p in 0..producers {
            let (pool, cxs) = (pool.clone(), &cxs);
            s.spawn(move || {
                let contexts = pool.contexts::<u64>();
                let lanes: Vec<_> = (0..contexts_each)
                    .map(|c| pool.lane(p * contexts_each + c))
                    .collect();
                let mut next = vec![1u64; contexts_each as usize];
                for round in 0..40usize {
                    for c in 0..contexts_each as usize {
                        let id = p * contexts_each + c as u64;
                        let cx = &cxs[id as usize];
                        let n = sizes[(round + c) % sizes.len()] as u64;
                        let first = next[c];
                        let batch = (first..first + n).map(|seq| cx.task(seq));
                        if round % 2 == 0 {
                            lanes[c].execute_all(batch).unwrap();
                        } else {
                            contexts.execute_all(id, batch).unwrap();
                        }
                        lanes[c].execute(cx.task(first + n)).unwrap();
                        next[c] = first + n + 1;
                    }
                }
            });
        }
    });
    pool.shutdown();
    for (id, cx) in cxs.iter().enumerate() {
        let ran = cx.ran.lock().unwrap();
        assert_eq!(
            cx.overlaps.load(Ordering::Relaxed),
            0,
            "context {id} overlapped"
        );
        let expected: Vec<u64> = (1..=ran.len() as u64).collect();
        assert!(*ran == expected, "context {id} ran out of order");
        assert!(ran.len() > 2_500, "context {id} ran only {}", ran.len());
    }
}

/// A batch's tasks are sequential: a coalescing task pending before it is not replaced by a
/// later one, and none of the batch is replaced; a coalescing task after the batch replaces only
/// a coalescing task pushed after it.
#[test]
fn a_batch_blocks_coalescing_across_it() {
    let pool = Pool::builder()
        .core_threads(1)
        .max_threads(1)
        .build()
        .unwrap();
    let log = Arc::new(Mutex::new(Vec::new()));
    let lane = pool.lane("gauge");
    let gate = common::Gate::new();
    let started = Latch::new(1);
    {
        let (gate, started) = (gate.clone(), started.clone());
        lane.execute(move || {
            started.count_down();
            gate.wait();
        })
        .unwrap();
    }
    started.wait();
    lane.execute_coalescing(logging(&log, 1)).unwrap();
    lane.execute_all([logging(&log, 2), logging(&log, 3)])
        .unwrap();
    lane.execute_coalescing(logging(&log, 4)).unwrap();
    lane.execute_coalescing(logging(&log, 5)).unwrap(); // replaces 4 only
    gate.open();
    lane.flush().unwrap().join().unwrap();
    assert_eq!(*log.lock().unwrap(), [1, 2, 3, 5]);
    drop(lane);
    pool.shutdown();
}

/// A task of a batch that panics is contained: the rest of the batch runs, in order, and the
/// pool counts one panic.
#[test]
fn a_panic_in_a_batch_is_contained() {
    let pool = Pool::builder().core_threads(1).build().unwrap();
    let log = Arc::new(Mutex::new(Vec::new()));
    let lane = pool.lane(1u8);
    let batch: Vec<Box<dyn FnOnce() + Send>> = (0..10u64)
        .map(|i| -> Box<dyn FnOnce() + Send> {
            if i == 4 {
                Box::new(|| panic!("task 4 fails"))
            } else {
                Box::new(logging(&log, i))
            }
        })
        .collect();
    lane.execute_all(batch).unwrap();
    lane.flush().unwrap().join().unwrap();
    assert_eq!(*log.lock().unwrap(), [0, 1, 2, 3, 5, 6, 7, 8, 9]);
    assert_eq!(pool.stats().panicked_tasks, 1);
    drop(lane);
    pool.shutdown();
}

/// After `shutdown`, the whole batch comes back, in order.
#[test]
fn a_refused_batch_is_handed_back_in_order() {
    let pool = Pool::new().unwrap();
    let lane = pool.lane(3u32);
    pool.shutdown();
    let log = Arc::new(Mutex::new(Vec::new()));
    let err = lane
        .execute_all((0..5).map(|i| logging(&log, i)))
        .unwrap_err();
    assert!(matches!(err, SubmitError::Shutdown(_)));
    for task in err.into_inner() {
        task();
    }
    assert_eq!(*log.lock().unwrap(), [0, 1, 2, 3, 4]);
    let err = pool
        .contexts::<u32>()
        .execute_all(3, (5..7).map(|i| logging(&log, i)))
        .unwrap_err();
    assert_eq!(err.into_inner().len(), 2);
}

/// A pool at its capacity takes the head of a batch and hands back the rest: the refused task
/// and every later one, in order; the accepted ones run.
#[test]
fn a_full_pool_takes_the_head_and_hands_back_the_tail() {
    let pool = Pool::builder()
        .core_threads(1)
        .max_threads(1)
        .capacity(10)
        .build()
        .unwrap();
    let gate = hold_workers(&pool, 1); // one of the 10
    let log = Arc::new(Mutex::new(Vec::new()));
    let back = Arc::new(Mutex::new(Vec::new()));
    let err = pool
        .contexts::<u8>()
        .execute_all(1, (0..15).map(|i| logging(&log, i)))
        .unwrap_err();
    assert!(matches!(err, SubmitError::Full(_)));
    let tail = err.into_inner();
    assert_eq!(tail.len(), 6);
    for task in tail {
        task();
        back.lock().unwrap().extend(log.lock().unwrap().drain(..));
    }
    assert_eq!(*back.lock().unwrap(), [9, 10, 11, 12, 13, 14]);
    gate.open();
    pool.shutdown();
    assert_eq!(*log.lock().unwrap(), [0, 1, 2, 3, 4, 5, 6, 7, 8]);
}

/// Batches racing `shutdown`: every task is either refused and handed back, or ran once.
#[test]
fn batches_racing_shutdown_lose_nothing() {
    for seed in 0..8u64 {
        let pool = Pool::builder().core_threads(2).build().unwrap();
        let ran = Arc::new(AtomicU64::new(0));
        let (accepted, refused) = race(&pool, &ran, seed, || {
            pool.shutdown();
            0
        });
        assert_eq!(ran.load(Ordering::Relaxed), accepted, "seed {seed}");
        assert_eq!(accepted + refused, TOTAL, "seed {seed}");
    }
}

/// Batches racing `shutdown_now`: every accepted task either ran or was handed back by
/// `shutdown_now`, exactly once; every refused one was handed back to its submitter.
#[test]
fn batches_racing_shutdown_now_lose_nothing() {
    for seed in 0..8u64 {
        let pool = Pool::builder().core_threads(2).build().unwrap();
        let ran = Arc::new(AtomicU64::new(0));
        let (accepted, refused) = race(&pool, &ran, seed, || pool.shutdown_now().len() as u64);
        assert_eq!(accepted + refused, TOTAL, "seed {seed}");
        // `race` added what `shutdown_now` handed back to `ran` without running it.
        assert_eq!(ran.load(Ordering::Relaxed), accepted, "seed {seed}");
    }
}

const SUBMITTERS: u64 = 3;
const BATCHES: u64 = 400;
const BATCH: u64 = 64;
const TOTAL: u64 = SUBMITTERS * BATCHES * BATCH;

/// Submitters send batches of `BATCH` tasks (each adds 1 to `ran`) to 13 contexts while `stop`
/// stops the pool after a spin of `seed`; `stop` answers how many tasks it handed back, which
/// are counted into `ran` as if run. Returns (accepted, refused).
fn race(pool: &Pool, ran: &Arc<AtomicU64>, seed: u64, stop: impl FnOnce() -> u64) -> (u64, u64) {
    let accepted = AtomicU64::new(0);
    let refused = AtomicU64::new(0);
    let go = Latch::new(1);
    std::thread::scope(|s| {
        for t in 0..SUBMITTERS {
            let (accepted, refused, go) = (&accepted, &refused, go.clone());
            s.spawn(move || {
                go.wait();
                let contexts = pool.contexts::<u64>();
                for b in 0..BATCHES {
                    let batch = (0..BATCH).map(|_| {
                        let ran = ran.clone();
                        move || {
                            ran.fetch_add(1, Ordering::Relaxed);
                        }
                    });
                    let back = match contexts.execute_all((b + t) % 13, batch) {
                        Ok(()) => 0,
                        Err(e) => e.into_inner().len() as u64,
                    };
                    refused.fetch_add(back, Ordering::Relaxed);
                    accepted.fetch_add(BATCH - back, Ordering::Relaxed);
                }
            });
        }
        go.count_down();
        for _ in 0..(seed * 20_000) {
            std::hint::spin_loop();
        }
        let handed_back = stop();
        ran.fetch_add(handed_back, Ordering::Relaxed);
    });
    (accepted.into_inner(), refused.into_inner())
}

/// The caller's iterator panics halfway: the tasks it gave before are accepted, so they run (the
/// pool's shutdown, which waits for every accepted task, returns), and the panic reaches the
/// caller.
#[test]
fn a_panicking_iterator_leaves_no_accepted_task_behind() {
    let pool = Pool::builder().core_threads(1).build().unwrap();
    let log = Arc::new(Mutex::new(Vec::new()));
    let lane = pool.lane(9u8);
    let caught = catch_unwind(AssertUnwindSafe(|| {
        let tasks = (0..10u64).map(|i| {
            assert!(i < 5, "the source failed");
            logging(&log, i)
        });
        let _ = lane.execute_all(tasks);
    }));
    assert!(caught.is_err());
    drop(lane);
    common::finishes("shutdown after a panicking batch source", move || {
        pool.shutdown()
    });
    assert_eq!(*log.lock().unwrap(), [0, 1, 2, 3, 4]);
}

/// The caller's iterator panics halfway through a batch admitted whole or not at all: none of
/// it is admitted, so none of it runs, and every task it gave is dropped, once.
#[test]
fn a_whole_batch_whose_iterator_panics_drops_every_task_it_gave() {
    let pool = Pool::builder().core_threads(1).build().unwrap();
    let log = Arc::new(Mutex::new(Vec::new()));
    let drops = common::DropCount::default();
    let lane = pool.lane(9u8);
    let caught = catch_unwind(AssertUnwindSafe(|| {
        let tasks = (0..10u64).map(|i| {
            assert!(i < 5, "the source failed");
            let (token, run) = (drops.token(), logging(&log, i));
            move || {
                run();
                drop(token);
            }
        });
        let _ = lane.execute_all_or_none(tasks);
    }));
    assert!(caught.is_err());
    drop(lane);
    common::finishes("shutdown after a panicking whole batch", move || {
        pool.shutdown()
    });
    assert_eq!(drops.live(), 0, "every task the source gave was dropped");
    assert!(log.lock().unwrap().is_empty(), "none of it ran");
}

/// A key whose `Hash` panics: the whole batch comes back, nothing is admitted.
#[test]
fn a_panicking_key_hands_the_batch_back() {
    #[derive(PartialEq, Eq)]
    struct Bad;
    impl Hash for Bad {
        fn hash<H: Hasher>(&self, _: &mut H) {
            panic!("no hash for you")
        }
    }
    let pool = Pool::new().unwrap();
    let log = Arc::new(Mutex::new(Vec::new()));
    let err = pool
        .contexts::<Bad>()
        .execute_all(Bad, (0..4).map(|i| logging(&log, i)))
        .unwrap_err();
    assert!(matches!(err, SubmitError::KeyPanicked(_)));
    assert_eq!(err.into_inner().len(), 4);
    common::finishes("shutdown after a key panic", move || pool.shutdown());
    assert!(log.lock().unwrap().is_empty());
}

/// `execute_all_or_none` on a bounded pool: a batch larger than the room left comes back whole,
/// in order, and none of it runs; one that fits is admitted whole and runs.
#[test]
fn all_or_none_hands_the_whole_batch_back_when_it_does_not_fit() {
    let pool = Pool::builder()
        .core_threads(1)
        .max_threads(1)
        .capacity(10)
        .build()
        .unwrap();
    let gate = hold_workers(&pool, 1); // one of the 10
    let log = Arc::new(Mutex::new(Vec::new()));
    let lane = pool.lane(1u8);
    let err = lane
        .execute_all_or_none((0..10).map(|i| logging(&log, i)))
        .unwrap_err();
    assert!(matches!(err, SubmitError::Full(_)));
    let back = err.into_inner();
    assert_eq!(back.len(), 10, "the whole batch comes back");
    for task in back {
        task();
    }
    assert_eq!(*log.lock().unwrap(), (0..10).collect::<Vec<_>>());
    log.lock().unwrap().clear();
    let err = pool
        .contexts::<u8>()
        .execute_all_or_none(1, (0..11).map(|i| logging(&log, i)))
        .unwrap_err();
    assert_eq!(err.into_inner().len(), 11);
    lane.execute_all_or_none((0..9).map(|i| logging(&log, i)))
        .unwrap();
    gate.open();
    drop(lane);
    pool.shutdown();
    assert_eq!(*log.lock().unwrap(), (0..9).collect::<Vec<_>>());
}

/// Producers race `execute_all_or_none` against a bounded pool: every batch either ran whole
/// or came back whole, never in part.
#[test]
fn all_or_none_batches_racing_for_room_are_never_split() {
    const CAP: usize = 100;
    const SIZE: usize = 24;
    let pool = Pool::builder()
        .core_threads(2)
        .capacity(CAP)
        .build()
        .unwrap();
    let ran: Arc<Vec<AtomicU64>> = Arc::new((0..3 * 300).map(|_| AtomicU64::new(0)).collect());
    let refused = AtomicU64::new(0);
    std::thread::scope(|s| {
        for t in 0..3usize {
            let (pool, ran, refused) = (&pool, &ran, &refused);
            s.spawn(move || {
                let contexts = pool.contexts::<usize>();
                for b in 0..300usize {
                    let id = t * 300 + b;
                    let batch = (0..SIZE).map(|_| {
                        let ran = ran.clone();
                        move || {
                            ran[id].fetch_add(1, Ordering::Relaxed);
                            std::hint::black_box((0..20).sum::<u64>());
                        }
                    });
                    if let Err(e) = contexts.execute_all_or_none(b % 7, batch) {
                        assert!(matches!(e, SubmitError::Full(_)));
                        assert_eq!(e.into_inner().len(), SIZE, "batch {id} split");
                        refused.fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
        }
    });
    pool.shutdown();
    for (id, n) in ran.iter().enumerate() {
        let n = n.load(Ordering::Relaxed);
        assert!(n == 0 || n == SIZE as u64, "batch {id} ran {n} of {SIZE}");
    }
    let whole = ran.iter().filter(|n| n.load(Ordering::Relaxed) > 0).count() as u64;
    assert_eq!(whole + refused.load(Ordering::Relaxed), 900);
    assert!(whole > 0);
}

/// A batch longer than the pool's lane batch does not hold its worker until it is done: another
/// context's task, queued after it on the one worker, runs before the batch ends (the turn's
/// budget counts the batch's tasks, not its one entry).
#[test]
fn a_long_batch_yields_to_other_contexts() {
    let pool = Pool::builder()
        .core_threads(1)
        .max_threads(1)
        .lane_batch(16)
        .build()
        .unwrap();
    let gate = hold_workers(&pool, 1);
    let log = Arc::new(Mutex::new(Vec::new()));
    pool.contexts::<u8>()
        .execute_all(1, (0..1_000).map(|i| logging(&log, i)))
        .unwrap();
    pool.execute_sequential(2u8, logging(&log, u64::MAX))
        .unwrap();
    gate.open();
    pool.shutdown();
    let log = log.lock().unwrap();
    let other = log.iter().position(|&i| i == u64::MAX).unwrap();
    assert!(
        other < 1_000,
        "the other context waited for the whole batch"
    );
    let batch: Vec<u64> = log.iter().copied().filter(|&i| i != u64::MAX).collect();
    assert_eq!(batch, (0..1_000).collect::<Vec<_>>());
}

/// A task of a batch calls `shutdown_now`: the tasks of the batch before it ran, the rest come
/// back from that call, each as a task of its own, in order, and none of them ran on the pool.
#[test]
fn shutdown_now_inside_a_batch_hands_back_each_task_not_started() {
    let pool = Pool::builder()
        .core_threads(1)
        .max_threads(1)
        .build()
        .unwrap();
    let log = Arc::new(Mutex::new(Vec::new()));
    let back = Arc::new(Mutex::new(Vec::new()));
    let done = Latch::new(1);
    let lane = pool.lane(5u8);
    let batch: Vec<Box<dyn FnOnce() + Send>> = (0..10u64)
        .map(|i| -> Box<dyn FnOnce() + Send> {
            if i == 3 {
                let (pool, back, done, log) =
                    (pool.clone(), back.clone(), done.clone(), log.clone());
                Box::new(move || {
                    log.lock().unwrap().push(3);
                    back.lock().unwrap().extend(pool.shutdown_now());
                    done.count_down();
                })
            } else {
                Box::new(logging(&log, i))
            }
        })
        .collect();
    lane.execute_all(batch).unwrap();
    done.wait();
    let back = std::mem::take(&mut *back.lock().unwrap());
    assert_eq!(*log.lock().unwrap(), [0, 1, 2, 3]);
    assert_eq!(back.len(), 6, "each task not started, on its own");
    for task in back {
        assert_eq!(task.context::<u8>(), Some(&5));
        task.run().unwrap();
    }
    assert_eq!(*log.lock().unwrap(), (0..10).collect::<Vec<_>>());
    drop(lane);
    common::finishes("shutdown after shutdown_now", move || pool.shutdown());
}

/// Tasks of a batch whose captures panic as they are dropped — after running, or unrun when
/// `shutdown_now` hands them back and the caller drops them — stop no other task of the batch.
#[test]
fn a_panicking_drop_in_a_batch_stops_no_other_task() {
    let pool = Pool::builder().core_threads(1).build().unwrap();
    let log = Arc::new(Mutex::new(Vec::new()));
    let lane = pool.lane(2u8);
    let batch: Vec<Box<dyn FnOnce() + Send>> = (0..10u64)
        .map(|i| -> Box<dyn FnOnce() + Send> {
            let task = logging(&log, i);
            if i % 3 == 1 {
                let bomb = common::PanicOnDrop;
                Box::new(move || {
                    task();
                    let _bomb = bomb;
                })
            } else {
                Box::new(task)
            }
        })
        .collect();
    lane.execute_all(batch).unwrap();
    lane.flush().unwrap().join().unwrap();
    assert_eq!(*log.lock().unwrap(), (0..10).collect::<Vec<_>>());
    assert_eq!(pool.stats().panicked_tasks, 3);
    // Unrun: a held worker, a batch of bombs, `shutdown_now`, the hand-back dropped.
    let gate = hold_workers(&pool, 1);
    let drops = common::DropCount::default();
    let batch: Vec<_> = (0..6)
        .map(|_| {
            let (bomb, token) = (common::PanicOnDrop, drops.token());
            move || drop((bomb, token))
        })
        .collect();
    lane.execute_all(batch).unwrap();
    let back = common::shutdown_now_while_held(&pool, &gate);
    assert_eq!(back.len(), 6);
    for task in back {
        let _ = catch_unwind(AssertUnwindSafe(move || drop(task)));
    }
    assert_eq!(drops.live(), 0, "every capture was dropped");
    drop(lane);
}

/// `TypedLane::send_all` mixed with single sends from several producers: each key's messages
/// are handled in the order sent, one at a time; a full pool takes the head of a batch and hands
/// back the rest, in order, and `send_all_or_none` hands back the whole batch.
#[test]
fn typed_batches_keep_order_and_hand_back_what_is_refused() {
    let pool = Pool::builder().core_threads(2).build().unwrap();
    let cxs: Vec<Arc<Context>> = (0..6).map(|_| Arc::new(Context::default())).collect();
    let handler_cxs = cxs.clone();
    let lanes = pool.typed_lanes(move |key: &usize, seq: u64| handler_cxs[*key].task(seq)());
    std::thread::scope(|s| {
        for p in 0..3usize {
            let lanes = &lanes;
            s.spawn(move || {
                let mine = [lanes.lane(2 * p), lanes.lane(2 * p + 1)];
                let mut next = [1u64, 1];
                for round in 0..200u64 {
                    for (c, lane) in mine.iter().enumerate() {
                        let n = [0, 1, 5, 64, 1_100][(round as usize + c) % 5];
                        lane.send_all(next[c]..next[c] + n).unwrap();
                        lane.send(next[c] + n).unwrap();
                        next[c] += n + 1;
                    }
                }
            });
        }
    });
    pool.shutdown();
    for (id, cx) in cxs.iter().enumerate() {
        assert_eq!(
            cx.overlaps.load(Ordering::Relaxed),
            0,
            "key {id} overlapped"
        );
        let ran = cx.ran.lock().unwrap();
        assert!(
            *ran == (1..=ran.len() as u64).collect::<Vec<_>>(),
            "key {id} out of order"
        );
        assert_eq!(ran.len(), 40 * (1 + 5 + 64 + 1_100) + 200, "key {id}");
    }

    let pool = Pool::builder()
        .core_threads(1)
        .max_threads(1)
        .capacity(10)
        .build()
        .unwrap();
    let gate = hold_workers(&pool, 1);
    let log = Arc::new(Mutex::new(Vec::new()));
    let sink = log.clone();
    let lanes = pool.typed_lanes(move |_: &u8, n: u64| sink.lock().unwrap().push(n));
    let lane = lanes.lane(1);
    let err = lane.send_all_or_none(0..10).unwrap_err();
    assert!(matches!(err, SubmitError::Full(_)));
    assert_eq!(err.into_inner(), (0..10).collect::<Vec<_>>());
    let err = lane.send_all(0..15).unwrap_err();
    assert!(matches!(err, SubmitError::Full(_)));
    assert_eq!(err.into_inner(), (9..15).collect::<Vec<_>>());
    gate.open();
    pool.shutdown();
    assert_eq!(*log.lock().unwrap(), (0..9).collect::<Vec<_>>());
    drop(lane);
    let err = lanes.lane(2).send_all([1, 2]).unwrap_err();
    assert!(matches!(err, SubmitError::Shutdown(_)));
    assert_eq!(err.into_inner(), [1, 2]);
}

/// A lane keeps the buffer of the batch it finished for its next batch: batches of every size
/// and of several closure types, one after another on one lane (a batch shorter than the buffer
/// it reuses, one longer, one of another type, zero-sized closures, an iterator without a size
/// hint), some queued while others wait, run every task once, in order, and drop every capture
/// once; so does a batch handed back by `shutdown_now` from a reused buffer.
#[test]
fn batches_reusing_their_lane_s_buffer_run_and_drop_each_task_once() {
    let pool = Pool::builder()
        .core_threads(1)
        .max_threads(1)
        .build()
        .unwrap();
    let lane = pool.lane(9u8);
    let log = Arc::new(Mutex::new(Vec::new()));
    let drops = common::DropCount::default();
    let next = std::cell::Cell::new(0u64);
    let seqs = |n: u64| {
        let first = next.get();
        next.set(first + n);
        first..first + n
    };
    let counted = |i: u64| {
        let (task, token) = (logging(&log, i), drops.token());
        move || {
            task();
            drop(token);
        }
    };
    let sizes = [64, 3, 64, 1, 1_000, 2, 64];
    for (round, &n) in sizes.iter().enumerate() {
        // Every other round, the batch waits behind a held worker (the lane's buffer is taken
        // by the batch before it has run) and a second batch follows it.
        let gate = (round % 2 == 1).then(|| hold_workers(&pool, 1));
        lane.execute_all(seqs(n).map(counted)).unwrap();
        if gate.is_some() {
            lane.execute_all(seqs(5).map(counted)).unwrap();
        }
        // Another type, boxed (16 bytes a task), and an iterator with no size hint.
        let boxed: Vec<Box<dyn FnOnce() + Send>> = seqs(4)
            .map(|i| Box::new(counted(i)) as Box<dyn FnOnce() + Send>)
            .collect();
        lane.execute_all(boxed).unwrap();
        lane.execute_all(seqs(40).filter(|_| true).map(counted))
            .unwrap();
        // Zero-sized closures: no buffer at all.
        lane.execute_all((0..7).map(|_| || ())).unwrap();
        if let Some(gate) = gate {
            gate.open();
        }
        lane.flush().unwrap().join().unwrap();
    }
    assert_eq!(*log.lock().unwrap(), (0..next.get()).collect::<Vec<_>>());
    assert_eq!(drops.live(), 0, "a capture was not dropped");
    // Handed back from a reused buffer: the lane's buffer holds 64 slots, the batch 10.
    let gate = hold_workers(&pool, 1);
    lane.execute_all(seqs(10).map(counted)).unwrap();
    let back = common::shutdown_now_while_held(&pool, &gate);
    assert_eq!(back.len(), 10, "each task not started, on its own");
    let first = next.get() - 10;
    for task in back {
        task.run().unwrap();
    }
    assert_eq!(
        log.lock().unwrap()[first as usize..],
        (first..next.get()).collect::<Vec<_>>()
    );
    assert_eq!(drops.live(), 0, "a handed-back capture was not dropped");
    drop(lane);
}
