use super::*;
use std::collections::VecDeque;

/// A deterministic mix of every operation against a `VecDeque`: pushes and pops at both ends,
/// the runner's take and give-back with pushes in between, a chunk walked part way, and the
/// recycling of a chunk's blocks.
#[test]
fn the_queue_behaves_as_a_deque_across_home_and_blocks() {
    let mut q = Queue::new();
    let mut chunk = Queue::new();
    let mut model = VecDeque::new();
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for i in 0..60_000u32 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        match x % 11 {
            0..=3 => {
                q.push_back(i);
                model.push_back(i);
            }
            4 => {
                q.push_front(i);
                model.push_front(i);
            }
            5 | 6 => assert_eq!(q.pop_front(), model.pop_front()),
            7 => assert_eq!(q.pop_back(), model.pop_back()),
            8 => {
                // A coalescing push replaces the back.
                if q.back().is_some() {
                    assert_eq!(q.pop_back(), model.pop_back());
                }
                q.push_back(i);
                model.push_back(i);
            }
            _ => runner_turn(&mut q, &mut chunk, &mut model, x),
        }
        assert_eq!(q.len(), model.len());
        assert_eq!(q.front(), model.front());
        assert_eq!(q.back(), model.back());
        assert!(q.spare_entries() <= Queue::<u32>::SPARE_KEEP);
    }
    let rest: Vec<u32> = std::iter::from_fn(|| q.pop_front()).collect();
    assert_eq!(rest, Vec::from(model));
    q.reclaim(&mut chunk);
    assert!(
        q.chain_blocks() <= 1,
        "an empty queue links at most its emptied head"
    );
}

/// A runner's turn inside `the_queue_behaves_as_a_deque_across_home_and_blocks`: take (whole
/// or a batch drawn from `x`), walk part of the chunk, maybe put an entry back in front, let the
/// producer push, give the rest back.
fn runner_turn(q: &mut Queue<u32>, chunk: &mut Queue<u32>, model: &mut VecDeque<u32>, x: u64) {
    q.reclaim(chunk);
    let want = [usize::MAX, 1, 32, 300][(x >> 50) as usize % 4];
    q.take_into(chunk, want);
    let mut taken: VecDeque<u32> = model.drain(..chunk.len()).collect();
    assert!(
        q.is_empty() || chunk.len() >= want,
        "a partial take holds the batch"
    );
    for _ in 0..(x >> 20) % 600 {
        assert_eq!(chunk.front(), taken.front());
        assert_eq!(chunk.pop_front(), taken.pop_front());
    }
    if (x >> 40) % 3 == 0 {
        // A runner puts an entry it took back in front of its chunk.
        if let Some(e) = chunk.pop_front() {
            chunk.push_front(e);
        }
    }
    for j in 0..(x >> 30) % 50 {
        q.push_back(j as u32 + 1_000_000);
        model.push_back(j as u32 + 1_000_000);
    }
    q.give_back(chunk);
    taken.append(model);
    *model = taken;
    assert!(chunk.is_empty());
}

/// Growth links blocks twice the size of the last (log n blocks a burst), and a drained
/// queue's blocks are reused by the next burst: nothing new is allocated.
#[test]
fn blocks_double_and_a_warm_queue_reuses_them() {
    let mut q = Queue::new();
    for i in 0..(1 + 4 + 8 + 16) as u32 {
        q.push_back(i);
    }
    assert_eq!(q.chain_blocks(), 3, "4, 8 and 16 entries past the home");
    // As a runner does: take the queue, run the chunk, hand its emptied blocks back.
    let mut chunk = Queue::new();
    q.take_into(&mut chunk, usize::MAX);
    for i in 0..(1 + 4 + 8 + 16) as u32 {
        assert_eq!(chunk.pop_front(), Some(i));
    }
    q.reclaim(&mut chunk);
    assert_eq!(chunk.chain_blocks() + chunk.spare_entries(), 0);
    assert_eq!(q.spare_entries(), 28);
    for i in 0..(1 + 28) as u32 {
        q.push_back(i);
    }
    assert_eq!(q.spare_entries(), 0, "the spares were reused");
    assert_eq!(q.chain_blocks(), 3);
    let mut big = Queue::new();
    for i in 0..100_000u32 {
        big.push_back(i);
    }
    let max = (MAX_BLOCK_BYTES / size_of::<u32>()) as usize;
    assert!(
        big.chain_blocks() <= 16 + 100_000 / max,
        "{}",
        big.chain_blocks()
    );
}

/// Entries are dropped once, whether popped or left in a dropped queue or chunk.
#[test]
fn a_dropped_queue_drops_each_entry_once() {
    use std::sync::Arc;
    let token = Arc::new(());
    let mut q = Queue::new();
    for _ in 0..1_000 {
        q.push_back(token.clone());
    }
    for _ in 0..300 {
        drop(q.pop_front());
    }
    q.push_front(token.clone());
    let mut chunk = Queue::new();
    q.take_into(&mut chunk, usize::MAX);
    q.push_back(token.clone());
    drop(chunk.pop_back());
    drop(q);
    drop(chunk);
    assert_eq!(Arc::strong_count(&token), 1);
}

/// One entry lives in the lane's state (the home): a one-entry activation allocates no block.
#[test]
fn one_entry_needs_no_block() {
    let mut q = Queue::new();
    let mut chunk = Queue::new();
    for i in 0..10u32 {
        q.reclaim(&mut chunk);
        q.push_back(i);
        q.take_into(&mut chunk, usize::MAX);
        assert_eq!(chunk.pop_front(), Some(i));
        assert_eq!(chunk.pop_front(), None);
    }
    assert_eq!(q.chain_blocks() + chunk.chain_blocks(), 0);
    assert_eq!(q.spare_entries() + chunk.spare_entries(), 0);
}

/// A queue emptied by pops of its own (an async lane's driver, a multi-key task passed) keeps its
/// emptied head linked; trimming an idle queue's spares frees it too.
#[test]
fn trimming_an_empty_queue_frees_its_emptied_head() {
    let mut q = Queue::new();
    for i in 0..40u32 {
        q.push_back(i);
    }
    while q.pop_front().is_some() {}
    assert_eq!(q.chain_blocks(), 1, "the emptied head stays linked");
    q.trim_spare(0);
    assert_eq!(q.chain_blocks() + q.spare_entries(), 0);
    q.push_back(7);
    assert_eq!(q.pop_front(), Some(7));
}

/// A lane's queue and a runner's chunk driven as a producer and a runner interleave them,
/// checking that every entry comes out once, in order.
struct Busy {
    q: Queue<u64>,
    chunk: Queue<u64>,
    next: u64,
    expect: u64,
    peak: usize,
}

impl Busy {
    const BATCH: usize = 32;

    /// One turn: the runner hands back its chunk's spares and takes (as `take_chunk`), runs at
    /// most a batch while the producer pushes `pushes` entries, then gives the rest back (as
    /// the turn's end). The entries it ran.
    fn turn(&mut self, pushes: usize) -> usize {
        self.q.reclaim(&mut self.chunk);
        self.q.take_into(&mut self.chunk, Self::BATCH);
        let mut ran = 0;
        while ran < Self::BATCH {
            let Some(e) = self.chunk.pop_front() else {
                break;
            };
            assert_eq!(e, self.expect);
            self.expect += 1;
            ran += 1;
        }
        for _ in 0..pushes {
            self.q.push_back(self.next);
            self.next += 1;
        }
        self.q.give_back(&mut self.chunk);
        self.q.reclaim(&mut self.chunk);
        self.peak = self.peak.max(self.q.len());
        ran
    }

    /// Turns until `tasks` entries ran, the producer's share of each drawn from `seed`: mostly
    /// about the batch, sometimes a burst of hundreds, sometimes nothing (the runner catches
    /// up); then the producer stops and the runner drains the lane.
    fn pass(&mut self, tasks: usize, seed: u64) {
        let mut x = seed;
        let mut ran = 0;
        while ran < tasks {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let pushes = match x % 32 {
                0 => 100 + (x >> 8) as usize % 1_000,
                1..=11 => 0,
                _ => (x >> 8) as usize % 41,
            };
            ran += self.turn(pushes);
        }
        while !self.q.is_empty() {
            self.turn(0);
        }
    }
}

/// A busy lane's turns: each turn the runner takes the queue, runs a batch of it and gives the
/// rest back, while the producer pushes a varying number of entries (the lane's depth wanders
/// between empty and about ten thousand). Once warm (a first pass through like depths), the
/// queue allocates next to no block: a backlog stays one doubling chain, its blocks recycled.
/// (With a take that always moved the whole queue, the producer's tail went with it and each
/// turn started a new chain of small blocks: 279 new blocks in the warm pass.)
#[test]
fn a_busy_lane_with_a_wandering_depth_allocates_no_block_once_warm() {
    const TASKS: usize = 100_000;
    let mut busy = Busy {
        q: Queue::new(),
        chunk: Queue::new(),
        next: 0,
        expect: 0,
        peak: 0,
    };
    busy.pass(TASKS, 0x9E37_79B9_7F4A_7C15);
    let warm = NEW_BLOCKS.with(|n| n.replace(0));
    busy.pass(TASKS, 0x2545_F491_4F6C_DD1D);
    let hot = NEW_BLOCKS.with(|n| n.get());
    let peak = busy.peak;
    println!("new blocks: {warm} warming up, {hot} warm, peak depth {peak}");
    assert!(peak > 5_000, "the depth wandered only up to {peak}");
    assert!(
        hot <= TASKS / 5_000,
        "{hot} new blocks for {TASKS} tasks on a warm lane ({warm} warming up)"
    );
}
