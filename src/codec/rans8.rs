//! Codec `rans8` (program wire version 6): static order-0 rANS over at most 256 symbols
//! at a precision of at most 12 bits, with 32 or 64 interleaved 32-bit states and 16-bit
//! renormalization, so that a decoding step is one lookup of one 32-bit entry in a table
//! of at most 16 KB (its symbol, frequency and bias packed together), with 64 states on
//! long streams so that the latency of one state's lookup is hidden behind the others: the layout of the
//! fastest public rANS decoders (`../shared/ENTROPY.md`: hypersonic-rANS, htscodecs'
//! rANS 32x16). Duda, "Asymmetric numeral systems" (2013); Giesen, "Interleaved entropy
//! coders" (2014).
//!
//! Words that are not among the coded symbols (a stream of more than 256 distinct words,
//! or words so rare that a slot of the 4,096 would overpay them) are coded as one
//! *escape* symbol, and their values follow as a literal of their own (any codec but
//! this one): a token plus its value, as JPEG XL's hybrid integers and pcodec's bins
//! code wide values. Two fields of a word coded as one symbol (a float's exponent with
//! the top bits of its mantissa) are so coded at their joint entropy, which is the
//! exponent's entropy plus that of the mantissa bits given the exponent: the field
//! context-coded by the exponent, at one lookup a word.
//!
//! # Body
//!
//! A table as an LSB-first bit stream ([`super::bitio`]) zero-padded to a whole byte,
//! then the escaped words' literal, then the payload:
//!
//! 1. 1 bit: whether an escape symbol is coded; 1 bit: the number of states `K`, 32 (0)
//!    or 64 (1);
//! 2. `m - 1` in 8 bits: the number `m` of coded words (1..=256, at most 255 with an
//!    escape; at most `2^b`), then their sorted set ([`super::table`]'s symbol set);
//!    the escape, when there is one, is symbol `m`, after them;
//! 3. with an escape: the number `e >= 1` of escaped words minus one, as an order-8
//!    Exp-Golomb code;
//! 4. with `k = m + escape >= 2` symbols: the precision `s - 1` in 4 bits (`s <= 12`,
//!    `2^s >= k`), then the `k` frequencies, each at least 1 and summing to `2^s`, written
//!    as the codec `rans` writes its frequencies ([`super::rans`], table item 3);
//! 5. zero bits to the byte boundary;
//! 6. with an escape: the escaped words, in stream order, as a literal of `e` words of `b`
//!    bits: its codec id in one byte (raw, bit packing, Huffman, `rans` or `rans32`), its
//!    body length in 4 bytes (`u32` little-endian), its body;
//! 7. with `k >= 2`: the payload: `K` states as 4-byte little-endian integers, each in
//!    `[2^16, 2^32)`, then 16-bit little-endian renormalization words. Word `i` is
//!    decoded by state `i mod K` in that order: slot `x mod 2^s`, the symbol `y` whose
//!    cumulative range `[c_y, c_y + f_y)` holds it, `x = f_y (x >> s) + slot - c_y`,
//!    then if `x < 2^16`, `x = x << 16 | next word`. After the last word every state
//!    must be `2^16` and every payload word read. A word decoded as the escape is the
//!    next escaped word (all `e` must be taken); any other is the coded word of its
//!    symbol. With `k = 1` every word is the one coded word.
//!
//! Why one file of some 1,100 lines (its SIMD kernels are in `rans8/simd.rs`, its tests
//! in `rans8/tests.rs`): the body layout above, the plan (which words are coded and
//! which escaped, the precision, the frequencies), the encoders and the parser and
//! decoder all follow one table layout and one escape rule, and the encoder's bytes must
//! be exactly what the decoder reads (or refuses); they are kept side by side so the
//! layout and both directions are read, and changed, together.

use super::bitio::{BitReader, BitWriter};
use super::rans::{
    clamp_bits, entropy_bits_of, least_table_bits, log2_table, model_bits, plan_freqs, quantize,
    read_freqs, write_freqs, FreqMode,
};
use super::table::{check_width, plan_set, read_set, write_set, SetPlan};
use super::{CodecError, CodecId, Stream};
use crate::tensor::{container_bytes, mask, WordBuf, Words};

mod simd;

const NAME: &str = "rans8";

/// Most interleaved states. With 32 (two AVX-512 vectors) the decoder waits on its
/// gathers: 0.47 ns a word on minilm's FP8 bytes against 0.27 with 64 (docs/bench.md).
pub const LANES: usize = 64;

/// Streams of at least this many words are coded with 64 states, shorter ones with 32:
/// the 128 bytes more of states are under 0.06% of such a stream at 6 bits a word (on a
/// group of fracast0-int8's tensors, 80 Ki words, they cost more than the codec saved).
pub const WIDE_WORDS: usize = 1 << 18;

/// The number of states of a stream of `n` words.
pub fn lanes_for(n: usize) -> usize {
    if n >= WIDE_WORDS {
        64
    } else {
        32
    }
}

/// Highest precision in bits (`M = 2^12` slots, a 16 KB decoding table).
pub const MAX_SCALE_BITS: u32 = 12;

/// Most symbols, the escape included.
pub const MAX_SYMBOLS: usize = 256;

/// Words of a stream, at least, whose table is planned from a sample: a stream of `n`
/// words of at least twice this many is counted in every `s`-th block of
/// [`SAMPLE_BLOCK`] words only (`s` the most that leaves this many, at most
/// [`MAX_SAMPLE_EVERY`]: [`sample_every`]) and its plan is [`Plan::from_sample`]'s, by
/// every encoder of the codec ([`Plan::for_stream`]). Counting is bound by one increment
/// a word (about 0.3 ns: a fifth of the fast level's time); a model from 256 Ki words
/// costs about `(k - 1) / 2^19 / ln 2` bits a word over the stream's own (`k` distinct
/// values: 0.006 bits at 2,048).
pub const SAMPLE_WORDS: usize = 1 << 18;

/// Words a sample takes at a time: evenly spaced runs, so that counting and reading
/// stay sequential.
pub const SAMPLE_BLOCK: usize = 512;

/// The sparsest sample: every fourth block.
pub const MAX_SAMPLE_EVERY: usize = 4;

/// Which blocks of [`SAMPLE_BLOCK`] words the table of a stream of `n` words is planned
/// from: every `s`-th, `s` returned (1: all of them, an exact plan).
pub fn sample_every(n: usize) -> usize {
    (n / SAMPLE_WORDS).clamp(1, MAX_SAMPLE_EVERY)
}

/// The histogram of the words of `stream` in every `every`-th block of
/// [`SAMPLE_BLOCK`] words, and how many words that is; `None` for an empty stream.
pub fn sample_histogram(stream: Stream<'_>, every: usize) -> Option<(Vec<(u64, u64)>, usize)> {
    let (words, shift, m) = stream.parts();
    let sample = match words.buf() {
        WordBuf::U8(v) if shift == 0 && m == 0xFF => {
            let mut s = Vec::with_capacity(v.len() / every + SAMPLE_BLOCK);
            for block in v.chunks(SAMPLE_BLOCK).step_by(every) {
                s.extend_from_slice(block);
            }
            Words::from_buf_trusted(8, WordBuf::U8(s))
        }
        _ => {
            // Fields gathered as 64-bit values a block at a time (a loop that
            // vectorizes), then narrowed to the stream's container in one pass.
            let mut s: Vec<u64> = Vec::with_capacity(words.len() / every + SAMPLE_BLOCK);
            crate::with_buf!(words.buf(), v => {
                for block in v.chunks(SAMPLE_BLOCK).step_by(every) {
                    #[allow(clippy::useless_conversion)]
                    s.extend(block.iter().map(|&x| (u64::from(x) >> shift) & m));
                }
            });
            Words::from_fn(stream.width(), s.len(), |i| s[i])
        }
    };
    let counted = sample.len();
    Some((crate::stats::histogram(&sample, usize::MAX)?, counted))
}

/// Lower bound of the normalized state interval `[L, 2^32)`.
const L: u32 = 1 << 16;

/// Bytes of the flushed states of `lanes` states.
fn state_bytes(lanes: usize) -> u64 {
    4 * lanes as u64
}

/// A decoding table entry: symbol in bits 0..8, `f` in bits 8..20, `slot - c` in bits
/// 20..32. A table has at least two symbols of frequency at least 1, so `f < 2^s <=
/// 2^12` fits its 12 bits.
#[inline(always)]
fn entry(sym: u32, freq: u32, bias: u32) -> u32 {
    debug_assert!(freq < 1 << 12 && bias < 1 << 12 && sym < 256);
    sym | freq << 8 | bias << 20
}

/// A `rans8` encoding of one stream planned from its histogram: everything but the
/// payload and the escaped words' literal.
#[derive(Clone, Debug)]
pub struct Plan {
    /// The coded words, ascending.
    syms: Vec<u64>,
    /// Number of escaped words (0: no escape symbol).
    escaped: u64,
    /// Frequencies of the coded words, then of the escape.
    freqs: Vec<u32>,
    scale: u32,
    set: SetPlan,
    freq_mode: FreqMode,
    /// Exact bits of the table before the byte padding.
    table_bits: u64,
    /// Ideal payload size `sum c_i log2(2^s / f_i)` in bits under the quantized model.
    ideal_bits: f64,
    /// An estimate in bytes of the escaped words' literal (0 without escapes).
    escape_estimate: u64,
    n: usize,
    width: u32,
    /// Planned from a sample ([`Plan::from_sample`]): an escape symbol in any case,
    /// `escaped` an estimate, and the words escaped (those outside the coded set; at
    /// least one) counted when the stream is encoded.
    open: bool,
}

/// An estimate in bytes of a literal of the escaped words `hist` (their values and
/// counts) of `width` bits: bit packing, or an order-0 code with a table of about two
/// bytes a word.
fn escape_estimate(hist: &[(u64, u64)], width: u32) -> u64 {
    let e: u64 = hist.iter().map(|&(_, c)| c).sum();
    if e == 0 {
        return 0;
    }
    let max = hist.iter().map(|&(v, _)| v).max().unwrap_or(0);
    let packed = 1 + (e * u64::from(crate::tensor::bits_needed(max).max(1))).div_ceil(8);
    let h: f64 = hist
        .iter()
        .map(|&(_, c)| {
            let p = c as f64 / e as f64;
            -(c as f64) * p.log2()
        })
        .sum();
    let table = 4 + 2 * hist.len() as u64 + u64::from(width) / 8;
    5 + packed.min(table + (h / 8.0).ceil() as u64)
}

impl Plan {
    /// Plans the coder for a stream of `n` words of `width` bits (1..=64) with histogram
    /// `hist` (distinct words ascending with their counts, summing to `n`): which words
    /// to code and which to escape (the plan of least estimated size among a few
    /// thresholds of rarity), the precision and the frequencies. `None` for an empty
    /// stream.
    pub fn new(hist: &[(u64, u64)], width: u32, n: usize) -> Option<Plan> {
        Plan::new_at_most(hist, width, n, u64::MAX)
    }

    /// The plan every encoder of the codec gives `stream` (histogram `hist`): from a
    /// sample ([`sample_histogram`], [`Plan::from_sample`]) where [`sample_every`] of its
    /// length is above 1, else [`Plan::new`]'s; so the same words are coded the same
    /// way by the fast level's layout, the search's literals and a program rebuilt from
    /// its text. `None` for an empty stream.
    pub fn for_stream(stream: Stream<'_>, hist: &[(u64, u64)]) -> Option<Plan> {
        let (width, n) = (stream.width(), stream.len());
        match sample_every(n) {
            1 => Plan::new(hist, width, n),
            every => {
                let (sample, counted) = sample_histogram(stream, every)?;
                Plan::from_counts(&sample, counted, width, n, u64::MAX)
            }
        }
    }

    /// The plan of a stream of `n` words of `width` bits from `hist`, the histogram of
    /// `counted` of its words (those of the blocks [`sample_every`] keeps): with all `n`
    /// counted [`Plan::new_at_most`]'s, else [`Plan::from_sample`]'s; what
    /// [`Plan::for_stream`] makes, for a caller that has counted the sample itself.
    pub fn from_counts(
        hist: &[(u64, u64)],
        counted: usize,
        width: u32,
        n: usize,
        at_most: u64,
    ) -> Option<Plan> {
        match counted == n {
            true => Plan::new_at_most(hist, width, n, at_most),
            false => Plan::from_sample(hist, counted, width, n, at_most),
        }
    }

    /// [`Plan::new`] when only a plan whose [`Plan::estimate_bytes`] is at most
    /// `at_most` is of use: `None` also when no plan comes under it. A coded set whose
    /// lower bound (its least table, the escaped words' estimate, the states and the
    /// entropy of its counts) is above `at_most`, or not below the best plan so far, is
    /// not planned; whatever `at_most`, a plan it returns is the plan [`Plan::new`]
    /// returns.
    pub fn new_at_most(hist: &[(u64, u64)], width: u32, n: usize, at_most: u64) -> Option<Plan> {
        Plan::of_sets(hist, width, n, at_most, false)
    }

    /// A plan for a stream of `n` words of `width` bits from the histogram `sample` of
    /// `sample_n` of its words (distinct words ascending with their counts), whose
    /// [`Plan::estimate_bytes`] is at most `at_most` (`None` when there is none, or the
    /// sample is empty): [`Plan::new_at_most`] of the sample's counts scaled to `n`,
    /// with an escape symbol whatever the sample shows. Words the coded set lacks are
    /// escaped when the stream is encoded ([`Plan::encode`] counts them; when there are
    /// none it escapes the first word, so that the escape the table declares is used).
    /// For a stream of at least `MAX_SYMBOLS` distinct words the sample's order-0
    /// model costs about `(k - 1) / (2 sample_n ln 2)` bits a word over the stream's
    /// own (`k` the distinct words: the expected Kullback-Leibler divergence of a
    /// maximum-likelihood estimate), plus the escape's slot.
    ///
    /// # Panics
    /// When `sample_n` is 0 or above `n`.
    pub fn from_sample(
        sample: &[(u64, u64)],
        sample_n: usize,
        width: u32,
        n: usize,
        at_most: u64,
    ) -> Option<Plan> {
        assert!(sample_n >= 1 && sample_n <= n, "a sample of the stream");
        let scaled: Vec<(u64, u64)> = sample
            .iter()
            .map(|&(v, c)| {
                let c = u128::from(c) * n as u128 / sample_n as u128;
                (v, (c as u64).max(1))
            })
            .collect();
        Plan::of_sets(&scaled, width, n, at_most, true)
    }

    /// [`Plan::new_at_most`]'s search over the coded sets; `open` for
    /// [`Plan::from_sample`] (an escape in every set; the counts of `hist` may then sum
    /// to more or less than `n`).
    fn of_sets(
        hist: &[(u64, u64)],
        width: u32,
        n: usize,
        at_most: u64,
        open: bool,
    ) -> Option<Plan> {
        if n == 0 || hist.is_empty() {
            return None;
        }
        // Candidate coded sets: every word (at most 256 of them), or the words whose
        // count earns at least `t` of 4,096 slots (at most 255, the most frequent),
        // the rest escaped.
        let mut by_count: Vec<usize> = (0..hist.len()).collect();
        // Most frequent first, ties by value: a total order, so the unstable sort gives
        // the stable sort's order.
        by_count.sort_unstable_by_key(|&i| (std::cmp::Reverse(hist[i].1), i));
        let mut best: Option<Plan> = None;
        let mut considered = false;
        let consider = |best: &mut Option<Plan>, keep: &[usize]| {
            // A plan replaces the best only when smaller.
            let limit = match best {
                Some(b) => match b.estimate_bytes().checked_sub(1) {
                    Some(l) => l.min(at_most),
                    None => return,
                },
                None => at_most,
            };
            if let Some(plan) = Plan::with_coded(hist, keep, width, n, limit, open) {
                if best
                    .as_ref()
                    .is_none_or(|b| plan.estimate_bytes() < b.estimate_bytes())
                {
                    *best = Some(plan);
                }
            }
        };
        if hist.len() <= MAX_SYMBOLS - usize::from(open) {
            considered = true;
            consider(&mut best, &by_count);
        }
        let n64 = n as u64;
        // Each set is a prefix of `by_count`: one of the same length is the same set,
        // planned already.
        let mut planned = 0;
        for t in [1u64, 2, 4] {
            let kept = by_count
                .iter()
                .take(MAX_SYMBOLS - 1)
                .take_while(|&&i| hist[i].1 << MAX_SCALE_BITS >= t * n64)
                .count();
            if kept == 0 || (kept == hist.len() && !open) || kept == planned {
                continue;
            }
            planned = kept;
            considered = true;
            consider(&mut best, &by_count[..kept]);
        }
        if !considered {
            // Every word is rare (or there are more than 256 and none earns a slot):
            // code the most frequent ones.
            let keep: Vec<usize> = by_count.iter().copied().take(MAX_SYMBOLS - 1).collect();
            consider(&mut best, &keep);
        }
        best.filter(|b| b.estimate_bytes() <= at_most)
    }

    /// The plan that codes the words `hist[i]` for `i` in `keep` and escapes the rest;
    /// `None`, without planning its precision and frequencies, when a bound shows that
    /// its [`Plan::estimate_bytes`] would be above `limit`.
    fn with_coded(
        hist: &[(u64, u64)],
        keep: &[usize],
        width: u32,
        n: usize,
        limit: u64,
        open: bool,
    ) -> Option<Plan> {
        // The kept words in `hist`'s (ascending) order, without sorting `keep`.
        let mut is_kept = vec![false; hist.len()];
        for &i in keep {
            is_kept[i] = true;
        }
        let mut syms: Vec<u64> = Vec::with_capacity(keep.len());
        let mut counts: Vec<u64> = Vec::with_capacity(keep.len() + 1);
        let mut escape_hist: Vec<(u64, u64)> = Vec::new();
        for (&(v, c), &k) in hist.iter().zip(&is_kept) {
            if k {
                syms.push(v);
                counts.push(c);
            } else {
                escape_hist.push((v, c));
            }
        }
        let kept: u64 = counts.iter().sum();
        // An open plan's escape stands for at least one word.
        let escaped = match open {
            true => (n as u64).saturating_sub(kept).max(1),
            false => n as u64 - kept,
        };
        if escaped > 0 {
            counts.push(escaped);
        }
        let set = plan_set(&syms, width);
        let mut head = 2 + 8 + set.bits;
        if escaped > 0 {
            head += super::bitio::eg_len(escaped - 1, 8);
        }
        let mut plan = Plan {
            syms,
            escaped,
            freqs: Vec::new(),
            scale: 0,
            set,
            freq_mode: FreqMode::Fixed(0),
            table_bits: head,
            ideal_bits: 0.0,
            escape_estimate: match escape_estimate(&escape_hist, width) {
                // One word escaped: the literal's codec, length and a raw word.
                0 if open => 5 + 1 + u64::from(width).div_ceil(8),
                e => e,
            },
            n,
            width,
            open,
        };
        let k = counts.len();
        if k <= 1 {
            return Some(plan);
        }
        let smin = crate::tensor::bits_needed(k as u64 - 1).max(1);
        let mut best = f64::INFINITY;
        // The least table ([`least_table_bits`]) with the entropy and the rare words'
        // clamp at a precision, or with its payload, is a bound under which the
        // precision cannot come. One that cannot beat the best so far is neither
        // quantized nor its table planned; the plan chosen is the same.
        let least_table_bytes = least_table_bits(head, k).div_ceil(8);
        let least_table = least_table_bytes as f64 * 8.0;
        let entropy = entropy_bits_of(&counts);
        let clamps: Vec<f64> = (smin..=MAX_SCALE_BITS)
            .map(|s| clamp_bits(&counts, s))
            .collect();
        // No precision's estimate comes under the least table, the escaped words'
        // estimate, the states and the entropy with the least clamp of the precisions.
        let clamp = clamps.iter().copied().fold(f64::INFINITY, f64::min);
        let bound = least_table_bytes
            + plan.escape_estimate
            + state_bytes(lanes_for(n))
            + ((entropy + clamp) / 8.0).ceil() as u64;
        if bound > limit {
            return None;
        }
        for scale in (smin..=MAX_SCALE_BITS).rev() {
            let clamp = clamps[(scale - smin) as usize];
            if best.is_finite() && least_table + entropy + clamp >= best {
                if scale + 2 <= plan.scale {
                    break;
                }
                continue;
            }
            let freqs = quantize(&counts, scale);
            let ideal = model_bits(&counts, &freqs, scale, log2_table());
            if least_table + ideal >= best {
                if scale + 2 <= plan.scale {
                    break;
                }
                continue;
            }
            let (mode, fbits) = plan_freqs(&freqs);
            let table_bits = head + 4 + fbits;
            let total = table_bits.div_ceil(8) as f64 * 8.0 + ideal;
            if total < best {
                best = total;
                plan.freqs = freqs;
                plan.scale = scale;
                plan.freq_mode = mode;
                plan.table_bits = table_bits;
                plan.ideal_bits = ideal;
            } else if scale + 2 <= plan.scale {
                break;
            }
        }
        Some(plan)
    }

    /// Symbols coded, the escape included.
    fn symbols(&self) -> usize {
        self.syms.len() + usize::from(self.escaped > 0)
    }

    /// Bytes of the table, padding included.
    pub fn table_bytes(&self) -> u64 {
        self.table_bits.div_ceil(8)
    }

    /// An estimate of the body's size in bytes: the table, the escaped words' literal
    /// estimated, the states and the ideal payload.
    pub fn estimate_bytes(&self) -> u64 {
        let mut b = self.table_bytes() + self.escape_estimate;
        if self.symbols() >= 2 {
            b += state_bytes(lanes_for(self.n)) + (self.ideal_bits / 8.0).ceil() as u64;
        }
        b
    }

    /// A size in bytes the body can never be smaller than: the table, the escaped
    /// words' literal header, the states, and the ideal payload less what each state's
    /// final renormalization can leave unwritten (16 bits).
    pub fn lower_bound(&self) -> u64 {
        let mut b = self.table_bytes();
        if self.escaped > 0 {
            b += 5;
        }
        if self.symbols() >= 2 {
            let lanes = lanes_for(self.n);
            let words = (self.ideal_bits / 16.0 - lanes as f64 - 1.0)
                .max(0.0)
                .floor() as u64;
            b += state_bytes(lanes) + 2 * words;
        }
        b
    }

    /// Appends the table, with `escaped` escaped words (the plan's count, or for an open
    /// plan the count the encoder found: at least one).
    fn write_table(&self, out: &mut Vec<u8>, escaped: u64) {
        debug_assert!((escaped > 0) == (self.escaped > 0));
        debug_assert!(self.open || escaped == self.escaped);
        let mut w = BitWriter::from_vec(std::mem::take(out));
        w.write(u64::from(escaped > 0), 1);
        w.write(u64::from(lanes_for(self.n) == 64), 1);
        w.write(self.syms.len() as u64 - 1, 8);
        write_set(&mut w, &self.syms, self.width, &self.set);
        if escaped > 0 {
            w.write_eg(escaped - 1, 8);
        }
        if self.symbols() >= 2 {
            w.write(u64::from(self.scale - 1), 4);
            write_freqs(&mut w, &self.freqs, self.freq_mode);
        }
        *out = w.finish();
    }

    /// Appends the body of `stream` (the stream the plan was made from) to `out`.
    pub fn encode(&self, stream: Stream<'_>, out: &mut Vec<u8>) {
        self.encode_with(stream, out, Some(simd::Isa::Best));
    }

    /// [`Plan::encode`], in one pass ([`Plan::encode_fused`]) with the SIMD build
    /// `fused` when there is one and it applies (the tests compare the two).
    fn encode_with(&self, stream: Stream<'_>, out: &mut Vec<u8>, fused: Option<simd::Isa>) {
        let (words, shift, m) = stream.parts();
        let index = Index::new(&self.syms, self.width);
        let esc = self.syms.len() as u8;
        if let (Some(isa), Index::Dense(t)) = (fused, &index) {
            if self.encode_fused(words, shift, t, out, isa) {
                return;
            }
        }
        // Each word's symbol, then the escaped words (a second pass, only when some are).
        let mut symbols: Vec<u8> = match (&index, words.buf()) {
            // Whole 8-bit words (FP8, int8): 64 a step by byte permutes.
            (Index::Dense(t), WordBuf::U8(v)) if shift == 0 && t.len() == 256 => {
                let table: &[u8; 256] = t[..].try_into().expect("256 entries");
                let mut s = vec![0u8; v.len()];
                if !simd::map_u8(v, table, &mut s) {
                    for (o, &x) in s.iter_mut().zip(v.iter()) {
                        *o = table[usize::from(x)];
                    }
                }
                s
            }
            (Index::Dense(t), _) => crate::with_buf!(words.buf(), v => v
                .iter()
                .map(|&x| {
                    // `with_buf!` instantiates this for u64 words too.
                    #[allow(clippy::useless_conversion)]
                    let x = (u64::from(x) >> shift) & m;
                    t[x as usize]
                })
                .collect()),
            (Index::Sorted(_), _) => crate::with_buf!(words.buf(), v => v
                .iter()
                .map(|&x| {
                    #[allow(clippy::useless_conversion)]
                    let x = (u64::from(x) >> shift) & m;
                    index.get(x).unwrap_or(esc)
                })
                .collect()),
        };
        let mut escaped = Vec::new();
        if self.escaped > 0 {
            crate::with_buf!(words.buf(), v => {
                for (&x, &s) in v.iter().zip(&symbols) {
                    if s == esc {
                        #[allow(clippy::useless_conversion)]
                        escaped.push((u64::from(x) >> shift) & m);
                    }
                }
            });
        }
        if self.open && escaped.is_empty() {
            // The table declares an escape: the first word is coded as one.
            symbols[0] = esc;
            escaped.push((words.get(0) >> shift) & m);
        }
        debug_assert!(self.open || escaped.len() as u64 == self.escaped);
        self.write_table(out, escaped.len() as u64);
        self.write_escaped(&escaped, out);
        if self.symbols() < 2 {
            return;
        }
        encode_payload(&symbols, &self.freqs, self.scale, lanes_for(self.n), out);
    }
}

impl Plan {
    /// The body's table, escaped words and payload in one pass over the words with the
    /// SIMD field encoder ([`simd::encode_fields`]), appended to `out`; `false`
    /// (nothing appended) where it does not apply: fewer than two
    /// symbols, a field wider than [`simd::FIELD_BITS`], 64-bit words, fewer words than
    /// states, or a processor without the features. The bytes are those of the
    /// two-pass path.
    fn encode_fused(
        &self,
        words: &Words,
        shift: u32,
        index: &[u8],
        out: &mut Vec<u8>,
        isa: simd::Isa,
    ) -> bool {
        let n = words.len();
        let lanes = lanes_for(n);
        let full = n / lanes * lanes;
        if self.symbols() < 2
            || self.width > simd::FIELD_BITS
            || full == 0
            || !simd::fields_available(isa)
        {
            return false;
        }
        // An open plan's first group of words is coded after the others, one by one, so
        // that its first word can be escaped when no other word was (the table
        // declares an escape). The SIMD pass starts at a multiple of `lanes`: its word
        // `j` is still coded by state `j mod lanes`.
        let first = if self.open { lanes } else { 0 };
        let simd_words = first..full;
        let fields = match words.buf() {
            WordBuf::U8(v) => simd::Container::U8(&v[simd_words]),
            WordBuf::U16(v) => simd::Container::U16(&v[simd_words]),
            WordBuf::U32(v) => simd::Container::U32(&v[simd_words]),
            WordBuf::U64(_) => return false,
        };
        // The escape's symbol, when there is one (with 256 coded words the number
        // `syms.len()` wraps to a coded word's).
        let esc = (self.escaped > 0).then_some(self.syms.len() as u8);
        let mut enc = PayloadEncoder::new(&self.freqs, self.scale, lanes, n);
        let coding = enc.simd_table(&self.freqs);
        let table = simd::FieldTable {
            // Without an escape symbol the index's other entries (the escape's number)
            // are fields no word has: `freq_cum` is 0 there.
            entries: index
                .iter()
                .map(|&s| match coding.freq_cum[usize::from(s)] {
                    0 => 0,
                    fc => (fc & 0xFFFF) | (fc >> 16) << 12 | u32::from(s) << 24,
                })
                .collect(),
            coding,
            escape: esc,
        };
        let m = mask(self.width);
        // Escaped words from the last to the first.
        let mut escaped: Vec<u32> = Vec::new();
        crate::with_buf!(words.buf(), v => {
            for (i, &x) in v.iter().enumerate().skip(full).rev() {
                #[allow(clippy::useless_conversion)]
                let f = (u64::from(x) >> shift) & m;
                let s = index[f as usize];
                if Some(s) == esc {
                    escaped.push(f as u32);
                }
                enc.step(i, s);
            }
        });
        let at = enc.at;
        if full > first {
            let Some(at) = simd::encode_fields(
                fields,
                shift,
                &table,
                self.scale,
                &mut enc.x[..lanes],
                &mut enc.words[..at],
                at,
                &mut escaped,
                isa,
            ) else {
                return false;
            };
            enc.at = at;
        }
        crate::with_buf!(words.buf(), v => {
            for (i, &x) in v[..first].iter().enumerate().rev() {
                #[allow(clippy::useless_conversion)]
                let f = (u64::from(x) >> shift) & m;
                let mut s = index[f as usize];
                if i == 0 && escaped.is_empty() {
                    s = self.syms.len() as u8;
                }
                if Some(s) == esc {
                    escaped.push(f as u32);
                }
                enc.step(i, s);
            }
        });
        debug_assert!(self.open || escaped.len() as u64 == self.escaped);
        escaped.reverse();
        let escaped: Vec<u64> = escaped.into_iter().map(u64::from).collect();
        self.write_table(out, escaped.len() as u64);
        self.write_escaped(&escaped, out);
        enc.finish(out);
        true
    }

    /// Appends the literal of the escaped words (nothing without them).
    fn write_escaped(&self, escaped: &[u64], out: &mut Vec<u8>) {
        if escaped.is_empty() {
            return;
        }
        let lit = Words::from_u64s(self.width, escaped);
        let e = super::select::encode_best_without_rans8(&lit);
        out.push(e.codec as u8);
        out.extend_from_slice(&(e.body.len() as u32).to_le_bytes());
        out.extend_from_slice(&e.body);
    }
}

/// Appends the `lanes` states and the renormalization words coding `symbols` (indices
/// into `freqs`, which sum to `2^scale`).
///
/// One pass over the symbols from the last to the first, word `i` by state `i mod
/// lanes`, without branches: the renormalization word is stored in any case and kept by
/// moving the write position, and the division of a state by a frequency is a multiply
/// by its reciprocal. The words are written from the end of a buffer towards its start,
/// so they come out in the order the decoder reads them.
fn encode_payload(symbols: &[u8], freqs: &[u32], scale: u32, lanes: usize, out: &mut Vec<u8>) {
    encode_payload_with(symbols, freqs, scale, lanes, out, Some(simd::Isa::Best));
}

/// [`encode_payload`], with the SIMD build `simd` when there is one and the processor
/// has it (the tests compare the builds with the scalar encoder).
fn encode_payload_with(
    symbols: &[u8],
    freqs: &[u32],
    scale: u32,
    lanes: usize,
    out: &mut Vec<u8>,
    simd: Option<simd::Isa>,
) {
    let n = symbols.len();
    let mut enc = PayloadEncoder::new(freqs, scale, lanes, n);
    // The last, partial group, then the whole groups: with SIMD where it applies.
    let full = n / lanes * lanes;
    for (i, &s) in symbols.iter().enumerate().skip(full).rev() {
        enc.step(i, s);
    }
    let simd = simd.filter(|_| full > 0).and_then(|isa| {
        let t = enc.simd_table(freqs);
        let at = enc.at;
        simd::encode(
            &symbols[..full],
            &t,
            scale,
            &mut enc.x[..lanes],
            &mut enc.words[..at],
            at,
            isa,
        )
    });
    match simd {
        Some(a) => enc.at = a,
        None => {
            for (i, &s) in symbols[..full].iter().enumerate().rev() {
                enc.step(i, s);
            }
        }
    }
    enc.finish(out);
}

/// One symbol's coding constants for the scalar encoder.
#[derive(Clone, Copy, Default)]
struct Step {
    /// `2^44 / f + 1`: `q = (x * rcp) >> 44` is `x / f` for every `x < 2^32` and `f <=
    /// 2^12` (the error `x (rcp - 2^44 / f) / 2^44` stays below `2^-12 <= 1 / f`).
    rcp: u64,
    /// A state at or above `f << (32 - s)` is renormalized before coding.
    bound: u32,
    /// `2^s - f`: the state becomes `x + c + q (2^s - f)`, that is `(q << s) + (x mod f)
    /// + c`.
    spread: u32,
    /// The cumulative frequency `c`.
    cum: u32,
}

thread_local! {
    /// The renormalization-word buffer of the thread's last payload, kept for the next
    /// ([`PayloadEncoder::new`]).
    static SCRATCH_WORDS: std::cell::Cell<Vec<u16>> = const { std::cell::Cell::new(Vec::new()) };
}

/// The longest buffer [`SCRATCH_WORDS`] keeps: a region's payload (2^20 words) and then
/// some, 4 MiB a thread.
const MAX_SCRATCH_WORDS: usize = 1 << 21;

/// The states and renormalization words of a payload being coded from its last word to
/// its first.
struct PayloadEncoder {
    table: [Step; MAX_SYMBOLS],
    x: [u32; LANES],
    lanes: usize,
    /// At most one word a symbol: `n + 1` slots leave the unconditional store in
    /// bounds. The words written are `words[at..]`.
    words: Vec<u16>,
    at: usize,
}

impl PayloadEncoder {
    fn new(freqs: &[u32], scale: u32, lanes: usize, n: usize) -> PayloadEncoder {
        debug_assert!(lanes.is_power_of_two() && lanes <= LANES);
        let mut table = [Step::default(); MAX_SYMBOLS];
        let mut cum = 0u32;
        for (t, &f) in table.iter_mut().zip(freqs) {
            *t = Step {
                rcp: (1u64 << 44) / u64::from(f) + 1,
                bound: f << (32 - scale),
                spread: (1 << scale) - f,
                cum,
            };
            cum += f;
        }
        // The thread's buffer of an earlier payload, when it is long enough: its
        // old words are never read (only `words[at..]`, written here, is), and a
        // fresh buffer was zeroed and faulted in again for every payload (6% of a
        // BF16 file's fast compression).
        let mut words = SCRATCH_WORDS.take();
        if words.len() < n + 1 {
            words = vec![0u16; n + 1];
        }
        PayloadEncoder {
            table,
            x: [L; LANES],
            lanes,
            at: words.len(),
            words,
        }
    }

    /// Codes symbol `s` as word `i` (by state `i mod lanes`).
    #[inline(always)]
    fn step(&mut self, i: usize, s: u8) {
        let t = self.table[usize::from(s)];
        let lane = &mut self.x[i & (self.lanes - 1)];
        let mut xs = *lane;
        let renorm = xs >= t.bound;
        self.words[self.at - 1] = xs as u16;
        self.at -= usize::from(renorm);
        xs = if renorm { xs >> 16 } else { xs };
        let q = ((u128::from(xs) * u128::from(t.rcp)) >> 44) as u32;
        *lane = xs + t.cum + q * t.spread;
    }

    /// The SIMD encoder's table of the symbols of `freqs`.
    fn simd_table(&self, freqs: &[u32]) -> simd::EncTable {
        let mut t = simd::EncTable {
            freq_cum: [0; 256],
            rcp: [1.0; 256],
        };
        for (k, st) in self.table.iter().enumerate().take(freqs.len()) {
            let f = freqs[k];
            t.freq_cum[k] = f | st.cum << 16;
            t.rcp[k] = 1.0 / f64::from(f);
        }
        t
    }

    /// Appends the states and the words written, and gives the buffer back to the
    /// thread ([`SCRATCH_WORDS`]).
    fn finish(self, out: &mut Vec<u8>) {
        let words = &self.words[self.at..];
        out.reserve(state_bytes(self.lanes) as usize + 2 * words.len());
        for s in &self.x[..self.lanes] {
            out.extend_from_slice(&s.to_le_bytes());
        }
        if cfg!(target_endian = "little") {
            out.extend_from_slice(bytemuck::cast_slice(words));
        } else {
            for w in words {
                out.extend_from_slice(&w.to_le_bytes());
            }
        }
        if self.words.len() <= MAX_SCRATCH_WORDS {
            SCRATCH_WORDS.set(self.words);
        }
    }
}

/// Word -> symbol index for the encoder: `None` for an escaped word.
enum Index {
    /// Over `0..2^width`: the symbol, or the escape symbol (`syms.len()`) for an escaped
    /// word.
    Dense(Vec<u8>),
    Sorted(Vec<u64>),
}

impl Index {
    fn new(syms: &[u64], width: u32) -> Index {
        if width <= 16 {
            // With 256 coded words there is no escape, and every entry is set.
            let mut t = vec![syms.len() as u8; 1 << width];
            for (i, &s) in syms.iter().enumerate() {
                t[s as usize] = i as u8;
            }
            Index::Dense(t)
        } else {
            Index::Sorted(syms.to_vec())
        }
    }

    /// The symbol of a word that is not escaped.
    #[inline]
    fn get(&self, v: u64) -> Option<u8> {
        match self {
            Index::Dense(t) => Some(t[v as usize]),
            Index::Sorted(s) => s.binary_search(&v).ok().map(|i| i as u8),
        }
    }
}

/// Appends the body of `words` in the plan of least estimated size; `None` for an empty
/// stream.
pub fn encode(words: &Words, out: &mut Vec<u8>) -> Option<()> {
    let hist = crate::stats::histogram(words, usize::MAX)?;
    let plan = Plan::for_stream(Stream::Words(words), &hist)?;
    plan.encode(Stream::Words(words), out);
    Some(())
}

/// The parsed head of a body: table, escaped words, payload.
pub struct Parsed<'a> {
    lanes: usize,
    syms: Vec<u64>,
    has_escape: bool,
    escaped: Words,
    freqs: Vec<u32>,
    scale: u32,
    /// The payload: states and words (empty with fewer than two symbols).
    payload: &'a [u8],
    n: usize,
}

/// Bytes of the table and the escaped words' literal at the start of `body`.
///
/// # Errors
/// When the table or the escaped words' literal is invalid or truncated.
pub fn table_bytes(body: &[u8], width: u32, n: usize) -> Result<u64, CodecError> {
    let p = parse(body, width, n)?;
    Ok((body.len() - p.payload.len()) as u64)
}

/// Parses and checks the table of `body` (a stream of `n` words of `width` bits) and
/// decodes its escaped words.
///
/// # Errors
/// A truncated body; more symbols than `2^width` or 256 (255 with an escape); a count of
/// escaped words above `n`; a precision over 12 or below what the symbols need;
/// frequencies that do not sum to `2^s`; an escaped words' literal that is of this codec
/// or the bucket codec, or does not decode; a payload whose length is not the states and
/// whole words.
pub fn parse(body: &[u8], width: u32, n: usize) -> Result<Parsed<'_>, CodecError> {
    check_width(width, NAME)?;
    let invalid = |what: String| CodecError::Invalid { codec: NAME, what };
    if n == 0 {
        if !body.is_empty() {
            return Err(CodecError::TrailingBytes {
                codec: NAME,
                extra: body.len() as u64,
            });
        }
        return Ok(Parsed {
            lanes: 32,
            syms: Vec::new(),
            has_escape: false,
            escaped: Words::empty(width),
            freqs: Vec::new(),
            scale: 0,
            payload: &[],
            n,
        });
    }
    let mut r = BitReader::new(body, NAME);
    let has_escape = r.read(1)? == 1;
    let lanes = if r.read(1)? == 1 { 64 } else { 32 };
    let m = r.read(8)? as usize + 1;
    let cap = if width >= 8 { 256 } else { 1usize << width };
    if m > cap.min(MAX_SYMBOLS - usize::from(has_escape)) {
        return Err(invalid(format!(
            "{m} coded words{}, expected at most {}",
            if has_escape { " and an escape" } else { "" },
            cap.min(MAX_SYMBOLS - usize::from(has_escape))
        )));
    }
    let syms = read_set(&mut r, m, width)?;
    let escaped = if has_escape {
        let e = r.read_eg(8)?.checked_add(1);
        match e {
            Some(e) if e <= n as u64 && e < u64::from(u32::MAX) => e as usize,
            _ => return Err(invalid(format!("escapes more words than the stream's {n}"))),
        }
    } else {
        0
    };
    let k = m + usize::from(has_escape);
    let (scale, freqs) = if k >= 2 {
        let scale = r.read(4)? as u32 + 1;
        if scale > MAX_SCALE_BITS || (1usize << scale) < k {
            return Err(invalid(format!(
                "precision {scale} bits for {k} symbols, expected at most {MAX_SCALE_BITS} \
                 and room for each"
            )));
        }
        (scale, read_freqs(&mut r, k, scale)?)
    } else {
        (0, Vec::new())
    };
    r.align_zero()?;
    let mut at = (r.position() / 8) as usize;
    let escaped_words = if has_escape {
        let head = body.get(at..at + 5).ok_or(CodecError::Truncated {
            codec: NAME,
            needed: at as u64 + 5,
            available: body.len() as u64,
        })?;
        let codec = CodecId::from_u8(head[0])
            .filter(|c| !matches!(c, CodecId::Rans8 | CodecId::Bucket))
            .ok_or_else(|| invalid(format!("escaped words in codec {}", head[0])))?;
        let len = u32::from_le_bytes([head[1], head[2], head[3], head[4]]) as usize;
        let end = (at + 5)
            .checked_add(len)
            .filter(|&e| e <= body.len())
            .ok_or(CodecError::Truncated {
                codec: NAME,
                needed: (at + 5 + len) as u64,
                available: body.len() as u64,
            })?;
        let words = super::select::decode(codec, &body[at + 5..end], width, escaped)?;
        at = end;
        words
    } else {
        Words::empty(width)
    };
    let payload = &body[at..];
    if k < 2 {
        if !payload.is_empty() {
            return Err(CodecError::TrailingBytes {
                codec: NAME,
                extra: payload.len() as u64,
            });
        }
    } else if (payload.len() as u64) < state_bytes(lanes) || !payload.len().is_multiple_of(2) {
        return Err(invalid(format!(
            "payload of {} bytes: expected the states' {} and whole 16-bit words",
            payload.len(),
            state_bytes(lanes)
        )));
    }
    Ok(Parsed {
        lanes,
        syms,
        has_escape,
        escaped: escaped_words,
        freqs,
        scale,
        payload,
        n,
    })
}

/// Decodes `n` words of `width` bits from exactly `body`.
///
/// # Errors
/// As [`parse`]; also initial states out of range, a payload that runs out or is not
/// used up, final states other than `2^16`, and a number of escapes decoded other than
/// the table's.
pub fn decode(body: &[u8], width: u32, n: usize) -> Result<Words, CodecError> {
    decode_with(body, width, n, true)
}

/// Which decoding kernel [`decode`] runs on this processor, chosen once a process:
/// `avx512 gathers`, `avx2 gathers`, `avx2 scalar loads` (of the two AVX2 kernels the
/// one that decodes a short synthetic stream faster; `BREVIS_RANS8_KERNEL=gather` or
/// `=lookup` picks one), or `scalar` (no AVX2, or `BREVIS_NO_SIMD` set).
pub fn decoding_kernel() -> &'static str {
    simd::kernel_name()
}

/// [`decode`] without the SIMD kernels and maps and with a table of symbols (no
/// offsets, [`Decoder::offset`]), whatever the processor has: the same words or an
/// error wherever [`decode`] gives one (the differential fuzz target
/// `lit_rans8_simd` and the tests compare the two).
///
/// # Errors
/// As [`decode`].
pub fn decode_scalar(body: &[u8], width: u32, n: usize) -> Result<Words, CodecError> {
    decode_with(body, width, n, false)
}

/// [`decode`] with the AVX2 kernel whatever else the processor has (its AVX-512 kernel
/// and maps left out); `None` where it lacks AVX2. The tests and the fuzz target
/// `lit_rans8_simd` compare it with [`decode_scalar`], which on a processor with AVX-512
/// nothing else would.
///
/// # Errors
/// As [`decode`].
#[doc(hidden)]
pub fn decode_avx2(body: &[u8], width: u32, n: usize) -> Option<Result<Words, CodecError>> {
    decode_with_kernel(body, width, n, simd::avx2()?)
}

/// [`decode_avx2`] with the AVX2 kernel that loads table entries one by one instead of
/// gathering them (which of the two [`decode`] runs is timed per processor); `None`
/// where the processor lacks AVX2.
///
/// # Errors
/// As [`decode`].
#[doc(hidden)]
pub fn decode_avx2_lookup(body: &[u8], width: u32, n: usize) -> Option<Result<Words, CodecError>> {
    decode_with_kernel(body, width, n, simd::avx2_lookup()?)
}

fn decode_with_kernel(
    body: &[u8],
    width: u32,
    n: usize,
    kernel: simd::Kernel,
) -> Option<Result<Words, CodecError>> {
    Some(parse(body, width, n).and_then(|p| {
        let mut d = p.decoder()?;
        d.simd = false;
        d.kernel = Some(kernel);
        d.decode_words(width)
    }))
}

fn decode_with(body: &[u8], width: u32, n: usize, simd: bool) -> Result<Words, CodecError> {
    let p = parse(body, width, n)?;
    let mut d = if simd {
        p.decoder()?
    } else {
        p.decoder_by_symbol()?
    };
    d.simd = simd;
    if !simd {
        d.kernel = None;
    }
    d.decode_words(width)
}

impl Decoder<'_> {
    /// Every word, in the container of `width` bits.
    fn decode_words(&mut self, width: u32) -> Result<Words, CodecError> {
        let buf = match container_bytes(width) {
            1 => WordBuf::U8(self.decode_all()?),
            2 => WordBuf::U16(self.decode_all()?),
            4 => WordBuf::U32(self.decode_all()?),
            _ => WordBuf::U64(self.decode_all()?),
        };
        // Every word is a symbol of the validated set or an escaped word of a validated
        // literal of `width` bits.
        Ok(Words::from_buf_trusted(width, buf))
    }
}

impl<'a> Parsed<'a> {
    /// A decoder of the words, block by block.
    ///
    /// # Errors
    /// Initial states out of range.
    pub fn decoder(self) -> Result<Decoder<'a>, CodecError> {
        Decoder::new(self, true)
    }

    /// [`Parsed::decoder`] whose table holds symbols even where the coded words would
    /// allow offsets ([`Decoder::offset`]): the reference the tests and the differential
    /// fuzz target compare the offset map with.
    fn decoder_by_symbol(self) -> Result<Decoder<'a>, CodecError> {
        Decoder::new(self, false)
    }
}

/// Decodes a `rans8` body in blocks of words ([`Decoder::next`]), keeping its states
/// between blocks: what a caller that merges the words into wider ones a block at a
/// time uses, so that no stream of the tensor's length is ever held.
pub struct Decoder<'a> {
    /// Decoding table: `2^s` entries ([`entry`]).
    table: Vec<u32>,
    /// The coded words by symbol, then (for the escape) 0, shifted left by `shift`.
    values: [u64; MAX_SYMBOLS],
    /// The same, truncated to bytes and to 16 bits (for the SIMD maps).
    values_u8: [u8; MAX_SYMBOLS],
    values_u16: [u16; MAX_SYMBOLS],
    /// The coded words unshifted, truncated to 16 bits, and whether they fit them (for
    /// the SIMD map into 32-bit words).
    field_u16: [u16; MAX_SYMBOLS],
    field_fits_u16: bool,
    /// Bits every word is shifted left by on output ([`Decoder::set_shift`]).
    shift: u32,
    /// The escape symbol (`m`), or 256 without one: the byte the table's entries hold
    /// for it (255 with [`Decoder::offset`]).
    esc: u32,
    /// With `Some(base)`, the table's entries hold `value - base` instead of the symbol
    /// (every coded word lies in `base..base + 255`, the escape taking byte 255), and
    /// mapping a byte to its word is an add and a shift, not a lookup.
    offset: Option<u64>,
    escaped: Words,
    /// Escaped words taken so far.
    taken: usize,
    scale: u32,
    /// The states (the first `lanes` of them).
    x: [u32; LANES],
    lanes: usize,
    /// The renormalization words.
    words: &'a [u8],
    /// Payload words read so far.
    pos: usize,
    /// Words decoded so far, and in all.
    done: usize,
    n: usize,
    /// Symbols of the block being decoded.
    symbols: Vec<u8>,
    /// Per 64 symbols of the block, which are the escape.
    masks: Vec<u64>,
    /// With a single symbol: its word.
    single: Option<u64>,
    /// Whether the SIMD maps may run (they do where the processor has them).
    simd: bool,
    /// The SIMD decoding kernel: this processor's best, or none.
    kernel: Option<simd::Kernel>,
}

impl<'a> Decoder<'a> {
    fn new(p: Parsed<'a>, offsets: bool) -> Result<Decoder<'a>, CodecError> {
        let mut values = [0u64; MAX_SYMBOLS];
        values[..p.syms.len()].copy_from_slice(&p.syms);
        let has_escape = p.has_escape;
        let k = p.freqs.len();
        let mut d = Decoder {
            table: Vec::new(),
            values,
            values_u8: std::array::from_fn(|i| values[i] as u8),
            values_u16: std::array::from_fn(|i| values[i] as u16),
            field_u16: std::array::from_fn(|i| values[i] as u16),
            field_fits_u16: values.iter().all(|&v| v <= u64::from(u16::MAX)),
            shift: 0,
            esc: if has_escape { p.syms.len() as u32 } else { 256 },
            offset: None,
            escaped: p.escaped,
            taken: 0,
            scale: p.scale,
            x: [L; LANES],
            lanes: p.lanes,
            words: &[],
            pos: 0,
            done: 0,
            n: p.n,
            symbols: Vec::new(),
            masks: Vec::new(),
            single: None,
            simd: true,
            kernel: simd::kernel(),
        };
        if p.n == 0 {
            return Ok(d);
        }
        if k < 2 {
            // One symbol: the coded word (an escape alone is refused by the set count
            // of at least one coded word, and the parser's check that k >= 2 then).
            d.single = p.syms.first().copied();
            return Ok(d);
        }
        // The set is sorted: the coded words span `last - first + 1` values, and when
        // that leaves byte 255 free for the escape, entries hold the offset of the word.
        let (first, last) = (p.syms[0], p.syms[p.syms.len() - 1]);
        if offsets && last - first < 255 {
            d.offset = Some(first);
            if has_escape {
                d.esc = 255;
            }
        }
        let byte = |s: usize| match d.offset {
            Some(base) if s < p.syms.len() => (p.syms[s] - base) as u32,
            Some(_) => 255,
            None => s as u32,
        };
        let mut table = vec![0u32; 1 << p.scale];
        let mut cum = 0usize;
        for (s, &f) in p.freqs.iter().enumerate() {
            let b0 = byte(s);
            for (b, e) in table[cum..cum + f as usize].iter_mut().enumerate() {
                *e = entry(b0, f, b as u32);
            }
            cum += f as usize;
        }
        d.table = table;
        for (i, x) in d.x[..p.lanes].iter_mut().enumerate() {
            let b = &p.payload[4 * i..4 * i + 4];
            *x = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            if *x < L {
                return Err(CodecError::Invalid {
                    codec: NAME,
                    what: format!("state {i} is {x}, below 2^16"),
                });
            }
        }
        d.words = &p.payload[state_bytes(p.lanes) as usize..];
        Ok(d)
    }

    /// Makes the decoder write every word shifted left by `shift` bits (a field of a
    /// `merge` written straight into the output's words, which it assigns). Set before
    /// the first word; words shifted past their container are truncated to it.
    ///
    /// # Panics
    /// If words were decoded already, a shift was set, or `shift >= 64`.
    pub(crate) fn set_shift(&mut self, shift: u32) {
        assert!(
            self.done == 0 && self.shift == 0 && shift < 64,
            "one shift, before the first word"
        );
        self.shift = shift;
        for v in &mut self.values {
            *v <<= shift;
        }
        self.values_u8 = std::array::from_fn(|i| self.values[i] as u8);
        self.values_u16 = std::array::from_fn(|i| self.values[i] as u16);
        if let Some(v) = &mut self.single {
            *v <<= shift;
        }
    }

    /// Words left to decode.
    pub fn remaining(&self) -> usize {
        self.n - self.done
    }

    /// Decodes the next `out.len()` words (at most [`Decoder::remaining`]) into `out`.
    /// Blocks should be a multiple of [`LANES`] words but the last.
    ///
    /// # Errors
    /// A payload that runs out, an escape beyond the escaped words, and after the last
    /// word: final states other than `2^16`, payload words left over, escaped words left
    /// over. After an error the decoder's output is meaningless.
    pub(crate) fn next<T: super::table::Word>(&mut self, out: &mut [T]) -> Result<(), CodecError> {
        let len = out.len().min(self.remaining());
        let out = &mut out[..len];
        if let Some(v) = self.single {
            out.fill(T::from_u64(v));
            self.done += len;
            return Ok(());
        }
        if len == 0 {
            return self.finish_if_done();
        }
        self.symbols.resize(len, 0);
        let mut symbols = std::mem::take(&mut self.symbols);
        let r = self.decode_symbols(&mut symbols);
        let r = r.and_then(|()| self.map(&symbols, out));
        self.symbols = symbols;
        r?;
        self.done += len;
        self.finish_if_done()
    }

    /// Decodes every word left.
    fn decode_all<T: super::table::Word>(&mut self) -> Result<Vec<T>, CodecError> {
        let mut out = super::table::try_filled(T::default(), self.remaining(), NAME)?;
        for chunk in out.chunks_mut(1 << 14) {
            self.next(chunk)?;
        }
        Ok(out)
    }

    /// The symbols of the next `out.len()` words.
    fn decode_symbols(&mut self, out: &mut [u8]) -> Result<(), CodecError> {
        // The lane of the first word: blocks are multiples of the states but the last.
        let lanes = self.lanes;
        debug_assert_eq!(self.done % lanes, 0);
        let words = self.words;
        let nwords = words.len() / 2;
        let full = out.len() / lanes;
        // Whole groups while the payload holds a group's most (a word per state) ahead:
        // SIMD. A group reads a word for some states only, so the payload left is checked
        // again after the groups it surely covered (at most `full` calls; without it the
        // last 2,048 payload words of every stream, 4-20% of a 100 Ki-word tensor's, were
        // decoded one state at a time).
        let mut g = 0;
        if let Some(kernel) = self.kernel {
            loop {
                let safe = nwords.saturating_sub(self.pos) / lanes;
                let groups = (full - g).min(safe);
                if groups == 0 {
                    break;
                }
                self.pos = kernel(
                    &self.table,
                    self.scale,
                    &mut self.x[..lanes],
                    words,
                    self.pos,
                    &mut out[g * lanes..(g + groups) * lanes],
                );
                g += groups;
            }
        }
        // The rest, each refill checked.
        let mask = (1u32 << self.scale) - 1;
        for (i, o) in out.iter_mut().enumerate().skip(g * lanes) {
            let lane = i % lanes;
            let x = self.x[lane];
            let e = self.table[(x & mask) as usize];
            *o = e as u8;
            let mut y = (e >> 8) & 0xfff;
            y = y * (x >> self.scale) + (e >> 20);
            if y < L {
                let at = 2 * self.pos;
                let w = words.get(at..at + 2).ok_or(CodecError::Truncated {
                    codec: NAME,
                    needed: state_bytes(lanes) + (at + 2) as u64,
                    available: state_bytes(lanes) + words.len() as u64,
                })?;
                y = y << 16 | u32::from(u16::from_le_bytes([w[0], w[1]]));
                self.pos += 1;
            }
            self.x[lane] = y;
        }
        Ok(())
    }

    /// The words of `symbols`, escapes taken from the escaped words.
    fn map<T: super::table::Word>(
        &mut self,
        symbols: &[u8],
        out: &mut [T],
    ) -> Result<(), CodecError> {
        let done = if let Some(base) = self.offset {
            offset_map(symbols, base << self.shift, self.shift, out);
            true
        } else {
            self.simd
                && match std::mem::size_of::<T>() {
                    1 => simd::map_u8(symbols, &self.values_u8, bytemuck::cast_slice_mut(out)),
                    2 => simd::map_u16(symbols, &self.values_u16, bytemuck::cast_slice_mut(out)),
                    4 if self.field_fits_u16 && self.shift < 32 => simd::map_u16_u32(
                        symbols,
                        &self.field_u16,
                        bytemuck::cast_slice_mut(out),
                        self.shift,
                    ),
                    _ => false,
                }
        };
        if !done {
            let values: [T; MAX_SYMBOLS] = std::array::from_fn(|i| T::from_u64(self.values[i]));
            for (o, &s) in out.iter_mut().zip(symbols) {
                *o = values[usize::from(s)];
            }
        }
        if self.esc < 256 {
            // Escapes are found by a SIMD byte compare, not a test per word; their words
            // are read from the escaped words' own container.
            let esc = self.esc as u8;
            let mut masks = std::mem::take(&mut self.masks);
            if !(self.simd && simd::byte_masks(symbols, esc, &mut masks)) {
                masks.clear();
                masks.resize(symbols.len().div_ceil(64), 0);
                for i in memchr::memchr_iter(esc, symbols) {
                    masks[i / 64] |= 1 << (i % 64);
                }
            }
            let (shift, escaped, mut taken) = (self.shift, &self.escaped, self.taken);
            let r = crate::tensor::with_buf!(escaped.buf(), v => {
                let mut r = Ok(());
                'steps: for (k, &m) in masks.iter().enumerate() {
                    let mut m = m;
                    while m != 0 {
                        let Some(&x) = v.get(taken) else {
                            r = Err(CodecError::Invalid {
                                codec: NAME,
                                what: format!("more escapes than the {} escaped words", v.len()),
                            });
                            break 'steps;
                        };
                        // `with_buf!` instantiates this for u64 words too.
                        #[allow(clippy::useless_conversion)]
                        let x = u64::from(x);
                        out[64 * k + m.trailing_zeros() as usize] = T::from_u64(x << shift);
                        taken += 1;
                        m &= m - 1;
                    }
                }
                r
            });
            self.taken = taken;
            self.masks = masks;
            r?;
        }
        Ok(())
    }

    /// After the last word: the checks of a complete stream.
    fn finish_if_done(&self) -> Result<(), CodecError> {
        if self.done < self.n || self.single.is_some() {
            return Ok(());
        }
        if let Some(i) = self.x[..self.lanes].iter().position(|&x| x != L) {
            return Err(CodecError::Invalid {
                codec: NAME,
                what: format!("state {i} ends at {}, expected 2^16", self.x[i]),
            });
        }
        if 2 * self.pos != self.words.len() {
            return Err(CodecError::TrailingBytes {
                codec: NAME,
                extra: (self.words.len() - 2 * self.pos) as u64,
            });
        }
        if self.taken != self.escaped.len() {
            return Err(CodecError::Invalid {
                codec: NAME,
                what: format!(
                    "{} escapes decoded, but {} words escaped",
                    self.taken,
                    self.escaped.len()
                ),
            });
        }
        Ok(())
    }
}

/// `out[i] = (symbols[i] << shift) + add`, wrapping in the container `T`: the words of
/// a decoder whose table holds offsets ([`Decoder::offset`]), `add` being the base
/// shifted by `shift` (below 64). Compiled with AVX2 where the processor has it (the
/// loop vectorizes to a widening, a shift and an add per 16 or 32 bytes).
fn offset_map<T: super::table::Word>(symbols: &[u8], add: u64, shift: u32, out: &mut [T]) {
    #[inline(always)]
    fn body<T: super::table::Word>(symbols: &[u8], add: u64, shift: u32, out: &mut [T]) {
        let bits = 8 * std::mem::size_of::<T>() as u32;
        if shift >= bits {
            out.fill(T::from_u64(add));
            return;
        }
        macro_rules! go {
            ($t:ty) => {{
                let out: &mut [$t] = bytemuck::cast_slice_mut(out);
                let add = add as $t;
                for (o, &s) in out.iter_mut().zip(symbols) {
                    *o = (<$t>::from(s) << shift).wrapping_add(add);
                }
            }};
        }
        match bits {
            8 => go!(u8),
            16 => go!(u16),
            32 => go!(u32),
            _ => go!(u64),
        }
    }
    #[cfg(target_arch = "x86_64")]
    if crate::simd::level().avx2 {
        #[target_feature(enable = "avx2")]
        fn with_avx2<T: super::table::Word>(symbols: &[u8], add: u64, shift: u32, out: &mut [T]) {
            body(symbols, add, shift, out);
        }
        // SAFETY: the processor has AVX2 (checked above).
        return unsafe { with_avx2(symbols, add, shift, out) };
    }
    body(symbols, add, shift, out);
}

impl Plan {
    /// The exact body size in bytes of `stream` (the stream the plan was made from), by
    /// encoding it.
    pub fn size(&self, stream: Stream<'_>) -> u64 {
        let mut out = Vec::new();
        self.encode(stream, &mut out);
        out.len() as u64
    }
}

#[cfg(test)]
mod tests;
