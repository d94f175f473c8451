//! Redis killed (and restarted empty) or paused mid-run. Every member keeps its
//! last share the whole time — a monitor samples all shares every 2 ms and fails on any other
//! value — logs one outage, and recovers by itself: afterwards the shares still follow the
//! live members.

use crate::common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::*;
use keyway::Coordinator;
use keyway_redis::RedisCoordinator;

/// Three members at a third each, and a monitor thread that records every sample in which a
/// share differs from a third.
struct Cluster {
    members: Arc<Vec<RedisCoordinator>>,
    stop: Arc<AtomicBool>,
    monitor: Option<std::thread::JoinHandle<(u64, Vec<Vec<f64>>)>>,
}

impl Cluster {
    fn start(url: &str) -> Self {
        let members: Vec<_> = (0..3).map(|_| coordinator(url, 0.0)).collect();
        for m in &members {
            m.join(EXECUTOR, LIMIT);
        }
        wait_for("a third each", || {
            members
                .iter()
                .all(|m| close(m.share(EXECUTOR, LIMIT), LIMIT / 3.0))
        });
        let members = Arc::new(members);
        let stop = Arc::new(AtomicBool::new(false));
        let monitor = {
            let (members, stop) = (Arc::clone(&members), Arc::clone(&stop));
            std::thread::spawn(move || {
                let (mut samples, mut wrong) = (0u64, Vec::new());
                while !stop.load(Ordering::Relaxed) {
                    let now: Vec<f64> = members.iter().map(|m| m.share(EXECUTOR, LIMIT)).collect();
                    if !now.iter().all(|&s| close(s, LIMIT / 3.0)) && wrong.len() < 10 {
                        wrong.push(now);
                    }
                    samples += 1;
                    std::thread::sleep(Duration::from_millis(2));
                }
                (samples, wrong)
            })
        };
        Self {
            members,
            stop,
            monitor: Some(monitor),
        }
    }

    fn all_connected(&self, connected: bool) -> bool {
        self.members
            .iter()
            .all(|m| m.status().connected == connected)
    }

    fn outages(&self) -> Vec<u64> {
        self.members.iter().map(|m| m.status().outages).collect()
    }

    /// Stops the monitor; fails if any sample had a share other than a third.
    fn check_shares_held(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let (samples, wrong) = self.monitor.take().unwrap().join().unwrap();
        assert!(samples > 100, "the monitor ran ({samples} samples)");
        assert!(wrong.is_empty(), "shares moved: {wrong:?}");
    }

    /// Recovery is real: one member leaves and the two others get a half each.
    fn check_shares_follow(self) {
        let mut members =
            Arc::try_unwrap(self.members).unwrap_or_else(|_| panic!("monitor still running"));
        drop(members.pop());
        wait_for("a half each after one left", || {
            members
                .iter()
                .all(|m| close(m.share(EXECUTOR, LIMIT), LIMIT / 2.0))
        });
    }
}

#[test]
fn redis_killed_and_restarted_empty() {
    let Some(mut server) = RedisServer::start() else {
        return;
    };
    let mut cluster = Cluster::start(&server.url());
    server.kill();
    wait_for("every member to notice the outage", || {
        cluster.all_connected(false)
    });
    let_time_pass(TTL * 2);
    assert_eq!(
        cluster.outages(),
        [1, 1, 1],
        "one outage each, however many retries"
    );
    server.restart();
    wait_for("every member to reconnect", || cluster.all_connected(true));
    // Redis lost the members: they re-register, and each waits a TTL before it may raise its
    // share; the first back must not take the whole limit meanwhile.
    let_time_pass(TTL * 2);
    let mut conn = server.connection();
    let live: u64 = redis::cmd("ZCARD")
        .arg(format!("test:{{{EXECUTOR}}}:members"))
        .query(&mut conn)
        .unwrap();
    assert_eq!(live, 3, "every member re-registered");
    cluster.check_shares_held();
    assert_eq!(cluster.outages(), [1, 1, 1]);
    cluster.check_shares_follow();
}

#[test]
fn redis_paused_five_seconds() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let mut cluster = Cluster::start(&server.url());
    server.pause();
    wait_for("every member to notice the outage", || {
        cluster.all_connected(false)
    });
    let_time_pass(Duration::from_secs(5));
    server.resume();
    wait_for("every member to reconnect", || cluster.all_connected(true));
    // Redis's clock jumped 5 s past every heartbeat: nobody may be expired for it.
    let_time_pass(TTL * 2);
    cluster.check_shares_held();
    assert_eq!(
        cluster.outages(),
        [1, 1, 1],
        "one outage each, however many retries"
    );
    cluster.check_shares_follow();
}

/// The pause, staged exactly: Redis's keys say two members heartbeated last 20 s ago (more than
/// the TTL of 5 s), and so did everybody (nobody could: Redis was paused). The next heartbeat must not
/// expire them for the pause; they expire a TTL later, since they never heartbeat again.
#[test]
fn a_pause_of_redis_expires_nobody() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let mut conn = server.connection();
    let key = |k: &str| format!("test:{{{EXECUTOR}}}:{k}");
    let before = (redis_time_us(&mut conn) - 20e6).to_string();
    for k in ["members", "joined"] {
        let _: () = redis::cmd("ZADD")
            .arg(key(k))
            .arg(&before)
            .arg("ghost-1")
            .arg(&before)
            .arg("ghost-2")
            .query(&mut conn)
            .unwrap();
    }
    let _: () = redis::cmd("HSET")
        .arg(key("clock"))
        .arg("last")
        .arg(&before)
        .arg("offset")
        .arg(0)
        .arg("created")
        .arg(0)
        .query(&mut conn)
        .unwrap();
    let c = RedisCoordinator::builder(server.url())
        .namespace("test")
        .heartbeat(HEARTBEAT)
        .ttl(Duration::from_secs(5))
        .build()
        .unwrap();
    c.join(EXECUTOR, LIMIT);
    let score = |conn: &mut redis::Connection, id: &str| -> Option<f64> {
        redis::cmd("ZSCORE")
            .arg(key("members"))
            .arg(id)
            .query(conn)
            .unwrap()
    };
    wait_for("the first heartbeat", || {
        score(&mut conn, c.member_id()).is_some()
    });
    assert!(
        score(&mut conn, "ghost-1").is_some(),
        "expired for the pause"
    );
    assert!(
        score(&mut conn, "ghost-2").is_some(),
        "expired for the pause"
    );
    assert_eq!(
        c.share(EXECUTOR, LIMIT),
        0.0,
        "a newcomer waits for the others"
    );
    // They never heartbeat again: a TTL later they are gone and the newcomer has it all.
    wait_for("the whole limit", || close(c.share(EXECUTOR, LIMIT), LIMIT));
    assert!(score(&mut conn, "ghost-1").is_none());
}
