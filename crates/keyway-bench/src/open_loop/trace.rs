//! A trace of where an open-loop run lost time, for a run that misses its tail (set
//! [`TRACE_ENV`] to a threshold in µs; off by default, and then it costs a branch per clock
//! reading).
//!
//! The producer's side: every gap longer than the threshold between two of its clock readings
//! (a producer that keeps up reads the clock before each submit, and every few submits when
//! behind, so such a gap is time it did not run: preempted, or blocked in a submit call), with
//! where it fell (spinning for its next arrival, or across submit calls), its voluntary and
//! involuntary context switches since the previous gap (`getrusage`), and how late it was
//! after; and its lateness, the largest in each millisecond of the run. The system's side: the
//! largest submit-to-start delay among the tasks that started in each millisecond. Times are
//! also given on `CLOCK_MONOTONIC` (as `perf record -k CLOCK_MONOTONIC` stamps its events) and
//! with the producer's thread id, so a gap can be looked up in a scheduler trace.

use std::sync::OnceLock;
use std::time::Instant;

use super::Switches;

/// Set to a number of µs: each open-loop run prints its trace (see the module) to stderr.
pub const TRACE_ENV: &str = "KEYWAY_BENCH_TRACE";

/// Milliseconds of a run its series cover (later times fall in the last).
const SERIES_MS: usize = 4_096;

/// The threshold of [`TRACE_ENV`], in ns (`None`: no trace).
pub fn threshold_ns() -> Option<u64> {
    static OVER: OnceLock<Option<u64>> = OnceLock::new();
    *OVER.get_or_init(|| {
        let us: u64 = std::env::var(TRACE_ENV).ok()?.parse().ok()?;
        Some(us.max(1) * 1_000)
    })
}

/// Where the producer was when it lost the CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// Spinning for its next arrival (it cannot block there: it was preempted).
    Spinning,
    /// Between two arrivals' readings: in submit calls and the loop's own bookkeeping.
    Submitting,
    /// Waking from a sleep later than it asked to.
    Oversleeping,
}

/// One gap between two of the producer's clock readings.
#[derive(Debug, Clone, Copy)]
pub struct Gap {
    /// The reading after the gap, in ns since the schedule's start.
    pub at_ns: u64,
    /// Its length (ns).
    pub len_ns: u64,
    pub place: Place,
    /// When the arrival the producer was waiting for after it was due (ns since the start).
    pub due_ns: u64,
    /// How late the producer was for that arrival (ns; 0: early).
    pub late_ns: u64,
    /// The producer's context switches since the previous gap (or the pacer's start).
    pub switches: Option<Switches>,
}

/// The producer's trace, kept by its pacer.
#[derive(Debug)]
pub struct ProducerTrace {
    over_ns: u64,
    /// The previous reading (ns since the start) and whether a submit came after it.
    last_ns: u64,
    submitted_since: bool,
    /// Where a sleep was meant to end (ns since the start), if the last wait was one.
    sleep_until: Option<u64>,
    switches: Option<Switches>,
    gaps: Vec<Gap>,
    /// The largest lateness (µs) per millisecond of the run.
    late_us: Vec<u32>,
    tid: i64,
    /// `CLOCK_MONOTONIC` at the schedule's start (ns).
    mono_start_ns: u64,
}

impl ProducerTrace {
    /// A trace for a producer whose schedule started at `start`, if [`TRACE_ENV`] asks.
    pub fn new(start: Instant) -> Option<Self> {
        threshold_ns().map(|over_ns| Self::with_threshold(start, over_ns))
    }

    /// A trace of gaps over `over_ns`.
    fn with_threshold(start: Instant, over_ns: u64) -> Self {
        let since = start.elapsed().as_nanos() as u64;
        Self {
            over_ns,
            last_ns: since,
            submitted_since: false,
            sleep_until: None,
            switches: Switches::now(),
            gaps: Vec::new(),
            late_us: vec![0; SERIES_MS],
            tid: thread_id(),
            mono_start_ns: monotonic_ns().saturating_sub(since),
        }
    }

    /// A clock reading `now_ns` (since the start), waiting for an arrival due at `due`.
    pub fn reading(&mut self, now_ns: u64, due: u64) {
        let (from, place) = match self.sleep_until.take() {
            Some(until) => (until, Place::Oversleeping),
            None if self.submitted_since => (self.last_ns, Place::Submitting),
            None => (self.last_ns, Place::Spinning),
        };
        let len_ns = now_ns.saturating_sub(from);
        if len_ns > self.over_ns {
            let switches = Switches::now();
            let delta = switches
                .zip(self.switches)
                .map(|(now, then)| now.since(then));
            self.switches = switches;
            self.gaps.push(Gap {
                at_ns: now_ns,
                len_ns,
                place,
                due_ns: due,
                late_ns: now_ns.saturating_sub(due),
                switches: delta,
            });
        }
        self.last_ns = now_ns;
        self.submitted_since = false;
    }

    /// The producer sleeps until `until_ns` (since the start).
    pub fn sleeping(&mut self, until_ns: u64) {
        self.sleep_until = Some(until_ns);
    }

    /// An arrival `late_ns` late is handed to the system (at the last reading).
    pub fn submitting(&mut self, late_ns: u64) {
        self.submitted_since = true;
        let slot = &mut self.late_us[window(self.last_ns)];
        *slot = (*slot).max((late_ns / 1_000).min(u64::from(u32::MAX)) as u32);
    }

    /// The trace as text, under a header naming the run.
    pub fn render(&self, starts_us: &[u32]) -> String {
        let mut out = format!(
            "# trace: producer tid {}, schedule start {:.6} s CLOCK_MONOTONIC, {} gaps over \
             {} µs\n",
            self.tid,
            self.mono_start_ns as f64 / 1e9,
            self.gaps.len(),
            self.over_ns / 1_000
        );
        for g in &self.gaps {
            let (vol, invol) = g.switches.map_or(("-".into(), "-".into()), |s| {
                (s.voluntary.to_string(), s.involuntary.to_string())
            });
            out += &format!(
                "#   gap at {:9.3} ms (mono {:.6}): {:8.1} µs {:12} before the arrival \
                 due at {:.3} ms (late {:.1} µs after); switches since last gap: {vol} vol, \
                 {invol} invol\n",
                g.at_ns as f64 / 1e6,
                (self.mono_start_ns + g.at_ns) as f64 / 1e9,
                g.len_ns as f64 / 1e3,
                format!("{:?}", g.place).to_lowercase(),
                g.due_ns as f64 / 1e6,
                g.late_ns as f64 / 1e3,
            );
        }
        out += &series("producer late, max µs per ms", &self.late_us, self.over_ns);
        out += &series("start delay, max µs per ms", starts_us, self.over_ns);
        out
    }
}

/// The millisecond of the series `ns` (since the start) falls in.
pub fn window(ns: u64) -> usize {
    ((ns / 1_000_000) as usize).min(SERIES_MS - 1)
}

/// An empty series of the system's start delays.
pub fn start_series() -> Vec<u32> {
    vec![0; SERIES_MS]
}

/// Notes a start delay of `delay_ns` in `series` at `at_ns` (since the start).
pub fn note_start(series: &mut [u32], at_ns: u64, delay_ns: u64) {
    if let Some(slot) = series.get_mut(window(at_ns)) {
        *slot = (*slot).max((delay_ns / 1_000).min(u64::from(u32::MAX)) as u32);
    }
}

/// The milliseconds of `series` over `over_ns`, as runs of `first-last: values` lines.
fn series(what: &str, values: &[u32], over_ns: u64) -> String {
    let over_us = (over_ns / 1_000) as u32;
    let last = values.iter().rposition(|&v| v > 0).map_or(0, |i| i + 1);
    let mut out = format!("# {what} over {over_us} (ms: values)\n");
    let mut i = 0;
    while i < last {
        if values[i] <= over_us {
            i += 1;
            continue;
        }
        let end = (i..last).find(|&j| values[j] <= over_us).unwrap_or(last);
        let shown: Vec<String> = values[i..end].iter().map(u32::to_string).collect();
        out += &format!("#   {i}-{}: {}\n", end - 1, shown.join(" "));
        i = end;
    }
    out
}

fn thread_id() -> i64 {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: gettid takes no arguments and cannot fail.
        unsafe { libc::syscall(libc::SYS_gettid) }
    }
    #[cfg(not(target_os = "linux"))]
    {
        0
    }
}

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; clock_gettime only writes it.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    if rc != 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A gap over the threshold is kept with where it fell; shorter ones are not; the series
    /// show the milliseconds over the threshold.
    #[test]
    fn gaps_over_the_threshold_are_kept_with_their_place() {
        let start = Instant::now();
        let mut t = ProducerTrace::with_threshold(start, 200_000);
        t.reading(100_000, 100_000);
        t.submitting(0);
        // 100 µs later: under the threshold.
        t.reading(200_000, 200_000);
        t.submitting(0);
        // 1 ms later, across a submit: 900 µs late for an arrival due at 0.3 ms.
        t.reading(1_200_000, 300_000);
        t.submitting(900_000);
        // Spinning, then 300 µs without a reading.
        t.reading(1_300_000, 1_600_000);
        t.reading(1_600_000, 1_600_000);
        // A sleep meant to end at 3 ms that ended at 3.5 ms.
        t.sleeping(3_000_000);
        t.reading(3_500_000, 3_000_000);
        let places: Vec<_> = t
            .gaps
            .iter()
            .map(|g| (g.place, g.len_ns, g.late_ns))
            .collect();
        assert_eq!(
            places,
            [
                (Place::Submitting, 1_000_000, 900_000),
                (Place::Spinning, 300_000, 0),
                (Place::Oversleeping, 500_000, 500_000),
            ]
        );
        let mut starts = start_series();
        note_start(&mut starts, 7_500_000, 4_000_000);
        let text = t.render(&starts);
        assert!(text.contains("3 gaps over 200"), "{text}");
        assert!(text.contains("#   1-1: 900"), "{text}");
        assert!(text.contains("#   7-7: 4000"), "{text}");
    }
}
