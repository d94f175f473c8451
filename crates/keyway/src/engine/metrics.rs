//! The public snapshot of a pool's numbers with time in them: [`Metrics`] and
//! [`RunningTask`] (`meter.rs` fills it).

use std::fmt;
use std::time::Duration;

use super::histogram::Histogram;
use super::stats::Stats;

/// How many running tasks a snapshot lists.
pub(crate) const TOP: usize = 8;

/// A task running now on a worker, as [`Metrics::longest_running`] lists it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunningTask {
    /// The worker's position in the pool (0 up to `max_threads`).
    pub thread: usize,
    /// The hash of the lane the task runs in, as [`Pool::context_hash`](crate::Pool::context_hash)
    /// computes it, when it is known: the task is a timed one (see
    /// [`PoolBuilder::metrics_sampling`](crate::PoolBuilder::metrics_sampling)) submitted to a
    /// lane of closures (`execute_sequential`, `submit_sequential`, a [`Lane`](crate::Lane)).
    pub context_hash: Option<u64>,
    /// That lane's key, printed, when the context hash is known and the key's type allows (see
    /// [`LaneLabel`](crate::LaneLabel)).
    pub label: Option<crate::LaneLabel>,
    /// How long it has been running: exact for a timed task; for another, since the pool's
    /// monitor first saw the worker in it (so up to one monitor period short).
    pub running_for: Duration,
}

/// A pool's numbers with time in them, from [`Pool::metrics`](crate::Pool::metrics): the
/// counts and lane depths of [`Stats`], histograms of how long tasks wait before they start
/// and how long they run, the age of the oldest waiting task, and the longest-running tasks.
///
/// The time figures need [`PoolBuilder::metrics`](crate::PoolBuilder::metrics); without it
/// they are empty and [`timed`](Metrics::timed) is false. They come from *sampled* tasks: each
/// submitting thread times one task in
/// [`metrics_sampling`](crate::PoolBuilder::metrics_sampling) (128 by default) of those it
/// submits with `execute`, `submit`, `execute_sequential`, `submit_sequential` or through a
/// [`Lane`](crate::Lane) (typed-lane messages, futures, multi-key tasks and
/// [`try_execute`](crate::Pool::try_execute) are counted but not timed). A snapshot costs the
/// same whatever the number of lanes (it reads a bounded watch list, not every lane).
///
/// ```
/// use std::time::Duration;
/// let pool = keyway::Pool::builder().metrics(true).build().unwrap();
/// for i in 0..1000 {
///     pool.execute_sequential(i % 10, || ()).unwrap();
/// }
/// pool.wait_idle();
/// let m = pool.metrics();
/// assert!(m.timed);
/// assert_eq!(m.submitted_tasks, 1000);
/// // One in 128 of the 1,000 tasks was timed (the first of the thread among them).
/// assert!(m.queue_wait.count() >= 7);
/// println!("{m}");
/// pool.shutdown();
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Metrics {
    /// Threads by state, task counts, live lanes and the deepest lanes.
    pub stats: Stats,
    /// Whether the pool times tasks ([`PoolBuilder::metrics`](crate::PoolBuilder::metrics)).
    pub timed: bool,
    /// One task in this many (a power of two) is timed, per submitting thread.
    pub sample_one_in: u32,
    /// Timed tasks' queue wait: from admission to the moment the task starts (behind other
    /// tasks of its lane included).
    pub queue_wait: Histogram,
    /// Timed tasks' run time.
    pub run_time: Histogram,
    /// How long the oldest timed task that has not started has waited (`None`: none waits).
    pub oldest_waiting: Option<Duration>,
    /// Tasks running now, longest first (at most 8).
    pub longest_running: Vec<RunningTask>,
    /// Tasks accepted so far.
    pub submitted_tasks: u64,
    /// Tasks refused (shutdown, or capacity reached) and handed back to the submitter.
    pub refused_tasks: u64,
    /// Accepted tasks handed back unrun by `shutdown_now`.
    pub handed_back_tasks: u64,
}

impl Metrics {
    pub(crate) fn untimed(stats: Stats, submitted: u64, refused: u64, handed_back: u64) -> Self {
        Metrics {
            stats,
            timed: false,
            sample_one_in: 0,
            queue_wait: Histogram::default(),
            run_time: Histogram::default(),
            oldest_waiting: None,
            longest_running: Vec::new(),
            submitted_tasks: submitted,
            refused_tasks: refused,
            handed_back_tasks: handed_back,
        }
    }
}

impl fmt::Display for Metrics {
    /// The line of [`Stats`], then the time figures.
    ///
    /// ```
    /// let pool = keyway::Pool::builder().metrics(true).build().unwrap();
    /// pool.execute(|| ()).unwrap();
    /// pool.wait_idle();
    /// let line = pool.metrics().to_string();
    /// assert!(line.contains("queue wait p50"), "{line}");
    /// pool.shutdown();
    /// ```
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}; {} submitted, {} refused, {} handed back",
            self.stats, self.submitted_tasks, self.refused_tasks, self.handed_back_tasks
        )?;
        if !self.timed {
            return Ok(());
        }
        let q = |h: &Histogram, q| h.quantile(q).unwrap_or_default();
        write!(
            f,
            "; timed 1 in {}: queue wait p50 {:?} p99 {:?}, run time p50 {:?} p99 {:?}",
            self.sample_one_in,
            q(&self.queue_wait, 0.5),
            q(&self.queue_wait, 0.99),
            q(&self.run_time, 0.5),
            q(&self.run_time, 0.99),
        )?;
        if let Some(age) = self.oldest_waiting {
            write!(f, ", oldest waiting {age:?}")?;
        }
        if let Some(r) = self.longest_running.first() {
            write!(
                f,
                ", longest running {:?} on thread {}",
                r.running_for, r.thread
            )?;
            if let Some(h) = r.context_hash {
                write!(f, " (context hash {h:#018x}")?;
                if let Some(label) = &r.label {
                    write!(f, ", key {label}")?;
                }
                f.write_str(")")?;
            }
        }
        Ok(())
    }
}
