//! `keyway-bench curves`: how each system's cost grows with the work, as
//! SVG plots and one CSV. Five curves:
//!
//! - time per task against the number of contexts (16 … 1,000,000;
//!   sequential tasks of work 10, one producer): keyway, tokio-actor,
//!   ideal, and thread-per-context up to 4,096 contexts;
//! - time per task against producer threads (1 … 8; plain tasks): keyway,
//!   crossbeam-pool, rayon, rayon-scope, tokio;
//! - time per task against work per task (1 … 10,000 atomic increments;
//!   16 contexts): keyway, thread-per-context, tokio-actor, ideal;
//! - time per task against key skew (Zipf exponent 0.6 … 1.3 over 10,000
//!   keys; work 10): keyway, tokio-actor, kameo, ractor, hashed-slots, ideal;
//! - memory against the number of contexts ever seen: the peak RSS of a
//!   process that ran only that system (its threads, queues and handles,
//!   plus the benchmark's order-check state of 128 bytes per context per
//!   run, the same for every system).
//!
//! The contexts points run each system in a fresh process of its own
//! ([`isolated`]), so that memory one system freed cannot hide what the
//! next one needs.
//!
//! Each point is one variant measured by the harness (warm-up run, rotating
//! order, medians of `--runs`, default 1 here to keep the default run to a
//! few minutes).

pub mod curve;
pub mod isolated;
pub mod plot;

use std::path::{Path, PathBuf};

use curve::Curve;

use crate::harness::options::RunOptions;
use crate::harness::{SystemResult, VariantReport};
use crate::plan::Size;
use crate::scenarios::contexts;
use crate::scenarios::contexts::variant::Variant as ContextsVariant;
use crate::scenarios::latency::Distribution;
use crate::scenarios::throughput;
use crate::scenarios::throughput::variant::Variant as ThroughputVariant;

/// The points of each curve, full size or `quick`.
struct Plan {
    contexts: Vec<usize>,
    contexts_tasks: u64,
    producers: Vec<usize>,
    producers_tasks: u64,
    work: Vec<u64>,
    work_increments: u64,
}

impl Plan {
    fn new(size: Size) -> Self {
        match size {
            Size::Quick => Self {
                contexts: vec![16, 1_024, 65_536],
                contexts_tasks: 20_000,
                producers: vec![1, 2, 4],
                producers_tasks: 20_000,
                work: vec![1, 100, 10_000],
                work_increments: 2_000_000,
            },
            Size::Report => Self {
                contexts: vec![16, 256, 4_096, 65_536, 1_000_000],
                contexts_tasks: 100_000,
                producers: vec![1, 2, 4, 8],
                producers_tasks: 200_000,
                work: vec![1, 10, 100, 1_000, 10_000],
                work_increments: 10_000_000,
            },
            Size::Full => Self {
                contexts: vec![16, 256, 4_096, 65_536, 1_000_000],
                contexts_tasks: 400_000,
                producers: vec![1, 2, 4, 8],
                producers_tasks: 1_000_000,
                work: vec![1, 10, 100, 1_000, 10_000],
                work_increments: 40_000_000,
            },
        }
    }
}

/// Systems of the work curve.
const WORK_SYSTEMS: [&str; 4] = ["keyway", "thread-per-context", "tokio-actor", "ideal"];
/// The Zipf exponents of the skew curve.
const SKEWS: [f64; 4] = [0.6, 0.9, 1.1, 1.3];
/// Keys of the skew curve.
const SKEW_KEYS: usize = 10_000;
/// Systems of the skew curve.
const SKEW_SYSTEMS: [&str; 6] = [
    "keyway",
    "tokio-actor",
    "kameo",
    "ractor",
    "hashed-slots",
    "ideal",
];

/// Nanoseconds per task of a row.
fn ns_per_task(r: &SystemResult, tasks: u64) -> Option<f64> {
    Some(r.median_s * 1e9 / tasks as f64)
}

/// Measures every curve; `emit` gets each point's report as it is measured.
pub fn measure(
    opts: &RunOptions,
    size: Size,
    emit: &mut dyn FnMut(&VariantReport),
) -> Result<Vec<Curve>, String> {
    let plan = Plan::new(size);
    let mut by_contexts = Curve::new(
        "time-vs-contexts",
        "Time per task vs number of contexts (sequential tasks, work 10, one producer)",
        "contexts (log)",
        "ns per task (log)",
    );
    let mut memory = Curve::new(
        "memory-vs-contexts",
        "Peak RSS vs contexts ever seen (one process per system; incl. the bench's 128 B/context/run)",
        "contexts (log)",
        "peak RSS, MiB (log)",
    );
    for &c in &plan.contexts {
        let tasks = (plan.contexts_tasks / c as u64).max(1);
        let systems: Vec<&'static str> = ["keyway", "thread-per-context", "tokio-actor", "ideal"]
            .into_iter()
            .filter(|&s| s != "thread-per-context" || c <= contexts::THREAD_LIMIT)
            .filter(|&s| crate::harness::is_selected(s))
            .collect();
        let report = isolated::contexts_point(c, tasks, 10, &systems, opts.runs)?;
        emit(&report);
        let total = c as u64 * tasks;
        by_contexts.add_report(&report, c as f64, |r| ns_per_task(r, total));
        memory.add_report(&report, c as f64, |r| {
            r.peak_rss_kib.map(|k| k as f64 / 1024.0)
        });
    }
    let mut by_producers = Curve::new(
        "time-vs-producers",
        "Time per task vs producer threads (plain tasks, one counter update each)",
        "producer threads (log)",
        "ns per task (log)",
    );
    for &p in &plan.producers {
        let v = ThroughputVariant {
            producers: p,
            tasks: plan.producers_tasks,
            keys: 0,
            key_space: crate::keys::KEY_SPACE,
        };
        let report = throughput::run_variant(v, opts)?;
        emit(&report);
        by_producers.add_report(&report, p as f64, |r| ns_per_task(r, v.tasks));
    }
    let mut by_work = Curve::new(
        "time-vs-work",
        "Time per task vs work per task (16 contexts of sequential tasks)",
        "atomic increments per task (log)",
        "ns per task (log)",
    );
    for &w in &plan.work {
        let total = (plan.work_increments / w).clamp(2_000, plan.contexts_tasks);
        let v = ContextsVariant::full(16, total / 16, w);
        let report = contexts::run_variant_of(&v, opts, Some(&WORK_SYSTEMS))?;
        emit(&report);
        by_work.add_report(&report, w as f64, |r| ns_per_task(r, v.total()));
    }
    let mut by_skew = Curve::new(
        "time-vs-skew",
        "Time per task vs key skew (Zipf popularity over 10,000 keys, work 10, one producer)",
        "Zipf exponent s (log): the hottest key's share grows with s",
        "ns per task (log)",
    );
    for &s in &SKEWS {
        let tasks = plan.contexts_tasks / SKEW_KEYS as u64;
        let v = ContextsVariant::full(SKEW_KEYS, tasks.max(1), 10).skewed(s);
        let report = contexts::run_variant_of(&v, opts, Some(&SKEW_SYSTEMS))?;
        emit(&report);
        by_skew.add_report(&report, s, |r| ns_per_task(r, v.total()));
    }
    Ok(vec![by_contexts, by_producers, by_work, by_skew, memory])
}

/// The CSV of every curve: `curve,x,system,y`.
pub fn csv(curves: &[Curve]) -> String {
    let mut out = String::from("curve,x_label,y_label,x,system,y\n");
    for c in curves {
        for (system, pts) in &c.series {
            for (x, y) in pts {
                out.push_str(&format!(
                    "{},\"{}\",\"{}\",{x},{system},{y}\n",
                    c.file, c.x_label, c.y_label
                ));
            }
        }
    }
    out
}

/// Writes `curves.csv` and one SVG per curve into `dir`; returns the SVG
/// paths.
pub fn write(curves: &[Curve], dir: &Path) -> Result<Vec<PathBuf>, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let csv_path = dir.join("curves.csv");
    std::fs::write(&csv_path, csv(curves))
        .map_err(|e| format!("writing {}: {e}", csv_path.display()))?;
    curves
        .iter()
        .map(|c| {
            let path = dir.join(format!("{}.svg", c.file));
            plot::draw(c, &path).map(|()| path)
        })
        .collect()
}

/// Draws each latency distribution of the `latency` scenario as an SVG in `dir` (log-log:
/// 1 / (1 − quantile) against µs, a line per system); returns the files written.
pub fn write_latency(dists: &[Distribution], dir: &Path) -> Result<Vec<PathBuf>, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    dists
        .iter()
        .map(|d| {
            // A curve names its file for the process's life; a run draws a dozen at most.
            let file: &'static str = Box::leak(d.file.clone().into_boxed_str());
            let mut curve = Curve::new(
                file,
                &d.title,
                "1 / (1 - quantile): 2 = p50, 100 = p99, 1k = p99.9 (log)",
                "µs from the intended submit time to start (log)",
            );
            curve.series = d.series.clone();
            let path = dir.join(format!("{file}.svg"));
            plot::draw(&curve, &path).map(|()| path)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn points_group_by_system_and_csv_lists_them() {
        let mut c = Curve::new("f", "t", "x", "y");
        c.add("keyway", 1.0, 2.0);
        c.add("ideal", 1.0, 1.0);
        c.add("keyway", 2.0, 3.0);
        assert_eq!(c.series.len(), 2);
        assert_eq!(c.series[0].1, [(1.0, 2.0), (2.0, 3.0)]);
        let csv = csv(&[c]);
        assert_eq!(csv.lines().count(), 4);
        assert!(csv.contains("f,\"x\",\"y\",2,keyway,3\n"), "{csv}");
    }

    #[test]
    fn the_full_plan_spans_the_ranges() {
        let plan = Plan::new(Size::Full);
        assert_eq!(plan.contexts.first(), Some(&16));
        assert_eq!(plan.contexts.last(), Some(&1_000_000));
        assert_eq!(plan.producers, [1, 2, 4, 8]);
        assert_eq!(plan.work.first(), Some(&1));
        assert_eq!(plan.work.last(), Some(&10_000));
    }
}
