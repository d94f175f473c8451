//! `throughput`: 10,000,000 tasks, each one update of the shared completion
//! counter, submitted by 1, 2 or 4 producer threads: plain tasks (`--keys 0`),
//! or keyed tasks each naming 1 key (`--keys 1`) or 2 distinct keys
//! (`--keys 2`) of 1,024, drawn pseudo-randomly per task index.
//!
//! Keyed tasks check, on every key they name, that no other task on the key
//! is running (a busy flag per key), that the key's tasks run in submission
//! order (enforced for a single producer and a system that promises order:
//! keyway; the mutex peer records the same but promises exclusion only), and
//! afterwards that every task ran on every one of its keys.

use std::sync::Barrier;
use std::time::{Duration, Instant};

use clap::Args;
use serde_json::{json, Map};

use super::{cores, Emit, RunOptions};
use crate::harness::{measure, Contender, VariantReport};
use crate::keys::{TaskKeys, KEY_SPACE};
use crate::latch::Completion;
use crate::systems::crossbeam_pool::CrossbeamPool;
use crate::systems::keyway::{KeywayKeyed, KeywayPool};
use crate::systems::mutex_per_key::MutexPerKey;
use crate::systems::rayon_pool::RayonPool;
use crate::systems::tokio_spawn::TokioSpawn;
use crate::systems::{KeyedPool, TaskPool};
use crate::work::{keyed_task, tick, KeyedRun};

/// Tasks per run.
const TASKS: u64 = 10_000_000;
/// `--quick` divides the task count by this.
const QUICK_DIVISOR: u64 = 100;
/// Producer counts run when `--producers` is not given.
const PRODUCERS: [usize; 3] = [1, 2, 4];
/// Keys per task run when `--keys` is not given.
const KEYS: [u32; 3] = [0, 1, 2];

/// The `throughput` knobs.
#[derive(Debug, Clone, Default, Args)]
pub struct ThroughputArgs {
    /// Producer threads, splitting the tasks between them (picks those variants).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub producers: Option<u64>,
    /// Keys per task: 0 = plain tasks, 1 or 2 keys of 1,024 (picks those variants).
    #[arg(long, value_parser = clap::value_parser!(u32).range(0..=2))]
    pub keys: Option<u32>,
}

/// One workload of the scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Variant {
    /// Producer threads.
    pub producers: usize,
    /// Tasks per run, all producers together.
    pub tasks: u64,
    /// Keys per task (0: plain tasks).
    pub keys: u32,
}

/// The variants to run for `args`: every keys × producers combination the
/// knobs leave open, plain tasks first.
pub fn variants(args: &ThroughputArgs, quick: bool) -> Vec<Variant> {
    let tasks = if quick { TASKS / QUICK_DIVISOR } else { TASKS };
    let producers = match args.producers {
        Some(p) => vec![p as usize],
        None => PRODUCERS.to_vec(),
    };
    let keys = match args.keys {
        Some(k) => vec![k],
        None => KEYS.to_vec(),
    };
    keys.into_iter()
        .flat_map(|keys| {
            producers.iter().map(move |&producers| Variant {
                producers,
                tasks,
                keys,
            })
        })
        .collect()
}

/// Runs every selected variant, emitting each report as it is measured.
pub fn run(args: &ThroughputArgs, opts: &RunOptions, emit: &mut Emit<'_>) -> Result<(), String> {
    for variant in variants(args, opts.quick) {
        emit(&run_variant(variant, opts)?);
    }
    Ok(())
}

fn run_variant(v: Variant, opts: &RunOptions) -> Result<VariantReport, String> {
    let threads = cores();
    let timeout = opts.timeout;
    let label = format!("throughput keys={} producers={}", v.keys, v.producers);
    let results = if v.keys == 0 {
        let mut contenders = [
            contender::<KeywayPool>(v, threads, timeout),
            contender::<CrossbeamPool>(v, threads, timeout),
            contender::<RayonPool>(v, threads, timeout),
            contender::<TokioSpawn>(v, threads, timeout),
        ];
        measure(&label, opts.runs, v.tasks, &mut contenders, &opts.progress)?
    } else {
        // How many tasks name each key: computed once, untimed.
        let expected = KeyedRun::expected_runs(v.tasks, v.keys);
        let mut contenders = [
            keyed_contender::<KeywayKeyed>(v, threads, timeout, &expected),
            keyed_contender::<MutexPerKey>(v, threads, timeout, &expected),
        ];
        measure(&label, opts.runs, v.tasks, &mut contenders, &opts.progress)?
    };
    let mut params = Map::new();
    params.insert("producers".into(), json!(v.producers));
    params.insert("keys".into(), json!(v.keys));
    if v.keys > 0 {
        params.insert("key_space".into(), json!(KEY_SPACE));
    }
    params.insert("tasks".into(), json!(v.tasks));
    params.insert("cores".into(), json!(threads));
    params.insert("runs".into(), json!(opts.runs));
    params.insert("quick".into(), json!(opts.quick));
    let tasks = match v.keys {
        0 => "plain tasks".to_string(),
        1 => format!("tasks on 1 key of {KEY_SPACE}"),
        k => format!("tasks on {k} keys of {KEY_SPACE}"),
    };
    Ok(VariantReport {
        scenario: "throughput",
        title: format!(
            "{} producer(s), {} {tasks} ({} runs, median)",
            v.producers, v.tasks, opts.runs
        ),
        params,
        results,
    })
}

fn contender<P: TaskPool>(v: Variant, threads: usize, timeout: Duration) -> Contender<'static> {
    Contender::new(P::NAME, move || run_once::<P>(v, threads, timeout))
}

fn keyed_contender<'a, P: KeyedPool>(
    v: Variant,
    threads: usize,
    timeout: Duration,
    expected: &'a [u64],
) -> Contender<'a> {
    Contender::new(P::NAME, move || {
        run_keyed_once::<P>(v, threads, timeout, expected)
    })
}

/// Producer `i`'s share of `tasks` split over `producers` (the first ones take
/// the remainder).
fn share(tasks: u64, producers: usize, i: usize) -> u64 {
    let p = producers as u64;
    tasks / p + u64::from((i as u64) < tasks % p)
}

/// The task indices producer `i` submits, in its submission order: a
/// contiguous range, so a single producer submits 0, 1, 2, …
fn task_range(tasks: u64, producers: usize, i: usize) -> std::ops::Range<u64> {
    let start: u64 = (0..i).map(|j| share(tasks, producers, j)).sum();
    start..start + share(tasks, producers, i)
}

/// The timed part of a run: spawns the producers (untimed), releases them at
/// once, and waits until `done` opens. Each producer calls `submit(index)`
/// for each task index of its range, in order; the first error fails the run.
fn produce(
    v: Variant,
    timeout: Duration,
    done: &Completion,
    submit: impl Fn(u64) -> Result<(), String> + Sync,
) -> Result<Duration, String> {
    let gate = Barrier::new(v.producers + 1);
    std::thread::scope(|s| {
        let producers: Vec<_> = (0..v.producers)
            .map(|i| {
                let (gate, submit) = (&gate, &submit);
                let range = task_range(v.tasks, v.producers, i);
                s.spawn(move || {
                    gate.wait();
                    for index in range {
                        if let Err(e) = submit(index) {
                            done.fail(format!("producer {i}: {e}"));
                            return;
                        }
                    }
                })
            })
            .collect();
        // The clock starts before the producers are released: read after the barrier, a
        // descheduled main thread would miss the producers' first work (seen: 95 µs for
        // 100,000 tasks with 4 producers on 2 cores).
        let start = Instant::now();
        gate.wait();
        let elapsed = done.wait_since(start, timeout);
        crate::harness::threads::sample_now();
        let panicked = producers.into_iter().any(|p| p.join().is_err());
        if panicked {
            return Err("a producer panicked".to_string());
        }
        elapsed
    })
}

/// One run of pool `P`: untimed pool build and producer spawn, timed from
/// releasing the producers until the last task ran, untimed shutdown, then
/// the check that every task ran exactly once.
fn run_once<P: TaskPool>(
    v: Variant,
    threads: usize,
    timeout: Duration,
) -> Result<Duration, String> {
    // Leaked (a few bytes per run): tasks hold it for 'static without a
    // reference count touched per task.
    let done: &'static Completion = Box::leak(Box::new(Completion::new(v.tasks as usize)));
    let pool = P::build(threads)?;
    let timed = produce(v, timeout, done, |_| pool.submit(move || tick(done)));
    let elapsed = shut_down_unless_failed(timed, pool, P::shutdown)?;
    match done.remaining() {
        0 => Ok(elapsed),
        n => Err(format!("{n} of {} tasks did not run", v.tasks)),
    }
}

/// Shuts `pool` down after a good run. After a failed one it is leaked instead: a stuck pool
/// may never shut down, and the command fails anyway.
fn shut_down_unless_failed<P>(
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
fn run_keyed_once<P: KeyedPool>(
    v: Variant,
    threads: usize,
    timeout: Duration,
    expected: &[u64],
) -> Result<Duration, String> {
    // Leaked (128 KiB per run): tasks hold it for 'static without a
    // reference count touched per task.
    let run: &'static KeyedRun = Box::leak(Box::new(KeyedRun::new(v.tasks)));
    let pool = P::build(threads)?;
    let timed = produce(v, timeout, &run.done, |index| {
        let keys = TaskKeys::for_task(index, v.keys);
        pool.submit_keyed(keys, move || keyed_task(run, index + 1, keys))
    });
    let elapsed = shut_down_unless_failed(timed, pool, P::shutdown)?;
    run.verify(expected, P::ORDERED && v.producers == 1)?;
    Ok(elapsed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[test]
    fn shares_add_up() {
        for (tasks, producers) in [(10, 3), (10_000_000, 4), (2, 4)] {
            let sum: u64 = (0..producers).map(|i| share(tasks, producers, i)).sum();
            assert_eq!(sum, tasks);
        }
    }

    #[test]
    fn task_ranges_tile_the_indices() {
        for (tasks, producers) in [(10, 3), (2, 4), (7, 1)] {
            let mut next = 0;
            for i in 0..producers {
                let range = task_range(tasks, producers, i);
                assert_eq!(range.start, next);
                next = range.end;
            }
            assert_eq!(next, tasks);
        }
    }

    #[test]
    fn no_knob_runs_every_keys_and_producers_variant() {
        let list: Vec<_> = variants(&ThroughputArgs::default(), false)
            .iter()
            .map(|v| (v.keys, v.producers, v.tasks))
            .collect();
        assert_eq!(list.len(), 9);
        assert_eq!(list[0], (0, 1, TASKS));
        assert_eq!(list[4], (1, 2, TASKS));
        assert_eq!(list[8], (2, 4, TASKS));
    }

    #[test]
    fn knobs_pick_their_variants() {
        let args = ThroughputArgs {
            producers: Some(2),
            keys: Some(0),
        };
        assert_eq!(
            variants(&args, true),
            [Variant {
                producers: 2,
                tasks: 100_000,
                keys: 0
            }]
        );
        let args = ThroughputArgs {
            keys: Some(2),
            ..Default::default()
        };
        let list = variants(&args, true);
        assert_eq!(list.len(), 3);
        assert!(list.iter().all(|v| v.keys == 2 && v.tasks == 100_000));
    }

    /// Every throughput peer runs a small plain workload correctly.
    #[test]
    fn peers_run_a_small_workload() {
        let v = Variant {
            producers: 2,
            tasks: 10_000,
            keys: 0,
        };
        let timeout = Duration::from_secs(30);
        run_once::<CrossbeamPool>(v, 2, timeout).unwrap();
        run_once::<RayonPool>(v, 2, timeout).unwrap();
        run_once::<TokioSpawn>(v, 2, timeout).unwrap();
        run_once::<KeywayPool>(v, 2, timeout).unwrap();
    }

    /// Both keyed systems run small 1- and 2-key workloads correctly, from
    /// one producer (order checked for keyway) and from several.
    #[test]
    fn keyed_systems_run_a_small_workload() {
        let timeout = Duration::from_secs(30);
        for keys in [1, 2] {
            for producers in [1, 3] {
                let v = Variant {
                    producers,
                    tasks: 20_000,
                    keys,
                };
                let expected = KeyedRun::expected_runs(v.tasks, keys);
                run_keyed_once::<MutexPerKey>(v, 2, timeout, &expected).unwrap();
                run_keyed_once::<KeywayKeyed>(v, 2, timeout, &expected).unwrap();
            }
        }
    }

    type Job = Box<dyn FnOnce() + Send>;

    /// A broken keyed "pool" that runs tasks on the submitting thread in
    /// blocks of 64, each block newest first, and claims to keep order.
    struct Reversing(Mutex<Vec<Job>>);

    impl KeyedPool for Reversing {
        const NAME: &'static str = "reversing";
        const ORDERED: bool = true;
        fn build(_: usize) -> Result<Self, String> {
            Ok(Self(Mutex::new(Vec::new())))
        }
        fn submit_keyed<F: FnOnce() + Send + 'static>(
            &self,
            _: TaskKeys,
            task: F,
        ) -> Result<(), String> {
            let mut held = self.0.lock().unwrap();
            held.push(Box::new(task));
            if held.len() == 64 {
                while let Some(task) = held.pop() {
                    task();
                }
            }
            Ok(())
        }
        fn shutdown(self) {}
    }

    /// A broken keyed "pool" that loses every 1,000th task.
    struct Losing(std::sync::atomic::AtomicU64);

    impl KeyedPool for Losing {
        const NAME: &'static str = "losing";
        const ORDERED: bool = false;
        fn build(_: usize) -> Result<Self, String> {
            Ok(Self(Default::default()))
        }
        fn submit_keyed<F: FnOnce() + Send + 'static>(
            &self,
            _: TaskKeys,
            task: F,
        ) -> Result<(), String> {
            let n = self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            if n % 1_000 != 999 {
                task();
            }
            Ok(())
        }
        fn shutdown(self) {}
    }

    #[test]
    fn broken_key_order_fails_the_run() {
        let v = Variant {
            producers: 1,
            tasks: 64 * 100,
            keys: 1,
        };
        let expected = KeyedRun::expected_runs(v.tasks, v.keys);
        let timeout = Duration::from_secs(5);
        let err = run_keyed_once::<Reversing>(v, 2, timeout, &expected).unwrap_err();
        assert!(err.contains("order broken"), "{err}");
        // Order is only enforced for one producer.
        let v = Variant { producers: 2, ..v };
        let expected = KeyedRun::expected_runs(v.tasks, v.keys);
        run_keyed_once::<Reversing>(v, 2, timeout, &expected).unwrap();
    }

    #[test]
    fn lost_keyed_task_fails_the_run() {
        let v = Variant {
            producers: 1,
            tasks: 5_000,
            keys: 2,
        };
        let expected = KeyedRun::expected_runs(v.tasks, v.keys);
        let err =
            run_keyed_once::<Losing>(v, 2, Duration::from_millis(200), &expected).unwrap_err();
        assert!(err.contains("5 completions missing"), "{err}");
    }
}
