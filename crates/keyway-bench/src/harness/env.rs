//! The machine a report was measured on: CPU model, cores, load average
//! before and after, the measured parallel speed-up of the `ideal` work,
//! commit, compiler and peer crate versions, and a warning when the machine
//! is loaded or its cores do not scale.

use std::time::Instant;

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
    /// The git commit the command was run from, if known.
    pub commit: String,
    /// The compiler that built the command.
    pub rustc: &'static str,
    /// Versions of the peer crates.
    pub peers: &'static str,
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
            commit: commit().unwrap_or_else(|| "unknown".into()),
            rustc: env!("KEYWAY_BENCH_RUSTC"),
            peers: env!("KEYWAY_BENCH_PEERS"),
        }
    }

    /// Records the load average at the end.
    pub fn finish(&mut self) {
        self.load_after = load();
    }

    /// Warning lines: a loaded machine, cores that do not scale.
    pub fn warnings(&self) -> Vec<String> {
        let mut out = Vec::new();
        let limit = LOADED_SHARE * self.cores as f64;
        for (when, l) in [
            ("before", Some(self.load_before)),
            ("after", self.load_after),
        ] {
            if let Some(l) = l.filter(|l| l[0] >= limit) {
                out.push(format!(
                    "WARNING: the machine was loaded {when} the run (load average {:.2} on {} \
                     cores): other work shared the CPUs, so times are noisy and ratios less sure",
                    l[0], self.cores
                ));
            }
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
        let mut out = format!(
            "machine: {} · {} cores · load before {}{} · ideal speed-up on {} threads {:.2}×\n\
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

fn commit() -> Option<String> {
    let out = std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()?;
    let hash = String::from_utf8(out.stdout).ok()?.trim().to_string();
    let dirty = std::process::Command::new("git")
        .args(["status", "--porcelain", "--untracked-files=no"])
        .output()
        .ok()
        .is_some_and(|o| !o.stdout.is_empty());
    (out.status.success() && !hash.is_empty()).then(|| {
        if dirty {
            format!("{hash}-dirty")
        } else {
            hash
        }
    })
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
        }
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
