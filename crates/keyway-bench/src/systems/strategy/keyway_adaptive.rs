//! `keyway`: a keyway pool (core threads = available parallelism, one
//! reserved thread: the pool's default) and an [`AdaptiveStrategy`] whose
//! producer yields the run's tasks, each declared `NonBlocking` or
//! `Blocking` as the variant says (per task in the mixed variant). The calling thread produces
//! ([`AdaptiveStrategy::produce`]) until the producer is exhausted or
//! production has moved to another thread (execute-produce-consume hands it
//! to the reserved thread, which then produces to the end); completion is
//! the run's latch, as for every system.

use std::time::{Duration, Instant};

use keyway::{
    AdaptiveStrategy, Invocable, InvocationType, ModeCounts, Pool, ProduceOutcome, Producer,
};

use super::StrategySystem;
use crate::work::strategy::{consume, fill, Buffer, StrategyRun};

/// Reserved threads of the pool (for `try_execute`, hence for
/// execute-produce-consume).
pub const RESERVED_THREADS: usize = 1;

/// One produced task: its number and its freshly written buffer.
pub struct StrategyTask {
    run: &'static StrategyRun,
    task: u64,
    buf: Buffer,
    kind: InvocationType,
}

impl Invocable for StrategyTask {
    fn invocation_type(&self) -> InvocationType {
        self.kind
    }

    fn run(self) {
        consume(self.run, self.task, &self.buf);
    }
}

/// Yields tasks `0..run.tasks`, writing each one's buffer as it goes.
pub struct TaskProducer {
    run: &'static StrategyRun,
    next: u64,
}

impl Producer for TaskProducer {
    type Task = StrategyTask;

    fn produce(&mut self) -> Option<StrategyTask> {
        let task = self.next;
        if task == self.run.tasks {
            return None;
        }
        self.next += 1;
        Some(StrategyTask {
            run: self.run,
            task,
            buf: fill(task),
            kind: if self.run.mix.blocks(task) {
                InvocationType::Blocking
            } else {
                InvocationType::NonBlocking
            },
        })
    }
}

/// keyway's pool and adaptive strategy over the run's producer.
pub struct KeywayAdaptive {
    run: &'static StrategyRun,
    pool: Pool,
    strategy: AdaptiveStrategy<TaskProducer, Pool>,
}

impl StrategySystem for KeywayAdaptive {
    const NAME: &'static str = "keyway";

    fn setup(run: &'static StrategyRun, threads: usize) -> Result<Self, String> {
        let pool = Pool::builder()
            .core_threads(threads)
            .reserved_threads(RESERVED_THREADS)
            .build()
            .map_err(|e| format!("building the keyway pool: {e}"))?;
        start_reserved_thread(&pool)?;
        let producer = TaskProducer { run, next: 0 };
        let strategy = AdaptiveStrategy::new(producer, pool.clone());
        Ok(Self {
            run,
            pool,
            strategy,
        })
    }

    fn feed(&mut self) -> Result<(), String> {
        loop {
            match self.strategy.produce() {
                // The producer returned None: every task was produced.
                ProduceOutcome::Exhausted => return Ok(()),
                // This thread handed production off and consumed its task:
                // take production back if it is free.
                ProduceOutcome::HandedOff => continue,
                // Another thread produces, and will until the producer is
                // exhausted.
                ProduceOutcome::Signalled => return Ok(()),
            }
        }
    }

    fn teardown(self) -> Result<Option<ModeCounts>, String> {
        let counts = self.strategy.counts();
        drop(self.strategy);
        self.pool.shutdown();
        let tasks = self.run.tasks;
        if counts.total() != tasks || counts.refused != 0 || counts.panicked != 0 {
            return Err(format!("the strategy counted {counts} for {tasks} tasks"));
        }
        Ok(Some(counts))
    }
}

/// Untimed: reserved threads start lazily, on the first `try_execute` that
/// finds none idle; start one now so that the timed run does not pay for it
/// (as `pec` runs a no-op through each of its workers before its clock).
fn start_reserved_thread(pool: &Pool) -> Result<(), String> {
    if RESERVED_THREADS == 0 {
        return Ok(());
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut task = || ();
    loop {
        match pool.try_execute(task) {
            Ok(()) => return Ok(()),
            Err(err) if Instant::now() < deadline => {
                task = err.into_inner();
                std::thread::sleep(Duration::from_micros(100));
            }
            Err(err) => return Err(format!("no reserved thread started within 5 s: {err}")),
        }
    }
}
