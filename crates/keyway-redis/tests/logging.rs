//! An outage is logged once (at `warn`), however many retries it takes, and the recovery once
//! (at `info`). A process-wide subscriber counts the events (the heartbeat thread logs them),
//! so this is a test binary of its own: other tests in the process would log outages too.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};

use common::*;
use keyway::Coordinator;
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Metadata, Subscriber};

static WARNINGS: AtomicU64 = AtomicU64::new(0);
static INFOS: AtomicU64 = AtomicU64::new(0);

/// Counts this crate's `warn` and `info` events.
struct Counter;

impl Subscriber for Counter {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        metadata.target().starts_with("keyway_redis")
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        match *event.metadata().level() {
            Level::WARN => WARNINGS.fetch_add(1, Ordering::SeqCst),
            Level::INFO => INFOS.fetch_add(1, Ordering::SeqCst),
            _ => 0,
        };
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

#[test]
fn each_outage_is_logged_once() {
    let Some(mut server) = RedisServer::start() else {
        return;
    };
    tracing::subscriber::set_global_default(Counter).unwrap();
    let c = coordinator(&server.url(), 0.0);
    c.join(EXECUTOR, LIMIT);
    for outage in 1..=2 {
        server.kill();
        wait_for("the outage to be noticed", || !c.status().connected);
        // Many retries (backoff up to one heartbeat of 100 ms) during two TTLs.
        let_time_pass(TTL * 2);
        assert_eq!(
            WARNINGS.load(Ordering::SeqCst),
            outage,
            "one warning per outage"
        );
        server.restart();
        wait_for("the recovery", || c.status().connected);
        assert_eq!(
            INFOS.load(Ordering::SeqCst),
            outage,
            "one info per recovery"
        );
        assert_eq!(c.status().outages, outage);
    }
}
