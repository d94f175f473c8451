//! Who waits for the pool to change: submitters waiting for room under `capacity` (threads and
//! futures), and callers of `wait_idle`.
//!
//! Protocol (no lost wake-up, the Dekker pattern the admission counters already use):
//!
//! 1. A waiter *registers* (raises `room` or `idle`, SeqCst) before it looks at the pool (tries
//!    to admit, or reads `pending`), and records its generation (`room_releases` or
//!    `idle_releases`) under the lock.
//! 2. Whoever lowers `queued` (room) or `pending` (idle) does so with a SeqCst
//!    read-modify-write, *then* reads the registration count (SeqCst); when it is raised it
//!    takes the lock, bumps that generation and wakes everyone registered. The waiter's look
//!    (the admission's compare-and-swap on `queued`, its failure included, or the reads of the
//!    `pending` stripes) is SeqCst too: of the four accesses, one total order, so the look
//!    cannot miss the release while the releaser misses the registration. A refused admission
//!    never raises `queued` (it is a compare-and-swap), so it frees no room and bumps nothing:
//!    a waiter's own failed look does not wake it.
//! 3. A waiter that found no room (or a busy pool) sleeps only while its generation is still
//!    the one it recorded before looking, and looks again after every wake-up.
//!
//! Either the waiter's look sees the release, or the releaser's read sees the registration and
//! bumps the generation, which the waiter checks under the lock before it sleeps.

use std::task::Waker;
use std::time::Instant;

use crate::loom::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use crate::loom::sync::{Condvar, Mutex, MutexGuard};
use crate::task::wake_quietly;

pub(crate) struct Waiters {
    room: AtomicUsize,
    idle: AtomicUsize,
    state: Mutex<State>,
    changed: Condvar,
}

struct State {
    room_releases: u64,
    idle_releases: u64,
    next_id: u64,
    wakers: Vec<(u64, Waker)>,
}

/// A registration for room (Rule 1); dropping it deregisters.
pub(crate) struct RoomWait<'a> {
    waiters: &'a Waiters,
    pub(crate) generation: u64,
    id: Option<u64>,
}

impl Waiters {
    pub(crate) fn new() -> Self {
        Waiters {
            room: AtomicUsize::new(0),
            idle: AtomicUsize::new(0),
            state: Mutex::new(State {
                room_releases: 0,
                idle_releases: 0,
                next_id: 0,
                wakers: Vec::new(),
            }),
            changed: Condvar::new(),
        }
    }

    /// Rule 2: `queued` and `pending` just dropped (or the pool closed); wakes every waiter.
    ///
    /// An async waiter's waker is taken out as it is woken (no clone): each parked waiter is
    /// woken once per `park`, and parks again (Rule 3) if its next look finds no room, so a
    /// finish costs nothing for waiters already woken. The wakers run the executors' code:
    /// outside the lock, each contained, so that one that panics neither unwinds into the
    /// finish that released the room (a lane runner's, a future's driver's) nor keeps the
    /// waiters after it from being woken.
    pub(crate) fn released(&self) {
        self.released_idle();
        if registered(&self.room) == 0 {
            return;
        }
        let wakers = {
            let mut st = self.state.lock();
            st.room_releases = st.room_releases.wrapping_add(1);
            self.changed.notify_all();
            std::mem::take(&mut st.wakers)
        };
        for (_, w) in wakers {
            wake_quietly(w);
        }
    }

    /// Rule 2: `pending` alone dropped (a refused admission was taken back); wakes `wait_idle`.
    pub(crate) fn released_idle(&self) {
        if registered(&self.idle) == 0 {
            return;
        }
        let mut st = self.state.lock();
        st.idle_releases = st.idle_releases.wrapping_add(1);
        self.changed.notify_all();
    }

    /// Rule 1 for a submitter: registers before the caller tries to admit.
    pub(crate) fn wait_for_room(&self) -> RoomWait<'_> {
        let st = self.state.lock();
        self.room.fetch_add(1, SeqCst);
        RoomWait {
            waiters: self,
            generation: st.room_releases,
            id: None,
        }
    }

    /// Blocks until `is_idle` holds, or `deadline` passes (false then). Rule 1 and 3.
    pub(crate) fn wait_idle(&self, deadline: Option<Instant>, is_idle: impl Fn() -> bool) -> bool {
        let mut st = self.state.lock();
        self.idle.fetch_add(1, SeqCst);
        let idle = loop {
            let generation = st.idle_releases;
            if is_idle() {
                break true;
            }
            // Rule 3: sleep only while no release happened since the look.
            let woke;
            (st, woke) = self.sleep_while(st, |st| st.idle_releases == generation, deadline);
            if !woke {
                break is_idle();
            }
        };
        drop(st);
        self.idle.fetch_sub(1, SeqCst);
        idle
    }

    /// Sleeps while `unchanged` holds; false once `deadline` passed with it still holding.
    fn sleep_while<'a>(
        &self,
        mut st: MutexGuard<'a, State>,
        unchanged: impl Fn(&State) -> bool,
        deadline: Option<Instant>,
    ) -> (MutexGuard<'a, State>, bool) {
        while unchanged(&st) {
            match deadline {
                Some(d) => {
                    let timed_out;
                    (st, timed_out) = self.changed.wait_until(st, d);
                    if timed_out {
                        let woke = !unchanged(&st);
                        return (st, woke);
                    }
                }
                None => st = self.changed.wait(st),
            }
        }
        (st, true)
    }
}

/// Rule 2's read of a registration count. loom treats `SeqCst` as `AcqRel`, under which the
/// Dekker argument does not hold; as in the other models, under loom the read is a
/// read-modify-write, which always sees the latest value: the order C11 gives the real `SeqCst`
/// load.
fn registered(count: &AtomicUsize) -> usize {
    #[cfg(loom)]
    return count.fetch_add(0, SeqCst);
    #[cfg(not(loom))]
    count.load(SeqCst)
}

impl RoomWait<'_> {
    /// Rule 3, blocking: after a look that found no room, sleeps until the next release (true)
    /// or the deadline (false); the caller then looks again.
    pub(crate) fn sleep(&mut self, deadline: Option<Instant>) -> bool {
        let st = self.waiters.state.lock();
        let generation = self.generation;
        let (st, woke) =
            self.waiters
                .sleep_while(st, |st| st.room_releases == generation, deadline);
        self.generation = st.room_releases;
        woke
    }

    /// Rule 3, async: after a look that found no room, true if a release already happened (look
    /// again now); otherwise stores `waker` for the next release and returns false.
    pub(crate) fn park(&mut self, waker: &Waker) -> bool {
        let mut st = self.waiters.state.lock();
        if st.room_releases != self.generation {
            self.generation = st.room_releases;
            return true;
        }
        let id = match self.id {
            Some(id) => id,
            None => {
                let id = st.next_id;
                st.next_id = st.next_id.wrapping_add(1);
                self.id = Some(id);
                id
            }
        };
        // Registered again after a release took its waker out (`released`).
        match st.wakers.iter_mut().find(|(i, _)| *i == id) {
            Some((_, w)) => {
                if !w.will_wake(waker) {
                    *w = waker.clone();
                }
            }
            None => st.wakers.push((id, waker.clone())),
        }
        false
    }
}

impl Drop for RoomWait<'_> {
    fn drop(&mut self) {
        let mut st = self.waiters.state.lock();
        if let Some(id) = self.id {
            st.wakers.retain(|(i, _)| *i != id);
        }
        self.waiters.room.fetch_sub(1, SeqCst);
    }
}
