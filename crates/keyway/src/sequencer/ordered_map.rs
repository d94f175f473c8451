//! An order-preserving parallel map on a [`Sequencer`]: items are processed in parallel by
//! whatever runs the tasks, and their outputs reach one sink in input order, each handed over by
//! the thread that finishes the turn before it.

use std::fmt;
use std::num::NonZeroUsize;
use std::panic::{self, AssertUnwindSafe};

use parking_lot::{Condvar, Mutex};

use crate::loom::cell::UnsafeCell;
use crate::loom::sync::Arc;

use super::{Sequencer, SequencerError};

/// A unit of work for an executor: what [`OrderedMap::submit`] hands to its `execute` closure.
///
/// ```
/// use keyway::{OrderedMap, MapTask};
/// use std::sync::mpsc;
///
/// let (tx, rx) = mpsc::channel();
/// let map = OrderedMap::new(4, |x: i32| -x, move |y| tx.send(y).unwrap()).unwrap();
/// let mut queue: Vec<MapTask> = Vec::new();
/// map.submit(1, |task| queue.push(task));
/// map.submit(2, |task| queue.push(task));
/// assert!(rx.try_recv().is_err(), "nothing runs until the executor runs the tasks");
/// while let Some(task) = queue.pop() {
///     task(); // last submitted first
/// }
/// assert_eq!(rx.try_iter().collect::<Vec<_>>(), [-1, -2]);
/// ```
pub type MapTask = Box<dyn FnOnce() + Send + 'static>;

/// An order-preserving parallel map: `f` runs on each item in parallel, and `sink` receives the
/// outputs one at a time, in the order the items were submitted.
///
/// Items are taken in the order of the calls to [`submit`](OrderedMap::submit) (or
/// [`task`](OrderedMap::task)); each call takes a ticket of the map's [`Sequencer`] and returns at
/// once. The task runs `f(item)` wherever the executor puts it, then hands the output to the sink
/// in the item's turn: on the same thread if every earlier output is through, otherwise on the
/// thread that finishes the output before it. There is no consumer thread and nobody waits. The
/// sink is therefore called from many threads, but never concurrently and always in input order,
/// so it needs `Send` but not `Sync`.
///
/// A panic in `f` or in `sink` is caught and reported like any turn's panic
/// ([`Sequencer::set_panic_hook`], [`Sequencer::panicked`]); that item's output is skipped and
/// the items after it go on. The executor never sees the panic.
///
/// # Examples
///
/// Four items on four threads, each slower than the next; the sink still sees input order:
///
/// ```
/// use keyway::OrderedMap;
/// use std::sync::{Arc, Mutex};
/// use std::time::Duration;
///
/// let out = Arc::new(Mutex::new(Vec::new()));
/// let sink_out = Arc::clone(&out);
/// let map = OrderedMap::new(
///     16,
///     |ms: u64| {
///         std::thread::sleep(Duration::from_millis(ms)); // the work
///         ms * 10
///     },
///     move |x| sink_out.lock().unwrap().push(x),
/// )
/// .unwrap();
/// let mut threads = Vec::new();
/// for ms in [40, 30, 20, 10] {
///     map.submit(ms, |task| threads.push(std::thread::spawn(task)));
/// }
/// # for t in threads { t.join().unwrap(); }
/// assert_eq!(*out.lock().unwrap(), [400, 300, 200, 100]);
/// ```
///
/// On a keyway [`Pool`](crate::Pool): its workers process the items in parallel, earlier items
/// taking longer, and the sink still sees input order:
///
/// ```
/// use keyway::{OrderedMap, Pool};
/// use std::sync::mpsc;
/// use std::time::Duration;
///
/// let pool = Pool::new().unwrap();
/// let (tx, rx) = mpsc::channel();
/// let map = OrderedMap::new(
///     8,
///     |n: u64| {
///         std::thread::sleep(Duration::from_micros(20 * (50 - n))); // the work
///         n * n
///     },
///     move |square| tx.send(square).unwrap(),
/// )
/// .unwrap();
/// for n in 0..50 {
///     map.submit(n, |task| pool.execute(task).unwrap());
/// }
/// pool.shutdown(); // waits until every task has run
/// let squares: Vec<u64> = rx.try_iter().collect();
/// assert_eq!(squares, (0..50).map(|n| n * n).collect::<Vec<_>>());
/// ```
pub struct OrderedMap<F, S> {
    sequencer: Sequencer,
    shared: Arc<Shared<F, S>>,
    flight: std::sync::Arc<Flight>,
}

/// Items in flight: taken (a ticket issued) and whose task still holds the map's state — it has
/// not run, or its output has not been through the sink yet. Only blocking callers wait here
/// (`finish`, and `task` at the bound); it is never part of a turn.
struct Flight {
    count: Mutex<usize>,
    max: std::sync::atomic::AtomicUsize,
    changed: Condvar,
}

impl Flight {
    /// Waits until fewer than the bound are in flight, then counts one more.
    fn enter(&self) {
        let mut count = self.count.lock();
        while *count >= self.max.load(std::sync::atomic::Ordering::Relaxed) {
            self.changed.wait(&mut count);
        }
        *count += 1;
    }

    fn leave(&self) {
        let mut count = self.count.lock();
        *count -= 1;
        self.changed.notify_all();
    }

    fn wait_empty(&self) {
        let mut count = self.count.lock();
        while *count > 0 {
            self.changed.wait(&mut count);
        }
    }
}

/// An item's hold on the map's state: released when the item's task is done with it, on
/// whichever thread that happens. Fields drop in declaration order: the state first, then the
/// count, so `finish` never sees an empty flight while an item still holds the state.
struct InFlight<F, S> {
    shared: Arc<Shared<F, S>>,
    _leave: Leave,
}

/// Leaves the flight when dropped.
struct Leave(std::sync::Arc<Flight>);

impl Drop for Leave {
    fn drop(&mut self) {
        self.0.leave();
    }
}

struct Shared<F, S> {
    f: F,
    /// Used only inside turns of `sequencer`, which never overlap (sequencer Rule 2).
    sink: UnsafeCell<S>,
}

// SAFETY: `f` is `Sync` (required below); `sink` is only touched inside the map's sequencer turns,
// one at a time and each happening-before the next (Rule 2 in the sequencer's README), so it is
// never accessed from two threads at once and only needs `Send`.
unsafe impl<F: Sync, S: Send> Sync for Shared<F, S> {}

impl<F, S> OrderedMap<F, S> {
    /// Creates an ordered map calling `f` on every item and `sink` on every output, in input
    /// order, over a sequencer of the given capacity (see [`Sequencer::new`]).
    ///
    /// # Errors
    ///
    /// The same as [`Sequencer::new`]: a zero or too large capacity.
    ///
    /// ```
    /// use keyway::{OrderedMap, SequencerError};
    ///
    /// let made = OrderedMap::new(0, |x: u32| x, |_: u32| {});
    /// assert!(matches!(made, Err(SequencerError::ZeroCapacity)));
    /// ```
    pub fn new(capacity: usize, f: F, sink: S) -> Result<Self, SequencerError> {
        Ok(OrderedMap {
            sequencer: Sequencer::new(capacity)?,
            shared: Arc::new(Shared {
                f,
                sink: UnsafeCell::new(sink),
            }),
            flight: std::sync::Arc::new(Flight {
                count: Mutex::new(0),
                max: std::sync::atomic::AtomicUsize::new(usize::MAX),
                changed: Condvar::new(),
            }),
        })
    }

    /// Bounds the items in flight (taken, and not yet through the sink or dropped) to
    /// `max`: [`task`](OrderedMap::task) and [`submit`](OrderedMap::submit) then block while
    /// `max` items are in flight, so a fast producer cannot run ahead of a slow sink without
    /// limit. Default: unbounded.
    ///
    /// The items in flight must be able to finish without the blocked caller: do not submit
    /// from the only thread that runs the map's tasks.
    ///
    /// ```
    /// use keyway::OrderedMap;
    /// use std::num::NonZeroUsize;
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use std::sync::Arc;
    ///
    /// let most = Arc::new(AtomicUsize::new(0));
    /// let map = Arc::new(
    ///     OrderedMap::new(16, |x: u32| x, |_: u32| {})
    ///         .unwrap()
    ///         .with_max_in_flight(NonZeroUsize::new(3).unwrap()),
    /// );
    /// let pool = keyway::Pool::new().unwrap();
    /// for i in 0..100 {
    ///     map.submit(i, |task| pool.execute(task).unwrap());
    ///     most.fetch_max(map.in_flight(), Ordering::Relaxed);
    /// }
    /// assert!(most.load(Ordering::Relaxed) <= 3);
    /// ```
    pub fn with_max_in_flight(self, max: NonZeroUsize) -> Self {
        self.flight
            .max
            .store(max.get(), std::sync::atomic::Ordering::Relaxed);
        self
    }

    /// How many items are in flight now: taken, and not yet through the sink (or dropped).
    ///
    /// ```
    /// use keyway::OrderedMap;
    ///
    /// let map = OrderedMap::new(4, |x: u32| x, |_: u32| {}).unwrap();
    /// let task = map.task(1);
    /// assert_eq!(map.in_flight(), 1);
    /// task();
    /// assert_eq!(map.in_flight(), 0);
    /// ```
    pub fn in_flight(&self) -> usize {
        *self.flight.count.lock()
    }

    /// Waits until every item taken so far is through the sink (or was dropped unrun, or
    /// panicked), then returns the sink: for a file, a buffer or a channel to close.
    ///
    /// It waits for every task [`task`](OrderedMap::task) or [`submit`](OrderedMap::submit)
    /// made: one that is kept but never run nor dropped makes it wait for ever.
    ///
    /// ```
    /// use keyway::OrderedMap;
    /// use std::sync::mpsc;
    ///
    /// let pool = keyway::Pool::new().unwrap();
    /// let (tx, rx) = mpsc::channel();
    /// let map = OrderedMap::new(8, |n: u64| n * n, move |sq| tx.send(sq).unwrap()).unwrap();
    /// for n in 0..10 {
    ///     map.submit(n, |task| pool.execute(task).unwrap());
    /// }
    /// let sink = map.finish(); // every square went through the sink
    /// drop(sink); // drops the sender: the channel ends
    /// assert_eq!(rx.iter().collect::<Vec<_>>(), (0..10).map(|n| n * n).collect::<Vec<_>>());
    /// ```
    pub fn finish(self) -> S {
        self.flight.wait_empty();
        // No item holds the state any more (each `InFlight` drops its `Arc` before it leaves).
        match Arc::try_unwrap(self.shared) {
            Ok(shared) => shared.sink.into_inner(),
            Err(_) => unreachable!("an item left the flight while still holding the map"),
        }
    }

    /// The sequencer that orders the outputs: for its panic hook and counters.
    ///
    /// ```
    /// use keyway::OrderedMap;
    ///
    /// let map = OrderedMap::new(4, |x: u32| 100 / x, |_: u32| {}).unwrap();
    /// map.submit(0, |task| task()); // divides by zero: reported, skipped
    /// map.submit(5, |task| task());
    /// assert_eq!(map.sequencer().panicked(), 1);
    /// assert_eq!(map.sequencer().issued(), 2);
    /// ```
    pub fn sequencer(&self) -> &Sequencer {
        &self.sequencer
    }

    /// Takes `item`'s place in the output order now, and returns the task that processes it and
    /// hands its output to the sink in that order. Run the task anywhere, once; dropping it
    /// unrun skips the item. Unlike [`submit`](OrderedMap::submit) this does not box the task,
    /// for an executor that takes any `FnOnce() + Send + 'static`.
    ///
    /// ```
    /// use keyway::OrderedMap;
    /// use std::sync::mpsc;
    ///
    /// let (tx, rx) = mpsc::channel();
    /// let map = OrderedMap::new(4, |x: u32| x + 1, move |y| tx.send(y).unwrap()).unwrap();
    /// let first = map.task(1);
    /// let second = map.task(2);
    /// second(); // processed first, output held back
    /// assert!(rx.try_recv().is_err());
    /// first();
    /// assert_eq!(rx.try_iter().collect::<Vec<_>>(), [2, 3]);
    /// ```
    pub fn task<I, O>(&self, item: I) -> impl FnOnce() + Send + 'static + use<I, O, F, S>
    where
        F: Fn(I) -> O + Send + Sync + 'static,
        S: FnMut(O) + Send + 'static,
        I: Send + 'static,
        O: Send + 'static,
    {
        self.flight.enter();
        let ticket = self.sequencer.next_ticket();
        let held = InFlight {
            shared: Arc::clone(&self.shared),
            _leave: Leave(std::sync::Arc::clone(&self.flight)),
        };
        move || {
            // Whole, not just the fields used (closures capture disjoint fields): the hold must
            // travel with the task, and into its turn.
            let held = held;
            match panic::catch_unwind(AssertUnwindSafe(|| (held.shared.f)(item))) {
                Ok(output) => {
                    let _ = ticket.run(move || {
                        let held = held;
                        // SAFETY: we are inside a turn of this map's sequencer; turns never
                        // overlap and each happens-before the next (sequencer Rule 2), so this
                        // is the only access to the sink now.
                        held.shared.sink.with_mut(|sink| unsafe { (*sink)(output) });
                    });
                }
                Err(payload) => {
                    if let Some(inner) = &ticket.inner {
                        inner.report(ticket.number, payload);
                    }
                    ticket.skip();
                }
            }
        }
    }

    /// Takes `item`'s place in the output order now and hands the task that processes it to
    /// `execute` (a thread pool's `execute`, `std::thread::spawn`, …).
    ///
    /// ```
    /// use keyway::OrderedMap;
    /// use std::sync::mpsc;
    ///
    /// let (tx, rx) = mpsc::channel();
    /// let map = OrderedMap::new(8, str::len, move |n| tx.send(n).unwrap()).unwrap();
    /// let mut handles = Vec::new();
    /// for word in ["a", "bb", "ccc"] {
    ///     map.submit(word, |task| handles.push(std::thread::spawn(task)));
    /// }
    /// # for h in handles { h.join().unwrap(); }
    /// assert_eq!(rx.iter().take(3).collect::<Vec<_>>(), [1, 2, 3]);
    /// ```
    pub fn submit<I, O, E>(&self, item: I, execute: E)
    where
        F: Fn(I) -> O + Send + Sync + 'static,
        S: FnMut(O) + Send + 'static,
        I: Send + 'static,
        O: Send + 'static,
        E: FnOnce(MapTask),
    {
        execute(Box::new(self.task(item)));
    }
}

impl<F, S> fmt::Debug for OrderedMap<F, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OrderedMap")
            .field("sequencer", &self.sequencer)
            .finish_non_exhaustive()
    }
}
