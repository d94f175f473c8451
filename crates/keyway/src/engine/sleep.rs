//! Idle workers: who sleeps, and how a producer wakes one without a lost wake-up.
//!
//! Protocol (a Dekker pair, both sides `SeqCst`):
//! 1. a worker that found no work pushes itself on the idle stack, increments `sleepers`, issues a
//!    `SeqCst` fence, and looks for work once more before it parks;
//! 2. a producer publishes its job, issues a `SeqCst` fence, then reads `searching` and
//!    `sleepers`.
//!
//! Either the worker's second look sees the job, or the producer sees `sleepers > 0` and pops a
//! worker to unpark. The parker keeps an unpark that arrives before `park`, so a worker popped
//! between its second look and its `park` still wakes.
//!
//! **Searching workers** (tokio's rule). A worker that runs out of work spins for more only if
//! no other worker does (`try_search`); the others park at once. A worker popped from the idle
//! stack is searching too, from the moment it is popped (the producer counts it), until it has a
//! job or parks again. While any worker searches, a producer wakes nobody: the searcher will
//! find the job. That holds because a searcher stops searching (`stop_search`: the count goes
//! down, then a `SeqCst` fence) before it looks for work a last time — a producer that saw the
//! count still up published its job before that fence, so the last look sees it:
//! * a searcher that found no job stops searching, then announces itself and looks again (step
//!   1) before it parks;
//! * a searcher that got a job stops searching, then looks whether work is left, and if so wakes
//!   a sleeper (who searches in turn): a run of jobs wakes workers one after another, each woken
//!   by the last that found work, instead of one producer waking all of them.
//!
//! So an idle pool burns one core at most spinning (measured before this rule: both workers of a
//! 2-core machine spun through every gap, 1.95 cores busy at 5% of the open-loop load), and a
//! burst of jobs costs its producer one wake-up. Every worker that leaves its loop drops the
//! search it holds.
//!
//! One mutex guards the idle stack. A producer takes it only when `sleepers > 0` and nobody
//! searches; measured (2 cores, try-lock instrumentation): keyway-bench `throughput` and
//! `contexts` runs of 300,000-1,000,000 tasks took it 12-64 times per run, never contended; a
//! worst case of 4 threads each submitting and joining 20,000 tasks one at a time on 2 workers
//! took it 7,551 times, 40 of them contended. Not a bottleneck: no finer-grained structure is
//! warranted.

use crate::loom::sync::atomic::{fence, AtomicUsize, Ordering};
use crate::loom::sync::Mutex;

pub(crate) struct Sleep {
    sleepers: AtomicUsize,
    /// Workers searching: at most one by choice (`try_search`), plus each worker popped from the
    /// idle stack until it has a job or parks again. Beside `sleepers`: a producer reads both.
    searching: AtomicUsize,
    idle: Mutex<Vec<usize>>,
}

impl Sleep {
    pub(crate) fn new() -> Self {
        Sleep {
            sleepers: AtomicUsize::new(0),
            searching: AtomicUsize::new(0),
            idle: Mutex::new(Vec::new()),
        }
    }

    /// Step 1: `worker` is about to sleep. The caller must look for work again afterwards.
    pub(crate) fn announce(&self, worker: usize) {
        self.idle.lock().push(worker);
        self.sleepers.fetch_add(1, Ordering::SeqCst);
        fence(Ordering::SeqCst);
    }

    /// Takes `worker` off the idle stack; false if a producer already popped it (its unpark is
    /// then pending and the next park returns at once, which is harmless; it holds a search,
    /// counted by whoever popped it).
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

    /// A worker out of work becomes the searcher, unless a worker searches already (then it
    /// should park at once). True: it holds a search, to end with [`stop_search`](Self::stop_search).
    pub(crate) fn try_search(&self) -> bool {
        self.searching.load(Ordering::Relaxed) == 0
            && self
                .searching
                .compare_exchange(0, 1, Ordering::SeqCst, Ordering::Relaxed)
                .is_ok()
    }

    /// Ends a search (one from `try_search`, or the one a worker was popped with). The caller
    /// must look for work once more afterwards: a producer that saw this search woke nobody.
    pub(crate) fn stop_search(&self) {
        self.searching.fetch_sub(1, Ordering::SeqCst);
        fence(Ordering::SeqCst);
    }

    /// Step 2: after publishing work, pops the most recently idle worker, if any, to unpark —
    /// unless a worker searches. The popped worker is searching from now on.
    pub(crate) fn wake_one(&self) -> Option<usize> {
        fence(Ordering::SeqCst);
        if self.searching.load(Ordering::SeqCst) > 0 || self.sleepers.load(Ordering::SeqCst) == 0 {
            return None;
        }
        let mut idle = self.idle.lock();
        let w = idle.pop()?;
        self.searching.fetch_add(1, Ordering::SeqCst);
        self.sleepers.fetch_sub(1, Ordering::SeqCst);
        Some(w)
    }

    /// Pops every idle worker (each then searching).
    pub(crate) fn wake_all(&self) -> Vec<usize> {
        fence(Ordering::SeqCst);
        let mut idle = self.idle.lock();
        self.searching.fetch_add(idle.len(), Ordering::SeqCst);
        self.sleepers.fetch_sub(idle.len(), Ordering::SeqCst);
        std::mem::take(&mut *idle)
    }

    pub(crate) fn sleepers(&self) -> usize {
        self.sleepers.load(Ordering::SeqCst)
    }

    /// Workers searching now (tests).
    #[cfg(test)]
    pub(crate) fn searching(&self) -> usize {
        self.searching.load(Ordering::SeqCst)
    }
}

#[cfg(all(test, loom))]
mod loom_sleep {
    //! The sleep/wake protocol with the pool's admission accounting, under loom: a worker that
    //! finds no work searches (if no other worker does: one look here, the spin in the real
    //! loop), stops searching, announces itself, looks again and parks; a submitter admits
    //! (counts `accepted`, then reads `closed`), publishes the job and wakes a sleeper unless a
    //! worker searches; a worker that got a job while searching stops searching and wakes the
    //! next if work is left; a closer sets `closed` and wakes everyone; a worker exits once
    //! closed with nothing pending. Every accepted job must run and every worker must exit: a
    //! lost wake-up leaves a worker (or the waiting submitter) parked for ever, which loom
    //! reports as a deadlock. (`Sleep` is the real one; admission, the queue and the worker loop
    //! are the registry's and the worker's logic, written out small.)
    //!
    //! loom treats `SeqCst` accesses as `AcqRel` (its documented limitation), under which the
    //! registry's admission argument (a total order of the `SeqCst` accesses to `accepted` and
    //! `closed`) does not hold; the model reads `closed` with a read-modify-write instead (it
    //! always reads the latest value and, acquire/release, chains the three threads), which
    //! gives loom the same order C11 gives the real `SeqCst` loads. `Sleep`'s own Dekker pairs
    //! (sleepers, searching) use `SeqCst` fences, which loom models fully.

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
        workers: Mutex<Vec<Option<thread::Thread>>>,
        /// A submitter waiting for its jobs to run (`waits_for_jobs`), unparked by each run.
        waiter: Mutex<Option<thread::Thread>>,
    }

    impl Pool {
        fn unpark(&self, w: usize) {
            if let Some(t) = self.workers.lock()[w].as_ref() {
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

        fn notify_one(&self) {
            if let Some(w) = self.sleep.wake_one() {
                self.unpark(w);
            }
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
            self.notify_one();
            true
        }

        /// `Registry::close`.
        fn close(&self) {
            self.closed.swap(true, SeqCst);
            self.wake_all();
        }

        /// Parks the calling submitter until `n` jobs ran. Its handle is taken back, under the
        /// lock a worker unparks it under, before it returns: loom takes an unpark that reaches
        /// a thread blocked in `join` for a wake-up of that `join`.
        fn wait_for(&self, n: usize) {
            loop {
                let mut waiter = self.waiter.lock();
                if self.ran.load(SeqCst) >= n {
                    *waiter = None;
                    return;
                }
                *waiter = Some(thread::current());
                drop(waiter);
                thread::park();
            }
        }

        /// `worker::run` and `WorkerCtx::idle` (one look for the spin, no retiring) for worker
        /// `w`; `searching` is `WorkerCtx::searching`.
        fn work(&self, w: usize) {
            // Known before it can be popped from the idle stack (the real unparker exists
            // before its thread).
            self.workers.lock()[w] = Some(thread::current());
            let mut searching = false;
            let stop = |searching: &mut bool| {
                if std::mem::take(searching) {
                    self.sleep.stop_search();
                }
            };
            loop {
                if self.take() {
                    // `WorkerCtx::found_job`.
                    if searching {
                        stop(&mut searching);
                        if self.has_work() {
                            self.notify_one();
                        }
                    }
                    let waiter = self.waiter.lock();
                    self.ran.fetch_add(1, SeqCst);
                    if let Some(t) = waiter.as_ref() {
                        t.unpark();
                    }
                    drop(waiter);
                    self.finished.fetch_add(1, SeqCst); // `Registry::count_finished`
                    if self.drained() {
                        self.wake_all();
                    }
                    continue;
                }
                if self.drained() {
                    break;
                }
                if searching || self.sleep.try_search() {
                    searching = true;
                    if self.has_work() {
                        continue;
                    }
                    stop(&mut searching);
                }
                if self.drained() {
                    break;
                }
                self.sleep.announce(w);
                if self.has_work() || self.drained() {
                    searching |= !self.sleep.withdraw(w);
                    continue;
                }
                thread::park();
                searching |= !self.sleep.withdraw(w);
            }
            stop(&mut searching);
        }
    }

    fn pool(workers: usize) -> Arc<Pool> {
        Arc::new(Pool {
            sleep: Sleep::new(),
            queue: AtomicUsize::new(0),
            accepted: AtomicUsize::new(0),
            finished: AtomicUsize::new(0),
            closed: AtomicBool::new(false),
            ran: AtomicUsize::new(0),
            workers: Mutex::new((0..workers).map(|_| None).collect()),
            waiter: Mutex::new(None),
        })
    }

    /// Runs `f` with a fresh pool and its `workers` workers under loom (`preemptions`); `f`
    /// returns how many jobs were accepted. Every accepted job ran, every worker exited, and
    /// no search is left.
    fn check(workers: usize, preemptions: usize, f: fn(&Arc<Pool>) -> usize) {
        let mut builder = loom::model::Builder::new();
        builder.preemption_bound = Some(preemptions);
        builder.check(move || {
            let pool = pool(workers);
            let handles: Vec<_> = (0..workers)
                .map(|w| {
                    let pool = pool.clone();
                    thread::spawn(move || pool.work(w))
                })
                .collect();
            let accepted = f(&pool);
            for h in handles {
                h.join().unwrap();
            }
            assert_eq!(
                pool.ran.load(Relaxed),
                accepted,
                "an accepted job never ran"
            );
            assert_eq!(pool.pending(), 0);
            assert_eq!(pool.sleep.searching(), 0, "a search outlived its worker");
        });
    }

    /// A submitter of two jobs, then the closer: every accepted job runs, the worker exits.
    #[test]
    fn loom_sleep_submit_vs_close() {
        check(1, 3, |pool| {
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
        check(1, 3, |pool| {
            let closer = {
                let pool = pool.clone();
                thread::spawn(move || pool.close())
            };
            let accepted = usize::from(pool.submit());
            closer.join().unwrap();
            accepted
        });
    }

    /// Two workers, one of them searching, the other parking; the submitter wakes nobody while
    /// one searches, and waits (parked) for both jobs to run before it closes the pool. A job
    /// left queued with every worker parked and no search under way is a lost wake-up: the
    /// submitter then waits for ever. Closing only after the jobs ran keeps the closer's
    /// wake-everyone from hiding one.
    #[test]
    fn loom_sleep_searcher_and_sleeper() {
        check(2, 2, |pool| {
            assert!(pool.submit());
            assert!(pool.submit());
            pool.wait_for(2);
            pool.close();
            2
        });
    }
}
