//! The work of the `stream` scenario: message `i` of a run has key `i % keys` and is the
//! `i / keys + 1`-th message of its key (or, with a popularity, the key and place it draws),
//! and sleeps its own share of U(0, max) (an I/O call, say), or `max` exactly with fixed
//! work; an async handler awaits a tokio timer for it instead. Every system hands each message it reads to [`StreamRun::handle`] and counts
//! the messages it acknowledged with [`StreamRun::acked`]; the run then checks that every
//! message ran exactly once and (for the systems that promise it) each key's messages
//! started in order, and gives each message's end-to-end latency.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::latch::Completion;
use crate::once::TaskSet;
use crate::order::OrderCell;
use crate::popularity::Popularity;

/// The payload of message `i`: its index, in decimal.
pub fn payload_of(i: u64) -> String {
    i.to_string()
}

/// The work of message `i`: a pseudo-random share of `[0, max)`, the same for every system.
pub fn work_of(i: u64, max: Duration) -> Duration {
    let mut x = i.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    x ^= x >> 31;
    x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x ^= x >> 29;
    let nanos = max.as_nanos() as u64;
    if nanos == 0 {
        Duration::ZERO
    } else {
        Duration::from_nanos(x % nanos)
    }
}

/// The shared state of one run of a `stream` variant.
#[derive(Debug)]
pub struct StreamRun {
    /// Messages in the run.
    pub messages: u64,
    /// Distinct keys.
    pub keys: u64,
    /// The most work a message sleeps (the work is U(0, max)).
    pub max_work: Duration,
    /// Open loop: message `i` is due at `i × period` after the start; `None` when the
    /// stream is filled before the start (every message is due at the start).
    pub period: Option<Duration>,
    /// Whether the system promises key order (checked per key).
    pub ordered: bool,
    /// Every message's work is `max_work` exactly (an I/O call of a fixed time), not U(0, max).
    fixed_work: bool,
    /// Which key each message goes to when keys are not equally popular; `None`: message `i`
    /// goes to key `i % keys`.
    popularity: Option<Popularity>,
    ran: TaskSet,
    cells: Box<[OrderCell]>,
    /// Nanoseconds from the start to the end of each message's handling (0: not yet).
    finished_ns: Box<[AtomicU64]>,
    /// Open loop: nanoseconds from the start to when the producer sent each message
    /// (0: not recorded).
    sent_ns: Box<[AtomicU64]>,
    start: std::sync::OnceLock<Instant>,
    /// Opens when every message was acknowledged.
    pub done: Completion,
}

impl StreamRun {
    /// Fresh state for `messages` messages over `keys` keys.
    pub fn new(
        messages: u64,
        keys: u64,
        max_work: Duration,
        period: Option<Duration>,
        ordered: bool,
    ) -> Self {
        Self {
            messages,
            keys: keys.max(1),
            max_work,
            period,
            ordered,
            fixed_work: false,
            popularity: None,
            ran: TaskSet::new(messages),
            cells: (0..keys.max(1)).map(|_| OrderCell::default()).collect(),
            finished_ns: (0..messages).map(|_| AtomicU64::new(0)).collect(),
            sent_ns: (0..messages).map(|_| AtomicU64::new(0)).collect(),
            start: std::sync::OnceLock::new(),
            done: Completion::new(messages as usize),
        }
    }

    /// The same run with every message's work exactly `max_work`.
    pub fn with_fixed_work(mut self) -> Self {
        self.fixed_work = true;
        self
    }

    /// The same run with message keys drawn by `popularity` (over the run's keys and
    /// messages).
    pub fn with_popularity(mut self, popularity: Popularity) -> Self {
        self.keys = popularity.keys() as u64;
        self.cells = (0..self.keys).map(|_| OrderCell::default()).collect();
        self.popularity = Some(popularity);
        self
    }

    /// The key of message `i` (its index) and its sequence number within the key, from 1.
    pub fn key_seq(&self, i: u64) -> (u64, u64) {
        match &self.popularity {
            Some(p) => {
                let (key, seq) = p.order()[i as usize];
                (u64::from(key), u64::from(seq))
            }
            None => (i % self.keys, i / self.keys + 1),
        }
    }

    /// The key of message `i` as sent.
    pub fn key_name(&self, i: u64) -> String {
        format!("k{}", self.key_seq(i).0)
    }

    /// The work of message `i`.
    pub fn work(&self, i: u64) -> Duration {
        if self.fixed_work {
            self.max_work
        } else {
            work_of(i, self.max_work)
        }
    }

    /// Sets the instant latencies count from (the clock's start); the first call wins.
    pub fn started(&self, at: Instant) {
        let _ = self.start.set(at);
    }

    /// Nanoseconds after the start at which message `i` was due: 0, or its slot of the
    /// open-loop schedule.
    pub fn due_ns(&self, i: u64) -> u64 {
        self.period
            .map_or(0, |p| (p.as_nanos() as u64).saturating_mul(i))
    }

    /// When message `i` was due, for a run started at `start`.
    pub fn due(&self, start: Instant, i: u64) -> Instant {
        start + Duration::from_nanos(self.due_ns(i))
    }

    /// Handles the message whose payload is `payload`: marks it run (a second run fails),
    /// records its key's order, sleeps its work, and records when it finished.
    #[inline(never)]
    pub fn handle(&self, payload: &[u8]) -> Result<(), String> {
        let (i, work) = self.begin(payload)?;
        if !work.is_zero() {
            std::thread::sleep(work);
        }
        self.finish(i);
        Ok(())
    }

    /// As [`handle`](Self::handle), waiting on a tokio timer instead of sleeping (an async
    /// I/O call: the wait holds no thread). Must be polled inside a tokio runtime with its
    /// timer on.
    pub async fn handle_async(&self, payload: &[u8]) -> Result<(), String> {
        let (i, work) = self.begin(payload)?;
        if !work.is_zero() {
            tokio::time::sleep(work).await;
        }
        self.finish(i);
        Ok(())
    }

    /// The start of handling a message: its index, checked to run once, its key's order
    /// recorded; and the work it is to do.
    fn begin(&self, payload: &[u8]) -> Result<(u64, Duration), String> {
        let i: u64 = std::str::from_utf8(payload)
            .ok()
            .and_then(|s| s.parse().ok())
            .filter(|&i| i < self.messages)
            .ok_or_else(|| format!("a message with a bad payload: {payload:?}"))?;
        if !self.ran.mark(i) {
            let e = format!("message {i} ran twice");
            self.done.fail(e.clone());
            return Err(e);
        }
        if self.ordered {
            let (key, seq) = self.key_seq(i);
            self.cells[key as usize].record(seq);
        }
        Ok((i, self.work(i)))
    }

    /// Records when message `i`'s handling ended.
    fn finish(&self, i: u64) {
        let start = *self.start.get_or_init(Instant::now);
        let ns = start.elapsed().as_nanos().min(u64::MAX as u128 - 1) as u64 + 1;
        self.finished_ns[i as usize].store(ns, Ordering::Release);
    }

    /// Records that the producer sent messages `range` at `at` (the open loop's appends), so
    /// that each latency splits into the producer's lateness and what follows the append.
    pub fn sent(&self, range: std::ops::Range<u64>, at: Instant) {
        let Some(&start) = self.start.get() else {
            return;
        };
        let ns = at.saturating_duration_since(start).as_nanos() as u64 + 1;
        for i in range.filter(|&i| i < self.messages) {
            self.sent_ns[i as usize].store(ns, Ordering::Release);
        }
    }

    /// Counts `n` messages acknowledged in Redis.
    pub fn acked(&self, n: usize) {
        for _ in 0..n {
            self.done.count_down();
        }
    }

    /// The sum of every message's work: what one thread would take.
    pub fn total_work(&self) -> Duration {
        (0..self.messages).map(|i| self.work(i)).sum()
    }

    /// Checks that every message ran once and, for an ordered system, that each key's
    /// messages started in order.
    pub fn verify(&self) -> Result<(), String> {
        self.ran.verify()?;
        if self.ordered {
            for (key, cell) in self.cells.iter().enumerate() {
                let tasks = match &self.popularity {
                    Some(p) => p.tasks_of(key),
                    None => (self.messages + self.keys - 1 - key as u64) / self.keys,
                };
                cell.verify(tasks).map_err(|e| format!("key k{key}: {e}"))?;
            }
        }
        Ok(())
    }

    /// Each message's end-to-end latency in microseconds: from when it was due to when its
    /// handling ended.
    pub fn latencies_us(&self) -> Vec<u64> {
        (0..self.messages)
            .map(|i| self.finished_at(i).saturating_sub(self.due_ns(i)) / 1_000)
            .collect()
    }

    /// Open loop, each message's latency split at its append, in microseconds: the
    /// producer's lateness (from the slot to the send) and the delivery (from the send to the
    /// end of its handling). Empty when the sends were not recorded.
    pub fn split_latencies_us(&self) -> (Vec<u64>, Vec<u64>) {
        (0..self.messages)
            .filter_map(|i| {
                let sent = self.sent_ns[i as usize].load(Ordering::Acquire);
                let sent = sent.checked_sub(1)?;
                let late = sent.saturating_sub(self.due_ns(i)) / 1_000;
                Some((late, self.finished_at(i).saturating_sub(sent) / 1_000))
            })
            .unzip()
    }

    /// Nanoseconds from the start to the end of message `i`'s handling.
    fn finished_at(&self, i: u64) -> u64 {
        self.finished_ns[i as usize]
            .load(Ordering::Acquire)
            .saturating_sub(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_is_spread_over_the_range_with_the_right_mean() {
        let max = Duration::from_millis(5);
        let n = 20_000;
        let total: Duration = (0..n).map(|i| work_of(i, max)).sum();
        let mean_ms = total.as_secs_f64() * 1e3 / n as f64;
        assert!((mean_ms - 2.5).abs() < 0.05, "{mean_ms}");
        assert!((0..n).all(|i| work_of(i, max) < max));
        assert_eq!(work_of(7, Duration::ZERO), Duration::ZERO);
    }

    #[test]
    fn a_run_in_order_passes_and_latencies_are_recorded() {
        let run = StreamRun::new(10, 3, Duration::ZERO, None, true);
        run.started(Instant::now());
        for i in 0..10 {
            run.handle(payload_of(i).as_bytes()).unwrap();
        }
        run.acked(10);
        run.verify().unwrap();
        assert_eq!(run.done.remaining(), 0);
        assert_eq!(run.latencies_us().len(), 10);
    }

    #[test]
    fn a_key_out_of_order_a_duplicate_and_a_missing_message_are_caught() {
        let run = StreamRun::new(6, 2, Duration::ZERO, None, true);
        for i in [0, 1, 4, 3, 2, 5] {
            run.handle(payload_of(i).as_bytes()).unwrap();
        }
        let err = run.verify().unwrap_err();
        assert!(err.contains("key k0"), "{err}");

        let twice = StreamRun::new(3, 1, Duration::ZERO, None, false);
        twice.handle(b"1").unwrap();
        assert!(twice.handle(b"1").unwrap_err().contains("twice"));
        assert!(twice.handle(b"x").is_err());
        let err = twice.verify().unwrap_err();
        assert!(err.contains("did not run"), "{err}");
    }

    #[test]
    fn a_zipf_run_checks_order_within_each_drawn_key() {
        let run = StreamRun::new(200, 10, Duration::ZERO, None, true)
            .with_popularity(Popularity::zipf(10, 200, 1.1));
        let (hot, _) = run.key_seq(0);
        let mut by_key: Vec<Vec<u64>> = vec![Vec::new(); 10];
        for i in 0..200 {
            by_key[run.key_seq(i).0 as usize].push(i);
        }
        // Each key's messages in order passes; two of the busiest key swapped fails.
        for i in (0..10).flat_map(|k| by_key[k].clone()) {
            run.handle(payload_of(i).as_bytes()).unwrap();
        }
        run.verify().unwrap();
        let busiest = (0..10).max_by_key(|&k| by_key[k].len()).unwrap();
        assert!(by_key[busiest].len() > 20, "{hot}: {:?}", by_key[busiest]);
        let swapped = StreamRun::new(200, 10, Duration::ZERO, None, true)
            .with_popularity(Popularity::zipf(10, 200, 1.1));
        let mut order: Vec<u64> = (0..200).collect();
        let (a, b) = (by_key[busiest][0], by_key[busiest][1]);
        order.swap(a as usize, b as usize);
        for i in order {
            swapped.handle(payload_of(i).as_bytes()).unwrap();
        }
        assert!(swapped.verify().is_err());
    }

    #[test]
    fn fixed_work_is_the_same_for_every_message() {
        let run = StreamRun::new(5, 2, Duration::from_millis(3), None, false).with_fixed_work();
        assert!((0..5).all(|i| run.work(i) == Duration::from_millis(3)));
        assert_eq!(run.total_work(), Duration::from_millis(15));
    }

    #[test]
    fn open_loop_latency_counts_from_the_due_time() {
        let run = StreamRun::new(3, 1, Duration::ZERO, Some(Duration::from_millis(1)), false);
        let start = Instant::now();
        assert_eq!(run.due(start, 2), start + Duration::from_millis(2));
    }

    #[test]
    fn an_open_loop_latency_splits_at_the_send() {
        let period = Duration::from_millis(1);
        let run = StreamRun::new(2, 1, Duration::ZERO, Some(period), false);
        // Started 10 ms ago, so both messages end after their send.
        let start = Instant::now() - Duration::from_millis(10);
        run.started(start);
        assert_eq!(run.split_latencies_us(), (vec![], vec![]));
        // Message 1 is sent 3 ms late (4 ms after the start), both in one batch.
        run.sent(0..2, start + Duration::from_millis(4));
        for i in 0..2 {
            run.handle(payload_of(i).as_bytes()).unwrap();
        }
        let (late, delivery) = run.split_latencies_us();
        assert_eq!(late, vec![4_000, 3_000]);
        let total = run.latencies_us();
        for i in 0..2 {
            assert_eq!(late[i] + delivery[i], total[i], "message {i}");
        }
    }
}
