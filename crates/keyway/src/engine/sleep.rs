//! Idle workers: who sleeps, and how a producer wakes one without a lost wake-up.
//!
//! Protocol (a Dekker pair, both sides `SeqCst`):
//! 1. a worker that found no work pushes itself on the idle stack, increments `sleepers`, issues a
//!    `SeqCst` fence, and looks for work once more before it parks;
//! 2. a producer publishes its job, issues a `SeqCst` fence, then reads `sleepers`;
//! 3. while work is in flight (accepted, not finished), one idle worker at most *spins* (looks
//!    for work for about 100 µs) before step 1; a producer that sees it spinning wakes nobody.
//!    The spinner clears its flag, issues a `SeqCst` fence and looks once more before it takes
//!    a job or goes on to step 1; a job it takes with more work queued behind it wakes one
//!    sleeper (the producers woke none meanwhile).
//!
//! Either the worker's second look sees the job, or the producer sees `sleepers > 0` and pops a
//! worker to unpark; likewise a producer that saw the spinner's flag is seen by its last look (loom
//! model `loom_sleep_submit_vs_spinner`). The parker keeps an unpark that arrives before `park`, so
//! a worker popped between its second look and its `park` still wakes.
//!
//! One mutex guards the idle stack. A producer takes it only when `sleepers > 0`; measured
//! (2 cores, try-lock instrumentation): keyway-bench `throughput` and `contexts` runs
//! of 300,000-1,000,000 tasks took it 12-64 times per run, never contended; a worst case of 4
//! threads each submitting and joining 20,000 tasks one at a time on 2 workers took it 7,551
//! times, 40 of them contended. Not a bottleneck: no finer-grained structure is warranted.

use crate::loom::sync::atomic::{fence, AtomicBool, AtomicUsize, Ordering};
use crate::loom::sync::Mutex;

pub(crate) struct Sleep {
    sleepers: AtomicUsize,
    idle: Mutex<Vec<usize>>,
    /// One idle worker at most spins for a while before it sleeps, while work is in flight
    /// ([`try_spin`](Self::try_spin)); a producer then wakes nobody: the spinner takes the job.
    spinning: AtomicBool,
}

impl Sleep {
    pub(crate) fn new() -> Self {
        Sleep {
            sleepers: AtomicUsize::new(0),
            idle: Mutex::new(Vec::new()),
            spinning: AtomicBool::new(false),
        }
    }

    /// Step 1: `worker` is about to sleep. The caller must look for work again afterwards.
    pub(crate) fn announce(&self, worker: usize) {
        self.idle.lock().push(worker);
        self.sleepers.fetch_add(1, Ordering::SeqCst);
        fence(Ordering::SeqCst);
    }

    /// Takes `worker` off the idle stack; false if a producer already popped it (its unpark is
    /// then pending and the next park returns at once, which is harmless).
    pub(crate) fn withdraw(&self, worker: usize) -> bool {
        let mut idle = self.idle.lock();
        match idle.iter().rposition(|&w| w == worker) {
            Some(pos) => {
                idle.remove(pos);
                self.sleepers.fetch_sub(1, Ordering::SeqCst);
                true
            }
            None => false,
        }
    }

    /// True while `worker` is on the idle stack (announced, not yet popped nor withdrawn).
    pub(crate) fn is_idle(&self, worker: usize) -> bool {
        self.idle.lock().contains(&worker)
    }

    /// Makes the calling worker the spinner, unless another one is: true if it is now. The
    /// spinner looks for work, then calls [`stop_spinning`](Self::stop_spinning) before it
    /// takes a job or goes on to sleep.
    pub(crate) fn try_spin(&self) -> bool {
        self.spinning
            .compare_exchange(false, true, Ordering::SeqCst, Ordering::Relaxed)
            .is_ok()
    }

    /// The spinner stops spinning; the caller looks for work once more afterwards (the other
    /// half of step 2's pair: a producer that saw it spinning woke nobody).
    pub(crate) fn stop_spinning(&self) {
        self.spinning.store(false, Ordering::SeqCst);
        fence(Ordering::SeqCst);
    }

    /// Step 2: after publishing work, pops the most recently idle worker, if any, to unpark —
    /// none while a worker spins: it will find the work (it looks again after it stops).
    pub(crate) fn wake_one(&self) -> Option<usize> {
        fence(Ordering::SeqCst);
        if self.spinning.load(Ordering::SeqCst) || self.sleepers.load(Ordering::SeqCst) == 0 {
            return None;
        }
        let mut idle = self.idle.lock();
        let w = idle.pop()?;
        self.sleepers.fetch_sub(1, Ordering::SeqCst);
        Some(w)
    }

    /// Pops every idle worker.
    pub(crate) fn wake_all(&self) -> Vec<usize> {
        fence(Ordering::SeqCst);
        let mut idle = self.idle.lock();
        self.sleepers.fetch_sub(idle.len(), Ordering::SeqCst);
        std::mem::take(&mut *idle)
    }

    pub(crate) fn sleepers(&self) -> usize {
        self.sleepers.load(Ordering::SeqCst)
    }
}

#[cfg(all(test, loom))]
mod loom_sleep {
    //! The sleep/wake protocol with the pool's admission accounting, under loom: a worker that
    //! finds no work announces itself, looks again and parks; a submitter admits (counts
    //! `accepted`, then reads `closed`), publishes the job and wakes a sleeper; a closer sets
    //! `closed` and wakes everyone; the worker exits once closed with nothing pending. Every
    //! accepted job must run and the worker must exit: a lost wake-up leaves it parked for ever,
    //! which loom reports as a deadlock. (`Sleep` is the real one; admission, the queue and the
    //! worker loop are the registry's and the worker's logic, written out small.)
    //!
    //! loom treats `SeqCst` accesses as `AcqRel` (its documented limitation), under which the
    //! registry's admission argument (a total order of the `SeqCst` accesses to `accepted` and
    //! `closed`) does not hold; the model reads `closed` with a read-modify-write instead (it
    //! always reads the latest value and, acquire/release, chains the three threads), which
    //! gives loom the same order C11 gives the real `SeqCst` loads. `Sleep`'s own Dekker pair
    //! uses `SeqCst` fences, which loom models fully.

    use super::Sleep;
    use crate::loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering::*};
    use crate::loom::sync::{Arc, Mutex};
    use crate::loom::thread;

    struct Pool {
        sleep: Sleep,
        queue: AtomicUsize,
        accepted: AtomicUsize,
        finished: AtomicUsize,
        closed: AtomicBool,
        ran: AtomicUsize,
        worker: Mutex<Option<thread::Thread>>,
        /// The worker spins (`WorkerCtx::spin`) before it sleeps, and leaves once it ran this
        /// many jobs (nobody closes the pool: the submitter's wake-up is the only one).
        spin: Option<usize>,
    }

    impl Pool {
        fn unpark(&self, w: usize) {
            assert_eq!(w, 0);
            if let Some(t) = self.worker.lock().as_ref() {
                t.unpark();
            }
        }

        fn pending(&self) -> usize {
            let finished = self.finished.load(SeqCst);
            self.accepted.load(SeqCst) - finished
        }

        fn is_closed(&self) -> bool {
            self.closed.fetch_or(false, SeqCst)
        }

        fn drained(&self) -> bool {
            self.is_closed() && self.pending() == 0
        }

        fn has_work(&self) -> bool {
            self.queue.load(SeqCst) > 0 // crossbeam's `Injector::is_empty` loads are SeqCst
        }

        fn take(&self) -> bool {
            self.queue
                .fetch_update(AcqRel, Acquire, |n| n.checked_sub(1))
                .is_ok()
        }

        fn wake_all(&self) {
            for w in self.sleep.wake_all() {
                self.unpark(w);
            }
        }

        /// `Pool::execute`: admit, publish, wake one.
        fn submit(&self) -> bool {
            self.accepted.fetch_add(1, SeqCst);
            if self.is_closed() {
                self.accepted.fetch_sub(1, SeqCst);
                // `Registry::wake_if_drained`: the worker may have seen this one pending.
                if self.drained() {
                    self.wake_all();
                }
                return false;
            }
            self.queue.fetch_add(1, Release);
            if let Some(w) = self.sleep.wake_one() {
                self.unpark(w);
            }
            true
        }

        /// `Registry::close`.
        fn close(&self) {
            self.closed.swap(true, SeqCst);
            self.wake_all();
        }

        fn run_one(&self) {
            self.ran.fetch_add(1, Relaxed);
            self.finished.fetch_add(1, SeqCst); // `Registry::count_finished`
            if self.drained() {
                self.wake_all();
            }
        }

        /// `worker::run` and `WorkerCtx::idle`, without retiring (and without the spinner
        /// unless `spin`).
        fn work(&self) {
            // Known before it can be popped from the idle stack (the real unparker exists
            // before its thread).
            *self.worker.lock() = Some(thread::current());
            loop {
                if self.spin == Some(self.ran.load(Relaxed)) {
                    return;
                }
                if self.take() {
                    self.run_one();
                    continue;
                }
                if self.drained() {
                    return;
                }
                // `WorkerCtx::spin`, one look: the spinner, then a look after it stopped.
                if self.spin.is_some() && self.sleep.try_spin() {
                    let took = self.take();
                    self.sleep.stop_spinning();
                    if took || self.take() {
                        self.run_one();
                        continue;
                    }
                }
                self.sleep.announce(0);
                if self.has_work() || self.drained() {
                    self.sleep.withdraw(0);
                    continue;
                }
                thread::park();
                self.sleep.withdraw(0);
            }
        }
    }

    fn pool(spin: Option<usize>) -> Arc<Pool> {
        Arc::new(Pool {
            spin,
            sleep: Sleep::new(),
            queue: AtomicUsize::new(0),
            accepted: AtomicUsize::new(0),
            finished: AtomicUsize::new(0),
            closed: AtomicBool::new(false),
            ran: AtomicUsize::new(0),
            worker: Mutex::new(None),
        })
    }

    /// Runs `f` with a fresh pool and its one worker under loom (3 preemptions); `f` returns
    /// how many jobs were accepted. Every accepted job ran and the worker exited.
    fn check(f: fn(&Arc<Pool>) -> usize) {
        check_with(None, f);
    }

    fn check_with(spin: Option<usize>, f: fn(&Arc<Pool>) -> usize) {
        let mut builder = loom::model::Builder::new();
        builder.preemption_bound = Some(3);
        builder.check(move || {
            let pool = pool(spin);
            let worker = {
                let pool = pool.clone();
                thread::spawn(move || pool.work())
            };
            let accepted = f(&pool);
            worker.join().unwrap();
            assert_eq!(
                pool.ran.load(Relaxed),
                accepted,
                "an accepted job never ran"
            );
            assert_eq!(pool.pending(), 0);
        });
    }

    /// A submitter of two jobs, then the closer: every accepted job runs, the worker exits.
    #[test]
    fn loom_sleep_submit_vs_close() {
        check(|pool| {
            let submitter = {
                let pool = pool.clone();
                thread::spawn(move || usize::from(pool.submit()) + usize::from(pool.submit()))
            };
            let accepted = submitter.join().unwrap();
            pool.close();
            accepted
        });
    }

    /// The closer races the submitter: a job admitted before `closed` is seen still runs; one
    /// refused is not counted.
    #[test]
    fn loom_sleep_close_races_admission() {
        check(|pool| {
            let closer = {
                let pool = pool.clone();
                thread::spawn(move || pool.close())
            };
            let accepted = usize::from(pool.submit());
            closer.join().unwrap();
            accepted
        });
    }

    /// A submitter of two jobs races a worker that spins before it sleeps (a producer that
    /// sees it spinning wakes nobody), and nobody closes the pool: the submitter's wake-ups
    /// alone bring the worker to both jobs.
    #[test]
    fn loom_sleep_submit_vs_spinner() {
        check_with(Some(2), |pool| {
            usize::from(pool.submit()) + usize::from(pool.submit())
        });
    }
}
