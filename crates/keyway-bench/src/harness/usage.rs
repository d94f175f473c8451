//! What a run costs beside wall-clock time: the process's CPU time (user +
//! system, all threads) and its peak resident set size.
//!
//! One system runs at a time, so process-wide figures taken around a run are
//! that system's. The peak RSS is made per system by resetting the kernel's
//! high-water mark before the run: writing `5` to `/proc/self/clear_refs`
//! sets `VmHWM` back to the current RSS (Linux ≥ 4.0), and `VmHWM` read after
//! the run is then the most memory the process held while the system ran.
//!
//! A peak alone is not enough: memory an earlier run freed stays resident in
//! the allocator's free lists, and a run that reuses it touches no new page,
//! so its growth would read as nothing. The harness therefore hands the heap's
//! free pages back to the OS before every run ([`trim_heap`]); a run's growth
//! (peak less the RSS at its start) is then the memory that run itself made
//! resident, whichever system ran before it. The price is in its time: every
//! run makes its memory resident anew (page faults), as a fresh process does;
//! on `contexts --work 10` that added 1-11% to each row's median here, the
//! same for every row within noise. `KEYWAY_BENCH_TRIM=0` turns it off.

use std::time::Duration;

use super::alloc::Allocated;
use super::env::Disturbance;

/// CPU time the whole process has used so far (user + system, every thread),
/// or `None` where the OS does not tell.
pub fn cpu_time() -> Option<Duration> {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: `usage` points to writable memory of the right size; getrusage only writes it.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()) };
    if rc != 0 {
        return None;
    }
    // SAFETY: getrusage returned 0, so it filled the struct (it was zeroed anyway).
    let usage = unsafe { usage.assume_init() };
    let tv = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec.max(0) as u64) + Duration::from_micros(t.tv_usec.max(0) as u64)
    };
    Some(tv(usage.ru_utime) + tv(usage.ru_stime))
}

/// Hands every free page of the heap back to the OS (glibc's `malloc_trim(0)`, every arena), so
/// that the next run's allocations make pages resident anew instead of silently reusing what an
/// earlier run freed; `false` where the allocator offers no such call (then a run's RSS growth
/// may miss memory it reused).
pub fn trim_heap() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: malloc_trim takes the allocator's own locks and only releases free memory.
        unsafe { libc::malloc_trim(0) };
        true
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        false
    }
}

/// Set to `0` in the environment, the harness does not trim the heap before each run: a run
/// then reuses, unseen in its RSS growth, what earlier runs freed, and pays no page faults for
/// it (the bench's behaviour before it trimmed, for comparing times across that change).
pub const TRIM_ENV: &str = "KEYWAY_BENCH_TRIM";

/// Whether the harness trims the heap before each run (unless [`TRIM_ENV`] is `0`).
pub fn trim_wanted() -> bool {
    static WANTED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *WANTED.get_or_init(|| std::env::var_os(TRIM_ENV).is_none_or(|v| v != "0"))
}

/// Resets the process's RSS high-water mark to its current RSS; `false` where
/// that is not possible (then `VmHWM` keeps the process's lifetime peak).
pub fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// The process's peak RSS since the last reset, in KiB (`VmHWM`).
pub fn peak_rss_kib() -> Option<u64> {
    status_kib("VmHWM:")
}

/// The process's current RSS in KiB (`VmRSS`).
pub fn rss_kib() -> Option<u64> {
    status_kib("VmRSS:")
}

fn status_kib(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    parse_kib(&status, field)
}

/// The value of a `Field:   1234 kB` line of /proc/self/status, in KiB.
pub fn parse_kib(status: &str, field: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|line| line.strip_prefix(field))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
}

/// The cost of one timed region: taken by [`Usage::start`], finished by
/// [`Usage::stop`].
#[derive(Debug, Clone, Copy)]
pub struct Usage {
    cpu_at_start: Option<Duration>,
    rss_at_start: Option<u64>,
    allocated_at_start: Allocated,
    disturbance: Option<Disturbance>,
    reset: bool,
}

/// What a timed region cost.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Cost {
    /// CPU seconds (user + system) of the whole process during the region.
    pub cpu_s: Option<f64>,
    /// Peak RSS of the process during the region, in KiB.
    pub peak_rss_kib: Option<u64>,
    /// Peak RSS minus the RSS at the start of the region, in KiB: the memory
    /// the system itself took while it ran.
    pub rss_growth_kib: Option<u64>,
    /// Whether the peak could be reset at the start (otherwise the peak is
    /// the process's lifetime peak and `rss_growth_kib` is an upper bound).
    /// The start's RSS is read after the reset: growth = peak − that RSS.
    pub peak_reset: bool,
    /// What the process allocated during the region (every thread).
    pub allocated: Allocated,
    /// CPU seconds other processes used during the region (the machine's busy
    /// time less this process's).
    pub others_cpu_s: Option<f64>,
}

impl Usage {
    /// Starts measuring: resets the RSS peak and reads the CPU clock.
    pub fn start() -> Self {
        let reset = reset_peak_rss();
        Self {
            rss_at_start: rss_kib(),
            cpu_at_start: cpu_time(),
            allocated_at_start: Allocated::now(),
            disturbance: Disturbance::now(),
            reset,
        }
    }

    /// What the process used since [`Usage::start`].
    pub fn stop(self) -> Cost {
        let cpu_s = match (self.cpu_at_start, cpu_time()) {
            (Some(a), Some(b)) => Some(b.saturating_sub(a).as_secs_f64()),
            _ => None,
        };
        let allocated = Allocated::now().since(self.allocated_at_start);
        let others_cpu_s = self.disturbance.and_then(|d| d.others_since()).map(|o| o.0);
        let peak = peak_rss_kib();
        Cost {
            allocated,
            others_cpu_s,
            cpu_s,
            peak_rss_kib: peak,
            rss_growth_kib: peak
                .zip(self.rss_at_start)
                .map(|(p, s)| p.saturating_sub(s)),
            peak_reset: self.reset,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_status_fields() {
        let status = "VmPeak:\t  10 kB\nVmHWM:\t    2048 kB\nVmRSS:\t  1024 kB\n";
        assert_eq!(parse_kib(status, "VmHWM:"), Some(2048));
        assert_eq!(parse_kib(status, "VmRSS:"), Some(1024));
        assert_eq!(parse_kib(status, "VmSwap:"), None);
    }

    #[test]
    fn cpu_time_counts_a_busy_loop() {
        let Some(before) = cpu_time() else { return };
        let start = std::time::Instant::now();
        while start.elapsed() < Duration::from_millis(30) {
            std::hint::black_box(0u64);
        }
        let after = cpu_time().unwrap();
        assert!(after > before);
    }

    #[test]
    fn peak_rss_sees_memory_touched_in_the_region() {
        if rss_kib().is_none() || !reset_peak_rss() {
            return; // not Linux, or no clear_refs
        }
        let usage = Usage::start();
        let block = vec![1u8; 64 << 20];
        std::hint::black_box(&block);
        let cost = usage.stop();
        drop(block);
        // Other tests run concurrently, so only a lower bound holds.
        assert!(cost.rss_growth_kib.unwrap() >= 60 << 10, "{cost:?}");
    }
}
