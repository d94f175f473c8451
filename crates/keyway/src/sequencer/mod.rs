//! The sequencer: work done in parallel, published in ticket order by whichever thread finishes
//! the turn before it, with no consumer thread (Ullink/Itiviti's OrderedScheduler).
//!
//! The top layer, beside `schedule` and `strategy`: [`OrderedMap`] runs on the pool through its
//! public face; the sequencer itself needs no pool.
//!
//! A [`Sequencer`] hands out [`Ticket`]s in order. Each ticket is one *turn*. The holder of a
//! ticket does its work anywhere, on any thread, then calls [`Ticket::run`] with the part that
//! must happen in ticket order (writing the output, say):
//!
//! - if every earlier turn is done, the closure runs at once on the calling thread, and that thread
//!   then runs any later turns that were left waiting for it;
//! - otherwise the closure is stored and `run` returns at once: the thread that finishes the turn
//!   before it will run it. Nobody waits, nobody spins, and there is no dedicated thread.
//!
//! A ticket dropped without running is skipped, a panicking closure is reported
//! ([`Sequencer::set_panic_hook`], [`Sequencer::panicked`], `tracing::error!`) and the turns after
//! it go on, and a ticket any distance ahead of the current turn is neither lost nor a cause of
//! deadlock. [`OrderedMap`] builds an order-preserving parallel map on top.
//!
//! # Protocol
//!
//! The hand-off between "I stored my closure" and "the thread before me finished its turn" is
//! described, with numbered rules, in `README.md` beside this file, and implemented in `ring.rs`;
//! comments in the code cite the rules as *Rule N*. In short: each turn is decided by exactly one
//! compare-and-swap on its slot's state word, between the ticket's owner (*store*) and the thread
//! finishing the turn before (*pass*); whichever wins, the loser knows what to do, so a late
//! ticket is never lost and never stalls. Tickets a lap or more ahead of the ring go to their
//! slot's overflow list, which is settled when the ring reaches them.
//!
//! The fast path (it is this ticket's turn, nothing stored behind it) is one atomic load, the
//! closure, one compare-and-swap on the next slot and the ticket's reference-count decrement: no
//! lock, no allocation. A closure is boxed only when it has to be stored.

mod ordered_map;
mod panic;
mod ring;

#[cfg(all(test, not(loom)))]
mod test;

#[cfg(all(test, loom))]
mod loom_sequencer;

pub use self::ordered_map::{MapTask, OrderedMap};
pub use self::panic::TicketPanic;

use std::fmt;

use crate::loom::sync::atomic::Ordering::Relaxed;
use crate::loom::sync::Arc;

use self::ring::{Inner, SEQ_SHIFT};

/// Hands out [`Ticket`]s and runs their closures in ticket order.
///
/// Cloning a `Sequencer` is cheap and gives another handle to the same ticket sequence.
///
/// `capacity` is the size of the lock-free ring of turns: a ticket up to `capacity` turns ahead of
/// the current turn that arrives early stores its closure in the ring without taking a lock;
/// farther-ahead tickets go to a mutex-protected overflow list of their slot, so they cost more
/// but are never lost nor stall anything. The capacity is rounded up to a power of two and each
/// slot takes a cache line pair (128 bytes) to avoid false sharing between neighbouring turns.
///
/// # Examples
///
/// Output happens in ticket order, whichever thread finishes first:
///
/// ```
/// use keyway::Sequencer;
/// use std::sync::{Arc, Mutex};
///
/// let sequencer = Sequencer::new(16).unwrap();
/// let out = Arc::new(Mutex::new(Vec::new()));
/// let tickets: Vec<_> = (0..4).map(|_| sequencer.next_ticket()).collect();
/// // Run them backwards from four threads: turns 3, 2 and 1 are stored until turn 0 runs.
/// let threads: Vec<_> = tickets
///     .into_iter()
///     .rev()
///     .map(|ticket| {
///         let out = Arc::clone(&out);
///         std::thread::spawn(move || {
///             let n = ticket.number();
///             ticket.run(move || out.lock().unwrap().push(n));
///         })
///     })
///     .collect();
/// # for t in threads { t.join().unwrap(); }
/// assert_eq!(*out.lock().unwrap(), [0, 1, 2, 3]);
/// ```
#[derive(Clone)]
pub struct Sequencer {
    inner: Arc<Inner>,
}

/// One turn in a [`Sequencer`]'s order.
///
/// Consume it with [`run`](Ticket::run) (or [`skip`](Ticket::skip)); dropping it skips the turn,
/// so a ticket lost to an early return or a panic never holds up the turns after it. A ticket is
/// `Send`: take it on one thread, run it on another.
///
/// # Examples
///
/// ```
/// use keyway::{RunOutcome, Sequencer};
///
/// let sequencer = Sequencer::new(4).unwrap();
/// let first = sequencer.next_ticket();
/// let second = sequencer.next_ticket();
/// assert_eq!((first.number(), second.number()), (0, 1));
/// // Not yet its turn: stored, and run by whoever finishes turn 0.
/// assert_eq!(second.run(|| println!("second")), RunOutcome::Deferred);
/// assert_eq!(first.run(|| println!("first")), RunOutcome::Ran);
/// ```
///
/// The closure must be `Send + 'static`, since another thread may run it:
///
/// ```compile_fail,E0277
/// use keyway::Sequencer;
/// use std::rc::Rc;
///
/// let sequencer = Sequencer::new(4).unwrap();
/// let local = Rc::new(5);
/// sequencer.next_ticket().run(move || drop(local));
/// ```
#[must_use = "dropping a ticket skips its turn; call `run` to do work in order"]
pub struct Ticket {
    /// `Some` until the ticket is consumed by `run`, `skip` or `drop`.
    inner: Option<Arc<Inner>>,
    number: u64,
}

/// What [`Ticket::run`] did with its closure.
///
/// Every outcome means the closure will run, or has run, exactly once, in ticket order. Ignoring
/// it is fine: it tells where the work happened, not whether it happens.
///
/// # Examples
///
/// ```
/// use keyway::{RunOutcome, Sequencer};
///
/// let sequencer = Sequencer::new(2).unwrap();
/// assert_eq!(sequencer.next_ticket().run(|| {}), RunOutcome::Ran);
/// assert_eq!(sequencer.next_ticket().run(|| panic!("boom")), RunOutcome::Panicked);
/// assert_eq!(sequencer.panicked(), 1);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RunOutcome {
    /// It was the ticket's turn: the closure ran on the calling thread before `run` returned (and
    /// the thread then ran any later turns that were stored waiting for it).
    Ran,
    /// As [`Ran`](RunOutcome::Ran), but the closure panicked. The panic was caught and reported
    /// and the turns after it went on.
    Panicked,
    /// Earlier turns were not done: the closure was stored and will be run by the thread that
    /// finishes the turn before it.
    Deferred,
}

impl RunOutcome {
    /// Whether the closure was stored for another thread to run.
    ///
    /// ```
    /// use keyway::Sequencer;
    ///
    /// let sequencer = Sequencer::new(2).unwrap();
    /// let (a, b) = (sequencer.next_ticket(), sequencer.next_ticket());
    /// assert!(b.run(|| {}).is_deferred());
    /// assert!(!a.run(|| {}).is_deferred());
    /// ```
    pub fn is_deferred(self) -> bool {
        self == RunOutcome::Deferred
    }
}

/// Why a [`Sequencer`] (or an [`OrderedMap`]) could not be built.
///
/// # Examples
///
/// ```
/// use keyway::{Sequencer, SequencerError};
///
/// assert_eq!(Sequencer::new(0).unwrap_err(), SequencerError::ZeroCapacity);
/// assert!(matches!(
///     Sequencer::new(usize::MAX),
///     Err(SequencerError::CapacityTooLarge { .. })
/// ));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SequencerError {
    /// A capacity of zero was asked for; the ring needs at least one slot.
    ZeroCapacity,
    /// The capacity asked for is above [`Sequencer::MAX_CAPACITY`].
    CapacityTooLarge {
        /// The capacity asked for.
        requested: usize,
        /// The largest capacity accepted.
        max: usize,
    },
}

impl fmt::Display for SequencerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SequencerError::ZeroCapacity => f.write_str("sequencer capacity must be at least 1"),
            SequencerError::CapacityTooLarge { requested, max } => write!(
                f,
                "sequencer capacity {requested} is above the maximum of {max}"
            ),
        }
    }
}

impl std::error::Error for SequencerError {}

impl Sequencer {
    /// The largest capacity [`Sequencer::new`] accepts (2<sup>20</sup> slots, 128 MiB of ring).
    pub const MAX_CAPACITY: usize = 1 << 20;

    /// The capacity used by [`Sequencer::default`].
    pub const DEFAULT_CAPACITY: usize = 1024;

    /// Creates a sequencer whose lock-free ring holds `capacity` turns, rounded up to a power of
    /// two.
    ///
    /// Tickets farther ahead than that still work (see the type's docs); the capacity only
    /// decides which early tickets take the lock-free path. It is a typed error rather than a
    /// `NonZeroUsize` so that configuration read at run time can be passed straight in.
    ///
    /// # Errors
    ///
    /// [`SequencerError::ZeroCapacity`] for 0, [`SequencerError::CapacityTooLarge`] above
    /// [`Sequencer::MAX_CAPACITY`].
    ///
    /// # Examples
    ///
    /// ```
    /// use keyway::Sequencer;
    ///
    /// assert_eq!(Sequencer::new(100).unwrap().capacity(), 128);
    /// assert!(Sequencer::new(0).is_err());
    /// ```
    pub fn new(capacity: usize) -> Result<Sequencer, SequencerError> {
        if capacity == 0 {
            return Err(SequencerError::ZeroCapacity);
        }
        if capacity > Self::MAX_CAPACITY {
            return Err(SequencerError::CapacityTooLarge {
                requested: capacity,
                max: Self::MAX_CAPACITY,
            });
        }
        Ok(Sequencer {
            inner: Arc::new(Inner::new(capacity.next_power_of_two())),
        })
    }

    /// Takes the next ticket. Tickets are numbered 0, 1, 2, … in the order of the calls, across
    /// all threads and all clones of this sequencer.
    ///
    /// # Examples
    ///
    /// ```
    /// use keyway::Sequencer;
    ///
    /// let sequencer = Sequencer::new(8).unwrap();
    /// let other = sequencer.clone();
    /// let a = sequencer.next_ticket();
    /// let b = other.next_ticket();
    /// assert_eq!(b.number(), a.number() + 1);
    /// ```
    pub fn next_ticket(&self) -> Ticket {
        // Order between tickets comes from this counter's modification order; the turns
        // themselves are ordered by the slots (Rule 2), so no stronger ordering is needed.
        let number = self.inner.next.fetch_add(1, Relaxed);
        debug_assert!(number < 1 << (64 - SEQ_SHIFT), "ticket numbers exhausted");
        Ticket {
            inner: Some(Arc::clone(&self.inner)),
            number,
        }
    }

    /// The ring's capacity: the requested capacity rounded up to a power of two.
    ///
    /// ```
    /// use keyway::Sequencer;
    ///
    /// assert_eq!(Sequencer::new(4).unwrap().capacity(), 4);
    /// assert_eq!(Sequencer::new(5).unwrap().capacity(), 8);
    /// ```
    pub fn capacity(&self) -> usize {
        self.inner.capacity()
    }

    /// How many tickets have been handed out so far.
    ///
    /// ```
    /// use keyway::Sequencer;
    ///
    /// let sequencer = Sequencer::new(4).unwrap();
    /// let _a = sequencer.next_ticket();
    /// let _b = sequencer.next_ticket();
    /// assert_eq!(sequencer.issued(), 2);
    /// ```
    pub fn issued(&self) -> u64 {
        self.inner.next.load(Relaxed)
    }

    /// How many turns have panicked so far (each panic is caught, counted, logged with
    /// `tracing::error!` and passed to the panic hook; the turns after it go on).
    ///
    /// ```
    /// use keyway::Sequencer;
    ///
    /// let sequencer = Sequencer::new(4).unwrap();
    /// let _ = sequencer.next_ticket().run(|| panic!("one"));
    /// let _ = sequencer.next_ticket().run(|| {});
    /// assert_eq!(sequencer.panicked(), 1);
    /// ```
    pub fn panicked(&self) -> u64 {
        self.inner.panicked.load(Relaxed)
    }

    /// Sets the hook called, on the thread that ran the turn, with every panic caught in a turn
    /// (replacing any earlier hook). A panic inside the hook is caught and logged too.
    ///
    /// # Examples
    ///
    /// ```
    /// use keyway::Sequencer;
    /// use std::sync::atomic::{AtomicU64, Ordering};
    /// use std::sync::Arc;
    ///
    /// let sequencer = Sequencer::new(4).unwrap();
    /// let bad = Arc::new(AtomicU64::new(u64::MAX));
    /// let bad2 = Arc::clone(&bad);
    /// sequencer.set_panic_hook(move |report| bad2.store(report.ticket(), Ordering::Relaxed));
    /// let first = sequencer.next_ticket();
    /// let second = sequencer.next_ticket();
    /// let _ = second.run(|| panic!("stored, then run by the first ticket's thread"));
    /// let _ = first.run(|| {});
    /// assert_eq!(bad.load(Ordering::Relaxed), 1);
    /// ```
    pub fn set_panic_hook<H>(&self, hook: H)
    where
        H: Fn(&TicketPanic<'_>) + Send + Sync + 'static,
    {
        *self.inner.hook.write() = Some(std::sync::Arc::new(hook));
    }
}

impl Default for Sequencer {
    /// A sequencer of [`Sequencer::DEFAULT_CAPACITY`] turns.
    ///
    /// ```
    /// use keyway::Sequencer;
    ///
    /// assert_eq!(Sequencer::default().capacity(), Sequencer::DEFAULT_CAPACITY);
    /// ```
    fn default() -> Self {
        match Sequencer::new(Self::DEFAULT_CAPACITY) {
            Ok(sequencer) => sequencer,
            Err(_) => unreachable!("the default capacity is valid"),
        }
    }
}

impl fmt::Debug for Sequencer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sequencer")
            .field("capacity", &self.capacity())
            .field("issued", &self.issued())
            .field("panicked", &self.panicked())
            .finish()
    }
}

impl Ticket {
    /// This ticket's place in the order: 0 for the first ticket of the sequencer, then 1, 2, ….
    ///
    /// ```
    /// use keyway::Sequencer;
    ///
    /// let sequencer = Sequencer::new(4).unwrap();
    /// assert_eq!(sequencer.next_ticket().number(), 0);
    /// assert_eq!(sequencer.next_ticket().number(), 1);
    /// ```
    pub fn number(&self) -> u64 {
        self.number
    }

    /// Runs `f` in this ticket's turn: at once on this thread if every earlier turn is done,
    /// otherwise later, on the thread that finishes the turn before this one. Never blocks.
    ///
    /// When `f` runs here, this thread then also runs the later turns that were stored waiting
    /// for it, so `run` may take longer than `f` alone. A panic in `f` (or in a later closure this
    /// thread runs) is caught and reported; it does not stop the turns after it. `f` is boxed only
    /// when it has to be stored.
    ///
    /// # Examples
    ///
    /// ```
    /// use keyway::{RunOutcome, Sequencer};
    /// use std::sync::{Arc, Mutex};
    ///
    /// let sequencer = Sequencer::new(4).unwrap();
    /// let log = Arc::new(Mutex::new(Vec::new()));
    /// let (a, b, c) = (sequencer.next_ticket(), sequencer.next_ticket(), sequencer.next_ticket());
    /// let l = Arc::clone(&log);
    /// assert_eq!(c.run(move || l.lock().unwrap().push('c')), RunOutcome::Deferred);
    /// let l = Arc::clone(&log);
    /// assert_eq!(a.run(move || l.lock().unwrap().push('a')), RunOutcome::Ran);
    /// // Turn 1 is not done, so turn 2 still waits.
    /// assert_eq!(*log.lock().unwrap(), ['a']);
    /// let l = Arc::clone(&log);
    /// assert_eq!(b.run(move || l.lock().unwrap().push('b')), RunOutcome::Ran);
    /// // This thread ran `b`, then the stored `c`.
    /// assert_eq!(*log.lock().unwrap(), ['a', 'b', 'c']);
    /// ```
    pub fn run<F>(mut self, f: F) -> RunOutcome
    where
        F: FnOnce() + Send + 'static,
    {
        match self.inner.take() {
            Some(inner) => inner.arrive(self.number, Some(f)),
            None => unreachable!("a ticket holds its sequencer until it is consumed"),
        }
    }

    /// Gives up this ticket's turn: the turns after it do not wait for it. Same as dropping the
    /// ticket, but says so.
    ///
    /// ```
    /// use keyway::{RunOutcome, Sequencer};
    ///
    /// let sequencer = Sequencer::new(4).unwrap();
    /// let (a, b) = (sequencer.next_ticket(), sequencer.next_ticket());
    /// a.skip();
    /// assert_eq!(b.run(|| {}), RunOutcome::Ran);
    /// ```
    pub fn skip(self) {
        drop(self);
    }
}

impl Drop for Ticket {
    /// Skips the turn: the ticket is handed in with no work (this thread may then run later
    /// stored turns, exactly as [`Ticket::run`] would).
    fn drop(&mut self) {
        if let Some(inner) = self.inner.take() {
            let _ = inner.arrive::<fn()>(self.number, None);
        }
    }
}

impl fmt::Debug for Ticket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ticket")
            .field("number", &self.number)
            .finish_non_exhaustive()
    }
}
