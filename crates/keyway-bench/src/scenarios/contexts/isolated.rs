//! `contexts --isolate`: each system in a process of its own (this program run again for that
//! system alone, `--json`), its rows read back and put together into the usual reports.
//!
//! In one process the systems run interleaved, and memory is the figure that suffers: the
//! harness gives the heap's free pages back before every run, but the C library keeps exited
//! threads' stacks for reuse and a system may keep caches of its own. A fresh process per
//! system owes nothing to any other system, at the price of interleaving (its systems run one
//! after another, so a slow drift of the machine falls on some rows only).

use serde_json::Value;

use super::runs::describe;
use super::variant::Variant;
use super::ContextsArgs;
use crate::harness::options::RunOptions;
use crate::harness::{child, selected, SystemResult, VariantReport};

/// Measures `variants` (with `names[i]` the rows of variant `i`) in a process per system;
/// returns a report per variant, rows in the order of `names`.
pub(super) fn measure(
    variants: &[Variant],
    names: &[Vec<&'static str>],
    args: &ContextsArgs,
    opts: &RunOptions,
) -> Result<Vec<VariantReport>, String> {
    let mut systems: Vec<&'static str> = Vec::new();
    for &name in names.iter().flatten() {
        if !systems.contains(&name) {
            systems.push(name);
        }
    }
    systems.retain(|&name| selected(name));
    let mut reports: Vec<VariantReport> = variants
        .iter()
        .map(|v| {
            let wait = args.asynchronous.then_some(args.wait.as_str());
            VariantReport {
                scenario: "contexts",
                title: format!("{} · a process per system", describe(v, opts, wait).1),
                params: Default::default(),
                results: Vec::new(),
            }
        })
        .collect();
    for &system in &systems {
        let text = child::run(&child_args(args, opts, system), system)?;
        let found = child::variants(&text, "contexts", system);
        if found.len() != variants.len() {
            return Err(format!(
                "the {system} process reported {} variants, not {}",
                found.len(),
                variants.len()
            ));
        }
        for (report, variant) in reports.iter_mut().zip(found) {
            if report.params.is_empty() {
                report.params = variant.params;
                report
                    .params
                    .insert("one_process_per_system".into(), Value::Bool(true));
            }
            report.results.extend(variant.row);
        }
    }
    for (report, names) in reports.iter_mut().zip(names) {
        let rank = |r: &SystemResult| names.iter().position(|&n| n == r.system);
        report.results.sort_by_key(rank);
    }
    Ok(reports)
}

/// The command line of the child measuring `system`: the same knobs and sizes, JSON out, that
/// system alone (and never `--isolate`: the child measures in its own process).
fn child_args(args: &ContextsArgs, opts: &RunOptions, system: &str) -> Vec<String> {
    let mut out: Vec<String> = ["contexts", "--json", "--systems", system]
        .map(String::from)
        .to_vec();
    out.extend(["--runs".to_string(), opts.runs.to_string()]);
    if opts.quick {
        out.push("--quick".into());
    }
    let mut knob = |name: &str, value: Option<String>| {
        if let Some(value) = value {
            out.extend([format!("--{name}"), value]);
        }
    };
    knob("variant", args.variant.clone());
    knob("contexts", args.contexts.map(|c| c.to_string()));
    knob("tasks", args.tasks.map(|t| t.to_string()));
    knob("work", args.work.map(|w| w.to_string()));
    knob("batch", args.batch.map(|b| b.to_string()));
    knob("zipf", args.zipf.map(|s| s.to_string()));
    if args.asynchronous {
        out.extend(["--async".into(), "--wait".into(), args.wait.clone()]);
    }
    out
}

#[cfg(test)]
mod tests {
    use clap::{Parser, Subcommand};

    use super::*;

    /// The command's shape, enough to read a child's command line back.
    #[derive(Debug, Parser)]
    struct Cli {
        #[command(subcommand)]
        scenario: Scenario,
        #[arg(long, global = true)]
        quick: bool,
        #[arg(long, global = true)]
        runs: Option<usize>,
        #[arg(long, global = true)]
        json: bool,
        #[arg(long, global = true, value_delimiter = ',')]
        systems: Option<Vec<String>>,
    }

    #[derive(Debug, Subcommand)]
    enum Scenario {
        Contexts(ContextsArgs),
    }

    /// A child's command line carries every knob, the run count and size, JSON and the one
    /// system, and not `--isolate`.
    #[test]
    fn a_child_gets_every_knob_but_isolate() {
        let args = ContextsArgs {
            variant: Some("many".into()),
            contexts: Some(64),
            tasks: Some(9),
            work: Some(10),
            asynchronous: true,
            wait: "remote".into(),
            batch: Some(4),
            zipf: Some(1.1),
            isolate: true,
        };
        let mut opts = RunOptions::new(true, Some(7));
        let line = child_args(&args, &opts, "keyway-typed");
        let cli =
            Cli::try_parse_from(std::iter::once("keyway-bench".to_string()).chain(line)).unwrap();
        let Scenario::Contexts(back) = cli.scenario;
        let expected = ContextsArgs {
            isolate: false,
            ..args.clone()
        };
        assert_eq!(format!("{back:?}"), format!("{expected:?}"));
        assert!(cli.quick && cli.json);
        assert_eq!(cli.runs, Some(7));
        assert_eq!(cli.systems, Some(vec!["keyway-typed".to_string()]));
        // No knob given: none passed on (the child picks the same default variants).
        opts.quick = false;
        let plain = ContextsArgs {
            wait: "yield".into(),
            ..Default::default()
        };
        let line = child_args(&plain, &opts, "keyway");
        assert_eq!(
            line,
            ["contexts", "--json", "--systems", "keyway", "--runs", "7"]
        );
    }
}
