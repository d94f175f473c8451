//! How big `all` and `curves` run, and how long `all` is expected to take.

use crate::harness::options::RunOptions;

/// The size of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Size {
    /// `--quick`: seconds (CI smoke).
    Quick,
    /// `all`'s report: within ~10 minutes on a 2-core machine.
    Report,
    /// A scenario or `curves` on its own, at its full sizes.
    Full,
}

impl Size {
    /// The size `opts` asks for.
    pub fn of(opts: &RunOptions) -> Self {
        if opts.quick {
            Size::Quick
        } else if opts.report {
            Size::Report
        } else {
            Size::Full
        }
    }
}

/// Seconds one round (one run of every system of every variant) of each
/// scenario takes at `all`'s report size on an idle 2-core machine
/// (measured: contexts, throughput, ordered, strategy, schedule, stream).
const REPORT_ROUND_S: [f64; 6] = [4.0, 28.0, 6.0, 30.0, 16.0, 15.0];
/// The same at `--quick` size.
const QUICK_ROUND_S: [f64; 6] = [0.3, 1.2, 0.3, 0.8, 3.0, 2.0];
/// Seconds the curves take at report size (one counted run and a warm-up).
const REPORT_CURVES_S: f64 = 90.0;
/// Seconds the curves take at `--quick` size.
const QUICK_CURVES_S: f64 = 8.0;
/// Seconds of set-up per system-run (pools, threads, expected checksums,
/// idle waits), per round, all scenarios together.
const ROUND_OVERHEAD_S: f64 = 4.0;
/// Seconds `distributed` takes (one run of 20 s, 8 s with `--quick`, plus start-up), once.
const DISTRIBUTED_S: [f64; 2] = [25.0, 12.0];
/// Seconds `latency` takes (sustained rates, then a warm-up and one open-loop run per
/// system and load), once.
const LATENCY_S: [f64; 2] = [60.0, 8.0];

/// Seconds `all` is expected to take with `opts` (and the curves, if
/// `with_curves`) on an idle 2-core machine.
pub fn estimate(opts: &RunOptions, with_curves: bool) -> f64 {
    let (rounds, curves, once) = if opts.quick {
        (
            QUICK_ROUND_S,
            QUICK_CURVES_S,
            DISTRIBUTED_S[1] + LATENCY_S[1],
        )
    } else {
        (
            REPORT_ROUND_S,
            REPORT_CURVES_S,
            DISTRIBUTED_S[0] + LATENCY_S[0],
        )
    };
    let per_round: f64 = rounds.iter().sum::<f64>() + ROUND_OVERHEAD_S;
    // One warm-up round, then `runs` counted rounds.
    once + per_round * (opts.runs + 1) as f64 + if with_curves { curves } else { 0.0 }
}

/// `75.0` → `1 min 15 s`.
pub fn minutes(secs: f64) -> String {
    let secs = secs.round() as u64;
    match secs / 60 {
        0 => format!("{secs} s"),
        m => format!("{m} min {} s", secs % 60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_fits_its_budget_by_default() {
        let mut opts = RunOptions::new(false, Some(3));
        opts.report = true;
        assert!(estimate(&opts, true) <= 600.0, "{}", estimate(&opts, true));
        // The CI smoke (`all --quick`): about a minute, now that it runs the stream and
        // latency scenarios too (each a few seconds).
        let quick = RunOptions::new(true, None);
        assert!(
            estimate(&quick, false) <= 75.0,
            "{}",
            estimate(&quick, false)
        );
    }

    #[test]
    fn minutes_read_well() {
        assert_eq!(minutes(75.0), "1 min 15 s");
        assert_eq!(minutes(9.4), "9 s");
    }
}
