//! `distributed`: K processes of this very binary (the hidden `distributed-child` command)
//! share a global limit G through one Redis: each runs a keyway `Scheduler` whose executor has
//! the limit G and a `RedisCoordinator`, so it runs its share, spread evenly over each interval.
//! One is killed half way. Reported: the aggregate per-second deviation from G in steady state,
//! and the seconds until the survivors carry G again. Every task a child scheduled is checked to
//! have run exactly once or to have come back at the end.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clap::Args;
use keyway::{Coordinator, ExecutorConfig, Pool, Scheduler, Timing};
use keyway_redis::RedisCoordinator;
use serde_json::{json, Map};

use super::Emit;
use crate::harness::options::RunOptions;
use crate::harness::{SystemResult, VariantReport};

/// The executor every child joins.
const EXECUTOR: &str = "bench";
/// Children heartbeat every 250 ms and count as dead after 1 s without one.
const HEARTBEAT: Duration = Duration::from_millis(250);
const TTL: Duration = Duration::from_secs(1);
/// The target: aggregate within 3% of G.
const TOLERANCE: f64 = 0.03;

/// The `distributed` knobs.
#[derive(Debug, Clone, Default, Args)]
pub struct DistributedArgs {
    /// Processes sharing the limit (default 3; one is killed half way).
    #[arg(long, value_parser = clap::value_parser!(u64).range(2..=64))]
    pub processes: Option<u64>,
    /// A Redis to use instead of starting a `redis-server` on a free port.
    #[arg(long)]
    pub redis: Option<String>,
    /// The global limit G in tasks per second (default 3,000).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub limit: Option<u64>,
    /// Seconds each process runs (default 20, or 8 with --quick).
    #[arg(long, value_parser = clap::value_parser!(u64).range(4..=3_600))]
    pub seconds: Option<u64>,
}

/// The hidden child command's arguments.
#[derive(Debug, Clone, Args)]
pub struct ChildArgs {
    #[arg(long)]
    redis: String,
    #[arg(long)]
    namespace: String,
    #[arg(long)]
    limit: u64,
    #[arg(long)]
    seconds: u64,
}

/// Seconds since the Unix epoch (all children are on this machine: one clock).
fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// The child's rate driver: a keyway [`Scheduler`] whose executor has the global limit
/// `limit` and whose `coordinator` gives this process its share of it. The executor is kept
/// saturated (the whole run's worth of the global limit is due at once), so what runs each
/// second is exactly what the scheduler admits under this process's share. Hands `report` each
/// whole Unix second and how many tasks ran in it. At the end, the tasks not yet released are
/// taken back (`shutdown_now`) and the run fails unless every scheduled task either ran exactly
/// once or came back.
pub fn drive(
    coordinator: impl Coordinator,
    limit: f64,
    pool: &Pool,
    intervals: u64,
    mut report: impl FnMut(u64, u64),
) -> Result<(), String> {
    let scheduler = Scheduler::builder(pool)
        .interval(Duration::from_secs(1))
        .executor(EXECUTOR, ExecutorConfig::with_tps(limit))
        .coordinator(coordinator)
        .build()
        .map_err(|e| format!("building the scheduler: {e}"))?;
    let first = unix_now().floor() as u64 + 1;
    // One counter per whole second of the run, plus one each side for stragglers.
    let per_second: Arc<[AtomicU64]> = (0..intervals + 2).map(|_| AtomicU64::new(0)).collect();
    let ran_total = Arc::new(AtomicU64::new(0));
    let scheduled = (limit.ceil() as u64).saturating_mul(intervals + 1);
    for _ in 0..scheduled {
        let (per_second, total) = (Arc::clone(&per_second), Arc::clone(&ran_total));
        scheduler
            .execute_with(EXECUTOR, Timing::after(Duration::ZERO), move || {
                std::hint::black_box(crate::work::spin(100));
                let second = (unix_now().floor() as u64 + 1).saturating_sub(first);
                per_second[(second as usize).min(per_second.len() - 1)]
                    .fetch_add(1, Ordering::AcqRel);
                total.fetch_add(1, Ordering::AcqRel);
            })
            .map_err(|e| format!("a task was refused: {e}"))?;
    }
    let start = Instant::now() + Duration::from_secs_f64((first as f64 - unix_now()).max(0.0));
    for k in 1..=intervals {
        // Second k-1 of the run is over once second k has begun.
        let end = start + Duration::from_secs(k);
        std::thread::sleep(end.saturating_duration_since(Instant::now()));
        report(
            first + k - 1,
            per_second[k as usize].load(Ordering::Acquire),
        );
    }
    let handed_back = scheduler.shutdown_now().len() as u64;
    drop(scheduler); // leaves the executor's group in Redis at once
    pool.shutdown();
    let ran = ran_total.load(Ordering::Acquire);
    if ran + handed_back != scheduled {
        return Err(format!(
            "{scheduled} tasks scheduled but {ran} ran and {handed_back} came back"
        ));
    }
    Ok(())
}

/// The hidden `distributed-child` command: joins, drives, prints `second=S ran=N` lines.
pub fn child(args: &ChildArgs) -> Result<(), String> {
    let coordinator = RedisCoordinator::builder(&args.redis)
        .namespace(&args.namespace)
        .heartbeat(HEARTBEAT)
        .ttl(TTL)
        .build()
        .map_err(|e| e.to_string())?;
    let limit = args.limit as f64;
    let pool = Pool::new().map_err(|e| e.to_string())?;
    println!("ready");
    drive(coordinator, limit, &pool, args.seconds, |second, ran| {
        println!("second={second} ran={ran}");
    })
}

/// A `redis-server` this command started; killed when dropped (also used by `stream`).
pub struct OwnRedis(Child);

impl Drop for OwnRedis {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `redis-server` on `PATH`, if any.
pub fn redis_server() -> Option<std::path::PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join("redis-server"))
        .find(|p| p.is_file())
}

/// Starts a `redis-server` on a free loopback port; waits until it answers.
pub fn start_redis(binary: &std::path::Path) -> Result<(OwnRedis, String), String> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| format!("no free port: {e}"))?
        .port();
    let child = Command::new(binary)
        .args([
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
        ])
        .args(["--appendonly", "no"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start redis-server: {e}"))?;
    let own = OwnRedis(child);
    let url = format!("redis://127.0.0.1:{port}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if Instant::now() > deadline {
            return Err("redis-server did not start listening within 10 s".into());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok((own, url))
}

/// Runs the scenario; without `--redis` and without a `redis-server`, `all` skips it (and says
/// so) while `distributed` alone fails.
pub fn run(
    args: &DistributedArgs,
    opts: &RunOptions,
    emit: &mut Emit<'_>,
    in_all: bool,
) -> Result<(), String> {
    let _own;
    let url = match &args.redis {
        Some(url) => url.clone(),
        None => match redis_server() {
            Some(binary) => {
                let (own, url) = start_redis(&binary)?;
                _own = own;
                url
            }
            None if in_all => {
                eprintln!("keyway-bench: distributed: skipped (no redis-server on PATH; pass `distributed --redis URL`)");
                return Ok(());
            }
            None => return Err("distributed: no redis-server on PATH; pass --redis URL".into()),
        },
    };
    let k = args.processes.unwrap_or(3) as usize;
    let limit = args.limit.unwrap_or(3_000);
    let seconds = args.seconds.unwrap_or(if opts.quick { 8 } else { 20 });
    eprintln!("keyway-bench: distributed: {k} processes × {seconds} s, G = {limit} TPS");
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let namespace = format!("keyway-bench:{}:{}", std::process::id(), unix_now());
    let (tx, rx) = mpsc::channel::<(usize, String)>();
    let mut children = Vec::with_capacity(k);
    for i in 0..k {
        let mut child = Command::new(&exe)
            .args([
                "distributed-child",
                "--redis",
                &url,
                "--namespace",
                &namespace,
            ])
            .args([
                "--limit",
                &limit.to_string(),
                "--seconds",
                &seconds.to_string(),
            ])
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start a child: {e}"))?;
        let out = child.stdout.take().ok_or("no child stdout")?;
        let tx = tx.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send((i, line)).is_err() {
                    return;
                }
            }
        });
        children.push(child);
    }
    drop(tx);
    // Kill the first child half way through its run.
    std::thread::sleep(Duration::from_secs(seconds / 2 + 1));
    let killed_at = unix_now();
    children[0]
        .kill()
        .map_err(|e| format!("cannot kill a child: {e}"))?;
    let mut failed = None;
    for (i, child) in children.iter_mut().enumerate() {
        let status = child.wait().map_err(|e| e.to_string())?;
        if i > 0 && !status.success() {
            failed = Some(format!("child {i} failed: {status}"));
        }
    }
    let mut per_child: Vec<BTreeMap<u64, u64>> = vec![BTreeMap::new(); k];
    for (i, line) in rx {
        let parsed = line
            .strip_prefix("second=")
            .and_then(|rest| rest.split_once(" ran="))
            .and_then(|(s, n)| Some((s.parse().ok()?, n.parse().ok()?)));
        if let Some((second, ran)) = parsed {
            per_child[i].insert(second, ran);
        }
    }
    if let Some(e) = failed {
        return Err(e);
    }
    emit(&summarise(&per_child, limit as f64, killed_at, k, seconds)?);
    Ok(())
}

/// Aggregates the children's per-second counts into the report.
fn summarise(
    per_child: &[BTreeMap<u64, u64>],
    g: f64,
    killed_at: f64,
    k: usize,
    seconds: u64,
) -> Result<VariantReport, String> {
    let survivors = &per_child[1..];
    // Seconds every survivor reported (each ran its whole run), from the first second in
    // which every process ran tasks (before that: the cold start).
    let first = per_child
        .iter()
        .map(|c| c.iter().find(|(_, &n)| n > 0).map(|(&s, _)| s))
        .collect::<Option<Vec<_>>>()
        .and_then(|v| v.into_iter().max())
        .ok_or("a process never ran a task")?;
    let last = survivors
        .iter()
        .map(|c| c.keys().next_back().copied())
        .collect::<Option<Vec<_>>>()
        .and_then(|v| v.into_iter().min())
        .ok_or("a survivor reported nothing")?;
    let kill_second = killed_at.floor() as u64;
    let aggregate = |s: u64| per_child.iter().filter_map(|c| c.get(&s)).sum::<u64>() as f64;
    let dev = |s: u64| (aggregate(s) - g) / g;
    let series: Vec<(u64, f64)> = (first..=last).map(|s| (s, aggregate(s))).collect();
    eprintln!(
        "keyway-bench: distributed: aggregate per second (kill in second {}): {:?}",
        kill_second - first,
        series.iter().map(|&(_, a)| a).collect::<Vec<_>>()
    );
    // Recovery: the first whole second after the kill from which on the aggregate stays
    // within the tolerance.
    let recovered = (kill_second + 1..=last)
        .find(|&s| (s..=last).all(|t| dev(t).abs() <= TOLERANCE))
        .ok_or("the survivors never carried G again")?;
    let recovery_s = recovered as f64 - killed_at;
    let steady: Vec<f64> = (first + 1..kill_second)
        .chain(recovered..=last)
        .map(|s| dev(s).abs() * 100.0)
        .collect();
    if steady.is_empty() {
        return Err("no steady-state second: run longer (--seconds)".into());
    }
    let max_dev = steady.iter().cloned().fold(0.0, f64::max);
    let mut sorted = steady.clone();
    sorted.sort_by(f64::total_cmp);
    let median_dev = sorted[sorted.len() / 2];
    let mut params = Map::new();
    params.insert("processes".into(), json!(k));
    params.insert("limit".into(), json!(g));
    params.insert("seconds".into(), json!(seconds));
    params.insert("steady_seconds".into(), json!(steady.len()));
    params.insert("steady_max_deviation_pct".into(), json!(max_dev));
    params.insert("steady_median_deviation_pct".into(), json!(median_dev));
    params.insert("recovery_s".into(), json!(recovery_s));
    params.insert(
        "aggregate_per_second".into(),
        json!(series.iter().map(|&(_, a)| a).collect::<Vec<_>>()),
    );
    let steady_tps: Vec<f64> = (first + 1..kill_second)
        .chain(recovered..=last)
        .map(aggregate)
        .collect();
    let mut result = SystemResult::from_times("keyway", &[1.0], 0, 0);
    let mut tps = steady_tps;
    tps.sort_by(f64::total_cmp);
    result.ops_per_s = tps[tps.len() / 2];
    Ok(VariantReport {
        scenario: "distributed",
        title: format!(
            "{k} processes, G = {g} TPS, one killed half way: steady-state deviation from G max {max_dev:.2}% (median {median_dev:.2}%) over {} s; survivors carry G again {recovery_s:.2} s after the kill (ops/s: median aggregate TPS)",
            steady.len()
        ),
        params,
        results: vec![result],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Per-second counts of one child from second `from`.
    fn counts(from: u64, ran: &[u64]) -> BTreeMap<u64, u64> {
        ran.iter()
            .enumerate()
            .map(|(i, &n)| (from + i as u64, n))
            .collect()
    }

    fn param(report: &VariantReport, name: &str) -> f64 {
        report.params[name].as_f64().unwrap()
    }

    #[test]
    fn deviation_and_recovery_are_measured() {
        // Three processes from second 100; the first killed at 104.5; the survivors take over
        // from second 106; one second of steady state is 3% off.
        let children = [
            counts(100, &[0, 1000, 1000, 1000, 1000]),
            counts(100, &[0, 1000, 1000, 1000, 1000, 1000, 1500, 1500, 1455]),
            counts(100, &[0, 1000, 1000, 1000, 1000, 1000, 1500, 1500, 1500]),
        ];
        let report = summarise(&children, 3000.0, 104.5, 3, 9).unwrap();
        assert_eq!(param(&report, "recovery_s"), 1.5);
        assert_eq!(param(&report, "steady_max_deviation_pct"), 1.5);
        // Seconds 102, 103 before the kill; 106, 107, 108 after.
        assert_eq!(param(&report, "steady_seconds"), 5.0);
        assert_eq!(report.results[0].ops_per_s, 3000.0);
    }

    #[test]
    fn survivors_that_never_carry_the_limit_fail() {
        let children = [
            counts(100, &[1000, 1000, 1000]),
            counts(100, &[1000, 1000, 1000, 1000, 1000, 1000]),
            counts(100, &[1000, 1000, 1000, 1000, 1000, 1000]),
        ];
        let err = summarise(&children, 3000.0, 102.5, 3, 6).unwrap_err();
        assert!(err.contains("never carried G"), "{err}");
    }

    #[test]
    fn a_process_that_never_ran_fails() {
        let children = [counts(100, &[0, 0]), counts(100, &[1000, 1000])];
        let err = summarise(&children, 2000.0, 101.5, 2, 2).unwrap_err();
        assert!(err.contains("never ran"), "{err}");
    }
}
