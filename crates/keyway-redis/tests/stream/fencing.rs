//! The stream consumer's fencing: a member that cannot confirm its lease starts no attempt
//! and reads nothing; a lost lease is counted once; re-acquiring its own lease is no
//! takeover; `acked` counts what Redis acknowledged; the producer reconnects.

use crate::common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::local::*;
use common::*;
use keyway_redis::stream::{Producer, Topic};

/// A member is cut off from Redis (its user disabled, its connections killed) while an entry
/// fails and retries: once a lease has passed since the cut and another member holds the
/// shard, it starts no more attempts.
#[test]
fn a_member_cut_off_from_redis_retries_nothing_after_its_lease() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let mut admin = server.connection();
    let _: () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg("member")
        .arg("on")
        .arg(">secret")
        .arg("~*")
        .arg("&*")
        .arg("+@all")
        .query(&mut admin)
        .unwrap();
    let topic = Topic::new("cutoff", 1).unwrap();
    let url = format!("redis://member:secret@127.0.0.1:{}", server.port());
    let attempts = Arc::new(AtomicUsize::new(0));
    let late = Arc::new(AtomicUsize::new(0));
    let taken = Arc::new(AtomicBool::new(false));
    let (attempts_h, late_h, taken_h) =
        (Arc::clone(&attempts), Arc::clone(&late), Arc::clone(&taken));
    let pool = keyway::Pool::builder().core_threads(2).build().unwrap();
    let consumer = builder_at(&url, &topic)
        .max_attempts(100_000)
        .build(&pool, move |_, _| {
            attempts_h.fetch_add(1, Ordering::SeqCst);
            if taken_h.load(Ordering::SeqCst) {
                late_h.fetch_add(1, Ordering::SeqCst);
            }
            Err("always fails".into())
        })
        .unwrap();
    Producer::connect(&server.url(), topic.clone())
        .unwrap()
        .send("k", "v")
        .unwrap();
    wait_for("a few attempts", || attempts.load(Ordering::SeqCst) >= 3);
    let _: () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg("member")
        .arg("off")
        .query(&mut admin)
        .unwrap();
    let _: u64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("USER")
        .arg("member")
        .query(&mut admin)
        .unwrap();
    // Its lease expires a lease after the cut at the latest; another member takes the shard.
    let_time_pass(Duration::from_millis(1_100));
    steal(&server, "keyway:{cutoff}:keyway:lease:0");
    taken.store(true, Ordering::SeqCst);
    let_time_pass(Duration::from_millis(500));
    assert_eq!(
        late.load(Ordering::SeqCst),
        0,
        "attempts started after the lease had gone to another member"
    );
    let _: () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg("member")
        .arg("on")
        .query(&mut admin)
        .unwrap();
    drop(consumer);
}

/// A read that reaches Redis after another member took the shard delivers nothing to this
/// member: the entry stays undelivered for the new owner.
#[test]
fn a_read_after_the_lease_moved_delivers_nothing() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let topic = Topic::new("staleread", 1).unwrap();
    let pool = keyway::Pool::builder().core_threads(2).build().unwrap();
    let runs = Arc::new(AtomicUsize::new(0));
    let runs_h = Arc::clone(&runs);
    let consumer = builder(&server, &topic)
        .member_id("old")
        .build(&pool, move |_, _| {
            runs_h.fetch_add(1, Ordering::SeqCst);
            Ok(())
        })
        .unwrap();
    wait_for("the shard held", || consumer.owned_shards() == [0]);
    // The reader waits for entries; the lease moves; an entry comes.
    steal(&server, "keyway:{staleread}:keyway:lease:0");
    Producer::connect(&server.url(), topic.clone())
        .unwrap()
        .send("k", "v")
        .unwrap();
    wait_for("the loss to be known", || {
        consumer.owned_shards().is_empty()
    });
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    let pending = pending_entries(&server, &topic, 0);
    assert!(
        pending.is_empty(),
        "delivered to the former owner after the lease moved: {pending:?}"
    );
}

/// One lease lost while an ack waits (a partial batch, for the ack timer): the renewal finds
/// the lease lost, then the waiting ack is sent and refused; `leases_lost` counts one loss.
#[test]
fn one_lost_lease_is_counted_once() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let topic = Topic::new("lostonce", 1).unwrap();
    let ran = Arc::new(AtomicBool::new(false));
    let ran_h = Arc::clone(&ran);
    let pool = keyway::Pool::builder().core_threads(2).build().unwrap();
    let consumer = builder(&server, &topic)
        .ack_batch(1_000, Duration::from_secs(3))
        .build(&pool, move |_, _| {
            ran_h.store(true, Ordering::SeqCst);
            Ok(())
        })
        .unwrap();
    Producer::connect(&server.url(), topic.clone())
        .unwrap()
        .send("k", "v")
        .unwrap();
    wait_for("the handler to run", || ran.load(Ordering::SeqCst));
    steal(&server, "keyway:{lostonce}:keyway:lease:0");
    wait_for("the renewal to find the lease lost", || {
        consumer.owned_shards().is_empty()
    });
    wait_for("the waiting ack refused", || {
        consumer.stats().unwrap().refused_acks >= 1
    });
    let_time_pass(Duration::from_millis(300)); // more renewals and ack timer rounds
    assert_eq!(consumer.stats().unwrap().leases_lost, 1);
}

/// A member restarted with the same id takes its own lease back: an acquisition, not a
/// takeover.
#[test]
fn re_acquiring_its_own_lease_is_no_takeover() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let topic = Topic::new("ownlease", 1).unwrap();
    // A former incarnation of member "m" holds the lease.
    let _: () = redis::cmd("HSET")
        .arg("keyway:{ownlease}:keyway:lease:0")
        .arg("owner")
        .arg("m")
        .arg("epoch")
        .arg(7)
        .arg("expires")
        .arg("99999999999999999")
        .query(&mut server.connection())
        .unwrap();
    let pool = keyway::Pool::builder().core_threads(2).build().unwrap();
    let consumer = builder(&server, &topic)
        .member_id("m")
        .build(&pool, |_, _| Ok(()))
        .unwrap();
    wait_for("the shard held", || consumer.owned_shards() == [0]);
    let s = consumer.stats().unwrap();
    assert_eq!((s.acquisitions, s.takeovers), (1, 0));
}

/// `acked` counts what `XACK` acknowledged: an entry acknowledged by someone else meanwhile
/// (an operator) is not counted again.
#[test]
fn acked_counts_what_redis_acknowledged() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let topic = Topic::new("ackcount", 1).unwrap();
    let held = Held::default();
    let hooked = Arc::new(Mutex::new(Vec::new()));
    let hooked_h = Arc::clone(&hooked);
    let pool = keyway::Pool::builder().core_threads(2).build().unwrap();
    let consumer = builder(&server, &topic)
        .on_ack(move |a| hooked_h.lock().unwrap().push(a.succeeded.len()))
        .build(&pool, held.handler())
        .unwrap();
    let _open = held.opener(); // dropped before the consumer
    let id = Producer::connect(&server.url(), topic.clone())
        .unwrap()
        .send("k", "v")
        .unwrap();
    held.wait_started();
    let n: u64 = redis::cmd("XACK")
        .arg(topic.shard_key(0))
        .arg("keyway")
        .arg(id.to_string())
        .query(&mut server.connection())
        .unwrap();
    assert_eq!(n, 1);
    held.latch.open();
    wait_for("the consumer's ack batch", || {
        !hooked.lock().unwrap().is_empty()
    });
    assert_eq!(
        consumer.stats().unwrap().acked,
        0,
        "XACK acknowledged nothing"
    );
}

/// A producer whose connection dropped connects again at its next send.
#[test]
fn the_producer_reconnects_after_its_connection_dropped() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let topic = Topic::new("reproduce", 1).unwrap();
    let mut producer = Producer::connect(&server.url(), topic.clone()).unwrap();
    producer.send("k", "0").unwrap();
    assert!(kill_connections(&server) >= 1);
    let _ = producer.send("k", "1"); // may fail: the connection was dropped under it
    producer
        .send("k", "2")
        .expect("a send after the drop succeeds");
    producer.send_batch([("k", "3")]).expect("and a batch too");
}
