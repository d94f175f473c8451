//! How a process learns its share of an executor's rate limit.
//!
//! A [`Coordinator`] decides how many tasks per second *this process* may run for a named
//! executor whose limit is set for the whole cluster. [`LocalCoordinator`] gives the process the
//! whole limit; a coordinator that talks to other processes (the `keyway-redis` crate's, for
//! one) learns its share in the background and answers from what it last learned.

/// Decides this process's share of a named executor's limit, in tasks per second.
///
/// The scheduler calls [`share`](Coordinator::share) at the start of every interval of every
/// executor, on its own thread: an implementation must answer at once from what it already
/// knows, never block on the network. A coordinator that loses its backend keeps answering with
/// its last share (never more than `limit`).
///
/// The scheduler clamps what it gets to `0.0..=limit` (NaN counts as `0.0`), so a faulty
/// coordinator can slow an executor down but never push it over its limit. A `share` that
/// panics is contained: the executor keeps the fraction of the limit the coordinator last gave
/// (of the limit as it is now, after a [`set_tps`](crate::Scheduler::set_tps)), or the whole
/// limit if it never gave one, so a paused executor resumed by `set_tps` runs again.
///
/// ```
/// use keyway::{Coordinator, LocalCoordinator};
/// let local = LocalCoordinator;
/// local.join("payments", 500.0);
/// assert_eq!(local.share("payments", 500.0), 500.0); // alone: the whole limit
/// local.leave("payments");
/// ```
pub trait Coordinator: Send + Sync + 'static {
    /// This process starts running `executor`, whose limit for the whole cluster is `limit`
    /// tasks per second. Called again with the new value when the limit changes.
    ///
    /// See [`Coordinator`]'s example.
    fn join(&self, executor: &str, limit: f64);

    /// This process stops running `executor` (it was removed, or its scheduler shut down): the
    /// other processes may take over its share at once.
    ///
    /// See [`Coordinator`]'s example.
    fn leave(&self, executor: &str);

    /// This process's share of `executor`'s `limit` now, in tasks per second, between `0.0` and
    /// `limit`. Must not block.
    ///
    /// See [`Coordinator`]'s example.
    fn share(&self, executor: &str, limit: f64) -> f64;
}

/// The coordinator of a process that runs alone: its share is always the whole limit.
///
/// ```
/// use keyway::{Coordinator, LocalCoordinator};
/// assert_eq!(LocalCoordinator.share("emails", 20.0), 20.0);
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct LocalCoordinator;

impl Coordinator for LocalCoordinator {
    fn join(&self, _executor: &str, _limit: f64) {}

    fn leave(&self, _executor: &str) {}

    fn share(&self, _executor: &str, limit: f64) -> f64 {
        limit
    }
}

/// A coordinator behind an `Arc` is one: give the scheduler a clone and keep another, to read
/// what only the concrete type tells (a Redis coordinator's status, say) while it runs.
///
/// ```
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use std::sync::Arc;
/// use keyway::{Coordinator, ExecutorConfig, Scheduler};
/// #[derive(Default)]
/// struct Counting(AtomicUsize);
/// impl Coordinator for Counting {
///     fn join(&self, _executor: &str, _limit: f64) {}
///     fn leave(&self, _executor: &str) {}
///     fn share(&self, _executor: &str, limit: f64) -> f64 {
///         self.0.fetch_add(1, Ordering::Relaxed);
///         limit
///     }
/// }
/// let counting = Arc::new(Counting::default());
/// let pool = keyway::Pool::new().unwrap();
/// let s = Scheduler::builder(&pool)
///     .interval(std::time::Duration::from_millis(10))
///     .executor("jobs", ExecutorConfig::with_tps(100.0))
///     .coordinator(counting.clone())
///     .build()
///     .unwrap();
/// s.schedule("jobs", std::time::Duration::ZERO, || ()).unwrap().join().unwrap();
/// assert!(counting.0.load(Ordering::Relaxed) >= 1); // read through the kept clone
/// s.shutdown();
/// ```
impl<C: Coordinator + ?Sized> Coordinator for std::sync::Arc<C> {
    fn join(&self, executor: &str, limit: f64) {
        (**self).join(executor, limit);
    }

    fn leave(&self, executor: &str) {
        (**self).leave(executor);
    }

    fn share(&self, executor: &str, limit: f64) -> f64 {
        (**self).share(executor, limit)
    }
}

#[allow(dead_code)] // the scheduler uses it
/// Clamps a coordinator's answer to what the scheduler may use: `0.0..=limit`, NaN as `0.0`.
pub(crate) fn clamp_share(share: f64, limit: f64) -> f64 {
    if share >= 0.0 {
        share.min(limit)
    } else {
        0.0 // negative or NaN
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn shares_are_clamped_to_the_limit() {
        assert_eq!(clamp_share(f64::NAN, 10.0), 0.0);
        assert_eq!(clamp_share(-1.0, 10.0), 0.0);
        assert_eq!(clamp_share(11.0, 10.0), 10.0);
        assert_eq!(clamp_share(f64::INFINITY, 10.0), 10.0);
        assert_eq!(clamp_share(4.5, 10.0), 4.5);
    }

    #[test]
    fn local_gives_the_whole_limit() {
        let c: &dyn Coordinator = &LocalCoordinator;
        c.join("a", 3.0);
        assert_eq!(c.share("a", 3.0), 3.0);
        c.leave("a");
    }
}
