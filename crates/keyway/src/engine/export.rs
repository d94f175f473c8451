//! The `metrics` feature: a timed pool publishes its numbers through the `metrics` crate's
//! facade, to whatever recorder the application installed (a Prometheus exporter, say).
//!
//! Names follow the OpenTelemetry conventions as a Prometheus exporter renders them (dots as
//! underscores, the unit as a suffix); every series has the label `pool` (the pool's name) and
//! at most one more of a handful of values — never a key. Histograms are recorded by the timed
//! tasks themselves; the gauges and counters by the pool's monitor once a period. Handles are
//! registered when the pool is built: install the recorder before building the pool.

use metrics::{Counter, Gauge, Histogram, Unit};

use super::metrics::Metrics;

/// Histogram of timed tasks' queue wait, seconds.
pub const QUEUE_WAIT: &str = "keyway_pool_task_queue_wait_seconds";
/// Histogram of timed tasks' run time, seconds.
pub const RUN_TIME: &str = "keyway_pool_task_run_seconds";
/// Gauge: the oldest waiting timed task's age, seconds (0: none waits).
pub const OLDEST_WAITING: &str = "keyway_pool_task_oldest_waiting_seconds";
/// Gauge: the longest-running task's time so far, seconds.
pub const LONGEST_RUNNING: &str = "keyway_pool_task_longest_running_seconds";
/// Counter: tasks by `state` (`submitted`, `completed`, `panicked`, `refused`, `handed_back`).
pub const TASKS_TOTAL: &str = "keyway_pool_tasks_total";
/// Gauge: tasks by `state` (`waiting`, `running`).
pub const TASKS: &str = "keyway_pool_tasks";
/// Gauge: threads by `state` (`core`, `auxiliary`, `idle`, `blocked`, `reserved`).
pub const THREADS: &str = "keyway_pool_threads";
/// Gauge: live lanes.
pub const LANES: &str = "keyway_pool_lanes";
/// Gauge: tasks queued in the deepest lane.
pub const DEEPEST_LANE: &str = "keyway_pool_lane_deepest_queued";

/// The handles of one pool's series.
pub(crate) struct Handles {
    pub(crate) queue_wait: Histogram,
    pub(crate) run_time: Histogram,
    oldest_waiting: Gauge,
    longest_running: Gauge,
    totals: [Counter; 5],
    tasks: [Gauge; 2],
    threads: [Gauge; 5],
    lanes: Gauge,
    deepest: Gauge,
}

impl Handles {
    pub(crate) fn new(pool: &str) -> Self {
        describe();
        let pool = pool.to_owned();
        let counter = |state: &'static str| metrics::counter!(TASKS_TOTAL, "pool" => pool.clone(), "state" => state);
        let gauge = |name: &'static str, state: &'static str| metrics::gauge!(name, "pool" => pool.clone(), "state" => state);
        Handles {
            queue_wait: metrics::histogram!(QUEUE_WAIT, "pool" => pool.clone()),
            run_time: metrics::histogram!(RUN_TIME, "pool" => pool.clone()),
            oldest_waiting: metrics::gauge!(OLDEST_WAITING, "pool" => pool.clone()),
            longest_running: metrics::gauge!(LONGEST_RUNNING, "pool" => pool.clone()),
            totals: [
                "submitted",
                "completed",
                "panicked",
                "refused",
                "handed_back",
            ]
            .map(counter),
            tasks: ["waiting", "running"].map(|s| gauge(TASKS, s)),
            threads: ["core", "auxiliary", "idle", "blocked", "reserved"]
                .map(|s| gauge(THREADS, s)),
            lanes: metrics::gauge!(LANES, "pool" => pool.clone()),
            deepest: metrics::gauge!(DEEPEST_LANE, "pool" => pool),
        }
    }

    /// The monitor's once-a-period update.
    pub(crate) fn publish(&self, m: &Metrics) {
        let s = &m.stats;
        let totals = [
            m.submitted_tasks,
            s.completed_tasks,
            s.panicked_tasks,
            m.refused_tasks,
            m.handed_back_tasks,
        ];
        for (c, v) in self.totals.iter().zip(totals) {
            c.absolute(v);
        }
        self.tasks[0].set(s.waiting_tasks as f64);
        self.tasks[1].set(s.running_tasks as f64);
        let threads = [
            s.core_threads,
            s.auxiliary_threads,
            s.idle_threads,
            s.blocked_threads,
            s.reserved_threads,
        ];
        for (g, v) in self.threads.iter().zip(threads) {
            g.set(v as f64);
        }
        self.lanes.set(s.live_lanes as f64);
        self.deepest
            .set(s.largest_lanes.first().map_or(0.0, |d| d.queued as f64));
        self.oldest_waiting
            .set(m.oldest_waiting.map_or(0.0, |d| d.as_secs_f64()));
        self.longest_running.set(
            m.longest_running
                .first()
                .map_or(0.0, |r| r.running_for.as_secs_f64()),
        );
    }
}

fn describe() {
    metrics::describe_histogram!(
        QUEUE_WAIT,
        Unit::Seconds,
        "Sampled tasks' wait from submission to start"
    );
    metrics::describe_histogram!(RUN_TIME, Unit::Seconds, "Sampled tasks' run time");
    metrics::describe_gauge!(
        OLDEST_WAITING,
        Unit::Seconds,
        "Age of the oldest sampled task not yet started"
    );
    metrics::describe_gauge!(
        LONGEST_RUNNING,
        Unit::Seconds,
        "How long the longest-running task has run"
    );
    metrics::describe_counter!(
        TASKS_TOTAL,
        Unit::Count,
        "Tasks by state: submitted, completed, panicked, refused, handed_back"
    );
    metrics::describe_gauge!(TASKS, Unit::Count, "Tasks waiting and running now");
    metrics::describe_gauge!(THREADS, Unit::Count, "Pool threads by state");
    metrics::describe_gauge!(LANES, Unit::Count, "Live lanes");
    metrics::describe_gauge!(
        DEEPEST_LANE,
        Unit::Count,
        "Tasks queued in the deepest lane"
    );
}
