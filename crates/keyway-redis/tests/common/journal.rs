//! The stream tests' journal and checker. Each member (thread or process) appends one line per
//! event to a file of its own; the checker reads them all and checks the rules the consumer
//! promises (no loss, no rerun of an acked entry, per-key order).
//!
//! Lines (times are `SystemTime` ns, one clock for every process on this machine):
//! - `S key seq shard id epoch attempt t` — a handler started;
//! - `F key seq shard id epoch ok|fail|fenced t` — it ended;
//! - `R key seq shard id epoch t` — a handler was called but refused to start (the fencing
//!   sink had seen a newer epoch for the shard);
//! - `A shard epoch id t` / `X shard epoch id t` — acknowledged after success /
//!   dead-lettered (`t`: when Redis had answered).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use keyway_redis::stream::{Acked, Delivery};
use parking_lot::Mutex;

/// An append-only journal file; every line is written at once (survives a kill -9 but the
/// line being written).
pub struct Journal {
    file: Mutex<File>,
}

pub fn now_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

impl Journal {
    pub fn create(path: &Path) -> Self {
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .expect("open journal");
        Self {
            file: Mutex::new(file),
        }
    }

    fn line(&self, s: String) {
        let mut f = self.file.lock();
        f.write_all(s.as_bytes()).expect("write journal");
    }

    pub fn start(&self, d: &Delivery, seq: u64) {
        let key = String::from_utf8_lossy(&d.key);
        self.line(format!(
            "S {key} {seq} {} {} {} {} {}\n",
            d.shard,
            d.id,
            d.epoch,
            d.attempt,
            now_ns()
        ));
    }

    pub fn finish(&self, d: &Delivery, seq: u64, how: &str) {
        self.finish_at(d, seq, how, now_ns());
    }

    /// A run ended at `t` (ns), journaled later.
    pub fn finish_at(&self, d: &Delivery, seq: u64, how: &str, t: u128) {
        let key = String::from_utf8_lossy(&d.key);
        self.line(format!(
            "F {key} {seq} {} {} {} {how} {t}\n",
            d.shard, d.id, d.epoch
        ));
    }

    /// A handler was called but did not start: its claim on the shard was refused.
    pub fn refused(&self, d: &Delivery, seq: u64) {
        let key = String::from_utf8_lossy(&d.key);
        self.line(format!(
            "R {key} {seq} {} {} {} {}\n",
            d.shard,
            d.id,
            d.epoch,
            now_ns()
        ));
    }

    pub fn acked(&self, a: &Acked) {
        let t = now_ns();
        let mut s = String::new();
        for id in &a.succeeded {
            s += &format!("A {} {} {id} {t}\n", a.shard, a.epoch);
        }
        for id in &a.dead_lettered {
            s += &format!("X {} {} {id} {t}\n", a.shard, a.epoch);
        }
        self.line(s);
    }
}

#[derive(Debug, Clone)]
struct Run {
    file: usize,
    key: String,
    seq: u64,
    shard: u32,
    id: String,
    epoch: u64,
    start: u128,
    end: Option<(u128, String)>,
}

/// What the checker found (beyond the rules it asserts).
#[derive(Debug, Default)]
pub struct Report {
    pub messages: usize,
    pub starts: usize,
    /// Messages that succeeded more than once.
    pub duplicates: usize,
    /// Starts of an earlier entry of a key after a later one, at a new epoch (allowed after a
    /// takeover).
    pub replays: usize,
    pub dead_lettered: HashSet<(String, u64)>,
    pub fenced: usize,
    /// Handlers that did not start: a newer epoch had claimed their shard.
    pub refused_starts: usize,
    /// Per shard: the epochs seen.
    pub epochs: BTreeMap<u32, HashSet<u64>>,
    /// Acknowledged entries checked for a rerun after their ack.
    pub reruns_checked: usize,
}

/// What the test allows.
#[derive(Debug, Clone, Default)]
pub struct Rules {
    /// Runs ended `fenced` (their sink write refused: they had no effect) may overlap other
    /// runs of the key; every other run must still start after the accepted runs before it.
    pub allow_fenced_overlap: bool,
    /// No message may succeed twice, no replay may happen (clean hand-offs only).
    pub clean: bool,
    /// The most duplicates allowed.
    pub max_duplicates: usize,
    /// `(key, seq)` expected to be dead-lettered.
    pub poison: Vec<(String, u64)>,
}

/// Reads the journals; checks: no loss, no overlap per key, starts in seq order per key
/// except replays at a new epoch, every ack after a success (or a dead letter), duplicates
/// within bounds.
pub fn check(journals: &[PathBuf], produced: &HashMap<String, u64>, rules: &Rules) -> Report {
    let mut runs: Vec<Run> = Vec::new();
    let mut acks: Vec<(usize, char, u64, String)> = Vec::new();
    // When each entry was first acknowledged (or dead-lettered).
    let mut acked_at: HashMap<String, u128> = HashMap::new();
    let mut ok_at: HashMap<(usize, String, u64), u128> = HashMap::new();
    let mut refused_starts = 0;
    for (file, path) in journals.iter().enumerate() {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let mut open: HashMap<String, usize> = HashMap::new();
        for (lineno, line) in text.lines().enumerate() {
            let w: Vec<&str> = line.split(' ').collect();
            match (w.first().copied(), w.len()) {
                (Some("S"), 8) => {
                    let Ok(t) = w[7].parse() else { continue };
                    let run = Run {
                        file,
                        key: w[1].to_owned(),
                        seq: w[2].parse().unwrap(),
                        shard: w[3].parse().unwrap(),
                        id: format!("{}/{}", w[3], w[4]),
                        epoch: w[5].parse::<u64>().unwrap(),
                        start: t,
                        end: None,
                    };
                    open.insert(run.id.clone(), runs.len());
                    runs.push(run);
                }
                (Some("F"), 8) => {
                    let Ok(t) = w[7].parse::<u128>() else {
                        continue;
                    };
                    let id = format!("{}/{}", w[3], w[4]);
                    let i = open
                        .remove(&id)
                        .unwrap_or_else(|| panic!("{path:?}:{lineno}: finish without start"));
                    runs[i].end = Some((t, w[6].to_owned()));
                    if w[6] == "ok" {
                        ok_at.insert((file, id, runs[i].epoch), t);
                    }
                }
                (Some("R"), 7) => refused_starts += 1,
                (Some(k @ ("A" | "X")), 5) => {
                    let Ok(epoch) = w[2].parse() else { continue };
                    let Ok(t) = w[4].parse::<u128>() else {
                        continue;
                    };
                    let c = if k == "A" { 'A' } else { 'X' };
                    let id = format!("{}/{}", w[1], w[3]);
                    let first = acked_at.entry(id.clone()).or_insert(t);
                    *first = (*first).min(t);
                    acks.push((file, c, epoch, id));
                }
                _ => {} // a line cut by a kill
            }
        }
    }
    let mut report = Report {
        messages: produced.values().map(|&n| n as usize).sum(),
        starts: runs.len(),
        refused_starts,
        ..Report::default()
    };
    let id_to_msg: HashMap<&str, (&str, u64)> = runs
        .iter()
        .map(|r| (r.id.as_str(), (r.key.as_str(), r.seq)))
        .collect();
    // Every ack follows a success in the same process at the same epoch; every dead letter
    // is an expected poison.
    for (file, c, epoch, id) in &acks {
        if *c == 'A' {
            assert!(
                ok_at.contains_key(&(*file, id.clone(), *epoch)),
                "ack of {id} at epoch {epoch} without a success before it"
            );
        } else {
            let (k, s) = id_to_msg.get(id.as_str()).copied().unwrap_or(("?", 0));
            report.dead_lettered.insert((k.to_owned(), s));
        }
    }
    for p in &rules.poison {
        assert!(
            report.dead_lettered.contains(p),
            "poison {p:?} was not dead-lettered"
        );
    }
    assert_eq!(
        report.dead_lettered.len(),
        rules.poison.len(),
        "unexpected dead letters: {:?}",
        report.dead_lettered
    );
    // No rerun of an acknowledged entry: nothing starts an entry once Redis acknowledged it.
    for r in &runs {
        if let Some(&t) = acked_at.get(&r.id) {
            assert!(
                r.start < t,
                "entry {} ({} seq {}) started again at epoch {} after it was acknowledged",
                r.id,
                r.key,
                r.seq,
                r.epoch
            );
        }
    }
    report.reruns_checked = acked_at.len();
    // No loss: every message succeeded or was dead-lettered.
    let mut successes: HashMap<(&str, u64), usize> = HashMap::new();
    for r in &runs {
        if r.end.as_ref().is_some_and(|(_, how)| how == "ok") {
            *successes.entry((r.key.as_str(), r.seq)).or_default() += 1;
        }
        report.epochs.entry(r.shard).or_default().insert(r.epoch);
        if r.end.as_ref().is_some_and(|(_, how)| how == "fenced") {
            report.fenced += 1;
        }
    }
    for (key, &n) in produced {
        for seq in 0..n {
            let done = successes.contains_key(&(key.as_str(), seq))
                || report.dead_lettered.contains(&(key.clone(), seq));
            assert!(done, "message {key}/{seq} was never processed (lost)");
        }
    }
    report.duplicates = successes.values().filter(|&&n| n > 1).count();
    // Per key: no overlap; starts in order except replays at a new epoch.
    let mut by_key: HashMap<&str, Vec<&Run>> = HashMap::new();
    for r in &runs {
        by_key.entry(r.key.as_str()).or_default().push(r);
    }
    for (key, mut rs) in by_key {
        rs.sort_by_key(|r| r.start);
        let mut busy_until: Option<(u128, &Run)> = None;
        let mut last: Option<&Run> = None;
        let mut started_below: u64 = 0; // every seq below this one has started
        for r in rs {
            if let Some((until, prev)) = busy_until {
                assert!(
                    r.start >= until,
                    "key {key}: run of seq {} (epoch {}) overlaps seq {} (epoch {}, {:?})",
                    r.seq,
                    r.epoch,
                    prev.seq,
                    prev.epoch,
                    prev.end
                );
            }
            // A fenced run had no effect: where the rules allow it, it keeps the key busy
            // for no run after it.
            let fenced = r.end.as_ref().is_some_and(|(_, h)| h == "fenced");
            if let Some((t, _)) = r
                .end
                .as_ref()
                .filter(|_| !(rules.allow_fenced_overlap && fenced))
            {
                if busy_until.is_none_or(|(u, _)| *t > u) {
                    busy_until = Some((*t, r));
                }
            }
            assert!(
                r.seq <= started_below,
                "key {key}: seq {} started before seq {started_below}",
                r.seq
            );
            if r.seq == started_below {
                started_below += 1;
            }
            if let Some(prev) = last {
                if r.seq < prev.seq {
                    assert_ne!(
                        r.epoch, prev.epoch,
                        "key {key}: seq {} restarted after seq {} at the same epoch",
                        r.seq, prev.seq
                    );
                    report.replays += 1;
                }
            }
            last = Some(r);
        }
    }
    if rules.clean {
        assert_eq!(report.duplicates, 0, "clean hand-offs ran something twice");
        assert_eq!(report.replays, 0, "clean hand-offs replayed");
    }
    assert!(
        rules.clean || report.duplicates <= rules.max_duplicates,
        "{} duplicates, more than {}",
        report.duplicates,
        rules.max_duplicates
    );
    report
}
