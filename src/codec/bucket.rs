//! Bucket codec: each word as its bit-length *bucket*, entropy coded, plus the
//! bucket's extra bits stored raw. The scheme of DEFLATE's length and distance codes,
//! JPEG's magnitude categories and zstd's offset codes, for streams whose words are
//! small integers of widely varying magnitude: a fine-tune's residual against its base
//! (docs/design.md §7), where a fixed split into fields wastes bits on the magnitudes
//! the split does not fit.
//!
//! Word `v` (after ZigZag, when the body says so) has bucket `k = bits_needed(v)`
//! (0 for `v = 0`, else `floor(log2 v) + 1`, at most `b`); its extra bits are the
//! `k - 1` bits below its leading one.
//!
//! **Context.** With the context flag, the bucket stream is coded as *symbols*
//! `s = k + e` for `k >= 1` (and `s = 0` for `k = 0`), where `e` is a bit field of the
//! word at the same position in a *context* stream the decoder is given: for a
//! reference record, its base tensor's words, and the field is their exponent. A
//! fine-tune's change of a weight is about the same size whatever the weight's
//! magnitude, so its residual in units of the weight's last place has a bucket about
//! `C - e`; the symbols `k + e` then cluster around `C` and one table codes them at
//! nearly the conditional entropy `H(k | e)` (fracast0-f32's optimizer steps: 2.55
//! bits per bucket against 3.27 without the context). A body with the flag is refused
//! where no context is given ([`decode`] with `None`).
//!
//! Body layout:
//!
//! | bytes | field |
//! | --- | --- |
//! | 1 | flags: bit 0 ZigZag (the words are `b`-bit two's complement, coded as their ZigZag), bit 1 context; other bits 0 |
//! | 2 | with the context flag only: the field's shift and width in bits (width 1..=16, `shift + width <=` the context's width) |
//! | 1 | the symbols' width `w` in bits, 1..=32 |
//! | 1 | the symbols' codec id (raw, bit packing, Huffman or rANS; not this codec) |
//! | 4 | the symbols' body length `m` in bytes, `u32` little-endian |
//! | m | the symbols' body: `n` words of `w` bits |
//! | rest | the extra bits, LSB first, word after word (`k - 1` bits for each word of bucket `k >= 2`), zero padded to a byte |
//!
//! **Speed.** [`decode`] and [`decode_combined`] work in blocks of [`BLOCK`] words: the
//! buckets from the symbols (less the context field) and their validity in one
//! branch-free pass that vectorizes, the extra bits read at positions a running sum gives
//! (an unaligned 8-byte load, a shift and a mask per word, no branch), the words
//! finished (ZigZag undone; with a base, combined with it) in a pass that vectorizes, and
//! appended to the output; nothing of the stream's length is allocated besides the
//! symbols and the output, and a context or base is read in place. Any damage makes the
//! block decoder give up, and the reference decoder ([`decode_reference`], word by word)
//! then says what is wrong, so both give the same words or the same error
//! (`fuzz/fuzz_targets/lit_bucket_paths.rs` holds them to it). On x86-64 processors
//! with AVX2, BMI2 and LZCNT the block decoder and the encoder's passes are compiled a
//! second time for them and that build is picked at run time.
//!
//! The encoder counts a stream in one pass ([`count`]) and writes the body from those
//! counts ([`encode_counted`]); the counts also give a lower bound on the body's length
//! ([`Counts::bound_len`]), so a caller choosing among codings encodes only those the
//! bound does not rule out.
//!
//! Why one file of some 1,300 lines (its tests are in `bucket/tests.rs`, its SIMD build
//! in `bucket/simd.rs`): the body layout, the counting pass, the encoder, the lower bound,
//! the block decoder and the reference decoder all follow one bucket and context rule,
//! and the two decoders must give the same words or the same error; they are kept side by
//! side so the encoder and both decoders are read (and changed) together.

use super::bitio::{peek64, BitReader};
use super::table::Word;
use super::{CodecError, CodecId};
use crate::tensor::with_buf;
use crate::tensor::{bits_needed, container_bytes, mask, WordBuf, Words};
use std::borrow::Cow;

mod simd;

const NAME: &str = "bucket";

/// Flag bit: the words are two's complement, coded as their ZigZag.
pub const FLAG_ZIGZAG: u8 = 1;
/// Flag bit: the buckets are offset by a field of a context stream.
pub const FLAG_CONTEXT: u8 = 2;

/// The context a literal's words are coded against: the words `words[start..start + n]`
/// line up with the literal's `n` words.
#[derive(Clone, Copy, Debug)]
pub struct Context<'a> {
    /// The whole context stream (a reference record's base tensor, as words of its
    /// width).
    pub words: &'a Words,
    /// The position in `words` of the literal's first word.
    pub start: usize,
}

/// The bit field of a context word that offsets the bucket: `(c >> shift) & (2^width - 1)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Field {
    /// The field's lowest bit.
    pub shift: u32,
    /// The field's width in bits, 1..=16.
    pub width: u32,
}

/// How [`encode`] codes the words.
#[derive(Clone, Copy, Debug)]
pub struct Params<'a> {
    /// Whether the words are two's complement, coded as their ZigZag.
    pub zigzag: bool,
    /// The context and the field of it that offsets the bucket; `None` for none.
    pub context: Option<(Context<'a>, Field)>,
}

/// Whether `body` has the context flag (is coded against a context stream).
pub fn has_context(body: &[u8]) -> bool {
    body.first().is_some_and(|f| f & FLAG_CONTEXT != 0)
}

fn unzigzag(z: u64, width: u32) -> u64 {
    crate::tensor::unzigzag(z, width)
}

/// The context field of each of `n` words from `ctx.start`, or the error that the
/// context is too short or too narrow for the field.
fn context_field(ctx: Context<'_>, field: Field, n: usize) -> Result<Words, CodecError> {
    let end = ctx.start.checked_add(n).filter(|&e| e <= ctx.words.len());
    let Some(end) = end else {
        return Err(CodecError::Invalid {
            codec: NAME,
            what: format!(
                "{n} words from position {} of a context of {} words",
                ctx.start,
                ctx.words.len()
            ),
        });
    };
    if field.width == 0 || field.width > 16 || field.shift + field.width > ctx.words.width() {
        return Err(CodecError::Invalid {
            codec: NAME,
            what: format!(
                "context field of {} bits at bit {} of {}-bit words",
                field.width,
                field.shift,
                ctx.words.width()
            ),
        });
    }
    let part = ctx.words.slice(ctx.start, end);
    Ok(crate::tensor::extract(part.buf(), field.shift, field.width))
}

/// How [`decode_combined`] combines each decoded word `r` with the base word `b` at its
/// position.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Combine {
    /// `b ^ r`.
    Xor,
    /// `b + r`, modulo `2^b` (`b` the words' width).
    Add,
}

/// A context's words lined up with a literal's, as little-endian bytes of `word_bytes`
/// each (the container of the context's width), and the field of them that offsets the
/// buckets. Borrowed from the context's container on a little-endian machine.
struct View<'a> {
    bytes: Cow<'a, [u8]>,
    word_bytes: usize,
    field: Field,
}

/// The context's words `start..start + n` as a [`View`], or the error that the context
/// is too short or too narrow for the field (the same as [`decode_reference`] gives).
fn context_view<'a>(ctx: Context<'a>, field: Field, n: usize) -> Result<View<'a>, CodecError> {
    let end = ctx.start.checked_add(n).filter(|&e| e <= ctx.words.len());
    let Some(end) = end else {
        return Err(context_too_short(ctx, n));
    };
    if field.width == 0 || field.width > 16 || field.shift + field.width > ctx.words.width() {
        return Err(field_outside(ctx, field));
    }
    let word_bytes = container_bytes(ctx.words.width());
    let bytes = if cfg!(target_endian = "little") {
        with_buf!(ctx.words.buf(), v => Cow::Borrowed(bytemuck::cast_slice(&v[ctx.start..end])))
    } else {
        let mut le = Vec::with_capacity(n * word_bytes);
        ctx.words.slice(ctx.start, end).write_le_bytes(&mut le);
        Cow::Owned(le)
    };
    Ok(View {
        bytes,
        word_bytes,
        field,
    })
}

fn context_too_short(ctx: Context<'_>, n: usize) -> CodecError {
    CodecError::Invalid {
        codec: NAME,
        what: format!(
            "{n} words from position {} of a context of {} words",
            ctx.start,
            ctx.words.len()
        ),
    }
}

fn field_outside(ctx: Context<'_>, field: Field) -> CodecError {
    CodecError::Invalid {
        codec: NAME,
        what: format!(
            "context field of {} bits at bit {} of {}-bit words",
            field.width,
            field.shift,
            ctx.words.width()
        ),
    }
}

/// The little-endian word of `N` bytes at the start of `b`.
#[inline(always)]
fn le_word<const N: usize>(b: &[u8]) -> u64 {
    match N {
        1 => u64::from(b[0]),
        2 => u64::from(u16::from_le_bytes([b[0], b[1]])),
        4 => u64::from(u32::from_le_bytes([b[0], b[1], b[2], b[3]])),
        _ => u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]),
    }
}

/// The low `len` bits set, `len` in 0..=63.
#[inline(always)]
fn low_bits(len: u32) -> u64 {
    (1u64 << len) - 1
}

// ---------------------------------------------------------------------------------------
// Encoding

/// What [`encode_counted`] needs of a stream besides its words, counted in one pass by
/// [`count`]: how many words fall in each bucket and, with a context, how many have each
/// symbol `k + e`. From these come the symbols' table and width, the extra bits' length,
/// and a lower bound on the body's length without encoding it ([`Counts::bound_len`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Counts {
    n: usize,
    zigzag: bool,
    /// `plain[k]`: words of bucket `k` (0..=64).
    plain: Vec<u64>,
    /// With a context: `offset[s]`, words of symbol `s` (`k + e`, or 0 for `k = 0`).
    offset: Option<Vec<u64>>,
}

/// Bytes of a body before the symbols' body without the context flag: flags, symbol
/// width, codec id, body length.
const HEAD_BYTES: u64 = 7;
/// Bytes the context flag adds: the field's shift and width.
const FIELD_BYTES: u64 = 2;
/// Bytes a coder of the symbols may write under their order-0 entropy (a rANS coder's
/// final states carry part of the message).
const ENTROPY_SLACK_BYTES: u64 = 16;

impl Counts {
    /// Words counted.
    pub fn len(&self) -> usize {
        self.n
    }

    /// Whether no words were counted.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Whether the words were counted against a context.
    pub fn has_context(&self) -> bool {
        self.offset.is_some()
    }

    /// Extra bits the words take in all: `k - 1` for each word of bucket `k >= 2`.
    pub fn extra_bits(&self) -> u64 {
        self.plain
            .iter()
            .enumerate()
            .map(|(k, &c)| c * (k as u64).saturating_sub(1))
            .sum()
    }

    /// The symbols' histogram, distinct symbols ascending with their (nonzero) counts:
    /// the buckets, or with `offset` the offset symbols (`None` if counted without a
    /// context).
    pub fn histogram(&self, offset: bool) -> Option<Vec<(u64, u64)>> {
        let counts = if offset {
            self.offset.as_ref()?
        } else {
            &self.plain
        };
        Some(
            counts
                .iter()
                .enumerate()
                .filter(|&(_, &c)| c > 0)
                .map(|(s, &c)| (s as u64, c))
                .collect(),
        )
    }

    /// A lower bound in bytes on the body [`encode`] writes for the words counted, plain
    /// or with `offset` (`None` if counted without a context): its fixed fields, the
    /// extra bits, and the symbols' order-0 entropy (no codec of the symbols takes fewer
    /// bits for them, tables aside) less [`ENTROPY_SLACK_BYTES`].
    pub fn bound_len(&self, offset: bool) -> Option<u64> {
        let hist = self.histogram(offset)?;
        let per_word = crate::stats::entropy_bits(hist.iter().map(|&(_, c)| c));
        let bits = self.extra_bits() as f64 + per_word * self.n as f64;
        let head = HEAD_BYTES + if offset { FIELD_BYTES } else { 0 };
        Some(head + ((bits / 8.0).floor() as u64).saturating_sub(ENTROPY_SLACK_BYTES))
    }
}

/// Counts `words` as [`encode`] codes them with `zigzag` and, if given, against
/// `context` ([`Counts`]): one pass, nothing written.
///
/// # Panics
/// If the context is shorter than the words or its field does not lie inside its words.
pub fn count(words: &Words, zigzag: bool, context: Option<(Context<'_>, Field)>) -> Counts {
    let view = context
        .map(|(c, f)| context_view(c, f, words.len()).expect("the context covers the words"));
    isa::count(words, zigzag, view.as_ref())
}

/// A container word's code and bucket, in its own type (so that a 16-bit stream's
/// passes vectorize 16 words to a 256-bit register).
trait Code: Word {
    /// The word or, with `zigzag`, its ZigZag as a `width`-bit word (`top = width - 1`,
    /// `wmask` the low `width` bits).
    fn code(self, zigzag: bool, top: u32, wmask: Self) -> Self;
    /// Its bucket: the bits it needs.
    fn bucket(self) -> u8;
}

macro_rules! impl_code {
    ($($t:ty),*) => {$(
        impl Code for $t {
            #[inline(always)]
            fn code(self, zigzag: bool, top: u32, wmask: $t) -> $t {
                if zigzag {
                    ((self << 1) ^ ((self >> top) & 1).wrapping_neg()) & wmask
                } else {
                    self
                }
            }
            #[inline(always)]
            fn bucket(self) -> u8 {
                (<$t>::BITS - self.leading_zeros()) as u8
            }
        }
    )*};
}
impl_code!(u8, u16, u32, u64);

/// A block of words' codes `z` (the words or their ZigZag), buckets `k` and, with a
/// context, symbols `s` (`k + e`, or 0 for `k = 0`): the encoder's passes share it.
#[inline(always)]
fn codes_block<T: Code>(
    w: &[T],
    width: u32,
    zigzag: bool,
    ctx: Option<(&[u8], usize, Field)>,
    z: &mut [T],
    k: &mut [u8],
    s: &mut [u32],
) {
    let wmask = T::from_u64(mask(width));
    let top = width - 1;
    for (o, &x) in z.iter_mut().zip(w) {
        *o = x.code(zigzag, top, wmask);
    }
    for (o, &x) in k.iter_mut().zip(z.iter()) {
        *o = x.bucket();
    }
    if let Some((bytes, nb, f)) = ctx {
        let fmask = mask(f.width) as u32;
        macro_rules! go {
            ($n:literal) => {
                for ((o, &b), c) in s.iter_mut().zip(k.iter()).zip(bytes.chunks_exact($n)) {
                    let e = (le_word::<$n>(c) >> f.shift) as u32 & fmask;
                    *o = if b == 0 { 0 } else { u32::from(b) + e };
                }
            };
        }
        match nb {
            1 => go!(1),
            2 => go!(2),
            4 => go!(4),
            _ => go!(8),
        }
    }
}

/// [`count`]'s pass, inlined into each build of [`isa::count`].
#[inline(always)]
fn count_in(words: &Words, zigzag: bool, view: Option<&View<'_>>) -> Counts {
    let width = words.width();
    let n = words.len();
    // Four tables each, used in turn, so that a run of equal symbols does not wait on
    // one counter; 32-bit counters (a block adds at most BLOCK to one), added up per
    // block into the totals.
    let mut plain = [[0u32; 256]; 4];
    let mut plain_total = [0u64; 65];
    let offset_len = view.map_or(0, |v| (1usize << v.field.width) + 65);
    let mut offset = vec![[0u32; 4]; offset_len];
    let mut offset_total = vec![0u64; offset_len];
    let mut k = [0u8; BLOCK];
    let mut s = [0u32; BLOCK];
    with_buf!(words.buf(), w => {
        let mut z = [Default::default(); BLOCK];
        for start in (0..n).step_by(BLOCK) {
            let m = BLOCK.min(n - start);
            let ctx = view.map(|v| {
                let nb = v.word_bytes;
                (&v.bytes[start * nb..(start + m) * nb], nb, v.field)
            });
            let (z, k, s) = (&mut z[..m], &mut k[..m], &mut s[..m]);
            codes_block(&w[start..start + m], width, zigzag, ctx, z, k, s);
            let mut quads = k.chunks_exact(4);
            for q in &mut quads {
                for (t, &b) in plain.iter_mut().zip(q) {
                    t[usize::from(b)] += 1;
                }
            }
            for &b in quads.remainder() {
                plain[0][usize::from(b)] += 1;
            }
            if view.is_some() {
                let mut quads = s.chunks_exact(4);
                for q in &mut quads {
                    for (j, &x) in q.iter().enumerate() {
                        if let Some(c) = offset.get_mut(x as usize) {
                            c[j] += 1;
                        }
                    }
                }
                for &x in quads.remainder() {
                    if let Some(c) = offset.get_mut(x as usize) {
                        c[0] += 1;
                    }
                }
            }
            if start % (64 * BLOCK) == 0 || start + m == n {
                for (t, c) in plain_total.iter_mut().enumerate() {
                    *c += plain.iter_mut().map(|p| u64::from(std::mem::take(&mut p[t]))).sum::<u64>();
                }
                for (t, c) in offset_total.iter_mut().zip(offset.iter_mut()) {
                    *t += c.iter_mut().map(|x| u64::from(std::mem::take(x))).sum::<u64>();
                }
            }
        }
    });
    let offset = view.map(|_| {
        let mut o = offset_total;
        while o.len() > 1 && o.last() == Some(&0) {
            o.pop();
        }
        o
    });
    Counts {
        n,
        zigzag,
        plain: plain_total.to_vec(),
        offset,
    }
}

/// The body for `words` coded as `params` says; the symbols take the smallest of the
/// other codecs ([`super::encode_best`]).
///
/// # Panics
/// If the context is shorter than the words or its field does not lie inside its words.
pub fn encode(words: &Words, params: Params<'_>) -> Vec<u8> {
    let counts = count(words, params.zigzag, params.context);
    encode_counted(words, params, &counts)
}

/// [`encode`] of words [`count`] counted with the same ZigZag (and, for a body with the
/// context flag, against the same context): the same body, without counting again.
///
/// # Panics
/// If the context is shorter than the words or its field does not lie inside its words;
/// if `counts` are of another length or ZigZag, or lack the context `params` asks for.
pub fn encode_counted(words: &Words, params: Params<'_>, counts: &Counts) -> Vec<u8> {
    let n = words.len();
    assert!(
        counts.n == n && counts.zigzag == params.zigzag,
        "counts of other words"
    );
    let view = params
        .context
        .map(|(c, f)| context_view(c, f, n).expect("the context covers the words"));
    let hist = counts
        .histogram(view.is_some())
        .expect("counted against the context it is coded against");
    let max = hist.last().map_or(0, |&(s, _)| s);
    let sym_width = bits_needed(max).max(1);
    let (symbols, extra) = isa::symbols(
        words,
        params.zigzag,
        view.as_ref(),
        sym_width,
        counts.extra_bits(),
    );
    let inner = if hist.len() <= super::MAX_TABLE_SYMBOLS {
        super::encode_best_with_histogram(&symbols, hist)
    } else {
        super::encode_best(&symbols)
    };
    let mut out = Vec::with_capacity(16 + inner.body.len() + extra.len());
    let flags =
        u8::from(params.zigzag) * FLAG_ZIGZAG + u8::from(params.context.is_some()) * FLAG_CONTEXT;
    out.push(flags);
    if let Some((_, field)) = params.context {
        out.push(field.shift as u8);
        out.push(field.width as u8);
    }
    out.push(sym_width as u8);
    out.push(inner.codec as u8);
    let len = u32::try_from(inner.body.len()).expect("a literal's symbols fit in 4 GiB");
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&inner.body);
    out.extend_from_slice(&extra);
    out
}

/// [`encode_counted`]'s pass over the words, inlined into each build of
/// [`isa::symbols`]: the symbols, `sym_width`-bit words, and the extra bits
/// (`extra_bits` of them, as counted) zero padded to a byte.
#[inline(always)]
fn symbols_in(
    words: &Words,
    zigzag: bool,
    view: Option<&View<'_>>,
    sym_width: u32,
    extra_bits: u64,
) -> (Words, Vec<u8>) {
    let width = words.width();
    let n = words.len();
    let mut bits = FastBits::new(extra_bits);
    let mut k = [0u8; BLOCK];
    let mut s = [0u32; BLOCK];
    macro_rules! symbols {
        ($t:ty) => {{
            let mut out: Vec<$t> = Vec::with_capacity(n);
            with_buf!(words.buf(), w => {
                let mut z = [Default::default(); BLOCK];
                for start in (0..n).step_by(BLOCK) {
                    let m = BLOCK.min(n - start);
                    let ctx = view.map(|v| {
                        let nb = v.word_bytes;
                        (&v.bytes[start * nb..(start + m) * nb], nb, v.field)
                    });
                    let (z, k, s) = (&mut z[..m], &mut k[..m], &mut s[..m]);
                    codes_block(&w[start..start + m], width, zigzag, ctx, z, k, s);
                    if ctx.is_some() {
                        out.extend(s.iter().map(|&x| x as $t));
                    } else {
                        out.extend(k.iter().map(|&x| x as $t));
                    }
                    bits.put_block(z, k);
                }
            });
            out
        }};
    }
    let buf = match container_bytes(sym_width) {
        1 => WordBuf::U8(symbols!(u8)),
        2 => WordBuf::U16(symbols!(u16)),
        _ => WordBuf::U32(symbols!(u32)),
    };
    (Words::from_buf_trusted(sym_width, buf), bits.finish())
}

/// An LSB-first bit writer ([`super::bitio`]'s order) into a buffer sized in advance
/// for a known number of bits, without a branch per value: each value is or-ed into a
/// 64-bit accumulator whose 8 bytes are stored at the current byte, which then advances
/// by the whole bytes filled.
struct FastBits {
    buf: Vec<u8>,
    /// Bytes the bits fill.
    bytes: usize,
    /// Where the accumulator's first byte goes.
    at: usize,
    acc: u64,
    /// Bits pending in `acc`, below 8 between values.
    pending: u32,
}

impl FastBits {
    fn new(bits: u64) -> FastBits {
        let bytes = usize::try_from(bits.div_ceil(8)).expect("extra bits fit in memory");
        FastBits {
            buf: vec![0; bytes + 16],
            bytes,
            at: 0,
            acc: 0,
            pending: 0,
        }
    }

    /// Appends the extra bits of a block of words coded `z` of buckets `k`: the `k - 1`
    /// bits below each word's leading one (none for `k < 2`).
    #[inline(always)]
    fn put_block<T: Word>(&mut self, z: &[T], k: &[u8]) {
        let (mut at, mut acc, mut pending) = (self.at, self.acc, self.pending);
        // The buffer holds every bit and 16 bytes more, so a store at `at` fits as long
        // as the bits counted are the bits written.
        let limit = self.buf.len() - 8;
        for (&x, &b) in z.iter().zip(k) {
            let len = u32::from(b).saturating_sub(1);
            let v = x.into() & low_bits(len);
            let (first, rest) = if len > 56 { (32, len - 32) } else { (len, 0) };
            acc |= (v & low_bits(first)) << pending;
            pending += first;
            let at8 = at.min(limit);
            self.buf[at8..at8 + 8].copy_from_slice(&acc.to_le_bytes());
            let whole = pending & !7;
            at += (whole / 8) as usize;
            acc >>= whole;
            pending &= 7;
            if rest > 0 {
                acc |= (v >> 32) << pending;
                pending += rest;
                let at8 = at.min(limit);
                self.buf[at8..at8 + 8].copy_from_slice(&acc.to_le_bytes());
                let whole = pending & !7;
                at += (whole / 8) as usize;
                acc >>= whole;
                pending &= 7;
            }
        }
        (self.at, self.acc, self.pending) = (at, acc, pending);
    }

    fn finish(mut self) -> Vec<u8> {
        debug_assert_eq!(self.at + usize::from(self.pending > 0), self.bytes);
        self.buf.truncate(self.bytes);
        self.buf
    }
}

/// Bytes of `body` before the extra bits that are parameters and tables: the header and
/// the symbols' table (their codec's [`super::select::table_len`]); the whole body if it
/// does not parse.
pub fn table_len(body: &[u8], n: usize) -> Result<u64, CodecError> {
    let h = header(body)?;
    let inner = &body[h.symbols.clone()];
    Ok(h.symbols.start as u64 + super::select::table_len(h.codec, inner, h.sym_width, n))
}

/// A body's fields before the extra bits.
struct Header {
    flags: u8,
    field: Option<Field>,
    sym_width: u32,
    codec: CodecId,
    /// Where the symbols' body lies in the body.
    symbols: std::ops::Range<usize>,
}

fn header(body: &[u8]) -> Result<Header, CodecError> {
    let mut at = 0;
    let flags = byte(body, &mut at)?;
    if flags & !(FLAG_ZIGZAG | FLAG_CONTEXT) != 0 {
        return Err(invalid(format!("unknown flags {flags:#04x}")));
    }
    let field = if flags & FLAG_CONTEXT != 0 {
        Some(Field {
            shift: u32::from(byte(body, &mut at)?),
            width: u32::from(byte(body, &mut at)?),
        })
    } else {
        None
    };
    let sym_width = u32::from(byte(body, &mut at)?);
    if !(1..=32).contains(&sym_width) {
        return Err(invalid(format!(
            "symbol width {sym_width}, expected 1..=32"
        )));
    }
    let codec_id = byte(body, &mut at)?;
    let codec = match CodecId::from_u8(codec_id) {
        Some(c) if c != CodecId::Bucket => c,
        _ => return Err(invalid(format!("symbol codec {codec_id}"))),
    };
    let mut len = [0u8; 4];
    for b in &mut len {
        *b = byte(body, &mut at)?;
    }
    let len = u64::from(u32::from_le_bytes(len));
    let end = usize::try_from(len)
        .ok()
        .and_then(|l| at.checked_add(l))
        .filter(|&e| e <= body.len())
        .ok_or(CodecError::Truncated {
            codec: NAME,
            needed: (at as u64).saturating_add(len),
            available: body.len() as u64,
        })?;
    Ok(Header {
        flags,
        field,
        sym_width,
        codec,
        symbols: at..end,
    })
}

fn invalid(what: String) -> CodecError {
    CodecError::Invalid { codec: NAME, what }
}

fn byte(body: &[u8], at: &mut usize) -> Result<u8, CodecError> {
    let b = *body.get(*at).ok_or(CodecError::Truncated {
        codec: NAME,
        needed: *at as u64 + 1,
        available: body.len() as u64,
    })?;
    *at += 1;
    Ok(b)
}

// ---------------------------------------------------------------------------------------
// Decoding

/// Decodes a body of `n` words of `width` bits; `context` is the stream a body with the
/// context flag is coded against (ignored by one without).
///
/// # Errors
/// [`CodecError::Invalid`] for unknown flags, a context flag with no context (or one
/// too short, or a field outside its words), a symbol codec that is this codec or
/// unknown, a symbol that is no bucket of `width`-bit words; [`CodecError::Truncated`]
/// and [`CodecError::TrailingBytes`] for a body of the wrong length; the symbol codec's
/// errors.
pub fn decode(
    body: &[u8],
    width: u32,
    n: usize,
    context: Option<Context<'_>>,
) -> Result<Words, CodecError> {
    match decode_blocks(body, width, n, context, Build::Best) {
        Some(words) => Ok(words),
        None => decode_reference(body, width, n, context),
    }
}

/// Which build of the block decoder runs (for the tests and the differential fuzz
/// target; [`decode`] takes the best).
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Build {
    /// The baseline build, on every machine.
    Portable,
    /// The build for AVX2 where the processor has it, without the AVX-512 steps.
    Avx2,
    /// The build for this processor's features where there is one, else the baseline.
    Best,
}

/// The block decoder of [`decode`] in `build`: `None` where it gives up, which it does
/// exactly on the bodies [`decode_reference`] refuses (and on a big-endian machine,
/// where it does not run).
#[doc(hidden)]
pub fn decode_blocks(
    body: &[u8],
    width: u32,
    n: usize,
    context: Option<Context<'_>>,
    build: Build,
) -> Option<Words> {
    if !(1..=64).contains(&width) || cfg!(target_endian = "big") {
        return None;
    }
    let h = header(body).ok()?;
    let view = match (h.field, context) {
        (None, _) => None,
        (Some(_), None) => return None,
        (Some(f), Some(ctx)) => Some(context_view(ctx, f, n).ok()?),
    };
    let symbols = super::decode(h.codec, &body[h.symbols.clone()], h.sym_width, n).ok()?;
    let extra = &body[h.symbols.end..];
    let zigzag = h.flags & FLAG_ZIGZAG != 0;
    macro_rules! into {
        ($t:ty, $variant:ident) => {{
            let mut out: Vec<$t> = super::table::try_with_capacity(n, NAME).ok()?;
            let mut sink = |le: &[u8]| {
                out.extend(
                    le.chunks_exact(size_of::<$t>())
                        .map(|c| <$t>::from_le_bytes(c.try_into().expect("a word's bytes"))),
                )
            };
            let job = Blocks {
                symbols: &symbols,
                extra,
                width,
                zigzag,
                view: view.as_ref(),
                base: None,
            };
            isa::blocks(&job, &mut sink, build)?;
            WordBuf::$variant(out)
        }};
    }
    let buf = match container_bytes(width) {
        1 => into!(u8, U8),
        2 => into!(u16, U16),
        4 => into!(u32, U32),
        _ => into!(u64, U64),
    };
    Some(Words::from_buf_trusted(width, buf))
}

/// Decodes a body of `n` words of `width` bits (8, 16, 32 or 64) coded against `base`
/// (their base words, little-endian, `n * width / 8` bytes: the context of a body with
/// the context flag) and appends to `out` each word combined with its base word by `op`,
/// little-endian: a reference record's residual turned into its tensor's bytes in one
/// pass, the base read in place.
///
/// # Errors
/// As [`decode`]; [`CodecError::Invalid`] for another width, a base of another length,
/// or an output that cannot be allocated.
pub fn decode_combined(
    body: &[u8],
    width: u32,
    n: usize,
    base: &[u8],
    op: Combine,
    out: &mut Vec<u8>,
) -> Result<(), CodecError> {
    let word_bytes = container_bytes(width);
    if !matches!(width, 8 | 16 | 32 | 64) || Some(base.len()) != n.checked_mul(word_bytes) {
        return Err(invalid(format!(
            "a base of {} bytes for {n} words of {width} bits",
            base.len()
        )));
    }
    out.try_reserve(base.len())
        .map_err(|_| invalid(format!("cannot allocate {n} words")))?;
    if combined_blocks(body, width, n, base, op, out, Build::Best).is_some() {
        return Ok(());
    }
    // Damaged (or a big-endian machine): the reference decoder says why.
    let ctx = Words::from_le_bytes(width, base).expect("checked width and length");
    let words = decode_reference(
        body,
        width,
        n,
        Some(Context {
            words: &ctx,
            start: 0,
        }),
    )?;
    for (i, b) in base.chunks_exact(word_bytes).enumerate() {
        let mut le = [0u8; 8];
        le[..word_bytes].copy_from_slice(b);
        let (b, r) = (u64::from_le_bytes(le), words.get(i));
        let w = match op {
            Combine::Xor => b ^ r,
            Combine::Add => b.wrapping_add(r),
        };
        out.extend_from_slice(&w.to_le_bytes()[..word_bytes]);
    }
    Ok(())
}

/// The block decoder of [`decode_combined`] in `build`: `None` (and `out` as it was)
/// where it gives up. The caller checked the width and the base's length.
#[doc(hidden)]
pub fn combined_blocks(
    body: &[u8],
    width: u32,
    n: usize,
    base: &[u8],
    op: Combine,
    out: &mut Vec<u8>,
    build: Build,
) -> Option<()> {
    if cfg!(target_endian = "big") {
        return None;
    }
    let h = header(body).ok()?;
    let word_bytes = container_bytes(width);
    let view = h.field.map(|field| View {
        bytes: Cow::Borrowed(base),
        word_bytes,
        field,
    });
    if h.field
        .is_some_and(|f| f.width == 0 || f.width > 16 || f.shift + f.width > width)
    {
        return None;
    }
    let symbols = super::decode(h.codec, &body[h.symbols.clone()], h.sym_width, n).ok()?;
    let job = Blocks {
        symbols: &symbols,
        extra: &body[h.symbols.end..],
        width,
        zigzag: h.flags & FLAG_ZIGZAG != 0,
        view: view.as_ref(),
        base: Some((base, op)),
    };
    let start = out.len();
    let mut sink = |le: &[u8]| out.extend_from_slice(le);
    if isa::blocks(&job, &mut sink, build).is_none() {
        out.truncate(start);
        return None;
    }
    Some(())
}

/// The reference decoder: word by word, each extra bit read checked. [`decode`] runs
/// it only on bodies the block decoder gives up on, to say what is wrong with them.
///
/// # Errors
/// As [`decode`].
#[doc(hidden)]
pub fn decode_reference(
    body: &[u8],
    width: u32,
    n: usize,
    context: Option<Context<'_>>,
) -> Result<Words, CodecError> {
    let h = header(body)?;
    let offsets = match (h.field, context) {
        (None, _) => None,
        (Some(_), None) => {
            return Err(invalid(
                "coded against its base tensor's words, which were not given \
                 (decode the record with its base)"
                    .into(),
            ))
        }
        (Some(field), Some(ctx)) => Some(context_field(ctx, field, n)?),
    };
    let (flags, sym_width, codec, end) = (h.flags, h.sym_width, h.codec, h.symbols.end);
    let symbols = super::decode(codec, &body[h.symbols], sym_width, n)?;
    let mut extra = BitReader::new(&body[end..], NAME);
    let mut out: Vec<u64> = super::table::try_with_capacity(n, NAME)?;
    let zig = flags & FLAG_ZIGZAG != 0;
    let offsets = offsets.map(|o| o.to_u64s());
    for (i, s) in symbols.to_u64s().into_iter().enumerate() {
        let k = match &offsets {
            Some(o) if s > 0 => s.checked_sub(o[i]).filter(|&k| k >= 1),
            _ => Some(s),
        };
        let k = match k {
            Some(k) if k <= u64::from(width) => k as u32,
            _ => {
                return Err(invalid(format!(
                    "symbol {s} of word {i} is no bucket of {width}-bit words"
                )))
            }
        };
        let z = match k {
            0 => 0,
            1 => 1,
            k => (1u64 << (k - 1)) | extra.read(k - 1)?,
        };
        out.push(if zig { unzigzag(z, width) } else { z });
    }
    extra.finish()?;
    Ok(Words::from_u64s(width, &out))
}

/// Words a block decodes: its buckets, extra bits and output words stay in the L1 cache.
pub const BLOCK: usize = 512;

/// One decode for the block decoder.
struct Blocks<'a> {
    /// The symbols, decoded by their codec.
    symbols: &'a Words,
    /// The extra bits.
    extra: &'a [u8],
    /// The words' width.
    width: u32,
    zigzag: bool,
    /// The context (a body with the context flag), lined up with the words.
    view: Option<&'a View<'a>>,
    /// The base words (little-endian, of the words' width) each word is combined with.
    base: Option<(&'a [u8], Combine)>,
}

/// Extra bits' values of bucket `k`'s leading one: `2^(k - 1)` for `k` in 1..=64, else 0.
static LEAD: [u64; 256] = {
    let mut t = [0u64; 256];
    let mut k = 1;
    while k <= 64 {
        t[k] = 1 << (k - 1);
        k += 1;
    }
    t
};

/// The block decoder's work, inlined into each build of [`isa::blocks`]: every block's
/// words, little-endian of the width's container, handed to `sink` in order. `None` at
/// the first symbol that is no bucket, extra bits that run out, or trailing bytes or
/// nonzero padding after them. With `simd` (the build for processors with AVX2), words
/// of at most 16 bits are decoded eight at a time by [`simd::steps_checked`] (sixteen
/// with `sixteen` on a processor with AVX-512), and only a block's last few words by the
/// scalar passes.
#[inline(always)]
fn blocks_in(
    job: &Blocks<'_>,
    sink: &mut dyn FnMut(&[u8]),
    simd: bool,
    sixteen: bool,
) -> Option<()> {
    let n = job.symbols.len();
    let width = job.width;
    let word_bytes = container_bytes(width);
    let extra = job.extra;
    let total = extra.len() as u64 * 8;
    let wide = width > 57;
    let wmask = mask(width);
    let simd = simd
        && width <= 16
        && job.view.is_none_or(|v| v.word_bytes <= 2)
        && matches!(job.symbols.buf(), WordBuf::U8(_) | WordBuf::U16(_));
    let mut k = [0u8; BLOCK];
    let mut z = [0u64; BLOCK];
    let mut out = [0u8; 8 * BLOCK];
    let mut pos = 0u64;
    for start in (0..n).step_by(BLOCK) {
        let m = BLOCK.min(n - start);
        let out = &mut out[..m * word_bytes];
        let base = |from: usize| {
            job.base
                .map(|(b, op)| (&b[from * word_bytes..(start + m) * word_bytes], op))
        };
        let mut done = 0;
        if simd {
            let syms = match job.symbols.buf() {
                WordBuf::U8(v) => simd::Syms::U8(&v[start..start + m]),
                WordBuf::U16(v) => simd::Syms::U16(&v[start..start + m]),
                _ => unreachable!("checked above"),
            };
            let ctx = job.view.map(|v| {
                let nb = v.word_bytes;
                let f = v.field;
                (
                    &v.bytes[start * nb..(start + m) * nb],
                    nb,
                    f.shift,
                    mask(f.width) as u32,
                )
            });
            let steps = simd::Steps {
                syms,
                ctx,
                base: base(start),
                zigzag: job.zigzag,
                width,
                word_bytes,
                extra,
            };
            let (d, bad) = simd::steps_checked(&steps, &mut pos, out, sixteen);
            if bad {
                return None;
            }
            done = d;
        }
        if done < m {
            let from = start + done;
            let k = &mut k[..m - done];
            let (bad, bits) = buckets(job, from, k);
            if bad || pos + bits > total {
                return None;
            }
            let z = &mut z[..m - done];
            if !wide && (pos + bits) / 8 + 8 <= extra.len() as u64 {
                extra_fast(k, extra, &mut pos, z);
            } else {
                extra_checked(k, extra, &mut pos, z);
            }
            let out = &mut out[done * word_bytes..];
            finish(z, base(from), job.zigzag, wmask, word_bytes, out);
        }
        sink(out);
    }
    // As `BitReader::finish`: no whole byte left, zero padding.
    if pos.div_ceil(8) != extra.len() as u64 {
        return None;
    }
    let tail = if pos.is_multiple_of(8) {
        0
    } else {
        extra[(pos / 8) as usize] >> (pos % 8)
    };
    (tail == 0).then_some(())
}

/// A block's buckets from its symbols (less the context field), into `k`: whether a
/// symbol is no bucket, and the extra bits the block takes (meaningless if one is not).
#[inline(always)]
#[allow(clippy::unnecessary_cast)] // `with_buf!` casts every container, u32 included
fn buckets(job: &Blocks<'_>, start: usize, k: &mut [u8]) -> (bool, u64) {
    let m = k.len();
    let width = job.width;
    // Symbols are at most 32 bits wide, context fields 16: the arithmetic is on u32 so
    // that it vectorizes.
    let bad = with_buf!(job.symbols.buf(), s => {
        let s = &s[start..start + m];
        match job.view {
            None => {
                let mut bad = 0u32;
                for (o, &x) in k.iter_mut().zip(s) {
                    let x = x as u32;
                    bad |= u32::from(x > width);
                    *o = x as u8;
                }
                bad
            }
            Some(v) => {
                let f = v.field;
                let fmask = mask(f.width) as u32;
                let nb = v.word_bytes;
                let ctx = &v.bytes[start * nb..(start + m) * nb];
                macro_rules! go {
                    ($n:literal) => {{
                        let mut bad = 0u32;
                        for ((o, &x), c) in k.iter_mut().zip(s).zip(ctx.chunks_exact($n)) {
                            let x = x as u32;
                            let e = (le_word::<$n>(c) >> f.shift) as u32 & fmask;
                            let b = if x == 0 { 0 } else { x.wrapping_sub(e) };
                            bad |= u32::from((x != 0) & (b.wrapping_sub(1) >= width));
                            *o = b as u8;
                        }
                        bad
                    }};
                }
                match nb {
                    1 => go!(1),
                    2 => go!(2),
                    4 => go!(4),
                    _ => go!(8),
                }
            }
        }
    });
    let bits: u32 = k.iter().map(|&b| u32::from(b.saturating_sub(1))).sum();
    (bad != 0, u64::from(bits))
}

/// A block's words before ZigZag from their buckets `k` (of at most 57 bits), reading
/// the extra bits from bit `pos` by unaligned 8-byte loads: the caller checked that
/// every load lies inside `extra`.
#[inline(always)]
fn extra_fast(k: &[u8], extra: &[u8], pos: &mut u64, z: &mut [u64]) {
    let mut p = *pos;
    for (o, &b) in z.iter_mut().zip(k) {
        let len = u32::from(b).saturating_sub(1);
        let at = (p / 8) as usize;
        let w = u64::from_le_bytes(extra[at..at + 8].try_into().expect("8 bytes"));
        *o = LEAD[usize::from(b)] | ((w >> (p % 8)) & low_bits(len));
        p += u64::from(len);
    }
    *pos = p;
}

/// [`extra_fast`] for the last blocks of a stream and words of more than 57 bits: every
/// load checked (bits past the end read as zero; the caller checked that the bits the
/// block takes are there).
#[inline(always)]
fn extra_checked(k: &[u8], extra: &[u8], pos: &mut u64, z: &mut [u64]) {
    let mut p = *pos;
    for (o, &b) in z.iter_mut().zip(k) {
        let len = u32::from(b).saturating_sub(1);
        let v = if len <= 56 {
            peek64(extra, p) & low_bits(len)
        } else {
            (peek64(extra, p) & mask(32)) | (peek64(extra, p + 32) & low_bits(len - 32)) << 32
        };
        *o = LEAD[usize::from(b)] | v;
        p += u64::from(len);
    }
    *pos = p;
}

/// A block's words finished into `out` (little-endian, `word_bytes` each): ZigZag
/// undone, combined with the base words.
#[inline(always)]
fn finish(
    z: &[u64],
    base: Option<(&[u8], Combine)>,
    zigzag: bool,
    wmask: u64,
    word_bytes: usize,
    out: &mut [u8],
) {
    macro_rules! of_width {
        ($n:literal) => {
            match (zigzag, base) {
                (false, None) => finish_as::<$n, false, NONE>(z, &[], wmask, out),
                (true, None) => finish_as::<$n, true, NONE>(z, &[], wmask, out),
                (false, Some((b, Combine::Xor))) => finish_as::<$n, false, XOR>(z, b, wmask, out),
                (true, Some((b, Combine::Xor))) => finish_as::<$n, true, XOR>(z, b, wmask, out),
                (false, Some((b, Combine::Add))) => finish_as::<$n, false, ADD>(z, b, wmask, out),
                (true, Some((b, Combine::Add))) => finish_as::<$n, true, ADD>(z, b, wmask, out),
            }
        };
    }
    match word_bytes {
        1 => of_width!(1),
        2 => of_width!(2),
        4 => of_width!(4),
        _ => of_width!(8),
    }
}

const NONE: u8 = 0;
const XOR: u8 = 1;
const ADD: u8 = 2;

#[inline(always)]
fn finish_as<const N: usize, const ZIG: bool, const OP: u8>(
    z: &[u64],
    base: &[u8],
    wmask: u64,
    out: &mut [u8],
) {
    let code = |r: u64| {
        if ZIG {
            ((r >> 1) ^ (r & 1).wrapping_neg()) & wmask
        } else {
            r
        }
    };
    if OP == NONE {
        for (o, &r) in out.chunks_exact_mut(N).zip(z) {
            o.copy_from_slice(&code(r).to_le_bytes()[..N]);
        }
    } else {
        for ((o, &r), b) in out.chunks_exact_mut(N).zip(z).zip(base.chunks_exact(N)) {
            let b = le_word::<N>(b);
            let w = if OP == XOR {
                b ^ code(r)
            } else {
                b.wrapping_add(code(r))
            };
            o.copy_from_slice(&w.to_le_bytes()[..N]);
        }
    }
}

/// The passes compiled twice: for the baseline and, on x86-64, for processors with AVX2,
/// BMI2 and LZCNT (variable shifts without flags, `lzcnt` for bit lengths, wider
/// vectors), that build picked at run time. Both compute the same results.
mod isa {
    use super::*;

    /// Whether this processor runs the second build.
    #[cfg(target_arch = "x86_64")]
    fn native() -> bool {
        std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("bmi1")
            && std::arch::is_x86_feature_detected!("bmi2")
            && std::arch::is_x86_feature_detected!("lzcnt")
    }

    /// Defines `fn $name(args) -> ret` as `$inner(args)`, in the build for this processor
    /// (or the baseline if `$portable` is true).
    macro_rules! two_builds {
        ($(#[$m:meta])* fn $name:ident($($a:ident: $t:ty),*) -> $ret:ty = $inner:path;) => {
            $(#[$m])*
            pub(super) fn $name($($a: $t,)* portable: bool) -> $ret {
                #[cfg(target_arch = "x86_64")]
                if !portable && native() {
                    #[target_feature(enable = "avx2,bmi1,bmi2,lzcnt")]
                    fn with_features($($a: $t),*) -> $ret {
                        $inner($($a),*)
                    }
                    // SAFETY: the processor has these features (`native`).
                    return unsafe { with_features($($a),*) };
                }
                let _ = portable;
                $inner($($a),*)
            }
        };
    }

    two_builds! {
        /// [`super::count_in`].
        fn count_with(words: &Words, zigzag: bool, view: Option<&View<'_>>) -> Counts = count_in;
    }

    two_builds! {
        /// [`super::symbols_in`].
        fn symbols_with(
            words: &Words,
            zigzag: bool,
            view: Option<&View<'_>>,
            sym_width: u32,
            extra_bits: u64
        ) -> (Words, Vec<u8>) = symbols_in;
    }

    pub(super) fn count(words: &Words, zigzag: bool, view: Option<&View<'_>>) -> Counts {
        count_with(words, zigzag, view, false)
    }

    pub(super) fn symbols(
        words: &Words,
        zigzag: bool,
        view: Option<&View<'_>>,
        sym_width: u32,
        extra_bits: u64,
    ) -> (Words, Vec<u8>) {
        symbols_with(words, zigzag, view, sym_width, extra_bits, false)
    }

    /// [`super::blocks_in`]: in `build` [`Build::Best`], the build for this processor,
    /// with its SIMD steps (sixteen words a step with AVX-512, eight with AVX2); in
    /// [`Build::Avx2`], eight.
    pub(super) fn blocks(
        job: &Blocks<'_>,
        sink: &mut dyn FnMut(&[u8]),
        build: Build,
    ) -> Option<()> {
        #[cfg(target_arch = "x86_64")]
        if build != Build::Portable && native() {
            #[target_feature(enable = "avx2,bmi1,bmi2,lzcnt")]
            fn with_features(
                job: &Blocks<'_>,
                sink: &mut dyn FnMut(&[u8]),
                sixteen: bool,
            ) -> Option<()> {
                blocks_in(job, sink, true, sixteen)
            }
            // SAFETY: the processor has these features (`native`).
            return unsafe { with_features(job, sink, build == Build::Best) };
        }
        let _ = build;
        blocks_in(job, sink, false, false)
    }
}

#[cfg(test)]
mod tests;
