//! `throughput`: 10,000,000 plain tasks, each one update of the shared
//! completion counter, submitted by 1, 2 or 4 producer threads.

use std::sync::Barrier;
use std::time::{Duration, Instant};

use clap::Args;
use serde_json::{json, Map};

use super::{cores, Emit, RunOptions};
use crate::harness::{measure, Contender, VariantReport};
use crate::latch::Completion;
use crate::systems::crossbeam_pool::CrossbeamPool;
use crate::systems::keyway::KeywayPool;
use crate::systems::rayon_pool::RayonPool;
use crate::systems::tokio_spawn::TokioSpawn;
use crate::systems::TaskPool;
use crate::work::tick;

/// Tasks per run.
const TASKS: u64 = 10_000_000;
/// `--quick` divides the task count by this.
const QUICK_DIVISOR: u64 = 100;
/// Producer counts run when `--producers` is not given.
const PRODUCERS: [usize; 3] = [1, 2, 4];

/// The `throughput` knobs.
#[derive(Debug, Clone, Default, Args)]
pub struct ThroughputArgs {
    /// Producer threads, splitting the tasks between them (picks a single variant).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub producers: Option<u64>,
    /// Keys per task: 0 = plain tasks (keyed variants 1 and 2 are not built yet).
    #[arg(long, default_value_t = 0)]
    pub keys: u32,
}

/// One workload of the scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Variant {
    /// Producer threads.
    pub producers: usize,
    /// Tasks per run, all producers together.
    pub tasks: u64,
}

/// The variants to run for `args`; fails for keyed variants, which do not exist yet.
pub fn variants(args: &ThroughputArgs, quick: bool) -> Result<Vec<Variant>, String> {
    if args.keys != 0 {
        return Err(format!(
            "throughput --keys {}: keyed variants are not implemented yet \
             (they come with multi-key tasks); use --keys 0",
            args.keys
        ));
    }
    let tasks = if quick { TASKS / QUICK_DIVISOR } else { TASKS };
    let producers = match args.producers {
        Some(p) => vec![p as usize],
        None => PRODUCERS.to_vec(),
    };
    Ok(producers
        .into_iter()
        .map(|producers| Variant { producers, tasks })
        .collect())
}

/// Runs every selected variant, emitting each report as it is measured.
pub fn run(args: &ThroughputArgs, opts: &RunOptions, emit: &mut Emit<'_>) -> Result<(), String> {
    for variant in variants(args, opts.quick)? {
        emit(&run_variant(variant, opts)?);
    }
    Ok(())
}

fn run_variant(v: Variant, opts: &RunOptions) -> Result<VariantReport, String> {
    let threads = cores();
    let timeout = opts.timeout;
    let mut contenders = [
        contender::<KeywayPool>(v, threads, timeout),
        contender::<CrossbeamPool>(v, threads, timeout),
        contender::<RayonPool>(v, threads, timeout),
        contender::<TokioSpawn>(v, threads, timeout),
    ];
    let label = format!("throughput producers={}", v.producers);
    let results = measure(&label, opts.runs, v.tasks, &mut contenders, &opts.progress)?;
    let mut params = Map::new();
    params.insert("producers".into(), json!(v.producers));
    params.insert("keys".into(), json!(0));
    params.insert("tasks".into(), json!(v.tasks));
    params.insert("cores".into(), json!(threads));
    params.insert("runs".into(), json!(opts.runs));
    params.insert("quick".into(), json!(opts.quick));
    Ok(VariantReport {
        scenario: "throughput",
        title: format!(
            "{} producer(s), {} plain tasks ({} runs, median)",
            v.producers, v.tasks, opts.runs
        ),
        params,
        results,
    })
}

fn contender<P: TaskPool>(v: Variant, threads: usize, timeout: Duration) -> Contender<'static> {
    Contender::new(P::NAME, move || run_once::<P>(v, threads, timeout))
}

/// Producer `i`'s share of `tasks` split over `producers` (the first ones take
/// the remainder).
fn share(tasks: u64, producers: usize, i: usize) -> u64 {
    let p = producers as u64;
    tasks / p + u64::from((i as u64) < tasks % p)
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
    let gate = Barrier::new(v.producers + 1);
    let timed = std::thread::scope(|s| {
        let producers: Vec<_> = (0..v.producers)
            .map(|i| {
                let (pool, gate) = (&pool, &gate);
                let n = share(v.tasks, v.producers, i);
                s.spawn(move || {
                    gate.wait();
                    for _ in 0..n {
                        if let Err(e) = pool.submit(move || tick(done)) {
                            done.fail(format!("producer {i}: {e}"));
                            return;
                        }
                    }
                })
            })
            .collect();
        gate.wait();
        let start = Instant::now();
        let elapsed = done.wait_since(start, timeout);
        crate::harness::threads::sample_now();
        let panicked = producers.into_iter().any(|p| p.join().is_err());
        if panicked {
            return Err("a producer panicked".to_string());
        }
        elapsed
    });
    let elapsed = match timed {
        Ok(elapsed) => elapsed,
        Err(e) => {
            // A stuck pool may never shut down: leave it be, the command fails anyway.
            std::mem::forget(pool);
            return Err(e);
        }
    };
    pool.shutdown();
    match done.remaining() {
        0 => Ok(elapsed),
        n => Err(format!("{n} of {} tasks did not run", v.tasks)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_add_up() {
        for (tasks, producers) in [(10, 3), (10_000_000, 4), (2, 4)] {
            let sum: u64 = (0..producers).map(|i| share(tasks, producers, i)).sum();
            assert_eq!(sum, tasks);
        }
    }

    #[test]
    fn keyed_variants_are_refused_for_now() {
        let args = ThroughputArgs {
            keys: 1,
            ..Default::default()
        };
        assert!(variants(&args, false).is_err());
    }

    #[test]
    fn producers_knob_picks_one_variant() {
        assert_eq!(variants(&ThroughputArgs::default(), true).unwrap().len(), 3);
        let args = ThroughputArgs {
            producers: Some(2),
            ..Default::default()
        };
        let list = variants(&args, true).unwrap();
        assert_eq!(
            list,
            [Variant {
                producers: 2,
                tasks: 100_000
            }]
        );
    }

    /// Every throughput peer runs a small workload correctly.
    #[test]
    fn peers_run_a_small_workload() {
        let v = Variant {
            producers: 2,
            tasks: 10_000,
        };
        let timeout = Duration::from_secs(30);
        run_once::<CrossbeamPool>(v, 2, timeout).unwrap();
        run_once::<RayonPool>(v, 2, timeout).unwrap();
        run_once::<TokioSpawn>(v, 2, timeout).unwrap();
        run_once::<KeywayPool>(v, 2, timeout).unwrap();
    }
}
