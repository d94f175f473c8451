//! What the pool asks of a lane table ([`TableOps`]): the drain of `shutdown_now`, the
//! monitor's sweeps of the idle cache (rule 3), and the counts `Stats` reads. The look-ups and
//! pushes are in `table.rs`; see `README.md` beside this file for the rules cited here.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::table::{LaneKind, LaneTable};
use crate::engine::{LaneDepth, TableOps, Watch, Watched};
use crate::task::PendingTask;

impl<S: LaneKind> TableOps for LaneTable<S> {
    fn drain(&self, out: &mut Vec<PendingTask>) {
        for shard in self.shards() {
            let mut map = shard.lock();
            for lane in map.lanes.iter() {
                let mut st = lane.state.lock();
                // Not the table's last reference: the caller holds one.
                st.table = None;
                while let Some(entry) = st.queue.pop_front() {
                    S::hand_back(lane, entry, out);
                }
            }
            let freed: Vec<_> = map
                .lanes
                .extract_if(|l| l.pins.load(Ordering::Acquire) == 0)
                .collect();
            map.cached = 0; // pinned lanes are never cached
            map.oldest = u64::MAX;
            self.live.fetch_sub(freed.len(), Ordering::Relaxed);
            map.shrink();
            // A lane's key (and a typed lane's keyed state) is user code: dropped unlocked.
            drop(map);
            drop(freed);
        }
    }

    fn sweep_idle(&self) {
        self.free_cached(None);
    }

    fn sweep_expired(&self) {
        if self.keep_sweeps == u64::MAX {
            return; // kept until shutdown
        }
        let sweep = self.sweeps.fetch_add(1, Ordering::Relaxed) + 1;
        self.free_cached(Some(sweep));
    }

    fn live_lanes(&self) -> usize {
        self.live.load(Ordering::Relaxed)
    }

    fn scan_deep(&self, cursor: usize, deep: usize, watch: &Watch) {
        self.scan_shard(cursor, deep, watch);
    }

    fn deepest(&self, n: usize, out: &mut Vec<(LaneDepth, Arc<dyn Watched>)>) {
        let start = out.len();
        for shard in self.shards() {
            for lane in shard.lock().lanes.iter() {
                let queued = {
                    let st = lane.state.lock();
                    st.queue.len() + st.held
                };
                if queued > 0 {
                    let depth = LaneDepth {
                        context_hash: lane.hash,
                        queued,
                        label: None,
                    };
                    out.push((depth, lane.clone()));
                }
            }
            // Keep only the deepest `n` of this table as we go.
            if out.len() - start > 4 * n {
                out[start..].sort_by_key(|(d, _)| std::cmp::Reverse(d.queued));
                out.truncate(start + n);
            }
        }
    }
}

impl<S: LaneKind> LaneTable<S> {
    /// Rule 3: frees the cached lanes, every one (`sweep` `None`: shutdown), or those idle for
    /// `keep_sweeps` whole periods at the monitor's look number `sweep`.
    fn free_cached(&self, sweep: Option<u64>) {
        // A lane marked `mark` has seen `sweep - mark + 1` looks, this one included.
        let expired =
            |mark: u64| sweep.is_none_or(|sweep| sweep.saturating_sub(mark) >= self.keep_sweeps);
        for shard in self.shards() {
            let mut map = shard.lock();
            if map.cached == 0 || !expired(map.oldest) {
                continue;
            }
            let (mut kept, mut oldest) = (0, u64::MAX);
            let freed: Vec<_> = map
                .lanes
                .extract_if(|l| match l.cached.load(Ordering::Relaxed) {
                    0 => false,
                    mark if expired(mark) => true,
                    mark => {
                        kept += 1;
                        oldest = oldest.min(mark);
                        false
                    }
                })
                .collect();
            map.cached = kept;
            map.oldest = oldest;
            self.live.fetch_sub(freed.len(), Ordering::Relaxed);
            map.shrink();
            // A lane's key (and a typed lane's keyed state) is user code: dropped unlocked.
            drop(map);
            drop(freed);
        }
    }
}
