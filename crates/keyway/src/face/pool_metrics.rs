//! Timing a pool's tasks: [`PoolBuilder::metrics`], [`PoolBuilder::metrics_sampling`] and
//! [`Pool::metrics`]; lanes' printable labels: [`PoolBuilder::label_keys`] and
//! [`Pool::lane_label`].

use std::any::Any;
use std::fmt::Debug;

use super::builder::PoolBuilder;
use super::pool::Pool;
use crate::engine::{Labels, LaneLabel, Metrics};

impl PoolBuilder {
    /// Times a sample of the pool's tasks: [`Pool::metrics`] then carries histograms of how long
    /// tasks wait before they start and how long they run, the age of the oldest waiting task,
    /// and the longest-running tasks with their lane. Default: off.
    ///
    /// Decided here, once: a pool built without it has no timing code on any task's path. With
    /// it, each submitting thread times one in [`metrics_sampling`](Self::metrics_sampling)
    /// tasks (128 by default); choosing them costs a mask of the count that admission
    /// increments anyway, so the others cost what they cost in a pool without metrics
    /// (measured with callgrind on keyway-bench `contexts --work 10`: see the README's
    /// "Operating keyway").
    ///
    /// ```
    /// let pool = keyway::Pool::builder().metrics(true).build().unwrap();
    /// assert!(pool.metrics().timed);
    /// let plain = keyway::Pool::new().unwrap();
    /// assert!(!plain.metrics().timed);
    /// # pool.shutdown(); plain.shutdown();
    /// ```
    pub fn metrics(mut self, on: bool) -> Self {
        self.metrics = on;
        self
    }

    /// With [`metrics`](Self::metrics) on: one task in `one_in`, rounded up to a power of two
    /// (at most 2^31), is timed per submitting thread (the first a thread submits, then every
    /// `one_in`-th). Default 128; 1 times every task (for tests, or a pool whose tasks are
    /// long). Zero is refused by [`build`](Self::build).
    ///
    /// Precisely: admission counts each task on one of 16 stripes of a counter, a thread on
    /// its own stripe while at most 16 threads submit; a task is timed when its stripe had
    /// counted a multiple of `one_in` before it. Threads beyond 16 share stripes, and so one
    /// sample; a typed-lane message, future, multi-key task or `try_execute` that falls on a
    /// sample is counted, not timed.
    ///
    /// ```
    /// let pool = keyway::Pool::builder().metrics(true).metrics_sampling(1).build().unwrap();
    /// pool.execute(|| ()).unwrap();
    /// pool.wait_idle(); // a task's run time is recorded as it ends, after its handle has the result
    /// assert_eq!(pool.metrics().run_time.count(), 1);
    /// assert!(keyway::Pool::builder().metrics_sampling(0).build().is_err());
    /// let rounded = keyway::Pool::builder().metrics(true).metrics_sampling(100).build().unwrap();
    /// assert_eq!(rounded.metrics().sample_one_in, 128);
    /// # rounded.shutdown();
    /// # pool.shutdown();
    /// ```
    pub fn metrics_sampling(mut self, one_in: u32) -> Self {
        self.metrics_sampling = Some(one_in);
        self
    }

    /// Labels lanes whose key is a `K` with the key's `Debug` text (cut to 48 bytes) in
    /// [`Stats::largest_lanes`](crate::Stats::largest_lanes) and
    /// [`Metrics::longest_running`]. Keys of the common types (integers, `bool`, `char`,
    /// `String`, `&'static str`, `Box<str>`, `Arc<str>`) are labelled without it; call it once
    /// per other key type. A label is made only for a lane a snapshot lists, when the snapshot
    /// is taken: submitting and running tasks cost the same with or without it. A `Debug` that
    /// panics or fails leaves the lane unlabelled.
    ///
    /// ```
    /// #[derive(Debug, Hash, PartialEq, Eq)]
    /// struct Account(u32);
    /// let pool = keyway::Pool::builder().label_keys::<Account>().build().unwrap();
    /// assert_eq!(pool.lane_label(&Account(7)).unwrap().as_str(), "Account(7)");
    /// let plain = keyway::Pool::new().unwrap();
    /// assert_eq!(plain.lane_label(&Account(7)), None); // not a type it was told of
    /// # pool.shutdown(); plain.shutdown();
    /// ```
    pub fn label_keys<K: Debug + 'static>(mut self) -> Self {
        let labels = self.labels.take().unwrap_or_else(Labels::common);
        self.labels = Some(labels.with::<K>());
        self
    }
}

impl Pool {
    /// A snapshot of the pool's numbers with time in them: [`stats`](Pool::stats), the
    /// histograms of queue wait and run time, the oldest waiting age, the longest-running tasks,
    /// and the counts of submitted, refused and handed-back tasks (see [`Metrics`]). The time
    /// figures need [`PoolBuilder::metrics`].
    ///
    /// Its cost does not grow with the number of lanes: it reads counters, the histograms'
    /// buckets and a bounded watch list of lanes, so a thread may poll it (measured: the
    /// `stats_cost` example).
    ///
    /// ```
    /// let pool = keyway::Pool::builder().metrics(true).metrics_sampling(1).build().unwrap();
    /// pool.submit_sequential("k", || std::thread::sleep(std::time::Duration::from_millis(1)))
    ///     .unwrap()
    ///     .join()
    ///     .unwrap();
    /// pool.wait_idle(); // its run time is recorded as it ends, after its handle has the result
    /// let m = pool.metrics();
    /// assert!(m.run_time.quantile(0.5).unwrap() >= std::time::Duration::from_millis(1));
    /// assert_eq!(m.stats.completed_tasks, 1);
    /// pool.shutdown();
    /// ```
    pub fn metrics(&self) -> Metrics {
        self.registry().metrics()
    }

    /// The label this pool gives a lane whose key is `key` (see
    /// [`PoolBuilder::label_keys`]), `None` if it does not print keys of that type; for
    /// matching a listed lane with a key by its text, as
    /// [`context_hash`](Pool::context_hash) does by its hash.
    ///
    /// ```
    /// let pool = keyway::Pool::new().unwrap();
    /// assert_eq!(pool.lane_label(&"eu-west").unwrap().to_string(), "\"eu-west\"");
    /// assert_eq!(pool.lane_label(&(1, 2)), None); // tuples: name them with label_keys
    /// # pool.shutdown();
    /// ```
    pub fn lane_label<K: Any>(&self, key: &K) -> Option<LaneLabel> {
        self.registry().config.labels.of(key)
    }
}
