//! The rate-limited scheduler: limits per interval, priority, timeouts, cancel, repetition,
//! pause and resume, changing the limit, contexts, bad input, panics and shutdown.
//!
//! Intervals are 100 ms (the 1 s default scaled down). Nothing asserts a wall-clock time:
//! counts per interval come from the interval hook and are cross-checked against what the
//! tasks themselves recorded.

use crate::common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Receiver};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{Latch, HANG};
use keyway::{
    ConfigError, ExecutorConfig, IntervalReport, Pool, PriorityOrder, ScheduleError, Scheduler,
    TaskError, Timing,
};
use rand::seq::SliceRandom;
use rand::SeedableRng;

const INTERVAL: Duration = Duration::from_millis(100);

fn pool(threads: usize) -> Pool {
    Pool::builder()
        .core_threads(threads)
        .max_threads(threads)
        .build()
        .unwrap()
}

/// A scheduler with one executor whose interval reports arrive on the returned channel.
fn with_reports(pool: &Pool, config: ExecutorConfig) -> (Scheduler, Receiver<IntervalReport>) {
    let (tx, rx) = channel();
    let tx = Mutex::new(tx);
    let s = Scheduler::builder(pool)
        .interval(INTERVAL)
        .executor("x", config)
        .interval_hook(move |r| {
            let _ = tx.lock().unwrap().send(r.clone());
        })
        .build()
        .unwrap();
    (s, rx)
}

/// A scheduler with one executor `x` and 10 ms intervals.
fn fast(pool: &Pool, config: ExecutorConfig) -> Scheduler {
    Scheduler::builder(pool)
        .interval(Duration::from_millis(10))
        .executor("x", config)
        .build()
        .unwrap()
}

/// Schedules one task per priority, all due at once on one context (so they run one at a
/// time, in the order they are released), each logging its priority.
#[allow(clippy::type_complexity)]
fn by_priority_on_one_context(
    s: &Scheduler,
    prios: &[i64],
) -> (Arc<Mutex<Vec<i64>>>, Vec<keyway::TaskHandle<()>>) {
    let log = Arc::new(Mutex::new(Vec::new()));
    let at = Instant::now() + INTERVAL;
    let handles = prios
        .iter()
        .map(|&p| {
            let log = log.clone();
            s.schedule_sequential("x", Timing::at(at).priority(p), 0, move || {
                log.lock().unwrap().push(p)
            })
            .unwrap()
        })
        .collect();
    (log, handles)
}

fn next_report(rx: &Receiver<IntervalReport>) -> IntervalReport {
    rx.recv_timeout(HANG)
        .expect("no interval report: the driver hangs")
}

/// Waits (on the handles, not the clock) until every task has ended.
fn join_all<T>(handles: Vec<keyway::TaskHandle<T>>) -> Vec<Result<T, TaskError>> {
    handles.into_iter().map(|h| h.join()).collect()
}

#[test]
fn limit_1000_tps_runs_100_per_100ms_interval() {
    let pool = pool(2);
    let ran = Arc::new(AtomicUsize::new(0));
    // Each report comes with how many tasks had run when it was made: on the driver's thread,
    // before anything of the next interval is released.
    let (tx, rx) = channel();
    let tx = Mutex::new(tx);
    let seen = ran.clone();
    let s = Scheduler::builder(&pool)
        .interval(INTERVAL)
        .executor("x", ExecutorConfig::with_tps(1000.0))
        .interval_hook(move |r| {
            let _ = tx
                .lock()
                .unwrap()
                .send((r.clone(), seen.load(Ordering::SeqCst) as u64));
        })
        .build()
        .unwrap();
    let at = Instant::now() + INTERVAL;
    let handles: Vec<_> = (0..5000)
        .map(|_| {
            let ran = ran.clone();
            s.schedule_at("x", at, move || ran.fetch_add(1, Ordering::SeqCst))
                .unwrap()
        })
        .collect();
    let mut full = 0;
    let mut released = 0u64;
    while released < 5000 {
        let (r, ran_by_then) = rx.recv_timeout(HANG).expect("no interval report");
        // Tasks cannot run before they are released: a one-sided check that cannot flake.
        assert!(
            ran_by_then <= released + r.dispatched,
            "more ran than released"
        );
        released += r.dispatched;
        if r.dispatched > 0 && r.carried_over > 0 {
            // A full interval: the limit, within 1% (100 ± 1).
            assert!(
                (99..=101).contains(&r.dispatched),
                "interval {} released {}",
                r.interval,
                r.dispatched
            );
            assert_eq!(r.quota, Some(100));
            full += 1;
        }
    }
    assert!(full >= 4, "only {full} full intervals");
    assert!(join_all(handles).iter().all(Result::is_ok));
    assert_eq!(ran.load(Ordering::SeqCst), 5000);
    s.shutdown();
    let st = s.stats("x").unwrap();
    assert_eq!((st.scheduled, st.ran, st.pending), (5000, 5000, 0));
}

#[test]
fn the_best_run_first_and_the_carried_over_later_none_lost() {
    for seed in 0..3u64 {
        // On one context: tasks run one at a time in the order they are released.
        let pool = pool(2);
        // Paused while the tasks are scheduled, so that all of them compete from the start.
        let (s, rx) = with_reports(&pool, ExecutorConfig::with_tps(0.0));
        let mut prios: Vec<i64> = (0..350).collect();
        prios.shuffle(&mut rand::rngs::SmallRng::seed_from_u64(seed));
        let (log, handles) = by_priority_on_one_context(&s, &prios);
        s.set_tps("x", 1000.0).unwrap();
        let mut released = 0;
        while released < 350 {
            let r = next_report(&rx);
            released += r.dispatched;
            if let (Some(ran), Some(waiting)) = (r.worst_dispatched, r.best_carried_over) {
                assert!(ran > waiting, "ran {ran} while {waiting} was carried over");
            }
        }
        assert!(join_all(handles).iter().all(Result::is_ok));
        let log = log.lock().unwrap().clone();
        let mut best_first = prios.clone();
        best_first.sort_unstable_by(|a, b| b.cmp(a));
        assert_eq!(log, best_first, "seed {seed}: not best first");
        s.shutdown();
    }
}

#[test]
fn lowest_first_order_is_honoured() {
    let pool = pool(1);
    let (s, rx) = with_reports(
        &pool,
        ExecutorConfig::with_tps(0.0).order(PriorityOrder::LowestFirst),
    );
    let (log, handles) =
        by_priority_on_one_context(&s, &[5, -3, 9, 0, 2, 7, -8, 1, 4, 3, 6, -1, 8, -2, 11]);
    s.set_tps("x", 100.0).unwrap(); // 10 per interval: two intervals
    join_all(handles);
    let log = log.lock().unwrap().clone();
    let mut sorted = log.clone();
    sorted.sort_unstable();
    assert_eq!(log, sorted);
    drop(rx);
    s.shutdown();
}

#[test]
fn expired_tasks_are_timed_out_not_run_and_counts_add_up() {
    let pool = pool(2);
    let hooked = Arc::new(AtomicUsize::new(0));
    let seen = hooked.clone();
    let s = Scheduler::builder(&pool)
        .interval(INTERVAL)
        .executor(
            "x",
            ExecutorConfig::with_tps(1000.0).timeout(Duration::from_millis(150)),
        )
        .timed_out_hook(move |t| {
            assert_eq!(t.executor(), "x");
            seen.fetch_add(1, Ordering::SeqCst);
        })
        .build()
        .unwrap();
    let at = Instant::now() + INTERVAL;
    let ran_timed_out = Arc::new(AtomicBool::new(false));
    let mut handles = Vec::new();
    for i in 0..600usize {
        let flag = ran_timed_out.clone();
        handles.push(
            s.schedule_at("x", at, move || {
                if i % 50 == 7 {
                    panic!("task {i} panics");
                }
                flag.load(Ordering::SeqCst)
            })
            .unwrap(),
        );
    }
    for h in handles.iter().step_by(40) {
        h.cancel();
    }
    let (mut ran, mut timed_out, mut cancelled, mut panicked) = (0u64, 0u64, 0u64, 0u64);
    for r in join_all(handles) {
        match r {
            Ok(_) => ran += 1,
            Err(TaskError::TimedOut) => timed_out += 1,
            Err(TaskError::Cancelled) => cancelled += 1,
            Err(TaskError::Panicked(_)) => panicked += 1,
            Err(e) => panic!("unexpected {e:?}"),
        }
    }
    // 100 per interval, a 150 ms timeout: at most two or three intervals' worth can run.
    assert!(timed_out >= 250, "only {timed_out} timed out");
    assert!(ran > 0);
    assert_eq!(cancelled, 15);
    assert_eq!(ran + timed_out + cancelled + panicked, 600);
    s.shutdown();
    let st = s.stats("x").unwrap();
    assert_eq!(st.timed_out, timed_out);
    assert_eq!(hooked.load(Ordering::SeqCst) as u64, timed_out);
    assert_eq!(
        (st.ran, st.cancelled, st.panicked, st.rejected),
        (ran, cancelled, panicked, 0)
    );
    assert_eq!(
        st.ran + st.timed_out + st.cancelled + st.panicked,
        st.scheduled
    );
}

#[test]
fn cancelled_tasks_never_run() {
    let pool = pool(2);
    let (s, _rx) = with_reports(&pool, ExecutorConfig::unlimited());
    let ran = Arc::new(AtomicUsize::new(0));
    let handles: Vec<_> = (0..20)
        .map(|_| {
            let ran = ran.clone();
            s.schedule("x", INTERVAL * 2, move || {
                ran.fetch_add(1, Ordering::SeqCst);
            })
            .unwrap()
        })
        .collect();
    for h in handles.iter().step_by(2) {
        assert!(h.cancel());
    }
    let results = join_all(handles);
    let cancelled = results
        .iter()
        .filter(|r| matches!(r, Err(TaskError::Cancelled)))
        .count();
    assert_eq!(cancelled, 10);
    s.shutdown();
    assert_eq!(ran.load(Ordering::SeqCst), 10);
    let st = s.stats("x").unwrap();
    assert_eq!((st.ran, st.cancelled, st.pending), (10, 10, 0));
}

#[test]
fn fixed_rate_runs_until_cancelled_and_never_before_its_times() {
    let pool = pool(2);
    let s = fast(&pool, ExecutorConfig::unlimited().early_dispatch(false));
    let period = Duration::from_millis(15);
    let starts = Arc::new(Mutex::new(Vec::new()));
    let five = Latch::new(5);
    let (log, latch) = (starts.clone(), five.clone());
    let first = Instant::now() + Duration::from_millis(5);
    let h = s
        .schedule_at_fixed_rate("x", Timing::at(first), period, move || {
            log.lock().unwrap().push(Instant::now());
            latch.count_down();
        })
        .unwrap();
    five.wait();
    assert!(h.cancel());
    assert!(matches!(h.join(), Err(TaskError::Cancelled)));
    s.shutdown(); // waits for whatever was in flight
    let starts = starts.lock().unwrap().clone();
    for (i, t) in starts.iter().enumerate() {
        assert!(*t >= first + period * i as u32, "run {i} came early");
    }
    let st = s.stats("x").unwrap();
    assert_eq!(st.ran as usize, starts.len(), "a run after cancel");
    assert_eq!(st.pending, 0);
}

#[test]
fn fixed_delay_waits_the_delay_after_each_run() {
    let pool = pool(2);
    let s = fast(&pool, ExecutorConfig::unlimited().early_dispatch(false));
    let delay = Duration::from_millis(12);
    let spans = Arc::new(Mutex::new(Vec::new()));
    let four = Latch::new(4);
    let (log, latch) = (spans.clone(), four.clone());
    let h = s
        .schedule_with_fixed_delay("x", Timing::after(Duration::ZERO), delay, move || {
            let start = Instant::now();
            std::thread::sleep(Duration::from_millis(8)); // the work takes time
            log.lock().unwrap().push((start, Instant::now()));
            latch.count_down();
        })
        .unwrap();
    four.wait();
    h.cancel();
    s.shutdown();
    let spans = spans.lock().unwrap().clone();
    for w in spans.windows(2) {
        assert!(
            w[1].0 >= w[0].1 + delay,
            "next run started before the delay"
        );
    }
}

#[test]
fn a_repeating_task_that_panics_ends_with_its_panic() {
    let pool = pool(2);
    let s = fast(&pool, ExecutorConfig::unlimited());
    let runs = Arc::new(AtomicUsize::new(0));
    let r = runs.clone();
    let h = s
        .schedule_at_fixed_rate(
            "x",
            Timing::after(Duration::ZERO),
            Duration::from_millis(10),
            move || {
                if r.fetch_add(1, Ordering::SeqCst) == 2 {
                    panic!("third run fails");
                }
            },
        )
        .unwrap();
    match h.join() {
        Err(TaskError::Panicked(mut p)) => {
            assert_eq!(p.get_mut().downcast_ref::<&str>(), Some(&"third run fails"))
        }
        other => panic!("unexpected {other:?}"),
    }
    s.shutdown();
    assert_eq!(runs.load(Ordering::SeqCst), 3);
    let st = s.stats("x").unwrap();
    assert_eq!((st.ran, st.panicked, st.pending), (2, 1, 0));
}

#[test]
fn pause_with_tps_zero_then_resume() {
    let pool = pool(2);
    let (s, rx) = with_reports(&pool, ExecutorConfig::with_tps(0.0));
    let ran = Arc::new(AtomicUsize::new(0));
    let handles: Vec<_> = (0..50)
        .map(|_| {
            let ran = ran.clone();
            s.schedule("x", Duration::ZERO, move || {
                ran.fetch_add(1, Ordering::SeqCst)
            })
            .unwrap()
        })
        .collect();
    // Three intervals in which all 50 were held back.
    let mut held = 0;
    while held < 3 {
        let r = next_report(&rx);
        assert_eq!(r.dispatched, 0, "a paused executor released a task");
        if r.carried_over == 50 {
            held += 1;
        }
    }
    assert_eq!(ran.load(Ordering::SeqCst), 0);
    assert_eq!(s.stats("x").unwrap().carried_over, 50);
    s.set_tps("x", 1000.0).unwrap();
    assert!(join_all(handles).iter().all(Result::is_ok));
    assert_eq!(ran.load(Ordering::SeqCst), 50);
    s.shutdown();
}

#[test]
fn changing_the_limit_while_running_changes_the_count_per_interval() {
    let pool = pool(2);
    let (s, rx) = with_reports(&pool, ExecutorConfig::with_tps(1000.0));
    let at = Instant::now() + INTERVAL;
    let handles: Vec<_> = (0..1000)
        .map(|_| s.schedule_at("x", at, || ()).unwrap())
        .collect();
    // Wait for a full interval at 100, then halve the limit.
    loop {
        let r = next_report(&rx);
        if r.dispatched > 0 {
            assert_eq!(r.dispatched, 100);
            break;
        }
    }
    s.set_tps("x", 500.0).unwrap();
    assert_eq!(s.tps("x").unwrap(), Some(500.0));
    let mut at_50 = 0;
    let mut released = 100;
    while released < 1000 {
        let r = next_report(&rx);
        released += r.dispatched;
        if r.quota == Some(50) && r.carried_over > 0 {
            // At most the new limit; less at first, while the last second (at the old limit)
            // still holds more than the new limit allows in any sliding second.
            assert!(r.dispatched <= 50, "{r:?}");
            at_50 += usize::from(r.dispatched == 50);
        } else if r.carried_over > 0 {
            // The interval running when the limit changed keeps its quota.
            assert_eq!(r.quota, Some(100));
        }
    }
    assert!(at_50 >= 10, "only {at_50} intervals at the new limit");
    join_all(handles);
    s.shutdown();
}

#[test]
fn a_task_arriving_for_the_running_interval_is_admitted_if_quota_is_left() {
    let pool = pool(2);
    let (s, rx) = with_reports(&pool, ExecutorConfig::with_tps(1000.0));
    // Each is due now: its interval was already taken when it arrives.
    for _ in 0..20 {
        s.schedule("x", Duration::ZERO, || ())
            .unwrap()
            .join()
            .unwrap();
    }
    s.shutdown();
    let reports: Vec<_> = rx.try_iter().collect();
    assert!(reports.iter().all(|r| r.carried_over == 0), "{reports:?}");
    assert_eq!(reports.iter().map(|r| r.dispatched).sum::<u64>(), 20);
}

#[test]
fn late_arrivals_over_the_quota_carry_over() {
    let pool = pool(2);
    let (s, rx) = with_reports(&pool, ExecutorConfig::with_tps(100.0)); // 10 per interval
    let handles: Vec<_> = (0..35)
        .map(|_| s.schedule("x", Duration::ZERO, || ()).unwrap())
        .collect();
    join_all(handles);
    s.shutdown();
    let reports: Vec<_> = rx.try_iter().collect();
    assert!(reports.iter().all(|r| r.dispatched <= 10), "{reports:?}");
    assert_eq!(reports.iter().map(|r| r.dispatched).sum::<u64>(), 35);
}

/// Repeating tasks that name a context run as its sequential tasks: never at the same time
/// as the context's other tasks (one-shot or repeating), on a pool with threads to spare.
#[test]
fn repeating_tasks_on_a_context_never_overlap_its_other_tasks() {
    let pool = pool(4);
    let s = fast(&pool, ExecutorConfig::unlimited());
    let busy = Arc::new(AtomicBool::new(false));
    let overlaps = Arc::new(AtomicUsize::new(0));
    // Holds the context for a moment, counting any other task found inside.
    let hold = {
        let (busy, overlaps) = (busy.clone(), overlaps.clone());
        move || {
            if busy.swap(true, Ordering::SeqCst) {
                overlaps.fetch_add(1, Ordering::SeqCst);
            }
            std::thread::sleep(Duration::from_micros(500));
            busy.store(false, Ordering::SeqCst);
        }
    };
    let (tx, rx) = channel();
    let (rate_hold, rate_tx) = (hold.clone(), tx.clone());
    let rate = s
        .schedule_sequential_at_fixed_rate(
            "x",
            Timing::after(Duration::ZERO),
            Duration::from_millis(10),
            "account",
            move || {
                rate_hold();
                let _ = rate_tx.send("rate");
            },
        )
        .unwrap();
    let (delay_hold, delay_tx) = (hold.clone(), tx);
    let delay = s
        .schedule_sequential_with_fixed_delay(
            "x",
            Timing::after(Duration::ZERO),
            Duration::from_millis(3),
            "account",
            move || {
                delay_hold();
                let _ = delay_tx.send("delay");
            },
        )
        .unwrap();
    let one_shots: Vec<_> = (0..40u64)
        .map(|i| {
            let at = Timing::after(Duration::from_millis(2 * i));
            s.schedule_sequential("x", at, "account", hold.clone())
                .unwrap()
        })
        .collect();
    assert!(join_all(one_shots).iter().all(Result::is_ok));
    let (mut rates, mut delays) = (0, 0);
    while rates < 5 || delays < 5 {
        match rx.recv_timeout(HANG).expect("repeating runs stopped") {
            "rate" => rates += 1,
            _ => delays += 1,
        }
    }
    assert!(rate.cancel() && delay.cancel());
    s.shutdown();
    assert_eq!(overlaps.load(Ordering::SeqCst), 0);
    assert_eq!(s.stats("x").unwrap().pending, 0);
}

/// Many tasks due at once are handed to the pool in batches: each still runs exactly once,
/// and panics and cancels are told to each task's handle and counted per task.
#[test]
fn a_burst_released_in_batches_runs_each_task_once_with_its_own_outcome() {
    const N: usize = 20_000;
    for seed in 0..3u64 {
        let pool = pool(2);
        let s = fast(&pool, ExecutorConfig::unlimited());
        let runs: Arc<Vec<AtomicUsize>> = Arc::new((0..N).map(|_| AtomicUsize::new(0)).collect());
        let mut order: Vec<usize> = (0..N).collect();
        order.shuffle(&mut rand::rngs::SmallRng::seed_from_u64(seed));
        let at = Timing::after(Duration::from_millis(5));
        let mut handles = Vec::new();
        for &i in &order {
            let runs = runs.clone();
            let mark = move || {
                runs[i].fetch_add(1, Ordering::SeqCst);
            };
            match i % 100 {
                0 => handles.push((
                    i,
                    s.schedule_with("x", at, move || -> () {
                        mark();
                        panic!("task {i} fails")
                    })
                    .unwrap(),
                )),
                1 | 2 => handles.push((i, s.schedule_with("x", at, mark).unwrap())),
                _ => s.execute_with("x", at, mark).unwrap(),
            }
        }
        let mut cancelled = 0;
        for (i, h) in &handles {
            if i % 100 == 1 && h.cancel() {
                cancelled += 1;
            }
        }
        for (i, h) in handles {
            match (i % 100, h.join()) {
                (0, Err(e)) => assert!(e.is_panic(), "task {i}: {e:?}"),
                (1, Err(TaskError::Cancelled)) | (1, Ok(())) | (2, Ok(())) => {}
                (_, other) => panic!("task {i}: {other:?}"),
            }
        }
        s.shutdown();
        let st = s.stats("x").unwrap();
        let ran: usize = runs.iter().map(|r| r.load(Ordering::SeqCst)).sum();
        assert!(
            runs.iter().all(|r| r.load(Ordering::SeqCst) <= 1),
            "a task ran twice"
        );
        assert_eq!(ran, N - cancelled);
        assert_eq!(st.scheduled, N as u64);
        assert_eq!(st.panicked, (N / 100) as u64);
        assert_eq!(st.cancelled, cancelled as u64);
        assert_eq!(st.ran + st.panicked + st.cancelled, N as u64);
        assert_eq!(st.pending, 0);
    }
}

/// Tasks arriving for an interval already running are spread over what is left of it, not
/// released in one burst.
#[test]
fn late_arrivals_are_spread_over_the_rest_of_the_interval() {
    let pool = pool(2);
    let (s, reports) = with_reports(&pool, ExecutorConfig::unlimited());
    // An interval has just started when the one before it is reported.
    reports.recv_timeout(HANG).expect("no interval report");
    let arrived = Instant::now();
    let times = Arc::new(Mutex::new(Vec::new()));
    let handles: Vec<_> = (0..200)
        .map(|_| {
            let times = times.clone();
            s.schedule("x", Duration::ZERO, move || {
                times.lock().unwrap().push(Instant::now())
            })
            .unwrap()
        })
        .collect();
    // The running interval ends (and its report comes) after the last of them is released.
    let mut dispatched = 0;
    while dispatched < 200 {
        dispatched += reports
            .recv_timeout(HANG)
            .expect("no interval report")
            .dispatched;
    }
    let ended = Instant::now();
    assert_eq!(dispatched, 200);
    assert!(join_all(handles).iter().all(Result::is_ok));
    let times = times.lock().unwrap();
    let first = *times.iter().min().unwrap();
    let last = *times.iter().max().unwrap();
    // In one burst they would all run at once; spread, the runs span most of the time that
    // was left (both measured on this clock, so a slow machine stretches both alike).
    assert!(
        last - first >= (ended - arrived) / 3,
        "runs spanned {:?} of the {:?} left",
        last - first,
        ended - arrived
    );
}

#[test]
fn scheduled_tasks_on_a_context_keep_its_order_under_a_limit() {
    for seed in 0..3u64 {
        let pool = pool(4);
        let s = Scheduler::builder(&pool)
            .interval(INTERVAL)
            .executor("x", ExecutorConfig::with_tps(0.0).early_dispatch(false))
            .build()
            .unwrap();
        let base = Instant::now() + Duration::from_millis(20);
        let mut offsets: Vec<u64> = (0..600).collect();
        offsets.shuffle(&mut rand::rngs::SmallRng::seed_from_u64(seed));
        let logs: Vec<_> = (0..3).map(|_| Arc::new(Mutex::new(Vec::new()))).collect();
        let busy: Vec<_> = (0..3).map(|_| Arc::new(AtomicBool::new(false))).collect();
        let mut handles = Vec::new();
        for &off in &offsets {
            let ctx = (off % 3) as usize;
            let (log, busy) = (logs[ctx].clone(), busy[ctx].clone());
            let at = base + Duration::from_micros(off * 500);
            handles.push(
                s.schedule_sequential("x", Timing::at(at), ctx, move || {
                    assert!(
                        !busy.swap(true, Ordering::SeqCst),
                        "context ran two at once"
                    );
                    log.lock().unwrap().push(off);
                    busy.store(false, Ordering::SeqCst);
                })
                .unwrap(),
            );
        }
        // Released from now on, 200 per interval (paused until all were scheduled, so that
        // none arrives late for an interval already running).
        s.set_tps("x", 2000.0).unwrap();
        assert!(join_all(handles).iter().all(Result::is_ok));
        for log in &logs {
            let log = log.lock().unwrap().clone();
            let mut sorted = log.clone();
            sorted.sort_unstable();
            assert_eq!(log, sorted, "seed {seed}: a context ran out of due order");
            assert_eq!(log.len(), 200);
        }
        s.shutdown();
    }
}

#[test]
fn bad_tps_values_are_refused() {
    let pool = pool(1);
    for bad in [-1.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -0.001] {
        let err = Scheduler::builder(&pool)
            .executor("x", ExecutorConfig::with_tps(bad))
            .build()
            .unwrap_err();
        assert!(
            matches!(err, ConfigError::InvalidTps { .. }),
            "{bad}: {err:?}"
        );
    }
    let s = Scheduler::builder(&pool)
        .executor("x", ExecutorConfig::with_tps(f64::MAX)) // finite: allowed
        .build()
        .unwrap();
    for bad in [-1.0, f64::NAN, f64::INFINITY] {
        assert!(matches!(
            s.set_tps("x", bad),
            Err(ConfigError::InvalidTps { .. })
        ));
    }
    assert_eq!(s.tps("x").unwrap(), Some(f64::MAX));
    s.schedule("x", Duration::ZERO, || ())
        .unwrap()
        .join()
        .unwrap();
    s.shutdown();
}

#[test]
fn bad_intervals_are_refused() {
    let pool = pool(1);
    for (bad, short) in [
        (Duration::ZERO, true),
        (Duration::from_millis(9), true),
        (Duration::MAX, false),
        (Duration::from_secs(24 * 3600 + 1), false),
    ] {
        let err = Scheduler::builder(&pool).interval(bad).build().unwrap_err();
        if short {
            assert_eq!(err, ConfigError::IntervalTooShort(bad));
        } else {
            assert_eq!(err, ConfigError::IntervalTooLong(bad));
        }
    }
    // The extremes that are allowed.
    for ok in [Duration::from_millis(10), Duration::from_secs(24 * 3600)] {
        Scheduler::builder(&pool)
            .interval(ok)
            .build()
            .unwrap()
            .shutdown();
    }
}

/// A scheduler thread name with a NUL byte cannot name a thread: a typed error, not a panic.
#[test]
fn a_thread_name_with_a_nul_byte_is_refused() {
    let pool = pool(1);
    let built = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        Scheduler::builder(&pool).thread_name("kw\0sched").build()
    }));
    let Ok(built) = built else {
        panic!("build panicked on a thread name with a NUL byte");
    };
    let err = built.unwrap_err();
    assert!(matches!(err, ConfigError::InvalidThreadName(_)), "{err:?}");
    assert!(err.to_string().contains("NUL"), "{err}");
    pool.shutdown();
}

#[test]
fn unknown_and_duplicate_executors_are_refused() {
    let pool = pool(1);
    let err = Scheduler::builder(&pool)
        .executor("x", ExecutorConfig::unlimited())
        .executor("x", ExecutorConfig::with_tps(1.0))
        .build()
        .unwrap_err();
    assert_eq!(err, ConfigError::DuplicateExecutor("x".into()));
    let s = Scheduler::builder(&pool)
        .executor("x", ExecutorConfig::unlimited())
        .build()
        .unwrap();
    let err = s.schedule("y", Duration::ZERO, || 5).unwrap_err();
    assert!(matches!(&err, ScheduleError::UnknownExecutor(n, _) if n == "y"));
    assert_eq!(err.into_inner()(), 5, "the task is handed back");
    let err = s
        .schedule_at_fixed_rate(
            "y",
            Timing::after(Duration::ZERO),
            Duration::from_secs(1),
            || (),
        )
        .unwrap_err();
    assert!(matches!(err, ScheduleError::UnknownExecutor(..)));
    assert_eq!(
        s.set_tps("y", 1.0),
        Err(ConfigError::UnknownExecutor("y".into()))
    );
    assert_eq!(s.stats("y"), Err(ConfigError::UnknownExecutor("y".into())));
    s.shutdown();
}

#[test]
fn schedule_after_shutdown_hands_the_task_back() {
    let pool = pool(1);
    let s = Scheduler::builder(&pool)
        .executor("x", ExecutorConfig::unlimited())
        .build()
        .unwrap();
    s.shutdown();
    assert!(s.is_shutdown());
    let err = s.schedule("x", Duration::ZERO, || 9).unwrap_err();
    assert!(matches!(err, ScheduleError::Shutdown(_)));
    assert_eq!(err.into_inner()(), 9);
    let err = s
        .schedule_with_fixed_delay(
            "x",
            Timing::after(Duration::ZERO),
            Duration::from_secs(1),
            || (),
        )
        .unwrap_err();
    assert!(matches!(err, ScheduleError::Shutdown(_)));
    s.shutdown(); // again: harmless
}

#[test]
fn a_zero_period_is_refused() {
    let pool = pool(1);
    let s = Scheduler::builder(&pool)
        .executor("x", ExecutorConfig::unlimited())
        .build()
        .unwrap();
    let err = s
        .schedule_at_fixed_rate("x", Timing::after(Duration::ZERO), Duration::ZERO, || ())
        .unwrap_err();
    assert!(matches!(err, ScheduleError::ZeroPeriod(_)));
    let err = s
        .schedule_with_fixed_delay("x", Timing::after(Duration::ZERO), Duration::ZERO, || ())
        .unwrap_err();
    assert!(matches!(err, ScheduleError::ZeroPeriod(_)));
    s.shutdown();
}

#[test]
fn extreme_delays_timeouts_and_priorities() {
    let pool = pool(2);
    let s = fast(
        &pool,
        ExecutorConfig::with_tps(1000.0).timeout(Duration::MAX),
    );
    let never = s.schedule("x", Duration::MAX, || "never").unwrap();
    let far = s
        .schedule_at_fixed_rate("x", Timing::after(Duration::ZERO), Duration::MAX, || ())
        .unwrap();
    let hi = s
        .schedule_with("x", Timing::after(Duration::ZERO).priority(i64::MAX), || 1)
        .unwrap();
    let lo = s
        .schedule_with("x", Timing::after(Duration::ZERO).priority(i64::MIN), || 2)
        .unwrap();
    let past = s
        .schedule_at("x", Instant::now() - Duration::from_millis(1), || 3)
        .unwrap();
    assert_eq!(
        (hi.join().unwrap(), lo.join().unwrap(), past.join().unwrap()),
        (1, 2, 3)
    );
    let pending = s.shutdown_now();
    assert_eq!(pending.len(), 1, "the never-due task comes back");
    drop(pending);
    assert!(matches!(never.join(), Err(TaskError::Rejected)));
    assert!(matches!(far.join(), Err(TaskError::Rejected)));
}

#[test]
fn panics_in_tasks_hooks_and_the_coordinator_do_not_stop_the_scheduler() {
    struct Flaky(AtomicUsize);
    impl keyway::Coordinator for Flaky {
        fn join(&self, _: &str, _: f64) {}
        fn leave(&self, _: &str) {
            panic!("leave fails");
        }
        fn share(&self, _: &str, limit: f64) -> f64 {
            if self.0.fetch_add(1, Ordering::SeqCst) % 2 == 0 {
                panic!("share fails");
            }
            limit
        }
    }
    let pool = pool(2);
    let s = Scheduler::builder(&pool)
        .interval(Duration::from_millis(10))
        .executor("x", ExecutorConfig::with_tps(10_000.0))
        .executor("y", ExecutorConfig::with_tps(0.0).timeout(Duration::ZERO))
        .coordinator(Flaky(AtomicUsize::new(0)))
        .interval_hook(|_| panic!("interval hook fails"))
        .timed_out_hook(|_| panic!("timed-out hook fails"))
        .build()
        .unwrap();
    for round in 0..5 {
        let boom = s
            .schedule("x", Duration::ZERO, || -> () { panic!("task fails") })
            .unwrap();
        assert!(boom.join().unwrap_err().is_panic());
        let expired = s.schedule("y", Duration::ZERO, || ()).unwrap();
        assert!(matches!(expired.join(), Err(TaskError::TimedOut)));
        // A task whose captured value panics when dropped unrun.
        struct BadDrop;
        impl Drop for BadDrop {
            fn drop(&mut self) {
                if !std::thread::panicking() {
                    panic!("drop fails");
                }
            }
        }
        let bad = BadDrop;
        let cancelled = s
            .schedule("x", Duration::from_millis(30), move || drop(bad))
            .unwrap();
        cancelled.cancel();
        let fine = s.schedule("x", Duration::ZERO, move || round).unwrap();
        assert_eq!(fine.join().unwrap(), round);
    }
    s.shutdown();
    let st = s.stats("x").unwrap();
    assert_eq!(st.panicked, 5);
    assert_eq!(st.pending, 0);
}

/// A panicking run of every kind — a task without a handle (alone and inside a batch), a
/// repeating task's run — and panicking timed-out and interval hooks leave the scheduler
/// running: tasks scheduled afterwards still run, and every panic is counted.
#[test]
fn panicking_runs_and_hooks_leave_the_driver_alive_for_later_tasks() {
    let pool = pool(2);
    let hook_calls = Arc::new(AtomicUsize::new(0));
    let (timed_out_calls, interval_calls) = (hook_calls.clone(), hook_calls.clone());
    let s = Scheduler::builder(&pool)
        .interval(Duration::from_millis(10))
        .executor("x", ExecutorConfig::unlimited())
        .executor("y", ExecutorConfig::with_tps(0.0).timeout(Duration::ZERO))
        .timed_out_hook(move |_| {
            timed_out_calls.fetch_add(1, Ordering::SeqCst);
            panic!("timed-out hook fails")
        })
        .interval_hook(move |_| {
            interval_calls.fetch_add(1, Ordering::SeqCst);
            panic!("interval hook fails")
        })
        .build()
        .unwrap();
    const BURST: usize = 5_000; // many due at once: released in batches
    for round in 0..3 {
        s.execute_with("x", Timing::after(Duration::ZERO), || panic!("alone"))
            .unwrap();
        for i in 0..BURST {
            s.execute_with("x", Timing::after(Duration::from_millis(2)), move || {
                if i % 1000 == 0 {
                    panic!("in a batch")
                }
            })
            .unwrap();
        }
        let repeating = s
            .schedule_at_fixed_rate(
                "x",
                Timing::after(Duration::ZERO),
                Duration::from_millis(5),
                || panic!("a run fails"),
            )
            .unwrap();
        assert!(repeating.join().unwrap_err().is_panic());
        let expired = s.schedule("y", Duration::ZERO, || ()).unwrap();
        assert!(matches!(expired.join(), Err(TaskError::TimedOut)));
        // Later tasks still run.
        let later = s
            .schedule("x", Duration::from_millis(15), move || round)
            .unwrap();
        assert_eq!(later.join().unwrap(), round);
    }
    s.shutdown();
    let x = s.stats("x").unwrap();
    assert_eq!(x.panicked, 3 * (1 + BURST as u64 / 1000 + 1));
    assert_eq!(x.ran, 3 * (BURST as u64 - BURST as u64 / 1000 + 1));
    assert_eq!(x.pending, 0);
    // Three timed-out tasks, and at least one interval report.
    assert!(hook_calls.load(Ordering::SeqCst) >= 4);
}

#[test]
fn shutdown_from_inside_a_scheduled_task_and_from_a_hook() {
    let pool = pool(2);
    let s = fast(&pool, ExecutorConfig::unlimited());
    let inner = s.clone();
    let later = s
        .schedule("x", Duration::from_millis(40), || "still runs")
        .unwrap();
    s.schedule("x", Duration::ZERO, move || inner.shutdown())
        .unwrap()
        .join()
        .unwrap();
    assert!(s.is_shutdown());
    assert_eq!(later.join().unwrap(), "still runs");
    s.shutdown();

    // From the scheduler's own thread (a hook): it must not wait for itself.
    let slot: Arc<Mutex<Option<Scheduler>>> = Arc::new(Mutex::new(None));
    let from_hook = slot.clone();
    let s = Scheduler::builder(&pool)
        .interval(Duration::from_millis(10))
        .executor("x", ExecutorConfig::unlimited())
        .interval_hook(move |_| {
            if let Some(s) = from_hook.lock().unwrap().take() {
                assert!(s.shutdown_now().is_empty());
                s.shutdown();
            }
        })
        .build()
        .unwrap();
    *slot.lock().unwrap() = Some(s.clone());
    let handle = s.schedule("x", Duration::from_secs(3600), || ()).unwrap();
    assert!(matches!(handle.join(), Err(TaskError::Rejected)));
    s.shutdown();
}

#[test]
fn shutdown_now_hands_back_what_was_not_released() {
    let pool = pool(2);
    let s = Scheduler::builder(&pool)
        .interval(INTERVAL)
        .executor("x", ExecutorConfig::with_tps(10.0)) // one per interval
        .build()
        .unwrap();
    let handles: Vec<_> = (0..100)
        .map(|i| s.schedule("x", Duration::ZERO, move || i).unwrap())
        .collect();
    let pending = s.shutdown_now();
    let back = pending.len();
    assert!(back >= 90, "only {back} handed back");
    for p in pending {
        p.run().unwrap();
    }
    let results = join_all(handles);
    assert!(
        results.iter().all(Result::is_ok),
        "handed-back tasks ran when run"
    );
    s.shutdown(); // waits for the task that was already released, and its count
    let st = s.stats("x").unwrap();
    assert_eq!(st.rejected as usize, back);
    assert_eq!(st.ran + st.rejected, 100);
}

#[test]
fn handles_can_be_awaited() {
    let pool = pool(2);
    let s = fast(&pool, ExecutorConfig::unlimited());
    let h = s.schedule("x", Duration::from_millis(5), || 11).unwrap();
    assert_eq!(block_on(h).unwrap(), 11);
    s.shutdown();
}

#[test]
fn dropping_the_last_handle_still_runs_what_was_scheduled() {
    let pool = pool(2);
    let s = fast(&pool, ExecutorConfig::unlimited());
    let h = s.schedule("x", Duration::from_millis(30), || 4).unwrap();
    drop(s);
    assert_eq!(h.join().unwrap(), 4);
}

/// Polls a future to completion on this thread, parking between polls.
fn block_on<F: std::future::Future>(f: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl std::task::Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Arc::new(Unpark(std::thread::current())).into();
    let mut cx = std::task::Context::from_waker(&waker);
    let mut f = std::pin::pin!(f);
    loop {
        if let std::task::Poll::Ready(out) = f.as_mut().poll(&mut cx) {
            return out;
        }
        std::thread::park();
    }
}

#[test]
fn shutdown_ends_repeating_tasks_without_waiting_for_their_next_time() {
    let pool = pool(2);
    let s = fast(&pool, ExecutorConfig::unlimited());
    let first = Latch::new(1);
    let ran = first.clone();
    let hourly = s
        .schedule_at_fixed_rate(
            "x",
            Timing::after(Duration::ZERO),
            Duration::from_secs(3600),
            move || ran.count_down(),
        )
        .unwrap();
    let never_started = s
        .schedule_with_fixed_delay(
            "x",
            Timing::after(Duration::from_secs(3600)),
            Duration::from_secs(1),
            || (),
        )
        .unwrap();
    first.wait();
    let (tx, rx) = channel();
    let stopper = s.clone();
    std::thread::spawn(move || {
        stopper.shutdown();
        tx.send(()).unwrap();
    });
    rx.recv_timeout(HANG)
        .expect("shutdown waited for an hourly repetition");
    assert!(matches!(hourly.join(), Err(TaskError::Rejected)));
    assert!(matches!(never_started.join(), Err(TaskError::Rejected)));
    let st = s.stats("x").unwrap();
    assert_eq!((st.ran, st.rejected, st.pending), (1, 2, 0));
}
