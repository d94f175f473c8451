//! Key popularity: which context each task of a run goes to when contexts are not equally
//! popular. A Zipf popularity with exponent `s` over `n` keys gives the key of rank `k`
//! (1-based) a share proportional to `1 / k^s`: at `s = 1.1` over 100,000 keys the hottest
//! key takes about 1 task in 10 and half the keys see a task rarely or never, as real key
//! streams do. Keys are drawn for each task from a deterministic generator (SplitMix64 of the
//! task's index), untimed, before the run.

use crate::keys::splitmix64;

/// The tasks of a run spread over its contexts by popularity.
#[derive(Debug)]
pub struct Popularity {
    /// (context, sequence number within the context) of each task, in submission order.
    order: Box<[(u32, u32)]>,
    /// Tasks of each context.
    counts: Box<[u64]>,
    /// Where the tasks of context `c` start in `positions`.
    offsets: Box<[u64]>,
    /// The submission index of each task, grouped by context then sequence number.
    positions: Box<[u32]>,
}

/// The cumulative shares of a Zipf popularity with exponent `s` over `keys` keys, rank order.
fn zipf_cdf(keys: usize, s: f64) -> Vec<f64> {
    let mut cdf = Vec::with_capacity(keys);
    let mut sum = 0.0;
    for k in 1..=keys {
        sum += (k as f64).powf(-s);
        cdf.push(sum);
    }
    for c in &mut cdf {
        *c /= sum;
    }
    cdf
}

impl Popularity {
    /// `tasks` tasks over `keys` contexts, each drawn with Zipf popularity of exponent `s`
    /// (`s = 0`: uniform); the context of rank `k` is context `k - 1`.
    pub fn zipf(keys: usize, tasks: u64, s: f64) -> Self {
        let keys = keys.clamp(1, u32::MAX as usize);
        let cdf = zipf_cdf(keys, if s.is_finite() { s.max(0.0) } else { 0.0 });
        Self::from_draws(keys, tasks, |i| {
            // A uniform draw in [0, 1) from 53 bits of the task's hash.
            let u = (splitmix64(i) >> 11) as f64 / (1u64 << 53) as f64;
            cdf.partition_point(|&c| c <= u).min(keys - 1)
        })
    }

    /// `tasks` tasks over `keys` contexts, task `i` going to `draw(i)` (< `keys`).
    pub fn from_draws(keys: usize, tasks: u64, mut draw: impl FnMut(u64) -> usize) -> Self {
        let tasks = tasks.min(u32::MAX as u64);
        let mut counts = vec![0u64; keys];
        let order: Box<[(u32, u32)]> = (0..tasks)
            .map(|i| {
                let ctx = draw(i).min(keys - 1);
                counts[ctx] += 1;
                (ctx as u32, counts[ctx] as u32)
            })
            .collect();
        let mut offsets = Vec::with_capacity(keys);
        let mut at = 0u64;
        for &c in &counts {
            offsets.push(at);
            at += c;
        }
        let mut positions = vec![0u32; tasks as usize];
        for (i, &(ctx, seq)) in order.iter().enumerate() {
            positions[(offsets[ctx as usize] + u64::from(seq) - 1) as usize] = i as u32;
        }
        Self {
            order,
            counts: counts.into(),
            offsets: offsets.into(),
            positions: positions.into(),
        }
    }

    /// Number of contexts.
    pub fn keys(&self) -> usize {
        self.counts.len()
    }

    /// Tasks of context `ctx`.
    #[inline]
    pub fn tasks_of(&self, ctx: usize) -> u64 {
        self.counts[ctx]
    }

    /// Contexts that get at least one task.
    pub fn busy_keys(&self) -> usize {
        self.counts.iter().filter(|&&c| c > 0).count()
    }

    /// The share of all tasks the most popular context gets.
    #[cfg(test)]
    pub fn top_share(&self) -> f64 {
        let top = self.counts.iter().copied().max().unwrap_or(0);
        top as f64 / self.order.len().max(1) as f64
    }

    /// (context, sequence number) of every task, in submission order.
    pub fn order(&self) -> &[(u32, u32)] {
        &self.order
    }

    /// The submission index of task `seq` (1-based) of `ctx`.
    #[inline]
    pub fn position(&self, ctx: usize, seq: u64) -> u64 {
        u64::from(self.positions[(self.offsets[ctx] + seq - 1) as usize])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zipf_favours_low_ranks_by_the_power_law() {
        let p = Popularity::zipf(100_000, 400_000, 1.1);
        assert_eq!(p.keys(), 100_000);
        assert_eq!(p.order().len(), 400_000);
        // Rank 1's share at s = 1.1 over 100,000 keys: 1 / H(100000, 1.1) ≈ 0.12.
        let top = p.top_share();
        assert!((0.10..0.14).contains(&top), "{top}");
        // Rank 1 against rank 10: about 10^1.1 ≈ 12.6 times as many tasks.
        let ratio = p.tasks_of(0) as f64 / p.tasks_of(9) as f64;
        assert!((10.0..16.0).contains(&ratio), "{ratio}");
        assert!(p.busy_keys() < 100_000);
        let uniform = Popularity::zipf(1_000, 100_000, 0.0);
        assert!(uniform.top_share() < 0.002, "{}", uniform.top_share());
    }

    #[test]
    fn sequence_numbers_count_up_per_context_and_positions_invert_the_order() {
        let p = Popularity::zipf(50, 5_000, 1.1);
        let mut next = [1u32; 50];
        for (i, &(ctx, seq)) in p.order().iter().enumerate() {
            assert_eq!(seq, next[ctx as usize]);
            next[ctx as usize] += 1;
            assert_eq!(p.position(ctx as usize, u64::from(seq)), i as u64);
        }
        for (ctx, n) in next.iter().enumerate() {
            assert_eq!(u64::from(n - 1), p.tasks_of(ctx));
        }
    }

    #[test]
    fn odd_exponents_and_sizes_stay_in_range() {
        for s in [f64::NAN, -1.0, f64::INFINITY, 0.0, 5.0] {
            let p = Popularity::zipf(3, 100, s);
            assert_eq!(p.order().len(), 100);
            assert!(p.order().iter().all(|&(c, _)| c < 3));
        }
        assert_eq!(Popularity::zipf(0, 10, 1.1).keys(), 1);
        assert_eq!(Popularity::zipf(5, 0, 1.1).busy_keys(), 0);
    }
}
