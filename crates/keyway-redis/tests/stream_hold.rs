//! Holding entries back, against a real `redis-server`, for sync and async handlers:
//! - the in-flight cap: handlers blocked on a latch never have more entries read from Redis
//!   and not finished (Redis's pending count) than the consumer's cap, nor a shard more than
//!   its window; reading waits in Redis meanwhile and resumes once the latch opens, and
//!   nothing is lost;
//! - quarantine: an entry of key A that exhausts its attempts holds A's later entries (not
//!   run, not acknowledged) while key B of the same shard goes on; after a release A's
//!   entries run in order, the failed one first; and the hold survives a kill -9 of the
//!   member that had it (a member process of this binary), the next owner keeping A held.

mod common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::cluster::*;
use common::journal::Journal;
use common::kinds::{self, AsyncLatch, Kind, OpenAsyncOnDrop};
use common::local::*;
use common::*;
use keyway_redis::stream::{FailurePolicy, Producer, StreamConsumer, Topic};
use parking_lot::Mutex;

/// The tests here share two cores (one of them with member processes): one at a time.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// The file, beside its journal, whose existence tells a member process that its poison
/// entry is fixed.
const FIXED: &str = "fixed";

const SHARDS: u32 = 4;
const WINDOW: usize = 10;
const CAP: usize = 25;

/// Builds a consumer of `kind` whose handler waits on a latch (a blocking one for a sync
/// handler, an awaited one for an async handler), then logs `(key, seq)`.
fn blocked_consumer(
    server: &RedisServer,
    topic: &Topic,
    pool: &keyway::Pool,
    kind: Kind,
    log: &Arc<Mutex<HashMap<Vec<u8>, Vec<u64>>>>,
) -> (StreamConsumer, Box<dyn Fn()>) {
    let b = builder(server, topic).window(WINDOW).max_in_flight(CAP);
    let seen = Arc::clone(log);
    match kind {
        Kind::Sync => {
            let latch = Arc::new(Latch::default());
            let guard = OpenOnDrop(Arc::clone(&latch));
            let l = Arc::clone(&latch);
            let c = b
                .build(pool, move |d, payload| {
                    l.wait();
                    let seq: u64 = std::str::from_utf8(payload)?.parse()?;
                    seen.lock().entry(d.key.clone()).or_default().push(seq);
                    Ok(())
                })
                .unwrap();
            (c, Box::new(move || guard.0.open()))
        }
        Kind::Async => {
            let latch = Arc::new(AsyncLatch::default());
            let guard = OpenAsyncOnDrop(Arc::clone(&latch));
            let c = b
                .build_async(pool, move |d, payload| {
                    let (l, seen) = (Arc::clone(&latch), Arc::clone(&seen));
                    async move {
                        l.wait(usize::MAX).await;
                        let seq: u64 = std::str::from_utf8(&payload)?.parse()?;
                        seen.lock().entry(d.key.clone()).or_default().push(seq);
                        Ok(())
                    }
                })
                .unwrap();
            (c, Box::new(move || guard.0.open()))
        }
    }
}

/// 200 entries of 40 keys over 4 shards, window 10 per shard, cap 25 per consumer, handlers
/// blocked: Redis's pending count (entries delivered and not acknowledged) reaches the cap
/// and never passes it, no shard's window passes 10, the rest waits in Redis (lag); once the
/// latch opens every entry runs once, in order per key, still never above the cap.
fn in_flight_cap(kind: Kind) {
    let _one = ONE_AT_A_TIME.lock();
    let Some(server) = RedisServer::start() else {
        return;
    };
    let topic = Topic::new(format!("cap-{kind:?}"), SHARDS).unwrap();
    let pool = keyway::Pool::builder()
        .core_threads(2)
        .max_threads(2)
        .build()
        .unwrap();
    let log = Arc::new(Mutex::new(HashMap::new()));
    let (consumer, open) = blocked_consumer(&server, &topic, &pool, kind, &log);
    let mut producer = Producer::connect(&server.url(), topic.clone()).unwrap();
    const KEYS: u64 = 40;
    const PER_KEY: u64 = 5;
    for seq in 0..PER_KEY {
        let batch: Vec<(String, String)> = (0..KEYS)
            .map(|k| (format!("key-{k}"), seq.to_string()))
            .collect();
        producer.send_batch(batch).unwrap();
    }
    let mut most = 0;
    let sample = |most: &mut u64| {
        let p = pending(&server, &topic);
        *most = (*most).max(p);
        p
    };
    wait_for("the cap to fill", || {
        let stats = consumer.stats().unwrap();
        for s in &stats.shards {
            assert!(s.window <= WINDOW, "shard {} window {}", s.shard, s.window);
        }
        let in_flight: usize = stats.shards.iter().map(|s| s.window).sum();
        assert!(in_flight <= CAP, "{in_flight} entries in flight, cap {CAP}");
        sample(&mut most) == CAP as u64 && in_flight == CAP
    });
    // The rest waits in Redis, unread. Redis reports each shard's lag from its group's read
    // counter, read shard by shard: wait for the sum rather than trust one snapshot.
    let unread = KEYS * PER_KEY - CAP as u64;
    wait_for("the rest to wait in Redis, unread", || {
        let stats = consumer.stats().unwrap();
        let in_flight: usize = stats.shards.iter().map(|s| s.window).sum();
        assert!(in_flight <= CAP, "{in_flight} entries in flight, cap {CAP}");
        stats.shards.iter().filter_map(|s| s.lag).sum::<u64>() == unread
    });
    open();
    let total = KEYS * PER_KEY;
    wait_for("every entry acknowledged", || {
        sample(&mut most);
        consumer.stats().unwrap().acked == total
    });
    assert!(
        most <= CAP as u64,
        "{most} entries read and not finished, cap {CAP}"
    );
    let log = log.lock();
    assert_eq!(log.len(), KEYS as usize);
    for (key, seqs) in log.iter() {
        let expected: Vec<u64> = (0..PER_KEY).collect();
        assert_eq!(seqs, &expected, "{}", String::from_utf8_lossy(key));
    }
    assert_eq!(pending(&server, &topic), 0);
    drop(consumer);
}

#[test]
fn a_blocked_sync_handler_builds_backpressure_not_memory() {
    in_flight_cap(Kind::Sync);
}

#[test]
fn a_blocked_async_handler_builds_backpressure_not_memory() {
    in_flight_cap(Kind::Async);
}

/// What the quarantine handler saw: every attempt, and every success, per key.
#[derive(Default)]
struct Seen {
    attempts: HashMap<String, Vec<u64>>,
    done: HashMap<String, Vec<u64>>,
}

/// Key A's entry 2 fails until fixed (two attempts, then A is quarantined); A and B share a
/// shard. B's entries, and B's entries appended after the hold, run; A's entries 3 and 4 do
/// not start and stay pending. Released, A's entries run in order from 2 (with its attempts
/// again), then an A entry appended after the release.
fn quarantine_in_process(kind: Kind) {
    let _one = ONE_AT_A_TIME.lock();
    let Some(server) = RedisServer::start() else {
        return;
    };
    let topic = Topic::new(format!("hold-{kind:?}"), 2).unwrap();
    let keys = keys_in(0, 2, 2);
    let (a, b) = (keys[0].clone(), keys[1].clone());
    let pool = keyway::Pool::builder()
        .core_threads(2)
        .max_threads(2)
        .build()
        .unwrap();
    let seen = Arc::new(Mutex::new(Seen::default()));
    let fixed = Arc::new(AtomicBool::new(false));
    let (log, fix, poison_key) = (Arc::clone(&seen), Arc::clone(&fixed), a.clone());
    let consumer = kinds::build(
        builder(&server, &topic)
            .max_attempts(2)
            .failure_policy(FailurePolicy::Quarantine),
        &pool,
        kind,
        move |d, payload| {
            let seq: u64 = std::str::from_utf8(payload)?.parse()?;
            let key = String::from_utf8_lossy(&d.key).into_owned();
            let mut log = log.lock();
            log.attempts.entry(key.clone()).or_default().push(seq);
            if key == poison_key && seq == 2 && !fix.load(Ordering::SeqCst) {
                return Err("poison".into());
            }
            log.done.entry(key).or_default().push(seq);
            Ok(())
        },
    )
    .unwrap();
    let mut producer = Producer::connect(&server.url(), topic.clone()).unwrap();
    for seq in 0..5 {
        producer
            .send_batch(vec![
                (a.clone(), seq.to_string()),
                (b.clone(), seq.to_string()),
            ])
            .unwrap();
    }
    wait_for("A quarantined and B's entries done", || {
        let stats = consumer.stats().unwrap();
        stats.shards[0].quarantined == vec![a.as_bytes().to_vec()]
            && stats.shards[0].held == 3
            && seen.lock().done.get(&b).map_or(0, Vec::len) == 5
    });
    // The shard goes on for B after the hold.
    for seq in 5..8 {
        producer.send(&b, seq.to_string()).unwrap();
    }
    wait_for("B's later entries done", || {
        seen.lock().done.get(&b).map_or(0, Vec::len) == 8
    });
    {
        let seen = seen.lock();
        assert_eq!(seen.done[&a], vec![0, 1], "A's held entries did not run");
        assert_eq!(seen.attempts[&a], vec![0, 1, 2, 2], "nor start");
        assert_eq!(seen.done[&b], (0..8).collect::<Vec<u64>>());
    }
    let stats = consumer.stats().unwrap();
    assert_eq!(stats.quarantined, 1);
    assert_eq!(stats.dead_lettered, 0);
    // B's acks go out in batches (at most the ack interval after its entries finish): wait
    // for them, then A's three held entries are all that is pending.
    wait_for("B's acks sent", || pending(&server, &topic) <= 3);
    assert_eq!(pending(&server, &topic), 3, "A 2, 3 and 4 stay pending");
    fixed.store(true, Ordering::SeqCst);
    assert!(consumer.release(a.as_bytes()).unwrap(), "A was held");
    producer.send(&a, "5").unwrap();
    wait_for("A's entries done", || {
        seen.lock().done.get(&a).map_or(0, Vec::len) == 6
    });
    assert_eq!(
        seen.lock().done[&a],
        (0..6).collect::<Vec<u64>>(),
        "in order"
    );
    wait_for("nothing pending", || pending(&server, &topic) == 0);
    let stats = consumer.stats().unwrap();
    assert!(stats
        .shards
        .iter()
        .all(|s| s.quarantined.is_empty() && s.held == 0));
    assert_eq!(stats.released, 1);
    assert!(!consumer.release(a.as_bytes()).unwrap(), "no longer held");
    let dead: u64 = redis::cmd("XLEN")
        .arg(topic.dead_letter_key(0))
        .query(&mut server.connection())
        .unwrap();
    assert_eq!(dead, 0, "nothing dead-lettered");
    drop(consumer);
}

#[test]
fn a_quarantined_key_waits_for_its_release_sync() {
    quarantine_in_process(Kind::Sync);
}

#[test]
fn a_quarantined_key_waits_for_its_release_async() {
    quarantine_in_process(Kind::Async);
}

/// A member process with the quarantine policy: journals starts and ends; fails the entry
/// named by `ENV_POISON` until the file [`FIXED`] exists beside its journal.
#[test]
#[ignore = "run as a child process by the other tests of this file"]
fn stream_member() {
    let Ok(url) = std::env::var(ENV_URL) else {
        return;
    };
    let ns = std::env::var(ENV_NS).unwrap();
    let id = std::env::var(ENV_ID).unwrap();
    let path = std::path::PathBuf::from(std::env::var(ENV_JOURNAL).unwrap());
    let journal = Arc::new(Journal::create(&path));
    let poison = std::env::var(ENV_POISON).ok();
    let fixed = path.with_file_name(FIXED);
    let pool = keyway::Pool::builder().core_threads(2).build().unwrap();
    let acks = Arc::clone(&journal);
    let builder = StreamConsumer::builder(url.as_str(), topic(&ns))
        .member_id(id)
        .window(WINDOW)
        .lease(LEASE)
        .heartbeat(LEASE / 5)
        .max_attempts(2)
        .failure_policy(FailurePolicy::Quarantine)
        .backoff(Duration::from_millis(5), Duration::from_millis(10))
        .ack_batch(16, Duration::from_millis(10))
        .io_timeout(Duration::from_millis(300))
        .on_ack(move |a| acks.acked(a));
    let consumer = kinds::build(builder, &pool, Kind::from_env(), move |d, payload| {
        let seq: u64 = std::str::from_utf8(payload)?.parse()?;
        journal.start(d, seq);
        let me = format!("{}:{seq}", String::from_utf8_lossy(&d.key));
        if poison.as_deref() == Some(me.as_str()) && !fixed.exists() {
            journal.finish(d, seq, "fail");
            return Err("poison".into());
        }
        journal.finish(d, seq, "ok");
        Ok(())
    })
    .expect("build the consumer");
    let s = common::member::serve(&consumer);
    println!(
        "stats quarantined={} released={}",
        s.quarantined, s.released
    );
}

/// The sequence numbers of `key`'s handler starts (`S`) or successful ends (`F … ok`) in
/// the journals of `member`.
fn journal_seqs(c: &Cluster, member: &str, key: &str, what: &str) -> Vec<u64> {
    c.journal_lines(member)
        .iter()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            let wanted = match what {
                "S" => f.first() == Some(&"S"),
                _ => f.first() == Some(&"F") && f.get(6) == Some(&"ok"),
            };
            (wanted && f.get(1) == Some(&key)).then(|| f[2].parse().ok())?
        })
        .collect()
}

/// The quarantined keys of `shard` as stored in Redis.
fn held_in_redis(c: &Cluster, shard: u32) -> Vec<String> {
    let key = format!("{}:{{events}}:keyway:held:{shard}", c.ns);
    let mut keys: Vec<String> = redis::cmd("HKEYS")
        .arg(key)
        .query(&mut c.server.connection())
        .unwrap();
    keys.sort();
    keys
}

/// m0 quarantines key A (its entry 2 fails twice) while B, of the same shard, goes on; m0 is
/// killed with SIGKILL; m1 takes the shard over and keeps A held (A's entries 2, 3 and 4 do
/// not start there while B's new entries run); `keyway-stream release` (after the fix) lets
/// m1 run A's entries 2, 3, 4 in order, then A's entry 5; nothing stays pending.
#[test]
fn a_quarantine_survives_kill_9_of_its_member() {
    let _one = ONE_AT_A_TIME.lock();
    let Some(server) = RedisServer::start() else {
        return;
    };
    let mut c = Cluster::new(server, "hold9");
    let keys = keys_in(3, SHARDS_OF_CLUSTER, 2);
    let (a, b) = (keys[0].clone(), keys[1].clone());
    let shard = keyway_redis::stream::shard_of(a.as_bytes(), SHARDS_OF_CLUSTER);
    c.poison = Some((a.clone(), 2));
    let fixed = c.dir.join(FIXED);
    c.spawn("m0");
    let mut producer = Producer::connect(&c.server.url(), c.topic()).unwrap();
    for seq in 0..5 {
        producer
            .send_batch(vec![
                (a.clone(), seq.to_string()),
                (b.clone(), seq.to_string()),
            ])
            .unwrap();
    }
    wait_for("m0 to quarantine A in Redis and run B's entries", || {
        held_in_redis(&c, shard) == vec![a.clone()] && journal_seqs(&c, "m0", &b, "F").len() == 5
    });
    assert_eq!(journal_seqs(&c, "m0", &a, "S"), vec![0, 1, 2, 2]);
    c.kill("m0");
    c.spawn("m1");
    for seq in 5..8 {
        producer.send(&b, seq.to_string()).unwrap();
    }
    wait_for("m1 to take the shard over and run B's new entries", || {
        let done = journal_seqs(&c, "m1", &b, "F");
        [5, 6, 7].iter().all(|s| done.contains(s))
    });
    assert_eq!(
        journal_seqs(&c, "m1", &a, "S"),
        Vec::<u64>::new(),
        "A stays held at the new owner"
    );
    assert_eq!(held_in_redis(&c, shard), vec![a.clone()]);
    std::fs::write(&fixed, b"").unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_keyway-stream"))
        .args(["--url", &c.server.url(), "--topic", "events"])
        .args([
            "--shards",
            &SHARDS_OF_CLUSTER.to_string(),
            "--namespace",
            &c.ns,
        ])
        .args(["--json", "release", &a])
        .output()
        .expect("run keyway-stream");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["released"], true);
    producer.send(&a, "5").unwrap();
    wait_for("m1 to run A's entries", || {
        journal_seqs(&c, "m1", &a, "F").len() == 4
    });
    assert_eq!(
        journal_seqs(&c, "m1", &a, "F"),
        vec![2, 3, 4, 5],
        "in order"
    );
    assert_eq!(
        journal_seqs(&c, "m1", &a, "S"),
        vec![2, 3, 4, 5],
        "each once"
    );
    c.wait_done();
    assert!(held_in_redis(&c, shard).is_empty());
    c.stop_all();
    assert_eq!(c.total("released"), 1, "m1 saw the release");
}

/// The cluster harness's shard count.
const SHARDS_OF_CLUSTER: u32 = common::cluster::SHARDS;
