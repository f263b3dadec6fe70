//! Pieces shared by the table codecs (Huffman and rANS): the container word trait, the
//! symbol-count field, the sorted symbol set, Exp-Golomb parameter choice, and the
//! word -> symbol index used by the encoders.
//!
//! # Symbol count
//!
//! `m`, the number of distinct words, is stored as `m - 1` in `bits(cap - 1)` bits where
//! `cap = min(n, 65536, 2^b)` is the most distinct words a stream of `n` words of `b` bits
//! can have. Nothing is stored when `n = 0` (then `m = 0`), and so nothing when `cap = 1`.
//!
//! # Symbol set
//!
//! The `m` distinct words, strictly increasing, each `< 2^b`:
//!
//! * `m = 0` or `m = 2^b` (every value present): nothing.
//! * `m = 1`: the word in `b` bits.
//! * otherwise a 2-bit mode, then
//!   * mode 0, Rice gaps: `k` in 6 bits, then `g_0 = s_0`, `g_i = s_i - s_(i-1) - 1` as
//!     Rice codes of parameter `k` (with `k = 0` this is a presence bitmap up to `s_(m-1)`);
//!   * mode 1, Exp-Golomb gaps: `k` in 6 bits, the same gaps as order-`k` Exp-Golomb codes;
//!   * mode 2, runs of consecutive words: `k_gap` in 6 bits, `k_len` in 5 bits, then per
//!     run its gap (`start_0`, then `start_j - last_(j-1) - 2`) as Exp-Golomb(`k_gap`) and
//!     its length minus one as Exp-Golomb(`k_len`), until `m` words are listed;
//!   * mode 3 is invalid.
//!
//!   The encoder takes the mode and parameters that give the fewest bits (ties: lower mode).
//!
//! The codes themselves are defined in [`super::bitio`].

use super::bitio::{bits_for_count, BitReader, BitWriter};
use super::{CodecError, MAX_TABLE_SYMBOLS};
use crate::stats::U64Map;
use crate::tensor::{bits_needed, mask};

/// A container integer of a word stream (`u8`, `u16`, `u32`, `u64`).
pub(crate) trait Word:
    Copy + Default + Into<u64> + std::ops::BitOr<Output = Self> + bytemuck::Pod + Send + Sync + 'static
{
    /// Truncating conversion from a word value that fits the container.
    fn from_u64(v: u64) -> Self;
}

macro_rules! impl_word {
    ($($t:ty),*) => {$(
        impl Word for $t {
            #[inline]
            fn from_u64(v: u64) -> Self {
                v as $t
            }
        }
    )*};
}
impl_word!(u8, u16, u32, u64);

/// Fails unless `width` is in 1..=64.
pub(crate) fn check_width(width: u32, codec: &'static str) -> Result<(), CodecError> {
    if (1..=64).contains(&width) {
        Ok(())
    } else {
        Err(CodecError::Invalid {
            codec,
            what: format!("word width {width}, expected 1..=64"),
        })
    }
}

/// An empty vector with room for `n` words, or an error naming `codec` when that much
/// memory cannot be had (decoders never abort on a huge `n`).
pub(crate) fn try_with_capacity<T>(n: usize, codec: &'static str) -> Result<Vec<T>, CodecError> {
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| CodecError::Invalid {
        codec,
        what: format!("cannot allocate {n} words"),
    })?;
    Ok(v)
}

/// `n` copies of `x`, or an error when that much memory cannot be had.
pub(crate) fn try_filled<T: Word>(
    x: T,
    n: usize,
    codec: &'static str,
) -> Result<Vec<T>, CodecError> {
    let mut v = try_with_capacity(n, codec)?;
    v.resize(n, x);
    Ok(v)
}

/// The stream of `n` copies of `value` (which fits in `width` bits).
pub(crate) fn try_constant(
    width: u32,
    value: u64,
    n: usize,
    codec: &'static str,
) -> Result<crate::tensor::Words, CodecError> {
    use crate::tensor::{container_bytes, WordBuf, Words};
    let buf = match container_bytes(width) {
        1 => WordBuf::U8(try_filled(value as u8, n, codec)?),
        2 => WordBuf::U16(try_filled(value as u16, n, codec)?),
        4 => WordBuf::U32(try_filled(value as u32, n, codec)?),
        _ => WordBuf::U64(try_filled(value, n, codec)?),
    };
    if value > crate::tensor::mask(width) {
        return Err(CodecError::Invalid {
            codec,
            what: format!("word {value} does not fit in {width} bits"),
        });
    }
    Ok(Words::from_buf_trusted(width, buf))
}

/// The most distinct words a stream of `n` words of `width` bits can hold in a table.
pub(crate) fn count_cap(width: u32, n: usize) -> u64 {
    let by_width = if width >= 17 { u64::MAX } else { 1u64 << width };
    (n as u64).min(MAX_TABLE_SYMBOLS as u64).min(by_width)
}

/// Bits of the symbol-count field.
pub(crate) fn count_bits(width: u32, n: usize) -> u64 {
    u64::from(bits_for_count(count_cap(width, n)))
}

/// Writes the symbol count `m` (`1 <= m <= cap`, or 0 when `n = 0`).
pub(crate) fn write_count(w: &mut BitWriter, m: usize, width: u32, n: usize) {
    let cap = count_cap(width, n);
    if cap > 0 {
        w.write(m as u64 - 1, bits_for_count(cap));
    }
}

/// Reads the symbol count; fails if it exceeds what `n` words of `width` bits allow.
pub(crate) fn read_count(r: &mut BitReader<'_>, width: u32, n: usize) -> Result<usize, CodecError> {
    let cap = count_cap(width, n);
    if cap == 0 {
        return Ok(0);
    }
    let m = r.read(bits_for_count(cap))? + 1;
    if m > cap {
        return Err(r.invalid(format!("table of {m} symbols, expected at most {cap}")));
    }
    Ok(m as usize)
}

/// How a symbol set is written (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SetMode {
    /// `m = 0` or every value of the width present: nothing stored.
    Implied,
    /// One symbol in `b` bits.
    Single,
    /// Rice-coded gaps.
    Rice(u32),
    /// Exp-Golomb-coded gaps.
    ExpGolomb(u32),
    /// Runs: Exp-Golomb gaps and lengths.
    Runs(u32, u32),
}

/// The chosen encoding of a symbol set and its exact size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SetPlan {
    pub mode: SetMode,
    /// Exact size in bits, mode field included.
    pub bits: u64,
}

fn gaps(syms: &[u64]) -> impl Iterator<Item = u64> + Clone + '_ {
    syms.iter()
        .enumerate()
        .map(|(i, &s)| if i == 0 { s } else { s - syms[i - 1] - 1 })
}

/// Maximal runs of consecutive symbols as `(gap, len - 1)` (see the module docs).
fn runs(syms: &[u64]) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = Vec::new();
    let mut start = 0usize;
    for i in 1..=syms.len() {
        if i == syms.len() || syms[i] != syms[i - 1] + 1 {
            let gap = if start == 0 {
                syms[0]
            } else {
                syms[start] - syms[start - 1] - 2
            };
            out.push((gap, (i - start - 1) as u64));
            start = i;
        }
    }
    out
}

/// The order-`k` Exp-Golomb parameter in `0..=kmax` giving the fewest bits for `vals`,
/// and that exact total. The choice is made on a histogram of bit lengths, then refined
/// exactly around it; it is deterministic, which is all the decoder needs. Inlined, so
/// that [`plan_set`]'s `lzcnt` build counts its bit lengths with `lzcnt`.
#[inline(always)]
pub(crate) fn best_eg_k(vals: impl Iterator<Item = u64> + Clone, kmax: u32) -> (u32, u64) {
    let mut hist = [0u64; 65];
    for v in vals.clone() {
        hist[bits_needed(v) as usize] += 1;
    }
    let top = longest(&hist);
    // The exact totals of the three orders in one pass.
    let ks = eg_orders(&hist, kmax);
    // `eg_len(v, k)` is `2 bits(v + 2^k) - k - 1`: sum the bit counts, then adjust. With
    // every value and order under 2^62 (frequencies, gaps: all but the extremes),
    // `v + 2^k` fits 64 bits.
    fn sums(
        vals: impl Iterator<Item = u64>,
        ks: [u32; 3],
        bits: impl Fn(u64, u32) -> u64,
    ) -> (u64, u64, u64, u64) {
        vals.fold((0, 0, 0, 0), |(b0, b1, b2, n), v| {
            (
                b0 + bits(v, ks[0]),
                b1 + bits(v, ks[1]),
                b2 + bits(v, ks[2]),
                n + 1,
            )
        })
    }
    let (b0, b1, b2, n) = if top < 62 {
        sums(vals, ks, |v, k| {
            u64::from(64 - (v + (1u64 << k)).leading_zeros())
        })
    } else {
        sums(vals, ks, |v, k| {
            u64::from(128 - (u128::from(v) + (1u128 << k)).leading_zeros())
        })
    };
    let b = [b0, b1, b2];
    pick_eg(
        ks,
        std::array::from_fn(|i| 2 * b[i] - n * u64::from(ks[i] + 1)),
    )
}

/// The longest bit length with a value in `hist` (values counted by bit length).
fn longest(hist: &[u64]) -> u32 {
    hist.iter().rposition(|&h| h > 0).unwrap_or(0) as u32
}

/// The orders [`best_eg_k`] sizes exactly, for values counted by bit length in `hist`:
/// `k0`, the order in `0..=kmax` (orders above the longest value only add bits) with the
/// fewest bits by the lengths alone, then `k0 - 1` and `k0 + 1` (either replaced by `k0`
/// when out of range, so that it is never chosen).
fn eg_orders(hist: &[u64], kmax: u32) -> [u32; 3] {
    let top = longest(hist);
    let kmax = kmax.min(top);
    let approx = |k: u64| -> u64 {
        hist[..=top as usize]
            .iter()
            .enumerate()
            .map(|(l, &h)| {
                let l = l as u64;
                h * if l <= k { k + 1 } else { 2 * l - k + 1 }
            })
            .sum()
    };
    let k0 = (0..=u64::from(kmax))
        .min_by_key(|&k| (approx(k), k))
        .unwrap_or(0) as u32;
    [k0, k0.wrapping_sub(1), k0 + 1].map(|k| if k <= kmax { k } else { k0 })
}

/// The order of [`eg_orders`]' `ks` with the fewest bits `totals` (exact, in the same
/// order), the lower order on ties, and that total.
fn pick_eg(ks: [u32; 3], totals: [u64; 3]) -> (u32, u64) {
    let mut best = (ks[0], totals[0]);
    for (&k, &e) in ks.iter().zip(&totals).skip(1) {
        if e < best.1 || (e == best.1 && k < best.0) {
            best = (k, e);
        }
    }
    best
}

/// Values [`SmallEg`] takes: below `2^17` (the `f - 1` of a frequency table at
/// precision up to 2^16, and their zigzag differences).
pub(crate) const SMALL_EG_BITS: usize = 17;

/// [`best_eg_k`] of values below `2^17`, counted in one pass with nothing stored: a
/// histogram of (bit length, leading ones), from which the exact total of every order
/// follows. A value `v` of `l > k` bits takes `l` bits as `v + 2^k`, or `l + 1` when the
/// addition carries out of its top bit, which happens exactly when its bits from the top
/// down to bit `k` are all ones (its leading ones number at least `l - k`); a value of at
/// most `k` bits takes `k + 1`. Chooses the order [`best_eg_k`] chooses.
#[derive(Clone)]
pub(crate) struct SmallEg {
    /// `h[l][r]`: values of `l` bits whose top `r` bits are ones.
    h: [[u32; SMALL_EG_BITS + 1]; SMALL_EG_BITS + 1],
    n: u64,
}

impl SmallEg {
    pub(crate) fn new() -> SmallEg {
        SmallEg {
            h: [[0; SMALL_EG_BITS + 1]; SMALL_EG_BITS + 1],
            n: 0,
        }
    }

    /// Counts `v`, which must be below `2^17` (larger values are counted as their low 17
    /// bits' would be, in release builds).
    #[inline(always)]
    pub(crate) fn add(&mut self, v: u64) {
        debug_assert!(v < 1 << SMALL_EG_BITS);
        let v = v & ((1 << SMALL_EG_BITS) - 1);
        let l = 64 - v.leading_zeros();
        // The top bit to bit 63, then count the ones from there (0 for v = 0: the shift
        // by 64 wraps to 0).
        let r = (!v.wrapping_shl(64 - l)).leading_zeros();
        self.h[l as usize][r as usize] += 1;
        self.n += 1;
    }

    /// The order in `0..=kmax` and the exact total in bits, as [`best_eg_k`] gives them.
    pub(crate) fn best(&self, kmax: u32) -> (u32, u64) {
        let hist: [u64; SMALL_EG_BITS + 1] =
            std::array::from_fn(|l| self.h[l][..=l].iter().map(|&c| u64::from(c)).sum());
        let top = longest(&hist);
        let ks = eg_orders(&hist, kmax);
        let exact = |k: u32| -> u64 {
            let k = k as usize;
            let mut bits = 0u64;
            for (l, row) in self.h.iter().enumerate().take(top as usize + 1) {
                if l <= k {
                    bits += hist[l] * (k as u64 + 1);
                } else {
                    // Leading ones never exceed the length.
                    let carry: u64 = row[l - k..=l].iter().map(|&c| u64::from(c)).sum();
                    bits += hist[l] * l as u64 + carry;
                }
            }
            2 * bits - self.n * (k as u64 + 1)
        };
        pick_eg(ks, ks.map(exact))
    }
}

/// The Rice parameter in `0..=63` giving the fewest bits for `vals` among those near the
/// log of their mean (`k0 - 2 ..= k0 + 1`, the first on ties), and that exact
/// (saturating) total: the four totals in one pass.
fn best_rice_k(vals: &[u64]) -> (u32, u64) {
    let sum: u128 = vals.iter().map(|&v| u128::from(v)).sum();
    let count = vals.len() as u128;
    let mean = (sum / count.max(1)) as u64;
    let k0 = bits_needed(mean);
    let lo = k0.saturating_sub(2);
    let hi = (k0 + 1).min(63);
    // `rice_len(v, k)` is `(v >> k) + 1 + k`: sum the quotients (in 128 bits, which
    // cannot overflow for fewer than 2^64 values), then add the rest and saturate.
    let ks: [u32; 4] = std::array::from_fn(|i| (lo + i as u32).min(hi));
    let q = vals.iter().fold([0u128; 4], |mut q, &v| {
        for (acc, &k) in q.iter_mut().zip(&ks) {
            *acc += u128::from(v >> k);
        }
        q
    });
    let mut best = (0u32, u64::MAX);
    for (i, &k) in ks.iter().enumerate() {
        if k != lo + i as u32 {
            break;
        }
        let total = q[i] + count * u128::from(1 + k);
        let bits = u64::try_from(total).unwrap_or(u64::MAX);
        if bits < best.1 {
            best = (k, bits);
        }
    }
    best
}

feature_fn! {
    "lzcnt";
    /// Chooses how to write `syms` (strictly increasing, each `< 2^width`).
    pub(crate) fn plan_set(syms: &[u64], width: u32) -> SetPlan = plan_set_in;
}

/// [`plan_set`]'s work, inlined into each of its builds.
#[inline(always)]
fn plan_set_in(syms: &[u64], width: u32) -> SetPlan {
    let m = syms.len() as u64;
    if m == 0 || (width < 64 && m == 1u64 << width) {
        return SetPlan {
            mode: SetMode::Implied,
            bits: 0,
        };
    }
    if m == 1 {
        return SetPlan {
            mode: SetMode::Single,
            bits: u64::from(width),
        };
    }
    let g: Vec<u64> = gaps(syms).collect();
    let (kr, rice) = best_rice_k(&g);
    let mut best = SetPlan {
        mode: SetMode::Rice(kr),
        bits: 2 + 6 + rice,
    };
    let (ke, eg) = best_eg_k(g.iter().copied(), 63);
    if 2 + 6 + eg < best.bits {
        best = SetPlan {
            mode: SetMode::ExpGolomb(ke),
            bits: 2 + 6 + eg,
        };
    }
    let r = runs(syms);
    let (kg, gbits) = best_eg_k(r.iter().map(|&(g, _)| g), 63);
    let (kl, lbits) = best_eg_k(r.iter().map(|&(_, l)| l), 31);
    if 2 + 6 + 5 + gbits + lbits < best.bits {
        best = SetPlan {
            mode: SetMode::Runs(kg, kl),
            bits: 2 + 6 + 5 + gbits + lbits,
        };
    }
    best
}

/// Writes `syms` as planned by [`plan_set`].
pub(crate) fn write_set(w: &mut BitWriter, syms: &[u64], width: u32, plan: &SetPlan) {
    match plan.mode {
        SetMode::Implied => {}
        SetMode::Single => w.write(syms[0], width),
        SetMode::Rice(k) => {
            w.write(0, 2);
            w.write(u64::from(k), 6);
            for g in gaps(syms) {
                w.write_rice(g, k);
            }
        }
        SetMode::ExpGolomb(k) => {
            w.write(1, 2);
            w.write(u64::from(k), 6);
            for g in gaps(syms) {
                w.write_eg(g, k);
            }
        }
        SetMode::Runs(kg, kl) => {
            w.write(2, 2);
            w.write(u64::from(kg), 6);
            w.write(u64::from(kl), 5);
            for (g, l) in runs(syms) {
                w.write_eg(g, kg);
                w.write_eg(l, kl);
            }
        }
    }
}

/// Reads a set of `m` symbols of `width` bits (`m` already bounded by [`read_count`]).
/// Fails on a symbol `>= 2^width`, on runs that overshoot `m`, and on truncation.
pub(crate) fn read_set(
    r: &mut BitReader<'_>,
    m: usize,
    width: u32,
) -> Result<Vec<u64>, CodecError> {
    let max = mask(width);
    let m64 = m as u64;
    if m == 0 {
        return Ok(Vec::new());
    }
    if width < 64 && m64 == 1u64 << width {
        return Ok((0..m64).collect());
    }
    if m == 1 {
        return Ok(vec![r.read(width)?]);
    }
    let mode = r.read(2)?;
    let mut syms: Vec<u64> = Vec::with_capacity(m);
    let too_big = |r: &BitReader<'_>| r.invalid(format!("symbol does not fit in {width} bits"));
    match mode {
        0 | 1 => {
            let k = r.read(6)? as u32;
            let mut next = 0u64; // smallest value the next symbol may take
            for i in 0..m {
                let g = if mode == 0 {
                    r.read_rice(k)?
                } else {
                    r.read_eg(k)?
                };
                let s = next.checked_add(g).filter(|&s| s <= max);
                let s = s.ok_or_else(|| too_big(r))?;
                syms.push(s);
                if i + 1 < m {
                    next = s.checked_add(1).ok_or_else(|| too_big(r))?;
                }
            }
        }
        2 => {
            let kg = r.read(6)? as u32;
            let kl = r.read(5)? as u32;
            let mut next = 0u64;
            while syms.len() < m {
                let g = r.read_eg(kg)?;
                let len = r.read_eg(kl)?;
                let left = (m - syms.len()) as u64;
                if len >= left {
                    return Err(r.invalid(format!(
                        "run of {} symbols overshoots the {m} declared",
                        u128::from(len) + 1
                    )));
                }
                let start = next.checked_add(g).ok_or_else(|| too_big(r))?;
                let last = start.checked_add(len).filter(|&l| l <= max);
                let last = last.ok_or_else(|| too_big(r))?;
                syms.extend(start..=last);
                if syms.len() < m {
                    // The next run starts at least two past this one's last symbol.
                    next = last.checked_add(2).ok_or_else(|| too_big(r))?;
                }
            }
        }
        _ => return Err(r.invalid("symbol set mode 3 is reserved".into())),
    }
    Ok(syms)
}

/// Maps a word value to its index in the sorted symbol list, for the encoders.
pub(crate) enum SymbolIndex {
    /// Direct table over `0..2^width` (narrow widths, long streams).
    Dense(Vec<u32>),
    /// Hash table for wide words or short streams.
    Hashed(U64Map<u32>),
}

impl SymbolIndex {
    /// Index for `syms` (the distinct words of a stream of `n` words of `width` bits).
    pub(crate) fn new(syms: &[u64], width: u32, n: usize) -> SymbolIndex {
        if width <= 16 && (1usize << width) <= n.saturating_mul(4).max(1024) {
            let mut t = vec![u32::MAX; 1usize << width];
            for (i, &s) in syms.iter().enumerate() {
                t[s as usize] = i as u32;
            }
            SymbolIndex::Dense(t)
        } else {
            let mut t = U64Map::with_capacity(syms.len());
            for (i, &s) in syms.iter().enumerate() {
                *t.entry(s) = i as u32;
            }
            SymbolIndex::Hashed(t)
        }
    }

    /// Index of `v`, which must be one of the symbols.
    #[inline]
    pub(crate) fn get(&self, v: u64) -> usize {
        let i = match self {
            SymbolIndex::Dense(t) => t.get(v as usize).copied(),
            SymbolIndex::Hashed(t) => t.get(v),
        };
        debug_assert!(
            i.is_some_and(|i| i != u32::MAX),
            "word {v} not in the table"
        );
        i.unwrap_or(0) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::super::bitio::eg_len;
    use super::*;

    #[test]
    fn plan_set_builds_agree() {
        // The build picked at run time (with lzcnt on processors that have it, as this
        // machine's) plans every set as the baseline build does: sparse, dense, runs.
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        for (width, m) in [
            (8u32, 3usize),
            (8, 200),
            (11, 900),
            (16, 300),
            (16, 40_000),
            (32, 5_000),
        ] {
            let mut syms: Vec<u64> = (0..m)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x & mask(width)
                })
                .collect();
            syms.sort_unstable();
            syms.dedup();
            assert_eq!(
                plan_set(&syms, width),
                plan_set_in(&syms, width),
                "{width} bits"
            );
        }
        let runs: Vec<u64> = (0..64).chain(1000..1100).chain(4000..4001).collect();
        assert_eq!(plan_set(&runs, 16), plan_set_in(&runs, 16));
        assert!(matches!(plan_set(&runs, 16).mode, SetMode::Runs(..)));
    }

    /// The fused exact pass of [`best_eg_k`] picks the same order with the same exact
    /// total as sizing each of the three orders around the estimate with [`eg_len`] (the
    /// rule archives were written with): on small values, spread values and the extremes
    /// of `u64` (where `v + 2^k` needs 65 bits).
    /// The fused pass of [`best_rice_k`] picks the same order with the same total as
    /// sizing each order near the mean's log with [`rice_len`] (the rule archives were
    /// written with), saturating, on small, spread and extreme values.
    #[test]
    fn best_rice_k_matches_per_order_exact_sizing() {
        use super::super::bitio::rice_len;
        fn reference(vals: &[u64]) -> (u32, u64) {
            let sum: u128 = vals.iter().map(|&v| u128::from(v)).sum();
            let mean = (sum / (vals.len() as u128).max(1)) as u64;
            let k0 = bits_needed(mean);
            let mut best = (0u32, u64::MAX);
            for k in k0.saturating_sub(2)..=(k0 + 1).min(63) {
                let bits = vals
                    .iter()
                    .fold(0u64, |acc, &v| acc.saturating_add(rice_len(v, k)));
                if bits < best.1 {
                    best = (k, bits);
                }
            }
            best
        }
        let sets: Vec<Vec<u64>> = vec![
            vec![0, 0, 1, 0, 2, 0],
            (0..500).map(|i| (i * 37) % 300).collect(),
            (0..64).map(|i| 1u64 << i).collect(),
            vec![u64::MAX, u64::MAX - 1, 0, 1 << 63],
            vec![u64::MAX; 3],
            vec![1 << 62; 5],
            vec![7; 100],
            vec![5],
        ];
        for vals in sets {
            assert_eq!(best_rice_k(&vals), reference(&vals), "{vals:?}");
        }
    }

    #[test]
    fn best_eg_k_matches_per_order_exact_sizing() {
        fn reference(vals: &[u64], kmax: u32) -> (u32, u64) {
            let top = vals.iter().map(|&v| bits_needed(v)).max().unwrap_or(0);
            let kmax = kmax.min(top);
            let approx = |k: u64| -> u64 {
                vals.iter()
                    .map(|&v| {
                        let l = u64::from(bits_needed(v));
                        if l <= k {
                            k + 1
                        } else {
                            2 * l - k + 1
                        }
                    })
                    .sum()
            };
            let k0 = (0..=u64::from(kmax))
                .min_by_key(|&k| (approx(k), k))
                .unwrap_or(0) as u32;
            let exact = |k: u32| vals.iter().map(|&v| eg_len(v, k)).sum::<u64>();
            let mut best = (k0, exact(k0));
            for k in [k0.wrapping_sub(1), k0 + 1] {
                if k <= kmax && (exact(k) < best.1 || (exact(k) == best.1 && k < best.0)) {
                    best = (k, exact(k));
                }
            }
            best
        }
        let sets: Vec<Vec<u64>> = vec![
            vec![0, 0, 1, 0, 2, 0],
            (0..500).map(|i| (i * 37) % 300).collect(),
            (0..64).map(|i| 1u64 << i).collect(),
            vec![u64::MAX, u64::MAX - 1, 0, 1 << 63],
            vec![7; 100],
            vec![],
        ];
        for vals in sets {
            for kmax in [0, 3, 15, 31, 63] {
                let got = best_eg_k(vals.iter().copied(), kmax);
                assert_eq!(got, reference(&vals, kmax), "kmax {kmax} {vals:?}");
                let exact: u64 = vals.iter().map(|&v| eg_len(v, got.0)).sum();
                assert_eq!(got.1, exact);
            }
        }
    }

    /// [`SmallEg`] (one pass, nothing stored) chooses the order [`best_eg_k`] chooses and
    /// gives its exact total, on sets of values below 2^17 whose carries differ by order:
    /// runs of ones at the top (`2^l - 2^j`), every value up to 2^17 - 1, skewed and
    /// constant sets.
    #[test]
    fn small_eg_matches_best_eg_k() {
        let mut sets: Vec<Vec<u64>> = vec![
            vec![0, 0, 1, 0, 2, 0],
            (0..500).map(|i| (i * 37) % 300).collect(),
            (0..17).map(|i| 1u64 << i).collect(),
            (1..=17u32)
                .flat_map(|l| (0..l).map(move |j| (1u64 << l) - (1u64 << j)))
                .collect(),
            (0..1u64 << 17).step_by(7).collect(),
            vec![(1 << 17) - 1; 9],
            vec![7; 100],
            vec![0; 3],
        ];
        let mut x = 0x9E37_79B9u64;
        for spread in [3, 40, 900, 70_000] {
            sets.push(
                (0..2000)
                    .map(|_| {
                        x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                        (x >> 40) % spread * ((x >> 20) % 3) % (1 << 17)
                    })
                    .collect(),
            );
        }
        for vals in sets {
            let mut eg = SmallEg::new();
            vals.iter().for_each(|&v| eg.add(v));
            for kmax in [0, 1, 3, 15, 31] {
                let want = best_eg_k(vals.iter().copied(), kmax);
                assert_eq!(eg.best(kmax), want, "kmax {kmax} {vals:?}");
                assert_eq!(want.1, vals.iter().map(|&v| eg_len(v, want.0)).sum::<u64>());
            }
        }
    }

    fn round_trip(syms: &[u64], width: u32) -> SetPlan {
        let plan = plan_set(syms, width);
        let mut w = BitWriter::new();
        write_set(&mut w, syms, width, &plan);
        assert_eq!(w.bit_len(), plan.bits, "{syms:?} {plan:?}");
        let bytes = w.finish();
        let mut r = BitReader::new(&bytes, "test");
        assert_eq!(read_set(&mut r, syms.len(), width).unwrap(), syms);
        r.finish().unwrap();
        plan
    }

    #[test]
    fn set_modes_are_chosen_by_size() {
        // All 128 values of a 7-bit field: nothing stored.
        let all: Vec<u64> = (0..128).collect();
        assert_eq!(round_trip(&all, 7).bits, 0);
        // One symbol: b bits.
        assert_eq!(round_trip(&[41], 12).bits, 12);
        // A contiguous exponent-like block: one run.
        let block: Vec<u64> = (100..140).collect();
        let p = round_trip(&block, 8);
        assert!(matches!(p.mode, SetMode::Runs(..)), "{p:?}");
        // Gap 100 as EG(7) is 0 then 7 bits (8 bits); length-1 = 39 as EG(6) is 7 bits.
        assert_eq!(p.mode, SetMode::Runs(7, 6));
        assert_eq!(p.bits, 2 + 6 + 5 + 8 + 7);
        // Every other value: the bitmap (Rice k=0) is 2 bits per symbol.
        let alt: Vec<u64> = (0..100).map(|i| 2 * i + 1).collect();
        let p = round_trip(&alt, 8);
        assert_eq!(p.mode, SetMode::Rice(0));
        assert_eq!(p.bits, 2 + 6 + 2 * 100);
        // Sparse wide values with an outlier: Exp-Golomb.
        let wide = [3u64, 1000, 1 << 40, (1 << 40) + 5, u64::MAX];
        let p = round_trip(&wide, 64);
        assert!(
            matches!(p.mode, SetMode::ExpGolomb(_) | SetMode::Runs(..)),
            "{p:?}"
        );
        round_trip(&[0, u64::MAX], 64);
        round_trip(&[0, 1, 2, 3, 7, 8, 9, 200, 201, 255], 8);
    }

    #[test]
    fn set_decoder_rejects_out_of_range() {
        // Width 4, m = 2, mode 0 with k = 0, gaps 3 then 20: second symbol 24 > 15.
        let mut w = BitWriter::new();
        w.write(0, 2);
        w.write(0, 6);
        w.write_rice(3, 0);
        w.write_rice(20, 0);
        let bytes = w.finish();
        let mut r = BitReader::new(&bytes, "test");
        assert!(matches!(
            read_set(&mut r, 2, 4),
            Err(CodecError::Invalid { .. })
        ));
        // Mode 3 is reserved.
        let mut r = BitReader::new(&[0b11], "test");
        assert!(matches!(
            read_set(&mut r, 2, 4),
            Err(CodecError::Invalid { .. })
        ));
        // A run longer than the count.
        let mut w = BitWriter::new();
        w.write(2, 2);
        w.write(0, 6);
        w.write(0, 5);
        w.write_eg(0, 0);
        w.write_eg(5, 0);
        let bytes = w.finish();
        let mut r = BitReader::new(&bytes, "test");
        assert!(matches!(
            read_set(&mut r, 3, 8),
            Err(CodecError::Invalid { .. })
        ));
    }

    #[test]
    fn count_field_is_bounded_by_n_and_width() {
        assert_eq!(count_cap(1, 10), 2);
        assert_eq!(count_cap(64, 3), 3);
        assert_eq!(count_cap(64, 1 << 20), 65_536);
        assert_eq!(count_bits(8, 0), 0);
        assert_eq!(count_bits(8, 1), 0);
        assert_eq!(count_bits(8, 1000), 8);
        assert_eq!(count_bits(32, 1 << 20), 16);
        // cap = 3 in 2 bits: the value 3 (m = 4) is refused.
        let mut r = BitReader::new(&[0b11], "test");
        assert!(matches!(
            read_count(&mut r, 64, 3),
            Err(CodecError::Invalid { .. })
        ));
    }
}
