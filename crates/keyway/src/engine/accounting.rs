//! Admission and accounting.
//!
//! Accounting rule (what makes shutdown exact): a task is *accepted* when [`Registry::admit`]
//! returns `Ok` and is *finished* when it ran, was skipped after `cancel`, was coalesced away,
//! or was handed back by `shutdown_now`. Admission increments `accepted` (SeqCst) *before* it
//! reads `closed` (SeqCst), and `close` stores `closed` before anyone sums `accepted`, so once the
//! pool is closed `accepted` never again grows for good, and `finished == accepted` means that
//! every accepted task is done.
//!
//! Finishing on a worker (the per-task hot path, when the pool has no `capacity`): a worker
//! counts the tasks it finished in its slot's own `finished` counter with a plain store (one
//! writer, no read-modify-write, no shared cache line) and checks nothing else; `pending` sums
//! those counters with the shared stripes. What a finish must also do, wake whoever waits for
//! `pending` to reach 0 (parked workers and the monitor once closed, `wait_idle` callers), is
//! deferred to [`Registry::finishes_published`], which every worker calls each time it runs out
//! of work and when it exits: pending can only reach 0 once no task runs, so some worker is then
//! on its way there. Its `SeqCst` fence, between the worker's counter stores and its reads of
//! `closed` and of the waiters' registrations, is one side of the same Dekker pattern the
//! read-modify-write gives the other finish paths (the loom model `loom_finish`). With a
//! `capacity`, a finish also frees room at once, so workers count as every other thread does.
//! Every count, on every thread, goes through [`Registry::count_finished`].

use std::sync::atomic::Ordering;

use super::registry::Registry;
use super::work::{NotPlain, Refusal};
use super::worker::WorkerCtx;

/// An admission's answer for a caller that does not time its task: a sampled (`Timed`) one is
/// accepted like any other.
#[inline(always)]
fn accepted_or_refused(admitted: Result<(), NotPlain>) -> Result<(), Refusal> {
    match admitted {
        Ok(()) | Err(NotPlain::Timed) => Ok(()),
        Err(NotPlain::Refused(why)) => Err(why),
    }
}

impl Registry {
    /// Accepts one task, or says why not. See the module doc for the ordering argument.
    ///
    /// Inlined: it only reads [`admit_timing`](Self::admit_timing)'s answer, and an out-of-line
    /// call around that call cost a typed lane's send 8 instructions (callgrind).
    #[inline]
    pub(crate) fn admit(&self) -> Result<(), Refusal> {
        accepted_or_refused(self.admit_timing())
    }

    /// [`admit`](Self::admit) for a caller that can time its task: `Err(Timed)` means accepted,
    /// and this task is one the pool's meter samples (wrap it with [`Registry::timed`]).
    ///
    /// One test decides whether admission does more than count: the count of this thread's
    /// stripe of `accepted` before this admission (the read-modify-write gives it for free),
    /// masked with `admit_mask`, is 0. With a `capacity` the mask is 0 (every admission looks
    /// at the room); with a meter alone it is the sampling less one, so one admission in the
    /// sampling (a power of two) of each stripe takes the extra path and is timed; with
    /// neither it is all ones, so only a stripe's first admission takes it, and finds nothing
    /// to do. A plain pool thus tests one word where it tested the capacity before timing
    /// existed, and a timed pool tests the same word. Not inlined (as `admit` was not before
    /// it): its callers on the submission path stay small enough to be inlined.
    pub(crate) fn admit_timing(&self) -> Result<(), NotPlain> {
        self.admit_counting()
    }

    /// [`admit`](Self::admit) inlined whole, for a send path that only counts (a typed lane's
    /// pinned send): the call [`admit_timing`](Self::admit_timing) keeps out of line cost that
    /// path about 18 instructions per message (callgrind), more than the inlined body adds.
    #[inline(always)]
    pub(crate) fn admit_inline(&self) -> Result<(), Refusal> {
        accepted_or_refused(self.admit_counting())
    }

    /// The one copy of admission's count and checks (see [`admit_timing`](Self::admit_timing)).
    #[inline(always)]
    fn admit_counting(&self) -> Result<(), NotPlain> {
        let before = self.accepted.incr_get();
        if self.closed.load(Ordering::SeqCst) {
            return Err(self.refuse_closed());
        }
        if before & self.config.admit_mask == 0 {
            return self.admit_extra(before);
        }
        Ok(())
    }

    /// The pool is closed: take the admission back.
    #[cold]
    fn refuse_closed(&self) -> NotPlain {
        self.accepted.decr();
        self.refused.fetch_add(1, Ordering::Relaxed);
        // A worker may have seen this admission pending and parked: tell it (loom_sleep).
        self.wake_if_drained();
        NotPlain::Refused(Refusal::Shutdown)
    }

    /// Admission's part beyond counting: the capacity's room, then the meter's sampling
    /// (`before`: the stripe's count before this admission).
    fn admit_extra(&self, before: u64) -> Result<(), NotPlain> {
        if let Some(cap) = self.config.capacity {
            // Compare-and-swap, never above `cap` even for a moment: a refusal then frees no
            // room, and wakes no submitter waiting for room. SeqCst, failure included: a
            // refused look is one side of the waiters' Dekker pattern (`waiters.rs`, Rule 2).
            let taken = self
                .queued
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |q| {
                    (q < cap).then_some(q + 1)
                });
            if taken.is_err() {
                self.accepted.decr();
                self.refused.fetch_add(1, Ordering::Relaxed);
                // An idle waiter may have seen this admission pending.
                self.waiters.released_idle();
                return Err(NotPlain::Refused(Refusal::Full));
            }
        }
        match &self.meter {
            Some(meter) if meter.sample(before) => Err(NotPlain::Timed),
            _ => Ok(()),
        }
    }

    /// Accepts up to `n` tasks at once (a batch): one count for all of them, and, with a
    /// `capacity`, the room for as many as fit — all `n` or none when `whole`. Answers how many
    /// were accepted (at least one, the head of the batch), or why none was. Batch tasks are
    /// not timed by the pool's meter. The ordering argument is [`admit`](Self::admit)'s.
    pub(crate) fn admit_many(&self, n: usize, whole: bool) -> Result<usize, Refusal> {
        if n == 0 {
            return Ok(0);
        }
        let all = n as u64;
        self.accepted.add(all);
        if self.closed.load(Ordering::SeqCst) {
            self.accepted.sub(all);
            self.refused.fetch_add(all, Ordering::Relaxed);
            self.wake_if_drained();
            return Err(Refusal::Shutdown);
        }
        let Some(cap) = self.config.capacity else {
            return Ok(n);
        };
        // As in `admit_extra`: never above `cap`, SeqCst on both sides.
        let taken = self
            .queued
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |q| {
                let room = cap.saturating_sub(q);
                let take = if whole && room < n { 0 } else { room.min(n) };
                (take > 0).then_some(q + take)
            })
            .map(|q| {
                let room = cap.saturating_sub(q);
                if whole {
                    n
                } else {
                    room.min(n)
                }
            });
        let took = taken.unwrap_or(0);
        if took < n {
            self.accepted.sub((n - took) as u64);
            self.refused.fetch_add((n - took) as u64, Ordering::Relaxed);
            // An idle waiter may have seen these admissions pending.
            self.waiters.released_idle();
        }
        taken.map_err(|_| Refusal::Full)
    }

    /// A started task left work behind (a future that has not completed): it stays pending, as
    /// one more accepted task, until it is counted finished. No refusal: it was accepted already.
    pub(crate) fn extend_task(&self) {
        if self.config.capacity.is_some() {
            self.queued.fetch_add(1, Ordering::SeqCst);
        }
        self.accepted.incr();
    }

    /// Takes back an admission whose task was handed back before it was queued.
    pub(crate) fn unadmit(&self) {
        if self.config.capacity.is_some() {
            self.queued.fetch_sub(1, Ordering::SeqCst);
        }
        self.accepted.decr();
        self.wake_if_drained();
    }

    /// `n` accepted tasks are done (ran, skipped, coalesced away, cancelled or handed back):
    /// the one place where a task is counted finished, on every kind of thread.
    ///
    /// * On `worker`, the worker running them (only that thread may name itself), with no
    ///   `capacity`: a plain store on the worker's slot counter (see "Finishing on a worker" in
    ///   the module doc); the wake-ups a finish may owe are
    ///   [`finishes_published`](Self::finishes_published)'s, which the worker calls before it
    ///   looks for sleep or exits.
    /// * Anywhere else (a reserved thread, `shutdown_now`'s drain, a coalescing submitter, a
    ///   future finished off the pool), or with a `capacity` (room is freed, and waiters for it
    ///   woken, at once): the shared stripes, and once the pool is closed, the finish that
    ///   leaves nothing pending wakes whoever waits for quiescence (parked workers, reserved
    ///   threads, the monitor), so `shutdown` never waits out a `keep_alive`.
    #[inline]
    pub(crate) fn count_finished(&self, n: usize, worker: Option<&WorkerCtx>) {
        if let (Some(cx), None) = (worker, self.config.capacity) {
            let c = &self.slots[cx.index].finished;
            c.store(
                c.load(Ordering::Relaxed).wrapping_add(n as u64),
                Ordering::Release,
            );
            return;
        }
        self.count_finished_shared(n);
    }

    /// [`count_finished`](Self::count_finished) off a worker's fast path: the shared stripes,
    /// room freed, whoever waits woken. Out of line, so that the inlined fast path in the
    /// lane runners (compiled in the user's crate) stays a load and a store.
    #[inline(never)]
    fn count_finished_shared(&self, n: usize) {
        if n == 0 {
            return;
        }
        if self.config.capacity.is_some() {
            self.queued.fetch_sub(n, Ordering::SeqCst);
        }
        self.finished.add(n as u64);
        self.wake_if_drained();
    }

    /// Called whenever `pending` drops (a task finished, or an admission was taken back): once
    /// the pool is closed and nothing is pending, wakes whoever waits for quiescence. Without
    /// it, a worker that saw the dropped count pending parks for a whole `keep_alive`.
    /// Also wakes whoever waits for room or for the pool to go idle (`waiters.rs`, Rule 2).
    fn wake_if_drained(&self) {
        if self.is_closed() && self.pending() == 0 {
            self.notify_all();
        }
        self.waiters.released();
    }

    /// Accepted tasks not yet done.
    pub(crate) fn pending(&self) -> u64 {
        let finished = self.finished_total();
        self.accepted.sum().saturating_sub(finished)
    }

    /// Every finish counted so far: the shared stripes and the workers' own counters.
    pub(crate) fn finished_total(&self) -> u64 {
        self.slots[..self.high_water()]
            .iter()
            .fold(self.finished.sum(), |acc, s| {
                acc.wrapping_add(s.finished.load(Ordering::SeqCst))
            })
    }

    /// A worker ran out of work or is leaving: the wake-ups its finishes since the last call
    /// may owe (see "Finishing on a worker" in the module doc).
    pub(crate) fn finishes_published(&self) {
        std::sync::atomic::fence(Ordering::SeqCst);
        self.wake_if_drained();
    }

    /// Waits until nothing accepted is pending, or until `deadline`; true if it came to that.
    /// On one of the pool's own threads, whose running task keeps the pool busy, it only looks.
    pub(crate) fn wait_idle_until(&self, deadline: Option<std::time::Instant>) -> bool {
        if self.on_own_thread() {
            return self.pending() == 0;
        }
        self.waiters.wait_idle(deadline, || self.pending() == 0)
    }
}
