//! The fast level's fixed layout (`--level fast`): no search. A float tensor's words
//! are split as `merge fields[1, e + k, m - k]`: the sign bit packed, the exponent
//! with the top `k` bits of the mantissa coded by `rans8` (one 8-bit symbol a word, the
//! rare values escaped), the remaining mantissa bits packed. `k` (0 to 4) is chosen
//! from one histogram of the exponent and the top four mantissa bits, by the table
//! codec's estimate plus the packed bits: the exponent's entropy and that of the
//! mantissa bits it predicts. 8-bit words are one `rans8` literal; other words a
//! literal of the smallest codec. Two passes over the words (count, then code) whatever
//! the tensor: what ZipNN does per byte plane, with a field split that follows the
//! exponent instead of the bytes. A stream of twice [`rans8::SAMPLE_WORDS`] words or more is counted
//! in every second to fourth block only, and its `rans8` table planned from that sample
//! (the words the sample missed escaped): counting is a fifth of the layout's time.

use crate::codec::table::Word;
use crate::codec::{bitpack, rans8, CodecId, Stream};
use crate::dsl::{program_len, Lit, MergeFn, Node, Ty};
use crate::tensor::{mask, Dtype, WordBuf, Words};

/// Most mantissa bits coded with the exponent.
const MAX_JOINED: u32 = 4;

/// Streams shorter than this are coded by the smallest codec ([`Node::lit`]): the
/// layout's tables would cost more than the search saves on them.
const SMALL_WORDS: usize = 4096;

/// Targets of [`SMALL_WORDS`] to this many words that are not ordinary float weights
/// are searched at budget 1 even at the fast level: on them the layout's tables are a
/// large share and the search's time a small one (the fast level of fracast0-int8-f32,
/// all of whose tensors are small, was 2.2 points less reduced than at the default
/// level, below ZipNN).
pub const SEARCH_BELOW: usize = 1 << 16;

/// Whether the fast level codes `target` (of `dtype` when known) without a search, by
/// [`program`]: a target of fewer than [`SMALL_WORDS`] words (as a literal, [`short_literal`]:
/// searching the biases and norms of a file cost more time than all its weights, 12%
/// of minilm-l6-v2-bf16's and half of fracast0-f32's, for 0.01% to 0.5% of their
/// size), every target of [`SEARCH_BELOW`] words or more, and a float target with more
/// than [`FEW_VALUES`] distinct words in an evenly spaced probe of 4,096: ordinary
/// weights, whose search finds the layout. The others, of few values (a dequantized
/// tensor's, on which the search finds `dequant`) or not floats, are searched.
pub fn takes_the_layout(target: &Words, dtype: Option<Dtype>) -> bool {
    let n = target.len();
    !(SMALL_WORDS..SEARCH_BELOW).contains(&n)
        || (dtype.and_then(Dtype::float_layout).is_some()
            && crate::stats::probe_has_more_than(target, FEW_VALUES))
}

/// Whether `target` looks like ordinary trained float weights, which the default level
/// codes in this layout without a search: at least [`ORDINARY_WORDS`] words of a float
/// dtype (of `rows` rows when a matrix), not narrower values in a wider dtype (the gates
/// of `dequant`'s proposals, [`crate::synth::dequant::may_dequantize`]), more than
/// [`MANY_VALUES`] distinct words in an evenly spaced probe of 4,096 (not a tensor of
/// few common values, which whole words code smaller; FP8 codes: more than
/// [`FEW_CODES`]), and too few repeated windows among its first
/// [`crate::synth::backref::PROBE_WORDS`] words for back references to pay (not a
/// sinusoidal position table's). On the corpus the default level's archives move by at
/// most 0.021 percentage points (whisper-tiny-en-f16, 15.186% -> 15.165%) and compress
/// 1.15-1.7x faster (session 24, `docs/bench.md`).
pub fn ordinary_weights(target: &Words, dtype: Option<Dtype>, rows: Option<u64>) -> bool {
    let Some(dtype) = dtype.filter(|d| d.float_layout().is_some()) else {
        return false;
    };
    target.len() >= ORDINARY_WORDS
        && !crate::synth::dequant::may_dequantize(target, dtype, rows.unwrap_or(1))
        && crate::stats::probe_has_more_than(
            target,
            if target.width() == 8 {
                FEW_CODES
            } else {
                MANY_VALUES
            },
        )
        && !crate::synth::backref::reuses_enough(
            &target.slice(0, target.len().min(crate::synth::backref::PROBE_WORDS)),
        )
}

/// Fewest words of a target the default level codes as ordinary weights
/// ([`ordinary_weights`]). On float weights of 16-64 Ki words the search at budget 1
/// found the layout or one 0.1-0.2% smaller (silero-vad's four convolutions: 423 bytes
/// of 320 KB in all) at 20-25 times the layout's time (13.5 of silero's 49.6 ms for one
/// of them); below 16 Ki words it pays more (fracast0-f32's tensors of 8-16 Ki words:
/// 319 bytes, 0.09 points of that file). Session 29, `docs/bench.md`.
pub const ORDINARY_WORDS: usize = 1 << 14;

/// Distinct words a float target of 16 bits or more must show in its probe of 4,096 to
/// take the layout at the default level ([`ordinary_weights`]): trained weights show
/// 1,347 (BF16) to 4,096 (F32) on the corpus; a tensor of a few hundred common values,
/// which whole-word coding takes 12% smaller than the layout's fields, far fewer.
const MANY_VALUES: usize = 1024;

/// Distinct words an 8-bit float target (FP8 codes) may show in its probe and still be
/// searched at the default level ([`ordinary_weights`]): every FP8 tensor has at most
/// 256, trained weights some 100 to 250, a ternary or binary one a handful.
const FEW_CODES: usize = 32;

/// Distinct words a float target may show in its probe and still be searched at the
/// fast level: what an 8-bit code's dequantization gives.
const FEW_VALUES: usize = 256;

/// The fast level's program for `target` (a tensor's or region's words, of `dtype` when
/// known): never larger than the raw words; a long target's never larger than
/// [`Node::lit`]'s literal by more than its tables, a short one [`short_literal`].
/// Returns the program and its serialized size in bytes.
pub fn program(target: &Words, dtype: Option<Dtype>) -> (Node, u64) {
    let n = target.len();
    let layout = dtype
        .and_then(Dtype::float_layout)
        .filter(|&[s, e, m]| s + e + m == target.width() && target.width() >= 16);
    let node = match layout {
        _ if n < SMALL_WORDS => short_literal(target),
        Some([_, e, m]) => fields(target, e, m),
        None if target.width() == 8 => {
            stream_literal(Stream::Words(target), 8, n).unwrap_or_else(|| Node::lit(target))
        }
        None => Node::lit(target),
    };
    let bytes = program_len(&node);
    (node, bytes)
}

/// The literal of a target of fewer than [`SMALL_WORDS`] words: the smallest of raw, bit
/// packing and canonical Huffman ([`crate::codec::select::encode_without_rans`]). The
/// rANS coder as well made the corpus's fast archives 0-273 bytes smaller (under 0.003
/// points) and took 16% of silero-vad's fast compression (its eight biases).
fn short_literal(target: &Words) -> Node {
    Node::lit_encoded(
        Ty::new(target.width(), target.len() as u64),
        crate::codec::select::encode_without_rans(target).into(),
    )
    .expect("a literal of the target's type is valid")
}

/// `merge fields[1, e + k, m - k]` of float words with `e` exponent and `m` mantissa bits
/// (or a raw literal when that is not smaller).
fn fields(target: &Words, e: u32, m: u32) -> Node {
    let width = target.width();
    let n = target.len();
    let top = MAX_JOINED.min(m);
    // One pass: the histogram of the exponent and the top mantissa bits, and the OR of
    // the signs.
    let head_bits = e + top;
    let (counts, sign_or, counted) =
        head_counts(target, head_bits, m - top, rans8::sample_every(n));
    let sign_const = sign_or >> (width - 1) == 0;
    // The histogram of the exponent and `k` mantissa bits, for each `k`, and a cheap
    // estimate of its layout's bytes: the field's order-0 entropy, about two bytes of
    // table a coded word, and the packed rest. The finest histogram (`k = top`) comes
    // from the dense counts, each coarser one from merging the one before's neighbours
    // (a scan of the values present, not of the 2^head_bits counts again: that took 6%
    // of an F32 file's fast compression).
    let finest: Vec<(u64, u64)> = counts
        .iter()
        .enumerate()
        .filter(|&(_, &c)| c > 0)
        .map(|(at, &c)| (at as u64, u64::from(c)))
        .collect();
    let mut hists = vec![finest];
    for k in 0..top as usize {
        let coarser = halved(&hists[k]);
        hists.push(coarser);
    }
    // Indexed by `k`: the coarsest (`k = 0`) first.
    hists.reverse();
    let mut candidates: Vec<Candidate> = (0..=top)
        .zip(hists)
        .map(|(k, hist)| {
            // From a sample, the plug-in entropy falls short of the stream's by about
            // `(K - 1) / (2 N ln 2)` bits (`K` values seen in `N` words: Miller and
            // Madow's correction), more for the finer fields: added back, so that the
            // sample picks the `k` the whole stream would.
            let bias = match counted < n {
                true => (hist.len() as f64 - 1.0) / (2.0 * counted as f64 * std::f64::consts::LN_2),
                false => 0.0,
            };
            let h = crate::stats::entropy_bits(hist.iter().map(|&(_, c)| c)) + bias;
            let table = 2.0 * hist.len().min(rans8::MAX_SYMBOLS) as f64;
            let rest = bitpack::size_for(m - k, n) as f64;
            (h * n as f64 / 8.0 + table + rest, k, hist)
        })
        .collect();
    candidates.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    // The two best by that estimate planned exactly (each plan quantizes up to four
    // coded sets: planning all five took a sixth of a BF16 file's compression).
    // The second is planned only as far as it can still win (`Plan::new_at_most`: the
    // same choice, without planning the coded sets a bound rules out).
    let mut best: Option<(u64, u32, rans8::Plan)> = None;
    for (_, k, hist) in candidates.into_iter().take(2) {
        let rest = bitpack::size_for(m - k, n);
        // It must come under the best, or level with it at a smaller `k`. Planned from
        // a sample, the estimates of two `k` lie within the sample's error of each
        // other: a finer field (more escaped values, its rest packed at an odd width,
        // both slower) must then win by more than a 1/1024th, a coarser one wins unless
        // it loses by that much.
        let at_most = match &best {
            None => u64::MAX,
            Some((b, bk, _)) => {
                let slack = if counted < n { b / 1024 } else { 0 };
                let limit = match k < *bk {
                    true => b.checked_add(slack),
                    false => b.checked_sub(slack + 1),
                };
                match limit.and_then(|l| l.checked_sub(rest)) {
                    Some(a) => a,
                    None => continue,
                }
            }
        };
        let Some(plan) = rans8::Plan::from_counts(&hist, counted, e + k, n, at_most) else {
            continue;
        };
        best = Some((plan.estimate_bytes() + rest, k, plan));
    }
    let Some((_, k, plan)) = best else {
        return Node::lit(target);
    };
    let mid = e + k;
    let low = m - k;
    let mut children = Vec::with_capacity(3);
    let sign = if sign_const {
        Node::constant(Ty::new(1, n as u64), 0).expect("n >= 1 and 0 fits")
    } else {
        packed(target, width - 1, 1)
    };
    children.push(sign);
    let mut body = Vec::new();
    plan.encode(
        Stream::Field {
            words: target,
            shift: low,
            width: mid,
        },
        &mut body,
    );
    let mid_node = Node::lit_encoded(
        Ty::new(mid, n as u64),
        Lit {
            codec: CodecId::Rans8,
            body: body.into(),
        },
    )
    .expect("a field type is valid");
    children.push(mid_node);
    let mut widths = vec![1, mid];
    if low > 0 {
        children.push(packed(target, 0, low));
        widths.push(low);
    }
    let node = Node::merge(MergeFn::Fields(widths), children).expect("the fields add up");
    let raw = crate::codec::raw::size(width, n);
    if program_len(&node) < raw + 8 {
        node
    } else {
        Node::lit(target)
    }
}

/// A number `k` of mantissa bits joined to the exponent: its estimated bytes, `k`, and
/// the histogram of the joined field.
type Candidate = (f64, u32, Vec<(u64, u64)>);

/// The histogram of a field one bit narrower (its lowest bit dropped) from `hist`'s
/// (values ascending with their nonzero counts): neighbours `2v` and `2v + 1` merged.
fn halved(hist: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(hist.len());
    for &(v, c) in hist {
        match out.last_mut() {
            Some(last) if last.0 == v >> 1 => last.1 += c,
            _ => out.push((v >> 1, c)),
        }
    }
    out
}

crate::codec::feature_fn! {
    "avx2";
    /// The counts of bits `[shift, shift + head_bits)` (`head_bits <= 16`) of the words
    /// of `target` in every `every`-th block of [`rans8::SAMPLE_BLOCK`] words, the OR of all
    /// the words, and the number of words counted. Compiled for AVX2 too and picked at
    /// run time (the field extraction vectorizes twice as wide).
    fn head_counts(
        target: &Words,
        head_bits: u32,
        shift: u32,
        every: usize,
    ) -> (Vec<u32>, u64, usize) = head_counts_of;
}

/// [`head_counts`] of each container, inlined into each build.
#[inline(always)]
fn head_counts_of(
    target: &Words,
    head_bits: u32,
    shift: u32,
    every: usize,
) -> (Vec<u32>, u64, usize) {
    match target.buf() {
        WordBuf::U8(v) => head_counts_in(v, head_bits, shift, every),
        WordBuf::U16(v) => head_counts_in(v, head_bits, shift, every),
        WordBuf::U32(v) => head_counts_in(v, head_bits, shift, every),
        WordBuf::U64(v) => head_counts_in(v, head_bits, shift, every),
    }
}

/// [`head_counts`]' work, inlined into each build: a block's fields extracted first (a
/// loop that vectorizes), then counted into four interleaved tables, so that runs of
/// one value (a tensor's few exponents) do not wait on one counter. The tables hold
/// 16-bit counts (four tables of 4,096 fit a 32 KiB L1 cache; 32-bit ones did not),
/// added into the totals before any can overflow.
#[inline(always)]
fn head_counts_in<T: Word>(
    v: &[T],
    head_bits: u32,
    shift: u32,
    every: usize,
) -> (Vec<u32>, u64, usize) {
    const BLOCK: usize = rans8::SAMPLE_BLOCK;
    // Blocks a table's 16-bit counts take before they are added into the totals: each
    // block adds at most `BLOCK / 4` to a count of each table.
    const FLUSH: usize = (u16::MAX as usize) / (BLOCK / 4);
    let size = 1usize << head_bits;
    let mut totals = vec![0u32; size];
    let mut t = vec![0u16; 4 * size];
    let head_mask = mask(head_bits);
    let mut or = 0u64;
    let mut counted = 0;
    let mut keys = [0u16; BLOCK];
    for (g, group) in v.chunks(BLOCK * FLUSH).enumerate() {
        {
            let (t0, rest) = t.split_at_mut(size);
            let (t1, rest) = rest.split_at_mut(size);
            let (t2, t3) = rest.split_at_mut(size);
            for (b, block) in group.chunks(BLOCK).enumerate() {
                if !(g * FLUSH + b).is_multiple_of(every) {
                    or |= block.iter().fold(T::default(), |o, &x| o | x).into();
                    continue;
                }
                counted += block.len();
                let keys = &mut keys[..block.len()];
                if std::mem::size_of::<T>() <= 4 {
                    // In 32-bit lanes (`shift` < the width <= 32): twice the 64-bit lanes'
                    // words a vector.
                    let m = head_mask as u32;
                    for (k, &x) in keys.iter_mut().zip(block) {
                        let x = x.into() as u32;
                        *k = ((x >> shift) & m) as u16;
                    }
                } else {
                    for (k, &x) in keys.iter_mut().zip(block) {
                        let x: u64 = x.into();
                        *k = ((x >> shift) & head_mask) as u16;
                    }
                }
                // In the container's width (ORed as 64-bit words, a quarter of the
                // words a vector).
                or |= block.iter().fold(T::default(), |o, &x| o | x).into();
                // Masked by `top` (the keys are below `size`, a power of two, so this
                // changes none): the compiler then drops the four bounds checks.
                let top = size - 1;
                let (t0, t1, t2, t3) = (
                    &mut t0[..=top],
                    &mut t1[..=top],
                    &mut t2[..=top],
                    &mut t3[..=top],
                );
                let mut fours = keys.chunks_exact(4);
                for c in &mut fours {
                    t0[usize::from(c[0]) & top] += 1;
                    t1[usize::from(c[1]) & top] += 1;
                    t2[usize::from(c[2]) & top] += 1;
                    t3[usize::from(c[3]) & top] += 1;
                }
                for &k in fours.remainder() {
                    t0[usize::from(k) & top] += 1;
                }
            }
        }
        let (t0, rest) = t.split_at(size);
        for (i, total) in totals.iter_mut().enumerate() {
            *total += u32::from(t0[i])
                + u32::from(rest[i])
                + u32::from(rest[size + i])
                + u32::from(rest[2 * size + i]);
        }
        t.fill(0);
    }
    (totals, or, counted)
}

/// Bits `[shift, shift + width)` of every word of `target`, bit-packed at `width` bits.
fn packed(target: &Words, shift: u32, width: u32) -> Node {
    let mut body = Vec::new();
    bitpack::encode_k_stream(
        Stream::Field {
            words: target,
            shift,
            width,
        },
        width,
        &mut body,
    );
    Node::lit_encoded(
        Ty::new(width, target.len() as u64),
        Lit {
            codec: CodecId::BitPack,
            body: body.into(),
        },
    )
    .expect("a field type is valid")
}

/// A `rans8` literal of `stream` (`n` words of `width` bits), or `None` when it is not
/// smaller than the packed words.
fn stream_literal(stream: Stream<'_>, width: u32, n: usize) -> Option<Node> {
    let (hist, counted) = match rans8::sample_every(n) {
        1 => (crate::stats::histogram(&stream.to_words(), usize::MAX)?, n),
        every => rans8::sample_histogram(stream, every)?,
    };
    let plan = rans8::Plan::from_counts(&hist, counted, width, n, u64::MAX)?;
    if plan.estimate_bytes() >= bitpack::size_for(width, n) {
        return None;
    }
    let mut body = Vec::new();
    plan.encode(stream, &mut body);
    Node::lit_encoded(
        Ty::new(width, n as u64),
        Lit {
            codec: CodecId::Rans8,
            body: body.into(),
        },
    )
    .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lcg(seed: &mut u64) -> u64 {
        *seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        *seed >> 33
    }

    /// The counts of a field and the OR of the words are those of a plain count, for
    /// every container, at lengths around the 16-bit tables' flush (`4 * 65,535` words),
    /// and where every word has one field (the most one table slot can take).
    #[test]
    fn halved_merges_neighbour_values() {
        let hist = [(0, 2), (1, 3), (5, 1), (6, 4), (7, 1), (9, 7)];
        assert_eq!(halved(&hist), vec![(0, 5), (2, 1), (3, 5), (4, 7)]);
        assert_eq!(halved(&halved(&hist)), vec![(0, 5), (1, 6), (2, 7)]);
        assert_eq!(halved(&[]), Vec::<(u64, u64)>::new());
    }

    #[test]
    fn head_counts_equal_a_plain_count() {
        let flush = 4 * usize::from(u16::MAX);
        let mut seed = 11;
        for (width, head_bits, shift) in [(8, 7, 1), (16, 12, 3), (32, 12, 19), (64, 15, 48)] {
            for n in [0, 1, 5, flush - 1, flush, flush + 3, 2 * flush + 3] {
                for one_value in [false, true] {
                    let w = Words::from_fn(width, n, |_| {
                        if one_value {
                            mask(width) - 1
                        } else {
                            ((lcg(&mut seed) << 32) ^ lcg(&mut seed)) & mask(width)
                        }
                    });
                    let or = w.iter().fold(0, |o, x| o | x);
                    for every in [1, 3, 4] {
                        let mut want = vec![0u32; 1 << head_bits];
                        let mut counted = 0;
                        for (i, x) in w.iter().enumerate() {
                            if (i / rans8::SAMPLE_BLOCK).is_multiple_of(every) {
                                want[((x >> shift) & mask(head_bits)) as usize] += 1;
                                counted += 1;
                            }
                        }
                        let got = head_counts(&w, head_bits, shift, every);
                        assert!(
                            got == (want, or, counted),
                            "width {width} n {n} one {one_value} every {every}"
                        );
                    }
                }
            }
        }
    }

    /// Gaussian-like BF16 weights: a few exponents, uniform mantissas.
    fn weights(n: usize) -> Words {
        let mut s = 7;
        Words::from_fn(16, n, |_| {
            let sign = lcg(&mut s) & 1;
            let exp = 120 - (lcg(&mut s) % 64).trailing_zeros() as u64;
            (sign << 15) | (exp << 7) | (lcg(&mut s) & 0x7f)
        })
    }

    #[test]
    fn bf16_weights_get_the_field_layout_and_run_back() {
        let w = weights(100_000);
        let (node, bytes) = program(&w, Some(Dtype::BF16));
        assert_eq!(bytes, program_len(&node));
        let text = node.to_string();
        assert!(text.starts_with("merge fields[1,"), "{text}");
        assert_eq!(crate::dsl::execute(&node, u64::MAX).unwrap(), w);
        // Sign (1 bit) and mantissa (7 bits) are uniform; the exponent holds ~2 bits.
        assert!(bytes < 100_000 * 2 * 11 / 16, "{bytes}");
    }

    #[test]
    fn sampled_literals_are_what_the_codec_gives_their_words() {
        // 600,000 BF16 weights (every second block counted) and as many FP8 bytes: the
        // layout's `rans8` literal is the body `rans8::encode` gives its words (the
        // plan a program rebuilt from its text makes), and the program runs back.
        let w = weights(600_000);
        let mut s = 9;
        let fp8 = Words::from_fn(8, 600_000, |_| (lcg(&mut s) % 7 + lcg(&mut s) % 90) & 0xFF);
        for (w, dtype) in [(&w, Dtype::BF16), (&fp8, Dtype::F8E4M3)] {
            assert_eq!(rans8::sample_every(w.len()), 2);
            let (node, _) = program(w, Some(dtype));
            assert_eq!(crate::dsl::execute(&node, u64::MAX).unwrap(), *w);
            let lits: Vec<&Node> = match node.op() {
                crate::dsl::Op::Merge(_, c) => c.iter().collect(),
                _ => vec![&node],
            };
            let mut seen = 0;
            for lit in lits {
                if let crate::dsl::Op::Lit(l) = lit.op() {
                    if l.codec == CodecId::Rans8 {
                        let words = crate::dsl::execute(lit, u64::MAX).unwrap();
                        let mut body = Vec::new();
                        rans8::encode(&words, &mut body).unwrap();
                        assert!(body[..] == l.body[..], "{dtype:?}");
                        seen += 1;
                    }
                }
            }
            assert_eq!(seen, 1, "{dtype:?}: {node}");
        }
    }

    #[test]
    fn every_shape_runs_back() {
        let mut s = 3;
        for (dtype, n) in [
            (Dtype::F32, 5000),
            (Dtype::F16, 4096),
            (Dtype::F64, 6000),
            (Dtype::F8E4M3, 9000),
            (Dtype::I32, 5000),
            (Dtype::U8, 10),
            (Dtype::BF16, 1),
        ] {
            let width = dtype.word_bits();
            let w = Words::from_fn(width, n, |_| lcg(&mut s) & mask(width) & 0xc3ff_f0ff);
            let (node, bytes) = program(&w, Some(dtype));
            assert_eq!(crate::dsl::execute(&node, u64::MAX).unwrap(), w, "{dtype}");
            assert!(bytes <= crate::codec::raw::size(width, n) + 16, "{dtype}");
        }
        // All positive: the sign is a constant.
        let w = Words::from_fn(32, 8192, |i| 0x3f80_0000 + i as u64);
        let (node, _) = program(&w, Some(Dtype::F32));
        assert!(node.to_string().contains("const 0"), "{node}");
        assert_eq!(crate::dsl::execute(&node, u64::MAX).unwrap(), w);
    }

    /// Which targets the fast level codes without a search: every long one and every
    /// short one (as a literal); one of 4,096 to 64 Ki words only when it is a float
    /// with more than 256 values (a tensor of 200 values, as a dequantized one, and a
    /// non-float one are searched).
    #[test]
    fn the_layout_takes_long_targets_and_distinct_floats() {
        let distinct = weights(8192);
        let mut s = 11;
        let repetitive = Words::from_fn(16, 8192, |_| 0x3c00 + lcg(&mut s) % 200);
        assert!(takes_the_layout(&distinct, Some(Dtype::BF16)));
        assert!(!takes_the_layout(&repetitive, Some(Dtype::BF16)));
        assert!(!takes_the_layout(&distinct, Some(Dtype::I16)));
        assert!(!takes_the_layout(&distinct, None));
        assert!(takes_the_layout(
            &weights(SMALL_WORDS - 1),
            Some(Dtype::BF16)
        ));
        assert!(takes_the_layout(&weights(SMALL_WORDS - 1), None));
        let (node, _) = program(&weights(SMALL_WORDS - 1), Some(Dtype::BF16));
        assert_eq!(node, short_literal(&weights(SMALL_WORDS - 1)));
        assert!(matches!(node.op(), crate::dsl::Op::Lit(l) if l.codec == CodecId::Huffman));
        let long = Words::from_fn(16, SEARCH_BELOW, |i| i as u64 % 3);
        assert!(takes_the_layout(&long, Some(Dtype::I16)));
        assert!(takes_the_layout(&long, None));
    }

    /// Which targets the default level takes as ordinary weights (the layout, no
    /// search): float weights from [`ORDINARY_WORDS`] words, not fewer, not of few values
    /// and not of another dtype.
    #[test]
    fn ordinary_weights_start_at_16_ki_words() {
        assert_eq!(ORDINARY_WORDS, 16_384);
        let bf16 = Some(Dtype::BF16);
        assert!(ordinary_weights(&weights(ORDINARY_WORDS), bf16, None));
        assert!(ordinary_weights(&weights(ORDINARY_WORDS), bf16, Some(128)));
        assert!(!ordinary_weights(&weights(ORDINARY_WORDS - 1), bf16, None));
        assert!(!ordinary_weights(
            &weights(ORDINARY_WORDS),
            Some(Dtype::I16),
            None
        ));
        assert!(!ordinary_weights(&weights(ORDINARY_WORDS), None, None));
        let mut s = 5;
        let few = Words::from_fn(16, ORDINARY_WORDS, |_| 0x3c00 + lcg(&mut s) % 200);
        assert!(!ordinary_weights(&few, bf16, None));
    }
}
