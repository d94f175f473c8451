//! A scheduler on the pool: one executor with random limit, timeout and order, a coordinator
//! whose hooks may panic; tasks scheduled with delays from zero to never, in contexts whose
//! key's `Clone`/`Drop` may panic; at the end `shutdown` or `shutdown_now`, and the account of
//! every scheduled task: ran, panicked, timed out, cancelled, rejected or handed back — once.

use std::cell::Cell;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use keyway::{
    ConfigError, ExecutorConfig, PendingTask, Pool, PriorityOrder, Scheduler, TaskError, Timing,
};

use crate::closures::spin;
use crate::futures::check_dropped_once;
use crate::handles::{Handles, Outcome};
use crate::input::{MoreOp, SchedBody, SchedSettings, Span, Tps};
use crate::probes::{sched_key, Coordinator, Fate, FateProbe, Out};
use crate::probes::{PANICKED, RETURNED};

const EXECUTOR: &str = "x";

thread_local! {
    /// Set while this thread runs tasks handed back to it (see [`run_or_drop`]).
    static HANDING_BACK: Cell<bool> = const { Cell::new(false) };
    /// Set while this thread runs what `Scheduler::shutdown_now` handed back.
    static FROM_SCHEDULER: Cell<bool> = const { Cell::new(false) };
}

/// Runs (`run`) or drops each task; a panic on the way (a payload's or key's drop, on this
/// thread: the user's own) is caught. A scheduled task's body run here does not call
/// `Scheduler::shutdown`: it would wait for itself.
pub fn run_or_drop(tasks: impl IntoIterator<Item = PendingTask>, run: bool) {
    let was = HANDING_BACK.with(|h| h.replace(true));
    for task in tasks {
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            if run {
                let _ = task.run();
            } else {
                drop(task);
            }
        }));
    }
    HANDING_BACK.with(|h| h.set(was));
}

/// What goes with a scheduled task's handle: what its task did, and whether a `cancel()` on it
/// returned true.
pub struct Meta {
    fate: Arc<Fate>,
    cancelled: bool,
}

#[derive(Default, Debug)]
struct Outcomes {
    ok: u64,
    panicked: u64,
    cancelled: u64,
    timed_out: u64,
    rejected: u64,
}

pub struct Sched {
    scheduler: Scheduler,
    settings: SchedSettings,
    paused: bool,
    handles: Handles<Meta>,
    /// Every accepted task's fate (with a handle or detached).
    accepted: Vec<Arc<Fate>>,
    /// Refused at `schedule*`.
    refused: Vec<Arc<Fate>>,
    outcomes: Outcomes,
}

/// The scheduler the input asks for: `None` if it has none, or its coordinator's `join`
/// panicked (which must be a `ConfigError`, never a panic).
pub fn build(pool: &Pool, s: Option<SchedSettings>) -> Option<Sched> {
    let s = s?;
    let mut config = match s.tps.get() {
        Some(tps) => ExecutorConfig::with_tps(tps),
        None => ExecutorConfig::unlimited(),
    };
    if let Some(t) = s.timeout {
        config = config.timeout(t.get());
    }
    if s.lowest_first {
        config = config.order(PriorityOrder::LowestFirst);
    }
    config = config.early_dispatch(s.early_dispatch);
    let mut b = Scheduler::builder(pool)
        .interval(Duration::from_millis(10 + u64::from(s.interval % 30)))
        .executor(EXECUTOR, config);
    if let Some(hooks) = s.coordinator {
        b = b.coordinator(Coordinator(hooks));
    }
    match b.build() {
        Ok(scheduler) => Some(Sched {
            scheduler,
            settings: s,
            paused: matches!(s.tps, Tps::Paused),
            handles: Handles::default(),
            accepted: Vec::new(),
            refused: Vec::new(),
            outcomes: Outcomes::default(),
        }),
        Err(ConfigError::CoordinatorPanicked(_)) => {
            let hooks = s.coordinator.expect("only our coordinator panics");
            assert!(hooks.join_panics && s.tps.get().is_some());
            None
        }
        Err(e) => panic!("a valid scheduler configuration refused: {e}"),
    }
}

impl Sched {
    /// Applies one of the scheduler's ops (the others are not ours: ignored).
    pub fn apply(&mut self, op: MoreOp) {
        match op {
            MoreOp::Schedule {
                key,
                delay,
                priority,
                body,
                detach,
                result_bomb,
            } => self.schedule(key, delay, priority, body, detach, result_bomb),
            MoreOp::CancelScheduled(i) => {
                if let Some(meta) = self.handles.cancel(i) {
                    meta.cancelled = true;
                }
            }
            MoreOp::PollScheduledPanicking(i) => {
                if let Some((meta, outcome)) = self.handles.poll_panicking(i) {
                    self.settle(&meta, outcome);
                }
            }
            MoreOp::JoinScheduled(i, wait) => {
                let timeout = Duration::from_millis(if wait { 3 } else { 0 });
                if let Some((meta, outcome)) = self.handles.join(i, timeout) {
                    self.settle(&meta, outcome);
                }
            }
            MoreOp::SetTps(tps) => {
                let v = tps.get().unwrap_or(f64::INFINITY);
                if self.scheduler.set_tps(EXECUTOR, v).is_ok() {
                    self.paused = v == 0.0;
                }
            }
            _ => {}
        }
    }

    fn schedule(
        &mut self,
        key: Option<crate::input::SchedKeySpec>,
        delay: Span,
        priority: i8,
        body: SchedBody,
        detach: bool,
        result_bomb: bool,
    ) {
        let (probe, fate) = FateProbe::new();
        let me = matches!(
            body,
            SchedBody::SchedulerShutdown | SchedBody::SchedulerShutdownNow
        )
        .then(|| self.scheduler.clone());
        let bomb = result_bomb && detach;
        let task = move || {
            let probe = probe;
            probe.start();
            if FROM_SCHEDULER.with(Cell::get) {
                probe.0.handed_back.store(true, Ordering::SeqCst);
            }
            match body {
                SchedBody::Quick => {}
                SchedBody::Panic => {
                    probe.end(PANICKED);
                    panic!("fuzz: scheduled task panics");
                }
                SchedBody::Spin(n) => spin(n),
                SchedBody::SchedulerShutdown => {
                    if !HANDING_BACK.with(Cell::get) {
                        me.expect("set for this body").shutdown();
                    }
                }
                SchedBody::SchedulerShutdownNow => {
                    run_or_drop(me.expect("set for this body").shutdown_now(), false);
                }
            }
            probe.end(RETURNED);
            Out(bomb)
        };
        let timing = Timing::after(delay.get()).priority(i64::from(priority));
        let s = &self.scheduler;
        let scheduled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match key {
            None => s.schedule_with(EXECUTOR, timing, task).ok(),
            Some(k) => s
                .schedule_sequential(EXECUTOR, timing, sched_key(k), task)
                .ok(),
        }));
        match scheduled {
            Ok(Some(handle)) => {
                self.accepted.push(fate.clone());
                let meta = Meta {
                    fate,
                    cancelled: false,
                };
                self.handles.keep(handle, meta, detach);
            }
            Ok(None) | Err(_) => self.refused.push(fate),
        }
    }

    /// What a handle said against what its task did.
    fn settle(&mut self, meta: &Meta, outcome: Outcome) {
        let (started, ended) = (meta.fate.started(), meta.fate.ended());
        let cancelled = meta.cancelled;
        let o = &mut self.outcomes;
        match outcome {
            Ok(_) => {
                assert_eq!(
                    ended, RETURNED,
                    "a scheduled task says Ok, it did not return"
                );
                o.ok += 1;
            }
            Err(TaskError::Panicked(_)) => {
                assert_eq!(
                    ended, PANICKED,
                    "a scheduled task says Panicked, it did not"
                );
                o.panicked += 1;
            }
            Err(TaskError::Cancelled) => {
                assert!(
                    cancelled && !started,
                    "Cancelled: not by cancel(), or it ran"
                );
                o.cancelled += 1;
            }
            Err(TaskError::TimedOut) => {
                assert!(!started, "a scheduled task that ran says TimedOut");
                assert!(self.settings.timeout.is_some(), "TimedOut with no timeout");
                o.timed_out += 1;
            }
            Err(TaskError::Rejected) => {
                assert!(!started, "a scheduled task that ran says Rejected");
                o.rejected += 1;
            }
            Err(other) => panic!("a scheduled task's handle says {other:?}"),
        }
    }

    /// Resumes a paused executor: a graceful shutdown of the scheduler (its own, or the pool's,
    /// which shuts its schedulers down first) waits for a paused executor's tasks for ever while
    /// a `Scheduler` handle could still resume it, as documented.
    pub fn resume_if_paused(&mut self) {
        if self.paused && self.scheduler.set_tps(EXECUTOR, 1000.0).is_ok() {
            self.paused = false;
        }
    }

    /// Shuts the scheduler down as the input says (resuming a paused executor first for a
    /// graceful shutdown: it would wait for its tasks for ever, as documented), meanwhile
    /// running or dropping what tasks hand back through `drain` (a graceful shutdown waits for
    /// tasks the pool handed back to be dropped); then runs or drops what `shutdown_now`
    /// handed back.
    pub fn shut_down(&mut self, mut drain: impl FnMut()) {
        let now = self.settings.shutdown_now;
        if !now {
            self.resume_if_paused();
        }
        let s = &self.scheduler;
        let back = std::thread::scope(|scope| {
            let t = scope.spawn(move || {
                if now {
                    s.shutdown_now()
                } else {
                    s.shutdown();
                    Vec::new()
                }
            });
            while !t.is_finished() {
                drain();
                std::thread::sleep(Duration::from_millis(1));
            }
            t.join().expect("Scheduler::shutdown panicked")
        });
        assert!(s.is_shutdown());
        FROM_SCHEDULER.with(|f| f.set(true));
        run_or_drop(back, self.settings.run_handed_back);
        FROM_SCHEDULER.with(|f| f.set(false));
    }

    /// Once the pool is shut down and every handed-back task run or dropped: each scheduled
    /// task ended exactly once, its handle and the scheduler's counts agree with what it did.
    ///
    /// After a `Pool::shutdown_now` (`pool_shutdown_now`), which hands back the scheduler's
    /// unreleased tasks (counted `rejected`) mixed with the pool's own released ones (counted as
    /// they end when run), the two cannot be told apart once run from that list: each task is
    /// then checked counted exactly once, and `ran`/`panicked` bounded by what did run; and a
    /// handle may be cancelled after its task was handed back (counted `rejected`).
    pub fn check(mut self, pool_shutdown_now: bool) {
        for (meta, outcome) in self.handles.join_all() {
            self.settle(&meta, outcome);
        }
        check_dropped_once(&self.accepted, "scheduled");
        check_dropped_once(&self.refused, "refused by the scheduler");
        assert!(
            self.refused.iter().all(|f| !f.started()),
            "a refused task ran"
        );
        // Tasks `Scheduler::shutdown_now` handed back count `rejected` whatever is done with
        // them then (`ExecutorStats::rejected`): run here, they are not the scheduler's `ran`.
        let count = |how: u8| {
            let ended = self.accepted.iter().filter(|f| f.ended() == how);
            ended.filter(|f| !f.handed_back()).count() as u64
        };
        let (returned, panicked) = (count(RETURNED), count(PANICKED));
        assert!(
            self.accepted
                .iter()
                .all(|f| f.started() == (f.ended() != 0)),
            "a scheduled task started and did not end"
        );
        let ended_otherwise = self.accepted.len() as u64 - returned - panicked;
        let stats = self.scheduler.stats(EXECUTOR).expect("the executor exists");
        let o = &self.outcomes;
        assert_eq!(stats.pending, 0, "tasks still pending: {stats:?}");
        assert_eq!(stats.scheduled, self.accepted.len() as u64, "{stats:?}");
        let all = |how: u8| self.accepted.iter().filter(|f| f.ended() == how).count() as u64;
        if pool_shutdown_now {
            assert!(
                stats.ran <= all(RETURNED) && stats.panicked <= all(PANICKED),
                "{stats:?}"
            );
            assert_eq!(
                stats.ran + stats.panicked + stats.cancelled + stats.timed_out + stats.rejected,
                self.accepted.len() as u64,
                "{stats:?} {o:?}"
            );
        } else {
            assert_eq!(
                (stats.ran, stats.panicked),
                (returned, panicked),
                "{stats:?}"
            );
            assert_eq!(
                stats.cancelled + stats.timed_out + stats.rejected,
                ended_otherwise,
                "{stats:?} {o:?}"
            );
        }
        if pool_shutdown_now {
            // A task handed back mid-run (counted `rejected` then) whose handle is cancelled
            // afterwards says `Cancelled`: the handles may count more cancels.
            assert!(stats.cancelled <= o.cancelled, "{stats:?} {o:?}");
        } else {
            assert_eq!(stats.cancelled, o.cancelled, "{stats:?} {o:?}");
        }
        assert!(stats.timed_out >= o.timed_out && stats.rejected >= o.rejected);
        assert!(o.ok <= all(RETURNED) && o.panicked <= all(PANICKED));
    }
}
