//! The engine: the threads every part of keyway runs on, and what they share. It knows jobs,
//! tasks and counters, nothing of lanes, futures or keys: those layers sit above it and hand it
//! work through [`Work`] (a task, a lane's batch behind [`LaneJob`], a future's poll).
//!
//! * `registry` — what the threads share: queues, thread slots, counters, flags;
//! * `accounting` — admission and the one count of finished tasks;
//! * `lifecycle` — start, close, stop, drain, hand back, join: the shutdown steps of
//!   `README.md` beside this file, in one place;
//! * `holding` — the one per-thread record of what a pool thread holds outside any queue;
//! * `work` — what the queues hold, and what the engine asks of a lane table;
//! * `worker` — a worker thread's loop, and [`blocking`];
//! * `reserved` — reserved threads for `try_execute`;
//! * `sleep` — parking and waking without lost wake-ups;
//! * `monitor`, `progress` — finding blocked workers, adding auxiliary threads;
//! * `live` — started futures waiting for a wake-up, cancelled by `shutdown_now`;
//! * `waiters` — waiting for room under `capacity`, and for the pool to go idle;
//! * `config`, `threads`, `hasher` — settings, thread spawning and hooks, the key hasher;
//! * `stats`, `counter` — what the pool reports and how it counts cheaply.

mod accounting;
pub(crate) mod config;
mod counter;
mod hasher;
pub(crate) mod holding;
pub(crate) mod lifecycle;
mod live;
mod monitor;
mod progress;
pub(crate) mod registry;
pub(crate) mod reserved;
mod sleep;
mod stats;
mod threads;
pub(crate) mod waiters;
mod work;
pub(crate) mod worker;

#[cfg(test)]
mod test;

#[cfg(all(test, loom))]
mod loom_drain;

#[cfg(all(test, loom))]
mod loom_finish;

#[cfg(all(test, loom))]
mod loom_shutdown_now;

#[cfg(all(test, loom))]
mod loom_waiters;

pub(crate) use config::Config;
pub(crate) use hasher::KeyHasher;
pub(crate) use registry::Registry;
pub use stats::{LaneDepth, Stats};
pub(crate) use work::{LaneJob, PollTask, Refusal, TableOps, Work};
pub use worker::blocking;
pub(crate) use worker::WorkerCtx;

use crate::error::SubmitError;

/// The error that hands `task` back, refused for `why`.
pub(crate) fn refused<T>(why: Refusal, task: T) -> SubmitError<T> {
    match why {
        Refusal::Shutdown => SubmitError::Shutdown(task),
        Refusal::Full => SubmitError::Full(task),
    }
}
