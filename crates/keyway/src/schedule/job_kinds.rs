//! The kinds of scheduled job — a one-shot task with a handle ([`Once`]), one without
//! ([`Detached`]), a repeating task ([`Repeating`]) — and where each runs when it is released
//! ([`Place`]: anywhere on the pool, or on a context's lane).

use std::any::Any;
use std::hash::Hash;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use super::clock::NEVER;
use super::executor::{ExecCore, Shared};
use super::scheduled_job::{InlineJob, ScheduledJob};
use crate::error::SubmitError;
use crate::task::{
    drop_quietly, Abandon, PanicReport, PendingTask, Plain, Runnable, Task, TaskHandle, WithHandle,
};

/// Where a released task runs: anywhere on the pool, or in a context's lane.
pub(crate) trait Place: Send + Sync + 'static {
    /// True for [`Anywhere`].
    const ANYWHERE: bool = false;
    /// Submits `f`, waiting for room while a pool with a `capacity` is full (backpressure: a
    /// task released is carried until the pool takes it); gives it back if the pool refuses it
    /// (it was shut down).
    fn submit<F: FnOnce() + Send + 'static>(&self, shared: &Shared, f: F) -> Result<(), F>;
}

/// Submits `f` by `attempt`, waiting for room while the pool is full (see [`Place::submit`]),
/// unless the scheduler is stopped meanwhile (`shutdown_now`, which waits for this thread): the
/// task is then given back. The wait wakes at every release of room; `ROOM_CHECK` only bounds
/// how late a stop is seen.
pub(crate) fn submit_waiting<F, A>(shared: &Shared, f: F, mut attempt: A) -> Result<(), F>
where
    A: FnMut(F) -> Result<(), SubmitError<F>>,
{
    const ROOM_CHECK: Duration = Duration::from_millis(50);
    let mut f = f;
    loop {
        match shared.pool.wait_for_room(f, ROOM_CHECK, &mut attempt) {
            Ok(()) => return Ok(()),
            Err(SubmitError::Full(back)) if !shared.stop_now.load(Ordering::SeqCst) => f = back,
            Err(e) => return Err(e.into_inner()),
        }
    }
}

/// A released job on its way to the pool, run by [`run`](Released::run) once there. Dropped
/// unrun — refused, handed back by the pool's `shutdown_now` and dropped, or lost to a panic on
/// the way (a key's `Clone`) — it ends rejected: counted once, its handle told `Rejected`;
/// unless its handle was cancelled meanwhile (the driver released it live), then counted
/// cancelled, as the handle says ([`ExecCore::reject`]).
pub(crate) struct Released<J: ScheduledJob> {
    job: Option<J>,
    core: Arc<ExecCore>,
    due: u64,
    deadline: u64,
    priority: i64,
}

impl<J: ScheduledJob> Released<J> {
    pub(crate) fn new(
        job: J,
        core: &Arc<ExecCore>,
        due: u64,
        deadline: u64,
        priority: i64,
    ) -> Self {
        Released {
            job: Some(job),
            core: core.clone(),
            due,
            deadline,
            priority,
        }
    }

    /// Runs the job here (on the pool): it counts its own outcome.
    pub(crate) fn run(mut self) {
        if let Some(job) = self.job.take() {
            job.run_here(&self.core, self.due, self.deadline, self.priority);
        }
    }
}

impl<J: ScheduledJob> Drop for Released<J> {
    fn drop(&mut self) {
        if let Some(job) = self.job.take() {
            self.core.reject(job);
        }
    }
}

/// Hands `job` (to run anywhere once it reaches the pool) to `place`, guarded by [`Released`].
fn release<P: Place, J: ScheduledJob>(
    place: &P,
    exec: &Arc<ExecCore>,
    job: J,
    due: u64,
    deadline: u64,
    priority: i64,
) {
    let released = Released::new(job, exec, due, deadline, priority);
    if let Err(run) = place.submit(&exec.shared, move || released.run()) {
        // Dropping it ends it rejected (`Released`).
        exec.contain(move || drop(run));
    }
}

/// Anywhere on the pool.
pub(crate) struct Anywhere;

impl Place for Anywhere {
    const ANYWHERE: bool = true;

    fn submit<F: FnOnce() + Send + 'static>(&self, shared: &Shared, f: F) -> Result<(), F> {
        submit_waiting(shared, f, |f| shared.pool.execute(f))
    }
}

/// As a sequential task of the context's lane. The key is user code whose `Drop` may panic:
/// wherever the job ends (run, refused, handed back, timed out, dropped), the key is dropped
/// with the panic contained, so it can neither unwind past a refusal that hands the task back
/// nor through the scheduler's bookkeeping.
pub(crate) struct InContext<K>(Option<K>);

impl<K> InContext<K> {
    pub(crate) fn new(key: K) -> Self {
        InContext(Some(key))
    }

    fn key(&self) -> &K {
        match &self.0 {
            Some(key) => key,
            None => unreachable!("the key is taken only by the drop"),
        }
    }
}

impl<K> Drop for InContext<K> {
    fn drop(&mut self) {
        if let Some(key) = self.0.take() {
            drop_quietly(key);
        }
    }
}

impl<K: Hash + Eq + Clone + Send + Sync + 'static> Place for InContext<K> {
    fn submit<F: FnOnce() + Send + 'static>(&self, shared: &Shared, f: F) -> Result<(), F> {
        submit_waiting(shared, f, |f| {
            shared.pool.execute_sequential(self.key().clone(), f)
        })
    }
}

/// A task run once, its outcome going to a [`TaskHandle`].
pub(crate) struct Once<P, F, T> {
    place: P,
    task: WithHandle<F, T>,
}

impl<P, F, T> Once<P, F, T>
where
    P: Place,
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    pub(crate) fn new(place: P, f: F) -> (TaskHandle<T>, Self) {
        let (handle, task) = TaskHandle::pair(f);
        (handle, Once { place, task })
    }
}

impl<P, F, T> ScheduledJob for Once<P, F, T>
where
    P: Place,
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    fn is_live(&self) -> bool {
        self.task.is_queued()
    }

    fn claim(&self) -> bool {
        self.task.claim()
    }

    const BATCHABLE: bool = P::ANYWHERE;

    fn dispatch(self, exec: &Arc<ExecCore>, due: u64, deadline: u64, priority: i64) {
        let Once { place, task } = self;
        let once = Once {
            place: Anywhere,
            task,
        };
        release(&place, exec, once, due, deadline, priority);
    }

    fn run_here(self, core: &Arc<ExecCore>, due: u64, deadline: u64, priority: i64) {
        let task = self.task;
        if core.timed_out(deadline) {
            let once = Once {
                place: Anywhere,
                task,
            };
            core.time_out(InlineJob::new(once), due, priority);
            return;
        }
        // The task's own panic is caught inside; what can still unwind is the drop of a
        // cancelled task's closure, which is then counted as the cancel it was.
        match catch_unwind(AssertUnwindSafe(|| task.run_unless_cancelled())) {
            Ok(None) | Err(_) => core.stats.cancelled(),
            Ok(Some(Ok(()))) => core.stats.ran(),
            Ok(Some(Err(report))) => core.panicked(report),
        }
    }

    fn abandon(self, why: Abandon) {
        Runnable::abandon(self.task, why);
    }

    fn into_pending(self) -> Option<PendingTask> {
        // The place (a context key) is dropped contained (`InContext`).
        let Once { task, .. } = self;
        Some(PendingTask::new(Task::new(task)))
    }
}

/// A task run once with no handle (its outcome is only counted).
pub(crate) struct Detached<P, F> {
    place: P,
    f: F,
}

impl<P: Place, F: FnOnce() + Send + 'static> Detached<P, F> {
    pub(crate) fn new(place: P, f: F) -> Self {
        Detached { place, f }
    }
}

impl<P: Place, F: FnOnce() + Send + 'static> ScheduledJob for Detached<P, F> {
    fn is_live(&self) -> bool {
        true
    }

    fn claim(&self) -> bool {
        true
    }

    const BATCHABLE: bool = P::ANYWHERE;

    fn dispatch(self, exec: &Arc<ExecCore>, due: u64, deadline: u64, priority: i64) {
        let Detached { place, f } = self;
        release(
            &place,
            exec,
            Detached { place: Anywhere, f },
            due,
            deadline,
            priority,
        );
    }

    fn run_here(self, core: &Arc<ExecCore>, due: u64, deadline: u64, priority: i64) {
        let f = self.f;
        if core.timed_out(deadline) {
            core.time_out(
                InlineJob::new(Detached { place: Anywhere, f }),
                due,
                priority,
            );
            return;
        }
        match Runnable::run(Plain(f)) {
            Ok(()) => core.stats.ran(),
            Err(report) => core.panicked(report),
        }
    }

    fn abandon(self, _why: Abandon) {}

    fn into_pending(self) -> Option<PendingTask> {
        // The place (a context key) is dropped contained (`InContext`).
        let Detached { f, .. } = self;
        Some(PendingTask::new(Task::new(Plain(f))))
    }
}

/// How a repeating task's next time follows from the last.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Repeat {
    /// Fixed rate: the next is due one period after the last was due.
    Rate(u64),
    /// Fixed delay: the next is due this long after the last finished.
    Delay(u64),
}

/// The body of a repeating task; ends (its handle learns why) on cancel, panic, timeout or
/// shutdown.
pub(crate) struct Repeating<P> {
    place: Arc<P>,
    body: Box<dyn FnMut() + Send>,
    repeat: Repeat,
    /// Each run's own timeout (`Timing::timeout`), if it has one.
    timeout: Option<Duration>,
    end: WithHandle<EndRepeat, ()>,
    panic: Arc<Mutex<Option<Box<dyn Any + Send>>>>,
}

/// What a repeating task's handle "runs" when the repetition ends with a panic: it re-raises
/// the task's panic so that the handle says `Panicked` with the original payload.
pub(crate) type EndRepeat = Box<dyn FnOnce() + Send>;

impl<P: Place> Repeating<P> {
    pub(crate) fn new(
        place: P,
        body: impl FnMut() + Send + 'static,
        repeat: Repeat,
        timeout: Option<Duration>,
    ) -> (TaskHandle<()>, Self) {
        let panic: Arc<Mutex<Option<Box<dyn Any + Send>>>> = Arc::new(Mutex::new(None));
        let slot = panic.clone();
        let end: EndRepeat = Box::new(move || {
            if let Some(payload) = slot.lock().take() {
                resume_unwind(payload)
            }
        });
        let (handle, end) = TaskHandle::pair(end);
        (
            handle,
            Repeating {
                place: Arc::new(place),
                body: Box::new(body),
                repeat,
                timeout,
                end,
                panic,
            },
        )
    }
}

/// Boxed once, and the box reused for every run.
impl<P: Place> ScheduledJob for Box<Repeating<P>> {
    const REPEATING: bool = true;

    fn is_live(&self) -> bool {
        self.end.is_queued()
    }

    fn claim(&self) -> bool {
        self.end.claim()
    }

    fn dispatch(self, exec: &Arc<ExecCore>, due: u64, deadline: u64, priority: i64) {
        let place = self.place.clone();
        release(&*place, exec, self, due, deadline, priority);
    }

    fn run_here(self, core: &Arc<ExecCore>, due: u64, deadline: u64, priority: i64) {
        {
            let mut this = self;
            if !this.end.is_queued() {
                core.stats.cancelled();
                return;
            }
            if core.timed_out(deadline) {
                core.time_out(InlineJob::new(this), due, priority);
                return;
            }
            match catch_unwind(AssertUnwindSafe(&mut this.body)) {
                Ok(()) => core.stats.ran(),
                Err(payload) => {
                    *this.panic.lock() = Some(payload);
                    // The handle re-raises the payload, is told `Panicked`, and the report
                    // comes back here for the pool's hook.
                    let report = this.end.run_unless_cancelled();
                    let report = match report {
                        Some(Err(report)) => report,
                        _ => PanicReport::new("repeating task panicked".into()),
                    };
                    core.panicked(report);
                    return;
                }
            }
            let next = match this.repeat {
                Repeat::Rate(period) => due.checked_add(period).unwrap_or(NEVER),
                Repeat::Delay(delay) => {
                    let now = core.shared.clock.now();
                    now.checked_add(delay).unwrap_or(NEVER)
                }
            };
            let timeout = this.timeout;
            if let Err(job) = core.enqueue(InlineJob::new(this), next, timeout, priority) {
                // Shut down: the repetition ends. Its next run counts as scheduled and
                // rejected (cancelled if its handle was cancelled meanwhile), as it does when
                // the shutdown finds it queued, so the counts do not depend on which came
                // first.
                // (It was never released: counted out as such, or the driver would wait for it.)
                core.stats.scheduled();
                core.stats.ended_unreleased();
                core.reject(job);
            }
        }
    }

    fn abandon(self, why: Abandon) {
        Runnable::abandon(self.end, why);
    }

    fn into_pending(self) -> Option<PendingTask> {
        self.abandon(Abandon::Rejected);
        None
    }
}
