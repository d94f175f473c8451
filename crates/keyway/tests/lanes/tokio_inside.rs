//! tokio inside keyway futures with no wrapper (the `tokio` feature, on in keyway's own tests):
//! a future spawned from inside a tokio runtime, and an async typed lane made there, use that
//! runtime's timers and sockets; one that uses tokio outside any runtime gets a report saying
//! what to do; a typed lane's handler panic reaches the panic hook. A pool bound to a runtime
//! polls every future in it, runs its tasks and hooks inside it, and outlives it.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use keyway::{PanicReport, Pool, TaskError};

mod typed_bound;

fn pool_with_hook() -> (Pool, Arc<Mutex<Vec<PanicReport>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    let pool = Pool::builder()
        .core_threads(2)
        .panic_hook(move |r| sink.lock().unwrap().push(r.clone()))
        .build()
        .unwrap();
    (pool, seen)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 1)]
#[test]
async fn tokio_sleep_in_spawn_sequential_under_tokio_main() {
    let (pool, panics) = pool_with_hook();
    let log = Arc::new(Mutex::new(Vec::new()));
    let mut handles = Vec::new();
    for i in 0..3u32 {
        let log = log.clone();
        handles.push(
            pool.spawn_sequential("account-1", async move {
                tokio::time::sleep(Duration::from_millis(5 * u64::from(3 - i))).await;
                log.lock().unwrap().push(i);
                i
            })
            .unwrap(),
        );
    }
    for (i, handle) in handles.into_iter().enumerate() {
        assert_eq!(handle.await.unwrap(), i as u32);
    }
    assert_eq!(
        *log.lock().unwrap(),
        vec![0, 1, 2],
        "in order across awaits"
    );
    assert!(panics.lock().unwrap().is_empty());
    pool.shutdown();
}

#[tokio::test] // a current-thread runtime: its driver runs while this test awaits
async fn tokio_sleep_and_socket_in_spawn_under_a_current_thread_runtime() {
    let (pool, _) = pool_with_hook();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = pool
        .spawn(async move {
            use tokio::io::AsyncWriteExt;
            let (mut socket, _) = listener.accept().await.unwrap();
            tokio::time::sleep(Duration::from_millis(1)).await;
            socket.write_all(b"pong").await.unwrap();
        })
        .unwrap();
    let client = pool
        .spawn(async move {
            use tokio::io::AsyncReadExt;
            let mut socket = tokio::net::TcpStream::connect(addr).await.unwrap();
            let mut buf = [0; 4];
            socket.read_exact(&mut buf).await.unwrap();
            buf
        })
        .unwrap();
    assert_eq!(&client.await.unwrap(), b"pong");
    server.await.unwrap();
    pool.shutdown();
}

#[tokio::main(flavor = "multi_thread", worker_threads = 1)]
#[test]
async fn tokio_sleep_in_a_typed_lanes_async_handler_under_tokio_main() {
    let (pool, panics) = pool_with_hook();
    let handled = Arc::new(Mutex::new(Vec::new()));
    let sink = handled.clone();
    let lanes = pool.typed_lanes_async(move |key: &u32, n: u32| {
        let (sink, key) = (sink.clone(), *key);
        async move {
            tokio::time::sleep(Duration::from_millis(2)).await;
            sink.lock().unwrap().push((key, n));
        }
    });
    for n in 0..3 {
        lanes.send(7, n).unwrap();
    }
    lanes.flush(7).unwrap().await.unwrap();
    assert_eq!(*handled.lock().unwrap(), vec![(7, 0), (7, 1), (7, 2)]);
    assert!(panics.lock().unwrap().is_empty());
    assert_eq!(pool.stats().panicked_tasks, 0);
    pool.shutdown();
}

#[tokio::main(flavor = "multi_thread", worker_threads = 1)]
#[test]
async fn typed_lanes_async_with_state_awaits_tokio_timers() {
    let (pool, _) = pool_with_hook();
    let (saved, rx) = std::sync::mpsc::channel();
    let state = keyway::KeyState::new(|_: &u32| 0u64)
        .on_idle(move |key: &u32, total: u64| saved.send((*key, total)).unwrap());
    let totals =
        pool.typed_lanes_async_with_state(state, |_: &u32, total: u64, add: u64| async move {
            tokio::time::sleep(Duration::from_millis(1)).await;
            total + add
        });
    for add in 1..=10 {
        totals.send(add as u32 % 2, add).unwrap();
    }
    pool.shutdown();
    let mut got: Vec<_> = rx.try_iter().collect();
    got.sort();
    assert_eq!(got, vec![(0, 2 + 4 + 6 + 8 + 10), (1, 1 + 3 + 5 + 7 + 9)]);
}

/// The text every report of a future that used tokio outside a runtime carries.
const HINT: &str = "turn on keyway's `tokio` cargo feature";

#[test]
fn a_future_using_tokio_outside_any_runtime_says_what_to_do() {
    let (pool, panics) = pool_with_hook();
    // Spawned from a plain thread: no runtime to capture.
    let handle = pool
        .spawn_sequential("k", async {
            tokio::time::sleep(Duration::from_millis(1)).await
        })
        .unwrap();
    match handle.join() {
        Err(TaskError::Panicked(p)) => assert!(p.message().contains(HINT), "{}", p.message()),
        other => panic!("expected a panic, got {other:?}"),
    }
    pool.wait_idle();
    let panics = panics.lock().unwrap();
    assert_eq!(panics.len(), 1);
    assert!(
        panics[0].message().contains(HINT),
        "{}",
        panics[0].message()
    );
    assert_eq!(panics[0].context_hash(), Some(pool.context_hash(&"k")));
}

#[test]
fn a_typed_lanes_async_handler_panic_reaches_the_panic_hook_with_its_key() {
    let (pool, panics) = pool_with_hook();
    // Made outside any runtime: the handler's tokio sleep panics, on each message.
    let lanes = pool.typed_lanes_async(|_: &u32, _: u32| async {
        tokio::time::sleep(Duration::from_millis(1)).await;
    });
    for n in 0..3 {
        lanes.send(7, n).unwrap(); // accepted: the panic comes later, on the pool
    }
    lanes.flush(7).unwrap().join().unwrap();
    let panics = panics.lock().unwrap();
    assert_eq!(panics.len(), 3, "each message's panic is reported");
    for report in panics.iter() {
        assert_eq!(report.context_hash(), Some(pool.context_hash(&7u32)));
        assert!(report.message().contains(HINT), "{}", report.message());
    }
    assert_eq!(pool.stats().panicked_tasks, 3);
}

// A pool bound to a runtime (`PoolBuilder::tokio_runtime`): its threads live inside it, and
// every future of the pool is polled in it, wherever it was submitted from.

/// A multi-thread runtime with its timers, and a pool of two threads bound to it.
fn bound_pool() -> (tokio::runtime::Runtime, Pool, Arc<Mutex<Vec<PanicReport>>>) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    let pool = Pool::builder()
        .core_threads(2)
        .tokio_runtime(runtime.handle().clone())
        .panic_hook(move |r| sink.lock().unwrap().push(r.clone()))
        .build()
        .unwrap();
    (runtime, pool, seen)
}

/// The runtime the calling thread is inside of, if any.
fn current_runtime() -> Option<tokio::runtime::Id> {
    tokio::runtime::Handle::try_current().ok().map(|h| h.id())
}

/// A future that sleeps on tokio's timer, then says which runtime it was polled in.
async fn sleep_then_say_runtime() -> Option<tokio::runtime::Id> {
    tokio::time::sleep(Duration::from_millis(1)).await;
    current_runtime()
}

#[test]
fn a_bound_pool_polls_futures_from_outside_any_runtime_in_its_runtime() {
    let (runtime, pool, panics) = bound_pool();
    let bound = Some(runtime.handle().id());
    assert_eq!(
        current_runtime(),
        None,
        "this test's thread is in no runtime"
    );
    let spawned = pool.spawn(sleep_then_say_runtime()).unwrap();
    let in_lane = pool
        .spawn_sequential("k", sleep_then_say_runtime())
        .unwrap();
    let in_keys = pool
        .spawn_keyed(["a", "b"], sleep_then_say_runtime())
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let detached = tx.clone();
    pool.execute_async_sequential("k", async move {
        detached.send(sleep_then_say_runtime().await).unwrap();
    })
    .unwrap();
    let lanes = pool.typed_lanes_async(move |_: &u32, _: u32| {
        let tx = tx.clone();
        async move { tx.send(sleep_then_say_runtime().await).unwrap() }
    });
    lanes.send(1, 0).unwrap();
    assert_eq!(spawned.join().unwrap(), bound);
    assert_eq!(in_lane.join().unwrap(), bound);
    assert_eq!(in_keys.join().unwrap(), bound);
    assert_eq!(rx.recv().unwrap(), bound, "execute_async_sequential");
    assert_eq!(rx.recv().unwrap(), bound, "an async typed lane's handler");
    assert!(panics.lock().unwrap().is_empty());
    pool.shutdown();
}

/// A future submitted from inside another runtime is polled in the pool's, not in the one it
/// came from (which an unbound pool would poll it in).
#[test]
fn a_future_submitted_from_another_runtime_is_polled_in_the_bound_one() {
    let (runtime, pool, _) = bound_pool();
    let other = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let lane = pool.lane("held");
    let (spawned, in_lane, in_held_lane) = other.block_on(async {
        (
            pool.spawn(sleep_then_say_runtime()).unwrap(),
            pool.spawn_sequential(3, sleep_then_say_runtime()).unwrap(),
            lane.spawn(sleep_then_say_runtime()).unwrap(),
        )
    });
    let bound = Some(runtime.handle().id());
    assert_ne!(bound, Some(other.handle().id()));
    assert_eq!(spawned.join().unwrap(), bound);
    assert_eq!(in_lane.join().unwrap(), bound);
    assert_eq!(in_held_lane.join().unwrap(), bound, "Lane::spawn");
    pool.shutdown();
}

/// A plain task and the thread hooks run inside the bound runtime too: `tokio::spawn` works
/// from a task.
#[test]
fn a_plain_task_and_the_hooks_of_a_bound_pool_are_inside_its_runtime() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let hooks = Arc::new(Mutex::new(Vec::new()));
    let (start, stop) = (hooks.clone(), hooks.clone());
    let pool = Pool::builder()
        .core_threads(1)
        .tokio_runtime(runtime.handle().clone())
        .on_thread_start(move || start.lock().unwrap().push(current_runtime()))
        .on_thread_stop(move || stop.lock().unwrap().push(current_runtime()))
        .build()
        .unwrap();
    let bound = Some(runtime.handle().id());
    assert_eq!(pool.submit(current_runtime).unwrap().join().unwrap(), bound);
    let spawned = pool
        .submit(|| tokio::spawn(async { current_runtime() }))
        .unwrap()
        .join()
        .unwrap();
    assert_eq!(runtime.block_on(spawned).unwrap(), bound);
    pool.shutdown();
    let hooks = hooks.lock().unwrap();
    assert!(
        !hooks.is_empty() && hooks.iter().all(|h| *h == bound),
        "{hooks:?}"
    );
}

/// A one-worker pool bound to a new runtime, its worker held by a task until `release` is sent:
/// whatever is submitted meanwhile waits unstarted.
fn bound_pool_with_busy_worker() -> (tokio::runtime::Runtime, Pool, std::sync::mpsc::Sender<()>) {
    let (runtime, pool) = bound_pool_of_one();
    let release = hold_the_worker(&pool);
    (runtime, pool, release)
}

/// A one-worker pool bound to a new runtime.
fn bound_pool_of_one() -> (tokio::runtime::Runtime, Pool) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let pool = Pool::builder()
        .core_threads(1)
        .max_threads(1)
        .tokio_runtime(runtime.handle().clone())
        .build()
        .unwrap();
    (runtime, pool)
}

/// Holds the only worker of `pool` with a task until the sender returned is sent `()`.
fn hold_the_worker(pool: &Pool) -> std::sync::mpsc::Sender<()> {
    let (started_tx, started) = std::sync::mpsc::channel();
    let (release, gate) = std::sync::mpsc::channel::<()>();
    pool.execute(move || {
        started_tx.send(()).unwrap();
        gate.recv().unwrap();
    })
    .unwrap();
    started.recv().unwrap();
    release
}

/// `shutdown_now` from a thread in no runtime while the worker is held; the worker is let go once
/// the pool is shut down, and what `shutdown_now` handed back is returned.
fn shutdown_now_while_busy(
    pool: &Pool,
    release: std::sync::mpsc::Sender<()>,
) -> Vec<keyway::PendingTask> {
    let stopper = {
        let pool = pool.clone();
        std::thread::spawn(move || pool.shutdown_now())
    };
    while !pool.is_shutdown() {
        std::thread::yield_now();
    }
    release.send(()).unwrap();
    stopper.join().unwrap()
}

/// A future of `spawn` handed back by `shutdown_now` and run on a thread in no runtime is still
/// polled in the pool's runtime.
#[test]
fn a_future_of_a_bound_pool_run_by_the_caller_enters_its_runtime() {
    let (runtime, pool, release) = bound_pool_with_busy_worker();
    // The only worker is busy: the future waits in the queue.
    let handed_back = pool.spawn(sleep_then_say_runtime()).unwrap();
    let pending = shutdown_now_while_busy(&pool, release);
    assert_eq!(pending.len(), 1);
    for task in pending {
        task.run().unwrap();
    }
    assert_eq!(handed_back.join().unwrap(), Some(runtime.handle().id()));
}

/// The runtime dropped first: a future awaiting its timer fails with a typed error (tokio's
/// panic, contained), work that does not use tokio goes on, and the pool shuts down.
#[test]
fn a_bound_pool_outlives_its_runtime() {
    let (runtime, pool, _) = bound_pool();
    let waiting = pool
        .spawn(async {
            tokio::time::sleep(Duration::from_secs(3600)).await;
        })
        .unwrap();
    let lanes = pool.typed_lanes_async(|_: &u32, _: u32| async move {
        tokio::time::sleep(Duration::from_millis(1)).await;
    });
    assert_eq!(pool.submit(|| 1).unwrap().join().unwrap(), 1);
    drop(runtime);
    assert!(matches!(waiting.join(), Err(TaskError::Panicked(_))));
    let late = pool.spawn(sleep_then_say_runtime()).unwrap();
    assert!(matches!(late.join(), Err(TaskError::Panicked(_))));
    lanes.send(1, 1).unwrap();
    lanes.flush(1).unwrap().join().unwrap();
    assert_eq!(
        pool.submit(|| 2).unwrap().join().unwrap(),
        2,
        "plain tasks go on"
    );
    pool.shutdown();
    assert_eq!(
        pool.stats().panicked_tasks,
        3,
        "two futures and the lane's message"
    );
}

/// The pool shut down first, then the runtime; and a bound pool dropped without a shutdown.
#[test]
fn a_bound_pool_shut_down_before_its_runtime() {
    let (runtime, pool, panics) = bound_pool();
    let slept = pool.spawn(sleep_then_say_runtime()).unwrap();
    pool.shutdown();
    assert_eq!(slept.join().unwrap(), Some(runtime.handle().id()));
    drop(runtime);
    let (runtime, dropped, _) = bound_pool();
    dropped.execute_async(async {}).unwrap();
    drop(dropped);
    drop(runtime);
    assert!(panics.lock().unwrap().is_empty());
}

/// Says, when dropped, which runtime its drop ran in, and whether `tokio::spawn` worked there
/// (a future's drop that hands its clean-up to a tokio task).
struct SaysWhereDropped(std::sync::mpsc::Sender<(Option<tokio::runtime::Id>, bool)>);

impl Drop for SaysWhereDropped {
    fn drop(&mut self) {
        let spawned = std::panic::catch_unwind(|| drop(tokio::spawn(async {}))).is_ok();
        let _ = self.0.send((current_runtime(), spawned));
    }
}

/// An async typed lane's future waiting when `shutdown_now` is called from a thread in no
/// runtime is cancelled there, and dropped inside the pool's runtime: its drop may use tokio.
#[test]
fn an_async_typed_lane_cancelled_by_shutdown_now_drops_its_future_in_the_bound_runtime() {
    let (runtime, pool, panics) = bound_pool();
    let (dropped_tx, dropped) = std::sync::mpsc::channel();
    let (started_tx, started) = std::sync::mpsc::channel();
    let dropped_tx = Mutex::new(dropped_tx);
    let lanes = pool.typed_lanes_async(move |_: &u32, _: u32| {
        waits_forever(&dropped_tx.lock().unwrap(), &started_tx)
    });
    lanes.send(1, 0).unwrap();
    shutdown_now_drops_in(&runtime, &pool, 1, &started, &dropped);
    assert!(panics.lock().unwrap().is_empty());
}

/// A future that says where it is dropped, tells `started` once polled, and waits forever.
fn waits_forever(
    dropped: &std::sync::mpsc::Sender<(Option<tokio::runtime::Id>, bool)>,
    started: &std::sync::mpsc::Sender<()>,
) -> impl std::future::Future<Output = ()> + Send + 'static + use<> {
    let says = SaysWhereDropped(dropped.clone());
    let started = started.clone();
    async move {
        let _says = says;
        let _ = started.send(());
        std::future::pending::<()>().await;
    }
}

/// Cancels, by `shutdown_now` from this thread (in no runtime), the `n` futures of `pool`
/// that told `started` they were polled, once every worker is idle (each future's driver waits
/// in the pool's waiting set); then each says it was dropped inside the pool's runtime, where
/// `tokio::spawn` works.
fn shutdown_now_drops_in(
    runtime: &tokio::runtime::Runtime,
    pool: &Pool,
    n: usize,
    started: &std::sync::mpsc::Receiver<()>,
    dropped: &std::sync::mpsc::Receiver<(Option<tokio::runtime::Id>, bool)>,
) {
    for _ in 0..n {
        started.recv().unwrap();
    }
    // A worker that polled a future is idle only once the future's driver waits in the pool's
    // waiting set: `shutdown_now` then cancels it from this thread.
    while pool.stats().idle_threads < 2 {
        std::thread::yield_now();
    }
    assert_eq!(
        current_runtime(),
        None,
        "this test's thread is in no runtime"
    );
    assert!(pool.shutdown_now().is_empty());
    for _ in 0..n {
        let (dropped_in, spawned) = dropped.recv().unwrap();
        assert_eq!(dropped_in, Some(runtime.handle().id()));
        assert!(spawned, "tokio::spawn from the future's drop");
    }
}

/// A closure lane's future (`spawn_sequential`, `Lane::spawn`) waiting when `shutdown_now` is
/// called from a thread in no runtime is cancelled there, and dropped inside the pool's
/// runtime: its drop may use tokio.
#[test]
fn a_lane_future_cancelled_by_shutdown_now_drops_in_the_bound_runtime() {
    each_cancelled_in_the_bound_runtime(|pool, dropped, started| {
        let lane = pool.lane("held");
        vec![
            pool.spawn_sequential("k", waits_forever(dropped, started))
                .unwrap(),
            lane.spawn(waits_forever(dropped, started)).unwrap(),
        ]
    });
}

/// A future of `spawn` or `spawn_keyed` waiting when `shutdown_now` is called from a thread in
/// no runtime is dropped inside the pool's runtime too.
#[test]
fn a_spawned_future_cancelled_by_shutdown_now_drops_in_the_bound_runtime() {
    each_cancelled_in_the_bound_runtime(|pool, dropped, started| {
        vec![
            pool.spawn(waits_forever(dropped, started)).unwrap(),
            pool.spawn_keyed(["a", "b"], waits_forever(dropped, started))
                .unwrap(),
        ]
    });
}

/// The futures `spawn` submits to a bound pool (each made by `waits_forever`), cancelled by
/// `shutdown_now` from a thread in no runtime (`shutdown_now_drops_in`): each handle says
/// `Cancelled`, and nothing panicked.
fn each_cancelled_in_the_bound_runtime(
    spawn: impl FnOnce(
        &Pool,
        &std::sync::mpsc::Sender<(Option<tokio::runtime::Id>, bool)>,
        &std::sync::mpsc::Sender<()>,
    ) -> Vec<keyway::TaskHandle<()>>,
) {
    let (runtime, pool, panics) = bound_pool();
    let (dropped_tx, dropped) = std::sync::mpsc::channel();
    let (started_tx, started) = std::sync::mpsc::channel();
    let handles = spawn(&pool, &dropped_tx, &started_tx);
    shutdown_now_drops_in(&runtime, &pool, handles.len(), &started, &dropped);
    for handle in handles {
        assert!(matches!(handle.join(), Err(TaskError::Cancelled)));
    }
    assert!(panics.lock().unwrap().is_empty());
}

/// Lane futures (`spawn_sequential`, `Lane::spawn`, `spawn_keyed`) handed back by
/// `shutdown_now` and run on a thread in no runtime are polled in the pool's runtime, as a
/// future of `spawn` is.
#[test]
fn a_lane_future_of_a_bound_pool_run_by_the_caller_enters_its_runtime() {
    let (runtime, pool, release) = bound_pool_with_busy_worker();
    // The only worker is busy: the futures wait in their lanes.
    let lane = pool.lane("held");
    let handles = [
        pool.spawn_sequential("k", sleep_then_say_runtime())
            .unwrap(),
        lane.spawn(sleep_then_say_runtime()).unwrap(),
        pool.spawn_keyed(["a", "b"], sleep_then_say_runtime())
            .unwrap(),
    ];
    let pending = shutdown_now_while_busy(&pool, release);
    assert_eq!(pending.len(), 3);
    assert_eq!(current_runtime(), None);
    for task in pending {
        task.run().unwrap();
    }
    for handle in handles {
        assert_eq!(handle.join().unwrap(), Some(runtime.handle().id()));
    }
}
