//! From the settings to the engine's [`Config`]: each setting checked, in a fixed order (so the
//! error names the first one that cannot work), then the configuration assembled with the
//! defaults filled in.

use std::time::Duration;

use super::builder::PoolBuilder;
use crate::engine::config::{Config, MAX_STACK_SIZE, MIN_STACK_SIZE, THREAD_LIMIT};
use crate::error::{BuildError, BuildErrorKind};

/// The thread counts, checked against each other.
struct Threads {
    core: usize,
    max: usize,
    reserved: usize,
    min_reserved: usize,
}

/// The durations, defaults filled in, none zero.
struct Timings {
    keep_alive: Duration,
    monitor_period: Duration,
    blocked_after: Duration,
    reserved_idle_timeout: Duration,
}

fn refuse<T>(kind: BuildErrorKind) -> Result<T, BuildError> {
    Err(BuildError::new(kind))
}

/// Each thread position costs a slot (a deque and a parker) allocated up front, and the OS would
/// refuse long before this many threads anyway: beyond it, a typed error rather than an
/// allocation failure.
fn within_thread_limit(setting: &'static str, value: usize) -> Result<usize, BuildError> {
    if value > THREAD_LIMIT {
        return refuse(BuildErrorKind::TooManyThreads {
            setting,
            value,
            limit: THREAD_LIMIT,
        });
    }
    Ok(value)
}

/// `value`, or `default` when unset; zero is refused.
fn nonzero(
    setting: &'static str,
    value: Option<Duration>,
    default: Duration,
) -> Result<Duration, BuildError> {
    match value.unwrap_or(default) {
        value if value.is_zero() => refuse(BuildErrorKind::ZeroDuration { setting, value }),
        value => Ok(value),
    }
}

impl PoolBuilder {
    pub(crate) fn into_config(self) -> Result<Config, BuildError> {
        let (core, max) = self.core_and_max()?;
        let timings = self.timings()?;
        self.check_counts()?;
        let (reserved, min_reserved) = self.reserved()?;
        self.check_thread_setup()?;
        let threads = Threads {
            core,
            max,
            reserved,
            min_reserved,
        };
        Ok(self.assemble(threads, timings))
    }

    /// Core and most threads: the core defaults to the machine's parallelism (capped by an
    /// explicit `max_threads`), the most to four times the core, at least 16.
    fn core_and_max(&self) -> Result<(usize, usize), BuildError> {
        let available = std::thread::available_parallelism().map_or(1, |n| n.get());
        let core = match (self.core_threads, self.max_threads) {
            (Some(c), _) => c,
            (None, Some(m)) => available.min(m),
            (None, None) => available,
        };
        within_thread_limit("core_threads", core)?;
        let max = self
            .max_threads
            .unwrap_or_else(|| core.saturating_mul(4).max(16));
        within_thread_limit("max_threads", max)?;
        if max == 0 {
            return refuse(BuildErrorKind::ZeroMaxThreads);
        }
        if core == 0 {
            return refuse(BuildErrorKind::ZeroCoreThreads);
        }
        if core > max {
            return refuse(BuildErrorKind::CoreAboveMax { core, max });
        }
        Ok((core, max))
    }

    fn timings(&self) -> Result<Timings, BuildError> {
        Ok(Timings {
            keep_alive: nonzero("keep_alive", self.keep_alive, Duration::from_secs(10))?,
            monitor_period: nonzero(
                "monitor_period",
                self.monitor_period,
                Duration::from_millis(250),
            )?,
            blocked_after: nonzero(
                "blocked_after",
                self.blocked_after,
                Duration::from_millis(250),
            )?,
            reserved_idle_timeout: nonzero(
                "reserved_idle_timeout",
                self.reserved_idle_timeout,
                Duration::from_secs(60),
            )?,
        })
    }

    /// Counts that mean nothing at zero.
    fn check_counts(&self) -> Result<(), BuildError> {
        let counts = [
            ("core_growth_after", self.core_growth_after),
            ("lane_batch", self.lane_batch),
            ("capacity", self.capacity),
        ];
        for (setting, value) in counts {
            if value == Some(0) {
                return refuse(BuildErrorKind::ZeroCount { setting });
            }
        }
        Ok(())
    }

    /// Reserved threads (default 1) and the fewest kept (default 0, not above the most).
    fn reserved(&self) -> Result<(usize, usize), BuildError> {
        let reserved = within_thread_limit("reserved_threads", self.reserved_threads.unwrap_or(1))?;
        let min_reserved = self.min_reserved_threads.unwrap_or(0);
        if min_reserved > reserved {
            return refuse(BuildErrorKind::MinReservedAboveMax {
                min: min_reserved,
                max: reserved,
            });
        }
        Ok((reserved, min_reserved))
    }

    /// The threads' name, the metrics sampling and the stack size.
    fn check_thread_setup(&self) -> Result<(), BuildError> {
        if self
            .thread_name
            .as_deref()
            .is_some_and(|n| n.contains('\0'))
        {
            return refuse(BuildErrorKind::NulInThreadName);
        }
        if self.metrics_sampling == Some(0) {
            return refuse(BuildErrorKind::ZeroCount {
                setting: "metrics_sampling",
            });
        }
        match self.stack_size {
            Some(size) if !(MIN_STACK_SIZE..=MAX_STACK_SIZE).contains(&size) => {
                refuse(BuildErrorKind::StackSize {
                    value: size,
                    min: MIN_STACK_SIZE,
                    max: MAX_STACK_SIZE,
                })
            }
            _ => Ok(()),
        }
    }

    /// The checked settings, with the defaults of the others filled in.
    fn assemble(self, threads: Threads, timings: Timings) -> Config {
        let thread_name = self.thread_name.unwrap_or_else(|| "keyway".to_owned());
        let metrics = self.metrics.then(|| {
            crate::engine::meter::sampling(
                self.metrics_sampling
                    .unwrap_or(crate::engine::meter::DEFAULT_SAMPLING),
            )
        });
        Config {
            name: self.name.unwrap_or_else(|| thread_name.clone()),
            reserved_threads: threads.reserved,
            min_reserved_threads: threads.min_reserved,
            reserved_idle_timeout: timings.reserved_idle_timeout,
            core_threads: threads.core,
            max_threads: threads.max,
            keep_alive: timings.keep_alive,
            monitor_period: timings.monitor_period,
            blocked_after: timings.blocked_after,
            core_growth_after: self.core_growth_after.unwrap_or(10),
            lane_batch: self.lane_batch.unwrap_or(32),
            capacity: self.capacity,
            thread_name,
            panic_hook: self.panic_hook,
            stack_size: self.stack_size,
            on_thread_start: self.on_thread_start,
            on_thread_stop: self.on_thread_stop,
            hasher: self.hasher.unwrap_or_default(),
            idle_lanes: self.idle_lanes,
            keep_idle: self.keep_idle,
            metrics,
            admit_mask: crate::engine::meter::admit_mask(self.capacity.is_some(), metrics),
            labels: self.labels.unwrap_or_else(crate::engine::Labels::common),
            #[cfg(feature = "tokio")]
            runtime: self.runtime,
        }
    }
}
