//! Static order-0 rANS over the distinct words of a stream (at most
//! [`MAX_TABLE_SYMBOLS`]): interleaved 32-bit states (1, 2 or 4 by stream length),
//! byte-wise renormalization,
//! frequencies quantized to a total of `M = 2^s` (`s` in 1..=16, chosen by the encoder).
//! Duda, "Asymmetric numeral systems" (2013); the encoder's division-free step follows
//! Giesen's `rans_byte`.
//!
//! # Body
//!
//! A table as an LSB-first bit stream (see [`super::bitio`]) zero-padded to a whole byte,
//! then the payload bytes:
//!
//! 1. the symbol count `m` and the sorted symbol set ([`super::table`]). With `m <= 1`
//!    that is the whole body (every word is the one symbol);
//! 2. `s - 1` in 4 bits, with `2^s >= m`;
//! 3. the frequencies `f_i >= 1` of the symbols in symbol order, summing to exactly
//!    `2^s`, with `v_i = f_i - 1`: a 2-bit mode, then
//!    * mode 0: a width `w` in 5 bits (0..=16), each `v_i` in `w` bits;
//!    * mode 1: an order `k` in 4 bits, each `v_i` as an order-`k` Exp-Golomb code;
//!    * mode 2: each `v_i` as an Exp-Golomb code of order `bits(v_(i-1))` (`v_(-1) = 0`),
//!      which follows the spiky histograms of exponent fields;
//!    * mode 3: an order `k` in 4 bits, each zigzag difference `v_i - v_(i-1)` as an
//!      order-`k` Exp-Golomb code (zigzag: `d >= 0` is `2d`, `d < 0` is `-2d - 1`), for
//!      smooth histograms;
//!
//!    the encoder writes the shortest (ties: lower mode);
//! 4. zero bits to the byte boundary;
//! 5. the payload: the decoder's initial states `x_0 .. x_(K-1)` as 4-byte
//!    little-endian integers, each in `[2^23, 2^31)`, then the renormalization bytes in
//!    the order the decoder reads them. The number of states `K` follows from `n`: 1 for
//!    `n < 64`, 2 for `n < 4096`, else 4 (more independent states decode faster; fewer
//!    cost fewer bytes). Word `i` is decoded from state `i mod K`: its slot is
//!    `x mod 2^s`, the symbol whose cumulative range holds it, then
//!    `x = f * (x >> s) + slot - cum`, then while `x < 2^23`, `x = x << 8 | next byte`.
//!    After the last word every state must be back at `2^23` and every byte consumed.
//!
//! That is the *classic* layout, codec `rans`. The *wide* layout, codec `rans32`, has the
//! same table and state rules with [`WIDE_LANES`] = 32 states whatever `n`, and reads its
//! bytes in rounds so that 8 states at a time can be decoded with SIMD instructions
//! (Giesen, "Interleaved entropy coders", 2014): the words go in groups of 32 (the last
//! group may be shorter, using states `0 .. r`); for each group every state in it first
//! takes its decoding step, then in a first round each state below `2^23`, in state
//! order, takes `x = x << 8 | next byte`, then a second round does the same. The encoder
//! writes `rans32` for streams of at least [`WIDE_MIN_WORDS`] words and `rans` below; both
//! decode at any length.
//!
//! The quantizer minimizes the payload's ideal size `sum c_i log2(M / f_i)` exactly for
//! each `s` (greedy unit moves on a separable convex cost), and `s` is chosen to minimize
//! that plus the table bits.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::bitio::{eg_len, BitReader, BitWriter};
use super::table::{
    check_width, count_bits, plan_set, read_count, read_set, try_constant, try_filled, write_count,
    write_set, SetPlan, SmallEg, SymbolIndex, Word,
};
use super::{CodecError, CodecId, Stream, MAX_TABLE_SYMBOLS};
use crate::tensor::with_buf;
use crate::tensor::{bits_needed, container_bytes, mask, WordBuf, Words};

const NAME: &str = "rans";

mod simd;

/// Largest frequency precision, in bits (`M = 2^16`).
pub const MAX_SCALE_BITS: u32 = 16;

/// Largest precision the encoder picks for the wide layout, unless the alphabet needs
/// more headroom (then up to 8 slots per symbol: `s <= bits(m - 1) + 3`, at most
/// [`MAX_SCALE_BITS`]): its decoder gathers from tables of `2^s` slots (4 bytes each, plus
/// the symbols), and at `2^14` they stay in the nearer caches. On minilm-l6-v2-bf16 the
/// cap costs 5,270 bytes (0.018%) and decodes its rANS streams 14 to 22% faster than
/// `2^16` (docs/bench.md). The format allows any precision up to [`MAX_SCALE_BITS`].
pub const WIDE_MAX_SCALE_BITS: u32 = 14;

/// Lower bound of the normalized state interval `[L, 256 L)`.
const RANS_L: u32 = 1 << 23;

/// Number of interleaved states of the classic layout for a stream of `n` words.
pub fn lanes(n: usize) -> usize {
    match n {
        0..64 => 1,
        64..4096 => 2,
        _ => 4,
    }
}

/// Number of interleaved states of the wide layout (codec `rans32`), whatever the length.
pub const WIDE_LANES: usize = 32;

/// Streams of at least this many words are written in the wide layout: its 128 bytes of
/// states cost 112 more than the classic layout's 16, under 0.2% of the smallest such
/// stream's payload even at 1 bit per word.
pub const WIDE_MIN_WORDS: usize = 1 << 16;

/// How the payload's states share the stream (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// 1, 2 or 4 states by length ([`lanes`]), each state's bytes together: codec `rans`.
    Classic,
    /// [`WIDE_LANES`] states, bytes read in two rounds per group: codec `rans32`.
    Wide,
}

impl Layout {
    /// The layout the encoder writes for a stream of `n` words.
    pub fn for_len(n: usize) -> Layout {
        if n >= WIDE_MIN_WORDS {
            Layout::Wide
        } else {
            Layout::Classic
        }
    }

    /// The codec identity of a body in this layout.
    pub fn codec(self) -> CodecId {
        match self {
            Layout::Classic => CodecId::Rans,
            Layout::Wide => CodecId::Rans32,
        }
    }

    /// Number of states for a stream of `n` words.
    pub fn lanes(self, n: usize) -> usize {
        match self {
            Layout::Classic => lanes(n),
            Layout::Wide => WIDE_LANES,
        }
    }

    /// Bytes of the flushed states at the start of the payload.
    fn state_bytes(self, n: usize) -> u64 {
        4 * self.lanes(n) as u64
    }
}

/// How the frequencies are written (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum FreqMode {
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
fn adaptive_k(prev: u64) -> u32 {
    bits_needed(prev)
}

#[inline]
fn zigzag(d: i64) -> u64 {
    ((d << 1) ^ (d >> 63)) as u64
}

#[inline]
fn unzigzag(z: u64) -> i64 {
    (z >> 1) as i64 ^ -((z & 1) as i64)
}

/// Successive zigzag differences of `f - 1`, starting from 0.
fn freq_deltas(freqs: &[u32]) -> impl Iterator<Item = u64> + Clone + '_ {
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
    pub(super) fn plan_freqs(freqs: &[u32]) -> (FreqMode, u64) = plan_freqs_in;
}

/// [`plan_freqs`]'s pass, inlined into each of its builds.
#[inline(always)]
fn plan_freqs_in(freqs: &[u32]) -> (FreqMode, u64) {
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
fn model_bits(counts: &[u64], freqs: &[u32], scale: u32, lg: &[f64]) -> f64 {
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
fn clamp_bits(counts: &[u64], scale: u32) -> f64 {
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

/// `log2(f)` for `f` in `0..=2^16` (`f = 0` maps to 0), computed once.
fn log2_table() -> &'static [f64] {
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
struct UnitCosts<'a> {
    counts: &'a [u64],
    lg: &'a [f64],
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
fn nearest(counts: &[u64], n: u64, scale: u32) -> Vec<u32> {
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
struct Divider {
    d: u64,
    r: u64,
}

impl Divider {
    /// # Panics
    /// If `d` is 0.
    fn new(d: u64) -> Divider {
        Divider { d, r: u64::MAX / d }
    }

    /// `floor(a / d)`, exactly.
    #[inline(always)]
    fn div(&self, a: u64) -> u64 {
        let q = ((u128::from(a) * u128::from(self.r)) >> 64) as u64;
        q + u64::from(a - q * self.d >= self.d)
    }
}

/// Total information content `sum c log2(n / c)` in bits of a histogram, the least any
/// order-0 code can spend on its payload.
pub(crate) fn entropy_bits(hist: &[(u64, u64)]) -> f64 {
    let lg = log2_table();
    let l = |c: u64| {
        lg.get(c as usize)
            .copied()
            .unwrap_or_else(|| (c as f64).log2())
    };
    let n: u64 = hist.iter().map(|&(_, c)| c).sum();
    let ln = l(n);
    hist.iter().map(|&(_, c)| c as f64 * (ln - l(c))).sum()
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
fn payload_lower_bound_in(layout: Layout, ideal: f64, n: usize, scale: u32) -> u64 {
    let s = f64::from(scale);
    let step = (1.0 + (s - 23.0).exp2()).log2();
    let byte = -(1.0 - 255.0 * (s - 31.0).exp2()).log2();
    let slack = 8.0 * layout.lanes(n) as f64;
    let x = (ideal * (1.0 - 1e-9) - n as f64 * step - slack) / (8.0 + byte) - 1.0;
    let emitted = if x > 0.0 { x.floor() as u64 } else { 0 };
    layout.state_bytes(n) + emitted
}

/// An rANS encoding of one stream planned from its histogram: everything but the payload.
#[derive(Clone, Debug)]
pub struct Plan {
    syms: Vec<u64>,
    freqs: Vec<u32>,
    scale: u32,
    set: SetPlan,
    freq_mode: FreqMode,
    /// Exact bits of the table before the byte padding.
    pub table_bits: u64,
    /// Ideal payload size `sum c_i log2(M / f_i)` in bits under the quantized model.
    pub ideal_bits: f64,
    n: usize,
    layout: Layout,
}

impl Plan {
    /// Plans the coder for a stream of `n` words of `width` bits with histogram `hist`
    /// (distinct words ascending with their counts, at most [`MAX_TABLE_SYMBOLS`]).
    pub fn new(hist: &[(u64, u64)], width: u32, n: usize) -> Plan {
        let syms: Vec<u64> = hist.iter().map(|&(s, _)| s).collect();
        let set = plan_set(&syms, width);
        Plan::with_set(hist, width, n, syms, set)
    }

    /// [`Plan::new`] with the symbols and their set encoding already worked out.
    pub(crate) fn with_set(
        hist: &[(u64, u64)],
        width: u32,
        n: usize,
        syms: Vec<u64>,
        set: SetPlan,
    ) -> Plan {
        Plan::planned(hist, width, n, syms, set, quantize, false)
    }

    /// [`Plan::with_set`] with frequencies from proportional rounding
    /// ([`quantize_rounded`]) instead of the optimal quantizer: O(m) per precision, for
    /// the search's size estimates. At each precision its ideal payload is never below the
    /// optimal quantizer's (so [`Plan::lower_bound`] of an estimate is no bound), and on
    /// large streams it is within a small fraction of a bit per thousand words of it.
    /// Streams of at least `2^16` words try the precisions from the highest down (where
    /// their best lies), so a few are tried instead of all.
    pub(crate) fn estimate(
        hist: &[(u64, u64)],
        width: u32,
        n: usize,
        syms: Vec<u64>,
        set: SetPlan,
    ) -> Plan {
        let down = n >= 1 << MAX_SCALE_BITS;
        Plan::planned(hist, width, n, syms, set, quantize_rounded, down)
    }

    fn planned(
        hist: &[(u64, u64)],
        width: u32,
        n: usize,
        syms: Vec<u64>,
        set: SetPlan,
        quantize: fn(&[u64], u32) -> Vec<u32>,
        down: bool,
    ) -> Plan {
        debug_assert!(hist.len() <= MAX_TABLE_SYMBOLS);
        let head = count_bits(width, n) + set.bits;
        let m = syms.len();
        let mut plan = Plan {
            syms,
            freqs: Vec::new(),
            scale: 0,
            set,
            freq_mode: FreqMode::Fixed(0),
            table_bits: head,
            ideal_bits: 0.0,
            n,
            layout: Layout::for_len(n),
        };
        if m <= 1 {
            return plan;
        }
        let counts: Vec<u64> = hist.iter().map(|&(_, c)| c).collect();
        let smin = bits_needed(m as u64 - 1).max(1);
        let lg = log2_table();
        // No model codes below the empirical entropy: once the table alone would lose
        // to the best so far, or two precisions in a row did worse, stop. (Stopping at the
        // first worse one going down saved 2% of minilm's compression time but changed
        // the chosen program of some streams, larger or smaller: docs/bench.md.)
        let entropy = entropy_bits(hist);
        let mut best = f64::INFINITY;
        let top = top_scale(Layout::for_len(n), m);
        let scales: Box<dyn Iterator<Item = u32>> = if down {
            Box::new((smin..=top).rev())
        } else {
            Box::new(smin..=top)
        };
        // Bits every frequency table takes: the mode field, then a bit per frequency or
        // (all of them 1) a 5-bit width of 0.
        let least_table = head + 4 + 2 + (m as u64).min(5);
        for scale in scales {
            // Going down, a precision whose rare words alone cost more than the best so
            // far is not quantized: the test below would skip it with any frequencies.
            if down
                && best.is_finite()
                && least_table.div_ceil(8) as f64 * 8.0 + entropy + clamp_bits(&counts, scale)
                    >= best
            {
                if scale + 2 <= plan.scale {
                    break;
                }
                continue;
            }
            let freqs = quantize(&counts, scale);
            let ideal = model_bits(&counts, &freqs, scale, lg);
            // The precision's total is at least its least table and its payload: when
            // that cannot beat the best so far (going down, where the stop test needs no
            // table), the frequencies need not be planned.
            if down && least_table.div_ceil(8) as f64 * 8.0 + ideal >= best {
                if scale + 2 <= plan.scale {
                    break;
                }
                continue;
            }
            let (freq_mode, fbits) = plan_freqs(&freqs);
            let table_bits = head + 4 + fbits;
            let total = table_bits.div_ceil(8) as f64 * 8.0 + ideal;
            if total < best {
                best = total;
                plan.freqs = freqs;
                plan.scale = scale;
                plan.freq_mode = freq_mode;
                plan.table_bits = table_bits;
                plan.ideal_bits = ideal;
            }
            let stop = if down {
                scale + 2 <= plan.scale
            } else {
                table_bits as f64 + entropy >= best || scale >= plan.scale + 2
            };
            if stop {
                break;
            }
        }
        plan
    }

    /// The codec of the body: the layout [`Layout::for_len`] picks for the stream.
    pub fn codec(&self) -> CodecId {
        self.layout.codec()
    }

    /// Bytes of the table, padding included.
    pub fn table_bytes(&self) -> u64 {
        self.table_bits.div_ceil(8)
    }

    /// A size in bytes the body can never be smaller than, from the ideal payload size
    /// and the worst-case loss of each coding and renormalization step. Used to skip
    /// encoding when rANS cannot win.
    pub fn lower_bound(&self) -> u64 {
        if self.syms.len() <= 1 {
            return self.table_bytes();
        }
        self.table_bytes()
            + payload_lower_bound_in(self.layout, self.ideal_bits, self.n, self.scale)
    }

    fn write_table(&self, out: Vec<u8>, width: u32) -> Vec<u8> {
        let mut w = BitWriter::from_vec(out);
        write_count(&mut w, self.syms.len(), width, self.n);
        write_set(&mut w, &self.syms, width, &self.set);
        if self.syms.len() >= 2 {
            w.write(u64::from(self.scale - 1), 4);
            write_freqs(&mut w, &self.freqs, self.freq_mode);
        }
        w.finish()
    }

    fn enc_syms(&self) -> Vec<EncSym> {
        let mut cum = 0u32;
        self.freqs
            .iter()
            .map(|&f| {
                let e = EncSym::new(cum, f, self.scale);
                cum += f;
                e
            })
            .collect()
    }

    /// Appends the body for `words` (the stream the plan was made from).
    pub fn encode(&self, words: &Words, out: &mut Vec<u8>) {
        self.encode_stream(Stream::Words(words), out);
    }

    /// [`Plan::encode`] for a stream that may be a bit field of wider words
    /// ([`Stream::Field`]; the plan made from the field's words): a field of words of at
    /// most 16 bits is read in place, each word shifted and masked as the encoder reads
    /// it; a field of wider words is extracted first. The body is the one the field's
    /// own words give.
    pub fn encode_stream(&self, stream: Stream<'_>, out: &mut Vec<u8>) {
        let (words, shift, m) = stream.parts();
        if matches!(stream, Stream::Field { .. }) && container_bytes(words.width()) > 2 {
            return self.encode(&stream.to_words(), out);
        }
        let width = stream.width();
        let start = out.len();
        *out = self.write_table(std::mem::take(out), width);
        if self.syms.len() < 2 {
            return;
        }
        let payload_at = out.len();
        let enc = self.enc_syms();
        let index = SymbolIndex::new(&self.syms, width, self.n);
        // Room for the payload (its ideal size, plus a little for the coding losses) and
        // the sink's last step, so that encoding never moves the buffer.
        let ideal = (self.ideal_bits / 8.0) as usize;
        let step = (ideal / 4).clamp(64, MAX_SINK_STEP);
        let mut sink = ByteSink {
            buf: std::mem::take(out),
            len: payload_at,
            step,
        };
        sink.buf.reserve(ideal + ideal / 64 + step + 2 * BLOCK + 64);
        let x = with_buf!(words.buf(), v => run_lanes(v, self.layout, &index, &enc, self.scale, (shift, m), &mut sink));
        *out = sink.buf;
        out.truncate(sink.len);
        // Reversed below, so the first state comes first, little-endian.
        for xi in x.iter().rev() {
            out.extend_from_slice(&xi.to_be_bytes());
        }
        out[payload_at..].reverse();
        if out.capacity() - out.len() > 4096 {
            // The room left is given back (in place: no copy).
            out.shrink_to_fit();
        }
        debug_assert!(out.len() - start >= self.table_bytes() as usize);
    }

    /// Exact body size in bytes for `words` (the stream the plan was made from), by
    /// running the encoder without storing its output.
    pub fn size(&self, words: &Words) -> u64 {
        if self.syms.len() < 2 {
            return self.table_bytes();
        }
        let enc = self.enc_syms();
        let index = SymbolIndex::new(&self.syms, words.width(), self.n);
        let mut count = ByteCount(0);
        with_buf!(words.buf(), v => run_lanes(v, self.layout, &index, &enc, self.scale, (0, mask(words.width())), &mut count));
        self.table_bytes() + self.layout.state_bytes(self.n) + count.0
    }
}

/// Where the encoder's renormalization bytes go.
trait Sink {
    /// Makes room for `n` more emissions.
    fn reserve(&mut self, n: usize);
    /// Emits the low `nb` (0..=2) bytes of `x`, lowest first.
    fn emit(&mut self, x: u32, nb: u32);

    /// Runs a SIMD encoder `f` on the sink: it gets the room after the bytes so far
    /// (none when only counting) and returns the bytes it shed, which then count as
    /// emitted; `false` (nothing emitted) if it declined.
    fn simd(&mut self, f: impl FnOnce(Option<&mut [u8]>) -> Option<usize>) -> bool;

    /// Emits the bytes states `0 .. r` of a wide-layout group shed (`nb[j]` bytes of
    /// `before[j]`, the state before), in the reverse of the order the decoder reads
    /// them: the second round, then the first, each from the last state down.
    #[inline(always)]
    fn emit_wide_group(&mut self, before: &[u32; WIDE_LANES], nb: &[u32; WIDE_LANES], r: usize) {
        // A state shedding two bytes reads the upper one in the first round.
        for j in (0..r).rev() {
            self.emit(before[j], u32::from(nb[j] == 2));
        }
        for j in (0..r).rev() {
            self.emit(before[j] >> (8 * (nb[j] >> 1)), u32::from(nb[j] >= 1));
        }
    }
}

/// Appends to a byte vector: two bytes are always written, `nb` kept.
struct ByteSink {
    buf: Vec<u8>,
    len: usize,
    /// Bytes the initialized length grows by at least when it runs short.
    step: usize,
}

impl Sink for ByteSink {
    fn reserve(&mut self, n: usize) {
        let need = self.len + 2 * n;
        if self.buf.len() < need {
            // Zero only what is added, a step at a time: the capacity was reserved for
            // the whole payload ([`Plan::encode`]), so the buffer is neither reallocated
            // nor cleared twice.
            self.buf.resize(need.max(self.buf.len() + self.step), 0);
        }
    }

    #[inline(always)]
    fn emit(&mut self, x: u32, nb: u32) {
        if let Some(d) = self.buf.get_mut(self.len..self.len + 2) {
            d.copy_from_slice(&(x as u16).to_le_bytes());
        }
        self.len += nb as usize;
    }

    fn simd(&mut self, f: impl FnOnce(Option<&mut [u8]>) -> Option<usize>) -> bool {
        let Some(room) = self.buf.get_mut(self.len..) else {
            return false;
        };
        f(Some(room)).map(|k| self.len += k).is_some()
    }
}

/// Largest step of [`ByteSink`]'s initialized length.
const MAX_SINK_STEP: usize = 1 << 16;

/// Counts the bytes only.
struct ByteCount(u64);

impl Sink for ByteCount {
    fn reserve(&mut self, _: usize) {}

    #[inline(always)]
    fn emit(&mut self, _: u32, nb: u32) {
        self.0 += u64::from(nb);
    }

    fn simd(&mut self, f: impl FnOnce(Option<&mut [u8]>) -> Option<usize>) -> bool {
        f(None).map(|k| self.0 += k as u64).is_some()
    }

    #[inline(always)]
    fn emit_wide_group(&mut self, _: &[u32; WIDE_LANES], nb: &[u32; WIDE_LANES], r: usize) {
        self.0 += u64::from(nb[..r].iter().sum::<u32>());
    }
}

/// Encoder constants of one symbol (Giesen's `RansEncSymbol`): `x / f` by a multiply.
#[derive(Clone, Copy, Debug)]
struct EncSym {
    x_max: u32,
    rcp: u32,
    shift: u32,
    bias: u32,
    cmpl: u32,
}

impl EncSym {
    fn new(cum: u32, freq: u32, scale: u32) -> EncSym {
        let m = 1u32 << scale;
        let x_max = ((RANS_L >> scale) << 8) * freq;
        let cmpl = m - freq;
        if freq < 2 {
            // q = x - 1 for x >= 1; bias makes x + bias + (x - 1)(M - 1) = x M + cum.
            EncSym {
                x_max,
                rcp: u32::MAX,
                shift: 0,
                bias: cum + m - 1,
                cmpl,
            }
        } else {
            let shift = 32 - (freq - 1).leading_zeros(); // ceil(log2 freq)
            let rcp = (1u64 << (shift + 31)).div_ceil(u64::from(freq)) as u32;
            EncSym {
                x_max,
                rcp,
                shift: shift - 1,
                bias: cum,
                cmpl,
            }
        }
    }

    /// Bytes (0, 1 or 2) state `v` sheds to come into this symbol's interval.
    #[inline(always)]
    fn renorm_bytes(&self, v: u32) -> u32 {
        // x < 2^31 and x_max >= 2^15: at most two bytes, the second iff
        // x >> 8 >= x_max, that is x >= 256 x_max.
        u32::from(v >= self.x_max) + u32::from(u64::from(v) >= u64::from(self.x_max) << 8)
    }

    /// Encodes the symbol into a state already in its interval.
    #[inline(always)]
    fn code(&self, v: u32) -> u32 {
        let q = ((u64::from(v) * u64::from(self.rcp)) >> 32) as u32 >> self.shift;
        v.wrapping_add(self.bias)
            .wrapping_add(q.wrapping_mul(self.cmpl))
    }

    /// Renormalizes `x` into this symbol's interval and encodes the symbol.
    #[inline(always)]
    fn put<K: Sink>(&self, x: &mut u32, sink: &mut K) {
        let v = *x;
        let nb = self.renorm_bytes(v);
        sink.emit(v, nb);
        *x = self.code(v >> (8 * nb));
    }
}

/// Encodes the values `(w >> shift) & (2^width - 1)` of the words `w` of `v` (`width` the
/// index's, `shift` 0 for the words themselves) as symbols at `scale`-bit precision,
/// backwards, with the states of `layout`; returns the final states. The wide layout
/// over 8- and 16-bit words with a dense index takes the SIMD encoder where the
/// processor has one.
#[allow(clippy::too_many_arguments)]
fn run_lanes<T: Word, S: Sink>(
    v: &[T],
    layout: Layout,
    index: &SymbolIndex,
    enc: &[EncSym],
    scale: u32,
    (shift, m): (u32, u64),
    sink: &mut S,
) -> Vec<u32> {
    fn go<T: Word, S: Sink>(
        v: &[T],
        layout: Layout,
        idx: impl Fn(T) -> usize,
        enc: &[EncSym],
        fast: Option<Fast<'_, T>>,
        sink: &mut S,
    ) -> Vec<u32> {
        match (layout, lanes(v.len())) {
            (Layout::Wide, _) => run_wide(v, idx, enc, fast, sink).to_vec(),
            (Layout::Classic, 1) => run::<T, S, 1>(v, idx, enc, sink).to_vec(),
            (Layout::Classic, 2) => run::<T, S, 2>(v, idx, enc, sink).to_vec(),
            (Layout::Classic, _) => run::<T, S, 4>(v, idx, enc, sink).to_vec(),
        }
    }
    match index {
        SymbolIndex::Dense(t) => {
            let simd = (layout == Layout::Wide)
                .then(simd::encoder::<T>)
                .flatten()
                .map(|f| (f, enc_entries(t, enc, scale)));
            let fast = simd.as_ref().map(|(f, tab)| (*f, &tab[..], scale, shift));
            go(
                v,
                layout,
                |w: T| t[((w.into() >> shift) & m) as usize] as usize,
                enc,
                fast,
                sink,
            )
        }
        SymbolIndex::Hashed(_) => go(
            v,
            layout,
            |w: T| index.get((w.into() >> shift) & m),
            enc,
            None,
            sink,
        ),
    }
}

/// A SIMD encoder of whole wide groups with its per-value table, the precision and the
/// shift of the words' field.
type Fast<'a, T> = (simd::EncFn<T>, &'a [simd::EncEntry], u32, u32);

/// The SIMD encoder's per-value table from a dense index (`u32::MAX`: not a symbol;
/// `2^width` entries) and the symbols' constants at precision `scale`.
fn enc_entries(index: &[u32], enc: &[EncSym], scale: u32) -> Vec<simd::EncEntry> {
    index
        .iter()
        .map(|&i| {
            enc.get(i as usize).map_or([0; 2], |e| {
                let m = 1u32 << scale;
                let freq = m - e.cmpl;
                // The bias is the start of the symbol's slots, plus M - 1 for a frequency
                // of 1 (see `EncSym::new`); the SIMD encoder adds that back.
                let cum = if freq < 2 { e.bias - (m - 1) } else { e.bias };
                debug_assert!(freq < 1 << 16 && cum < 1 << 16);
                [freq | cum << 16, e.rcp]
            })
        })
        .collect()
}

/// Encodes `v` backwards in the wide layout, word `i` into state `i mod 32`; returns the
/// final states.
fn run_wide<T: Word, S: Sink>(
    v: &[T],
    idx: impl Fn(T) -> usize,
    enc: &[EncSym],
    fast: Option<Fast<'_, T>>,
    sink: &mut S,
) -> [u32; WIDE_LANES] {
    /// Encodes one group (states `0 .. group.len()`) and emits its bytes.
    #[inline(always)]
    fn group<T: Word, S: Sink>(
        group: &[T],
        x: &mut [u32; WIDE_LANES],
        idx: &impl Fn(T) -> usize,
        enc: &[EncSym],
        sink: &mut S,
    ) {
        let mut nb = [0u32; WIDE_LANES];
        let mut before = [0u32; WIDE_LANES];
        for (j, &w) in group.iter().enumerate() {
            let e = &enc[idx(w)];
            let v = x[j];
            let c = e.renorm_bytes(v);
            nb[j] = c;
            before[j] = v;
            x[j] = e.code(v >> (8 * c));
        }
        sink.emit_wide_group(&before, &nb, group.len());
    }
    let mut x = [RANS_L; WIDE_LANES];
    let full = v.len() / WIDE_LANES * WIDE_LANES;
    // Two emissions per word.
    sink.reserve(2 * WIDE_LANES);
    group(&v[full..], &mut x, &idx, enc, sink);
    for block in v[..full].rchunks(BLOCK) {
        sink.reserve(2 * block.len());
        if let Some((f, tab, scale, shift)) = fast {
            if sink.simd(|out| f(block, tab, scale, shift, &mut x, out)) {
                continue;
            }
        }
        for g in block.chunks_exact(WIDE_LANES).rev() {
            group(g, &mut x, &idx, enc, sink);
        }
    }
    x
}

/// Words encoded between two [`Sink::reserve`] calls.
const BLOCK: usize = 4096;

/// Encodes `v` backwards, word `i` into state `i mod K`; returns the final states.
fn run<T: Word, S: Sink, const K: usize>(
    v: &[T],
    idx: impl Fn(T) -> usize,
    enc: &[EncSym],
    sink: &mut S,
) -> [u32; K] {
    let mut x = [RANS_L; K];
    let full = v.len() / K * K;
    sink.reserve(K);
    for (i, &w) in v.iter().enumerate().skip(full).rev() {
        enc[idx(w)].put(&mut x[i % K], sink);
    }
    // Blocks are multiples of K, so groups stay aligned to word indices.
    for block in v[..full].rchunks(BLOCK) {
        sink.reserve(block.len());
        for group in block.chunks_exact(K).rev() {
            for j in (0..K).rev() {
                enc[idx(group[j])].put(&mut x[j], sink);
            }
        }
    }
    x
}

/// Exact body size in bytes for `words` (which must have at most [`MAX_TABLE_SYMBOLS`]
/// distinct words, as in its histogram `hist`).
pub fn size(words: &Words, hist: &[(u64, u64)]) -> u64 {
    Plan::new(hist, words.width(), words.len()).size(words)
}

/// Appends the body for `words` in `layout`; `None` (nothing appended) if the stream has
/// more than [`MAX_TABLE_SYMBOLS`] distinct words or `layout` is not the one
/// [`Layout::for_len`] picks for its length (each codec applies to its lengths only).
pub fn encode(words: &Words, out: &mut Vec<u8>, layout: Layout) -> Option<()> {
    if layout != Layout::for_len(words.len()) {
        return None;
    }
    let hist = crate::stats::histogram(words, MAX_TABLE_SYMBOLS)?;
    Plan::new(&hist, words.width(), words.len()).encode(words, out);
    Some(())
}

/// Writes `freqs` (each `f >= 1`) as `mode` says: the 2-bit mode, its parameter, the
/// values (see the module docs, table item 3).
pub(super) fn write_freqs(w: &mut BitWriter, freqs: &[u32], mode: FreqMode) {
    match mode {
        FreqMode::Fixed(bits) => {
            w.write(0, 2);
            w.write(u64::from(bits), 5);
            for &f in freqs {
                w.write(u64::from(f - 1), bits);
            }
        }
        FreqMode::ExpGolomb(k) => {
            w.write(1, 2);
            w.write(u64::from(k), 4);
            for &f in freqs {
                w.write_eg(u64::from(f - 1), k);
            }
        }
        FreqMode::Adaptive => {
            w.write(2, 2);
            let mut prev = 0;
            for &f in freqs {
                w.write_eg(u64::from(f - 1), adaptive_k(prev));
                prev = u64::from(f - 1);
            }
        }
        FreqMode::Delta(k) => {
            w.write(3, 2);
            w.write(u64::from(k), 4);
            for z in freq_deltas(freqs) {
                w.write_eg(z, k);
            }
        }
    }
}

/// Reads `m` frequencies written by [`write_freqs`] that must sum to exactly `2^scale`
/// (`scale <= 16`).
///
/// # Errors
/// A truncated table, a frequency width over 16, a value that does not fit, or a sum
/// other than `2^scale`.
pub(super) fn read_freqs(
    r: &mut BitReader<'_>,
    m: usize,
    scale: u32,
) -> Result<Vec<u32>, CodecError> {
    let total = 1u64 << scale;
    let mode = r.read(2)?;
    let param = match mode {
        0 => r.read(5)? as u32,
        1 | 3 => r.read(4)? as u32,
        _ => 0,
    };
    if mode == 0 && param > MAX_SCALE_BITS {
        return Err(r.invalid(format!("frequency width {param}, expected at most 16")));
    }
    let mut freqs = Vec::with_capacity(m);
    let mut sum = 0u64;
    let mut prev = 0u64; // previous f - 1
    for _ in 0..m {
        let v = match mode {
            0 => r.read(param)?,
            1 => r.read_eg(param)?,
            2 => r.read_eg(adaptive_k(prev))?,
            _ => {
                let d = unzigzag(r.read_eg(param)?);
                let v = i64::try_from(prev).ok().and_then(|p| p.checked_add(d));
                match v.and_then(|v| u64::try_from(v).ok()) {
                    Some(v) => v,
                    None => return Err(r.invalid("negative frequency".into())),
                }
            }
        };
        if v >= total {
            return Err(r.invalid(format!(
                "frequency {}, expected below {total}",
                u128::from(v) + 1
            )));
        }
        prev = v;
        sum += v + 1;
        if sum > total {
            return Err(r.invalid(format!("frequencies exceed the total {total}")));
        }
        freqs.push(v as u32 + 1);
    }
    if sum != total {
        return Err(r.invalid(format!("frequencies sum to {sum}, expected {total}")));
    }
    Ok(freqs)
}

/// The parsed table of a body.
struct Table {
    syms: Vec<u64>,
    freqs: Vec<u32>,
    scale: u32,
    /// Bytes of the table, padding included.
    bytes: usize,
}

fn read_table(body: &[u8], width: u32, n: usize, name: &'static str) -> Result<Table, CodecError> {
    let mut r = BitReader::new(body, name);
    let m = read_count(&mut r, width, n)?;
    let syms = read_set(&mut r, m, width)?;
    if m <= 1 {
        r.finish()?;
        return Ok(Table {
            syms,
            freqs: Vec::new(),
            scale: 0,
            bytes: body.len(),
        });
    }
    let scale = r.read(4)? as u32 + 1;
    if (1u64 << scale) < m as u64 {
        return Err(r.invalid(format!(
            "{m} symbols cannot share a total frequency of {}",
            1u64 << scale
        )));
    }
    let freqs = read_freqs(&mut r, m, scale)?;
    r.align_zero()?;
    Ok(Table {
        syms,
        freqs,
        scale,
        bytes: (r.position() / 8) as usize,
    })
}

/// Bytes of the table (count, symbol set, precision, frequencies, padding) at the start
/// of `body`.
///
/// # Errors
/// When the table itself is invalid or truncated.
pub fn table_bytes(body: &[u8], width: u32, n: usize) -> Result<u64, CodecError> {
    check_width(width, NAME)?;
    Ok(read_table(body, width, n, NAME)?.bytes as u64)
}

/// Decodes `n` words of `width` bits from exactly `body`, a body in `layout` (any
/// length decodes in either layout).
///
/// # Errors
/// A truncated body, a table inconsistent with `(width, n)` (count, set, frequencies not
/// summing to `2^s`), initial states out of range, a payload that runs out, final states
/// other than `2^23`, or trailing bytes. Allocates the `n` words and a table of `2^s`
/// slots (`s <= 16`).
pub fn decode(body: &[u8], width: u32, n: usize, layout: Layout) -> Result<Words, CodecError> {
    let name = layout.codec().name();
    check_width(width, name)?;
    let t = read_table(body, width, n, name)?;
    if t.syms.len() <= 1 {
        return match t.syms.first() {
            Some(&s) => try_constant(width, s, n, name),
            None => Ok(Words::empty(width)),
        };
    }
    let payload = body.get(t.bytes..).unwrap_or(&[]);
    let buf = match container_bytes(width) {
        1 => WordBuf::U8(decode_payload(payload, &t, n, layout, simd::wide_u8())?),
        2 => WordBuf::U16(decode_payload(payload, &t, n, layout, simd::wide_u16())?),
        4 => WordBuf::U32(decode_payload(payload, &t, n, layout, None)?),
        _ => WordBuf::U64(decode_payload(payload, &t, n, layout, None)?),
    };
    // Every word came from a validated table (symbols < 2^width) or a field of at most
    // `width` bits.
    Ok(Words::from_buf_trusted(width, buf))
}

/// Whether `body`, a body in `layout`, decodes to exactly field `(shift, width)` of
/// `src`: the words `(v >> shift) & (2^width - 1)` of its words `v` (the whole stream
/// for `shift = 0, width = src.width()`). What `decode(body, width, src.len(), layout)`
/// followed by a comparison with the field says, and the same error where that decode
/// fails (when the words differ too, either `Ok(false)` or the error).
///
/// Fields of 8- and 16-bit containers in the wide layout are checked without decoding:
/// the decoder's steps and refills are run with each step's frequency and slot start
/// taken from the word the field holds there, and the state's slot checked to lie in
/// that word's slots. The slots of the table's words partition `[0, 2^s)`, so the slot
/// lies in the expected word's slots exactly when the decoder, which looks the slot up,
/// gives that word; the two then compute the same state and read the same bytes, step by
/// step. No gather waits for the previous step and nothing is allocated but the table of
/// `2^width` entries: about twice the decoder's speed (docs/bench.md). Other bodies are
/// decoded and compared.
///
/// # Errors
/// As [`decode`].
///
/// # Panics
/// If the field does not lie inside the words (`shift + width > src.width()`).
pub fn matches_field(
    body: &[u8],
    src: &Words,
    shift: u32,
    width: u32,
    layout: Layout,
) -> Result<bool, CodecError> {
    assert!(
        shift + width <= src.width(),
        "the field lies inside the words"
    );
    let n = src.len();
    let name = layout.codec().name();
    check_width(width, name)?;
    let decoded = || -> Result<bool, CodecError> {
        let words = decode(body, width, n, layout)?;
        Ok(crate::codec::select::equals_field(&words, src, shift))
    };
    let checkable = layout == Layout::Wide
        && width <= 16
        && matches!(src.buf(), WordBuf::U8(_) | WordBuf::U16(_));
    if !checkable {
        return decoded();
    }
    let t = read_table(body, width, n, name)?;
    if t.syms.len() <= 1 {
        return decoded();
    }
    let payload = body.get(t.bytes..).unwrap_or(&[]);
    let field = Field {
        shift,
        mask: crate::tensor::mask(width) as u32,
    };
    match src.buf() {
        WordBuf::U8(v) => check_payload(payload, &t, width, v, field, simd::check_u8()),
        WordBuf::U16(v) => check_payload(payload, &t, width, v, field, simd::check_u16()),
        _ => decoded(),
    }
}

/// Which bits of each source word the checked words are: `(v >> shift) & mask`.
#[derive(Clone, Copy, Debug)]
pub(super) struct Field {
    pub(super) shift: u32,
    pub(super) mask: u32,
}

/// What the checker of the wide layout reads: per word value below `2^width`, its
/// frequency and slot start `freq | cum << 16` (0 for a value that is no symbol), the
/// precision and the payload.
pub(super) struct Checker<'a> {
    pub(super) fc: &'a [u32],
    pub(super) scale: u32,
    pub(super) payload: &'a [u8],
}

/// A SIMD checker of whole wide-layout groups against the field of the words they must
/// give (see [`matches_field`]): checks groups from the states while its payload reads
/// stay inside, and returns the read position, the words checked (a multiple of
/// [`WIDE_LANES`]) and whether every one was right.
pub(super) type CheckFn<T> =
    fn(&Checker<'_>, &[T], Field, &mut [u32; WIDE_LANES]) -> (usize, usize, bool);

/// [`matches_field`] for a wide-layout payload of two or more symbols whose words must
/// be `field` of `src`.
fn check_payload<T: Word + Into<u64>>(
    payload: &[u8],
    t: &Table,
    width: u32,
    src: &[T],
    field: Field,
    simd: Option<CheckFn<T>>,
) -> Result<bool, CodecError> {
    let name = Layout::Wide.codec().name();
    let mut x = initial_states(payload, t, WIDE_LANES, name)?;
    let mut fc = vec![0u32; 1 << width];
    let mut cum = 0u32;
    for (&s, &f) in t.syms.iter().zip(&t.freqs) {
        // Two or more symbols: every frequency and slot start is below 2^16.
        fc[s as usize] = f | cum << 16;
        cum += f;
    }
    let scale = t.scale;
    let mask = (1u32 << scale) - 1;
    let x: &mut [u32; WIDE_LANES] = (&mut x[..]).try_into().map_err(|_| CodecError::Invalid {
        codec: name,
        what: "lanes".into(),
    })?;
    let checker = Checker {
        fc: &fc,
        scale,
        payload,
    };
    let (mut pos, done, mut ok) =
        simd.map_or((4 * WIDE_LANES, 0, true), |f| f(&checker, src, field, x));
    if !ok {
        // The states went wrong with the first wrong word: nothing after it is worth
        // checking.
        return Ok(false);
    }
    let byte = |i: usize| payload.get(i).map_or(0, |&b| u32::from(b));
    for group in src[done..].chunks(WIDE_LANES) {
        for (&v, xj) in group.iter().zip(x.iter_mut()) {
            let w = (v.into() >> field.shift) as u32 & field.mask;
            let e = fc.get(w as usize).copied().unwrap_or(0);
            let (f, d) = (e & 0xFFFF, (*xj & mask).wrapping_sub(e >> 16));
            ok &= d < f;
            *xj = f.wrapping_mul(*xj >> scale).wrapping_add(d);
        }
        if !ok {
            return Ok(false);
        }
        for _ in 0..2 {
            for xj in x.iter_mut().take(group.len()) {
                let need = *xj < RANS_L;
                *xj = if need { *xj << 8 | byte(pos) } else { *xj };
                pos += usize::from(need);
            }
        }
    }
    finish_payload(payload.len(), pos, x, t, name)?;
    Ok(ok)
}

/// The decoding tables of one body and its payload.
pub(super) struct Decoder<'a, T> {
    /// Per slot `freq | (slot - cum) << 16`: exactly `2^scale` entries.
    pub(super) fb: &'a [u32],
    /// Per slot, the symbol; then [`SYM_PAD`] zeros, so that a 4-byte read at any slot's
    /// symbol stays inside.
    pub(super) sym: &'a [T],
    pub(super) scale: u32,
    pub(super) payload: &'a [u8],
}

/// Zero symbols after the last slot's (see [`Decoder::sym`]).
pub(super) const SYM_PAD: usize = 4;

/// A SIMD decoder of whole wide-layout groups: decodes groups into `out` from the states
/// while its payload reads stay inside, and returns the read position and the words
/// written (a multiple of [`WIDE_LANES`]), as [`Decoder::fast`] does.
pub(super) type WideFn<T> = fn(&Decoder<'_, T>, &mut [T], &mut [u32; WIDE_LANES]) -> (usize, usize);

impl<T: Word> Decoder<'_, T> {
    /// One decoding step without renormalization: the new state and the symbol.
    #[inline(always)]
    fn step(&self, x: u32) -> (u32, T) {
        let slot = (x & ((1 << self.scale) - 1)) as usize;
        let e = self.fb[slot];
        ((e & 0xFFFF) * (x >> self.scale) + (e >> 16), self.sym[slot])
    }

    /// The slot entries and symbols as slices of exactly `2^scale` entries, so that
    /// `x & mask` (the third value) indexes them without a bounds check.
    #[inline(always)]
    fn tables(&self) -> Option<(&[u32], &[T], u32)> {
        let mask = (1u32 << self.scale) - 1;
        Some((
            self.fb.get(..=mask as usize)?,
            self.sym.get(..=mask as usize)?,
            mask,
        ))
    }

    /// Decodes groups of `K` words while 8 payload bytes remain after the read position
    /// (a group reads at most `2 K <= 8`). Returns the read position and the number of
    /// words written.
    #[inline(never)]
    fn fast<const K: usize>(&self, out: &mut [T], x: &mut [u32; K]) -> (usize, usize) {
        let Some((fb, sym, mask)) = self.tables() else {
            return (4 * K, 0);
        };
        let scale = self.scale;
        let mut xs = *x;
        let mut pos = 4 * K;
        let mut done = 0;
        for group in out.chunks_exact_mut(K) {
            let Some(win) = self.payload.get(pos..pos + 8) else {
                break;
            };
            // Big-endian: the first byte read is the top byte.
            let w = u64::from_be_bytes(win.try_into().unwrap_or([0; 8]));
            // First every lane's step (independent of one another), then the refills:
            // each lane's bytes start where the previous lanes' end, a prefix sum, so no
            // lane waits for another's table lookup.
            let mut y = [0u32; K];
            let mut bits = [0u32; K];
            for j in 0..K {
                let slot = (xs[j] & mask) as usize;
                let e = fb[slot];
                group[j] = sym[slot];
                let yj = (e & 0xFFFF) * (xs[j] >> scale) + (e >> 16);
                // y >= 2^(23 - s) >= 2^7: it takes one byte below 2^23, two below 2^15.
                bits[j] = 8 * (u32::from(yj < RANS_L) + u32::from(yj < 1 << 15));
                y[j] = yj;
            }
            let mut off = 0u32;
            for j in 0..K {
                // At most 2 K <= 8 bytes in all, so `off` stays below 64 here. The first
                // byte read lands above the second.
                // The next `bits[j]` bits at the top of `w << off` (none when 0: the
                // split shift never reaches 64).
                let next = ((w << off) >> 1 >> (63 - bits[j])) as u32;
                xs[j] = y[j] << bits[j] | next;
                off += bits[j];
            }
            pos += (off / 8) as usize;
            done += K;
        }
        *x = xs;
        (pos, done)
    }

    /// Decodes all of `out` in the wide layout from the states in `x`, with `simd` for
    /// the groups it takes, returning the final read position (past the payload's end if
    /// it ran out: missing bytes read as zeros).
    fn run_wide(&self, out: &mut [T], x: &mut [u32; WIDE_LANES], simd: Option<WideFn<T>>) -> usize {
        let (mut pos, done) = match simd.map(|f| f(self, out, x)) {
            Some(r) if r.1 > 0 => r,
            _ => self.fast_wide(out, x),
        };
        let byte = |i: usize| self.payload.get(i).map_or(0, |&b| u32::from(b));
        for group in out[done..].chunks_mut(WIDE_LANES) {
            for (o, xj) in group.iter_mut().zip(x.iter_mut()) {
                let (y, s) = self.step(*xj);
                *xj = y;
                *o = s;
            }
            for _ in 0..2 {
                for xj in x.iter_mut().take(group.len()) {
                    let need = *xj < RANS_L;
                    *xj = if need { *xj << 8 | byte(pos) } else { *xj };
                    pos += usize::from(need);
                }
            }
        }
        pos
    }

    /// The scalar decoder of whole wide-layout groups while 64 payload bytes remain after
    /// the read position (a group reads at most 64). Returns the read position and the
    /// number of words written.
    #[inline(never)]
    fn fast_wide(&self, out: &mut [T], x: &mut [u32; WIDE_LANES]) -> (usize, usize) {
        let Some((fb, sym, mask)) = self.tables() else {
            return (4 * WIDE_LANES, 0);
        };
        let scale = self.scale;
        let mut pos = 4 * WIDE_LANES;
        let mut done = 0;
        for group in out.chunks_exact_mut(WIDE_LANES) {
            let Some(win) = self.payload.get(pos..pos + 2 * WIDE_LANES) else {
                break;
            };
            // The steps, counting the bytes of the first round as they go; then both
            // rounds at once, as the SIMD decoder does: a state takes a second byte iff
            // it is below 2^15 after its step.
            let mut first = 0;
            for (o, xj) in group.iter_mut().zip(x.iter_mut()) {
                let slot = (*xj & mask) as usize;
                let e = fb[slot];
                *o = sym[slot];
                *xj = (e & 0xFFFF) * (*xj >> scale) + (e >> 16);
                first += usize::from(*xj < RANS_L);
            }
            let (mut one, mut two) = (0, first);
            for xj in x.iter_mut() {
                // Branch-free: whether a state takes a byte is close to a coin toss.
                let n1 = u32::from(*xj < RANS_L);
                let n2 = u32::from(*xj < RANS_L >> 8);
                // At most 2 * 32 reads in a group: both offsets stay below 64.
                let b1 = u32::from(win[one & (2 * WIDE_LANES - 1)]) & n1.wrapping_neg();
                let b2 = u32::from(win[two & (2 * WIDE_LANES - 1)]) & n2.wrapping_neg();
                *xj = (*xj << (8 * n1) | b1) << (8 * n2) | b2;
                one += n1 as usize;
                two += n2 as usize;
            }
            pos += two;
            done += WIDE_LANES;
        }
        (pos, done)
    }

    /// Decodes all of `out` from the states in `x`, returning the final read position
    /// (past the payload's end if it ran out: missing bytes read as zeros).
    fn run<const K: usize>(&self, out: &mut [T], x: &mut [u32; K]) -> usize {
        let (mut pos, done) = self.fast(out, x);
        let byte = |i: usize| self.payload.get(i).map_or(0, |&b| u32::from(b));
        for (i, o) in out.iter_mut().enumerate().skip(done) {
            let (mut y, s) = self.step(x[i % K]);
            for _ in 0..2 {
                let need = y < RANS_L;
                y = if need { y << 8 | byte(pos) } else { y };
                pos += usize::from(need);
            }
            x[i % K] = y;
            *o = s;
        }
        pos
    }
}

fn decode_payload<T: Word>(
    payload: &[u8],
    t: &Table,
    n: usize,
    layout: Layout,
    simd: Option<WideFn<T>>,
) -> Result<Vec<T>, CodecError> {
    let name = layout.codec().name();
    let invalid = |what: String| CodecError::Invalid { codec: name, what };
    let k = layout.lanes(n);
    let mut x = initial_states(payload, t, k, name)?;
    let scale = t.scale;
    // Per slot: `freq | (slot - cum) << 16`, and the symbol.
    let mut fb = vec![0u32; 1 << scale];
    let mut sym = vec![T::default(); (1 << scale) + SYM_PAD];
    let mut cum = 0usize;
    for (&s, &f) in t.syms.iter().zip(&t.freqs) {
        let f = f as usize;
        for (b, e) in fb[cum..cum + f].iter_mut().enumerate() {
            *e = f as u32 | (b as u32) << 16;
        }
        sym[cum..cum + f].fill(T::from_u64(s));
        cum += f;
    }
    let mut out: Vec<T> = try_filled(T::default(), n, name)?;
    let dec = Decoder {
        fb: &fb,
        sym: &sym,
        scale,
        payload,
    };
    let pos = match (layout, k) {
        (Layout::Wide, _) => dec.run_wide(
            &mut out,
            (&mut x[..])
                .try_into()
                .map_err(|_| invalid("lanes".into()))?,
            simd,
        ),
        (Layout::Classic, 1) => dec.run::<1>(
            &mut out,
            (&mut x[..])
                .try_into()
                .map_err(|_| invalid("lanes".into()))?,
        ),
        (Layout::Classic, 2) => dec.run::<2>(
            &mut out,
            (&mut x[..])
                .try_into()
                .map_err(|_| invalid("lanes".into()))?,
        ),
        (Layout::Classic, _) => dec.run::<4>(
            &mut out,
            (&mut x[..])
                .try_into()
                .map_err(|_| invalid("lanes".into()))?,
        ),
    };
    finish_payload(payload.len(), pos, &x, t, name)?;
    Ok(out)
}

/// The `k` initial states at the start of `payload` (after table `t`).
///
/// # Errors
/// A payload shorter than the states, or a state outside `[2^23, 2^31)`.
fn initial_states(
    payload: &[u8],
    t: &Table,
    k: usize,
    name: &'static str,
) -> Result<Vec<u32>, CodecError> {
    let Some(states) = payload.get(..4 * k) else {
        return Err(CodecError::Truncated {
            codec: name,
            needed: (t.bytes + 4 * k) as u64,
            available: (t.bytes + payload.len()) as u64,
        });
    };
    let x: Vec<u32> = states
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    if let Some(&bad) = x.iter().find(|&&xi| !(RANS_L..RANS_L << 8).contains(&xi)) {
        return Err(CodecError::Invalid {
            codec: name,
            what: format!("initial state {bad:#x}, expected in [0x800000, 0x80000000)"),
        });
    }
    Ok(x)
}

/// Checks the end of a decode of a payload of `len` bytes (after table `t`) that read up
/// to `pos` and left the states `x`.
///
/// # Errors
/// A payload that ran out (`pos > len`), a final state other than `2^23`, or bytes left
/// over.
fn finish_payload(
    len: usize,
    pos: usize,
    x: &[u32],
    t: &Table,
    name: &'static str,
) -> Result<(), CodecError> {
    if pos > len {
        return Err(CodecError::Truncated {
            codec: name,
            needed: (t.bytes + pos) as u64,
            available: (t.bytes + len) as u64,
        });
    }
    if let Some((i, &bad)) = x.iter().enumerate().find(|&(_, &xi)| xi != RANS_L) {
        return Err(CodecError::Invalid {
            codec: name,
            what: format!("final state {i} is {bad:#x}, expected 0x800000"),
        });
    }
    if pos != len {
        return Err(CodecError::TrailingBytes {
            codec: name,
            extra: (len - pos) as u64,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::histogram;

    /// Pseudo-random frequency tables: `m` frequencies in `1..=2^spread` (a
    /// multiplicative hash of their index), and three extremes.
    fn freq_tables() -> Vec<Vec<u32>> {
        let mut tables = vec![vec![1, 1], vec![(1 << 16) - 1, 1], vec![1 << 15, 1 << 15]];
        for m in [2u64, 3, 17, 255, 2048, 4096] {
            for spread in [1u32, 7, 16] {
                let f = |i: u64| {
                    1 + ((i + m).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40) as u32 % (1 << spread)
                };
                tables.push((0..m).map(f).collect());
            }
        }
        tables
    }

    #[test]
    fn plan_freqs_builds_agree() {
        // The build picked at run time (with lzcnt on processors that have it, as this
        // machine's) plans every table as the baseline build does.
        for f in freq_tables() {
            assert_eq!(plan_freqs(&f), plan_freqs_in(&f), "{} frequencies", f.len());
        }
        // Two frequencies of 1: each `f - 1 = 0` takes one bit of the adaptive code.
        assert_eq!(plan_freqs(&[1, 1]), (FreqMode::Adaptive, 4));
    }

    fn body(values: &[u64], width: u32) -> Vec<u8> {
        let layout = Layout::for_len(values.len());
        let words = Words::from_u64s(width, values);
        let mut out = Vec::new();
        encode(&words, &mut out, layout).unwrap();
        assert_eq!(out, body_in(values, width, layout));
        out
    }

    /// The body of `values` in `layout` (at any length), checked against the plan's size
    /// and lower bound and decoded back, with and without SIMD.
    fn body_in(values: &[u64], width: u32, layout: Layout) -> Vec<u8> {
        let words = Words::from_u64s(width, values);
        let hist = histogram(&words, MAX_TABLE_SYMBOLS).unwrap();
        let mut plan = Plan::new(&hist, width, values.len());
        plan.layout = layout;
        let mut out = Vec::new();
        plan.encode(&words, &mut out);
        assert_eq!(plan.size(&words), out.len() as u64);
        assert!(plan.lower_bound() <= out.len() as u64);
        assert_eq!(decode(&out, width, values.len(), layout).unwrap(), words);
        assert!(matches_field(&out, &words, 0, width, layout).unwrap());
        if hist.len() > 1 {
            // The scalar encoder (a hashed index never takes the SIMD one) sheds the same
            // bytes and ends in the same states as the dense index's encoder, which is
            // the SIMD one for long 8- and 16-bit streams on AVX2 machines.
            let enc = plan.enc_syms();
            let run = |index: &SymbolIndex| {
                let mut sink = ByteSink {
                    buf: Vec::new(),
                    len: 0,
                    step: 64,
                };
                let x = with_buf!(words.buf(), v => run_lanes(v, layout, index, &enc, plan.scale, (0, mask(width)), &mut sink));
                sink.buf.truncate(sink.len);
                (x, sink.buf)
            };
            let dense = SymbolIndex::new(&plan.syms, width, values.len());
            assert_eq!(
                run(&dense),
                run(&SymbolIndex::new(&plan.syms, 64, values.len()))
            );
        }
        if layout == Layout::Wide && hist.len() > 1 && width <= 16 {
            let t = read_table(&out, width, values.len(), NAME).unwrap();
            let payload = &out[t.bytes..];
            let scalar: Vec<u64> = if width <= 8 {
                let v = decode_payload::<u8>(payload, &t, values.len(), layout, None).unwrap();
                assert_eq!(
                    v,
                    decode_payload(payload, &t, values.len(), layout, simd::wide_u8()).unwrap()
                );
                v.into_iter().map(u64::from).collect()
            } else {
                let v = decode_payload::<u16>(payload, &t, values.len(), layout, None).unwrap();
                assert_eq!(
                    v,
                    decode_payload(payload, &t, values.len(), layout, simd::wide_u16()).unwrap()
                );
                v.into_iter().map(u64::from).collect()
            };
            assert_eq!(scalar, values);
            assert_eq!(spec_decode_wide(&t, payload, values.len()), values);
        }
        out
    }

    /// The wide layout's decoder as the module docs state it, one byte at a time.
    fn spec_decode_wide(t: &Table, payload: &[u8], n: usize) -> Vec<u64> {
        let mut x: Vec<u32> = payload[..4 * WIDE_LANES]
            .chunks(4)
            .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        let mut bytes = payload[4 * WIDE_LANES..].iter();
        let m = 1u32 << t.scale;
        let mut out = Vec::new();
        for start in (0..n).step_by(WIDE_LANES) {
            let r = (n - start).min(WIDE_LANES);
            for xj in &mut x[..r] {
                let slot = *xj % m;
                let mut cum = 0;
                let i = t.freqs.iter().position(|&f| {
                    cum += f;
                    slot < cum
                });
                let i = i.unwrap();
                let f = t.freqs[i];
                out.push(t.syms[i]);
                *xj = f * (*xj / m) + slot - (cum - f);
            }
            for _round in 0..2 {
                for xj in &mut x[..r] {
                    if *xj < RANS_L {
                        *xj = *xj << 8 | u32::from(*bytes.next().unwrap());
                    }
                }
            }
        }
        assert!(x.iter().all(|&xj| xj == RANS_L));
        assert_eq!(bytes.next(), None);
        out
    }

    #[test]
    fn reciprocal_step_matches_division() {
        for scale in [1u32, 4, 12, 16] {
            let m = 1u32 << scale;
            for f in [1u32, 2, 3, 5, m / 2 + 1, m - 1]
                .into_iter()
                .filter(|&f| f >= 1 && f < m)
            {
                let cum = m - f;
                let e = EncSym::new(cum, f, scale);
                let x_lo = (RANS_L >> scale) * f;
                for x in [
                    x_lo,
                    x_lo + 1,
                    x_lo + f - 1,
                    e.x_max - 1,
                    (x_lo + e.x_max) / 2,
                ] {
                    let mut y = x;
                    let mut count = ByteCount(0);
                    e.put(&mut y, &mut count);
                    assert_eq!(count.0, 0);
                    assert_eq!(y, (x / f) * m + x % f + cum, "s={scale} f={f} x={x}");
                }
            }
        }
    }

    /// [`clamp_bits`] never exceeds what a quantized model spends above the entropy,
    /// for either quantizer at any precision, so skipping a precision by it skips only
    /// what the test after quantizing would skip. On a real BF16 matrix (3,549 distinct
    /// words) it is tens of thousands of bits one and two precisions below the top, where
    /// the estimates skip; it is 0 where no word is rare.
    #[test]
    fn clamp_bits_bounds_every_quantized_model() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/assets/demo.safetensors");
        let bytes = std::fs::read(path).unwrap();
        let src = crate::archive::safetensors::parse(&bytes).unwrap();
        let name = "encoder.layer.0.intermediate.dense.weight";
        let t = src.tensors().iter().position(|t| t.name == name).unwrap();
        let real = Words::from_le_bytes(16, src.tensor_bytes(t)).unwrap();
        let real = histogram(&real, MAX_TABLE_SYMBOLS).unwrap();
        let mut hists = vec![real.clone()];
        for m in [2u64, 3, 17, 300, 2_000] {
            hists.push((0..m).map(|i| (i, (i * i * 7_919) % 1_009 + 1)).collect());
            hists.push(
                (0..m)
                    .map(|i| (i, if i == 0 { 1 << 20 } else { i % 3 + 1 }))
                    .collect(),
            );
        }
        let lg = log2_table();
        let mut skips = 0;
        for h in &hists {
            let counts: Vec<u64> = h.iter().map(|&(_, c)| c).collect();
            let entropy = entropy_bits(h);
            let smin = bits_needed(counts.len() as u64 - 1).max(1);
            for scale in smin..=MAX_SCALE_BITS {
                let bound = entropy + clamp_bits(&counts, scale);
                for f in [quantize(&counts, scale), quantize_rounded(&counts, scale)] {
                    let ideal = model_bits(&counts, &f, scale, lg);
                    assert!(bound <= ideal, "{} words, scale {scale}", counts.len());
                }
                skips += usize::from(clamp_bits(&counts, scale) > 0.0);
            }
        }
        assert!(skips > 20, "{skips}");
        let counts: Vec<u64> = real.iter().map(|&(_, c)| c).collect();
        assert!(
            clamp_bits(&counts, 14) > 10_000.0,
            "{}",
            clamp_bits(&counts, 14)
        );
        assert_eq!(clamp_bits(&[5, 5, 6], 4), 0.0);
    }

    /// The floor of one slot per word, worked by hand: counts 1, 1, 6 at `M = 4` give
    /// the rare words a slot each and the frequent one the other two, `2 + 2 + 6 * 1`
    /// bits, which the integer quantizer meets; the entropy is 8.49 bits. On a real
    /// histogram the bound lies between the entropy and the quantizer's ideal size.
    #[test]
    fn floor_ideal_bits_bounds_the_quantized_model() {
        assert!((floor_ideal_bits(&[1, 1, 6], 2) - 10.0).abs() < 1e-12);
        assert_eq!(quantize(&[1, 1, 6], 2), vec![1, 1, 2]);
        assert_eq!(floor_ideal_bits(&[1, 1, 1, 1, 1], 2), f64::INFINITY);
        let counts: Vec<u64> = (1..3000u64)
            .map(|i| (i * i * 7919) % 100_003 / 97 + 1)
            .collect();
        let hist: Vec<(u64, u64)> = counts
            .iter()
            .enumerate()
            .map(|(i, &c)| (i as u64, c))
            .collect();
        for scale in 12..=16 {
            let f = quantize(&counts, scale);
            let ideal: f64 = counts
                .iter()
                .zip(&f)
                .map(|(&c, &f)| c as f64 * (f64::from(scale) - f64::from(f).log2()))
                .sum();
            let mut sorted = counts.clone();
            sorted.sort_unstable();
            let floor = floor_ideal_bits(&sorted, scale);
            assert!(
                entropy_bits(&hist) <= floor + 1e-6 && floor <= ideal + 1e-6,
                "{scale}"
            );
        }
    }

    /// The quantizer as it was before its phases got a heap each (session 15): both heaps
    /// built up front and kept through every phase. The reference [`quantize`] must equal.
    /// Frequencies summing to `2^scale`, each >= 1, minimizing `sum c_i log2(2^scale / f_i)`.
    /// Requires `1 <= counts.len() <= 2^scale <= 2^16` and every count >= 1.
    ///
    /// Starts from the nearest rounding of `c_i 2^scale / n` (at least 1), fixes the sum
    /// one unit at a time where it costs least, then moves single units while that lowers
    /// the cost: for this separable convex cost, no improving unit move means optimal.
    fn quantize_by_heaps(counts: &[u64], scale: u32) -> Vec<u32> {
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
                .map(|&c| {
                    (((u128::from(c) << scale) + n / 2) / n).clamp(1, u128::from(total_m)) as u32
                })
                .collect()
        };
        let mut sum: u64 = f.iter().map(|&x| u64::from(x)).sum();
        // Gain of one more unit, loss of one fewer (infinite at f = 1), in bits.
        let gain = |c: u64, f: u32| {
            let f = f as usize;
            c as f64 * (lg.get(f + 1).copied().unwrap_or(16.0) - lg[f])
        };
        let loss = |c: u64, f: u32| {
            if f <= 1 {
                f64::INFINITY
            } else {
                let f = f as usize;
                c as f64 * (lg[f] - lg[f - 1])
            }
        };
        // Heaps of (key, index, f at push); entries whose f changed since are stale.
        type Inc = BinaryHeap<(u64, Reverse<usize>, u32)>;
        type Dec = BinaryHeap<(Reverse<u64>, Reverse<usize>, u32)>;
        let mut inc: Inc = f
            .iter()
            .enumerate()
            .map(|(i, &fi)| (gain(counts[i], fi).to_bits(), Reverse(i), fi))
            .collect::<Vec<_>>()
            .into();
        let mut dec: Dec = f
            .iter()
            .enumerate()
            .filter(|&(_, &fi)| fi > 1)
            .map(|(i, &fi)| (Reverse(loss(counts[i], fi).to_bits()), Reverse(i), fi))
            .collect::<Vec<_>>()
            .into();
        let push = |inc: &mut Inc, dec: &mut Dec, i: usize, fi: u32| {
            inc.push((gain(counts[i], fi).to_bits(), Reverse(i), fi));
            if fi > 1 {
                dec.push((Reverse(loss(counts[i], fi).to_bits()), Reverse(i), fi));
            }
        };
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
        while sum > total_m {
            let Some((_, i)) = top_dec(&mut dec, &f) else {
                break;
            };
            f[i] -= 1;
            sum -= 1;
            push(&mut inc, &mut dec, i, f[i]);
        }
        while sum < total_m {
            let Some((_, i)) = top_inc(&mut inc, &f) else {
                break;
            };
            f[i] += 1;
            sum += 1;
            push(&mut inc, &mut dec, i, f[i]);
        }
        // Unit transfers while one strictly lowers the cost.
        while let (Some((g, i)), Some((l, j))) = (top_inc(&mut inc, &f), top_dec(&mut dec, &f)) {
            if i == j || g <= l * (1.0 + 1e-12) + 1e-9 {
                break;
            }
            f[i] += 1;
            f[j] -= 1;
            push(&mut inc, &mut dec, i, f[i]);
            push(&mut inc, &mut dec, j, f[j]);
        }
        debug_assert_eq!(f.iter().map(|&x| u64::from(x)).sum::<u64>(), total_m);
        f
    }

    /// [`quantize`] gives exactly the frequencies of the quantizer with both heaps kept
    /// through every phase (`quantize_by_heaps`), ties included: histograms with many
    /// equal counts (ones and twos, as in short streams), skewed and flat ones, sums too
    /// high and too low after rounding, a sum a transfer improves, at every precision
    /// from the fewest slots up.
    #[test]
    fn quantizer_equals_the_heap_quantizer() {
        let mut state = 0x2545_F491_4F6C_DD1Du64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut cases: Vec<Vec<u64>> = vec![vec![1, 1, 6], vec![3, 1], vec![1, 1, 998]];
        for k in [2usize, 3, 7, 40, 300, 1000, 3000] {
            cases.push(vec![1; k]);
            cases.push((0..k).map(|i| 1 + (i % 2) as u64).collect());
            cases.push((0..k).map(|_| 1 + next() % 3).collect());
            cases.push((0..k).map(|_| 1 + (next() % 1000).pow(2) / 997).collect());
            cases.push((0..k).map(|i| if i == 0 { 100_000 } else { 1 }).collect());
            cases.push((0..k).map(|_| 1 << (next() % 20)).collect());
        }
        let mut checked = 0;
        for counts in &cases {
            let smin = bits_needed(counts.len() as u64 - 1).max(1);
            for scale in smin..=16 {
                assert_eq!(
                    quantize(counts, scale),
                    quantize_by_heaps(counts, scale),
                    "{} counts, scale {scale}",
                    counts.len()
                );
                checked += 1;
            }
        }
        assert!(checked > 300, "{checked}");
    }

    #[test]
    fn quantizer_is_exact_and_optimal() {
        let q = quantize(&[1, 1, 998], 4);
        assert_eq!(q, vec![1, 1, 14]);
        assert_eq!(quantize(&[3, 1], 1), vec![1, 1]);
        assert_eq!(quantize(&[3, 1], 2), vec![3, 1]);
        // Compare with every split of 16 among three symbols.
        let counts = [50u64, 30, 7];
        let cost = |f: &[u32]| -> f64 {
            counts
                .iter()
                .zip(f)
                .map(|(&c, &f)| -(c as f64) * (f64::from(f) / 16.0).log2())
                .sum()
        };
        let q = quantize(&counts, 4);
        let mut best = f64::INFINITY;
        for a in 1..16u32 {
            for b in 1..16 - a {
                best = best.min(cost(&[a, b, 16 - a - b]));
            }
        }
        assert!((cost(&q) - best).abs() < 1e-9, "{q:?}");
    }

    #[test]
    fn tiny_body_exact() {
        // Width 8, words [3, 3, 3, 4]: count field 2 bits (value 1). Set {3, 4}, gaps 3
        // and 0: Rice k = 0 ("0001", "1") with its 8-bit header is 13 bits, Exp-Golomb 14,
        // runs 18.
        let b = body(&[3, 3, 3, 4], 8);
        let t = read_table(&b, 8, 4, NAME).unwrap();
        assert_eq!(t.syms, vec![3, 4]);
        // s = 1 ([1, 1]) costs 4 payload bits and a 23-bit table (3 bytes): 2 + 13, then
        // s - 1 in 4 bits, adaptive frequencies "10" (mode 2) and EG(0) "1", "1". s = 2
        // ([3, 1], 3.25 payload bits) needs a 27-bit table, a whole byte more.
        assert_eq!((t.scale, t.freqs.clone()), (1, vec![1, 1]));
        let mut w = BitWriter::new();
        w.write(1, 2); // m - 1
        w.write(0, 2); // Rice gaps
        w.write(0, 6); // k = 0
        w.write_rice(3, 0);
        w.write_rice(0, 0);
        w.write(0, 4); // s - 1
        w.write(2, 2); // adaptive frequencies
        w.write_eg(0, 0);
        w.write_eg(0, 0);
        assert_eq!(w.bit_len(), 23);
        let table = w.finish();
        assert_eq!(&b[..table.len()], &table[..]);
        // Payload: n < 64, so one state. With M = 2 both symbols have f = 1, so
        // C(3, x) = 2x and C(4, x) = 2x + 1. Encode 4, 3, 3, 3 backwards from 2^23; the
        // state stays below x_max = 2^30, so no renormalization bytes, only the state.
        let x = (RANS_L * 2 + 1) * 8;
        let mut expect = table.clone();
        expect.extend_from_slice(&x.to_le_bytes());
        assert_eq!(b, expect);
    }

    #[test]
    fn single_symbol_empty_and_odd_lengths() {
        assert_eq!(body(&[9, 9, 9], 8), vec![9 << 2, 0]);
        assert_eq!(body(&[], 8), Vec::<u8>::new());
        // Every length around the lane-count changes and group sizes.
        for n in (1..80).chain(4080..4110) {
            let v: Vec<u64> = (0..n).map(|i| (i * 7 % 5) as u64).collect();
            body(&v, 3);
        }
    }

    #[test]
    fn renormalizes_long_streams() {
        let v: Vec<u64> = (0..100_000u64).map(|i| (i * i) % 1000 % 37).collect();
        let b = body(&v, 16);
        let words = Words::from_u64s(16, &v);
        let h = crate::stats::stream_entropy_bits(&words, MAX_TABLE_SYMBOLS).unwrap();
        let bound = h * v.len() as f64 / 8.0;
        assert!(
            (b.len() as f64) < bound * 1.002 + 64.0,
            "{} vs {bound}",
            b.len()
        );
    }

    #[test]
    fn hostile_bodies_are_refused() {
        let v: Vec<u64> = (0..500u64).map(|i| (i * 31) % 11).collect();
        let good = body(&v, 8);
        for cut in 0..good.len() {
            assert!(
                decode(&good[..cut], 8, 500, Layout::Classic).is_err(),
                "cut {cut}"
            );
        }
        let mut long = good.clone();
        long.push(0);
        assert!(decode(&long, 8, 500, Layout::Classic).is_err());
        for i in 0..good.len() {
            for bit in 0..8 {
                let mut bad = good.clone();
                bad[i] ^= 1 << bit;
                // Must not panic; most flips are caught by the final-state check.
                let _ = decode(&bad, 8, 500, Layout::Classic);
            }
        }
        // Wrong length: the states do not come back to 2^23.
        assert!(decode(&good, 8, 499, Layout::Classic).is_err());
    }

    #[test]
    fn wide_layout_round_trips_at_every_group_boundary() {
        // Every partial last group, with and without refills, in both word containers.
        for n in (0..70).chain(1000..1040) {
            let v: Vec<u64> = (0..n).map(|i| (i * i * 7 % 13) as u64).collect();
            body_in(&v, 4, Layout::Wide);
            let v: Vec<u64> = (0..n).map(|i| (i * 40_503 % 3001) as u64).collect();
            body_in(&v, 12, Layout::Wide);
        }
    }

    /// The words the SIMD checker takes of the whole stream `src` of `body` (a wide body
    /// of two or more symbols) and whether it found them right; `None` without AVX2.
    fn simd_part(body: &[u8], src: &Words, width: u32) -> Option<(usize, bool)> {
        let t = read_table(body, width, src.len(), NAME).unwrap();
        let payload = &body[t.bytes..];
        let mut fc = vec![0u32; 1 << width];
        let mut cum = 0;
        for (&s, &f) in t.syms.iter().zip(&t.freqs) {
            fc[s as usize] = f | cum << 16;
            cum += f;
        }
        let c = Checker {
            fc: &fc,
            scale: t.scale,
            payload,
        };
        let mut x: [u32; WIDE_LANES] = initial_states(payload, &t, WIDE_LANES, NAME)
            .unwrap()
            .try_into()
            .unwrap();
        let field = Field {
            shift: 0,
            mask: crate::tensor::mask(width) as u32,
        };
        let (_, done, ok) = match src.buf() {
            WordBuf::U8(v) => simd::check_u8()?(&c, v, field, &mut x),
            WordBuf::U16(v) => simd::check_u16()?(&c, v, field, &mut x),
            _ => unreachable!("8- and 16-bit words"),
        };
        Some((done, ok))
    }

    /// The AVX-512 encoder sheds the same bytes and ends in the same states as the AVX2
    /// one (which `body_in` no longer reaches on a machine with AVX-512): 8- and 16-bit
    /// words, skewed alphabets with frequency-1 symbols, precisions 11 to 16. On a machine
    /// without AVX-512 there is nothing to compare and it says so.
    #[test]
    fn avx512_encoder_sheds_what_the_avx2_one_does() {
        fn compare<T: Word>(f512: simd::EncFn<T>, f2: simd::EncFn<T>, values: &[u64], width: u32) {
            let words = Words::from_u64s(width, values);
            let hist = histogram(&words, MAX_TABLE_SYMBOLS).unwrap();
            for scale in [11, 14, 16] {
                let mut plan = Plan::new(&hist, width, values.len());
                if scale < bits_needed(hist.len() as u64 - 1) {
                    continue;
                }
                plan.freqs = quantize(&hist.iter().map(|&(_, c)| c).collect::<Vec<_>>(), scale);
                plan.scale = scale;
                let enc = plan.enc_syms();
                let SymbolIndex::Dense(t) = SymbolIndex::new(&plan.syms, width, values.len())
                else {
                    panic!("a dense index for {width}-bit words");
                };
                let tab = enc_entries(&t, &enc, scale);
                let v: Vec<T> = values.iter().map(|&x| T::from_u64(x)).collect();
                let run = |f: simd::EncFn<T>| {
                    let mut x = [RANS_L; WIDE_LANES];
                    let mut out = vec![0u8; 2 * v.len() + 32];
                    let len =
                        f(&v, &tab, scale, 0, &mut x, Some(&mut out)).expect("the arguments fit");
                    out.truncate(len);
                    let mut y = [RANS_L; WIDE_LANES];
                    assert_eq!(
                        f(&v, &tab, scale, 0, &mut y, None),
                        Some(len),
                        "counting only"
                    );
                    assert_eq!(x, y);
                    (x, out)
                };
                assert_eq!(run(f512), run(f2), "{width}-bit words at precision {scale}");
            }
        }
        let (Some(a8), Some(b8), Some(a16), Some(b16)) = (
            simd::encoder_avx512::<u8>(),
            simd::encoder_avx2::<u8>(),
            simd::encoder_avx512::<u16>(),
            simd::encoder_avx2::<u16>(),
        ) else {
            eprintln!("no AVX-512 (F, CD, BW, VL, VBMI2) or no AVX2 here: nothing to compare");
            return;
        };
        // Long enough for a dense index of 16-bit words (2^16 <= 4 n).
        let n = 32 * 520;
        let mix = |i: u64| i.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let v8: Vec<u64> = (0..n as u64)
            .map(|i| (mix(i) >> 58).min(i % 13) * 19 % 256)
            .collect();
        compare(a8, b8, &v8, 8);
        let v16: Vec<u64> = (0..n as u64)
            .map(|i| {
                let h = mix(i);
                0x3C00 + (h >> 40) % ((h >> 60) * (h >> 60) * 20 + 3)
            })
            .collect();
        compare(a16, b16, &v16, 16);
    }

    /// The checker of [`matches_field`] says what decoding and comparing says, with and
    /// without SIMD: every stream checks, a word changed anywhere (first, across a
    /// group, mid-stream, in the scalar tail, last) fails, a field of wider words checks
    /// whatever the bits around it hold, and a damaged body is the decoder's error.
    #[test]
    fn check_without_decoding_agrees_with_decode() {
        let check = |body: &[u8], src: &Words, shift: u32, width: u32| {
            let t = read_table(body, width, src.len(), NAME).unwrap();
            let payload = &body[t.bytes..];
            let field = Field {
                shift,
                mask: crate::tensor::mask(width) as u32,
            };
            let (simd, scalar) = match src.buf() {
                WordBuf::U8(v) => (
                    check_payload(payload, &t, width, v, field, simd::check_u8()),
                    check_payload(payload, &t, width, v, field, None),
                ),
                WordBuf::U16(v) => (
                    check_payload(payload, &t, width, v, field, simd::check_u16()),
                    check_payload(payload, &t, width, v, field, None),
                ),
                _ => unreachable!("8- and 16-bit words"),
            };
            assert_eq!(simd, scalar);
            assert_eq!(
                matches_field(body, src, shift, width, Layout::Wide),
                simd.clone()
            );
            simd.unwrap()
        };
        for (width, n) in [(8, 70_001), (11, 65_536 + 45)] {
            // Skewed, as exponents are: small values common.
            let values: Vec<u64> = (0..n as u64)
                .map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40)
                .map(|r| ((r & 0xFFF) * (r >> 12)) >> (24 - width))
                .collect();
            let words = Words::from_u64s(width, &values);
            let body = body_in(&values, width, Layout::Wide);
            assert!(check(&body, &words, 0, width));
            for at in [0, 33, n / 2, n - 40, n - 1] {
                let mut v = values.clone();
                v[at] = (v[at] + 1) & crate::tensor::mask(width);
                let changed = Words::from_u64s(width, &v);
                assert!(!check(&body, &changed, 0, width), "{at}");
                // The SIMD part flags the word itself, not only the wrong states after it.
                if let Some((done, ok)) = simd_part(&body, &changed, width) {
                    assert_eq!(ok, at >= done, "{at} of {done}");
                }
            }
            // The words as a field of 16-bit words, with other bits above and below it.
            let shift = 16 - width;
            let wide: Vec<u64> = values
                .iter()
                .enumerate()
                .map(|(i, &v)| v << shift | (i as u64 * 7) & crate::tensor::mask(shift))
                .collect();
            let src = Words::from_u64s(16, &wide);
            assert!(check(&body, &src, shift, width));
            let mut w = wide.clone();
            w[n / 3] ^= 1 << shift;
            assert!(!check(&body, &Words::from_u64s(16, &w), shift, width));
            if shift > 0 {
                w[n / 3] ^= 1 << shift | 1;
                assert!(check(&body, &Words::from_u64s(16, &w), shift, width));
            }
            // A damaged body: the decoder's error, never `Ok`.
            let cut = &body[..body.len() - 1];
            let want = decode(cut, width, n, Layout::Wide).unwrap_err();
            assert_eq!(
                matches_field(cut, &words, 0, width, Layout::Wide),
                Err(want)
            );
            let mut long = body.clone();
            long.push(0);
            let want = decode(&long, width, n, Layout::Wide).unwrap_err();
            assert_eq!(
                matches_field(&long, &words, 0, width, Layout::Wide),
                Err(want)
            );
        }
    }

    /// [`Divider`] divides exactly: every divisor's edges (multiples, their neighbours,
    /// the largest numbers) and a spread of pseudo-random pairs, against `/`.
    #[test]
    fn divider_is_exact() {
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut divisors: Vec<u64> =
            vec![1, 2, 3, 7, 1 << 20, (1 << 20) + 1, u64::MAX, u64::MAX - 1];
        divisors.extend((0..200).map(|_| next() >> (next() % 64)).map(|d| d.max(1)));
        for d in divisors {
            let by = Divider::new(d);
            let check = |a: u64| assert_eq!(by.div(a), a / d, "{a} / {d}");
            for k in [0u64, 1, 2, 3, 1000] {
                let m = d.saturating_mul(k);
                check(m);
                check(m.saturating_sub(1));
                check(m.saturating_add(1));
            }
            check(u64::MAX);
            check(u64::MAX - 1);
            for _ in 0..200 {
                check(next() >> (next() % 64));
            }
        }
    }

    #[test]
    fn long_streams_are_wide_and_simd_matches_the_spec() {
        // Skewed 8-bit and 16-bit streams past the wide threshold, with a partial group.
        let n = WIDE_MIN_WORDS + 37;
        let v: Vec<u64> = (0..n as u64)
            .map(|i| (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 58).min(i % 9))
            .collect();
        let b = body(&v, 8);
        assert_eq!(
            Plan::new(&histogram(&Words::from_u64s(8, &v), 16).unwrap(), 8, n).codec(),
            CodecId::Rans32
        );
        assert_eq!(
            decode(&b, 8, n, Layout::Wide).unwrap(),
            Words::from_u64s(8, &v)
        );
        // Read in the other layout, the same bytes are refused, not misread.
        assert!(decode(&b, 8, n, Layout::Classic).is_err());
        let v16: Vec<u64> = (0..n as u64).map(|i| (i * i) % 1009 % 257 * 200).collect();
        body(&v16, 16);
        // A BF16-like alphabet of thousands of words, many seen once (frequency 1: the
        // encoder's reciprocal-free case).
        let wide: Vec<u64> = (0..n as u64)
            .map(|i| {
                let h = i.wrapping_mul(0x9E37_79B9_7F4A_7C15);
                0x3C00 + (h >> 40) % ((h >> 60) * (h >> 60) * 20 + 3)
            })
            .collect();
        let w = Words::from_u64s(16, &wide);
        let hist = histogram(&w, MAX_TABLE_SYMBOLS).unwrap();
        let plan = Plan::new(&hist, 16, n);
        assert_eq!((hist.len(), plan.scale), (4406, 14));
        assert!(plan.freqs.contains(&1));
        body(&wide, 16);
        assert_eq!(Layout::for_len(WIDE_MIN_WORDS - 1), Layout::Classic);
    }

    #[test]
    fn hostile_wide_bodies_are_refused_without_panics() {
        let n = 3000;
        let v: Vec<u64> = (0..n as u64).map(|i| (i * 31) % 11).collect();
        let good = body_in(&v, 8, Layout::Wide);
        for cut in 0..good.len() {
            assert!(
                decode(&good[..cut], 8, n, Layout::Wide).is_err(),
                "cut {cut}"
            );
        }
        let mut long = good.clone();
        long.push(0);
        assert!(matches!(
            decode(&long, 8, n, Layout::Wide),
            Err(CodecError::TrailingBytes {
                codec: "rans32",
                extra: 1
            })
        ));
        for i in 0..good.len() {
            let mut bad = good.clone();
            bad[i] ^= 0x5A;
            // Must not panic, in the SIMD path or the scalar one.
            let _ = decode(&bad, 8, n, Layout::Wide);
        }
        assert!(decode(&good, 8, n - 1, Layout::Wide).is_err());
    }
}
