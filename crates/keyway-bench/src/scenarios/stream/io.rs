//! The I/O rows of `stream`: every message waits a fixed time (1 ms and 10 ms), as a call to
//! a database or a service would. The async consumers (`keyway-async`,
//! `keyway-unordered-async`, on a pool of at most 4 threads) await a tokio timer, which holds
//! no thread; the sync ones (`keyway` on 16 threads, `consumer-per-shard`, `raw`) sleep
//! their thread. At 100 and 1,000 keys, uniform (message `i` to key `i % keys`) and Zipf
//! popularity. Messages are appended after the clock starts, as fast as the producer goes,
//! so the latency of each counts from its append (to the end of its handling).
//!
//! The systems differ by orders of magnitude here (`raw` handles one message per wait), so
//! each system's run has its own message count, sized from what it can reach to run about
//! [`IoArgs::io_seconds`]; its msg/s is its own count over its own time. Each system is
//! measured on its own (its warm-up run, then its counted runs), not interleaved.

use std::time::Duration;

use clap::Args;
use serde_json::{json, Map, Value};

use super::{contender, medians, Collected, Emit, Row, SHARDS};
use crate::harness::options::RunOptions;
use crate::harness::{measure, Contender, SystemResult, VariantReport};
use crate::popularity::Popularity;
use crate::systems::stream::batched::{PerShard, Raw};
use crate::systems::stream::keyway::{
    KeywayAsync, KeywayOrdered, KeywayUnorderedAsync, ASYNC_THREADS, THREADS,
};
use crate::systems::stream::StreamSystem;

/// The default waits, in milliseconds.
const WAITS_MS: [u64; 2] = [1, 10];
/// The default key counts.
const KEYS: [u64; 2] = [100, 1_000];
/// The default Zipf exponent.
const ZIPF: f64 = 1.1;
/// What sizing assumes no consumer passes, msg/s (Redis and the consumer share two cores).
const CEILING: f64 = 80_000.0;
/// The fewest messages of a run.
const MIN_MESSAGES: u64 = 20;

/// The I/O rows' knobs.
#[derive(Debug, Clone, Default, Args)]
pub struct IoArgs {
    /// The I/O rows' waits per message, in ms (default 1,10; 1 with --quick).
    #[arg(long, value_delimiter = ',', value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub waits: Option<Vec<u64>>,
    /// The I/O rows' key counts (default 100,1000; 100 with --quick).
    #[arg(long, value_delimiter = ',', value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub io_keys: Option<Vec<u64>>,
    /// The I/O rows' popularities (default uniform,zipf; uniform with --quick).
    #[arg(long, value_delimiter = ',', value_parser = ["uniform", "zipf"])]
    pub popularity: Option<Vec<String>>,
    /// The exponent of the Zipf popularity (default 1.1).
    #[arg(long, value_parser = parse_exponent)]
    pub zipf: Option<f64>,
    /// About how long each run of each system lasts, in seconds: its message count is what
    /// it can reach in that time (default 1; 0.05 with --quick).
    #[arg(long, value_parser = parse_seconds)]
    pub io_seconds: Option<f64>,
}

fn parse_exponent(s: &str) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|e| format!("{e}"))?;
    (v.is_finite() && (0.0..=10.0).contains(&v))
        .then_some(v)
        .ok_or_else(|| "a Zipf exponent from 0 to 10".into())
}

fn parse_seconds(s: &str) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|e| format!("{e}"))?;
    (v.is_finite() && (0.001..=600.0).contains(&v))
        .then_some(v)
        .ok_or_else(|| "seconds from 0.001 to 600".into())
}

/// Runs the I/O rows `args` names (the defaults: every wait, key count and popularity; with
/// `--quick` one row, 1 ms at 100 uniform keys, short runs).
pub(super) fn rows(
    args: &IoArgs,
    url: &str,
    opts: &RunOptions,
    emit: &mut Emit<'_>,
) -> Result<(), String> {
    let quick = opts.quick;
    let waits = args
        .waits
        .clone()
        .unwrap_or_else(|| if quick { vec![1] } else { WAITS_MS.to_vec() });
    let keys = args
        .io_keys
        .clone()
        .unwrap_or_else(|| if quick { vec![100] } else { KEYS.to_vec() });
    let popularity = args.popularity.clone().unwrap_or_else(|| {
        let all: &[&str] = if quick {
            &["uniform"]
        } else {
            &["uniform", "zipf"]
        };
        all.iter().map(|s| s.to_string()).collect()
    });
    let seconds = args.io_seconds.unwrap_or(if quick {
        0.05
    } else {
        1.0 / opts.divisor(1, 2) as f64
    });
    for &wait in &waits {
        for &k in &keys {
            for pop in &popularity {
                let row = Row {
                    burst: true,
                    zipf: (pop == "zipf").then_some(args.zipf.unwrap_or(ZIPF)),
                    ..Row::filled(0, k, Duration::from_millis(wait))
                };
                emit(&io_row(url, row, seconds, opts)?);
            }
        }
    }
    Ok(())
}

/// What a system can reach over `row`, msg/s (only to size its runs): its parallelism over
/// the wait, where a key-ordered system's parallelism is at most the keys' (the busiest key
/// takes `top` of the messages, so at most `1 / top` keys are busy at once on average).
fn reach(system: &str, row: Row, top: f64) -> f64 {
    let keys = 1.0 / top.max(1e-9);
    let lanes = match system {
        "raw" => 1.0,
        "consumer-per-shard" => f64::from(SHARDS).min(keys),
        "keyway" => (THREADS as f64).min(keys),
        "keyway-async" => keys,
        _ => f64::INFINITY,
    };
    (lanes / row.max_work.as_secs_f64()).min(CEILING)
}

/// The share of the messages of a row its busiest key gets.
fn top_share(row: Row) -> f64 {
    match row.zipf {
        Some(s) => {
            let n = 100_000;
            let p = Popularity::zipf(row.keys as usize, n, s);
            let top = (0..p.keys()).map(|k| p.tasks_of(k)).max().unwrap_or(n);
            top as f64 / n as f64
        }
        None => 1.0 / row.keys as f64,
    }
}

/// One I/O row: each system measured over its own message count.
fn io_row(url: &str, row: Row, seconds: f64, opts: &RunOptions) -> Result<VariantReport, String> {
    let top = top_share(row);
    let sized = |name: &str| Row {
        messages: ((reach(name, row, top) * seconds) as u64).max(MIN_MESSAGES),
        ..row
    };
    let popularity = match row.zipf {
        Some(s) => format!("Zipf {s} (busiest key {:.1}%)", top * 100.0),
        None => "uniform".to_string(),
    };
    let what = format!(
        "I/O {} ms, {} keys {popularity}",
        row.max_work.as_millis(),
        row.keys
    );
    let collected = Collected::default();
    let mut results: Vec<SystemResult> = Vec::new();
    let mut systems = Map::new();
    let mut title = format!(
        "{what}: each message waits {} ms (async: a tokio timer; sync: a sleep), appended \
         while consumed, {SHARDS} shards; msg/s to the last ack, latency from the append, median:",
        row.max_work.as_millis()
    );
    let mut one = |name: &'static str, pool: usize, c: Contender<'static>, r: Row| {
        let label = format!("stream {what}");
        let mut got = measure(&label, opts.runs, r.messages, &mut [c], &opts.progress)?;
        let (Some(mut result), Some(f)) = (got.pop(), medians(&collected, name)) else {
            return Ok::<(), String>(()); // left out by --systems
        };
        result.extra = vec![
            ("messages", r.messages as f64),
            ("pool threads", pool as f64),
            ("p50 ms", f.p50_ms),
            ("p99 ms", f.p99_ms),
        ];
        title.push_str(&format!(
            "\n    {name:<23} {:>7} msg/s ({} messages, pool of {pool}), p50 {:.2} ms, p99 {:.2} ms",
            result.ops_per_s.round(),
            r.messages,
            f.p50_ms,
            f.p99_ms
        ));
        systems.insert(
            name.to_string(),
            json!({
                "messages": r.messages,
                "msg_per_s": result.ops_per_s,
                "pool_threads": pool,
                "p50_ms": f.p50_ms,
                "p99_ms": f.p99_ms,
                "p999_ms": f.p999_ms,
                "commands_per_message": f.commands_per_message,
            }),
        );
        results.push(result);
        Ok(())
    };
    let t = opts.timeout;
    macro_rules! run {
        ($s:ty, $pool:expr) => {{
            let r = sized(<$s>::NAME);
            one(<$s>::NAME, $pool, contender::<$s>(url, r, t, &collected), r)?;
        }};
    }
    run!(KeywayOrdered, THREADS);
    run!(KeywayAsync, ASYNC_THREADS);
    run!(KeywayUnorderedAsync, ASYNC_THREADS);
    run!(PerShard, SHARDS as usize);
    run!(Raw, 1);
    let mut params = Map::new();
    params.insert("variant".into(), json!(what));
    params.insert("keys".into(), json!(row.keys));
    params.insert("shards".into(), json!(SHARDS));
    params.insert("wait_ms".into(), json!(row.max_work.as_secs_f64() * 1e3));
    params.insert(
        "popularity".into(),
        json!(if row.zipf.is_some() {
            "zipf"
        } else {
            "uniform"
        }),
    );
    params.insert("zipf".into(), json!(row.zipf));
    params.insert("busiest_key_share".into(), json!(top));
    params.insert("runs".into(), json!(opts.runs));
    params.insert("quick".into(), json!(opts.quick));
    params.insert("systems".into(), Value::Object(systems));
    Ok(VariantReport {
        scenario: "stream",
        title,
        params,
        results,
    })
}

#[cfg(test)]
mod tests {
    use super::super::super::{assert_every_system_ready, test_options};
    use super::super::tests::redis;
    use super::*;

    /// Every system runs an I/O row, uniform and Zipf (each message once, each key in order
    /// where promised, the async ones awaiting tokio timers), and reports its figures.
    #[test]
    fn every_io_row_runs_every_system() {
        let Some((_redis, url)) = redis() else {
            return;
        };
        let opts = test_options();
        let uniform = Row {
            burst: true,
            ..Row::filled(0, 10, Duration::from_millis(1))
        };
        for row in [
            uniform,
            Row {
                zipf: Some(1.1),
                ..uniform
            },
        ] {
            let report = io_row(&url, row, 0.02, &opts).unwrap();
            assert_every_system_ready(
                &report,
                &[
                    "keyway",
                    "keyway-async",
                    "keyway-unordered-async",
                    "consumer-per-shard",
                    "raw",
                ],
            );
            for (name, f) in report.params["systems"].as_object().unwrap() {
                assert!(f["messages"].as_u64().unwrap() >= MIN_MESSAGES, "{name}");
                assert!(f["msg_per_s"].as_f64().unwrap() > 0.0, "{name}");
                // Every message waits 1 ms after its append, at least.
                assert!(f["p50_ms"].as_f64().unwrap() >= 1.0, "{name}: {f}");
            }
        }
    }

    #[test]
    fn sizing_follows_what_each_system_can_reach() {
        let row = Row {
            burst: true,
            ..Row::filled(0, 1_000, Duration::from_millis(10))
        };
        let top = top_share(row);
        assert_eq!(reach("raw", row, top), 100.0);
        assert_eq!(reach("keyway", row, top), 1_600.0);
        assert_eq!(reach("keyway-async", row, top), CEILING);
        let zipf = Row {
            zipf: Some(1.1),
            ..row
        };
        let hot = top_share(zipf);
        assert!(hot > 0.1 && hot < 0.3, "{hot}");
        assert!(reach("keyway-async", zipf, hot) < 1_000.0);
    }
}
