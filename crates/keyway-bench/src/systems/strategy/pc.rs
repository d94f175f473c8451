//! `pc`: produce-consume on one thread, no pool. Every buffer is consumed
//! by the thread that has just written it, with a hot cache, but nothing
//! runs in parallel.

use super::StrategySystem;
use crate::work::strategy::{consume, fill, StrategyRun};

/// The producing thread consumes every task itself.
#[derive(Debug)]
pub struct ProduceConsume(&'static StrategyRun);

impl StrategySystem for ProduceConsume {
    const NAME: &'static str = "pc";

    fn setup(run: &'static StrategyRun, _threads: usize) -> Result<Self, String> {
        Ok(Self(run))
    }

    fn feed(&mut self) -> Result<(), String> {
        let run = self.0;
        for task in 0..run.tasks {
            let buf = fill(task);
            consume(run, task, &buf);
        }
        Ok(())
    }

    fn teardown(self) -> Result<Option<keyway::ModeCounts>, String> {
        Ok(None)
    }
}
