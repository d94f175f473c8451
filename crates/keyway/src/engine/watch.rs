//! The watch list: a bounded set of lanes found deeper than a turn's batch, which `stats` and
//! `metrics` read instead of every lane once a pool has many.
//!
//! The list is kept only while the pool has more live lanes than `Stats` walks (the monitor
//! and every `stats` call say so, [`Watch::want`]): with fewer, noting a lane is one load of a
//! flag that is not written while the count stays on one side. A lane is noted when its
//! runner used up a whole turn's batch and left entries behind (the branch where the turn
//! gives the rest back and queues the lane again): a lane that empties within its turn is
//! never noted, so a pool whose lanes keep up pays nothing. The monitor
//! also scans one shard of each lane table a period and notes the lanes deeper than a batch
//! there (a lane piling up behind a busy pool before it ever ran). The list is
//! direct-mapped on the lane's hash (`SLOTS` slots): noting a lane already there is a load and a
//! compare; a lane whose slot holds another takes it over (the newest deep lane wins). Reading
//! it locks each listed lane once: its cost does not depend on how many lanes exist.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use parking_lot::Mutex;

use super::label::{Labels, LaneLabel};
use super::stats::LaneDepth;

/// Slots of the watch list.
const SLOTS: usize = 32;

/// A lane as the watch list sees it.
pub(crate) trait Watched: Send + Sync {
    fn context_hash(&self) -> u64;
    /// Tasks queued in the lane (not counting one that runs).
    fn queued(&self) -> usize;
    /// The lane's key printed, if `labels` knows its type (user code: call it outside every
    /// lock of the pool).
    fn label(&self, labels: &Labels) -> Option<LaneLabel>;
}

/// Labels the listed lanes (`lanes[i]` is `listed[i]`'s lane), outside every lock.
pub(crate) fn label_listed(listed: &mut [LaneDepth], lanes: &[Arc<dyn Watched>], labels: &Labels) {
    for (depth, lane) in listed.iter_mut().zip(lanes) {
        depth.label = lane.label(labels);
    }
}

/// The watch list of one pool.
pub(crate) struct Watch {
    /// Whether the list is kept (the pool has more live lanes than `Stats` walks).
    wanted: AtomicBool,
    /// The hash of each slot's lane (0 with an empty slot, or a lane whose hash is 0: then
    /// noting it takes the lock, nothing worse).
    hashes: Box<[AtomicU64]>,
    lanes: Box<[WatchedLane]>,
}

/// One slot: the lane it watches, if any.
type WatchedLane = Mutex<Option<Weak<dyn Watched>>>;

impl Watch {
    pub(crate) fn new() -> Self {
        Watch {
            wanted: AtomicBool::new(false),
            hashes: (0..SLOTS).map(|_| AtomicU64::new(0)).collect(),
            lanes: (0..SLOTS).map(|_| Mutex::new(None)).collect(),
        }
    }

    /// Keeps the list (`true`: the pool has more live lanes than `Stats` walks) or stops
    /// noting lanes (what is listed stays, and is read only when wanted again). Written only
    /// when it changes, so that noting reads a line nobody writes.
    pub(crate) fn want(&self, on: bool) {
        if self.wanted.load(Ordering::Relaxed) != on {
            self.wanted.store(on, Ordering::Relaxed);
        }
    }

    /// Whether the list is kept.
    pub(crate) fn wanted(&self) -> bool {
        self.wanted.load(Ordering::Relaxed)
    }

    /// `lane` used up a turn's batch with entries left: watch it, if the list is kept.
    #[inline]
    pub(crate) fn note<L: Watched + 'static>(&self, lane: &Arc<L>) {
        if !self.wanted.load(Ordering::Relaxed) {
            return;
        }
        let hash = lane.context_hash();
        let slot = (hash % SLOTS as u64) as usize;
        if hash != 0 && self.hashes[slot].load(Ordering::Relaxed) == hash {
            return;
        }
        self.take_slot(slot, hash, Arc::downgrade(lane) as Weak<dyn Watched>);
    }

    #[cold]
    fn take_slot(&self, slot: usize, hash: u64, lane: Weak<dyn Watched>) {
        let old = self.lanes[slot].lock().replace(lane);
        self.hashes[slot].store(hash, Ordering::Relaxed);
        // A lane's last reference may go here: dropped outside the slot's lock.
        drop(old);
    }

    /// The watched lanes with entries queued, deepest first, at most `n`, labelled.
    pub(crate) fn deepest(&self, n: usize, labels: &Labels) -> Vec<LaneDepth> {
        let lanes: Vec<Arc<dyn Watched>> = self
            .lanes
            .iter()
            .filter_map(|s| s.lock().as_ref().and_then(Weak::upgrade))
            .collect();
        let mut listed: Vec<(LaneDepth, Arc<dyn Watched>)> = lanes
            .into_iter()
            .map(|l| {
                let depth = LaneDepth {
                    context_hash: l.context_hash(),
                    queued: l.queued(),
                    label: None,
                };
                (depth, l)
            })
            .filter(|(d, _)| d.queued > 0)
            .collect();
        listed.sort_by_key(|(d, _)| std::cmp::Reverse(d.queued));
        listed.truncate(n);
        // The lanes (whose keys are user code) are labelled and dropped after every slot lock
        // is released.
        let (mut out, lanes): (Vec<_>, Vec<_>) = listed.into_iter().unzip();
        label_listed(&mut out, &lanes, labels);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    struct Fake(u64, AtomicUsize);
    impl Watched for Fake {
        fn context_hash(&self) -> u64 {
            self.0
        }
        fn queued(&self) -> usize {
            self.1.load(Ordering::Relaxed)
        }
        fn label(&self, labels: &Labels) -> Option<LaneLabel> {
            labels.of(&self.0)
        }
    }

    #[test]
    fn lists_the_deepest_live_lanes_and_forgets_freed_ones() {
        let watch = Watch::new();
        let unwanted = Arc::new(Fake(9, AtomicUsize::new(5)));
        watch.note(&unwanted);
        assert!(
            watch.deepest(8, &Labels::common()).is_empty(),
            "not kept: nothing noted"
        );
        watch.want(true);
        let lanes: Vec<_> = (1..=5u64)
            .map(|h| Arc::new(Fake(h, AtomicUsize::new(h as usize * 10))))
            .collect();
        for l in &lanes {
            watch.note(l);
            watch.note(l); // a second note changes nothing
        }
        let deepest = watch.deepest(3, &Labels::common());
        let hashes: Vec<u64> = deepest.iter().map(|d| d.context_hash).collect();
        assert_eq!(hashes, [5, 4, 3]);
        // Each listed lane is labelled by its key (here, its hash, a `u64`).
        assert_eq!(deepest[0].label.map(|l| l.to_string()), Some("5".into()));
        lanes[4].1.store(0, Ordering::Relaxed); // drained: not listed
        drop(lanes);
        assert!(
            watch.deepest(8, &Labels::common()).is_empty(),
            "freed lanes are not listed"
        );
        // A colliding lane takes the slot over.
        let a = Arc::new(Fake(7, AtomicUsize::new(1)));
        let b = Arc::new(Fake(7 + SLOTS as u64, AtomicUsize::new(2)));
        watch.note(&a);
        watch.note(&b);
        assert_eq!(
            watch.deepest(8, &Labels::common())[0].context_hash,
            7 + SLOTS as u64
        );
    }
}
