//! `keyway`: one pool per run (core threads = available parallelism).
//!
//! `contexts` submits through `Pool::lane(ctx)` handles made before timing
//! (the look-up-free path keyway provides for hot callers); measured against
//! `Pool::execute_sequential(ctx, …)` on this machine, lanes were as fast for
//! 16 contexts and ~10% faster for 1,024 contexts; with `--batch`, one
//! `Lane::execute_all` per batch. `keyway-typed` sends a `u64` message per
//! task through a `TypedLane` per context. `throughput` uses
//! `Pool::execute`; its keyed variants `Pool::execute_sequential(key, …)` for
//! one key and `Pool::execute_keyed([k1, k2], …)` for two. `ordered` takes a
//! `Sequencer` ticket per item on the producer and submits
//! `ticket.run(write)` after processing, with `Pool::execute`: no consumer
//! thread.

use keyway::{Lane, Pool, Sequencer, TypedLane};

use super::{ContextsSystem, KeyedPool, OrderedSystem, TaskPool};
use crate::keys::TaskKeys;
use crate::work::{context_task, process, write, ContextsRun, OrderedRun};

fn build_pool(threads: usize) -> Result<Pool, String> {
    Pool::builder()
        .core_threads(threads)
        // Callgrind A/B of the pool's metrics: KEYWAY_BENCH_METRICS=1 times a sample of tasks.
        .metrics(std::env::var_os("KEYWAY_BENCH_METRICS").is_some())
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
        if run.batch > 1 {
            // A batch of a context's tasks in one call: one lane lock, at most one wake-up.
            return run.produce_batches(|ctx, seqs| {
                let first = *seqs.start();
                lanes[ctx]
                    .execute_all(seqs.map(move |seq| move || context_task(run, ctx, seq)))
                    .map_err(|_| format!("keyway rejected the batch from task {first} of {ctx}"))
            });
        }
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

/// A keyway pool with typed lanes: each task is a `u64` message (its sequence number) sent
/// through its context's `TypedLane` to one handler, as a tokio actor's mailbox carries it.
pub struct KeywayTyped {
    run: &'static ContextsRun,
    pool: Pool,
    lanes: Vec<TypedLane<usize, u64>>,
}

impl ContextsSystem for KeywayTyped {
    const NAME: &'static str = "keyway-typed";

    fn setup(run: &'static ContextsRun, threads: usize) -> Result<Self, String> {
        let pool = build_pool(threads)?;
        let typed = pool.typed_lanes(move |ctx: &usize, seq: u64| context_task(run, *ctx, seq));
        let lanes = (0..run.contexts()).map(|ctx| typed.lane(ctx)).collect();
        Ok(Self { run, pool, lanes })
    }

    fn feed(&mut self) -> Result<(), String> {
        let lanes = &self.lanes;
        self.run.produce(|ctx, seq| {
            lanes[ctx]
                .send(seq)
                .map_err(|_| format!("keyway rejected message {seq} of context {ctx}"))
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

/// A keyway pool taking keyed tasks.
pub struct KeywayKeyed(Pool);

impl KeyedPool for KeywayKeyed {
    const NAME: &'static str = "keyway";
    const ORDERED: bool = true;

    fn build(threads: usize) -> Result<Self, String> {
        build_pool(threads).map(KeywayKeyed)
    }

    fn submit_keyed<F: FnOnce() + Send + 'static>(
        &self,
        keys: TaskKeys,
        task: F,
    ) -> Result<(), String> {
        let submitted = match *keys.as_slice() {
            [key] => self.0.execute_sequential(key, task),
            [a, b] => self.0.execute_keyed([a, b], task),
            _ => unreachable!("keyed tasks name 1 or 2 keys"),
        };
        submitted.map_err(|_| format!("keyway rejected a task on keys {keys:?}"))
    }

    fn shutdown(self) {
        self.0.shutdown();
    }
}

/// Ring capacity of the `ordered` sequencer: tickets up to this far ahead of
/// the current turn are stored without a lock. With a FIFO pool an item's
/// turn comes within a few items of its processing, so this is ample.
const SEQUENCER_CAPACITY: usize = 1_024;

/// A keyway pool processing items and a sequencer publishing their writes in
/// ticket order from whichever pool thread finishes a turn.
pub struct KeywaySequencer {
    run: &'static OrderedRun,
    pool: Pool,
    sequencer: Sequencer,
}

impl OrderedSystem for KeywaySequencer {
    const NAME: &'static str = "keyway";

    fn setup(run: &'static OrderedRun, threads: usize) -> Result<Self, String> {
        let sequencer = Sequencer::new(SEQUENCER_CAPACITY)
            .map_err(|e| format!("building the keyway sequencer: {e}"))?;
        Ok(Self {
            run,
            pool: build_pool(threads)?,
            sequencer,
        })
    }

    fn feed(&mut self) -> Result<(), String> {
        let run = self.run;
        for item in 0..run.items {
            let ticket = self.sequencer.next_ticket();
            self.pool
                .execute(move || {
                    let checksum = process(item);
                    let _ = ticket.run(move || write(run, item, checksum));
                })
                .map_err(|_| format!("keyway rejected item {item}"))?;
        }
        Ok(())
    }

    fn teardown(self) -> Result<(), String> {
        self.pool.shutdown();
        match self.sequencer.panicked() {
            0 => Ok(()),
            n => Err(format!("{n} sequencer turn(s) panicked")),
        }
    }
}
