//! The frequency model: quantizing a histogram to frequencies summing to `2^s` (exactly
//! optimal, and a rounded estimate), the mode that writes them shortest, and lower bounds
//! on a body's size that let a planner skip encoding.

use super::{Layout, MAX_SCALE_BITS, WIDE_MAX_SCALE_BITS};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::codec::bitio::eg_len;
use crate::codec::table::SmallEg;
use crate::tensor::bits_needed;

/// How the frequencies are written (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::codec) enum FreqMode {
    /// `f - 1` in a fixed number of bits.
    Fixed(u32),
    /// `f - 1` as Exp-Golomb codes of one order.
    ExpGolomb(u32),
    /// `f - 1` as Exp-Golomb codes of order `bits(previous f - 1)`.
    Adaptive,
    /// Zigzag differences of successive `f - 1` as Exp-Golomb codes of one order.
    Delta(u32),
}

/// Order of the adaptive Exp-Golomb code after a value of `prev`.
#[inline]
pub(super) fn adaptive_k(prev: u64) -> u32 {
    bits_needed(prev)
}

#[inline]
pub(super) fn zigzag(d: i64) -> u64 {
    ((d << 1) ^ (d >> 63)) as u64
}

#[inline]
pub(super) fn unzigzag(z: u64) -> i64 {
    (z >> 1) as i64 ^ -((z & 1) as i64)
}

/// Successive zigzag differences of `f - 1`, starting from 0.
pub(super) fn freq_deltas(freqs: &[u32]) -> impl Iterator<Item = u64> + Clone + '_ {
    freqs.iter().enumerate().map(|(i, &f)| {
        let prev = if i == 0 {
            0
        } else {
            i64::from(freqs[i - 1]) - 1
        };
        zigzag(i64::from(f) - 1 - prev)
    })
}

feature_fn! {
    "lzcnt";
    /// The shortest way to write `freqs`, and its size in bits (mode field included).
    pub(in crate::codec) fn plan_freqs(freqs: &[u32]) -> (FreqMode, u64) = plan_freqs_in;
}

/// [`plan_freqs`]'s pass, inlined into each of its builds.
#[inline(always)]
pub(super) fn plan_freqs_in(freqs: &[u32]) -> (FreqMode, u64) {
    // Every mode's size from one pass: `f - 1` and their differences as the table writes
    // them ([`freq_deltas`]) counted for the Exp-Golomb orders ([`SmallEg`]), with the
    // largest value and the adaptive code's total on the way.
    let m = freqs.len();
    let (mut vals, mut deltas) = (SmallEg::new(), SmallEg::new());
    let (mut max, mut adaptive, mut prev) = (0u64, 0u64, 0u64);
    for (&f, z) in freqs.iter().zip(freq_deltas(freqs)) {
        let v = u64::from(f - 1);
        vals.add(v);
        deltas.add(z);
        adaptive += eg_len(v, adaptive_k(prev));
        max = max.max(v);
        prev = v;
    }
    let w = bits_needed(max);
    let mut best = (FreqMode::Fixed(w), 2 + 5 + m as u64 * u64::from(w));
    let mut consider = |mode: FreqMode, bits: u64| {
        if bits < best.1 {
            best = (mode, bits);
        }
    };
    let (k, eg) = vals.best(15);
    consider(FreqMode::ExpGolomb(k), 2 + 4 + eg);
    consider(FreqMode::Adaptive, 2 + adaptive);
    let (k, delta) = deltas.best(15);
    consider(FreqMode::Delta(k), 2 + 4 + delta);
    best
}

/// Bits of the ideal payload of `counts` under frequencies `freqs` summing to `2^scale`:
/// `sum c_i (scale - log2 f_i)` (`lg`: [`log2_table`]), summed in index order.
///
/// # Panics
/// If a frequency exceeds `2^16` or the slices differ in length (debug builds).
pub(in crate::codec) fn model_bits(counts: &[u64], freqs: &[u32], scale: u32, lg: &[f64]) -> f64 {
    debug_assert_eq!(counts.len(), freqs.len());
    let s = f64::from(scale);
    // One accumulator in a register, added to in index order (the bits `Iterator::sum`
    // gives, without its spill of the running sum to the stack on every word).
    let mut bits = 0.0;
    for (&c, &f) in counts.iter().zip(freqs) {
        bits += c as f64 * (s - lg[f as usize]);
    }
    bits
}

/// A lower bound in bits on what any model at precision `scale` (whole frequencies
/// `f_i >= 1` summing to `M = 2^scale`) spends on `counts` above their entropy, less a
/// margin for rounding: the divergence `n D(p || f / M)`, at least the binary divergence
/// of the rare words' share `P` (those with `c_i M < n`, `k` of them) from the least
/// share `k / M` their frequencies can take (the divergence of a grouping bounds it, and
/// `d(P || Q)` grows with `Q` above `P`). One pass, no quantizing; 0 when no word is
/// rare. Requires `counts.len() <= M` and every count at least 1.
pub(in crate::codec) fn clamp_bits(counts: &[u64], scale: u32) -> f64 {
    let n: u64 = counts.iter().sum();
    if n >= 1 << 47 {
        return 0.0;
    }
    let (mut k, mut rare) = (0u64, 0u64);
    for &c in counts {
        if c << scale < n {
            k += 1;
            rare += c;
        }
    }
    if k == 0 {
        return 0.0;
    }
    let (p, q) = (rare as f64 / n as f64, k as f64 / f64::from(1u32 << scale));
    let mut d = p * (p / q).log2();
    if p < 1.0 {
        d += (1.0 - p) * ((1.0 - p) / (1.0 - q)).log2();
    }
    // The entropy, this bound and the payloads are sums of up to 2^16 terms of up to
    // 2^47 x 16 bits: far less than a bit of rounding each, so one bit per 10^6 of the
    // stream's bits covers them all.
    let margin = 1.0 + n as f64 * f64::from(scale) * 1e-6;
    (n as f64 * d - margin).max(0.0)
}

/// Bits every frequency table of `m` symbols takes after a table head of `head` bits:
/// the mode field and then a bit a frequency, or (all of them 1) a 5-bit width of 0. A
/// bound under which no plan of the table comes (with the entropy, or the payload).
pub(in crate::codec) fn least_table_bits(head: u64, m: usize) -> u64 {
    head + 4 + 2 + (m as u64).min(5)
}

/// `log2(f)` for `f` in `0..=2^16` (`f = 0` maps to 0), computed once.
pub(in crate::codec) fn log2_table() -> &'static [f64] {
    static TABLE: std::sync::OnceLock<Vec<f64>> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        (0..=1u32 << MAX_SCALE_BITS)
            .map(|f| if f == 0 { 0.0 } else { f64::from(f).log2() })
            .collect()
    })
}

/// Frequencies summing to `2^scale`, each >= 1, minimizing `sum c_i log2(2^scale / f_i)`.
/// Requires `1 <= counts.len() <= 2^scale <= 2^16` and every count >= 1.
///
/// Starts from the nearest rounding of `c_i 2^scale / n` (at least 1), fixes the sum
/// one unit at a time where it costs least, then moves single units while that lowers
/// the cost: for this separable convex cost, no improving unit move means optimal.
/// Ties go to the lower index. Each phase keeps a heap of what it needs only: the sum
/// is fixed from one heap (the units' costs as 128-bit keys), and the optimality test
/// is a scan; the heaps of the unit moves are built only when a move pays, which on
/// real histograms it never does (the fixed sum is already optimal).
pub fn quantize(counts: &[u64], scale: u32) -> Vec<u32> {
    if let Some(f) = quantize_equal(counts, scale) {
        return f;
    }
    quantize_any(counts, scale)
}

/// [`quantize`] of counts that are all equal (a stream of distinct words: every count
/// 1), in one pass: every unit costs the same, so the heaps would settle the sum at the
/// lowest indices, a unit each, and find nothing to move. `None` for other counts.
fn quantize_equal(counts: &[u64], scale: u32) -> Option<Vec<u32>> {
    let (&c, rest) = counts.split_first()?;
    if rest.is_empty() || rest.iter().any(|&x| x != c) {
        return None;
    }
    let total = u128::from(c) * counts.len() as u128;
    let n = u64::try_from(total).ok().filter(|&n| n < 1 << 47)?;
    let mut f = nearest(counts, n, scale);
    let m = f.len() as u64;
    let (sum, total_m) = (m * u64::from(f[0]), 1u64 << scale);
    // Rounding to the nearest leaves the sum less than a unit a count away.
    let off = sum.abs_diff(total_m);
    if off >= m || (sum > total_m && f[0] <= 1) {
        return None;
    }
    let step: i32 = if sum > total_m { -1 } else { 1 };
    for x in &mut f[..off as usize] {
        *x = x.wrapping_add_signed(step);
    }
    Some(f)
}

/// [`quantize`] for any counts.
fn quantize_any(counts: &[u64], scale: u32) -> Vec<u32> {
    let lg = log2_table();
    let total_m = 1u64 << scale;
    let n: u128 = counts.iter().map(|&c| u128::from(c)).sum();
    let n = n.max(1);
    let mut f: Vec<u32> = if n < 1 << 47 {
        // `c << scale` fits 64 bits: no 128-bit division.
        nearest(counts, n as u64, scale)
    } else {
        counts
            .iter()
            .map(|&c| (((u128::from(c) << scale) + n / 2) / n).clamp(1, u128::from(total_m)) as u32)
            .collect()
    };
    let sum: u64 = f.iter().map(|&x| u64::from(x)).sum();
    let q = UnitCosts { counts, lg };
    if sum > total_m {
        // Take units where the loss is least; a symbol at 1 has none to give.
        let mut dec: BinaryHeap<Reverse<u128>> = (0..f.len())
            .filter(|&i| f[i] > 1)
            .map(|i| Reverse(q.loss_key(i, f[i])))
            .collect::<Vec<_>>()
            .into();
        let mut left = sum - total_m;
        while left > 0 {
            let Some(Reverse(k)) = dec.pop() else {
                break;
            };
            let (i, fi) = UnitCosts::loss_entry(k);
            f[i] = fi - 1;
            left -= 1;
            if f[i] > 1 {
                dec.push(Reverse(q.loss_key(i, f[i])));
            }
        }
    } else if sum < total_m {
        // Give units where the gain is most.
        let mut inc: BinaryHeap<u128> = (0..f.len())
            .map(|i| q.gain_key(i, f[i]))
            .collect::<Vec<_>>()
            .into();
        for _ in sum..total_m {
            let Some(k) = inc.pop() else {
                break;
            };
            let (i, fi) = UnitCosts::gain_entry(k);
            f[i] = fi + 1;
            inc.push(q.gain_key(i, f[i]));
        }
    }
    // Optimal unless moving a unit from the least loss to the most gain pays.
    let best_gain = (0..f.len()).max_by_key(|&i| q.gain_key(i, f[i]));
    let least_loss = (0..f.len())
        .filter(|&i| f[i] > 1)
        .min_by_key(|&i| q.loss_key(i, f[i]));
    if let (Some(i), Some(j)) = (best_gain, least_loss) {
        if i != j && !q.settled(q.gain(i, f[i]), q.loss(j, f[j])) {
            q.unit_moves(&mut f);
        }
    }
    debug_assert_eq!(f.iter().map(|&x| u64::from(x)).sum::<u64>(), total_m);
    f
}

/// The cost in bits of a unit more or less of a frequency, for [`quantize`], and the
/// heap keys that order them: the cost's bits above the index and the frequency, so
/// that one 128-bit comparison orders by cost and then by index (lower first).
pub(super) struct UnitCosts<'a> {
    pub(super) counts: &'a [u64],
    pub(super) lg: &'a [f64],
}

impl UnitCosts<'_> {
    /// Bits saved by one more unit of symbol `i` at frequency `f`.
    fn gain(&self, i: usize, f: u32) -> f64 {
        let f = f as usize;
        self.counts[i] as f64 * (self.lg.get(f + 1).copied().unwrap_or(16.0) - self.lg[f])
    }

    /// Bits lost by one fewer unit (infinite at `f = 1`).
    fn loss(&self, i: usize, f: u32) -> f64 {
        if f <= 1 {
            f64::INFINITY
        } else {
            let f = f as usize;
            self.counts[i] as f64 * (self.lg[f] - self.lg[f - 1])
        }
    }

    /// Max-heap key of the gain: larger gain first, then lower index.
    fn gain_key(&self, i: usize, f: u32) -> u128 {
        u128::from(self.gain(i, f).to_bits()) << 64
            | u128::from(u32::MAX - i as u32) << 32
            | u128::from(f)
    }

    /// Min-heap key of the loss: smaller loss first, then lower index.
    fn loss_key(&self, i: usize, f: u32) -> u128 {
        u128::from(self.loss(i, f).to_bits()) << 64 | (i as u128) << 32 | u128::from(f)
    }

    /// The symbol and frequency of a gain key.
    fn gain_entry(k: u128) -> (usize, u32) {
        ((u32::MAX - (k >> 32) as u32) as usize, k as u32)
    }

    /// The symbol and frequency of a loss key.
    fn loss_entry(k: u128) -> (usize, u32) {
        (((k >> 32) as u32) as usize, k as u32)
    }

    /// Whether moving a unit with `gain` for one with `loss` does not pay.
    fn settled(&self, gain: f64, loss: f64) -> bool {
        gain <= loss * (1.0 + 1e-12) + 1e-9
    }

    /// Unit moves from the least loss to the most gain while one pays.
    fn unit_moves(&self, f: &mut [u32]) {
        // Heaps of (key, index, f at push); entries whose f changed since are stale.
        type Inc = BinaryHeap<(u64, Reverse<usize>, u32)>;
        type Dec = BinaryHeap<(Reverse<u64>, Reverse<usize>, u32)>;
        let mut inc: Inc = (0..f.len())
            .map(|i| (self.gain(i, f[i]).to_bits(), Reverse(i), f[i]))
            .collect::<Vec<_>>()
            .into();
        let mut dec: Dec = (0..f.len())
            .filter(|&i| f[i] > 1)
            .map(|i| (Reverse(self.loss(i, f[i]).to_bits()), Reverse(i), f[i]))
            .collect::<Vec<_>>()
            .into();
        let top_inc = |inc: &mut Inc, f: &[u32]| loop {
            let &(k, Reverse(i), fi) = inc.peek()?;
            if f[i] == fi {
                return Some((f64::from_bits(k), i));
            }
            inc.pop();
        };
        let top_dec = |dec: &mut Dec, f: &[u32]| loop {
            let &(Reverse(k), Reverse(i), fi) = dec.peek()?;
            if f[i] == fi {
                return Some((f64::from_bits(k), i));
            }
            dec.pop();
        };
        while let (Some((g, i)), Some((l, j))) = (top_inc(&mut inc, f), top_dec(&mut dec, f)) {
            if i == j || self.settled(g, l) {
                break;
            }
            f[i] += 1;
            f[j] -= 1;
            for k in [i, j] {
                inc.push((self.gain(k, f[k]).to_bits(), Reverse(k), f[k]));
                if f[k] > 1 {
                    dec.push((Reverse(self.loss(k, f[k]).to_bits()), Reverse(k), f[k]));
                }
            }
        }
    }
}

/// Frequencies summing to `2^scale`, each >= 1, by rounding `c_i 2^scale / n` to the
/// nearest (at least 1) and settling the difference on the largest frequencies; falls
/// back to [`quantize`] when they cannot absorb it. Same requirements as [`quantize`].
/// Not optimal: for estimates only (the encoder always uses [`quantize`]).
pub fn quantize_rounded(counts: &[u64], scale: u32) -> Vec<u32> {
    let total_m = 1u64 << scale;
    let n: u64 = counts.iter().fold(0u64, |a, &c| a.saturating_add(c)).max(1);
    if n >= 1 << 47 {
        // `c << scale` could overflow 64 bits: the exact quantizer handles it.
        return quantize(counts, scale);
    }
    let mut f = nearest(counts, n, scale);
    let sum: u64 = f.iter().map(|&x| u64::from(x)).sum();
    if sum < total_m {
        // Rounding left units over: the largest frequency takes them.
        if let Some(big) = f.iter().enumerate().max_by_key(|&(i, &x)| (x, Reverse(i))) {
            let big = big.0;
            f[big] += (total_m - sum) as u32;
        }
    } else if sum > total_m {
        // Too many units (rare words clamped up to 1): take the excess from the
        // frequencies above 1 in proportion to what each has above 1, then what the
        // rounding down left (fewer units than symbols), one unit each.
        let over = sum - total_m;
        let spare: u64 = f.iter().map(|&x| u64::from(x) - 1).sum();
        if spare < over {
            return quantize(counts, scale);
        }
        let mut left = over;
        let by_spare = Divider::new(spare);
        for x in f.iter_mut() {
            // over < 2^33 (at most 2^16 frequencies of at most 2^16) and x - 1 < 2^16:
            // the product fits 64 bits.
            let cut = by_spare.div(over * u64::from(*x - 1));
            let cut = cut.min(left);
            *x -= cut as u32;
            left -= cut;
        }
        while left > 0 {
            let before = left;
            for x in f.iter_mut() {
                if left == 0 {
                    break;
                }
                if *x > 1 {
                    *x -= 1;
                    left -= 1;
                }
            }
            if left == before {
                return quantize(counts, scale);
            }
        }
    }
    debug_assert_eq!(f.iter().map(|&x| u64::from(x)).sum::<u64>(), total_m);
    f
}

/// Each count `c` of the `n >= 1` (below `2^47`) scaled to `2^scale`: `c 2^scale / n`
/// rounded to the nearest, at least 1 and at most `2^scale`. The start of both
/// quantizers.
pub(super) fn nearest(counts: &[u64], n: u64, scale: u32) -> Vec<u32> {
    let total_m = 1u64 << scale;
    let by_n = Divider::new(n);
    counts
        .iter()
        .map(|&c| by_n.div((c << scale) + n / 2).clamp(1, total_m) as u32)
        .collect()
}

/// Division of 64-bit numbers by one divisor `d >= 1` through its reciprocal: a
/// multiply, a shift and one correction instead of a hardware division per number (the
/// quantizer divides every count by the same total).
///
/// With `r = floor((2^64 - 1) / d)`, `a r / 2^64` lies in `(a/d - 1, a/d]` for every
/// `a < 2^64`, so its floor is `floor(a / d)` or one less; the remainder test settles it.
pub(super) struct Divider {
    pub(super) d: u64,
    pub(super) r: u64,
}

impl Divider {
    /// # Panics
    /// If `d` is 0.
    pub(super) fn new(d: u64) -> Divider {
        Divider { d, r: u64::MAX / d }
    }

    /// `floor(a / d)`, exactly.
    #[inline(always)]
    pub(super) fn div(&self, a: u64) -> u64 {
        let q = ((u128::from(a) * u128::from(self.r)) >> 64) as u64;
        q + u64::from(a - q * self.d >= self.d)
    }
}

/// Total information content `sum c log2(n / c)` in bits of a histogram, the least any
/// order-0 code can spend on its payload.
pub(crate) fn entropy_bits(hist: &[(u64, u64)]) -> f64 {
    entropy_of(hist.iter().map(|&(_, c)| c))
}

/// [`entropy_bits`] of the counts alone.
pub(in crate::codec) fn entropy_bits_of(counts: &[u64]) -> f64 {
    entropy_of(counts.iter().copied())
}

/// `sum c_i log2(n / c_i)` of `counts` (summing to `n`), in their order.
fn entropy_of(counts: impl Iterator<Item = u64> + Clone) -> f64 {
    let lg = log2_table();
    let l = |c: u64| {
        lg.get(c as usize)
            .copied()
            .unwrap_or_else(|| (c as f64).log2())
    };
    let n: u64 = counts.clone().sum();
    let ln = l(n);
    counts.map(|c| c as f64 * (ln - l(c))).sum()
}

/// The least ideal payload in bits, `sum c_i log2(M / f_i)`, of any model with
/// frequencies `f_i >= 1` (real, not only whole) summing to `M = 2^scale`, for the counts
/// `c` (at most `M` of them): `f_i = max(1, c_i t)` with `t` settling the sum
/// (Karush-Kuhn-Tucker). At least the entropy; above it by what the rare words' floor of
/// one slot takes from the others. A bound for rANS at any precision up to `scale`, and
/// for any prefix code with lengths up to `scale` (Kraft: `f_i = 2^(scale - l_i)`).
/// `c`: the counts in ascending order. Returns infinity if there are more than `M` counts.
pub(crate) fn floor_ideal_bits(c: &[u64], scale: u32) -> f64 {
    debug_assert!(c.is_sorted());
    let m = (1u64 << scale) as f64;
    if c.len() as f64 > m {
        return f64::INFINITY;
    }
    let lg = log2_table();
    let mut rest: f64 = c.iter().map(|&x| x as f64).sum();
    // The rarest words take one slot each while their share of the rest is below one.
    let mut k = 0;
    while k < c.len() && (c[k] as f64) * (m - k as f64) < rest {
        rest -= c[k] as f64;
        k += 1;
    }
    let lm = m.log2();
    let clamped: f64 = c[..k].iter().map(|&x| x as f64).sum::<f64>() * lm;
    if k == c.len() {
        return clamped;
    }
    // The others get c t with t = (M - k) / rest: c log2(M / (c t)) each.
    let lt = ((m - k as f64) / rest).log2();
    clamped
        + c[k..]
            .iter()
            .map(|&x| {
                let l = lg
                    .get(x as usize)
                    .copied()
                    .unwrap_or_else(|| (x as f64).log2());
                x as f64 * (lm - l - lt)
            })
            .sum::<f64>()
}

/// The highest precision the encoder plans for `m` symbols in `layout`.
pub(crate) fn top_scale(layout: Layout, m: usize) -> u32 {
    let smin = bits_needed(m.max(1) as u64 - 1).max(1);
    match layout {
        Layout::Wide => WIDE_MAX_SCALE_BITS.max(smin + 3).min(MAX_SCALE_BITS),
        Layout::Classic => MAX_SCALE_BITS,
    }
}

/// Bytes an rANS body for a histogram (`n` words, at least two distinct) can never
/// be smaller than, given its count and set fields (`head` bits): the precision and mode
/// fields, at least a bit per frequency, and the payload bound of
/// [`payload_lower_bound_in`] from [`floor_ideal_bits`] at the highest precision the
/// encoder plans (a lower precision only costs more). The one table with no bit per
/// frequency (fixed width 0: every frequency 1, so `2^s = m`) is bounded by its payload
/// of `log2 m` bits per word. `sorted` holds the histogram's counts in ascending order; no quantizing.
pub(crate) fn body_lower_bound(sorted: &[u64], n: usize, head: u64) -> u64 {
    let layout = Layout::for_len(n);
    let m = sorted.len();
    let top = top_scale(layout, m);
    let ideal = floor_ideal_bits(sorted, top);
    let general =
        (head + 4 + 2 + m as u64).div_ceil(8) + payload_lower_bound_in(layout, ideal, n, top);
    if m.is_power_of_two() {
        let s = m.trailing_zeros();
        let flat = (head + 4 + 2 + 5).div_ceil(8)
            + payload_lower_bound_in(layout, n as f64 * f64::from(s), n, s);
        general.min(flat)
    } else {
        general
    }
}

/// Bytes the payload (states included) of `n` words in `layout` can never be smaller
/// than, when the ideal code length under the model is `ideal` bits at precision `scale`.
///
/// Per state, `log2(x) + 8 * (bytes emitted)` starts at 23 and ends below
/// `31 + 8 * (bytes emitted)`. Each step adds at least `log2(M / f)` minus
/// `log2(1 + 2^(s-23))` (its quotient is `>= 2^(23-s)`), each emitted byte removes at most
/// `-log2(1 - 255 * 2^(s-31))`.
/// The states are those of `layout`; the byte order does not enter the bound.
pub(super) fn payload_lower_bound_in(layout: Layout, ideal: f64, n: usize, scale: u32) -> u64 {
    let s = f64::from(scale);
    let step = (1.0 + (s - 23.0).exp2()).log2();
    let byte = -(1.0 - 255.0 * (s - 31.0).exp2()).log2();
    let slack = 8.0 * layout.lanes(n) as f64;
    let x = (ideal * (1.0 - 1e-9) - n as f64 * step - slack) / (8.0 + byte) - 1.0;
    let emitted = if x > 0.0 { x.floor() as u64 } else { 0 };
    layout.state_bytes(n) + emitted
}
