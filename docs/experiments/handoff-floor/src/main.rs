//! The floor of a per-context handoff on this machine, against tokio-actor: the same round-robin
//! producer and the same task body (10 relaxed increments and an order check) as
//! `keyway-bench contexts --work 10`, with consumers that spin and never sleep.
//!
//! Usage: `handoff-floor <contexts> <tasks per context> <runs> <consumer threads>`.

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

#[inline(never)]
fn spin(work: u64) -> u64 {
    let local = AtomicU64::new(0);
    let local = black_box(&local);
    for _ in 0..work {
        local.fetch_add(1, Ordering::Relaxed);
    }
    local.load(Ordering::Relaxed)
}

#[repr(align(128))]
#[derive(Default)]
struct Cell {
    last: AtomicU64,
}

/// One run's state: per-context order cells and the count of contexts done.
struct Run {
    cells: Vec<Cell>,
    tasks: u64,
    done: AtomicUsize,
}

impl Run {
    fn new(contexts: usize, tasks: u64) -> Arc<Self> {
        Arc::new(Run {
            cells: (0..contexts).map(|_| Cell::default()).collect(),
            tasks,
            done: AtomicUsize::new(0),
        })
    }
}

/// The task: 10 increments, then the order check of its context.
#[inline(never)]
fn task(run: &Run, ctx: usize, seq: u64) {
    black_box(spin(10));
    let cell = &run.cells[ctx];
    assert_eq!(cell.last.load(Ordering::Relaxed) + 1, seq, "order broken");
    cell.last.store(seq, Ordering::Relaxed);
    if seq == run.tasks {
        run.done.fetch_add(1, Ordering::Release);
    }
}

/// Runs `consumer(thread index, stop)` on `threads` threads, times `produce` until every
/// context's last task ran, then stops and joins the consumers.
fn timed<C, P>(run: &Arc<Run>, threads: usize, consumer: C, produce: P) -> f64
where
    C: Fn(usize, &AtomicBool) + Send + Sync + 'static,
    P: FnOnce(),
{
    let stop = Arc::new(AtomicBool::new(false));
    let consumer = Arc::new(consumer);
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let (stop, consumer) = (stop.clone(), consumer.clone());
            std::thread::spawn(move || consumer(t, &stop))
        })
        .collect();
    let start = Instant::now();
    produce();
    while run.done.load(Ordering::Acquire) < run.cells.len() {
        std::hint::spin_loop();
    }
    let elapsed = start.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    for h in handles {
        h.join().unwrap();
    }
    elapsed
}

const CAP: u64 = 4096;

/// A bounded single-producer, single-consumer ring of `u64`.
#[repr(align(128))]
struct Ring {
    tail: AtomicU64,
    _pad: [u8; 120],
    head: AtomicU64,
    _pad2: [u8; 120],
    slots: Box<[AtomicU64]>,
}

impl Ring {
    fn many(n: usize) -> Arc<Vec<Ring>> {
        Arc::new(
            (0..n)
                .map(|_| Ring {
                    tail: AtomicU64::new(0),
                    _pad: [0; 120],
                    head: AtomicU64::new(0),
                    _pad2: [0; 120],
                    slots: (0..CAP).map(|_| AtomicU64::new(0)).collect(),
                })
                .collect(),
        )
    }

    fn slot(&self, pos: u64) -> &AtomicU64 {
        &self.slots[(pos % CAP) as usize]
    }
}

/// How a ring's consumer learns what is published.
#[derive(Clone, Copy)]
enum Publish {
    /// The producer stores the tail after each slot; the consumer reads the tail.
    Tail,
    /// Each slot holds its position + 1 as a tag; the consumer reads slots only.
    Tags,
}

/// One ring per context, each drained by the consumer thread `ctx % threads`.
fn floor_rings(ctxs: usize, tasks: u64, threads: usize, publish: Publish) -> f64 {
    let run = Run::new(ctxs, tasks);
    let rings = Ring::many(ctxs);
    let (r, rs) = (run.clone(), rings.clone());
    let consumer = move |t: usize, stop: &AtomicBool| {
        let mine: Vec<usize> = (0..ctxs).filter(|c| c % threads == t).collect();
        let mut heads = vec![0u64; ctxs];
        while !stop.load(Ordering::Relaxed) {
            for &c in &mine {
                let ring = &rs[c];
                let mut h = heads[c];
                let tail = match publish {
                    Publish::Tail => ring.tail.load(Ordering::Acquire),
                    Publish::Tags => u64::MAX,
                };
                while h < tail {
                    let v = ring.slot(h).load(Ordering::Acquire);
                    if let Publish::Tags = publish {
                        if v != h + 1 {
                            break;
                        }
                    }
                    task(&r, c, h + 1);
                    h += 1;
                    if h % 256 == 0 {
                        ring.head.store(h, Ordering::Release);
                    }
                }
                heads[c] = h;
            }
        }
    };
    timed(&run, threads, consumer, || {
        let mut tails = vec![0u64; ctxs];
        let mut heads = vec![0u64; ctxs];
        for _ in 0..tasks {
            for (c, ring) in rings.iter().enumerate() {
                let t = tails[c];
                while t - heads[c] >= CAP - 256 {
                    heads[c] = ring.head.load(Ordering::Acquire);
                    std::hint::spin_loop();
                }
                ring.slot(t).store(t + 1, Ordering::Release);
                if let Publish::Tail = publish {
                    ring.tail.store(t + 1, Ordering::Release);
                }
                tails[c] = t + 1;
            }
        }
    })
}

/// One ring for all contexts and one consumer: per-context order from FIFO alone, no
/// parallelism across contexts.
fn floor_single(ctxs: usize, tasks: u64) -> f64 {
    let run = Run::new(ctxs, tasks);
    let ring = Ring::many(1);
    let (r, rs) = (run.clone(), ring.clone());
    let consumer = move |_: usize, stop: &AtomicBool| {
        let ring = &rs[0];
        let mut h = 0u64;
        while !stop.load(Ordering::Relaxed) {
            loop {
                let v = ring.slot(h).load(Ordering::Acquire);
                if v >> 20 != h + 1 {
                    break;
                }
                task(&r, (v & 0xfffff) as usize, h / ctxs as u64 + 1);
                h += 1;
                if h % 256 == 0 {
                    ring.head.store(h, Ordering::Release);
                }
            }
        }
    };
    timed(&run, 1, consumer, || {
        let ring = &ring[0];
        let (mut t, mut head) = (0u64, 0u64);
        for _ in 0..tasks {
            for c in 0..ctxs {
                while t - head >= CAP - 256 {
                    head = ring.head.load(Ordering::Acquire);
                    std::hint::spin_loop();
                }
                ring.slot(t).store(((t + 1) << 20) | c as u64, Ordering::Release);
                t += 1;
            }
        }
    })
}

/// One crossbeam unbounded channel per context, consumers spinning on `try_recv`.
fn floor_channel(ctxs: usize, tasks: u64, threads: usize) -> f64 {
    let run = Run::new(ctxs, tasks);
    let (txs, rxs): (Vec<_>, Vec<_>) = (0..ctxs).map(|_| crossbeam_channel::unbounded()).unzip();
    let r = run.clone();
    let consumer = move |t: usize, stop: &AtomicBool| {
        while !stop.load(Ordering::Relaxed) {
            for c in (0..ctxs).filter(|c| c % threads == t) {
                while let Ok(seq) = rxs[c].try_recv() {
                    task(&r, c, seq);
                }
            }
        }
    };
    timed(&run, threads, consumer, || {
        for seq in 1..=tasks {
            for tx in &txs {
                tx.send(seq).unwrap();
            }
        }
    })
}

/// tokio-actor as keyway-bench runs it: a task and an unbounded mpsc per context.
fn tokio_actor(ctxs: usize, tasks: u64, threads: usize) -> f64 {
    let run = Run::new(ctxs, tasks);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .build()
        .unwrap();
    let (mut txs, mut actors) = (vec![], vec![]);
    for c in 0..ctxs {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<u64>();
        let run = run.clone();
        actors.push(rt.spawn(async move {
            while let Some(seq) = rx.recv().await {
                task(&run, c, seq);
            }
        }));
        txs.push(tx);
    }
    let start = Instant::now();
    for seq in 1..=tasks {
        for tx in &txs {
            tx.send(seq).unwrap();
        }
    }
    while run.done.load(Ordering::Acquire) < ctxs {
        std::thread::yield_now();
    }
    let elapsed = start.elapsed().as_secs_f64();
    drop(txs);
    rt.block_on(async {
        for a in actors {
            a.await.unwrap();
        }
    });
    elapsed
}

/// The producer's loop alone, into per-context vectors: the cost of feeding, with no consumer.
fn producer_only(ctxs: usize, tasks: u64) -> f64 {
    let mut queues: Vec<Vec<u64>> = (0..ctxs)
        .map(|_| Vec::with_capacity(tasks as usize))
        .collect();
    let start = Instant::now();
    for seq in 1..=tasks {
        for q in queues.iter_mut() {
            q.push(black_box(seq));
        }
    }
    let elapsed = start.elapsed().as_secs_f64();
    black_box(&queues);
    elapsed
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("arguments: contexts tasks runs threads"))
        .collect();
    let ctxs = *args.first().unwrap_or(&16);
    let tasks = *args.get(1).unwrap_or(&50_000) as u64;
    let runs = *args.get(2).unwrap_or(&7);
    let threads = *args.get(3).unwrap_or(&1);
    let names = [
        "tokio-actor",
        "floor-ring (spinning SPSC)",
        "floor-channel (spinning crossbeam)",
        "producer-only",
        "floor-tagged (slot-tag SPSC)",
        "single ring, one consumer",
    ];
    let mut times: Vec<Vec<f64>> = vec![vec![]; names.len()];
    // One uncounted warm-up round, then `runs` rounds in a rotating order.
    for round in 0..=runs {
        for i in 0..names.len() {
            let k = (i + round) % names.len();
            let t = match k {
                0 => tokio_actor(ctxs, tasks, threads),
                1 => floor_rings(ctxs, tasks, threads, Publish::Tail),
                2 => floor_channel(ctxs, tasks, threads),
                3 => producer_only(ctxs, tasks),
                4 => floor_rings(ctxs, tasks, threads, Publish::Tags),
                _ => floor_single(ctxs, tasks),
            };
            if round > 0 {
                times[k].push(t);
            }
        }
    }
    let tokio = median(times[0].clone());
    for (name, t) in names.iter().zip(times) {
        let m = median(t);
        println!("{name:36} {m:.4} s  tokio/this {:.2}x", tokio / m);
    }
}
