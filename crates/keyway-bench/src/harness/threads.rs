//! Counting the process's OS threads (Linux: `Threads:` in /proc/self/status).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// How often the sampler reads the thread count.
const SAMPLE_EVERY: Duration = Duration::from_millis(5);

/// The peak seen by the running [`Sampler`] and by [`sample_now`].
static PEAK: AtomicUsize = AtomicUsize::new(0);

/// Takes one sample now, on the calling thread, into the running sampler's
/// peak. Scenarios call it (untimed) at the moment their work completed, so
/// that runs shorter than the sampling period are still counted.
pub fn sample_now() {
    PEAK.fetch_max(current().unwrap_or(0), Ordering::Relaxed);
}

/// The process's current number of OS threads, where the OS tells it.
pub fn current() -> Option<usize> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    parse_threads(&status)
}

/// Extracts the `Threads:` count from the text of /proc/self/status.
pub fn parse_threads(status: &str) -> Option<usize> {
    status
        .lines()
        .find_map(|line| line.strip_prefix("Threads:"))
        .and_then(|n| n.trim().parse().ok())
}

/// Waits (untimed, up to 2 s) until the threads of the previous system have
/// exited, so they are not counted against the next one. Some pools (rayon)
/// let their threads exit asynchronously after the pool is dropped.
pub fn settle(baseline: usize) {
    let deadline = Instant::now() + Duration::from_secs(2);
    while current().is_some_and(|n| n > baseline) && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(1));
    }
}

/// A thread that samples the thread count every ~5 ms and keeps the peak.
/// One sampler runs at a time (the harness measures one system at a time).
#[derive(Debug)]
pub struct Sampler {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<()>,
}

impl Sampler {
    /// Starts sampling.
    pub fn start() -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        PEAK.store(0, Ordering::Relaxed);
        let handle = thread::Builder::new()
            .name("thread-sampler".into())
            .spawn(move || loop {
                sample_now();
                if flag.load(Ordering::Acquire) {
                    return;
                }
                thread::park_timeout(SAMPLE_EVERY);
            })
            .expect("spawn the thread sampler");
        Self { stop, handle }
    }

    /// Stops sampling and returns the peak thread count, not counting the
    /// sampler itself (0 where the OS does not tell).
    pub fn stop(self) -> usize {
        self.stop.store(true, Ordering::Release);
        self.handle.thread().unpark();
        let _ = self.handle.join();
        PEAK.load(Ordering::Relaxed).saturating_sub(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_threads_line() {
        let status = "Name:\tx\nState:\tR (running)\nThreads:\t17\nSigQ:\t0/1\n";
        assert_eq!(parse_threads(status), Some(17));
        assert_eq!(parse_threads("Name: x\n"), None);
    }

    #[test]
    fn sampler_sees_a_spawned_thread() {
        if current().is_none() {
            return; // not Linux
        }
        let sampler = Sampler::start();
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let extra = thread::spawn(move || rx.recv().ok());
        thread::sleep(Duration::from_millis(30));
        let peak = sampler.stop();
        drop(tx);
        extra.join().unwrap();
        // The test harness runs tests concurrently, so only a lower bound holds.
        assert!(peak >= 2, "peak {peak}");
    }
}
