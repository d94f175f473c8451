//! Unit tests of the face: the builder's defaults.

use super::PoolBuilder;

#[test]
fn defaults_follow_the_spec() {
    let c = PoolBuilder::new().into_config().unwrap();
    let available = std::thread::available_parallelism().map_or(1, |n| n.get());
    assert_eq!(c.core_threads, available);
    assert!(c.max_threads >= 16 && c.max_threads >= c.core_threads);
    assert_eq!(c.keep_alive, std::time::Duration::from_secs(10));
    assert_eq!(c.monitor_period, std::time::Duration::from_millis(250));
    assert_eq!(c.blocked_after, std::time::Duration::from_millis(250));
    assert_eq!(c.core_growth_after, 10);
    assert_eq!(c.capacity, None);
}
