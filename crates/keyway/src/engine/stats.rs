//! A snapshot of what the pool is doing, and how it prints.

use std::fmt;

/// How many tasks wait in one lane (see [`Stats::largest_lanes`]).
///
/// To tell which context a lane belongs to, compare its `context_hash` with
/// [`Pool::context_hash`](crate::Pool::context_hash) of the keys you use; typed lanes made with
/// [`Pool::typed_lanes`](crate::Pool::typed_lanes) hash their keys the same way.
///
/// ```
/// use std::sync::mpsc::channel;
/// let pool = keyway::Pool::builder().core_threads(1).max_threads(1).build().unwrap();
/// let (release, gate) = channel::<()>();
/// let (started, running) = channel::<()>();
/// pool.execute_sequential("hot", move || {
///     started.send(()).unwrap();
///     gate.recv().unwrap()
/// })
/// .unwrap();
/// running.recv().unwrap(); // the lane's first task runs; the next three wait behind it
/// for _ in 0..3 {
///     pool.execute_sequential("hot", || ()).unwrap();
/// }
/// let deepest = pool.stats().largest_lanes[0];
/// assert_eq!(deepest.context_hash, pool.context_hash(&"hot"));
/// assert!(deepest.queued >= 3); // the three behind the one that waits
/// assert_eq!(deepest.label.unwrap().as_str(), "\"hot\""); // its key, printed
/// release.send(()).unwrap();
/// pool.shutdown();
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaneDepth {
    /// The hash of the lane's context, as [`Pool::context_hash`](crate::Pool::context_hash)
    /// computes it.
    pub context_hash: u64,
    /// Tasks queued in the lane (not counting one that is running).
    pub queued: usize,
    /// The lane's key, printed (`Debug`, at most 48 bytes) when its type allows: see
    /// [`LaneLabel`](crate::LaneLabel). Made as the snapshot is taken, for the lanes it lists.
    pub label: Option<crate::LaneLabel>,
}

/// A snapshot of a pool's threads, tasks and lanes, from [`Pool::stats`](crate::Pool::stats).
///
/// The counts are read one after another while the pool runs, so they are each exact but not
/// necessarily from one instant. `Display` prints them on one line, for a log.
///
/// ```
/// let pool = keyway::Pool::builder().core_threads(2).build().unwrap();
/// assert_eq!(pool.stats().core_threads, 2);
/// pool.submit_sequential(5, || ()).unwrap().join().unwrap();
/// // A task is counted completed just after its handle has the result: `shutdown` waits for
/// // every accepted task to be done and counted.
/// pool.shutdown();
/// let stats = pool.stats();
/// assert_eq!(stats.completed_tasks, 1);
/// assert_eq!(stats.unfinished_tasks(), 0);
/// println!("{stats}"); // threads: 0 core, 0 auxiliary ...; tasks: 0 waiting, 0 running, ...
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Threads counted against the core size.
    pub core_threads: usize,
    /// Threads above the core size (they retire after `keep_alive` idle).
    pub auxiliary_threads: usize,
    /// Reserved threads started (for [`Pool::try_execute`](crate::Pool::try_execute)).
    pub reserved_threads: usize,
    /// Reserved threads idle now, ready to take a task.
    pub idle_reserved_threads: usize,
    /// Threads parked for lack of work.
    pub idle_threads: usize,
    /// Threads inside [`blocking`](crate::blocking) or stuck in one task past `blocked_after`.
    pub blocked_threads: usize,
    /// Auxiliary threads started so far.
    pub auxiliary_started: u64,
    /// Accepted tasks that have not started: in the pool's queues or behind another task of
    /// their lane (or key). [`PoolBuilder::capacity`](crate::PoolBuilder::capacity) bounds
    /// `waiting_tasks + running_tasks`.
    pub waiting_tasks: u64,
    /// Tasks running now on a pool thread (workers and reserved threads).
    pub running_tasks: u64,
    /// Accepted tasks not yet finished: waiting *and* running.
    #[deprecated(
        note = "counts running tasks too: use `waiting_tasks`, `running_tasks` or `unfinished_tasks()`"
    )]
    pub queued_tasks: u64,
    /// Tasks finished: ran (or panicked), skipped after cancel, coalesced away, handed back.
    pub completed_tasks: u64,
    /// Tasks that panicked.
    pub panicked_tasks: u64,
    /// Jobs (a task, or a lane's turn) the monitor moved off a blocked thread's own queue so
    /// that other threads run them; each counts once per move. A steadily rising figure means
    /// tasks block inside the pool: wrap the blocking call in [`blocking`](crate::blocking), or
    /// raise [`PoolBuilder::blocked_after`](crate::PoolBuilder::blocked_after) if they are
    /// merely long.
    pub jobs_moved_off_blocked: u64,
    /// The old name of [`jobs_moved_off_blocked`](Stats::jobs_moved_off_blocked).
    #[deprecated(note = "renamed `jobs_moved_off_blocked`")]
    pub transfers: u64,
    /// Lanes that exist now (idle lanes are freed unless a [`Lane`](crate::Lane) handle pins
    /// them).
    pub live_lanes: usize,
    /// The deepest lanes, deepest first (at most 8).
    pub largest_lanes: Vec<LaneDepth>,
}

impl Stats {
    /// Accepted tasks not yet finished: `waiting_tasks + running_tasks`. Zero once the pool is
    /// idle (and after [`Pool::shutdown`](crate::Pool::shutdown) returned).
    ///
    /// ```
    /// let pool = keyway::Pool::new().unwrap();
    /// pool.execute(|| ()).unwrap();
    /// pool.shutdown();
    /// assert_eq!(pool.stats().unfinished_tasks(), 0);
    /// ```
    pub fn unfinished_tasks(&self) -> u64 {
        self.waiting_tasks.saturating_add(self.running_tasks)
    }
}

impl fmt::Display for Stats {
    /// One line: threads, tasks, lanes, and the deepest lane if any task waits in one.
    ///
    /// ```
    /// let pool = keyway::Pool::builder().core_threads(1).build().unwrap();
    /// pool.shutdown();
    /// let line = pool.stats().to_string();
    /// assert!(line.starts_with("threads: 0 core"), "{line}");
    /// assert!(line.contains("tasks: 0 waiting, 0 running"), "{line}");
    /// ```
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "threads: {} core, {} auxiliary ({} started), {} idle, {} blocked, \
             {} reserved ({} idle); \
             tasks: {} waiting, {} running, {} completed, {} panicked, \
             {} moved off blocked threads; lanes: {} live",
            self.core_threads,
            self.auxiliary_threads,
            self.auxiliary_started,
            self.idle_threads,
            self.blocked_threads,
            self.reserved_threads,
            self.idle_reserved_threads,
            self.waiting_tasks,
            self.running_tasks,
            self.completed_tasks,
            self.panicked_tasks,
            self.jobs_moved_off_blocked,
            self.live_lanes,
        )?;
        if let Some(deepest) = self.largest_lanes.first() {
            write!(
                f,
                ", deepest {} queued (context hash {:#018x}",
                deepest.queued, deepest.context_hash
            )?;
            if let Some(label) = &deepest.label {
                write!(f, ", key {label}")?;
            }
            f.write_str(")")?;
        }
        Ok(())
    }
}
