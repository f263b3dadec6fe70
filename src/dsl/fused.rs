//! Running a program straight into the bytes of its output (DESIGN §3, §8; issue 42):
//! what decoding an archive does with every record.
//!
//! [`super::exec::execute`] builds every node's words in a stream of its own and
//! combines them; for a float tensor coded as `merge fields[...]` of literals that is a
//! stream per field of the tensor's length, written once and read once more, and an
//! output allocated (and faulted in) for every tensor. [`execute_into`] instead writes
//! the output's little-endian bytes into a slice the caller owns (and reuses), and runs
//! a `merge` of literals and constants a block of [`BLOCK`] words at a time: each child
//! decodes its next block into a buffer that stays in the L1 cache (the literal
//! decoders keep their state between blocks: `rans8`'s states, bit packing's position),
//! the block's fields are combined there and stored. A `concat` writes each child into
//! its part of the slice (children of a large one in parallel); a literal decodes into
//! the slice where its codec can. Other operators run as [`super::exec`] runs them and
//! are copied in. The bytes are those `execute` gives, in the same order.

use super::exec::{run_node, ExecError};
use super::program::{MergeFn, Node, Op, Ty};
use crate::codec::table::Word;
use crate::codec::{bitpack, rans8, CodecError, CodecId};
use crate::tensor::{container_bytes, WordBuf, Words};

/// Words a `merge` decodes and combines at a time: a multiple of 64 (`rans8`'s states)
/// and of 8 (bit packing's byte boundary), small enough that a block of 64-bit words and
/// its fields stay in the L1 cache.
pub const BLOCK: usize = 2048;

/// Children of a `concat` of at least this many words in all are run in parallel.
const PARALLEL_WORDS: u64 = 1 << 20;

/// Writes the output of `node` into `out` as the little-endian bytes of its words'
/// container (1, 2, 4 or 8 bytes a word by width, as [`Words`] holds them).
///
/// # Errors
/// As [`super::execute`].
///
/// # Panics
/// If `out.len()` is not the output's length in bytes.
pub fn execute_into(node: &Node, out: &mut [u8]) -> Result<(), ExecError> {
    let ty = node.ty();
    let wb = container_bytes(ty.width);
    assert_eq!(
        out.len() as u64,
        ty.len * wb as u64,
        "the output slice holds the program's words"
    );
    match (node.op(), wb) {
        (Op::Concat(children), _) => concat_into(children, wb, ty.len, out),
        (Op::Const(v), 1) => {
            out.fill(*v as u8);
            Ok(())
        }
        (Op::Const(v), _) => {
            let bytes = v.to_le_bytes();
            for c in out.chunks_exact_mut(wb) {
                c.copy_from_slice(&bytes[..wb]);
            }
            Ok(())
        }
        (Op::Lit(lit), _) if fusable_lit(lit.codec) => {
            let lit_err = |source| ExecError::Lit { ty, source };
            let mut src = Source::of(node).map_err(lit_err)?;
            with_typed(out, ty.width, |o| src.fill_all(o)).map_err(lit_err)
        }
        (Op::Merge(MergeFn::Fields(widths), children), _) if children.iter().all(fusable_leaf) => {
            merge_into(ty, widths, children, out)
        }
        _ => {
            let words = run_node(node)?;
            copy_words(&words, out);
            Ok(())
        }
    }
}

/// Runs the children of a `concat` of `len` words into their parts of `out`.
fn concat_into(children: &[Node], wb: usize, len: u64, out: &mut [u8]) -> Result<(), ExecError> {
    let mut parts = Vec::with_capacity(children.len());
    let mut rest = out;
    for c in children {
        let (part, tail) = rest.split_at_mut(c.ty().len as usize * wb);
        parts.push((c, part));
        rest = tail;
    }
    if len >= PARALLEL_WORDS && children.len() >= 2 {
        use rayon::prelude::*;
        let results: Vec<Result<(), ExecError>> = parts
            .into_par_iter()
            .map(|(c, part)| execute_into(c, part))
            .collect();
        // The first failing child, in order, is the error (as `execute` reports it).
        results.into_iter().collect()
    } else {
        parts
            .into_iter()
            .try_for_each(|(c, part)| execute_into(c, part))
    }
}

/// Whether a literal of `codec` is decoded block by block ([`Source`]).
fn fusable_lit(codec: CodecId) -> bool {
    matches!(codec, CodecId::Rans8 | CodecId::BitPack | CodecId::Raw)
}

/// Whether a `merge` child can be a [`Source`]: a literal (of any codec: one that does
/// not decode in blocks is decoded first) or a constant.
fn fusable_leaf(node: &Node) -> bool {
    matches!(node.op(), Op::Lit(_) | Op::Const(_))
}

/// Runs `f` on `out` viewed as words of the container of `width`-bit words: in place on
/// a little-endian machine when `out` is aligned for them, else through a buffer.
fn with_typed<R, E>(
    out: &mut [u8],
    width: u32,
    f: impl FnOnce(&mut TypedOut<'_>) -> Result<R, E>,
) -> Result<R, E> {
    macro_rules! typed {
        ($t:ty, $variant:ident) => {{
            if cfg!(target_endian = "little") {
                if let Ok(v) = bytemuck::try_cast_slice_mut::<u8, $t>(out) {
                    return f(&mut TypedOut::$variant(v));
                }
            }
            let mut v: Vec<$t> = vec![0; out.len() / std::mem::size_of::<$t>()];
            let r = f(&mut TypedOut::$variant(&mut v))?;
            for (c, x) in out.chunks_exact_mut(std::mem::size_of::<$t>()).zip(&v) {
                c.copy_from_slice(&x.to_le_bytes());
            }
            Ok(r)
        }};
    }
    match container_bytes(width) {
        1 => f(&mut TypedOut::U8(out)),
        2 => typed!(u16, U16),
        4 => typed!(u32, U32),
        _ => typed!(u64, U64),
    }
}

/// An output slice as words of its container.
enum TypedOut<'a> {
    U8(&'a mut [u8]),
    U16(&'a mut [u16]),
    U32(&'a mut [u32]),
    U64(&'a mut [u64]),
}

/// Copies `words` into `out` as little-endian bytes of their container.
fn copy_words(words: &Words, out: &mut [u8]) {
    fn go<T: Copy, const N: usize>(v: &[T], out: &mut [u8], le: impl Fn(T) -> [u8; N]) {
        for (c, &x) in out.chunks_exact_mut(N).zip(v) {
            c.copy_from_slice(&le(x));
        }
    }
    match words.buf() {
        WordBuf::U8(v) => out.copy_from_slice(v),
        WordBuf::U16(v) => go(v, out, u16::to_le_bytes),
        WordBuf::U32(v) => go(v, out, u32::to_le_bytes),
        WordBuf::U64(v) => go(v, out, u64::to_le_bytes),
    }
}

/// A leaf that gives its words a block at a time.
enum Source<'a> {
    Const(u64),
    /// Boxed: the decoder's lane states make it ~3 KB.
    Rans8(Box<rans8::Decoder<'a>>),
    /// Bit-packed words (`k` bits each; raw words are packed whole bytes): the packed
    /// bytes and the next word's index.
    Packed {
        data: &'a [u8],
        k: u32,
        at: usize,
    },
    /// Words decoded whole (a codec that does not decode in blocks), and the next one.
    Words {
        words: Words,
        at: usize,
    },
}

impl<'a> Source<'a> {
    /// The source of leaf `node` (a literal or a constant).
    fn of(node: &'a Node) -> Result<Source<'a>, CodecError> {
        let ty = node.ty();
        let n = usize::try_from(ty.len).map_err(|_| CodecError::Invalid {
            codec: "lit",
            what: format!("length {} does not fit in memory", ty.len),
        })?;
        match node.op() {
            Op::Const(v) => Ok(Source::Const(*v)),
            Op::Lit(lit) => match lit.codec {
                CodecId::Rans8 => Ok(Source::Rans8(Box::new(
                    rans8::parse(&lit.body, ty.width, n)?.decoder()?,
                ))),
                CodecId::BitPack => match bitpack::packed(&lit.body, ty.width, n)? {
                    (0, _) => Ok(Source::Const(0)),
                    (k, data) => Ok(Source::Packed { data, k, at: 0 }),
                },
                CodecId::Raw if matches!(ty.width, 8 | 16 | 32 | 64) => {
                    crate::codec::raw::check_len(&lit.body, ty.width, n)?;
                    Ok(Source::Packed {
                        data: &lit.body,
                        k: ty.width,
                        at: 0,
                    })
                }
                _ => Ok(Source::Words {
                    words: lit.decode(ty)?,
                    at: 0,
                }),
            },
            _ => unreachable!("sources are literals and constants"),
        }
    }

    /// The next `out.len()` words (blocks of a multiple of 64 words but the last).
    fn fill<T: Word>(&mut self, out: &mut [T]) -> Result<(), CodecError> {
        match self {
            Source::Const(v) => out.fill(T::from_u64(*v)),
            Source::Rans8(d) => d.next(out)?,
            Source::Packed { data, k, at } => {
                let start = *at * *k as usize / 8;
                bitpack::unpack_into(&data[start..], *k, out);
                *at += out.len();
            }
            Source::Words { words, at } => {
                let end = *at + out.len();
                crate::with_buf!(words.buf(), v => {
                    for (o, &x) in out.iter_mut().zip(&v[*at..end]) {
                        // `with_buf!` instantiates this for u64 words too.
                        #[allow(clippy::useless_conversion)]
                        let x = u64::from(x);
                        *o = T::from_u64(x);
                    }
                });
                *at = end;
            }
        }
        Ok(())
    }

    /// All the words into `out`.
    fn fill_all(&mut self, out: &mut TypedOut<'_>) -> Result<(), CodecError> {
        fn go<T: Word>(s: &mut Source<'_>, out: &mut [T]) -> Result<(), CodecError> {
            for block in out.chunks_mut(16 * BLOCK) {
                s.fill(block)?;
            }
            Ok(())
        }
        match out {
            TypedOut::U8(o) => go(self, o),
            TypedOut::U16(o) => go(self, o),
            TypedOut::U32(o) => go(self, o),
            TypedOut::U64(o) => go(self, o),
        }
    }
}

/// Runs `merge fields[widths]` of leaves `children` into `out`, [`BLOCK`] words at a
/// time: each child decodes a block into a buffer of its own words' container, which
/// is widened, shifted and OR-ed into the output's block.
fn merge_into(ty: Ty, widths: &[u32], children: &[Node], out: &mut [u8]) -> Result<(), ExecError> {
    let mut sources = Vec::with_capacity(children.len());
    let mut shift = ty.width;
    for (c, &w) in children.iter().zip(widths) {
        let s = Source::of(c).map_err(|source| ExecError::Lit { ty: c.ty(), source })?;
        shift -= w;
        sources.push((s, c.ty(), shift, Block::for_width(w)));
    }
    let r = with_typed(out, ty.width, |o| match o {
        TypedOut::U8(o) => merge_blocks(&mut sources, o),
        TypedOut::U16(o) => merge_blocks(&mut sources, o),
        TypedOut::U32(o) => merge_blocks(&mut sources, o),
        TypedOut::U64(o) => merge_blocks(&mut sources, o),
    });
    r.map_err(|(k, source)| ExecError::Lit {
        ty: sources[k].1,
        source,
    })
}

/// A block of a `merge` child's words, in their container.
enum Block {
    U8(Vec<u8>),
    U16(Vec<u16>),
    U32(Vec<u32>),
    U64(Vec<u64>),
}

impl Block {
    fn for_width(width: u32) -> Block {
        match container_bytes(width) {
            1 => Block::U8(vec![0; BLOCK]),
            2 => Block::U16(vec![0; BLOCK]),
            4 => Block::U32(vec![0; BLOCK]),
            _ => Block::U64(vec![0; BLOCK]),
        }
    }
}

/// An output word type a child's words widen into.
trait Out: Word + std::ops::BitOrAssign {
    /// `x << shift` in this type (`x` fits it).
    fn shifted<C: Word>(x: C, shift: u32) -> Self;
}

macro_rules! impl_out {
    ($($t:ty),*) => {$(
        impl Out for $t {
            #[inline(always)]
            fn shifted<C: Word>(x: C, shift: u32) -> $t {
                (Into::<u64>::into(x) as $t) << shift
            }
        }
    )*};
}
impl_out!(u8, u16, u32, u64);

/// The widest vector instructions of this CPU the merge loops are compiled for.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
enum Wide {
    Avx512,
    Avx2,
    None,
}

/// [`Wide`] of this CPU, detected once; `None` when `BREVIS_NO_SIMD` is set.
#[cfg(target_arch = "x86_64")]
fn wide_simd() -> Wide {
    let level = crate::simd::level();
    if level.avx512 {
        Wide::Avx512
    } else if level.avx2 {
        Wide::Avx2
    } else {
        Wide::None
    }
}

/// The block loop of [`merge_into`]. An error names the source (its index).
fn merge_blocks<T: Out>(
    sources: &mut [(Source<'_>, Ty, u32, Block)],
    out: &mut [T],
) -> Result<(), (usize, CodecError)> {
    /// `out[i] (|)= c[i] << shift`, the first child assigning: compiled for AVX-512 and
    /// AVX2 too (the build's baseline is SSE2), and the widest the CPU has is run.
    #[inline(always)]
    fn or_into<T: Out, C: Word>(out: &mut [T], c: &[C], shift: u32, first: bool) {
        #[cfg(target_arch = "x86_64")]
        {
            match wide_simd() {
                // SAFETY: the features were detected at run time.
                Wide::Avx512 => return unsafe { or_into_avx512(out, c, shift, first) },
                Wide::Avx2 => return unsafe { or_into_avx2(out, c, shift, first) },
                Wide::None => {}
            }
        }
        or_into_body(out, c, shift, first);
    }
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2")]
    unsafe fn or_into_avx512<T: Out, C: Word>(out: &mut [T], c: &[C], shift: u32, first: bool) {
        or_into_body(out, c, shift, first);
    }
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn or_into_avx2<T: Out, C: Word>(out: &mut [T], c: &[C], shift: u32, first: bool) {
        or_into_body(out, c, shift, first);
    }
    #[inline(always)]
    fn or_into_body<T: Out, C: Word>(out: &mut [T], c: &[C], shift: u32, first: bool) {
        if first {
            for (o, &x) in out.iter_mut().zip(c) {
                *o = T::shifted(x, shift);
            }
        } else {
            for (o, &x) in out.iter_mut().zip(c) {
                *o |= T::shifted(x, shift);
            }
        }
    }
    // The child that assigns each block, the others OR-ing into it: a `rans8` literal
    // where there is one, whose decoder writes the output's words itself (its values
    // shifted into place), else the first.
    let lead = sources
        .iter()
        .position(|(s, ..)| matches!(s, Source::Rans8(_)))
        .unwrap_or(0);
    if let (Source::Rans8(d), _, shift, _) = &mut sources[lead] {
        d.set_shift(*shift);
    }
    let order: Vec<usize> = std::iter::once(lead)
        .chain((0..sources.len()).filter(|&k| k != lead))
        .collect();
    for block in out.chunks_mut(BLOCK) {
        let len = block.len();
        for &k in &order {
            let (s, _, shift, buf) = &mut sources[k];
            let first = k == lead;
            match s {
                Source::Rans8(d) if first => {
                    d.next(block).map_err(|e| (k, e))?;
                    continue;
                }
                Source::Const(0) if !first => continue,
                Source::Packed { data, k: bits, at } if !first => {
                    // Unpacked, shifted and OR-ed in one pass where SIMD can.
                    let start = *at * *bits as usize / 8;
                    if bitpack::unpack_or_into(&data[start..], *bits, block, *shift) {
                        *at += len;
                        continue;
                    }
                }
                _ => {}
            }
            let r = match buf {
                Block::U8(b) => s
                    .fill(&mut b[..len])
                    .map(|()| or_into(block, &b[..len], *shift, first)),
                Block::U16(b) => s
                    .fill(&mut b[..len])
                    .map(|()| or_into(block, &b[..len], *shift, first)),
                Block::U32(b) => s
                    .fill(&mut b[..len])
                    .map(|()| or_into(block, &b[..len], *shift, first)),
                Block::U64(b) => s
                    .fill(&mut b[..len])
                    .map(|()| or_into(block, &b[..len], *shift, first)),
            };
            r.map_err(|e| (k, e))?;
        }
    }
    Ok(())
}
