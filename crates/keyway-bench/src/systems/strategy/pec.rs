//! `pec`: produce-execute-consume. The producing thread dispatches every
//! task to a plain pool: the `crossbeam-pool` peer of `throughput`
//! (available-parallelism threads on one MPMC channel), the plainest
//! "always dispatch to a pool" there is. Buffers are consumed on another
//! core than the one that wrote them.
//!
//! The queue is bounded at [`QUEUE_PER_THREAD`] tasks per pool thread, as a
//! competent user would bound a pipeline of 16 KiB buffers: with an
//! unbounded queue a producer faster than its consumers piles up a backlog
//! (1,000–1,950 tasks, 16–30 MB, seen under CPU contention) that costs it
//! allocation and cache misses no real deployment would accept.

use super::StrategySystem;
use crate::systems::crossbeam_pool::CrossbeamPool;
use crate::systems::TaskPool;

/// Queue slots per pool thread.
pub const QUEUE_PER_THREAD: usize = 4;
use crate::work::strategy::{consume, fill, StrategyRun};

/// Every task goes to a crossbeam-channel pool.
#[derive(Debug)]
pub struct ProduceExecuteConsume {
    run: &'static StrategyRun,
    pool: CrossbeamPool,
}

impl StrategySystem for ProduceExecuteConsume {
    const NAME: &'static str = "pec";

    fn setup(run: &'static StrategyRun, threads: usize) -> Result<Self, String> {
        let threads = threads.max(1);
        let pool = CrossbeamPool::bounded(threads, QUEUE_PER_THREAD * threads)?;
        pool.warm()?;
        Ok(Self { run, pool })
    }

    fn feed(&mut self) -> Result<(), String> {
        let run = self.run;
        for task in 0..run.tasks {
            let buf = fill(task);
            self.pool.submit(move || consume(run, task, &buf))?;
        }
        Ok(())
    }

    fn teardown(self) -> Result<Option<keyway::ModeCounts>, String> {
        self.pool.shutdown();
        Ok(None)
    }
}

#[cfg(test)]
impl ProduceExecuteConsume {
    /// How many tasks the queue holds at most.
    pub fn queue_capacity(&self) -> Option<usize> {
        self.pool.capacity()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::work::strategy::{Mix, StrategyRun};
    use std::sync::{Arc, Barrier};

    /// The pec queue is bounded at a small multiple of its threads: with
    /// every worker held, exactly that many tasks queue and the next is
    /// refused (a blocking `submit` would wait).
    #[test]
    fn pec_queue_is_bounded() {
        let threads = 2;
        let run = Box::leak(Box::new(StrategyRun::new(
            StrategyRun::leak_slots(1),
            Mix::NonBlocking,
        )));
        let pec = ProduceExecuteConsume::setup(run, threads).unwrap();
        let capacity = QUEUE_PER_THREAD * threads;
        assert_eq!(pec.queue_capacity(), Some(capacity));
        let hold = Arc::new(Barrier::new(threads + 1));
        for _ in 0..threads {
            let hold = Arc::clone(&hold);
            pec.pool
                .submit(move || {
                    hold.wait();
                    hold.wait();
                })
                .unwrap();
        }
        hold.wait(); // every worker is inside a held task
        for i in 0..capacity {
            assert!(pec.pool.try_submit(Box::new(|| ())).is_ok(), "slot {i}");
        }
        assert!(pec.pool.try_submit(Box::new(|| ())).is_err());
        hold.wait();
        pec.pool.shutdown();
    }
}
