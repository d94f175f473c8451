//! The stream consumer under faults, with separate member processes. Each member journals every start, finish and ack; the checker then
//! verifies no loss, no overlap and per-key order (replays only at a new epoch after a
//! takeover), acks only after success or dead letter, an empty pending list, and bounded
//! duplicates.

use crate::common;

use std::collections::HashMap;
use std::time::Duration;

use common::cluster::*;
use common::journal::Rules;
use common::*;

use crate::ONE_AT_A_TIME;

fn cluster(name: &str, server: RedisServer, members: &[&str]) -> Cluster {
    let mut c = Cluster::new(server, name);
    for m in members {
        c.spawn(m);
    }
    c
}

/// kill -9 of one of three members mid-batch: its shards are taken over, their pending
/// entries replayed in order; duplicates stay within a window per victim shard.
#[test]
fn kill_9_a_member_mid_batch() {
    let _one = ONE_AT_A_TIME.lock();
    let Some(server) = RedisServer::start() else {
        return;
    };
    let mut c = cluster("kill9", server, &["m0", "m1", "m2"]);
    let feeder = c.feeder(HashMap::new(), 10);
    c.wait_starts("m1", 100);
    let victim_shards = c.shards_of("m1");
    let killed_at = common::journal::now_ns();
    c.kill("m1");
    let resumed = resumed_after(&c, &["m0", "m2"], &victim_shards, killed_at);
    let produced = feeder.stop();
    let report = c.finish(
        &produced,
        &Rules {
            max_duplicates: WINDOW * victim_shards.len(),
            ..Rules::default()
        },
    );
    eprintln!("kill -9: processing of the victim's shards resumed {resumed:?} after the kill (lease {LEASE:?})");
    assert!(
        c.total("takeovers") >= 1,
        "the victim's shards were taken over"
    );
    assert!(report.duplicates <= WINDOW * victim_shards.len());
}

/// How long after `since` (ns) another member started a handler on one of `shards`.
fn resumed_after(
    c: &Cluster,
    others: &[&str],
    shards: &std::collections::HashSet<u32>,
    since: u128,
) -> Duration {
    let mut first = None;
    wait_for("another member to resume the victim's shards", || {
        first = others
            .iter()
            .flat_map(|m| c.journal_lines(m))
            .filter(|l| l.starts_with("S "))
            .filter_map(|l| {
                let w: Vec<&str> = l.split(' ').collect();
                let shard: u32 = w.get(3)?.parse().ok()?;
                let t: u128 = w.get(7)?.parse().ok()?;
                (shards.contains(&shard) && t > since).then_some(t)
            })
            .min();
        first.is_some()
    });
    Duration::from_nanos(first.unwrap().saturating_sub(since) as u64)
}

/// A member killed and restarted with the same id takes its shards back and replays its own
/// pending entries first.
#[test]
fn kill_and_restart_the_same_member() {
    let _one = ONE_AT_A_TIME.lock();
    let Some(server) = RedisServer::start() else {
        return;
    };
    let mut c = cluster("restart", server, &["m0", "m1", "m2"]);
    let feeder = c.feeder(HashMap::new(), 10);
    c.wait_starts("m1", 100);
    let victim_shards = c.shards_of("m1");
    c.kill("m1");
    c.spawn("m1");
    c.wait_starts("m1", 50);
    let produced = feeder.stop();
    c.finish(
        &produced,
        &Rules {
            max_duplicates: WINDOW * victim_shards.len(),
            ..Rules::default()
        },
    );
}

/// A member paused (SIGSTOP) in the middle of a run, past its lease: its shards are taken
/// over and it finds its leases lost when it resumes (any late ack of its is refused and
/// counted); the fencing sink, which each run claims before it starts, refuses the late
/// write of the run it was paused in, so no two accepted runs of a key overlap.
#[test]
fn sigstop_a_member_past_its_lease() {
    let _one = ONE_AT_A_TIME.lock();
    let Some(server) = RedisServer::start() else {
        return;
    };
    let mut c = cluster("stopmember", server, &["m0", "m1", "m2"]);
    let feeder = c.feeder(HashMap::new(), 10);
    c.wait_starts("m1", 100);
    // The member is paused in the middle of a run: one it starts once its runs are slow.
    let slowed_at = common::journal::now_ns();
    c.slow_runs("m1", true);
    wait_for("the member to start a slow run", || {
        c.journal_lines("m1").iter().any(|l| {
            l.starts_with("S ")
                && l.rsplit(' ').next().and_then(|t| t.parse::<u128>().ok()) > Some(slowed_at)
        })
    });
    c.signal("m1", "-STOP");
    let stopped_at = common::journal::now_ns();
    c.slow_runs("m1", false);
    let victim_shards = c.shards_of("m1");
    resumed_after(&c, &["m0", "m2"], &victim_shards, stopped_at);
    let_time_pass(LEASE); // the others work on the victim's shards meanwhile
    c.signal("m1", "-CONT");
    wait_for("the run the member was paused in to end", || {
        c.journal_lines("m1").iter().any(|l| {
            l.starts_with("F ")
                && l.rsplit(' ').next().and_then(|t| t.parse::<u128>().ok()) > Some(stopped_at)
        })
    });
    let produced = feeder.stop();
    let report = c.finish(
        &produced,
        &Rules {
            allow_fenced_overlap: true,
            max_duplicates: WINDOW * victim_shards.len(),
            ..Rules::default()
        },
    );
    let m1 = c
        .stats
        .iter()
        .find(|s| s.get("lost").copied().unwrap_or(0) > 0);
    assert!(
        m1.is_some(),
        "the paused member found its leases lost: {:?}",
        c.stats
    );
    assert!(c.total("takeovers") >= 1);
    assert!(
        report.fenced >= 1,
        "the run the member was paused in was not refused by the sink"
    );
    eprintln!(
        "sigstop member: refused acks {}, fenced sink writes {}, refused starts {}",
        c.total("refused"),
        report.fenced,
        report.refused_starts
    );
}

/// A poison message is retried, then dead-lettered after max_attempts; the other keys and
/// the key's later messages go on; nothing stalls.
#[test]
fn a_poison_message_is_dead_lettered() {
    let _one = ONE_AT_A_TIME.lock();
    let Some(server) = RedisServer::start() else {
        return;
    };
    let mut c = Cluster::new(server, "poison");
    c.poison = Some((key_name(3), 5));
    c.spawn("m0");
    c.spawn("m1");
    let feeder = c.feeder(HashMap::new(), 10);
    wait_for("the poison message to be dead-lettered", || {
        c.journal_lines("m0")
            .iter()
            .chain(c.journal_lines("m1").iter())
            .any(|l| l.starts_with("X "))
    });
    let produced = feeder.stop();
    let report = c.finish(
        &produced,
        &Rules {
            poison: vec![(key_name(3), 5)],
            clean: true,
            ..Rules::default()
        },
    );
    assert_eq!(report.dead_lettered.len(), 1);
    assert_eq!(c.total("dead"), 1);
    assert_eq!(c.total("stalls"), 0);
    let mut conn = c.server.connection();
    let shard = keyway_redis::stream::shard_of(key_name(3).as_bytes(), SHARDS);
    let dead: Vec<(String, HashMap<String, String>)> = redis::cmd("XRANGE")
        .arg(c.topic().dead_letter_key(shard))
        .arg("-")
        .arg("+")
        .query(&mut conn)
        .unwrap();
    assert_eq!(dead.len(), 1, "one dead letter");
    assert_eq!(dead[0].1["k"], key_name(3));
    assert_eq!(dead[0].1["p"], "5");
    assert_eq!(dead[0].1["attempts"], "5");
}

/// Redis restarted (killed) with persistence (AOF, fsync always): nothing is lost; the
/// members carry on with their leases and pending entries.
#[test]
fn redis_restart_with_persistence_loses_nothing() {
    let _one = ONE_AT_A_TIME.lock();
    let dir = std::env::temp_dir().join(format!("keyway-redis-aof-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let dir_arg = dir.to_string_lossy().into_owned();
    let args = [
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
        "--dir",
        &dir_arg,
    ];
    let Some(server) = RedisServer::start_with(&args) else {
        return;
    };
    let mut c = cluster("aof", server, &["m0", "m1"]);
    let feeder = c.feeder(HashMap::new(), 10);
    c.wait_starts("m0", 100);
    let seqs = feeder.stop();
    c.server.restart();
    let feeder = c.feeder(seqs, 10);
    c.wait_starts("m1", c.journal_lines("m1").len() / 3 + 100);
    let produced = feeder.stop();
    c.finish(
        &produced,
        &Rules {
            max_duplicates: WINDOW * SHARDS as usize,
            ..Rules::default()
        },
    );
    assert_eq!(c.total("recreated"), 0, "the group survived the restart");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Redis restarted empty (no persistence): the members recreate their group, say so, and
/// consume what is produced after.
#[test]
fn redis_restart_without_persistence_recreates_the_group() {
    let _one = ONE_AT_A_TIME.lock();
    let Some(server) = RedisServer::start() else {
        return;
    };
    let mut c = cluster("empty", server, &["m0", "m1"]);
    let feeder = c.feeder(HashMap::new(), 10);
    c.wait_starts("m0", 100);
    let seqs = feeder.stop();
    c.wait_done(); // what Redis had is consumed; a restart now loses nothing consumed
    c.server.restart();
    let feeder = c.feeder(seqs, 10);
    c.wait_starts("m1", c.journal_lines("m1").len() / 3 + 100);
    let produced = feeder.stop();
    c.finish(&produced, &Rules::default());
    assert!(
        c.total("recreated") >= 1,
        "a member said it recreated the group: {:?}",
        c.stats
    );
}

/// Redis paused (SIGSTOP) for twice the lease, then resumed: nobody's lease expired in the
/// group's time, so no shard changes hands and nothing runs twice.
#[test]
fn sigstop_redis_for_twice_the_lease_causes_no_takeover() {
    let _one = ONE_AT_A_TIME.lock();
    let Some(server) = RedisServer::start() else {
        return;
    };
    let mut c = cluster("stopredis", server, &["m0", "m1", "m2"]);
    let feeder = c.feeder(HashMap::new(), 10);
    c.wait_starts("m0", 100);
    // The producer pauses too: a send whose reply is lost would be sent twice.
    let seqs = feeder.stop();
    c.server.pause();
    let_time_pass(LEASE * 2);
    c.server.resume();
    let feeder = c.feeder(seqs, 10);
    let seen = c.journal_lines("m2").len();
    c.wait_starts("m2", seen / 3 + 50);
    let produced = feeder.stop();
    let report = c.finish(&produced, &Rules::default());
    assert_eq!(c.total("takeovers"), 0, "no takeover storm: {:?}", c.stats);
    assert_eq!(c.total("lost"), 0, "no lease lost: {:?}", c.stats);
    assert_eq!(report.duplicates, 0);
}

/// Members join and leave (cleanly) every second or so while messages are produced: every
/// hand-off is clean, so nothing runs twice and no key ever goes back.
#[test]
fn members_joining_and_leaving_hand_off_cleanly() {
    let _one = ONE_AT_A_TIME.lock();
    let Some(server) = RedisServer::start() else {
        return;
    };
    let mut c = cluster("churn", server, &["m0", "m1"]);
    let feeder = c.feeder(HashMap::new(), 10);
    c.wait_starts("m0", 50);
    for step in ["+m2", "-m0", "+m3", "-m1", "+m0", "-m2"] {
        let_time_pass(Duration::from_millis(1_000));
        let (op, id) = step.split_at(1);
        if op == "+" {
            c.spawn(id);
        } else {
            c.stop(id);
        }
    }
    let produced = feeder.stop();
    let report = c.finish(
        &produced,
        &Rules {
            clean: true,
            ..Rules::default()
        },
    );
    assert_eq!(report.duplicates, 0);
    assert!(c.total("releases") >= 4, "shards moved: {:?}", c.stats);
    // A clean hand-off gives the delivery counts of unstarted entries back: every run is a
    // first attempt.
    for path in &c.journals {
        for line in std::fs::read_to_string(path).unwrap().lines() {
            if line.starts_with("S ") {
                assert_eq!(line.split(' ').nth(6), Some("1"), "{line}");
            }
        }
    }
}
