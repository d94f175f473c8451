//! `keyway-stream` end to end against a real redis-server (started by the test) and member
//! processes: `inspect --json`
//! shows a SIGKILLed member's shards expire and get taken over at higher epochs;
//! `dead-letters replay` puts a poison entry back once it is fixed, and it runs and is acked
//! after the entries of its key already in the shard; `cleanup` never deletes a consumer that
//! has pending entries.

use crate::common;

use std::collections::HashMap;
use std::process::Command;

use common::cluster::*;
use common::*;
use keyway_redis::stream::{shard_of, Producer};
use serde_json::Value;

use crate::ONE_AT_A_TIME;

/// Runs `keyway-stream --json ARGS` on the cluster's topic: its JSON output.
fn keyway_stream(c: &Cluster, args: &[&str]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_keyway-stream"))
        .args(["--url", &c.server.url(), "--topic", "events"])
        .args(["--shards", &SHARDS.to_string(), "--namespace", &c.ns])
        .args(["--lease", &format!("{}ms", LEASE.as_millis()), "--json"])
        .args(args)
        .output()
        .expect("run keyway-stream");
    assert!(
        out.status.success(),
        "keyway-stream {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON on stdout")
}

fn owner(shard: &Value) -> Option<&str> {
    shard["owner"].as_str()
}

#[test]
fn inspect_shows_a_killed_members_shards_expire_and_get_taken_over() {
    let _one = ONE_AT_A_TIME.lock();
    let Some(server) = RedisServer::start() else {
        return;
    };
    let mut c = Cluster::new(server, "inspect");
    for m in ["m0", "m1", "m2"] {
        c.spawn(m);
    }
    let feeder = c.feeder(HashMap::new(), 5);
    // Every shard owned by a live member, the three members alive.
    let mut before = Value::Null;
    wait_for("every shard owned", || {
        before = keyway_stream(&c, &["inspect"]);
        let shards = before["shards"].as_array().unwrap();
        let alive = before["members"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["alive"] == true);
        alive.count() == 3
            && shards.iter().all(|s| s["owner_alive"] == true)
            && shards.iter().any(|s| owner(s) == Some("m1"))
    });
    let victim: HashMap<u64, u64> = before["shards"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| owner(s) == Some("m1"))
        .map(|s| (s["shard"].as_u64().unwrap(), s["epoch"].as_u64().unwrap()))
        .collect();
    c.kill("m1"); // SIGKILL: no hand-off, no leave
    let lease_left = |doc: &Value| -> Vec<u64> {
        doc["shards"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| owner(s) == Some("m1"))
            .map(|s| s["lease_left_ms"].as_u64().unwrap())
            .collect()
    };
    // Expiring: still m1's, its lease running down with nobody renewing it.
    let first = lease_left(&keyway_stream(&c, &["inspect"]));
    assert_eq!(
        first.len(),
        victim.len(),
        "m1's shards still m1's just after the kill"
    );
    wait_for("m1's leases to run down", || {
        let now = lease_left(&keyway_stream(&c, &["inspect"]));
        now.is_empty() || now.iter().max() < first.iter().min()
    });
    // Taken over: each by a live member, at a higher epoch.
    let mut after = Value::Null;
    wait_for("m1's shards taken over", || {
        after = keyway_stream(&c, &["inspect"]);
        after["shards"].as_array().unwrap().iter().all(|s| {
            let shard = s["shard"].as_u64().unwrap();
            let taken = !victim.contains_key(&shard)
                || (matches!(owner(s), Some("m0" | "m2"))
                    && s["epoch"].as_u64() > victim.get(&shard).copied());
            taken && s["owner_alive"] == true
        })
    });
    eprintln!("after the takeover: {after:#}");
    let members = keyway_stream(&c, &["members"]);
    let m1_alive = members["members"]
        .as_array()
        .unwrap()
        .iter()
        .any(|m| m["id"] == "m1" && m["alive"] == true);
    assert!(!m1_alive, "{members:#}");
    feeder.stop();
    c.stop_all();
}

#[test]
fn replay_runs_a_fixed_poison_entry_and_acks_it_after_its_keys_earlier_entries() {
    let _one = ONE_AT_A_TIME.lock();
    let Some(server) = RedisServer::start() else {
        return;
    };
    let mut c = Cluster::new(server, "replay");
    c.poison = Some(("k1".to_owned(), 2));
    c.spawn("m0");
    let mut producer = Producer::connect(&c.server.url(), c.topic()).unwrap();
    for seq in 0..6 {
        producer.send("k1", seq.to_string()).unwrap();
    }
    let shard = shard_of(b"k1", SHARDS);
    let mut dead = Value::Null;
    wait_for("the poison entry dead-lettered", || {
        dead = keyway_stream(&c, &["dead-letters", "list"]);
        dead.as_array().unwrap().len() == 1
    });
    assert_eq!(dead[0]["key"], "k1");
    assert_eq!(dead[0]["payload"], "2");
    assert_eq!(dead[0]["shard"].as_u64(), Some(u64::from(shard)));
    c.wait_done();
    // The handler is fixed: the member restarts without the poison.
    c.stop("m0");
    c.poison = None;
    c.spawn("m0");
    let shard_arg = shard.to_string();
    let dry = keyway_stream(
        &c,
        &[
            "dead-letters",
            "replay",
            "--shard",
            &shard_arg,
            "--all",
            "--dry-run",
        ],
    );
    assert_eq!(dry["replayed"][0]["new_id"], Value::Null);
    assert_eq!(
        keyway_stream(&c, &["dead-letters", "list"])
            .as_array()
            .unwrap()
            .len(),
        1
    );
    let replayed = keyway_stream(
        &c,
        &["dead-letters", "replay", "--shard", &shard_arg, "--all"],
    );
    let new_id = replayed["replayed"][0]["new_id"]
        .as_str()
        .unwrap()
        .to_owned();
    producer.send("k1", "6").unwrap(); // appended after the replay
    c.wait_done();
    // The backlog is empty once Redis has the acks; the member journals each ack
    // (`A shard epoch id t`) when its reply comes back, a moment later.
    wait_for("the member journals the replayed entry's ack", || {
        c.journal_lines("m0")
            .iter()
            .any(|l| l.starts_with('A') && l.split_whitespace().nth(3) == Some(new_id.as_str()))
    });
    assert!(keyway_stream(&c, &["dead-letters", "list"])
        .as_array()
        .unwrap()
        .is_empty());
    let lines = c.journal_lines("m0");
    let at = |prefix: &str| {
        lines
            .iter()
            .position(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no {prefix:?} in {lines:#?}"))
    };
    let replay_ok = lines
        .iter()
        .position(|l| l.starts_with("F k1 2 ") && l.contains(&new_id) && l.contains(" ok "))
        .unwrap_or_else(|| panic!("the replayed entry {new_id} did not succeed: {lines:#?}"));
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with('A') && l.split_whitespace().nth(3) == Some(new_id.as_str())),
        "not acked"
    );
    // Order: after every earlier entry of k1, before the one appended after the replay.
    assert!(at("F k1 5 ") < replay_ok);
    assert!(replay_ok < at("S k1 6 "));
    c.stop_all();
}

#[test]
fn cleanup_never_deletes_a_consumer_with_pending_entries() {
    let _one = ONE_AT_A_TIME.lock();
    let Some(server) = RedisServer::start() else {
        return;
    };
    let c = Cluster::new(server, "cleanup");
    let mut conn = c.server.connection();
    let stream = c.topic().shard_key(0);
    redis::cmd("XGROUP")
        .arg("CREATE")
        .arg(&stream)
        .arg("keyway")
        .arg("0")
        .arg("MKSTREAM")
        .exec(&mut conn)
        .unwrap();
    for p in ["a", "b"] {
        redis::cmd("XADD")
            .arg(&stream)
            .arg("*")
            .arg("k")
            .arg("x")
            .arg("p")
            .arg(p)
            .exec(&mut conn)
            .unwrap();
    }
    // "ghost" holds an entry it never acked; "idle" holds none.
    redis::cmd("XREADGROUP")
        .arg("GROUP")
        .arg("keyway")
        .arg("ghost")
        .arg("COUNT")
        .arg(1)
        .arg("STREAMS")
        .arg(&stream)
        .arg(">")
        .exec(&mut conn)
        .unwrap();
    redis::cmd("XGROUP")
        .arg("CREATECONSUMER")
        .arg(&stream)
        .arg("keyway")
        .arg("idle")
        .exec(&mut conn)
        .unwrap();
    let consumers = |conn: &mut redis::Connection| -> Vec<String> {
        let rows: Vec<HashMap<String, redis::Value>> = redis::cmd("XINFO")
            .arg("CONSUMERS")
            .arg(&stream)
            .arg("keyway")
            .query(conn)
            .unwrap();
        let mut names: Vec<String> = rows
            .iter()
            .filter_map(|r| redis::from_redis_value(r.get("name")?).ok())
            .collect();
        names.sort();
        names
    };
    let dry = keyway_stream(&c, &["cleanup", "--dry-run"]);
    assert_eq!(dry["deleted"], serde_json::json!(["idle"]));
    assert_eq!(dry["refused"][0]["consumer"], "ghost");
    assert_eq!(dry["refused"][0]["pending"], 1);
    assert_eq!(
        consumers(&mut conn),
        ["ghost", "idle"],
        "a dry run changes nothing"
    );
    let done = keyway_stream(&c, &["cleanup"]);
    assert_eq!(done["deleted"], serde_json::json!(["idle"]));
    assert_eq!(done["refused"][0]["consumer"], "ghost");
    assert_eq!(consumers(&mut conn), ["ghost"]);
    // Once its entry is acked, it goes too.
    let pending: Vec<(String, String, u64, u64)> = redis::cmd("XPENDING")
        .arg(&stream)
        .arg("keyway")
        .arg("-")
        .arg("+")
        .arg(10)
        .query(&mut conn)
        .unwrap();
    redis::cmd("XACK")
        .arg(&stream)
        .arg("keyway")
        .arg(&pending[0].0)
        .exec(&mut conn)
        .unwrap();
    let last = keyway_stream(&c, &["cleanup"]);
    assert_eq!(last["deleted"], serde_json::json!(["ghost"]));
    assert!(consumers(&mut conn).is_empty());
}
