//! `tax`: the ordering tax. The same tasks run key-ordered and unordered, and the tax is the
//! ordered time over the unordered time: keyway's lanes (`Lane::execute`) over its plain
//! `Pool::execute`, and an actor per key (tokio-actor) over a tokio task per task (tokio
//! spawn). Cells: 0, 1 µs and 100 µs of work per task (spin increments calibrated on this
//! machine) × 16, 1,024 and 100,000 keys × uniform (round robin) and Zipf 1.1 popularity.
//! Each cell is a table of its own; the last table lists every cell's tax. The stream
//! consumer's tax (keyway vs keyway-unordered) is in the `stream` scenario's rows, and `all`
//! adds it to the closing table.

use std::time::Duration;

use clap::Args;
use serde_json::{json, Map};

use super::Emit;
use crate::harness::env::cores;
use crate::harness::options::RunOptions;
use crate::harness::report::group_thousands;
use crate::harness::{measure, Contender, SystemResult, VariantReport};
use crate::popularity::Popularity;
use crate::systems::keyway::KeywayLanes;
use crate::systems::tokio_actor::TokioActor;
use crate::systems::unordered::{KeywayUnordered, TokioUnordered};
use crate::systems::{run_contexts, ContextsSystem};
use crate::work::{increments_per_ns, ContextsRun};

/// Work per task, in ns.
const WORK_NS: [u64; 3] = [0, 1_000, 100_000];
/// Keys.
const KEYS: [usize; 3] = [16, 1_024, 100_000];
/// The Zipf exponent of the skewed cells.
const ZIPF_S: f64 = 1.1;
/// Tasks of a cell at full size, at most.
const TASKS: u64 = 400_000;
/// CPU seconds of work a cell's tasks do at most at full size (bounds the 100 µs cells).
const WORK_BUDGET_S: f64 = 2.0;
/// `--quick` divides both by this, and runs only [`QUICK_CELLS`].
const QUICK_DIVISOR: u64 = 40;
/// `all` divides both by this and counts one run per system (after the warm-up run): its
/// 10-minute budget.
const REPORT_DIVISOR: u64 = 40;
/// The cells of `--quick` (a smoke run): 0 and 100 µs of work on 1,024 keys, uniform and Zipf.
const QUICK_CELLS: [(u64, usize); 2] = [(0, 1_024), (100_000, 1_024)];

/// The `tax` knobs.
#[derive(Debug, Clone, Default, Args)]
pub struct TaxArgs {
    /// Only this work per task, in ns (default: 0, 1,000 and 100,000).
    #[arg(long)]
    pub work_ns: Option<u64>,
    /// Only this many keys (default: 16, 1,024 and 100,000).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub keys: Option<u64>,
}

/// One cell of the table.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cell {
    /// Work per task, ns.
    pub work_ns: u64,
    /// Keys.
    pub keys: usize,
    /// Zipf exponent (`None`: uniform).
    pub zipf: Option<f64>,
}

impl Cell {
    fn name(&self) -> String {
        let pop = self
            .zipf
            .map_or_else(|| "uniform".to_string(), |s| format!("zipf {s}"));
        format!(
            "{} µs, {} keys, {pop}",
            self.work_ns as f64 / 1e3,
            group_thousands(self.keys as u64)
        )
    }
}

/// The cells `args` leaves open.
fn cells(args: &TaxArgs) -> Vec<Cell> {
    let mut out = Vec::new();
    for work_ns in args.work_ns.map_or(WORK_NS.to_vec(), |w| vec![w]) {
        for keys in args.keys.map_or(KEYS.to_vec(), |k| vec![k as usize]) {
            for zipf in [None, Some(ZIPF_S)] {
                out.push(Cell {
                    work_ns,
                    keys,
                    zipf,
                });
            }
        }
    }
    out
}

/// One row of the closing table: a cell and each pair's tax.
#[derive(Debug, Clone)]
pub struct Tax {
    /// The cell.
    pub cell: String,
    /// (pair, ordered median / unordered median).
    pub taxes: Vec<(&'static str, f64)>,
}

/// Runs every selected cell, emitting a report per cell; returns each cell's taxes for the
/// closing [`table`] (`all` adds the stream consumer's first).
pub fn run(args: &TaxArgs, opts: &RunOptions, emit: &mut Emit<'_>) -> Result<Vec<Tax>, String> {
    let divisor = opts.divisor(QUICK_DIVISOR, REPORT_DIVISOR);
    let opts = &RunOptions {
        runs: if opts.report { 1 } else { opts.runs },
        ..*opts
    };
    let per_ns = increments_per_ns();
    let mut taxes = Vec::new();
    let chosen = cells(args).into_iter().filter(|c| {
        !opts.quick
            || args.work_ns.is_some()
            || args.keys.is_some()
            || QUICK_CELLS.contains(&(c.work_ns, c.keys))
    });
    for cell in chosen {
        let work = (cell.work_ns as f64 * per_ns).round() as u64;
        let budget = WORK_BUDGET_S * 1e9 / cell.work_ns.max(1) as f64;
        let tasks = ((TASKS as f64).min(budget) as u64 / divisor).max(16);
        let run = state(cell, tasks, work);
        let t = opts.timeout;
        let threads = cores();
        let mut contenders = vec![
            shared::<KeywayLanes>(run, threads, t),
            shared::<KeywayUnordered>(run, threads, t),
            shared::<TokioActor>(run, threads, t),
            shared::<TokioUnordered>(run, threads, t),
        ];
        let label = format!("tax {}", cell.name());
        let results = measure(
            &label,
            opts.runs,
            run.total(),
            &mut contenders,
            &opts.progress,
        )?;
        drop(contenders);
        let median = |name: &str| {
            results
                .iter()
                .find(|r| r.system == name)
                .map(|r| r.median_s)
        };
        let mut row = Vec::new();
        for (pair, ordered, unordered) in [
            ("keyway", KeywayLanes::NAME, KeywayUnordered::NAME),
            ("tokio", TokioActor::NAME, TokioUnordered::NAME),
        ] {
            if let (Some(o), Some(u)) = (median(ordered), median(unordered)) {
                row.push((pair, o / u));
            }
        }
        let mut params = Map::new();
        params.insert("work_ns".into(), json!(cell.work_ns));
        params.insert("work".into(), json!(work));
        params.insert("keys".into(), json!(cell.keys));
        params.insert("zipf".into(), json!(cell.zipf));
        params.insert("tasks".into(), json!(run.total()));
        params.insert("cores".into(), json!(threads));
        params.insert("runs".into(), json!(opts.runs));
        params.insert("quick".into(), json!(opts.quick));
        emit(&VariantReport {
            scenario: "tax",
            title: format!(
                "{}: {} tasks of {work} increments ({} runs, median)",
                cell.name(),
                group_thousands(run.total()),
                opts.runs
            ),
            params,
            results,
        });
        taxes.push(Tax {
            cell: cell.name(),
            taxes: row,
        });
    }
    Ok(taxes)
}

/// The state of a cell's runs, made once and made fresh before each run.
fn state(cell: Cell, tasks: u64, work: u64) -> &'static ContextsRun {
    let run = match cell.zipf {
        Some(s) => ContextsRun::with_popularity(Popularity::zipf(cell.keys, tasks, s), work),
        // Fewer tasks than keys: uniform draws (some keys get none), not one task per key.
        None if tasks < cell.keys as u64 => {
            ContextsRun::with_popularity(Popularity::zipf(cell.keys, tasks, 0.0), work)
        }
        None => ContextsRun::new(cell.keys, tasks.div_ceil(cell.keys as u64), work),
    };
    Box::leak(Box::new(run))
}

fn shared<S: ContextsSystem>(
    run: &'static ContextsRun,
    threads: usize,
    timeout: Duration,
) -> Contender<'static> {
    Contender::new(S::NAME, move || {
        run.reset();
        run_contexts::<S>(run, threads, timeout)
    })
}

/// The stream consumer's tax in a `stream` report: its `keyway` row's median over its
/// `keyway-unordered` row's (`None` where either is missing).
pub fn stream_tax(report: &VariantReport) -> Option<Tax> {
    let median = |name: &str| {
        report
            .results
            .iter()
            .find(|r| r.system == name)
            .map(|r| r.median_s)
    };
    let (o, u) = (median("keyway")?, median("keyway-unordered")?);
    let variant = report.params.get("variant").and_then(|v| v.as_str());
    Some(Tax {
        cell: format!("stream {}", variant.unwrap_or("?")),
        taxes: vec![("stream", o / u)],
    })
}

/// The closing table: a row per cell, the tax of each pair in a column.
pub fn table(taxes: &[Tax], opts: &RunOptions) -> VariantReport {
    let results = taxes
        .iter()
        .map(|t| {
            // Row names live for the report; a few short strings per command.
            let name: &'static str = Box::leak(t.cell.clone().into_boxed_str());
            let mut r = SystemResult::from_times(name, &[f64::NAN], 0, 0);
            r.extra = t.taxes.clone();
            r
        })
        .collect();
    let mut params = Map::new();
    params.insert("table".into(), json!("ordering tax"));
    params.insert("runs".into(), json!(opts.runs));
    params.insert("quick".into(), json!(opts.quick));
    VariantReport {
        scenario: "tax",
        title: "the ordering tax: key-ordered median time / unordered median time at the same \
                work (keyway: lanes / Pool::execute; tokio: an actor per key / a task per task; \
                stream: keyway / keyway-unordered consumer); 1.00 = order costs nothing"
            .into(),
        params,
        results,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_cell_of_the_table_is_there() {
        let all = cells(&TaxArgs::default());
        assert_eq!(all.len(), 18);
        assert_eq!(
            all[0],
            Cell {
                work_ns: 0,
                keys: 16,
                zipf: None
            }
        );
        let one = cells(&TaxArgs {
            work_ns: Some(5),
            keys: Some(3),
        });
        assert_eq!(one.len(), 2);
        assert!(increments_per_ns() > 0.0);
    }

    /// Each system of a cell runs its tasks fully (and the ordered ones in order), on one state
    /// made fresh for each run.
    #[test]
    fn the_systems_run_a_small_cell() {
        // Uniform, skewed, and uniform with fewer tasks than keys.
        for (keys, zipf) in [(50, None), (50, Some(1.1)), (5_000, None)] {
            let run = state(
                Cell {
                    work_ns: 0,
                    keys,
                    zipf,
                },
                2_000,
                3,
            );
            let t = Duration::from_secs(30);
            for c in [
                shared::<KeywayLanes>(run, 2, t),
                shared::<KeywayUnordered>(run, 2, t),
                shared::<TokioActor>(run, 2, t),
                shared::<TokioUnordered>(run, 2, t),
            ]
            .iter_mut()
            {
                (c.run)().unwrap_or_else(|e| panic!("{}: {e}", c.name));
            }
        }
    }
}
