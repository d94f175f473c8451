//! `strategy`: one producer makes tasks that each carry a freshly written
//! 16 KiB buffer; consuming a task checksums its buffer and records the
//! checksum in the task's slot. keyway's adaptive strategy (consume on the
//! producing thread when that cannot starve production) against `pec`
//! (always dispatch to a pool through a bounded queue) and `pc` (one thread
//! does everything), with non-blocking tasks, blocking ones (declared
//! `Blocking`, each also sleeps 50 µs) and a mix (every other task
//! blocking: where choosing per task is the adaptive strategy's point).
//! Every system's pool runs a no-op through its threads before the clock
//! (keyway's reserved thread, `pec`'s workers). Every run checks that each task was consumed exactly once
//! with the right checksum.

use std::cell::RefCell;
use std::time::Duration;

use clap::Args;
use keyway::ModeCounts;
use serde_json::{json, Map, Value};

use super::Emit;
use crate::harness::env::cores;
use crate::harness::options::RunOptions;
use crate::harness::{measure, timed_run, Contender, VariantReport};
use crate::systems::strategy::keyway_adaptive::{KeywayAdaptive, RESERVED_THREADS};
use crate::systems::strategy::pc::ProduceConsume;
use crate::systems::strategy::pec::{
    ProduceExecuteConsume, QUEUE_PER_THREAD as PEC_QUEUE_PER_THREAD,
};
use crate::systems::strategy::StrategySystem;
use crate::work::strategy::{Mix, StrategyRun, BLOCKING_SLEEP, BUFFER_BYTES};

/// Tasks per run with non-blocking tasks.
const TASKS: u64 = 1_000_000;
/// Tasks per run in the blocking and mixed variants (`--tasks` sets more).
/// The full size would be 1,000,000, but keyway's adaptive strategy, when it chooses
/// produce-execute-consume for blocking tasks, queues them on its pool's
/// unbounded queue: measured 1.1 GiB of backlog (+RSS) at 100,000 tasks of
/// 16 KiB, so 1,000,000 would need up to 16 GiB, more than a shared machine
/// should be asked for. `pec` is bounded; keyway has no bound to set.
const BLOCKING_TASKS: u64 = 100_000;
/// `--quick` divides the non-blocking task count by this.
const QUICK_DIVISOR: u64 = 50;
/// `--quick` divides the blocking and mixed task counts by this.
const QUICK_BLOCKING_DIVISOR: u64 = 50;
/// `all` divides the non-blocking task count by this (its 10-minute budget).
const REPORT_DIVISOR: u64 = 10;

/// The `strategy` knobs.
#[derive(Debug, Clone, Default, Args)]
pub struct StrategyArgs {
    /// Only this variant: non-blocking, blocking (declared blocking, each
    /// sleeps 50 µs) or mixed (every other task blocking).
    #[arg(long, value_enum)]
    pub variant: Option<VariantName>,
    /// Only the blocking variant (alias of --variant blocking).
    #[arg(long, conflicts_with = "variant")]
    pub blocking: bool,
    /// Tasks per run (not shrunk by --quick).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub tasks: Option<u64>,
}

/// The variants `--variant` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum VariantName {
    /// Every task only checksums its buffer.
    NonBlocking,
    /// Every task is declared blocking and sleeps 50 µs.
    Blocking,
    /// Every other task is blocking.
    Mixed,
}

impl VariantName {
    fn mix(self) -> Mix {
        match self {
            VariantName::NonBlocking => Mix::NonBlocking,
            VariantName::Blocking => Mix::Blocking,
            VariantName::Mixed => Mix::Mixed,
        }
    }
}

/// One workload of the scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Variant {
    /// Which tasks are declared `Blocking` and sleep after the checksum.
    pub mix: Mix,
    /// Tasks per run.
    pub tasks: u64,
}

impl Variant {
    fn name(self) -> &'static str {
        self.mix.name()
    }
}

/// The variants to run for `args`: all three, or the one `--variant` (or
/// `--blocking`) names; `quick` shrinks task counts the user did not set.
#[cfg(test)]
pub fn variants(args: &StrategyArgs, quick: bool) -> Vec<Variant> {
    sized_variants(args, quick, false)
}

fn sized_variants(args: &StrategyArgs, quick: bool, report: bool) -> Vec<Variant> {
    let mixes = match (args.variant, args.blocking) {
        (Some(name), _) => vec![name.mix()],
        (None, true) => vec![Mix::Blocking],
        (None, false) => vec![Mix::NonBlocking, Mix::Blocking, Mix::Mixed],
    };
    mixes
        .into_iter()
        .map(|mix| {
            let (full, divisor) = match (quick, report, mix) {
                (true, _, Mix::NonBlocking) => (TASKS, QUICK_DIVISOR),
                (true, _, _) => (BLOCKING_TASKS, QUICK_BLOCKING_DIVISOR),
                (false, true, Mix::NonBlocking) => (TASKS, REPORT_DIVISOR),
                (false, _, Mix::NonBlocking) => (TASKS, 1),
                (false, _, _) => (BLOCKING_TASKS, 1),
            };
            Variant {
                mix,
                tasks: args.tasks.unwrap_or(full / divisor),
            }
        })
        .collect()
}

/// Runs the scenario, emitting one report per variant.
pub fn run(args: &StrategyArgs, opts: &RunOptions, emit: &mut Emit<'_>) -> Result<(), String> {
    for v in sized_variants(args, opts.quick, opts.report) {
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
    // The first run is the harness's uncounted warm-up run.
    for (i, counts) in modes.iter().enumerate() {
        let run = if i == 0 {
            "warm-up run".to_string()
        } else {
            format!("run {i}")
        };
        eprintln!("keyway-bench: {label}: keyway {run}: {counts}");
    }
    let last = modes.last().copied().unwrap_or_default();
    let mut params = Map::new();
    params.insert("variant".into(), json!(v.name()));
    params.insert("blocking".into(), json!(v.mix != Mix::NonBlocking));
    params.insert("tasks".into(), json!(v.tasks));
    params.insert("buffer_bytes".into(), json!(BUFFER_BYTES));
    if v.mix != Mix::NonBlocking {
        params.insert("sleep_us".into(), json!(BLOCKING_SLEEP.as_micros() as u64));
    }
    params.insert("cores".into(), json!(threads));
    params.insert("reserved_threads".into(), json!(RESERVED_THREADS));
    params.insert("pec_pool".into(), json!("crossbeam-pool"));
    params.insert("pec_queue".into(), json!(PEC_QUEUE_PER_THREAD * threads));
    params.insert("runs".into(), json!(opts.runs));
    params.insert("quick".into(), json!(opts.quick));
    params.insert("modes".into(), modes_json(&last));
    let sleep_us = BLOCKING_SLEEP.as_micros();
    let kind = match v.mix {
        Mix::NonBlocking => ", declared non-blocking".to_string(),
        Mix::Blocking => format!(", declared blocking, each sleeps {sleep_us} µs"),
        Mix::Mixed => format!(", every other one declared blocking and sleeping {sleep_us} µs"),
    };
    let note = if v.mix == Mix::NonBlocking {
        "; keyway consumes every non-blocking task on the producing thread, so its row \
         is the pc strategy run by keyway"
    } else {
        ""
    };
    Ok(VariantReport {
        scenario: "strategy",
        title: format!(
            "{}: {} tasks, each a checksum of a fresh {BUFFER_BYTES}-byte buffer{kind} \
             ({} runs, median); keyway modes, last run: {last}{note}",
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
    let run: &'static StrategyRun = Box::leak(Box::new(StrategyRun::new(slots, v.mix)));
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
        let all = variants(&StrategyArgs::default(), false);
        let mixes: Vec<_> = all.iter().map(|v| (v.mix, v.tasks)).collect();
        assert_eq!(
            mixes,
            [
                (Mix::NonBlocking, TASKS),
                (Mix::Blocking, BLOCKING_TASKS),
                (Mix::Mixed, BLOCKING_TASKS)
            ]
        );
        assert_eq!(TASKS, 1_000_000);
        let quick = variants(&StrategyArgs::default(), true);
        assert_eq!(quick[0].tasks, 20_000);
        assert_eq!(quick[1].tasks, 2_000);
        assert_eq!(quick[2].tasks, 2_000);
        let report = sized_variants(&StrategyArgs::default(), false, true);
        assert!(report.iter().all(|v| v.tasks == 100_000));
        let args = StrategyArgs {
            blocking: true,
            tasks: Some(7),
            ..Default::default()
        };
        assert_eq!(
            variants(&args, true),
            [Variant {
                mix: Mix::Blocking,
                tasks: 7
            }]
        );
        let args = StrategyArgs {
            variant: Some(VariantName::Mixed),
            ..Default::default()
        };
        assert_eq!(variants(&args, false)[0].mix, Mix::Mixed);
    }

    /// Every system runs both variants of a small workload correctly, and
    /// keyway counts every task in some mode.
    #[test]
    fn systems_run_a_small_workload() {
        let timeout = Duration::from_secs(30);
        for (mix, tasks) in [
            (Mix::NonBlocking, 5_000),
            (Mix::Blocking, 500),
            (Mix::Mixed, 500),
        ] {
            let v = Variant { mix, tasks };
            let expected = StrategyRun::expected(tasks, 2);
            let slots = StrategyRun::leak_slots(tasks);
            let (_, counts) = run_once::<KeywayAdaptive>(v, slots, 2, timeout, &expected).unwrap();
            let counts = counts.unwrap();
            assert_eq!(counts.total(), tasks);
            if mix == Mix::NonBlocking {
                assert_eq!(counts.produce_consume, tasks, "{counts}");
            }
            run_once::<ProduceExecuteConsume>(v, slots, 2, timeout, &expected).unwrap();
            run_once::<ProduceConsume>(v, slots, 2, timeout, &expected).unwrap();
        }
    }

    #[test]
    fn every_system_takes_the_readiness_step() {
        let v = Variant {
            mix: Mix::Mixed,
            tasks: 200,
        };
        let report = run_variant(v, &super::super::test_options()).unwrap();
        super::super::assert_every_system_ready(&report, &["keyway", "pec", "pc"]);
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
            mix: Mix::NonBlocking,
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
