//! `contexts --async`: the `contexts` workload with async tasks — each awaits a yield, a short
//! tokio timer, a reply completed by another thread, or tokio's own wake-ups (a timer or a reply
//! from another tokio task) (`--wait`) before its work. keyway's async
//! typed lanes (a message per task) and futures on lanes (`Lane::spawn`) against a tokio actor
//! per context and a tokio task per message holding a per-context tokio mutex.

use super::runs::{contender, measure_variant};
use super::variant::Variant;
use crate::harness::env::cores;
use crate::harness::options::RunOptions;
use crate::harness::{Contender, VariantReport};
use crate::systems::async_contexts::{
    KeywayAsync, KeywaySpawnAsync, Remote, Timer, Tokio, TokioActorAsync, TokioMutexAsync, Wait,
    Yield,
};

/// Measures one variant with every async system, each task awaiting `wait` (`yield`, `timer`,
/// `remote`, `tokio`).
pub fn run_variant(v: &Variant, wait: &str, opts: &RunOptions) -> Result<VariantReport, String> {
    let (contenders, wait) = contenders(v, wait, opts);
    measure_variant(v, opts, Some(wait), contenders)
}

/// The async systems of `v`, each task awaiting `wait`, and the wait's name.
pub fn contenders(
    v: &Variant,
    wait: &str,
    opts: &RunOptions,
) -> (Vec<Contender<'static>>, &'static str) {
    match wait {
        "timer" => with::<Timer>(v, opts),
        "remote" => with::<Remote>(v, opts),
        "tokio" => with::<Tokio>(v, opts),
        _ => with::<Yield>(v, opts),
    }
}

fn with<W: Wait>(v: &Variant, opts: &RunOptions) -> (Vec<Contender<'static>>, &'static str) {
    let (threads, timeout) = (cores(), opts.timeout);
    let contenders = vec![
        contender::<KeywayAsync<W>>(v, threads, timeout),
        contender::<KeywaySpawnAsync<W>>(v, threads, timeout),
        contender::<TokioActorAsync<W>>(v, threads, timeout),
        contender::<TokioMutexAsync<W>>(v, threads, timeout),
    ];
    (contenders, W::NAME)
}

#[cfg(test)]
mod tests {
    use super::super::runs::run_once;
    use super::*;
    use std::time::Duration;

    /// Every async system runs a tiny workload correctly, with either wait.
    #[test]
    fn async_systems_run_a_small_workload() {
        let v = Variant::full(5, 40, 3);
        let t = Duration::from_secs(30);
        run_once::<KeywayAsync<Yield>>(&v, 2, t).unwrap();
        run_once::<KeywaySpawnAsync<Yield>>(&v, 2, t).unwrap();
        run_once::<TokioActorAsync<Yield>>(&v, 2, t).unwrap();
        run_once::<TokioMutexAsync<Yield>>(&v, 2, t).unwrap();
        run_once::<KeywayAsync<Timer>>(&v, 2, t).unwrap();
        run_once::<KeywaySpawnAsync<Timer>>(&v, 2, t).unwrap();
        run_once::<TokioActorAsync<Timer>>(&v, 2, t).unwrap();
        run_once::<TokioMutexAsync<Timer>>(&v, 2, t).unwrap();
        run_once::<KeywayAsync<Remote>>(&v, 2, t).unwrap();
        run_once::<KeywaySpawnAsync<Remote>>(&v, 2, t).unwrap();
        run_once::<TokioActorAsync<Remote>>(&v, 2, t).unwrap();
        run_once::<TokioMutexAsync<Remote>>(&v, 2, t).unwrap();
        run_once::<KeywayAsync<Tokio>>(&v, 2, t).unwrap();
        run_once::<KeywaySpawnAsync<Tokio>>(&v, 2, t).unwrap();
        run_once::<TokioActorAsync<Tokio>>(&v, 2, t).unwrap();
        run_once::<TokioMutexAsync<Tokio>>(&v, 2, t).unwrap();
    }
}
