//! Completion detection: a countdown that opens a latch when it reaches zero.
//!
//! Every system signals completion the same way, so the timed interval ends at
//! the same event for all of them: no sleep-poll loop, one condvar wake-up.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// A countdown latch that can also be failed with a message.
#[derive(Debug)]
pub struct Completion {
    remaining: AtomicUsize,
    state: Mutex<LatchState>,
    opened: Condvar,
}

#[derive(Debug, Default)]
struct LatchState {
    open: bool,
    error: Option<String>,
}

impl Completion {
    /// A latch that opens after `count` calls to [`Completion::count_down`]
    /// (immediately when `count` is zero).
    pub fn new(count: usize) -> Self {
        Self {
            remaining: AtomicUsize::new(count),
            state: Mutex::new(LatchState {
                open: count == 0,
                error: None,
            }),
            opened: Condvar::new(),
        }
    }

    /// Closes the latch again for `count` completions, clearing any error: for a run's state
    /// used again after every thread of the previous run has stopped.
    pub fn reset(&self, count: usize) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        self.remaining.store(count, Ordering::Release);
        *state = LatchState {
            open: count == 0,
            error: None,
        };
    }

    /// Counts one completion; the last one opens the latch.
    #[inline]
    pub fn count_down(&self) {
        let before = self.remaining.fetch_sub(1, Ordering::AcqRel);
        if before == 1 {
            self.open(None);
        } else if before == 0 {
            // More completions than announced: keep the count at "overrun" and say so.
            self.open(Some("more tasks completed than were submitted".into()));
        }
    }

    /// Opens the latch with an error (a producer failed); waiters return it.
    pub fn fail(&self, error: String) {
        self.open(Some(error));
    }

    fn open(&self, error: Option<String>) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.open = true;
        if state.error.is_none() {
            state.error = error;
        }
        drop(state);
        self.opened.notify_all();
    }

    /// How many completions are still missing.
    pub fn remaining(&self) -> usize {
        self.remaining.load(Ordering::Acquire)
    }

    /// Blocks until the latch opens and returns the time since `start`.
    ///
    /// Fails if the latch was failed, or if it is still closed after `timeout`
    /// (tasks went missing).
    pub fn wait_since(&self, start: Instant, timeout: Duration) -> Result<Duration, String> {
        let state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let (state, result) = self
            .opened
            .wait_timeout_while(state, timeout, |s| !s.open)
            .unwrap_or_else(|e| e.into_inner());
        let elapsed = start.elapsed();
        if let Some(error) = &state.error {
            return Err(error.clone());
        }
        if result.timed_out() && !state.open {
            return Err(format!(
                "timed out after {:.0} s with {} completions missing",
                timeout.as_secs_f64(),
                self.remaining()
            ));
        }
        Ok(elapsed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opens_after_the_last_count() {
        let latch = Completion::new(2);
        latch.count_down();
        assert_eq!(latch.remaining(), 1);
        latch.count_down();
        assert!(latch
            .wait_since(Instant::now(), Duration::from_secs(1))
            .is_ok());
    }

    #[test]
    fn times_out_when_a_task_is_missing() {
        let latch = Completion::new(2);
        latch.count_down();
        let err = latch
            .wait_since(Instant::now(), Duration::from_millis(10))
            .unwrap_err();
        assert!(err.contains("1 completions missing"), "{err}");
    }

    #[test]
    fn failure_is_reported() {
        let latch = Completion::new(5);
        latch.fail("producer broke".into());
        let err = latch
            .wait_since(Instant::now(), Duration::from_secs(1))
            .unwrap_err();
        assert_eq!(err, "producer broke");
    }
}
