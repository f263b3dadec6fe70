//! The decoder: the table, then the payload into words (scalar for the classic layout,
//! SIMD kernels for the wide one), and a check of a payload against a field without
//! building the words.

use super::freqs::{read_table, Table};
use super::{Layout, RANS_L, WIDE_LANES};

use crate::codec::table::{check_width, try_constant, try_filled, Word};
use crate::codec::CodecError;
use crate::tensor::{container_bytes, WordBuf, Words};

/// Decodes `n` words of `width` bits from exactly `body`, a body in `layout` (any
/// length decodes in either layout).
///
/// # Errors
/// A truncated body, a table inconsistent with `(width, n)` (count, set, frequencies not
/// summing to `2^s`), initial states out of range, a payload that runs out, final states
/// other than `2^23`, or trailing bytes. Allocates the `n` words and a table of `2^s`
/// slots (`s <= 16`).
pub fn decode(body: &[u8], width: u32, n: usize, layout: Layout) -> Result<Words, CodecError> {
    let name = layout.codec().name();
    check_width(width, name)?;
    let t = read_table(body, width, n, name)?;
    if t.syms.len() <= 1 {
        return match t.syms.first() {
            Some(&s) => try_constant(width, s, n, name),
            None => Ok(Words::empty(width)),
        };
    }
    let payload = body.get(t.bytes..).unwrap_or(&[]);
    let buf = match container_bytes(width) {
        1 => WordBuf::U8(decode_payload(
            payload,
            &t,
            n,
            layout,
            super::simd::wide_u8(),
        )?),
        2 => WordBuf::U16(decode_payload(
            payload,
            &t,
            n,
            layout,
            super::simd::wide_u16(),
        )?),
        4 => WordBuf::U32(decode_payload(payload, &t, n, layout, None)?),
        _ => WordBuf::U64(decode_payload(payload, &t, n, layout, None)?),
    };
    // Every word came from a validated table (symbols < 2^width) or a field of at most
    // `width` bits.
    Ok(Words::from_buf_trusted(width, buf))
}

/// Whether `body`, a body in `layout`, decodes to exactly field `(shift, width)` of
/// `src`: the words `(v >> shift) & (2^width - 1)` of its words `v` (the whole stream
/// for `shift = 0, width = src.width()`). What `decode(body, width, src.len(), layout)`
/// followed by a comparison with the field says, and the same error where that decode
/// fails (when the words differ too, either `Ok(false)` or the error).
///
/// Fields of 8- and 16-bit containers in the wide layout are checked without decoding:
/// the decoder's steps and refills are run with each step's frequency and slot start
/// taken from the word the field holds there, and the state's slot checked to lie in
/// that word's slots. The slots of the table's words partition `[0, 2^s)`, so the slot
/// lies in the expected word's slots exactly when the decoder, which looks the slot up,
/// gives that word; the two then compute the same state and read the same bytes, step by
/// step. No gather waits for the previous step and nothing is allocated but the table of
/// `2^width` entries: about twice the decoder's speed (docs/bench.md). Other bodies are
/// decoded and compared.
///
/// # Errors
/// As [`decode`].
///
/// # Panics
/// If the field does not lie inside the words (`shift + width > src.width()`).
pub fn matches_field(
    body: &[u8],
    src: &Words,
    shift: u32,
    width: u32,
    layout: Layout,
) -> Result<bool, CodecError> {
    assert!(
        shift + width <= src.width(),
        "the field lies inside the words"
    );
    let n = src.len();
    let name = layout.codec().name();
    check_width(width, name)?;
    let decoded = || -> Result<bool, CodecError> {
        let words = decode(body, width, n, layout)?;
        Ok(crate::codec::select::equals_field(&words, src, shift))
    };
    let checkable = layout == Layout::Wide
        && width <= 16
        && matches!(src.buf(), WordBuf::U8(_) | WordBuf::U16(_));
    if !checkable {
        return decoded();
    }
    let t = read_table(body, width, n, name)?;
    if t.syms.len() <= 1 {
        return decoded();
    }
    let payload = body.get(t.bytes..).unwrap_or(&[]);
    let field = Field {
        shift,
        mask: crate::tensor::mask(width) as u32,
    };
    match src.buf() {
        WordBuf::U8(v) => check_payload(payload, &t, width, v, field, super::simd::check_u8()),
        WordBuf::U16(v) => check_payload(payload, &t, width, v, field, super::simd::check_u16()),
        _ => decoded(),
    }
}

/// Which bits of each source word the checked words are: `(v >> shift) & mask`.
#[derive(Clone, Copy, Debug)]
pub(in crate::codec) struct Field {
    pub(in crate::codec) shift: u32,
    pub(in crate::codec) mask: u32,
}

/// What the checker of the wide layout reads: per word value below `2^width`, its
/// frequency and slot start `freq | cum << 16` (0 for a value that is no symbol), the
/// precision and the payload.
pub(in crate::codec) struct Checker<'a> {
    pub(in crate::codec) fc: &'a [u32],
    pub(in crate::codec) scale: u32,
    pub(in crate::codec) payload: &'a [u8],
}

/// A SIMD checker of whole wide-layout groups against the field of the words they must
/// give (see [`matches_field`]): checks groups from the states while its payload reads
/// stay inside, and returns the read position, the words checked (a multiple of
/// [`WIDE_LANES`]) and whether every one was right.
pub(in crate::codec) type CheckFn<T> =
    fn(&Checker<'_>, &[T], Field, &mut [u32; WIDE_LANES]) -> (usize, usize, bool);

/// [`matches_field`] for a wide-layout payload of two or more symbols whose words must
/// be `field` of `src`.
pub(super) fn check_payload<T: Word + Into<u64>>(
    payload: &[u8],
    t: &Table,
    width: u32,
    src: &[T],
    field: Field,
    simd: Option<CheckFn<T>>,
) -> Result<bool, CodecError> {
    let name = Layout::Wide.codec().name();
    let mut x = initial_states(payload, t, WIDE_LANES, name)?;
    let mut fc = vec![0u32; 1 << width];
    let mut cum = 0u32;
    for (&s, &f) in t.syms.iter().zip(&t.freqs) {
        // Two or more symbols: every frequency and slot start is below 2^16.
        fc[s as usize] = f | cum << 16;
        cum += f;
    }
    let scale = t.scale;
    let mask = (1u32 << scale) - 1;
    let x: &mut [u32; WIDE_LANES] = (&mut x[..]).try_into().map_err(|_| CodecError::Invalid {
        codec: name,
        what: "lanes".into(),
    })?;
    let checker = Checker {
        fc: &fc,
        scale,
        payload,
    };
    let (mut pos, done, mut ok) =
        simd.map_or((4 * WIDE_LANES, 0, true), |f| f(&checker, src, field, x));
    if !ok {
        // The states went wrong with the first wrong word: nothing after it is worth
        // checking.
        return Ok(false);
    }
    let byte = |i: usize| payload.get(i).map_or(0, |&b| u32::from(b));
    for group in src[done..].chunks(WIDE_LANES) {
        for (&v, xj) in group.iter().zip(x.iter_mut()) {
            let w = (v.into() >> field.shift) as u32 & field.mask;
            let e = fc.get(w as usize).copied().unwrap_or(0);
            let (f, d) = (e & 0xFFFF, (*xj & mask).wrapping_sub(e >> 16));
            ok &= d < f;
            *xj = f.wrapping_mul(*xj >> scale).wrapping_add(d);
        }
        if !ok {
            return Ok(false);
        }
        for _ in 0..2 {
            for xj in x.iter_mut().take(group.len()) {
                let need = *xj < RANS_L;
                *xj = if need { *xj << 8 | byte(pos) } else { *xj };
                pos += usize::from(need);
            }
        }
    }
    finish_payload(payload.len(), pos, x, t, name)?;
    Ok(ok)
}

/// The decoding tables of one body and its payload.
pub(in crate::codec) struct Decoder<'a, T> {
    /// Per slot `freq | (slot - cum) << 16`: exactly `2^scale` entries.
    pub(in crate::codec) fb: &'a [u32],
    /// Per slot, the symbol; then [`SYM_PAD`] zeros, so that a 4-byte read at any slot's
    /// symbol stays inside.
    pub(in crate::codec) sym: &'a [T],
    pub(in crate::codec) scale: u32,
    pub(in crate::codec) payload: &'a [u8],
}

/// Zero symbols after the last slot's (see [`Decoder::sym`]).
pub(in crate::codec) const SYM_PAD: usize = 4;

/// A SIMD decoder of whole wide-layout groups: decodes groups into `out` from the states
/// while its payload reads stay inside, and returns the read position and the words
/// written (a multiple of [`WIDE_LANES`]), as [`Decoder::fast`] does.
pub(in crate::codec) type WideFn<T> =
    fn(&Decoder<'_, T>, &mut [T], &mut [u32; WIDE_LANES]) -> (usize, usize);

impl<T: Word> Decoder<'_, T> {
    /// One decoding step without renormalization: the new state and the symbol.
    #[inline(always)]
    fn step(&self, x: u32) -> (u32, T) {
        let slot = (x & ((1 << self.scale) - 1)) as usize;
        let e = self.fb[slot];
        ((e & 0xFFFF) * (x >> self.scale) + (e >> 16), self.sym[slot])
    }

    /// The slot entries and symbols as slices of exactly `2^scale` entries, so that
    /// `x & mask` (the third value) indexes them without a bounds check.
    #[inline(always)]
    fn tables(&self) -> Option<(&[u32], &[T], u32)> {
        let mask = (1u32 << self.scale) - 1;
        Some((
            self.fb.get(..=mask as usize)?,
            self.sym.get(..=mask as usize)?,
            mask,
        ))
    }

    /// Decodes groups of `K` words while 8 payload bytes remain after the read position
    /// (a group reads at most `2 K <= 8`). Returns the read position and the number of
    /// words written.
    #[inline(never)]
    fn fast<const K: usize>(&self, out: &mut [T], x: &mut [u32; K]) -> (usize, usize) {
        let Some((fb, sym, mask)) = self.tables() else {
            return (4 * K, 0);
        };
        let scale = self.scale;
        let mut xs = *x;
        let mut pos = 4 * K;
        let mut done = 0;
        for group in out.chunks_exact_mut(K) {
            let Some(win) = self.payload.get(pos..pos + 8) else {
                break;
            };
            // Big-endian: the first byte read is the top byte.
            let w = u64::from_be_bytes(win.try_into().unwrap_or([0; 8]));
            // First every lane's step (independent of one another), then the refills:
            // each lane's bytes start where the previous lanes' end, a prefix sum, so no
            // lane waits for another's table lookup.
            let mut y = [0u32; K];
            let mut bits = [0u32; K];
            for j in 0..K {
                let slot = (xs[j] & mask) as usize;
                let e = fb[slot];
                group[j] = sym[slot];
                let yj = (e & 0xFFFF) * (xs[j] >> scale) + (e >> 16);
                // y >= 2^(23 - s) >= 2^7: it takes one byte below 2^23, two below 2^15.
                bits[j] = 8 * (u32::from(yj < RANS_L) + u32::from(yj < 1 << 15));
                y[j] = yj;
            }
            let mut off = 0u32;
            for j in 0..K {
                // At most 2 K <= 8 bytes in all, so `off` stays below 64 here. The first
                // byte read lands above the second.
                // The next `bits[j]` bits at the top of `w << off` (none when 0: the
                // split shift never reaches 64).
                let next = ((w << off) >> 1 >> (63 - bits[j])) as u32;
                xs[j] = y[j] << bits[j] | next;
                off += bits[j];
            }
            pos += (off / 8) as usize;
            done += K;
        }
        *x = xs;
        (pos, done)
    }

    /// Decodes all of `out` in the wide layout from the states in `x`, with `simd` for
    /// the groups it takes, returning the final read position (past the payload's end if
    /// it ran out: missing bytes read as zeros).
    fn run_wide(&self, out: &mut [T], x: &mut [u32; WIDE_LANES], simd: Option<WideFn<T>>) -> usize {
        let (mut pos, done) = match simd.map(|f| f(self, out, x)) {
            Some(r) if r.1 > 0 => r,
            _ => self.fast_wide(out, x),
        };
        let byte = |i: usize| self.payload.get(i).map_or(0, |&b| u32::from(b));
        for group in out[done..].chunks_mut(WIDE_LANES) {
            for (o, xj) in group.iter_mut().zip(x.iter_mut()) {
                let (y, s) = self.step(*xj);
                *xj = y;
                *o = s;
            }
            for _ in 0..2 {
                for xj in x.iter_mut().take(group.len()) {
                    let need = *xj < RANS_L;
                    *xj = if need { *xj << 8 | byte(pos) } else { *xj };
                    pos += usize::from(need);
                }
            }
        }
        pos
    }

    /// The scalar decoder of whole wide-layout groups while 64 payload bytes remain after
    /// the read position (a group reads at most 64). Returns the read position and the
    /// number of words written.
    #[inline(never)]
    fn fast_wide(&self, out: &mut [T], x: &mut [u32; WIDE_LANES]) -> (usize, usize) {
        let Some((fb, sym, mask)) = self.tables() else {
            return (4 * WIDE_LANES, 0);
        };
        let scale = self.scale;
        let mut pos = 4 * WIDE_LANES;
        let mut done = 0;
        for group in out.chunks_exact_mut(WIDE_LANES) {
            let Some(win) = self.payload.get(pos..pos + 2 * WIDE_LANES) else {
                break;
            };
            // The steps, counting the bytes of the first round as they go; then both
            // rounds at once, as the SIMD decoder does: a state takes a second byte iff
            // it is below 2^15 after its step.
            let mut first = 0;
            for (o, xj) in group.iter_mut().zip(x.iter_mut()) {
                let slot = (*xj & mask) as usize;
                let e = fb[slot];
                *o = sym[slot];
                *xj = (e & 0xFFFF) * (*xj >> scale) + (e >> 16);
                first += usize::from(*xj < RANS_L);
            }
            let (mut one, mut two) = (0, first);
            for xj in x.iter_mut() {
                // Branch-free: whether a state takes a byte is close to a coin toss.
                let n1 = u32::from(*xj < RANS_L);
                let n2 = u32::from(*xj < RANS_L >> 8);
                // At most 2 * 32 reads in a group: both offsets stay below 64.
                let b1 = u32::from(win[one & (2 * WIDE_LANES - 1)]) & n1.wrapping_neg();
                let b2 = u32::from(win[two & (2 * WIDE_LANES - 1)]) & n2.wrapping_neg();
                *xj = (*xj << (8 * n1) | b1) << (8 * n2) | b2;
                one += n1 as usize;
                two += n2 as usize;
            }
            pos += two;
            done += WIDE_LANES;
        }
        (pos, done)
    }

    /// Decodes all of `out` from the states in `x`, returning the final read position
    /// (past the payload's end if it ran out: missing bytes read as zeros).
    fn run<const K: usize>(&self, out: &mut [T], x: &mut [u32; K]) -> usize {
        let (mut pos, done) = self.fast(out, x);
        let byte = |i: usize| self.payload.get(i).map_or(0, |&b| u32::from(b));
        for (i, o) in out.iter_mut().enumerate().skip(done) {
            let (mut y, s) = self.step(x[i % K]);
            for _ in 0..2 {
                let need = y < RANS_L;
                y = if need { y << 8 | byte(pos) } else { y };
                pos += usize::from(need);
            }
            x[i % K] = y;
            *o = s;
        }
        pos
    }
}

pub(super) fn decode_payload<T: Word>(
    payload: &[u8],
    t: &Table,
    n: usize,
    layout: Layout,
    simd: Option<WideFn<T>>,
) -> Result<Vec<T>, CodecError> {
    let name = layout.codec().name();
    let invalid = |what: String| CodecError::Invalid { codec: name, what };
    let k = layout.lanes(n);
    let mut x = initial_states(payload, t, k, name)?;
    let scale = t.scale;
    // Per slot: `freq | (slot - cum) << 16`, and the symbol.
    let mut fb = vec![0u32; 1 << scale];
    let mut sym = vec![T::default(); (1 << scale) + SYM_PAD];
    let mut cum = 0usize;
    for (&s, &f) in t.syms.iter().zip(&t.freqs) {
        let f = f as usize;
        for (b, e) in fb[cum..cum + f].iter_mut().enumerate() {
            *e = f as u32 | (b as u32) << 16;
        }
        sym[cum..cum + f].fill(T::from_u64(s));
        cum += f;
    }
    let mut out: Vec<T> = try_filled(T::default(), n, name)?;
    let dec = Decoder {
        fb: &fb,
        sym: &sym,
        scale,
        payload,
    };
    let pos = match (layout, k) {
        (Layout::Wide, _) => dec.run_wide(
            &mut out,
            (&mut x[..])
                .try_into()
                .map_err(|_| invalid("lanes".into()))?,
            simd,
        ),
        (Layout::Classic, 1) => dec.run::<1>(
            &mut out,
            (&mut x[..])
                .try_into()
                .map_err(|_| invalid("lanes".into()))?,
        ),
        (Layout::Classic, 2) => dec.run::<2>(
            &mut out,
            (&mut x[..])
                .try_into()
                .map_err(|_| invalid("lanes".into()))?,
        ),
        (Layout::Classic, _) => dec.run::<4>(
            &mut out,
            (&mut x[..])
                .try_into()
                .map_err(|_| invalid("lanes".into()))?,
        ),
    };
    finish_payload(payload.len(), pos, &x, t, name)?;
    Ok(out)
}

/// The `k` initial states at the start of `payload` (after table `t`).
///
/// # Errors
/// A payload shorter than the states, or a state outside `[2^23, 2^31)`.
pub(super) fn initial_states(
    payload: &[u8],
    t: &Table,
    k: usize,
    name: &'static str,
) -> Result<Vec<u32>, CodecError> {
    let Some(states) = payload.get(..4 * k) else {
        return Err(CodecError::Truncated {
            codec: name,
            needed: (t.bytes + 4 * k) as u64,
            available: (t.bytes + payload.len()) as u64,
        });
    };
    let x: Vec<u32> = states
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    if let Some(&bad) = x.iter().find(|&&xi| !(RANS_L..RANS_L << 8).contains(&xi)) {
        return Err(CodecError::Invalid {
            codec: name,
            what: format!("initial state {bad:#x}, expected in [0x800000, 0x80000000)"),
        });
    }
    Ok(x)
}

/// Checks the end of a decode of a payload of `len` bytes (after table `t`) that read up
/// to `pos` and left the states `x`.
///
/// # Errors
/// A payload that ran out (`pos > len`), a final state other than `2^23`, or bytes left
/// over.
pub(super) fn finish_payload(
    len: usize,
    pos: usize,
    x: &[u32],
    t: &Table,
    name: &'static str,
) -> Result<(), CodecError> {
    if pos > len {
        return Err(CodecError::Truncated {
            codec: name,
            needed: (t.bytes + pos) as u64,
            available: (t.bytes + len) as u64,
        });
    }
    if let Some((i, &bad)) = x.iter().enumerate().find(|&(_, &xi)| xi != RANS_L) {
        return Err(CodecError::Invalid {
            codec: name,
            what: format!("final state {i} is {bad:#x}, expected 0x800000"),
        });
    }
    if pos != len {
        return Err(CodecError::TrailingBytes {
            codec: name,
            extra: (len - pos) as u64,
        });
    }
    Ok(())
}
