//! `rayon`: a `rayon::ThreadPool` of available-parallelism threads, tasks
//! submitted with `ThreadPool::spawn`.

use super::TaskPool;

/// A dedicated rayon pool.
#[derive(Debug)]
pub struct RayonPool(rayon::ThreadPool);

impl TaskPool for RayonPool {
    const NAME: &'static str = "rayon";

    fn build(threads: usize) -> Result<Self, String> {
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .map(RayonPool)
            .map_err(|e| format!("building the rayon pool: {e}"))
    }

    fn submit<F: FnOnce() + Send + 'static>(&self, task: F) -> Result<(), String> {
        self.0.spawn(task);
        Ok(())
    }

    fn shutdown(self) {
        // Dropping the pool lets its threads exit (asynchronously; the harness
        // waits for them before the next system runs).
        drop(self.0);
    }
}
