//! `crossbeam-pool`: available-parallelism threads taking boxed closures from
//! one crossbeam-channel MPMC channel (unbounded, or bounded with
//! [`CrossbeamPool::bounded`]: a full queue blocks the submitter). In the
//! `contexts` shape ([`CrossbeamContexts`], for `latency`) it runs each context's
//! tasks as plain tasks: it keeps no order, so its row is the floor of one shared
//! queue, checked for completeness only.

use std::thread::JoinHandle;

use crossbeam_channel::{Receiver, Sender};

use super::{ContextsSystem, TaskPool};
use crate::work::{unordered_context_task, ContextsRun};

/// A boxed task.
pub type Job = Box<dyn FnOnce() + Send>;

/// Fixed worker threads on one shared channel.
#[derive(Debug)]
pub struct CrossbeamPool {
    sender: Sender<Job>,
    workers: Vec<JoinHandle<()>>,
}

impl CrossbeamPool {
    /// A pool of `threads` workers whose queue holds at most `capacity`
    /// tasks: `submit` blocks while it is full, as a producer feeding a
    /// bounded pipeline would.
    pub fn bounded(threads: usize, capacity: usize) -> Result<Self, String> {
        Self::on(threads, crossbeam_channel::bounded::<Job>(capacity))
    }

    /// How many tasks the queue holds at most (`None`: unbounded).
    #[cfg(test)]
    pub fn capacity(&self) -> Option<usize> {
        self.sender.capacity()
    }

    /// Submits a task unless the queue is full; hands it back if it is.
    #[cfg(test)]
    pub fn try_submit(&self, task: Job) -> Result<(), Job> {
        self.sender.try_send(task).map_err(|e| e.into_inner())
    }

    /// Untimed: runs one no-op task per worker and waits for them, so that
    /// every worker has started and taken a task.
    pub fn warm(&self) -> Result<(), String> {
        let workers = self.workers.len();
        let (tx, rx) = crossbeam_channel::bounded::<()>(workers);
        for _ in 0..workers {
            let tx = tx.clone();
            self.submit(move || {
                let _ = tx.send(());
            })?;
        }
        for _ in 0..workers {
            rx.recv_timeout(std::time::Duration::from_secs(10))
                .map_err(|_| "a crossbeam-pool worker did not start".to_string())?;
        }
        Ok(())
    }

    fn on(
        threads: usize,
        (sender, receiver): (Sender<Job>, Receiver<Job>),
    ) -> Result<Self, String> {
        let workers = (0..threads.max(1))
            .map(|i| {
                let receiver = receiver.clone();
                std::thread::Builder::new()
                    .name(format!("cb-pool-{i}"))
                    .spawn(move || {
                        for job in receiver {
                            job();
                        }
                    })
                    .map_err(|e| format!("spawning a crossbeam-pool worker: {e}"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self { sender, workers })
    }
}

impl TaskPool for CrossbeamPool {
    const NAME: &'static str = "crossbeam-pool";

    fn build(threads: usize) -> Result<Self, String> {
        Self::on(threads, crossbeam_channel::unbounded::<Job>())
    }

    fn submit<F: FnOnce() + Send + 'static>(&self, task: F) -> Result<(), String> {
        self.sender
            .send(Box::new(task))
            .map_err(|_| "the crossbeam-pool workers are gone".to_string())
    }

    fn shutdown(self) {
        drop(self.sender);
        for worker in self.workers {
            let _ = worker.join();
        }
    }
}

/// The crossbeam pool fed the `contexts` workload as plain tasks: no per-context order (a
/// context's tasks may run at once on two workers), so the run checks only that every task ran.
#[derive(Debug)]
pub struct CrossbeamContexts {
    run: &'static ContextsRun,
    pool: CrossbeamPool,
}

impl ContextsSystem for CrossbeamContexts {
    const NAME: &'static str = "crossbeam-pool";

    fn setup(run: &'static ContextsRun, threads: usize) -> Result<Self, String> {
        let pool = CrossbeamPool::build(threads)?;
        pool.warm()?;
        Ok(Self { run, pool })
    }

    fn feed(&mut self) -> Result<(), String> {
        let (run, pool) = (self.run, &self.pool);
        run.produce(|ctx, seq| pool.submit(move || unordered_context_task(run, ctx, seq)))
    }

    fn teardown(self) -> Result<(), String> {
        self.pool.shutdown();
        Ok(())
    }
}
