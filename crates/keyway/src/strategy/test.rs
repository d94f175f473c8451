//! Tests of the adaptive strategy on real threads.
//!
//! [`TestExecutor`] stands in for `keyway::Pool`: `n` ordinary threads behind one queue for
//! `execute`, and `k` parked reserved threads for `try_execute` (refused when none is idle; a
//! reserved thread is idle again after its task). Every wait is on a condition variable with a
//! generous deadline that fails the test; nothing sleeps to synchronize.

use std::collections::VecDeque;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::*};
use std::sync::Arc;
use std::thread::{self, JoinHandle, ThreadId};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::state::IDLE;
use super::*;

/// How long any wait may take before the test fails (a hang is a failure, not a timeout).
const DEADLINE: Duration = Duration::from_secs(20);

type Job = Box<dyn FnOnce() + Send + 'static>;

/// A value guarded by a mutex, with a condition variable to wait for a predicate on it.
struct Watch<T> {
    value: Mutex<T>,
    changed: Condvar,
}

impl<T> Watch<T> {
    fn new(value: T) -> Self {
        Watch {
            value: Mutex::new(value),
            changed: Condvar::new(),
        }
    }

    fn update<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        let r = f(&mut self.value.lock());
        self.changed.notify_all();
        r
    }

    fn get<R>(&self, f: impl FnOnce(&T) -> R) -> R {
        f(&self.value.lock())
    }

    /// Waits until `pred` holds, at most `timeout`; returns whether it does.
    fn wait(&self, timeout: Duration, mut pred: impl FnMut(&T) -> bool) -> bool {
        let deadline = Instant::now() + timeout;
        let mut value = self.value.lock();
        while !pred(&value) {
            if self.changed.wait_until(&mut value, deadline).timed_out() {
                return pred(&value);
            }
        }
        true
    }
}

/// Which kind of executor thread the current thread is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    Pool,
    Reserved,
    Other,
}

fn role() -> Role {
    // Test executor: "pool-N" / "reserved-N"; keyway's `Pool` named "pool": "pool-N" /
    // "pool-reserved-N".
    match thread::current().name() {
        Some(name) if name.contains("reserved-") => Role::Reserved,
        Some(name) if name.starts_with("pool-") => Role::Pool,
        _ => Role::Other,
    }
}

/// What the HTTP/2 test needs from an executor besides `Executor`: the test executor, or
/// keyway's own `Pool`.
trait Rig: Executor + Clone {
    /// Waits until every reserved thread is parked idle.
    fn reserved_idle(&self) -> bool;
    /// Stops the executor after running what it accepted.
    fn stop(&self);
}

impl Rig for Arc<TestExecutor> {
    fn reserved_idle(&self) -> bool {
        self.wait_reserved_idle()
    }
    fn stop(&self) {
        self.shutdown()
    }
}

impl Rig for crate::Pool {
    fn reserved_idle(&self) -> bool {
        let deadline = Instant::now() + DEADLINE;
        while self.stats().idle_reserved_threads == 0 {
            if Instant::now() > deadline {
                return false;
            }
            // The reserved thread parks on its own schedule: no event to wait on.
            thread::yield_now();
        }
        true
    }
    fn stop(&self) {
        self.shutdown()
    }
}

/// keyway's pool as the strategy's executor: `n` core threads and no auxiliary thread (so the
/// starvation case is real), one reserved thread kept alive.
fn keyway_pool(n: usize) -> crate::Pool {
    let pool = crate::Pool::builder()
        .core_threads(n)
        .max_threads(n)
        .reserved_threads(1)
        .min_reserved_threads(1)
        .thread_name("pool")
        .build()
        .unwrap();
    // Start the reserved thread (lazily started by the first refused attempt).
    let _ = pool.try_execute(|| ());
    assert!(pool.reserved_idle(), "the reserved thread never parked");
    pool
}

struct Queue {
    jobs: VecDeque<Job>,
    closed: bool,
}

struct Reserved {
    idle: Vec<usize>,
    closed: bool,
}

struct Shared {
    queue: Watch<Queue>,
    reserved: Watch<Reserved>,
    slots: Vec<Watch<Option<Job>>>,
    hand_offs: AtomicUsize,
    blocking_runs: AtomicUsize,
}

/// `n` pool threads behind a queue, `k` reserved threads that take a task only when idle.
struct TestExecutor {
    shared: Arc<Shared>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    reserved_threads: usize,
}

fn run_job(job: Job) {
    // Panics in executed tasks are the pool's to report; the test threads survive them.
    let _ = panic::catch_unwind(AssertUnwindSafe(job));
}

impl TestExecutor {
    fn new(pool_threads: usize, reserved_threads: usize) -> Arc<TestExecutor> {
        let shared = Arc::new(Shared {
            queue: Watch::new(Queue {
                jobs: VecDeque::new(),
                closed: false,
            }),
            reserved: Watch::new(Reserved {
                idle: Vec::new(),
                closed: false,
            }),
            slots: (0..reserved_threads).map(|_| Watch::new(None)).collect(),
            hand_offs: AtomicUsize::new(0),
            blocking_runs: AtomicUsize::new(0),
        });
        let mut threads = Vec::new();
        for i in 0..pool_threads {
            let shared = shared.clone();
            let spawned = thread::Builder::new()
                .name(format!("pool-{i}"))
                .spawn(move || loop {
                    let job = {
                        let mut queue = shared.queue.value.lock();
                        loop {
                            if let Some(job) = queue.jobs.pop_front() {
                                break job;
                            }
                            if queue.closed {
                                return;
                            }
                            shared.queue.changed.wait(&mut queue);
                        }
                    };
                    run_job(job);
                });
            threads.push(spawned.unwrap());
        }
        for i in 0..reserved_threads {
            let shared = shared.clone();
            let spawned =
                thread::Builder::new()
                    .name(format!("reserved-{i}"))
                    .spawn(move || loop {
                        shared.reserved.update(|r| r.idle.push(i));
                        let job = {
                            let slot = &shared.slots[i];
                            let mut job = slot.value.lock();
                            loop {
                                if let Some(job) = job.take() {
                                    break job;
                                }
                                if shared.reserved.get(|r| r.closed) {
                                    return;
                                }
                                slot.changed.wait(&mut job);
                            }
                        };
                        run_job(job);
                    });
            threads.push(spawned.unwrap());
        }
        let executor = Arc::new(TestExecutor {
            shared,
            threads: Mutex::new(threads),
            reserved_threads,
        });
        assert!(
            executor.wait_reserved_idle(),
            "reserved threads never parked"
        );
        executor
    }

    /// Waits until every reserved thread is parked idle.
    fn wait_reserved_idle(&self) -> bool {
        let k = self.reserved_threads;
        self.shared.reserved.wait(DEADLINE, |r| r.idle.len() == k)
    }

    /// How many tasks `try_execute` handed to a reserved thread so far.
    fn hand_offs(&self) -> usize {
        self.shared.hand_offs.load(SeqCst)
    }

    /// How many tasks the strategy ran through `run_blocking` so far.
    fn blocking_runs(&self) -> usize {
        self.shared.blocking_runs.load(SeqCst)
    }

    /// Stops intake, lets every queued task run, joins every thread.
    fn shutdown(&self) {
        self.shared.queue.update(|q| q.closed = true);
        self.shared.reserved.update(|r| r.closed = true);
        for slot in &self.shared.slots {
            slot.update(|_| ());
        }
        for t in self.threads.lock().drain(..) {
            t.join().unwrap();
        }
    }
}

impl Executor for TestExecutor {
    fn execute(&self, task: Job) -> Result<(), Job> {
        let mut queue = self.shared.queue.value.lock();
        if queue.closed {
            return Err(task);
        }
        queue.jobs.push_back(task);
        drop(queue);
        self.shared.queue.changed.notify_one();
        Ok(())
    }

    fn try_execute(&self, task: Job) -> Result<(), Job> {
        let i = {
            let mut reserved = self.shared.reserved.value.lock();
            match reserved.idle.pop() {
                Some(i) if !reserved.closed => i,
                Some(i) => {
                    reserved.idle.push(i);
                    return Err(task);
                }
                None => return Err(task),
            }
        };
        self.shared.hand_offs.fetch_add(1, SeqCst);
        self.shared.slots[i].update(|slot| *slot = Some(task));
        Ok(())
    }

    fn run_blocking(&self, task: &mut dyn FnMut()) {
        self.shared.blocking_runs.fetch_add(1, SeqCst);
        task()
    }
}

/// After every run finished: nobody produces, nothing is queued or requested.
fn assert_idle<P: Producer, E: Executor>(strategy: &AdaptiveStrategy<P, E>) {
    let deadline = Instant::now() + DEADLINE;
    // A run that just produced its last task may still be releasing production.
    while strategy.inner.state.load() != IDLE {
        assert!(Instant::now() < deadline, "never idle: {strategy:?}");
        thread::yield_now();
    }
}

// ---------------------------------------------------------------------------------------------
// 1. Starvation: Jetty's HTTP/2 flow-control deadlock.
// ---------------------------------------------------------------------------------------------

/// Frames of one HTTP/2 connection, as the producer parses them.
enum Frame {
    /// A request that writes a response and needs flow-control window to do so: a blocking task
    /// that waits until the window opens.
    Data(usize),
    /// Not a frame: the producer waits here until every pool thread is blocked in a `Data` task.
    Barrier,
    /// Opens the window: a non-blocking task.
    WindowUpdate,
}

/// The connection the frames come from and the stream tasks wait on.
struct Connection {
    frames: Mutex<VecDeque<Frame>>,
    window_open: Watch<bool>,
    /// Stream tasks waiting for the window on pool threads.
    blocked_on_pool: Watch<usize>,
    /// Stream tasks finished, and window updates run.
    finished: Watch<(usize, usize)>,
    failures: Mutex<Vec<String>>,
    pool_threads: usize,
}

impl Connection {
    /// A connection whose producer will parse `frames`, served by `pool_threads` threads.
    fn new(frames: Vec<Frame>, pool_threads: usize) -> Arc<Connection> {
        Arc::new(Connection {
            frames: Mutex::new(frames.into()),
            window_open: Watch::new(false),
            blocked_on_pool: Watch::new(0),
            finished: Watch::new((0, 0)),
            failures: Mutex::new(Vec::new()),
            pool_threads,
        })
    }

    fn fail(&self, why: String) {
        self.failures.lock().push(why);
    }

    /// A stream writes its response: waits for window, as Jetty's HTTP/2 request thread did.
    fn write_stream(&self, i: usize) {
        let on_pool = role() == Role::Pool;
        if on_pool {
            self.blocked_on_pool.update(|n| *n += 1);
        }
        if !self.window_open.wait(DEADLINE, |open| *open) {
            self.fail(format!(
                "stream {i} starved: the window update was never produced"
            ));
        }
        if on_pool {
            self.blocked_on_pool.update(|n| *n -= 1);
        }
        self.finished.update(|f| f.0 += 1);
    }
}

struct Http2Producer(Arc<Connection>);

impl Producer for Http2Producer {
    type Task = DeclaredTask;

    fn produce(&mut self) -> Option<DeclaredTask> {
        let conn = &self.0;
        loop {
            let frame = conn.frames.lock().pop_front()?;
            match frame {
                Frame::Barrier => {
                    let n = conn.pool_threads;
                    if !conn.blocked_on_pool.wait(DEADLINE, |&blocked| blocked == n) {
                        conn.fail(format!("the {n} pool threads never all blocked"));
                    }
                }
                Frame::Data(i) => {
                    let conn = conn.clone();
                    return Some(DeclaredTask::boxed(InvocationType::Blocking, move || {
                        conn.write_stream(i)
                    }));
                }
                Frame::WindowUpdate => {
                    let conn = conn.clone();
                    return Some(DeclaredTask::boxed(
                        InvocationType::NonBlocking,
                        move || {
                            conn.window_open.update(|open| *open = true);
                            conn.finished.update(|f| f.1 += 1);
                        },
                    ));
                }
            }
        }
    }
}

/// Where production is started.
#[derive(Clone, Copy, Debug)]
enum Drive {
    /// `produce()` on the test thread.
    Caller,
    /// `dispatch()` from the test thread.
    Dispatch,
    /// `produce()` from a task running on a pool thread (as Jetty's selector task does).
    PoolThread,
}

/// When the window update arrives.
#[derive(Clone, Copy, Debug)]
enum Update {
    /// Parsed right after the data frames (and after every pool thread blocked).
    Queued,
    /// Arrives after production ran dry, while every pool thread is blocked; the I/O thread
    /// calls `produce()`.
    LateProduce,
    /// As `LateProduce`, but the I/O thread calls `dispatch()`.
    LateDispatch,
}

/// `n` pool threads and one reserved thread; `n + 1` blocking stream tasks fill every pool
/// thread (one extra waits in the queue), and only the window update, produced after them, lets
/// them finish.
fn http2_flow_control(n: usize, drive: Drive, update: Update) {
    http2_flow_control_on(TestExecutor::new(n, 1), n, drive, update)
}

fn http2_flow_control_on<R: Rig>(exec: R, n: usize, drive: Drive, update: Update) {
    let conn = Arc::new(Connection {
        frames: Mutex::new((0..=n).map(Frame::Data).collect()),
        window_open: Watch::new(false),
        blocked_on_pool: Watch::new(0),
        finished: Watch::new((0, 0)),
        failures: Mutex::new(Vec::new()),
        pool_threads: n,
    });
    if let Update::Queued = update {
        let mut frames = conn.frames.lock();
        frames.push_back(Frame::Barrier);
        frames.push_back(Frame::WindowUpdate);
    }
    let strategy = AdaptiveStrategy::new(Http2Producer(conn.clone()), exec.clone());
    let started = Instant::now();
    let io_thread = match drive {
        Drive::Caller => {
            // The caller consumes the first stream itself (EPC), so produce on a helper thread
            // standing for the I/O thread; the test thread keeps watch.
            let strategy = strategy.clone();
            Some(thread::spawn(move || {
                let _ = strategy.produce();
            }))
        }
        Drive::Dispatch => {
            strategy.dispatch().unwrap();
            None
        }
        Drive::PoolThread => {
            let strategy = strategy.clone();
            exec.execute(Box::new(move || {
                let _ = strategy.produce();
            }))
            .unwrap_or_else(|_| panic!("refused"));
            None
        }
    };
    match update {
        Update::Queued => {}
        Update::LateProduce | Update::LateDispatch => {
            assert!(
                conn.blocked_on_pool.wait(DEADLINE, |&b| b == n),
                "{n} pool threads never all blocked ({drive:?}, {update:?})"
            );
            conn.frames.lock().push_back(Frame::WindowUpdate);
            if let Update::LateProduce = update {
                let _ = strategy.produce();
            } else {
                // dispatch() prefers an idle reserved thread; wait for the one that produced
                // the data frames to be back, as it will be on a quiet server.
                assert!(exec.reserved_idle());
                assert_eq!(strategy.dispatch().unwrap(), DispatchOutcome::Started);
            }
        }
    }
    let all_done = conn.finished.wait(DEADLINE * 2, |&(streams, updates)| {
        streams == n + 1 && updates == 1
    });
    let failures = conn.failures.lock().clone();
    assert!(
        all_done && failures.is_empty(),
        "starved with {n} pool threads ({drive:?}, {update:?}) after {:?}: {failures:?}; {strategy:?}",
        started.elapsed()
    );
    if let Some(t) = io_thread {
        t.join().unwrap();
    }
    assert_idle(&strategy);
    let counts = strategy.counts();
    assert_eq!(counts.total(), n as u64 + 2, "{counts}");
    assert_eq!(
        counts.produce_consume, 1,
        "the window update runs in place: {counts}"
    );
    exec.stop();
}

fn starvation(n: usize) {
    for drive in [Drive::Caller, Drive::Dispatch, Drive::PoolThread] {
        http2_flow_control(n, drive, Update::Queued);
    }
    for update in [Update::LateProduce, Update::LateDispatch] {
        http2_flow_control(n, Drive::PoolThread, update);
    }
}

/// The same HTTP/2 cases on keyway's own `Pool` of 1, 2 and 4 core threads (no auxiliary
/// thread allowed, one reserved thread).
#[test]
fn starvation_http2_window_update_on_keyway_pool() {
    for n in [1, 2, 4] {
        for drive in [Drive::Caller, Drive::Dispatch, Drive::PoolThread] {
            http2_flow_control_on(keyway_pool(n), n, drive, Update::Queued);
        }
        for update in [Update::LateProduce, Update::LateDispatch] {
            http2_flow_control_on(keyway_pool(n), n, Drive::PoolThread, update);
        }
    }
}

/// Never starve, one pool thread.
#[test]
fn starvation_http2_window_update_pool_of_1() {
    starvation(1);
}

/// Never starve, two pool threads.
#[test]
fn starvation_http2_window_update_pool_of_2() {
    starvation(2);
}

/// Never starve, four pool threads.
#[test]
fn starvation_http2_window_update_pool_of_4() {
    starvation(4);
}

/// A bounded pool (`capacity(2)`, two threads, no reserved thread) refuses the
/// third blocking stream task while the window update is still unproduced. The owner must not
/// run the refused task while it owns production (Rule 7d): it keeps producing — the window
/// update runs in place — and runs the refused task only after it released production.
#[test]
fn refused_blocking_task_never_runs_while_owning_production() {
    let pool = crate::Pool::builder()
        .core_threads(2)
        .max_threads(2)
        .capacity(2)
        .reserved_threads(0)
        .thread_name("pool")
        .build()
        .unwrap();
    let conn = Connection::new(
        vec![
            Frame::Data(0),
            Frame::Data(1),
            Frame::Data(2),
            Frame::WindowUpdate,
        ],
        2,
    );
    let strategy = AdaptiveStrategy::new(Http2Producer(conn.clone()), pool.clone());
    let io = {
        let strategy = strategy.clone();
        thread::spawn(move || strategy.produce())
    };
    let all_done = conn
        .finished
        .wait(DEADLINE, |&(streams, updates)| streams == 3 && updates == 1);
    let failures = conn.failures.lock().clone();
    assert!(
        all_done && failures.is_empty(),
        "deadlock with a refusing pool: {:?} done; {failures:?}; {strategy:?}",
        *conn.finished.value.lock()
    );
    assert_eq!(io.join().unwrap(), ProduceOutcome::Exhausted);
    assert_idle(&strategy);
    let counts = strategy.counts();
    assert_eq!(counts.refused, 1, "{counts}");
    assert_eq!(counts.produce_consume, 1, "{counts}");
    pool.shutdown();
}

/// The pool-thread drive really puts a pool thread in EPC: the thread that produced the first
/// stream consumes it after handing production to the reserved thread.
#[test]
fn starvation_run_from_a_pool_thread_uses_epc() {
    let exec = TestExecutor::new(2, 1);
    let conn = Connection::new(
        vec![
            Frame::Data(0),
            Frame::Data(1),
            Frame::Barrier,
            Frame::WindowUpdate,
        ],
        2,
    );
    let strategy = AdaptiveStrategy::new(Http2Producer(conn.clone()), exec.clone());
    let s = strategy.clone();
    exec.execute(Box::new(move || {
        let _ = s.produce();
    }))
    .unwrap_or_else(|_| panic!("refused"));
    assert!(conn.finished.wait(DEADLINE, |&f| f == (2, 1)));
    assert!(conn.failures.lock().is_empty());
    assert_idle(&strategy);
    let counts = strategy.counts();
    assert_eq!(
        (
            counts.execute_produce_consume,
            counts.produce_execute_consume,
            counts.produce_consume
        ),
        (1, 1, 1),
        "{counts}"
    );
    exec.shutdown();
}

// ---------------------------------------------------------------------------------------------
// 2. Production is never concurrent.
// ---------------------------------------------------------------------------------------------

/// A task that counts itself; its type is chosen by the producer.
struct Counted {
    invocation_type: InvocationType,
    consumed: Arc<AtomicU64>,
}

impl Invocable for Counted {
    fn invocation_type(&self) -> InvocationType {
        self.invocation_type
    }

    fn run(self) {
        self.consumed.fetch_add(1, Relaxed);
    }
}

/// Produces announced items, and records any overlap of two `produce` calls.
struct Instrumented {
    available: Arc<AtomicU64>,
    produced: u64,
    inside: Arc<AtomicBool>,
    overlaps: Arc<AtomicU64>,
    consumed: Arc<AtomicU64>,
}

impl Producer for Instrumented {
    type Task = Counted;

    fn produce(&mut self) -> Option<Counted> {
        if self.inside.swap(true, SeqCst) {
            self.overlaps.fetch_add(1, SeqCst);
        }
        let taken = self
            .available
            .fetch_update(SeqCst, SeqCst, |n| n.checked_sub(1))
            .is_ok();
        // Widen the window in which an overlapping call would be seen.
        for _ in 0..4 {
            std::hint::spin_loop();
        }
        if !self.inside.swap(false, SeqCst) {
            self.overlaps.fetch_add(1, SeqCst);
        }
        if !taken {
            return None;
        }
        let i = self.produced;
        self.produced += 1;
        let invocation_type = match i % 64 {
            0 => InvocationType::Blocking,
            1 => InvocationType::Either,
            _ => InvocationType::NonBlocking,
        };
        Some(Counted {
            invocation_type,
            consumed: self.consumed.clone(),
        })
    }
}

/// 4 threads announce 1,000,000 tasks and call `dispatch()` or
/// `produce()`; `produce` calls never overlap, and every task is consumed (no lost wake-up).
#[test]
fn production_is_never_concurrent() {
    const TASKS: u64 = 1_000_000;
    const THREADS: u64 = 4;
    const BATCH: u64 = 50;
    let exec = TestExecutor::new(2, 2);
    let available = Arc::new(AtomicU64::new(0));
    let overlaps = Arc::new(AtomicU64::new(0));
    let consumed = Arc::new(AtomicU64::new(0));
    let strategy = AdaptiveStrategy::new(
        Instrumented {
            available: available.clone(),
            produced: 0,
            inside: Arc::new(AtomicBool::new(false)),
            overlaps: overlaps.clone(),
            consumed: consumed.clone(),
        },
        exec.clone(),
    );
    let drivers: Vec<_> = (0..THREADS)
        .map(|t| {
            let strategy = strategy.clone();
            let available = available.clone();
            thread::spawn(move || {
                let mut rng = SmallRng::seed_from_u64(t);
                for _ in 0..TASKS / THREADS / BATCH {
                    available.fetch_add(BATCH, SeqCst);
                    if rng.gen_bool(0.5) {
                        strategy.dispatch().unwrap();
                    } else {
                        let _ = strategy.produce();
                    }
                }
            })
        })
        .collect();
    for d in drivers {
        d.join().unwrap();
    }
    let deadline = Instant::now() + DEADLINE * 3;
    while consumed.load(SeqCst) < TASKS && Instant::now() < deadline {
        thread::yield_now();
    }
    assert_eq!(consumed.load(SeqCst), TASKS, "tasks lost: {strategy:?}");
    assert_eq!(overlaps.load(SeqCst), 0, "produce() calls overlapped");
    assert_idle(&strategy);
    let counts = strategy.counts();
    assert_eq!(counts.total(), TASKS, "{counts}");
    assert!(
        counts.execute_produce_consume > 0,
        "hand-offs exercised: {counts}"
    );
    exec.shutdown();
}

// ---------------------------------------------------------------------------------------------
// 3. Counters: each invocation type goes the way the strategy's rules say (strategy/README.md).
// ---------------------------------------------------------------------------------------------

/// What a task saw when it ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Seen {
    thread: ThreadId,
    role: Role,
    non_blocking: bool,
}

fn seen() -> Seen {
    Seen {
        thread: thread::current().id(),
        role: role(),
        non_blocking: is_non_blocking_invocation(),
    }
}

/// A producer of tasks pushed by the test; every task logs what it saw, and every `produce`
/// call logs the role of the thread that made it.
#[derive(Clone)]
struct Scripted {
    tasks: Arc<Mutex<VecDeque<InvocationType>>>,
    log: Arc<Watch<Vec<Seen>>>,
    producers: Arc<Mutex<Vec<Role>>>,
}

impl Scripted {
    fn new() -> Self {
        Scripted {
            tasks: Arc::default(),
            log: Arc::new(Watch::new(Vec::new())),
            producers: Arc::default(),
        }
    }

    fn push(&self, invocation_type: InvocationType, n: usize) {
        self.tasks
            .lock()
            .extend(std::iter::repeat_n(invocation_type, n));
    }

    fn wait_for(&self, n: usize) -> Vec<Seen> {
        assert!(self.log.wait(DEADLINE, |log| log.len() >= n), "tasks lost");
        self.log.get(Vec::clone)
    }
}

impl Producer for Scripted {
    type Task = DeclaredTask;

    fn produce(&mut self) -> Option<DeclaredTask> {
        self.producers.lock().push(role());
        let invocation_type = self.tasks.lock().pop_front()?;
        let log = self.log.clone();
        Some(DeclaredTask::boxed(invocation_type, move || {
            log.update(|l| l.push(seen()))
        }))
    }
}

/// Counters: a run of only non-blocking tasks is all PC, on the producing
/// thread, whoever that is.
#[test]
fn non_blocking_tasks_all_go_pc() {
    let exec = TestExecutor::new(2, 1);
    let script = Scripted::new();
    let strategy = AdaptiveStrategy::new(script.clone(), exec.clone());
    script.push(InvocationType::NonBlocking, 1000);
    assert_eq!(strategy.produce(), ProduceOutcome::Exhausted);
    let me = thread::current().id();
    assert!(script
        .wait_for(1000)
        .iter()
        .all(|s| s.thread == me && !s.non_blocking));
    assert_eq!(
        strategy.counts(),
        ModeCounts {
            produce_consume: 1000,
            ..ModeCounts::default()
        }
    );
    // Dispatched: produced and consumed on the one reserved thread that took production.
    script.push(InvocationType::NonBlocking, 1000);
    assert_eq!(strategy.dispatch().unwrap(), DispatchOutcome::Started);
    let log = script.wait_for(2000);
    assert!(log[1000..]
        .iter()
        .all(|s| s.role == Role::Reserved && s.thread == log[1000].thread));
    assert_idle(&strategy);
    assert_eq!(strategy.counts().produce_consume, 2000);
    assert_eq!(strategy.counts().total(), 2000);
    exec.shutdown();
}

/// Blocking tasks with an idle reserved thread go EPC: each runs on the thread that produced it
/// (the caller), and production goes on on the reserved thread.
#[test]
fn blocking_with_idle_reserved_thread_goes_epc() {
    let exec = TestExecutor::new(1, 1);
    let script = Scripted::new();
    let strategy = AdaptiveStrategy::new(script.clone(), exec.clone());
    let me = thread::current().id();
    for round in 1..=20 {
        assert!(exec.wait_reserved_idle());
        assert_idle(&strategy);
        script.producers.lock().clear();
        script.push(InvocationType::Blocking, 1);
        let outcome = strategy.produce();
        assert!(
            matches!(
                outcome,
                ProduceOutcome::HandedOff | ProduceOutcome::Exhausted
            ),
            "{outcome:?}"
        );
        let log = script.wait_for(round);
        assert_eq!(
            log[round - 1].thread,
            me,
            "an EPC task runs where it was produced"
        );
        assert!(!log[round - 1].non_blocking, "an EPC task may block");
        assert_idle(&strategy);
        let producers = script.producers.lock().clone();
        assert_eq!(producers[0], Role::Other, "{producers:?}");
        assert!(producers.contains(&Role::Reserved), "{producers:?}");
    }
    assert_eq!(
        strategy.counts(),
        ModeCounts {
            execute_produce_consume: 20,
            ..ModeCounts::default()
        }
    );
    assert_eq!(exec.hand_offs(), 20);
    assert_eq!(
        exec.blocking_runs(),
        20,
        "EPC tasks run through Executor::run_blocking"
    );
    exec.shutdown();
}

/// Blocking tasks with no reserved thread idle (none at all, or the only one busy) go PEC and
/// run on pool threads.
#[test]
fn blocking_without_idle_reserved_thread_goes_pec() {
    for reserved in [0, 1] {
        let exec = TestExecutor::new(2, reserved);
        let release = Arc::new(Watch::new(false));
        if reserved == 1 {
            let release = release.clone();
            exec.try_execute(Box::new(move || {
                assert!(release.wait(DEADLINE, |&r| r));
            }))
            .unwrap_or_else(|_| panic!("the reserved thread was idle"));
        }
        let script = Scripted::new();
        let strategy = AdaptiveStrategy::new(script.clone(), exec.clone());
        script.push(InvocationType::Blocking, 100);
        assert_eq!(strategy.produce(), ProduceOutcome::Exhausted);
        let log = script.wait_for(100);
        assert!(log.iter().all(|s| s.role == Role::Pool), "{log:?}");
        assert!(script.producers.lock().iter().all(|&r| r == Role::Other));
        assert_eq!(
            strategy.counts(),
            ModeCounts {
                produce_execute_consume: 100,
                ..ModeCounts::default()
            }
        );
        release.update(|r| *r = true);
        exec.shutdown();
    }
}

/// `Either` tasks with no reserved thread idle go PIC: in place, in non-blocking mode.
#[test]
fn either_without_reserved_thread_goes_pic_non_blocking() {
    let exec = TestExecutor::new(1, 0);
    let script = Scripted::new();
    let strategy = AdaptiveStrategy::new(script.clone(), exec.clone());
    script.push(InvocationType::Either, 100);
    assert_eq!(strategy.produce(), ProduceOutcome::Exhausted);
    let me = thread::current().id();
    let log = script.wait_for(100);
    assert!(
        log.iter().all(|s| s.thread == me && s.non_blocking),
        "{log:?}"
    );
    assert!(!is_non_blocking_invocation(), "the mode ends with the task");
    assert_eq!(
        strategy.counts(),
        ModeCounts {
            produce_invoke_consume: 100,
            ..ModeCounts::default()
        }
    );
    exec.shutdown();
}

/// An `Either` task with an idle reserved thread goes EPC, and runs in blocking mode.
#[test]
fn either_with_idle_reserved_thread_goes_epc_blocking_mode() {
    let exec = TestExecutor::new(1, 1);
    let script = Scripted::new();
    let strategy = AdaptiveStrategy::new(script.clone(), exec.clone());
    script.push(InvocationType::Either, 1);
    let _ = strategy.produce();
    let log = script.wait_for(1);
    assert_eq!(log[0].thread, thread::current().id());
    assert!(!log[0].non_blocking);
    assert_idle(&strategy);
    assert_eq!(strategy.counts().execute_produce_consume, 1);
    assert_eq!(strategy.counts().total(), 1);
    exec.shutdown();
}

/// A mix: each type goes its way, and the counts add up.
#[test]
fn counts_add_up_per_mode() {
    let exec = TestExecutor::new(2, 0);
    let script = Scripted::new();
    let strategy = AdaptiveStrategy::new(script.clone(), exec.clone());
    for _ in 0..10 {
        script.push(InvocationType::NonBlocking, 3);
        script.push(InvocationType::Blocking, 2);
        script.push(InvocationType::Either, 1);
    }
    let _ = strategy.produce();
    script.wait_for(60);
    let counts = strategy.counts();
    assert_eq!(
        ConsumeMode::ALL.map(|m| counts.get(m)),
        [30, 0, 10, 20],
        "PC EPC PIC PEC: {counts}"
    );
    assert_eq!(
        counts.to_string(),
        "PC 30 EPC 0 PIC 10 PEC 20 (refused 0, panicked 0)"
    );
    exec.shutdown();
}

/// Chained strategies: an outer strategy runs an `Either` task in non-blocking mode (PIC); the
/// inner strategy it runs sees that mode and, though a reserved thread is idle, neither blocks
/// in place nor hands off: `Blocking` goes PEC, `Either` PIC (Rule 8).
#[test]
fn chained_strategy_in_non_blocking_mode_never_blocks() {
    let inner_exec = TestExecutor::new(2, 1);
    let inner_script = Scripted::new();
    let inner = AdaptiveStrategy::new(inner_script.clone(), inner_exec.clone());
    inner_script.push(InvocationType::Blocking, 5);
    inner_script.push(InvocationType::Either, 5);
    inner_script.push(InvocationType::NonBlocking, 5);

    let outer_exec = TestExecutor::new(1, 0);
    let mut once = Some(DeclaredTask::either({
        let inner = inner.clone();
        move || {
            assert!(is_non_blocking_invocation());
            assert_eq!(inner.produce(), ProduceOutcome::Exhausted);
        }
    }));
    let outer = AdaptiveStrategy::new(move || once.take(), outer_exec.clone());
    let _ = outer.produce();
    assert_eq!(outer.counts().produce_invoke_consume, 1);
    let log = inner_script.wait_for(15);
    let counts = inner.counts();
    assert_eq!(
        (
            counts.produce_execute_consume,
            counts.produce_invoke_consume,
            counts.produce_consume
        ),
        (5, 5, 5),
        "{counts}"
    );
    assert_eq!(
        inner_exec.hand_offs(),
        0,
        "a non-blocking thread never hands off"
    );
    // The blocking ones ran on the pool, the others in place, all in non-blocking mode.
    let on_pool = log
        .iter()
        .filter(|s| s.role == Role::Pool && !s.non_blocking);
    let in_place = log
        .iter()
        .filter(|s| s.role == Role::Other && s.non_blocking);
    assert_eq!((on_pool.count(), in_place.count()), (5, 10), "{log:?}");
    inner_exec.shutdown();
    outer_exec.shutdown();
}

// ---------------------------------------------------------------------------------------------
// 4. A dispatch() while producing is not lost.
// ---------------------------------------------------------------------------------------------

/// A producer over a shared queue. When `race` is armed, the first `produce` that finds the
/// queue empty stops just before returning `None` and lets the test add data and wake
/// production, right in the window where the owner is about to go idle.
struct Racy {
    queue: Arc<Mutex<VecDeque<InvocationType>>>,
    race: Arc<Watch<RaceStep>>,
    consumed: Arc<Watch<usize>>,
    rng: SmallRng,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RaceStep {
    Off,
    Armed,
    /// The producer saw the queue empty and waits.
    SawEmpty,
    /// The test added data and woke production.
    Woken,
}

impl Producer for Racy {
    type Task = DeclaredTask;

    fn produce(&mut self) -> Option<DeclaredTask> {
        // Random short delays move the race window around: before looking at the queue, and
        // between finding it empty and returning `None` (the window a lost wake-up falls in).
        for _ in 0..self.rng.gen_range(0..64) {
            std::hint::spin_loop();
        }
        let next = self.queue.lock().pop_front();
        let Some(invocation_type) = next else {
            for _ in 0..self.rng.gen_range(0..512) {
                std::hint::spin_loop();
            }
            if self.race.get(|s| *s == RaceStep::Armed) {
                self.race.update(|s| *s = RaceStep::SawEmpty);
                assert!(self.race.wait(DEADLINE, |s| *s == RaceStep::Woken));
            }
            return None;
        };
        let consumed = self.consumed.clone();
        Some(DeclaredTask::boxed(invocation_type, move || {
            consumed.update(|c| *c += 1)
        }))
    }
}

/// Forced: the owner has seen the queue empty and is about to go idle
/// when data arrives and `dispatch()` (or `produce()`) is called; the call must find production
/// busy and the new item must still be consumed.
#[test]
fn wake_up_in_the_going_idle_window_is_not_lost() {
    let exec = TestExecutor::new(2, 1);
    for round in 0..200u64 {
        let queue = Arc::new(Mutex::new(VecDeque::from([InvocationType::NonBlocking])));
        let race = Arc::new(Watch::new(RaceStep::Armed));
        let consumed = Arc::new(Watch::new(0));
        let producer = Racy {
            queue: queue.clone(),
            race: race.clone(),
            consumed: consumed.clone(),
            rng: SmallRng::seed_from_u64(round),
        };
        let strategy = AdaptiveStrategy::new(producer, exec.clone());
        assert_eq!(strategy.dispatch().unwrap(), DispatchOutcome::Started);
        assert!(race.wait(DEADLINE, |s| *s == RaceStep::SawEmpty));
        queue.lock().push_back(InvocationType::NonBlocking);
        if round % 2 == 0 {
            assert_eq!(strategy.dispatch().unwrap(), DispatchOutcome::Signalled);
        } else {
            assert_eq!(strategy.produce(), ProduceOutcome::Signalled);
        }
        race.update(|s| *s = RaceStep::Woken);
        assert!(
            consumed.wait(DEADLINE, |&c| c == 2),
            "round {round}: the wake-up was lost: {strategy:?}"
        );
        assert_idle(&strategy);
        assert!(exec.wait_reserved_idle());
    }
    exec.shutdown();
}

/// Random: one thread adds data in bursts and wakes production with
/// `dispatch()` or `produce()` at random moments, while production runs on other threads with
/// random delays; every item is consumed, for many seeds.
#[test]
fn dispatch_while_producing_is_not_lost_many_seeds() {
    let exec = TestExecutor::new(2, 1);
    for seed in 0..400u64 {
        let mut rng = SmallRng::seed_from_u64(seed);
        let queue = Arc::new(Mutex::new(VecDeque::new()));
        let consumed = Arc::new(Watch::new(0));
        let producer = Racy {
            queue: queue.clone(),
            race: Arc::new(Watch::new(RaceStep::Off)),
            consumed: consumed.clone(),
            rng: SmallRng::seed_from_u64(seed ^ 0x5eed),
        };
        let strategy = AdaptiveStrategy::new(producer, exec.clone());
        let mut pushed = 0;
        for _ in 0..rng.gen_range(1..20) {
            for _ in 0..rng.gen_range(1..4) {
                let invocation_type = match rng.gen_range(0..8) {
                    0 => InvocationType::Blocking,
                    1 => InvocationType::Either,
                    _ => InvocationType::NonBlocking,
                };
                queue.lock().push_back(invocation_type);
                pushed += 1;
            }
            for _ in 0..rng.gen_range(0..256) {
                std::hint::spin_loop();
            }
            if rng.gen_bool(0.8) {
                strategy.dispatch().unwrap();
            } else {
                let _ = strategy.produce();
            }
        }
        assert!(
            consumed.wait(DEADLINE, |&c| c == pushed),
            "seed {seed}: {} of {pushed} consumed: {strategy:?}",
            consumed.get(|c| *c)
        );
        assert_idle(&strategy);
    }
    exec.shutdown();
}

// ---------------------------------------------------------------------------------------------
// Panics, refusals.
// ---------------------------------------------------------------------------------------------

/// A task that panics in place is counted, and production goes on with the next task.
#[test]
fn panicking_task_in_place_is_counted_and_production_goes_on() {
    let exec = TestExecutor::new(1, 0);
    let ran = Arc::new(AtomicUsize::new(0));
    let mut tasks: VecDeque<DeclaredTask> = VecDeque::new();
    tasks.push_back(DeclaredTask::boxed(InvocationType::NonBlocking, || {
        panic!("boom")
    }));
    tasks.push_back(DeclaredTask::boxed(InvocationType::Either, || {
        panic!("boom")
    }));
    for _ in 0..3 {
        let ran = ran.clone();
        tasks.push_back(DeclaredTask::boxed(
            InvocationType::NonBlocking,
            move || {
                ran.fetch_add(1, SeqCst);
            },
        ));
    }
    let strategy = AdaptiveStrategy::new(move || tasks.pop_front(), exec.clone());
    assert_eq!(strategy.produce(), ProduceOutcome::Exhausted);
    assert_eq!(ran.load(SeqCst), 3);
    let counts = strategy.counts();
    assert_eq!(
        (
            counts.panicked,
            counts.produce_consume,
            counts.produce_invoke_consume
        ),
        (2, 4, 1)
    );
    assert!(
        !is_non_blocking_invocation(),
        "the mode is restored after a panic"
    );
    assert_idle(&strategy);
    exec.shutdown();
}

/// A producer that panics releases production: the panic reaches the caller, and the strategy
/// produces again afterwards.
#[test]
fn panicking_producer_releases_production() {
    let exec = TestExecutor::new(1, 0);
    let mut calls = 0;
    let strategy = AdaptiveStrategy::new(
        move || {
            calls += 1;
            match calls {
                1 => panic!("producer broke"),
                2 => Some(DeclaredTask::non_blocking(|| ())),
                _ => None,
            }
        },
        exec.clone(),
    );
    let s = strategy.clone();
    let caught = panic::catch_unwind(AssertUnwindSafe(move || s.produce()));
    assert!(caught.is_err(), "the producer's panic propagates");
    assert_idle(&strategy);
    assert_eq!(strategy.produce(), ProduceOutcome::Exhausted);
    assert_eq!(strategy.counts().produce_consume, 1);
    exec.shutdown();
}

/// After the executor shuts down: a PEC task it refuses runs in place (not lost) and is counted
/// `refused`; `dispatch()` reports the refusal and leaves production free.
#[test]
fn refusals_lose_nothing() {
    let exec = TestExecutor::new(1, 0);
    exec.shutdown();
    let script = Scripted::new();
    let strategy = AdaptiveStrategy::new(script.clone(), exec.clone());
    script.push(InvocationType::Blocking, 3);
    assert!(strategy.dispatch().is_err());
    assert_idle(&strategy);
    assert_eq!(strategy.produce(), ProduceOutcome::Exhausted);
    let me = thread::current().id();
    assert!(script.wait_for(3).iter().all(|s| s.thread == me));
    let counts = strategy.counts();
    assert_eq!((counts.produce_execute_consume, counts.refused), (3, 3));
    assert!(format!("{strategy:?}").contains("IDLE"));
}
