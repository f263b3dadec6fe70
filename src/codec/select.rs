//! Codec selection: the smallest complete encoding wins (docs/design.md §4).
//!
//! One histogram pass serves both table codecs, and they share the symbol-set encoding.
//! Raw, bit-packed and Huffman sizes follow from the width, the largest word and the
//! histogram without encoding. A table codec is planned only when the entropy bound plus
//! its count and set fields can beat the best so far, and rANS is encoded only when a
//! proven lower bound on its size ([`rans::Plan::lower_bound`]) can; that encoding is then
//! the result.

use super::table::{count_bits, plan_set};
use super::{
    bitpack, bucket, huffman, rans, rans8, raw, CodecError, CodecId, Stream, MAX_TABLE_SYMBOLS,
};
use crate::stats::histogram;
use crate::tensor::{bits_needed, Words};

/// The smallest size in bytes a table codec (Huffman, rANS) body must have to be chosen
/// over a plain (raw or bit-packed) body of `plain` bytes: it must save at least
/// `plain / 1024` (about 0.1%). Table codecs decode several times slower than plain
/// words, so a stream they barely shrink (a near-uniform mantissa field, say) is stored
/// plain; the same trade zstd makes when it keeps literals raw unless Huffman saves
/// enough. Everything that picks or sizes a literal applies this rule, so the search's
/// sizes are the sizes the literals get.
pub fn table_bar(plain: u64) -> u64 {
    plain - plain / 1024
}

/// The size of the body [`encode_best`] chooses from the sizes of [`all_sizes`].
pub fn chosen_size(sizes: &Sizes) -> u64 {
    let plain = sizes[0]
        .into_iter()
        .chain(sizes[1])
        .min()
        .unwrap_or(u64::MAX);
    let table = sizes[2..].iter().flatten().copied().min();
    match table {
        Some(t) if t < table_bar(plain) => t,
        _ => plain,
    }
}

/// Exact body sizes in bytes per codec, in [`super::ALL_CODECS`] order; `None` where a
/// codec does not apply.
pub type Sizes = [Option<u64>; super::ALL_CODECS.len()];

/// A literal's chosen codec and its body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Encoded {
    /// The codec.
    pub codec: CodecId,
    /// The body: parameters, tables, payload.
    pub body: Vec<u8>,
}

/// What every codec needs to know about a stream, from one pass (two for wide streams
/// with too many distinct words for the tables).
struct Analysis {
    /// Bits per word of the smallest bit packing.
    pack_bits: u32,
    /// Distinct words with their counts, ascending; `None` above [`MAX_TABLE_SYMBOLS`].
    hist: Option<Vec<(u64, u64)>>,
}

impl Analysis {
    /// The histogram pass, skipped when [`crate::stats::beyond_tables`] says the
    /// stream has more distinct words than the table codecs take (counting a float's
    /// mantissas in a hash table until it overflowed was most of the time an F32
    /// literal took).
    fn of(words: &Words) -> Analysis {
        let hist = if crate::stats::beyond_tables(words) {
            None
        } else {
            histogram(words, MAX_TABLE_SYMBOLS)
        };
        let max = match &hist {
            Some(h) => h.last().map_or(0, |&(s, _)| s),
            None => words.max().unwrap_or(0),
        };
        Analysis {
            pack_bits: bits_needed(max),
            hist,
        }
    }
}

/// Encodes `words` with every applicable codec and keeps the smallest body; ties go to
/// the codec that comes first in [`super::ALL_CODECS`], and a table codec must beat
/// the plain codecs by [`table_bar`].
pub fn encode_best(words: &Words) -> Encoded {
    encode_analyzed(Stream::Words(words), Analysis::of(words), Rans::Wide)
}

/// [`encode_best`] without codec `rans8` (the classic `rans` layout for every length):
/// the literal of a `rans8` body's escaped words, which may not be `rans8` again.
pub(crate) fn encode_best_without_rans8(words: &Words) -> Encoded {
    encode_analyzed(Stream::Words(words), Analysis::of(words), Rans::Classic)
}

/// The smallest of raw, bit packing and canonical Huffman for `words`, ties and the
/// table codec's bar as in [`encode_best`]: the fast level's literal for short
/// tensors, where planning and running an rANS coder as well (to find it a few bytes
/// smaller, when it is) took most of their time.
pub fn encode_without_rans(words: &Words) -> Encoded {
    encode_analyzed(Stream::Words(words), Analysis::of(words), Rans::Not)
}

/// Which rANS coder [`encode_analyzed`] tries.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Rans {
    /// `rans8` where its layout applies ([`RansPlan::new`] with `wide`), else `rans`.
    Wide,
    /// The classic `rans` at every length.
    Classic,
    /// None.
    Not,
}

/// [`encode_best`] with the histogram of `words` already counted: its distinct words
/// ascending with their counts (at most [`MAX_TABLE_SYMBOLS`] of them, nonzero counts,
/// summing to `words.len()`). Saves the histogram pass; the result is the same.
pub fn encode_best_with_histogram(words: &Words, hist: Vec<(u64, u64)>) -> Encoded {
    encode_stream_with_histogram(Stream::Words(words), hist)
}

/// [`encode_best_with_histogram`] for a stream that may be a bit field of wider words
/// ([`Stream::Field`], read in place by rANS and bit packing): the same codec and body
/// as for the field's own words.
pub fn encode_stream_with_histogram(stream: Stream<'_>, hist: Vec<(u64, u64)>) -> Encoded {
    debug_assert!(hist.len() <= MAX_TABLE_SYMBOLS);
    debug_assert_eq!(
        hist.iter().map(|&(_, c)| c).sum::<u64>(),
        stream.len() as u64
    );
    let max = hist.last().map_or(0, |&(s, _)| s);
    let a = Analysis {
        pack_bits: bits_needed(max),
        hist: Some(hist),
    };
    encode_analyzed(stream, a, Rans::Wide)
}

/// What both table codecs need before planning: the symbols, their set encoding, and
/// lower bounds in bytes on the Huffman and the rANS body ([`huffman::body_lower_bound`],
/// [`rans::body_lower_bound`]: the count and set fields, at least a bit per code length
/// or frequency, and the least payload of any model at the codec's longest code or
/// highest precision; rANS's renormalization losses too). A codec whose bound does not
/// come under the best so far need not be planned.
pub(crate) struct TableBounds {
    /// The distinct words, ascending.
    pub(crate) syms: Vec<u64>,
    /// Their set encoding, shared by both codecs.
    pub(crate) set: super::table::SetPlan,
    /// Bytes no Huffman body can come under.
    pub(crate) huff_lb: u64,
    /// Bytes no rANS body can come under.
    pub(crate) rans_lb: u64,
}

impl TableBounds {
    /// The bounds for histogram `hist` (distinct words ascending with their counts) of
    /// `n` words of `width` bits.
    pub(crate) fn of(hist: &[(u64, u64)], width: u32, n: usize) -> TableBounds {
        TableBounds::for_codecs(hist, width, n, true)
    }

    /// [`TableBounds::of`], with the rANS bound left at `u64::MAX` (not computed)
    /// unless `rans`.
    fn for_codecs(hist: &[(u64, u64)], width: u32, n: usize, rans: bool) -> TableBounds {
        let syms: Vec<u64> = hist.iter().map(|&(s, _)| s).collect();
        let set = plan_set(&syms, width);
        let head = count_bits(width, n) + set.bits;
        let (huff_lb, rans_lb) = if hist.len() <= 1 {
            // No frequency or length is written: the count and set fields are the body.
            (head / 8, head.div_ceil(8))
        } else {
            let mut counts: Vec<u64> = hist.iter().map(|&(_, c)| c).collect();
            counts.sort_unstable();
            (
                huffman::body_lower_bound(&counts, n, head),
                if rans {
                    rans::body_lower_bound(&counts, n, head)
                } else {
                    u64::MAX
                },
            )
        };
        TableBounds {
            syms,
            set,
            huff_lb,
            rans_lb,
        }
    }

    /// Bytes neither table codec's body can come under.
    pub(crate) fn lower(&self) -> u64 {
        self.huff_lb.min(self.rans_lb)
    }
}

/// The body size in bytes [`encode_best`] gives `words` (what [`chosen_size`] picks
/// from [`all_sizes`]), planning a table codec only when its lower bound leaves it a
/// chance and sizing rANS by running its coder without output.
pub fn best_size(words: &Words) -> u64 {
    let (width, n) = (words.width(), words.len());
    let a = Analysis::of(words);
    let plain = raw::size(width, n).min(bitpack::size_for(a.pack_bits, n));
    let bar = table_bar(plain);
    let Some(hist) = &a.hist else {
        return plain;
    };
    let b = TableBounds::of(hist, width, n);
    let mut best = bar;
    if b.huff_lb < best {
        best = best.min(huffman::Plan::with_set(hist, width, n, b.syms.clone(), b.set).size());
    }
    if b.rans_lb < best {
        if let Some(plan) = RansPlan::new(hist, Stream::Words(words), b.syms, b.set, true) {
            if plan.lower_bound() < best {
                best = best.min(plan.size(Stream::Words(words)));
            }
        }
    }
    if best < bar {
        best
    } else {
        plain
    }
}

fn encode_analyzed(stream: Stream<'_>, a: Analysis, rans: Rans) -> Encoded {
    let (width, n) = (stream.width(), stream.len());
    let mut best = (CodecId::Raw, raw::size(width, n));
    let bp = bitpack::size_for(a.pack_bits, n);
    if bp < best.1 {
        best = (CodecId::BitPack, bp);
    }
    // A table codec must come in under this (and under the best so far).
    let bar = table_bar(best.1);
    best.1 = best.1.min(bar);
    let plain = best.0;
    let mut huff = None;
    if let Some(hist) = &a.hist {
        // Plan a table codec only when its bound leaves it a chance.
        let TableBounds {
            syms,
            set,
            huff_lb,
            rans_lb,
        } = TableBounds::for_codecs(hist, width, n, rans != Rans::Not);
        if huff_lb < best.1 {
            let plan = huffman::Plan::with_set(hist, width, n, syms.clone(), set);
            if plan.size() < best.1 {
                best = (CodecId::Huffman, plan.size());
            }
            huff = Some(plan);
        }
        if rans != Rans::Not && rans_lb < best.1 {
            if let Some(e) = encode_rans(stream, hist, syms, set, best.1, rans == Rans::Wide) {
                return e;
            }
        }
    }
    let mut body = Vec::with_capacity(best.1 as usize);
    if best.0 == plain {
        // No table codec came under the bar.
        best.1 = if plain == CodecId::Raw {
            raw::size(width, n)
        } else {
            bp
        };
    }
    match best.0 {
        CodecId::Raw => raw::encode(&stream.to_words(), &mut body),
        CodecId::BitPack => bitpack::encode_k_stream(stream, a.pack_bits, &mut body),
        CodecId::Huffman => {
            if let Some(plan) = &huff {
                plan.encode(&stream.to_words(), &mut body);
            }
        }
        CodecId::Rans | CodecId::Rans32 | CodecId::Rans8 => unreachable!("rans returns early"),
        CodecId::Bucket => unreachable!("bucket is not among the chosen codecs"),
    }
    debug_assert_eq!(body.len() as u64, best.1);
    Encoded {
        codec: best.0,
        body,
    }
}

/// The rANS coder [`encode_best`] writes for a stream: codec `rans8` for the streams
/// the wide layout is for ([`rans::Layout::for_len`]), the classic `rans` below.
/// `rans32` is no longer written (it decodes as before): `rans8` codes the same streams
/// within a few bytes at one lookup a word.
#[derive(Clone, Debug)]
pub(crate) enum RansPlan {
    /// Codec `rans`.
    Classic(rans::Plan),
    /// Codec `rans8`.
    Rans8(rans8::Plan),
}

impl RansPlan {
    /// The plan for a stream of `n` words of `width` bits with histogram `hist` (its
    /// symbols `syms`, their set plan `set`); without `wide`, the classic `rans` at every
    /// length (the escaped words of a `rans8` body). `None` for an empty stream.
    pub(crate) fn new(
        hist: &[(u64, u64)],
        stream: Stream<'_>,
        syms: Vec<u64>,
        set: super::table::SetPlan,
        wide: bool,
    ) -> Option<RansPlan> {
        let (width, n) = (stream.width(), stream.len());
        if wide && rans::Layout::for_len(n) == rans::Layout::Wide {
            rans8::Plan::for_stream(stream, hist).map(RansPlan::Rans8)
        } else {
            Some(RansPlan::Classic(rans::Plan::with_set(
                hist, width, n, syms, set,
            )))
        }
    }

    /// A size in bytes the body can never be smaller than.
    pub(crate) fn lower_bound(&self) -> u64 {
        match self {
            RansPlan::Classic(p) => p.lower_bound(),
            RansPlan::Rans8(p) => p.lower_bound(),
        }
    }

    /// The exact body size in bytes of `stream` (the stream the plan was made from), by
    /// running the coder.
    pub(crate) fn size(&self, stream: Stream<'_>) -> u64 {
        match self {
            RansPlan::Classic(p) => p.size(&stream.to_words()),
            RansPlan::Rans8(p) => p.size(stream),
        }
    }

    /// Appends the body of `stream` and returns its codec.
    pub(crate) fn encode(&self, stream: Stream<'_>, out: &mut Vec<u8>) -> CodecId {
        match self {
            RansPlan::Classic(p) => {
                p.encode_stream(stream, out);
                p.codec()
            }
            RansPlan::Rans8(p) => {
                p.encode(stream, out);
                CodecId::Rans8
            }
        }
    }

    /// Whether the body is `rans8`'s (the wide slot of [`Sizes`]).
    pub(crate) fn is_rans8(&self) -> bool {
        matches!(self, RansPlan::Rans8(_))
    }
}

/// The rANS body of `stream` (histogram `hist`, its symbols `syms` and their set plan
/// `set`) as [`RansPlan`] writes it, if it comes under `bar` bytes.
fn encode_rans(
    stream: Stream<'_>,
    hist: &[(u64, u64)],
    syms: Vec<u64>,
    set: super::table::SetPlan,
    bar: u64,
    wide: bool,
) -> Option<Encoded> {
    let plan = RansPlan::new(hist, stream, syms, set, wide)?;
    if plan.lower_bound() >= bar {
        return None;
    }
    let mut body = Vec::new();
    let codec = plan.encode(stream, &mut body);
    ((body.len() as u64) < bar).then_some(Encoded { codec, body })
}

/// Exact body size in bytes each codec would produce, in [`super::ALL_CODECS`] order;
/// `None` where a codec does not apply (Huffman and rANS above [`MAX_TABLE_SYMBOLS`]
/// distinct words, and the rANS layout [`rans::Layout::for_len`] does not pick for the
/// length). Runs the rANS encoder without storing its output.
pub fn all_sizes(words: &Words) -> Sizes {
    let (width, n) = (words.width(), words.len());
    let a = Analysis::of(words);
    let (h, r) = match &a.hist {
        Some(hist) => {
            let syms: Vec<u64> = hist.iter().map(|&(s, _)| s).collect();
            let set = plan_set(&syms, width);
            let huff = huffman::Plan::with_set(hist, width, n, syms.clone(), set).size();
            let plan = RansPlan::new(hist, Stream::Words(words), syms, set, true);
            (
                Some(huff),
                plan.map(|p| (p.size(Stream::Words(words)), p.is_rans8())),
            )
        }
        None => (None, None),
    };
    [
        Some(raw::size(width, n)),
        Some(bitpack::size_for(a.pack_bits, n)),
        h,
        r.filter(|r| !r.1).map(|r| r.0),
        None,
        r.filter(|r| r.1).map(|r| r.0),
    ]
}

/// Encodes `words` with `codec`; `None` if the codec does not apply.
pub fn encode_with(codec: CodecId, words: &Words) -> Option<Encoded> {
    let mut body = Vec::new();
    match codec {
        CodecId::Raw => raw::encode(words, &mut body),
        CodecId::BitPack => bitpack::encode(words, &mut body),
        CodecId::Huffman => huffman::encode(words, &mut body)?,
        CodecId::Rans => rans::encode(words, &mut body, rans::Layout::Classic)?,
        CodecId::Rans32 => rans::encode(words, &mut body, rans::Layout::Wide)?,
        CodecId::Rans8 => rans8::encode(words, &mut body)?,
        CodecId::Bucket => {
            body = bucket::encode(
                words,
                bucket::Params {
                    zigzag: false,
                    context: None,
                },
            )
        }
    }
    Some(Encoded { codec, body })
}

/// Bytes at the start of a body that are parameters and tables rather than payload: 0
/// for raw, 1 for bit packing, the symbol table and code lengths (rounded up to a byte;
/// the payload starts inside that byte) for Huffman, the symbol and frequency table for
/// rANS. For a body whose table cannot be parsed, the whole body.
pub fn table_len(codec: CodecId, body: &[u8], width: u32, n: usize) -> u64 {
    let len = body.len() as u64;
    let t = match codec {
        CodecId::Raw => Ok(0),
        CodecId::BitPack => Ok(1),
        CodecId::Huffman => huffman::table_bits(body, width, n).map(|b| b.div_ceil(8)),
        CodecId::Rans | CodecId::Rans32 => rans::table_bytes(body, width, n),
        CodecId::Rans8 => rans8::table_bytes(body, width, n),
        CodecId::Bucket => bucket::table_len(body, n),
    };
    t.map_or(len, |t| t.min(len))
}

/// Decodes `n` words of `width` bits (1..=64) from exactly `body`.
///
/// # Errors
/// A width outside 1..=64, or any error of the codec's decoder.
pub fn decode(codec: CodecId, body: &[u8], width: u32, n: usize) -> Result<Words, CodecError> {
    if !(1..=64).contains(&width) {
        return Err(CodecError::Invalid {
            codec: codec.name(),
            what: format!("word width {width}, expected 1..=64"),
        });
    }
    match codec {
        CodecId::Raw => raw::decode(body, width, n),
        CodecId::BitPack => bitpack::decode(body, width, n),
        CodecId::Huffman => huffman::decode(body, width, n),
        CodecId::Rans => rans::decode(body, width, n, rans::Layout::Classic),
        CodecId::Rans32 => rans::decode(body, width, n, rans::Layout::Wide),
        CodecId::Rans8 => rans8::decode(body, width, n),
        CodecId::Bucket => bucket::decode(body, width, n, None),
    }
}

/// [`decode`] of a literal that may be coded against `context` (a [`bucket`] body with
/// the context flag; the other codecs ignore it).
///
/// # Errors
/// As [`decode`].
pub fn decode_in(
    codec: CodecId,
    body: &[u8],
    width: u32,
    n: usize,
    context: Option<bucket::Context<'_>>,
) -> Result<Words, CodecError> {
    match codec {
        CodecId::Bucket if (1..=64).contains(&width) => bucket::decode(body, width, n, context),
        c => decode(c, body, width, n),
    }
}

/// Whether `body` decodes to exactly field `(shift, width)` of `src`, the words
/// `(v >> shift) & (2^width - 1)` of its words `v` (all of `src` for `shift = 0, width =
/// src.width()`), as [`decode`] followed by a comparison says; the rANS wide layout is
/// checked without decoding ([`rans::matches_field`]), the other codecs decode and
/// compare.
///
/// # Errors
/// As [`decode`].
///
/// # Panics
/// If the field does not lie inside the words (`shift + width > src.width()`).
pub fn matches_field(
    codec: CodecId,
    body: &[u8],
    src: &Words,
    shift: u32,
    width: u32,
) -> Result<bool, CodecError> {
    assert!(
        shift + width <= src.width(),
        "the field lies inside the words"
    );
    match codec {
        CodecId::Rans32 => rans::matches_field(body, src, shift, width, rans::Layout::Wide),
        CodecId::BitPack => bitpack::matches_field(body, src, shift, width),
        CodecId::Raw => raw::matches_field(body, src, shift, width),
        _ => {
            let words = decode(codec, body, width, src.len())?;
            Ok(equals_field(&words, src, shift))
        }
    }
}

/// Whether `words` are field `(shift, words.width())` of `src`: as many, and each
/// `(v >> shift) & (2^width - 1)` of the word `v` of `src` at its place.
pub fn equals_field(words: &Words, src: &Words, shift: u32) -> bool {
    words.len() == src.len() && buf_equals_field(words.buf(), src, 0, shift, words.width())
}

feature_fn! {
    "avx2";
    /// Whether `part` holds field `(shift, width)` of the words of `src` from index `start`
    /// on (`part.len()` of them, which must be there): each `(v >> shift) & (2^width - 1)`.
    /// False if the field does not lie inside `src`'s words.
    /// Compiled a second time with AVX2 (the comparison vectorizes twice as wide),
    /// picked at run time.
    pub(crate) fn buf_equals_field(part: &crate::tensor::WordBuf, src: &Words, start: usize, shift: u32, width: u32) -> bool = buf_equals_field_in;
}

/// [`buf_equals_field`]'s work, inlined into each of its builds.
#[inline(always)]
fn buf_equals_field_in(
    part: &crate::tensor::WordBuf,
    src: &Words,
    start: usize,
    shift: u32,
    width: u32,
) -> bool {
    if shift + width > src.width() {
        return false;
    }
    let m = crate::tensor::mask(width);
    let end = start + crate::with_buf!(part, v => v.len());
    // No early exit, and the arithmetic in the narrow types the words come in: the loops
    // vectorize.
    macro_rules! differ {
        ($a:expr, $b:expr, $t:ty) => {{
            let (sh, mt) = (shift, m as $t);
            $a.iter()
                .zip($b[start..end].iter())
                .fold(0 as $t, |d, (&x, &y)| {
                    d | (<$t>::from(x) ^ ((y >> sh) & mt))
                })
                != 0
        }};
    }
    use crate::tensor::WordBuf::{U16, U8};
    let differ = match (part, src.buf()) {
        (U8(a), U8(b)) => differ!(a, b, u8),
        (U8(a), U16(b)) => differ!(a, b, u16),
        (U16(a), U16(b)) => differ!(a, b, u16),
        (a, b) => {
            crate::with_buf!(a, a => crate::with_buf!(b, b => any_differ(a, &b[start..end], shift, m)))
        }
    };
    !differ
}

/// Whether any `a[i]` differs from `(b[i] >> shift) & m`, in 64-bit arithmetic.
fn any_differ<A: Copy + Into<u64>, B: Copy + Into<u64>>(
    a: &[A],
    b: &[B],
    shift: u32,
    m: u64,
) -> bool {
    a.iter().zip(b).fold(0u64, |d, (&x, &y)| {
        d | (x.into() ^ ((y.into() >> shift) & m))
    }) != 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_smallest_with_tie_order() {
        // Empty: raw is 0 bytes, Huffman and rANS too; raw wins the tie.
        let e = encode_best(&Words::empty(8));
        assert_eq!((e.codec, e.body.len()), (CodecId::Raw, 0));
        assert_eq!(
            all_sizes(&Words::empty(8)),
            [Some(0), Some(1), Some(0), Some(0), None, None]
        );
        // Small values in wide words: bit packing.
        let w = Words::from_u64s(32, &[1, 2, 3, 0, 1, 2, 3, 0]);
        let e = encode_best(&w);
        assert_eq!(
            (e.codec, e.body.clone()),
            (CodecId::BitPack, vec![2, 0x39, 0x39])
        );
        // A skewed stream: entropy coding.
        let v: Vec<u64> = (0..4000u64)
            .map(|i| if i % 10 == 0 { i % 7 } else { 3 })
            .collect();
        let w = Words::from_u64s(8, &v);
        let e = encode_best(&w);
        let sizes = all_sizes(&w);
        assert!(matches!(e.codec, CodecId::Huffman | CodecId::Rans));
        assert_eq!(Some(e.body.len() as u64), sizes[e.codec as usize]);
        assert_eq!(decode(e.codec, &e.body, 8, v.len()).unwrap(), w);
    }

    /// [`best_size`] skips planning where a bound rules a codec out, and still gives
    /// exactly the size [`encode_best`] writes: on constant, plain, skewed, flat, wide and
    /// long streams.
    #[test]
    fn best_size_is_the_encoded_size() {
        let cases = [
            Words::empty(8),
            Words::from_fn(16, 384, |_| 0x3F80),
            Words::from_fn(32, 500, |i| i as u64 * 2_654_435_761 % (1 << 32)),
            Words::from_fn(8, 4000, |i| if i % 10 == 0 { i as u64 % 7 } else { 3 }),
            Words::from_fn(8, 4096, |i| i as u64 % 256),
            Words::from_fn(11, 70_000, |i| {
                (i as u64 * 40_503 % 37) * (i as u64 % 5 + 1)
            }),
            Words::from_fn(16, 1536, |i| 0x3C00 + (i as u64 * 7919 % 61)),
        ];
        for w in &cases {
            let e = encode_best(w);
            assert_eq!(best_size(w), e.body.len() as u64, "{} words", w.len());
            assert_eq!(best_size(w), chosen_size(&all_sizes(w)));
        }
    }

    /// The rANS-free literal: never rANS, the smallest of the other codecs, so the same
    /// body as [`encode_best`] wherever that is not rANS, and not smaller where it is.
    #[test]
    fn literals_without_rans_are_the_best_of_the_rest() {
        let mut seed = 3u64;
        let mut next = || {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
            seed >> 33
        };
        let mut kinds = std::collections::BTreeSet::new();
        for (width, n, spread) in [
            (16u32, 384usize, 7u64),
            (32, 512, 1 << 30),
            (8, 3000, 200),
            (16, 100, 1),
            (32, 64, 3),
        ] {
            let words = Words::from_fn(width, n, |_| next() % spread * (next() % 3));
            let best = encode_best(&words);
            let quick = encode_without_rans(&words);
            assert!(!matches!(
                quick.codec,
                CodecId::Rans | CodecId::Rans8 | CodecId::Rans32
            ));
            assert_eq!(decode(quick.codec, &quick.body, width, n).unwrap(), words);
            if matches!(best.codec, CodecId::Rans | CodecId::Rans8) {
                assert!(quick.body.len() >= best.body.len());
            } else {
                assert_eq!(quick, best);
            }
            kinds.insert(format!("{:?}", best.codec));
        }
        assert!(kinds.len() >= 2, "{kinds:?}");
    }

    #[test]
    fn wide_streams_skip_table_codecs() {
        let w = Words::from_fn(32, 70_000, |i| i as u64 * 2654435761 % (1 << 32));
        assert_eq!(all_sizes(&w)[2..], [None, None, None, None]);
        let e = encode_best(&w);
        assert_eq!(e.codec, CodecId::Raw);
        assert!(encode_with(CodecId::Huffman, &w).is_none());
    }

    #[test]
    fn table_len_per_codec() {
        let w = Words::from_u64s(8, &[5, 5, 5, 7]);
        let e = encode_with(CodecId::Huffman, &w).unwrap();
        // 2 + 14 + 6 table bits: 3 bytes (the payload starts in the third).
        assert_eq!(table_len(CodecId::Huffman, &e.body, 8, 4), 3);
        assert_eq!(table_len(CodecId::BitPack, &[3, 0], 8, 4), 1);
        assert_eq!(table_len(CodecId::Raw, &[1, 2], 8, 2), 0);
        assert_eq!(table_len(CodecId::Rans, &[0xFF], 8, 4), 1);
    }

    /// A bit field read in place ([`Stream::Field`]) gets the codec and body of the
    /// field's own words, whichever codec wins: rANS of both layouts (SIMD and scalar
    /// lengths), bit packing at 1, 4 and other widths, Huffman and raw; fields of 8- and
    /// 16-bit words and of 32-bit ones (extracted first), at the bottom, middle and top.
    #[test]
    fn field_streams_encode_as_their_own_words() {
        let mix = |i: u64| i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 20;
        let cases: [(u32, usize); 5] = [
            (16, 70_000), // wide rANS layout, SIMD groups and a scalar tail
            (16, 5_003),  // classic layout
            (8, 70_001),
            (32, 9_000),
            (16, 13),
        ];
        let mut codecs = std::collections::BTreeSet::new();
        for (bits, n) in cases {
            // Bits 0-3 flat (bit-packed), 4-7 geometric (dyadic: Huffman), 8-13 skewed
            // (rANS), 16-23 random bytes (raw, in 32-bit words), the top two a cycle.
            let v: Vec<u64> = (0..n as u64)
                .map(|i| {
                    let h = mix(i);
                    let geo = u64::from(h.trailing_zeros().min(15));
                    let skew = (h % 61).min(h % 5 + (h >> 9) % 3);
                    let x = ((h >> 13) % 16) | (geo << 4) | (skew << 8) | (((h >> 24) % 256) << 16);
                    (x | (i % 3) << (bits - 2)) & crate::tensor::mask(bits)
                })
                .collect();
            let words = Words::from_u64s(bits, &v);
            let mut fields = vec![(0, 4), (4, 4), (4, bits - 6), (bits - 1, 1), (bits - 2, 2)];
            if bits >= 16 {
                fields.push((8, 6));
            }
            if bits == 32 {
                fields.push((16, 8));
            }
            for (shift, width) in fields {
                let own = crate::tensor::extract(words.buf(), shift, width);
                let hist = histogram(&own, MAX_TABLE_SYMBOLS).expect("few symbols");
                let want = encode_best_with_histogram(&own, hist.clone());
                let field = Stream::Field {
                    words: &words,
                    shift,
                    width,
                };
                let got = encode_stream_with_histogram(field, hist);
                assert_eq!(
                    got, want,
                    "{bits}-bit words, {n} of them, field {shift}+{width}"
                );
                assert_eq!(field.to_words().as_ref(), &own);
                codecs.insert(got.codec);
            }
        }
        assert_eq!(
            codecs.into_iter().collect::<Vec<_>>(),
            [
                CodecId::Raw,
                CodecId::BitPack,
                CodecId::Huffman,
                CodecId::Rans,
                CodecId::Rans8
            ],
            "every codec was exercised"
        );
    }
}
