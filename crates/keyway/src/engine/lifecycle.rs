//! The pool's life in one place: starting its threads, and every step of shutting down. The
//! steps are numbered as in the "Shutdown" section of `README.md` beside this file; each is
//! marked `Step N` where it is done:
//!
//! 1. closing ([`Registry::close`]): intake stops;
//! 2. stopping ([`Registry::stop`], `shutdown_now` only): workers stop taking jobs;
//! 3. draining ([`Registry::wait_for_exit_until`]): the threads run out and exit;
//! 4. handing back ([`Registry::shutdown_now`]): what no thread started goes back to the caller;
//! 5. joining: an outside caller joins every thread the pool started and frees the idle lanes.
//!
//! `shutdown`, `shutdown_timeout` and the drop of the last handle are one private
//! close-and-wait ([`Registry::close_and_wait`]).

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_deque::Steal;
use crossbeam_utils::sync::Parker;

use super::holding;
use super::registry::Registry;
use super::work::Work;
use super::worker::{self, OwnThread};
use super::{monitor, threads};
use crate::error::{BuildError, BuildErrorKind, ShutdownTimedOut};
use crate::task::PendingTask;
use std::sync::atomic::Ordering;

impl Registry {
    // ---- start --------------------------------------------------------------------------

    /// Starts the core workers and the monitor (`monitor` is the parker the registry was made
    /// with the unparker of).
    pub(crate) fn start(self: &Arc<Self>, monitor: Parker) -> Result<(), BuildError> {
        for _ in 0..self.config.core_threads {
            self.spawn_worker()
                .map_err(|e| BuildError::new(BuildErrorKind::Spawn(e)))?;
        }
        let name = format!("{}-monitor", self.config.thread_name);
        let watched = self.clone();
        let handle = threads::builder(&self.config)
            .name(name)
            .spawn(move || monitor::run(watched, monitor))
            .map_err(|e| BuildError::new(BuildErrorKind::Spawn(e)))?;
        // Joined last (it exits once no worker is left).
        *self.monitor_thread.lock() = Some(handle);
        Ok(())
    }

    /// Keeps a pool thread's handle (worker, reserved thread) so that step 5 joins every thread
    /// the pool started: none outlives it.
    ///
    /// Handles of threads that already finished are joined here rather than dropped: a thread
    /// counts as finished once its body returned, while it still runs its thread-local
    /// destructors; joining waits for its very end.
    pub(crate) fn keep_handle(&self, handle: JoinHandle<()>) {
        let finished: Vec<JoinHandle<()>> = {
            let mut threads = self.threads.lock();
            let (finished, running) = std::mem::take(&mut *threads)
                .into_iter()
                .partition(|t| t.is_finished());
            *threads = running;
            threads.push(handle);
            finished
        };
        // Outside the lock: joining waits for the thread's very end.
        for t in finished {
            let _ = t.join();
        }
    }

    /// A pool thread left (or a caller came into `shutdown_now`): wakes whoever waits in step 3.
    pub(crate) fn thread_exited(&self) {
        let threads = self.threads.lock();
        self.exited.notify_all();
        drop(threads);
    }

    // ---- steps 1 and 2 ------------------------------------------------------------------

    /// Step 1: intake stops. Admission reads `closed` after counting itself accepted
    /// (`accounting.rs`), so no admission made after this counts for good.
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        self.notify_all();
        // Submitters waiting for room learn that the pool is shut down.
        self.waiters.released();
    }

    /// Step 2 (and step 1): workers stop taking jobs; one that finds a job puts it back for
    /// step 4 and exits (`worker::run`); a lane runner puts its chunk back (lane rule 5).
    pub(crate) fn stop(&self) {
        self.stop_now.store(true, Ordering::SeqCst);
        self.close();
    }

    #[inline]
    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// Inline: the lane runners, generic and so compiled in the user's crate, ask after every
    /// task.
    #[inline]
    pub(crate) fn is_stopping(&self) -> bool {
        self.stop_now.load(Ordering::Acquire)
    }

    /// Whether this is one of the pool's own threads (a worker or a reserved thread), which
    /// cannot wait for the pool.
    pub(crate) fn on_own_thread(&self) -> bool {
        worker::own_thread(self) != OwnThread::None
    }

    /// Closed and every accepted task done: workers may exit (step 3).
    pub(crate) fn is_drained(&self) -> bool {
        self.is_closed() && self.pending() == 0
    }

    // ---- graceful: steps 1, 3 and 5 -----------------------------------------------------

    /// `shutdown`, `shutdown_timeout` and the drop of the last handle: step 1, then, unless on
    /// one of the pool's own threads (which cannot wait for itself), steps 3 and 5 until
    /// `deadline` (`None`: no deadline). `Err` says how many accepted tasks were not done.
    pub(crate) fn close_and_wait(&self, deadline: Option<Instant>) -> Result<(), ShutdownTimedOut> {
        self.close();
        if !self.on_own_thread() && self.wait_for_exit_until(OwnThread::None, deadline) {
            self.free_idle_lanes();
            Ok(())
        } else {
            Err(ShutdownTimedOut::new(self.pending()))
        }
    }

    /// Step 3 (and step 5 for an outside caller): blocks until every worker and reserved thread
    /// has exited, except those inside `shutdown_now` (the caller's own among them), or until
    /// `deadline` (false then; nothing is joined). An outside caller (`own` is `None`) then joins
    /// them all, the monitor last.
    pub(crate) fn wait_for_exit_until(&self, own: OwnThread, deadline: Option<Instant>) -> bool {
        let mut threads = self.threads.lock();
        while !self.stoppers.all_inside(
            self.live.load(Ordering::Acquire),
            self.reserved.live.load(Ordering::Acquire),
        ) {
            let step = Duration::from_millis(100);
            match deadline {
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        return false;
                    }
                    self.exited.wait_for(&mut threads, step.min(d - now));
                }
                None => {
                    self.exited.wait_for(&mut threads, step);
                }
            }
        }
        if own == OwnThread::None {
            // Step 5. Join outside the lock: an exiting thread takes it in `slot_vacated`.
            let exited = std::mem::take(&mut *threads);
            drop(threads);
            for t in exited {
                let _ = t.join();
            }
            // No worker is left: the monitor exits (it is woken by the last one to leave).
            let monitor = self.monitor_thread.lock().take();
            if let Some(monitor) = monitor {
                self.monitor.unpark();
                let _ = monitor.join();
            }
        }
        true
    }

    /// Step 5: every lane kept in an idle cache is freed (its key and state dropped).
    fn free_idle_lanes(&self) {
        for table in self.tables() {
            table.sweep_idle();
        }
    }

    // ---- shutdown_now: steps 2, 3 and 4 -------------------------------------------------

    /// `shutdown_now`: steps 2 and 3, then step 4 until what is still pending is held by the
    /// callers inside it. Any number of callers, on any threads, at once: each unstarted task
    /// is handed back to exactly one of them.
    pub(crate) fn shutdown_now(&self) -> Vec<PendingTask> {
        self.stop();
        let own = worker::own_thread(self);
        // Step 4 for the chunk this thread's lane runner holds (called from inside a lane
        // task): back to its lane first (lane rule 5), before this caller counts as inside.
        // Another caller drains only once every pool thread is inside, so it finds the chunk
        // in its lane; put back later, it could land in a lane that caller had already
        // drained and taken out of its table, and never be handed back.
        holding::put_back_held();
        // Inside a future's first poll, its launcher's entry is still pending too.
        let _inside = self.stoppers.enter(own, holding::launching_here());
        if own != OwnThread::None {
            // A waiter in step 3 may now be done waiting.
            self.thread_exited();
        }
        self.wait_for_exit_until(own, None);
        let mut pending = Vec::new();
        loop {
            let before = pending.len();
            // Step 4: the queues, the lanes, the waiting futures.
            self.drain_queues(|job| {
                if let Work::Task(task) = job {
                    pending.push(PendingTask::new(task));
                }
            });
            for table in self.tables() {
                table.drain(&mut pending);
            }
            // Started futures waiting for a wake-up are cancelled (dropped) now.
            self.futures.cancel_all();
            self.count_finished(pending.len() - before, None);
            // A submitter admitted just before `stop` may still be pushing its task: go round
            // until what is pending is only what the callers inside hold.
            if self.stoppers.allow(self.pending()) {
                break;
            }
            std::thread::yield_now();
        }
        self.handed_back
            .fetch_add(pending.len() as u64, Ordering::Relaxed);
        tracing::debug!(
            pool = self.name(),
            handed_back = pending.len(),
            "keyway shutdown_now"
        );
        pending
    }

    /// Step 4: takes every job left in the queues (after the workers stopped).
    fn drain_queues(&self, mut each: impl FnMut(Work)) {
        loop {
            match self.injector.steal() {
                Steal::Success(job) => each(job),
                Steal::Empty => break,
                Steal::Retry => continue,
            }
        }
        for s in self.slots.iter() {
            loop {
                match s.stealer.steal() {
                    Steal::Success(job) => each(job),
                    Steal::Empty => break,
                    Steal::Retry => continue,
                }
            }
        }
    }
}
