//! Dtypes, word widths and packed word streams (docs/design.md §2).
//!
//! A tensor of dtype `d` with `n` elements is read as `n` little-endian words of width
//! [`Dtype::word_bits`]. Every bit pattern is data: nothing here interprets floats.
//!
//! A [`Words`] stream holds `n` words of width `b` bits (1 <= b <= 64) packed in the
//! narrowest machine integer that holds `b` (`u8`, `u16`, `u32` or `u64`).

use std::fmt;

/// A safetensors dtype, as named in the file header.
///
/// Only the dtypes of the safetensors format are accepted; anything else is refused by the
/// header parser. Sub-byte packed dtypes (`F4`, `F6_*`) are read as 8-bit words of their
/// bytes (docs/design.md §2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Dtype {
    Bool,
    U8,
    I8,
    F8E5M2,
    F8E4M3,
    F8E8M0,
    F4,
    F6E2M3,
    F6E3M2,
    I16,
    U16,
    F16,
    BF16,
    I32,
    U32,
    F32,
    C64,
    F64,
    I64,
    U64,
    F8E4M3Fnuz,
    F8E5M2Fnuz,
}

/// Every dtype, in the order of their stable archive codes (new dtypes are appended).
pub const ALL_DTYPES: [Dtype; 22] = [
    Dtype::Bool,
    Dtype::U8,
    Dtype::I8,
    Dtype::F8E5M2,
    Dtype::F8E4M3,
    Dtype::F8E8M0,
    Dtype::F4,
    Dtype::F6E2M3,
    Dtype::F6E3M2,
    Dtype::I16,
    Dtype::U16,
    Dtype::F16,
    Dtype::BF16,
    Dtype::I32,
    Dtype::U32,
    Dtype::F32,
    Dtype::C64,
    Dtype::F64,
    Dtype::I64,
    Dtype::U64,
    Dtype::F8E4M3Fnuz,
    Dtype::F8E5M2Fnuz,
];

impl Dtype {
    /// Parses the dtype string of a safetensors header (`"BF16"`, `"F8_E4M3"`, ...).
    /// Returns `None` for a string the format does not define.
    pub fn from_name(name: &str) -> Option<Dtype> {
        ALL_DTYPES.iter().copied().find(|d| d.name() == name)
    }

    /// The dtype's name as written in a safetensors header.
    pub fn name(self) -> &'static str {
        match self {
            Dtype::Bool => "BOOL",
            Dtype::U8 => "U8",
            Dtype::I8 => "I8",
            Dtype::F8E5M2 => "F8_E5M2",
            Dtype::F8E4M3 => "F8_E4M3",
            Dtype::F8E8M0 => "F8_E8M0",
            Dtype::F4 => "F4",
            Dtype::F6E2M3 => "F6_E2M3",
            Dtype::F6E3M2 => "F6_E3M2",
            Dtype::I16 => "I16",
            Dtype::U16 => "U16",
            Dtype::F16 => "F16",
            Dtype::BF16 => "BF16",
            Dtype::I32 => "I32",
            Dtype::U32 => "U32",
            Dtype::F32 => "F32",
            Dtype::C64 => "C64",
            Dtype::F64 => "F64",
            Dtype::I64 => "I64",
            Dtype::U64 => "U64",
            Dtype::F8E4M3Fnuz => "F8_E4M3FNUZ",
            Dtype::F8E5M2Fnuz => "F8_E5M2FNUZ",
        }
    }

    /// Stable one-byte code used in the archive (index into [`ALL_DTYPES`]).
    pub fn code(self) -> u8 {
        ALL_DTYPES.iter().position(|&d| d == self).unwrap_or(0) as u8
    }

    /// Inverse of [`Dtype::code`]; `None` for an unknown code.
    pub fn from_code(code: u8) -> Option<Dtype> {
        ALL_DTYPES.get(usize::from(code)).copied()
    }

    /// Size in bits of one element. Packed dtypes report their element width
    /// (`F4` = 4, `F6_*` = 6); see [`Dtype::word_bits`] for how bytes are read.
    pub fn element_bits(self) -> u32 {
        match self {
            Dtype::F4 => 4,
            Dtype::F6E2M3 | Dtype::F6E3M2 => 6,
            Dtype::Bool
            | Dtype::U8
            | Dtype::I8
            | Dtype::F8E5M2
            | Dtype::F8E4M3
            | Dtype::F8E8M0
            | Dtype::F8E4M3Fnuz
            | Dtype::F8E5M2Fnuz => 8,
            Dtype::I16 | Dtype::U16 | Dtype::F16 | Dtype::BF16 => 16,
            Dtype::I32 | Dtype::U32 | Dtype::F32 => 32,
            Dtype::C64 | Dtype::F64 | Dtype::I64 | Dtype::U64 => 64,
        }
    }

    /// Width `b(d)` in bits of the words the tensor's bytes are read as (DESIGN §2):
    /// 8, 16, 32 or 64. Packed sub-byte dtypes are read as 8-bit words of their bytes.
    pub fn word_bits(self) -> u32 {
        self.element_bits().max(8)
    }

    /// Number of bytes `n` elements of this dtype occupy, or `None` on overflow.
    /// Packed dtypes round up to whole bytes.
    pub fn byte_len(self, elements: u64) -> Option<u64> {
        let bits = elements.checked_mul(u64::from(self.element_bits()))?;
        Some(bits.div_ceil(8))
    }

    /// The IEEE-style field layout `[sign, exponent, mantissa]` in bits, most significant
    /// first, for float dtypes whose words are whole elements; `None` otherwise.
    pub fn float_layout(self) -> Option<[u32; 3]> {
        match self {
            Dtype::BF16 => Some([1, 8, 7]),
            Dtype::F16 => Some([1, 5, 10]),
            Dtype::F32 => Some([1, 8, 23]),
            Dtype::F64 => Some([1, 11, 52]),
            Dtype::F8E4M3 | Dtype::F8E4M3Fnuz => Some([1, 4, 3]),
            Dtype::F8E5M2 | Dtype::F8E5M2Fnuz => Some([1, 5, 2]),
            _ => None,
        }
    }
}

impl fmt::Display for Dtype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Mask of the low `width` bits (`width` in 1..=64).
#[inline]
pub fn mask(width: u32) -> u64 {
    if width >= 64 {
        u64::MAX
    } else {
        (1u64 << width) - 1
    }
}

/// Field `(x >> shift) & mask(width)` of every word, in the narrowest container. The
/// field lies inside the source's words (`shift + width` at most their width), so the
/// shift and mask are done in the source's own type (more words per vector register).
pub fn extract(src: &WordBuf, shift: u32, width: u32) -> Words {
    let m = mask(width);
    macro_rules! go {
        ($v:expr, $t:ty) => {{
            // A field of width 0 (mask 0) is all zeros whatever the shift.
            let mt = m as $t;
            match container_bytes(width) {
                1 => WordBuf::U8(
                    $v.iter()
                        .map(|&x| (x.wrapping_shr(shift) & mt) as u8)
                        .collect(),
                ),
                2 => WordBuf::U16(
                    $v.iter()
                        .map(|&x| (x.wrapping_shr(shift) & mt) as u16)
                        .collect(),
                ),
                4 => WordBuf::U32(
                    $v.iter()
                        .map(|&x| (x.wrapping_shr(shift) & mt) as u32)
                        .collect(),
                ),
                _ => WordBuf::U64(
                    $v.iter()
                        .map(|&x| u64::from(x.wrapping_shr(shift) & mt))
                        .collect(),
                ),
            }
        }};
    }
    let buf = match src {
        WordBuf::U8(v) => go!(v, u8),
        WordBuf::U16(v) => go!(v, u16),
        WordBuf::U32(v) => go!(v, u32),
        WordBuf::U64(v) => go!(v, u64),
    };
    Words::from_buf_trusted(width, buf)
}

/// Number of bits needed to write `v` (0 for `v == 0`).
#[inline]
pub fn bits_needed(v: u64) -> u32 {
    64 - v.leading_zeros()
}

/// Packed storage of a word stream: the narrowest container that holds the width.
#[derive(Clone, PartialEq, Eq, Hash)]
pub enum WordBuf {
    U8(Vec<u8>),
    U16(Vec<u16>),
    U32(Vec<u32>),
    U64(Vec<u64>),
}

/// `n` words of width `width` bits (1..=64), each `< 2^width`, packed in the narrowest
/// container (`u8` for widths 1..=8, `u16` for 9..=16, `u32` for 17..=32, `u64` above).
///
/// Invariant: every word fits in `width` bits. Constructors that take foreign data
/// either mask or check it.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Words {
    width: u32,
    buf: WordBuf,
}

/// Applies `$body` to the container inside a [`WordBuf`], binding it as `$v`.
#[macro_export]
macro_rules! with_buf {
    ($buf:expr, $v:ident => $body:expr) => {
        match $buf {
            $crate::tensor::WordBuf::U8($v) => $body,
            $crate::tensor::WordBuf::U16($v) => $body,
            $crate::tensor::WordBuf::U32($v) => $body,
            $crate::tensor::WordBuf::U64($v) => $body,
        }
    };
}
pub use crate::with_buf;

/// ZigZag of a `width`-bit word: its two's-complement value `v` as `2v` (`v >= 0`) or
/// `-2v - 1` (`v < 0`), so small magnitudes of either sign become small words. The
/// bijection behind `map zigzag` ([`crate::dsl::MapFn::ZigZag`]) and the bucket codec's
/// signed fields.
#[inline]
pub fn zigzag(x: u64, width: u32) -> u64 {
    let m = mask(width);
    let sign = (x >> (width - 1)) & 1;
    ((x << 1) ^ sign.wrapping_neg()) & m
}

/// The inverse of [`zigzag`] on `width`-bit words.
#[inline]
pub fn unzigzag(y: u64, width: u32) -> u64 {
    let m = mask(width);
    ((y >> 1) ^ (y & 1).wrapping_neg()) & m
}

/// Number of bytes of the container for a width: 1, 2, 4 or 8.
#[inline]
pub fn container_bytes(width: u32) -> usize {
    match width {
        0..=8 => 1,
        9..=16 => 2,
        17..=32 => 4,
        _ => 8,
    }
}

impl Words {
    /// An empty stream of the given width.
    ///
    /// # Panics
    /// If `width` is not in 1..=64 (a programming error; decoders validate first).
    pub fn empty(width: u32) -> Words {
        Words::with_capacity(width, 0)
    }

    /// An empty stream with room for `cap` words.
    ///
    /// # Panics
    /// If `width` is not in 1..=64.
    pub fn with_capacity(width: u32, cap: usize) -> Words {
        assert!(
            (1..=64).contains(&width),
            "word width {width} out of 1..=64"
        );
        let buf = match container_bytes(width) {
            1 => WordBuf::U8(Vec::with_capacity(cap)),
            2 => WordBuf::U16(Vec::with_capacity(cap)),
            4 => WordBuf::U32(Vec::with_capacity(cap)),
            _ => WordBuf::U64(Vec::with_capacity(cap)),
        };
        Words { width, buf }
    }

    /// `n` copies of `value` (masked to `width` bits).
    pub fn filled(width: u32, value: u64, n: usize) -> Words {
        let v = value & mask(width);
        let buf = match container_bytes(width) {
            1 => WordBuf::U8(vec![v as u8; n]),
            2 => WordBuf::U16(vec![v as u16; n]),
            4 => WordBuf::U32(vec![v as u32; n]),
            _ => WordBuf::U64(vec![v; n]),
        };
        Words { width, buf }
    }

    /// Builds a stream from `u64` values, masking each to `width` bits.
    pub fn from_u64s(width: u32, values: &[u64]) -> Words {
        let mut w = Words::with_capacity(width, values.len());
        for &v in values {
            w.push(v);
        }
        w
    }

    /// Wraps a container; returns `None` if the container does not match the width or a
    /// word does not fit in `width` bits.
    #[allow(clippy::unnecessary_cast)] // `with_buf!` casts every container, u64 included
    pub fn from_buf(width: u32, buf: WordBuf) -> Option<Words> {
        if !(1..=64).contains(&width) {
            return None;
        }
        let ok_container = matches!(
            (&buf, container_bytes(width)),
            (WordBuf::U8(_), 1)
                | (WordBuf::U16(_), 2)
                | (WordBuf::U32(_), 4)
                | (WordBuf::U64(_), 8)
        );
        if !ok_container {
            return None;
        }
        let m = mask(width);
        let fits = with_buf!(&buf, v => v.iter().all(|&x| (x as u64) & !m == 0));
        fits.then_some(Words { width, buf })
    }

    /// Wraps a container whose words are known to fit in `width` bits (every word was
    /// masked or produced by a width-preserving operation). Checked in debug builds only.
    pub(crate) fn from_buf_trusted(width: u32, buf: WordBuf) -> Words {
        debug_assert!(
            Words::from_buf(width, buf.clone()).is_some(),
            "words exceed width {width}"
        );
        Words { width, buf }
    }

    /// Reads little-endian words of `width` (8, 16, 32 or 64) bits from `bytes`.
    /// Returns `None` if `width` is not a whole number of bytes or `bytes.len()` is not a
    /// multiple of the word size.
    pub fn from_le_bytes(width: u32, bytes: &[u8]) -> Option<Words> {
        let buf = match width {
            8 => WordBuf::U8(bytes.to_vec()),
            16 => WordBuf::U16(le_chunks(bytes, u16::from_le_bytes)?),
            32 => WordBuf::U32(le_chunks(bytes, u32::from_le_bytes)?),
            64 => WordBuf::U64(le_chunks(bytes, u64::from_le_bytes)?),
            _ => return None,
        };
        Some(Words { width, buf })
    }

    /// Appends the words as little-endian bytes of their container size. For widths of
    /// 8, 16, 32 and 64 bits this is the inverse of [`Words::from_le_bytes`].
    pub fn write_le_bytes(&self, out: &mut Vec<u8>) {
        match &self.buf {
            WordBuf::U8(v) => out.extend_from_slice(v),
            WordBuf::U16(v) => put_le(v, out, u16::to_le_bytes),
            WordBuf::U32(v) => put_le(v, out, u32::to_le_bytes),
            WordBuf::U64(v) => put_le(v, out, u64::to_le_bytes),
        }
    }

    /// Width of every word, in bits (1..=64).
    #[inline]
    pub fn width(&self) -> u32 {
        self.width
    }

    /// Number of words.
    #[inline]
    pub fn len(&self) -> usize {
        with_buf!(&self.buf, v => v.len())
    }

    /// Whether the stream holds no words.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The packed container.
    #[inline]
    pub fn buf(&self) -> &WordBuf {
        &self.buf
    }

    /// Consumes the stream, returning its container.
    pub fn into_buf(self) -> WordBuf {
        self.buf
    }

    /// Word `i`, widened to `u64`.
    ///
    /// # Panics
    /// If `i >= self.len()`.
    #[allow(clippy::unnecessary_cast)] // `with_buf!` casts every container, u64 included
    #[inline]
    pub fn get(&self, i: usize) -> u64 {
        with_buf!(&self.buf, v => v[i] as u64)
    }

    /// Appends one word, masked to the stream's width.
    #[inline]
    pub fn push(&mut self, value: u64) {
        let v = value & mask(self.width);
        match &mut self.buf {
            WordBuf::U8(b) => b.push(v as u8),
            WordBuf::U16(b) => b.push(v as u16),
            WordBuf::U32(b) => b.push(v as u32),
            WordBuf::U64(b) => b.push(v),
        }
    }

    /// Appends all words of `other`, which must have the same width.
    ///
    /// # Panics
    /// If the widths differ.
    pub fn extend_from(&mut self, other: &Words) {
        assert_eq!(self.width, other.width, "extend_from: width mismatch");
        match (&mut self.buf, &other.buf) {
            (WordBuf::U8(a), WordBuf::U8(b)) => a.extend_from_slice(b),
            (WordBuf::U16(a), WordBuf::U16(b)) => a.extend_from_slice(b),
            (WordBuf::U32(a), WordBuf::U32(b)) => a.extend_from_slice(b),
            (WordBuf::U64(a), WordBuf::U64(b)) => a.extend_from_slice(b),
            _ => unreachable!("same width implies same container"),
        }
    }

    /// Words `start..end` as a new stream.
    ///
    /// # Panics
    /// If the range is out of bounds.
    pub fn slice(&self, start: usize, end: usize) -> Words {
        let buf = match &self.buf {
            WordBuf::U8(v) => WordBuf::U8(v[start..end].to_vec()),
            WordBuf::U16(v) => WordBuf::U16(v[start..end].to_vec()),
            WordBuf::U32(v) => WordBuf::U32(v[start..end].to_vec()),
            WordBuf::U64(v) => WordBuf::U64(v[start..end].to_vec()),
        };
        Words {
            width: self.width,
            buf,
        }
    }

    /// Iterates over the words widened to `u64`.
    pub fn iter(&self) -> Box<dyn Iterator<Item = u64> + '_> {
        match &self.buf {
            WordBuf::U8(v) => Box::new(v.iter().map(|&x| x as u64)),
            WordBuf::U16(v) => Box::new(v.iter().map(|&x| x as u64)),
            WordBuf::U32(v) => Box::new(v.iter().map(|&x| x as u64)),
            WordBuf::U64(v) => Box::new(v.iter().copied()),
        }
    }

    /// All words widened to `u64` (allocates; for tests and small streams).
    pub fn to_u64s(&self) -> Vec<u64> {
        self.iter().collect()
    }

    /// Builds a stream of `n` words of `width` bits from a function of the index.
    pub fn from_fn(width: u32, n: usize, mut f: impl FnMut(usize) -> u64) -> Words {
        let m = mask(width);
        let buf = match container_bytes(width) {
            1 => WordBuf::U8((0..n).map(|i| (f(i) & m) as u8).collect()),
            2 => WordBuf::U16((0..n).map(|i| (f(i) & m) as u16).collect()),
            4 => WordBuf::U32((0..n).map(|i| (f(i) & m) as u32).collect()),
            _ => WordBuf::U64((0..n).map(|i| f(i) & m).collect()),
        };
        Words { width, buf }
    }

    /// Applies `f` to every word, producing a stream of width `out_width`
    /// (results masked to `out_width` bits).
    pub fn map_to(&self, out_width: u32, f: impl Fn(u64) -> u64) -> Words {
        let m = mask(out_width);
        macro_rules! go {
            ($v:expr) => {
                match container_bytes(out_width) {
                    1 => WordBuf::U8($v.iter().map(|&x| (f(x as u64) & m) as u8).collect()),
                    2 => WordBuf::U16($v.iter().map(|&x| (f(x as u64) & m) as u16).collect()),
                    4 => WordBuf::U32($v.iter().map(|&x| (f(x as u64) & m) as u32).collect()),
                    _ => WordBuf::U64($v.iter().map(|&x| f(x as u64) & m).collect()),
                }
            };
        }
        let buf = with_buf!(&self.buf, v => go!(v));
        Words {
            width: out_width,
            buf,
        }
    }

    /// The largest word, or `None` for an empty stream.
    #[allow(clippy::unnecessary_cast)] // `with_buf!` casts every container, u64 included
    pub fn max(&self) -> Option<u64> {
        // A fold over copies vectorizes; `Iterator::max` over references does not.
        with_buf!(&self.buf, v => (!v.is_empty()).then(|| v.iter().fold(0, |a, &x| a.max(x)) as u64))
    }

    /// The smallest word, or `None` for an empty stream.
    #[allow(clippy::unnecessary_cast)] // `with_buf!` casts every container, u64 included
    pub fn min(&self) -> Option<u64> {
        with_buf!(&self.buf, v => v.first().map(|&f| v.iter().fold(f, |a, &x| a.min(x)) as u64))
    }

    /// The bitwise AND and OR of all words (`(u64::MAX, 0)` for an empty stream), in one
    /// pass over the container (a fold over copies vectorizes; one over [`Words::iter`]
    /// makes a dynamic call per word).
    #[allow(clippy::unnecessary_cast)] // `with_buf!` casts every container, u64 included
    pub fn and_or(&self) -> (u64, u64) {
        with_buf!(&self.buf, v => match v.first() {
            None => (u64::MAX, 0),
            Some(&f) => {
                let (a, o) = v.iter().fold((f, f), |(a, o), &x| (a & x, o | x));
                (a as u64, o as u64)
            }
        })
    }

    /// Whether every word equals the first (true for empty streams).
    pub fn is_constant(&self) -> bool {
        with_buf!(&self.buf, v => v.first().is_none_or(|f| v.iter().all(|x| x == f)))
    }
}

impl fmt::Debug for Words {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "u{}[{}]", self.width, self.len())?;
        if self.len() <= 16 {
            write!(f, " {:?}", self.to_u64s())?;
        }
        Ok(())
    }
}

fn le_chunks<T: bytemuck::Pod + Default, const N: usize>(
    bytes: &[u8],
    f: impl Fn([u8; N]) -> T,
) -> Option<Vec<T>> {
    if !bytes.len().is_multiple_of(N) {
        return None;
    }
    // On a little-endian machine, bytes aligned for `T` already are the words: one copy
    // into an uninitialized vector, without zeroing it first (glibc's calloc clears
    // reused memory: 2% of a compression's instructions).
    if cfg!(target_endian = "little") {
        if let Ok(words) = bytemuck::try_cast_slice::<u8, T>(bytes) {
            return Some(words.to_vec());
        }
    }
    // Filled in place (a zeroed vector, then one store per word) so the loop
    // vectorizes; collecting from the chunk iterator did not.
    let mut out = vec![T::default(); bytes.len() / N];
    for (o, c) in out.iter_mut().zip(bytes.chunks_exact(N)) {
        let mut a = [0u8; N];
        a.copy_from_slice(c);
        *o = f(a);
    }
    Some(out)
}

/// Appends `v` to `out` as little-endian bytes, `N` per word.
fn put_le<T: Copy, const N: usize>(v: &[T], out: &mut Vec<u8>, f: impl Fn(T) -> [u8; N]) {
    let start = out.len();
    out.resize(start + v.len() * N, 0);
    for (c, &x) in out[start..].chunks_exact_mut(N).zip(v) {
        c.copy_from_slice(&f(x));
    }
}

/// The words as little-endian bytes of their container (8, 16, 32 or 64 bits), reusing
/// the buffer for bytes.
pub(crate) fn words_into_le_bytes(words: Words) -> Vec<u8> {
    fn go<const N: usize, T: Copy>(v: &[T], f: impl Fn(T) -> [u8; N]) -> Vec<u8> {
        let mut out = vec![0u8; v.len() * N];
        for (c, &x) in out.chunks_exact_mut(N).zip(v) {
            c.copy_from_slice(&f(x));
        }
        out
    }
    match words.into_buf() {
        WordBuf::U8(v) => v,
        WordBuf::U16(v) => go(&v, u16::to_le_bytes),
        WordBuf::U32(v) => go(&v, u32::to_le_bytes),
        WordBuf::U64(v) => go(&v, u64::to_le_bytes),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn le_bytes_round_trip_each_width() {
        let bytes: Vec<u8> = (0u8..64).collect();
        for w in [8, 16, 32, 64] {
            let words = Words::from_le_bytes(w, &bytes).unwrap();
            assert_eq!(words.len(), 64 / (w as usize / 8));
            let mut out = Vec::new();
            words.write_le_bytes(&mut out);
            assert_eq!(out, bytes);
        }
        assert_eq!(
            Words::from_le_bytes(16, &[1, 2, 3, 4]).unwrap().to_u64s(),
            vec![0x0201, 0x0403]
        );
        assert!(Words::from_le_bytes(16, &[1, 2, 3]).is_none());
        assert!(Words::from_le_bytes(12, &[1, 2]).is_none());
    }

    /// Bytes at every alignment give the same words: the aligned ones are copied as words,
    /// the others read a word at a time.
    #[test]
    fn le_bytes_at_every_alignment() {
        let backing: Vec<u64> = (0..9u64)
            .map(|i| i.wrapping_mul(0x0123_4567_89ab_cdef))
            .collect();
        let all: &[u8] = bytemuck::cast_slice(&backing);
        for w in [16u32, 32, 64] {
            let size = w as usize / 8;
            for at in 0..8 {
                let bytes = &all[at..at + 8 * size];
                let want: Vec<u64> = bytes
                    .chunks_exact(size)
                    .map(|c| c.iter().rev().fold(0u64, |a, &b| (a << 8) | u64::from(b)))
                    .collect();
                let got = Words::from_le_bytes(w, bytes).unwrap();
                assert_eq!(got.to_u64s(), want, "width {w}, offset {at}");
            }
        }
    }

    #[test]
    fn dtype_names_and_codes_round_trip() {
        for d in ALL_DTYPES {
            assert_eq!(Dtype::from_name(d.name()), Some(d));
            assert_eq!(Dtype::from_code(d.code()), Some(d));
        }
        assert_eq!(Dtype::from_name("Q4_0"), None);
        assert_eq!(Dtype::BF16.word_bits(), 16);
        assert_eq!(Dtype::F4.word_bits(), 8);
        assert_eq!(Dtype::F4.byte_len(3), Some(2));
        assert_eq!(Dtype::F64.byte_len(u64::MAX), None);
    }

    #[test]
    fn from_buf_rejects_wide_words() {
        assert!(Words::from_buf(3, WordBuf::U8(vec![7])).is_some());
        assert!(Words::from_buf(3, WordBuf::U8(vec![8])).is_none());
        assert!(Words::from_buf(9, WordBuf::U8(vec![1])).is_none());
    }

    #[test]
    fn words_to_bytes_is_little_endian() {
        let w = Words::from_u64s(16, &[0x0102, 0xa0b0]);
        assert_eq!(words_into_le_bytes(w), vec![2, 1, 0xb0, 0xa0]);
    }
}
