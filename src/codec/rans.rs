//! Static order-0 rANS over the distinct words of a stream (at most
//! [`MAX_TABLE_SYMBOLS`](crate::codec::MAX_TABLE_SYMBOLS)): interleaved 32-bit states (1, 2 or 4 by stream length),
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

use super::CodecId;

const NAME: &str = "rans";

mod decode;
mod encode;
mod freqs;
mod model;
mod simd;

pub use decode::{decode, matches_field};
pub(super) use decode::{CheckFn, Checker, Decoder, Field, WideFn, SYM_PAD};
pub use encode::{encode, size, Plan};
pub use freqs::table_bytes;
pub(super) use freqs::{read_freqs, write_freqs};
pub(crate) use model::{body_lower_bound, entropy_bits, floor_ideal_bits};
pub(super) use model::{
    clamp_bits, entropy_bits_of, least_table_bits, log2_table, model_bits, plan_freqs, FreqMode,
};
pub use model::{quantize, quantize_rounded};

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

#[cfg(test)]
mod tests {
    use super::decode::*;
    use super::encode::*;
    use super::freqs::*;
    use super::model::*;
    use super::*;
    use crate::codec::bitio::BitWriter;
    use crate::codec::table::SymbolIndex;
    use crate::codec::table::Word;
    use crate::codec::{CodecError, MAX_TABLE_SYMBOLS};
    use crate::stats::histogram;
    use crate::tensor::with_buf;
    use crate::tensor::{bits_needed, mask, WordBuf, Words};
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;

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
    /// from the fewest slots up. Equal counts (all 1, all 7) take `quantize`'s one-pass
    /// path.
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
            cases.push(vec![7; k]);
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
