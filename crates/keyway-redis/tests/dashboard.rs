//! The Grafana dashboard in the repository reads only series keyway exports: every metric
//! name in every panel query is one of `keyway::metric_names` or `keyway_redis::metrics`
//! (a histogram's `_bucket`, `_count` and `_sum` series counting as the histogram).
#![cfg(feature = "metrics")]

use keyway::metric_names as pool;
use keyway_redis::metrics as stream;

const EXPORTED: &[&str] = &[
    pool::QUEUE_WAIT,
    pool::RUN_TIME,
    pool::OLDEST_WAITING,
    pool::LONGEST_RUNNING,
    pool::TASKS_TOTAL,
    pool::TASKS,
    pool::THREADS,
    pool::LANES,
    pool::DEEPEST_LANE,
    stream::SHARD_LAG,
    stream::SHARD_PENDING,
    stream::SHARD_OLDEST_PENDING,
    stream::SHARD_EPOCH,
    stream::SHARD_OWNED,
    stream::SHARD_WINDOW,
    stream::MESSAGES_TOTAL,
    stream::LEASES_TOTAL,
    stream::STALLS_TOTAL,
    stream::SHARD_HELD,
    stream::SHARD_QUARANTINED,
    stream::KEYS_TOTAL,
    stream::APPEND_TO_HANDLED,
];

/// Every `keyway_…` identifier in `expr`.
fn names(expr: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = expr;
    while let Some(at) = rest.find("keyway_") {
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        out.push(tail[..end].to_owned());
        rest = &tail[end..];
    }
    out
}

fn exported(name: &str) -> bool {
    EXPORTED.contains(&name)
        || ["_bucket", "_count", "_sum"].iter().any(|suffix| {
            name.strip_suffix(suffix).is_some_and(|base| {
                [pool::QUEUE_WAIT, pool::RUN_TIME, stream::APPEND_TO_HANDLED].contains(&base)
            })
        })
}

#[test]
fn every_dashboard_query_names_an_exported_metric() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/grafana/keyway.json"
    );
    let text = std::fs::read_to_string(path).expect("docs/grafana/keyway.json");
    let dash: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
    let panels = dash["panels"].as_array().expect("panels");
    let mut queries = 0;
    let mut used = Vec::new();
    for p in panels {
        for t in p["targets"].as_array().expect("targets") {
            let expr = t["expr"].as_str().expect("a query");
            let found = names(expr);
            assert!(
                !found.is_empty(),
                "panel {:?}: no keyway metric in {expr:?}",
                p["title"]
            );
            for n in found {
                assert!(
                    exported(&n),
                    "panel {:?} reads {n}, which keyway does not export",
                    p["title"]
                );
                used.push(n);
            }
            queries += 1;
        }
    }
    assert!(queries >= 10, "{queries} queries");
    // And the dashboard shows every exported series.
    for e in EXPORTED {
        assert!(
            used.iter()
                .any(|u| u == e || u.starts_with(&format!("{e}_"))),
            "no panel shows {e}"
        );
    }
}

#[test]
fn the_name_check_catches_a_name_that_is_not_exported() {
    assert!(!exported("keyway_pool_task_queue_wait"));
    assert!(exported("keyway_pool_task_queue_wait_seconds_bucket"));
    assert!(!exported("keyway_stream_shard_lag_messages_bucket"));
    assert_eq!(
        names("rate(keyway_a_b[5m]) + keyway_c"),
        ["keyway_a_b", "keyway_c"]
    );
}
