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
//! **Searching workers.** A worker that runs out of work spins for more before it sleeps, and
//! counts itself in `searching` while it does. While any worker searches, a producer wakes
//! nobody: a searcher will find the job. That holds because a search ends (`stop_search`: the
//! count goes down, then a `SeqCst` fence, a second Dekker pair with step 2) before its worker
//! looks for work a last time, so a producer that saw the count up published its job before
//! that look. Whoever ends a search with a job in hand passes the wake-ups on:
//! * a searcher that got a job stops searching; if it was the last searcher and work is left,
//!   it wakes a sleeper (the producers woke nobody while it searched);
//! * a searcher that found nothing stops searching, then announces itself and looks again
//!   (step 1); if that look, or a wake-up, gives it a job, it too wakes a sleeper when work is
//!   left (it may have been the last searcher, so nobody else will).
//!
//! So a burst of jobs costs its producer no wake-up while a worker spins, and the workers wake
//! each other, each woken by one that took a job and saw more.
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
    /// Workers spinning for work (`start_search` to `stop_search`). Beside `sleepers`: a
    /// producer reads both.
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

    /// A worker out of work starts spinning for more: producers wake nobody until it ends the
    /// search with [`stop_search`](Self::stop_search).
    pub(crate) fn start_search(&self) {
        self.searching.fetch_add(1, Ordering::SeqCst);
    }

    /// Ends a search; true if it was the last one. The caller must look for work afterwards (a
    /// producer that saw this search woke nobody), and if it then takes a job with more left,
    /// wake a sleeper when it was the last searcher.
    pub(crate) fn stop_search(&self) -> bool {
        let last = self.searching.fetch_sub(1, Ordering::SeqCst) == 1;
        fence(Ordering::SeqCst);
        last
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

    /// Step 2: after publishing work, pops the most recently idle worker, if any, to unpark —
    /// unless a worker searches (it will find the work).
    pub(crate) fn wake_one(&self) -> Option<usize> {
        fence(Ordering::SeqCst);
        if self.searching.load(Ordering::SeqCst) > 0 || self.sleepers.load(Ordering::SeqCst) == 0 {
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

    /// Workers searching now (tests).
    #[cfg(test)]
    pub(crate) fn searching(&self) -> usize {
        self.searching.load(Ordering::SeqCst)
    }
}

#[cfg(all(test, loom))]
mod loom_sleep {
    //! The sleep/wake protocol with the pool's admission accounting, under loom: a worker that
    //! finds no work searches (one look), ends its search, announces itself, looks again and
    //! parks; a worker that took a job after searching wakes a sleeper if work is left (only the
    //! last searcher, while it still searched); a submitter admits (counts `accepted`, then
    //! reads `closed`), publishes the job and wakes a sleeper unless a worker searches; a closer
    //! sets `closed` and wakes everyone; a worker exits once closed with nothing pending. Every
    //! accepted job must run and every worker must exit: a lost wake-up leaves a worker (or a
    //! thread waiting for a job) blocked for ever, which loom reports as a deadlock. (`Sleep` is
    //! the real one; admission, the queue and the worker loop are the registry's and the
    //! worker's logic, written out small.)
    //!
    //! loom treats `SeqCst` accesses as `AcqRel` (its documented limitation), under which the
    //! registry's admission argument (a total order of the `SeqCst` accesses to `accepted` and
    //! `closed`) does not hold; the model reads `closed` with a read-modify-write instead (it
    //! always reads the latest value and, acquire/release, chains the three threads), which
    //! gives loom the same order C11 gives the real `SeqCst` loads. `Sleep`'s own Dekker pairs
    //! (sleepers, searching) use `SeqCst` fences, which loom models fully.

    use super::Sleep;
    use crate::loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering::*};
    use crate::loom::sync::{Arc, Condvar, Mutex};
    use crate::loom::thread;

    /// `WorkerCtx::search`.
    #[derive(Clone, Copy, PartialEq, Eq)]
    enum Search {
        Done,
        Searching,
        Searched,
    }

    /// Jobs started and jobs run, with the condition variable that announces each change.
    #[derive(Default)]
    struct Jobs {
        started: usize,
        ran: usize,
    }

    struct Pool {
        sleep: Sleep,
        queue: AtomicUsize,
        accepted: AtomicUsize,
        finished: AtomicUsize,
        closed: AtomicBool,
        workers: Mutex<Vec<Option<thread::Thread>>>,
        jobs: Mutex<Jobs>,
        changed: Condvar,
        /// Each job waits until two jobs have started: both must run at once, on two workers.
        together: bool,
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

        /// Blocks the caller until `n` jobs ran.
        fn wait_for(&self, n: usize) {
            let mut jobs = self.jobs.lock();
            while jobs.ran < n {
                jobs = self.changed.wait(jobs);
            }
        }

        /// The job's body: with `together`, it waits for a second job to start.
        fn run_job(&self) {
            let mut jobs = self.jobs.lock();
            jobs.started += 1;
            self.changed.notify_all();
            while self.together && jobs.started < 2 {
                jobs = self.changed.wait(jobs);
            }
            jobs.ran += 1;
            self.changed.notify_all();
        }

        /// `WorkerCtx::end_search`.
        fn end_search(&self, search: &mut Search, next: Search) -> bool {
            match std::mem::replace(search, next) {
                Search::Searching => self.sleep.stop_search(),
                _ => true,
            }
        }

        /// `worker::run` and `WorkerCtx::idle` for worker `w`, the spin one look, no retiring.
        fn work(&self, w: usize) {
            // Known before it can be popped from the idle stack (the real unparker exists
            // before its thread).
            self.workers.lock()[w] = Some(thread::current());
            let mut search = Search::Done;
            loop {
                if self.take() {
                    // `WorkerCtx::found_job`.
                    if search != Search::Done
                        && self.end_search(&mut search, Search::Done)
                        && self.has_work()
                    {
                        self.notify_one();
                    }
                    self.run_job();
                    self.finished.fetch_add(1, SeqCst); // `Registry::count_finished`
                    if self.drained() {
                        self.wake_all();
                    }
                    continue;
                }
                if search != Search::Searching {
                    self.sleep.start_search();
                    search = Search::Searching;
                }
                if self.has_work() {
                    continue;
                }
                self.end_search(&mut search, Search::Searched);
                if self.drained() {
                    self.wake_all();
                    break;
                }
                self.sleep.announce(w);
                if self.has_work() || self.drained() {
                    self.sleep.withdraw(w);
                    continue;
                }
                thread::park();
                self.sleep.withdraw(w);
            }
            self.end_search(&mut search, Search::Done);
        }
    }

    fn pool(workers: usize, together: bool) -> Arc<Pool> {
        Arc::new(Pool {
            sleep: Sleep::new(),
            queue: AtomicUsize::new(0),
            accepted: AtomicUsize::new(0),
            finished: AtomicUsize::new(0),
            closed: AtomicBool::new(false),
            workers: Mutex::new((0..workers).map(|_| None).collect()),
            jobs: Mutex::new(Jobs::default()),
            changed: Condvar::new(),
            together,
        })
    }

    /// Runs `f` with a fresh pool and its `workers` workers under loom (`preemptions`); `f`
    /// returns how many jobs were accepted. Every accepted job ran, every worker exited, and
    /// no search is left counted.
    fn check(workers: usize, together: bool, preemptions: usize, f: fn(&Arc<Pool>) -> usize) {
        let mut builder = loom::model::Builder::new();
        builder.preemption_bound = Some(preemptions);
        builder.check(move || {
            let pool = pool(workers, together);
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
            assert_eq!(pool.jobs.lock().ran, accepted, "an accepted job never ran");
            assert_eq!(pool.pending(), 0);
            assert_eq!(pool.sleep.searching(), 0, "a search outlived its worker");
        });
    }

    /// A submitter of two jobs, then the closer: every accepted job runs, the worker exits.
    #[test]
    fn loom_sleep_submit_vs_close() {
        check(1, false, 3, |pool| {
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
        check(1, false, 3, |pool| {
            let closer = {
                let pool = pool.clone();
                thread::spawn(move || pool.close())
            };
            let accepted = usize::from(pool.submit());
            closer.join().unwrap();
            accepted
        });
    }

    /// Two workers and two jobs that can only finish together (each waits for the other to
    /// start): the submitter wakes nobody while a worker searches, so a worker that takes the
    /// first job after searching must wake the sleeper for the second. A job left queued with
    /// one worker parked and the other waiting inside the first job is a lost wake-up: every
    /// thread then blocks for ever. The submitter closes the pool only after both jobs ran, so
    /// the closer's wake-everyone cannot hide one.
    #[test]
    fn loom_sleep_two_workers_run_two_jobs_together() {
        check(2, true, 2, |pool| {
            assert!(pool.submit());
            assert!(pool.submit());
            pool.wait_for(2);
            pool.close();
            2
        });
    }

    /// Two workers, the closer racing a submitter of two jobs: every accepted job runs, both
    /// workers exit, no search is left counted.
    #[test]
    fn loom_sleep_two_workers_submit_vs_close() {
        check(2, false, 2, |pool| {
            let submitter = {
                let pool = pool.clone();
                thread::spawn(move || usize::from(pool.submit()) + usize::from(pool.submit()))
            };
            pool.close();
            submitter.join().unwrap()
        });
    }
}
