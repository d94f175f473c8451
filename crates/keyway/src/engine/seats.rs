//! The seats of the reserved threads (Jetty's `ReservedThreadExecutor`): an idle reserved
//! thread publishes its seat on the idle stack; `try_execute` pops one and puts its task in it,
//! both under the stack's lock, so that no task reaches a seat its thread has left. The threads
//! themselves (start, serve, retire, leave) are `reserved.rs`'s.

use std::sync::Arc;

use crate::loom::sync::atomic::AtomicUsize;
use crate::loom::sync::Mutex;
use crate::loom::thread_handle::{self, Thread};
use crate::task::Task;

/// A parked reserved thread's hand-off slot.
pub(super) struct Seat {
    pub(super) task: Mutex<Option<Task>>,
    thread: Thread,
}

impl Seat {
    pub(super) fn for_this_thread() -> Arc<Seat> {
        Arc::new(Seat {
            task: Mutex::new(None),
            thread: thread_handle::current(),
        })
    }
}

pub(crate) struct Reserved {
    idle: Mutex<Vec<Arc<Seat>>>,
    pub(crate) live: AtomicUsize,
    /// Reserved threads running a handed-off task now (`Stats::running_tasks`).
    pub(crate) running: AtomicUsize,
}

impl Reserved {
    pub(crate) fn new() -> Self {
        Reserved {
            idle: Mutex::new(Vec::new()),
            live: AtomicUsize::new(0),
            running: AtomicUsize::new(0),
        }
    }

    pub(crate) fn idle_count(&self) -> usize {
        self.idle.lock().len()
    }

    /// Gives `task` to an idle reserved thread, or hands it back at once.
    pub(crate) fn hand_off(&self, task: Task) -> Result<(), Task> {
        let mut idle = self.idle.lock();
        let Some(seat) = idle.pop() else {
            return Err(task);
        };
        // Stored while `idle` is held: a thread that fails to withdraw its seat (under `idle`)
        // finds the task already there, so no task reaches a seat its thread has left.
        *seat.task.lock() = Some(task);
        drop(idle);
        seat.thread.unpark();
        Ok(())
    }

    /// Unparks every idle reserved thread (shutdown).
    pub(crate) fn wake_all(&self) {
        for seat in self.idle.lock().iter() {
            seat.thread.unpark();
        }
    }

    /// Puts `seat` on the idle stack: a hand-off may now pop it.
    pub(super) fn publish(&self, seat: &Arc<Seat>) {
        self.idle.lock().push(seat.clone());
    }

    /// The seat's thread leaves for good: takes the seat off the idle stack and returns the task
    /// a hand-off already put in it, if any. Since `hand_off` pops and fills a seat under `idle`,
    /// a seat that is not on the stack any more already holds its task.
    pub(super) fn leave(&self, seat: &Arc<Seat>) -> Option<Task> {
        self.withdraw(seat);
        seat.task.lock().take()
    }

    pub(super) fn withdraw(&self, seat: &Arc<Seat>) -> bool {
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

#[cfg(all(test, loom))]
mod loom_reserved {
    //! The reserved-seat hand-off under loom: a reserved thread publishes its seat, then leaves
    //! (idle timeout, shutdown, or a panic: `Leave`) while a caller of `try_execute` hands it a
    //! task. The task runs exactly once if and only if `hand_off` said `Ok`; a seat is never
    //! handed a task its thread will not run.

    use super::{Reserved, Seat};
    use crate::loom::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    use crate::loom::sync::Arc;
    use crate::loom::thread;
    use crate::task::{Plain, Task};

    fn counting_task(ran: &Arc<AtomicUsize>) -> Task {
        let ran = ran.clone();
        Task::new(Plain(move || {
            ran.fetch_add(1, SeqCst);
        }))
    }

    /// A reserved thread that publishes its seat, then runs `leave_how`, races a hand-off:
    /// the task runs exactly once if and only if `hand_off` said `Ok`.
    fn race_hand_off(leave_how: fn(&Reserved, &std::sync::Arc<Seat>)) {
        loom::model(move || {
            let reserved = Arc::new(Reserved::new());
            let ran = Arc::new(AtomicUsize::new(0));
            let thread = {
                let reserved = reserved.clone();
                thread::spawn(move || {
                    let seat = Seat::for_this_thread();
                    reserved.publish(&seat);
                    leave_how(&reserved, &seat);
                })
            };
            let handed = reserved.hand_off(counting_task(&ran)).is_ok();
            thread.join().unwrap();
            assert_eq!(
                ran.load(SeqCst),
                usize::from(handed),
                "a handed task was lost or run twice (handed {handed})"
            );
        });
    }

    /// The idle timeout: the thread leaves only if it withdraws its seat; otherwise a task is on
    /// its way and it waits for it.
    #[test]
    fn loom_reserved_timeout_vs_hand_off() {
        race_hand_off(|reserved, seat| {
            if reserved.withdraw(seat) {
                return; // retired: nobody popped the seat
            }
            loop {
                if let Some(task) = seat.task.lock().take() {
                    task.run().unwrap();
                    return;
                }
                thread::park();
            }
        });
    }

    /// The thread leaves through `Leave` (shutdown, or a panic that escaped): it must find a
    /// task handed to it in the meantime.
    #[test]
    fn loom_reserved_leave_vs_hand_off() {
        race_hand_off(|reserved, seat| {
            if let Some(task) = reserved.leave(seat) {
                task.run().unwrap();
            }
        });
    }
}
