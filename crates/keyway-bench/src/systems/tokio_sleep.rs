//! `tokio`: one spawned task per scheduled item, sleeping until it is due (`sleep_until` on
//! tokio's timer wheel), on a multi-thread runtime with the machine's parallelism.

use std::time::Instant;

use tokio::runtime::Runtime;

use super::ScheduleSystem;

/// A runtime with timers enabled.
pub struct TokioSleep {
    runtime: Runtime,
}

impl ScheduleSystem for TokioSleep {
    const NAME: &'static str = "tokio";

    fn build(threads: usize) -> Result<Self, String> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .enable_time()
            .build()
            .map_err(|e| format!("building the tokio runtime: {e}"))?;
        Ok(Self { runtime })
    }

    fn schedule_at<F: FnOnce() + Send + 'static>(
        &self,
        due: Instant,
        task: F,
    ) -> Result<(), String> {
        let due = tokio::time::Instant::from_std(due);
        drop(self.runtime.spawn(async move {
            tokio::time::sleep_until(due).await;
            task();
        }));
        Ok(())
    }

    fn shutdown(self) {
        self.runtime.shutdown_background();
    }
}
