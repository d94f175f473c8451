//! Reserved threads (Jetty's `ReservedThreadExecutor`): idle threads parked for a
//! hand-off, so that `try_execute` starts a task *now* or refuses at once. It never queues.
//!
//! * A reserved thread is started lazily: a `try_execute` that finds none idle refuses and starts
//!   one (up to the configured number), so the next attempt can succeed.
//! * Hand-off: the caller pops an idle seat and puts the task in it (both under `idle`), then
//!   unparks the thread. A thread whose idle timeout passes leaves only if its seat is still on the idle
//!   stack (nobody popped it) and more than the minimum remain; otherwise a task is on its way.
//! * On shutdown every idle reserved thread is unparked and exits; one running a task exits
//!   after it. However a thread ends (even by a panic), its seat leaves the stack and a task
//!   already in it runs first (`Leave`).
//! * Durations are added with checked arithmetic: an idle timeout too long to add to `now`
//!   (`Duration::MAX`) means the thread never retires.

use std::sync::Arc;
use std::time::Instant;

use crate::loom::sync::atomic::Ordering;

use super::registry::Registry;
use super::seats::Seat;
use super::work::Refusal;
use crate::error::TryExecuteError;
use crate::task::{Plain, Task};

/// Starts one more reserved thread if the configured number allows.
/// `Pool::try_execute`: `f` starts on an idle reserved thread now, or comes back at once (and a
/// reserved thread is started, up to the configured number, so that a later attempt can
/// succeed). It never queues.
pub(crate) fn try_execute<F>(registry: &Arc<Registry>, f: F) -> Result<(), TryExecuteError<F>>
where
    F: FnOnce() + Send + 'static,
{
    if registry.reserved.idle_count() == 0 && !registry.is_closed() {
        // Cheap refusal: nothing to hand to, so nothing to admit or allocate.
        start_one(registry);
        return Err(TryExecuteError::Busy(f));
    }
    match registry.admit() {
        Ok(()) => {}
        Err(Refusal::Shutdown) => return Err(TryExecuteError::Shutdown(f)),
        Err(Refusal::Full) => return Err(TryExecuteError::Busy(f)),
    }
    // The closure travels in a shared slot so that it can come back untouched if the last
    // idle seat is taken between the check and the hand-off.
    let slot = Arc::new(parking_lot::Mutex::new(Some(f)));
    let inner = slot.clone();
    let task = Task::new(Plain(move || {
        if let Some(f) = inner.lock().take() {
            f()
        }
    }));
    match registry.reserved.hand_off(task) {
        Ok(()) => Ok(()),
        Err(task) => {
            drop(task);
            registry.unadmit();
            start_one(registry);
            match slot.lock().take() {
                Some(f) => Err(TryExecuteError::Busy(f)),
                None => unreachable!("an unrun task still holds its closure"),
            }
        }
    }
}

pub(crate) fn start_one(registry: &Arc<Registry>) {
    let most = registry.config.reserved_threads;
    let reserved = &registry.reserved;
    let got = reserved
        .live
        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
            (n < most).then_some(n + 1)
        });
    let Ok(n) = got else { return };
    let r = registry.clone();
    let spawned = super::threads::builder(&registry.config)
        .name(format!("{}-reserved-{n}", registry.config.thread_name))
        .spawn(move || run(&r));
    match spawned {
        Ok(handle) => registry.keep_handle(handle),
        Err(e) => {
            reserved.live.fetch_sub(1, Ordering::AcqRel);
            tracing::warn!(
                pool = registry.name(),
                error = %e,
                "keyway could not start a reserved thread"
            );
        }
    }
}

fn run(registry: &Arc<Registry>) {
    let _span = registry.span.clone().entered();
    super::worker::set_reserved_of(Arc::as_ptr(registry));
    let _hooks = super::threads::Hooks::start(registry);
    let seat = Seat::for_this_thread();
    // Whatever ends this thread — shutdown, retirement, or a panic that escaped (a bug) — the
    // seat leaves the idle stack first, and a task already handed to it still runs: a hand-off
    // never goes to a thread that is gone.
    let mut leave = Leave {
        registry,
        seat: &seat,
        counted: true,
    };
    serve(registry, &seat, &mut leave.counted);
}

/// The reserved thread's loop; returns when the thread should exit. `counted` is cleared when
/// the thread already gave up its place in `live` (retirement).
fn serve(registry: &Arc<Registry>, seat: &Arc<Seat>, counted: &mut bool) {
    let reserved = &registry.reserved;
    let timeout = registry.config.reserved_idle_timeout;
    loop {
        if registry.is_closed() {
            return;
        }
        reserved.publish(seat);
        // Checked: a timeout too long to add (`Duration::MAX`) means no retirement.
        let mut deadline = Instant::now().checked_add(timeout);
        let task = loop {
            if let Some(task) = seat.task.lock().take() {
                break task;
            }
            if registry.is_closed() && reserved.withdraw(seat) {
                return;
            }
            let now = Instant::now();
            match deadline {
                None => std::thread::park(),
                Some(at) if now < at => std::thread::park_timeout(at - now),
                Some(_) => {
                    if reserved.withdraw(seat) {
                        let min = registry.config.min_reserved_threads;
                        let left =
                            reserved
                                .live
                                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                                    (n > min).then(|| n - 1)
                                });
                        if left.is_ok() {
                            tracing::debug!(
                                pool = registry.name(),
                                "keyway reserved thread retired"
                            );
                            *counted = false;
                            return;
                        }
                        reserved.publish(seat);
                    }
                    deadline = now.checked_add(timeout);
                }
            }
        };
        run_task(registry, task);
    }
}

/// Runs one handed-off task and counts it finished. The task contains its own panics (and
/// those of its captures and result); the boundary here is for anything else.
fn run_task(registry: &Registry, task: Task) {
    registry.reserved.running.fetch_add(1, Ordering::Relaxed);
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| task.run()));
    registry.reserved.running.fetch_sub(1, Ordering::Relaxed);
    match outcome {
        Ok(Ok(())) => {}
        Ok(Err(report)) => registry.report_panic(report),
        Err(payload) => registry.report_panic(crate::task::PanicReport::from_payload(payload)),
    }
    registry.count_finished(1, None);
}

/// A reserved thread's exit, however it happens.
struct Leave<'a> {
    registry: &'a Arc<Registry>,
    seat: &'a Arc<Seat>,
    /// Still counted in `live` (not retired).
    counted: bool,
}

impl Drop for Leave<'_> {
    fn drop(&mut self) {
        let reserved = &self.registry.reserved;
        // A hand-off that raced the exit (the seat was popped but not yet served) runs here.
        if let Some(task) = reserved.leave(self.seat) {
            run_task(self.registry, task);
        }
        if self.counted {
            reserved.live.fetch_sub(1, Ordering::AcqRel);
        }
        self.registry.thread_exited();
    }
}
