//! `contexts`: many contexts of sequential tasks (each task spins `work`
//! atomic increments and checks its context's order), one producer.
//!
//! Variants: `seed` (16 × 50,000, work 1,000), `fine` (16 × 50,000, work 10),
//! `many` (1,024 × 781, work 10: 799,744 tasks) and `zipf` (800,000 tasks of work 10 over
//! 100,000 keys whose popularity follows Zipf's law with exponent 1.1: the hottest key
//! takes about 12% of the tasks, most keys a few or none). Any knob picks a single
//! variant; the knobs not given come from the named variant they start from
//! (`--variant`, else `many` when `--contexts` is not 16, else `fine` when
//! `--work` is 10, else `seed`), with tasks per context keeping that
//! variant's total when `--contexts` changes. So `--contexts 1024` is `many`.

mod asynchronous;
mod isolated;
mod runs;
pub mod variant;

use clap::Args;

use runs::{contender, measure_variant, shared_contender};
use variant::{Variant, NAMED, SEED_CONTEXTS, ZIPF, ZIPF_KEYS};

use super::Emit;
use crate::harness;
use crate::harness::env::cores;
use crate::harness::options::RunOptions;
use crate::harness::VariantReport;
use crate::systems::crossbeam_pool::CrossbeamContexts;
use crate::systems::hashed_slots::HashedSlots;
use crate::systems::ideal::Ideal;
use crate::systems::kameo_actor::Kameo;
use crate::systems::keyway::{KeywayLanes, KeywayTyped};
use crate::systems::napart::Napart;
use crate::systems::ractor_actor::Ractor;
use crate::systems::thread_per_context::ThreadPerContext;
pub use crate::systems::thread_per_context::THREAD_LIMIT;
use crate::systems::tokio_actor::TokioActor;
use crate::systems::tokio_actor_closure::TokioActorClosure;
use crate::systems::unordered::KeywayUnordered;
use crate::systems::ContextsSystem;

/// `--quick` divides the task counts by this.
const QUICK_DIVISOR: u64 = 50;
/// `all` divides the task counts by this (its 10-minute budget).
const REPORT_DIVISOR: u64 = 4;
/// A skewed variant's keys are divided by this when its tasks are (`--quick` and `all`), its
/// tasks per key multiplied: 10,000 keys then, so that setting up an actor per key (ractor's
/// spawn awaits each actor's start) does not outweigh the run.
const SKEW_KEY_DIVISOR: usize = 10;

/// The `contexts` knobs.
#[derive(Debug, Clone, Default, Args)]
pub struct ContextsArgs {
    /// The named variant to run, or to start from when other knobs are given.
    #[arg(long, value_parser = ["seed", "fine", "many"])]
    pub variant: Option<String>,
    /// Number of contexts (picks a single variant).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub contexts: Option<u64>,
    /// Sequential tasks per context (picks a single variant; not shrunk by --quick).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub tasks: Option<u64>,
    /// Atomic increments per task (picks a single variant).
    #[arg(long)]
    pub work: Option<u64>,
    /// Async tasks: each awaits (see --wait) before its work; keyway futures vs tokio.
    #[arg(long = "async")]
    pub asynchronous: bool,
    /// With --async: what each task awaits: a yield, a short tokio timer, a reply that another
    /// thread completes (a foreign wake-up, as from a database client), or tokio's own
    /// wake-ups (every other task a tokio timer, the rest a reply from another tokio task).
    #[arg(long, value_parser = ["yield", "timer", "remote", "tokio"], default_value = "yield")]
    pub wait: String,
    /// The producer hands over this many consecutive tasks of a context at once (keyway:
    /// `Lane::execute_all`; the peers send them one by one, as they have no batch call).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub batch: Option<u64>,
    /// Key popularity: draw the tasks over the contexts with Zipf exponent S (1.1: the
    /// hottest key takes ~12%; 0: uniform draws) instead of round robin; picks a single
    /// variant, on 100,000 contexts unless --contexts says otherwise.
    #[arg(long, value_name = "S", value_parser = zipf_exponent)]
    pub zipf: Option<f64>,
    /// Run each system in a process of its own, one after another (not interleaved), so that
    /// no row's figures (its RSS above all) owe anything to what another system left in the
    /// process.
    #[arg(long)]
    pub isolate: bool,
}

fn zipf_exponent(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && (0.0..=10.0).contains(&v) => Ok(v),
        _ => Err(format!(
            "a Zipf exponent is a number from 0 to 10, not {s:?}"
        )),
    }
}

/// The variants to run for `args`: all three standard ones, or the one the
/// knobs pick; `quick` shrinks task counts the user did not set.
#[cfg(test)]
pub fn variants(args: &ContextsArgs, quick: bool) -> Vec<Variant> {
    sized_variants(args, if quick { QUICK_DIVISOR } else { 1 })
}

fn sized_variants(args: &ContextsArgs, divisor: u64) -> Vec<Variant> {
    let mut list = if args.contexts.is_none()
        && args.tasks.is_none()
        && args.work.is_none()
        && args.variant.is_none()
        && args.zipf.is_none()
    {
        let (_, c, t, w) = ZIPF;
        NAMED
            .iter()
            .map(|&(_, c, t, w)| Variant::full(c, t, w))
            .chain([Variant::full(c, t, w).skewed(variant::ZIPF_S)])
            .collect()
    } else if let Some(s) = args.zipf {
        let (_, c, t, w) = ZIPF;
        let contexts = args.contexts.map_or(ZIPF_KEYS, |c| c as usize);
        let tasks = args
            .tasks
            .unwrap_or((c as u64 * t / contexts as u64).max(1));
        vec![Variant::full(contexts, tasks, args.work.unwrap_or(w)).skewed(s)]
    } else {
        let base = match (&args.variant, args.contexts, args.work) {
            (Some(name), _, _) => name.as_str(),
            (None, Some(c), _) if c != SEED_CONTEXTS as u64 => "many",
            (None, _, Some(10)) => "fine",
            _ => "seed",
        };
        let &(_, base_contexts, base_tasks, base_work) = NAMED
            .iter()
            .find(|&&(name, ..)| name == base)
            .unwrap_or(&NAMED[0]);
        let contexts = args.contexts.map_or(base_contexts, |c| c as usize);
        let tasks = args.tasks.unwrap_or(if contexts == base_contexts {
            base_tasks
        } else {
            (base_contexts as u64 * base_tasks / contexts as u64).max(1)
        });
        vec![Variant::full(
            contexts,
            tasks,
            args.work.unwrap_or(base_work),
        )]
    };
    if divisor > 1 && args.tasks.is_none() {
        for v in &mut list {
            if v.zipf.is_some() && args.contexts.is_none() {
                // Fewer keys keep the total: 100,000 actors' set-up would dwarf the work.
                v.contexts /= SKEW_KEY_DIVISOR;
                v.tasks *= SKEW_KEY_DIVISOR as u64;
            }
            v.tasks = (v.tasks / divisor).max(1);
        }
    }
    for v in &mut list {
        v.batch = args.batch.unwrap_or(1);
    }
    list
}

/// Runs every selected variant, emitting each report as it is measured.
pub fn run(args: &ContextsArgs, opts: &RunOptions, emit: &mut Emit<'_>) -> Result<(), String> {
    let variants = sized_variants(args, opts.divisor(QUICK_DIVISOR, REPORT_DIVISOR));
    if args.isolate {
        let names: Vec<_> = variants
            .iter()
            .map(|v| system_names(v, args, opts))
            .collect();
        for report in isolated::measure(&variants, &names, args, opts)? {
            emit(&report);
        }
        return Ok(());
    }
    for variant in variants {
        if args.asynchronous {
            emit(&asynchronous::run_variant(&variant, &args.wait, opts)?);
        } else {
            emit(&run_variant(&variant, opts)?);
        }
    }
    Ok(())
}

/// Measures one variant (every system; `thread-per-context` only up to
/// [`THREAD_LIMIT`] contexts).
pub fn run_variant(v: &Variant, opts: &RunOptions) -> Result<VariantReport, String> {
    run_variant_of(v, opts, None)
}

/// Whether the napart row runs: in `contexts` at its own sizes only. At its rate here (about
/// 30,000 tasks a second, against millions for the other rows) it would add a minute to
/// `all`'s report and seconds to the CI smoke (`all --quick`); the hot-key scenario keeps it
/// in both.
fn with_napart(opts: &RunOptions) -> bool {
    !opts.report && !opts.quick
}

/// [`run_variant`] with only the systems named in `only` (all: `None`).
pub fn run_variant_of(
    v: &Variant,
    opts: &RunOptions,
    only: Option<&[&str]>,
) -> Result<VariantReport, String> {
    let mut contenders = sync_contenders(v, opts);
    contenders.retain(|c| only.is_none_or(|names| names.contains(&c.name)));
    measure_variant(v, opts, None, contenders)
}

/// Every synchronous system `v` is measured on, in row order.
fn sync_contenders(v: &Variant, opts: &RunOptions) -> Vec<harness::Contender<'static>> {
    let threads = cores();
    let timeout = opts.timeout;
    if let Some(s) = v.zipf {
        // One state for every run (it is large), made fresh before each.
        let run = runs::skewed_run(v, s);
        let mut contenders = vec![
            shared_contender::<KeywayLanes>(run, threads, timeout),
            shared_contender::<KeywayTyped>(run, threads, timeout),
        ];
        if v.contexts <= THREAD_LIMIT {
            contenders.push(shared_contender::<ThreadPerContext>(run, threads, timeout));
        }
        contenders.extend([
            shared_contender::<TokioActor>(run, threads, timeout),
            shared_contender::<TokioActorClosure>(run, threads, timeout),
            shared_contender::<Kameo>(run, threads, timeout),
            shared_contender::<Ractor>(run, threads, timeout),
            shared_contender::<HashedSlots>(run, threads, timeout),
            shared_contender::<Ideal>(run, threads, timeout),
        ]);
        if with_napart(opts) {
            contenders.push(shared_contender::<Napart>(run, threads, timeout));
        }
        if harness::named(KeywayUnordered::NAME) {
            contenders.push(shared_contender::<KeywayUnordered>(run, threads, timeout));
        }
        if harness::named(CrossbeamContexts::NAME) {
            contenders.push(shared_contender::<CrossbeamContexts>(run, threads, timeout));
        }
        return contenders;
    }
    let mut contenders = vec![
        contender::<KeywayLanes>(v, threads, timeout),
        contender::<KeywayTyped>(v, threads, timeout),
    ];
    if v.contexts <= THREAD_LIMIT {
        contenders.push(contender::<ThreadPerContext>(v, threads, timeout));
    }
    contenders.extend([
        contender::<TokioActor>(v, threads, timeout),
        contender::<TokioActorClosure>(v, threads, timeout),
        contender::<Kameo>(v, threads, timeout),
        contender::<Ractor>(v, threads, timeout),
        contender::<HashedSlots>(v, threads, timeout),
        contender::<Ideal>(v, threads, timeout),
    ]);
    if with_napart(opts) {
        contenders.push(contender::<Napart>(v, threads, timeout));
    }
    if harness::named(KeywayUnordered::NAME) {
        contenders.push(contender::<KeywayUnordered>(v, threads, timeout));
    }
    if harness::named(CrossbeamContexts::NAME) {
        contenders.push(contender::<CrossbeamContexts>(v, threads, timeout));
    }
    contenders
}

/// The row names of `v` under `args` (sync or async systems), in row order. (A skewed
/// variant's list makes its state, untimed: a fraction of a second.)
fn system_names(v: &Variant, args: &ContextsArgs, opts: &RunOptions) -> Vec<&'static str> {
    let contenders = if args.asynchronous {
        asynchronous::contenders(v, &args.wait, opts).0
    } else {
        sync_contenders(v, opts)
    };
    contenders.iter().map(|c| c.name).collect()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::runs::run_once;
    use super::*;
    use crate::harness::measure;
    use crate::work::ContextsRun;

    #[test]
    fn no_knob_runs_every_named_variant() {
        let names: Vec<_> = variants(&ContextsArgs::default(), false)
            .iter()
            .map(|v| (v.name, v.contexts, v.tasks, v.work))
            .collect();
        assert_eq!(
            names,
            [
                ("seed", 16, 50_000, 1_000),
                ("fine", 16, 50_000, 10),
                ("many", 1024, 781, 10),
                ("zipf", 100_000, 8, 10)
            ]
        );
        assert_eq!(variants(&ContextsArgs::default(), false)[3].zipf, Some(1.1));
        let one = variants(
            &ContextsArgs {
                zipf: Some(0.8),
                contexts: Some(1_000),
                ..Default::default()
            },
            false,
        );
        assert_eq!(one.len(), 1);
        assert_eq!(
            (one[0].contexts, one[0].tasks, one[0].zipf),
            (1_000, 800, Some(0.8))
        );
        assert!(zipf_exponent("nan").is_err() && zipf_exponent("-1").is_err());
    }

    /// Every contexts peer runs a small skewed workload correctly, twice on one state.
    #[test]
    fn peers_run_a_small_skewed_workload() {
        let v = Variant::full(300, 10, 3).skewed(1.1);
        let run = runs::skewed_run(&v, 1.1);
        let t = Duration::from_secs(30);
        for _ in 0..2 {
            runs::run_shared::<KeywayLanes>(run, 2, t).unwrap();
            runs::run_shared::<KeywayTyped>(run, 2, t).unwrap();
            runs::run_shared::<ThreadPerContext>(run, 2, t).unwrap();
            runs::run_shared::<TokioActor>(run, 2, t).unwrap();
            runs::run_shared::<TokioActorClosure>(run, 2, t).unwrap();
            runs::run_shared::<Kameo>(run, 2, t).unwrap();
            runs::run_shared::<Ractor>(run, 2, t).unwrap();
            runs::run_shared::<HashedSlots>(run, 2, t).unwrap();
            runs::run_shared::<Napart>(run, 2, t).unwrap();
            runs::run_shared::<Ideal>(run, 2, t).unwrap();
            runs::run_shared::<KeywayUnordered>(run, 2, t).unwrap();
            runs::run_shared::<CrossbeamContexts>(run, 2, t).unwrap();
        }
    }

    #[test]
    fn knobs_pick_one_variant() {
        let args = ContextsArgs {
            contexts: Some(1024),
            work: Some(10),
            ..Default::default()
        };
        let list = variants(&args, false);
        assert_eq!(list.len(), 1);
        assert_eq!(list[0].name, "many");
        // --contexts 1024 alone is the standard `many` variant.
        let args = ContextsArgs {
            contexts: Some(1024),
            ..Default::default()
        };
        assert_eq!(variants(&args, false)[0], Variant::full(1024, 781, 10));
        assert_eq!(variants(&args, false)[0].name, "many");
        // A named variant with one knob changed starts from that variant.
        let args = ContextsArgs {
            variant: Some("seed".into()),
            contexts: Some(32),
            ..Default::default()
        };
        let v = &variants(&args, false)[0];
        assert_eq!(
            (v.name, v.contexts, v.tasks, v.work),
            ("custom", 32, 25_000, 1_000)
        );
        assert_eq!(v.total(), 800_000);
        let fine = variants(
            &ContextsArgs {
                work: Some(10),
                ..Default::default()
            },
            false,
        );
        assert_eq!(fine[0].name, "fine");
    }

    #[test]
    fn quick_shrinks_tasks_but_not_explicit_ones() {
        assert_eq!(variants(&ContextsArgs::default(), true)[0].tasks, 1_000);
        let args = ContextsArgs {
            tasks: Some(7),
            ..Default::default()
        };
        assert_eq!(variants(&args, true)[0].tasks, 7);
    }

    /// Every contexts peer runs a tiny workload correctly.
    #[test]
    fn peers_run_a_small_workload() {
        let v = Variant::full(5, 40, 3);
        let timeout = Duration::from_secs(30);
        run_once::<ThreadPerContext>(&v, 2, timeout).unwrap();
        run_once::<TokioActor>(&v, 2, timeout).unwrap();
        run_once::<TokioActorClosure>(&v, 2, timeout).unwrap();
        run_once::<Kameo>(&v, 2, timeout).unwrap();
        run_once::<Ractor>(&v, 2, timeout).unwrap();
        run_once::<HashedSlots>(&v, 2, timeout).unwrap();
        run_once::<Napart>(&v, 2, timeout).unwrap();
        run_once::<Ideal>(&v, 2, timeout).unwrap();
        run_once::<KeywayLanes>(&v, 2, timeout).unwrap();
        run_once::<KeywayTyped>(&v, 2, timeout).unwrap();
        let batched = Variant { batch: 7, ..v };
        run_once::<KeywayLanes>(&batched, 2, timeout).unwrap();
        run_once::<TokioActor>(&batched, 2, timeout).unwrap();
    }

    #[test]
    fn every_system_takes_the_readiness_step() {
        let report =
            run_variant(&Variant::full(8, 50, 10), &crate::scenarios::test_options()).unwrap();
        crate::scenarios::assert_every_system_ready(
            &report,
            &[
                "keyway",
                "keyway-typed",
                "thread-per-context",
                "tokio-actor",
                "tokio-actor-closure",
                "kameo",
                "ractor",
                "hashed-slots",
                "ideal",
            ],
        );
    }

    /// `contexts` on its own measures napart; `--quick` and `all`'s report leave it out.
    #[test]
    fn napart_runs_in_contexts_but_not_in_quick_or_all() {
        let v = Variant::full(8, 50, 10);
        let names = |opts: &RunOptions| -> Vec<&'static str> {
            let report = run_variant_of(&v, opts, Some(&["keyway", "napart"])).unwrap();
            report.results.iter().map(|r| r.system).collect()
        };
        assert_eq!(
            names(&RunOptions::new(false, Some(1))),
            ["keyway", "napart"]
        );
        assert_eq!(names(&RunOptions::new(true, Some(1))), ["keyway"]);
        let mut report = RunOptions::new(false, Some(1));
        report.report = true;
        assert_eq!(names(&report), ["keyway"]);
    }

    /// A broken "executor" that runs each context's tasks newest first.
    struct Reversing(&'static ContextsRun);

    impl ContextsSystem for Reversing {
        const NAME: &'static str = "reversing";
        fn setup(run: &'static ContextsRun, _: usize) -> Result<Self, String> {
            Ok(Self(run))
        }
        fn feed(&mut self) -> Result<(), String> {
            for ctx in 0..self.0.contexts() {
                for seq in (1..=self.0.tasks).rev() {
                    crate::work::context_task(self.0, ctx, seq);
                }
            }
            Ok(())
        }
        fn teardown(self) -> Result<(), String> {
            Ok(())
        }
    }

    /// A broken "executor" that loses the second task of every context.
    struct Losing(&'static ContextsRun);

    impl ContextsSystem for Losing {
        const NAME: &'static str = "losing";
        fn setup(run: &'static ContextsRun, _: usize) -> Result<Self, String> {
            Ok(Self(run))
        }
        fn feed(&mut self) -> Result<(), String> {
            let run = self.0;
            run.produce(|ctx, seq| {
                if seq != 2 {
                    crate::work::context_task(run, ctx, seq);
                }
                Ok(())
            })
        }
        fn teardown(self) -> Result<(), String> {
            Ok(())
        }
    }

    #[test]
    fn broken_order_fails_the_run() {
        let v = Variant::full(3, 10, 1);
        let err = run_once::<Reversing>(&v, 2, Duration::from_secs(5)).unwrap_err();
        assert!(err.contains("order broken"), "{err}");
    }

    #[test]
    fn lost_task_fails_the_run() {
        let v = Variant::full(3, 10, 1);
        let err = run_once::<Losing>(&v, 2, Duration::from_secs(5)).unwrap_err();
        assert!(err.contains("task 3 ran right after task 1"), "{err}");
    }

    #[test]
    fn broken_system_fails_the_measurement() {
        let v = Variant::full(2, 5, 1);
        let mut contenders = [contender::<Reversing>(&v, 2, Duration::from_secs(5))];
        let progress = crate::harness::Progress::new();
        let err = measure("test", 3, v.total(), &mut contenders, &progress).unwrap_err();
        assert!(err.contains("reversing failed on the warm-up run"), "{err}");
    }
}
