//! `keyway-bench`: keyway against its peers.
//!
//! `cargo run --release -p keyway-bench -- <scenario>|curves|all [--quick] [--runs N]
//! [--json|--csv] [--systems a,b] [--out DIR]`; `--help` names every scenario, system and
//! column.
//!
//! A scenario (`scenarios/`: contexts, throughput, ordered, strategy, schedule, stream,
//! latency, hotkey, tax, distributed) runs one workload on keyway and on each peer that has
//! the same shape (`systems/`, a file per system: tokio actors, kameo, ractor, rayon, a
//! crossbeam pool, a thread per context, hashed single-thread slots, ...). The harness
//! (`harness/`) runs the systems interleaved, each after an uncounted warm-up run, and keeps
//! medians, CPU time, memory and allocations per task; `sink` prints them (tables, JSON, CSV)
//! after the machine's description and load. `curves` sweeps contexts, producers, work and key
//! skew into plots (`curves/`). `all` runs every scenario, and with `--out DIR` the curves
//! too, writing a report folder with an `index.html`; `plan` sets how big its runs are and
//! estimates how long it takes. The peers' crates are dependencies of this crate only, never
//! of keyway.

// Layers, top to bottom (a module may import only its own layer and those below):
// 1. main
// 2. curves
// 3. plan sink
// 4. scenarios
// 5. systems
// 6. harness
// 7. work
// 8. keys once order output open_loop popularity
// 9. latch
mod curves;
mod harness;
mod keys;
mod latch;
mod once;
mod open_loop;
mod order;
mod output;
mod plan;
mod popularity;
mod scenarios;
mod sink;
mod systems;
mod work;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

use harness::env::Environment;
use harness::options::RunOptions;
use harness::VariantReport;
use scenarios::contexts::ContextsArgs;
use scenarios::distributed::{ChildArgs, DistributedArgs};
use scenarios::hotkey::HotKeyArgs;
use scenarios::latency::LatencyArgs;
use scenarios::ordered::OrderedArgs;
use scenarios::schedule::ScheduleArgs;
use scenarios::strategy::StrategyArgs;
use scenarios::stream::StreamArgs;
use scenarios::tax::TaxArgs;
use scenarios::throughput::ThroughputArgs;
use sink::{Format, Sink};

/// Counts every allocation, for the allocations-per-task column.
#[global_allocator]
static ALLOCATOR: harness::alloc::Counting = harness::alloc::Counting;

/// What `--help` says after the options: every system's name and how to
/// read the columns.
const AFTER_HELP: &str = "\
SYSTEMS (row names; pick some with --systems a,b):
  keyway              keyway: lanes (contexts), Pool::execute / execute_sequential /
                      execute_keyed (throughput), a Sequencer (ordered), the
                      adaptive strategy (strategy), typed_lanes_async with
                      a message per task (contexts --async); contexts --batch N:
                      Lane::execute_all per batch (the peers send one by one)
  keyway-typed        contexts: typed lanes, a u64 message per task to one handler
                      (the shape of tokio-actor's mailbox)
  keyway-spawn        contexts --async: a Lane::spawn future per task
  ideal               contexts: one thread per core running the contexts' tasks
                      directly, no queue, no producer: the machine's limit
  thread-per-context  contexts: a std thread and a channel per context
  tokio-actor         contexts: a tokio task and an mpsc mailbox per context
                      (contexts --async: the task awaits in its loop)
  tokio-actor-closure contexts: a tokio task per context whose mailbox carries
                      boxed closures (Box<dyn FnOnce() + Send>): the shape of
                      execute_sequential
  kameo               contexts, hotkey: an actor per context from the kameo crate
                      (unbounded mailbox), a u64 message per task sent with
                      tell(..).try_send() and handled by Message<u64>
  ractor              contexts, hotkey: an actor per context from the ractor crate,
                      a u64 message per task sent with cast and handled by handle
  hashed-slots        contexts, hotkey: N single-thread executors (N = cores), each
                      a thread draining its own queue of boxed closures; a context
                      runs on slot hash(context) mod N, so contexts sharing a slot
                      wait behind each other
  napart              contexts, hotkey: napart 2.0's PartitionExecutor (the registry's
                      hashed-partition executor, on tokio): N = cores partitions, a
                      key's tasks strictly FIFO on partition hash(key), submit_sync
                      per task; a backlogged partition's queue may move to an idle one.
                      Not in contexts --quick nor all's contexts tables: at ~30,000
                      tasks/s here it would add a minute to all (run contexts for it)
  keyway-unordered    tax: Pool::execute of each task, no lane (no key order);
                      contexts, only when --systems names it: the same floor there
  tokio (tax)         tax: a tokio task spawned per task (no key order)
  tokio-mutex         contexts --async: a tokio task per message holding its
                      context's tokio::sync::Mutex across the await
  crossbeam-pool      throughput: cores threads taking boxed closures from one
                      crossbeam-channel MPMC channel (latency, and contexts only when
                      --systems names it: the contexts' tasks as plain tasks, no
                      order: the floor of one shared queue)
  rayon               throughput: rayon ThreadPool::spawn from the producer threads
                      (outside the pool: rayon's injector path)
  rayon-scope         throughput: producers run inside the rayon pool as scope
                      jobs and spawn from pool threads (rayon's fast path)
  tokio               throughput: tokio Runtime::spawn of each task
  mutex-per-key       keyed throughput: the crossbeam pool, each task locking one
                      mutex per key in key order (exclusion, no order)
  mutex               ordered: the whole process-and-write step under one lock
  reorder-thread      ordered: a consumer thread re-ordering results with a heap
  rayon (ordered)     ordered: rayon's ordered par_iter collect
  pec                 strategy: produce-execute-consume, every task dispatched to
                      a crossbeam pool through a bounded queue (4 per thread)
  pc                  strategy: produce-consume, one thread does everything;
                      keyway's non-blocking row runs this same strategy
  heap-scheduler      schedule: a binary heap of due times under one mutex, with
                      worker threads sleeping until the earliest is due
  tokio (schedule)    schedule: a tokio task per item sleeping until its time
  naive               stream: one consumer reading one entry at a time
                      (XREADGROUP COUNT 1) and acking each (XACK)
  consumer-per-shard  stream: a thread per shard, batched reads, each batch run
                      serially and acked with the next read
  keyway (stream)     stream: a keyway-redis StreamConsumer on a 16-thread pool,
                      each key's messages in order (keyway-unordered: without
                      key order)
  raw                 stream: one thread, a pipelined XREADGROUP COUNT 100 over
                      every shard + batched XACK written on the redis client
  floor               stream, open loop: one thread, one blocking XREADGROUP NOACK
                      per wake-up, no acks: the machine's latency floor
  distributed         keyway alone: K processes of this command, each running its
                      share of one limit G learned through Redis (keyway-redis)

COLUMNS:
  vs keyway   the row's median time / keyway's median time in the same variant:
              above 1× keyway is faster, below 1× the peer is faster
  cpu s       CPU time (user + system, every thread of the process) during the
              timed region, median; (cores) = CPU time / wall time
  RSS MiB     the process's peak resident memory during the timed region (the
              kernel's high-water mark, reset before each region through
              /proc/self/clear_refs; includes what earlier setup left resident)
  +RSS MiB    how much the timed region grew it: the memory the system took while
              it ran (queues, backlog, stacks), the most of its runs. The heap's
              free pages go back to the OS before every run (malloc_trim), so a
              row cannot reuse unseen what an earlier row freed (each run pays
              its page faults, as in a fresh process; KEYWAY_BENCH_TRIM=0: no
              trim, as before); contexts --isolate runs each system in a
              process of its own to check it
  allocs/task (B)  heap allocations per task during the timed region, every thread
              of the process (a counting global allocator), and the bytes they
              asked for per task, median run
ENVIRONMENT:
  KEYWAY_BENCH_TRIM=0    no heap trim before each run (see +RSS MiB)
  KEYWAY_BENCH_PACE=sleep  open-loop producers (latency, hotkey) sleep whenever
              they are ahead instead of spinning the last 200 us: no core burnt
              waiting, lateness floored near the kernel's 50 us timer slack
Every system gets an untimed warm-up run that is not counted, the same untimed
readiness step before its clock (its threads started and idle), and the order of
systems rotates every round. Every report starts with the machine, its load and
the measured parallel speed-up of the ideal work, and warns when the machine is
loaded or does not scale.";

/// Benchmarks keyway against its peers; each scenario runs all systems
/// interleaved and prints medians and each peer's ratio to keyway.
#[derive(Debug, Parser)]
#[command(name = "keyway-bench", version, after_help = AFTER_HELP)]
struct Cli {
    #[command(subcommand)]
    scenario: Scenario,
    /// Shrink every workload to run in seconds (CI smoke).
    #[arg(long, global = true)]
    quick: bool,
    /// Runs per system, after one uncounted warm-up run (default 5, 3 with
    /// --quick or all, 1 for curves).
    #[arg(long, global = true, value_parser = clap::value_parser!(u64).range(1..=1000))]
    runs: Option<u64>,
    /// Print one JSON object per variant per line instead of tables (the
    /// environment is the first and last line).
    #[arg(long, global = true, conflicts_with = "csv")]
    json: bool,
    /// Print CSV (one line per system per variant) instead of tables.
    #[arg(long, global = true)]
    csv: bool,
    /// Only these systems (comma-separated row names, e.g. keyway,rayon).
    #[arg(long, global = true, value_delimiter = ',')]
    systems: Option<Vec<String>>,
}

#[derive(Debug, Subcommand)]
enum Scenario {
    /// Sequential tasks on many contexts, one producer.
    Contexts(ContextsArgs),
    /// Plain and keyed (1 or 2 keys of 1,024, 2 of 16) tasks from 1, 2 or 4 producers.
    Throughput(ThroughputArgs),
    /// Items processed in parallel and written in input order.
    Ordered(OrderedArgs),
    /// A producer's tasks consumed by the adaptive strategy, always on a
    /// pool (pec) or on the producing thread (pc); non-blocking, blocking, mixed.
    Strategy(StrategyArgs),
    /// Delayed tasks (no limit) against a heap scheduler and tokio timers,
    /// and keyway's rate limit per interval (`--rate`).
    Schedule(ScheduleArgs),
    /// Consumers of a sharded Redis stream (its own redis-server): sleep work over 1 to
    /// 1,000 keys, zero work, and an open loop at 10,000 msg/s.
    Stream(StreamArgs),
    /// How long a task waits under an open-loop load (25/50/80% of each system's
    /// sustained rate): p50/p99/p99.9/max submit-to-start and submit-to-finish, and p99/p99.9
    /// of the producer's lateness.
    Latency(LatencyArgs),
    /// One hot key (100× the work) among 1,024 light keys, open loop: the light keys'
    /// p50/p99/p99.9 delay from the intended time to the start, the producer's lateness p99,
    /// the p99 from each task's actual submit to its start (the system's own wait), each
    /// p99's ratio with the hot key over without it, and the total time.
    Hotkey(HotKeyArgs),
    /// The ordering tax: key-ordered time over unordered time at the same work (keyway lanes
    /// vs Pool::execute, an actor per key vs a tokio task per task), over work, keys and skew.
    Tax(TaxArgs),
    /// K processes of this command share one rate limit through Redis; one is killed.
    Distributed(DistributedArgs),
    /// One process of `distributed` (started by it).
    #[command(hide = true)]
    DistributedChild(ChildArgs),
    /// Cost curves: time per task vs contexts, producers and work per
    /// task, memory vs contexts; SVG plots and a CSV.
    Curves(OutArgs),
    /// Every scenario, all variants, sized to finish within ~11 minutes on a
    /// 2-core machine (--out DIR also writes plots and an index.html).
    All(OutArgs),
}

#[derive(Debug, Clone, Args)]
struct OutArgs {
    /// The folder to write into (curves: default `curves`).
    #[arg(long)]
    out: Option<PathBuf>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Some(names) = cli.systems.clone() {
        harness::select_systems(names);
    }
    match run(&cli) {
        Ok(()) => {
            let unknown = harness::unknown_systems();
            if unknown.is_empty() {
                ExitCode::SUCCESS
            } else {
                eprintln!(
                    "keyway-bench: no such system here: {} (see --help)",
                    unknown.join(", ")
                );
                ExitCode::FAILURE
            }
        }
        Err(e) => {
            eprintln!("keyway-bench: FAILED: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: &Cli) -> Result<(), String> {
    if let Scenario::DistributedChild(args) = &cli.scenario {
        // A child of `distributed` reports to its parent only: no environment, no tables.
        return scenarios::distributed::child(args);
    }
    let default_runs = match cli.scenario {
        Scenario::Curves(_) => Some(1),
        Scenario::All(_) if !cli.quick => Some(3),
        _ => None,
    };
    let mut opts = RunOptions::new(cli.quick, cli.runs.map(|r| r as usize).or(default_runs));
    let format = if cli.json {
        Format::Json
    } else if cli.csv {
        Format::Csv
    } else {
        Format::Table
    };
    let mut sink = Sink::new(format, Environment::measure());
    let report_dir = {
        let mut emit = |report: &VariantReport| sink.emit(report);
        match &cli.scenario {
            Scenario::Contexts(args) => scenarios::contexts::run(args, &opts, &mut emit),
            Scenario::Throughput(args) => scenarios::throughput::run(args, &opts, &mut emit),
            Scenario::Ordered(args) => scenarios::ordered::run(args, &opts, &mut emit),
            Scenario::Strategy(args) => scenarios::strategy::run(args, &opts, &mut emit),
            Scenario::Schedule(args) => scenarios::schedule::run(args, &opts, &mut emit),
            Scenario::Stream(args) => scenarios::stream::run(args, &opts, &mut emit, false),
            Scenario::Latency(args) => {
                let dists = scenarios::latency::run(args, &opts, &mut emit)?;
                if let Some(dir) = &args.out {
                    for p in curves::write_latency(&dists, dir)? {
                        eprintln!("keyway-bench: latency plot {}", p.display());
                    }
                }
                Ok(())
            }
            Scenario::Hotkey(args) => {
                let dists = scenarios::hotkey::run(args, &opts, &mut emit)?;
                if let Some(dir) = &args.out {
                    for p in curves::write_latency(&dists, dir)? {
                        eprintln!("keyway-bench: hot-key plot {}", p.display());
                    }
                }
                Ok(())
            }
            Scenario::Tax(args) => {
                let taxes = scenarios::tax::run(args, &opts, &mut emit)?;
                emit(&scenarios::tax::table(&taxes, &opts));
                Ok(())
            }
            Scenario::Distributed(args) => {
                scenarios::distributed::run(args, &opts, &mut emit, false)
            }
            Scenario::DistributedChild(_) => unreachable!("handled above"),
            Scenario::Curves(args) => {
                let dir = args.out.clone().unwrap_or_else(|| PathBuf::from("curves"));
                let curves = curves::measure(&opts, plan::Size::of(&opts), &mut emit)?;
                let plots = curves::write(&curves, &dir)?;
                eprintln!("keyway-bench: curves written to {}", dir.display());
                for p in plots {
                    eprintln!("  {}", p.display());
                }
                Ok(())
            }
            Scenario::All(_) => {
                opts.report = !opts.quick;
                Ok(())
            }
        }?;
        match &cli.scenario {
            Scenario::All(args) => Some(run_all(&opts, args, &mut emit)?),
            _ => None,
        }
    };
    sink.finish();
    if let Some((Some(dir), plots)) = report_dir {
        let index = sink.write_dir(&dir, &plots)?;
        eprintln!("keyway-bench: report written to {}", index.display());
    }
    Ok(())
}

/// `all`: every scenario, then (with `--out`) the curves, one run each;
/// says how long it expects to take and how long it took.
fn run_all(
    opts: &RunOptions,
    args: &OutArgs,
    emit: &mut dyn FnMut(&VariantReport),
) -> Result<(Option<PathBuf>, Vec<PathBuf>), String> {
    let with_curves = args.out.is_some();
    let estimate = plan::estimate(opts, with_curves);
    eprintln!(
        "keyway-bench: all: {} runs per system after a warm-up run{}; expect about {} \
         on an idle 2-core machine",
        opts.runs,
        if with_curves { ", then the curves" } else { "" },
        plan::minutes(estimate)
    );
    let started = std::time::Instant::now();
    scenarios::contexts::run(&ContextsArgs::default(), opts, emit)?;
    scenarios::throughput::run(&ThroughputArgs::default(), opts, emit)?;
    scenarios::ordered::run(&OrderedArgs::default(), opts, emit)?;
    scenarios::strategy::run(&StrategyArgs::default(), opts, emit)?;
    scenarios::schedule::run(&ScheduleArgs::default(), opts, emit)?;
    let mut latency = scenarios::latency::run(&LatencyArgs::default(), opts, emit)?;
    latency.extend(scenarios::hotkey::run(&HotKeyArgs::default(), opts, emit)?);
    let mut taxes = scenarios::tax::run(&TaxArgs::default(), opts, emit)?;
    // Skipped, with a note, where no redis-server is available.
    let mut tee = |report: &VariantReport| {
        taxes.extend(scenarios::tax::stream_tax(report));
        emit(report);
    };
    scenarios::stream::run(&StreamArgs::default(), opts, &mut tee, true)?;
    emit(&scenarios::tax::table(&taxes, opts));
    scenarios::distributed::run(&DistributedArgs::default(), opts, emit, true)?;
    let plots = match &args.out {
        Some(dir) => {
            let once = RunOptions { runs: 1, ..*opts };
            let curves = curves::measure(&once, plan::Size::of(opts), emit)?;
            let mut plots = curves::write(&curves, dir)?;
            plots.extend(curves::write_latency(&latency, dir)?);
            plots
        }
        None => Vec::new(),
    };
    eprintln!(
        "keyway-bench: all took {} (expected about {})",
        plan::minutes(started.elapsed().as_secs_f64()),
        plan::minutes(estimate)
    );
    Ok((args.out.clone(), plots))
}
