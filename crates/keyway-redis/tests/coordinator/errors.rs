//! Bad URL, wrong password, unreachable host and bad settings are typed errors at
//! construction, never a panic.

use crate::common;

use std::net::TcpListener;
use std::time::Duration;

use common::*;
use keyway_redis::{Error, RedisCoordinator, MAX_PERIOD};

fn build(url: &str) -> Result<RedisCoordinator, Error> {
    RedisCoordinator::builder(url)
        .connect_timeout(Duration::from_millis(300))
        .build()
}

#[test]
fn malformed_urls_are_invalid_url() {
    for url in [
        "",
        "not a url",
        "http://127.0.0.1:6379",
        "redis://",
        "redis://127.0.0.1:notaport",
    ] {
        match build(url) {
            Err(Error::InvalidUrl(_)) => {}
            other => panic!("{url:?}: expected InvalidUrl, got {other:?}"),
        }
    }
}

#[test]
fn unreachable_hosts_are_unreachable() {
    // Nothing listens on the port.
    let url = format!("redis://127.0.0.1:{}", free_port());
    assert!(matches!(build(&url), Err(Error::Unreachable(_))), "{url}");
    // Something accepts connections but never answers: the timeout says unreachable.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("redis://127.0.0.1:{}", silent.local_addr().unwrap().port());
    let err = build(&url).unwrap_err();
    assert!(matches!(err, Error::Unreachable(_)), "{err:?}");
    // The error says what is wrong.
    assert!(err.to_string().starts_with("Redis is unreachable"), "{err}");
}

#[test]
fn wrong_or_missing_passwords_are_auth_errors() {
    let Some(server) = RedisServer::start_with(&["--requirepass", "s3cret"]) else {
        return;
    };
    let port = server.port();
    for url in [
        format!("redis://:wrong@127.0.0.1:{port}"),
        format!("redis://nobody:s3cret@127.0.0.1:{port}"),
        format!("redis://127.0.0.1:{port}"),
    ] {
        let err = build(&url).unwrap_err();
        assert!(matches!(err, Error::Auth(_)), "{url}: {err:?}");
        assert!(
            !err.to_string().contains("wrong@"),
            "no URL (password) in the message: {err}"
        );
    }
    // The right password works, with or without the default user named.
    build(&format!("redis://:s3cret@127.0.0.1:{port}")).unwrap();
    build(&format!("redis://default:s3cret@127.0.0.1:{port}/0")).unwrap();
}

#[test]
fn tls_urls_are_accepted() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    // The server speaks plain TCP, so the TLS handshake fails: unreachable, not a panic and
    // not an invalid URL.
    let url = format!("rediss://:pw@127.0.0.1:{}", server.port());
    let err = build(&url).unwrap_err();
    assert!(
        matches!(err, Error::Unreachable(_) | Error::Redis(_)),
        "{err:?}"
    );
}

#[test]
fn settings_at_their_extremes() {
    let url = "redis://127.0.0.1:1";
    let b = || RedisCoordinator::builder(url);
    let check = |r: Result<RedisCoordinator, Error>, what: &str| {
        let err = r.unwrap_err();
        assert!(
            !matches!(err, Error::Unreachable(_)),
            "{what} passed the checks: {err}"
        );
        err
    };
    assert!(matches!(
        check(b().namespace("").build(), "empty namespace"),
        Error::EmptyNamespace
    ));
    for period in [
        Duration::ZERO,
        MAX_PERIOD + Duration::from_nanos(1),
        Duration::MAX,
    ] {
        let err = check(b().heartbeat(period).build(), "heartbeat");
        assert!(
            matches!(err, Error::InvalidHeartbeat(_)),
            "{period:?}: {err}"
        );
        let err = check(b().connect_timeout(period).build(), "connect timeout");
        assert!(
            matches!(err, Error::InvalidConnectTimeout(_)),
            "{period:?}: {err}"
        );
    }
    for (heartbeat, ttl) in [
        (Duration::from_secs(1), Duration::ZERO),
        (Duration::from_secs(1), Duration::from_millis(2999)),
        (Duration::from_secs(1), Duration::MAX),
        (MAX_PERIOD, MAX_PERIOD),
    ] {
        let err = check(b().heartbeat(heartbeat).ttl(ttl).build(), "ttl");
        assert!(
            matches!(err, Error::InvalidTtl { .. }),
            "{heartbeat:?}/{ttl:?}: {err}"
        );
        assert!(err.to_string().contains("three heartbeats"), "{err}");
    }
    // The smallest accepted settings work against a real server.
    let Some(server) = RedisServer::start() else {
        return;
    };
    let tiny = RedisCoordinator::builder(server.url())
        .heartbeat(Duration::from_nanos(1))
        .ttl(Duration::from_nanos(3))
        .connect_timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    keyway::Coordinator::join(&tiny, EXECUTOR, LIMIT);
    wait_for("a share with a 1 ns heartbeat", || {
        keyway::Coordinator::share(&tiny, EXECUTOR, LIMIT) > 0.0
    });
    // Passwords stay out of debug output.
    let dbg = format!("{:?}", RedisCoordinator::builder("redis://:hunter2@host"));
    assert!(!dbg.contains("hunter2"), "{dbg}");
}
