//! A diagnostic, not a benchmark: where keyway's open-loop submit-to-start delay comes from
//! (the open-loop tail-latency entry of `docs/experiments/README.md`).
//!
//! `cargo run --release -p keyway-bench --example latprobe -- RATE CONTEXTS WORK SECS [THREADS]`
//!
//! One producer submits RATE tasks a second for SECS seconds, round robin over CONTEXTS lanes of
//! a keyway pool of THREADS (default 2) core threads, on an open-loop schedule like
//! `keyway-bench latency`'s; each task spins WORK relaxed increments. Each task's delay from its
//! intended submit time to its start is split in two: `late`, how late the producer submitted it
//! (the producer did not get the CPU in time), and `queue`, from its submit to its start (the
//! pool's part). Then, per thread of the process: voluntary context switches (parks),
//! involuntary ones (preemptions, and `sched_yield`s that switched), and CPU time.
//!
//! `PIN=1` pins the producer to CPU 1 and every pool thread to CPU 0. RATE 0: no tasks; the
//! pool sits idle for SECS seconds and only the per-thread figures are printed (idle CPU).

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A thread's name, CPU time (ms) and voluntary and involuntary context switches.
struct ThreadFigures {
    name: String,
    cpu_ms: u64,
    voluntary: u64,
    involuntary: u64,
}

/// The task's work, as `keyway-bench`'s `spin`.
fn spin(work: u64) -> u64 {
    let local = AtomicU64::new(0);
    let local = black_box(&local);
    for _ in 0..work {
        local.fetch_add(1, Ordering::Relaxed);
    }
    local.load(Ordering::Relaxed)
}

/// Every thread's figures, from /proc/self/task (Linux; empty elsewhere).
fn threads() -> Vec<ThreadFigures> {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in dir.flatten() {
        let p = entry.path();
        let read = |f: &str| std::fs::read_to_string(p.join(f)).unwrap_or_default();
        let status = read("status");
        let field = |name: &str| {
            status
                .lines()
                .find(|l| l.starts_with(name))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
        };
        // utime and stime: fields 14 and 15 of `stat`, after the parenthesised name.
        let stat = read("stat");
        let rest = &stat[stat.rfind(')').map_or(0, |i| i + 2)..];
        let f: Vec<&str> = rest.split_whitespace().collect();
        let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        out.push(ThreadFigures {
            name: read("comm").trim().to_string(),
            cpu_ms: (ticks(11) + ticks(12)) * 10,
            voluntary: field("voluntary_ctxt_switches:"),
            involuntary: field("nonvoluntary_ctxt_switches:"),
        });
    }
    out
}

/// Prints what each thread did between `before` and now.
fn print_threads(before: &[ThreadFigures]) {
    for t in threads() {
        let b = before.iter().find(|b| b.name == t.name);
        let base = |f: fn(&ThreadFigures) -> u64| b.map_or(0, f);
        println!(
            "  {:<16} voluntary {:>8} involuntary {:>8} cpu_ms {:>6}",
            t.name,
            t.voluntary - base(|b| b.voluntary),
            t.involuntary - base(|b| b.involuntary),
            t.cpu_ms - base(|b| b.cpu_ms),
        );
    }
}

/// Pins the calling thread to `cpu`.
fn pin(cpu: usize) {
    // SAFETY: a zeroed `cpu_set_t` is a valid empty set, `CPU_SET` writes inside it, and
    // `sched_setaffinity` only reads it (its size is passed).
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// The `q` quantile of `v` (reordered).
fn quantile(v: &mut [u64], q: f64) -> u64 {
    if v.is_empty() {
        return 0;
    }
    let i = ((v.len() as f64 - 1.0) * q).round() as usize;
    *v.select_nth_unstable(i).1
}

fn arg<T: std::str::FromStr>(args: &[String], i: usize, name: &str) -> T {
    args.get(i)
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("usage: latprobe RATE CONTEXTS WORK SECS [THREADS] ({name})"))
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let rate: f64 = arg(&args, 1, "RATE");
    let contexts: usize = arg(&args, 2, "CONTEXTS");
    let work: u64 = arg(&args, 3, "WORK");
    let secs: f64 = arg(&args, 4, "SECS");
    let core: usize = if args.len() > 5 {
        arg(&args, 5, "THREADS")
    } else {
        2
    };
    let mut builder = keyway::Pool::builder().core_threads(core);
    if std::env::var("PIN").is_ok_and(|v| v == "1") {
        pin(1);
        builder = builder.on_thread_start(|| pin(0));
    }
    let pool = builder.build().expect("building the pool");
    if rate <= 0.0 {
        let before = threads();
        std::thread::sleep(Duration::from_secs_f64(secs));
        println!("idle pool, {secs} s:");
        print_threads(&before);
        pool.shutdown();
        return;
    }
    let lanes: Vec<_> = (0..contexts.max(1)).map(|c| pool.lane(c)).collect();
    let n = (rate * secs) as usize;
    let before = threads();
    let (late, queue) = run(&lanes, rate, n, work);
    pool.wait_idle();
    let queue: Vec<u64> = queue
        .iter()
        .map(|x| x.load(Ordering::Relaxed).saturating_sub(1))
        .collect();
    let total: Vec<u64> = late.iter().zip(&queue).map(|(l, q)| l + q).collect();
    println!("rate {rate}/s, {n} tasks, {contexts} contexts, work {work}, {core} threads");
    for (name, v) in [("late", &late), ("queue", &queue), ("total", &total)] {
        let mut v = v.clone();
        let us = |q: f64, v: &mut Vec<u64>| quantile(v, q) as f64 / 1e3;
        println!(
            "{name:>6} (us): p50 {:>9.1} p90 {:>9.1} p99 {:>9.1} p99.9 {:>9.1} max {:>9.1}",
            us(0.5, &mut v),
            us(0.9, &mut v),
            us(0.99, &mut v),
            us(0.999, &mut v),
            us(1.0, &mut v)
        );
    }
    print_threads(&before);
    drop(lanes);
    pool.shutdown();
}

/// The open loop: submits `n` tasks at `rate`; returns each task's lateness (ns) and its queue
/// delay (ns + 1, written when it starts).
fn run(
    lanes: &[keyway::Lane<usize>],
    rate: f64,
    n: usize,
    work: u64,
) -> (Vec<u64>, Arc<Vec<AtomicU64>>) {
    let queue: Arc<Vec<AtomicU64>> = Arc::new((0..n).map(|_| AtomicU64::new(0)).collect());
    let mut late = vec![0u64; n];
    let period = 1e9 / rate;
    let t0 = Instant::now();
    for (i, late) in late.iter_mut().enumerate() {
        let due = t0 + Duration::from_nanos((i as f64 * period) as u64);
        loop {
            let now = Instant::now();
            if now >= due {
                break;
            }
            // As `keyway-bench`'s open loop: sleep when far ahead, spin when close.
            if due - now > Duration::from_micros(200) {
                std::thread::sleep(due - now - Duration::from_micros(100));
            } else {
                std::hint::spin_loop();
            }
        }
        let submitted = Instant::now();
        *late = (submitted - due).as_nanos() as u64;
        let q = queue.clone();
        lanes[i % lanes.len()]
            .execute(move || {
                let started = Instant::now();
                black_box(spin(work));
                q[i].store(
                    (started - submitted).as_nanos() as u64 + 1,
                    Ordering::Relaxed,
                );
            })
            .expect("the pool took the task");
    }
    (late, queue)
}
