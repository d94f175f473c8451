//! An open-loop schedule and its latency record (the `latency` scenario).
//!
//! Task `i` of a run is *intended* to be submitted at `start + i × period`, whatever happened to
//! the tasks before it: the producer waits for that time when it is early and submits at once
//! when it is late, and every delay is counted from the intended time. So a system that stalls
//! its producer (or its queue) cannot hide the stall by slowing the arrivals down (coordinated
//! omission): the tasks that should have arrived during the stall show it as their delay.
//!
//! Delays are recorded in HDR histograms (nanoseconds, 3 significant digits), in stripes picked
//! by thread: each thread records into a stripe of its own (threads take the stripes in turn, so
//! up to [`STRIPES`] threads never share one), whose lock and counters then stay in that
//! thread's cache instead of moving between the workers with the contexts they run. The producer
//! keeps its own lateness (from a task's intended time to its submit) in a histogram of its own
//! and hands it over once at the end ([`OpenLoop::add_late`]): it tells a system's own queueing
//! from a producer that did not get the CPU in time. A schedule made with
//! [`OpenLoop::tracking_submits`] also keeps each task's own submit time, and records each
//! start from it too (submit-to-start proper: the system's wait alone, without the producer's
//! lateness).

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

pub mod trace;

use trace::ProducerTrace;

/// Histogram stripes (threads take them in turn).
const STRIPES: usize = 16;

/// The stripe the next thread to record takes.
static NEXT_STRIPE: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// This thread's stripe (`usize::MAX`: not picked yet).
    static MY_STRIPE: Cell<usize> = const { Cell::new(usize::MAX) };
}

/// The calling thread's stripe.
fn my_stripe() -> usize {
    MY_STRIPE
        .try_with(|mine| {
            if mine.get() == usize::MAX {
                mine.set(NEXT_STRIPE.fetch_add(1, Ordering::Relaxed) % STRIPES);
            }
            mine.get()
        })
        .unwrap_or(0)
}
/// The largest delay recorded as itself (larger ones count as this): 100 s, in ns.
const HIGHEST_NS: u64 = 100_000_000_000;
/// Significant digits the histograms keep.
const DIGITS: u8 = 3;
/// A wait longer than this sleeps (less a margin) instead of spinning.
const SLEEP_OVER: Duration = Duration::from_micros(200);

/// No submit time recorded for this task (yet).
const NOT_SUBMITTED: u64 = u64::MAX;

/// One stripe: submit-to-start and submit-to-finish delays, and the latest finish.
#[derive(Debug)]
struct Stripe {
    start: Histogram<u64>,
    /// Delays from each task's actual submit to its start (tracked schedules only).
    from_submit: Histogram<u64>,
    finish: Histogram<u64>,
    last_finish_ns: u64,
    /// The largest start delay (µs) per millisecond of the run (empty: no trace).
    starts_us: Vec<u32>,
}

/// A stripe on cache lines of its own (a thread's records never touch another's lines).
#[derive(Debug)]
#[repr(align(128))]
struct Padded(Mutex<Option<Stripe>>);

/// The schedule of one open-loop run and the delays of its tasks.
#[derive(Debug)]
pub struct OpenLoop {
    period_ns: f64,
    start: OnceLock<Instant>,
    /// Taken out by [`summary`](Self::summary), so a leaked run keeps no histograms.
    stripes: Box<[Padded]>,
    /// The producer's lateness, handed over by [`add_late`](Self::add_late).
    late: Mutex<Option<Histogram<u64>>>,
    /// The producer thread's context switches, handed over by [`Pacer::finish`].
    producer: Mutex<Option<Switches>>,
    /// The producer's trace (see [`trace`]), handed over by [`Pacer::finish`].
    trace: Mutex<Option<ProducerTrace>>,
    /// Per task index, how late the producer submitted it (ns; [`NOT_SUBMITTED`]: not yet);
    /// empty unless made with [`tracking_submits`](Self::tracking_submits).
    submitted: Box<[AtomicU64]>,
}

/// What one open-loop run measured.
#[derive(Debug, Clone)]
pub struct Summary {
    /// Delays from each task's intended submit time to its start (ns).
    pub start: Histogram<u64>,
    /// Delays from each task's intended submit time to its finish (ns).
    pub finish: Histogram<u64>,
    /// Delays from each task's actual submit to its start (ns): `start` less the producer's
    /// lateness. Empty unless the schedule was made with [`OpenLoop::tracking_submits`].
    pub from_submit: Histogram<u64>,
    /// Delays from each task's intended submit time to the producer's submit of it (ns): the
    /// part of `start` the producer spent late.
    pub late: Histogram<u64>,
    /// The producer thread's context switches while it fed the run (`None`: not known here).
    pub producer: Option<Switches>,
    /// The run's trace, as text (`None`: not asked for; see [`trace`]).
    pub trace: Option<String>,
    /// CPU seconds other processes used while the run ran (`None`: not measured); a run that
    /// other work shared the cores with shows its delays, not the system's.
    pub others_cpu_s: Option<f64>,
    /// Tasks per second offered (the schedule's rate).
    pub offered: f64,
    /// Tasks per second achieved: tasks finished / time from the first intended submit to
    /// the last finish.
    pub achieved: f64,
}

impl OpenLoop {
    /// A schedule of `rate` tasks per second (at least one task per 100 s).
    pub fn new(rate: f64) -> Self {
        let rate = if rate.is_finite() {
            rate.max(0.01)
        } else {
            0.01
        };
        let stripe = || {
            let h = Self::histogram();
            Padded(Mutex::new(Some(Stripe {
                start: h.clone(),
                from_submit: h.clone(),
                finish: h,
                last_finish_ns: 0,
                starts_us: trace::threshold_ns().map_or_else(Vec::new, |_| trace::start_series()),
            })))
        };
        Self {
            period_ns: 1e9 / rate,
            start: OnceLock::new(),
            stripes: (0..STRIPES).map(|_| stripe()).collect(),
            late: Mutex::new(Some(Self::histogram())),
            producer: Mutex::new(None),
            trace: Mutex::new(None),
            submitted: Box::new([]),
        }
    }

    /// A schedule whose every task is due at its start: the producer submits as fast as it
    /// can, through the same loop (the [`Pacer`], the records) as on a paced schedule, so the
    /// rate a system sustains is measured with the open loop's own costs.
    pub fn unpaced() -> Self {
        Self {
            period_ns: 0.0,
            ..Self::new(1.0)
        }
    }

    /// The same schedule keeping the submit time of each of its first `tasks` tasks (8 bytes a
    /// task), so that [`summary`](Self::summary) also gives each start's delay from the task's
    /// actual submit.
    pub fn tracking_submits(mut self, tasks: u64) -> Self {
        self.submitted = (0..tasks).map(|_| AtomicU64::new(NOT_SUBMITTED)).collect();
        self
    }

    /// An empty histogram of the delays' bounds.
    pub fn histogram() -> Histogram<u64> {
        Histogram::new_with_bounds(1, HIGHEST_NS, DIGITS)
            .unwrap_or_else(|e| unreachable!("constant histogram bounds: {e}"))
    }

    /// Adds the producer's lateness (as a [`Pacer`] recorded it).
    pub fn add_late(&self, late: &Histogram<u64>) {
        let mut mine = self.late.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(mine) = mine.as_mut() {
            // Same bounds (`histogram`): adding cannot fail.
            let _ = mine.add(late);
        }
    }

    /// When task `index` is meant to be submitted (the schedule starts at the first call);
    /// `None` past the clock's range.
    fn intended(&self, index: u64) -> Option<Instant> {
        let start = *self.start.get_or_init(Instant::now);
        // `as` saturates: an index far beyond any run gives the largest offset, not a wrap.
        start.checked_add(Duration::from_nanos((index as f64 * self.period_ns) as u64))
    }

    /// The producer's side of the schedule: it waits for each task's turn and keeps the
    /// producer's lateness, handed over by [`Pacer::finish`].
    pub fn pacer(&self) -> Pacer<'_> {
        let start = *self.start.get_or_init(Instant::now);
        Pacer {
            start,
            trace: ProducerTrace::new(start),
            schedule: self,
            now_ns: 0,
            reuses_left: 0,
            late: Self::histogram(),
            switches_at_start: Switches::now(),
        }
    }

    /// Records task `index` (its place in the schedule), which started at `started` and
    /// finished at `finished`.
    pub fn record(&self, index: u64, started: Instant, finished: Instant) {
        let intended = self.intended(index).unwrap_or(finished);
        let ns = |t: Instant| t.saturating_duration_since(intended).as_nanos() as u64;
        let start = *self.start.get_or_init(Instant::now);
        let since_start = finished.saturating_duration_since(start).as_nanos() as u64;
        let mut stripe = self.stripes[my_stripe()]
            .0
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        // Gone only once the run was summarised, after its last task.
        let Some(s) = stripe.as_mut() else {
            return;
        };
        s.start.saturating_record(ns(started).max(1));
        if !s.starts_us.is_empty() {
            let at = started.saturating_duration_since(start).as_nanos() as u64;
            trace::note_start(&mut s.starts_us, at, ns(started));
        }
        let late = self
            .submitted
            .get(index as usize)
            .map_or(NOT_SUBMITTED, |slot| slot.load(Ordering::Acquire));
        if late != NOT_SUBMITTED {
            let from_submit = ns(started).saturating_sub(late);
            s.from_submit.saturating_record(from_submit.max(1));
        }
        s.finish.saturating_record(ns(finished).max(1));
        s.last_finish_ns = s.last_finish_ns.max(since_start);
    }

    /// Every stripe merged, once the run is over; the stripes are freed (a later call
    /// summarises nothing).
    pub fn summary(&self) -> Summary {
        let mut stripes = self
            .stripes
            .iter()
            .filter_map(|s| s.0.lock().unwrap_or_else(|e| e.into_inner()).take());
        let (mut start, mut from_submit, mut finish, mut last, mut starts_us) = match stripes.next()
        {
            Some(s) => (
                s.start,
                s.from_submit,
                s.finish,
                s.last_finish_ns,
                s.starts_us,
            ),
            None => {
                let h = Histogram::new(DIGITS)
                    .unwrap_or_else(|e| unreachable!("constant histogram digits: {e}"));
                (h.clone(), h.clone(), h, 0, Vec::new())
            }
        };
        for s in stripes {
            for (mine, theirs) in starts_us.iter_mut().zip(&s.starts_us) {
                *mine = (*mine).max(*theirs);
            }
            // Same bounds in every stripe: adding cannot fail.
            let _ = start.add(&s.start);
            let _ = from_submit.add(&s.from_submit);
            let _ = finish.add(&s.finish);
            last = last.max(s.last_finish_ns);
        }
        let tasks = start.len() as f64;
        let late = self
            .late
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
            .unwrap_or_else(Self::histogram);
        let producer = *self.producer.lock().unwrap_or_else(|e| e.into_inner());
        let trace = self.trace.lock().unwrap_or_else(|e| e.into_inner()).take();
        Summary {
            producer,
            trace: trace.map(|t| t.render(&starts_us)),
            others_cpu_s: None,
            late,
            offered: 1e9 / self.period_ns,
            achieved: if last == 0 {
                0.0
            } else {
                tasks * 1e9 / last as f64
            },
            start,
            from_submit,
            finish,
        }
    }
}

/// The producer's side of an [`OpenLoop`]: waits for each task's turn, and records how late it
/// came to it.
///
/// Ahead of its schedule, it sleeps while the next arrival is more than [`SLEEP_OVER`] away and
/// spins nearer to it (or always sleeps: [`PACE_ENV`]).
///
/// It costs the producer what it must and no more. A clock reading is an arrival's time only
/// while it is fresh: when the producer is behind, every arrival already due at the last reading
/// shares it, up to [`ARRIVALS_PER_READ`] of them, so a producer catching up reads the clock once
/// per several submits instead of once each. Such an arrival's lateness is counted to that
/// reading, short of its submit by the few submits between them (well under a microsecond);
/// its start delay, counted from its intended time by the task itself, is exact.
#[derive(Debug)]
pub struct Pacer<'a> {
    schedule: &'a OpenLoop,
    start: Instant,
    /// The last clock reading, in ns since the schedule's start.
    now_ns: u64,
    /// Arrivals that may still take `now_ns` as their time without a new reading.
    reuses_left: u32,
    late: Histogram<u64>,
    /// The producer thread's context switches when its pacer was made.
    switches_at_start: Option<Switches>,
    /// Its trace, when asked for ([`trace::TRACE_ENV`]).
    trace: Option<ProducerTrace>,
}

/// Context switches of one thread: how often it blocked or slept (voluntary) and how often the
/// kernel took the CPU from it while it could run (involuntary: preempted).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Switches {
    /// Times the thread gave the CPU up (blocked in a call, or slept).
    pub voluntary: u64,
    /// Times the thread was preempted.
    pub involuntary: u64,
}

impl Switches {
    /// The calling thread's counts so far (`None` where the OS does not tell).
    pub fn now() -> Option<Self> {
        #[cfg(target_os = "linux")]
        {
            let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
            // SAFETY: `usage` is writable memory of the right size; getrusage only writes it.
            let rc = unsafe { libc::getrusage(libc::RUSAGE_THREAD, usage.as_mut_ptr()) };
            // SAFETY: zeroed, and filled when getrusage returned 0.
            let usage = unsafe { usage.assume_init() };
            (rc == 0).then(|| Self {
                voluntary: usage.ru_nvcsw.max(0) as u64,
                involuntary: usage.ru_nivcsw.max(0) as u64,
            })
        }
        #[cfg(not(target_os = "linux"))]
        {
            None
        }
    }

    /// The switches between `earlier` and `self`.
    pub fn since(self, earlier: Self) -> Self {
        Self {
            voluntary: self.voluntary.saturating_sub(earlier.voluntary),
            involuntary: self.involuntary.saturating_sub(earlier.involuntary),
        }
    }
}

/// Set to `sleep` in the environment, a producer ahead of its schedule sleeps until its next
/// arrival however near it is, instead of spinning when it is within [`SLEEP_OVER`]. The
/// kernel's timer slack (50 µs by default) then wakes it late, to submit the arrivals due
/// meanwhile together: its lateness gets a floor of about that slack, but it no longer burns a
/// core while it waits, so on a machine with as many cores as the system has workers the
/// kernel stops preempting it for the workers (a spinning producer is a CPU-bound thread, which
/// a waking worker preempts for a time slice of milliseconds).
pub const PACE_ENV: &str = "KEYWAY_BENCH_PACE";

/// Whether producers sleep whenever they are ahead ([`PACE_ENV`] is `sleep`).
pub fn sleepy() -> bool {
    static SLEEPY: OnceLock<bool> = OnceLock::new();
    *SLEEPY.get_or_init(|| std::env::var(PACE_ENV).is_ok_and(|v| v == "sleep"))
}

/// Arrivals already due that share one clock reading of a producer behind its schedule.
pub const ARRIVALS_PER_READ: u32 = 8;

impl Pacer<'_> {
    /// Waits for task `index`'s turn (returns at once when it is due, or when its turn lies past
    /// the clock's range) and records the producer's lateness for it, `count` times (the
    /// tasks of a batch arrive together). Returns the lateness (ns; 0 past the clock's range).
    pub fn wait_turn(&mut self, index: u64, count: u64) -> u64 {
        let due = index as f64 * self.schedule.period_ns;
        if due >= u64::MAX as f64 {
            return 0;
        }
        let due = due as u64;
        if self.reuses_left == 0 || self.now_ns < due {
            self.read_until(due);
        } else {
            self.reuses_left -= 1;
        }
        let late = self.now_ns - due;
        if let Some(trace) = self.trace.as_mut() {
            trace.submitting(late);
        }
        if let Some(slot) = self.schedule.submitted.get(index as usize) {
            // Read by the task, after the submit that follows (which orders it).
            slot.store(late.min(NOT_SUBMITTED - 1), Ordering::Release);
        }
        self.late.saturating_record_n(late.max(1), count);
        late
    }

    /// Reads the clock until `due` (ns since the start) has come: sleeps while it is far, spins
    /// when it is near.
    fn read_until(&mut self, due: u64) {
        loop {
            let now = Instant::now();
            self.now_ns = now.saturating_duration_since(self.start).as_nanos() as u64;
            if let Some(trace) = self.trace.as_mut() {
                trace.reading(self.now_ns, due);
            }
            if self.now_ns >= due {
                self.reuses_left = ARRIVALS_PER_READ - 1;
                return;
            }
            let ahead = Duration::from_nanos(due - self.now_ns);
            let nap = if ahead > SLEEP_OVER {
                ahead - SLEEP_OVER / 2
            } else if sleepy() {
                ahead
            } else {
                Duration::ZERO
            };
            if !nap.is_zero() {
                if let Some(trace) = self.trace.as_mut() {
                    trace.sleeping(self.now_ns + nap.as_nanos() as u64);
                }
                std::thread::sleep(nap);
            } else {
                std::hint::spin_loop();
            }
        }
    }

    /// Hands the producer's lateness and its context switches since the pacer was made over to
    /// the schedule (on the producer's thread).
    pub fn finish(self) {
        self.schedule.add_late(&self.late);
        *self
            .schedule
            .trace
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = self.trace;
        if let (Some(start), Some(end)) = (self.switches_at_start, Switches::now()) {
            *self
                .schedule
                .producer
                .lock()
                .unwrap_or_else(|e| e.into_inner()) = Some(end.since(start));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_count_from_the_intended_time() {
        let ol = OpenLoop::new(1_000.0); // 1 ms apart
        let t0 = ol.intended(0).unwrap();
        // Task 10 was due at 10 ms; it started at 15 ms and finished at 16 ms.
        ol.record(
            10,
            t0 + Duration::from_millis(15),
            t0 + Duration::from_millis(16),
        );
        let s = ol.summary();
        assert_eq!(s.start.len(), 1);
        let start = s.start.max();
        assert!((4_990_000..=5_010_000).contains(&start), "{start}");
        let finish = s.finish.max();
        assert!((5_990_000..=6_010_000).contains(&finish), "{finish}");
        assert_eq!(s.offered, 1_000.0);
        // One task, finished 16 ms after the start.
        assert!((s.achieved - 62.5).abs() < 0.1, "{}", s.achieved);
    }

    /// `wait_turn` returns how late the producer came to a task; what the pacer recorded is
    /// in the summary once it finishes.
    #[test]
    fn the_producers_lateness_is_kept_apart() {
        let ol = OpenLoop::new(1_000.0); // 1 ms apart
        let t0 = ol.intended(0).unwrap();
        // Task 0 was due at the start: a late return, by the time since then.
        while Instant::now() < t0 + Duration::from_millis(2) {
            std::hint::spin_loop();
        }
        let mut pacer = ol.pacer();
        let late = pacer.wait_turn(0, 3);
        assert!(late >= 2_000_000, "{late}");
        // Task 1 is past due too (by 1 ms).
        assert!(pacer.wait_turn(1, 1) >= 1_000_000);
        pacer.finish();
        let s = ol.summary();
        assert_eq!(s.late.len(), 4);
        // The producer's context switches are handed over with its lateness.
        assert_eq!(s.producer.is_some(), Switches::now().is_some());
        assert!(s.late.max() >= 2_000_000);
        // Summarised once: a second summary has no lateness left.
        assert_eq!(ol.summary().late.len(), 0);
    }

    /// A tracked schedule records each start from the task's own submit as well: the
    /// producer's lateness is taken out of that delay, not out of the intended-time one.
    #[test]
    fn a_tracked_schedule_records_starts_from_the_submit() {
        let ol = OpenLoop::new(1_000.0).tracking_submits(4); // 1 ms apart
        let t0 = ol.intended(0).unwrap();
        // Task 2 is due at 2 ms; the producer comes to it 5 ms late (at 7 ms).
        while Instant::now() < t0 + Duration::from_millis(7) {
            std::hint::spin_loop();
        }
        let late = ol.pacer().wait_turn(2, 1);
        assert!(late >= 5_000_000, "{late}");
        let submit = t0 + Duration::from_millis(2) + Duration::from_nanos(late);
        // It starts 1 ms after its submit; task 3, never submitted, is not in `from_submit`.
        ol.record(
            2,
            submit + Duration::from_millis(1),
            submit + Duration::from_millis(2),
        );
        ol.record(3, t0, t0);
        let s = ol.summary();
        assert_eq!((s.start.len(), s.from_submit.len()), (2, 1));
        let from_submit = s.from_submit.max();
        assert!(
            (990_000..=1_010_000).contains(&from_submit),
            "{from_submit}"
        );
        assert!(s.start.max() >= late + 990_000);
        // An untracked schedule keeps no submit times.
        let plain = OpenLoop::new(1_000.0);
        plain.pacer().wait_turn(0, 1);
        plain.record(0, Instant::now(), Instant::now());
        assert_eq!(plain.summary().from_submit.len(), 0);
    }

    /// A producer behind its schedule reads the clock once for up to `ARRIVALS_PER_READ`
    /// arrivals already due, but never takes a reading for an arrival not yet due at it.
    #[test]
    fn a_late_producer_shares_a_clock_reading_but_never_runs_early() {
        let ol = OpenLoop::new(1e9); // 1 ns apart
        let t0 = ol.intended(0).unwrap();
        while Instant::now() < t0 + Duration::from_millis(1) {
            std::hint::spin_loop();
        }
        let mut pacer = ol.pacer();
        let late: Vec<u64> = (0..u64::from(ARRIVALS_PER_READ))
            .map(|i| pacer.wait_turn(i, 1))
            .collect();
        // One reading for all of them: each 1 ns less late than the one before.
        for (i, &l) in late.iter().enumerate() {
            assert_eq!(late[0] - l, i as u64, "{late:?}");
        }
        // At 1 ms apart, the next arrival is not due at any earlier reading: it is waited for.
        let paced = OpenLoop::new(1_000.0);
        let t0 = paced.intended(0).unwrap();
        let mut pacer = paced.pacer();
        pacer.wait_turn(0, 1);
        pacer.wait_turn(1, 1);
        assert!(Instant::now() >= t0 + Duration::from_millis(1));
        // An unpaced schedule: every arrival is due at the start.
        let unpaced = OpenLoop::unpaced();
        let t0 = unpaced.intended(0).unwrap();
        let mut pacer = unpaced.pacer();
        for i in 0..1_000 {
            pacer.wait_turn(i, 1);
        }
        assert!(Instant::now() < t0 + Duration::from_secs(1));
        pacer.finish();
        assert_eq!(unpaced.summary().late.len(), 1_000);
    }

    #[test]
    fn extreme_rates_and_delays_are_bounded() {
        for rate in [0.0, -1.0, f64::NAN, f64::INFINITY, 1e-9] {
            let ol = OpenLoop::new(rate);
            assert!(ol.period_ns.is_finite() && ol.period_ns > 0.0, "{rate}");
        }
        let ol = OpenLoop::new(1e12);
        let t0 = ol.intended(0).unwrap();
        // A start before the intended time counts as no delay; a huge one saturates.
        ol.record(5, t0, t0 + Duration::from_secs(1_000));
        let s = ol.summary();
        assert_eq!(s.start.len(), 1);
        assert!(s.finish.max() >= HIGHEST_NS / 2);
        // The largest index at the slowest rate: no overflow, whatever the clock's range.
        let slow = OpenLoop::new(0.0);
        let _ = slow.intended(u64::MAX);
        slow.record(u64::MAX, t0, t0);
        assert_eq!(slow.summary().start.len(), 1);
    }
}
