//! Bad configuration is a typed error naming the setting, never a panic.

use std::time::Duration;

use keyway::Pool;

fn error_of(builder: keyway::PoolBuilder) -> String {
    match builder.build() {
        Ok(_) => panic!("a bad configuration was accepted"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn bad_configurations_are_typed_errors() {
    let cases: Vec<(keyway::PoolBuilder, &str)> = vec![
        (Pool::builder().core_threads(0), "core_threads"),
        (Pool::builder().max_threads(0), "max_threads"),
        (
            Pool::builder().core_threads(4).max_threads(2),
            "greater than max_threads",
        ),
        (Pool::builder().keep_alive(Duration::ZERO), "keep_alive"),
        (
            Pool::builder().monitor_period(Duration::ZERO),
            "monitor_period",
        ),
        (
            Pool::builder().blocked_after(Duration::ZERO),
            "blocked_after",
        ),
        (Pool::builder().lane_batch(0), "lane_batch"),
        (Pool::builder().capacity(0), "capacity"),
        (Pool::builder().core_growth_after(0), "core_growth_after"),
    ];
    for (builder, expected) in cases {
        let msg = error_of(builder);
        assert!(
            msg.contains(expected),
            "error {msg:?} does not name {expected:?}"
        );
    }
}

#[test]
fn error_is_a_std_error_with_a_source_for_io() {
    fn is_error<E: std::error::Error + Send + Sync + 'static>(_: &E) {}
    let err = Pool::builder().core_threads(0).build().unwrap_err();
    is_error(&err);
}

#[test]
fn max_threads_alone_caps_the_default_core() {
    let pool = Pool::builder().max_threads(1).build().unwrap();
    assert_eq!(pool.stats().core_threads, 1);
    pool.shutdown();
}
