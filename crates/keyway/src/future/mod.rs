//! The machinery that runs futures on the pool, below the lanes that order them: `spawn`,
//! `spawn_sequential`, `spawn_coalescing`, `spawn_keyed` and [`Lane::spawn`](crate::Lane::spawn)
//! all start their future through it.
//!
//! A future of a context holds that context until it completes, awaits included: the next task
//! of the context starts only after it, while other contexts go on. It is polled on the pool's
//! workers with a real waker (an `async-task` task whose wake-up queues one poll job; a wake during
//! its own poll, a yield, resumes it in place within the worker's streak: `probe`); while it
//! waits, no thread is held and its lane stays scheduled without a job (rule 7 of the lane
//! protocol). It may await timers and I/O of any runtime (tokio's inside the runtime it was spawned
//! from, with the `tokio` feature).
//! What a future holds is let go of through [`Resume`], which the lanes implement: this layer
//! knows nothing of lanes or keys.
//!
//! * `driver` — the wrapper that polls a future, contains its panics, obeys `cancel` and, once,
//!   resumes what it held and counts its task finished;
//! * `launch` — a submitted future before it starts (lane entry, multi-key body, plain job);
//! * `wake` — a poll or wake-up on a worker of the future's own pool, or elsewhere; and a lane
//!   driver's first poll made inline, with no task, promoted to a task only if it waits (its
//!   wakes meanwhile kept in a slot the task takes over);
//! * `yield_now` — a future's way to let other work run (public);
//! * `probe` — polls a future, resuming it in place when it woke itself (a yield) and telling
//!   that from a real wait;
//! * `runtime` — the tokio runtime a future was spawned from, entered around its polls (the
//!   `tokio` feature);
//! * `place` — a driver's pinned place for its futures, in a recycled cell;
//! * `prefetch` — a hint to start loading the cache lines of a value another core touched last (a
//!   future another core wrote; the lane queue's next free slot);
//! * `block` — a minimal `block_on`, for futures run by the caller after `shutdown_now`.

mod block;
mod driver;
mod launch;
mod place;
mod prefetch;
mod probe;
mod runtime;
mod wake;
mod yield_now;

pub(crate) use driver::{run_here, Release, Resume};
pub(crate) use launch::{execute, spawn, Launcher, Started, Step, Unsent};
pub(crate) use place::FuturePlace;
pub(crate) use prefetch::prefetch;
pub(crate) use probe::poll_resuming;
pub(crate) use runtime::Runtime;
pub(crate) use wake::{poll_inline, promote, run_inline, run_inline_with, Parks};
pub use yield_now::{yield_now, YieldNow};
