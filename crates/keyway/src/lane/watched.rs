//! A lane as the pool's watch list and snapshots see it (the engine's `watch.rs`): its hash,
//! depth and label, and the monitor's scan of one shard for lanes deeper than a turn's batch.

use super::table::{LaneCore, LaneKind, LaneTable};
use crate::engine::{Labels, LaneLabel, Watch, Watched};

impl<S: LaneKind> Watched for LaneCore<S> {
    fn context_hash(&self) -> u64 {
        self.hash
    }

    fn queued(&self) -> usize {
        let st = self.state.lock();
        st.queue.len() + st.held
    }

    fn label(&self, labels: &Labels) -> Option<LaneLabel> {
        labels.of(self.key.get())
    }
}

impl<S: LaneKind> LaneTable<S> {
    /// Puts the lanes of shard `cursor` (modulo the shard count) with more than `deep` entries
    /// on `watch`. Each lane's lock is taken alone, under the shard lock (the lock order).
    pub(super) fn scan_shard(&self, cursor: usize, deep: usize, watch: &Watch) {
        let n = self.shards().count();
        let Some(shard) = self.shards().nth(cursor % n.max(1)) else {
            return;
        };
        let deep: Vec<_> = shard
            .lock()
            .lanes
            .iter()
            .filter(|l| l.queued() > deep)
            .cloned()
            .collect();
        for lane in &deep {
            watch.note(lane);
        }
        // Lanes are dropped (their keys are user code) after the shard lock is released.
        drop(deep);
    }
}
