//! One executor's intervals, as the driver runs them: at each interval's start, take what is
//! due (and what was carried over), drop the cancelled, time out the expired, pick the best
//! that fit the quota, and carry the rest over; during the interval, release the admitted
//! evenly over it, and admit late arrivals while quota is left (spread over what is left of
//! the interval).

use std::sync::Arc;

use super::batch::Batcher;
use super::clock::{Clock, NEVER};
use super::config::PriorityOrder;
use super::coordinator::{clamp_share, Coordinator};
use super::entry::{better, Entry};
use super::executor::ExecCore;
use super::pace::Pace;
use super::spread::Spread;
use super::stats::IntervalReport;
use crate::task::PendingTask;

/// The driver's state for one executor.
pub(crate) struct Intervals {
    pub(crate) exec: Arc<ExecCore>,
    /// Over the limit last interval: competes again in the next.
    carry: Vec<Entry>,
    /// Admitted this interval and not yet released; taken from the back of the last chunk.
    admitted: Vec<Vec<Entry>>,
    /// How many were admitted at the interval's start (they are spread over it).
    spread: usize,
    released_spread: usize,
    /// Admitted late (arrived for an interval already running), not yet released: they are
    /// spread over what is left of the interval, and wait for their due time on executors
    /// that never release early.
    waiting: Vec<Entry>,
    /// When the last step ran (nanoseconds since the epoch).
    last_step: u64,
    /// A limited executor's pace: when the next task may be released.
    pace: Pace,
    /// Limited: the admitted tasks spread over the interval.
    spread_grid: Spread,
    interval: u64,
    quota: Option<u64>,
    credit: f64,
    /// The fraction of the limit the coordinator last gave, while the limit was positive and
    /// finite; `None` before it gave one.
    last_fraction: Option<f64>,
    timed_out: u64,
    dispatched: u64,
    worst_dispatched: Option<i64>,
    started: bool,
    swept_repeats: u64,
    swept_nevers: u64,
    batch: Batcher,
}

impl Intervals {
    pub(crate) fn new(exec: Arc<ExecCore>) -> Self {
        Intervals {
            exec,
            carry: Vec::new(),
            admitted: Vec::new(),
            spread: 0,
            released_spread: 0,
            waiting: Vec::new(),
            last_step: 0,
            pace: Pace::new(),
            spread_grid: Spread::new(),
            interval: 0,
            quota: None,
            credit: 0.0,
            last_fraction: None,
            timed_out: 0,
            dispatched: 0,
            worst_dispatched: None,
            started: false,
            swept_repeats: 0,
            swept_nevers: 0,
            batch: Batcher::new(),
        }
    }

    /// True while the driver holds tasks of this executor (admitted, waiting or carried).
    pub(crate) fn holds_tasks(&self) -> bool {
        !self.carry.is_empty()
            || !self.waiting.is_empty()
            || self.admitted.iter().any(|c| !c.is_empty())
    }

    /// True while admitted tasks wait to be released in this interval.
    pub(crate) fn releasing(&self) -> bool {
        !self.waiting.is_empty() || self.admitted.iter().any(|c| !c.is_empty())
    }

    /// Interval `k` starts at time `now`.
    pub(crate) fn start(&mut self, k: u64, clock: &Clock, coordinator: &dyn Coordinator) {
        if self.quota.is_some() {
            // Limited: a driver that came late still releases the slots the last interval
            // missed (as far as the pace allows); what is left of its admitted tasks then
            // competes again (released now, it would burst past the limit).
            self.release_paced(clock.now());
            self.batch.flush(&self.exec);
            let mut left: Vec<Entry> = std::mem::take(&mut self.admitted)
                .into_iter()
                .flatten()
                .collect();
            left.append(&mut self.waiting);
            self.carry.append(&mut left);
        } else {
            // Unlimited: what the last interval admitted but did not release yet still
            // belongs to it.
            let left: usize = self.admitted.iter().map(Vec::len).sum();
            self.batch.plan(left + self.waiting.len());
            while let Some(e) = self.pop_admitted() {
                self.release(e);
            }
            for e in std::mem::take(&mut self.waiting) {
                self.release(e);
            }
            self.batch.flush(&self.exec);
        }
        self.report();
        self.started = true;
        self.interval = k;
        self.timed_out = 0;
        self.dispatched = 0;
        self.worst_dispatched = None;

        let mut chunks = Vec::new();
        if !self.carry.is_empty() {
            chunks.push(std::mem::take(&mut self.carry));
        }
        self.exec.buckets.take_upto(k, &mut chunks);
        let due: usize = chunks.iter().map(Vec::len).sum();
        self.exec
            .stats
            .due
            .store(due as u64, std::sync::atomic::Ordering::Relaxed);

        self.quota = self.exec.tps().map(|limit| {
            let exec = &self.exec;
            let asked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                coordinator.share(&exec.name, limit)
            }));
            let share = match asked {
                Ok(s) => {
                    let share = clamp_share(s, limit);
                    if limit > 0.0 && limit.is_finite() {
                        self.last_fraction = Some(share / limit);
                    }
                    share
                }
                // A panicking coordinator: the last fraction it gave, of the limit as it is
                // now (set_tps may have changed it); none yet: the whole limit, as alone.
                Err(_) => clamp_share(self.last_fraction.map_or(limit, |f| f * limit), limit),
            };
            self.pace.set_rate(share);
            let budget = exec.budget(share, clock.interval()) + self.credit;
            let whole = budget.floor();
            self.credit = if budget.is_finite() {
                budget - whole
            } else {
                0.0
            };
            whole as u64 // saturates
        });

        let mut all: Vec<Entry> = if chunks.len() == 1 {
            chunks.pop().unwrap_or_default()
        } else {
            chunks.into_iter().flatten().collect()
        };
        all = self.live(all);
        if let Some(q) = self.quota {
            let q = usize::try_from(q).unwrap_or(usize::MAX);
            if all.len() > q {
                all.select_nth_unstable_by(q, |a, b| better(self.exec.order, a, b));
                self.carry = all.split_off(q);
            }
        }
        self.order_for_release(&mut all);
        self.spread = all.len();
        let full = self
            .quota
            .is_some_and(|q| u64::try_from(all.len()).unwrap_or(u64::MAX) >= q);
        self.spread_grid.start(
            clock.start_of(k),
            clock.start_of(k.saturating_add(1)),
            all.len(),
            full,
        );
        self.admitted = vec![all];
        self.released_spread = 0;
        self.exec.stats.carried_over.store(
            self.carry.len() as u64,
            std::sync::atomic::Ordering::Relaxed,
        );
    }

    /// Sorts admitted entries so that the next to release is last: on a limited executor that
    /// may release early, the best first; otherwise (and on an unlimited one, where nothing
    /// competes) the earliest due first, ties in scheduling order, so that the tasks of one
    /// context reach its lane in due order.
    fn order_for_release(&self, all: &mut [Entry]) {
        let order = self.exec.order;
        if self.exec.early && self.quota.is_some() {
            all.sort_unstable_by(|a, b| better(order, b, a));
        } else {
            all.sort_unstable_by_key(|e| std::cmp::Reverse((e.due, e.seq)));
        }
    }

    /// Drops the cancelled and times out the expired; returns the rest.
    fn live(&mut self, all: Vec<Entry>) -> Vec<Entry> {
        let mut kept = Vec::with_capacity(all.len());
        for e in all {
            if !e.job.is_live() {
                self.exec.stats.cancelled();
                self.exec.stats.ended_unreleased();
                self.exec.contain(move || drop(e));
            } else if self.exec.timed_out(e.deadline) {
                self.timed_out += 1;
                self.exec.stats.ended_unreleased();
                self.exec.time_out(e.job, e.due, e.priority);
            } else {
                kept.push(e);
            }
        }
        kept
    }

    /// Releases what is due by `now`: on a limited executor, admitted tasks (late arrivals
    /// among them, best first) at its pace; on an unlimited one, spread evenly over the
    /// interval, late arrivals over what is left of it from when they arrived.
    pub(crate) fn step(&mut self, now: u64, clock: &Clock) {
        if self.quota.is_some() {
            self.step_paced(now);
        } else {
            self.step_spread(now, clock);
        }
        self.batch.flush(&self.exec);
    }

    /// Limited: late arrivals compete with the admitted tasks not yet released for what is
    /// left of the quota (the worst carry over), and those kept are spread over what is left of
    /// the interval; then the best are released while the spreading and the pace allow, each
    /// once due if the executor never releases early.
    fn step_paced(&mut self, now: u64) {
        let mut late = Vec::new();
        self.exec.buckets.take_late(&mut late);
        if !late.is_empty() {
            let before = self.held_for_release();
            let mut all: Vec<Entry> = std::mem::take(&mut self.admitted)
                .into_iter()
                .flatten()
                .collect();
            all.append(&mut self.live(late));
            let quota = usize::try_from(self.quota.unwrap_or(u64::MAX)).unwrap_or(usize::MAX);
            let room = quota.saturating_sub(usize::try_from(self.dispatched).unwrap_or(usize::MAX));
            if all.len() > room {
                let order = self.exec.order;
                all.sort_unstable_by(|a, b| better(order, b, a)); // the worst first
                let kept = all.split_off(all.len() - room);
                self.carry.append(&mut all);
                all = kept;
            }
            self.order_for_release(&mut all);
            self.spread_grid.arrived(now, before, all.len());
            self.admitted = vec![all];
            self.exec.stats.carried_over.store(
                self.carry.len() as u64,
                std::sync::atomic::Ordering::Relaxed,
            );
        }
        self.release_paced(now);
    }

    /// Releases the best admitted tasks (due, if the executor never releases early) while the
    /// spreading and the pace allow.
    fn release_paced(&mut self, now: u64) {
        let early = self.exec.early;
        loop {
            match self.peek_admitted() {
                Some(e) if early || e.due <= now => {}
                _ => break,
            }
            // The time of this release itself (handing over the one before may have taken a
            // while): what the pace remembers is when each task really went.
            let at = self.exec.shared.clock.now();
            if !self.spread_grid.allows(at) || !self.pace.ready(at) {
                break;
            }
            let Some(e) = self.pop_admitted() else { break };
            self.pace.released(at);
            self.spread_grid.released(at);
            self.release(e);
        }
    }

    /// Admitted tasks not yet released.
    fn held_for_release(&self) -> usize {
        self.admitted.iter().map(Vec::len).sum()
    }

    /// Unlimited: the interval's share of the admitted tasks, by how much of it has passed;
    /// late arrivals spread over what was left of the interval when they arrived.
    fn step_spread(&mut self, now: u64, clock: &Clock) {
        let mut late = Vec::new();
        self.exec.buckets.take_late(&mut late);
        if !late.is_empty() {
            if self.waiting.is_empty() {
                // Spread from their arrival, not from a step long past.
                self.last_step = now;
            }
            let mut late = self.live(late);
            self.waiting.append(&mut late);
            // Released from the back: the earliest due (ties: scheduled first) last.
            self.waiting
                .sort_unstable_by_key(|e| std::cmp::Reverse((e.due, e.seq)));
        }
        let start = clock.start_of(self.interval);
        let length = clock.interval().as_nanos();
        let passed = u128::from(now.saturating_sub(start)).min(length);
        let allowed = ((passed * self.spread as u128).div_ceil(length.max(1))) as usize;
        // Late arrivals: the share of them that this step is of what was left of the interval
        // at the last step (all of them in the interval's last step), each once due if the
        // executor never releases early.
        let since = self.last_step.max(start);
        self.last_step = now;
        let left = clock
            .start_of(self.interval.saturating_add(1))
            .saturating_sub(since);
        let late_share = if now.saturating_sub(since) >= left {
            self.waiting.len()
        } else {
            let part = u128::from(now.saturating_sub(since)) * self.waiting.len() as u128;
            part.div_ceil(u128::from(left.max(1))) as usize
        };
        self.batch
            .plan(late_share + allowed.saturating_sub(self.released_spread));
        let early = self.exec.early;
        let mut released = 0;
        while released < late_share {
            match self.waiting.last() {
                Some(e) if early || e.due <= now => {}
                _ => break,
            }
            let Some(e) = self.waiting.pop() else { break };
            self.release(e);
            released += 1;
        }
        while self.released_spread < allowed {
            match self.peek_admitted() {
                Some(e) if early || e.due <= now => {}
                _ => break,
            }
            let Some(e) = self.pop_admitted() else { break };
            self.released_spread += 1;
            self.release(e);
        }
    }

    fn peek_admitted(&mut self) -> Option<&Entry> {
        while self.admitted.last().is_some_and(Vec::is_empty) {
            self.admitted.pop();
        }
        self.admitted.last().and_then(|c| c.last())
    }

    fn pop_admitted(&mut self) -> Option<Entry> {
        loop {
            let chunk = self.admitted.last_mut()?;
            match chunk.pop() {
                Some(e) => return Some(e),
                None => {
                    self.admitted.pop();
                }
            }
        }
    }

    fn release(&mut self, e: Entry) {
        let order = self.exec.order;
        self.worst_dispatched = Some(match self.worst_dispatched {
            None => e.priority,
            Some(w) => match order {
                PriorityOrder::HighestFirst => w.min(e.priority),
                PriorityOrder::LowestFirst => w.max(e.priority),
            },
        });
        tracing::trace!(executor = &*self.exec.name, "keyway scheduler: released");
        self.exec.stats.released();
        self.dispatched += 1;
        self.batch
            .release(&self.exec, e.job, e.due, e.deadline, e.priority);
    }

    /// Tells the interval hook what the interval that just ended did.
    fn report(&mut self) {
        if !self.started {
            return;
        }
        let Some(hook) = self.exec.shared.interval_hook.clone() else {
            return;
        };
        let order = self.exec.order;
        let best_carried_over = self
            .carry
            .iter()
            .min_by(|a, b| better(order, a, b))
            .map(|e| e.priority);
        let report = IntervalReport {
            executor: self.exec.name.clone(),
            interval: self.interval,
            quota: self.quota,
            dispatched: self.dispatched,
            carried_over: self.carry.len() as u64,
            timed_out: self.timed_out,
            worst_dispatched: self.worst_dispatched,
            best_carried_over,
        };
        self.exec.contain(|| hook(&report));
    }

    /// `shutdown`: repeating tasks end (their handles say `Rejected`) instead of waiting for
    /// their next time; one-shot tasks stay.
    pub(crate) fn end_repeating(&mut self) {
        let repeats = self.exec.repeats.load(std::sync::atomic::Ordering::SeqCst);
        if repeats == self.swept_repeats {
            return; // no repeating task put back since the last sweep
        }
        self.swept_repeats = repeats;
        let mut gone = Vec::new();
        self.exec
            .buckets
            .remove_if(|e| e.job.is_repeating(), &mut gone);
        for list in self
            .admitted
            .iter_mut()
            .chain([&mut self.carry, &mut self.waiting])
        {
            if list.iter().any(|e| e.job.is_repeating()) {
                let (g, kept): (Vec<Entry>, Vec<Entry>) = std::mem::take(list)
                    .into_iter()
                    .partition(|e| e.job.is_repeating());
                *list = kept;
                gone.extend(g);
            }
        }
        self.spread = self
            .spread
            .min(self.admitted.iter().map(Vec::len).sum::<usize>() + self.released_spread);
        for e in gone {
            self.end_rejected(e);
        }
    }

    /// Shutdown: a task that is never due (scheduled `Duration::MAX` ahead) could never run,
    /// so a graceful shutdown, which waits for every task to end, ends it rejected instead of
    /// waiting for ever.
    pub(crate) fn end_never_due(&mut self) {
        let nevers = self.exec.nevers.load(std::sync::atomic::Ordering::SeqCst);
        if nevers == self.swept_nevers {
            return; // no such task put in since the last sweep
        }
        self.swept_nevers = nevers;
        let mut gone = Vec::new();
        self.exec.buckets.remove_if(|e| e.due == NEVER, &mut gone);
        for e in gone {
            self.end_rejected(e);
        }
    }

    /// Ends a task the driver will not release: rejected, unless its handle was cancelled
    /// meanwhile (then counted cancelled, as when it comes due).
    fn end_rejected(&self, e: Entry) {
        self.exec.stats.ended_unreleased();
        self.exec.reject(e.job);
    }

    /// The last handle is gone and this executor is paused (0 TPS): nobody can resume it, so
    /// its tasks could never run; they end rejected.
    pub(crate) fn end_if_paused_for_good(&mut self) {
        if self.exec.tps() != Some(0.0) {
            return;
        }
        let mut chunks = std::mem::take(&mut self.admitted);
        chunks.push(std::mem::take(&mut self.carry));
        chunks.push(std::mem::take(&mut self.waiting));
        self.exec.buckets.take_all(&mut chunks);
        self.spread = self.spread.min(self.released_spread);
        for e in chunks.into_iter().flatten() {
            self.end_rejected(e);
        }
    }

    /// `shutdown_now`: everything the driver holds or finds in the buckets comes back.
    pub(crate) fn hand_back(&mut self, out: &mut Vec<PendingTask>) {
        let mut chunks = std::mem::take(&mut self.admitted);
        chunks.push(std::mem::take(&mut self.carry));
        chunks.push(std::mem::take(&mut self.waiting));
        self.exec.buckets.take_all(&mut chunks);
        for e in chunks.into_iter().flatten() {
            if !e.job.is_live() || e.job.is_repeating() {
                // Cancelled: counted so, nothing to hand back. A repetition gives nothing
                // back either: it ends rejected, or cancelled if its handle was cancelled
                // first (claimed, so that a racing cancel cannot split the two).
                self.end_rejected(e);
                continue;
            }
            // Counted rejected as it is handed back, whatever is done with it then: a cancel
            // that lands after the check above is one done with the handed-back task.
            self.exec.stats.ended_unreleased();
            self.exec.stats.rejected();
            // What is dropped here (a key) is user code: contained.
            self.exec.contain(|| out.extend(e.job.into_pending()));
        }
    }

    /// The driver is exiting: the last interval's report.
    pub(crate) fn finish(&mut self) {
        self.report();
        self.started = false;
    }
}
