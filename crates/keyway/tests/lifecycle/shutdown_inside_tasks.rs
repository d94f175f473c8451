//! `shutdown_now` (and `shutdown`) called from inside the pool's own tasks: from a plain task, a
//! reserved thread, a lane task, a typed lane's handler and a multi-key task, alone and from many
//! callers at once. Each call returns (no self-join), hands back every unstarted task exactly
//! once, and leaves the calling worker alive. A hang is a failure (`finishes`).

use crate::common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::mpsc::channel;
use std::sync::{Arc, Barrier, Mutex};

use common::{eventually, finishes, fixed_pool, Gate, Latch, HANG};
use keyway::{PendingTask, Pool};

/// `shutdown_now` from a plain task on a worker returns (it does not wait for its own thread)
/// and hands back the tasks queued behind it.
#[test]
fn shutdown_now_from_a_plain_task_returns() {
    finishes("shutdown_now from a task", || {
        let pool = common::fixed_pool(2);
        let gate = Gate::new();
        let started = Latch::new(1);
        let (tx, rx) = channel();
        let p = pool.clone();
        let task = common::held_task(&gate, &started);
        pool.execute(move || {
            task();
            tx.send(p.shutdown_now()).unwrap();
        })
        .unwrap();
        started.wait();
        let other = common::hold_workers(&pool, 1);
        let ran = Arc::new(AtomicUsize::new(0));
        for _ in 0..10 {
            let r = ran.clone();
            pool.execute(move || {
                r.fetch_add(1, Ordering::SeqCst);
            })
            .unwrap();
        }
        gate.open();
        other.open();
        let back = rx
            .recv_timeout(HANG)
            .expect("shutdown_now inside a task hung");
        assert_eq!(back.len() + ran.load(Ordering::SeqCst), 10);
        drop(back);
    });
}

/// `shutdown_now` from a task on a reserved thread returns.
#[test]
fn shutdown_now_from_a_reserved_thread_returns() {
    finishes("shutdown_now from a reserved thread", || {
        let pool = Pool::builder()
            .core_threads(1)
            .reserved_threads(1)
            .build()
            .unwrap();
        common::reserved_ready(&pool);
        let (tx, rx) = channel();
        let p = pool.clone();
        let mut task: Box<dyn FnOnce() + Send> = Box::new(move || {
            tx.send(p.shutdown_now().len()).unwrap();
        });
        while let Err(e) = pool.try_execute(task) {
            task = e.into_inner();
            std::thread::yield_now();
        }
        rx.recv_timeout(HANG)
            .expect("shutdown_now on a reserved thread hung");
    });
}

/// Several `shutdown_now` callers at once — two workers, a reserved thread and an outside
/// thread: each returns, and every unstarted task is handed back exactly once overall.
#[test]
fn concurrent_shutdown_now_callers_each_return_and_hand_back_once() {
    for seed in 0..5 {
        finishes("concurrent shutdown_now", move || {
            let pool = Pool::builder()
                .core_threads(2)
                .max_threads(2)
                .reserved_threads(1)
                .build()
                .unwrap();
            common::reserved_ready(&pool);
            let callers = 4;
            let barrier = Arc::new(Barrier::new(callers));
            let results: Arc<Mutex<Vec<Vec<PendingTask>>>> = Arc::default();
            let started = Latch::new(2);
            // Two workers, each in a task that calls shutdown_now.
            for _ in 0..2 {
                let (p, b, r, s) = (
                    pool.clone(),
                    barrier.clone(),
                    results.clone(),
                    started.clone(),
                );
                pool.execute(move || {
                    s.count_down();
                    b.wait();
                    let back = p.shutdown_now();
                    r.lock().unwrap().push(back);
                })
                .unwrap();
            }
            started.wait();
            // Queued behind them: each must be run or handed back, exactly once.
            let ran = Arc::new(AtomicUsize::new(0));
            let accepted = 50 + seed * 7;
            for i in 0..accepted {
                let r = ran.clone();
                let task = move || {
                    r.fetch_add(1, Ordering::SeqCst);
                };
                if i % 2 == 0 {
                    pool.execute(task).unwrap();
                } else {
                    pool.execute_sequential(i % 3, task).unwrap();
                }
            }
            // A reserved thread.
            let (p, b, r) = (pool.clone(), barrier.clone(), results.clone());
            let mut task: Box<dyn FnOnce() + Send> = Box::new(move || {
                b.wait();
                let back = p.shutdown_now();
                r.lock().unwrap().push(back);
            });
            while let Err(e) = pool.try_execute(task) {
                task = e.into_inner();
                std::thread::yield_now();
            }
            // An outside thread.
            barrier.wait();
            let back = pool.shutdown_now();
            eventually("every caller returned", || {
                results.lock().unwrap().len() == 3
            });
            let mut all: Vec<PendingTask> = back;
            for v in results.lock().unwrap().drain(..) {
                all.extend(v);
            }
            let handed_back = all.len();
            for t in all {
                t.run().unwrap();
            }
            // Run or handed back (and then run here): each exactly once.
            assert_eq!(ran.load(Ordering::SeqCst), accepted, "seed {seed}");
            assert!(handed_back <= accepted);
        });
    }
}

/// A task that calls `shutdown_now` on its own pool and sends out what it handed back.
fn stopper(
    pool: &Pool,
    out: mpsc::Sender<Vec<keyway::PendingTask>>,
) -> impl FnOnce() + Send + use<> {
    let pool = pool.clone();
    move || {
        let _ = out.send(pool.shutdown_now());
    }
}

#[test]
fn shutdown_now_inside_a_lane_task_hands_back_the_runners_chunk() {
    let pool = fixed_pool(1);
    let gate = Gate::new();
    let g = gate.clone();
    let log = Arc::new(Mutex::new(Vec::new()));
    let (tx, rx) = mpsc::channel();
    // All queued before the runner takes its first chunk: [gate, stopper, 1, 2, …] — most of
    // them in the runner's hands when the stopper runs.
    pool.execute_sequential("ctx", move || g.wait()).unwrap();
    pool.execute_sequential("ctx", stopper(&pool, tx)).unwrap();
    for i in 1..=40 {
        let log = log.clone();
        pool.execute_sequential("ctx", move || log.lock().unwrap().push(i))
            .unwrap();
    }
    gate.open();
    let back = rx
        .recv_timeout(HANG)
        .expect("hang: shutdown_now inside a lane task never returned");
    assert_eq!(back.len(), 40, "every unstarted task handed back once");
    assert!(log.lock().unwrap().is_empty(), "none of them ran");
    for task in back {
        task.run().unwrap();
    }
    assert_eq!(
        *log.lock().unwrap(),
        (1..=40).collect::<Vec<_>>(),
        "in lane order"
    );
    finishes("shutdown after shutdown_now", move || pool.shutdown());
}

#[test]
fn shutdown_now_inside_a_typed_lane_handler() {
    let pool = fixed_pool(1);
    let gate = Gate::new();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (tx, rx) = mpsc::channel();
    let (p, g, s) = (pool.clone(), gate.clone(), seen.clone());
    let lanes = pool.typed_lanes(move |_: &u8, m: u32| match m {
        0 => g.wait(),
        1 => {
            let _ = tx.send(p.shutdown_now());
        }
        m => s.lock().unwrap().push(m),
    });
    for m in 0..30 {
        lanes.send(7, m).unwrap();
    }
    gate.open();
    let back = rx
        .recv_timeout(HANG)
        .expect("hang: shutdown_now in a handler");
    assert_eq!(back.len(), 28);
    for task in back {
        task.run().unwrap();
    }
    assert_eq!(*seen.lock().unwrap(), (2..30).collect::<Vec<_>>());
    drop(lanes);
    finishes("shutdown", move || pool.shutdown());
}

#[test]
fn shutdown_now_inside_a_multi_key_task_leaves_the_worker_alive() {
    let pool = fixed_pool(1);
    let gate = Gate::new();
    let g = gate.clone();
    let (tx, rx) = mpsc::channel();
    let ran = Arc::new(Mutex::new(Vec::new()));
    pool.execute_keyed(["a", "b"], move || g.wait()).unwrap();
    pool.execute_keyed(["a", "b"], stopper(&pool, tx)).unwrap();
    for (i, keys) in [vec!["a"], vec!["b"], vec!["a", "b"], vec!["b", "c"]]
        .into_iter()
        .enumerate()
    {
        let ran = ran.clone();
        pool.execute_keyed(keys, move || ran.lock().unwrap().push(i))
            .unwrap();
    }
    gate.open();
    let back = rx
        .recv_timeout(HANG)
        .expect("hang: shutdown_now in a multi-key task");
    assert_eq!(back.len(), 4, "each waiting task handed back once");
    for task in back {
        task.run().unwrap();
    }
    let mut ran = ran.lock().unwrap().clone();
    ran.sort();
    assert_eq!(ran, vec![0, 1, 2, 3]);
    // The worker survived the task's completion (it used to pop the drained lanes and die).
    finishes("shutdown after shutdown_now", move || pool.shutdown());
}

/// Two lane tasks on two workers call `shutdown_now` at once; the first one's runner holds the
/// rest of its chunk. Each caller puts its runner's chunk back before it waits for the others:
/// once another caller is draining, the lane may already have left the table, and a chunk put
/// back into it then would never be handed back (`shutdown_now` waited for ever for that
/// admission; found by the `pool_mixed` fuzz target, about one run in three).
#[test]
fn concurrent_shutdown_now_in_lane_tasks_hands_back_every_held_chunk() {
    for round in 0..300 {
        let pool = fixed_pool(2);
        // Both workers held at a gate while the lanes fill, so each lane's runner takes its
        // whole queue as one chunk.
        let (gate, started) = (Gate::new(), common::Latch::new(2));
        for _ in 0..2 {
            let (g, s) = (gate.clone(), started.clone());
            pool.execute(move || {
                s.count_down();
                g.wait();
            })
            .unwrap();
        }
        started.wait();
        let both_in = Arc::new(std::sync::Barrier::new(2));
        let ran = Arc::new(AtomicUsize::new(0));
        let (tx, rx) = mpsc::channel();
        for ctx in ["held", "other"] {
            let (p, b, tx) = (pool.clone(), both_in.clone(), tx.clone());
            pool.execute_sequential(ctx, move || {
                b.wait();
                let _ = tx.send(p.shutdown_now());
            })
            .unwrap();
        }
        // Behind the stopper of "held", in its runner's chunk.
        for _ in 0..3 {
            let ran = ran.clone();
            pool.execute_sequential("held", move || {
                ran.fetch_add(1, Ordering::SeqCst);
            })
            .unwrap();
        }
        gate.open();
        let mut back = Vec::new();
        for _ in 0..2 {
            back.extend(rx.recv_timeout(HANG).unwrap_or_else(|_| {
                panic!("hang in round {round}: concurrent shutdown_now in lane tasks")
            }));
        }
        assert_eq!(back.len() + ran.load(Ordering::SeqCst), 3, "round {round}");
        for task in back {
            task.run().unwrap();
        }
        assert_eq!(ran.load(Ordering::SeqCst), 3, "round {round}");
        finishes("shutdown after shutdown_now", move || pool.shutdown());
    }
}
