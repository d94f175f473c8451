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
//! ## Context lanes ([`Pool::contexts`], [`Contexts`], [`Lane`], [`TypedLanes`], [`TypedLane`], [`KeyState`])
//! Tasks of one context run one at a time in submission order; contexts run in parallel; a
//! coalescing task replaces its context's older pending one; a flush waits for one context; a
//! batch of a context's tasks is queued at once ([`Lane::execute_all`]).
//! Idle lanes are freed. A context's type is part of its identity (`"a"` and `String::from("a")`
//! are different contexts): [`Pool::contexts`] fixes the key type once. [`Contexts`] is the
//! keyed entry point: its methods state the rules with examples, and the pool's untyped keyed
//! methods (`pool.execute_sequential(ctx, f)` and its kin, the same lanes with the key type
//! inferred at each call) link to them. Typed lanes queue messages for one handler, can own a
//! state per key ([`Pool::typed_lanes_with_state`]), and answer requests through a [`Reply`]
//! ([`TypedLanes::ask`]).
//!
//! ## Multi-key tasks ([`Contexts::execute_keyed`], [`Contexts::submit_keyed`])
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
//! best first when more are due than the limit allows; a task that cannot start within its timeout (its own,
//! [`Timing::timeout`], or its executor's) is timed out, never dropped silently. Tasks of one
//! context ([`Scheduler::schedule_sequential`]) run in due order. A [`Coordinator`] shares a
//! limit across a cluster.
//!
//! ## Rate limits: what is guaranteed
//! A limit of `n` per second holds in *every* sliding second, not per fixed interval: an
//! executor releases at most `ceil(n)` tasks in any window of one second, whenever its tasks
//! arrive. An interval's tasks are spread evenly over it (the `k` admitted at its start go every
//! `interval / k`; tasks arriving for the interval already running, over what is left of it),
//! spaced at least `1 / n` apart while it can. Measured from the release times, a 50 per second executor whose callers
//! arrive in bursts at 0, 300, 700 and 950 ms into its interval released at most 50 in any
//! sliding second (the bound tested: `n + 1`, 51), and three processes sharing 90 per second
//! through Redis 90 or 91 (tested: 91, the limit + 2%; each process holds its own share, but
//! their clocks are read a moment apart). The remote side sees when the tasks *start*, a
//! little later: on a busy 2-core machine (load average 6-25), 50-53 and 91-93. When more are
//! due than the limit allows, the best
//! ([`Timing::priority`]) go first, late arrivals included; the rest wait for the next
//! interval ([`SchedulerBuilder::interval`], 1 s by default), where they compete again.
//! Across processes sharing a limit through a [`Coordinator`], each process holds its share
//! this way.
//!
//! ## Shutting down
//! * **Dropping the last handle** you hold — of the pool, or of a scheduler built on it — waits
//!   for everything either accepted: the pool's tasks, and every task the scheduler holds,
//!   due or not yet due (it runs when due, under its limit), as [`Pool::shutdown`] does. So
//!   returning from `main` loses nothing, whichever of `pool` and `scheduler` goes first. A
//!   task scheduled [`Duration::MAX`](std::time::Duration::MAX) ahead (never due) is rejected
//!   instead; so are the tasks of an executor paused at 0 TPS, as nobody can resume it.
//! * [`Pool::shutdown`] shuts the pool's schedulers down gracefully first (intake stops; what
//!   they hold still runs when due, but the tasks of an executor paused at 0 TPS end
//!   `Rejected`: the pool's shutdown does not wait for a pause no one will lift), then the
//!   pool; it returns when all of it has run.
//!   [`Pool::shutdown_timeout`] bounds that wait (what is left goes on in the background);
//!   [`Pool::shutdown_async`] is the same shutdown as a future, for async code.
//! * [`Scheduler::shutdown`] shuts one scheduler down and waits for its tasks; the pool stays
//!   open (a paused executor's tasks wait for [`Scheduler::set_tps`], or for the pool's
//!   shutdown).
//! * [`Pool::shutdown_now`] and [`Scheduler::shutdown_now`] stop at once and hand back every
//!   task not started (the pool's: the scheduler's too), for you to run or drop.
//! * [`Pool::wait_idle`] waits for the tasks the pool has accepted; a scheduler's tasks are
//!   accepted by the pool only when released, so it does not wait for those not yet due.
//!
//! ## Async ([`Pool::spawn_sequential`], [`Pool::spawn_keyed`], [`Lane::spawn`], [`Pool::typed_lanes_async`])
//! Futures on the same lanes: a context's future holds the context until it completes, awaits
//! included, without holding a thread; woken futures are polled on the pool. They may await any
//! runtime's timers and I/O (tokio's with the `tokio` feature; a pool bound to one runtime with
//! `PoolBuilder::tokio_runtime` runs all its work inside it, at less cost). Handles are awaitable, and
//! cancelling one drops its started future at its next await; `execute_async*` futures have
//! none. Which API for an actor per key, state that lasts (or loads and saves by futures:
//! [`Pool::typed_lanes_async_loaded`]) and memory: [`actors`].
//!
//! ## Tasks and outcomes ([`TaskHandle`], [`TaskError`], [`PendingTask`], [`PanicReport`])
//! `submit*` returns a handle to join, await or cancel; refused work comes back in a
//! [`SubmitError`]; `shutdown_now` hands back every task that had not started, saying which
//! context it was queued in (and a typed lane's message as itself).
//!
//! ```
//! let pool = keyway::Pool::new()?;
//! let accounts = pool.contexts::<u64>();
//! let total = accounts.submit_sequential(1, || 40 + 2)?;
//! assert_eq!(total.join()?, 42);
//! pool.shutdown();
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## Observability ([`Stats`], [`PanicReport`], [`observability`])
//! [`Pool::stats`] says what the pool is doing (`{}` prints it on one line); its deepest lanes
//! name their context by [`Pool::context_hash`]; [`PoolBuilder::panic_hook`] sees each panic
//! with its context, thread and payload; `tracing` events carry the pool's
//! [name](PoolBuilder::name), and its threads run in a `keyway_pool` span to filter on. The
//! [`observability`] page lists every event and field.
//!
//! ```
//! use std::sync::mpsc::channel;
//! let pool = keyway::Pool::builder().name("orders").core_threads(1).max_threads(1).build()?;
//! let (started_tx, started) = channel();
//! let (release, gate) = channel::<()>();
//! pool.execute_sequential("acct-7", move || {
//!     started_tx.send(()).unwrap();
//!     gate.recv().unwrap(); // a slow task holds its lane
//! })?;
//! started.recv()?;
//! for _ in 0..5 {
//!     pool.execute_sequential("acct-7", || ())?;
//! }
//! let stats = pool.stats();
//! println!("{stats}"); // threads: 1 core, ...; tasks: 5 waiting, 1 running, ...
//! assert_eq!((stats.running_tasks, stats.waiting_tasks), (1, 5));
//! let hot = stats.largest_lanes[0]; // which context is backed up?
//! assert_eq!(hot.context_hash, pool.context_hash(&"acct-7"));
//! assert_eq!(hot.queued, 5);
//! release.send(())?;
//! pool.shutdown();
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## Operating keyway ([`Metrics`], [`Histogram`], [`RunningTask`], [`LaneLabel`])
//! A pool built with [`PoolBuilder::metrics`] times a sample of its tasks (the first each
//! submitting thread submits, then one in [`metrics_sampling`](PoolBuilder::metrics_sampling),
//! 128 by default): [`Pool::metrics`] adds to [`Stats`] histograms of queue wait (submission to
//! start) and run time, the age of the oldest waiting task, and the longest-running tasks with
//! their lane. A pool built without it runs no timing code per task. Listed lanes carry their
//! key's `Debug` text, cut to 48 bytes ([`LaneLabel`]), where the key's type allows (common
//! types, and those named with [`PoolBuilder::label_keys`]); labels are made as a snapshot is
//! taken, never on a task's path. [`Pool::stats`] and
//! [`Pool::metrics`] cost the same whatever the number of lanes (beyond 256 live lanes the
//! deepest come from a bounded watch list). With the `metrics` feature, a timed pool publishes
//! its numbers through the `metrics` crate's facade under the names in `metric_names`
//! (seconds for times, the label `pool`, never a key); the README's "Operating keyway" section
//! lists them, the Grafana dashboard in `docs/grafana`, and keyway-redis's `keyway-stream`
//! command for stream consumer groups.
//!
//! ```
//! let pool = keyway::Pool::builder().name("orders").metrics(true).build()?;
//! for i in 0..1_000u32 {
//!     pool.execute_sequential(i % 8, || ())?;
//! }
//! pool.wait_idle();
//! let m = pool.metrics();
//! println!("{m}"); // ...; timed 1 in 128: queue wait p50 ... p99 ..., run time ...
//! assert!(m.queue_wait.count() >= 7 && m.run_time.count() >= 7);
//! pool.shutdown();
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![warn(missing_docs)]

// Layers, top to bottom: a module imports only modules of its own layer or below, and no import
// cycle spans two folders (both checked by `tests/lifecycle/layers.rs`; a unit test may drive the public
// API through the crate root's re-exports, `crate::Pool`, which name no module). The README's
// "Layout" section says what each layer holds.
// 1. schedule strategy sequencer
// 2. face
// 3. lane
// 4. future
// 5. engine
// 6. task
// 7. error loom observability actors compile_fail

pub mod actors;
#[cfg(doctest)]
mod compile_fail;
mod engine;
mod error;
mod face;
mod future;
mod lane;
pub(crate) mod loom;
pub mod observability;
mod schedule;
mod sequencer;
mod strategy;
mod task;

/// The names of the series a timed pool publishes with the `metrics` feature.
#[cfg(feature = "metrics")]
pub use engine::export as metric_names;
pub use engine::{blocking, Histogram, LaneDepth, LaneLabel, Metrics, RunningTask, Stats};
pub use error::{
    BuildError, PanicPayload, ShutdownTimedOut, StateError, SubmitError, SubmitErrorKind,
    TaskError, TryExecuteError,
};
pub use face::{
    Contexts, Lane, Pool, PoolBuilder, ShutdownFuture, TypedLane, TypedLanes, WaitForRoom,
};
pub use future::{yield_now, YieldNow};
pub use lane::{AsyncKeyState, KeyState, Loaded};
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
pub use task::{AbortHandle, PanicReport, PendingTask, Reply, TaskHandle};

/// The README's example, run as a doctest so it cannot rot.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
struct ReadmeExample;
