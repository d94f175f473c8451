//! How big `all` and `curves` run, and how long `all` is expected to take.

use crate::harness::options::RunOptions;

/// The size of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Size {
    /// `--quick`: seconds (CI smoke).
    Quick,
    /// `all`'s report: within ~11 minutes on a 2-core machine.
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
/// scenario takes at `all`'s report size on an idle 2-core machine:
/// contexts (with the `zipf` variant and the actor-crate and hashed-slot rows),
/// throughput, ordered, strategy, schedule, stream (its `floor` row included).
const REPORT_ROUND_S: [f64; 6] = [8.0, 28.0, 6.0, 30.0, 16.0, 17.0];
/// The same at `--quick` size.
const QUICK_ROUND_S: [f64; 6] = [1.3, 1.2, 0.3, 0.8, 3.0, 2.5];
/// Seconds one round of `hotkey` takes at report size and at `--quick` size; `all`'s report
/// counts one run per system (two rounds with the warm-up), `--quick` its usual runs.
const HOTKEY_ROUND_S: [f64; 2] = [8.0, 2.8];
/// Seconds the curves take at report size (one counted run and a warm-up).
const REPORT_CURVES_S: f64 = 104.0;
/// Seconds the curves take at `--quick` size.
const QUICK_CURVES_S: f64 = 10.0;
/// Seconds of set-up per system-run (pools, threads, expected checksums,
/// idle waits), per round, all scenarios together.
const ROUND_OVERHEAD_S: f64 = 4.0;
/// Seconds `distributed` takes (one run of 20 s, 8 s with `--quick`, plus start-up), once.
const DISTRIBUTED_S: [f64; 2] = [25.0, 12.0];
/// Seconds `latency` takes (sustained rates, then a warm-up and one open-loop run per
/// system and load), once.
const LATENCY_S: [f64; 2] = [72.0, 10.0];
/// Seconds `tax` takes, once: at report size a warm-up and one counted run of each system in
/// each of its 18 cells; with `--quick` its 4 smoke cells at `--quick`'s runs.
const TAX_S: [f64; 2] = [30.0, 6.0];

/// Seconds `all` is expected to take with `opts` (and the curves, if
/// `with_curves`) on an idle 2-core machine.
pub fn estimate(opts: &RunOptions, with_curves: bool) -> f64 {
    let (rounds, curves, once) = if opts.quick {
        (
            QUICK_ROUND_S,
            QUICK_CURVES_S,
            DISTRIBUTED_S[1] + LATENCY_S[1] + TAX_S[1] + HOTKEY_ROUND_S[1] * (opts.runs + 1) as f64,
        )
    } else {
        (
            REPORT_ROUND_S,
            REPORT_CURVES_S,
            DISTRIBUTED_S[0] + LATENCY_S[0] + TAX_S[0] + HOTKEY_ROUND_S[0] * 2.0,
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
        // About 11 minutes with the curves: the actor-crate, hashed-slot and skewed rows, the
        // hot-key and ordering-tax scenarios added a minute to the 10 it was.
        assert!(estimate(&opts, true) <= 690.0, "{}", estimate(&opts, true));
        // The CI smoke (`all --quick`): about a minute and a half, with the stream, latency
        // (keyway-typed's open-loop row added 2 s), hot-key and ordering-tax scenarios (each a
        // few seconds).
        let quick = RunOptions::new(true, None);
        assert!(
            estimate(&quick, false) <= 92.0,
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
