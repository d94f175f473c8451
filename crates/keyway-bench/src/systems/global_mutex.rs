//! `mutex`: the `crossbeam-pool` peer where every task takes one global lock
//! for its whole step: take the next item number, process it, write it,
//! release. The output is in order because the step is serial by
//! construction; that is the point of this peer.

use std::sync::{Mutex, PoisonError};

use super::crossbeam_pool::CrossbeamPool;
use super::{OrderedSystem, TaskPool};
use crate::work::{process, write, OrderedRun};

/// A crossbeam pool whose tasks run "ticket → process → write" under one lock.
#[derive(Debug)]
pub struct GlobalMutex {
    run: &'static OrderedRun,
    pool: CrossbeamPool,
    /// The next item number to hand out. Leaked (8 bytes per run) so that
    /// tasks reach it without a reference count.
    next: &'static Mutex<u64>,
}

impl OrderedSystem for GlobalMutex {
    const NAME: &'static str = "mutex";

    fn setup(run: &'static OrderedRun, threads: usize) -> Result<Self, String> {
        Ok(Self {
            run,
            pool: CrossbeamPool::build(threads)?,
            next: Box::leak(Box::new(Mutex::new(0))),
        })
    }

    fn feed(&mut self) -> Result<(), String> {
        let (run, next) = (self.run, self.next);
        for _ in 0..run.items {
            self.pool.submit(move || {
                let mut next = next.lock().unwrap_or_else(PoisonError::into_inner);
                let item = *next;
                *next += 1;
                let checksum = process(item);
                write(run, item, checksum);
            })?;
        }
        Ok(())
    }

    fn teardown(self) -> Result<(), String> {
        self.pool.shutdown();
        Ok(())
    }
}
