//! One run: the pool, the calls of the input in order, then the end (scheduler, then pool shut
//! down; everything handed back run or dropped; every handle joined) and the account.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::Duration;

use keyway::{PendingTask, Pool, TaskError, TaskHandle};

use crate::batches::{Batches, Env};
use crate::closures::{self, spin};
use crate::futures::{self, check_dropped_once, check_future, poll_once, Job, Waiter};
use crate::handles::{Handles, Outcome};
use crate::input::{
    BatchInput, BatchOp, BatchStep, Body, Input, Kind, MixedInput, MoreOp, Op, SchedSettings,
    Settings, Span, SpawnKind,
};
use crate::probes::{allowed, panicking_waker, Fate, FateProbe, Ledger, Out, Probe};
use crate::schedule::{self, run_or_drop, Sched};

/// What goes with a pool task's handle: a closure's or a future's.
struct Meta {
    /// A future's (`None`: a closure's).
    fate: Option<Arc<Fate>>,
    /// A `cancel()` on it returned true.
    cancelled: bool,
    coalescing: bool,
}

/// Outcomes of closures' handles.
#[derive(Default)]
struct Outcomes {
    ok: usize,
    panicked: usize,
    cancelled: usize,
    coalesced: usize,
    rejected: usize,
}

/// Everything one run keeps track of.
struct Run<'p> {
    pool: &'p Pool,
    ledger: Arc<Ledger>,
    /// What `shutdown_now` called inside a task handed back.
    inside_back: Arc<Mutex<Vec<PendingTask>>>,
    handed_back: Vec<PendingTask>,
    run_handed_back: bool,
    handles: Handles<Meta>,
    /// Closures accepted.
    accepted: usize,
    /// Refused closures that had no handle (their probes count in `unrun_without_handle`).
    refused_without_handle: usize,
    /// `cancel()` calls on closures' handles that returned true.
    cancelled: usize,
    outcomes: Outcomes,
    /// Every future spawned (accepted or refused).
    futures: Vec<Arc<Fate>>,
    /// `wait_for_room_async` futures still pending.
    waiters: Vec<Waiter<'p>>,
    /// A `join` without a deadline is safe only while every accepted task is sure to finish on
    /// its own: not once a `shutdown_now` (outside, or in a queued task) may hand tasks back.
    unbounded_join_ok: bool,
    sched: Option<Sched>,
    /// `pool_batches`' calls and their account.
    batches: Batches,
    /// The pool has a capacity.
    bounded: bool,
}

/// `pool_api`: closures only (up to 48 calls).
pub fn run(input: Input) {
    let steps = input.ops.into_iter().take(48).map(BatchStep::Pool);
    run_steps(&input.settings, None, steps, input.run_handed_back);
}

/// `pool_mixed`: closures, futures, wakers, a scheduler (up to 64 calls).
pub fn run_mixed(input: MixedInput) {
    let steps = input.steps.into_iter().take(64).map(BatchStep::from);
    run_steps(
        &input.settings,
        input.scheduler,
        steps,
        input.run_handed_back,
    );
}

/// `pool_batches`: `pool_mixed`'s calls and batches (up to 64 calls).
pub fn run_batches(input: BatchInput) {
    let steps = input.steps.into_iter().take(64);
    run_steps(
        &input.settings,
        input.scheduler,
        steps,
        input.run_handed_back,
    );
}

fn run_steps(
    settings: &Settings,
    scheduler: Option<SchedSettings>,
    steps: impl Iterator<Item = BatchStep>,
    run_handed_back: bool,
) {
    // Build must never panic, whatever the settings.
    let Some(pool) = closures::build(settings) else {
        return;
    };
    let mut run = Run {
        pool: &pool,
        ledger: Arc::default(),
        inside_back: Arc::default(),
        handed_back: Vec::new(),
        run_handed_back,
        handles: Handles::default(),
        accepted: 0,
        refused_without_handle: 0,
        cancelled: 0,
        outcomes: Outcomes::default(),
        futures: Vec::new(),
        waiters: Vec::new(),
        unbounded_join_ok: true,
        sched: schedule::build(&pool, scheduler),
        batches: Batches::new(),
        bounded: settings.capacity.is_some(),
    };
    for step in steps {
        match step {
            BatchStep::Pool(op) => run.op(op),
            BatchStep::More(op) => run.more(op),
            BatchStep::Batch(op) => run.batch(op),
        }
    }
    run.finish();
}

impl Run<'_> {
    fn op(&mut self, op: Op) {
        match op {
            Op::Submit {
                kind,
                body,
                detach,
                result_bomb,
            } => self.submit(kind, body, detach, result_bomb),
            Op::Cancel(i) => {
                if let Some(meta) = self.handles.cancel(i) {
                    meta.cancelled = true;
                    if meta.fate.is_none() {
                        self.cancelled += 1;
                    }
                }
            }
            Op::Join(i, span) => {
                let timeout = match span {
                    Span::Max if !self.unbounded_join_ok => Duration::from_millis(1),
                    other => other.get(),
                };
                if let Some((meta, outcome)) = self.handles.join(i, timeout) {
                    self.settle(&meta, outcome);
                }
            }
            Op::Shutdown => {
                if let Some(s) = &mut self.sched {
                    s.resume_if_paused();
                }
                self.pool.shutdown()
            }
            Op::ShutdownNow => {
                self.unbounded_join_ok = false;
                let back = self.pool.shutdown_now();
                self.handed_back.extend(back);
            }
            Op::Stats => {
                let _ = self.pool.stats();
            }
        }
    }

    fn submit(&mut self, kind: Kind, body: Body, detach: bool, result_bomb: bool) {
        let on_a_lane = !matches!(kind, Kind::Execute | Kind::Submit | Kind::TryExecute);
        let handle_kind = matches!(
            kind,
            Kind::Submit
                | Kind::SubmitSequential(_)
                | Kind::SubmitCoalescing(_)
                | Kind::SubmitKeyed(..)
        );
        let body = match body {
            Body::ShutdownNow if on_a_lane && !allowed("KEYWAY_FUZZ_NO_LANE_SHUTDOWN_NOW") => {
                Body::Quick
            }
            Body::PanicBombPayload if handle_kind => Body::Panic,
            other => other,
        };
        if matches!(body, Body::ShutdownNow) {
            self.unbounded_join_ok = false;
        }
        // A coalescing task's handle is the only witness of it being coalesced away.
        let detach = detach && !matches!(kind, Kind::SubmitCoalescing(_));
        let has_handle = handle_kind && !detach;
        let probe = Probe::new(&self.ledger, has_handle);
        let task = closures::task(
            probe,
            body,
            self.pool.clone(),
            self.inside_back.clone(),
            result_bomb && detach,
        );
        let submitted = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            closures::submit(self.pool, kind, task)
        }));
        match submitted {
            Ok(Some(handle)) => {
                self.accepted += 1;
                if let Some(h) = handle {
                    self.keep(h, None, detach, false);
                }
            }
            // Refused (the task came back and was dropped here), or a key's `Hash` panicked
            // on this thread: not accepted.
            Ok(None) | Err(_) => {
                if !has_handle {
                    self.refused_without_handle += 1;
                }
            }
        }
    }

    /// Keeps a pool task's handle, or drops it at once (`detach`).
    fn keep(
        &mut self,
        handle: TaskHandle<Out>,
        fate: Option<Arc<Fate>>,
        detach: bool,
        coalescing: bool,
    ) {
        let meta = Meta {
            fate,
            cancelled: false,
            coalescing,
        };
        self.handles.keep(handle, meta, detach);
    }

    fn more(&mut self, op: MoreOp) {
        match op {
            MoreOp::Spawn {
                kind,
                body,
                detach,
                output_bomb,
            } => {
                let (probe, fate) = FateProbe::new();
                self.futures.push(fate.clone());
                let fut = futures::future(body, probe, output_bomb && detach);
                let spawned = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    futures::spawn(self.pool, kind, fut)
                }));
                if let Ok(Some(handle)) = spawned {
                    let coalescing = matches!(
                        kind,
                        SpawnKind::Coalescing(_) | SpawnKind::LaneCoalescing(_)
                    );
                    self.keep(handle, Some(fate), detach, coalescing);
                }
            }
            MoreOp::PollPanicking(i) => {
                if let Some((meta, outcome)) = self.handles.poll_panicking(i) {
                    self.settle(&meta, outcome);
                }
            }
            MoreOp::WaitForRoom { spin: n, context } => {
                let probe = Probe::new(&self.ledger, true);
                let job: Job = Box::new(move || {
                    let mut probe = probe;
                    probe.ran = true;
                    spin(n);
                    Out(false)
                });
                let mut w = futures::waiter(self.pool, job, context);
                if let Poll::Ready(r) = poll_once(&mut w, &panicking_waker()) {
                    self.room(r.ok());
                } else {
                    self.waiters.push(w);
                }
            }
            MoreOp::PollWaiters => self.poll_waiters(false),
            other => {
                if let Some(s) = &mut self.sched {
                    s.apply(other);
                }
            }
        }
    }

    fn batch(&mut self, op: BatchOp) {
        let env = Env {
            pool: self.pool,
            back: &self.inside_back,
            bounded: self.bounded,
        };
        self.batches.apply(&env, op);
        if self.batches.shutdown_now_inside {
            self.unbounded_join_ok = false;
        }
    }

    /// Polls every pending room waiter with a quiet waker; `must_resolve`: each must be ready.
    fn poll_waiters(&mut self, must_resolve: bool) {
        for mut w in std::mem::take(&mut self.waiters) {
            match poll_once(&mut w, std::task::Waker::noop()) {
                Poll::Ready(r) => self.room(r.ok()),
                Poll::Pending => {
                    assert!(
                        !must_resolve,
                        "a room waiter still waits on a shut-down pool"
                    );
                    self.waiters.push(w);
                }
            }
        }
    }

    /// A room waiter's task was admitted (`Some`) or refused (dropped: its probe says unrun).
    fn room(&mut self, admitted: Option<TaskHandle<Out>>) {
        if let Some(handle) = admitted {
            self.accepted += 1;
            self.keep(handle, None, false, false);
        }
    }

    fn settle(&mut self, m: &Meta, outcome: Outcome) {
        if let Some(fate) = &m.fate {
            return check_future(fate, &outcome, m.cancelled, m.coalescing);
        }
        let o = &mut self.outcomes;
        match outcome {
            Ok(_) => o.ok += 1,
            Err(TaskError::Panicked(_)) => o.panicked += 1,
            Err(TaskError::Cancelled) => o.cancelled += 1,
            Err(TaskError::Coalesced) => o.coalesced += 1,
            Err(TaskError::Rejected) => o.rejected += 1,
            // Only a scheduled task with a timeout can time out.
            Err(TaskError::TimedOut) => panic!("a pool task reported TimedOut"),
            Err(other) => panic!("an outcome this target does not know: {other:?}"),
        }
    }

    /// Runs or drops what was handed back so far.
    fn hand_back(&mut self) {
        let inside: Vec<PendingTask> = self.inside_back.lock().unwrap().drain(..).collect();
        let tasks = self.handed_back.drain(..).chain(inside);
        run_or_drop(tasks, self.run_handed_back);
    }

    fn finish(mut self) {
        // The scheduler first: its graceful shutdown waits for the tasks it released, so
        // whatever the pool handed back meanwhile is run or dropped while it waits.
        if let Some(mut s) = self.sched.take() {
            self.hand_back();
            let (back, run) = (self.inside_back.clone(), self.run_handed_back);
            s.shut_down(|| {
                // Taken out first: a task run here may lock it again (its own shutdown_now).
                let tasks: Vec<PendingTask> = back.lock().unwrap().drain(..).collect();
                run_or_drop(tasks, run);
            });
            self.sched = Some(s);
        }
        // Then the pool: every accepted task either runs or is handed back.
        let back = self.pool.shutdown_now();
        self.handed_back.extend(back);
        self.pool.shutdown();
        self.hand_back();
        // A shut-down pool refuses: every room waiter resolves.
        self.poll_waiters(true);
        for (meta, outcome) in self.handles.join_all() {
            self.settle(&meta, outcome);
        }
        self.check();
    }

    fn check(self) {
        let l = &self.ledger;
        let created = l.created.load(Ordering::SeqCst);
        let ran = l.ran.load(Ordering::SeqCst);
        let unrun = l.unrun.load(Ordering::SeqCst);
        let unrun_without_handle = l.unrun_without_handle.load(Ordering::SeqCst);
        // Every probe (accepted or refused) was dropped exactly once: nothing leaked.
        assert_eq!(
            ran + unrun,
            created,
            "probes leaked: ran {ran} + unrun {unrun} != created {created}"
        );
        let o = &self.outcomes;
        // Only cancel() makes a closure's handle say Cancelled, and each successful cancel()
        // does.
        assert_eq!(o.cancelled, self.cancelled, "cancel() and handles disagree");
        // A handle-less accepted task that did not run can only have been handed back and
        // dropped.
        let handed_back_dropped_without_handle = unrun_without_handle - self.refused_without_handle;
        // accepted = ran + cancelled + coalesced + handed back (and dropped).
        assert_eq!(
            self.accepted,
            ran + o.cancelled + o.coalesced + o.rejected + handed_back_dropped_without_handle,
            "accounting: accepted {} != ran {ran} + cancelled {} + coalesced {} + rejected {} + handed back without handle {}",
            self.accepted,
            o.cancelled,
            o.coalesced,
            o.rejected,
            handed_back_dropped_without_handle,
        );
        // Handles and probes agree on what ran.
        assert!(o.ok + o.panicked <= ran);
        // Every future dropped exactly once, completed or not.
        check_dropped_once(&self.futures, "futures");
        self.batches.check(self.run_handed_back);
        if let Some(s) = self.sched {
            // `!unbounded_join_ok`: a `Pool::shutdown_now` may have run (outside, or in a
            // task), handing back the scheduler's unreleased tasks among the pool's own.
            s.check(!self.unbounded_join_ok);
        }
    }
}
