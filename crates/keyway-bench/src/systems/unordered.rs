//! The `contexts` work without key order, for the ordering tax: `keyway-unordered` submits
//! each task with `Pool::execute` (no lane) and `tokio` spawns each as its own tokio task
//! (`Handle::spawn`, from the producer outside the runtime). Tasks of a context may run at
//! once and in any order, so a run is checked for completeness only (each context counts its
//! tasks; the last one counts the context done).

use keyway::Pool;
use tokio::runtime::{Handle, Runtime};

use super::{tokio_runtime, ContextsSystem};
use crate::work::{unordered_context_task, ContextsRun};

/// A keyway pool running every task as a plain task.
pub struct KeywayUnordered {
    run: &'static ContextsRun,
    pool: Pool,
}

impl ContextsSystem for KeywayUnordered {
    const NAME: &'static str = "keyway-unordered";

    fn setup(run: &'static ContextsRun, threads: usize) -> Result<Self, String> {
        let pool = Pool::builder()
            .core_threads(threads)
            .build()
            .map_err(|e| format!("building the keyway pool: {e}"))?;
        Ok(Self { run, pool })
    }

    fn feed(&mut self) -> Result<(), String> {
        let (run, pool) = (self.run, &self.pool);
        run.produce(|ctx, seq| {
            pool.execute(move || unordered_context_task(run, ctx, seq))
                .map_err(|_| format!("keyway rejected task {seq} of context {ctx}"))
        })
    }

    fn teardown(self) -> Result<(), String> {
        self.pool.shutdown();
        Ok(())
    }
}

/// A tokio runtime spawning a task per task.
pub struct TokioUnordered {
    run: &'static ContextsRun,
    runtime: Runtime,
    handle: Handle,
}

impl ContextsSystem for TokioUnordered {
    const NAME: &'static str = "tokio";

    fn setup(run: &'static ContextsRun, threads: usize) -> Result<Self, String> {
        let runtime = tokio_runtime(threads)?;
        let handle = runtime.handle().clone();
        Ok(Self {
            run,
            runtime,
            handle,
        })
    }

    fn feed(&mut self) -> Result<(), String> {
        let (run, handle) = (self.run, &self.handle);
        run.produce(|ctx, seq| {
            // Fire and forget, as the other systems' submits.
            drop(handle.spawn(async move { unordered_context_task(run, ctx, seq) }));
            Ok(())
        })
    }

    fn teardown(self) -> Result<(), String> {
        drop(self.handle);
        drop(self.runtime);
        Ok(())
    }
}
