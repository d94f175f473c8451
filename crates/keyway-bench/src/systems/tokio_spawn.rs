//! `tokio`: a multi-thread tokio runtime (worker threads = available
//! parallelism), tasks submitted with `Handle::spawn` from producer threads
//! outside the runtime.

use tokio::runtime::{Handle, Runtime};

use super::{tokio_runtime, TaskPool};

/// A runtime and the handle producers spawn on.
#[derive(Debug)]
pub struct TokioSpawn {
    runtime: Runtime,
    handle: Handle,
}

impl TaskPool for TokioSpawn {
    const NAME: &'static str = "tokio";

    fn build(threads: usize) -> Result<Self, String> {
        let runtime = tokio_runtime(threads)?;
        let handle = runtime.handle().clone();
        Ok(Self { runtime, handle })
    }

    fn submit<F: FnOnce() + Send + 'static>(&self, task: F) -> Result<(), String> {
        // The JoinHandle is dropped: fire and forget, like the other pools.
        drop(self.handle.spawn(async move { task() }));
        Ok(())
    }

    fn shutdown(self) {
        drop(self.handle);
        drop(self.runtime);
    }
}
