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

/// Waits until no thread of the process but the caller and the sampler is
/// running (state `R` in /proc/self/task/*/stat) on two reads in a row, or
/// until `limit` has passed; returns whether the threads went idle. Where
/// the OS does not tell, returns `true` at once.
pub fn wait_idle(limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    let mut quiet = 0;
    loop {
        match busy_others() {
            None => return true,
            Some(0) => quiet += 1,
            Some(_) => quiet = 0,
        }
        if quiet >= 2 {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        thread::sleep(Duration::from_micros(200));
    }
}

/// How many threads of the process other than the caller and the sampler
/// are running now.
fn busy_others() -> Option<usize> {
    // SAFETY: gettid has no preconditions.
    let me = unsafe { libc::gettid() }.to_string();
    let tasks = std::fs::read_dir("/proc/self/task").ok()?;
    let mut busy = 0;
    for task in tasks.flatten() {
        if task.file_name().to_str() == Some(me.as_str()) {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) else {
            continue; // the thread exited
        };
        if let Some((name, state)) = parse_stat(&stat) {
            if state == 'R' && name != "thread-sampler" {
                busy += 1;
            }
        }
    }
    Some(busy)
}

/// The thread name and state letter of a /proc/…/stat line.
pub fn parse_stat(stat: &str) -> Option<(&str, char)> {
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let name = stat.get(open + 1..close)?;
    let state = stat.get(close + 1..)?.trim_start().chars().next()?;
    Some((name, state))
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
    fn parses_a_stat_line() {
        let stat = "1234 (cb-pool (1)) S 1 2 3";
        assert_eq!(parse_stat(stat), Some(("cb-pool (1)", 'S')));
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn idle_wait_does_not_pass_a_spinning_thread() {
        if busy_others().is_none() {
            return; // not Linux
        }
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let spinner = thread::spawn(move || {
            while !flag.load(Ordering::Relaxed) {
                std::hint::spin_loop();
            }
        });
        // A spinning thread is running or runnable (`R`) all the time.
        assert!(!wait_idle(Duration::from_millis(50)));
        stop.store(true, Ordering::Relaxed);
        spinner.join().unwrap();
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
