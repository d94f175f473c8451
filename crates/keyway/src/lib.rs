//! # keyway — context-aware executors
//!
//! keyway runs work that must stay in order per client, account, key or stream — many of them
//! in parallel — on one small elastic pool, without a thread or a lock per key.
//!
//! ## The pool ([`Pool`], [`PoolBuilder`], [`blocking`])
//! Core threads for the pool's life; auxiliary threads when work is stuck behind blocked
//! workers, retired after `keep_alive`; a monitor that moves work away from a worker blocked in
//! one task; reserved threads for [`Pool::try_execute`], which starts a task now or refuses at
//! once. Statistics in [`Stats`].
//!
//! ## Context lanes ([`Pool::execute_sequential`], [`Pool::execute_coalescing`], [`Lane`], [`TypedLanes`])
//! Tasks of one context run one at a time in submission order; contexts run in parallel; a
//! coalescing task replaces its context's older pending one. Idle lanes are freed.
//!
//! ## Multi-key tasks ([`Pool::execute_keyed`], [`Pool::submit_keyed`])
//! A task names several keys: tasks sharing any key never overlap and run in submission order;
//! disjoint ones run in parallel; a task waiting for a key holds no thread; nothing deadlocks.
//!
//! ## Sequencer ([`Sequencer`], [`Ticket`], [`OrderedMap`])
//! Work done on any thread is published in ticket order by whichever thread finishes the turn
//! before it: nobody waits, no consumer thread. [`OrderedMap`] is a parallel map in input order.
//!
//! ## Execution strategy ([`AdaptiveStrategy`], [`Producer`], [`Invocable`])
//! Jetty's adaptive "eat what you kill": a producer's tasks are consumed on the thread that
//! produced them when that cannot starve production, and handed to the pool when it could; only
//! one thread produces at a time. Per-mode counts in [`ModeCounts`]; [`Pool`] is its
//! [`Executor`].
//!
//! ## Rate-limited scheduler ([`Scheduler`], [`ExecutorConfig`], [`Timing`], [`Coordinator`])
//! Tasks scheduled for a time (once, at a fixed rate or with a fixed delay) run on named
//! executors at no more than each one's limit per second, spread evenly over each interval,
//! best first when more are due than the limit allows; a task that cannot start within its
//! timeout is timed out, never dropped silently. A [`Coordinator`] shares a limit across a
//! cluster.
//!
//! ## Async ([`Pool::spawn_sequential`], [`Pool::spawn_keyed`], [`Lane::spawn`], [`Pool::typed_lanes_async`])
//! Futures on the same lanes: a context's future holds the context until it completes, awaits
//! included, without holding a thread; woken futures are polled on the pool. They may await any
//! runtime's timers and I/O (tokio's through a runtime handle). Handles are awaitable, and
//! cancelling one drops its started future at its next await.
//!
//! ## Tasks and outcomes ([`TaskHandle`], [`TaskError`], [`PendingTask`], [`PanicReport`])
//! `submit*` returns a handle to join, await or cancel; refused work comes back in a
//! [`SubmitError`]; `shutdown_now` hands back every task that had not started.
//!
//! ```
//! let pool = keyway::Pool::new()?;
//! let total = pool.submit_sequential("account-1", || 40 + 2)?;
//! assert_eq!(total.join()?, 42);
//! pool.shutdown();
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#[cfg(doctest)]
mod compile_fail;
mod error;
mod future;
mod keyed;
mod lane;
pub(crate) mod loom;
mod pool;
mod schedule;
mod sequencer;
mod strategy;
mod task;

pub use error::{BuildError, SubmitError, TaskError, TryExecuteError};
pub use lane::{Lane, TypedLanes};
pub use pool::{blocking, LaneDepth, Pool, PoolBuilder, Stats};
pub use schedule::{
    ConfigError, Coordinator, ExecutorConfig, ExecutorStats, IntervalReport, LocalCoordinator,
    PriorityOrder, ScheduleError, Scheduler, SchedulerBuilder, TimedOutTask, Timing,
};
pub use sequencer::{
    MapTask, OrderedMap, RunOutcome, Sequencer, SequencerError, Ticket, TicketPanic,
};
pub use strategy::{
    invoke_non_blocking, is_non_blocking_invocation, AdaptiveStrategy, ConsumeMode, DeclaredTask,
    DispatchError, DispatchOutcome, Executor, Invocable, InvocationType, ModeCounts,
    ProduceOutcome, Producer,
};
pub use task::{PanicReport, PendingTask, TaskHandle};

/// The README's example, run as a doctest so it cannot rot.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
struct ReadmeExample;
