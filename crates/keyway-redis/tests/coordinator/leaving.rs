//! Leaving and coming back: dropping a coordinator is bounded by its leave timeout whatever
//! Redis does, and a member the others expired starts at zero when it is back.

use crate::common;

use std::sync::mpsc;
use std::time::Duration;

use common::*;
use keyway::Coordinator;
use keyway_redis::{RedisCoordinator, MAX_PERIOD};

/// Drops `c` on another thread and says whether the drop returned within `PATIENCE` (a bound
/// for a hang, not a timing: the drops tested here wait at most a second, or an hour).
fn drop_returns(c: RedisCoordinator) -> bool {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        drop(c);
        let _ = tx.send(());
    });
    rx.recv_timeout(PATIENCE).is_ok()
}

fn is_member(server: &RedisServer, ns: &str, id: &str) -> bool {
    let score: Option<f64> = redis::cmd("ZSCORE")
        .arg(format!("{ns}:{{{EXECUTOR}}}:members"))
        .arg(id)
        .query(&mut server.connection())
        .expect("ZSCORE");
    score.is_some()
}

/// With Redis paused (it accepts connections and answers nothing) and an I/O timeout of an
/// hour, the drop returns after its leave timeout instead of waiting for Redis; with
/// `Duration::ZERO` it does not wait at all.
#[test]
fn drop_is_bounded_while_redis_answers_nothing() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    for leave in [Duration::from_millis(200), Duration::ZERO] {
        let c = RedisCoordinator::builder(server.url())
            .heartbeat(HEARTBEAT)
            .ttl(TTL)
            .connect_timeout(MAX_PERIOD)
            .leave_timeout(leave)
            .build()
            .unwrap();
        c.join(EXECUTOR, LIMIT);
        wait_for("joined in Redis", || {
            is_member(&server, "keyway", c.member_id())
        });
        server.pause();
        let returned = drop_returns(c);
        server.resume();
        assert!(
            returned,
            "leave timeout {leave:?}: the drop waited for Redis"
        );
    }
}

/// `Duration::MAX` waits for the leave itself: once the drop returned, Redis no longer lists
/// the member (the others take its share at once, not after the TTL).
#[test]
fn an_unbounded_leave_timeout_waits_for_the_leave() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    for _ in 0..5 {
        let c = RedisCoordinator::builder(server.url())
            .heartbeat(HEARTBEAT)
            .ttl(Duration::from_secs(60))
            .leave_timeout(Duration::MAX)
            .build()
            .unwrap();
        c.join(EXECUTOR, LIMIT);
        let id = c.member_id().to_owned();
        wait_for("joined in Redis", || is_member(&server, "keyway", &id));
        assert!(drop_returns(c));
        assert!(
            !is_member(&server, "keyway", &id),
            "{id} still a member after the drop"
        );
    }
}

/// A member that could not heartbeat for a TTL was expired by the others, who took its share.
/// When it is back it must start at zero (as a new member does) until they have counted it
/// again, not take its old share at once: for up to a heartbeat the group would be over the
/// limit. The expiry is made by removing the member as the others' heartbeat would.
#[test]
fn a_member_expired_and_back_starts_at_zero() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    age_group(&server, "rejoin");
    // Long heartbeats make the window between the return and the others' next count wide.
    let build = || {
        RedisCoordinator::builder(server.url())
            .namespace("rejoin")
            .heartbeat(Duration::from_secs(1))
            .ttl(Duration::from_secs(60))
            .build()
            .unwrap()
    };
    let (a, b) = (build(), build());
    a.join(EXECUTOR, LIMIT);
    b.join(EXECUTOR, LIMIT);
    let half = |c: &RedisCoordinator| close(c.share(EXECUTOR, LIMIT), LIMIT / 2.0);
    wait_for("a half each", || half(&a) && half(&b));
    let _: () = redis::pipe()
        .cmd("ZREM")
        .arg(format!("rejoin:{{{EXECUTOR}}}:members"))
        .arg(a.member_id())
        .cmd("ZREM")
        .arg(format!("rejoin:{{{EXECUTOR}}}:joined"))
        .arg(a.member_id())
        .query(&mut server.connection())
        .unwrap();
    wait_for("the expired member back at zero", || {
        a.share(EXECUTOR, LIMIT) == 0.0
    });
    wait_for("a half each again", || half(&a) && half(&b));
}
