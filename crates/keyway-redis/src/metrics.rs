//! The `metrics` feature: a stream consumer's numbers through the `metrics` crate's facade.
//!
//! [`publish`] sets, from one [`StreamStats`] snapshot, the series below (names as a
//! Prometheus exporter renders OpenTelemetry names: dots as underscores, the unit as a
//! suffix). Labels: `topic`, `group`, and `shard` on the per-shard series; never a key or a
//! member id (`owned` says whether the publishing member holds the shard). Call it
//! periodically (each call asks Redis through [`StreamConsumer::stats`](crate::stream::StreamConsumer::stats)).
//! One series is not [`publish`]'s: the consumer records [`APPEND_TO_HANDLED`] itself as it
//! handles entries (install the recorder before building the consumer).
//!
//! ```no_run
//! # use keyway_redis::stream::{StreamConsumer, Topic};
//! let pool = keyway::Pool::new()?;
//! let consumer = StreamConsumer::builder("redis://127.0.0.1", Topic::new("orders", 8)?)
//!     .build(&pool, |_, _| Ok(()))?;
//! loop {
//!     keyway_redis::metrics::publish(&consumer.stats()?, "orders", "keyway", consumer.member_id());
//!     std::thread::sleep(std::time::Duration::from_secs(5));
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use metrics::Unit;

use crate::stream::StreamStats;

/// Gauge per shard: entries not yet delivered to the group.
pub const SHARD_LAG: &str = "keyway_stream_shard_lag_messages";
/// Gauge per shard: entries delivered and not acknowledged.
pub const SHARD_PENDING: &str = "keyway_stream_shard_pending_messages";
/// Gauge per shard: how long ago the oldest pending entry was delivered, seconds.
pub const SHARD_OLDEST_PENDING: &str = "keyway_stream_shard_oldest_pending_seconds";
/// Gauge per shard: the lease's epoch.
pub const SHARD_EPOCH: &str = "keyway_stream_shard_epoch";
/// Gauge per shard: 1 if the publishing member holds the shard, else 0.
pub const SHARD_OWNED: &str = "keyway_stream_shard_owned";
/// Gauge per shard: entries in the publishing member's window.
pub const SHARD_WINDOW: &str = "keyway_stream_shard_window_messages";
/// Counter: entries by `outcome` (`delivered`, `redelivered`, `retried`, `acked`,
/// `dead_lettered`, `refused_ack`, `handler_panicked`, `trimmed_while_pending`).
pub const MESSAGES_TOTAL: &str = "keyway_stream_messages_total";
/// Counter: lease events by `event` (`acquired`, `taken_over`, `released`, `lost`).
pub const LEASES_TOTAL: &str = "keyway_stream_leases_total";
/// Counter: stalls reported.
pub const STALLS_TOTAL: &str = "keyway_stream_stalls_total";
/// Gauge per shard: entries of quarantined keys the publishing member holds back.
pub const SHARD_HELD: &str = "keyway_stream_shard_held_messages";
/// Gauge per shard: the shard's quarantined keys (as stored in Redis).
pub const SHARD_QUARANTINED: &str = "keyway_stream_shard_quarantined_keys";
/// Counter: keys by `event` (`quarantined`: an entry of the key exhausted its attempts under
/// the quarantine policy; `released`: a release of the key was seen and its entries ran again).
pub const KEYS_TOTAL: &str = "keyway_stream_keys_total";
/// Histogram: the time from an entry's append (its id) to the success of its handler,
/// seconds. Recorded as entries are handled, by the consumer itself (not by [`publish`]):
/// install the recorder before building the consumer.
pub const APPEND_TO_HANDLED: &str = "keyway_stream_append_to_handled_seconds";

/// Sets the series of `stats`, a snapshot taken by member `member` of `group` consuming
/// `topic` (its [`member_id`](crate::stream::StreamConsumer::member_id)).
pub fn publish(stats: &StreamStats, topic: &str, group: &str, member: &str) {
    describe();
    let (topic, group) = (topic.to_owned(), group.to_owned());
    for s in &stats.shards {
        let shard = s.shard.to_string();
        let labels = [
            ("topic", topic.clone()),
            ("group", group.clone()),
            ("shard", shard),
        ];
        let gauge = |name: &'static str, v: f64| metrics::gauge!(name, &labels).set(v);
        gauge(SHARD_LAG, s.lag.unwrap_or(0) as f64);
        gauge(SHARD_PENDING, s.pending as f64);
        gauge(
            SHARD_OLDEST_PENDING,
            s.oldest_pending_age.map_or(0.0, |d| d.as_secs_f64()),
        );
        gauge(SHARD_EPOCH, s.epoch as f64);
        let owned = s.owner.as_deref() == Some(member);
        gauge(SHARD_OWNED, if owned { 1.0 } else { 0.0 });
        gauge(SHARD_WINDOW, s.window as f64);
        gauge(SHARD_HELD, s.held as f64);
        gauge(SHARD_QUARANTINED, s.quarantined.len() as f64);
    }
    let counter = |name: &'static str, label: &'static str, value: &'static str, v: u64| {
        metrics::counter!(name, "topic" => topic.clone(), "group" => group.clone(), label => value)
            .absolute(v)
    };
    let messages = [
        ("delivered", stats.delivered),
        ("redelivered", stats.redeliveries),
        ("retried", stats.retries),
        ("acked", stats.acked),
        ("dead_lettered", stats.dead_lettered),
        ("refused_ack", stats.refused_acks),
        ("handler_panicked", stats.handler_panics),
        ("trimmed_while_pending", stats.trimmed_while_pending),
    ];
    for (outcome, v) in messages {
        counter(MESSAGES_TOTAL, "outcome", outcome, v);
    }
    let leases = [
        ("acquired", stats.acquisitions),
        ("taken_over", stats.takeovers),
        ("released", stats.releases),
        ("lost", stats.leases_lost),
    ];
    for (event, v) in leases {
        counter(LEASES_TOTAL, "event", event, v);
    }
    for (event, v) in [
        ("quarantined", stats.quarantined),
        ("released", stats.released),
    ] {
        counter(KEYS_TOTAL, "event", event, v);
    }
    metrics::counter!(STALLS_TOTAL, "topic" => topic.clone(), "group" => group.clone())
        .absolute(stats.stalls);
}

fn describe() {
    metrics::describe_gauge!(
        SHARD_LAG,
        Unit::Count,
        "Entries not yet delivered to the group"
    );
    metrics::describe_gauge!(
        SHARD_PENDING,
        Unit::Count,
        "Entries delivered and not acknowledged"
    );
    metrics::describe_gauge!(
        SHARD_OLDEST_PENDING,
        Unit::Seconds,
        "Age of the oldest pending entry"
    );
    metrics::describe_gauge!(SHARD_EPOCH, Unit::Count, "The shard lease's epoch");
    metrics::describe_gauge!(SHARD_OWNED, Unit::Count, "1 if this member holds the shard");
    metrics::describe_gauge!(SHARD_WINDOW, Unit::Count, "Entries in this member's window");
    metrics::describe_counter!(MESSAGES_TOTAL, Unit::Count, "Entries by outcome");
    metrics::describe_counter!(LEASES_TOTAL, Unit::Count, "Lease events");
    metrics::describe_counter!(STALLS_TOTAL, Unit::Count, "Stalls reported");
    metrics::describe_gauge!(
        SHARD_HELD,
        Unit::Count,
        "Entries of quarantined keys this member holds back"
    );
    metrics::describe_gauge!(SHARD_QUARANTINED, Unit::Count, "Quarantined keys");
    metrics::describe_counter!(KEYS_TOTAL, Unit::Count, "Keys quarantined and released");
}

/// The append-to-handled histogram of a consumer of `topic` in `group` (labels `topic`,
/// `group`).
pub(crate) fn append_to_handled(topic: &str, group: &str) -> metrics::Histogram {
    metrics::describe_histogram!(
        APPEND_TO_HANDLED,
        Unit::Seconds,
        "Time from an entry's append to its handler's success"
    );
    metrics::histogram!(APPEND_TO_HANDLED, "topic" => topic.to_owned(), "group" => group.to_owned())
}
