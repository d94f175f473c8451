//! The randomised fault loop: three member processes, each behind a proxy of its own, consume
//! a sharded stream while faults chosen at random by a seed hit them one after another —
//! kill -9 and restart, a pause past the lease, dropped connections, a slow network, a
//! partition whose packets arrive late, Redis losing its data, a clean stop and start —
//! sometimes on pools of a small capacity. After each seed the journal checker verifies no
//! loss, no rerun of an acknowledged entry, per-key order except replays at a new epoch,
//! bounded duplicates and an empty pending list.
//!
//! By default two seeds run (CI). `KW_FAULT_LOOP_SECS=600` runs seeds until ten minutes have
//! passed; `KW_FAULT_SEED=N` starts at seed `N`; `KW_FAULTS_PER_SEED` sets the faults per
//! seed (default 5). A failing seed is printed with the fault it was at.

use crate::common;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use common::cluster::*;
use common::journal::Rules;
use common::*;

use crate::ONE_AT_A_TIME;

/// xorshift64*: the seed decides every choice.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Self(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n.max(1)
    }

    fn millis(&mut self, from: u64, to: u64) -> Duration {
        Duration::from_millis(from + self.below(to - from + 1))
    }

    fn pick<'a>(&mut self, ids: &'a [String]) -> &'a str {
        &ids[self.below(ids.len() as u64) as usize]
    }
}

/// What one seed did.
#[derive(Debug, Default)]
struct Figures {
    faults: usize,
    messages: usize,
    starts: usize,
    duplicates: usize,
    replays: usize,
    fenced: usize,
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

#[test]
fn random_faults_over_many_seeds() {
    let _one = ONE_AT_A_TIME.lock();
    if redis_server_binary().is_none() {
        return;
    }
    let first = env_u64("KW_FAULT_SEED").unwrap_or(1);
    let budget = env_u64("KW_FAULT_LOOP_SECS").map(Duration::from_secs);
    let per_seed = env_u64("KW_FAULTS_PER_SEED").unwrap_or(5) as usize;
    let started = Instant::now();
    let mut total = Figures::default();
    let mut seeds = 0;
    for seed in first.. {
        let done = match budget {
            Some(b) => started.elapsed() >= b,
            None => seeds == 2,
        };
        if done {
            break;
        }
        let f = run_seed(seed, per_seed);
        eprintln!("seed {seed}: {f:?}");
        seeds += 1;
        total.faults += f.faults;
        total.messages += f.messages;
        total.starts += f.starts;
        total.duplicates += f.duplicates;
        total.replays += f.replays;
        total.fenced += f.fenced;
    }
    eprintln!(
        "fault loop: {seeds} seeds from {first}, {:?}, in {:?}",
        total,
        started.elapsed()
    );
}

fn run_seed(seed: u64, faults: usize) -> Figures {
    let mut rng = Rng::new(seed);
    let server = RedisServer::start().expect("redis-server");
    let mut c = Cluster::new(server, &format!("loop{seed}"));
    c.proxied = true;
    if rng.below(3) == 0 {
        c.capacity = Some(2 + rng.below(6) as usize);
    }
    for m in ["m0", "m1", "m2"] {
        c.spawn(m);
    }
    let mut seqs = HashMap::new();
    let mut feeder = Some(c.feeder(HashMap::new(), 5));
    let mut done = 0;
    for n in 0..faults {
        let_time_pass(rng.millis(200, 800));
        let ids = c.running();
        let id = rng.pick(&ids).to_owned();
        let kind = rng.below(7);
        eprintln!("seed {seed} fault {n}: kind {kind} on {id}");
        match kind {
            0 => {
                c.kill(&id);
                let_time_pass(rng.millis(0, 1_500));
                c.spawn(&id);
            }
            1 => {
                c.signal(&id, "-STOP");
                let_time_pass(LEASE + rng.millis(100, 800));
                c.signal(&id, "-CONT");
            }
            2 => {
                for _ in 0..1 + rng.below(5) {
                    c.proxy(&id).cut();
                    let_time_pass(rng.millis(20, 200));
                }
            }
            3 => {
                c.proxy(&id).delay(rng.millis(20, 400));
                let_time_pass(rng.millis(300, 2_000));
                c.proxy(&id).heal();
            }
            4 => {
                c.proxy(&id).hold();
                let_time_pass(LEASE + rng.millis(100, 1_000));
                c.proxy(&id).heal();
            }
            5 => {
                // Redis loses its data once all that was produced is consumed (what was
                // not consumed would be lost with it: not a consumer's fault).
                seqs = feeder.take().expect("feeding").stop();
                c.wait_done();
                c.server.restart();
                feeder = Some(c.feeder(seqs.clone(), 5));
            }
            _ => {
                c.stop(&id);
                let_time_pass(rng.millis(0, 800));
                c.spawn(&id);
            }
        }
        done += 1;
    }
    let produced = feeder.take().expect("feeding").stop();
    let report = c.finish(
        &produced,
        &Rules {
            allow_fenced_overlap: true,
            max_duplicates: WINDOW * SHARDS as usize * faults.max(1),
            ..Rules::default()
        },
    );
    drop(seqs);
    Figures {
        faults: done,
        messages: report.messages,
        starts: report.starts,
        duplicates: report.duplicates,
        replays: report.replays,
        fenced: report.fenced,
    }
}
