//! `keyway`: keyway's rate-limited scheduler with one executor and no limit, on a keyway pool
//! with the machine's parallelism; 10 ms intervals, early dispatch allowed (by less than one
//! interval).

use std::time::{Duration, Instant};

use keyway::{ExecutorConfig, Pool, Scheduler, Timing};

use super::ScheduleSystem;

/// How early keyway may run a task (one interval).
pub const INTERVAL: Duration = Duration::from_millis(10);

/// The pool and the scheduler on it.
pub struct KeywayScheduler {
    pool: Pool,
    scheduler: Scheduler,
}

impl ScheduleSystem for KeywayScheduler {
    const NAME: &'static str = "keyway";
    const EARLY: Duration = INTERVAL;

    fn build(threads: usize) -> Result<Self, String> {
        let pool = Pool::builder()
            .core_threads(threads)
            .build()
            .map_err(|e| e.to_string())?;
        let scheduler = Scheduler::builder(&pool)
            .interval(INTERVAL)
            .executor("bench", ExecutorConfig::unlimited())
            .build()
            .map_err(|e| e.to_string())?;
        Ok(Self { pool, scheduler })
    }

    fn schedule_at<F: FnOnce() + Send + 'static>(
        &self,
        due: Instant,
        task: F,
    ) -> Result<(), String> {
        // No handle: the task is detached, like the peers'.
        self.scheduler
            .execute_with("bench", Timing::at(due), task)
            .map_err(|e| e.to_string())
    }

    fn shutdown(self) {
        drop(self.scheduler.shutdown_now());
        self.pool.shutdown();
    }
}
