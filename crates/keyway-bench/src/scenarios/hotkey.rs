//! `hotkey`: one hot key among many light ones. 1,024 light keys (a light task: 100 µs of spin
//! work, calibrated on this machine) and one hot key, whose tasks do 100× a light task's work
//! (1 task in 250 is the hot key's: it keeps a thread busy ~4% of the time), offered on an
//! open-loop schedule (arrivals at fixed times; delays counted from each task's intended submit
//! time, as in `latency`) at a light load: the light work keeps 5% of the cores busy, so the
//! light keys' waits come from the hot key, not from queueing for the CPU, and the producer
//! (one task per ms on 2 cores) sleeps between arrivals instead of spinning a core away. Two variants on the same task stream and
//! rate: the hot key's tasks doing the light work (no hot key) and doing 100× it. Each row
//! reports the light keys' p50/p99/p99.9 submit-to-start (their head-of-line blocking: a
//! light key waiting behind the hot key's work) and the run's total time; the hot variant's
//! rows also give each light p99 over the same system's p99 with no hot key.
//!
//! Those delays count from each task's intended time, so they include the producer's own
//! lateness: on 2 cores, with one core taken by a hot task, the sleeping producer thread is
//! often woken late by the OS (its lateness p99 is in the table, `producer late p99`), and
//! that lateness is no system's head-of-line blocking. So each row also gives the light keys'
//! p99 from each task's actual submit to its start (`submitted p99`) and, with the hot key,
//! that p99 over the same system's with no hot key (`submitted ratio`): the wait the system
//! itself added. Keyed lanes
//! leave light keys to the other threads; hashed slots queue the light keys that share the
//! hot key's slot behind it. Per-key order is checked as in `contexts`.

use std::cell::RefCell;
use std::time::Duration;

use clap::Args;
use serde_json::{json, Map};

use super::Emit;
use crate::harness::env::cores;
use crate::harness::options::RunOptions;
use crate::harness::report::group_thousands;
use crate::harness::stats::median;
use crate::harness::{is_selected, measure, Contender, VariantReport};
use crate::keys::splitmix64;
use crate::popularity::Popularity;
use crate::scenarios::latency::{plotted, system, Distribution, System};
use crate::systems::hashed_slots::HashedSlots;
use crate::systems::kameo_actor::Kameo;
use crate::systems::keyway::KeywayLanes;
use crate::systems::napart::Napart;
use crate::systems::ractor_actor::Ractor;
use crate::systems::thread_per_context::ThreadPerContext;
use crate::systems::tokio_actor::TokioActor;
use crate::work::{increments_per_ns, ContextsRun};

/// Light keys.
const LIGHT_KEYS: usize = 1_024;
/// The hot key is context 0; one task in this many is its.
const HOT_EVERY: u64 = 250;
/// µs of spin work of a light task.
const LIGHT_US: f64 = 100.0;
/// A hot task does this many times a light task's work.
const HOT_FACTOR: u64 = 100;
/// The offered load with no hot key: this share of the machine's cores kept busy by the
/// light tasks' own work (the hot key's extra work adds 40% to it).
const LOAD: f64 = 0.05;
/// Seconds of one open-loop run at full size.
const RUN_S: f64 = 4.0;
/// `--quick` divides the run's length by this.
const QUICK_DIVISOR: u64 = 40;
/// `all` divides it by this (and counts one run per system).
const REPORT_DIVISOR: u64 = 8;

/// The `hotkey` knobs.
#[derive(Debug, Clone, Default, Args)]
pub struct HotKeyArgs {
    /// How many times a light task's work a hot task does (default 100).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub factor: Option<u64>,
    /// Also draw the light keys' delay distributions as SVG plots into this folder.
    #[arg(long)]
    pub out: Option<std::path::PathBuf>,
}

fn systems() -> Vec<System> {
    vec![
        system::<KeywayLanes>(),
        system::<TokioActor>(),
        system::<Kameo>(),
        system::<Ractor>(),
        system::<HashedSlots>(),
        system::<Napart>(),
        system::<ThreadPerContext>(),
    ]
}

/// The light keys' delays of one run (µs).
#[derive(Debug, Clone)]
struct Light {
    p50: f64,
    p99: f64,
    p999: f64,
    /// The producer's own lateness, p99 (µs): the part of a delay spent before the submit.
    late_p99: f64,
    /// p99 from each light task's actual submit to its start (µs): the system's wait alone.
    submit_p99: f64,
    /// The submit-to-start distribution as plot points.
    points: Vec<(f64, f64)>,
}

/// The task stream: task `i` is the hot key's (context 0) every [`HOT_EVERY`]-th, else a
/// light key drawn from its hash.
fn stream(tasks: u64) -> Popularity {
    Popularity::from_draws(LIGHT_KEYS + 1, tasks, |i| {
        if i.is_multiple_of(HOT_EVERY) {
            0
        } else {
            1 + (splitmix64(i) % LIGHT_KEYS as u64) as usize
        }
    })
}

/// Runs both variants (no hot key, then the hot key), emitting a report for each; returns the
/// light keys' delay distributions (one plot per variant, the last run of each system).
pub fn run(
    args: &HotKeyArgs,
    opts: &RunOptions,
    emit: &mut Emit<'_>,
) -> Result<Vec<Distribution>, String> {
    let factor = args.factor.unwrap_or(HOT_FACTOR);
    // `all`'s report counts one run per system, as `latency` does (its time budget).
    let opts = &RunOptions {
        runs: if opts.report { 1 } else { opts.runs },
        ..*opts
    };
    let secs = RUN_S / opts.divisor(QUICK_DIVISOR, REPORT_DIVISOR) as f64;
    let light_work = ((LIGHT_US * 1e3 * increments_per_ns()).round() as u64).max(1);
    let rate = LOAD * cores() as f64 / (LIGHT_US / 1e6);
    let tasks = ((rate * secs) as u64).max(64);
    let chosen: Vec<System> = systems()
        .into_iter()
        .filter(|s| is_selected(s.name))
        .collect();
    let mut baseline: Vec<Option<(f64, f64)>> = vec![None; chosen.len()];
    let mut plots = Vec::new();
    for hot in [1, factor] {
        let lights: Vec<RefCell<Vec<Light>>> =
            chosen.iter().map(|_| RefCell::new(Vec::new())).collect();
        let mut contenders: Vec<Contender<'_>> = chosen
            .iter()
            .zip(&lights)
            .map(|(s, slot)| {
                let s = *s;
                Contender::new(s.name, move || {
                    let (elapsed, light) = open_run(s, tasks, rate, light_work, hot, opts.timeout)?;
                    slot.borrow_mut().push(light);
                    Ok(elapsed)
                })
            })
            .collect();
        let kind = if hot == 1 {
            "no hot key".to_string()
        } else {
            format!("hot key {hot}×")
        };
        let label = format!("hotkey {kind}");
        let mut results = measure(&label, opts.runs, tasks, &mut contenders, &opts.progress)?;
        drop(contenders);
        let mut series = Vec::new();
        for r in &mut results {
            let i = chosen
                .iter()
                .position(|s| s.name == r.system)
                .unwrap_or_else(|| unreachable!("measure returns the systems it was given"));
            let runs = lights[i].borrow();
            let med = |f: fn(&Light) -> f64| median(&runs.iter().map(f).collect::<Vec<_>>());
            let p99 = med(|l| l.p99);
            let submit_p99 = med(|l| l.submit_p99);
            if let Some(last) = runs.last() {
                series.push((r.system.to_string(), last.points.clone()));
            }
            r.extra = vec![
                ("light p50", med(|l| l.p50)),
                ("light p99", p99),
                ("light p99.9", med(|l| l.p999)),
                ("producer late p99", med(|l| l.late_p99)),
                ("submitted p99", submit_p99),
            ];
            if hot == 1 {
                baseline[i] = Some((p99, submit_p99));
            } else if let Some((base, submit_base)) = baseline[i] {
                r.extra.push(("p99 ratio", p99 / base.max(1e-3)));
                r.extra
                    .push(("submitted ratio", submit_p99 / submit_base.max(1e-3)));
            }
        }
        let mut params = Map::new();
        params.insert("light_keys".into(), json!(LIGHT_KEYS));
        params.insert("hot_every".into(), json!(HOT_EVERY));
        params.insert("light_work".into(), json!(light_work));
        params.insert("light_us".into(), json!(LIGHT_US));
        params.insert("hot_factor".into(), json!(hot));
        params.insert("rate".into(), json!(rate));
        params.insert("tasks".into(), json!(tasks));
        params.insert("cores".into(), json!(cores()));
        params.insert("runs".into(), json!(opts.runs));
        params.insert("quick".into(), json!(opts.quick));
        let title = format!(
            "{kind}: {} light keys ({LIGHT_US} µs of work each) and one key with 1 task in \
             {HOT_EVERY} ({} µs), {} tasks/s open loop ({} tasks; light keys' submit-to-start, \
             µs, median of {} runs)",
            group_thousands(LIGHT_KEYS as u64),
            LIGHT_US * hot as f64,
            group_thousands(rate as u64),
            group_thousands(tasks),
            opts.runs
        );
        plots.push(Distribution {
            file: format!("hotkey-{hot}x"),
            title: format!("Light keys' submit-to-start delay, {title}"),
            series,
        });
        emit(&VariantReport {
            scenario: "hotkey",
            title,
            params,
            results,
        });
    }
    Ok(plots)
}

/// One open-loop run of `s`: `tasks` tasks at `rate` per second, each light one `light_work`
/// increments, the hot key's `hot`× that; its time and the light keys' delays.
fn open_run(
    s: System,
    tasks: u64,
    rate: f64,
    light_work: u64,
    hot: u64,
    timeout: Duration,
) -> Result<(Duration, Light), String> {
    // Leaked, as in `latency`: a peer may touch it after completion.
    let run: &'static ContextsRun = Box::leak(Box::new(
        ContextsRun::with_popularity(stream(tasks), light_work)
            .hot(0, light_work.saturating_mul(hot))
            .tracked_open_loop(rate),
    ));
    let elapsed = (s.run)(run, cores(), timeout)?;
    let summary = match &run.open_loop {
        Some(schedule) => schedule.summary(),
        None => unreachable!("the run was made with an open loop"),
    };
    let light_tasks = run.total() - run.tasks_of(0);
    if summary.start.len() != light_tasks || summary.from_submit.len() != light_tasks {
        return Err(format!(
            "{} light tasks' delays recorded ({} from their submit), {light_tasks} light tasks ran",
            summary.start.len(),
            summary.from_submit.len()
        ));
    }
    let us = |q: f64| summary.start.value_at_quantile(q) as f64 / 1e3;
    Ok((
        elapsed,
        Light {
            p50: us(0.5),
            p99: us(0.99),
            p999: us(0.999),
            late_p99: summary.late.value_at_quantile(0.99) as f64 / 1e3,
            submit_p99: summary.from_submit.value_at_quantile(0.99) as f64 / 1e3,
            points: plotted(&summary),
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stream_gives_the_hot_key_its_share() {
        let p = stream(50_000);
        assert_eq!(p.tasks_of(0), 200);
        assert!((1..=LIGHT_KEYS).all(|k| p.tasks_of(k) > 10));
    }

    /// Every system runs both variants of a short stream, and the light keys' delays are
    /// recorded without the hot key's (`open_run` checks their count).
    #[test]
    fn every_system_runs_a_short_hot_key_stream() {
        for s in systems() {
            for hot in [1, 10] {
                let (_, light) = open_run(s, 3_000, 50_000.0, 3, hot, Duration::from_secs(30))
                    .unwrap_or_else(|e| panic!("{}: {e}", s.name));
                assert!(light.p99 > 0.0 && light.p99 >= light.p50, "{}", s.name);
            }
        }
    }
}
