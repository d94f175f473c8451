//! `keyway-bench`: keyway against its peers (SPEC §9).
//!
//! `cargo run --release -p keyway-bench -- <scenario>|all [--quick] [--runs N] [--json]`

mod harness;
mod keys;
mod latch;
mod order;
mod output;
mod scenarios;
mod systems;
mod work;

use std::io::Write;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use harness::VariantReport;
use scenarios::contexts::ContextsArgs;
use scenarios::distributed::{ChildArgs, DistributedArgs};
use scenarios::ordered::OrderedArgs;
use scenarios::strategy::StrategyArgs;
use scenarios::throughput::ThroughputArgs;
use scenarios::RunOptions;

/// Benchmarks keyway against its peers; each scenario runs all systems
/// interleaved and prints medians and each peer's ratio to keyway.
#[derive(Debug, Parser)]
#[command(name = "keyway-bench", version)]
struct Cli {
    #[command(subcommand)]
    scenario: Scenario,
    /// Shrink every workload to run in seconds (CI smoke).
    #[arg(long, global = true)]
    quick: bool,
    /// Runs per system (default 5, or 3 with --quick).
    #[arg(long, global = true, value_parser = clap::value_parser!(u64).range(1..))]
    runs: Option<u64>,
    /// Print one JSON object per variant per line instead of tables.
    #[arg(long, global = true)]
    json: bool,
}

#[derive(Debug, Subcommand)]
enum Scenario {
    /// Sequential tasks on many contexts, one producer.
    Contexts(ContextsArgs),
    /// Plain and keyed (1 or 2 keys of 1,024) tasks from 1, 2 or 4 producers.
    Throughput(ThroughputArgs),
    /// Items processed in parallel and written in input order.
    Ordered(OrderedArgs),
    /// A producer's tasks consumed by the adaptive strategy, always on a
    /// pool (pec) or on the producing thread (pc); non-blocking and blocking.
    Strategy(StrategyArgs),
    /// K processes of this command share one rate limit through Redis; one is killed.
    Distributed(DistributedArgs),
    /// One process of `distributed` (started by it).
    #[command(hide = true)]
    DistributedChild(ChildArgs),
    /// Every scenario, all variants.
    All,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let opts = RunOptions::new(cli.quick, cli.runs.map(|r| r as usize));
    let json = cli.json;
    let mut emit = |report: &VariantReport| {
        let mut out = std::io::stdout().lock();
        let _ = if json {
            writeln!(out, "{}", report.json_line())
        } else {
            writeln!(out, "{}", report.table())
        };
        let _ = out.flush();
    };
    let outcome = match &cli.scenario {
        Scenario::Contexts(args) => scenarios::contexts::run(args, &opts, &mut emit),
        Scenario::Throughput(args) => scenarios::throughput::run(args, &opts, &mut emit),
        Scenario::Ordered(args) => scenarios::ordered::run(args, &opts, &mut emit),
        Scenario::Strategy(args) => scenarios::strategy::run(args, &opts, &mut emit),
        Scenario::Distributed(args) => scenarios::distributed::run(args, &opts, &mut emit, false),
        Scenario::DistributedChild(args) => scenarios::distributed::child(args),
        Scenario::All => scenarios::contexts::run(&ContextsArgs::default(), &opts, &mut emit)
            .and_then(|()| scenarios::throughput::run(&ThroughputArgs::default(), &opts, &mut emit))
            .and_then(|()| scenarios::ordered::run(&OrderedArgs::default(), &opts, &mut emit))
            .and_then(|()| scenarios::strategy::run(&StrategyArgs::default(), &opts, &mut emit))
            .and_then(|()| {
                let args = DistributedArgs::default();
                scenarios::distributed::run(&args, &opts, &mut emit, true)
            }),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("keyway-bench: FAILED: {e}");
            ExitCode::FAILURE
        }
    }
}
