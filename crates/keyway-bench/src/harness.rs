//! The measuring harness: runs the systems of one variant interleaved
//! (A B C A B C …), keeps each system's median, min and max, samples the
//! process's OS threads while each system runs, and prints the result.

pub mod report;
pub mod stats;
pub mod threads;

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

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

/// Runs every contender `runs` times, interleaved, and summarises each one.
/// `ops` is the number of tasks one run performs (for ops/s). The first wrong
/// result stops the measurement with an error naming the system.
pub fn measure(
    label: &str,
    runs: usize,
    ops: u64,
    contenders: &mut [Contender<'_>],
    progress: &Progress,
) -> Result<Vec<SystemResult>, String> {
    let runs = runs.max(1);
    progress.begin(label, runs, contenders.len());
    let baseline = threads::current().unwrap_or(1);
    let mut times: Vec<Vec<f64>> = vec![Vec::with_capacity(runs); contenders.len()];
    let mut peak_threads = vec![0usize; contenders.len()];
    for run in 0..runs {
        for (i, contender) in contenders.iter_mut().enumerate() {
            progress.update(&format!(
                "{label}: run {}/{runs}, {}",
                run + 1,
                contender.name
            ));
            threads::settle(baseline);
            let sampler = threads::Sampler::start();
            let outcome = (contender.run)();
            let peak = sampler.stop();
            let elapsed = outcome.map_err(|e| {
                progress.clear();
                format!("{label}: {} failed on run {}: {e}", contender.name, run + 1)
            })?;
            times[i].push(elapsed.as_secs_f64());
            peak_threads[i] = peak_threads[i].max(peak);
        }
    }
    progress.clear();
    Ok(contenders
        .iter()
        .zip(times)
        .zip(peak_threads)
        .map(|((c, t), threads)| SystemResult::from_times(c.name, &t, ops, threads))
        .collect())
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

/// Times one run of a system: the clock starts, `feed` submits the work, and the run waits for
/// `done`. A system that did not finish is leaked rather than torn down (a stuck system may
/// never shut down, and the command fails anyway); otherwise `teardown` gives back its result.
pub fn timed_run<S, T>(
    mut system: S,
    done: &Completion,
    timeout: Duration,
    feed: impl FnOnce(&mut S) -> Result<(), String>,
    teardown: impl FnOnce(S) -> Result<T, String>,
) -> Result<(Duration, T), String> {
    let start = Instant::now();
    let timed = feed(&mut system).and_then(|()| done.wait_since(start, timeout));
    threads::sample_now();
    match timed {
        Ok(elapsed) => Ok((elapsed, teardown(system)?)),
        Err(e) => {
            std::mem::forget(system);
            Err(e)
        }
    }
}
