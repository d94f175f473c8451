//! `rayon`: a `rayon::ThreadPool` of available-parallelism threads maps the
//! items with an indexed parallel iterator, `collect` keeps input order, and
//! the calling thread then writes the vector in order.

use rayon::prelude::*;

use super::OrderedSystem;
use crate::work::{process, write, OrderedRun};

/// A dedicated rayon pool running an ordered collect.
#[derive(Debug)]
pub struct RayonCollect {
    run: &'static OrderedRun,
    pool: rayon::ThreadPool,
}

impl OrderedSystem for RayonCollect {
    const NAME: &'static str = "rayon";

    fn setup(run: &'static OrderedRun, threads: usize) -> Result<Self, String> {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .map_err(|e| format!("building the rayon pool: {e}"))?;
        Ok(Self { run, pool })
    }

    fn feed(&mut self) -> Result<(), String> {
        let run = self.run;
        let checksums: Vec<u64> = self
            .pool
            .install(|| (0..run.items).into_par_iter().map(process).collect());
        for (item, checksum) in (0..).zip(checksums) {
            write(run, item, checksum);
        }
        Ok(())
    }

    fn teardown(self) -> Result<(), String> {
        // The threads exit asynchronously; the harness waits for them.
        drop(self.pool);
        Ok(())
    }
}
