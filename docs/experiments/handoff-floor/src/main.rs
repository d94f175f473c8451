//! Floor for `contexts --work 10`: what a dedicated, always-spinning per-context handoff costs,
//! against tokio-actor, same work function, same round-robin producer.
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

#[inline(never)]
fn spin(work: u64) -> u64 {
    let local = AtomicU64::new(0);
    let local = black_box(&local);
    for _ in 0..work { local.fetch_add(1, Ordering::Relaxed); }
    local.load(Ordering::Relaxed)
}
#[repr(align(128))]
#[derive(Default)]
struct Cell { last: AtomicU64 }
struct Run { cells: Vec<Cell>, tasks: u64, work: u64, done: AtomicUsize }
#[inline(never)]
fn task(run: &Run, ctx: usize, seq: u64) {
    black_box(spin(run.work));
    let c = &run.cells[ctx];
    let prev = c.last.load(Ordering::Relaxed);
    assert_eq!(prev + 1, seq);
    c.last.store(seq, Ordering::Relaxed);
    if seq == run.tasks { run.done.fetch_add(1, Ordering::Release); }
}
fn new_run(ctxs: usize, tasks: u64) -> Arc<Run> {
    Arc::new(Run { cells: (0..ctxs).map(|_| Cell::default()).collect(), tasks, work: 10, done: AtomicUsize::new(0) })
}

/// Bounded SPSC ring per context: producer writes slot then publishes tail (Release);
/// the consumer caches the tail and publishes head rarely.
#[repr(align(128))]
struct Ring { tail: AtomicU64, _p: [u8; 120], head: AtomicU64, _q: [u8; 120], slots: Box<[AtomicU64]> }
const CAP: u64 = 4096;
impl Ring { fn new() -> Self { Ring { tail: AtomicU64::new(0), _p: [0; 120], head: AtomicU64::new(0), _q: [0;120], slots: (0..CAP).map(|_| AtomicU64::new(0)).collect() } } }

fn floor_ring(ctxs: usize, tasks: u64, threads: usize) -> f64 {
    let run = new_run(ctxs, tasks);
    let rings: Arc<Vec<Ring>> = Arc::new((0..ctxs).map(|_| Ring::new()).collect());
    let stop = Arc::new(AtomicBool::new(false));
    let mut hs = vec![];
    for t in 0..threads {
        let (run, rings, stop) = (run.clone(), rings.clone(), stop.clone());
        hs.push(std::thread::spawn(move || {
            let mine: Vec<usize> = (0..ctxs).filter(|c| c % threads == t).collect();
            let mut heads = vec![0u64; ctxs];
            while !stop.load(Ordering::Relaxed) {
                for &c in &mine {
                    let r = &rings[c];
                    let tail = r.tail.load(Ordering::Acquire);
                    let mut h = heads[c];
                    while h < tail {
                        let seq = r.slots[(h % CAP) as usize].load(Ordering::Relaxed);
                        task(&run, c, seq);
                        h += 1;
                    }
                    if h != heads[c] { heads[c] = h; r.head.store(h, Ordering::Release); }
                }
            }
        }));
    }
    let start = Instant::now();
    let mut tails = vec![0u64; ctxs];
    for seq in 1..=tasks {
        for c in 0..ctxs {
            let r = &rings[c];
            let t = tails[c];
            while t - r.head.load(Ordering::Acquire) >= CAP { std::hint::spin_loop(); }
            r.slots[(t % CAP) as usize].store(seq, Ordering::Relaxed);
            r.tail.store(t + 1, Ordering::Release);
            tails[c] = t + 1;
        }
    }
    while run.done.load(Ordering::Acquire) < ctxs { std::hint::spin_loop(); }
    let e = start.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    for h in hs { h.join().unwrap(); }
    e
}

/// Slot-tagged SPSC ring: the consumer reads slots (tag = position + 1), never a shared tail;
/// it publishes its head every 256 items; the producer reads the head only when its cache says full.
fn floor_tagged(ctxs: usize, tasks: u64, threads: usize) -> f64 {
    let run = new_run(ctxs, tasks);
    let rings: Arc<Vec<Ring>> = Arc::new((0..ctxs).map(|_| Ring::new()).collect());
    let stop = Arc::new(AtomicBool::new(false));
    let mut hs = vec![];
    for t in 0..threads {
        let (run, rings, stop) = (run.clone(), rings.clone(), stop.clone());
        hs.push(std::thread::spawn(move || {
            let mine: Vec<usize> = (0..ctxs).filter(|c| c % threads == t).collect();
            let mut heads = vec![0u64; ctxs];
            while !stop.load(Ordering::Relaxed) {
                for &c in &mine {
                    let r = &rings[c];
                    let mut h = heads[c];
                    loop {
                        let v = r.slots[(h % CAP) as usize].load(Ordering::Acquire);
                        if v != h + 1 { break; }
                        task(&run, c, v);
                        h += 1;
                        if h % 256 == 0 { r.head.store(h, Ordering::Release); }
                    }
                    heads[c] = h;
                }
            }
        }));
    }
    let start = Instant::now();
    let mut tails = vec![0u64; ctxs];
    let mut heads = vec![0u64; ctxs];
    for _seq in 1..=tasks {
        for c in 0..ctxs {
            let r = &rings[c];
            let t = tails[c];
            while t - heads[c] >= CAP - 256 { heads[c] = r.head.load(Ordering::Acquire); std::hint::spin_loop(); }
            r.slots[(t % CAP) as usize].store(t + 1, Ordering::Release);
            tails[c] = t + 1;
        }
    }
    while run.done.load(Ordering::Acquire) < ctxs { std::hint::spin_loop(); }
    let e = start.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    for h in hs { h.join().unwrap(); }
    e
}

/// One SPSC ring for all contexts and ONE consumer thread (per-context order from FIFO alone;
/// no parallelism across contexts): the cheapest handoff of all, for reference.
fn floor_single(ctxs: usize, tasks: u64) -> f64 {
    let run = new_run(ctxs, tasks);
    let ring: Arc<Ring> = Arc::new(Ring::new());
    let stop = Arc::new(AtomicBool::new(false));
    let (run2, ring2, stop2) = (run.clone(), ring.clone(), stop.clone());
    let h = std::thread::spawn(move || {
        let mut h = 0u64;
        while !stop2.load(Ordering::Relaxed) {
            loop {
                let v = ring2.slots[(h % CAP) as usize].load(Ordering::Acquire);
                if v >> 20 != h + 1 { break; }
                let ctx = (v & 0xfffff) as usize;
                let seq = (h / ctxs as u64) + 1;
                task(&run2, ctx, seq);
                h += 1;
                if h % 256 == 0 { ring2.head.store(h, Ordering::Release); }
            }
        }
    });
    let start = Instant::now();
    let (mut t, mut head) = (0u64, 0u64);
    for _seq in 1..=tasks {
        for c in 0..ctxs {
            while t - head >= CAP - 256 { head = ring.head.load(Ordering::Acquire); std::hint::spin_loop(); }
            ring.slots[(t % CAP) as usize].store(((t + 1) << 20) | c as u64, Ordering::Release);
            t += 1;
        }
    }
    while run.done.load(Ordering::Acquire) < ctxs { std::hint::spin_loop(); }
    let e = start.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    h.join().unwrap();
    e
}

fn floor_channel(ctxs: usize, tasks: u64, threads: usize) -> f64 {
    let run = new_run(ctxs, tasks);
    let (txs, rxs): (Vec<_>, Vec<_>) = (0..ctxs).map(|_| crossbeam_channel::unbounded::<u64>()).unzip();
    let rxs = Arc::new(rxs);
    let stop = Arc::new(AtomicBool::new(false));
    let mut hs = vec![];
    for t in 0..threads {
        let (run, rxs, stop) = (run.clone(), rxs.clone(), stop.clone());
        hs.push(std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                for c in (0..ctxs).filter(|c| c % threads == t) {
                    while let Ok(seq) = rxs[c].try_recv() { task(&run, c, seq); }
                }
            }
        }));
    }
    let start = Instant::now();
    for seq in 1..=tasks { for c in 0..ctxs { txs[c].send(seq).unwrap(); } }
    while run.done.load(Ordering::Acquire) < ctxs { std::hint::spin_loop(); }
    let e = start.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    for h in hs { h.join().unwrap(); }
    e
}

fn tokio_actor(ctxs: usize, tasks: u64, threads: usize) -> f64 {
    let run = new_run(ctxs, tasks);
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(threads).build().unwrap();
    let mut txs = vec![]; let mut actors = vec![];
    for c in 0..ctxs {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<u64>();
        let run = run.clone();
        actors.push(rt.spawn(async move { while let Some(s) = rx.recv().await { task(&run, c, s); } }));
        txs.push(tx);
    }
    let start = Instant::now();
    for seq in 1..=tasks { for c in 0..ctxs { txs[c].send(seq).unwrap(); } }
    while run.done.load(Ordering::Acquire) < ctxs { std::thread::yield_now(); }
    let e = start.elapsed().as_secs_f64();
    drop(txs);
    rt.block_on(async { for a in actors { a.await.unwrap(); } });
    e
}

fn producer_only(ctxs: usize, tasks: u64) -> f64 {
    // The producer's loop alone into per-context Vecs (no consumer): a lower bound of feeding.
    let mut v: Vec<Vec<u64>> = (0..ctxs).map(|_| Vec::with_capacity(tasks as usize)).collect();
    let start = Instant::now();
    for seq in 1..=tasks { for c in 0..ctxs { v[c].push(black_box(seq)); } }
    let e = start.elapsed().as_secs_f64();
    black_box(&v);
    e
}

fn median(mut v: Vec<f64>) -> f64 { v.sort_by(|a, b| a.partial_cmp(b).unwrap()); v[v.len() / 2] }

fn main() {
    let args: Vec<usize> = std::env::args().skip(1).map(|a| a.parse().unwrap()).collect();
    let ctxs = *args.first().unwrap_or(&16);
    let tasks = *args.get(1).unwrap_or(&50_000) as u64;
    let runs = *args.get(2).unwrap_or(&7);
    let threads = *args.get(3).unwrap_or(&2);
    let names = ["tokio-actor", "floor-ring (spinning SPSC)", "floor-channel (spinning crossbeam)", "producer-only", "floor-tagged (slot-tag SPSC)", "single ring, one consumer"];
    let mut res: Vec<Vec<f64>> = vec![vec![]; 6];
    for r in 0..=runs {
        for i in 0..6 {
            let k = (i + r) % 6;
            let t = match k { 0 => tokio_actor(ctxs, tasks, threads), 1 => floor_ring(ctxs, tasks, threads), 2 => floor_channel(ctxs, tasks, threads), 4 => floor_tagged(ctxs, tasks, threads), 5 => floor_single(ctxs, tasks), _ => producer_only(ctxs, tasks) };
            if r > 0 { res[k].push(t); }
        }
    }
    let tok = median(res[0].clone());
    for k in 0..6 { let m = median(res[k].clone()); println!("{:36} {:.4} s  tokio/this {:.2}x", names[k], m, tok / m); }
}
