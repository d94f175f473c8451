//! The engine: the threads every part of keyway runs on, and what they share. It knows jobs,
//! tasks and counters, nothing of lanes, futures or keys: those layers sit above it and hand it
//! work through [`Work`] (a task, a lane's batch behind [`LaneJob`], a future's poll).
//!
//! Top to bottom (a file imports only files below it, but for the three at the bottom of the
//! first group, whose types name each other):
//!
//! * `lifecycle` — start, close, stop, drain, hand back, join: the shutdown steps of
//!   `README.md` beside this file, in one place;
//! * `monitor` — finds blocked workers, moves their work, adds auxiliary threads;
//! * `reserved` — reserved threads and `try_execute`;
//! * `elastic` — workers started, auxiliary threads added and retired;
//! * `snapshot` — [`Stats`] read from the registry;
//! * `meter` — time in the numbers: sampled tasks timed ([`Metrics`], `Pool::metrics`), with
//!   `histogram` (its buckets), `metrics` (the public snapshot), `export` (the `metrics`
//!   feature's series) and `label` (lanes' printable labels, made as a snapshot lists them);
//! * `holding` — the one per-thread record of what a pool thread holds outside any queue;
//! * `on_pool` — the pool as a running thread sees it: stopping or not, where a finish counts;
//! * `accounting` — admission and the one count of finished tasks;
//! * `threads` — thread spawning, names, stack size and the user's hooks;
//! * `worker`, `registry`, `work` — a worker's loop (and [`blocking`]); what the threads share
//!   (queues, slots, counters, flags); what the queues hold ([`Work`]: a task, a lane's
//!   [`LaneJob`], a future's [`PollTask`], whose metadata is the registry) and what the engine
//!   asks of a lane table;
//!
//! and what the registry holds, each on its own:
//!
//! * `stoppers` — the callers inside `shutdown_now` and what they hold;
//! * `seats` — the reserved threads' seats;
//! * `sleep` — parking and waking without lost wake-ups; `progress` — what the monitor reads;
//! * `live` — started futures waiting for a wake-up, cancelled by `shutdown_now`;
//! * `waiters` — waiting for room under `capacity`, and for the pool to go idle;
//! * `watch` — the lanes found deeper than a turn's batch, which `Stats` reads with many lanes;
//! * `config`, `hasher`, `counter`, `stats` — settings, the key hasher, striped counters, the
//!   public statistics types.

mod accounting;
pub(crate) mod config;
mod counter;
mod elastic;
#[cfg(feature = "metrics")]
pub mod export;
mod hasher;
mod histogram;
pub(crate) mod holding;
mod label;
mod lifecycle;
mod live;
pub(crate) mod meter;
mod metrics;
mod monitor;
mod on_pool;
mod progress;
mod registry;
pub(crate) mod reserved;
mod seats;
mod sleep;
mod snapshot;
mod stats;
mod stoppers;
mod threads;
pub(crate) mod waiters;
pub(crate) mod watch;
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
pub use histogram::Histogram;
pub(crate) use label::Labels;
pub use label::LaneLabel;
pub use metrics::{Metrics, RunningTask};
pub(crate) use on_pool::{on_pool, schedule_woken, with_pool, OnPool};
pub(crate) use registry::Registry;
pub use stats::{LaneDepth, Stats};
pub(crate) use watch::{Watch, Watched};
pub(crate) use work::{LaneJob, NotPlain, PollTask, Refusal, TableOps, Work};
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
