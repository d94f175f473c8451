//! `strategy`: one producer makes tasks that each carry a freshly written
//! 16 KiB buffer; consuming a task checksums its buffer and records the
//! checksum in the task's slot. keyway's adaptive strategy (consume on the
//! producing thread when that cannot starve production) against `pec`
//! (always dispatch to a pool) and `pc` (one thread does everything), with
//! non-blocking tasks and with blocking ones (declared `Blocking`, each also
//! sleeps 50 µs). Every run checks that each task was consumed exactly once
//! with the right checksum.

use std::cell::RefCell;
use std::time::Duration;

use clap::Args;
use keyway::ModeCounts;
use serde_json::{json, Map, Value};

use super::{cores, Emit, RunOptions};
use crate::harness::{measure, timed_run, Contender, VariantReport};
use crate::systems::strategy::keyway_adaptive::{KeywayAdaptive, RESERVED_THREADS};
use crate::systems::strategy::pc::ProduceConsume;
use crate::systems::strategy::pec::ProduceExecuteConsume;
use crate::systems::strategy::StrategySystem;
use crate::work::strategy::{StrategyRun, BLOCKING_SLEEP, BUFFER_BYTES};

/// Tasks per run with non-blocking tasks (SPEC §9).
const TASKS: u64 = 1_000_000;
/// Tasks per run with blocking tasks: a 50 µs sleep takes ~110 µs on
/// Linux (timer slack), so 1,000,000 tasks would keep `pc` busy ~110 s per
/// run; 100,000 keep every system-run near or under ~11 s.
const BLOCKING_TASKS: u64 = 100_000;
/// `--quick` divides the task counts by this.
const QUICK_DIVISOR: u64 = 50;

/// The `strategy` knobs.
#[derive(Debug, Clone, Default, Args)]
pub struct StrategyArgs {
    /// Only the variant whose tasks are declared blocking and sleep 50 µs.
    #[arg(long)]
    pub blocking: bool,
    /// Tasks per run (not shrunk by --quick).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub tasks: Option<u64>,
}

/// One workload of the scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Variant {
    /// Tasks declared `Blocking` that sleep after the checksum, or
    /// `NonBlocking` ones that do not.
    pub blocking: bool,
    /// Tasks per run.
    pub tasks: u64,
}

impl Variant {
    fn name(self) -> &'static str {
        if self.blocking {
            "blocking"
        } else {
            "non-blocking"
        }
    }
}

/// The variants to run for `args`: both, or only the blocking one with
/// `--blocking`; `quick` shrinks task counts the user did not set.
pub fn variants(args: &StrategyArgs, quick: bool) -> Vec<Variant> {
    let kinds: &[bool] = if args.blocking {
        &[true]
    } else {
        &[false, true]
    };
    kinds
        .iter()
        .map(|&blocking| {
            let full = if blocking { BLOCKING_TASKS } else { TASKS };
            let tasks = match args.tasks {
                Some(tasks) => tasks,
                None if quick => full / QUICK_DIVISOR,
                None => full,
            };
            Variant { blocking, tasks }
        })
        .collect()
}

/// Runs the scenario, emitting one report per variant.
pub fn run(args: &StrategyArgs, opts: &RunOptions, emit: &mut Emit<'_>) -> Result<(), String> {
    for v in variants(args, opts.quick) {
        emit(&run_variant(v, opts)?);
    }
    Ok(())
}

fn run_variant(v: Variant, opts: &RunOptions) -> Result<VariantReport, String> {
    let threads = cores();
    let timeout = opts.timeout;
    let label = format!("strategy {}", v.name());
    // What each task's checksum must be: computed once, untimed.
    let expected = StrategyRun::expected(v.tasks, threads);
    let slots = StrategyRun::leak_slots(v.tasks);
    let modes: RefCell<Vec<ModeCounts>> = RefCell::new(Vec::new());
    let results = {
        let (expected, modes) = (&expected, &modes);
        let mut contenders = [
            Contender::new(KeywayAdaptive::NAME, move || {
                let (elapsed, counts) =
                    run_once::<KeywayAdaptive>(v, slots, threads, timeout, expected)?;
                modes.borrow_mut().extend(counts);
                Ok(elapsed)
            }),
            contender::<ProduceExecuteConsume>(v, slots, threads, timeout, expected),
            contender::<ProduceConsume>(v, slots, threads, timeout, expected),
        ];
        measure(&label, opts.runs, v.tasks, &mut contenders, &opts.progress)?
    };
    let modes = modes.into_inner();
    for (i, counts) in modes.iter().enumerate() {
        eprintln!("keyway-bench: {label}: keyway run {}: {counts}", i + 1);
    }
    let last = modes.last().copied().unwrap_or_default();
    let mut params = Map::new();
    params.insert("variant".into(), json!(v.name()));
    params.insert("blocking".into(), json!(v.blocking));
    params.insert("tasks".into(), json!(v.tasks));
    params.insert("buffer_bytes".into(), json!(BUFFER_BYTES));
    if v.blocking {
        params.insert("sleep_us".into(), json!(BLOCKING_SLEEP.as_micros() as u64));
    }
    params.insert("cores".into(), json!(threads));
    params.insert("reserved_threads".into(), json!(RESERVED_THREADS));
    params.insert("pec_pool".into(), json!("crossbeam-pool"));
    params.insert("runs".into(), json!(opts.runs));
    params.insert("quick".into(), json!(opts.quick));
    params.insert("modes".into(), modes_json(&last));
    let sleep = if v.blocking {
        format!(
            ", declared blocking, each sleeps {} µs",
            BLOCKING_SLEEP.as_micros()
        )
    } else {
        ", declared non-blocking".to_string()
    };
    Ok(VariantReport {
        scenario: "strategy",
        title: format!(
            "{}: {} tasks, each a checksum of a fresh {BUFFER_BYTES}-byte buffer{sleep} \
             ({} runs, median); keyway modes, last run: {last}",
            v.name(),
            v.tasks,
            opts.runs
        ),
        params,
        results,
    })
}

/// keyway's per-mode counts in the JSON `params`.
fn modes_json(counts: &ModeCounts) -> Value {
    json!({
        "pc": counts.produce_consume,
        "epc": counts.execute_produce_consume,
        "pic": counts.produce_invoke_consume,
        "pec": counts.produce_execute_consume,
    })
}

fn contender<'a, S: StrategySystem>(
    v: Variant,
    slots: &'static [std::sync::atomic::AtomicU64],
    threads: usize,
    timeout: Duration,
    expected: &'a [u64],
) -> Contender<'a> {
    Contender::new(S::NAME, move || {
        run_once::<S>(v, slots, threads, timeout, expected).map(|(elapsed, _)| elapsed)
    })
}

/// One run of system `S`: untimed setup, timed production until the last
/// task is consumed, untimed teardown, then the check of every task's slot.
fn run_once<S: StrategySystem>(
    v: Variant,
    slots: &'static [std::sync::atomic::AtomicU64],
    threads: usize,
    timeout: Duration,
    expected: &[u64],
) -> Result<(Duration, Option<ModeCounts>), String> {
    // Leaked (a few hundred bytes per run; the slots are the variant's):
    // tasks hold it for 'static without a reference count touched per task.
    let run: &'static StrategyRun = Box::leak(Box::new(StrategyRun::new(slots, v.blocking)));
    let system = S::setup(run, threads)?;
    let (elapsed, counts) = timed_run(system, &run.done, timeout, |s| s.feed(), |s| s.teardown())?;
    run.verify(expected)?;
    Ok((elapsed, counts))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::work::strategy::{consume, fill};

    #[test]
    fn variants_follow_the_knobs() {
        let both = variants(&StrategyArgs::default(), false);
        assert_eq!(
            both,
            [
                Variant {
                    blocking: false,
                    tasks: TASKS
                },
                Variant {
                    blocking: true,
                    tasks: BLOCKING_TASKS
                }
            ]
        );
        let quick = variants(&StrategyArgs::default(), true);
        assert_eq!(quick[0].tasks, 20_000);
        assert_eq!(quick[1].tasks, 2_000);
        let args = StrategyArgs {
            blocking: true,
            tasks: Some(7),
        };
        assert_eq!(
            variants(&args, true),
            [Variant {
                blocking: true,
                tasks: 7
            }]
        );
    }

    /// Every system runs both variants of a small workload correctly, and
    /// keyway counts every task in some mode.
    #[test]
    fn systems_run_a_small_workload() {
        let timeout = Duration::from_secs(30);
        for (blocking, tasks) in [(false, 5_000), (true, 500)] {
            let v = Variant { blocking, tasks };
            let expected = StrategyRun::expected(tasks, 2);
            let slots = StrategyRun::leak_slots(tasks);
            let (_, counts) = run_once::<KeywayAdaptive>(v, slots, 2, timeout, &expected).unwrap();
            let counts = counts.unwrap();
            assert_eq!(counts.total(), tasks);
            if !blocking {
                assert_eq!(counts.produce_consume, tasks, "{counts}");
            }
            run_once::<ProduceExecuteConsume>(v, slots, 2, timeout, &expected).unwrap();
            run_once::<ProduceConsume>(v, slots, 2, timeout, &expected).unwrap();
        }
    }

    /// A broken system: consumes every task except the last, and task 0 twice.
    struct Sloppy(&'static StrategyRun);

    impl StrategySystem for Sloppy {
        const NAME: &'static str = "sloppy";
        fn setup(run: &'static StrategyRun, _: usize) -> Result<Self, String> {
            Ok(Self(run))
        }
        fn feed(&mut self) -> Result<(), String> {
            let run = self.0;
            for task in (0..run.tasks - 1).chain([0]) {
                consume(run, task, &fill(task));
            }
            Ok(())
        }
        fn teardown(self) -> Result<Option<ModeCounts>, String> {
            Ok(None)
        }
    }

    #[test]
    fn a_lost_and_a_repeated_task_fail_the_run() {
        let v = Variant {
            blocking: false,
            tasks: 100,
        };
        let expected = StrategyRun::expected(v.tasks, 1);
        let slots = StrategyRun::leak_slots(v.tasks);
        let err = run_once::<Sloppy>(v, slots, 2, Duration::from_secs(5), &expected).unwrap_err();
        // The latch opened (as many count-downs as tasks); the slots tell.
        assert!(
            err.contains("1 tasks not consumed, 1 consumed more than once"),
            "{err}"
        );
    }

    #[test]
    fn modes_json_has_the_four_modes() {
        let counts = ModeCounts {
            produce_consume: 1,
            execute_produce_consume: 2,
            produce_invoke_consume: 3,
            produce_execute_consume: 4,
            ..Default::default()
        };
        assert_eq!(
            modes_json(&counts),
            json!({"pc": 1, "epc": 2, "pic": 3, "pec": 4})
        );
    }
}
