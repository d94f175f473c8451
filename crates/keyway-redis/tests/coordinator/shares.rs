//! Shares in one process with several coordinators (each is a separate member, with its own
//! connection and id, exactly as separate processes would be): clean leave, wrong clocks.

use crate::common;

use std::time::Duration;

use common::*;
use keyway::Coordinator;
use keyway_redis::RedisCoordinator;

fn shares(all: &[&RedisCoordinator]) -> Vec<f64> {
    all.iter().map(|c| c.share(EXECUTOR, LIMIT)).collect()
}

fn wait_shares(what: &str, all: &[&RedisCoordinator], each: f64) {
    wait_for(what, || shares(all).iter().all(|&s| close(s, each)));
}

/// Clean stop: `leave` removes the member at once. The TTL is a minute, so only
/// the leave can explain the others' larger share. (The group is made old beforehand, as after
/// a long run: the first member of a new group waits one TTL before it takes a share.)
#[test]
fn leave_hands_over_the_share_at_once() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    age_group(&server, "keyway");
    let build = || {
        RedisCoordinator::builder(server.url())
            .heartbeat(HEARTBEAT)
            .ttl(Duration::from_secs(60))
            .build()
            .unwrap()
    };
    let (a, b) = (build(), build());
    a.join(EXECUTOR, LIMIT);
    b.join(EXECUTOR, LIMIT);
    wait_shares("a half each", &[&a, &b], LIMIT / 2.0);
    b.leave(EXECUTOR);
    assert_eq!(
        b.share(EXECUTOR, LIMIT),
        0.0,
        "a member that left has no share"
    );
    wait_shares("the whole limit for the one left", &[&a], LIMIT);
    // Leaving an executor never joined, or twice, is harmless.
    b.leave(EXECUTOR);
    b.leave("never-joined");
    // Joining again starts from zero and gets a half again.
    b.join(EXECUTOR, LIMIT);
    wait_shares("a half each again", &[&a, &b], LIMIT / 2.0);
}

/// Members whose clocks are an hour slow and an hour fast get the same share as
/// the one with the right time, and when one leaves the others' shares still follow.
#[test]
fn clocks_do_not_matter() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let slow = coordinator(&server.url(), -3600.0);
    let right = coordinator(&server.url(), 0.0);
    let fast = coordinator(&server.url(), 3600.0);
    for c in [&slow, &right, &fast] {
        c.join(EXECUTOR, LIMIT);
    }
    wait_shares("a third each", &[&slow, &right, &fast], LIMIT / 3.0);
    // Stay a few TTLs: nobody is expired for its clock.
    for _ in 0..40 {
        std::thread::sleep(HEARTBEAT);
        let now = shares(&[&slow, &right, &fast]);
        assert!(now.iter().all(|&s| close(s, LIMIT / 3.0)), "{now:?}");
    }
    drop(right);
    wait_shares("a half each", &[&slow, &fast], LIMIT / 2.0);
}

/// Shares are never outside `0..=limit`, whatever the caller passes.
#[test]
fn shares_stay_within_the_limit() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let c = coordinator(&server.url(), 0.0);
    assert_eq!(c.share(EXECUTOR, LIMIT), 0.0, "not joined: no share");
    c.join(EXECUTOR, LIMIT);
    wait_shares("the whole limit", &[&c], LIMIT);
    assert_eq!(c.share(EXECUTOR, f64::NAN), 0.0);
    assert_eq!(c.share(EXECUTOR, -1.0), 0.0);
    assert_eq!(c.share(EXECUTOR, 0.0), 0.0);
    assert_eq!(c.share(EXECUTOR, f64::INFINITY), f64::INFINITY);
    assert_eq!(c.share(EXECUTOR, f64::MAX), f64::MAX);
    assert!(c.status().connected);
    assert_eq!(c.status().outages, 0);
}
