//! `latency`: how long a task waits, under an open-loop load.
//!
//! Cells: 16 and 1,024 contexts × work 10 and 1,000. In each cell every system's sustained rate
//! is measured first (a short closed-loop burst of the `contexts` workload: the producer
//! submits as fast as it can, through the same loop and records as the open-loop runs), then
//! the system is offered 25%, 50% and 80% of its own rate (with `--same-rate`: every system
//! that share of the slowest one's rate; `--rate-of NAME`: of that system's; `--rate N`: of N
//! tasks a second) on an open-loop schedule (arrivals at fixed times, round robin over the
//! contexts; delays counted from each task's intended submit time, so a stall cannot hide as a
//! lower rate: see `open_loop`). Each row reports p50, p99, p99.9 and max of submit-to-start
//! and submit-to-finish (HDR histograms), the achieved rate against the offered one, p99 and
//! p99.9 of the producer's lateness (intended time to submit: the part of the delay the
//! producer spent not yet submitting, from a slow submit call or a producer without a CPU),
//! and the producer thread's context switches during the run: `prod blocks` (it gave the CPU
//! up: slept ahead of its schedule, or blocked in a submit call) and `prod preempt` (the
//! kernel took the CPU from it while it could run: the system's threads, or others, wanted
//! both cores), and `others ms`: the CPU time other processes took during the run (a row that
//! shared the cores with other work measured that work too). Per-context order is checked as
//! in `contexts` (crossbeam-pool keeps none: completeness only).
//! One open-loop run per system and load, after an uncounted warm-up run; `--runs` is ignored.

use std::cell::RefCell;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use serde_json::{json, Map};

use super::Emit;
use crate::harness::env::{cores, Disturbance};
use crate::harness::options::RunOptions;
use crate::harness::report::group_thousands;
use crate::harness::{is_selected, measure, Contender, VariantReport};
use crate::open_loop::{Summary, Switches};
use crate::systems::crossbeam_pool::CrossbeamContexts;
use crate::systems::keyway::{KeywayLanes, KeywayTyped};
use crate::systems::thread_per_context::{ThreadPerContext, THREAD_LIMIT};
use crate::systems::tokio_actor::TokioActor;
use crate::systems::{run_contexts, ContextsSystem};
use crate::work::ContextsRun;

/// The cells: (contexts, work).
const CELLS: [(usize, u64); 4] = [(16, 10), (16, 1_000), (1_024, 10), (1_024, 1_000)];
/// Offered loads, in percent of each system's sustained rate.
const LOADS: [u32; 3] = [25, 50, 80];
/// Tasks of the sustained-rate burst, at full size.
const PROBE_TASKS: u64 = 400_000;
/// Seconds of one open-loop run, at full size.
const RUN_S: f64 = 1.0;
/// `--quick` divides both by this.
const QUICK_DIVISOR: u64 = 40;
/// `all` divides both by this (its 10-minute budget).
const REPORT_DIVISOR: u64 = 5;
/// The quantiles plotted (as 1 / (1 − q)).
const PLOTTED: [f64; 9] = [0.5, 0.75, 0.9, 0.95, 0.99, 0.995, 0.999, 0.9995, 0.9999];

/// The `latency` knobs.
#[derive(Debug, Clone, Default, Args)]
pub struct LatencyArgs {
    /// Only this many contexts (default: 16 and 1,024).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub contexts: Option<u64>,
    /// Only this work per task (default: 10 and 1,000).
    #[arg(long)]
    pub work: Option<u64>,
    /// Only this load, in percent of each system's sustained rate (default: 25, 50, 80).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub load: Option<u32>,
    /// Also draw the latency distributions as SVG plots into this folder.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Offer every system the same rate: the load in percent of the slowest system's sustained
    /// rate in the cell (default: each system its own), so the delays compare at one rate.
    #[arg(long)]
    pub same_rate: bool,
    /// Offer every system the same rate: the load in percent of this system's sustained rate
    /// (a row name, e.g. `keyway`), so the delays compare at one rate that system sets.
    #[arg(long, conflicts_with = "same_rate")]
    pub rate_of: Option<String>,
    /// Offer every system the same rate: the load in percent of this many tasks a second (with
    /// `--load 100`, this rate itself), whatever each one sustains; to compare runs at one
    /// rate that no burst measurement moves.
    #[arg(long, conflicts_with_all = ["same_rate", "rate_of"], value_parser = positive_rate)]
    pub rate: Option<f64>,
}

/// One plot of latency distributions: a line of (1 / (1 − q), µs) points per system.
#[derive(Debug, Clone)]
pub struct Distribution {
    /// File stem of its SVG.
    pub file: String,
    /// What it shows.
    pub title: String,
    /// (system, points).
    pub series: Vec<(String, Vec<(f64, f64)>)>,
}

/// One system of an open-loop scenario (this one and the hot key's): its row name and one
/// run of it on a prepared run.
#[derive(Clone, Copy)]
pub(super) struct System {
    pub(super) name: &'static str,
    pub(super) run: fn(&'static ContextsRun, usize, Duration) -> Result<Duration, String>,
}

/// The [`System`] of `S`.
pub(super) fn system<S: ContextsSystem>() -> System {
    System {
        name: S::NAME,
        run: run_contexts::<S>,
    }
}

/// The systems measured in a cell of `contexts` contexts.
fn systems(contexts: usize) -> Vec<System> {
    let mut list = vec![
        system::<KeywayLanes>(),
        system::<KeywayTyped>(),
        system::<TokioActor>(),
    ];
    if contexts <= THREAD_LIMIT {
        list.push(system::<ThreadPerContext>());
    }
    list.push(system::<CrossbeamContexts>());
    list
}

/// Runs every selected cell and load, emitting a report per (cell, load); returns the plots'
/// data (one per report).
pub fn run(
    args: &LatencyArgs,
    opts: &RunOptions,
    emit: &mut Emit<'_>,
) -> Result<Vec<Distribution>, String> {
    let divisor = opts.divisor(QUICK_DIVISOR, REPORT_DIVISOR);
    let size = Size {
        probe_tasks: (PROBE_TASKS / divisor).max(1_000),
        run_s: RUN_S / divisor as f64,
    };
    let loads: Vec<u32> = args.load.map_or(LOADS.to_vec(), |l| vec![l]);
    let mut plots = Vec::new();
    for (contexts, work) in CELLS {
        let contexts = args.contexts.map_or(contexts, |c| c as usize);
        let work = args.work.unwrap_or(work);
        if (args.contexts.is_some() || args.work.is_some())
            && plots
                .iter()
                .any(|d: &Distribution| d.file.starts_with(&cell_file(contexts, work)))
        {
            continue; // a knob collapsed several cells into one
        }
        let basis = match (&args.rate_of, args.rate) {
            (Some(name), _) => Basis::Of(name.clone()),
            (None, Some(rate)) => Basis::Fixed(rate),
            (None, None) if args.same_rate => Basis::Slowest,
            (None, None) => Basis::Own,
        };
        plots.extend(run_cell(contexts, work, &loads, &basis, size, opts, emit)?);
    }
    Ok(plots)
}

/// How long the runs of a cell are.
#[derive(Debug, Clone, Copy)]
struct Size {
    probe_tasks: u64,
    run_s: f64,
}

fn cell_file(contexts: usize, work: u64) -> String {
    format!("latency-c{contexts}-w{work}")
}

/// Whose sustained rate a cell's offered load is a share of.
#[derive(Debug, Clone, PartialEq)]
enum Basis {
    /// Each system its own.
    Own,
    /// The slowest system's, for all (`--same-rate`).
    Slowest,
    /// This system's, for all (`--rate-of`).
    Of(String),
    /// This many tasks a second, for all (`--rate`).
    Fixed(f64),
}

fn positive_rate(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 1.0 => Ok(v),
        _ => Err(format!(
            "a rate is a number of tasks a second, at least 1, not {s:?}"
        )),
    }
}

impl Basis {
    fn describe(&self) -> String {
        match self {
            Basis::Own => "each system's sustained rate".into(),
            Basis::Slowest => "the slowest system's sustained rate, for all".into(),
            Basis::Of(name) => format!("{name}'s sustained rate, for all"),
            Basis::Fixed(rate) => format!("{} tasks/s, for all", group_thousands(*rate as u64)),
        }
    }
}

/// The rate each system (`names`, measured at `rates`) is offered at `load` percent of
/// `basis`; an error if `basis` names a system not measured.
fn offered_rates(
    names: &[&str],
    rates: &[f64],
    load: u32,
    basis: &Basis,
) -> Result<Vec<f64>, String> {
    let common = match basis {
        Basis::Own => None,
        Basis::Slowest => Some(rates.iter().copied().fold(f64::INFINITY, f64::min)),
        Basis::Fixed(rate) => Some(*rate),
        Basis::Of(name) => match names.iter().position(|n| n == name) {
            Some(i) => Some(rates[i]),
            None => {
                return Err(format!(
                    "latency: --rate-of {name}: no such system in the cell"
                ))
            }
        },
    };
    Ok(rates
        .iter()
        .map(|&own| common.unwrap_or(own) * f64::from(load) / 100.0)
        .collect())
}

fn run_cell(
    contexts: usize,
    work: u64,
    loads: &[u32],
    basis: &Basis,
    size: Size,
    opts: &RunOptions,
    emit: &mut Emit<'_>,
) -> Result<Vec<Distribution>, String> {
    let (threads, timeout) = (cores(), opts.timeout);
    let chosen: Vec<System> = systems(contexts)
        .into_iter()
        .filter(|s| is_selected(s.name))
        .collect();
    let mut rates = Vec::new();
    for s in &chosen {
        rates.push(sustained(
            *s,
            contexts,
            work,
            size.probe_tasks,
            threads,
            timeout,
        )?);
    }
    let mut plots = Vec::new();
    for &load in loads {
        let summaries: Vec<RefCell<Option<Summary>>> =
            chosen.iter().map(|_| RefCell::new(None)).collect();
        let names: Vec<&str> = chosen.iter().map(|s| s.name).collect();
        let offered_each = offered_rates(&names, &rates, load, basis)?;
        let mut contenders: Vec<Contender<'_>> = chosen
            .iter()
            .zip(&offered_each)
            .zip(&summaries)
            .map(|((s, &offered), slot)| {
                let s = *s;
                Contender::new(s.name, move || {
                    let (elapsed, summary) =
                        open_run(s, contexts, work, offered, size.run_s, threads, timeout)?;
                    *slot.borrow_mut() = Some(summary);
                    Ok(elapsed)
                })
            })
            .collect();
        let label = format!("latency {contexts} contexts, work {work}, {load}% load");
        let mut results = measure(&label, 1, 0, &mut contenders, &opts.progress)?;
        drop(contenders);
        let mut series = Vec::new();
        for r in &mut results {
            let i = chosen
                .iter()
                .position(|s| s.name == r.system)
                .unwrap_or_else(|| unreachable!("measure returns the systems it was given"));
            let summary = summaries[i]
                .borrow_mut()
                .take()
                .ok_or_else(|| format!("{label}: {} recorded no delays", r.system))?;
            r.ops_per_s = summary.achieved;
            r.extra = figures(rates[i], &summary);
            series.push((r.system.to_string(), plotted(&summary)));
        }
        let mut params = Map::new();
        params.insert("contexts".into(), json!(contexts));
        params.insert("work".into(), json!(work));
        params.insert("load_percent".into(), json!(load));
        params.insert("same_rate".into(), json!(*basis == Basis::Slowest));
        if let Basis::Fixed(rate) = basis {
            params.insert("rate".into(), json!(rate));
        }
        if let Basis::Of(name) = basis {
            params.insert("rate_of".into(), json!(name));
        }
        params.insert("run_s".into(), json!(size.run_s));
        params.insert("probe_tasks".into(), json!(size.probe_tasks));
        params.insert("cores".into(), json!(cores()));
        params.insert("quick".into(), json!(opts.quick));
        let basis = basis.describe();
        let title = format!(
            "{} contexts, work {}, {load}% of {basis}, open loop \
             ({:.2} s; delays from the intended submit time, µs)",
            group_thousands(contexts as u64),
            group_thousands(work),
            size.run_s
        );
        emit(&VariantReport {
            scenario: "latency",
            title: title.clone(),
            params,
            results,
        });
        plots.push(Distribution {
            file: format!("{}-{load}", cell_file(contexts, work)),
            title: format!("Submit-to-start delay: {title}"),
            series,
        });
    }
    Ok(plots)
}

/// The rate `s` sustains in the cell: tasks per second of a closed-loop burst of `tasks`
/// tasks, after an uncounted one. The burst goes through the open loop's own machinery with
/// every task due at once (the producer's pacer and lateness record, each task's delay
/// records), so the rate offered as a share of it is a share of what the system sustains
/// paying those costs, not of a cheaper loop's rate.
fn sustained(
    s: System,
    contexts: usize,
    work: u64,
    tasks: u64,
    threads: usize,
    timeout: Duration,
) -> Result<f64, String> {
    let per_context = tasks.div_ceil(contexts as u64).max(1);
    let mut elapsed = Duration::ZERO;
    for _ in 0..2 {
        let run: &'static ContextsRun = Box::leak(Box::new(
            ContextsRun::new(contexts, per_context, work).unpaced_open_loop(),
        ));
        elapsed = (s.run)(run, threads, timeout)
            .map_err(|e| format!("latency: {}'s sustained rate: {e}", s.name))?;
        if let Some(schedule) = &run.open_loop {
            schedule.summary(); // frees its histograms (the run's state is leaked)
        }
    }
    Ok((per_context * contexts as u64) as f64 / elapsed.as_secs_f64().max(1e-9))
}

/// One open-loop run of `s`: `rate` tasks per second for about `secs` seconds, round robin
/// over `contexts` contexts; its time and delays.
fn open_run(
    s: System,
    contexts: usize,
    work: u64,
    rate: f64,
    secs: f64,
    threads: usize,
    timeout: Duration,
) -> Result<(Duration, Summary), String> {
    let total = (rate * secs).max(contexts as f64);
    let per_context = ((total / contexts as f64).ceil() as u64).max(1);
    // The run's state is leaked, as in `contexts`: a peer may touch it after completion.
    let run: &'static ContextsRun = Box::leak(Box::new(
        ContextsRun::new(contexts, per_context, work).open_loop(rate),
    ));
    let disturbance = Disturbance::now();
    let elapsed = (s.run)(run, threads, timeout)?;
    let Some(schedule) = &run.open_loop else {
        unreachable!("the run was made with an open loop")
    };
    let mut summary = schedule.summary();
    summary.others_cpu_s = disturbance.and_then(|d| d.others_since()).map(|o| o.0);
    if let Some(trace) = &summary.trace {
        eprint!("# trace of {} at {rate:.0} tasks/s\n{trace}", s.name);
    }
    Ok((elapsed, summary))
}

/// The row's figures: rates, then the delays in µs.
fn figures(sustained: f64, s: &Summary) -> Vec<(&'static str, f64)> {
    let us = |h: &hdrhistogram::Histogram<u64>, q: f64| h.value_at_quantile(q) as f64 / 1e3;
    vec![
        ("sustained/s", sustained),
        ("offered/s", s.offered),
        ("achieved %", 100.0 * s.achieved / s.offered),
        ("start p50", us(&s.start, 0.5)),
        ("start p99", us(&s.start, 0.99)),
        ("start p99.9", us(&s.start, 0.999)),
        ("start max", s.start.max() as f64 / 1e3),
        ("finish p50", us(&s.finish, 0.5)),
        ("finish p99", us(&s.finish, 0.99)),
        ("finish p99.9", us(&s.finish, 0.999)),
        ("finish max", s.finish.max() as f64 / 1e3),
        ("late p99", us(&s.late, 0.99)),
        ("late p99.9", us(&s.late, 0.999)),
        ("prod blocks", switches(s, |p| p.voluntary)),
        ("prod preempt", switches(s, |p| p.involuntary)),
        ("others ms", s.others_cpu_s.map_or(f64::NAN, |o| o * 1e3)),
    ]
}

/// One of the producer's context-switch counts (NaN, printed `-`, where not known).
fn switches(s: &Summary, count: fn(&Switches) -> u64) -> f64 {
    s.producer.as_ref().map_or(f64::NAN, |p| count(p) as f64)
}

/// The submit-to-start distribution as plot points.
pub fn plotted(s: &Summary) -> Vec<(f64, f64)> {
    PLOTTED
        .iter()
        .map(|&q| (1.0 / (1.0 - q), s.start.value_at_quantile(q) as f64 / 1e3))
        .collect()
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;
    use crate::work::context_task;

    /// Runs every task on the producer thread at once; blocks once for [`STALL`] at the task
    /// due at [`STALL_AT`].
    struct Stalling(&'static ContextsRun);

    const STALL: Duration = Duration::from_millis(50);
    const STALL_AT: u64 = 2_000;

    impl ContextsSystem for Stalling {
        const NAME: &'static str = "stalling";
        fn setup(run: &'static ContextsRun, _: usize) -> Result<Self, String> {
            Ok(Self(run))
        }
        fn feed(&mut self) -> Result<(), String> {
            let run = self.0;
            let mut submitted = 0u64;
            run.produce(|ctx, seq| {
                if submitted == STALL_AT {
                    let until = Instant::now() + STALL;
                    while Instant::now() < until {
                        std::thread::sleep(until - Instant::now());
                    }
                }
                submitted += 1;
                context_task(run, ctx, seq);
                Ok(())
            })
        }
        fn teardown(self) -> Result<(), String> {
            Ok(())
        }
    }

    /// A stall of the system shows in its tail delays, not as a lower rate: the tasks due
    /// during the stall were submitted late and count their delay from when they were due.
    #[test]
    fn a_stall_shows_in_the_tail_not_in_the_rate() {
        // 10 contexts × 1,000 tasks at 20,000/s: 0.5 s; the stall holds back the tasks due
        // in its 50 ms, 10% of them, by up to 50 ms.
        let rate = 20_000.0;
        let (_, s) = open_run(
            system::<Stalling>(),
            10,
            1,
            rate,
            0.5,
            2,
            Duration::from_secs(30),
        )
        .unwrap();
        assert_eq!(s.start.len(), 10_000);
        let stall_ns = STALL.as_nanos() as u64;
        assert!(
            s.start.max() >= stall_ns * 99 / 100,
            "max {}",
            s.start.max()
        );
        let p99 = s.start.value_at_quantile(0.99);
        assert!(p99 >= stall_ns / 2, "p99 {p99} ns hides the stall");
        assert!(
            s.achieved >= 0.8 * rate,
            "the stall lowered the rate to {} instead of showing as delay",
            s.achieved
        );
        // The stall was the producer's (it blocked in its submit call): its lateness shows it,
        // one record per task.
        assert_eq!(s.late.len(), 10_000);
        assert!(
            s.late.max() >= stall_ns * 99 / 100,
            "late max {}",
            s.late.max()
        );
        let late_p99 = s.late.value_at_quantile(0.99);
        assert!(
            late_p99 >= stall_ns / 2,
            "late p99 {late_p99} ns hides the stall"
        );
    }

    /// A broken "executor" that runs each context's first two tasks the wrong way round.
    struct Swapping(&'static ContextsRun);

    impl ContextsSystem for Swapping {
        const NAME: &'static str = "swapping";
        fn setup(run: &'static ContextsRun, _: usize) -> Result<Self, String> {
            Ok(Self(run))
        }
        fn feed(&mut self) -> Result<(), String> {
            let run = self.0;
            run.produce(|ctx, seq| {
                match seq {
                    1 => {}
                    2 => {
                        context_task(run, ctx, 2);
                        context_task(run, ctx, 1);
                    }
                    _ => context_task(run, ctx, seq),
                }
                Ok(())
            })
        }
        fn teardown(self) -> Result<(), String> {
            Ok(())
        }
    }

    #[test]
    fn broken_order_fails_an_open_loop_run() {
        let err = open_run(
            system::<Swapping>(),
            4,
            1,
            10_000.0,
            0.01,
            2,
            Duration::from_secs(30),
        )
        .unwrap_err();
        assert!(err.contains("order broken"), "{err}");
    }

    const NAMES: [&str; 3] = ["a", "b", "c"];

    /// `--same-rate` offers every system the slowest one's rate; by default each its own.
    #[test]
    fn the_same_rate_is_the_slowest_systems_for_all() {
        let rates = [4_000.0, 1_000.0, 2_000.0];
        assert_eq!(
            offered_rates(&NAMES, &rates, 50, &Basis::Own).unwrap(),
            vec![2_000.0, 500.0, 1_000.0]
        );
        assert_eq!(
            offered_rates(&NAMES, &rates, 50, &Basis::Slowest).unwrap(),
            vec![500.0, 500.0, 500.0]
        );
        assert_eq!(
            offered_rates(&NAMES, &rates, 100, &Basis::Slowest).unwrap(),
            vec![1_000.0; 3]
        );
    }

    /// `--rate-of` offers every system the named one's rate; a name not measured is an error.
    #[test]
    fn the_rate_of_a_named_system_is_offered_to_all() {
        let rates = [4_000.0, 1_000.0, 2_000.0];
        let of = |name: &str| Basis::Of(name.to_string());
        assert_eq!(
            offered_rates(&NAMES, &rates, 50, &of("c")).unwrap(),
            vec![1_000.0; 3]
        );
        assert_eq!(
            offered_rates(&NAMES, &rates, 25, &of("a")).unwrap(),
            vec![1_000.0; 3]
        );
        assert!(offered_rates(&NAMES, &rates, 50, &of("d")).is_err());
        // `--rate`: that rate for all, whatever each sustains.
        assert_eq!(
            offered_rates(&NAMES, &rates, 50, &Basis::Fixed(3_000.0)).unwrap(),
            vec![1_500.0; 3]
        );
        assert!(positive_rate("0").is_err() && positive_rate("inf").is_err());
    }

    /// Every system of the scenario runs a short open loop correctly, and its rows say what
    /// a reader needs.
    #[test]
    fn every_system_runs_an_open_loop() {
        for contexts in [3, 20] {
            for s in systems(contexts) {
                let (_, summary) =
                    open_run(s, contexts, 5, 20_000.0, 0.02, 2, Duration::from_secs(30))
                        .unwrap_or_else(|e| panic!("{}: {e}", s.name));
                assert!(summary.start.len() >= 400, "{}", s.name);
                let names: Vec<_> = figures(1.0, &summary).iter().map(|f| f.0).collect();
                assert!(names.contains(&"start p99.9") && names.contains(&"finish max"));
                assert!(names.contains(&"late p99") && names.contains(&"late p99.9"));
                assert_eq!(summary.late.len(), summary.start.len(), "{}", s.name);
                assert_eq!(plotted(&summary).len(), PLOTTED.len());
            }
        }
    }
}
