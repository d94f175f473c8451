//! The state every worker, submitter and the monitor share: queues, thread slots, counters, flags.
//!
//! Admission and the count of finished tasks: `accounting.rs`; start, shutdown and joining:
//! `lifecycle.rs`.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use crossbeam_deque::{Injector, Steal, Stealer, Worker};
use crossbeam_utils::sync::{Parker, Unparker};
use parking_lot::{Condvar, Mutex};

use super::config::Config;
use super::counter::Striped;
use super::live::Live;
use super::meter::{Meter, Timed};
use super::progress::Progress;
use super::seats::Reserved;
use super::sleep::Sleep;
use super::stoppers::Stoppers;
use super::waiters::Waiters;
use super::watch::Watch;
use super::work::{TableOps, Work};
use super::worker;
use crate::task::{drop_quietly, PanicReport};

/// One thread position: its deque and parker live here while no thread holds them.
///
/// Unpadded (96 bytes): `progress.run_seq` of slot `k` and the `stealer` of slot `k + 1` can
/// share a cache line. Measured (2 cores under load 4-8): an A/B against
/// `CachePadded<WorkerSlot>` with keyway-bench `throughput` (keys 0 and 1) and `contexts --work 10`,
/// 8 interleaved rounds, gave median ratios 1.13, 0.93 and 1.02 with pair ratios spread
/// 0.66-1.38: no effect above the noise, so the padding is not taken.
pub(crate) struct WorkerSlot {
    pub(crate) stealer: Stealer<Work>,
    pub(super) parts: Mutex<Option<(Worker<Work>, Parker)>>,
    pub(super) unparker: Unparker,
    /// Set while the thread is inside `keyway::blocking`.
    pub(crate) blocking: AtomicBool,
    /// `run_seq` (odd while inside a task) and the monitor's `stuck` flag (`progress.rs`).
    pub(crate) progress: Progress,
    /// Tasks finished by the workers that held this slot (see "Finishing on a worker" in
    /// `accounting.rs`): written only by the thread holding the slot, with plain stores.
    pub(super) finished: AtomicU64,
}

pub(crate) struct Registry {
    pub(crate) config: Config,
    /// The `keyway_pool` span (field `pool`: the pool's name) every thread of the pool runs in.
    pub(crate) span: tracing::Span,
    pub(crate) injector: Injector<Work>,
    pub(crate) slots: Box<[WorkerSlot]>,
    pub(super) free_slots: Mutex<Vec<usize>>,
    /// Highest slot index ever used, plus one: stealing scans `slots[..high_water]`.
    pub(super) high_water: AtomicUsize,
    pub(crate) sleep: Sleep,
    pub(crate) live: AtomicUsize,
    pub(crate) core_target: AtomicUsize,
    pub(crate) aux_spawned: AtomicU64,
    pub(crate) transfers: AtomicU64,
    pub(crate) accepted: Striped,
    pub(crate) finished: Striped,
    pub(crate) panicked: AtomicU64,
    pub(super) queued: AtomicUsize,
    pub(super) closed: AtomicBool,
    pub(super) stop_now: AtomicBool,
    /// Pool threads inside `shutdown_now`, and what they hold: nobody waits for them.
    pub(super) stoppers: Stoppers,
    /// Signalled whenever a pool thread exits (or a stopper comes in): `lifecycle` waits on it.
    pub(super) exited: Condvar,
    pub(super) threads: Mutex<Vec<JoinHandle<()>>>,
    pub(super) monitor_thread: Mutex<Option<JoinHandle<()>>>,
    pub(crate) monitor: Unparker,
    pub(crate) reserved: Reserved,
    tables: Mutex<Vec<std::sync::Weak<dyn TableOps>>>,
    /// Started futures waiting to be woken: `shutdown_now` cancels them.
    pub(crate) futures: Live,
    /// Submitters waiting for room, callers of `wait_idle`.
    pub(crate) waiters: Waiters,
    /// Lanes found deeper than a turn's batch (`watch.rs`).
    pub(crate) watch: Watch,
    /// The timed side (`PoolBuilder::metrics`), if the pool has one.
    pub(crate) meter: Option<Arc<Meter>>,
    /// Tasks refused at admission.
    pub(crate) refused: AtomicU64,
    /// Accepted tasks handed back unrun by `shutdown_now`.
    pub(crate) handed_back: AtomicU64,
}

impl Registry {
    pub(crate) fn new(config: Config, monitor: Unparker) -> Self {
        let mut slots = Vec::with_capacity(config.max_threads);
        for _ in 0..config.max_threads {
            let deque = Worker::new_fifo();
            let parker = Parker::new();
            slots.push(WorkerSlot {
                stealer: deque.stealer(),
                unparker: parker.unparker().clone(),
                parts: Mutex::new(Some((deque, parker))),
                blocking: AtomicBool::new(false),
                progress: Progress::new(),
                finished: AtomicU64::new(0),
            });
        }
        let span = tracing::info_span!("keyway_pool", pool = config.name.as_str());
        let meter = config
            .metrics
            .map(|one_in| Arc::new(Meter::new(one_in, config.max_threads, &config.name)));
        Registry {
            span,
            free_slots: Mutex::new((0..config.max_threads).rev().collect()),
            high_water: AtomicUsize::new(0),
            core_target: AtomicUsize::new(config.core_threads),
            config,
            injector: Injector::new(),
            slots: slots.into_boxed_slice(),
            sleep: Sleep::new(),
            live: AtomicUsize::new(0),
            aux_spawned: AtomicU64::new(0),
            transfers: AtomicU64::new(0),
            accepted: Striped::new(),
            finished: Striped::new(),
            panicked: AtomicU64::new(0),
            queued: AtomicUsize::new(0),
            closed: AtomicBool::new(false),
            stop_now: AtomicBool::new(false),
            stoppers: Stoppers::new(),
            exited: Condvar::new(),
            threads: Mutex::new(Vec::new()),
            monitor_thread: Mutex::new(None),
            monitor,
            reserved: Reserved::new(),
            tables: Mutex::new(Vec::new()),
            futures: Live::new(),
            waiters: Waiters::new(),
            meter,
            watch: Watch::new(),
            refused: AtomicU64::new(0),
            handed_back: AtomicU64::new(0),
        }
    }

    /// The pool's name, for the `pool` field of its events.
    pub(crate) fn name(&self) -> &str {
        &self.config.name
    }

    pub(crate) fn report_panic(&self, report: PanicReport) {
        self.panicked.fetch_add(1, Ordering::Relaxed);
        self.notify_panic(report);
    }

    /// [`report_panic`](Self::report_panic) of a task that ran in the context `context` (a
    /// lane's hash), unless the report names one already.
    #[cold]
    pub(crate) fn report_panic_in(&self, context: Option<u64>, mut report: PanicReport) {
        if let Some(hash) = context {
            report.set_context(hash);
        }
        self.report_panic(report);
    }

    /// Logs `report` and passes it to the panic hook, without counting a panicked task (a
    /// thread hook's panic goes here).
    pub(crate) fn notify_panic(&self, report: PanicReport) {
        // Not `message`: tracing reserves that name for the event's own message.
        tracing::error!(
            pool = self.name(),
            context_hash = report.context_hash(),
            thread = report.thread_name(),
            panic = report.message(),
            "keyway task panicked"
        );
        if let Some(hook) = &self.config.panic_hook {
            if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| hook(&report))).is_err() {
                tracing::error!(pool = self.name(), "keyway panic hook panicked");
            }
        }
        // The report may hold the panic's payload, whose drop is user code: contained, so that
        // whoever reports (a worker, a lane runner, a future's driver) goes on with its
        // bookkeeping.
        drop_quietly(report);
    }

    // ---- queues and wake-ups ------------------------------------------------------------

    /// Queues a job: on the current worker's own deque when called from a worker of this pool
    /// (hot cache), otherwise on the global injector; then wakes an idle worker if there is one.
    pub(crate) fn schedule(self: &Arc<Self>, job: Work) {
        if worker::is_worker_of(self) {
            worker::with_current(|cx| match cx {
                Some(cx) => cx.schedule(job),
                None => self.inject(job),
            });
        } else {
            self.inject(job);
        }
    }

    /// Queues `job` on the injector, then wakes an idle worker if there is one: `schedule` from
    /// a thread that is not one of this pool's workers, or that knows it is none (an `OnPool`
    /// without a worker).
    #[inline]
    pub(crate) fn inject(&self, job: Work) {
        self.injector.push(job);
        self.notify_one();
    }

    pub(crate) fn notify_one(&self) {
        if let Some(w) = self.sleep.wake_one() {
            self.slots[w].unparker.unpark();
        }
    }

    pub(crate) fn notify_all(&self) {
        for w in self.sleep.wake_all() {
            self.slots[w].unparker.unpark();
        }
        self.reserved.wake_all();
        self.monitor.unpark();
    }

    pub(crate) fn high_water(&self) -> usize {
        self.high_water.load(Ordering::Acquire)
    }

    /// Whether any queue holds a job.
    pub(crate) fn has_work(&self) -> bool {
        !self.injector.is_empty()
            || self.slots[..self.high_water()]
                .iter()
                .any(|s| !s.stealer.is_empty())
    }

    /// Moves every job queued on `slot`'s deque to the injector (the thread there is blocked).
    pub(crate) fn transfer_from(&self, slot: usize) -> usize {
        let mut moved = 0;
        loop {
            match self.slots[slot].stealer.steal() {
                Steal::Success(job) => {
                    self.injector.push(job);
                    moved += 1;
                }
                Steal::Empty => break,
                Steal::Retry => continue,
            }
        }
        if moved > 0 {
            self.transfers.fetch_add(moved as u64, Ordering::Relaxed);
            tracing::debug!(
                pool = self.name(),
                slot,
                moved,
                "keyway moved work away from a blocked worker"
            );
            for _ in 0..moved.min(self.config.max_threads) {
                self.notify_one();
            }
        }
        moved
    }

    /// Threads that cannot take work now: inside `blocking`, or stuck in one task.
    pub(crate) fn blocked_threads(&self) -> usize {
        self.slots[..self.high_water()]
            .iter()
            .filter(|s| s.blocking.load(Ordering::Acquire) || s.progress.is_stuck())
            .count()
    }

    // ---- lane tables --------------------------------------------------------------------

    pub(crate) fn register_table(&self, table: std::sync::Weak<dyn TableOps>) {
        let mut tables = self.tables.lock();
        tables.retain(|t| t.strong_count() > 0);
        tables.push(table);
    }

    /// `task`, timed if the pool has a meter (`admit_timing` said `Timed`), or given back.
    pub(crate) fn timed(&self, task: crate::task::Task) -> Result<Timed, crate::task::Task> {
        match &self.meter {
            Some(meter) => Ok(Timed::new(meter, task)),
            None => Err(task),
        }
    }

    pub(crate) fn tables(&self) -> Vec<Arc<dyn TableOps>> {
        self.tables
            .lock()
            .iter()
            .filter_map(|t| t.upgrade())
            .collect()
    }
}
