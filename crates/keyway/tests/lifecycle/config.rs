//! Bad configuration is a typed error naming the setting, never a panic.

use crate::common;

use std::time::Duration;

use common::finishes;
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

/// Every knob at its extremes: `build` returns a pool or a `BuildError`, never panics; a pool
/// that builds runs tasks and shuts down.
#[test]
fn builder_extremes_never_panic() {
    type Knob = fn(keyway::PoolBuilder) -> keyway::PoolBuilder;
    let big = usize::MAX;
    let cases: Vec<(&str, Knob)> = vec![
        ("max_threads(MAX)", |b| b.max_threads(usize::MAX)),
        ("core_threads(MAX / 2)", |b| b.core_threads(usize::MAX / 2)),
        ("core_threads(MAX)", |b| b.core_threads(usize::MAX)),
        ("core and max (MAX)", |b| {
            b.core_threads(usize::MAX).max_threads(usize::MAX)
        }),
        ("max_threads(1 << 40)", |b| b.max_threads(1 << 40)),
        ("max_threads(1 << 20)", |b| b.max_threads(1 << 20)),
        ("keep_alive(MAX)", |b| b.keep_alive(Duration::MAX)),
        ("keep_alive(ZERO)", |b| b.keep_alive(Duration::ZERO)),
        ("monitor_period(MAX)", |b| b.monitor_period(Duration::MAX)),
        ("blocked_after(MAX)", |b| b.blocked_after(Duration::MAX)),
        ("reserved_idle_timeout(MAX)", |b| {
            b.reserved_idle_timeout(Duration::MAX)
        }),
        ("lane_batch(MAX)", |b| b.lane_batch(usize::MAX)),
        ("capacity(MAX)", |b| b.capacity(usize::MAX)),
        ("capacity(0)", |b| b.capacity(0)),
        ("core_growth_after(MAX)", |b| {
            b.core_growth_after(usize::MAX)
        }),
        ("reserved_threads(MAX)", |b| b.reserved_threads(usize::MAX)),
        ("min_reserved_threads(MAX)", |b| {
            b.reserved_threads(usize::MAX)
                .min_reserved_threads(usize::MAX)
        }),
        ("min_reserved_threads(MAX) alone", |b| {
            b.min_reserved_threads(usize::MAX)
        }),
        ("thread_name with NUL", |b| b.thread_name("bad\0name")),
        ("thread_name empty", |b| b.thread_name("")),
    ];
    let _ = big;
    for (name, knob) in cases {
        let outcome = finishes(name, move || {
            let built = std::panic::catch_unwind(|| knob(Pool::builder().core_threads(1)).build());
            let pool = match built {
                Err(_) => return Err(format!("{name}: build panicked")),
                Ok(Err(e)) => {
                    assert!(!e.to_string().is_empty());
                    return Ok(());
                }
                Ok(Ok(pool)) => pool,
            };
            assert_eq!(pool.submit(|| 1).unwrap().join().unwrap(), 1, "{name}");
            assert_eq!(
                pool.submit_sequential(7, || 2).unwrap().join().unwrap(),
                2,
                "{name}"
            );
            let _ = pool.try_execute(|| ());
            pool.shutdown();
            Ok(())
        });
        if let Err(why) = outcome {
            panic!("{why}");
        }
    }
}

/// Huge thread counts are refused with an error naming the setting.
#[test]
fn huge_thread_counts_are_build_errors() {
    for (builder, setting) in [
        (Pool::builder().max_threads(usize::MAX), "max_threads"),
        (Pool::builder().core_threads(usize::MAX / 2), "core_threads"),
        (
            Pool::builder().core_threads(1 << 30).max_threads(1 << 30),
            "core_threads",
        ),
    ] {
        let err = builder.build().unwrap_err();
        assert!(err.to_string().contains(setting), "{err}");
    }
}

#[test]
fn join_timeout_max_does_not_panic() {
    finishes("join_timeout(MAX)", || {
        let pool = Pool::new().unwrap();
        let handle = pool.submit(|| 5).unwrap();
        assert_eq!(handle.join_timeout(Duration::MAX).ok().unwrap().unwrap(), 5);
        let gate = common::hold_workers(&pool, pool.stats().core_threads);
        let slow = pool.submit(|| 6).unwrap();
        let slow = slow.join_timeout(Duration::ZERO).unwrap_err();
        gate.open();
        assert_eq!(slow.join_timeout(Duration::MAX).ok().unwrap().unwrap(), 6);
        pool.shutdown();
    });
}
