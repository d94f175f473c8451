//! One run of each kind of `throughput` system: producer threads released
//! together after a ready barrier, pool warm-up, the exactly-once check of
//! plain tasks and the per-key checks of keyed ones.

use std::sync::Barrier;
use std::time::Duration;

use super::variant::Variant;
use crate::harness::{ready_step, threads, Stopwatch};
use crate::keys::TaskKeys;
use crate::latch::Completion;
use crate::once::TaskSet;
use crate::systems::rayon_scope;
use crate::systems::{KeyedPool, TaskPool};
use crate::work::{keyed_task, tick_once, KeyedRun};

/// Producer `i`'s share of `tasks` split over `producers` (the first ones take
/// the remainder).
pub(super) fn share(tasks: u64, producers: usize, i: usize) -> u64 {
    let p = producers as u64;
    tasks / p + u64::from((i as u64) < tasks % p)
}

/// The task indices producer `i` submits, in its submission order: a
/// contiguous range, so a single producer submits 0, 1, 2, …
pub(super) fn task_range(tasks: u64, producers: usize, i: usize) -> std::ops::Range<u64> {
    let start: u64 = (0..i).map(|j| share(tasks, producers, j)).sum();
    start..start + share(tasks, producers, i)
}

/// The timed part of a run: spawns the producers and waits until each is
/// at the ready barrier and every thread of the process is idle (untimed:
/// [`ready_step`]), starts the clock, releases the producers at once, and
/// waits until `done` opens. Each producer calls `submit(index)` for each
/// task index of its range, in order; the first error fails the run.
pub(super) fn produce(
    v: Variant,
    timeout: Duration,
    done: &Completion,
    submit: impl Fn(u64) -> Result<(), String> + Sync,
) -> Result<Duration, String> {
    let ready = Barrier::new(v.producers + 1);
    let go = Barrier::new(v.producers + 1);
    std::thread::scope(|s| {
        let producers: Vec<_> = (0..v.producers)
            .map(|i| {
                let (ready, go, submit) = (&ready, &go, &submit);
                let range = task_range(v.tasks, v.producers, i);
                s.spawn(move || {
                    ready.wait();
                    go.wait();
                    for index in range {
                        if let Err(e) = submit(index) {
                            done.fail(format!("producer {i}: {e}"));
                            return;
                        }
                    }
                })
            })
            .collect();
        ready.wait();
        ready_step();
        let clock = Stopwatch::start();
        go.wait();
        let elapsed = done.wait_since(clock.started(), timeout);
        clock.stop();
        threads::sample_now();
        let panicked = producers.into_iter().any(|p| p.join().is_err());
        if panicked {
            return Err("a producer panicked".to_string());
        }
        elapsed
    })
}

/// Untimed, before the producers start: runs `tasks` no-op tasks through
/// a freshly built pool (`submit(i, done)` submits the i-th, which must
/// count `done` down) and waits for them, so that every pool starts the
/// clock with its threads started and past their first task.
pub(super) fn warm(
    tasks: usize,
    submit: impl Fn(u64, &'static Completion) -> Result<(), String>,
) -> Result<(), String> {
    let done: &'static Completion = Box::leak(Box::new(Completion::new(tasks)));
    for i in 0..tasks as u64 {
        submit(i, done)?;
    }
    done.wait_since(std::time::Instant::now(), Duration::from_secs(10))
        .map(drop)
        .map_err(|e| format!("warming the pool: {e}"))
}

/// One plain run: clears `set`, hands `body` a fresh completion latch for
/// `v.tasks` tasks, and checks afterwards that every task ran exactly once.
pub(super) fn exactly_once(
    v: Variant,
    set: &'static TaskSet,
    body: impl FnOnce(&'static Completion) -> Result<Duration, String>,
) -> Result<Duration, String> {
    set.reset();
    // Leaked (a few bytes per run): tasks hold it for 'static without a
    // reference count touched per task.
    let done: &'static Completion = Box::leak(Box::new(Completion::new(v.tasks as usize)));
    let elapsed = body(done)?;
    set.verify()?;
    Ok(elapsed)
}

/// One run of pool `P`: untimed pool build, warm-up tasks and producer
/// spawn, timed from releasing the producers until the last task ran,
/// untimed shutdown, then the check that every task ran exactly once.
pub(super) fn run_once<P: TaskPool>(
    v: Variant,
    threads: usize,
    timeout: Duration,
    set: &'static TaskSet,
) -> Result<Duration, String> {
    exactly_once(v, set, |done| {
        let pool = P::build(threads)?;
        warm(2 * threads, |_, d| pool.submit(move || d.count_down()))?;
        let timed = produce(v, timeout, done, |index| {
            pool.submit(move || tick_once(set, done, index))
        });
        shut_down_unless_failed(timed, pool, P::shutdown)
    })
}

/// One `rayon-scope` run: like [`run_once`], but the producers are jobs of
/// a rayon scope inside the pool, spawning the tasks from pool threads.
pub(super) fn run_scope_once(
    v: Variant,
    threads: usize,
    timeout: Duration,
    set: &'static TaskSet,
) -> Result<Duration, String> {
    exactly_once(v, set, |done| {
        let pool = rayon_scope::build(threads)?;
        rayon_scope::warm(&pool);
        let ranges: Vec<_> = (0..v.producers)
            .map(|i| task_range(v.tasks, v.producers, i))
            .collect();
        ready_step();
        let clock = Stopwatch::start();
        rayon_scope::produce(&pool, ranges, |index| tick_once(set, done, index));
        let elapsed = done.wait_since(clock.started(), timeout);
        clock.stop();
        threads::sample_now();
        shut_down_unless_failed(elapsed, pool, drop)
    })
}

/// Shuts `pool` down after a good run. After a failed one it is leaked instead: a stuck pool
/// may never shut down, and the command fails anyway.
pub(super) fn shut_down_unless_failed<P>(
    timed: Result<Duration, String>,
    pool: P,
    shutdown: impl FnOnce(P),
) -> Result<Duration, String> {
    match timed {
        Ok(elapsed) => {
            shutdown(pool);
            Ok(elapsed)
        }
        Err(e) => {
            std::mem::forget(pool);
            Err(e)
        }
    }
}

/// One keyed run of pool `P`, timed like [`run_once`]; afterwards checks that
/// every task ran on each of its keys (`expected[k]` tasks name key `k`),
/// that tasks sharing a key never overlapped and, for a single producer and a
/// pool that promises it, that each key's tasks ran in submission order.
pub(super) fn run_keyed_once<P: KeyedPool>(
    v: Variant,
    threads: usize,
    timeout: Duration,
    expected: &[u64],
) -> Result<Duration, String> {
    // Leaked (128 bytes per key and a bit per task, per run): tasks hold it
    // for 'static without a reference count touched per task.
    let run: &'static KeyedRun = Box::leak(Box::new(KeyedRun::new_in(v.tasks, v.key_space)));
    let pool = P::build(threads)?;
    warm(2 * threads, |i, d| {
        let keys = TaskKeys::for_task_in(i, 1, v.key_space);
        pool.submit_keyed(keys, move || d.count_down())
    })?;
    let timed = produce(v, timeout, &run.done, |index| {
        let keys = TaskKeys::for_task_in(index, v.keys, v.key_space);
        pool.submit_keyed(keys, move || keyed_task(run, index + 1, keys))
    });
    let elapsed = shut_down_unless_failed(timed, pool, P::shutdown)?;
    run.verify(expected, P::ORDERED && v.producers == 1)?;
    Ok(elapsed)
}
