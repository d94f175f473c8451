//! The handles a run keeps (pool tasks' and scheduled tasks'), each with what goes with it, and
//! the calls on one picked by an input's index: cancel, join, a poll with a panicking waker.

use std::task::Poll;
use std::time::Duration;

use keyway::{TaskError, TaskHandle};

use crate::futures::poll_once;
use crate::probes::{panicking_waker, Out};

/// A kept handle and what goes with it.
pub struct Held<M> {
    pub handle: TaskHandle<Out>,
    pub meta: M,
}

pub type Outcome = Result<Out, TaskError>;

/// Handles, picked by an input's index (modulo their number).
pub struct Handles<M>(pub Vec<Held<M>>);

impl<M> Handles<M> {
    fn index(&self, i: u8) -> Option<usize> {
        let n = self.0.len();
        (n > 0).then(|| usize::from(i) % n)
    }

    /// Keeps `handle`, or drops it at once (`detach`). If its task already finished, that
    /// drop is its result's last owner, and a bomb result panics here, on the caller's thread:
    /// the user's own drop, not the pool's (caught).
    pub fn keep(&mut self, handle: TaskHandle<Out>, meta: M, detach: bool) {
        if detach {
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(handle)));
        } else {
            self.0.push(Held { handle, meta });
        }
    }

    /// `cancel()` on handle `i`: `Some(what goes with it)` if it returned true.
    pub fn cancel(&mut self, i: u8) -> Option<&mut M> {
        let i = self.index(i)?;
        let h = &mut self.0[i];
        h.handle.cancel().then_some(&mut h.meta)
    }

    /// Joins handle `i` for at most `timeout`: taken out with its outcome if it came.
    pub fn join(&mut self, i: u8, timeout: Duration) -> Option<(M, Outcome)> {
        let Held { handle, meta } = self.0.swap_remove(self.index(i)?);
        match handle.join_timeout(timeout) {
            Ok(outcome) => Some((meta, outcome)),
            Err(handle) => {
                self.0.push(Held { handle, meta });
                None
            }
        }
    }

    /// Polls handle `i` once with a waker whose `wake` panics, and keeps it (the pool wakes
    /// that waker when the task ends). Done already: the outcome goes to this poll, and the
    /// handle is taken out with it.
    pub fn poll_panicking(&mut self, i: u8) -> Option<(M, Outcome)> {
        let i = self.index(i)?;
        match poll_once(&mut self.0[i].handle, &panicking_waker()) {
            Poll::Ready(outcome) => Some((self.0.swap_remove(i).meta, outcome)),
            Poll::Pending => None,
        }
    }

    /// Every handle joined (each must be finished by now: a lost task otherwise).
    pub fn join_all(&mut self) -> Vec<(M, Outcome)> {
        std::mem::take(&mut self.0)
            .into_iter()
            .map(|h| {
                assert!(
                    h.handle.is_finished(),
                    "a handle never learned its task's outcome: a lost task"
                );
                (h.meta, h.handle.join())
            })
            .collect()
    }
}

impl<M> Default for Handles<M> {
    fn default() -> Self {
        Handles(Vec::new())
    }
}
