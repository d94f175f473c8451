//! The systems under test: keyway and its peers. Each scenario lists the
//! systems it compares; a system implements the trait of the scenario shape
//! it takes part in.

pub mod async_contexts;
pub mod crossbeam_pool;
pub mod global_mutex;
pub mod hashed_slots;
pub mod heap_scheduler;
pub mod ideal;
pub mod kameo_actor;
pub mod keyway;
pub mod keyway_scheduler;
pub mod mutex_per_key;
pub mod napart;
pub mod ractor_actor;
pub mod rayon_collect;
pub mod rayon_pool;
pub mod rayon_scope;
pub mod reorder_thread;
pub mod strategy;
pub mod stream;
pub mod thread_per_context;
pub mod tokio_actor;
pub mod tokio_actor_closure;
pub mod tokio_sleep;
pub mod tokio_spawn;
pub mod unordered;

use std::time::{Duration, Instant};

use crate::harness::timed_run;
use crate::keys::TaskKeys;
use crate::work::{ContextsRun, OrderedRun};

/// A system for the `contexts` scenario: tasks of one context run one at a
/// time in order, contexts in parallel.
pub trait ContextsSystem: Sized {
    /// The system's row name.
    const NAME: &'static str;

    /// Untimed: builds threads, pools, channels and handles for `run`, with
    /// `threads` = the machine's available parallelism where a pool size is
    /// needed.
    fn setup(run: &'static ContextsRun, threads: usize) -> Result<Self, String>;

    /// Timed: hands all of `run`'s work to the system (for queueing systems,
    /// the producer loop [`ContextsRun::produce`] on the calling thread).
    /// Completion is detected by `run.done`, not by this call returning.
    fn feed(&mut self) -> Result<(), String>;

    /// Untimed: stops the system and waits for its threads.
    fn teardown(self) -> Result<(), String>;
}

/// One run of `contexts` system `S` on `run`: untimed setup, timed feed until every context's
/// last task ran, untimed teardown, then the order check; the timed duration.
pub fn run_contexts<S: ContextsSystem>(
    run: &'static ContextsRun,
    threads: usize,
    timeout: Duration,
) -> Result<Duration, String> {
    let system = S::setup(run, threads)?;
    let watch = std::env::var_os(PRODUCER_ENV).is_some();
    let mut producer = None;
    let (elapsed, ()) = timed_run(
        system,
        &run.done,
        timeout,
        |s| {
            if !watch {
                return s.feed();
            }
            let (before, started) = (thread_cpu_ns(), Instant::now());
            let fed = s.feed();
            producer = before
                .zip(thread_cpu_ns())
                .map(|(b, a)| (a - b, started.elapsed()));
            fed
        },
        |s| s.teardown(),
    )?;
    if let Some((cpu, fed)) = producer {
        let tasks = run.total().max(1) as f64;
        eprintln!(
            "# producer {}: {:.1} ns CPU per task, fed in {:.1} ms of {:.1} ms",
            S::NAME,
            cpu as f64 / tasks,
            fed.as_secs_f64() * 1e3,
            elapsed.as_secs_f64() * 1e3,
        );
    }
    run.verify()?;
    Ok(elapsed)
}

/// Set (to anything): each `contexts` run prints to stderr its producer thread's CPU time per
/// task and how long the feed took, to split a system's cost between its producer and its
/// workers.
pub const PRODUCER_ENV: &str = "KEYWAY_BENCH_PRODUCER";

/// The calling thread's CPU time so far, in ns (Linux's scheduler statistics; `None`
/// elsewhere).
fn thread_cpu_ns() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    stat.split_whitespace().next()?.parse().ok()
}

/// A pool of plain fire-and-forget tasks, for the `throughput` scenario.
/// Producers share it by reference from several threads.
pub trait TaskPool: Sync + Sized {
    /// The system's row name.
    const NAME: &'static str;

    /// Untimed: builds the pool with `threads` worker threads.
    fn build(threads: usize) -> Result<Self, String>;

    /// Submits one task.
    fn submit<F: FnOnce() + Send + 'static>(&self, task: F) -> Result<(), String>;

    /// Untimed: stops the pool.
    fn shutdown(self);
}

/// A pool of keyed tasks, for the keyed `throughput` variants: tasks sharing
/// a key never overlap. Producers share it by reference from several threads.
pub trait KeyedPool: Sync + Sized {
    /// The system's row name.
    const NAME: &'static str;

    /// Whether the system promises that tasks sharing a key run in
    /// submission order (checked for a single producer).
    const ORDERED: bool;

    /// Untimed: builds the pool with `threads` worker threads.
    fn build(threads: usize) -> Result<Self, String>;

    /// Submits one task naming `keys`.
    fn submit_keyed<F: FnOnce() + Send + 'static>(
        &self,
        keys: TaskKeys,
        task: F,
    ) -> Result<(), String>;

    /// Untimed: stops the pool and waits for its threads.
    fn shutdown(self);
}

/// A system for the `ordered` scenario: items processed in parallel where
/// the system allows it, written to `run.output` in item order.
pub trait OrderedSystem: Sized {
    /// The system's row name.
    const NAME: &'static str;

    /// Untimed: builds threads, pools and channels for `run`, with `threads`
    /// = the machine's available parallelism where a pool size is needed.
    fn setup(run: &'static OrderedRun, threads: usize) -> Result<Self, String>;

    /// Timed: hands every item of `run` to the system from the calling
    /// thread. Completion is detected by `run.done`, not by this call
    /// returning.
    fn feed(&mut self) -> Result<(), String>;

    /// Untimed: stops the system and waits for its threads.
    fn teardown(self) -> Result<(), String>;
}

/// A scheduler for the `schedule` scenario: runs each task at its due time.
pub trait ScheduleSystem: Sized {
    /// The system's row name.
    const NAME: &'static str;
    /// How much earlier than its due time the system may run a task.
    const EARLY: Duration = Duration::ZERO;

    /// Untimed: builds the system with `threads` worker threads.
    fn build(threads: usize) -> Result<Self, String>;

    /// Runs `task` at `due`.
    fn schedule_at<F: FnOnce() + Send + 'static>(
        &self,
        due: Instant,
        task: F,
    ) -> Result<(), String>;

    /// Untimed: stops the system, dropping whatever has not run.
    fn shutdown(self);
}

/// Builds the multi-thread tokio runtime both tokio peers use: `threads`
/// worker threads, nothing else enabled (the work needs no I/O or timers).
pub fn tokio_runtime(threads: usize) -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .build()
        .map_err(|e| format!("building the tokio runtime: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The producer's CPU clock reads on Linux and moves with the thread's own work only.
    #[test]
    #[cfg(target_os = "linux")]
    fn the_thread_cpu_clock_counts_this_thread_s_work() {
        let before = thread_cpu_ns().unwrap();
        let spun = crate::work::spin(2_000_000);
        std::hint::black_box(spun);
        let after = thread_cpu_ns().unwrap();
        assert!(after > before, "{before} -> {after}");
        let slept = thread_cpu_ns().unwrap();
        std::thread::sleep(Duration::from_millis(50));
        assert!(
            thread_cpu_ns().unwrap() - slept < 25_000_000,
            "a sleep counted as CPU"
        );
    }
}
