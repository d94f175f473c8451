//! `throughput`: 10,000,000 tasks, each one update of the shared completion
//! counter, submitted by 1, 2 or 4 producer threads: plain tasks (`--keys 0`),
//! or keyed tasks each naming 1 key (`--keys 1`) or 2 distinct keys
//! (`--keys 2`) of 1,024 (`--key-space N`; 2 keys of 16 is the
//! high-contention variant), drawn pseudo-randomly per task index.
//!
//! Every task marks its index in a bitmap: a task that runs twice fails the
//! run at once, one that never ran is named afterwards. Producers are
//! spawned and wait at a ready barrier (untimed); then the clock starts and
//! they are released together. `rayon-scope` runs its producers inside the
//! rayon pool (`ThreadPool::scope`, spawns from pool threads: rayon's fast
//! path), where `rayon` spawns from outside threads.
//!
//! Keyed tasks check, on every key they name, that no other task on the key
//! is running (a busy flag per key), that the key's tasks run in submission
//! order (enforced for a single producer and a system that promises order:
//! keyway; the mutex peer records the same but promises exclusion only), and
//! afterwards that every task ran on every one of its keys.

mod runs;
pub mod variant;

use std::time::Duration;

use clap::Args;
use serde_json::{json, Map};

use super::Emit;
use crate::harness::env::cores;
use crate::harness::options::RunOptions;
use crate::harness::{measure, Contender, VariantReport};
use crate::keys::{KEY_SPACE, MAX_KEY_SPACE, SMALL_KEY_SPACE};
use crate::once::TaskSet;
use crate::systems::crossbeam_pool::CrossbeamPool;
use crate::systems::keyway::{KeywayKeyed, KeywayPool};
use crate::systems::mutex_per_key::MutexPerKey;
use crate::systems::rayon_pool::RayonPool;
use crate::systems::rayon_scope;
use crate::systems::tokio_spawn::TokioSpawn;
use crate::systems::{KeyedPool, TaskPool};
use crate::work::KeyedRun;
#[cfg(test)]
use runs::{produce, share, task_range};
use runs::{run_keyed_once, run_once, run_scope_once};
use variant::Variant;

/// Tasks per run.
const TASKS: u64 = 10_000_000;
/// `--quick` divides the task count by this.
const QUICK_DIVISOR: u64 = 100;
/// `all` divides the task count by this (its 10-minute budget).
const REPORT_DIVISOR: u64 = 10;
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
    /// Keys per task: 0 = plain tasks, 1 or 2 keys (picks those variants).
    #[arg(long, value_parser = clap::value_parser!(u32).range(0..=2))]
    pub keys: Option<u32>,
    /// Number of distinct keys keyed tasks draw from (default 1,024; without
    /// this knob the 2-key variants also run on 16 keys: high contention).
    #[arg(long, value_parser = clap::value_parser!(u32).range(2..=MAX_KEY_SPACE as i64))]
    pub key_space: Option<u32>,
    /// Tasks per run, all producers together (not shrunk by --quick).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub tasks: Option<u64>,
}

/// The variants to run for `args`: every keys × producers combination the
/// knobs leave open, plain tasks first, then (unless `--key-space` or
/// `--keys 0/1` is given) the 2-key variants on 16 keys.
#[cfg(test)]
pub fn variants(args: &ThroughputArgs, quick: bool) -> Vec<Variant> {
    sized_variants(args, if quick { QUICK_DIVISOR } else { 1 })
}

fn sized_variants(args: &ThroughputArgs, divisor: u64) -> Vec<Variant> {
    let tasks = args.tasks.unwrap_or(TASKS / divisor.max(1));
    let producers = match args.producers {
        Some(p) => vec![p as usize],
        None => PRODUCERS.to_vec(),
    };
    let mut kinds: Vec<(u32, u32)> = match args.keys {
        Some(k) => vec![(k, args.key_space.unwrap_or(KEY_SPACE))],
        None => KEYS
            .iter()
            .map(|&k| (k, args.key_space.unwrap_or(KEY_SPACE)))
            .collect(),
    };
    if args.key_space.is_none() && args.keys.is_none_or(|k| k == 2) {
        kinds.push((2, SMALL_KEY_SPACE));
    }
    kinds
        .into_iter()
        .flat_map(|(keys, key_space)| {
            producers.iter().map(move |&producers| Variant {
                producers,
                tasks,
                keys,
                key_space,
            })
        })
        .collect()
}

/// Runs every selected variant, emitting each report as it is measured.
pub fn run(args: &ThroughputArgs, opts: &RunOptions, emit: &mut Emit<'_>) -> Result<(), String> {
    for variant in sized_variants(args, opts.divisor(QUICK_DIVISOR, REPORT_DIVISOR)) {
        emit(&run_variant(variant, opts)?);
    }
    Ok(())
}

/// Measures one variant.
pub fn run_variant(v: Variant, opts: &RunOptions) -> Result<VariantReport, String> {
    let threads = cores();
    let timeout = opts.timeout;
    let label = format!(
        "throughput keys={} key-space={} producers={}",
        v.keys, v.key_space, v.producers
    );
    let results = if v.keys == 0 {
        let set = TaskSet::leak(v.tasks);
        let mut contenders = [
            contender::<KeywayPool>(v, threads, timeout, set),
            contender::<CrossbeamPool>(v, threads, timeout, set),
            contender::<RayonPool>(v, threads, timeout, set),
            Contender::new(rayon_scope::NAME, move || {
                run_scope_once(v, threads, timeout, set)
            }),
            contender::<TokioSpawn>(v, threads, timeout, set),
        ];
        measure(&label, opts.runs, v.tasks, &mut contenders, &opts.progress)?
    } else {
        // How many tasks name each key: computed once, untimed.
        let expected = KeyedRun::expected_runs_in(v.tasks, v.keys, v.key_space);
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
        params.insert("key_space".into(), json!(v.key_space));
    }
    params.insert("tasks".into(), json!(v.tasks));
    params.insert("cores".into(), json!(threads));
    params.insert("runs".into(), json!(opts.runs));
    params.insert("quick".into(), json!(opts.quick));
    let tasks = match v.keys {
        0 => "plain tasks".to_string(),
        1 => format!("tasks on 1 key of {}", v.key_space),
        k => format!("tasks on {k} keys of {}", v.key_space),
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

fn contender<P: TaskPool>(
    v: Variant,
    threads: usize,
    timeout: Duration,
    set: &'static TaskSet,
) -> Contender<'static> {
    Contender::new(P::NAME, move || run_once::<P>(v, threads, timeout, set))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::TaskKeys;
    use crate::latch::Completion;
    use crate::work::tick_once;
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
        assert_eq!(list.len(), 12);
        assert_eq!(list[0], (0, 1, TASKS));
        assert_eq!(list[4], (1, 2, TASKS));
        assert_eq!(list[8], (2, 4, TASKS));
        let all = variants(&ThroughputArgs::default(), false);
        assert!(all[..9].iter().all(|v| v.key_space == KEY_SPACE));
        assert!(all[9..]
            .iter()
            .all(|v| v.keys == 2 && v.key_space == SMALL_KEY_SPACE));
        // `all`'s report size.
        assert_eq!(
            sized_variants(&ThroughputArgs::default(), REPORT_DIVISOR)[0].tasks,
            1_000_000
        );
    }

    #[test]
    fn key_space_knob_picks_the_key_space() {
        let args = ThroughputArgs {
            keys: Some(2),
            key_space: Some(16),
            producers: Some(4),
            tasks: Some(1_000),
        };
        assert_eq!(
            variants(&args, true),
            [Variant {
                producers: 4,
                tasks: 1_000,
                keys: 2,
                key_space: 16
            }]
        );
        let args = ThroughputArgs {
            keys: Some(1),
            ..Default::default()
        };
        assert!(variants(&args, false)
            .iter()
            .all(|v| v.key_space == KEY_SPACE));
    }

    #[test]
    fn knobs_pick_their_variants() {
        let args = ThroughputArgs {
            producers: Some(2),
            keys: Some(0),
            ..Default::default()
        };
        assert_eq!(
            variants(&args, true),
            [Variant {
                producers: 2,
                tasks: 100_000,
                keys: 0,
                key_space: KEY_SPACE
            }]
        );
        let args = ThroughputArgs {
            keys: Some(2),
            ..Default::default()
        };
        let list = variants(&args, true);
        assert_eq!(list.len(), 6);
        assert!(list.iter().all(|v| v.keys == 2 && v.tasks == 100_000));
    }

    fn plain(producers: usize, tasks: u64) -> Variant {
        Variant {
            producers,
            tasks,
            keys: 0,
            key_space: KEY_SPACE,
        }
    }

    /// Every throughput peer runs a small plain workload correctly, from 1
    /// and from 3 producers.
    #[test]
    fn peers_run_a_small_workload() {
        let timeout = Duration::from_secs(30);
        for producers in [1, 3] {
            let v = plain(producers, 10_000);
            let set = TaskSet::leak(v.tasks);
            run_once::<CrossbeamPool>(v, 2, timeout, set).unwrap();
            run_once::<RayonPool>(v, 2, timeout, set).unwrap();
            run_scope_once(v, 2, timeout, set).unwrap();
            run_once::<TokioSpawn>(v, 2, timeout, set).unwrap();
            run_once::<KeywayPool>(v, 2, timeout, set).unwrap();
        }
    }

    #[test]
    fn every_system_takes_the_readiness_step() {
        let opts = super::super::test_options();
        let report = run_variant(plain(2, 2_000), &opts).unwrap();
        super::super::assert_every_system_ready(
            &report,
            &["keyway", "crossbeam-pool", "rayon", "rayon-scope", "tokio"],
        );
        let keyed = Variant {
            producers: 2,
            tasks: 2_000,
            keys: 2,
            key_space: SMALL_KEY_SPACE,
        };
        let report = run_variant(keyed, &opts).unwrap();
        super::super::assert_every_system_ready(&report, &["keyway", "mutex-per-key"]);
    }

    /// A system that delivers task 3 twice and loses task 7 hands the
    /// completion counter the right number of updates; the exactly-once
    /// check still fails the run, naming the duplicate.
    #[test]
    fn a_duplicated_and_a_lost_task_fail_the_run() {
        let v = plain(2, 1_000);
        let set = TaskSet::leak(v.tasks);
        let done: &'static Completion = Box::leak(Box::new(Completion::new(v.tasks as usize)));
        let pool = CrossbeamPool::build(2).unwrap();
        let err = produce(v, Duration::from_secs(30), done, |index| match index {
            7 => Ok(()),
            3 => {
                pool.submit(move || tick_once(set, done, 3))?;
                pool.submit(move || tick_once(set, done, 3))
            }
            _ => pool.submit(move || tick_once(set, done, index)),
        })
        .unwrap_err();
        pool.shutdown();
        assert_eq!(err, "task 3 ran more than once");
        assert_eq!(
            set.verify().unwrap_err(),
            "1 of 1000 tasks did not run (first: task 7)"
        );
    }

    /// A lone lost task is named after the run times out.
    #[test]
    fn a_lost_task_fails_the_run() {
        let v = plain(1, 1_000);
        let set = TaskSet::leak(v.tasks);
        let done: &'static Completion = Box::leak(Box::new(Completion::new(v.tasks as usize)));
        let pool = CrossbeamPool::build(2).unwrap();
        let err = produce(v, Duration::from_millis(300), done, |index| {
            if index == 999 {
                return Ok(());
            }
            pool.submit(move || tick_once(set, done, index))
        })
        .unwrap_err();
        pool.shutdown();
        assert!(err.contains("1 completions missing"), "{err}");
        assert_eq!(
            set.verify().unwrap_err(),
            "1 of 1000 tasks did not run (first: task 999)"
        );
    }

    /// Both keyed systems run small 1- and 2-key workloads correctly, from
    /// one producer (order checked for keyway) and from several.
    #[test]
    fn keyed_systems_run_a_small_workload() {
        let timeout = Duration::from_secs(30);
        for (keys, key_space) in [(1, KEY_SPACE), (2, KEY_SPACE), (2, SMALL_KEY_SPACE)] {
            for producers in [1, 3] {
                let v = Variant {
                    producers,
                    tasks: 20_000,
                    keys,
                    key_space,
                };
                let expected = KeyedRun::expected_runs_in(v.tasks, keys, key_space);
                run_keyed_once::<MutexPerKey>(v, 2, timeout, &expected).unwrap();
                run_keyed_once::<KeywayKeyed>(v, 2, timeout, &expected).unwrap();
            }
        }
    }

    type Job = Box<dyn FnOnce() + Send>;

    /// A broken keyed "pool" that runs tasks on the submitting thread in
    /// blocks of 4 (so the 4 warm-up tasks of a 2-thread pool complete),
    /// each block newest first, and claims to keep order.
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
            if held.len() == 4 {
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
            key_space: SMALL_KEY_SPACE,
        };
        let expected = KeyedRun::expected_runs_in(v.tasks, v.keys, v.key_space);
        let timeout = Duration::from_secs(5);
        let err = run_keyed_once::<Reversing>(v, 2, timeout, &expected).unwrap_err();
        assert!(err.contains("order broken"), "{err}");
        // Order is only enforced for one producer.
        let v = Variant { producers: 2, ..v };
        let expected = KeyedRun::expected_runs_in(v.tasks, v.keys, v.key_space);
        run_keyed_once::<Reversing>(v, 2, timeout, &expected).unwrap();
    }

    #[test]
    fn lost_keyed_task_fails_the_run() {
        let v = Variant {
            producers: 1,
            tasks: 5_000,
            keys: 2,
            key_space: KEY_SPACE,
        };
        let expected = KeyedRun::expected_runs(v.tasks, v.keys);
        let err =
            run_keyed_once::<Losing>(v, 2, Duration::from_millis(200), &expected).unwrap_err();
        assert!(err.contains("5 completions missing"), "{err}");
    }
}
