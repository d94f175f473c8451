//! One run of a `contexts` system (setup, timed feed until every context's
//! last task ran, teardown, order check), its contender, and the variant's
//! report. Shared by the sync and async systems.

use std::time::Duration;

use serde_json::{json, Map};

use super::variant::Variant;
use crate::harness::env::cores;
use crate::harness::options::RunOptions;
use crate::harness::report::group_thousands;
use crate::harness::{measure, Contender, VariantReport};
use crate::popularity::Popularity;
use crate::systems::{run_contexts, ContextsSystem};
use crate::work::ContextsRun;

/// Measures `contenders` on `v` and makes the report; `wait` (async runs) names what each task
/// awaits.
pub(super) fn measure_variant(
    v: &Variant,
    opts: &RunOptions,
    wait: Option<&str>,
    mut contenders: Vec<Contender<'static>>,
) -> Result<VariantReport, String> {
    let (label, title) = describe(v, opts, wait);
    let results = measure(
        &label,
        opts.runs,
        v.total(),
        &mut contenders,
        &opts.progress,
    )?;
    let mut params = Map::new();
    params.insert("variant".into(), json!(v.name));
    params.insert("contexts".into(), json!(v.contexts));
    params.insert("tasks_per_context".into(), json!(v.tasks));
    params.insert("work".into(), json!(v.work));
    params.insert("total_tasks".into(), json!(v.total()));
    params.insert("cores".into(), json!(cores()));
    params.insert("runs".into(), json!(opts.runs));
    params.insert("quick".into(), json!(opts.quick));
    params.insert("batch".into(), json!(v.batch));
    if let Some(w) = wait {
        params.insert("async_wait".into(), json!(w));
    }
    params.insert("zipf".into(), json!(v.zipf));
    Ok(VariantReport {
        scenario: "contexts",
        title,
        params,
        results,
    })
}

/// The progress label and the report's title of `v`; `wait` (async runs) names what each task
/// awaits.
pub(super) fn describe(v: &Variant, opts: &RunOptions, wait: Option<&str>) -> (String, String) {
    let mut kind = wait.map_or(String::new(), |w| format!(" async {w}"));
    if v.batch > 1 {
        kind.push_str(&format!(" batch {}", v.batch));
    }
    if let (Some(s), false) = (v.zipf, v.name == "zipf") {
        kind.push_str(&format!(" zipf {s}"));
    }
    let label = format!("contexts{kind} {}", v.name);
    let per = match v.zipf {
        Some(s) => format!("tasks on average, Zipf {s} popularity"),
        None => "tasks".to_string(),
    };
    let title = format!(
        "{}{kind}: {} contexts × {} {per}, work {} ({} tasks; {} runs, median)",
        v.name,
        group_thousands(v.contexts as u64),
        group_thousands(v.tasks),
        group_thousands(v.work),
        group_thousands(v.total()),
        opts.runs
    );
    (label, title)
}

pub(super) fn contender<S: ContextsSystem>(
    v: &Variant,
    threads: usize,
    timeout: Duration,
) -> Contender<'static> {
    let v = v.clone();
    Contender::new(S::NAME, move || run_once::<S>(&v, threads, timeout))
}

/// One run of system `S`: untimed setup, timed feed until every context's
/// last task ran, untimed teardown, then the order check.
pub(crate) fn run_once<S: ContextsSystem>(
    v: &Variant,
    threads: usize,
    timeout: Duration,
) -> Result<Duration, String> {
    // Tasks borrow the run's state for 'static; it is leaked (a few KiB per
    // run) because some peers may still touch it after completion is seen.
    let run: &'static ContextsRun = Box::leak(Box::new(
        ContextsRun::new(v.contexts, v.tasks, v.work).batched(v.batch),
    ));
    run_contexts::<S>(run, threads, timeout)
}

/// The state of a skewed variant's runs: `v`'s tasks drawn over its contexts with Zipf exponent
/// `s`, made once (untimed) and leaked, as runs' states are.
pub(super) fn skewed_run(v: &Variant, s: f64) -> &'static ContextsRun {
    let popularity = Popularity::zipf(v.contexts, v.total(), s);
    Box::leak(Box::new(ContextsRun::with_popularity(popularity, v.work)))
}

/// A contender whose runs all use `run`, made fresh before each.
pub(super) fn shared_contender<S: ContextsSystem>(
    run: &'static ContextsRun,
    threads: usize,
    timeout: Duration,
) -> Contender<'static> {
    Contender::new(S::NAME, move || run_shared::<S>(run, threads, timeout))
}

/// One run of system `S` on `run`, made fresh first (every earlier run's threads have
/// stopped: each system's teardown waits for them).
pub(crate) fn run_shared<S: ContextsSystem>(
    run: &'static ContextsRun,
    threads: usize,
    timeout: Duration,
) -> Result<Duration, String> {
    run.reset();
    run_contexts::<S>(run, threads, timeout)
}
