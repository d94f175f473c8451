//! Random builder settings and random sequences of public API calls on one pool, then an exact
//! account of every task: accepted = ran + cancelled + coalesced + handed back (dropped).
//!
//! See `fuzz/README.md` for how to run it and which input classes an environment variable
//! turns off.

#![no_main]

use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arbitrary::Arbitrary;
use keyway::{PendingTask, Pool, TaskError, TaskHandle};
use libfuzzer_sys::fuzz_target;

// ---- input -------------------------------------------------------------------------------------

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Span {
    Zero,
    Millis(u8),
    Max,
}

impl Span {
    fn get(self) -> Duration {
        match self {
            Span::Zero => Duration::ZERO,
            Span::Millis(ms) => Duration::from_millis(u64::from(ms % 20) + 1),
            Span::Max => Duration::MAX,
        }
    }
}

#[derive(Arbitrary, Debug)]
enum Count {
    Small(u8),
    Huge(usize),
    Max,
}

impl Count {
    fn get(&self, small_max: usize) -> usize {
        match self {
            Count::Small(n) => usize::from(*n) % (small_max + 1),
            // Huge: what the builder must refuse. Moderate values (up to a million) would
            // start that many threads and slow every run down: kept small instead.
            Count::Huge(n) if *n < 1 << 20 => n % (small_max + 1),
            Count::Huge(n) => *n,
            Count::Max => usize::MAX,
        }
    }
}

/// Every knob, each optional (default when `None`).
#[derive(Arbitrary, Debug)]
struct Settings {
    core_threads: Option<Count>,
    max_threads: Option<Count>,
    keep_alive: Option<Span>,
    core_growth_after: Option<Count>,
    monitor_period: Option<Span>,
    blocked_after: Option<Span>,
    lane_batch: Option<Count>,
    capacity: Option<Count>,
    reserved_threads: Option<Count>,
    min_reserved_threads: Option<Count>,
    reserved_idle_timeout: Option<Span>,
    panic_hook: bool,
}

/// A context key whose `Hash` or `Drop` may panic.
#[derive(Arbitrary, Debug, Clone, Copy)]
struct KeySpec {
    id: u8,
    hash_panics: bool,
    drop_panics: bool,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Body {
    /// Returns at once.
    Quick,
    /// Panics.
    Panic,
    /// Panics with a payload whose drop panics too (handle-less tasks only: a handle's joiner
    /// would own the payload).
    PanicBombPayload,
    /// Spins a little.
    Spin(u8),
    /// Calls `shutdown()` on its own pool.
    Shutdown,
    /// Calls `shutdown_now()` on its own pool and keeps what it gets back.
    ShutdownNow,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Kind {
    Execute,
    Submit,
    ExecuteSequential(KeySpec),
    SubmitSequential(KeySpec),
    SubmitCoalescing(KeySpec),
    ExecuteKeyed(KeySpec, KeySpec),
    SubmitKeyed(KeySpec, KeySpec),
    LaneHandle(u8),
    TryExecute,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Op {
    /// Submit a task; `detach` drops its handle at once (its result, if `result_bomb`, then
    /// panics when the pool drops it).
    Submit {
        kind: Kind,
        body: Body,
        detach: bool,
        result_bomb: bool,
    },
    Cancel(u8),
    Join(u8, Span),
    Shutdown,
    ShutdownNow,
    Stats,
}

#[derive(Arbitrary, Debug)]
struct Input {
    settings: Settings,
    ops: Vec<Op>,
    /// Handed-back tasks: run them (true) or drop them (false).
    run_handed_back: bool,
}

// ---- probes ------------------------------------------------------------------------------------

#[derive(Default)]
struct Ledger {
    created: AtomicUsize,
    ran: AtomicUsize,
    unrun: AtomicUsize,
    /// Unrun tasks that had no handle to tell why (handle-less or detached).
    unrun_without_handle: AtomicUsize,
}

/// Goes with each task's closure: records whether it ran, and its fate when dropped.
struct Probe {
    ledger: Arc<Ledger>,
    ran: bool,
    has_handle: bool,
}

impl Probe {
    fn new(ledger: &Arc<Ledger>, has_handle: bool) -> Probe {
        ledger.created.fetch_add(1, Ordering::SeqCst);
        Probe {
            ledger: ledger.clone(),
            ran: false,
            has_handle,
        }
    }
}

impl Drop for Probe {
    fn drop(&mut self) {
        if self.ran {
            self.ledger.ran.fetch_add(1, Ordering::SeqCst);
        } else {
            self.ledger.unrun.fetch_add(1, Ordering::SeqCst);
            if !self.has_handle {
                self.ledger
                    .unrun_without_handle
                    .fetch_add(1, Ordering::SeqCst);
            }
        }
    }
}

/// A key whose `Hash`/`Drop` panic on request.
struct Key {
    spec: KeySpec,
}

impl PartialEq for Key {
    fn eq(&self, other: &Self) -> bool {
        self.spec.id == other.spec.id
    }
}

impl Eq for Key {}

impl Hash for Key {
    fn hash<H: Hasher>(&self, state: &mut H) {
        if self.spec.hash_panics {
            panic!("fuzz: key hash panics");
        }
        self.spec.id.hash(state);
    }
}

impl Drop for Key {
    fn drop(&mut self) {
        if self.spec.drop_panics && !std::thread::panicking() {
            panic!("fuzz: key drop panics");
        }
    }
}

/// A panic payload whose drop panics (the pool drops it when it reports the panic).
struct BombPayload;

impl Drop for BombPayload {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            panic!("fuzz: payload drop panics");
        }
    }
}

/// A result whose drop may panic.
struct Out(bool);

impl Drop for Out {
    fn drop(&mut self) {
        if self.0 && !std::thread::panicking() {
            panic!("fuzz: result drop panics");
        }
    }
}

// ---- the run -----------------------------------------------------------------------------------

/// Input classes that can be turned off while a known defect they trip is being fixed
/// (fuzz/README.md; the defects they tripped are fixed, the switches stay): keys whose `Hash`
/// panics, keys whose `Drop` panics, `shutdown_now` called from a lane task (single- or
/// multi-key).
fn allowed(env: &str) -> bool {
    std::env::var_os(env).is_none()
}

fn key(spec: KeySpec) -> Key {
    let mut spec = spec;
    spec.id %= 8;
    spec.hash_panics &= allowed("KEYWAY_FUZZ_NO_HASH_PANICS");
    spec.drop_panics &= allowed("KEYWAY_FUZZ_NO_KEY_DROP_PANICS");
    Key { spec }
}

fn build(s: &Settings) -> Option<Pool> {
    let mut b = Pool::builder();
    // Thread counts small unless the input asks for a huge one (which must be a BuildError).
    if let Some(c) = &s.core_threads {
        b = b.core_threads(c.get(3));
    }
    if let Some(c) = &s.max_threads {
        b = b.max_threads(c.get(4));
    }
    if let Some(d) = s.keep_alive {
        b = b.keep_alive(d.get());
    }
    if let Some(c) = &s.core_growth_after {
        b = b.core_growth_after(c.get(4));
    }
    if let Some(d) = s.monitor_period {
        b = b.monitor_period(d.get());
    }
    if let Some(d) = s.blocked_after {
        b = b.blocked_after(d.get());
    }
    if let Some(c) = &s.lane_batch {
        b = b.lane_batch(c.get(64));
    }
    if let Some(c) = &s.capacity {
        b = b.capacity(c.get(16));
    }
    if let Some(c) = &s.reserved_threads {
        b = b.reserved_threads(c.get(2));
    }
    if let Some(c) = &s.min_reserved_threads {
        b = b.min_reserved_threads(c.get(2));
    }
    if let Some(d) = s.reserved_idle_timeout {
        b = b.reserved_idle_timeout(d.get());
    }
    if s.panic_hook {
        b = b.panic_hook(|_| {});
    }
    match b.build() {
        Ok(pool) => Some(pool),
        Err(e) => {
            assert!(!e.to_string().is_empty());
            None
        }
    }
}

#[derive(Default)]
struct Tally {
    accepted: usize,
    /// Refused tasks that had no handle (their probes count in `unrun_without_handle`).
    refused_without_handle: usize,
    /// `cancel()` calls that returned true.
    cancelled: usize,
    handed_back: Vec<PendingTask>,
    /// Outcomes of the handles joined so far.
    outcomes: Outcomes,
}

fn run(input: Input) {
    // Build must never panic, whatever the settings.
    let Some(pool) = build(&input.settings) else {
        return;
    };
    let ledger = Arc::new(Ledger::default());
    let inside_back: Arc<Mutex<Vec<PendingTask>>> = Arc::default();
    let mut handles: Vec<TaskHandle<Out>> = Vec::new();
    let mut tally = Tally::default();
    // A `join` without a deadline is safe only while every accepted task is sure to finish on
    // its own: not once a `shutdown_now` (outside, or in a queued task) may hand tasks back.
    let mut unbounded_join_ok = true;

    for op in input.ops.iter().take(48).copied() {
        match op {
            Op::Submit {
                kind,
                body,
                detach,
                result_bomb,
            } => {
                let on_a_lane = !matches!(kind, Kind::Execute | Kind::Submit | Kind::TryExecute);
                let handle_kind = matches!(
                    kind,
                    Kind::Submit
                        | Kind::SubmitSequential(_)
                        | Kind::SubmitCoalescing(_)
                        | Kind::SubmitKeyed(..)
                );
                let body = match body {
                    Body::ShutdownNow
                        if on_a_lane && !allowed("KEYWAY_FUZZ_NO_LANE_SHUTDOWN_NOW") =>
                    {
                        Body::Quick
                    }
                    Body::PanicBombPayload if handle_kind => Body::Panic,
                    other => other,
                };
                if matches!(body, Body::ShutdownNow) {
                    unbounded_join_ok = false;
                }
                // A coalescing task's handle is the only witness of it being coalesced away.
                let detach = detach && !matches!(kind, Kind::SubmitCoalescing(_));
                let has_handle = handle_kind && !detach;
                let probe = Probe::new(&ledger, has_handle);
                let (p, back) = (pool.clone(), inside_back.clone());
                let task = move || {
                    // The whole probe moves into the closure (not just its field): it is
                    // dropped with the closure, run or not.
                    let mut probe = probe;
                    probe.ran = true;
                    match body {
                        Body::Quick => {}
                        Body::Panic => panic!("fuzz: task panics"),
                        Body::PanicBombPayload => std::panic::panic_any(BombPayload),
                        Body::Spin(n) => {
                            let mut x = 0u64;
                            for i in 0..u64::from(n) * 100 {
                                x = std::hint::black_box(x.wrapping_add(i));
                            }
                        }
                        Body::Shutdown => p.shutdown(),
                        Body::ShutdownNow => {
                            let got = p.shutdown_now();
                            back.lock().unwrap().extend(got);
                        }
                    }
                    Out(result_bomb && detach)
                };
                let submitted = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    submit(&pool, kind, task)
                }));
                match submitted {
                    Ok(Some(handle)) => {
                        tally.accepted += 1;
                        if let Some(h) = handle {
                            if detach {
                                // If the task already finished, this drop is the result's last
                                // owner, and a bomb result panics here, on the caller's thread
                                // — the user's own drop, not the pool's.
                                let dropped =
                                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                                        drop(h)
                                    }));
                                let _ = dropped;
                            } else {
                                handles.push(h);
                            }
                        }
                    }
                    // Refused (the task came back and was dropped here), or a key's `Hash`
                    // panicked on this thread: not accepted.
                    Ok(None) | Err(_) => {
                        if !has_handle {
                            tally.refused_without_handle += 1;
                        }
                    }
                }
            }
            Op::Cancel(i) => {
                if let Some(h) = pick(&handles, i) {
                    if h.cancel() {
                        tally.cancelled += 1;
                    }
                }
            }
            Op::Join(i, span) => {
                if handles.is_empty() {
                    continue;
                }
                let i = usize::from(i) % handles.len();
                let timeout = match span {
                    Span::Max if !unbounded_join_ok => Duration::from_millis(1),
                    other => other.get(),
                };
                let h = handles.swap_remove(i);
                match h.join_timeout(timeout) {
                    Ok(outcome) => tally_outcome(outcome, &mut tally.outcomes),
                    Err(h) => handles.push(h),
                }
            }
            Op::Shutdown => pool.shutdown(),
            Op::ShutdownNow => {
                unbounded_join_ok = false;
                let back = pool.shutdown_now();
                tally.handed_back.extend(back);
            }
            Op::Stats => {
                let _ = pool.stats();
            }
        }
    }
    finish(
        pool,
        input.run_handed_back,
        ledger,
        inside_back,
        handles,
        tally,
    );
}

fn pick(handles: &[TaskHandle<Out>], i: u8) -> Option<&TaskHandle<Out>> {
    if handles.is_empty() {
        None
    } else {
        Some(&handles[usize::from(i) % handles.len()])
    }
}

/// Submits `task` as `kind`: `Some(handle if any)` if accepted, `None` if refused.
fn submit<F>(pool: &Pool, kind: Kind, task: F) -> Option<Option<TaskHandle<Out>>>
where
    F: FnOnce() -> Out + Send + 'static,
{
    let plain = |f: F| move || drop(f());
    let r = match kind {
        Kind::Execute => pool.execute(plain(task)).ok().map(|()| None),
        Kind::Submit => pool.submit(task).ok().map(Some),
        Kind::ExecuteSequential(k) => pool
            .execute_sequential(key(k), plain(task))
            .ok()
            .map(|()| None),
        Kind::SubmitSequential(k) => pool.submit_sequential(key(k), task).ok().map(Some),
        Kind::SubmitCoalescing(k) => pool.submit_coalescing(key(k), task).ok().map(Some),
        Kind::ExecuteKeyed(a, b) => pool
            .execute_keyed([key(a), key(b)], plain(task))
            .ok()
            .map(|()| None),
        Kind::SubmitKeyed(a, b) => pool.submit_keyed([key(a), key(b)], task).ok().map(Some),
        Kind::LaneHandle(id) => pool
            .lane(u32::from(id % 4))
            .execute(plain(task))
            .ok()
            .map(|()| None),
        Kind::TryExecute => pool.try_execute(plain(task)).ok().map(|()| None),
    };
    r
}

#[derive(Default)]
struct Outcomes {
    ok: usize,
    panicked: usize,
    cancelled: usize,
    coalesced: usize,
    rejected: usize,
}

fn tally_outcome(outcome: Result<Out, TaskError>, o: &mut Outcomes) {
    match outcome {
        Ok(_) => o.ok += 1,
        Err(TaskError::Panicked(_)) => o.panicked += 1,
        Err(TaskError::Cancelled) => o.cancelled += 1,
        Err(TaskError::Coalesced) => o.coalesced += 1,
        Err(TaskError::Rejected) => o.rejected += 1,
        // Only a scheduled task with a timeout can time out; the target schedules none.
        Err(TaskError::TimedOut) => panic!("a pool task reported TimedOut"),
        Err(other) => panic!("an outcome this target does not know: {other:?}"),
    }
}

fn finish(
    pool: Pool,
    run_handed_back: bool,
    ledger: Arc<Ledger>,
    inside_back: Arc<Mutex<Vec<PendingTask>>>,
    handles: Vec<TaskHandle<Out>>,
    mut tally: Tally,
) {
    // Every accepted task either runs or is handed back: `shutdown_now` then `shutdown`.
    tally.handed_back.extend(pool.shutdown_now());
    pool.shutdown();
    tally
        .handed_back
        .extend(inside_back.lock().unwrap().drain(..));
    for task in tally.handed_back.drain(..) {
        if run_handed_back {
            let _ = task.run();
        } else {
            drop(task);
        }
    }
    drop(pool);
    let mut outcomes = std::mem::take(&mut tally.outcomes);
    for h in handles {
        assert!(
            h.is_finished(),
            "a handle never learned its task's outcome: a lost task"
        );
        tally_outcome(h.join(), &mut outcomes);
    }
    let created = ledger.created.load(Ordering::SeqCst);
    let ran = ledger.ran.load(Ordering::SeqCst);
    let unrun = ledger.unrun.load(Ordering::SeqCst);
    let unrun_without_handle = ledger.unrun_without_handle.load(Ordering::SeqCst);
    // Every probe (accepted or refused) was dropped exactly once: nothing leaked.
    assert_eq!(
        ran + unrun,
        created,
        "probes leaked: ran {ran} + unrun {unrun} != created {created}"
    );
    // Only cancel() makes a handle say Cancelled, and each successful cancel() does.
    assert_eq!(
        outcomes.cancelled, tally.cancelled,
        "cancel() and handles disagree"
    );
    // A handle-less accepted task that did not run can only have been handed back and dropped.
    let handed_back_dropped_without_handle = unrun_without_handle - tally.refused_without_handle;
    // accepted = ran + cancelled + coalesced + handed back (and dropped).
    assert_eq!(
        tally.accepted,
        ran + outcomes.cancelled
            + outcomes.coalesced
            + outcomes.rejected
            + handed_back_dropped_without_handle,
        "accounting: accepted {} != ran {ran} + cancelled {} + coalesced {} + rejected {} + handed back without handle {}",
        tally.accepted,
        outcomes.cancelled,
        outcomes.coalesced,
        outcomes.rejected,
        handed_back_dropped_without_handle,
    );
    // Handles and probes agree on what ran.
    assert!(outcomes.ok + outcomes.panicked <= ran);
}

/// libFuzzer's hook aborts on every panic, caught or not. The panics this target raises on
/// purpose (tasks, keys, results: messages starting `fuzz:`) are expected and contained by the
/// pool; any other panic — a failed check here, or one inside keyway — still aborts and is
/// reported as a crash.
fn install_panic_hook() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let fuzzer_hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let payload = info.payload();
            let message = payload
                .downcast_ref::<&str>()
                .copied()
                .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
                .unwrap_or("");
            if !message.starts_with("fuzz:") {
                fuzzer_hook(info);
            }
        }));
    });
}

fuzz_target!(|input: Input| {
    install_panic_hook();
    run(input);
});
