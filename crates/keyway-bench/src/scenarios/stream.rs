//! `stream`: consuming a sharded Redis stream (4 shards, keyway-redis's key-to-shard rule) in
//! one consumer group, on a `redis-server` this command starts on a free loopback port.
//!
//! * sleep rows: a stream filled before the clock starts with messages over 1, 2, 10, 100
//!   and 1,000 keys, each message sleeping U(0, 5 ms) (an I/O call); `naive`,
//!   `consumer-per-shard`, `keyway` (key-ordered, 16 threads) and `keyway-unordered`. The
//!   floor is `total work / min(16, keys)`: no consumer of 16 threads keeping each key's
//!   order can be faster (for `keyway-unordered`, which need not keep it: `total work / 16`).
//! * zero work: the msg/s ceiling of one member, against `raw` (a pipelined loop on the
//!   redis client).
//! * open loop: a producer appends 10,000 msg/s on a fixed schedule while the consumer
//!   runs; latency counts from each message's slot in the schedule (no coordinated omission).
//!   Beside `raw` and `keyway`, `floor` (one blocking `XREADGROUP … NOACK` per wake-up, no
//!   acks) gives the machine's own floor; each latency also splits at the append: the
//!   producer's lateness (slot to send), which no consumer can win back, and the delivery.
//!
//! Each run ends when every message was acknowledged; then every message is checked to have
//! run exactly once and, for the systems that keep key order, each key's messages to have
//! started in order. Beside the standard columns: efficiency (floor / time), end-to-end
//! latency (from when a message was due — the start, or its schedule slot — to the end of its
//! handling; HDR histogram, median over runs), and Redis commands per message (`INFO stats`
//! `total_commands_processed` over the timed region, commands run by scripts included, the
//! producer's appends not: an upper bound on round trips).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::Args;
use hdrhistogram::Histogram;
use keyway_redis::stream::{Producer, Topic};
use serde_json::{json, Map, Value};

use super::distributed::{redis_server, start_redis};
use super::Emit;
use crate::harness::options::RunOptions;
use crate::harness::stats::median;
use crate::harness::{measure, ready_step, threads, Contender, Stopwatch, VariantReport};
use crate::popularity::Popularity;
use crate::systems::stream::batched::{PerShard, Raw};
use crate::systems::stream::floor::Floor;
use crate::systems::stream::keyway::{KeywayOrdered, KeywayUnordered, THREADS};
use crate::systems::stream::naive::Naive;
use crate::systems::stream::{connect, StreamSystem};
use crate::work::stream::{payload_of, StreamRun};

mod io;

/// Shards of every topic.
const SHARDS: u32 = 4;
/// The most work a message of a sleep row sleeps.
const MAX_WORK: Duration = Duration::from_millis(5);
/// The sleep rows' key counts.
const KEYS: [u64; 5] = [1, 2, 10, 100, 1_000];
/// The sleep rows of `--quick`.
const QUICK_KEYS: [u64; 2] = [1, 100];
/// Keys of the zero-work and open-loop rows.
const FLAT_KEYS: u64 = 100;
/// The open-loop row's rate, messages per second.
const RATE: u64 = 10_000;

/// The `stream` knobs.
#[derive(Debug, Clone, Default, Args)]
pub struct StreamArgs {
    /// Only these rows (comma-separated): `sleep`, `zero`, `open`, `io` (default all).
    #[arg(long, value_delimiter = ',', value_parser = ["sleep", "zero", "open", "io"])]
    pub rows: Option<Vec<String>>,
    /// The sleep rows' key counts (default 1,2,10,100,1000; 1,100 with --quick).
    #[arg(long, value_delimiter = ',', value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub keys: Option<Vec<u64>>,
    /// Messages per run of each sleep row (default 400 below 10 keys, 1,000 from 10).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    pub messages: Option<u64>,
    /// The I/O rows' knobs.
    #[command(flatten)]
    pub io: io::IoArgs,
}

/// One row: what its runs consume.
#[derive(Debug, Clone, Copy)]
struct Row {
    messages: u64,
    keys: u64,
    max_work: Duration,
    /// Open loop: the schedule's period; `None`: filled before the start.
    period: Option<Duration>,
    /// Each message is appended after the start as fast as the producer goes (in pipelined
    /// batches, each's append time recorded) and its work is `max_work` exactly; latencies
    /// count from the append.
    burst: bool,
    /// Keys drawn with Zipf popularity of this exponent; `None`: message `i` has key
    /// `i % keys`.
    zipf: Option<f64>,
}

impl Row {
    /// A row filled before the start, key `i % keys`, work U(0, max_work).
    fn filled(messages: u64, keys: u64, max_work: Duration) -> Self {
        Row {
            messages,
            keys,
            max_work,
            period: None,
            burst: false,
            zipf: None,
        }
    }

    /// The run state of one run of a system over this row.
    fn run(&self, ordered: bool) -> StreamRun {
        let run = StreamRun::new(
            self.messages,
            self.keys,
            self.max_work,
            self.period,
            ordered,
        );
        let run = match self.zipf {
            Some(s) => run.with_popularity(Popularity::zipf(self.keys as usize, self.messages, s)),
            None => run,
        };
        if self.burst {
            run.with_fixed_work()
        } else {
            run
        }
    }
}

/// What one run measured beside its time.
#[derive(Debug, Clone, Copy)]
struct Figures {
    p50_ms: f64,
    p99_ms: f64,
    p999_ms: f64,
    /// Open loop: p99.9 of the producer's lateness (slot to send), which no consumer can
    /// win back, and of the delivery (send to the end of the handling); 0 otherwise.
    late_p999_ms: f64,
    delivery_p999_ms: f64,
    commands_per_message: f64,
}

/// Runs every row (or those `args` names); without a `redis-server` on `PATH`, `all`
/// skips it (and says so) while `stream` alone fails.
pub fn run(
    args: &StreamArgs,
    opts: &RunOptions,
    emit: &mut Emit<'_>,
    in_all: bool,
) -> Result<(), String> {
    let Some(binary) = redis_server() else {
        if in_all {
            eprintln!("keyway-bench: stream: skipped (no redis-server on PATH)");
            return Ok(());
        }
        return Err("stream: no redis-server on PATH".into());
    };
    let (_redis, url) = start_redis(&binary)?;
    // `all`'s report runs half the messages; --quick a twentieth.
    let scale = |full: u64| (full / opts.divisor(20, 2)).max(1);
    let row_on = |name: &str| {
        args.rows
            .as_ref()
            .is_none_or(|r| r.iter().any(|x| x == name))
    };
    let sleep_keys = if row_on("sleep") {
        // --quick (a smoke run): one key and many.
        let all: &[u64] = if opts.quick { &QUICK_KEYS } else { &KEYS };
        args.keys.as_deref().unwrap_or(all)
    } else {
        &[]
    };
    for &keys in sleep_keys {
        let messages = args
            .messages
            .unwrap_or_else(|| scale(if keys < 10 { 400 } else { 1_000 }));
        emit(&sleep_row(
            &url,
            Row::filled(messages, keys, MAX_WORK),
            opts,
        )?);
    }
    if row_on("zero") {
        let zero = Row::filled(scale(60_000), FLAT_KEYS, Duration::ZERO);
        emit(&zero_row(&url, zero, opts)?);
    }
    if row_on("open") {
        let open = Row {
            period: Some(Duration::from_nanos(1_000_000_000 / RATE)),
            ..Row::filled(scale(3 * RATE / 2), FLAT_KEYS, Duration::ZERO)
        };
        emit(&open_row(&url, open, opts)?);
    }
    if row_on("io") {
        io::rows(&args.io, &url, opts, emit)?;
    }
    Ok(())
}

/// Each system's figures, in run order (the warm-up run first).
type Collected = Arc<Mutex<Vec<(&'static str, Figures)>>>;

fn contender<S: StreamSystem>(
    url: &str,
    row: Row,
    timeout: Duration,
    collected: &Collected,
) -> Contender<'static> {
    let (url, collected) = (url.to_owned(), Arc::clone(collected));
    Contender::new(S::NAME, move || {
        let (elapsed, figures) = run_once::<S>(&url, row, timeout)?;
        collected
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((S::NAME, figures));
        Ok(elapsed)
    })
}

/// A topic no earlier run used (each run starts from an empty stream and a new group).
fn fresh_topic() -> Result<Topic, String> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static RUNS: AtomicU64 = AtomicU64::new(0);
    let n = RUNS.fetch_add(1, Ordering::Relaxed);
    Topic::new(format!("run{n}"), SHARDS)
        .map(|t| t.namespace("bench"))
        .map_err(|e| e.to_string())
}

/// Commands Redis has run so far (`INFO stats`).
fn commands(conn: &mut redis::Connection) -> Result<u64, String> {
    let info: String = redis::cmd("INFO")
        .arg("stats")
        .query(conn)
        .map_err(|e| format!("INFO stats: {e}"))?;
    info.lines()
        .find_map(|l| l.strip_prefix("total_commands_processed:"))
        .and_then(|n| n.trim().parse().ok())
        .ok_or_else(|| "INFO stats without total_commands_processed".to_string())
}

/// Appends messages `range` of `run` (pipelined, 1,000 per round trip); with `sent`, records
/// each batch's append time.
fn append(
    producer: &mut Producer,
    run: &StreamRun,
    range: std::ops::Range<u64>,
    sent: bool,
) -> Result<(), String> {
    let mut from = range.start;
    while from < range.end {
        let to = (from + 1_000).min(range.end);
        if sent {
            run.sent(from..to, Instant::now());
        }
        producer
            .send_batch((from..to).map(|i| (run.key_name(i), payload_of(i))))
            .map_err(|e| format!("appending: {e}"))?;
        from = to;
    }
    Ok(())
}

/// The open-loop producer: appends each message at its slot of the schedule (every message
/// due by now in one round trip when it fell behind).
fn produce_on_schedule(
    producer: &mut Producer,
    run: &StreamRun,
    row: Row,
    start: Instant,
) -> Result<(), String> {
    let period = run.due_ns(1).max(1);
    let mut next = 0;
    while next < row.messages {
        // Messages 0..due are due by now.
        let due = (start.elapsed().as_nanos() as u64 / period + 1).min(row.messages);
        if due > next {
            append(producer, run, next..due, true)?;
            next = due;
        } else {
            let wait = run
                .due(start, next)
                .saturating_duration_since(Instant::now());
            std::thread::sleep(wait);
        }
    }
    Ok(())
}

/// One timed run of system `S` over `row`: its time (to the last acknowledgement) and figures.
fn run_once<S: StreamSystem>(
    url: &str,
    row: Row,
    timeout: Duration,
) -> Result<(Duration, Figures), String> {
    let topic = fresh_topic()?;
    let run = Arc::new(row.run(S::ORDERED));
    let mut admin = connect(url)?;
    let mut producer = Producer::connect(url, topic.clone()).map_err(|e| e.to_string())?;
    let open = row.period.is_some() || row.burst;
    if !open {
        append(&mut producer, &run, 0..row.messages, false)?;
    }
    let mut system = S::setup(url, &topic, Arc::clone(&run))?;
    if open {
        system.start()?;
        system.wait_consuming()?;
    }
    ready_step();
    let before = commands(&mut admin)?;
    let clock = Stopwatch::start();
    run.started(clock.started());
    let fed = if row.burst {
        append(&mut producer, &run, 0..row.messages, true)
    } else if open {
        produce_on_schedule(&mut producer, &run, row, clock.started())
    } else {
        system.start()
    };
    let timed = fed.and_then(|()| run.done.wait_since(clock.started(), timeout));
    clock.stop();
    threads::sample_now();
    let elapsed = match timed {
        Ok(elapsed) => elapsed,
        Err(e) => {
            std::mem::forget(system); // a stuck system may never stop
            return Err(e);
        }
    };
    // The INFO before the clock counts as one; the open loop's appends are the producer's.
    let produced = if open { row.messages } else { 0 };
    let used = commands(&mut admin)?.saturating_sub(before + 1 + produced);
    system.teardown()?;
    run.verify()?;
    let _: () = redis::cmd("FLUSHALL")
        .query(&mut admin)
        .map_err(|e| format!("FLUSHALL: {e}"))?;
    let ms = |h: &Histogram<u64>, q: f64| h.value_at_quantile(q) as f64 / 1_000.0;
    let (late, delivery) = run.split_latencies_us();
    // A burst's latencies count from the append.
    let total = histogram(if row.burst {
        delivery.clone()
    } else {
        run.latencies_us()
    })?;
    let (late, delivery) = (histogram(late)?, histogram(delivery)?);
    Ok((
        elapsed,
        Figures {
            p50_ms: ms(&total, 0.5),
            p99_ms: ms(&total, 0.99),
            p999_ms: ms(&total, 0.999),
            late_p999_ms: ms(&late, 0.999),
            delivery_p999_ms: ms(&delivery, 0.999),
            commands_per_message: used as f64 / row.messages as f64,
        },
    ))
}

/// A histogram of latencies in microseconds (1 µs to an hour, 3 significant digits).
fn histogram(us: Vec<u64>) -> Result<Histogram<u64>, String> {
    let mut h = Histogram::<u64>::new_with_bounds(1, 3_600_000_000, 3)
        .map_err(|e| format!("a latency histogram: {e}"))?;
    for v in us {
        h.saturating_record(v);
    }
    Ok(h)
}

/// The median of each figure over a system's counted runs (its warm-up run left out).
fn medians(collected: &Collected, system: &str) -> Option<Figures> {
    let all = collected.lock().unwrap_or_else(|e| e.into_inner());
    let runs: Vec<Figures> = all
        .iter()
        .filter(|(name, _)| *name == system)
        .skip(1)
        .map(|(_, f)| *f)
        .collect();
    if runs.is_empty() {
        return None;
    }
    let of = |f: fn(&Figures) -> f64| median(&runs.iter().map(f).collect::<Vec<_>>());
    Some(Figures {
        p50_ms: of(|f| f.p50_ms),
        p99_ms: of(|f| f.p99_ms),
        p999_ms: of(|f| f.p999_ms),
        late_p999_ms: of(|f| f.late_p999_ms),
        delivery_p999_ms: of(|f| f.delivery_p999_ms),
        commands_per_message: of(|f| f.commands_per_message),
    })
}

/// Measures `contenders` over `row` and builds the report: the standard rows, and per system
/// the efficiency against its floor (`floor_s` gives it, if any), latencies and commands per
/// message in the title and the parameters.
fn report(
    what: &str,
    row: Row,
    floor_s: Option<&dyn Fn(&str) -> f64>,
    mut contenders: Vec<Contender<'static>>,
    collected: &Collected,
    opts: &RunOptions,
) -> Result<VariantReport, String> {
    let label = format!("stream {what}");
    let results = measure(
        &label,
        opts.runs,
        row.messages,
        &mut contenders,
        &opts.progress,
    )?;
    let open = row.period.is_some();
    let rate = row.period.map(|p| (1.0 / p.as_secs_f64()).round() as u64);
    let mut title = format!(
        "{what}: {} messages over {} keys in {SHARDS} shards, {}",
        row.messages,
        row.keys,
        if let Some(rate) = rate {
            format!("appended at {rate} msg/s while consumed (zero work)")
        } else if row.max_work.is_zero() {
            "filled before the start, zero work".to_string()
        } else {
            format!(
                "filled before the start, sleep U(0, {} ms) each",
                row.max_work.as_millis()
            )
        }
    );
    if let Some(floor) = floor_s {
        title.push_str(&format!(
            "; floor {:.3} s (work / min({THREADS} threads, keys); without key order {:.3} s)",
            floor(KeywayOrdered::NAME),
            floor(KeywayUnordered::NAME)
        ));
    }
    title.push_str(" — to the last ack, median:");
    let mut systems = Map::new();
    for r in &results {
        let Some(f) = medians(collected, r.system) else {
            continue;
        };
        let efficiency = floor_s.map(|floor| floor(r.system) / r.median_s);
        title.push_str(&format!("\n    {:<20}", r.system));
        if let Some(e) = efficiency {
            title.push_str(&format!(" efficiency {:>5.1}%", e * 100.0));
        }
        title.push_str(&format!(
            " end-to-end p50 {:.3} ms, p99 {:.3} ms",
            f.p50_ms, f.p99_ms
        ));
        if open {
            title.push_str(&format!(
                ", p99.9 {:.3} ms (producer late p99.9 {:.3} ms, send to handled p99.9 {:.3} ms)",
                f.p999_ms, f.late_p999_ms, f.delivery_p999_ms
            ));
        }
        title.push_str(&format!(
            ", {:.4} Redis commands/msg",
            f.commands_per_message
        ));
        systems.insert(
            r.system.to_string(),
            json!({
                "efficiency": efficiency,
                "p50_ms": f.p50_ms,
                "p99_ms": f.p99_ms,
                "p999_ms": f.p999_ms,
                "producer_late_p999_ms": open.then_some(f.late_p999_ms),
                "delivery_p999_ms": open.then_some(f.delivery_p999_ms),
                "commands_per_message": f.commands_per_message,
            }),
        );
    }
    let mut params = Map::new();
    params.insert("variant".into(), json!(what));
    params.insert("messages".into(), json!(row.messages));
    params.insert("keys".into(), json!(row.keys));
    params.insert("shards".into(), json!(SHARDS));
    params.insert(
        "max_work_ms".into(),
        json!(row.max_work.as_secs_f64() * 1e3),
    );
    params.insert("rate".into(), json!(rate));
    params.insert("threads".into(), json!(THREADS));
    params.insert(
        "floor_s".into(),
        json!(floor_s.map(|f| f(KeywayOrdered::NAME))),
    );
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

fn sleep_row(url: &str, row: Row, opts: &RunOptions) -> Result<VariantReport, String> {
    let collected = Collected::default();
    let t = opts.timeout;
    let contenders = vec![
        contender::<Naive>(url, row, t, &collected),
        contender::<PerShard>(url, row, t, &collected),
        contender::<KeywayOrdered>(url, row, t, &collected),
        contender::<KeywayUnordered>(url, row, t, &collected),
    ];
    let work = row.run(false).total_work().as_secs_f64();
    let floor = |system: &str| {
        let lanes = if system == KeywayUnordered::NAME {
            THREADS as u64
        } else {
            row.keys.min(THREADS as u64)
        };
        work / lanes as f64
    };
    let what = format!("{} keys", row.keys);
    report(&what, row, Some(&floor), contenders, &collected, opts)
}

fn zero_row(url: &str, row: Row, opts: &RunOptions) -> Result<VariantReport, String> {
    let collected = Collected::default();
    let t = opts.timeout;
    let contenders = vec![
        contender::<Raw>(url, row, t, &collected),
        contender::<PerShard>(url, row, t, &collected),
        contender::<KeywayOrdered>(url, row, t, &collected),
        contender::<KeywayUnordered>(url, row, t, &collected),
    ];
    report("zero work", row, None, contenders, &collected, opts)
}

fn open_row(url: &str, row: Row, opts: &RunOptions) -> Result<VariantReport, String> {
    let collected = Collected::default();
    let t = opts.timeout;
    let contenders = vec![
        contender::<Floor>(url, row, t, &collected),
        contender::<Raw>(url, row, t, &collected),
        contender::<KeywayOrdered>(url, row, t, &collected),
    ];
    report("open loop", row, None, contenders, &collected, opts)
}

#[cfg(test)]
pub(super) mod tests {
    use super::super::{assert_every_system_ready, test_options};
    use super::*;

    /// A `redis-server` of the test's own, or `None` (the test is skipped, unless
    /// `KEYWAY_REQUIRE_REDIS=1`, which makes it fail).
    pub(super) fn redis() -> Option<(super::super::distributed::OwnRedis, String)> {
        let Some(binary) = redis_server() else {
            assert!(
                std::env::var("KEYWAY_REQUIRE_REDIS").as_deref() != Ok("1"),
                "KEYWAY_REQUIRE_REDIS=1 but no redis-server on PATH"
            );
            eprintln!("NOTE: no redis-server on PATH: the stream scenario test is skipped");
            return None;
        };
        Some(start_redis(&binary).unwrap())
    }

    /// Every system of every row consumes a small stream (each message once, each key in
    /// order where promised) through the harness, and each row reports its figures.
    #[test]
    fn every_row_runs_every_system() {
        let Some((_redis, url)) = redis() else {
            return;
        };
        let opts = test_options();
        let sleep = Row::filled(40, 10, Duration::from_millis(1));
        let report = sleep_row(&url, sleep, &opts).unwrap();
        assert_every_system_ready(
            &report,
            &["naive", "consumer-per-shard", "keyway", "keyway-unordered"],
        );
        for (name, figures) in report.params["systems"].as_object().unwrap() {
            let efficiency = figures["efficiency"].as_f64().unwrap();
            assert!(
                efficiency > 0.0 && efficiency <= 1.0,
                "{name}: {efficiency}"
            );
            assert!(figures["commands_per_message"].as_f64().unwrap() > 0.0);
        }
        let zero = Row {
            messages: 500,
            max_work: Duration::ZERO,
            ..sleep
        };
        let report = zero_row(&url, zero, &opts).unwrap();
        assert_every_system_ready(
            &report,
            &["raw", "consumer-per-shard", "keyway", "keyway-unordered"],
        );
        let open = Row {
            messages: 200,
            period: Some(Duration::from_micros(500)),
            ..zero
        };
        let report = open_row(&url, open, &opts).unwrap();
        assert_every_system_ready(&report, &["floor", "raw", "keyway"]);
        assert!(report.title.contains("p99.9"), "{}", report.title);
    }
}
