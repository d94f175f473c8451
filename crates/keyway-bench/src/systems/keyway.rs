//! `keyway`: one pool per run (core threads = available parallelism).
//!
//! `contexts` submits through `Pool::lane(ctx)` handles made before timing
//! (the look-up-free path SPEC §3 provides for hot callers); measured against
//! `Pool::execute_sequential(ctx, …)` on this machine, lanes were as fast for
//! 16 contexts and ~10% faster for 1,024 contexts. `throughput` uses
//! `Pool::execute`.

use keyway::{Lane, Pool};

use super::{ContextsSystem, TaskPool};
use crate::work::{context_task, ContextsRun};

fn build_pool(threads: usize) -> Result<Pool, String> {
    Pool::builder()
        .core_threads(threads)
        .build()
        .map_err(|e| format!("building the keyway pool: {e}"))
}

/// A keyway pool and one lane handle per context.
pub struct KeywayLanes {
    run: &'static ContextsRun,
    pool: Pool,
    lanes: Vec<Lane<usize>>,
}

impl ContextsSystem for KeywayLanes {
    const NAME: &'static str = "keyway";

    fn setup(run: &'static ContextsRun, threads: usize) -> Result<Self, String> {
        let pool = build_pool(threads)?;
        let lanes = (0..run.contexts()).map(|ctx| pool.lane(ctx)).collect();
        Ok(Self { run, pool, lanes })
    }

    fn feed(&mut self) -> Result<(), String> {
        let (run, lanes) = (self.run, &self.lanes);
        run.produce(|ctx, seq| {
            lanes[ctx]
                .execute(move || context_task(run, ctx, seq))
                .map_err(|_| format!("keyway rejected task {seq} of context {ctx}"))
        })
    }

    fn teardown(self) -> Result<(), String> {
        drop(self.lanes);
        self.pool.shutdown();
        Ok(())
    }
}

/// A keyway pool taking plain tasks.
pub struct KeywayPool(Pool);

impl TaskPool for KeywayPool {
    const NAME: &'static str = "keyway";

    fn build(threads: usize) -> Result<Self, String> {
        build_pool(threads).map(KeywayPool)
    }

    fn submit<F: FnOnce() + Send + 'static>(&self, task: F) -> Result<(), String> {
        self.0
            .execute(task)
            .map_err(|_| "keyway rejected a task".to_string())
    }

    fn shutdown(self) {
        self.0.shutdown();
    }
}
