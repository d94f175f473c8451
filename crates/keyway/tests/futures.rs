//! Futures on keyway lanes: per-context order across awaits, panics and cancellation
//! release the context, no busy polling, multi-key futures, shutdown, tokio timers and sockets.
//!
//! The tests run one at a time (`SERIAL`): one of them measures the process's CPU time. For the
//! same reason this is a test binary of its own: tests of other files running beside it in the
//! same process would spend CPU time it counts.

mod common;

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use common::{fixed_pool, DropCount, Gate, Latch, HANG};
use keyway::{yield_now, Pool, TaskError};
use rand::{rngs::SmallRng, Rng, SeedableRng};

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap()
}

/// A tokio sleep made in `rt`'s context, awaitable from a keyway worker.
fn sleep(rt: &tokio::runtime::Handle, d: Duration) -> tokio::time::Sleep {
    let _enter = rt.enter();
    tokio::time::sleep(d)
}

/// Polls a future inside a tokio runtime's context (what tokio's I/O types need to register
/// with its reactor), wherever it is polled: here, on a keyway worker.
struct InRuntime<F> {
    rt: tokio::runtime::Handle,
    fut: Pin<Box<F>>,
}

impl<F: Future> Future for InRuntime<F> {
    type Output = F::Output;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let _enter = self.rt.enter();
        self.fut.as_mut().poll(cx)
    }
}

/// Per-context checker: strict submission order and no overlap, across awaits.
struct Checker {
    inside: AtomicBool,
    next: AtomicUsize,
}

/// 100 contexts x 1,000 futures, each awaiting a random short wait (a yield, a
/// wake-up from the tokio runtime's thread, or a tokio timer), over 20 seeds.
#[test]
fn per_context_order_holds_across_awaits() {
    let _s = serial();
    let rt = runtime();
    const CONTEXTS: usize = 100;
    const PER: usize = 1_000;
    for seed in 0..20u64 {
        let pool = Pool::builder().core_threads(2).build().unwrap();
        let checkers: Arc<Vec<Checker>> = Arc::new(
            (0..CONTEXTS)
                .map(|_| Checker {
                    inside: AtomicBool::new(false),
                    next: AtomicUsize::new(0),
                })
                .collect(),
        );
        let violations = Arc::new(AtomicUsize::new(0));
        let mut rng = SmallRng::seed_from_u64(seed);
        for i in 0..PER {
            for ctx in 0..CONTEXTS {
                let (checkers, violations) = (checkers.clone(), violations.clone());
                let wait = rng.gen_range(0..100u32);
                let rt = rt.handle().clone();
                let fut = async move {
                    let c = &checkers[ctx];
                    if c.inside.swap(true, Ordering::SeqCst) {
                        violations.fetch_add(1, Ordering::SeqCst); // overlap
                    }
                    if c.next.load(Ordering::SeqCst) != i {
                        violations.fetch_add(1, Ordering::SeqCst); // out of order
                    }
                    match wait {
                        0..=69 => {
                            for _ in 0..=wait % 3 {
                                yield_now().await;
                            }
                        }
                        70..=97 => {
                            let (tx, rx) = tokio::sync::oneshot::channel();
                            rt.spawn(async move { tx.send(()).unwrap() });
                            rx.await.unwrap();
                        }
                        _ => sleep(&rt, Duration::from_micros(u64::from(wait) * 5)).await,
                    }
                    if !c.inside.load(Ordering::SeqCst) {
                        violations.fetch_add(1, Ordering::SeqCst); // someone cleared it: overlap
                    }
                    c.next.store(i + 1, Ordering::SeqCst);
                    c.inside.store(false, Ordering::SeqCst);
                };
                // Half the contexts through a `Lane` handle, half by key.
                let h = pool.spawn_sequential(ctx, fut).unwrap();
                drop(h);
            }
        }
        pool.shutdown();
        assert_eq!(violations.load(Ordering::SeqCst), 0, "seed {seed}");
        for c in checkers.iter() {
            assert_eq!(c.next.load(Ordering::SeqCst), PER, "seed {seed}");
        }
    }
}

/// The same through a `Lane` handle, with closures and futures interleaved in one context.
#[test]
fn a_lane_orders_closures_and_futures_together() {
    let _s = serial();
    let pool = fixed_pool(2);
    let lane = pool.lane("mixed");
    let log = Arc::new(Mutex::new(Vec::new()));
    for i in 0..2_000 {
        let log = log.clone();
        if i % 2 == 0 {
            lane.execute(move || log.lock().unwrap().push(i)).unwrap();
        } else {
            drop(
                lane.spawn(async move {
                    yield_now().await;
                    log.lock().unwrap().push(i);
                })
                .unwrap(),
            );
        }
    }
    pool.shutdown();
    assert_eq!(*log.lock().unwrap(), (0..2_000).collect::<Vec<_>>());
}

/// A panicking future is reported (panic hook, stats) and releases its context.
#[test]
fn a_panicking_future_is_reported_and_releases_its_context() {
    let _s = serial();
    let reports = Arc::new(Mutex::new(Vec::new()));
    let sink = reports.clone();
    let pool = Pool::builder()
        .core_threads(1)
        .panic_hook(move |r: &keyway::PanicReport| {
            sink.lock()
                .unwrap()
                .push((r.message().to_owned(), r.context_hash()))
        })
        .build()
        .unwrap();
    let bad = pool
        .spawn_sequential("ctx", async {
            yield_now().await;
            panic!("future boom");
        })
        .unwrap();
    let next = pool.spawn_sequential("ctx", async { 7 }).unwrap();
    assert_eq!(next.join_timeout(HANG).ok().unwrap().unwrap(), 7);
    match bad.join() {
        Err(e) => assert!(e.is_panic()),
        Ok(()) => panic!("the future panicked"),
    }
    // A multi-key future too.
    let bad = pool
        .spawn_keyed(["a", "b"], async {
            yield_now().await;
            panic!("keyed boom");
        })
        .unwrap();
    let next = pool.spawn_keyed(["b", "c"], async { 8 }).unwrap();
    assert_eq!(next.join_timeout(HANG).ok().unwrap().unwrap(), 8);
    assert!(bad.join().unwrap_err().is_panic());
    pool.shutdown();
    assert_eq!(
        *reports.lock().unwrap(),
        vec![
            // A future holding one lane is reported in that lane's context.
            ("future boom".to_string(), Some(pool.context_hash(&"ctx"))),
            ("keyed boom".to_string(), None),
        ]
    );
    assert_eq!(pool.stats().panicked_tasks, 2);
}

/// `body` as a future that says when it started and when it is dropped.
fn watched<B: Future<Output = ()> + Send + 'static>(
    started: &Latch,
    dropped: &Latch,
    body: B,
) -> impl Future<Output = ()> + Send + 'static + use<B> {
    struct OnDrop(Latch);
    impl Drop for OnDrop {
        fn drop(&mut self) {
            self.0.count_down();
        }
    }
    let (started, guard) = (started.clone(), OnDrop(dropped.clone()));
    async move {
        let _guard = guard;
        started.count_down();
        body.await;
    }
}

/// A future that waits forever and tells when it is dropped.
fn forever(started: &Latch, dropped: &Latch) -> impl Future<Output = ()> + Send + 'static + use<> {
    watched(started, dropped, std::future::pending::<()>())
}

/// Starts `fut` (made by `make` with its latches) in the lane of "ctx", then a closure behind it;
/// cancels the future once started: it is dropped, the closure runs, the handle says cancelled.
fn cancelling_releases_the_lane<F>(pool: &Pool, make: impl FnOnce(&Latch, &Latch) -> F)
where
    F: Future<Output = ()> + Send + 'static,
{
    let (started, dropped) = (Latch::new(1), Latch::new(1));
    let running = pool
        .spawn_sequential("ctx", make(&started, &dropped))
        .unwrap();
    let next = pool.submit_sequential("ctx", || "next").unwrap();
    started.wait();
    assert!(running.cancel(), "a started future can be cancelled");
    dropped.wait();
    assert_eq!(next.join_timeout(HANG).ok().unwrap().unwrap(), "next");
    assert!(matches!(running.join(), Err(TaskError::Cancelled)));
}

/// Cancelling the handle of a started future drops it at its await point and
/// releases its context (single and multi-key); the next task runs.
#[test]
fn cancelling_a_started_future_releases_its_context() {
    let _s = serial();
    let pool = fixed_pool(1);
    cancelling_releases_the_lane(&pool, forever);

    let (started, dropped) = (Latch::new(1), Latch::new(1));
    let waiting = pool
        .spawn_keyed(["x", "y"], forever(&started, &dropped))
        .unwrap();
    let on_x = pool.submit_sequential("x", || 1).unwrap();
    let on_y = pool.spawn_keyed(["y", "z"], async { 2 }).unwrap();
    started.wait();
    assert!(!on_x.is_finished() && !on_y.is_finished());
    assert!(waiting.cancel());
    dropped.wait();
    assert_eq!(on_x.join_timeout(HANG).ok().unwrap().unwrap(), 1);
    assert_eq!(on_y.join_timeout(HANG).ok().unwrap().unwrap(), 2);
    assert!(matches!(waiting.join(), Err(TaskError::Cancelled)));
    // A finished future cannot be cancelled any more.
    let done = pool.spawn(async { 3 }).unwrap();
    while !done.is_finished() {
        std::thread::yield_now();
    }
    assert!(!done.cancel());
    assert_eq!(done.join().unwrap(), 3);
    pool.shutdown();
}

/// A future that never waits but keeps yielding (each yield resumed by its worker at once, up to
/// a streak) is cancelled at a yield too: its context is released and the next task runs, on one
/// thread and on two.
#[test]
fn cancelling_a_yielding_future_releases_its_context() {
    let _s = serial();
    for threads in [1, 2] {
        let pool = fixed_pool(threads);
        cancelling_releases_the_lane(&pool, |started, dropped| {
            watched(started, dropped, async {
                loop {
                    yield_now().await;
                }
            })
        });
        pool.shutdown();
    }
}

/// An `AbortHandle` cancels a started future too, while its `TaskHandle` is joined elsewhere:
/// the future is dropped at its await point and its context released.
#[test]
fn an_abort_handle_cancels_a_started_future() {
    let _s = serial();
    let pool = fixed_pool(1);
    let (started, dropped) = (Latch::new(1), Latch::new(1));
    let waiting = pool
        .spawn_sequential("ctx", forever(&started, &dropped))
        .unwrap();
    let abort = waiting.abort_handle();
    let next = pool.submit_sequential("ctx", || "next").unwrap();
    let joiner = std::thread::spawn(move || waiting.join());
    started.wait();
    assert!(!abort.is_finished());
    assert!(abort.clone().abort(), "a started future can be aborted");
    assert!(!abort.abort(), "already cancelled");
    dropped.wait();
    assert!(matches!(joiner.join().unwrap(), Err(TaskError::Cancelled)));
    assert_eq!(next.join_timeout(HANG).ok().unwrap().unwrap(), "next");
    assert!(abort.is_finished());
    // A finished future cannot be aborted.
    let done = pool.spawn(async { 3 }).unwrap();
    let abort = done.abort_handle();
    assert_eq!(done.join().unwrap(), 3);
    assert!(!abort.abort());
    pool.shutdown();
}

/// User + system CPU time of this process, from `/proc/self/stat` (clock ticks of 10 ms).
fn process_cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    // Fields after the command name (which is in parentheses and may hold spaces).
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    Duration::from_millis(ticks * 10)
}

/// A context whose future waits 1 s costs no CPU while it waits.
#[test]
fn a_waiting_future_costs_no_cpu() {
    let _s = serial();
    let rt = runtime();
    let pool = fixed_pool(2);
    let h = rt.handle().clone();
    let behind = Arc::new(AtomicBool::new(false));
    let b = behind.clone();
    let before = process_cpu();
    let waiting = pool
        .spawn_sequential("slow", async move {
            sleep(&h, Duration::from_secs(1)).await;
            b.load(Ordering::SeqCst) // the task behind it has not run yet
        })
        .unwrap();
    let b = behind.clone();
    pool.execute_sequential("slow", move || b.store(true, Ordering::SeqCst))
        .unwrap();
    assert!(
        !waiting.join().unwrap(),
        "the next task ran during the await"
    );
    let used = process_cpu().saturating_sub(before);
    eprintln!("cpu used during the 1 s wait: {used:?}");
    assert!(
        used < Duration::from_millis(100),
        "the wait cost {used:?} of CPU: busy polling"
    );
    pool.shutdown();
}

/// Multi-key futures sharing a key never overlap across awaits; disjoint ones run
/// concurrently (both reach a barrier while the pool has one thread).
#[test]
fn multi_key_futures_exclude_shared_keys_and_run_disjoint_ones_concurrently() {
    let _s = serial();
    let rt = runtime();
    for seed in 0..20u64 {
        let pool = fixed_pool(2);
        let inside: Arc<Vec<AtomicBool>> =
            Arc::new((0..6).map(|_| AtomicBool::new(false)).collect());
        let violations = Arc::new(AtomicUsize::new(0));
        let mut rng = SmallRng::seed_from_u64(seed);
        for _ in 0..300 {
            let a = rng.gen_range(0..6usize);
            let b = (a + rng.gen_range(1..6usize)) % 6;
            let (inside, violations) = (inside.clone(), violations.clone());
            let rt = rt.handle().clone();
            let wait = rng.gen_range(0..10u32);
            let fut = async move {
                for k in [a, b] {
                    if inside[k].swap(true, Ordering::SeqCst) {
                        violations.fetch_add(1, Ordering::SeqCst);
                    }
                }
                if wait == 0 {
                    sleep(&rt, Duration::from_micros(200)).await;
                } else {
                    for _ in 0..wait {
                        yield_now().await;
                    }
                }
                for k in [a, b] {
                    if !inside[k].swap(false, Ordering::SeqCst) {
                        violations.fetch_add(1, Ordering::SeqCst);
                    }
                }
            };
            drop(pool.spawn_keyed([a, b], fut).unwrap());
        }
        pool.shutdown();
        assert_eq!(violations.load(Ordering::SeqCst), 0, "seed {seed}");
    }

    // Disjoint keys, one thread: both futures must be waiting at once to pass the barrier.
    let pool = fixed_pool(1);
    let barrier = Arc::new(tokio::sync::Barrier::new(2));
    let mut handles = Vec::new();
    for keys in [["x", "y"], ["z", "w"]] {
        let (barrier, rt) = (barrier.clone(), rt.handle().clone());
        handles.push(
            pool.spawn_keyed(keys, async move {
                let timeout = {
                    let _enter = rt.enter();
                    tokio::time::timeout(HANG, barrier.wait())
                };
                timeout.await.is_ok()
            })
            .unwrap(),
        );
    }
    for h in handles {
        assert!(
            h.join().unwrap(),
            "disjoint multi-key futures did not run concurrently"
        );
    }
    pool.shutdown();
}

/// `shutdown` waits for every accepted future, waiting ones included.
#[test]
fn shutdown_waits_for_accepted_futures() {
    let _s = serial();
    let rt = runtime();
    let pool = fixed_pool(2);
    let done = Arc::new(AtomicUsize::new(0));
    let mut handles = Vec::new();
    for i in 0..200u64 {
        let (done, rt) = (done.clone(), rt.handle().clone());
        let fut = async move {
            sleep(&rt, Duration::from_millis(1 + i % 5)).await;
            done.fetch_add(1, Ordering::SeqCst);
            i
        };
        handles.push(match i % 4 {
            0 => pool.spawn(fut).unwrap(),
            1 => pool.spawn_sequential(i % 7, fut).unwrap(),
            2 => pool.spawn_keyed([i % 5, 10 + i % 3], fut).unwrap(),
            _ => pool.lane(i % 3).spawn(fut).unwrap(),
        });
    }
    pool.shutdown();
    assert_eq!(done.load(Ordering::SeqCst), 200);
    for (i, h) in handles.into_iter().enumerate() {
        assert!(h.is_finished());
        assert_eq!(h.join().unwrap(), i as u64);
    }
    assert!(matches!(
        pool.spawn(async {}),
        Err(keyway::SubmitError::Shutdown(_))
    ));
}

/// `shutdown_now` called from inside a future, between two yields (each resumed in place by its
/// worker, within the poll that launched it): the call returns, hands back the context's queued tasks in order, and the future is
/// cancelled at its next await; the same for an async typed lane's handler future. A graceful
/// `shutdown` from inside a yielding future returns at once, and the future and the tasks
/// queued behind it all still run.
#[test]
fn shutdown_from_inside_a_yielding_future() {
    let _s = serial();
    // A future with a handle.
    let pool = fixed_pool(2);
    let (tx, rx) = std::sync::mpsc::channel();
    let past = Arc::new(AtomicBool::new(false));
    let (p, after) = (pool.clone(), past.clone());
    let gate = Gate::new();
    let g = gate.clone();
    let stopping = pool
        .spawn_sequential("ctx", async move {
            g.wait();
            yield_now().await;
            tx.send(p.shutdown_now()).unwrap();
            yield_now().await;
            after.store(true, Ordering::SeqCst);
        })
        .unwrap();
    let queued: Vec<_> = (0..5)
        .map(|i| pool.submit_sequential("ctx", move || i).unwrap())
        .collect();
    gate.open();
    let back = rx
        .recv_timeout(HANG)
        .expect("shutdown_now inside a future hung");
    assert_eq!(back.len(), 5, "the context's queued tasks come back");
    assert!(matches!(
        stopping.join_timeout(HANG).ok().unwrap(),
        Err(TaskError::Cancelled)
    ));
    assert!(
        !past.load(Ordering::SeqCst),
        "polled past its await after shutdown_now"
    );
    drop(back);
    for q in queued {
        assert!(
            q.join_timeout(HANG).ok().unwrap().is_err(),
            "handed back, then dropped"
        );
    }

    // An async typed lane's handler future.
    let pool = fixed_pool(2);
    let (tx, rx) = std::sync::mpsc::channel();
    let tx = Mutex::new(Some(tx));
    let past = Arc::new(AtomicBool::new(false));
    let (p, after) = (pool.clone(), past.clone());
    let gate = Gate::new();
    let g = gate.clone();
    let lanes = pool.typed_lanes_async(move |_: &u8, n: u32| {
        let (p, after, g) = (p.clone(), after.clone(), g.clone());
        let tx = if n == 0 {
            tx.lock().unwrap().take()
        } else {
            None
        };
        async move {
            if let Some(tx) = tx {
                g.wait();
                yield_now().await;
                tx.send(p.shutdown_now()).unwrap();
                yield_now().await;
                after.store(true, Ordering::SeqCst);
            }
        }
    });
    for n in 0..6 {
        lanes.send(1, n).unwrap();
    }
    gate.open();
    let back: Vec<u32> = rx
        .recv_timeout(HANG)
        .expect("shutdown_now inside a typed lane's future hung")
        .into_iter()
        .map(|p| p.into_message::<u32>().ok().unwrap())
        .collect();
    assert_eq!(back, vec![1, 2, 3, 4, 5]);
    assert!(
        !past.load(Ordering::SeqCst),
        "polled past its await after shutdown_now"
    );

    // A graceful shutdown from inside: everything accepted still runs.
    let pool = fixed_pool(2);
    let p = pool.clone();
    let done = Arc::new(AtomicUsize::new(0));
    let d = done.clone();
    let gate = Gate::new();
    let g = gate.clone();
    let first = pool
        .spawn_sequential("ctx", async move {
            g.wait();
            yield_now().await;
            p.shutdown();
            for _ in 0..100 {
                yield_now().await;
            }
            d.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap();
    let behind: Vec<_> = (0..5)
        .map(|i| pool.submit_sequential("ctx", move || i).unwrap())
        .collect();
    gate.open();
    first.join_timeout(HANG).ok().unwrap().unwrap();
    for (i, b) in behind.into_iter().enumerate() {
        assert_eq!(b.join_timeout(HANG).ok().unwrap().unwrap(), i);
    }
    assert_eq!(done.load(Ordering::SeqCst), 1);
    pool.shutdown();
}

/// `shutdown_now` called in a future's very first poll, before any await — while the entry that
/// launched it still counts as running — returns: from `spawn`, `spawn_sequential`,
/// `spawn_keyed` and an async typed lane's handler (it used to wait for that entry forever).
#[test]
fn shutdown_now_in_a_futures_first_poll_returns() {
    let _s = serial();
    type Start = Box<dyn Fn(&Pool, std::sync::mpsc::Sender<usize>)>;
    let starts: Vec<(&str, Start)> = vec![
        (
            "spawn",
            Box::new(|pool, tx| {
                let p = pool.clone();
                drop(pool.spawn(async move { tx.send(p.shutdown_now().len()).unwrap() }));
            }),
        ),
        (
            "spawn_sequential",
            Box::new(|pool, tx| {
                let p = pool.clone();
                drop(pool.spawn_sequential("ctx", async move {
                    tx.send(p.shutdown_now().len()).unwrap()
                }));
            }),
        ),
        (
            "spawn_keyed",
            Box::new(|pool, tx| {
                let p = pool.clone();
                drop(pool.spawn_keyed(["x", "y"], async move {
                    tx.send(p.shutdown_now().len()).unwrap()
                }));
            }),
        ),
        (
            "typed_lanes_async",
            Box::new(|pool, tx| {
                let (p, tx) = (pool.clone(), Mutex::new(tx));
                let lanes = pool.typed_lanes_async(move |_: &u8, ()| {
                    let (p, tx) = (p.clone(), tx.lock().unwrap().clone());
                    async move { tx.send(p.shutdown_now().len()).unwrap() }
                });
                lanes.send(1, ()).unwrap();
            }),
        ),
    ];
    for (name, start) in starts {
        let pool = fixed_pool(2);
        let (tx, rx) = std::sync::mpsc::channel();
        start(&pool, tx);
        rx.recv_timeout(HANG)
            .unwrap_or_else(|_| panic!("shutdown_now in the first poll of {name} hung"));
        common::eventually("nothing unfinished", || {
            pool.stats().unfinished_tasks() == 0
        });
    }
    // Two at once: both workers in a first poll, both calling shutdown_now.
    let pool = fixed_pool(2);
    let barrier = Arc::new(std::sync::Barrier::new(2));
    let (tx, rx) = std::sync::mpsc::channel();
    for ctx in 0..2 {
        let (p, b, tx) = (pool.clone(), barrier.clone(), tx.clone());
        drop(pool.spawn_sequential(ctx, async move {
            b.wait();
            tx.send(p.shutdown_now().len()).unwrap();
        }));
    }
    for _ in 0..2 {
        rx.recv_timeout(HANG)
            .expect("two shutdown_now calls in first polls at once hung");
    }
    common::eventually("nothing unfinished", || {
        pool.stats().unfinished_tasks() == 0
    });
}

/// `shutdown_now` cancels started futures at their await point (releasing what they hold) and
/// hands back the unstarted ones, which the caller may run or drop.
#[test]
fn shutdown_now_cancels_started_futures_and_hands_back_unstarted_ones() {
    let _s = serial();
    let drops = DropCount::default();
    let pool = fixed_pool(1);
    // Started and waiting forever: one per kind.
    let started = Latch::new(3);
    let dropped = Latch::new(3);
    let waiting = vec![
        pool.spawn_sequential("a", forever(&started, &dropped))
            .unwrap(),
        pool.spawn_keyed(["b", "c"], forever(&started, &dropped))
            .unwrap(),
        pool.spawn(forever(&started, &dropped)).unwrap(),
    ];
    started.wait();
    // Unstarted: behind the waiting ones, or behind a held worker.
    let mut behind = Vec::new();
    for i in 0..5u32 {
        let t = drops.token();
        behind.push(
            pool.spawn_sequential("a", async move {
                drop(t);
                i
            })
            .unwrap(),
        );
        let t = drops.token();
        behind.push(
            pool.spawn_keyed(["c", "d"], async move {
                drop(t);
                i
            })
            .unwrap(),
        );
    }
    let gate = Gate::new();
    let held = Latch::new(1);
    let task = common::held_task(&gate, &held);
    pool.execute(move || {
        task();
    })
    .unwrap();
    held.wait();
    for i in 0..5u32 {
        let t = drops.token();
        behind.push(
            pool.spawn(async move {
                drop(t);
                i
            })
            .unwrap(),
        );
    }
    let pending = common::shutdown_now_while_held(&pool, &gate);
    dropped.wait(); // every started future was dropped
    for h in waiting {
        assert!(matches!(h.join(), Err(TaskError::Cancelled)));
    }
    assert_eq!(pending.len(), 15, "every unstarted future handed back once");
    // Run some on this thread, drop the others.
    let mut pending = pending.into_iter();
    for task in pending.by_ref().take(5) {
        task.run().unwrap();
    }
    drop(pending.collect::<Vec<_>>());
    assert_eq!(drops.live(), 0, "every captured value freed");
    let (mut ran, mut rejected) = (0, 0);
    for h in behind {
        match h.join() {
            Ok(_) => ran += 1,
            Err(TaskError::Rejected) => rejected += 1,
            Err(e) => panic!("unexpected {e:?}"),
        }
    }
    assert_eq!((ran, rejected), (5, 10));
}

/// A coalescing future replaces the pending one; a started one is never replaced.
#[test]
fn coalescing_futures_replace_only_unstarted_ones() {
    let _s = serial();
    let pool = fixed_pool(1);
    let (started, release) = (Latch::new(1), Gate::new());
    let (s, r) = (started.clone(), release.clone());
    let first = pool
        .spawn_coalescing("px", async move {
            s.count_down();
            let (tx, rx) = futures::channel::oneshot::channel();
            std::thread::spawn(move || {
                r.wait();
                tx.send(()).unwrap();
            });
            rx.await.unwrap();
            1
        })
        .unwrap();
    started.wait();
    let second = pool.spawn_coalescing("px", async { 2 }).unwrap();
    let third = pool.spawn_coalescing("px", async { 3 }).unwrap();
    release.open();
    assert_eq!(first.join().unwrap(), 1);
    assert!(matches!(second.join(), Err(TaskError::Coalesced)));
    assert_eq!(third.join().unwrap(), 3);
    pool.shutdown();
}

/// Typed lanes with an async handler: per-key order across awaits, a panicking message
/// reported and skipped.
#[test]
fn async_typed_lanes_keep_per_key_order() {
    let _s = serial();
    let rt = runtime();
    let pool = fixed_pool(2);
    let log = Arc::new(Mutex::new(Vec::new()));
    let sink = log.clone();
    let h = rt.handle().clone();
    let lanes = pool.typed_lanes_async(move |key: &u32, msg: u32| {
        let (sink, key, h) = (sink.clone(), *key, h.clone());
        async move {
            if msg % 3 == 0 {
                sleep(&h, Duration::from_micros(100)).await;
            } else {
                yield_now().await;
            }
            assert!(msg != 500, "message 500 panics");
            sink.lock().unwrap().push((key, msg));
        }
    });
    for msg in 0..1_000u32 {
        lanes.send(msg % 4, msg).unwrap();
    }
    pool.shutdown();
    let log = log.lock().unwrap();
    for key in 0..4 {
        let mine: Vec<u32> = log
            .iter()
            .filter(|(k, _)| *k == key)
            .map(|(_, m)| *m)
            .collect();
        let want: Vec<u32> = (0..1_000).filter(|m| m % 4 == key && *m != 500).collect();
        assert_eq!(mine, want);
    }
    assert_eq!(pool.stats().panicked_tasks, 1);
}

/// A flush of an async typed lane completes only once every message sent before it has been
/// handled, awaits included (the flush waits behind the suspended lane).
#[test]
fn a_flush_waits_for_an_async_typed_lanes_futures() {
    let _s = serial();
    let pool = fixed_pool(2);
    let done = Arc::new(AtomicUsize::new(0));
    let count = done.clone();
    let lanes = pool.typed_lanes_async(move |_: &u8, _: ()| {
        let count = count.clone();
        async move {
            for _ in 0..3 {
                yield_now().await;
            }
            count.fetch_add(1, Ordering::SeqCst);
        }
    });
    for round in 1..=20 {
        for _ in 0..10 {
            lanes.send(7, ()).unwrap();
        }
        lanes.flush(7).unwrap().join().unwrap();
        assert_eq!(done.load(Ordering::SeqCst), round * 10);
    }
    pool.shutdown();
}

/// Handles are awaitable from tokio and from `futures::executor::block_on`; tokio timers and
/// sockets work inside keyway futures through a runtime handle.
#[test]
fn tokio_timers_and_sockets_work_inside_keyway_futures() {
    let _s = serial();
    let rt = runtime();
    let pool = fixed_pool(2);
    let h = rt.handle().clone();
    let listener = {
        let _enter = rt.enter();
        let std = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        std.set_nonblocking(true).unwrap();
        tokio::net::TcpListener::from_std(std).unwrap()
    };
    let addr = listener.local_addr().unwrap();
    // An echo server on the tokio runtime.
    rt.spawn(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let (mut s, _) = listener.accept().await.unwrap();
        let mut buf = [0u8; 5];
        s.read_exact(&mut buf).await.unwrap();
        s.write_all(&buf).await.unwrap();
    });
    let echoed = pool
        .spawn_sequential("conn", async move {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            sleep(&h, Duration::from_millis(5)).await;
            let io = async move {
                let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
                s.write_all(b"hello").await.unwrap();
                let mut buf = [0u8; 5];
                s.read_exact(&mut buf).await.unwrap();
                buf
            };
            InRuntime {
                rt: h,
                fut: Box::pin(io),
            }
            .await
        })
        .unwrap();
    // Awaited from tokio.
    assert_eq!(&rt.block_on(echoed).unwrap(), b"hello");
    // Awaited from futures' executor.
    let h = rt.handle().clone();
    let timed = pool
        .spawn(async move {
            sleep(&h, Duration::from_millis(2)).await;
            "slept"
        })
        .unwrap();
    assert_eq!(futures::executor::block_on(timed).unwrap(), "slept");
    pool.shutdown();
}

/// A waiting future holds no thread: on a one-thread pool, futures of two contexts and a plain
/// future all wait at one barrier at once, and each context's next task still waits its turn.
#[test]
fn waiting_futures_hold_no_thread() {
    let _s = serial();
    let rt = runtime();
    let pool = fixed_pool(1);
    let barrier = Arc::new(tokio::sync::Barrier::new(3));
    let meet = |barrier: &Arc<tokio::sync::Barrier>| {
        let (barrier, rt) = (barrier.clone(), rt.handle().clone());
        async move {
            let timeout = {
                let _enter = rt.enter();
                tokio::time::timeout(HANG, barrier.wait())
            };
            timeout.await.is_ok()
        }
    };
    let a = pool.spawn_sequential("a", meet(&barrier)).unwrap();
    let b = pool.lane("b").spawn(meet(&barrier)).unwrap();
    let after_a = pool.submit_sequential("a", || "after").unwrap();
    let c = pool.spawn(meet(&barrier)).unwrap();
    for h in [a, b, c] {
        assert!(h.join().unwrap(), "the futures did not all wait at once");
    }
    assert_eq!(after_a.join().unwrap(), "after");
    pool.shutdown();
}

// ---- Futures polled inline: a lane's future is first polled in the runner's turn, with no
// task; only one that waits (or yields past its streak) gets one, taking over its wakes.

/// How long a test here waits for a future that should finish (a lost wake hangs it).
const WAIT: Duration = Duration::from_secs(10);

type Step = Box<dyn FnOnce(&mut Context<'_>) -> Poll<u32> + Send>;

/// A future playing `steps`, one per poll; it counts its drop in `dropped`.
struct Script {
    steps: std::collections::VecDeque<Step>,
    _token: Option<common::Token>,
}

impl Script {
    fn new(steps: Vec<Step>) -> Self {
        Script {
            steps: steps.into(),
            _token: None,
        }
    }

    fn counted(mut self, drops: &DropCount) -> Self {
        self._token = Some(drops.token());
        self
    }
}

impl Future for Script {
    type Output = u32;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<u32> {
        let step = self.steps.pop_front().expect("polled only after a wake");
        step(cx)
    }
}

/// Waits, its waker woken by `wake` (given a clone of it) — during the poll or later.
fn waits(wake: impl FnOnce(std::task::Waker) + Send + 'static) -> Step {
    Box::new(move |cx| {
        wake(cx.waker().clone());
        Poll::Pending
    })
}

fn ready(n: u32) -> Step {
    Box::new(move |_| Poll::Ready(n))
}

/// A wake after `delay`, from another thread (the driver's task exists by then).
fn later(delay: Duration) -> impl FnOnce(std::task::Waker) + Send + 'static {
    move |waker| {
        std::thread::spawn(move || {
            std::thread::sleep(delay);
            waker.wake();
        });
    }
}

#[test]
fn a_future_that_completes_at_once_runs_in_its_lanes_order() {
    let _s = serial();
    let pool = fixed_pool(2);
    let log = Arc::new(Mutex::new(Vec::new()));
    for i in 0..3_000u32 {
        let (log, key) = (log.clone(), i % 3);
        let entry = move || log.lock().unwrap().push((key, i));
        match i % 4 {
            0 => pool.execute_sequential(key, entry).unwrap(),
            1 => pool
                .execute_async_sequential(key, async move { entry() })
                .unwrap(),
            2 => {
                let script = Script::new(vec![waits(|w| w.wake()), ready(0)]);
                let fut = async move {
                    script.await;
                    entry()
                };
                drop(pool.spawn_sequential(key, fut).unwrap())
            }
            _ => {
                let script = Script::new(vec![waits(later(Duration::from_micros(50))), ready(0)]);
                let fut = async move {
                    script.await;
                    entry()
                };
                pool.execute_async_sequential(key, fut).unwrap()
            }
        }
    }
    pool.shutdown();
    let log = log.lock().unwrap();
    for key in 0..3 {
        let seen: Vec<u32> = log.iter().filter(|e| e.0 == key).map(|e| e.1).collect();
        assert_eq!(seen, (key..3_000).step_by(3).collect::<Vec<_>>());
    }
}

/// Closure lanes and async typed lanes: a future's wake during its first poll (before its
/// driver has a task) and after it (the task's) both reach it.
#[test]
fn a_wake_before_or_after_the_driver_has_a_task_reaches_it() {
    let _s = serial();
    let pool = fixed_pool(2);
    let wakes: [fn() -> Step; 3] = [
        || waits(|w| w.wake()),
        || waits(|w| w.wake_by_ref()),
        || waits(later(Duration::from_millis(20))),
    ];
    for wake in wakes {
        let fut = Script::new(vec![wake(), ready(5)]);
        let handle = pool.spawn_sequential("k", fut).unwrap();
        assert_eq!(
            handle
                .join_timeout(WAIT)
                .unwrap_or_else(|_| panic!("woken"))
                .unwrap(),
            5
        );
        let after = pool.spawn_sequential("k", async { 6 }).unwrap();
        assert_eq!(
            after
                .join_timeout(WAIT)
                .unwrap_or_else(|_| panic!("released"))
                .unwrap(),
            6
        );
    }
    let done = Arc::new(AtomicUsize::new(0));
    let d = done.clone();
    let lanes = pool.typed_lanes_async(move |_: &u32, wake: usize| {
        let d = d.clone();
        let script = Script::new(vec![wakes[wake](), ready(0)]);
        async move {
            script.await;
            d.fetch_add(1, Ordering::SeqCst);
        }
    });
    for wake in 0..3 {
        lanes.send(wake as u32, wake).unwrap();
        lanes.send(wake as u32, wake).unwrap();
    }
    for key in 0..3 {
        assert!(lanes.flush(key).unwrap().join_timeout(WAIT).is_ok());
    }
    assert_eq!(done.load(Ordering::SeqCst), 6);
    pool.shutdown();
}

/// A future that wakes itself far past the worker's streak is queued as a task and completes;
/// the lane's next entry runs after it.
#[test]
fn a_self_waking_future_past_its_streak_completes_in_order() {
    let _s = serial();
    let pool = fixed_pool(1);
    let log = Arc::new(Mutex::new(Vec::new()));
    let l = log.clone();
    let yields = async move {
        for _ in 0..10_000 {
            yield_now().await;
        }
        l.lock().unwrap().push(1);
    };
    pool.execute_async_sequential("k", yields).unwrap();
    let l = log.clone();
    let next = pool
        .spawn_sequential("k", async move { l.lock().unwrap().push(2) })
        .unwrap();
    assert!(next.join_timeout(WAIT).is_ok(), "the yielding future ended");
    assert_eq!(*log.lock().unwrap(), vec![1, 2]);
    pool.shutdown();
}

/// A panic at the first poll (inline) and after the driver got its task: each is the handle's,
/// reported in the lane's context, and the lane goes on.
#[test]
fn a_panic_at_the_first_poll_or_after_promotion_releases_the_lane() {
    let _s = serial();
    let reports = Arc::new(AtomicUsize::new(0));
    let r = reports.clone();
    let pool = Pool::builder()
        .core_threads(1)
        .max_threads(1)
        .panic_hook(move |_: &keyway::PanicReport| {
            r.fetch_add(1, Ordering::SeqCst);
        })
        .build()
        .unwrap();
    let boom = || -> Step { Box::new(|_| panic!("boom")) };
    for steps in [
        vec![boom()],
        vec![waits(|w| w.wake()), boom()],
        vec![waits(later(Duration::from_millis(20))), boom()],
    ] {
        let bad = pool.spawn_sequential("k", Script::new(steps)).unwrap();
        let next = pool.spawn_sequential("k", async { 3 }).unwrap();
        assert_eq!(
            next.join_timeout(WAIT)
                .unwrap_or_else(|_| panic!("released"))
                .unwrap(),
            3
        );
        assert!(bad.join().unwrap_err().is_panic());
    }
    pool.shutdown();
    assert_eq!(reports.load(Ordering::SeqCst), 3);
}

/// Cancelled through its handle during its first poll (before its driver has a task) or while
/// it waits in its task: the future is dropped and the lane goes on.
#[test]
fn cancel_before_or_after_promotion_drops_the_future_and_releases_the_lane() {
    let _s = serial();
    let pool = fixed_pool(2);
    let drops = DropCount::default();
    for during_first_poll in [true, false] {
        let mine = Arc::new(Mutex::new(None::<keyway::AbortHandle>));
        let gate = Gate::new();
        let g = gate.clone();
        pool.execute_sequential("k", move || {
            g.wait_for(WAIT);
        })
        .unwrap();
        let m = mine.clone();
        let step: Step = Box::new(move |_| {
            if during_first_poll {
                m.lock().unwrap().take().unwrap().abort();
            }
            Poll::Pending
        });
        let fut = Script::new(vec![step]).counted(&drops);
        let handle = pool.spawn_sequential("k", fut).unwrap();
        *mine.lock().unwrap() = Some(handle.abort_handle());
        gate.open();
        if !during_first_poll {
            std::thread::sleep(Duration::from_millis(20));
            assert!(handle.cancel());
        }
        let next = pool.spawn_sequential("k", async { 4 }).unwrap();
        assert_eq!(
            next.join_timeout(WAIT)
                .unwrap_or_else(|_| panic!("released"))
                .unwrap(),
            4
        );
        assert_eq!(drops.live(), 0, "the cancelled future was dropped");
    }
    pool.shutdown();
}

/// `shutdown_now` while futures wait in their drivers' tasks (closure and typed lanes): each is
/// cancelled at its await point (dropped).
#[test]
fn shutdown_now_cancels_futures_waiting_in_promoted_drivers() {
    let _s = serial();
    let pool = fixed_pool(2);
    let drops = DropCount::default();
    let started = Latch::new(2);
    let s = started.clone();
    let forever = move |drops: &DropCount| {
        let s = s.clone();
        Script::new(vec![Box::new(move |_| {
            s.count_down();
            Poll::Pending
        })])
        .counted(drops)
    };
    pool.execute_async_sequential("k", {
        let fut = forever(&drops);
        async move {
            fut.await;
        }
    })
    .unwrap();
    let (f, d) = (forever.clone(), drops.clone());
    let lanes = pool.typed_lanes_async(move |_: &u32, ()| {
        let fut = f(&d);
        async move {
            fut.await;
        }
    });
    lanes.send(1, ()).unwrap();
    assert!(started.wait_for(WAIT));
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(drops.live(), 2);
    let handed_back = pool.shutdown_now();
    assert!(handed_back.is_empty());
    common::eventually("both cancelled", || drops.live() == 0);
}

/// `execute_async_sequential` under contention (two producers, eight keys, two workers): each
/// future panics at its first poll, panics after a wait, completes at once or completes after a
/// wait woken from another thread. Every panic is reported once, in its own context's hash; each
/// key's futures start in submission order, a panicking one included, and none starts before
/// the one before it is done.
#[test]
fn detached_lane_futures_report_panics_in_their_context_and_keep_order_under_contention() {
    let _s = serial();
    let reports = Arc::new(Mutex::new(Vec::new()));
    let r = reports.clone();
    let pool = Pool::builder()
        .core_threads(2)
        .max_threads(2)
        .panic_hook(move |report: &keyway::PanicReport| {
            r.lock()
                .unwrap()
                .push((report.context_hash(), report.message().to_owned()));
        })
        .build()
        .unwrap();
    let log = Arc::new(Mutex::new(Vec::new()));
    let busy: Arc<Vec<AtomicBool>> = Arc::new((0..8).map(|_| AtomicBool::new(false)).collect());
    let overlaps = Arc::new(AtomicUsize::new(0));
    let producers: Vec<_> = (0..2u32)
        .map(|producer| {
            let (pool, log) = (pool.clone(), log.clone());
            let (busy, overlaps) = (busy.clone(), overlaps.clone());
            std::thread::spawn(move || {
                for i in 0..2_000u32 {
                    let key = (i * 7 + producer) % 8;
                    let (log, busy, overlaps) = (log.clone(), busy.clone(), overlaps.clone());
                    let started = move || {
                        if busy[key as usize].swap(true, Ordering::SeqCst) {
                            overlaps.fetch_add(1, Ordering::SeqCst);
                        }
                        log.lock().unwrap().push((key, producer, i));
                        move || busy[key as usize].store(false, Ordering::SeqCst)
                    };
                    let fut: Pin<Box<dyn Future<Output = ()> + Send>> = match i % 4 {
                        0 => Box::pin(async move {
                            started()();
                            panic!("first poll: key {key}");
                        }),
                        1 => Box::pin(async move {
                            let done = started();
                            Script::new(vec![waits(later(Duration::from_micros(20))), ready(0)])
                                .await;
                            done();
                            panic!("after a wait: key {key}");
                        }),
                        2 => Box::pin(async move { started()() }),
                        _ => Box::pin(async move {
                            let done = started();
                            Script::new(vec![waits(|w| w.wake()), ready(0)]).await;
                            done();
                        }),
                    };
                    pool.execute_async_sequential(key, fut).unwrap();
                }
            })
        })
        .collect();
    for producer in producers {
        producer.join().unwrap();
    }
    pool.shutdown();
    assert_eq!(
        overlaps.load(Ordering::SeqCst),
        0,
        "a key's futures overlapped"
    );
    let reports = reports.lock().unwrap();
    assert_eq!(reports.len(), 2 * 1_000, "one report per panicking future");
    for (hash, message) in reports.iter() {
        let key: u32 = message.rsplit(' ').next().unwrap().parse().unwrap();
        assert_eq!(
            *hash,
            Some(pool.context_hash(&key)),
            "{message}: reported in its context"
        );
    }
    let log = log.lock().unwrap();
    assert_eq!(log.len(), 2 * 2_000, "every future started");
    for key in 0..8 {
        for producer in 0..2 {
            let seen: Vec<u32> = log
                .iter()
                .filter(|e| e.0 == key && e.1 == producer)
                .map(|e| e.2)
                .collect();
            let want: Vec<u32> = (0..2_000)
                .filter(|i| (i * 7 + producer) % 8 == key)
                .collect();
            assert_eq!(
                seen, want,
                "key {key}, producer {producer}: in submission order"
            );
        }
    }
}
