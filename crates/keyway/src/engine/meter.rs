//! Time in the pool's numbers: sampled queue wait and run time, the oldest waiting age, the
//! longest-running tasks, and the counts [`Metrics`] carries (`Pool::metrics`).
//!
//! **Cost.** Timing is decided when the pool is built (`PoolBuilder::metrics`). A pool without it
//! has no [`Meter`], and its tasks take no path they did not take before: admission's one test
//! of "is there anything beyond counting" (a capacity, or a meter) was there already, and the
//! timed path is reached only through it. With a meter, admission times one in
//! `metrics_sampling` (128 by default, rounded up to a power of two) of the admissions counted
//! on each stripe of the pool's admission counter (a submitting thread has a stripe of its own
//! while at most 16 threads submit, so it times its first task, then one in the sampling): the
//! stripe's count before the admission comes with the increment admission makes anyway, and
//! masking it is the same one test a plain pool makes. The task picked is wrapped ([`Timed`])
//! so that it records its own queue wait (admission to start) and run time; the others cost
//! nothing more than in a plain pool. The monitor, once a period, notes since when each
//! worker is in its current task (for any task, timed or not).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

#[cfg(feature = "metrics")]
use super::export;
use super::histogram::AtomicHistogram;
use super::metrics::{self as snapshot, Metrics, RunningTask};

use super::holding;
use super::label::Labels;
use super::watch::Watched;
use super::worker;
use crate::task::{Abandon, PanicReport, Runnable, Task};

/// The default sampling: one admission in this many is timed.
pub(crate) const DEFAULT_SAMPLING: u32 = 128;

/// The sampling a pool uses for `metrics_sampling(n)`: `n` rounded up to a power of two (at
/// most 2^31), so that choosing a task to time is a mask of a count admission reads anyway.
pub(crate) fn sampling(n: u32) -> u32 {
    n.max(1).checked_next_power_of_two().unwrap_or(1 << 31)
}

/// The pool's `admit_mask` (`accounting.rs`): 0 with a capacity (every admission looks at the
/// room), the sampling less one with a meter alone, else all ones.
pub(crate) fn admit_mask(capacity: bool, metrics: Option<u32>) -> u64 {
    match (capacity, metrics) {
        (true, _) => 0,
        (false, Some(one_in)) => u64::from(sampling(one_in) - 1),
        (false, None) => u64::MAX,
    }
}

/// How many timed tasks the oldest-waiting age follows at once (more in flight are timed but
/// not followed).
const WAITING_SLOTS: usize = 64;
const _: () = assert!(WAITING_SLOTS == 1 << 6, "`follow` picks a slot with 6 bits");

/// How many slots a timed task tries before it goes unfollowed. A slot is held until its task
/// starts, so the tasks followed when the slots run short are the ones admitted first (the
/// oldest, which are what the age reports); a new task does not scan the whole list for the
/// last free slot (callgrind, `contexts --work 10`, thousands of timed tasks queued: making a
/// timed task took 264 instructions scanning, 82 with 4 probes).
const WAITING_PROBES: usize = 4;

/// The timed side of one pool.
pub(crate) struct Meter {
    /// One admission in `one_in` is timed.
    pub(crate) one_in: u32,
    /// The instant the meter's nanosecond marks count from.
    epoch: Instant,
    pub(crate) queue_wait: AtomicHistogram,
    pub(crate) run_time: AtomicHistogram,
    /// Timed tasks not yet started: their admission mark (nanoseconds since `epoch`, plus one;
    /// 0 = free).
    waiting: Box<[AtomicU64]>,
    /// Per worker slot: the timed task running there, if any.
    running: Box<[Mutex<Option<Run>>]>,
    /// Per worker slot: since when the monitor sees that worker in its current task
    /// (nanoseconds since `epoch`, plus one; 0 = not in a task), and that task's `run_seq`.
    in_task_since: Box<[(AtomicU64, AtomicU64)]>,
    /// The `metrics` facade's series of this pool.
    #[cfg(feature = "metrics")]
    pub(crate) export: export::Handles,
}

/// A timed task running on a worker.
#[derive(Clone)]
struct Run {
    since: Instant,
    context_hash: Option<u64>,
    /// Its lane, to be labelled by a snapshot.
    lane: Option<Weak<dyn Watched>>,
    /// The worker's `run_seq` while the task runs: tells whether it is still the same task.
    seq: u64,
}

impl Meter {
    pub(crate) fn new(one_in: u32, worker_slots: usize, _pool: &str) -> Self {
        Meter {
            one_in: sampling(one_in),
            epoch: Instant::now(),
            queue_wait: AtomicHistogram::new(),
            run_time: AtomicHistogram::new(),
            waiting: (0..WAITING_SLOTS).map(|_| AtomicU64::new(0)).collect(),
            running: (0..worker_slots).map(|_| Mutex::new(None)).collect(),
            in_task_since: (0..worker_slots)
                .map(|_| (AtomicU64::new(0), AtomicU64::new(0)))
                .collect(),
            #[cfg(feature = "metrics")]
            export: export::Handles::new(_pool),
        }
    }

    fn mark(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.epoch).as_nanos())
            .unwrap_or(u64::MAX - 1)
            .saturating_add(1)
    }

    fn at(&self, mark: u64) -> Instant {
        self.epoch
            .checked_add(Duration::from_nanos(mark - 1))
            .unwrap_or(self.epoch)
    }

    /// Whether an admission is one to time, given its stripe's count before it (`before`):
    /// one in `one_in`, starting with the stripe's first.
    #[inline]
    pub(crate) fn sample(&self, before: u64) -> bool {
        before & u64::from(self.one_in - 1) == 0
    }

    /// Follows a timed task admitted `at` until it starts (for the oldest waiting age), if one
    /// of the `WAITING_PROBES` slots it tries is free.
    fn follow(self: &Arc<Self>, at: Instant) -> Option<Following> {
        let mark = self.mark(at);
        // The mark's bits mixed (a clock may tick in steps of a power of two nanoseconds).
        let start = (mark.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 58) as usize;
        (0..WAITING_PROBES)
            .map(|i| (start + i) % WAITING_SLOTS)
            .find(|&i| {
                self.waiting[i]
                    .compare_exchange(0, mark, Ordering::AcqRel, Ordering::Relaxed)
                    .is_ok()
            })
            .map(|slot| Following {
                meter: self.clone(),
                slot,
            })
    }

    /// The monitor's look at worker `slot`: in a task (run_seq `seq`) since `since`, or not in
    /// one (`None`).
    pub(crate) fn note_in_task(&self, slot: usize, since: Option<(Instant, u64)>) {
        if let Some((mark, seq)) = self.in_task_since.get(slot) {
            match since {
                Some((at, s)) => {
                    seq.store(s, Ordering::Relaxed);
                    mark.store(self.mark(at), Ordering::Release);
                }
                None => mark.store(0, Ordering::Release),
            }
        }
    }

    /// The oldest waiting age among the timed tasks followed, at `now`.
    fn oldest_waiting(&self, now: Instant) -> Option<Duration> {
        self.waiting
            .iter()
            .map(|w| w.load(Ordering::Acquire))
            .filter(|&m| m != 0)
            .min()
            .map(|m| now.saturating_duration_since(self.at(m)))
    }

    /// Tasks running now on the workers, longest first, at most `n`: timed ones with their
    /// lane (labelled), and any the monitor saw in one task for at least a period.
    /// `seq_of(slot)` is the worker's current `run_seq`.
    fn running(
        &self,
        now: Instant,
        n: usize,
        labels: &Labels,
        seq_of: impl Fn(usize) -> u64,
    ) -> Vec<RunningTask> {
        let mut out = Vec::new();
        let mut lanes = Vec::new();
        for (slot, cell) in self.running.iter().enumerate() {
            let seq = seq_of(slot);
            if seq % 2 == 0 {
                continue; // between tasks
            }
            let timed = cell.lock().clone().filter(|r| r.seq == seq);
            let (m, s) = &self.in_task_since[slot];
            let mark = m.load(Ordering::Acquire);
            let seen = (mark != 0 && s.load(Ordering::Relaxed) == seq).then(|| self.at(mark));
            let since = match (&timed, seen) {
                (Some(r), Some(at)) => Some(r.since.min(at)),
                (Some(r), None) => Some(r.since),
                (None, at) => at,
            };
            if let Some(since) = since {
                let (context_hash, lane) = timed.map_or((None, None), |r| (r.context_hash, r.lane));
                out.push(RunningTask {
                    thread: slot,
                    context_hash,
                    label: None,
                    running_for: now.saturating_duration_since(since),
                });
                lanes.push(lane);
            }
        }
        let mut order: Vec<usize> = (0..out.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(out[i].running_for));
        order.truncate(n);
        // Only the listed are labelled (the key's `Debug` is user code; no lock is held).
        order
            .into_iter()
            .map(|i| {
                let lane = lanes[i].as_ref().and_then(Weak::upgrade);
                RunningTask {
                    label: lane.and_then(|l| l.label(labels)),
                    ..out[i]
                }
            })
            .collect()
    }
}

/// A timed task followed for the oldest waiting age; let go when it starts, is abandoned, or
/// is dropped.
struct Following {
    meter: Arc<Meter>,
    slot: usize,
}

impl Drop for Following {
    fn drop(&mut self) {
        self.meter.waiting[self.slot].store(0, Ordering::Release);
    }
}

/// A timed task: the task, and when it was admitted. It records its queue wait as it starts
/// and its run time as it ends; it never unwinds (the task it wraps contains its panics).
pub(crate) struct Timed {
    task: Task,
    admitted: Instant,
    meter: Arc<Meter>,
    following: Option<Following>,
}

impl Timed {
    /// Times `task`, admitted now. Stored as it is (a lane entry boxes it once; a queued task
    /// is `Task::new` of it).
    pub(crate) fn new(meter: &Arc<Meter>, task: Task) -> Timed {
        let admitted = Instant::now();
        Timed {
            task,
            admitted,
            following: meter.follow(admitted),
            meter: meter.clone(),
        }
    }
}

impl Runnable for Timed {
    fn run(self) -> Result<(), PanicReport> {
        let Timed {
            task,
            admitted,
            meter,
            following,
        } = self;
        let start = Instant::now();
        drop(following);
        let wait = start.saturating_duration_since(admitted);
        meter.queue_wait.record(wait);
        #[cfg(feature = "metrics")]
        meter.export.queue_wait.record(wait.as_secs_f64());
        // On a worker: what runs there, and in which lane (the turn that runs it says).
        let slot = worker::with_current(|cx| cx.map(|cx| (cx.index, cx.run_seq())));
        if let Some((index, seq)) = slot {
            if let Some(cell) = meter.running.get(index) {
                let run = Run {
                    since: start,
                    context_hash: holding::context_hash(),
                    lane: holding::lane(),
                    seq,
                };
                *cell.lock() = Some(run);
            }
        }
        let out = task.run();
        let ran = start.elapsed();
        meter.run_time.record(ran);
        #[cfg(feature = "metrics")]
        meter.export.run_time.record(ran.as_secs_f64());
        if let Some((index, _)) = slot {
            if let Some(cell) = meter.running.get(index) {
                // Its lane reference (a `Weak`: no key is dropped here) goes outside the lock.
                let run = cell.lock().take();
                drop(run);
            }
        }
        out
    }

    fn abandon(self, why: Abandon) {
        drop(self.following);
        self.task.abandon(why);
    }
}

impl super::registry::Registry {
    /// A snapshot of this pool's numbers with the time in them.
    pub(crate) fn metrics(&self) -> Metrics {
        let stats = super::stats::Stats::of(self);
        let now = Instant::now();
        let submitted = self.accepted.sum();
        let refused = self.refused.load(Ordering::Relaxed);
        let handed_back = self.handed_back.load(Ordering::Relaxed);
        match &self.meter {
            None => Metrics::untimed(stats, submitted, refused, handed_back),
            Some(m) => Metrics {
                stats,
                timed: true,
                sample_one_in: m.one_in,
                queue_wait: m.queue_wait.snapshot(),
                run_time: m.run_time.snapshot(),
                oldest_waiting: m.oldest_waiting(now),
                longest_running: m.running(now, snapshot::TOP, &self.config.labels, |slot| {
                    self.slots[slot].progress.seq()
                }),
                submitted_tasks: submitted,
                refused_tasks: refused,
                handed_back_tasks: handed_back,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_admission_in_n_of_a_stripe_is_sampled_from_its_first() {
        let m = Meter::new(4, 1, "t");
        let picks: Vec<u64> = (0..12).filter(|&before| m.sample(before)).collect();
        assert_eq!(picks, [0, 4, 8]);
        let every = Meter::new(0, 1, "t"); // 0 is taken as 1
        assert!((0..5).all(|before| every.sample(before)));
        // Not a power of two: rounded up.
        assert_eq!(Meter::new(100, 1, "t").one_in, 128);
        assert_eq!(sampling(u32::MAX), 1 << 31);
        assert_eq!(sampling(1 << 31), 1 << 31);
        let half = Meter::new(u32::MAX, 1, "t");
        assert!(half.sample(0) && !half.sample(1) && half.sample(1 << 31));
    }

    #[test]
    fn the_admission_mask_sends_admissions_to_the_extra_path() {
        assert_eq!(admit_mask(true, None), 0);
        assert_eq!(admit_mask(true, Some(128)), 0);
        assert_eq!(admit_mask(false, Some(128)), 127);
        assert_eq!(admit_mask(false, Some(100)), 127);
        assert_eq!(admit_mask(false, Some(1)), 0);
        assert_eq!(admit_mask(false, None), u64::MAX);
    }

    #[test]
    fn a_timed_task_probes_few_slots_and_leaves_the_oldest_age_when_dropped() {
        let m = Arc::new(Meter::new(1, 1, "t"));
        let t0 = Instant::now();
        // The same mark each time: the same probed slots. Once they are taken, a task goes
        // unfollowed though most slots are free (it does not scan them all).
        let f: Vec<_> = (0..WAITING_SLOTS).map_while(|_| m.follow(t0)).collect();
        assert!(
            !f.is_empty() && f.len() < WAITING_SLOTS / 2,
            "{} followed",
            f.len()
        );
        assert!(m.oldest_waiting(Instant::now()).is_some());
        drop(f);
        assert_eq!(m.oldest_waiting(Instant::now()), None);
    }
}
