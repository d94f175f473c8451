//! `pec`: produce-execute-consume. The producing thread dispatches every
//! task to a plain pool: the `crossbeam-pool` peer of `throughput`
//! (available-parallelism threads on one MPMC channel), the plainest
//! "always dispatch to a pool" there is. Buffers are consumed on another
//! core than the one that wrote them.

use super::StrategySystem;
use crate::systems::crossbeam_pool::CrossbeamPool;
use crate::systems::TaskPool;
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
        Ok(Self {
            run,
            pool: CrossbeamPool::build(threads)?,
        })
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
