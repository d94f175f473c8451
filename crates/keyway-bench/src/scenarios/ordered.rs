//! `ordered`: items numbered `0..N` are each processed (the checksum of a
//! 1 KiB buffer derived from the item number) and written to one output in
//! item order. The output checks every write's item number against a write
//! counter and the checksums against a hash computed once, untimed.

use std::time::Duration;

use clap::Args;
use serde_json::{json, Map};

use super::Emit;
use crate::harness::env::cores;
use crate::harness::options::RunOptions;
use crate::harness::{measure, timed_run, Contender, VariantReport};
use crate::systems::global_mutex::GlobalMutex;
use crate::systems::keyway::KeywaySequencer;
use crate::systems::rayon_collect::RayonCollect;
use crate::systems::reorder_thread::ReorderThread;
use crate::systems::OrderedSystem;
use crate::work::{OrderedRun, ITEM_BYTES};

/// Items per run.
const ITEMS: u64 = 2_000_000;
/// `--quick` divides the item count by this.
const QUICK_DIVISOR: u64 = 50;

/// The `ordered` knobs.
#[derive(Debug, Clone, Default, Args)]
pub struct OrderedArgs {
    /// Items per run (not shrunk by --quick).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub items: Option<u64>,
}

/// The one workload of the scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Variant {
    /// Items per run.
    pub items: u64,
}

/// The variant to run for `args`; `quick` shrinks an item count the user did
/// not set.
pub fn variant(args: &OrderedArgs, quick: bool) -> Variant {
    let items = match args.items {
        Some(items) => items,
        None if quick => ITEMS / QUICK_DIVISOR,
        None => ITEMS,
    };
    Variant { items }
}

/// Runs the scenario, emitting its report.
pub fn run(args: &OrderedArgs, opts: &RunOptions, emit: &mut Emit<'_>) -> Result<(), String> {
    emit(&run_variant(variant(args, opts.quick), opts)?);
    Ok(())
}

fn run_variant(v: Variant, opts: &RunOptions) -> Result<VariantReport, String> {
    let threads = cores();
    let timeout = opts.timeout;
    // What a correct output hashes to: computed once, untimed.
    let expected = OrderedRun::expected_hash(v.items, threads);
    let mut contenders = [
        contender::<KeywaySequencer>(v, threads, timeout, expected),
        contender::<GlobalMutex>(v, threads, timeout, expected),
        contender::<ReorderThread>(v, threads, timeout, expected),
        contender::<RayonCollect>(v, threads, timeout, expected),
    ];
    let results = measure(
        "ordered",
        opts.runs,
        v.items,
        &mut contenders,
        &opts.progress,
    )?;
    let mut params = Map::new();
    params.insert("items".into(), json!(v.items));
    params.insert("item_bytes".into(), json!(ITEM_BYTES));
    params.insert("cores".into(), json!(threads));
    params.insert("runs".into(), json!(opts.runs));
    params.insert("quick".into(), json!(opts.quick));
    Ok(VariantReport {
        scenario: "ordered",
        title: format!(
            "{} items, each a checksum of {ITEM_BYTES} bytes, written in order ({} runs, median)",
            v.items, opts.runs
        ),
        params,
        results,
    })
}

fn contender<S: OrderedSystem>(
    v: Variant,
    threads: usize,
    timeout: Duration,
    expected: u64,
) -> Contender<'static> {
    Contender::new(S::NAME, move || {
        run_once::<S>(v, threads, timeout, expected)
    })
}

/// One run of system `S`: untimed setup, timed feed until the last item is
/// written, untimed teardown, then the output check.
fn run_once<S: OrderedSystem>(
    v: Variant,
    threads: usize,
    timeout: Duration,
    expected: u64,
) -> Result<Duration, String> {
    // Leaked (a few hundred bytes per run): tasks hold it for 'static
    // without a reference count touched per item.
    let run: &'static OrderedRun = Box::leak(Box::new(OrderedRun::new(v.items)));
    let system = S::setup(run, threads)?;
    let (elapsed, ()) = timed_run(system, &run.done, timeout, |s| s.feed(), |s| s.teardown())?;
    run.verify(expected)?;
    Ok(elapsed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::work::{process, write};

    #[test]
    fn every_system_takes_the_readiness_step() {
        let report = run_variant(Variant { items: 500 }, &super::super::test_options()).unwrap();
        let names: Vec<_> = report.results.iter().map(|r| r.system).collect();
        super::super::assert_every_system_ready(&report, &names);
        assert_eq!(names.len(), 4);
    }

    #[test]
    fn quick_shrinks_items_but_not_explicit_ones() {
        assert_eq!(variant(&OrderedArgs::default(), false).items, ITEMS);
        assert_eq!(variant(&OrderedArgs::default(), true).items, 40_000);
        let args = OrderedArgs { items: Some(7) };
        assert_eq!(variant(&args, true).items, 7);
    }

    /// Every ordered system runs a small workload correctly.
    #[test]
    fn systems_run_a_small_workload() {
        let v = Variant { items: 20_000 };
        let expected = OrderedRun::expected_hash(v.items, 2);
        let timeout = Duration::from_secs(30);
        run_once::<GlobalMutex>(v, 2, timeout, expected).unwrap();
        run_once::<ReorderThread>(v, 2, timeout, expected).unwrap();
        run_once::<RayonCollect>(v, 2, timeout, expected).unwrap();
        run_once::<KeywaySequencer>(v, 2, timeout, expected).unwrap();
    }

    /// A broken system: processes in parallel on two threads and writes
    /// whatever finishes (no ordering at all), under a lock.
    struct Unordered {
        run: &'static OrderedRun,
        threads: Vec<std::thread::JoinHandle<()>>,
    }

    impl OrderedSystem for Unordered {
        const NAME: &'static str = "unordered";
        fn setup(run: &'static OrderedRun, _: usize) -> Result<Self, String> {
            Ok(Self {
                run,
                threads: Vec::new(),
            })
        }
        fn feed(&mut self) -> Result<(), String> {
            let run = self.run;
            let lock: &'static std::sync::Mutex<()> =
                Box::leak(Box::new(std::sync::Mutex::new(())));
            for half in 0..2 {
                self.threads.push(std::thread::spawn(move || {
                    // Each thread writes its half back to front.
                    for item in (0..run.items).rev().filter(|i| i % 2 == half) {
                        let c = process(item);
                        let _guard = lock.lock().unwrap();
                        write(run, item, c);
                    }
                }));
            }
            Ok(())
        }
        fn teardown(self) -> Result<(), String> {
            for t in self.threads {
                t.join().map_err(|_| "panicked".to_string())?;
            }
            Ok(())
        }
    }

    /// A broken system: in order, but every 100th checksum is wrong.
    struct Corrupting(&'static OrderedRun);

    impl OrderedSystem for Corrupting {
        const NAME: &'static str = "corrupting";
        fn setup(run: &'static OrderedRun, _: usize) -> Result<Self, String> {
            Ok(Self(run))
        }
        fn feed(&mut self) -> Result<(), String> {
            for item in 0..self.0.items {
                let c = process(item) + u64::from(item % 100 == 99);
                write(self.0, item, c);
            }
            Ok(())
        }
        fn teardown(self) -> Result<(), String> {
            Ok(())
        }
    }

    #[test]
    fn broken_order_fails_the_run() {
        let v = Variant { items: 1_000 };
        let expected = OrderedRun::expected_hash(v.items, 1);
        let err = run_once::<Unordered>(v, 2, Duration::from_secs(5), expected).unwrap_err();
        assert!(err.contains("output order broken"), "{err}");
    }

    #[test]
    fn wrong_checksums_fail_the_run() {
        let v = Variant { items: 1_000 };
        let expected = OrderedRun::expected_hash(v.items, 1);
        let err = run_once::<Corrupting>(v, 2, Duration::from_secs(5), expected).unwrap_err();
        assert!(err.contains("wrong checksums"), "{err}");
    }
}
