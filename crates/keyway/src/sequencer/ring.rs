//! The ring of turns: the lock-free protocol behind [`Sequencer`](super::Sequencer) and
//! [`Ticket`](super::Ticket).
//!
//! Everything here follows the numbered rules in `README.md` beside this file: comments cite them
//! as *Rule N*, and every `unsafe` block names the rule that makes it sound. Read the README before
//! changing any atomic operation or memory ordering, and rerun the loom models afterwards.

use std::any::Any;
use std::collections::VecDeque;
use std::mem;
use std::panic::{self, AssertUnwindSafe};

use crossbeam_utils::CachePadded;
use parking_lot::RwLock;

use crate::loom::cell::UnsafeCell;
use crate::loom::sync::atomic::AtomicU64;
use crate::loom::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};
use crate::loom::sync::Mutex;

use super::panic::{payload_message, PanicHook, TicketPanic};
use super::RunOutcome;

/// RingSlot state bit: the slot holds the stored work of the ticket named by the sequence number.
const STORED: u64 = 0b01;
/// RingSlot state bit: the slot's overflow list may hold work for a later ticket (Rule 5).
const OVERFLOW: u64 = 0b10;
/// The sequence number (a ticket number) sits above the two flag bits.
pub(super) const SEQ_SHIFT: u32 = 2;

/// A closure stored for later; `None` stands for a dropped (skipped) ticket.
type Job = Option<Box<dyn FnOnce() + Send + 'static>>;

/// Checks a protocol rule in debug builds and in loom runs (which are release builds).
macro_rules! invariant {
    ($($arg:tt)*) => {
        if cfg!(any(debug_assertions, loom)) {
            assert!($($arg)*);
        }
    };
}

/// The ticket number held in a slot state word.
#[inline(always)]
fn seq(state: u64) -> u64 {
    state >> SEQ_SHIFT
}

/// One turn's place in the ring.
struct RingSlot {
    /// `seq << SEQ_SHIFT | OVERFLOW? | STORED?`, where `seq` is the ticket this slot is for now
    /// (Rule 1).
    state: AtomicU64,
    /// The closure cells: ticket `t` uses `jobs[(t / capacity) % 2]`, so that two consecutive
    /// laps never share a cell (Rule 4).
    jobs: [UnsafeCell<Job>; 2],
    /// The overflow list: work of tickets a lap or more ahead of `seq`, sorted by ticket
    /// (Rule 5). A lock per slot, so that tickets parking on different slots do not contend.
    parked: Mutex<VecDeque<(u64, Job)>>,
}

// SAFETY: `jobs` is the only field that is not `Sync`; every access to a cell is made by the one
// thread that Rule 4 names as its owner at that point, and ownership is handed over through
// `state` with release/acquire ordering. The closures it holds are `Send`.
unsafe impl Sync for RingSlot {}

/// The shared state of a sequencer.
pub(super) struct Inner {
    /// The next ticket to hand out.
    pub(super) next: CachePadded<AtomicU64>,
    /// The ring: ticket `t` uses slot `t & mask`.
    slots: Box<[CachePadded<RingSlot>]>,
    /// `capacity - 1`; the capacity is a power of two.
    mask: u64,
    /// Panics caught in turns.
    pub(super) panicked: AtomicU64,
    /// Called with each caught panic.
    pub(super) hook: RwLock<Option<std::sync::Arc<PanicHook>>>,
}

/// What the calling thread must do next after handing in a ticket's work.
enum Next {
    /// Nothing: the work is stored, and the turn holder will run it.
    Done,
    /// The calling thread holds the turn of that ticket: it must run this work and then publish
    /// the turns after it.
    Run(Job),
}

impl Inner {
    /// A ring of `capacity` slots (a power of two, at most `Sequencer::MAX_CAPACITY`), with no
    /// ticket handed out yet.
    pub(super) fn new(capacity: usize) -> Inner {
        let slots = (0..capacity as u64)
            .map(|i| {
                // Rule 1: slot `i` starts as the slot of ticket `i`, except that turn 0 is
                // reached at once: slot 0 starts passed, one lap on.
                let first = if i == 0 { capacity as u64 } else { i };
                CachePadded::new(RingSlot {
                    state: AtomicU64::new(first << SEQ_SHIFT),
                    jobs: [UnsafeCell::new(None), UnsafeCell::new(None)],
                    parked: Mutex::new(VecDeque::new()),
                })
            })
            .collect();
        Inner {
            next: CachePadded::new(AtomicU64::new(0)),
            slots,
            mask: capacity as u64 - 1,
            panicked: AtomicU64::new(0),
            hook: RwLock::new(None),
        }
    }

    /// The ring's capacity, in slots.
    pub(super) fn capacity(&self) -> usize {
        self.slots.len()
    }

    #[inline(always)]
    fn slot(&self, ticket: u64) -> &RingSlot {
        &self.slots[(ticket & self.mask) as usize]
    }

    /// The closure cell of ticket `t` in its slot (Rule 4).
    #[inline(always)]
    fn cell(&self, t: u64) -> &UnsafeCell<Job> {
        let odd_lap = t & (self.mask + 1) != 0;
        &self.slot(t).jobs[odd_lap as usize]
    }

    /// One lap of the ring, in state-word units: adding it moves a slot to its next ticket.
    #[inline(always)]
    fn lap(&self) -> u64 {
        (self.mask + 1) << SEQ_SHIFT
    }

    /// The owner of ticket `t` hands in its work (`None`: skip the turn).
    #[inline]
    pub(super) fn arrive<F>(&self, t: u64, f: Option<F>) -> RunOutcome
    where
        F: FnOnce() + Send + 'static,
    {
        // Acquire: if the turn has been passed to us, the earlier turns happen-before ours
        // (Rule 2).
        let mut state = self.slot(t).state.load(Acquire);
        if seq(state) > t {
            // Rule 1: the slot has moved past `t`, so turn `t` was passed to us. Fast path: run
            // in place, unboxed.
            invariant!(seq(state) == t + self.lap_tickets(), "Rule 1");
            let panicked = match f {
                Some(f) => self.execute(t, f),
                None => false,
            };
            self.publish_from(t + 1);
            return if panicked {
                RunOutcome::Panicked
            } else {
                RunOutcome::Ran
            };
        }
        let mut job: Job = match f {
            Some(f) => Some(Box::new(f)),
            None => None,
        };
        loop {
            if seq(state) < t {
                // Rule 1: the slot still serves an earlier lap; `t` is a lap or more ahead.
                match self.park(t, job) {
                    Ok(()) => return RunOutcome::Deferred,
                    Err((back, now)) => {
                        job = back;
                        state = now;
                        continue;
                    }
                }
            }
            return match self.deliver(t, job, state) {
                Next::Done => RunOutcome::Deferred,
                Next::Run(job) => {
                    let panicked = self.run_job(t, job);
                    self.publish_from(t + 1);
                    if panicked {
                        RunOutcome::Panicked
                    } else {
                        RunOutcome::Ran
                    }
                }
            };
        }
    }

    /// Hands in ticket `t`'s work through its slot, acting as `t`'s owner; `state` is a value of
    /// the slot's state already read, with `seq(state) >= t`.
    fn deliver(&self, t: u64, job: Job, mut state: u64) -> Next {
        invariant!(
            seq(state) >= t,
            "Rules 1 and 5: only called once the slot reached `t`"
        );
        if seq(state) > t {
            // Rule 1: the turn was passed to `t`'s owner, which we are (Rule 6).
            return Next::Run(job);
        }
        let slot = self.slot(t);
        let wrote = job.is_some();
        if wrote {
            // SAFETY: Rule 4: the slot is `t`'s and not STORED, so `t`'s cell is ours (the
            // owner's) until our store CAS below succeeds; nobody else reads or writes it.
            self.cell(t).with_mut(|cell| unsafe { *cell = job });
        }
        loop {
            // Rule 3: this CAS and the publisher's pass CAS decide turn `t`; exactly one wins.
            // Release: publishes the closure written above to the publisher that takes it.
            // Acquire on failure: if we lost, the turn was passed to us (Rule 2).
            match slot
                .state
                .compare_exchange(state, state | STORED, Release, Acquire)
            {
                Ok(_) => return Next::Done,
                // Only the OVERFLOW bit changed (Rule 5): try again.
                Err(now) if seq(now) == t => state = now,
                Err(_now) if !wrote => return Next::Run(None),
                Err(_now) => {
                    // The publisher passed turn `t` first: it is ours to run (Rule 3). Take back
                    // the closure we wrote.
                    // SAFETY: Rule 4: our store CAS never succeeded, so `t`'s cell was never
                    // published and is still ours; the owner of `t + capacity`, free to write
                    // since the pass, uses the other cell.
                    let job = self.cell(t).with_mut(|cell| unsafe { (*cell).take() });
                    return Next::Run(job);
                }
            }
        }
    }

    /// Ticket `t` is a lap or more ahead of its slot: leave its work in the slot's overflow list.
    ///
    /// Returns the work and a fresh state word if the slot reached `t` meanwhile, so that the
    /// caller goes through the ring after all.
    #[cold]
    fn park(&self, t: u64, job: Job) -> Result<(), (Job, u64)> {
        let slot = self.slot(t);
        let mut parked = slot.parked.lock();
        let mut state = slot.state.load(Acquire);
        loop {
            if seq(state) >= t {
                return Err((job, state));
            }
            if state & OVERFLOW != 0 {
                break;
            }
            // Rule 5: set the bit while the slot is still short of `t`; the advance that brings it
            // to `t` is later in this word's modification order and so sees the bit.
            match slot
                .state
                .compare_exchange(state, state | OVERFLOW, AcqRel, Acquire)
            {
                Ok(_) => break,
                Err(now) => state = now,
            }
        }
        // Tickets mostly park in increasing order: usually a push at the back.
        let at = parked.partition_point(|&(n, _)| n < t);
        parked.insert(at, (t, job));
        Ok(())
    }

    /// The slot of ticket `t` has just been advanced to `t` from a state with the OVERFLOW bit:
    /// take `t`'s work from the slot's overflow list, if parked there, and deliver it (Rules 5
    /// and 6).
    #[cold]
    fn settle(&self, t: u64) -> Next {
        let slot = self.slot(t);
        let job = {
            let mut parked = slot.parked.lock();
            // Usually at the front; an earlier lap's entry may still wait for its own settle
            // (Rule 6).
            let at = parked.partition_point(|&(n, _)| n < t);
            let job = match parked.get(at) {
                Some(&(n, _)) if n == t => parked.remove(at).map(|(_, job)| job),
                _ => None,
            };
            if parked.is_empty() {
                // Rule 5: no entry left for this slot (under the lock, so none can be added
                // meanwhile): the bit can go.
                slot.state.fetch_and(!OVERFLOW, Relaxed);
                if parked.capacity() > 64 {
                    // Give back what a burst of far-ahead tickets took (the list holds no work).
                    *parked = VecDeque::new();
                }
            }
            job
        };
        // Rule 7: the lock is released before any user code (or drop of it) can run.
        match job {
            None => Next::Done,
            Some(job) => {
                let state = slot.state.load(Acquire);
                self.deliver(t, job, state)
            }
        }
    }

    /// The calling thread holds the turn of ticket `t` (every earlier turn is done): pass the turn
    /// on, running stored turns for as long as there are any (Rule 2).
    fn publish_from(&self, mut t: u64) {
        'turns: loop {
            let slot = self.slot(t);
            // First guess: the slot is `t`'s, nothing stored, no overflow (Rule 1 says the slot
            // is `t`'s: turn `t - capacity` is done and turn `t` has not been reached).
            let mut state = t << SEQ_SHIFT;
            loop {
                if state & STORED == 0 {
                    // Pass: move the slot one lap on, handing the turn to `t`'s owner (Rule 3).
                    // Release: everything up to now happens-before the owner's turn (Rule 2).
                    // Acquire on failure: we may go on to take the stored closure (Rule 4).
                    match slot
                        .state
                        .compare_exchange(state, state + self.lap(), Release, Acquire)
                    {
                        Ok(_) if state & OVERFLOW == 0 => return,
                        Ok(_) => match self.settle(t + self.lap_tickets()) {
                            // Rule 6: the entry we settled was passed over meanwhile: its turn is
                            // ours.
                            Next::Run(job) => {
                                let next = t + self.lap_tickets();
                                self.run_job(next, job);
                                t = next + 1;
                                continue 'turns;
                            }
                            Next::Done => return,
                        },
                        Err(now) => {
                            invariant!(seq(now) == t, "Rule 1: only the turn holder advances");
                            state = now;
                        }
                    }
                } else {
                    // Take: turn `t` was stored; run it ourselves.
                    // SAFETY: Rule 4: STORED (seen with Acquire) makes `t`'s cell the turn
                    // holder's, which we are; its owner is done with it.
                    let job = self.cell(t).with_mut(|cell| unsafe { (*cell).take() });
                    // Advance one lap, clearing STORED; the add keeps the OVERFLOW bit, which a
                    // parking owner may set concurrently (Rule 5). Release: the owner two laps on
                    // writes this same cell, and it synchronizes only with this slot's advances,
                    // so this release is what orders our read before its write (Rule 4).
                    let before = slot.state.fetch_add(self.lap() - STORED, Release);
                    invariant!(seq(before) == t && before & STORED != 0, "Rule 4");
                    if before & OVERFLOW != 0 {
                        // Rule 1: turn `t` is not done, so turn `t + capacity` cannot have been
                        // passed yet: settling can only store.
                        let next = self.settle(t + self.lap_tickets());
                        invariant!(matches!(next, Next::Done), "Rule 1");
                    }
                    self.run_job(t, job);
                    t += 1;
                    continue 'turns;
                }
            }
        }
    }

    /// The capacity, in tickets.
    #[inline(always)]
    fn lap_tickets(&self) -> u64 {
        self.mask + 1
    }

    /// Runs a stored job (nothing for a skipped ticket); true if it panicked.
    fn run_job(&self, t: u64, job: Job) -> bool {
        match job {
            Some(job) => self.execute(t, job),
            None => false,
        }
    }

    /// Runs `f`, catching and reporting a panic; true if it panicked.
    #[inline(always)]
    fn execute<F: FnOnce()>(&self, t: u64, f: F) -> bool {
        match panic::catch_unwind(AssertUnwindSafe(f)) {
            Ok(()) => false,
            Err(payload) => {
                self.report(t, payload);
                true
            }
        }
    }

    /// Counts, logs and hands to the hook a panic caught in turn `t`.
    #[cold]
    #[inline(never)]
    pub(super) fn report(&self, t: u64, payload: Box<dyn Any + Send>) {
        self.panicked.fetch_add(1, Relaxed);
        tracing::error!(
            ticket = t,
            panic = payload_message(&*payload).unwrap_or("<non-string payload>"),
            "keyway sequencer: a turn panicked; the turns after it go on"
        );
        let hook = self.hook.read().clone();
        if let Some(hook) = hook {
            let report = TicketPanic {
                ticket: t,
                payload: &*payload,
            };
            if let Err(again) = panic::catch_unwind(AssertUnwindSafe(|| hook(&report))) {
                tracing::error!(ticket = t, "keyway sequencer: the panic hook panicked");
                // Dropping this payload could panic again; leak it instead.
                mem::forget(again);
            }
        }
        if let Err(again) = panic::catch_unwind(AssertUnwindSafe(move || drop(payload))) {
            mem::forget(again);
        }
    }
}

#[cfg(test)]
impl Inner {
    /// For tests, once every ticket is consumed: nothing parked, nothing stored, no flag left.
    pub(super) fn assert_clean(&self) {
        for slot in self.slots.iter() {
            let parked = slot.parked.lock();
            assert!(parked.is_empty(), "Rule 5: overflow lists drained");
            assert!(
                parked.capacity() <= 64,
                "emptied lists give their buffer back"
            );
            drop(parked);
            let state = slot.state.load(Relaxed);
            assert_eq!(state & (STORED | OVERFLOW), 0, "Rules 4, 5: slot clean");
        }
    }

    /// For tests: how many tickets' work waits in the overflow lists (Rule 5).
    #[cfg(not(loom))]
    pub(super) fn parked_len(&self) -> usize {
        self.slots.iter().map(|slot| slot.parked.lock().len()).sum()
    }
}
