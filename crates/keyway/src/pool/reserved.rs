//! Reserved threads (SPEC §2, Jetty's `ReservedThreadExecutor`): idle threads parked for a
//! hand-off, so that `try_execute` starts a task *now* or refuses at once. It never queues.
//!
//! * A reserved thread is started lazily: a `try_execute` that finds none idle refuses and starts
//!   one (up to the configured number), so the next attempt can succeed.
//! * Hand-off: the caller pops an idle seat (under `idle`), puts the task in it, unparks the
//!   thread. A thread whose idle timeout passes leaves only if its seat is still on the idle
//!   stack (nobody popped it) and more than the minimum remain; otherwise a task is on its way.
//! * On shutdown every idle reserved thread is unparked and exits; one running a task exits
//!   after it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::Thread;
use std::time::Instant;

use parking_lot::Mutex;

use super::registry::Registry;
use crate::task::Task;

/// A parked reserved thread's hand-off slot.
struct Seat {
    task: Mutex<Option<Task>>,
    thread: Thread,
}

pub(crate) struct Reserved {
    idle: Mutex<Vec<Arc<Seat>>>,
    pub(crate) live: AtomicUsize,
}

impl Reserved {
    pub(crate) fn new() -> Self {
        Reserved {
            idle: Mutex::new(Vec::new()),
            live: AtomicUsize::new(0),
        }
    }

    pub(crate) fn idle_count(&self) -> usize {
        self.idle.lock().len()
    }

    /// Gives `task` to an idle reserved thread, or hands it back at once.
    pub(crate) fn hand_off(&self, task: Task) -> Result<(), Task> {
        let Some(seat) = self.idle.lock().pop() else {
            return Err(task);
        };
        *seat.task.lock() = Some(task);
        seat.thread.unpark();
        Ok(())
    }

    /// Unparks every idle reserved thread (shutdown).
    pub(crate) fn wake_all(&self) {
        for seat in self.idle.lock().iter() {
            seat.thread.unpark();
        }
    }

    fn withdraw(&self, seat: &Arc<Seat>) -> bool {
        let mut idle = self.idle.lock();
        match idle.iter().position(|s| Arc::ptr_eq(s, seat)) {
            Some(pos) => {
                idle.swap_remove(pos);
                true
            }
            None => false,
        }
    }
}

/// Starts one more reserved thread if the configured number allows.
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
    let spawned = std::thread::Builder::new()
        .name(format!("{}-reserved-{n}", registry.config.thread_name))
        .spawn(move || run(&r));
    if let Err(e) = spawned {
        reserved.live.fetch_sub(1, Ordering::AcqRel);
        tracing::warn!(error = %e, "keyway could not start a reserved thread");
    }
}

fn run(registry: &Arc<Registry>) {
    super::worker::set_reserved_of(Arc::as_ptr(registry));
    let reserved = &registry.reserved;
    let seat = Arc::new(Seat {
        task: Mutex::new(None),
        thread: std::thread::current(),
    });
    let timeout = registry.config.reserved_idle_timeout;
    'serve: loop {
        if registry.is_closed() {
            break;
        }
        reserved.idle.lock().push(seat.clone());
        let mut deadline = Instant::now() + timeout;
        let task = loop {
            if let Some(task) = seat.task.lock().take() {
                break task;
            }
            if registry.is_closed() && reserved.withdraw(&seat) {
                break 'serve;
            }
            let now = Instant::now();
            if now >= deadline {
                if reserved.withdraw(&seat) {
                    let min = registry.config.min_reserved_threads;
                    let left =
                        reserved
                            .live
                            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                                (n > min).then(|| n - 1)
                            });
                    if left.is_ok() {
                        tracing::debug!("keyway reserved thread retired");
                        registry.thread_exited();
                        return;
                    }
                    reserved.idle.lock().push(seat.clone());
                }
                deadline = now + timeout;
                continue;
            }
            std::thread::park_timeout(deadline - now);
        };
        if let Err(report) = task.run() {
            registry.report_panic(report);
        }
        registry.task_done();
    }
    reserved.live.fetch_sub(1, Ordering::AcqRel);
    registry.thread_exited();
}
