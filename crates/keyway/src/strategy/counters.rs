//! How many tasks went each way.
//!
//! Most counters are written only by the thread that owns production, so they are bumped with a
//! plain load and store, no read-modify-write (README.md, Rule 10): consecutive owners are
//! ordered by the state word's acquire/release transitions (Rule 2). The two counters bumped by
//! threads that do not own production (execute-produce-consume, panics) use `fetch_add`.

use std::fmt;

use crossbeam_utils::CachePadded;

use crate::loom::sync::atomic::AtomicU64;
use crate::loom::sync::atomic::Ordering::Relaxed;

/// The four ways a produced task can be consumed (Jetty's sub-strategies).
///
/// [`AdaptiveStrategy`](crate::AdaptiveStrategy)'s table says which mode a task gets and why;
/// [`ModeCounts`] says how often each was taken.
///
/// ```
/// use keyway::ConsumeMode;
/// assert_eq!(ConsumeMode::ExecuteProduceConsume.abbreviation(), "EPC");
/// assert_eq!(ConsumeMode::ALL.map(ConsumeMode::abbreviation), ["PC", "EPC", "PIC", "PEC"]);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ConsumeMode {
    /// PC: the producing thread runs the task in place, then goes on producing. For
    /// [`NonBlocking`](crate::InvocationType::NonBlocking) tasks.
    ProduceConsume,
    /// EPC ("eat what you kill"): production was handed to an idle reserved thread
    /// ([`Executor::try_execute`](crate::Executor::try_execute)); the thread that produced the
    /// task runs it in place, with a hot cache, free to block.
    ExecuteProduceConsume,
    /// PIC: the producing thread runs an [`Either`](crate::InvocationType::Either) task in place
    /// in non-blocking mode, then goes on producing.
    ProduceInvokeConsume,
    /// PEC: the task goes to the executor ([`Executor::execute`](crate::Executor::execute)) and
    /// the producing thread goes on producing.
    ProduceExecuteConsume,
}

impl ConsumeMode {
    /// Every mode, in the order PC, EPC, PIC, PEC.
    ///
    /// ```
    /// assert_eq!(keyway::ConsumeMode::ALL.len(), 4);
    /// ```
    pub const ALL: [ConsumeMode; 4] = [
        ConsumeMode::ProduceConsume,
        ConsumeMode::ExecuteProduceConsume,
        ConsumeMode::ProduceInvokeConsume,
        ConsumeMode::ProduceExecuteConsume,
    ];

    /// The short name Jetty uses: `"PC"`, `"EPC"`, `"PIC"` or `"PEC"`.
    ///
    /// ```
    /// assert_eq!(keyway::ConsumeMode::ProduceInvokeConsume.abbreviation(), "PIC");
    /// ```
    pub fn abbreviation(self) -> &'static str {
        match self {
            ConsumeMode::ProduceConsume => "PC",
            ConsumeMode::ExecuteProduceConsume => "EPC",
            ConsumeMode::ProduceInvokeConsume => "PIC",
            ConsumeMode::ProduceExecuteConsume => "PEC",
        }
    }
}

impl fmt::Display for ConsumeMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.abbreviation())
    }
}

/// A snapshot of an [`AdaptiveStrategy`](crate::AdaptiveStrategy)'s counters.
///
/// Each produced task is counted once, in the mode chosen for it, before it runs. Read while
/// production goes on, the numbers are each exact but not taken at one instant.
///
/// ```
/// use keyway::{AdaptiveStrategy, DeclaredTask};
/// // keyway's pool is an `Executor`; with no reserved threads it never hands production off.
/// let pool = keyway::Pool::builder().reserved_threads(0).build().unwrap();
/// let mut left = 3;
/// let producer = move || {
///     left -= 1;
///     (left >= 0).then(|| DeclaredTask::non_blocking(|| ()))
/// };
/// let strategy = AdaptiveStrategy::new(producer, pool);
/// strategy.produce();
/// let counts = strategy.counts();
/// assert_eq!(counts.produce_consume, 3);
/// assert_eq!(counts.total(), 3);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ModeCounts {
    /// PC: non-blocking tasks run in place by the producing thread.
    pub produce_consume: u64,
    /// EPC: tasks run in place by the thread that produced them after it handed production to a
    /// reserved thread.
    pub execute_produce_consume: u64,
    /// PIC: `Either` tasks run in place in non-blocking mode.
    pub produce_invoke_consume: u64,
    /// PEC: tasks given to the executor. Includes the `refused` ones.
    pub produce_execute_consume: u64,
    /// PEC tasks the executor refused (shut down or full). The producing thread holds each one
    /// and offers it again; one still refused when the producer is empty runs in place, after
    /// production was released, so that no task is lost.
    pub refused: u64,
    /// Tasks run in place (PC, EPC, PIC or refused) that panicked. The panic was caught and
    /// reported with `tracing::error!`; production went on.
    pub panicked: u64,
}

impl ModeCounts {
    /// The count for one mode.
    ///
    /// ```
    /// let counts = keyway::ModeCounts { produce_invoke_consume: 4, ..Default::default() };
    /// assert_eq!(counts.get(keyway::ConsumeMode::ProduceInvokeConsume), 4);
    /// ```
    pub fn get(&self, mode: ConsumeMode) -> u64 {
        match mode {
            ConsumeMode::ProduceConsume => self.produce_consume,
            ConsumeMode::ExecuteProduceConsume => self.execute_produce_consume,
            ConsumeMode::ProduceInvokeConsume => self.produce_invoke_consume,
            ConsumeMode::ProduceExecuteConsume => self.produce_execute_consume,
        }
    }

    /// Tasks produced and consumed (or given to the executor) so far: the sum of the four modes.
    ///
    /// ```
    /// let counts = keyway::ModeCounts { produce_consume: 2, produce_execute_consume: 1, ..Default::default() };
    /// assert_eq!(counts.total(), 3);
    /// ```
    pub fn total(&self) -> u64 {
        ConsumeMode::ALL.iter().map(|&mode| self.get(mode)).sum()
    }
}

impl fmt::Display for ModeCounts {
    /// `PC 10 EPC 2 PIC 0 PEC 5 (refused 0, panicked 0)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for mode in ConsumeMode::ALL {
            write!(f, "{} {} ", mode, self.get(mode))?;
        }
        write!(f, "(refused {}, panicked {})", self.refused, self.panicked)
    }
}

/// The live counters of one strategy, on a cache line of their own: the producing thread writes
/// them on every task, and other threads must not be slowed by sharing a line with the state
/// word they poke.
#[derive(Default)]
pub(super) struct Counters(CachePadded<Cells>);

#[derive(Default)]
struct Cells {
    pc: AtomicU64,
    epc: AtomicU64,
    pic: AtomicU64,
    pec: AtomicU64,
    refused: AtomicU64,
    panicked: AtomicU64,
}

/// Rule 10: only the owner of production writes this cell, so load + store is an increment.
#[inline(always)]
fn owner_bump(cell: &AtomicU64) {
    cell.store(cell.load(Relaxed) + 1, Relaxed);
}

impl Counters {
    /// Counts a task for `mode`. The caller owns production, except for EPC (Rule 10).
    #[inline(always)]
    pub(super) fn count(&self, mode: ConsumeMode) {
        let c = &self.0;
        match mode {
            ConsumeMode::ProduceConsume => owner_bump(&c.pc),
            ConsumeMode::ProduceInvokeConsume => owner_bump(&c.pic),
            ConsumeMode::ProduceExecuteConsume => owner_bump(&c.pec),
            // Counted after the hand-off, when another thread may already own production.
            ConsumeMode::ExecuteProduceConsume => {
                c.epc.fetch_add(1, Relaxed);
            }
        }
    }

    /// Counts a PEC task the executor refused. The caller owns production (Rule 10).
    pub(super) fn count_refused(&self) {
        owner_bump(&self.0.refused);
    }

    /// Counts a panic in a task run in place, by any thread.
    pub(super) fn count_panic(&self) {
        self.0.panicked.fetch_add(1, Relaxed);
    }

    pub(super) fn snapshot(&self) -> ModeCounts {
        let c = &self.0;
        ModeCounts {
            produce_consume: c.pc.load(Relaxed),
            execute_produce_consume: c.epc.load(Relaxed),
            produce_invoke_consume: c.pic.load(Relaxed),
            produce_execute_consume: c.pec.load(Relaxed),
            refused: c.refused.load(Relaxed),
            panicked: c.panicked.load(Relaxed),
        }
    }
}
