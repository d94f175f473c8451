//! What a fuzz input decodes to: for `pool_api`, pool settings and a sequence of calls on
//! closures ([`Input`], its layout fixed so that saved inputs keep decoding as they did); for
//! `pool_mixed`, the same and a scheduler, with calls on futures, wakers and scheduled tasks
//! among them ([`MixedInput`]); for `pool_batches`, `pool_mixed`'s and batches among them
//! ([`BatchInput`]: a type of its own, so that `pool_mixed`'s saved inputs keep decoding as
//! they did).

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

/// `pool_batches`'s input.
#[derive(Arbitrary, Debug)]
pub struct BatchInput {
    pub settings: Settings,
    pub scheduler: Option<SchedSettings>,
    pub steps: Vec<BatchStep>,
    /// Handed-back tasks: run them (true) or drop them (false).
    pub run_handed_back: bool,
}

/// One call of `pool_batches` (and, without `Batch`, of the other targets).
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum BatchStep {
    Pool(Op),
    More(MoreOp),
    Batch(BatchOp),
}

impl From<Step> for BatchStep {
    fn from(step: Step) -> Self {
        match step {
            Step::Pool(op) => BatchStep::Pool(op),
            Step::More(op) => BatchStep::More(op),
        }
    }
}

/// The lane a batch or a single task goes to: a context of `Contexts<Key>` (the lanes of
/// `Kind::ExecuteSequential` and `SpawnKind::Sequential`; the key may panic) or a `Lane` handle
/// on a `u32` context (the lanes of `Kind::LaneHandle` and `SpawnKind::Lane`).
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum BatchLane {
    Context(KeySpec),
    Lane(u8),
}

/// The closure type of a batch's tasks (one type per batch: a batch is stored as one buffer of
/// them).
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum Shape {
    /// The task's probe, body and pool.
    Small,
    /// And 8 bytes more.
    Padded8,
    /// And 24 bytes more.
    Padded24,
    /// And 512 bytes more.
    Large,
    /// Aligned to 64 bytes.
    Aligned,
    /// `Box<dyn FnOnce() + Send>`, of small and padded closures in turn.
    Boxed,
    /// A closure capturing nothing (no probe: counted by a static).
    ZeroSized,
}

/// How many tasks or messages a batch has.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum Size {
    Empty,
    One,
    /// 2 to 9.
    Few(u8),
    /// 10 to 137 (about the default lane batch, and beyond).
    Some(u8),
    /// 1,020 to 1,030 (around one run of a batch entry, 1,024).
    AroundRun(u8),
    /// 2,045 to 2,052 (about two runs).
    TwoRuns(u8),
}

impl Size {
    pub fn get(self) -> usize {
        match self {
            Size::Empty => 0,
            Size::One => 1,
            Size::Few(n) => 2 + usize::from(n % 8),
            Size::Some(n) => 10 + usize::from(n % 128),
            Size::AroundRun(n) => 1_020 + usize::from(n % 11),
            Size::TwoRuns(n) => 2_045 + usize::from(n % 8),
        }
    }
}

/// What the tasks of a batch do: task `i` does `body` if `i % (every % 8 + 1) == 0`, else
/// returns at once; its drop panics if `bomb_every % 8 != 0` and `i % (bomb_every % 8) == 0`.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub struct Pattern<B> {
    pub body: B,
    pub every: u8,
    pub bomb_every: u8,
}

impl<B: Copy> Pattern<B> {
    /// Task `i`'s body (`quick` for the others), and whether its drop panics.
    pub fn of(&self, i: usize, quick: B) -> (B, bool) {
        let every = usize::from(self.every % 8) + 1;
        let bomb = usize::from(self.bomb_every % 8);
        let body = if i.is_multiple_of(every) {
            self.body
        } else {
            quick
        };
        (body, bomb != 0 && i.is_multiple_of(bomb))
    }
}

/// A typed lanes' handler: sync, or async.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum Handler {
    Sync,
    Async,
}

/// What the handler does with a message.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum MsgBody {
    Quick,
    /// Panics (the async handler's future, at its first poll).
    Panic,
    /// The async handler panics before it makes its future (the sync one: `Panic`).
    PanicInHandler,
    Spin(u8),
    /// The async handler's future yields 1 to 3 times (the sync one: returns).
    Yield(u8),
}

#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum BatchOp {
    /// `execute_all` (`all_or_none`: `execute_all_or_none`) of `size` tasks of `shape` on
    /// `lane`; `iter_panics`: the iterator panics when asked for task `n % (size + 1)`.
    ExecuteAll {
        lane: BatchLane,
        shape: Shape,
        size: Size,
        pattern: Pattern<Body>,
        all_or_none: bool,
        iter_panics: Option<u16>,
    },
    /// One task in a lane batches use: `execute_sequential` / `Lane::execute`, or their
    /// coalescing forms.
    Single {
        lane: BatchLane,
        coalescing: bool,
        body: Body,
        bomb: bool,
    },
    /// `execute_async_sequential` of a future in a context's lane; its drop panics if `bomb`
    /// (when it completes, or when it is dropped unfinished).
    AsyncSequential {
        key: KeySpec,
        body: FutBody,
        bomb: bool,
    },
    /// `TypedLane::send_all` (`all_or_none`: `send_all_or_none`) on the lane of key `lane % 4`.
    SendAll {
        handler: Handler,
        lane: u8,
        size: Size,
        pattern: Pattern<MsgBody>,
        all_or_none: bool,
        iter_panics: Option<u16>,
    },
    /// `TypedLanes::send` (or `send_coalescing`) of one message for key `key % 4`.
    Send {
        handler: Handler,
        key: u8,
        coalescing: bool,
        body: MsgBody,
        bomb: bool,
    },
    /// A task in the lane of `Lane` handle `outer % 4` that submits, from its pool thread, a
    /// batch of `size` tasks to `inner` (`execute_all`, or `_or_none`) and checks the answer.
    Nested {
        outer: u8,
        inner: BatchLane,
        size: Size,
        pattern: Pattern<Body>,
        all_or_none: bool,
    },
}
