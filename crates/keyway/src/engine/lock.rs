//! A mutex that never gives its thread's CPU away: it spins briefly, then parks.
//!
//! `parking_lot`'s mutex spins, then calls `sched_yield` up to seven times before it parks. On a
//! loaded machine a yield hands the CPU to any other runnable process until the next scheduler
//! tick, milliseconds later, while the lock it waits for is released a few nanoseconds after.
//! This one spins about as long as a short critical section lasts (127 `pause`s) and
//! then parks in `parking_lot_core`'s queue for the lock's address, woken by the unlock: a
//! waiter either runs or sleeps, it never sits runnable behind other processes.
//!
//! The state is one byte: [`LOCKED`] while held, [`PARKED`] while a thread may be parked on it.
//! The unlock that finds [`PARKED`] wakes one parked thread. As `parking_lot` does, an unlock
//! hands the lock straight to the thread it wakes about once every 0.5 ms per lock
//! (`UnparkResult::be_fair`), so a parked thread cannot be starved by threads that keep taking
//! the lock from the fast path.
//!
//! The guard is `lock_api`'s: no poisoning, and a panic that unwinds through a guard unlocks.

use std::hint::spin_loop;
use std::sync::atomic::{AtomicU8, Ordering};

use lock_api::GuardSend;
use parking_lot_core::{ParkResult, UnparkResult, UnparkToken, DEFAULT_PARK_TOKEN};

/// A mutex with `parking_lot`'s interface (`lock` returns the guard) that does not yield.
pub(crate) type Mutex<T> = lock_api::Mutex<RawLock, T>;

/// The lock is held.
const LOCKED: u8 = 1;
/// A thread may be parked on the lock: its unlock must wake one.
const PARKED: u8 = 2;

/// Spin rounds before parking; round `n` spins `2^min(n, 6)` times (127 `pause`s in all,
/// a few µs): longer than a short critical section, shorter than a park and its wake-up.
const SPIN_ROUNDS: u32 = 7;

/// The unlock handed the lock over: the woken thread holds it.
const TOKEN_HANDOFF: UnparkToken = UnparkToken(1);
/// The unlock released the lock: the woken thread must take it.
const TOKEN_NORMAL: UnparkToken = UnparkToken(0);

/// The raw lock behind [`Mutex`].
#[derive(Debug)]
pub(crate) struct RawLock {
    state: AtomicU8,
}

// SAFETY: `lock` and `try_lock` return only once `LOCKED` was set by this thread's
// compare-exchange (Acquire), or once an unlock handed the lock over (`TOKEN_HANDOFF`, the state
// left `LOCKED`); `LOCKED` is cleared only by `unlock`, which lock_api calls once per acquisition
// (Release). So at most one holder at a time, and each sees the previous holder's writes.
unsafe impl lock_api::RawMutex for RawLock {
    #[allow(clippy::declare_interior_mutable_const)]
    const INIT: RawLock = RawLock {
        state: AtomicU8::new(0),
    };

    type GuardMarker = GuardSend;

    #[inline]
    fn lock(&self) {
        if self
            .state
            .compare_exchange_weak(0, LOCKED, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            self.lock_slow();
        }
    }

    #[inline]
    fn try_lock(&self) -> bool {
        let mut state = self.state.load(Ordering::Relaxed);
        loop {
            if state & LOCKED != 0 {
                return false;
            }
            match self.state.compare_exchange_weak(
                state,
                state | LOCKED,
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => return true,
                Err(now) => state = now,
            }
        }
    }

    #[inline]
    unsafe fn unlock(&self) {
        if self
            .state
            .compare_exchange(LOCKED, 0, Ordering::Release, Ordering::Relaxed)
            .is_err()
        {
            self.unlock_slow();
        }
    }

    #[inline]
    fn is_locked(&self) -> bool {
        self.state.load(Ordering::Relaxed) & LOCKED != 0
    }
}

impl RawLock {
    /// The lock was held: spin [`SPIN_ROUNDS`] rounds while nobody is parked, then park until
    /// an unlock wakes this thread; again until the lock is taken or handed over.
    #[cold]
    fn lock_slow(&self) {
        let mut rounds = 0;
        let mut state = self.state.load(Ordering::Relaxed);
        loop {
            if state & LOCKED == 0 {
                match self.state.compare_exchange_weak(
                    state,
                    state | LOCKED,
                    Ordering::Acquire,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => return,
                    Err(now) => state = now,
                }
                continue;
            }
            // Spinning behind parked threads would only take the lock from under them.
            if state & PARKED == 0 && rounds < SPIN_ROUNDS {
                for _ in 0..1u32 << rounds.min(6) {
                    spin_loop();
                }
                rounds += 1;
                state = self.state.load(Ordering::Relaxed);
                continue;
            }
            if state & PARKED == 0 {
                if let Err(now) = self.state.compare_exchange_weak(
                    state,
                    state | PARKED,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                ) {
                    state = now;
                    continue;
                }
            }
            if self.park() {
                return;
            }
            rounds = 0;
            state = self.state.load(Ordering::Relaxed);
        }
    }

    /// Parks this thread on the lock's address while the lock is held with `PARKED` set; true
    /// if the unlock handed the lock over.
    fn park(&self) -> bool {
        let validate = || self.state.load(Ordering::Relaxed) == LOCKED | PARKED;
        // SAFETY: the key is this lock's address, which only this lock parks on; `validate`,
        // `before_sleep` and `timed_out` neither panic nor call into `parking_lot_core`
        // (`timed_out` is never called: there is no timeout).
        let result = unsafe {
            parking_lot_core::park(
                self.key(),
                validate,
                || {},
                |_, _| {},
                DEFAULT_PARK_TOKEN,
                None,
            )
        };
        // Woken by a plain unlock, or `validate` failed: take the lock again.
        matches!(result, ParkResult::Unparked(TOKEN_HANDOFF))
    }

    /// `PARKED` was set: wakes one parked thread, handing the lock over now and then.
    #[cold]
    fn unlock_slow(&self) {
        let callback = |result: UnparkResult| {
            // Runs with the queue locked, so no thread parks or leaves meanwhile.
            let parked = if result.have_more_threads { PARKED } else { 0 };
            if result.unparked_threads != 0 && result.be_fair {
                // Still `LOCKED`: the woken thread holds it now.
                self.state.store(LOCKED | parked, Ordering::Relaxed);
                return TOKEN_HANDOFF;
            }
            self.state.store(parked, Ordering::Release);
            TOKEN_NORMAL
        };
        // SAFETY: the key is this lock's address; `callback` neither panics nor calls into
        // `parking_lot_core`.
        unsafe {
            parking_lot_core::unpark_one(self.key(), callback);
        }
    }

    fn key(&self) -> usize {
        self as *const RawLock as usize
    }
}

#[cfg(test)]
mod tests {
    use super::{Mutex, LOCKED, PARKED};
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::{Arc, Barrier};
    use std::thread;

    /// The lock's state byte.
    fn state<T>(lock: &Mutex<T>) -> u8 {
        // SAFETY: only read: the state is an atomic, and nothing here locks or unlocks through
        // the raw lock (which is what `raw` forbids doing behind the guard's back).
        unsafe { lock.raw() }.state.load(Ordering::Relaxed)
    }

    /// 8 threads (4 per core on the 2-core machine: most waits end in a park) each take the
    /// lock 20,000 times, check that nobody else is inside and add to a plain counter: every
    /// increment lands and nobody ever sees another holder.
    #[test]
    fn excludes_under_contention() {
        const THREADS: usize = 8;
        const ROUNDS: usize = 20_000;
        let lock = Arc::new(Mutex::new(0usize));
        let inside = Arc::new(AtomicBool::new(false));
        let start = Arc::new(Barrier::new(THREADS));
        let threads: Vec<_> = (0..THREADS)
            .map(|_| {
                let (lock, inside, start) = (lock.clone(), inside.clone(), start.clone());
                thread::spawn(move || {
                    start.wait();
                    for _ in 0..ROUNDS {
                        let mut count = lock.lock();
                        assert!(!inside.swap(true, Ordering::Relaxed), "two holders at once");
                        // A read and a write apart: an overlap would lose an increment.
                        let seen = *count;
                        std::hint::black_box(&seen);
                        *count = seen + 1;
                        inside.store(false, Ordering::Relaxed);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(*lock.lock(), THREADS * ROUNDS);
        assert!(!lock.is_locked());
    }

    /// A thread that finds the lock held parks (the state shows `PARKED`), and the unlock wakes
    /// it with the lock: the park and wake-up path, not only the spin.
    #[test]
    fn a_parked_waiter_is_woken_by_the_unlock() {
        let lock = Arc::new(Mutex::new(0u32));
        let guard = lock.lock();
        let waiter = {
            let lock = lock.clone();
            thread::spawn(move || {
                *lock.lock() += 1;
            })
        };
        // The waiter spins a few µs, then sets `PARKED` before it parks.
        while state(&lock) != LOCKED | PARKED {
            thread::yield_now();
        }
        drop(guard);
        waiter.join().unwrap();
        assert_eq!(*lock.lock(), 1);
        assert_eq!(state(&lock), 0);
    }

    /// A panic while the lock is held unwinds through the guard, which unlocks: the next
    /// `lock` (and `try_lock`) takes it, with the value as the panicking thread left it.
    #[test]
    fn a_panic_while_held_does_not_wedge_it() {
        let lock = Arc::new(Mutex::new(0u32));
        let panicked = {
            let lock = lock.clone();
            thread::spawn(move || {
                let mut value = lock.lock();
                *value = 7;
                panic!("inside the lock");
            })
            .join()
        };
        assert!(panicked.is_err());
        assert!(!lock.is_locked());
        assert_eq!(*lock.try_lock().expect("unlocked by the unwind"), 7);
        assert_eq!(*lock.lock(), 7);
    }

    /// Many threads parked at once all get the lock in turn: each unlock wakes one, and the
    /// last one's unlock clears `PARKED`.
    #[test]
    fn every_parked_waiter_gets_its_turn() {
        const WAITERS: usize = 6;
        let lock = Arc::new(Mutex::new(()));
        let done = Arc::new(AtomicUsize::new(0));
        let guard = lock.lock();
        let waiters: Vec<_> = (0..WAITERS)
            .map(|_| {
                let (lock, done) = (lock.clone(), done.clone());
                thread::spawn(move || {
                    let _held = lock.lock();
                    done.fetch_add(1, Ordering::Relaxed);
                })
            })
            .collect();
        while state(&lock) & PARKED == 0 {
            thread::yield_now();
        }
        drop(guard);
        for w in waiters {
            w.join().unwrap();
        }
        assert_eq!(done.load(Ordering::Relaxed), WAITERS);
        assert_eq!(state(&lock), 0);
    }
}
