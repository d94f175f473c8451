//! loom model of a pinned lane keeping its table reference across idle turns (`README.md`,
//! *Ownership*; `LaneState::turn_idle`): a runner turning the lane idle reads the pin count
//! under the lane lock and, pinned, keeps the reference for the next activation instead of
//! dropping it; the last `Lane` handle's unpin (pin count to zero under the shard lock, then
//! `remove_if_idle` under the lane lock) drops a kept reference. The reference is modelled by a
//! count of live table references: whatever the interleaving of pushes, the runner and the
//! unpin, once all are done the lane holds none (no `Arc` cycle: the table would leak), the lane
//! is idle with nothing queued, and every entry ran once.
//!
//! Run with `RUSTFLAGS="--cfg loom" cargo test --release -p keyway --lib loom`.
//!
//! Deliberate breaks tried when this model was written: an unpin that drops no kept reference,
//! and a runner that keeps the reference whatever the pin count, both fail
//! `loom_unpin_vs_idle_turn_keeps_no_reference` (the lane holds a reference at the end).

use crate::loom::sync::atomic::{AtomicUsize, Ordering};
use crate::loom::sync::{Arc, Mutex};
use crate::loom::thread;

/// A table reference: counted in `World::refs` while it lives.
struct TableRef(Arc<World>);

impl TableRef {
    fn new(world: &Arc<World>) -> TableRef {
        world.refs.fetch_add(1, Ordering::AcqRel);
        TableRef(world.clone())
    }
}

impl Drop for TableRef {
    fn drop(&mut self) {
        self.0.refs.fetch_sub(1, Ordering::AcqRel);
    }
}

struct LaneSt {
    queue: Vec<u32>,
    /// Rule 1: `Some` iff scheduled.
    table: Option<TableRef>,
    kept: Option<TableRef>,
}

struct World {
    shard: Mutex<()>,
    lane: Mutex<LaneSt>,
    pins: AtomicUsize,
    /// Table references held by the lane (`table` and `kept`).
    refs: AtomicUsize,
    ran: Mutex<Vec<u32>>,
}

fn world() -> Arc<World> {
    Arc::new(World {
        shard: Mutex::new(()),
        lane: Mutex::new(LaneSt {
            queue: Vec::new(),
            table: None,
            kept: None,
        }),
        pins: AtomicUsize::new(1), // one `Lane` handle
        refs: AtomicUsize::new(0),
        ran: Mutex::new(Vec::new()),
    })
}

/// `LaneCore::push` on a pinned lane (`LaneState::schedule`): true if it turned the lane from
/// idle to scheduled (the caller then runs it).
fn push(world: &Arc<World>, id: u32) -> bool {
    let mut st = world.lane.lock();
    st.queue.push(id);
    if st.table.is_some() {
        return false;
    }
    st.table = Some(match st.kept.take() {
        Some(kept) => kept,
        None => TableRef::new(world),
    });
    true
}

/// `run_batch`: runs the lane until it is empty, then turns it idle (`LaneState::turn_idle`)
/// and releases the reference it did not keep (`LaneCore::release`, then `remove_if_idle`).
fn run_lane(world: &Arc<World>) {
    loop {
        let mut st = world.lane.lock();
        if st.queue.is_empty() {
            let pinned = world.pins.load(Ordering::Acquire) > 0;
            let table = st.table.take();
            let release = if pinned && st.kept.is_none() {
                st.kept = table;
                None
            } else {
                if !pinned {
                    st.kept = None;
                }
                table
            };
            drop(st);
            if let Some(table) = release {
                if world.pins.load(Ordering::Acquire) == 0 {
                    let _map = world.shard.lock();
                    remove_if_idle(world);
                }
                drop(table);
            }
            return;
        }
        let id = st.queue.remove(0);
        drop(st);
        world.ran.lock().push(id);
    }
}

/// `LaneTable::remove_if_idle` as far as references go: an unpinned lane keeps none.
fn remove_if_idle(world: &World) {
    if world.pins.load(Ordering::Acquire) > 0 {
        return;
    }
    world.lane.lock().kept = None;
}

/// `LaneCore::unpin`: the last handle goes.
fn unpin(world: &World) {
    let _map = world.shard.lock();
    if world.pins.fetch_sub(1, Ordering::AcqRel) == 1 {
        remove_if_idle(world);
    }
}

/// The last `Lane` handle is dropped while its lane runs, turns idle, and is pushed to again.
#[test]
fn loom_unpin_vs_idle_turn_keeps_no_reference() {
    crate::loom::model(|| {
        let world = world();
        assert!(push(&world, 0));
        let runner = {
            let world = world.clone();
            thread::spawn(move || run_lane(&world))
        };
        let handle = {
            let world = world.clone();
            thread::spawn(move || {
                // The handle's last push, then its drop.
                if push(&world, 1) {
                    run_lane(&world);
                }
                unpin(&world);
            })
        };
        runner.join().unwrap();
        handle.join().unwrap();
        let st = world.lane.lock();
        assert!(st.queue.is_empty(), "an entry was stranded");
        assert!(
            st.table.is_none(),
            "the lane stayed scheduled with no runner"
        );
        assert!(
            st.kept.is_none(),
            "an unpinned lane kept its table reference"
        );
        drop(st);
        assert_eq!(world.refs.load(Ordering::Acquire), 0, "a reference leaked");
        assert_eq!(*world.ran.lock(), [0, 1]);
    });
}

/// While pinned, a lane that goes idle and is activated again reuses its kept reference: one
/// reference in all, never a second.
#[test]
fn loom_pinned_lane_reuses_its_kept_reference() {
    crate::loom::model(|| {
        let world = world();
        assert!(push(&world, 0));
        let runner = {
            let world = world.clone();
            thread::spawn(move || run_lane(&world))
        };
        if push(&world, 1) {
            run_lane(&world);
        }
        runner.join().unwrap();
        assert_eq!(world.refs.load(Ordering::Acquire), 1, "one reference, kept");
        assert!(world.lane.lock().kept.is_some());
        unpin(&world);
        assert_eq!(
            world.refs.load(Ordering::Acquire),
            0,
            "the unpin dropped it"
        );
    });
}
