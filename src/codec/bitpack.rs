//! Fixed-width bit packing.
//!
//! # Body
//!
//! One byte `k` (bits per word, `0..=b`), then the `n` words in `k` bits each, LSB-first
//! (see [`super::bitio`]), the last byte zero-padded: `1 + ceil(n k / 8)` bytes. `k = 0`
//! means every word is zero. The encoder writes the smallest `k` that holds the largest
//! word; the decoder accepts any `k <= b` but refuses nonzero padding.

use super::bitio::{peek64, BitWriter};
use super::table::{check_width, try_constant, Word};
use super::{CodecError, Stream};
use crate::tensor::with_buf;
use crate::tensor::{bits_needed, container_bytes, mask, WordBuf, Words};

const NAME: &str = "bitpack";

mod simd;

/// Exact body size in bytes for `n` words of `k` bits (saturating).
pub fn size_for(k: u32, n: usize) -> u64 {
    let bits = u128::from(k) * n as u128;
    u64::try_from(bits.div_ceil(8)).map_or(u64::MAX, |b| b.saturating_add(1))
}

/// Exact body size in bytes for `words`.
pub fn size(words: &Words) -> u64 {
    size_for(bits_needed(words.max().unwrap_or(0)), words.len())
}

/// Appends the body for `words` at the smallest `k`.
pub fn encode(words: &Words, out: &mut Vec<u8>) {
    encode_k(words, bits_needed(words.max().unwrap_or(0)), out);
}

/// Appends the body for `words` at `k` bits per word (`k` must hold every word).
pub fn encode_k(words: &Words, k: u32, out: &mut Vec<u8>) {
    debug_assert!(k <= words.width() && bits_needed(words.max().unwrap_or(0)) <= k);
    out.push(k as u8);
    out.reserve(size_for(k, words.len()) as usize);
    match words.buf() {
        WordBuf::U8(v) => pack_u8(v, k, out),
        _ => with_buf!(words.buf(), v => pack(v, k, out)),
    }
}

feature_fn! {
    "avx2";
    /// [`encode_k`] for a stream that may be a bit field of wider words
    /// ([`Stream::Field`]): a field of words of at most 32 bits is extracted
    /// [`FIELD_CHUNK`] words at a time into a buffer on the stack and packed from there, so
    /// no buffer of the field's length is made. The body is the one the field's own words
    /// give.
    ///
    /// Compiled a second time with AVX2 (the field extraction and packing loops
    /// vectorize twice as wide), picked at run time.
    pub fn encode_k_stream(stream: Stream<'_>, k: u32, out: &mut Vec<u8>) = encode_k_stream_in;
}

/// [`encode_k_stream`]'s work, inlined into each of its builds.
#[inline(always)]
fn encode_k_stream_in(stream: Stream<'_>, k: u32, out: &mut Vec<u8>) {
    let (words, shift, m) = stream.parts();
    // The shift and mask in the words' own type, which vectorizes (a field lies inside
    // its words: the mask and shift fit the type).
    match (stream, words.buf()) {
        (Stream::Words(w), _) => encode_k(w, k, out),
        (_, WordBuf::U8(v)) => {
            let m = m as u8;
            encode_field(
                v,
                k,
                out,
                |x| (x >> shift) & m,
                |x| u16::from((x >> shift) & m),
                |x| u32::from((x >> shift) & m),
            )
        }
        (_, WordBuf::U16(v)) => {
            let m = m as u16;
            if u32::from(m).count_ones() == k {
                out.push(k as u8);
                if simd::pack_field_u16(v, shift, k, out) {
                    return;
                }
                out.pop();
            }
            encode_field(
                v,
                k,
                out,
                |x| ((x >> shift) & m) as u8,
                |x| (x >> shift) & m,
                |x| u32::from((x >> shift) & m),
            )
        }
        (_, WordBuf::U32(v)) => {
            let m = m as u32;
            encode_field(
                v,
                k,
                out,
                |x| ((x >> shift) & m) as u8,
                |x| ((x >> shift) & m) as u16,
                |x| (x >> shift) & m,
            )
        }
        _ => encode_k(&stream.to_words(), k, out),
    }
}

/// Words of a field [`encode_k_stream`] extracts at a time: a multiple of 8, so that
/// every chunk but the last packs into whole bytes and the next starts byte-aligned, as
/// packing the whole field in one piece would.
const FIELD_CHUNK: usize = 2048;

/// Packs a field of the words `v` at `k` bits, as [`encode_k`] packs the field's own
/// words: `narrow` gives a word's field for fields of at most 8 bits, `wide` for the
/// others (up to 16 bits).
#[inline(always)]
fn encode_field<T: Word>(
    v: &[T],
    k: u32,
    out: &mut Vec<u8>,
    narrow: impl Fn(T) -> u8,
    wide: impl Fn(T) -> u16,
    wider: impl Fn(T) -> u32,
) {
    out.push(k as u8);
    out.reserve(size_for(k, v.len()) as usize);
    if k > 16 {
        let mut buf = [0u32; FIELD_CHUNK];
        for c in v.chunks(FIELD_CHUNK) {
            let b = &mut buf[..c.len()];
            for (o, &x) in b.iter_mut().zip(c) {
                *o = wider(x);
            }
            pack(b, k, out);
        }
    } else if k <= 8 {
        let mut buf = [0u8; FIELD_CHUNK];
        for c in v.chunks(FIELD_CHUNK) {
            let b = &mut buf[..c.len()];
            for (o, &x) in b.iter_mut().zip(c) {
                *o = narrow(x);
            }
            pack_u8(b, k, out);
        }
    } else {
        let mut buf = [0u16; FIELD_CHUNK];
        for c in v.chunks(FIELD_CHUNK) {
            let b = &mut buf[..c.len()];
            for (o, &x) in b.iter_mut().zip(c) {
                *o = wide(x);
            }
            pack(b, k, out);
        }
    }
}

/// [`pack`] for words held in bytes, at 1 and 4 bits by their own folds.
#[inline(always)]
fn pack_u8(v: &[u8], k: u32, out: &mut Vec<u8>) {
    match k {
        1 => pack_bits_u8(v, out),
        4 => pack_nibbles_u8(v, out),
        _ => pack(v, k, out),
    }
}

/// [`pack`] for one-bit words held in bytes (sign planes): each group of eight becomes a
/// byte with one multiply (byte `j`'s low bit lands on bit `56 + j`, no carries, as every
/// byte is 0 or 1), the rest through [`pack`], which starts byte-aligned after them.
#[inline(always)]
fn pack_bits_u8(v: &[u8], out: &mut Vec<u8>) {
    let whole = v.len() / 8 * 8;
    out.extend(v[..whole].chunks_exact(8).map(|c| {
        let x = u64::from_le_bytes(c.try_into().expect("chunks of 8"));
        (x.wrapping_mul(0x0102_0408_1020_4080) >> 56) as u8
    }));
    pack(&v[whole..], 1, out);
}

/// [`pack`] for four-bit words held in bytes (low mantissa nibbles): each group of eight
/// becomes four bytes by three shift-or-mask folds of one 64-bit load (pairs of bytes,
/// then pairs of pairs; every byte is below 16, so no fold spills into a neighbour), the
/// rest through [`pack`], which starts byte-aligned after them.
#[inline(always)]
fn pack_nibbles_u8(v: &[u8], out: &mut Vec<u8>) {
    let whole = v.len() / 8 * 8;
    let start = out.len();
    out.resize(start + whole / 2, 0);
    for (o, c) in out[start..]
        .chunks_exact_mut(4)
        .zip(v[..whole].chunks_exact(8))
    {
        let x = u64::from_le_bytes(c.try_into().expect("chunks of 8"));
        let y = (x | x >> 4) & 0x00FF_00FF_00FF_00FF;
        let z = (y | y >> 8) & 0x0000_FFFF_0000_FFFF;
        o.copy_from_slice(&((z | z >> 16) as u32).to_le_bytes());
    }
    pack(&v[whole..], 4, out);
}

fn pack<T: Word>(v: &[T], k: u32, out: &mut Vec<u8>) {
    if k == 0 {
        return;
    }
    fn bytes<T: Word, const NB: usize>(v: &[T], out: &mut Vec<u8>) {
        out.extend(v.iter().flat_map(|&x| {
            let a = x.into().to_le_bytes();
            let mut b = [0u8; NB];
            b.copy_from_slice(&a[..NB]);
            b
        }));
    }
    match k {
        8 => return bytes::<T, 1>(v, out),
        16 => return bytes::<T, 2>(v, out),
        24 => return bytes::<T, 3>(v, out),
        32 => return bytes::<T, 4>(v, out),
        64 => return bytes::<T, 8>(v, out),
        _ => {}
    }
    // Eight words of k bits fill exactly k bytes: whole groups with constant shifts for
    // k <= 32, then the rest through the bit writer, which starts byte-aligned after them.
    let groups = if k <= 32 { v.len() / 8 } else { 0 };
    if groups > 0 {
        let whole = &v[..groups * 8];
        match k {
            1 => pack_sub_byte::<T, 1>(whole, out),
            2 => pack_sub_byte::<T, 2>(whole, out),
            4 => pack_sub_byte::<T, 4>(whole, out),
            17.. => wide_k!(k, K => pack_wide_groups::<T, K>(whole, out)),
            _ => small_k!(k, K => pack_groups::<T, K>(whole, out)),
        }
    }
    let mut w = BitWriter::from_vec(std::mem::take(out));
    for &x in &v[groups * 8..] {
        w.write(x.into(), k);
    }
    *out = w.finish();
}

/// Calls `$body` with the const `$K` equal to the runtime `$k` (1..=16).
macro_rules! small_k {
    ($k:expr, $K:ident => $body:expr) => {
        match $k {
            1 => {
                const $K: usize = 1;
                $body
            }
            2 => {
                const $K: usize = 2;
                $body
            }
            3 => {
                const $K: usize = 3;
                $body
            }
            4 => {
                const $K: usize = 4;
                $body
            }
            5 => {
                const $K: usize = 5;
                $body
            }
            6 => {
                const $K: usize = 6;
                $body
            }
            7 => {
                const $K: usize = 7;
                $body
            }
            8 => {
                const $K: usize = 8;
                $body
            }
            9 => {
                const $K: usize = 9;
                $body
            }
            10 => {
                const $K: usize = 10;
                $body
            }
            11 => {
                const $K: usize = 11;
                $body
            }
            12 => {
                const $K: usize = 12;
                $body
            }
            13 => {
                const $K: usize = 13;
                $body
            }
            14 => {
                const $K: usize = 14;
                $body
            }
            15 => {
                const $K: usize = 15;
                $body
            }
            _ => {
                const $K: usize = 16;
                $body
            }
        }
    };
}
use small_k;

/// Appends the words of `v` (a multiple of 8 of them) in groups of eight `K`-bit words,
/// `K` bytes each.
fn pack_groups<T: Word, const K: usize>(v: &[T], out: &mut Vec<u8>) {
    let start = out.len();
    out.resize(start + v.len() / 8 * K, 0);
    for (g, o) in v.chunks_exact(8).zip(out[start..].chunks_exact_mut(K)) {
        let mut acc = 0u128;
        for (j, &x) in g.iter().enumerate() {
            acc |= u128::from(x.into()) << (j * K);
        }
        o.copy_from_slice(&acc.to_le_bytes()[..K]);
    }
}

/// Appends the words of `v` (a multiple of 8 of them) in groups of eight `K`-bit words
/// (`K` in 17..=32), `K` bytes each: the 19- to 23-bit mantissa fields of F32 tensors.
/// Each word is or-ed into 64-bit limbs at a constant offset, so the compiler unrolls
/// the group.
fn pack_wide_groups<T: Word, const K: usize>(v: &[T], out: &mut Vec<u8>) {
    let start = out.len();
    out.resize(start + v.len() / 8 * K, 0);
    for (g, o) in v.chunks_exact(8).zip(out[start..].chunks_exact_mut(K)) {
        let mut limbs = [0u64; 5];
        for (j, &x) in g.iter().enumerate() {
            let (at, by) = (j * K / 64, j * K % 64);
            let x: u64 = x.into();
            limbs[at] |= x << by;
            if by + K > 64 {
                limbs[at + 1] |= x >> (64 - by);
            }
        }
        let mut buf = [0u8; 40];
        for (b, l) in buf.chunks_exact_mut(8).zip(limbs) {
            b.copy_from_slice(&l.to_le_bytes());
        }
        o.copy_from_slice(&buf[..K]);
    }
}

/// [`pack_groups`] for `K` dividing 8 (sign bits, nibbles): each byte holds `8 / K`
/// words, lowest bits first, in a loop the compiler vectorizes.
fn pack_sub_byte<T: Word, const K: usize>(v: &[T], out: &mut Vec<u8>) {
    let per = 8 / K;
    let start = out.len();
    out.resize(start + v.len() / per, 0);
    for (o, c) in out[start..].iter_mut().zip(v.chunks_exact(per)) {
        let mut b = 0u8;
        for (j, &x) in c.iter().enumerate() {
            b |= (x.into() as u8) << (j * K);
        }
        *o = b;
    }
}

/// Fills `out` (a multiple of 8 words) from groups of eight `K`-bit words, `K` bytes
/// each, at the start of `data` (which holds them).
#[inline(always)]
fn unpack_groups<T: Word, const K: usize>(data: &[u8], out: &mut [T]) {
    let m = (1u128 << K) - 1;
    for (c, o) in data.chunks_exact(K).zip(out.chunks_exact_mut(8)) {
        let mut a = [0u8; 16];
        a[..K].copy_from_slice(c);
        let g = u128::from_le_bytes(a);
        for (j, w) in o.iter_mut().enumerate() {
            *w = T::from_u64(((g >> (j * K)) & m) as u64);
        }
    }
}

/// Unpacks whole groups of eight `K`-bit words (`K` in 17..=32, so a group is `K`
/// bytes): each group copied into a padded buffer once, each word one unaligned 8-byte
/// load at a constant offset and shift, so the compiler unrolls the group.
#[inline(always)]
fn unpack_wide_groups<T: Word, const K: usize>(data: &[u8], out: &mut [T]) {
    let m = mask(K as u32);
    for (c, o) in data.chunks_exact(K).zip(out.chunks_exact_mut(8)) {
        let mut buf = [0u8; 40];
        buf[..K].copy_from_slice(c);
        for (j, w) in o.iter_mut().enumerate() {
            let bit = j * K;
            let b = bit >> 3;
            let mut a = [0u8; 8];
            a.copy_from_slice(&buf[b..b + 8]);
            *w = T::from_u64((u64::from_le_bytes(a) >> (bit & 7)) & m);
        }
    }
}

/// `match` on a bit width from 17 to 32, binding it as the constant `$K` in `$body`.
macro_rules! wide_k {
    ($k:expr, $K:ident => $body:expr) => {
        match $k {
            17 => {
                const $K: usize = 17;
                $body
            }
            18 => {
                const $K: usize = 18;
                $body
            }
            19 => {
                const $K: usize = 19;
                $body
            }
            20 => {
                const $K: usize = 20;
                $body
            }
            21 => {
                const $K: usize = 21;
                $body
            }
            22 => {
                const $K: usize = 22;
                $body
            }
            23 => {
                const $K: usize = 23;
                $body
            }
            25 => {
                const $K: usize = 25;
                $body
            }
            26 => {
                const $K: usize = 26;
                $body
            }
            27 => {
                const $K: usize = 27;
                $body
            }
            28 => {
                const $K: usize = 28;
                $body
            }
            29 => {
                const $K: usize = 29;
                $body
            }
            30 => {
                const $K: usize = 30;
                $body
            }
            31 => {
                const $K: usize = 31;
                $body
            }
            _ => unreachable!("bit widths 17 to 31 but 24 (whole bytes are copied)"),
        }
    };
}
use wide_k;

/// [`unpack_groups`] for `K` dividing 8 (sign bits, nibbles): the `8 / K` words of each
/// byte, lowest bits first, in a loop the compiler vectorizes.
#[inline(always)]
fn unpack_sub_byte<T: Word, const K: usize>(data: &[u8], out: &mut [T]) {
    let per = 8 / K;
    let m = (1u8 << K) - 1;
    for (o, &b) in out.chunks_exact_mut(per).zip(data) {
        for (j, w) in o.iter_mut().enumerate() {
            *w = T::from_u64(u64::from(b >> (j * K) & m));
        }
    }
}

/// Decodes `n` words of `width` bits from exactly `body`.
///
/// # Errors
/// An empty body, `k > width`, a body length other than `1 + ceil(n k / 8)`, or nonzero
/// padding bits.
pub fn decode(body: &[u8], width: u32, n: usize) -> Result<Words, CodecError> {
    let (k, data) = validate(body, width, n)?;
    if k == 0 {
        return try_constant(width, 0, n, NAME);
    }
    // Every word came from a validated table (symbols < 2^width) or a field of at most
    // `width` bits.
    Ok(Words::from_buf_trusted(
        width,
        unpack_buf(data, k, width, n),
    ))
}

/// Whether `body` decodes to field `(shift, width)` of `src` (see
/// [`super::select::matches_field`]): the same validation and unpacking as [`decode`],
/// a chunk of [`CHECK_WORDS`] words at a time compared with the field in place, so no
/// buffer of `src.len()` words is allocated (the check of a 1 Mi-word sign plane would
/// otherwise fault in a fresh megabyte).
///
/// # Errors
/// As [`decode`] for `n = src.len()`.
///
/// # Panics
/// If the field does not lie inside the words (`shift + width > src.width()`).
pub fn matches_field(body: &[u8], src: &Words, shift: u32, width: u32) -> Result<bool, CodecError> {
    let n = src.len();
    let (k, data) = validate(body, width, n)?;
    if k == 0 {
        // Every word 0: the field must be 0 throughout.
        let zeros = try_constant(width, 0, n, NAME)?;
        return Ok(super::select::equals_field(&zeros, src, shift));
    }
    let k = k as usize;
    let mut start = 0;
    while start < n {
        let end = (start + CHECK_WORDS).min(n);
        // Chunks start at multiples of 8 words, so on byte boundaries.
        let bytes = &data[start * k / 8..(end * k).div_ceil(8)];
        let part = unpack_buf(bytes, k as u32, width, end - start);
        if !super::select::buf_equals_field(&part, src, start, shift, width) {
            return Ok(false);
        }
        start = end;
    }
    Ok(true)
}

/// Words [`matches_field`] unpacks at a time: a multiple of 8 (chunks start on byte
/// boundaries) small enough that the buffer stays in the L1 cache.
const CHECK_WORDS: usize = 1 << 12;

/// The bits per word `k` and the packed bytes of `body` after the checks [`decode`]
/// documents.
fn validate(body: &[u8], width: u32, n: usize) -> Result<(u32, &[u8]), CodecError> {
    check_width(width, NAME)?;
    let Some((&k, data)) = body.split_first() else {
        return Err(CodecError::Truncated {
            codec: NAME,
            needed: 1,
            available: 0,
        });
    };
    let k = u32::from(k);
    if k > width {
        return Err(CodecError::Invalid {
            codec: NAME,
            what: format!("{k} bits per word, expected at most {width}"),
        });
    }
    let need = size_for(k, n);
    let have = body.len() as u64;
    if have < need {
        return Err(CodecError::Truncated {
            codec: NAME,
            needed: need,
            available: have,
        });
    }
    if have > need {
        return Err(CodecError::TrailingBytes {
            codec: NAME,
            extra: have - need,
        });
    }
    let used = k as u64 * n as u64;
    let pad = (8 - (used % 8) as u32) % 8;
    if pad > 0 && data.last().is_some_and(|&b| b >> (8 - pad) != 0) {
        return Err(CodecError::Invalid {
            codec: NAME,
            what: "nonzero padding bits".into(),
        });
    }
    Ok((k, data))
}

feature_fn! {
    "avx2";
    /// `n` words of `k` (1 to `width`) bits from `data`, which holds them, in the container of
    /// `width`-bit words.
    ///
    /// Compiled a second time with AVX2, picked at run time.
    fn unpack_buf(data: &[u8], k: u32, width: u32, n: usize) -> WordBuf = unpack_buf_in;
}

/// [`unpack_buf`]'s work, inlined into each of its builds.
#[inline(always)]
fn unpack_buf_in(data: &[u8], k: u32, width: u32, n: usize) -> WordBuf {
    match container_bytes(width) {
        1 if k == 1 => WordBuf::U8(unpack_bits_u8(data, n)),
        1 if k == 4 => WordBuf::U8(unpack_nibbles_u8(data, n)),
        1 => WordBuf::U8(unpack(data, k, n)),
        2 => WordBuf::U16(unpack(data, k, n)),
        4 => WordBuf::U32(unpack(data, k, n)),
        _ => WordBuf::U64(unpack(data, k, n)),
    }
}

/// `n` one-bit words into bytes (sign planes) from `data`, which holds them: each byte
/// becomes eight with one multiply (the byte copied into every lane, lane `j` keeping
/// bit `j`, then each lane's nonzero turned into 1 by a carry into its top bit).
#[inline(always)]
fn unpack_bits_u8(data: &[u8], n: usize) -> Vec<u8> {
    const LANES: u64 = 0x0101_0101_0101_0101;
    // Whole groups as arrays of eight, written once (no zeroing pass first).
    let mut groups: Vec<[u8; 8]> = Vec::with_capacity(n.div_ceil(8));
    groups.extend(data[..n / 8].iter().map(|&b| {
        let bit = (u64::from(b) * LANES) & 0x8040_2010_0804_0201;
        (((bit + 0x7F7F_7F7F_7F7F_7F7F) >> 7) & LANES).to_le_bytes()
    }));
    let mut out = groups.into_flattened();
    if let Some(&last) = data.get(n / 8) {
        out.extend((0..n % 8).map(|j| (last >> j) & 1));
    }
    out
}

/// `n` four-bit words into bytes (low mantissa nibbles) from `data`, which holds them:
/// each byte becomes its low then its high nibble, written once (no zeroing pass).
#[inline(always)]
fn unpack_nibbles_u8(data: &[u8], n: usize) -> Vec<u8> {
    let mut pairs: Vec<[u8; 2]> = Vec::with_capacity(n.div_ceil(2));
    pairs.extend(data[..n / 2].iter().map(|&b| [b & 0xF, b >> 4]));
    let mut out = pairs.into_flattened();
    if n % 2 == 1 {
        out.push(data[n / 2] & 0xF);
    }
    out
}

/// `n` words of `k >= 1` bits from `data`, whose length was checked to hold them.
fn unpack<T: Word>(data: &[u8], k: u32, n: usize) -> Vec<T> {
    let mut out = vec![T::default(); n];
    unpack_into(data, k, &mut out);
    out
}

/// `out.len()` words of `k` (0..=64) bits from the start of `data`, which must hold
/// them (`ceil(out.len() k / 8)` bytes). What [`decode`] does, into a slice: a caller
/// decoding a block of words `[s, s + len)` with `s` a multiple of 8 passes the bytes
/// from `s k / 8` on.
///
/// # Panics
/// If `data` is shorter than the words need.
pub(crate) fn unpack_into<T: Word>(data: &[u8], k: u32, out: &mut [T]) {
    assert!(
        data.len() as u64 * 8 >= out.len() as u64 * u64::from(k),
        "the data holds the words"
    );
    if !matches!(k, 0 | 8 | 16 | 24 | 32) && simd::unpack(data, k, out) {
        return;
    }
    unpack_portable(data, k, out);
}

/// [`unpack_scalar`] compiled a second time with AVX2 (its loops vectorize twice as
/// wide: the sign and nibble planes of a `merge`), picked at run time: what unpacks
/// where the SIMD kernels do not apply (no AVX-512 VBMI).
fn unpack_portable<T: Word>(data: &[u8], k: u32, out: &mut [T]) {
    #[cfg(target_arch = "x86_64")]
    if crate::simd::level().avx2 {
        #[target_feature(enable = "avx2")]
        fn with_avx2<T: Word>(data: &[u8], k: u32, out: &mut [T]) {
            unpack_scalar_in(data, k, out);
        }
        // SAFETY: the processor has AVX2 (checked above).
        return unsafe { with_avx2(data, k, out) };
    }
    unpack_scalar_in(data, k, out);
}

/// `out[i] |= word_i << shift` for the `out.len()` words of `k` bits at the start of
/// `data`: a `merge` field OR-ed into the output's words with no buffer between, where
/// a SIMD path applies (AVX-512 VBMI, `k` at most 25, 16- or 32-bit output words);
/// returns whether it did (else nothing is written: unpack, then OR).
///
/// # Panics
/// If `data` is shorter than the words need.
pub(crate) fn unpack_or_into<T: Word>(data: &[u8], k: u32, out: &mut [T], shift: u32) -> bool {
    simd::unpack_or(data, k, out, shift)
}

/// [`unpack_into`] without SIMD: the reference the SIMD path is tested against.
pub(crate) fn unpack_scalar<T: Word>(data: &[u8], k: u32, out: &mut [T]) {
    unpack_scalar_in(data, k, out);
}

/// [`unpack_scalar`]'s work, inlined into each of its builds.
#[inline(always)]
fn unpack_scalar_in<T: Word>(data: &[u8], k: u32, out: &mut [T]) {
    let n = out.len();
    fn bytes<T: Word, const NB: usize>(data: &[u8], out: &mut [T]) {
        for (o, c) in out.iter_mut().zip(data.chunks_exact(NB)) {
            let mut a = [0u8; 8];
            a[..NB].copy_from_slice(c);
            *o = T::from_u64(u64::from_le_bytes(a));
        }
    }
    match k {
        0 => return out.fill(T::default()),
        8 => return bytes::<T, 1>(data, out),
        16 => return bytes::<T, 2>(data, out),
        24 => return bytes::<T, 3>(data, out),
        32 => return bytes::<T, 4>(data, out),
        40 => return bytes::<T, 5>(data, out),
        48 => return bytes::<T, 6>(data, out),
        56 => return bytes::<T, 7>(data, out),
        64 => return bytes::<T, 8>(data, out),
        _ => {}
    }
    let m = mask(k);
    let groups = n / 8;
    let (whole, rest) = out.split_at_mut(groups * 8);
    if k <= 16 {
        // Whole groups with constant shifts, then the rest one by one.
        match k {
            1 => unpack_sub_byte::<T, 1>(data, whole),
            2 => unpack_sub_byte::<T, 2>(data, whole),
            4 => unpack_sub_byte::<T, 4>(data, whole),
            _ => small_k!(k, K => unpack_groups::<T, K>(data, whole)),
        }
    } else if k <= 32 {
        // Whole groups of eight words (k bytes each) with constant shifts: the 20- and
        // 23-bit mantissa fields of F32 tensors.
        wide_k!(k, K => unpack_wide_groups::<T, K>(data, whole));
    } else if k <= 56 {
        // Eight words of k bits fill exactly k bytes: decode whole groups from a padded
        // copy with one unaligned load per word.
        let group = k as usize;
        let mut buf = [0u8; 64];
        for (c, o) in data.chunks_exact(group).zip(whole.chunks_exact_mut(8)) {
            buf[..group].copy_from_slice(c);
            for (j, w) in o.iter_mut().enumerate() {
                let bit = j * group;
                let b = bit >> 3;
                let mut a = [0u8; 8];
                a.copy_from_slice(&buf[b..b + 8]);
                *w = T::from_u64((u64::from_le_bytes(a) >> (bit & 7)) & m);
            }
        }
    } else {
        for (i, w) in whole.iter_mut().enumerate() {
            let pos = i as u64 * u64::from(k);
            let lo = peek64(data, pos) & mask(32);
            let hi = peek64(data, pos + 32) & mask(k - 32);
            *w = T::from_u64(lo | hi << 32);
        }
    }
    let mut pos = (groups * 8) as u64 * u64::from(k);
    for o in rest {
        *o = T::from_u64(if k <= 56 {
            peek64(data, pos) & m
        } else {
            (peek64(data, pos) & mask(32)) | (peek64(data, pos + 32) & mask(k - 32)) << 32
        });
        pos += u64::from(k);
    }
}

/// The bits per word and the packed words of a bit-packed `body` of `n` words of `width`
/// bits, after [`decode`]'s checks: what a caller unpacking blocks with [`unpack_into`]
/// starts from.
///
/// # Errors
/// As [`decode`].
pub(crate) fn packed(body: &[u8], width: u32, n: usize) -> Result<(u32, &[u8]), CodecError> {
    validate(body, width, n)
}

#[cfg(test)]
mod tests;
