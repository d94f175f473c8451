//! `crossbeam-pool`: available-parallelism threads taking boxed closures from
//! one crossbeam-channel MPMC channel.

use std::thread::JoinHandle;

use crossbeam_channel::Sender;

use super::TaskPool;

type Job = Box<dyn FnOnce() + Send>;

/// Fixed worker threads on one shared channel.
#[derive(Debug)]
pub struct CrossbeamPool {
    sender: Sender<Job>,
    workers: Vec<JoinHandle<()>>,
}

impl TaskPool for CrossbeamPool {
    const NAME: &'static str = "crossbeam-pool";

    fn build(threads: usize) -> Result<Self, String> {
        let (sender, receiver) = crossbeam_channel::unbounded::<Job>();
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
