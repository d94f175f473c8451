//! The measuring harness: runs the systems of one variant interleaved, after
//! an uncounted warm-up run each and in an order that rotates per round;
//! keeps each system's run times, median, min and max, CPU time and peak
//! RSS (the heap trimmed before every run, so a run's RSS growth is its own);
//! samples the process's OS threads while each system runs; and prints
//! the result.

pub mod alloc;
pub mod child;
pub mod env;
pub mod options;
pub mod report;
pub mod stats;
pub mod threads;
pub mod usage;

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::io::{IsTerminal, Write};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use usage::{Cost, Usage};

use crate::latch::Completion;

pub use report::{SystemResult, VariantReport};

/// One system of a variant: its name and a closure that performs one complete
/// run (untimed setup, timed work, untimed teardown and verification) and
/// returns the timed duration, or what went wrong.
pub struct Contender<'a> {
    /// The system's row name (`keyway`, `rayon`, …).
    pub name: &'static str,
    /// Performs one run.
    pub run: Box<dyn FnMut() -> Result<Duration, String> + 'a>,
}

impl<'a> Contender<'a> {
    /// A contender named `name` whose runs are performed by `run`.
    pub fn new(name: &'static str, run: impl FnMut() -> Result<Duration, String> + 'a) -> Self {
        Self {
            name,
            run: Box::new(run),
        }
    }
}

/// Runs every selected contender once untimed (the warm-up run, not
/// counted), then `runs` rounds in which each runs once, the order rotating
/// by one system per round (A B C, B C A, C A B, …), and summarises each one.
/// `ops` is the number of tasks one run performs (for ops/s). Contenders
/// left out by [`select_systems`] are skipped. The first wrong result stops
/// the measurement with an error naming the system.
pub fn measure(
    label: &str,
    runs: usize,
    ops: u64,
    contenders: &mut [Contender<'_>],
    progress: &Progress,
) -> Result<Vec<SystemResult>, String> {
    let runs = runs.max(1);
    let chosen: Vec<usize> = (0..contenders.len())
        .filter(|&i| selected(contenders[i].name))
        .collect();
    if chosen.is_empty() {
        return Ok(Vec::new());
    }
    progress.begin(label, runs, chosen.len());
    let baseline = threads::current().unwrap_or(1);
    let mut samples: Vec<Samples> = vec![Samples::default(); contenders.len()];
    for &i in &chosen {
        let name = contenders[i].name;
        progress.update(&format!("{label}: warm-up, {name}"));
        run_one(&mut contenders[i], baseline)
            .map_err(|e| failed(progress, label, name, "the warm-up run", &e))?;
    }
    for round in 0..runs {
        for j in 0..chosen.len() {
            let i = chosen[(round + j) % chosen.len()];
            let name = contenders[i].name;
            progress.update(&format!("{label}: run {}/{runs}, {name}", round + 1));
            let sample = run_one(&mut contenders[i], baseline)
                .map_err(|e| failed(progress, label, name, &format!("run {}", round + 1), &e))?;
            progress.finished_run(label, round + 1, runs, name, sample.elapsed);
            samples[i].push(sample);
        }
    }
    progress.clear();
    Ok(chosen
        .into_iter()
        .map(|i| samples[i].summarise(contenders[i].name, ops))
        .collect())
}

fn failed(progress: &Progress, label: &str, name: &str, run: &str, e: &str) -> String {
    progress.clear();
    format!("{label}: {name} failed on {run}: {e}")
}

/// One run of one contender: its time, what it cost and whether it took the
/// readiness step.
#[derive(Debug, Clone)]
struct Sample {
    elapsed: Duration,
    cost: Cost,
    whole: Cost,
    ready: bool,
    threads: usize,
}

/// The samples of one system.
#[derive(Debug, Clone, Default)]
struct Samples(Vec<Sample>);

impl Samples {
    fn push(&mut self, sample: Sample) {
        self.0.push(sample);
    }

    fn summarise(&self, name: &'static str, ops: u64) -> SystemResult {
        let times: Vec<f64> = self.0.iter().map(|s| s.elapsed.as_secs_f64()).collect();
        let threads = self.0.iter().map(|s| s.threads).max().unwrap_or(0);
        let cpu: Option<Vec<f64>> = self.0.iter().map(|s| s.cost.cpu_s).collect();
        let max_of = |f: fn(&Cost) -> Option<u64>| -> Option<u64> {
            self.0
                .iter()
                .map(|s| f(&s.cost))
                .collect::<Option<Vec<u64>>>()?
                .into_iter()
                .max()
        };
        let mut result = SystemResult::from_times(name, &times, ops, threads);
        result.cpu_s = cpu.map(|c| stats::median(&c));
        let others: Option<Vec<f64>> = self.0.iter().map(|s| s.cost.others_cpu_s).collect();
        result.others_cpu_s = others.map(|o| stats::median(&o));
        result.peak_rss_kib = max_of(|c| c.peak_rss_kib);
        result.rss_growth_kib = max_of(|c| c.rss_growth_kib);
        result.rss_growth_runs_kib = self
            .0
            .iter()
            .filter_map(|s| s.cost.rss_growth_kib)
            .collect();
        result.run_rss_growth_kib = self
            .0
            .iter()
            .map(|s| s.whole.rss_growth_kib)
            .collect::<Option<Vec<u64>>>()
            .and_then(|v| v.into_iter().max());
        result.ready = self.0.iter().all(|s| s.ready);
        if ops > 0 {
            // The median run's allocations, per task.
            let per_task = |f: fn(&Cost) -> u64| {
                let v: Vec<f64> = self.0.iter().map(|s| f(&s.cost) as f64).collect();
                stats::median(&v) / ops as f64
            };
            result.allocs_per_task = Some(per_task(|c| c.allocated.count));
            result.alloc_bytes_per_task = Some(per_task(|c| c.allocated.bytes));
        }
        result
    }
}

/// What the run in progress recorded through [`ready_step`] and
/// [`Stopwatch`], which the run calls on the measuring thread.
#[derive(Debug, Default)]
struct RunRecord {
    ready: bool,
    cost: Option<Cost>,
}

thread_local! {
    static RECORD: RefCell<RunRecord> = RefCell::new(RunRecord::default());
}

fn record<T>(f: impl FnOnce(&mut RunRecord) -> T) -> T {
    RECORD.with(|r| f(&mut r.borrow_mut()))
}

fn run_one(contender: &mut Contender<'_>, baseline: usize) -> Result<Sample, String> {
    threads::settle(baseline);
    // The previous run's threads are gone (their caches freed): what any run freed leaves the
    // process now, so this run's RSS growth counts the memory it needs, not what it reused.
    if usage::trim_wanted() {
        usage::trim_heap();
    }
    record(|r| *r = RunRecord::default());
    let sampler = threads::Sampler::start();
    // The whole run's cost, for a contender that does not time its region
    // with a Stopwatch.
    let outer = Usage::start();
    let outcome = (contender.run)();
    let whole = outer.stop();
    let threads = sampler.stop();
    let elapsed = outcome?;
    let rec = record(std::mem::take);
    Ok(Sample {
        elapsed,
        cost: rec.cost.unwrap_or(whole),
        whole,
        ready: rec.ready,
        threads,
    })
}

/// The readiness step every system takes, untimed, after its setup and
/// before the clock starts: waits (up to [`READY_WAIT`]) until every other
/// thread of the process is asleep, so that threads a system has just
/// spawned have started and settled and none still spins, and records that
/// the run took the step (the report flags a system that did not).
pub fn ready_step() {
    threads::wait_idle(READY_WAIT);
    record(|r| r.ready = true);
}

/// How long [`ready_step`] waits at most for the process's threads to sleep.
pub const READY_WAIT: Duration = Duration::from_millis(500);

/// The clock of a timed region with its cost: CPU time and peak RSS.
#[derive(Debug)]
pub struct Stopwatch {
    start: Instant,
    usage: Usage,
}

impl Stopwatch {
    /// Resets the RSS peak, reads the CPU clock, then starts the clock.
    pub fn start() -> Self {
        let usage = Usage::start();
        Self {
            start: Instant::now(),
            usage,
        }
    }

    /// When the clock started.
    pub fn started(&self) -> Instant {
        self.start
    }

    /// Ends the region: records its cost for the run in progress.
    pub fn stop(self) {
        let cost = self.usage.stop();
        record(|r| r.cost = Some(cost));
    }
}

/// Systems named on the command line (`--systems a,b`); all when unset.
static SELECTED: OnceLock<Vec<String>> = OnceLock::new();
/// Every system name a measurement was offered, to tell a misspelt name.
static OFFERED: Mutex<BTreeSet<&'static str>> = Mutex::new(BTreeSet::new());

/// Limits every later [`measure`] to the systems named in `names` (once per
/// process; later calls are ignored).
pub fn select_systems(names: Vec<String>) {
    let _ = SELECTED.set(names);
}

/// Records that `name` was offered (a measurement made elsewhere, as in a child process, counts
/// it as known) and tells whether `--systems` (if given) names it.
pub fn selected(name: &'static str) -> bool {
    OFFERED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(name);
    is_selected(name)
}

/// Whether `--systems` was given and names `name` (for rows that run only when asked for).
pub fn named(name: &'static str) -> bool {
    names(SELECTED.get().map(Vec::as_slice), name) && selected(name)
}

/// Whether `--systems` (if given) names `name`.
pub fn is_selected(name: &str) -> bool {
    admits(SELECTED.get().map(Vec::as_slice), name)
}

/// Whether the selection `given` (`--systems`) names `name`: none given names nothing.
fn names(given: Option<&[String]>, name: &str) -> bool {
    given.is_some_and(|names| names.iter().any(|n| n == name))
}

/// Whether the selection `given` (`--systems`) lets `name` run: none given lets every system.
fn admits(given: Option<&[String]>, name: &str) -> bool {
    given.is_none_or(|names| names.iter().any(|n| n == name))
}

/// Names given to [`select_systems`] that no measurement offered so far.
pub fn unknown_systems() -> Vec<String> {
    let offered = OFFERED.lock().unwrap_or_else(|e| e.into_inner());
    SELECTED
        .get()
        .map(|names| {
            names
                .iter()
                .filter(|n| !offered.contains(n.as_str()))
                .cloned()
                .collect()
        })
        .unwrap_or_default()
}

/// The progress line on stderr: rewritten in place on a terminal, one line
/// per variant otherwise (CI logs).
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    tty: bool,
}

impl Progress {
    /// Progress reporting suited to where stderr goes.
    pub fn new() -> Self {
        Self {
            tty: std::io::stderr().is_terminal(),
        }
    }

    fn begin(&self, label: &str, runs: usize, systems: usize) {
        if !self.tty {
            eprintln!("keyway-bench: {label}: {systems} systems × {runs} runs");
        }
    }

    fn update(&self, line: &str) {
        if self.tty {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[2K{line}");
            let _ = err.flush();
        }
    }

    /// Off a terminal, a run that took [`Progress::LONG_RUN`] or more gets
    /// a line of its own, so that long scenarios show they are moving.
    fn finished_run(&self, label: &str, run: usize, runs: usize, name: &str, took: Duration) {
        if !self.tty && took >= Self::LONG_RUN {
            eprintln!(
                "keyway-bench: {label}: run {run}/{runs}, {name}: {:.1} s",
                took.as_secs_f64()
            );
        }
    }

    /// How long a run must take to be reported on its own line.
    const LONG_RUN: Duration = Duration::from_secs(2);

    fn clear(&self) {
        if self.tty {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[2K");
            let _ = err.flush();
        }
    }
}

impl Default for Progress {
    fn default() -> Self {
        Self::new()
    }
}

/// Times one run of a system: the system takes the [`ready_step`], the clock starts, `feed` submits the work, and the run waits for
/// `done`. A system that did not finish is leaked rather than torn down (a stuck system may
/// never shut down, and the command fails anyway); otherwise `teardown` gives back its result.
pub fn timed_run<S, T>(
    mut system: S,
    done: &Completion,
    timeout: Duration,
    feed: impl FnOnce(&mut S) -> Result<(), String>,
    teardown: impl FnOnce(S) -> Result<T, String>,
) -> Result<(Duration, T), String> {
    ready_step();
    let clock = Stopwatch::start();
    let timed = feed(&mut system).and_then(|()| done.wait_since(clock.started(), timeout));
    clock.stop();
    threads::sample_now();
    match timed {
        Ok(elapsed) => Ok((elapsed, teardown(system)?)),
        Err(e) => {
            std::mem::forget(system);
            Err(e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A contender that logs its runs and takes the readiness step and the
    /// stopwatch, as `timed_run` does, unless `skip_ready`.
    fn logging<'a>(
        name: &'static str,
        log: &'a RefCell<Vec<&'static str>>,
        skip_ready: bool,
    ) -> Contender<'a> {
        Contender::new(name, move || {
            if !skip_ready {
                ready_step();
            }
            let clock = Stopwatch::start();
            log.borrow_mut().push(name);
            clock.stop();
            Ok(Duration::from_millis(1))
        })
    }

    /// A row that runs only when asked for (`named`) runs when `--systems` names it, and not
    /// without `--systems`, where every other row runs (`is_selected`).
    #[test]
    fn a_named_row_runs_only_when_systems_names_it() {
        let given = ["keyway".to_string(), "crossbeam-contexts".to_string()];
        assert!(names(Some(&given), "crossbeam-contexts"));
        assert!(!names(Some(&given), "keyway-unordered"));
        assert!(!names(None, "crossbeam-contexts"), "no --systems: not run");
        assert!(!names(Some(&[]), "keyway"));
        assert!(admits(Some(&given), "keyway"));
        assert!(!admits(Some(&given), "tokio-actor"));
        assert!(admits(None, "tokio-actor"), "no --systems: every row runs");
    }

    #[test]
    fn every_system_warms_up_then_runs_in_a_rotating_order() {
        let log = RefCell::new(Vec::new());
        let mut contenders = [
            logging("a", &log, false),
            logging("b", &log, false),
            logging("c", &log, false),
        ];
        let results = measure("t", 3, 10, &mut contenders, &Progress::new()).unwrap();
        drop(contenders);
        assert_eq!(
            log.into_inner(),
            [
                "a", "b", "c", // warm-up, not counted
                "a", "b", "c", // round 1
                "b", "c", "a", // round 2
                "c", "a", "b", // round 3
            ]
        );
        for r in &results {
            assert_eq!(r.times_s.len(), 3, "{r:?}");
            assert!(r.ready, "{r:?}");
            assert!(r.cpu_s.is_some() || cfg!(not(target_os = "linux")));
        }
    }

    #[test]
    fn a_system_without_the_readiness_step_is_flagged() {
        let log = RefCell::new(Vec::new());
        let mut contenders = [logging("a", &log, false), logging("b", &log, true)];
        let results = measure("t", 2, 10, &mut contenders, &Progress::new()).unwrap();
        assert!(results[0].ready);
        assert!(!results[1].ready);
        let report = VariantReport {
            scenario: "t",
            title: "t".into(),
            params: Default::default(),
            results,
        };
        assert!(report
            .table()
            .contains("WARNING: b did not take the readiness step"));
    }
}
