//! What a fuzz input decodes to: for `pool_api`, pool settings and a sequence of calls on
//! closures ([`Input`], its layout fixed so that saved inputs keep decoding as they did); for
//! `pool_mixed`, the same and a scheduler, with calls on futures, wakers and scheduled tasks
//! among them ([`MixedInput`]).

use std::time::Duration;

use arbitrary::Arbitrary;

#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum Span {
    Zero,
    Millis(u8),
    Max,
}

impl Span {
    pub fn get(self) -> Duration {
        match self {
            Span::Zero => Duration::ZERO,
            Span::Millis(ms) => Duration::from_millis(u64::from(ms % 20) + 1),
            Span::Max => Duration::MAX,
        }
    }
}

#[derive(Arbitrary, Debug)]
pub enum Count {
    Small(u8),
    Huge(usize),
    Max,
}

impl Count {
    pub fn get(&self, small_max: usize) -> usize {
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
pub struct Settings {
    pub core_threads: Option<Count>,
    pub max_threads: Option<Count>,
    pub keep_alive: Option<Span>,
    pub core_growth_after: Option<Count>,
    pub monitor_period: Option<Span>,
    pub blocked_after: Option<Span>,
    pub lane_batch: Option<Count>,
    pub capacity: Option<Count>,
    pub reserved_threads: Option<Count>,
    pub min_reserved_threads: Option<Count>,
    pub reserved_idle_timeout: Option<Span>,
    pub panic_hook: bool,
}

/// A context key whose `Hash` or `Drop` may panic.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub struct KeySpec {
    pub id: u8,
    pub hash_panics: bool,
    pub drop_panics: bool,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum Body {
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
pub enum Kind {
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
pub enum Op {
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

/// `pool_api`'s input.
#[derive(Arbitrary, Debug)]
pub struct Input {
    pub settings: Settings,
    pub ops: Vec<Op>,
    /// Handed-back tasks: run them (true) or drop them (false).
    pub run_handed_back: bool,
}

/// `pool_mixed`'s input.
#[derive(Arbitrary, Debug)]
pub struct MixedInput {
    pub settings: Settings,
    pub scheduler: Option<SchedSettings>,
    pub steps: Vec<Step>,
    /// Handed-back tasks: run them (true) or drop them (false).
    pub run_handed_back: bool,
}

/// One call of `pool_mixed`.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum Step {
    Pool(Op),
    More(MoreOp),
}

/// How a future is spawned.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum SpawnKind {
    Spawn,
    Sequential(KeySpec),
    Coalescing(KeySpec),
    Keyed(KeySpec, KeySpec),
    Lane(u8),
    LaneCoalescing(u8),
}

/// What a future does.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum FutBody {
    /// Ready in its first poll.
    Ready,
    /// `keyway::yield_now().await` 1 to 3 times, then ready.
    Yield(u8),
    /// Pending once after waking itself (its own future, not keyway's), then ready.
    PendingOnce,
    /// Panics in its first poll.
    Panic,
    /// Panics after a yield.
    YieldThenPanic,
}

/// A key for `schedule_sequential`: its `Clone` or `Drop` may panic.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub struct SchedKeySpec {
    pub id: u8,
    pub clone_panics: bool,
    pub drop_panics: bool,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum SchedBody {
    Quick,
    Panic,
    Spin(u8),
    /// Calls `Scheduler::shutdown()` (on a pool thread: returns at once).
    SchedulerShutdown,
    /// Calls `Scheduler::shutdown_now()` and drops what it gets back.
    SchedulerShutdownNow,
}

/// An executor's limit.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum Tps {
    Unlimited,
    /// 100 to 2650 tasks a second.
    PerSecond(u8),
    /// 0: paused.
    Paused,
}

impl Tps {
    pub fn get(self) -> Option<f64> {
        match self {
            Tps::Unlimited => None,
            Tps::PerSecond(n) => Some(100.0 + f64::from(n) * 10.0),
            Tps::Paused => Some(0.0),
        }
    }
}

/// Which of the coordinator's hooks panic.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub struct Hooks {
    pub join_panics: bool,
    pub leave_panics: bool,
    pub share_panics: bool,
}

/// One scheduler with one executor, `"x"`.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub struct SchedSettings {
    /// 10 to 39 ms.
    pub interval: u8,
    pub tps: Tps,
    pub timeout: Option<Span>,
    pub lowest_first: bool,
    pub early_dispatch: bool,
    /// A coordinator of ours (else the default).
    pub coordinator: Option<Hooks>,
    /// At the end: `shutdown_now` (true) or `shutdown`.
    pub shutdown_now: bool,
    /// What `shutdown_now` hands back: run (true) or dropped.
    pub run_handed_back: bool,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum MoreOp {
    /// Spawn a future; `detach` drops its handle at once (its output, if `output_bomb`, then
    /// panics when the pool drops it).
    Spawn {
        kind: SpawnKind,
        body: FutBody,
        detach: bool,
        output_bomb: bool,
    },
    /// Poll one pool handle (closure's or future's) once with a waker whose `wake` panics, and
    /// keep it: the pool wakes that waker when the task ends.
    PollPanicking(u8),
    /// `wait_for_room_async` with a task that spins, polled once with a waker whose `wake`
    /// panics; kept if pending.
    WaitForRoom {
        spin: u8,
        context: Option<u8>,
    },
    /// Poll the pending room waiters again with a quiet waker.
    PollWaiters,
    /// Schedule a task on the scheduler (if there is one).
    Schedule {
        key: Option<SchedKeySpec>,
        delay: Span,
        priority: i8,
        body: SchedBody,
        detach: bool,
        result_bomb: bool,
    },
    CancelScheduled(u8),
    /// Poll a scheduled task's handle once with a waker whose `wake` panics, and keep it.
    PollScheduledPanicking(u8),
    /// Join a scheduled task's handle without waiting (`Duration::ZERO`) or for a few ms.
    JoinScheduled(u8, bool),
    SetTps(Tps),
}
