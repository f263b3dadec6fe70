//! The decomposition that proposes `dequant` (issue 29: narrow values in a wide dtype).
//!
//! A BF16, F16 or F32 tensor made by dequantizing FP8 (`(codes.float() * scales)` cast
//! to the dtype, one `f32` scale per row or per block) holds 8 bits of information a
//! weight plus its scales, yet its words look like any other floats of the dtype. This
//! module recovers codes and scales that recompute every word bit for bit
//! ([`crate::dsl::exec::dequantize`]), or gives up:
//!
//! - Gate: one scale must explain the first `min(128, cols)` words (they lie in one block
//!   under every tiling tried), for E4M3 or E5M2 codes. Ordinary weights fail within a
//!   few words.
//! - Tilings tried, fewest scales first: one scale for the tensor, 128 x 128 blocks, one
//!   per row, 1 x 128 blocks (clipped to the matrix).
//! - Per block: the largest magnitude's code is one of the top codes of a binade
//!   ([`TOP_CODES`]); each hypothesis gives an estimate of the scale, hence every word's
//!   code (the nearest code value to `word / scale`), and each word then bounds the
//!   scale to an interval (the reals that round to the word, divided by the code's
//!   value). A scale inside all of them is picked and checked on every word of the block
//!   with the decoder's own arithmetic; any mismatch rejects the hypothesis.
//!
//! Exactness is proved on the whole target before proposing (the last check is the
//! decoder's arithmetic on every word). Time is a few passes over the target when it is
//! dequantized, a few words per code format when it is not; memory one code per word.

use crate::dsl::narrow::{Code, Out};
use crate::dsl::Dequant;
use crate::tensor::{Dtype, WordBuf, Words};

/// Codes tried for a block's largest magnitude: the top of each format's largest binade
/// (scales from `amax / max` put the largest word at the top code; power-of-two scales
/// anywhere in the top binade).
pub const TOP_CODES: usize = 8;

/// Shortest tensor proposed for.
pub const MIN_WORDS: usize = 64;

/// Codes and scales recomputing a target: `dequant` with these children.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Found {
    /// The node's parameters.
    pub d: Dequant,
    /// `u8[n]`: the codes.
    pub codes: Words,
    /// `u32[blocks]`: the scales' `f32` bits.
    pub scales: Words,
}

/// The output format of a dtype's words, for the float dtypes `dequant` writes.
pub fn out_of(dtype: Dtype) -> Option<Out> {
    match dtype {
        Dtype::BF16 => Some(Out::Bf16),
        Dtype::F16 => Some(Out::F16),
        Dtype::F32 => Some(Out::F32),
        _ => None,
    }
}

/// Codes and scales that recompute `t` exactly, a tensor of `dtype` viewed as `rows`
/// rows (1 for a vector), when some tiling and code format does (see the module doc).
pub fn propose(t: &Words, dtype: Dtype, rows: u64) -> Option<Found> {
    let (out, cols, formats) = gate(t, dtype, rows)?;
    let vals: Vec<f32> = match t.buf() {
        WordBuf::U16(v) => v.iter().map(|&w| out.value(u64::from(w))).collect(),
        WordBuf::U32(v) => v.iter().map(|&w| out.value(u64::from(w))).collect(),
        _ => return None,
    };
    if vals.iter().any(|v| !v.is_finite()) {
        return None;
    }
    let mut shapes = vec![
        (rows, cols),
        (rows.min(128), cols.min(128)),
        (1, cols),
        (1, cols.min(128)),
    ];
    shapes.sort_by_key(|&(br, bc)| (rows.div_ceil(br) * cols.div_ceil(bc), br));
    shapes.dedup();
    for (code, fmt) in &formats {
        for &(br, bc) in &shapes {
            let d = Dequant {
                code: *code,
                out,
                cols,
                block_rows: br,
                block_cols: bc,
            };
            if let Some(found) = fit(&vals, t, d, fmt) {
                return Some(found);
            }
        }
    }
    None
}

/// What [`gate`] passes on: the output format, the columns, the code formats.
type Gated = (Out, u64, Vec<(Code, Format)>);

/// The gate of [`propose`]: the output format, the columns, and the code formats under
/// which one scale explains the first `min(128, cols)` words of row 0; `None` when no
/// format does (ordinary weights, within a few words).
fn gate(t: &Words, dtype: Dtype, rows: u64) -> Option<Gated> {
    let out = out_of(dtype)?;
    let n = t.len() as u64;
    if t.width() != out.width() || t.len() < MIN_WORDS || rows == 0 || !n.is_multiple_of(rows) {
        return None;
    }
    let cols = n / rows;
    let head = cols.min(128) as usize;
    let head_vals: Vec<f32> = (0..head).map(|i| out.value(t.get(i))).collect();
    let idx: Vec<usize> = (0..head).collect();
    let formats: Vec<(Code, Format)> = [Code::E4M3, Code::E5M2]
        .into_iter()
        .map(|c| (c, Format::new(c)))
        .filter(|(_, fmt)| {
            head_vals.iter().all(|v| v.is_finite())
                && fit_block(&head_vals, t, &idx, fmt, out).is_some()
        })
        .collect();
    (!formats.is_empty()).then_some((out, cols, formats))
}

/// Whether `t` (a tensor of `dtype` viewed as `rows` rows) passes the cheap gates of
/// [`propose_cast`] and [`propose`]: its first words are all values of a 16-bit code
/// format, or one scale explains its first words as FP8 codes. `false` says neither
/// would propose anything; `true` that the search should look (the default level
/// searches such a tensor rather than take the fixed layout). A few words' work for
/// ordinary weights.
pub fn may_dequantize(t: &Words, dtype: Dtype, rows: u64) -> bool {
    cast_head(t, dtype).is_some() || gate(t, dtype, rows).is_some()
}

/// The 16-bit code format whose values the first [`CAST_HEAD`] words of `t` (an F32
/// tensor) all are, BF16 first ([`propose_cast`]'s gate).
fn cast_head(t: &Words, dtype: Dtype) -> Option<Code> {
    let WordBuf::U32(v) = t.buf() else {
        return None;
    };
    if dtype != Dtype::F32 || t.width() != 32 || t.len() < MIN_WORDS {
        return None;
    }
    let head = &v[..v.len().min(CAST_HEAD)];
    [Code::BF16, Code::F16]
        .into_iter()
        .find(|&code| head.iter().all(|&w| to_code(code, w).is_some()))
}

/// The code of format `code` (BF16 or F16) whose value cast to F32 is `w` bit for bit.
fn to_code(code: Code, w: u32) -> Option<u16> {
    let exact = |c: u16| Out::F32.round(code.value(c)) == u64::from(w);
    let c = match code {
        Code::BF16 if w & 0xFFFF == 0 => (w >> 16) as u16,
        Code::BF16 => return None,
        _ => crate::dsl::narrow::f32_to_f16(w),
    };
    exact(c).then_some(c)
}

/// Words of an F32 target checked before the whole target, for a cast: ordinary F32
/// weights fail on their first word or two.
pub const CAST_HEAD: usize = 128;

/// The 16-bit codes whose cast to F32 ([`Dequant::cast`]: no scales) recomputes `t`, an
/// F32 tensor, exactly: BF16 codes when every word is a bfloat16 value, else F16 codes
/// when every word is a binary16 value, else `None`. A word is a code's value when the
/// decoder's arithmetic, `Out::F32.round(code.value(c))`, gives it back bit for bit, so
/// a NaN is one only as the canonical quiet NaN. BF16 first: its test is a mask (the low
/// 16 bits zero), and a word that is both loses no code bits in BF16.
///
/// Time: [`CAST_HEAD`] words per format for a target that is neither, one pass over the
/// target per format otherwise; memory: the codes, 2 bytes a word.
pub fn propose_cast(t: &Words, dtype: Dtype) -> Option<(Code, Words)> {
    let WordBuf::U32(v) = t.buf() else {
        return None;
    };
    let first = cast_head(t, dtype)?;
    // BF16 first; F16 when a word is no BF16 value.
    [Code::BF16, Code::F16]
        .into_iter()
        .skip_while(|&c| c != first)
        .find_map(|code| {
            let codes: Vec<u16> = v.iter().map(|&w| to_code(code, w)).collect::<Option<_>>()?;
            Some((code, Words::from_buf(16, WordBuf::U16(codes))?))
        })
}

/// A code format's finite non-negative values, ascending by code (codes `0..len`), and
/// its layout for rounding to the nearest code.
struct Format {
    table: [f32; 256],
    mags: Vec<f32>,
    /// Mantissa bits and exponent bias.
    mant: u32,
    bias: i32,
}

impl Format {
    fn new(code: Code) -> Format {
        let table = code.table();
        let mags = table[..128]
            .iter()
            .copied()
            .take_while(|v| v.is_finite())
            .collect();
        let (mant, bias) = match code {
            Code::E4M3 => (3, 7),
            Code::E5M2 => (2, 15),
            Code::F16 | Code::BF16 => unreachable!("fitted scales are for 8-bit codes"),
        };
        Format {
            table,
            mags,
            mant,
            bias,
        }
    }

    /// The code (below 128) whose value is nearest `r >= 0` (a tie may go either way;
    /// the caller checks every code), saturating at the largest finite one: `r`'s
    /// mantissa rounded to the format's bits, by integer arithmetic on its `f32` bits.
    fn nearest(&self, r: f32) -> u8 {
        let last = self.mags.len() as u32 - 1;
        if r.is_nan() || r <= 0.0 {
            return 0;
        }
        let (mant, bias) = (self.mant, self.bias);
        let b = r.to_bits();
        let exp = ((b >> 23) & 0xff) as i32 - 127;
        let code = if exp < 1 - bias {
            // Subnormal codes: multiples of 2^(1 - bias - mant).
            (r * ((bias - 1 + mant as i32) as f32).exp2()).round() as u32
        } else if exp > bias + 1 {
            last
        } else {
            let man = b & 0x7f_ffff;
            let base = (((exp + bias) as u32) << mant) | (man >> (23 - mant));
            base + ((man >> (22 - mant)) & 1)
        };
        code.min(last) as u8
    }
}

/// Every block of `d`'s tiling fitted, or `None` at the first that cannot be.
fn fit(vals: &[f32], t: &Words, d: Dequant, fmt: &Format) -> Option<Found> {
    let n = vals.len();
    let cols = d.cols as usize;
    let rows = n / cols;
    let (br, bc) = (d.block_rows as usize, d.block_cols as usize);
    let mut codes = vec![0u8; n];
    let mut scales = Vec::new();
    let mut idx = Vec::with_capacity(br * bc);
    for r0 in (0..rows).step_by(br) {
        for c0 in (0..cols).step_by(bc) {
            idx.clear();
            for r in r0..(r0 + br).min(rows) {
                idx.extend(r * cols + c0..r * cols + (c0 + bc).min(cols));
            }
            let (scale, block_codes) = fit_block(vals, t, &idx, fmt, d.out)?;
            for (&i, c) in idx.iter().zip(block_codes) {
                codes[i] = c;
            }
            scales.push(u64::from(scale));
        }
    }
    Some(Found {
        d,
        codes: Words::from_buf(8, WordBuf::U8(codes)).expect("8-bit codes"),
        scales: Words::from_u64s(32, &scales),
    })
}

/// A scale (its `f32` bits) and codes, in `idx` order, recomputing the words `idx` of
/// `t` (values `vals`) exactly, or `None`.
fn fit_block(
    vals: &[f32],
    t: &Words,
    idx: &[usize],
    fmt: &Format,
    out: Out,
) -> Option<(u32, Vec<u8>)> {
    let &a = idx
        .iter()
        .max_by(|&&i, &&j| vals[i].abs().total_cmp(&vals[j].abs()))?;
    let amax = vals[a].abs();
    if amax == 0.0 {
        // All zeros: any scale; 1.0, and the codes of +0 and -0.
        let codes = idx
            .iter()
            .map(|&i| if vals[i].is_sign_negative() { 0x80 } else { 0 })
            .collect();
        return Some((1f32.to_bits(), codes));
    }
    let (alo, ahi) = interval(out, amax);
    let top = fmt.mags.len();
    'hypothesis: for q0 in (top.saturating_sub(TOP_CODES)..top).rev() {
        let q0v = f64::from(fmt.mags[q0]);
        if q0v == 0.0 {
            continue;
        }
        let (mut lo, mut hi) = (alo / q0v, ahi / q0v);
        let est = (f64::from(amax) / q0v) as f32;
        let mut codes = Vec::with_capacity(idx.len());
        for &i in idx {
            let v = vals[i];
            let sign = if v.is_sign_negative() { 0x80 } else { 0 };
            if v == 0.0 {
                codes.push(sign);
                continue;
            }
            let q = fmt.nearest(v.abs() / est);
            let qv = f64::from(fmt.mags[q as usize]);
            if qv == 0.0 {
                continue 'hypothesis;
            }
            let (vlo, vhi) = interval(out, v.abs());
            lo = lo.max(vlo / qv);
            hi = hi.min(vhi / qv);
            if lo > hi {
                continue 'hypothesis;
            }
            codes.push(q | sign);
        }
        // Candidate scales inside the interval, checked with the decoder's arithmetic.
        let mid = (lo + hi) / 2.0;
        for s in [
            mid,
            lo + (hi - lo) / 4.0,
            lo + 3.0 * (hi - lo) / 4.0,
            lo,
            hi,
        ] {
            let s = s as f32;
            if !(s.is_finite() && s > 0.0) {
                continue;
            }
            let exact = idx
                .iter()
                .zip(&codes)
                .all(|(&i, &c)| out.round(fmt.table[c as usize] * s) == t.get(i));
            if exact {
                return Some((s.to_bits(), codes));
            }
        }
    }
    None
}

/// The reals that round to the magnitude `v > 0` (a finite word of `out`), as a closed
/// interval in `f64`: half way to each neighbour (ties are settled by the final check).
fn interval(out: Out, v: f32) -> (f64, f64) {
    let w = out.round(v);
    let val = |w: u64| f64::from(out.value(w));
    let here = val(w);
    let below = if w == 0 { 0.0 } else { val(w - 1) };
    let next = out.value(w + 1);
    let above = if next.is_finite() {
        f64::from(next)
    } else {
        2.0 * here - below
    };
    ((below + here) / 2.0, (here + above) / 2.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dsl::exec::dequantize;

    /// A worked example: 4 x 128 BF16 words dequantized from E4M3 codes with one scale
    /// per row are found with per-row blocks, and recompute exactly.
    #[test]
    fn per_row_scales_are_found_and_recompute_the_words() {
        let (rows, cols) = (4u64, 128u64);
        let scales: Vec<f32> = vec![0.0123, 0.5, 3.75e-3, 1.9e-5];
        let table = Code::E4M3.table();
        let code_of = |i: u64| ((i * 2_654_435_761) >> 7) as u8 & 0xFE; // no NaN codes
        let t = Words::from_fn(16, (rows * cols) as usize, |i| {
            let s = scales[i / cols as usize];
            Out::Bf16.round(table[code_of(i as u64) as usize] * s)
        });
        let f = propose(&t, Dtype::BF16, rows).expect("dequantized words are found");
        assert_eq!(
            (f.d.block_rows, f.d.block_cols, f.d.code),
            (1, 128, Code::E4M3)
        );
        assert_eq!(f.scales.len(), 4);
        assert_eq!(dequantize(&f.d, &f.codes, Some(&f.scales)), t);
    }

    /// Ordinary floats are not proposed: BF16 words of a smooth function.
    #[test]
    fn ordinary_floats_are_not_dequantized() {
        let t = Words::from_fn(16, 4096, |i| {
            Out::Bf16.round(((i as f32) * 0.37).sin() * 0.02)
        });
        assert!(propose(&t, Dtype::BF16, 32).is_none());
        // Integers and too-short tensors never are.
        assert!(propose(&Words::filled(16, 0x3F80, 4096), Dtype::I16, 1).is_none());
        assert!(propose(&Words::filled(16, 0x3F80, 10), Dtype::BF16, 1).is_none());
    }

    /// F32 words that are all F16 values are proposed as the cast of their F16 codes,
    /// all BF16 values as BF16 codes; a word off the format, or a NaN other than the
    /// canonical one, rules the cast out; only F32 targets are cast.
    #[test]
    fn f32_holding_narrow_values_is_proposed_as_a_cast() {
        use crate::dsl::narrow::{f16_to_f32, f32_to_f16};
        let halves = |i: usize| 0x3000 + ((i * 2_654_435_761) >> 9) as u16 % 0x1800;
        let t = Words::from_fn(32, 1000, |i| u64::from(f16_to_f32(halves(i)).to_bits()));
        let (code, codes) = propose_cast(&t, Dtype::F32).expect("F16 values");
        assert_eq!(code, Code::F16);
        let d = Dequant::cast(code, Out::F32);
        assert_eq!(dequantize(&d, &codes, None), t);
        assert!(codes
            .iter()
            .enumerate()
            .all(|(i, c)| c == u64::from(halves(i))));
        // BF16 values (the low halves zero) are BF16 codes, also when they are F16 values.
        let b = Words::from_fn(32, 1000, |i| u64::from(halves(i) & 0xFF80) << 16);
        let (code, codes) = propose_cast(&b, Dtype::F32).expect("BF16 values");
        assert_eq!(code, Code::BF16);
        assert_eq!(dequantize(&Dequant::cast(code, Out::F32), &codes, None), b);
        // One word past F16's precision, at the end (after the head check).
        let mut w = t.to_u64s();
        w[999] |= 1;
        assert!(propose_cast(&Words::from_u64s(32, &w), Dtype::F32).is_none());
        // The canonical NaN is a code's value, a NaN with another payload is not.
        w[999] = 0x7FC0_0000;
        assert!(propose_cast(&Words::from_u64s(32, &w), Dtype::F32).is_some());
        w[999] = 0x7FC0_2000;
        assert_eq!(f32_to_f16(0x7FC0_2000), 0x7E01);
        assert!(propose_cast(&Words::from_u64s(32, &w), Dtype::F32).is_none());
        // Ordinary F32 words, other dtypes, short tensors.
        let f = Words::from_fn(32, 4096, |i| u64::from(((i as f32) * 0.37).sin().to_bits()));
        assert!(propose_cast(&f, Dtype::F32).is_none());
        assert!(propose_cast(&t, Dtype::I32).is_none());
        assert!(propose_cast(&t.slice(0, 63), Dtype::F32).is_none());
    }

    #[test]
    fn nearest_code_values() {
        let f = Format::new(Code::E4M3);
        assert_eq!(f.mags.len(), 127);
        assert_eq!(f.nearest(448.0), 0x7E);
        assert_eq!(f.nearest(1000.0), 0x7E);
        assert_eq!(f.nearest(1.0), 0x38);
        assert_eq!(f.nearest(1.06), 0x38);
        assert_eq!(f.nearest(1.07), 0x39);
        assert_eq!(f.nearest(0.0), 0);
        // Against the nearest by search, on both formats, off the ties.
        for code in [Code::E4M3, Code::E5M2] {
            let f = Format::new(code);
            // Positive finite f32 from 2^-31 to 2^31 (past both formats' saturation).
            for k in 0..200_000u32 {
                let r = f32::from_bits(0x3000_0000 + k * 0x147B) * 1.000_1;
                let by_search = (0..f.mags.len())
                    .min_by(|&a, &b| (f.mags[a] - r).abs().total_cmp(&(f.mags[b] - r).abs()))
                    .unwrap();
                let got = f.nearest(r) as usize;
                let (dg, ds) = ((f.mags[got] - r).abs(), (f.mags[by_search] - r).abs());
                assert!(dg <= ds, "{code:?} {r}: {got} vs {by_search}");
            }
        }
    }
}
