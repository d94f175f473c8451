//! The machine a report was measured on: CPU model, cores, load average
//! before and after, the CPU time other processes used while the command ran
//! (the machine's busy time from /proc/stat less this process's own), the
//! measured parallel speed-up of the `ideal` work, commit, compiler and peer
//! crate versions, and a warning when the machine is loaded or its cores do
//! not scale.
//!
//! The load average counts this command's own runnable threads too (a
//! thread-per-context row alone makes it hundreds), so it cannot tell a
//! disturbed run from a busy bench; the other processes' CPU time can.

use std::time::{Duration, Instant};

use super::usage::cpu_time;

use serde_json::{json, Value};

use crate::work::spin;

/// A 1-minute load average at or above this share of the cores counts as a
/// loaded machine.
const LOADED_SHARE: f64 = 0.25;
/// A parallel speed-up below this share of the cores counts as not scaling.
const SCALING_SHARE: f64 = 0.9;
/// Atomic increments each thread does in the speed-up measurement.
const SPEEDUP_WORK: u64 = 30_000_000;

/// Set in the environment of a child process the command starts for one
/// measurement (`curves` runs each contexts point in one): skip the parallel
/// speed-up measurement (the parent measured the machine already).
pub const CHILD_ENV: &str = "KEYWAY_BENCH_CHILD";

/// The number of worker threads pools get: the machine's available parallelism.
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The commit this program was built from, as its build script found it.
pub const BUILD_COMMIT: &str = env!("KEYWAY_BENCH_COMMIT");

/// What a report says about its machine.
#[derive(Debug, Clone)]
pub struct Environment {
    /// `model name` of /proc/cpuinfo.
    pub cpu: String,
    /// Available parallelism.
    pub cores: usize,
    /// 1, 5 and 15-minute load averages when the command started.
    pub load_before: [f64; 3],
    /// The same when it finished (set by [`Environment::finish`]).
    pub load_after: Option<[f64; 3]>,
    /// `cores` threads running the `ideal` work (atomic increments on a
    /// local atomic) did this many times the work of one thread in the same
    /// time: `cores` on a machine whose cores scale perfectly.
    pub speedup: f64,
    /// The git commit the command was built from (`-dirty`: its work tree had changes;
    /// `unknown`: not built in a git work tree), recorded when it was built.
    pub commit: String,
    /// The compiler that built the command.
    pub rustc: &'static str,
    /// Versions of the peer crates.
    pub peers: &'static str,
    /// The machine's busy CPU time and this process's own when the command
    /// started, and when.
    pub start: Option<Disturbance>,
    /// CPU seconds other processes used while the command ran, and the
    /// command's wall-clock seconds (set by [`Environment::finish`]).
    pub others: Option<(f64, f64)>,
}

/// A reading of the machine's busy CPU time and this process's own.
#[derive(Debug, Clone, Copy)]
pub struct Disturbance {
    busy: Duration,
    own: Duration,
    at: Instant,
}

impl Disturbance {
    /// Reads both clocks now; `None` without /proc/stat.
    pub fn now() -> Option<Self> {
        Some(Self {
            busy: machine_busy()?,
            own: cpu_time()?,
            at: Instant::now(),
        })
    }

    /// CPU seconds other processes used since `self` (never negative: the
    /// two clocks tick at different grains), and the seconds elapsed.
    pub fn others_since(&self) -> Option<(f64, f64)> {
        let now = Self::now()?;
        let busy = now.busy.saturating_sub(self.busy);
        let own = now.own.saturating_sub(self.own);
        Some((
            busy.saturating_sub(own).as_secs_f64(),
            now.at.duration_since(self.at).as_secs_f64(),
        ))
    }
}

/// The machine's busy CPU time so far (every CPU: user, nice, system, irq,
/// softirq and steal time of /proc/stat's `cpu` line).
fn machine_busy() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let ticks = parse_busy_ticks(&stat)?;
    // SAFETY: sysconf only reads a configuration value.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    let hz = u64::try_from(hz).ok().filter(|&h| h > 0)?;
    Some(Duration::from_nanos(
        ticks.saturating_mul(1_000_000_000 / hz.min(1_000_000_000)),
    ))
}

/// The busy ticks of /proc/stat's aggregate `cpu` line: user + nice + system +
/// irq + softirq + steal (idle and iowait left out; guest time is already in
/// user time).
pub fn parse_busy_ticks(stat: &str) -> Option<u64> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let f: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|v| v.parse().ok())
        .collect::<Option<_>>()?;
    let at = |i: usize| f.get(i).copied().unwrap_or(0);
    if f.len() < 4 {
        return None;
    }
    Some(at(0) + at(1) + at(2) + at(5) + at(6) + at(7))
}

impl Environment {
    /// Describes this machine now (takes ~0.5 s to measure the speed-up).
    pub fn measure() -> Self {
        let cores = cores();
        Self {
            cpu: cpu_model().unwrap_or_else(|| "unknown".into()),
            cores,
            load_before: load().unwrap_or([f64::NAN; 3]),
            load_after: None,
            speedup: if std::env::var_os(CHILD_ENV).is_some() {
                f64::NAN // a child of `curves`: the parent measured it
            } else {
                speedup(cores)
            },
            commit: BUILD_COMMIT.into(),
            rustc: env!("KEYWAY_BENCH_RUSTC"),
            peers: env!("KEYWAY_BENCH_PEERS"),
            start: Disturbance::now(),
            others: None,
        }
    }

    /// Records the load average at the end and the CPU time other processes
    /// used meanwhile.
    pub fn finish(&mut self) {
        self.load_after = load();
        self.others = self.start.and_then(|s| s.others_since());
    }

    /// Cores other processes kept busy on average while the command ran.
    pub fn others_cores(&self) -> Option<f64> {
        self.others.map(|(cpu, wall)| cpu / wall.max(1e-9))
    }

    /// Warning lines: a loaded machine, cores that do not scale.
    pub fn warnings(&self) -> Vec<String> {
        let mut out = Vec::new();
        let limit = LOADED_SHARE * self.cores as f64;
        if self.load_before[0] >= limit {
            out.push(format!(
                "WARNING: the machine was loaded before the run (load average {:.2} on {} \
                 cores): other work shared the CPUs, so times are noisy and ratios less sure",
                self.load_before[0], self.cores
            ));
        }
        match (self.others_cores(), self.load_after) {
            (Some(others), _) if others >= limit => out.push(format!(
                "WARNING: other processes kept {others:.2} of {} cores busy on average while \
                 the command ran: they shared the CPUs, so times are noisy and ratios less sure",
                self.cores
            )),
            // Measured and low: a high load average after the run was this command's own
            // threads, not a disturbance; the line says so in the text.
            (Some(_), _) => {}
            (None, Some(l)) if l[0] >= limit => out.push(format!(
                "WARNING: the machine was loaded after the run (load average {:.2} on {} \
                 cores): other work may have shared the CPUs",
                l[0], self.cores
            )),
            (None, _) => {}
        }
        if self.speedup < SCALING_SHARE * self.cores as f64 {
            out.push(format!(
                "WARNING: {} threads of independent work ran only {:.2}× as fast as one \
                 (a perfect machine: {}×); parallel systems cannot do better than that here",
                self.cores, self.speedup, self.cores
            ));
        }
        out
    }

    /// The human header.
    pub fn text(&self) -> String {
        let fmt = |l: [f64; 3]| format!("{:.2} {:.2} {:.2}", l[0], l[1], l[2]);
        let others = match self.others {
            Some((cpu, wall)) => format!(
                " · other processes' CPU {cpu:.1} s in {wall:.1} s ({:.2} cores; the load \
                 average counts this command's threads too)",
                cpu / wall.max(1e-9)
            ),
            None => String::new(),
        };
        let mut out = format!(
            "machine: {} · {} cores · load before {}{}{others} · ideal speed-up on {} threads \
             {:.2}×\n\
             build: commit {} · {} · {}\n",
            self.cpu,
            self.cores,
            fmt(self.load_before),
            self.load_after
                .map_or_else(String::new, |l| format!(" · after {}", fmt(l))),
            self.cores,
            self.speedup,
            self.commit,
            self.rustc,
            self.peers,
        );
        for w in self.warnings() {
            out.push_str(&w);
            out.push('\n');
        }
        out
    }

    /// The JSON object (one line of `--json` output, under `"environment"`).
    pub fn to_json(&self) -> Value {
        json!({
            "cpu": self.cpu,
            "cores": self.cores,
            "load_before": self.load_before,
            "load_after": self.load_after,
            "others_cpu_s": self.others.map(|o| o.0),
            "wall_s": self.others.map(|o| o.1),
            "ideal_speedup": self.speedup,
            "commit": self.commit,
            "rustc": self.rustc,
            "peers": self.peers,
            "warnings": self.warnings(),
        })
    }
}

fn cpu_model() -> Option<String> {
    let info = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    info.lines()
        .find_map(|l| l.strip_prefix("model name"))
        .map(|l| l.trim_start_matches([' ', '\t', ':']).trim().to_string())
}

fn load() -> Option<[f64; 3]> {
    parse_loadavg(&std::fs::read_to_string("/proc/loadavg").ok()?)
}

/// The three load averages of a /proc/loadavg line.
pub fn parse_loadavg(text: &str) -> Option<[f64; 3]> {
    let mut it = text.split_whitespace().map(|f| f.parse::<f64>().ok());
    Some([it.next()??, it.next()??, it.next()??])
}

/// One thread's time for the work against `cores` threads doing it each
/// at once: cores × t1 / tN (the best of three tries each).
fn speedup(cores: usize) -> f64 {
    let best = |threads: usize| {
        (0..3)
            .map(|_| {
                let start = Instant::now();
                std::thread::scope(|s| {
                    for _ in 0..threads {
                        s.spawn(|| std::hint::black_box(spin(SPEEDUP_WORK)));
                    }
                });
                start.elapsed().as_secs_f64()
            })
            .fold(f64::INFINITY, f64::min)
    };
    let one = best(1);
    let all = best(cores);
    cores as f64 * one / all
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The build commit is a short hash (maybe `-dirty`) or `unknown`, never a path or an
    /// error message.
    #[test]
    fn the_build_commit_names_a_commit() {
        let hash = BUILD_COMMIT.strip_suffix("-dirty").unwrap_or(BUILD_COMMIT);
        assert!(
            BUILD_COMMIT == "unknown"
                || (hash.len() == 12 && hash.bytes().all(|b| b.is_ascii_hexdigit())),
            "{BUILD_COMMIT}"
        );
    }

    #[test]
    fn parses_loadavg() {
        assert_eq!(
            parse_loadavg("0.36 0.41 0.28 1/234 5678\n"),
            Some([0.36, 0.41, 0.28])
        );
        assert_eq!(parse_loadavg("x"), None);
    }

    fn env(load: f64, speedup: f64) -> Environment {
        Environment {
            cpu: "test cpu".into(),
            cores: 2,
            load_before: [load, 0.0, 0.0],
            load_after: Some([0.0; 3]),
            speedup,
            commit: "abc".into(),
            rustc: "rustc 1",
            peers: "tokio 1",
            start: None,
            others: None,
        }
    }

    #[test]
    fn parses_busy_ticks() {
        let stat = "cpu  100 5 50 9000 20 3 2 1 0 0\ncpu0 50 2 25 4500 10 1 1 0 0 0\n";
        assert_eq!(parse_busy_ticks(stat), Some(100 + 5 + 50 + 3 + 2 + 1));
        assert_eq!(parse_busy_ticks("cpu0 1 2 3 4\n"), None);
        assert_eq!(parse_busy_ticks("cpu  1 x 3 4\n"), None);
    }

    #[test]
    fn a_busy_bench_is_told_from_a_disturbed_one() {
        // A high load average after the run with other processes nearly idle: the
        // bench's own threads, no warning.
        let mut e = env(0.1, 1.95);
        e.load_after = Some([300.0, 0.0, 0.0]);
        e.others = Some((0.5, 100.0));
        assert!(e.warnings().is_empty(), "{:?}", e.warnings());
        assert!(e
            .text()
            .contains("other processes' CPU 0.5 s in 100.0 s (0.01 cores"));
        // Other processes kept a core busy: warned, whatever the load average.
        e.load_after = Some([0.2, 0.0, 0.0]);
        e.others = Some((100.0, 100.0));
        let w = e.warnings();
        assert_eq!(w.len(), 1);
        assert!(
            w[0].contains("other processes kept 1.00 of 2 cores"),
            "{w:?}"
        );
        // Where /proc/stat is missing, the load average after the run still warns.
        e.others = None;
        e.load_after = Some([3.0, 0.0, 0.0]);
        assert!(e.warnings()[0].contains("loaded after the run"));
    }

    #[test]
    fn others_cpu_time_is_measured_here() {
        let Some(start) = Disturbance::now() else {
            return; // no /proc/stat
        };
        let (others, wall) = start.others_since().unwrap();
        assert!(others >= 0.0 && wall >= 0.0);
    }

    #[test]
    fn warns_when_loaded_or_not_scaling() {
        assert!(env(0.1, 1.95).warnings().is_empty());
        let w = env(1.5, 1.95).warnings();
        assert_eq!(w.len(), 1);
        assert!(w[0].contains("loaded before"), "{w:?}");
        let w = env(0.1, 1.5).warnings();
        assert_eq!(w.len(), 1);
        assert!(w[0].contains("only 1.50×"), "{w:?}");
        assert!(env(0.1, 1.95).text().contains("commit abc"));
    }
}
