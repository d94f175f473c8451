//! `schedule`: scheduling many delayed tasks, and rate limiting.
//!
//! * tasks (`--tasks N`, default 20,000,000): N tasks due at times spread over 2 s from the
//!   start, no rate limit, scheduled from one thread. Reports the schedule rate (until the last
//!   is scheduled) and the end-to-end rate (until the last has run), and the bytes of resident
//!   memory per pending task (N' tasks due in an hour, RSS before and after). Every task is
//!   checked to run exactly once and never earlier than the system allows.
//! * `--rate`: keyway alone (the peers have no rate limit): limit L, 5·L tasks due at once
//!   with random priorities; per-interval deviation from L and whether every interval ran
//!   tasks at least as good as every task it carried over.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::Args;
use serde_json::{json, Map};

use super::Emit;
use crate::harness::env::cores;
use crate::harness::options::RunOptions;
use crate::harness::{measure, Contender, SystemResult, VariantReport};
use crate::latch::Completion;
use crate::systems::heap_scheduler::HeapScheduler;
use crate::systems::keyway_scheduler::KeywayScheduler;
use crate::systems::tokio_sleep::TokioSleep;
use crate::systems::ScheduleSystem;

/// Tasks per run.
const TASKS: u64 = 20_000_000;
/// `all`'s report divides the task count by this (the heap scheduler alone takes minutes at
/// 20,000,000).
const REPORT_DIVISOR: u64 = 10;

/// `--quick` divides the task count by this.
const QUICK_DIVISOR: u64 = 100;
/// Due times are spread over this much time from the start.
const SPREAD: Duration = Duration::from_secs(2);

/// The `schedule` knobs.
#[derive(Debug, Clone, Default, Args)]
pub struct ScheduleArgs {
    /// Tasks per run of the no-limit variant (not shrunk by --quick); picks that variant.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub tasks: Option<u64>,
    /// Run the rate-limit variant only.
    #[arg(long)]
    pub rate: bool,
    /// The limit L of the rate variant, tasks per second (default 10,000; 2,000 with --quick).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub limit: Option<u64>,
}

/// Set in a child process that only measures one system's memory per pending task.
const PROBE: &str = "KEYWAY_BENCH_PENDING_PROBE";

/// Runs the variants `args` picks (both by default), emitting each report.
pub fn run(args: &ScheduleArgs, opts: &RunOptions, emit: &mut Emit<'_>) -> Result<(), String> {
    if let Ok(system) = std::env::var(PROBE) {
        return probe(&system, args.tasks.unwrap_or(1_000_000));
    }
    let both = args.tasks.is_none() && !args.rate;
    if args.tasks.is_some() || both {
        let tasks = args
            .tasks
            .unwrap_or(TASKS / opts.divisor(QUICK_DIVISOR, REPORT_DIVISOR));
        for report in run_tasks(tasks, opts)? {
            emit(&report);
        }
    }
    if args.rate || both {
        let limit = args
            .limit
            .unwrap_or(if opts.quick { 2_000 } else { 10_000 });
        emit(&run_rate(limit, opts)?);
    }
    Ok(())
}

/// One run's shared state: which tasks ran, how many came early, and completion.
struct ScheduleRun {
    ran: Vec<AtomicU64>,
    early: AtomicU64,
    twice: AtomicU64,
    done: Completion,
}

impl ScheduleRun {
    fn new(tasks: u64) -> Self {
        Self {
            ran: (0..tasks.div_ceil(64)).map(|_| AtomicU64::new(0)).collect(),
            early: AtomicU64::new(0),
            twice: AtomicU64::new(0),
            done: Completion::new(tasks as usize),
        }
    }

    fn verify(&self) -> Result<(), String> {
        let twice = self.twice.load(Ordering::Relaxed);
        let early = self.early.load(Ordering::Relaxed);
        if twice > 0 || early > 0 {
            return Err(format!("{twice} tasks ran twice, {early} ran too early"));
        }
        Ok(())
    }
}

/// The task every system runs: marks task `i` as run (once), checks it is not early.
#[inline(never)]
fn scheduled_task(run: &ScheduleRun, i: u64, due: Instant, early: Duration) {
    if Instant::now() + early < due {
        run.early.fetch_add(1, Ordering::Relaxed);
    }
    let bit = 1u64 << (i % 64);
    if run.ran[(i / 64) as usize].fetch_or(bit, Ordering::Relaxed) & bit != 0 {
        run.twice.fetch_add(1, Ordering::Relaxed);
    }
    run.done.count_down();
}

/// Task `i`'s offset from the start: a scrambled spread over [`SPREAD`].
fn offset(i: u64, tasks: u64) -> Duration {
    let mut x = i.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    x ^= x >> 29;
    let slot = x % tasks.max(1);
    Duration::from_nanos((SPREAD.as_nanos() as u64 / tasks.max(1)) * slot)
}

/// One timed run: returns (time to schedule all, time until all ran).
fn run_once<S: ScheduleSystem>(
    tasks: u64,
    threads: usize,
    timeout: Duration,
) -> Result<(Duration, Duration), String> {
    // Leaked (a bit per task): tasks hold it for 'static without a reference count per task.
    let run: &'static ScheduleRun = Box::leak(Box::new(ScheduleRun::new(tasks)));
    let system = S::build(threads)?;
    crate::harness::ready_step();
    let start = Instant::now();
    for i in 0..tasks {
        let due = start + offset(i, tasks);
        system.schedule_at(due, move || scheduled_task(run, i, due, S::EARLY))?;
    }
    let scheduled = start.elapsed();
    let total = run.done.wait_since(start, timeout);
    crate::harness::threads::sample_now();
    match total {
        Ok(total) => {
            system.shutdown();
            run.verify()?;
            Ok((scheduled, total))
        }
        Err(e) => {
            std::mem::forget(system);
            Err(e)
        }
    }
}

/// Resident memory in KiB (`VmRSS`).
fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1).map(str::to_owned))
        })
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// The child's side of [`bytes_per_pending`]: measures `system` and prints the figure.
fn probe(system: &str, tasks: u64) -> Result<(), String> {
    let threads = cores();
    let bytes = match system {
        KeywayScheduler::NAME => pending_rss::<KeywayScheduler>(tasks, threads)?,
        HeapScheduler::NAME => pending_rss::<HeapScheduler>(tasks, threads)?,
        TokioSleep::NAME => pending_rss::<TokioSleep>(tasks, threads)?,
        other => return Err(format!("no system named {other}")),
    };
    println!("probe-bytes {bytes}");
    Ok(())
}

/// Bytes of resident memory per pending task of system `S`, measured in a fresh child process
/// (this one's freed memory would otherwise be reused and hide the growth).
fn bytes_per_pending<S: ScheduleSystem>(tasks: u64) -> Result<f64, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let out = std::process::Command::new(exe)
        .args(["schedule", "--tasks", &tasks.to_string()])
        .env(PROBE, S::NAME)
        .output()
        .map_err(|e| format!("memory probe: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find_map(|l| l.strip_prefix("probe-bytes "))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| {
            format!(
                "memory probe of {} failed: {}",
                S::NAME,
                String::from_utf8_lossy(&out.stderr)
            )
        })
}

/// Bytes of resident memory per pending task: `tasks` tasks due in an hour.
fn pending_rss<S: ScheduleSystem>(tasks: u64, threads: usize) -> Result<f64, String> {
    let run: &'static ScheduleRun = Box::leak(Box::new(ScheduleRun::new(1)));
    let system = S::build(threads)?;
    let due = Instant::now() + Duration::from_secs(3600);
    let before = rss_kib();
    for i in 0..tasks {
        system.schedule_at(due, move || scheduled_task(run, i, due, Duration::ZERO))?;
    }
    let after = rss_kib();
    system.shutdown();
    Ok(after.saturating_sub(before) as f64 * 1024.0 / tasks as f64)
}

fn contender<S: ScheduleSystem>(
    tasks: u64,
    threads: usize,
    timeout: Duration,
    phases: &Arc<Mutex<Vec<(&'static str, f64)>>>,
) -> Contender<'static> {
    let phases = phases.clone();
    Contender::new(S::NAME, move || {
        let (scheduled, total) = run_once::<S>(tasks, threads, timeout)?;
        phases
            .lock()
            .unwrap()
            .push((S::NAME, scheduled.as_secs_f64()));
        Ok(total)
    })
}

fn run_tasks(tasks: u64, opts: &RunOptions) -> Result<Vec<VariantReport>, String> {
    let threads = cores();
    let phases = Arc::new(Mutex::new(Vec::new()));
    let mut contenders = [
        contender::<KeywayScheduler>(tasks, threads, opts.timeout, &phases),
        contender::<HeapScheduler>(tasks, threads, opts.timeout, &phases),
        contender::<TokioSleep>(tasks, threads, opts.timeout, &phases),
    ];
    let end_to_end = measure(
        "schedule",
        opts.runs,
        tasks,
        &mut contenders,
        &opts.progress,
    )?;
    // The scheduling phase of the same runs (each system's first run is the uncounted
    // warm-up: left out here too).
    let phases = phases.lock().unwrap().clone();
    let schedule_rate: Vec<SystemResult> = end_to_end
        .iter()
        .map(|r| {
            let times: Vec<f64> = phases
                .iter()
                .filter(|(name, _)| *name == r.system)
                .skip(1)
                .map(|(_, t)| *t)
                .collect();
            SystemResult::from_times(r.system, &times, tasks, r.threads)
        })
        .collect();
    // Memory, untimed: up to a million pending tasks.
    let pending = tasks.min(1_000_000);
    let memory = [
        (
            KeywayScheduler::NAME,
            bytes_per_pending::<KeywayScheduler>(pending)?,
        ),
        (
            HeapScheduler::NAME,
            bytes_per_pending::<HeapScheduler>(pending)?,
        ),
        (TokioSleep::NAME, bytes_per_pending::<TokioSleep>(pending)?),
    ];
    let memory_text = memory
        .iter()
        .map(|(n, b)| format!("{n} {b:.0}"))
        .collect::<Vec<_>>()
        .join(", ");
    let mut params = Map::new();
    params.insert("tasks".into(), json!(tasks));
    params.insert("spread_s".into(), json!(SPREAD.as_secs_f64()));
    params.insert("cores".into(), json!(threads));
    params.insert("runs".into(), json!(opts.runs));
    params.insert("quick".into(), json!(opts.quick));
    params.insert(
        "rss_bytes_per_pending_task".into(),
        json!(memory
            .iter()
            .map(|(n, b)| (n.to_string(), json!(b)))
            .collect::<Map<_, _>>()),
    );
    let mut phase_params = params.clone();
    phase_params.insert("phase".into(), json!("schedule"));
    params.insert("phase".into(), json!("end_to_end"));
    Ok(vec![
        VariantReport {
            scenario: "schedule",
            title: format!(
                "scheduling {tasks} tasks due over {} s, one producer ({} runs, median); RSS bytes per pending task: {memory_text}",
                SPREAD.as_secs(),
                opts.runs
            ),
            params: phase_params,
            results: schedule_rate,
        },
        VariantReport {
            scenario: "schedule",
            title: format!(
                "end to end: {tasks} tasks scheduled and run, each once, none early ({} runs, median)",
                opts.runs
            ),
            params,
            results: end_to_end,
        },
    ])
}

/// What the rate variant saw in one run.
#[derive(Debug, Default)]
struct RateOutcome {
    full_intervals: u64,
    max_deviation: f64,
    best_first: u64,
}

fn rate_once(
    limit: u64,
    interval: Duration,
    timeout: Duration,
) -> Result<(Duration, RateOutcome), String> {
    let tasks = 5 * limit * interval.as_millis() as u64 / 1000;
    let reports = Arc::new(Mutex::new(Vec::new()));
    let sink = reports.clone();
    let pool = keyway::Pool::builder()
        .core_threads(cores())
        .build()
        .map_err(|e| e.to_string())?;
    let scheduler = keyway::Scheduler::builder(&pool)
        .interval(interval)
        .executor("rate", keyway::ExecutorConfig::with_tps(limit as f64))
        .interval_hook(move |r| sink.lock().unwrap().push(r.clone()))
        .build()
        .map_err(|e| e.to_string())?;
    let run: &'static ScheduleRun = Box::leak(Box::new(ScheduleRun::new(tasks)));
    crate::harness::ready_step();
    let start = Instant::now();
    let due = start + interval;
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    for i in 0..tasks {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let timing = keyway::Timing::at(due).priority((x % 1_000_000) as i64);
        scheduler
            .schedule_with("rate", timing, move || {
                scheduled_task(run, i, due, interval)
            })
            .map(drop)
            .map_err(|e| e.to_string())?;
    }
    let total = run.done.wait_since(start, timeout)?;
    scheduler.shutdown();
    pool.shutdown();
    run.verify()?;
    let quota = (limit as f64 * interval.as_secs_f64()).round();
    let mut outcome = RateOutcome::default();
    for r in reports.lock().unwrap().iter() {
        if r.dispatched == 0 || r.carried_over == 0 {
            continue; // not a full interval
        }
        outcome.full_intervals += 1;
        let deviation = (r.dispatched as f64 - quota).abs() / quota;
        outcome.max_deviation = outcome.max_deviation.max(deviation);
        if let (Some(ran), Some(waiting)) = (r.worst_dispatched, r.best_carried_over) {
            if ran >= waiting {
                outcome.best_first += 1;
            }
        }
    }
    Ok((total, outcome))
}

fn run_rate(limit: u64, opts: &RunOptions) -> Result<VariantReport, String> {
    let interval = if opts.quick {
        Duration::from_millis(100)
    } else {
        Duration::from_secs(1)
    };
    let outcomes = Arc::new(Mutex::new(Vec::new()));
    let sink = outcomes.clone();
    let timeout = opts.timeout;
    let tasks = 5 * limit * interval.as_millis() as u64 / 1000;
    let mut contenders = [Contender::new("keyway", move || {
        let (t, o) = rate_once(limit, interval, timeout)?;
        sink.lock().unwrap().push(o);
        Ok(t)
    })];
    let results = measure(
        "schedule --rate",
        opts.runs,
        tasks,
        &mut contenders,
        &opts.progress,
    )?;
    let outcomes = outcomes.lock().unwrap();
    let full: u64 = outcomes.iter().map(|o| o.full_intervals).sum();
    let best: u64 = outcomes.iter().map(|o| o.best_first).sum();
    let max_dev = outcomes.iter().map(|o| o.max_deviation).fold(0.0, f64::max);
    if max_dev > 0.01 || best < full {
        return Err(format!(
            "rate: max deviation {:.2}% (target 1%), best first in {best} of {full} intervals",
            max_dev * 100.0
        ));
    }
    let mut params = Map::new();
    params.insert("limit".into(), json!(limit));
    params.insert("interval_s".into(), json!(interval.as_secs_f64()));
    params.insert("tasks".into(), json!(tasks));
    params.insert("full_intervals".into(), json!(full));
    params.insert("max_deviation".into(), json!(max_dev));
    params.insert("best_first_intervals".into(), json!(best));
    params.insert("runs".into(), json!(opts.runs));
    params.insert("quick".into(), json!(opts.quick));
    Ok(VariantReport {
        scenario: "schedule",
        title: format!(
            "rate: limit {limit}/s, {tasks} tasks due at once, random priorities, {:?} intervals: {full} full intervals, max deviation from the limit {:.3}%, best first in {best}/{full}",
            interval,
            max_dev * 100.0
        ),
        params,
        results,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every system runs a small workload, each task once, none early.
    #[test]
    fn systems_run_a_small_workload() {
        let timeout = Duration::from_secs(60);
        run_once::<KeywayScheduler>(20_000, 2, timeout).unwrap();
        run_once::<HeapScheduler>(20_000, 2, timeout).unwrap();
        run_once::<TokioSleep>(20_000, 2, timeout).unwrap();
    }

    /// A system that runs every task at once, ignoring its due time, is caught.
    #[test]
    fn an_early_system_fails() {
        struct Eager;
        impl ScheduleSystem for Eager {
            const NAME: &'static str = "eager";
            fn build(_: usize) -> Result<Self, String> {
                Ok(Eager)
            }
            fn schedule_at<F: FnOnce() + Send + 'static>(
                &self,
                _: Instant,
                task: F,
            ) -> Result<(), String> {
                task();
                Ok(())
            }
            fn shutdown(self) {}
        }
        let err = run_once::<Eager>(1_000, 1, Duration::from_secs(10)).unwrap_err();
        assert!(err.contains("too early"), "{err}");
    }

    #[test]
    fn the_rate_variant_holds_the_limit_and_the_order() {
        let (_, o) = rate_once(500, Duration::from_millis(100), Duration::from_secs(60)).unwrap();
        assert!(o.full_intervals >= 3);
        assert!(o.max_deviation <= 0.01);
        assert_eq!(o.best_first, o.full_intervals);
    }
}
