//! A lane table is freed once its handles are gone and its lanes are idle. A scheduled lane keeps
//! its table alive, so that its queued tasks still run after the last handle is dropped; an idle
//! lane does not (its table holds it, so a reference back would be a cycle). A table kept past
//! that point would keep its lanes, their keys and the typed handler forever: the counted keys,
//! the handler's token and the heap show it.

use crate::common::{self, Latch};
use crate::leaks::{all_freed, live_bytes, Counted, SLACK};

/// Keys per round: spread over every shard of a two-thread pool's tables (64 shards).
const KEYS: u64 = 512;

/// One pool's life: every key's lane activated and idle again (cached in its table), then work
/// queued on every key while the workers are held, the typed handle dropped while its lanes are
/// scheduled (they go idle after it), and the pool's last handle dropped on a worker (no wait)
/// while other lanes still run.
fn round() {
    let pool = common::fixed_pool(2);
    let token = Counted::new(u64::MAX);
    let ran = Latch::new(3 * KEYS as usize);
    let typed = {
        let ran = ran.clone();
        pool.typed_lanes(move |_key: &Counted, _msg: u64| {
            let _ = &token;
            ran.count_down();
        })
    };
    for i in 0..KEYS {
        let done = ran.clone();
        pool.execute_sequential(Counted::new(i), move || done.count_down())
            .unwrap();
        let done = ran.clone();
        let keys = [Counted::new(i), Counted::new(KEYS + i)];
        pool.execute_keyed(keys, move || done.count_down()).unwrap();
        typed.send(Counted::new(i), i).unwrap();
    }
    ran.wait();
    let gate = common::hold_workers(&pool, 2);
    for i in 0..KEYS {
        pool.execute_sequential(Counted::new(i), || ()).unwrap();
        let keys = [Counted::new(i), Counted::new(KEYS + i)];
        pool.execute_keyed(keys, || ()).unwrap();
        typed.send(Counted::new(i), i).unwrap();
    }
    drop(typed);
    let last = pool.clone();
    pool.execute_sequential(Counted::new(0), move || drop(last))
        .unwrap();
    drop(pool);
    gate.open();
}

#[test]
fn a_table_is_freed_when_its_lanes_go_idle_after_its_last_handle() {
    let _serial = crate::serial();
    let before = live_bytes();
    for _ in 0..20 {
        round();
    }
    // Counted keys and the handler's token; and the heap: a leaked closure table holds no
    // counted key once its idle lanes are swept, but its shards (64, two cache lines each) and
    // their hash tables stay, 20 rounds of them far above the slack.
    all_freed(
        "pools whose lanes went idle after their last handle",
        before,
        SLACK,
    );
}
