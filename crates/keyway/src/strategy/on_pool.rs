//! `Pool` as the strategy's [`Executor`]: `execute` queues on the pool, `try_execute` hands to a
//! reserved thread or refuses at once, and a task consumed in place that may block runs inside
//! [`blocking`](crate::blocking), so the work it queued on this worker moves to others at once.

use super::Executor;
use crate::Pool;

type Job = Box<dyn FnOnce() + Send + 'static>;

impl Executor for Pool {
    fn execute(&self, task: Job) -> Result<(), Job> {
        Pool::execute(self, task).map_err(|e| e.into_inner())
    }

    fn try_execute(&self, task: Job) -> Result<(), Job> {
        Pool::try_execute(self, task).map_err(|e| e.into_inner())
    }

    fn run_blocking(&self, task: &mut dyn FnMut()) {
        crate::blocking(task)
    }
}
