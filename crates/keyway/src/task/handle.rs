//! `TaskHandle`: wait for, await, or cancel a submitted task.

use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use super::abort::Abortable;
use super::{drop_quietly, wake_quietly, Abandon, AbortHandle, PanicReport, Runnable};
use crate::error::{panic_message, TaskError};

/// The handle of a task submitted with one of the `submit*` methods.
///
/// * [`join`](TaskHandle::join) blocks until the task is done;
/// * the handle is a [`Future`], so it can be awaited from any async runtime;
/// * [`cancel`](TaskHandle::cancel) stops a task that has not started.
///
/// The result tells the outcomes apart: `Ok(value)` — the task *ran*; `Err(`[`TaskError`]`)` —
/// it *panicked*, was *cancelled*, was *coalesced* away by a newer coalescing task, or was
/// *rejected* (handed back at shutdown and dropped). Dropping the handle detaches the task: it
/// still runs.
///
/// ```
/// let pool = keyway::Pool::new().unwrap();
/// let handle = pool.submit_sequential("account-7", || 6 * 7).unwrap();
/// assert_eq!(handle.join().unwrap(), 42);
/// ```
#[must_use = "dropping a TaskHandle detaches the task; if no result is wanted, use execute* \
              (execute_async* for a future), which allocates no handle"]
#[doc(alias = "JoinHandle")]
pub struct TaskHandle<T> {
    shared: Arc<Shared<T>>,
}

struct Shared<T> {
    state: Mutex<State<T>>,
    done: Condvar,
}

struct State<T> {
    stage: Stage,
    result: Option<Result<T, TaskError>>,
    waker: Option<Waker>,
    /// A started future's waker: `cancel` wakes it so the future is dropped at its next await.
    abort: Option<Waker>,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Stage {
    Queued,
    Running,
    Finished,
}

impl<T> Shared<T> {
    /// The shared state of a task not started yet.
    fn queued() -> Arc<Self> {
        Arc::new(Shared {
            state: Mutex::new(State {
                stage: Stage::Queued,
                result: None,
                waker: None,
                abort: None,
            }),
            done: Condvar::new(),
        })
    }

    /// Queued → Running; false if the task was cancelled (or otherwise finished) first.
    fn transition_to_running(&self) -> bool {
        let mut st = self.state.lock();
        if st.stage == Stage::Queued {
            st.stage = Stage::Running;
            true
        } else {
            false
        }
    }

    /// Queued → Finished as cancelled; false if the task already started or finished. A started
    /// future (one with an abort waker) is cancelled too: its waker is woken so the driver drops
    /// it at its next await point.
    fn cancel(&self) -> bool {
        let (waker, abort) = {
            let mut st = self.state.lock();
            let started_future = st.stage == Stage::Running && st.abort.is_some();
            if st.stage != Stage::Queued && !started_future {
                return false;
            }
            st.stage = Stage::Finished;
            st.result = Some(Err(TaskError::Cancelled));
            (st.waker.take(), st.abort.take())
        };
        self.done.notify_all();
        if let Some(w) = waker {
            wake_quietly(w);
        }
        if let Some(w) = abort {
            wake_quietly(w);
        }
        true
    }

    fn is_finished(&self) -> bool {
        self.state.lock().stage == Stage::Finished
    }

    /// Any stage → Finished with `result`; a second finish is ignored.
    fn transition_to_finished(&self, result: Result<T, TaskError>) -> bool {
        let waker = {
            let mut st = self.state.lock();
            if st.stage == Stage::Finished {
                return false;
            }
            st.stage = Stage::Finished;
            st.result = Some(result);
            st.abort = None;
            st.waker.take()
        };
        self.done.notify_all();
        // The awaiting executor's waker: its panic must not unwind into whoever finishes the
        // task (a worker, a lane runner, a future's driver).
        if let Some(w) = waker {
            wake_quietly(w);
        }
        true
    }
}

impl<T> TaskHandle<T> {
    /// Makes a handle and the runnable that completes it.
    pub(crate) fn pair<F>(f: F) -> (TaskHandle<T>, WithHandle<F, T>)
    where
        F: FnOnce() -> T,
    {
        let shared = Shared::queued();
        (
            TaskHandle {
                shared: shared.clone(),
            },
            WithHandle { f: Some(f), shared },
        )
    }

    /// Blocks until the task is done and returns its outcome.
    ///
    /// Do not call it from a task of the same context: that task waits for itself.
    ///
    /// # Panics
    /// If the handle was already polled to completion as a future.
    ///
    /// ```
    /// let pool = keyway::Pool::new().unwrap();
    /// let ok = pool.submit(|| "done").unwrap();
    /// let bad = pool.submit(|| -> u8 { panic!("oops") }).unwrap();
    /// assert_eq!(ok.join().unwrap(), "done");
    /// assert!(bad.join().unwrap_err().is_panic()); // the panic is the handle's, not ours
    /// ```
    pub fn join(self) -> Result<T, TaskError> {
        let mut st = self.shared.state.lock();
        while st.stage != Stage::Finished {
            self.shared.done.wait(&mut st);
        }
        st.result
            .take()
            .expect("TaskHandle::join after the future completed")
    }

    /// Like [`join`](TaskHandle::join), but gives the handle back if the task is not done
    /// within `timeout`. A timeout too long to represent (`Duration::MAX`) waits as `join` does.
    ///
    /// ```
    /// use std::time::Duration;
    /// let pool = keyway::Pool::new().unwrap();
    /// let handle = pool.submit(|| 7).unwrap();
    /// assert_eq!(handle.join_timeout(Duration::MAX).ok().unwrap().unwrap(), 7);
    /// ```
    ///
    /// A task that is not done yet: the handle comes back, to join (or cancel) later.
    ///
    /// ```
    /// use std::time::Duration;
    /// let pool = keyway::Pool::new().unwrap();
    /// let (release, gate) = std::sync::mpsc::channel::<()>();
    /// let handle = pool.submit(move || { gate.recv().unwrap(); 42 }).unwrap();
    /// let handle = handle.join_timeout(Duration::ZERO).unwrap_err(); // not done: handed back
    /// release.send(()).unwrap();
    /// assert_eq!(handle.join().unwrap(), 42);
    /// ```
    pub fn join_timeout(self, timeout: Duration) -> Result<Result<T, TaskError>, TaskHandle<T>> {
        // Checked: a timeout too long to add to `now` (`Duration::MAX`) means no deadline.
        let deadline = Instant::now().checked_add(timeout);
        {
            let mut st = self.shared.state.lock();
            while st.stage != Stage::Finished {
                match deadline {
                    Some(deadline) => {
                        if self.shared.done.wait_until(&mut st, deadline).timed_out() {
                            break;
                        }
                    }
                    None => self.shared.done.wait(&mut st),
                }
            }
            if st.stage == Stage::Finished {
                if let Some(r) = st.result.take() {
                    return Ok(r);
                }
            }
        }
        Err(self)
    }

    /// Cancels the task if it has not started: it will not run, and the handle's outcome becomes
    /// [`TaskError::Cancelled`]. Returns false if the task already started or finished.
    ///
    /// A future (from one of the `spawn*` methods) can also be cancelled once it has started:
    /// it is dropped at its next await point, and the contexts it held are released.
    ///
    /// ```
    /// let pool = keyway::Pool::builder().core_threads(1).build().unwrap();
    /// let (tx, rx) = std::sync::mpsc::channel::<()>();
    /// pool.execute_sequential(1, move || { rx.recv().unwrap(); }).unwrap(); // keeps lane 1 busy
    /// let queued = pool.submit_sequential(1, || "never").unwrap();
    /// assert!(queued.cancel());
    /// tx.send(()).unwrap();
    /// assert!(matches!(queued.join(), Err(keyway::TaskError::Cancelled)));
    /// ```
    #[doc(alias = "abort")]
    pub fn cancel(&self) -> bool {
        self.shared.cancel()
    }

    /// True once the task has an outcome (ran, panicked, cancelled, coalesced or rejected).
    ///
    /// ```
    /// let pool = keyway::Pool::builder().core_threads(1).max_threads(1).build().unwrap();
    /// let (release, gate) = std::sync::mpsc::channel::<()>();
    /// let handle = pool.submit(move || gate.recv().is_ok()).unwrap();
    /// assert!(!handle.is_finished()); // waits at the gate
    /// release.send(()).unwrap();
    /// while !handle.is_finished() { std::thread::yield_now(); }
    /// assert!(handle.join().unwrap()); // now `join` does not block
    /// ```
    pub fn is_finished(&self) -> bool {
        self.shared.is_finished()
    }

    /// A handle that can cancel this task from anywhere, also once this `TaskHandle` has been
    /// moved into an `.await` (see [`AbortHandle`]).
    ///
    /// ```
    /// let pool = keyway::Pool::new().unwrap();
    /// let handle = pool.submit(|| 1).unwrap();
    /// let abort = handle.abort_handle();
    /// assert_eq!(handle.join().unwrap(), 1);
    /// assert!(abort.is_finished());
    /// assert!(!abort.abort()); // too late: it ran
    /// ```
    #[must_use = "an AbortHandle does nothing unless `abort` is called"]
    pub fn abort_handle(&self) -> AbortHandle
    where
        T: Send + 'static,
    {
        AbortHandle::new(self.shared.clone())
    }
}

impl<T: Send> Abortable for Shared<T> {
    fn abort(&self) -> bool {
        self.cancel()
    }

    fn is_finished(&self) -> bool {
        Shared::is_finished(self)
    }
}

impl<T> Future for TaskHandle<T> {
    type Output = Result<T, TaskError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut st = self.shared.state.lock();
        if st.stage == Stage::Finished {
            Poll::Ready(
                st.result
                    .take()
                    .expect("TaskHandle polled after completion"),
            )
        } else {
            match &st.waker {
                Some(w) if w.will_wake(cx.waker()) => {}
                _ => st.waker = Some(cx.waker().clone()),
            }
            Poll::Pending
        }
    }
}

impl<T> std::fmt::Debug for TaskHandle<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let stage = self.shared.state.lock().stage;
        f.debug_struct("TaskHandle").field("stage", &stage).finish()
    }
}

/// A closure whose outcome goes to a [`TaskHandle`].
pub(crate) struct WithHandle<F, T> {
    f: Option<F>,
    shared: Arc<Shared<T>>,
}

impl<F, T> Runnable for WithHandle<F, T>
where
    F: FnOnce() -> T + Send,
    T: Send,
{
    fn run(self) -> Result<(), PanicReport> {
        self.run_unless_cancelled().unwrap_or(Ok(()))
    }

    fn abandon(mut self, why: Abandon) {
        // The captures' drop is user code: contained, so that the handle is always told.
        drop_quietly(self.f.take());
        self.shared.transition_to_finished(Err(match why {
            Abandon::Coalesced => TaskError::Coalesced,
            Abandon::Rejected => TaskError::Rejected,
            Abandon::TimedOut => TaskError::TimedOut,
        }));
    }
}

impl<F, T> WithHandle<F, T>
where
    F: FnOnce() -> T + Send,
    T: Send,
{
    /// Runs the task; `None` if it had been cancelled (it then did not run).
    pub(crate) fn run_unless_cancelled(mut self) -> Option<Result<(), PanicReport>> {
        let f = self.f.take()?;
        if !self.shared.transition_to_running() {
            return None; // cancelled while queued
        }
        let outcome = match catch_unwind(AssertUnwindSafe(f)) {
            Ok(value) => {
                self.shared.transition_to_finished(Ok(value));
                Ok(())
            }
            Err(payload) => {
                let report = PanicReport::new(panic_message(&*payload).to_owned());
                self.shared
                    .transition_to_finished(Err(TaskError::panicked(payload)));
                Err(report)
            }
        };
        // With no handle left, this is the last owner of the result or panic payload: its drop
        // is user code, contained so that the caller learns how the task ended.
        drop_quietly(self);
        Some(outcome)
    }

    /// Claims a task that is to end unrun (rejected, timed out): Queued → Running, so that a
    /// `cancel()` from now on returns false, as for a started task, and the caller then
    /// [`abandon`](Runnable::abandon)s it. False if the handle was cancelled (or the task
    /// otherwise finished) first. One step under the handle's lock: a check of
    /// [`is_queued`](WithHandle::is_queued) followed by `abandon` would let a cancel land
    /// between the two, the handle saying `Cancelled` while the task is counted as ended
    /// otherwise.
    pub(crate) fn claim(&self) -> bool {
        self.shared.transition_to_running()
    }

    /// False once the handle was cancelled (or the task otherwise finished).
    pub(crate) fn is_queued(&self) -> bool {
        self.shared.state.lock().stage == Stage::Queued
    }
}

impl<F, T> Drop for WithHandle<F, T> {
    fn drop(&mut self) {
        // A task dropped any other way (it should not happen) must not leave its joiner hanging.
        if let Some(f) = self.f.take() {
            drop_quietly(f);
            self.shared.transition_to_finished(Err(TaskError::Rejected));
        }
    }
}

/// The side of a [`TaskHandle`] that a future (`spawn*`) completes.
pub(crate) struct Completer<T> {
    shared: Arc<Shared<T>>,
}

impl<T> TaskHandle<T> {
    /// Makes a handle and its completer, for a future.
    pub(crate) fn for_future() -> (TaskHandle<T>, Completer<T>) {
        let shared = Shared::queued();
        (
            TaskHandle {
                shared: shared.clone(),
            },
            Completer { shared },
        )
    }
}

impl<T> Completer<T> {
    /// Queued → Running; false if the handle was cancelled first.
    pub(crate) fn start(&self) -> bool {
        self.shared.transition_to_running()
    }

    /// Before each poll of the future: false once the handle was cancelled, before or after it
    /// started (the future is then dropped); otherwise `waker` is what `cancel` wakes.
    /// On the first poll, also Queued → Running (one lock for both).
    pub(crate) fn keep_going(&self, waker: &Waker) -> bool {
        let mut st = self.shared.state.lock();
        match st.stage {
            Stage::Finished => return false,
            Stage::Queued => st.stage = Stage::Running,
            Stage::Running => {}
        }
        match &st.abort {
            Some(w) if w.will_wake(waker) => {}
            _ => st.abort = Some(waker.clone()),
        }
        true
    }

    /// False once the handle has its outcome (e.g. it was cancelled): a started future is then
    /// not polled again.
    pub(crate) fn is_live(&self) -> bool {
        self.shared.state.lock().stage != Stage::Finished
    }

    /// True while a handle (or an abort handle made from it) may still look at the outcome.
    pub(crate) fn has_waiter(&self) -> bool {
        Arc::strong_count(&self.shared) > 1
    }

    /// Gives the handle its outcome (ignored if it already has one, e.g. cancelled).
    pub(crate) fn finish(&self, result: Result<T, TaskError>) {
        self.shared.transition_to_finished(result);
    }

    /// The outcome for a future dropped unfinished: why it was dropped.
    pub(crate) fn abandon(&self, why: Abandon) {
        self.finish(Err(match why {
            Abandon::Coalesced => TaskError::Coalesced,
            Abandon::Rejected => TaskError::Rejected,
            Abandon::TimedOut => TaskError::TimedOut,
        }));
    }
}
