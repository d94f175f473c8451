//! `napart`: the registry's hashed-partition executor (napart 2.0), used as its README shows
//! for a standalone runner: a `PartitionExecutor` with `threads` (= available parallelism)
//! partitions on a multi-thread tokio runtime of as many workers, and one `submit_sync(key,
//! task)` per task. A key's tasks go to partition `hash(key)`, strictly FIFO there, so keys
//! sharing a partition wait behind each other; napart moves a backlogged partition's queue to
//! an idle one ("steal tunnels") but keeps each partition one order domain. The per-type queue
//! budget is set high enough (`u32::MAX`) that a producer submitting a whole run up front is
//! never refused.

use napart::PartitionExecutor;
use tokio::runtime::Runtime;

use super::ContextsSystem;
use crate::work::{context_task, ContextsRun};

/// Queued tasks one partition may hold: high enough for any run of this bench.
const QUEUE_CAPACITY: usize = u32::MAX as usize;

/// A napart standalone runner on its own tokio runtime.
pub struct Napart {
    run: &'static ContextsRun,
    runtime: Runtime,
    executor: PartitionExecutor,
}

impl ContextsSystem for Napart {
    const NAME: &'static str = "napart";

    fn setup(run: &'static ContextsRun, threads: usize) -> Result<Self, String> {
        // napart's runner keeps timers (its load observer): the runtime needs them enabled.
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .enable_all()
            .build()
            .map_err(|e| format!("building the tokio runtime: {e}"))?;
        let executor = {
            // The executor starts its partitions' workers on the runtime it is made in.
            let _inside = runtime.enter();
            PartitionExecutor::with_partitions_and_capacity(threads.max(1), QUEUE_CAPACITY)
        };
        Ok(Self {
            run,
            runtime,
            executor,
        })
    }

    fn feed(&mut self) -> Result<(), String> {
        let (run, executor) = (self.run, &self.executor);
        let _inside = self.runtime.enter();
        run.produce(|ctx, seq| {
            executor
                .submit_sync(ctx, move || context_task(run, ctx, seq))
                .map_err(|e| format!("napart refused task {seq} of context {ctx}: {e:?}"))
        })
    }

    fn teardown(self) -> Result<(), String> {
        let Self {
            runtime, executor, ..
        } = self;
        // Every task already ran (the run's latch opened): nothing may be lost at the stop.
        let report = runtime.block_on(executor.shutdown_with_report());
        drop(runtime);
        if report.aborted + report.frozen + report.cancelled > 0 {
            return Err(format!("napart's shutdown lost tasks: {report:?}"));
        }
        Ok(())
    }
}
