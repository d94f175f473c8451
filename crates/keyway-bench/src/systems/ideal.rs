//! `ideal`: available-parallelism std threads, each running its share of the
//! contexts directly (every task of a context in order, no queue, no
//! producer): the physical limit of the machine for this work.

use std::sync::{Arc, Barrier};
use std::thread::JoinHandle;

use super::ContextsSystem;
use crate::work::{context_task, ContextsRun};

/// Threads waiting at a start gate, each owning every `threads`-th context.
#[derive(Debug)]
pub struct Ideal {
    gate: Arc<Barrier>,
    threads: Vec<JoinHandle<()>>,
}

impl ContextsSystem for Ideal {
    const NAME: &'static str = "ideal";

    fn setup(run: &'static ContextsRun, threads: usize) -> Result<Self, String> {
        let threads = threads.max(1);
        let gate = Arc::new(Barrier::new(threads + 1));
        let handles = (0..threads)
            .map(|i| {
                let gate = Arc::clone(&gate);
                std::thread::Builder::new()
                    .name(format!("ideal-{i}"))
                    .spawn(move || {
                        gate.wait();
                        for ctx in (i..run.contexts()).step_by(threads) {
                            for seq in 1..=run.tasks_of(ctx) {
                                context_task(run, ctx, seq);
                            }
                        }
                    })
                    .map_err(|e| format!("spawning an ideal thread: {e}"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            gate,
            threads: handles,
        })
    }

    fn feed(&mut self) -> Result<(), String> {
        self.gate.wait();
        Ok(())
    }

    fn teardown(self) -> Result<(), String> {
        for thread in self.threads {
            thread
                .join()
                .map_err(|_| "an ideal thread panicked".to_string())?;
        }
        Ok(())
    }
}
