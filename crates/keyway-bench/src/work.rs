//! The work every system runs. Each task body is one `#[inline(never)]`
//! function shared by all systems, so code generation cannot decide a
//! comparison.

pub mod strategy;
pub mod stream;

use std::hint::black_box;
use std::ops::RangeInclusive;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

#[cfg(test)]
use crate::keys::KEY_SPACE;
use crate::keys::{verify_keys, KeyCell, TaskKeys};
use crate::latch::Completion;
use crate::once::{ran, TaskSet};
use crate::open_loop::OpenLoop;
use crate::order::{verify_all, OrderCell};
use crate::output::{expected_hash, Output, FNV_OFFSET, FNV_PRIME};
use crate::popularity::Popularity;

/// `work` atomic increments on a fresh local atomic; returns its final value.
#[inline(never)]
pub fn spin(work: u64) -> u64 {
    let local = AtomicU64::new(0);
    let local = black_box(&local);
    for _ in 0..work {
        local.fetch_add(1, Ordering::Relaxed);
    }
    local.load(Ordering::Relaxed)
}

/// Atomic increments per ns of [`spin`] on this machine (the best of a few tries of 200,000):
/// converts a work per task given in time into increments.
pub fn increments_per_ns() -> f64 {
    const N: u64 = 200_000;
    (0..5)
        .map(|_| {
            let start = Instant::now();
            black_box(spin(N));
            N as f64 / start.elapsed().as_nanos().max(1) as f64
        })
        .fold(0.0, f64::max)
}

/// The `throughput` task with exactly-once accounting: marks task `index`
/// in `set` (a second run of it fails the run) and updates the shared
/// completion counter.
#[inline(never)]
pub fn tick_once(set: &TaskSet, done: &Completion, index: u64) {
    ran(set, done, index);
}

/// The shared state of one `contexts` run: one order cell per context and the
/// completion latch, which counts contexts whose last task has run.
#[derive(Debug)]
pub struct ContextsRun {
    /// One order record per context.
    pub cells: Box<[OrderCell]>,
    /// Tasks per context (with a [`popularity`](Self::popularity): the most any context has).
    pub tasks: u64,
    /// Atomic increments per task.
    pub work: u64,
    /// Contexts of unequal popularity: which context each task goes to (`None`: every
    /// context has [`tasks`](Self::tasks) tasks, submitted round robin).
    pub popularity: Option<Popularity>,
    /// One hot context whose tasks do more work: (context, atomic increments per task). An
    /// open-loop run records the other contexts' delays only.
    pub hot: Option<(usize, u64)>,
    /// Consecutive tasks of one context the producer hands over at once (1: one at a time).
    pub batch: u64,
    /// The open-loop schedule the producer keeps, and the tasks' delays (`latency`); `None`:
    /// the producer submits as fast as it can.
    pub open_loop: Option<OpenLoop>,
    /// Opens when every context's last task has run.
    pub done: Completion,
}

impl ContextsRun {
    /// Fresh state for `contexts` contexts of `tasks` tasks of `work` increments.
    pub fn new(contexts: usize, tasks: u64, work: u64) -> Self {
        Self {
            cells: (0..contexts).map(|_| OrderCell::default()).collect(),
            tasks,
            work,
            batch: 1,
            open_loop: None,
            popularity: None,
            hot: None,
            done: Completion::new(if tasks == 0 { 0 } else { contexts }),
        }
    }

    /// Fresh state for the tasks of `popularity` (one context per key, each task `work`
    /// increments), submitted in its order; a context with no task counts as done.
    pub fn with_popularity(popularity: Popularity, work: u64) -> Self {
        let contexts = popularity.keys();
        let most = (0..contexts).map(|c| popularity.tasks_of(c)).max();
        Self {
            cells: (0..contexts).map(|_| OrderCell::default()).collect(),
            tasks: most.unwrap_or(0),
            work,
            batch: 1,
            open_loop: None,
            done: Completion::new(popularity.busy_keys()),
            popularity: Some(popularity),
            hot: None,
        }
    }

    /// Makes the state fresh again for another run of the same tasks, once every thread of
    /// the previous run has stopped (a popularity run's state is large: it is made once per
    /// variant and used by every run of it).
    pub fn reset(&self) {
        for cell in self.cells.iter() {
            cell.reset();
        }
        let contexts = match &self.popularity {
            Some(p) => p.busy_keys(),
            None if self.tasks == 0 => 0,
            None => self.contexts(),
        };
        self.done.reset(contexts);
    }

    /// The same run with context `ctx`'s tasks doing `work` increments each.
    pub fn hot(mut self, ctx: usize, work: u64) -> Self {
        self.hot = Some((ctx, work));
        self
    }

    /// Tasks of context `ctx`.
    #[inline]
    pub fn tasks_of(&self, ctx: usize) -> u64 {
        match &self.popularity {
            None => self.tasks,
            Some(p) => p.tasks_of(ctx),
        }
    }

    /// Atomic increments task of context `ctx` does.
    #[inline]
    pub fn work_of(&self, ctx: usize) -> u64 {
        match self.hot {
            Some((hot, work)) if hot == ctx => work,
            _ => self.work,
        }
    }

    /// Tasks in the run.
    pub fn total(&self) -> u64 {
        match &self.popularity {
            None => self.tasks * self.contexts() as u64,
            Some(p) => p.order().len() as u64,
        }
    }

    /// The same run with its tasks offered on an open-loop schedule of `rate` tasks per second
    /// (in [`produce`](Self::produce)'s order), each task's delays recorded.
    pub fn open_loop(mut self, rate: f64) -> Self {
        self.open_loop = Some(OpenLoop::new(rate));
        self
    }

    /// The same run with its tasks offered through the open loop's machinery (pacer, delay
    /// records) but all due at once: the producer submits as fast as it can, paying what it
    /// pays on a paced schedule (see [`OpenLoop::unpaced`]).
    pub fn unpaced_open_loop(mut self) -> Self {
        self.open_loop = Some(OpenLoop::unpaced());
        self
    }

    /// [`open_loop`](Self::open_loop), also keeping each task's submit time (see
    /// [`OpenLoop::tracking_submits`]; a batch's tasks after its first are not tracked).
    pub fn tracked_open_loop(mut self, rate: f64) -> Self {
        self.open_loop = Some(OpenLoop::new(rate).tracking_submits(self.total()));
        self
    }

    /// The position of task `seq` of `ctx` in the arrival schedule: a batch's tasks arrive
    /// together, at its first task's turn.
    fn arrival(&self, ctx: usize, seq: u64) -> u64 {
        if let Some(p) = &self.popularity {
            return p.position(ctx, seq);
        }
        let first = (seq - 1) / self.batch * self.batch + 1;
        let len = self.batch.min(self.tasks - first + 1);
        (first - 1) * self.contexts() as u64 + ctx as u64 * len
    }

    /// The same run with the producer handing over `batch` consecutive tasks of a context at
    /// once (at least 1).
    pub fn batched(mut self, batch: u64) -> Self {
        self.batch = batch.max(1);
        self
    }

    /// Number of contexts.
    pub fn contexts(&self) -> usize {
        self.cells.len()
    }

    /// Calls `submit(ctx, seq)` for every task in the order a producer submits
    /// them: round robin over the contexts (messages of many clients
    /// interleaved), [`batch`](Self::batch) consecutive tasks of a context at a
    /// time, sequence numbers starting at 1; with a [`popularity`](Self::popularity), in its
    /// order (one task at a time). Stops at the first error.
    pub fn produce(
        &self,
        mut submit: impl FnMut(usize, u64) -> Result<(), String>,
    ) -> Result<(), String> {
        self.produce_batches(|ctx, seqs| seqs.into_iter().try_for_each(|seq| submit(ctx, seq)))
    }

    /// Calls `submit(ctx, seqs)` for every batch in the order a producer hands them over:
    /// round robin over the contexts, each batch the next [`batch`](Self::batch) (or fewer, at
    /// the end) sequence numbers of its context. Stops at the first error.
    pub fn produce_batches(
        &self,
        mut submit: impl FnMut(usize, RangeInclusive<u64>) -> Result<(), String>,
    ) -> Result<(), String> {
        // The producer's lateness, kept by its pacer and handed over once (no lock per submit).
        let mut pacer = self.open_loop.as_ref().map(OpenLoop::pacer);
        let mut feed = || {
            if let Some(p) = &self.popularity {
                for (i, &(ctx, seq)) in p.order().iter().enumerate() {
                    if let Some(pacer) = pacer.as_mut() {
                        pacer.wait_turn(i as u64, 1);
                    }
                    let seq = u64::from(seq);
                    submit(ctx as usize, seq..=seq)?;
                }
                return Ok(());
            }
            let mut first = 1;
            while first <= self.tasks {
                let last = first.saturating_add(self.batch - 1).min(self.tasks);
                for ctx in 0..self.contexts() {
                    if let Some(pacer) = pacer.as_mut() {
                        pacer.wait_turn(self.arrival(ctx, first), last - first + 1);
                    }
                    submit(ctx, first..=last)?;
                }
                first = last + 1;
            }
            Ok(())
        };
        let fed = feed();
        if let Some(pacer) = pacer {
            pacer.finish();
        }
        fed
    }

    /// Checks that every context ran all its tasks, in order.
    pub fn verify(&self) -> Result<(), String> {
        verify_all(&self.cells, |ctx| self.tasks_of(ctx))
    }
}

/// The `contexts` task: `work` increments, then the order check of its
/// context; the context's last task counts the context as done.
#[inline(never)]
pub fn context_task(run: &ContextsRun, ctx: usize, seq: u64) {
    let started = run.open_loop.as_ref().map(|_| Instant::now());
    black_box(spin(run.work_of(ctx)));
    run.cells[ctx].record(seq);
    record_delays(run, ctx, seq, started);
    if seq == run.tasks_of(ctx) {
        run.done.count_down();
    }
}

/// The `contexts` task for a system that keeps no order (a plain pool): `work` increments,
/// then a count of its context's tasks; the context's last one to run counts it as done.
#[inline(never)]
pub fn unordered_context_task(run: &ContextsRun, ctx: usize, seq: u64) {
    let started = run.open_loop.as_ref().map(|_| Instant::now());
    black_box(spin(run.work_of(ctx)));
    record_delays(run, ctx, seq, started);
    if run.cells[ctx].count() == run.tasks_of(ctx) {
        run.done.count_down();
    }
}

/// An open-loop run records the task's delays (before its context can count as done).
#[inline]
fn record_delays(run: &ContextsRun, ctx: usize, seq: u64, started: Option<Instant>) {
    if let (Some(schedule), Some(started)) = (&run.open_loop, started) {
        if run.hot.is_none_or(|(hot, _)| hot != ctx) {
            schedule.record(run.arrival(ctx, seq), started, Instant::now());
        }
    }
}

/// The shared state of one keyed `throughput` run: one checker cell per key,
/// the exactly-once set and the completion latch, which counts tasks.
#[derive(Debug)]
pub struct KeyedRun {
    /// One checker per key of the key space.
    pub cells: Box<[KeyCell]>,
    /// One bit per task: set when the task runs.
    pub once: TaskSet,
    /// Opens when every task has run.
    pub done: Completion,
}

impl KeyedRun {
    /// Fresh state for `tasks` tasks on keys of [`KEY_SPACE`].
    #[cfg(test)]
    pub fn new(tasks: u64) -> Self {
        Self::new_in(tasks, KEY_SPACE)
    }

    /// Fresh state for `tasks` tasks on keys of a `space`-key space.
    pub fn new_in(tasks: u64, space: u32) -> Self {
        Self {
            cells: (0..space).map(|_| KeyCell::default()).collect(),
            once: TaskSet::new(tasks),
            done: Completion::new(tasks as usize),
        }
    }

    /// How many of `tasks` tasks name each key when each names `keys` keys
    /// of [`KEY_SPACE`] (computed from [`TaskKeys::for_task`], untimed).
    #[cfg(test)]
    pub fn expected_runs(tasks: u64, keys: u32) -> Vec<u64> {
        Self::expected_runs_in(tasks, keys, KEY_SPACE)
    }

    /// How many of `tasks` tasks name each key when each names `keys` keys of a `space`-key
    /// space (computed from [`TaskKeys::for_task_in`], untimed).
    pub fn expected_runs_in(tasks: u64, keys: u32, space: u32) -> Vec<u64> {
        let mut runs = vec![0u64; space as usize];
        for index in 0..tasks {
            for &k in TaskKeys::for_task_in(index, keys, space).as_slice() {
                runs[k as usize] += 1;
            }
        }
        runs
    }

    /// Checks that every task ran once, that no two tasks sharing a key
    /// overlapped and, when `ordered`, that each key's tasks ran in
    /// submission order.
    pub fn verify(&self, expected_runs: &[u64], ordered: bool) -> Result<(), String> {
        self.once.verify()?;
        verify_keys(&self.cells, expected_runs, ordered)
    }
}

/// The keyed `throughput` task number `seq - 1`: marks its keys busy
/// (checking no other task holds them) and records its sequence number on
/// each, does the plain task's exactly-once mark and counter update, and
/// frees its keys.
#[inline(never)]
pub fn keyed_task(run: &KeyedRun, seq: u64, keys: TaskKeys) {
    for &k in keys.as_slice() {
        run.cells[k as usize].enter(seq);
    }
    ran(&run.once, &run.done, seq - 1);
    for &k in keys.as_slice() {
        run.cells[k as usize].exit();
    }
}

/// Bytes of the buffer an `ordered` item is processed from.
pub const ITEM_BYTES: usize = 1_024;

/// The `ordered` processing step: fills a 1 KiB buffer from a xorshift
/// generator seeded with `item`, and returns its FNV-1a checksum.
#[inline(never)]
pub fn process(item: u64) -> u64 {
    let mut buf = [0u8; ITEM_BYTES];
    let mut x = crate::keys::splitmix64(item) | 1;
    for chunk in buf.chunks_exact_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        chunk.copy_from_slice(&x.to_le_bytes());
    }
    let buf = black_box(buf);
    buf.iter().fold(FNV_OFFSET, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(FNV_PRIME)
    })
}

/// The shared state of one `ordered` run: the output and the latch that
/// opens when the last item is written.
#[derive(Debug)]
pub struct OrderedRun {
    /// Items in the run, numbered `0..items`.
    pub items: u64,
    /// Where items are written.
    pub output: Output,
    /// Opens when item `items - 1` has been written.
    pub done: Completion,
}

impl OrderedRun {
    /// Fresh state for `items` items.
    pub fn new(items: u64) -> Self {
        Self {
            items,
            output: Output::default(),
            done: Completion::new(usize::from(items > 0)),
        }
    }

    /// The output hash of a correct run of `items` items: every item
    /// processed (untimed, on `threads` threads), hashed in item order.
    pub fn expected_hash(items: u64, threads: usize) -> u64 {
        let threads = threads.max(1) as u64;
        let chunk = items.div_ceil(threads).max(1);
        let parts: Vec<Vec<u64>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..threads)
                .map(|t| {
                    let range = (t * chunk).min(items)..((t + 1) * chunk).min(items);
                    s.spawn(move || range.map(process).collect::<Vec<u64>>())
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("an expected-checksum thread panicked"))
                .collect()
        });
        expected_hash(parts.into_iter().flatten())
    }

    /// Checks that every item was written once, in order, with the right
    /// checksum.
    pub fn verify(&self, expected_hash: u64) -> Result<(), String> {
        self.output.verify(self.items, expected_hash)
    }
}

/// The `ordered` write step: appends `item`'s checksum to the output; the
/// last item opens the run's latch.
#[inline(never)]
pub fn write(run: &OrderedRun, item: u64, checksum: u64) {
    if run.output.append(item, checksum) == run.items {
        run.done.count_down();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn spin_counts() {
        assert_eq!(spin(0), 0);
        assert_eq!(spin(1000), 1000);
    }

    #[test]
    fn direct_run_verifies_and_completes() {
        let run = ContextsRun::new(3, 4, 2);
        run.produce(|c, s| {
            context_task(&run, c, s);
            Ok(())
        })
        .unwrap();
        run.verify().unwrap();
        run.done
            .wait_since(Instant::now(), Duration::from_secs(1))
            .unwrap();
    }

    #[test]
    fn a_popularity_run_verifies_completes_and_runs_again_after_a_reset() {
        let run = ContextsRun::with_popularity(Popularity::zipf(40, 2_000, 1.1), 1);
        assert_eq!(run.total(), 2_000);
        for _round in 0..2 {
            assert!(run.verify().is_err(), "nothing ran yet");
            run.produce(|c, s| {
                context_task(&run, c, s);
                Ok(())
            })
            .unwrap();
            run.verify().unwrap();
            run.done
                .wait_since(Instant::now(), Duration::from_secs(1))
                .unwrap();
            run.reset();
            assert!(run.done.remaining() > 0);
        }
        // A task out of its context's order fails the check.
        let (ctx, _) = run.popularity.as_ref().unwrap().order()[0];
        let ctx = ctx as usize;
        context_task(&run, ctx, 2);
        let err = run.cells[ctx].verify(run.tasks_of(ctx)).unwrap_err();
        assert!(err.contains("order broken"), "{err}");
    }

    #[test]
    fn the_hot_context_does_its_own_work() {
        let run = ContextsRun::new(3, 1, 5).hot(1, 500);
        assert_eq!(
            (run.work_of(0), run.work_of(1), run.work_of(2)),
            (5, 500, 5)
        );
    }

    #[test]
    fn batches_are_consecutive_tasks_of_a_context_round_robin() {
        let run = ContextsRun::new(2, 5, 1).batched(2);
        let mut order = Vec::new();
        run.produce(|c, s| {
            order.push((c, s));
            Ok(())
        })
        .unwrap();
        assert_eq!(
            order,
            [
                (0, 1),
                (0, 2),
                (1, 1),
                (1, 2),
                (0, 3),
                (0, 4),
                (1, 3),
                (1, 4),
                (0, 5),
                (1, 5)
            ]
        );
        let huge = ContextsRun::new(1, 3, 1).batched(u64::MAX);
        let mut batches = Vec::new();
        huge.produce_batches(|c, seqs| {
            batches.push((c, seqs));
            Ok(())
        })
        .unwrap();
        assert_eq!(batches, [(0, 1..=3)]);
        assert_eq!(ContextsRun::new(1, 3, 1).batched(0).batch, 1);
    }

    #[test]
    fn reordered_run_fails_verification() {
        let run = ContextsRun::new(2, 3, 1);
        for (c, s) in [(0, 1), (1, 1), (0, 3), (0, 2), (1, 2), (1, 3)] {
            context_task(&run, c, s);
        }
        let err = run.verify().unwrap_err();
        assert!(err.starts_with("context 0:"), "{err}");
    }

    #[test]
    fn keyed_run_verifies_a_serial_run() {
        let tasks = 5_000;
        let expected = KeyedRun::expected_runs(tasks, 2);
        assert_eq!(expected.iter().sum::<u64>(), 2 * tasks);
        let run = KeyedRun::new(tasks);
        for i in 0..tasks {
            keyed_task(&run, i + 1, TaskKeys::for_task(i, 2));
        }
        run.verify(&expected, true).unwrap();
    }

    #[test]
    fn keyed_run_catches_missing_and_reordered_tasks() {
        let tasks = 5_000; // ~5 tasks per key: task 0's key has later tasks
        let key0 = TaskKeys::for_task(0, 1).as_slice()[0];
        assert!(KeyedRun::expected_runs(tasks, 1)[key0 as usize] > 1);
        let expected = KeyedRun::expected_runs(tasks, 1);
        let run = KeyedRun::new(tasks);
        for i in 1..tasks {
            keyed_task(&run, i + 1, TaskKeys::for_task(i, 1));
        }
        let err = run.verify(&expected, true).unwrap_err();
        assert_eq!(err, "1 of 5000 tasks did not run (first: task 0)");
        // Task 0 runs last: every check passes except the order of its key.
        keyed_task(&run, 1, TaskKeys::for_task(0, 1));
        let err = run.verify(&expected, true).unwrap_err();
        assert!(err.contains("order broken"), "{err}");
        run.verify(&expected, false).unwrap();
    }

    #[test]
    fn process_is_deterministic_and_item_dependent() {
        assert_eq!(process(7), process(7));
        assert_ne!(process(7), process(8));
    }

    #[test]
    fn ordered_run_verifies_in_order_writes_only() {
        let items = 50;
        let expected = OrderedRun::expected_hash(items, 3);
        assert_eq!(expected, expected_hash((0..items).map(process)));
        let run = OrderedRun::new(items);
        for i in 0..items {
            write(&run, i, process(i));
        }
        run.verify(expected).unwrap();
        run.done
            .wait_since(Instant::now(), Duration::from_secs(1))
            .unwrap();
        let swapped = OrderedRun::new(items);
        for i in (0..items).map(|i| i ^ 1) {
            write(&swapped, i, process(i));
        }
        let err = swapped.verify(expected).unwrap_err();
        assert!(err.contains("order broken"), "{err}");
    }
}
