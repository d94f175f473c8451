//! Unit tests of the sequencer and the ordered map. The loom models are in `loom_sequencer.rs`.
//!
//! Every test checks its outcome after all threads joined: a lost turn shows as a missing output
//! (no test waits for a turn, so none can hang on one), a broken order as a wrong output, and two
//! turns overlapping as a failed `try_lock` on the output.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{mpsc, Arc, Barrier, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

use super::{OrderedMap, RunOutcome, Sequencer, SequencerError, Ticket};

/// The checked output of a run: turns append to it; it counts every sign of disorder.
#[derive(Default)]
struct Output {
    /// Ticket numbers, in the order their turns ran.
    log: Mutex<Vec<u64>>,
    /// Turns that found the log locked: two turns overlapped.
    overlaps: AtomicU64,
}

impl Output {
    fn new() -> Arc<Output> {
        Arc::new(Output::default())
    }

    /// Appends `n`; turns never overlap, so the lock is never contended.
    fn push(&self, n: u64) {
        match self.log.try_lock() {
            Ok(mut log) => log.push(n),
            Err(_) => {
                self.overlaps.fetch_add(1, Relaxed);
                self.log.lock().unwrap().push(n);
            }
        }
    }

    fn take(&self) -> Vec<u64> {
        assert_eq!(self.overlaps.load(Relaxed), 0, "two turns overlapped");
        std::mem::take(&mut *self.log.lock().unwrap())
    }
}

/// Runs `ticket` with a closure logging its number.
fn log_turn(ticket: Ticket, out: &Arc<Output>) -> RunOutcome {
    let n = ticket.number();
    let out = Arc::clone(out);
    ticket.run(move || out.push(n))
}

/// Busy work of a random length (about 0–`max` loop steps), sometimes yielding the core.
fn work(rng: &mut SmallRng, max: u32) {
    let steps = rng.gen_range(0..=max);
    let mut x = 0u64;
    for i in 0..steps {
        x = black_box(x.wrapping_mul(31).wrapping_add(u64::from(i)));
    }
    if rng.gen_ratio(1, 64) {
        thread::yield_now();
    }
}

/// The full counts: the workspace's test profile is optimised (with debug assertions), where
/// they take about two seconds. An unoptimised build gets a smaller share.
fn scaled(full: u64, unoptimised: u64) -> u64 {
    if cfg!(debug_assertions) && std::env::var_os("KEYWAY_UNOPTIMISED").is_some() {
        unoptimised
    } else {
        full
    }
}

// ---------------------------------------------------------------------------------------------
// Construction

#[test]
fn handles_are_send_and_sync() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Sequencer>();
    send_sync::<Ticket>();
    send_sync::<OrderedMap<fn(u8) -> u8, fn(u8)>>();
    // The sink need only be `Send`: turns never overlap (Rule 2).
    send_sync::<OrderedMap<fn(u8) -> u8, std::sync::mpsc::Sender<u8>>>();
}

#[test]
fn zero_capacity_is_an_error() {
    assert_eq!(Sequencer::new(0).unwrap_err(), SequencerError::ZeroCapacity);
    assert_eq!(
        Sequencer::new(Sequencer::MAX_CAPACITY + 1).unwrap_err(),
        SequencerError::CapacityTooLarge {
            requested: Sequencer::MAX_CAPACITY + 1,
            max: Sequencer::MAX_CAPACITY
        }
    );
    assert_eq!(
        Sequencer::new(Sequencer::MAX_CAPACITY).unwrap().capacity(),
        Sequencer::MAX_CAPACITY
    );
}

#[test]
fn capacity_rounds_up_to_a_power_of_two() {
    for (asked, got) in [(1, 1), (2, 2), (3, 4), (4, 4), (5, 8), (1000, 1024)] {
        assert_eq!(Sequencer::new(asked).unwrap().capacity(), got);
    }
}

// ---------------------------------------------------------------------------------------------
// Order

/// 8 threads share 1,000,000 tickets (100,000 in debug builds); each takes a ticket,
/// does a random amount of work, then runs a turn that checks and logs its number. The log is
/// exactly 0, 1, 2, … and no two turns overlapped.
#[test]
fn eight_threads_publish_in_ticket_order() {
    const THREADS: u64 = 8;
    let total = std::env::var("KEYWAY_STRESS_TICKETS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| scaled(1_000_000, 100_000));
    let capacity = std::env::var("KEYWAY_STRESS_CAPACITY")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(256);
    let sequencer = Sequencer::new(capacity).unwrap();
    let out = Output::new();
    out.log.lock().unwrap().reserve(total as usize);
    let expected = Arc::new(AtomicU64::new(0));
    let misordered = Arc::new(AtomicU64::new(0));
    let deferred = Arc::new(AtomicU64::new(0));
    let barrier = Arc::new(Barrier::new(THREADS as usize));
    let start = Instant::now();
    let threads: Vec<_> = (0..THREADS)
        .map(|i| {
            let (sequencer, out, expected, misordered, deferred, barrier) = (
                sequencer.clone(),
                Arc::clone(&out),
                Arc::clone(&expected),
                Arc::clone(&misordered),
                Arc::clone(&deferred),
                Arc::clone(&barrier),
            );
            thread::spawn(move || {
                let mut rng = SmallRng::seed_from_u64(i);
                barrier.wait();
                for _ in 0..total / THREADS {
                    let ticket = sequencer.next_ticket();
                    work(&mut rng, 200);
                    let n = ticket.number();
                    let (out, expected, misordered) = (
                        Arc::clone(&out),
                        Arc::clone(&expected),
                        Arc::clone(&misordered),
                    );
                    let outcome = ticket.run(move || {
                        // Relaxed on purpose: only the sequencer's ordering makes this exact.
                        if expected.load(Relaxed) != n {
                            misordered.fetch_add(1, Relaxed);
                        }
                        expected.store(n + 1, Relaxed);
                        out.push(n);
                    });
                    if outcome == RunOutcome::Deferred {
                        deferred.fetch_add(1, Relaxed);
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let elapsed = start.elapsed();
    let n = total / THREADS * THREADS;
    eprintln!(
        "{n} tickets on {THREADS} threads in {elapsed:?} ({} deferred)",
        deferred.load(Relaxed)
    );
    assert_eq!(misordered.load(Relaxed), 0);
    assert_eq!(sequencer.panicked(), 0);
    let log = out.take();
    assert_eq!(log.len() as u64, n, "every turn published");
    assert!(log.iter().copied().eq(0..n), "published in ticket order");
    sequencer.inner.assert_clean();
}

/// Tickets handed in backwards: every one but ticket 0 is stored (most a lap or more ahead, in the
/// overflow lists); ticket 0's thread then publishes them all, in order.
#[test]
fn backwards_hand_in_is_published_by_the_first_ticket() {
    let sequencer = Sequencer::new(2).unwrap();
    let out = Output::new();
    let mut tickets: Vec<_> = (0..100).map(|_| sequencer.next_ticket()).collect();
    let first = tickets.remove(0);
    for ticket in tickets.into_iter().rev() {
        assert_eq!(log_turn(ticket, &out), RunOutcome::Deferred);
    }
    assert!(out.log.lock().unwrap().is_empty());
    assert_eq!(log_turn(first, &out), RunOutcome::Ran);
    assert_eq!(out.take(), (0..100).collect::<Vec<_>>());
    sequencer.inner.assert_clean();
}

/// A closure running in its turn may take, run and drop later tickets: nothing deadlocks (no lock
/// is held while user code runs, Rule 7) and order holds.
#[test]
fn turns_may_hand_in_later_tickets() {
    let sequencer = Sequencer::new(1).unwrap();
    let out = Output::new();
    let t0 = sequencer.next_ticket();
    let (s, o) = (sequencer.clone(), Arc::clone(&out));
    let outcome = t0.run(move || {
        o.push(0);
        let t1 = s.next_ticket();
        let t2 = s.next_ticket();
        let t3 = s.next_ticket();
        assert_eq!(log_turn(t3, &o), RunOutcome::Deferred);
        drop(t2);
        assert_eq!(log_turn(t1, &o), RunOutcome::Deferred);
    });
    assert_eq!(outcome, RunOutcome::Ran);
    assert_eq!(out.take(), [0, 1, 3]);
    sequencer.inner.assert_clean();
}

// ---------------------------------------------------------------------------------------------
// Skips

/// dropped tickets are skipped, whether dropped before their turn, in it, or by
/// unwinding.
#[test]
fn dropped_tickets_are_skipped() {
    let sequencer = Sequencer::new(4).unwrap();
    let out = Output::new();
    let tickets: Vec<_> = (0..10).map(|_| sequencer.next_ticket()).collect();
    let mut tickets = tickets.into_iter();
    let t0 = tickets.next().unwrap();
    let t1 = tickets.next().unwrap();
    let t2 = tickets.next().unwrap();
    let rest: Vec<_> = tickets.collect();
    // Dropped before its turn, and one lost to a panic on another thread.
    drop(t1);
    with_quiet_panics(|| {
        let unwound = thread::spawn(move || {
            let _held = t2;
            panic!("scripted: work failed before the ticket was run");
        });
        assert!(unwound.join().is_err());
    });
    for (i, ticket) in rest.into_iter().enumerate() {
        if i % 3 == 0 {
            ticket.skip();
        } else {
            let _ = log_turn(ticket, &out);
        }
    }
    assert!(out.log.lock().unwrap().is_empty(), "turn 0 not done yet");
    let _ = log_turn(t0, &out);
    // Ticket 3 + i was skipped for i = 0, 3, 6.
    assert_eq!(out.take(), [0, 4, 5, 7, 8]);
    // Dropped in its turn: the next ticket runs at once.
    drop(sequencer.next_ticket());
    assert_eq!(log_turn(sequencer.next_ticket(), &out), RunOutcome::Ran);
    assert_eq!(out.take(), [11]);
    assert_eq!(sequencer.panicked(), 0);
    sequencer.inner.assert_clean();
}

// ---------------------------------------------------------------------------------------------
// Panics

/// a panicking turn is counted, logged and given to the hook, with its ticket
/// number, whether it ran at once or was stored and run by another thread; the turns after it
/// run.
#[test]
fn panicking_turns_are_reported_and_the_rest_go_on() {
    let sequencer = Sequencer::new(4).unwrap();
    let reports = Arc::new(Mutex::new(Vec::new()));
    let r = Arc::clone(&reports);
    sequencer.set_panic_hook(move |report| {
        r.lock()
            .unwrap()
            .push((report.ticket(), report.message().unwrap_or("?").to_string()));
    });
    let out = Output::new();
    // Ticket 0 panics in place.
    assert_eq!(
        sequencer.next_ticket().run(|| panic!("in place")),
        RunOutcome::Panicked
    );
    // Tickets 1..=4: ticket 2 panics after being stored; ticket 1's thread runs it.
    let t1 = sequencer.next_ticket();
    let t2 = sequencer.next_ticket();
    let t3 = sequencer.next_ticket();
    let t4 = sequencer.next_ticket();
    assert_eq!(log_turn(t4, &out), RunOutcome::Deferred);
    let stored = t2.run(|| std::panic::panic_any(String::from("stored")));
    assert_eq!(stored, RunOutcome::Deferred);
    assert_eq!(log_turn(t3, &out), RunOutcome::Deferred);
    let runner = {
        let out = Arc::clone(&out);
        thread::spawn(move || log_turn(t1, &out))
    };
    assert_eq!(runner.join().unwrap(), RunOutcome::Ran);
    assert_eq!(out.take(), [1, 3, 4]);
    assert_eq!(sequencer.panicked(), 2);
    assert_eq!(
        *reports.lock().unwrap(),
        [(0, "in place".to_string()), (2, "stored".to_string())]
    );
}

/// A panic hook that panics itself is caught too: the turns after it still run.
#[test]
fn a_panicking_hook_does_not_stop_later_turns() {
    let sequencer = Sequencer::new(2).unwrap();
    sequencer.set_panic_hook(|_| panic!("the hook fails too"));
    let out = Output::new();
    let t0 = sequencer.next_ticket();
    let t1 = sequencer.next_ticket();
    assert_eq!(log_turn(t1, &out), RunOutcome::Deferred);
    assert_eq!(t0.run(|| panic!("first")), RunOutcome::Panicked);
    assert_eq!(out.take(), [1]);
    assert_eq!(sequencer.panicked(), 1);
}

// ---------------------------------------------------------------------------------------------
// Far-ahead tickets

/// with capacity 4, a ticket 10,000 turns ahead, taken and run by another thread
/// while the 10,000 before it are outstanding, is parked in an overflow list and runs last.
#[test]
fn a_ticket_far_past_capacity_completes() {
    let sequencer = Sequencer::new(4).unwrap();
    let out = Output::new();
    let early: Vec<_> = (0..10_000).map(|_| sequencer.next_ticket()).collect();
    let far = {
        let (sequencer, out) = (sequencer.clone(), Arc::clone(&out));
        thread::spawn(move || {
            let ticket = sequencer.next_ticket();
            assert_eq!(ticket.number(), 10_000);
            log_turn(ticket, &out)
        })
        .join()
        .unwrap()
    };
    assert_eq!(far, RunOutcome::Deferred);
    assert_eq!(
        sequencer.inner.parked_len(),
        1,
        "parked in an overflow list"
    );
    let runner = {
        let out = Arc::clone(&out);
        thread::spawn(move || {
            for ticket in early {
                let _ = log_turn(ticket, &out);
            }
        })
    };
    runner.join().unwrap();
    let log = out.take();
    assert_eq!(log.len(), 10_001);
    assert!(log.iter().copied().eq(0..=10_000));
    sequencer.inner.assert_clean();
}

/// Many far-ahead tickets on the same few slots, handed in from several threads in random order
/// while the publisher runs: all run, in order, and the overflow lists drain.
#[test]
fn many_far_ahead_tickets_on_few_slots() {
    let sequencer = Sequencer::new(2).unwrap();
    let out = Output::new();
    let mut tickets: Vec<_> = (1..=4_000).map(|_| sequencer.next_ticket()).collect();
    let t0 = tickets.remove(0);
    tickets.shuffle(&mut SmallRng::seed_from_u64(7));
    let chunks: Vec<Vec<Ticket>> = {
        let mut chunks: Vec<Vec<Ticket>> = (0..3).map(|_| Vec::new()).collect();
        for (i, t) in tickets.into_iter().enumerate() {
            chunks[i % 3].push(t);
        }
        chunks
    };
    let mut threads: Vec<_> = chunks
        .into_iter()
        .map(|chunk| {
            let out = Arc::clone(&out);
            thread::spawn(move || {
                for t in chunk {
                    let _ = log_turn(t, &out);
                }
            })
        })
        .collect();
    threads.push({
        let out = Arc::clone(&out);
        thread::spawn(move || {
            let _ = log_turn(t0, &out);
        })
    });
    for t in threads {
        t.join().unwrap();
    }
    assert!(out.take().iter().copied().eq(0..4_000));
    sequencer.inner.assert_clean();
}

// ---------------------------------------------------------------------------------------------
// Random stress

/// What a scripted ticket holder does with its ticket.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Act {
    Run,
    Skip,
    Panic,
}

/// One seed: a random capacity, all tickets issued up front and dealt to 1–4 threads, each handing
/// its tickets in, in a random order, with random work between them, to run, skip or panic. The
/// output must be exactly the running tickets in order, every panic counted, the ring clean.
fn random_script(seed: u64) {
    let mut rng = SmallRng::seed_from_u64(seed);
    let capacity = *[1, 2, 3, 4, 8, 64].choose(&mut rng).unwrap();
    let count = rng.gen_range(1..400u64);
    let threads = rng.gen_range(1..=4usize);
    let sequencer = Sequencer::new(capacity).unwrap();
    let out = Output::new();
    let acts: Vec<Act> = (0..count)
        .map(|_| match rng.gen_range(0..10) {
            0 => Act::Skip,
            1 => Act::Panic,
            _ => Act::Run,
        })
        .collect();
    let mut hands: Vec<Vec<(Ticket, Act)>> = (0..threads).map(|_| Vec::new()).collect();
    for (n, act) in acts.iter().enumerate() {
        let ticket = sequencer.next_ticket();
        assert_eq!(ticket.number(), n as u64);
        hands[rng.gen_range(0..threads)].push((ticket, *act));
    }
    for hand in &mut hands {
        // Mostly in order, sometimes shuffled, so both near and far hand-ins happen.
        if rng.gen_bool(0.5) {
            hand.shuffle(&mut rng);
        }
    }
    let workers: Vec<_> = hands
        .into_iter()
        .enumerate()
        .map(|(i, hand)| {
            let out = Arc::clone(&out);
            thread::spawn(move || {
                let mut rng = SmallRng::seed_from_u64(seed ^ (i as u64) << 32);
                for (ticket, act) in hand {
                    work(&mut rng, 300);
                    match act {
                        Act::Run => {
                            let _ = log_turn(ticket, &out);
                        }
                        Act::Skip => ticket.skip(),
                        Act::Panic => {
                            let _ = ticket.run(|| panic!("scripted"));
                        }
                    }
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    let expected: Vec<u64> = (0..count)
        .filter(|&n| acts[n as usize] == Act::Run)
        .collect();
    assert_eq!(out.take(), expected, "seed {seed}");
    let panics = acts.iter().filter(|&&a| a == Act::Panic).count() as u64;
    assert_eq!(sequencer.panicked(), panics, "seed {seed}");
    sequencer.inner.assert_clean();
}

/// Random stress over many seeds (`KEYWAY_SEEDS` sets how many).
#[test]
fn random_scripts_many_seeds() {
    // Scripted panics are expected: keep them out of the test output.
    let seeds = std::env::var("KEYWAY_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| scaled(2_000, 200));
    with_quiet_panics(|| {
        for seed in 0..seeds {
            random_script(seed);
        }
    });
}

/// Runs `f` with the default panic message printer silenced for panics saying "scripted".
fn with_quiet_panics(f: impl FnOnce()) {
    static QUIET: std::sync::Once = std::sync::Once::new();
    QUIET.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let payload = info.payload();
            let message = payload
                .downcast_ref::<&str>()
                .copied()
                .or_else(|| payload.downcast_ref::<String>().map(String::as_str));
            let scripted = message.is_some_and(|s| s.contains("scripted"));
            if !scripted {
                default(info);
            }
        }));
    });
    f();
}

// ---------------------------------------------------------------------------------------------
// Exactly once, and no allocation on the fast path

/// Counts its drops, to prove that each closure is dropped exactly once.
struct Counted(Arc<AtomicUsize>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, Relaxed);
    }
}

/// Every closure handed in runs exactly once and is dropped exactly once, in place, stored in the
/// ring, or parked in an overflow list.
#[test]
fn each_closure_runs_and_drops_exactly_once() {
    let sequencer = Sequencer::new(4).unwrap();
    let (runs, drops) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let mut tickets: Vec<_> = (0..1_000).map(|_| sequencer.next_ticket()).collect();
    tickets.shuffle(&mut SmallRng::seed_from_u64(3));
    for ticket in tickets {
        let guard = Counted(Arc::clone(&drops));
        let runs = Arc::clone(&runs);
        let _ = ticket.run(move || {
            let _guard = guard;
            runs.fetch_add(1, Relaxed);
        });
    }
    assert_eq!(runs.load(Relaxed), 1_000);
    assert_eq!(drops.load(Relaxed), 1_000);
    sequencer.inner.assert_clean();
}

/// Counts allocations made by the current thread.
struct CountingAlloc;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: forwards to `System`; only adds a thread-local counter, which does not allocate.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
        // SAFETY: same contract as ours.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: CountingAlloc = CountingAlloc;

fn allocations() -> u64 {
    ALLOCATIONS.with(Cell::get)
}

/// The fast path (the ticket's turn, nothing stored) does not allocate; a stored closure is
/// boxed once.
#[test]
fn fast_path_does_not_allocate() {
    let sequencer = Sequencer::new(4).unwrap();
    let value = Arc::new(AtomicU64::new(0));
    let v = Arc::clone(&value);
    let ticket = sequencer.next_ticket();
    let before = allocations();
    assert_eq!(ticket.run(move || v.store(1, Relaxed)), RunOutcome::Ran);
    assert_eq!(allocations(), before, "in turn: no allocation");
    let t1 = sequencer.next_ticket();
    let v = Arc::clone(&value);
    let before = allocations();
    // Not its turn: stored. (A closure capturing nothing would box without allocating.)
    let _ = sequencer.next_ticket().run(move || v.store(2, Relaxed));
    assert_eq!(
        allocations() - before,
        1,
        "only the stored closure is boxed"
    );
    let before = allocations();
    let _ = t1.run(|| {});
    assert_eq!(
        allocations(),
        before,
        "running in turn, and the stored turn after it"
    );
    assert_eq!(value.load(Relaxed), 2);
}

// ---------------------------------------------------------------------------------------------
// Ordered map

/// 2,000 items (500 in debug) processed by four worker threads fed through a channel,
/// each item sleeping a random 0–200 µs as its work; the sink sees the outputs in input order.
#[test]
fn ordered_map_keeps_input_order_under_random_delays() {
    let items = scaled(2_000, 500);
    let out = Output::new();
    let sink_out = Arc::clone(&out);
    let map = OrderedMap::new(
        8,
        |(n, micros): (u64, u64)| {
            thread::sleep(Duration::from_micros(micros)); // the work, not synchronisation
            n * 3
        },
        move |y| sink_out.push(y),
    )
    .unwrap();
    let (tx, rx) = mpsc::channel::<super::MapTask>();
    let rx = Arc::new(Mutex::new(rx));
    let workers: Vec<_> = (0..4)
        .map(|_| {
            let rx = Arc::clone(&rx);
            thread::spawn(move || loop {
                let task = rx.lock().unwrap().recv();
                match task {
                    Ok(task) => task(),
                    Err(_) => break,
                }
            })
        })
        .collect();
    let mut rng = SmallRng::seed_from_u64(11);
    for n in 0..items {
        let micros = rng.gen_range(0..=200);
        map.submit((n, micros), |task| tx.send(task).unwrap());
    }
    drop(tx);
    for w in workers {
        w.join().unwrap();
    }
    assert_eq!(out.take(), (0..items).map(|n| n * 3).collect::<Vec<_>>());
    assert_eq!(map.sequencer().panicked(), 0);
}

/// The ordered map with a thread per item, and unboxed tasks from `task`, run in reverse order.
#[test]
fn ordered_map_tasks_in_any_order() {
    let out = Output::new();
    let sink_out = Arc::clone(&out);
    let map = OrderedMap::new(2, |n: u64| n + 100, move |y| sink_out.push(y)).unwrap();
    let tasks: Vec<_> = (0..50).map(|n| map.task(n)).collect();
    let threads: Vec<_> = tasks.into_iter().rev().map(thread::spawn).collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(out.take(), (100..150).collect::<Vec<_>>());
}

/// A panic in the item function or in the sink is reported and skips that item only; the
/// executor does not see it.
#[test]
fn ordered_map_panics_skip_one_item() {
    let out = Output::new();
    let sink_out = Arc::clone(&out);
    let map = OrderedMap::new(
        4,
        |n: u64| {
            assert!(n != 3, "scripted: item 3 fails");
            n
        },
        move |y| {
            assert!(y != 6, "scripted: sink refuses 6");
            sink_out.push(y);
        },
    )
    .unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = Arc::clone(&seen);
    map.sequencer()
        .set_panic_hook(move |report| s.lock().unwrap().push(report.ticket()));
    with_quiet_panics(|| {
        let threads: Vec<_> = (0..10)
            .map(|n| {
                let task = map.task(n);
                thread::spawn(task)
            })
            .collect();
        for t in threads {
            t.join().expect("the executor never sees a panic");
        }
    });
    assert_eq!(out.take(), [0, 1, 2, 4, 5, 7, 8, 9]);
    assert_eq!(map.sequencer().panicked(), 2);
    let mut seen = seen.lock().unwrap().clone();
    seen.sort_unstable();
    assert_eq!(seen, [3, 6]);
}
