//! AVX2 coding of the wide rANS layout (codec `rans32`, see the parent module): the 32
//! states as four vectors of 8.
//!
//! * Decoding: each step a lookup of the slot entries and the symbols (eight loads: see
//!   [`imp::lookup8`] on why not gathers), each refill round a
//!   byte load widened to 8 lanes and permuted into the lanes that need a byte (Giesen,
//!   "Interleaved entropy coders", 2014, §4; his `rans_sse` decodes 16-bit words, this
//!   one bytes). [`wide_u8`] and [`wide_u16`].
//! * Checking (compression's verify): the decoding steps and refills against the words
//!   a body must give, each step's constants looked up by the word rather than by the
//!   state's slot (no lookup waits for the previous step), the slot checked to lie in
//!   that word's slots. [`check_u8`], [`check_u16`].
//! * Encoding: each step a lookup of the word's constants (frequency and slot start,
//!   reciprocal; the reciprocal's shift and the bias derived from them), the
//!   renormalization decided for 8 lanes by two compares, the division by a 32x32 high
//!   multiply; each round's shed bytes packed to the front by a
//!   256-entry shuffle table and stored 8 at a time. [`encoder`].
//!
//! Chosen at run time: only when the processor has AVX2 (and POPCNT). The results are
//! bit-identical to the scalar coder's, which takes the rest and every other machine.
//!
//! Besides this module, `unsafe` code is limited to the memory mapping and its SIGBUS
//! guard (`archive`) and the `lzcnt` builds of the table planners (`codec`).

use super::{CheckFn, Checker, Decoder, Field, WideFn, RANS_L, SYM_PAD, WIDE_LANES};

/// The AVX2 decoder of 8-bit words, if this processor has AVX2.
pub(super) fn wide_u8() -> Option<WideFn<u8>> {
    imp::available().then_some(imp::run_checked::<1, u8> as WideFn<u8>)
}

/// The AVX2 decoder of 16-bit words, if this processor has AVX2.
pub(super) fn wide_u16() -> Option<WideFn<u16>> {
    imp::available().then_some(imp::run_checked::<2, u16> as WideFn<u16>)
}

/// The AVX2 checker of 8-bit words, if this processor has AVX2. (An AVX-512 checker on
/// two vectors of 16 states was slower on a Zen 5: 15 against 13 ms on minilm.)
pub(super) fn check_u8() -> Option<CheckFn<u8>> {
    imp::available().then_some(imp::check_checked::<1, u8> as CheckFn<u8>)
}

/// The AVX2 checker of 16-bit words, if this processor has AVX2.
pub(super) fn check_u16() -> Option<CheckFn<u16>> {
    imp::available().then_some(imp::check_checked::<2, u16> as CheckFn<u16>)
}

/// Per word value, the encoder's constants of its symbol: `freq | cum << 16` (its
/// frequency and the start of its slots, each below `2^16`) and the reciprocal of the
/// frequency (Giesen's `RansEncSymbol`, see `EncSym`; the encoder derives the shift and
/// the bias from the first); entries of values that are not symbols are never read for
/// a valid stream. Eight bytes, so that an 11-bit stream's table fits the L1 cache.
pub(super) type EncEntry = [u32; 2];

/// A SIMD encoder of whole wide-layout groups: encodes `groups` (a multiple of
/// [`WIDE_LANES`] words, last group first) into the states `x` with the per-value table
/// `tab` (a power of two of entries) at precision `scale`; the value of a word `w` is
/// `(w >> shift) & (tab.len() - 1)` (`shift` below 16: a bit field of the words, or the
/// words themselves with 0).
/// With an output, stores the shed bytes from its start in the order the scalar sink
/// would (it needs `2 * groups.len() + 32` bytes; the sink's room is twice the words);
/// returns the number of bytes shed, or `None` (nothing done) if the arguments do not
/// fit.
pub(super) type EncFn<T> =
    fn(&[T], &[EncEntry], u32, u32, &mut [u32; WIDE_LANES], Option<&mut [u8]>) -> Option<usize>;

/// The SIMD encoder for words of type `T` (8 or 16 bits): the AVX-512 one if this
/// processor has what it needs ([`encoder_avx512`]), else the AVX2 one if it has AVX2
/// ([`encoder_avx2`]). Both shed the same bytes.
pub(super) fn encoder<T: Copy>() -> Option<EncFn<T>> {
    encoder_avx512().or_else(encoder_avx2)
}

/// The AVX2 encoder for words of type `T` (8 or 16 bits), if this processor has AVX2.
pub(super) fn encoder_avx2<T: Copy>() -> Option<EncFn<T>> {
    if !imp::available() {
        return None;
    }
    match size_of::<T>() {
        1 => Some(imp::encode_checked::<1, T> as EncFn<T>),
        2 => Some(imp::encode_checked::<2, T> as EncFn<T>),
        _ => None,
    }
}

/// The AVX-512 encoder for words of type `T` (8 or 16 bits): the AVX2 encoder's steps
/// on two vectors of 16 states, each round's shed bytes packed by one compress
/// (VBMI2) instead of four table shuffles; if this processor has AVX-512 F, CD, BW, VL
/// and VBMI2. About 1.4x the AVX2 encoder's speed on an AMD Zen 5 (docs/bench.md).
pub(super) fn encoder_avx512<T: Copy>() -> Option<EncFn<T>> {
    if !imp::available512() {
        return None;
    }
    match size_of::<T>() {
        1 => Some(imp::encode512_checked::<1, T> as EncFn<T>),
        2 => Some(imp::encode512_checked::<2, T> as EncFn<T>),
        _ => None,
    }
}

#[cfg(not(target_arch = "x86_64"))]
mod imp {
    use super::*;

    pub(super) fn available() -> bool {
        false
    }

    pub(super) fn available512() -> bool {
        false
    }

    pub(super) fn encode512_checked<const W: usize, T>(
        _: &[T],
        _: &[EncEntry],
        _: u32,
        _: u32,
        _: &mut [u32; WIDE_LANES],
        _: Option<&mut [u8]>,
    ) -> Option<usize> {
        None
    }

    pub(super) fn encode_checked<const W: usize, T>(
        _: &[T],
        _: &[EncEntry],
        _: u32,
        _: u32,
        _: &mut [u32; WIDE_LANES],
        _: Option<&mut [u8]>,
    ) -> Option<usize> {
        None
    }

    pub(super) fn run_checked<const W: usize, T>(
        _: &Decoder<'_, T>,
        _: &mut [T],
        _: &mut [u32; WIDE_LANES],
    ) -> (usize, usize) {
        (4 * WIDE_LANES, 0)
    }

    pub(super) fn check_checked<const W: usize, T>(
        _: &Checker<'_>,
        _: &[T],
        _: Field,
        _: &mut [u32; WIDE_LANES],
    ) -> (usize, usize, bool) {
        (4 * WIDE_LANES, 0, true)
    }
}

#[cfg(target_arch = "x86_64")]
mod imp {
    use super::*;
    use std::arch::x86_64::*;

    pub(super) fn available() -> bool {
        std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("popcnt")
    }

    /// Whether the processor has what [`encode512`] needs.
    pub(super) fn available512() -> bool {
        available()
            && crate::simd::avx512_allowed()
            && std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512cd")
            && std::arch::is_x86_feature_detected!("avx512bw")
            && std::arch::is_x86_feature_detected!("avx512vl")
            && std::arch::is_x86_feature_detected!("avx512vbmi2")
    }

    /// Per 8-bit mask of the lanes that take a byte, the index of the byte each such
    /// lane takes among the next 8 (the count of mask bits below the lane).
    static REFILL: [[u32; 8]; 256] = {
        let mut t = [[0u32; 8]; 256];
        let mut m = 0;
        while m < 256 {
            let mut k = 0;
            let mut j = 0;
            while j < 8 {
                t[m][j] = k;
                k += (m as u32 >> j) & 1;
                j += 1;
            }
            m += 1;
        }
        t
    };

    /// [`run`] once the processor is known to have what it needs (otherwise nothing).
    pub(super) fn run_checked<const W: usize, T: Copy>(
        d: &Decoder<'_, T>,
        out: &mut [T],
        x: &mut [u32; WIDE_LANES],
    ) -> (usize, usize) {
        if !available() {
            return (4 * WIDE_LANES, 0);
        }
        // SAFETY: AVX2 and POPCNT are present (checked above).
        unsafe { run::<W, T>(d.fb, d.sym, d.scale, d.payload, out, x) }
    }

    /// Decodes whole groups of words of `W` bytes (1 or 2, the size of `T`).
    ///
    /// # Safety
    /// The processor must have AVX2 and POPCNT.
    #[target_feature(enable = "avx2,popcnt")]
    unsafe fn run<const W: usize, T: Copy>(
        fb: &[u32],
        sym: &[T],
        scale: u32,
        payload: &[u8],
        out: &mut [T],
        x: &mut [u32; WIDE_LANES],
    ) -> (usize, usize) {
        let start = 4 * WIDE_LANES;
        let slots = 1usize << scale;
        if size_of::<T>() != W || fb.len() != slots || sym.len() < slots + SYM_PAD {
            return (start, 0);
        }
        let fbp = fb.as_ptr().cast::<i32>();
        let symp = sym.as_ptr();
        let mask = _mm256_set1_epi32(slots as i32 - 1);
        let low16 = _mm256_set1_epi32(0xFFFF);
        let shift = _mm_cvtsi32_si128(scale as i32);
        // SAFETY: AVX2 is present (this function's own requirement).
        let mut xs = unsafe { load_states(x) };
        // SAFETY (every load and store below): lookups read `fb` and `sym` at slots
        // below `2^scale` = `fb.len()` <= `sym.len()`; the refill's reads as in
        // `refill`; stores write the 8 words `done + 8 v ..` of a group with
        // `done + 32 <= out.len()`.
        let mut pos = start;
        let mut done = 0;
        let outp = out.as_mut_ptr();
        while done + WIDE_LANES <= out.len() && pos + 2 * WIDE_LANES <= payload.len() {
            for (v, xv) in xs.iter_mut().enumerate() {
                let slots = lanes(_mm256_and_si256(*xv, mask));
                let e = unsafe { lookup8(fbp, &slots) };
                let f = _mm256_and_si256(e, low16);
                let q = _mm256_srl_epi32(*xv, shift);
                *xv = _mm256_add_epi32(_mm256_mullo_epi32(f, q), _mm256_srli_epi32::<16>(e));
                let at = unsafe { outp.add(done + 8 * v) };
                for (k, &slot) in slots.iter().enumerate() {
                    unsafe { *at.add(k) = *symp.add(slot as usize) };
                }
            }
            // SAFETY: AVX2 is present; `pos + 64 <= payload.len()` (the loop's test).
            unsafe { refill(&mut xs, &mut pos, payload) };
            done += WIDE_LANES;
        }
        // SAFETY: AVX2 is present (this function's own requirement).
        unsafe { store_states(&xs, x) };
        (pos, done)
    }

    /// The eight 32-bit lanes of `v`.
    #[target_feature(enable = "avx2")]
    #[inline]
    fn lanes(v: __m256i) -> [u32; 8] {
        let mut a = [0u32; 8];
        // SAFETY: `a` holds 32 bytes: one unaligned store.
        unsafe { _mm256_storeu_si256(a.as_mut_ptr().cast(), v) };
        a
    }

    /// `table[i]` for each of the eight indices `i`, as a vector.
    ///
    /// The entries are loaded one by one, not gathered: on AMD Zen 3 eight loads and
    /// inserts take less time than an eight-lane gather (with these lookups instead of
    /// gathers, minilm compressed 4% and decompressed 9% faster there), and on Intel
    /// processors with the Gather Data Sampling (Downfall) mitigation gathers are slower
    /// still. The AVX-512 encoder keeps its gathers: it runs only where AVX-512 is, and
    /// no such machine was at hand to measure it without them.
    ///
    /// # Safety
    /// The processor must have AVX2, and every index must lie inside `table`.
    #[target_feature(enable = "avx2")]
    #[inline]
    unsafe fn lookup8(table: *const i32, i: &[u32; 8]) -> __m256i {
        // SAFETY: every index lies inside the table (the caller's requirement).
        let e = |k: usize| unsafe { *table.add(i[k] as usize) };
        _mm256_setr_epi32(e(0), e(1), e(2), e(3), e(4), e(5), e(6), e(7))
    }

    /// The two words of `tab[i]` for each of the eight indices `i`: a vector of the
    /// first words (`freq | cum << 16`) and one of the second (the reciprocals).
    ///
    /// # Safety
    /// The processor must have AVX2, and every index must be below `tab.len()`.
    #[target_feature(enable = "avx2")]
    #[inline]
    unsafe fn lookup_pairs(tab: &[EncEntry], i: &[u32; 8]) -> (__m256i, __m256i) {
        // SAFETY: every index is below `tab.len()` (the caller's requirement); an entry
        // is 8 bytes, read as one little-endian i64 (first word low).
        let e = |k: usize| unsafe {
            tab.as_ptr()
                .add(i[k] as usize)
                .cast::<i64>()
                .read_unaligned()
        };
        // Entries 0, 1, 4, 5 and 2, 3, 6, 7, so that taking the even (odd) words of both
        // within each 128-bit half puts entries 0..8 in order.
        let v0 = _mm256_castsi256_ps(_mm256_setr_epi64x(e(0), e(1), e(4), e(5)));
        let v1 = _mm256_castsi256_ps(_mm256_setr_epi64x(e(2), e(3), e(6), e(7)));
        (
            _mm256_castps_si256(_mm256_shuffle_ps::<0b10_00_10_00>(v0, v1)),
            _mm256_castps_si256(_mm256_shuffle_ps::<0b11_01_11_01>(v0, v1)),
        )
    }

    /// The 32 states of `x` as four vectors of 8.
    ///
    /// # Safety
    /// The processor must have AVX2.
    #[target_feature(enable = "avx2")]
    #[inline]
    unsafe fn load_states(x: &[u32; WIDE_LANES]) -> [__m256i; 4] {
        let xp = x.as_ptr().cast::<__m256i>();
        // SAFETY: `x` holds 32 words: four unaligned loads of 8.
        std::array::from_fn(|v| unsafe { _mm256_loadu_si256(xp.add(v)) })
    }

    /// Stores four vectors of 8 states into `x` ([`load_states`]' inverse).
    ///
    /// # Safety
    /// The processor must have AVX2.
    #[target_feature(enable = "avx2")]
    #[inline]
    unsafe fn store_states(xs: &[__m256i; 4], x: &mut [u32; WIDE_LANES]) {
        let xp = x.as_mut_ptr().cast::<__m256i>();
        for (v, xv) in xs.iter().enumerate() {
            // SAFETY: `x` holds 32 words: four unaligned stores of 8.
            unsafe { _mm256_storeu_si256(xp.add(v), *xv) };
        }
    }

    /// Both refill rounds of one wide group at once, reading from `payload` at `pos` (which
    /// it advances): a state takes a byte in the first round iff it is below 2^23 now, and
    /// a second iff it is below 2^15 now (then its first byte leaves it below 2^23). So
    /// every lane's bytes are known from the states after the steps, and no round waits
    /// for the previous one.
    ///
    /// # Safety
    /// The processor must have AVX2 and POPCNT, and `pos + 64 <= payload.len()`: the
    /// group reads at most 64 bytes, each byte load (8 bytes) starting after the bytes of
    /// the lanes before it, with 8 lanes after it: at `pos + 56` at most.
    #[target_feature(enable = "avx2,popcnt")]
    #[inline]
    unsafe fn refill(xs: &mut [__m256i; 4], pos: &mut usize, payload: &[u8]) {
        let l = _mm256_set1_epi32(RANS_L as i32);
        let l2 = _mm256_set1_epi32((RANS_L >> 8) as i32);
        let mut one = [_mm256_setzero_si256(); 4];
        let mut two = [_mm256_setzero_si256(); 4];
        let mut bits = [[0usize; 4]; 2];
        for (v, xv) in xs.iter().enumerate() {
            one[v] = _mm256_cmpgt_epi32(l, *xv);
            two[v] = _mm256_cmpgt_epi32(l2, *xv);
            bits[0][v] = _mm256_movemask_ps(_mm256_castsi256_ps(one[v])) as usize;
            bits[1][v] = _mm256_movemask_ps(_mm256_castsi256_ps(two[v])) as usize;
        }
        let mut at = [[0usize; 4]; 2];
        for r in 0..2 {
            for v in 0..4 {
                at[r][v] = *pos;
                *pos += bits[r][v].count_ones() as usize;
            }
        }
        for (v, xv) in xs.iter_mut().enumerate() {
            let fill = |r: usize| {
                let next = unsafe { _mm_loadl_epi64(payload.as_ptr().add(at[r][v]).cast()) };
                let idx = unsafe { _mm256_loadu_si256(REFILL[bits[r][v]].as_ptr().cast()) };
                _mm256_permutevar8x32_epi32(_mm256_cvtepu8_epi32(next), idx)
            };
            let once = _mm256_or_si256(_mm256_slli_epi32::<8>(*xv), fill(0));
            let twice = _mm256_or_si256(_mm256_slli_epi32::<8>(once), fill(1));
            *xv = _mm256_blendv_epi8(_mm256_blendv_epi8(*xv, once, one[v]), twice, two[v]);
        }
    }

    /// [`check`] once the processor is known to have what it needs (otherwise nothing).
    pub(super) fn check_checked<const W: usize, T: Copy>(
        c: &Checker<'_>,
        src: &[T],
        field: Field,
        x: &mut [u32; WIDE_LANES],
    ) -> (usize, usize, bool) {
        if !available() {
            return (4 * WIDE_LANES, 0, true);
        }
        // SAFETY: AVX2 and POPCNT are present (checked above).
        unsafe { check::<W, T>(c.fc, c.scale, c.payload, src, field, x) }
    }

    /// Checks whole groups against `field` of `src`, words of `W` bytes (1 or 2, the
    /// size of `T`): the decoder's steps and refills, with each step's (frequency, slot
    /// start) looked up by the word the field holds there rather than by the state's
    /// slot, and the slot checked to lie in that word's slots.
    ///
    /// # Safety
    /// The processor must have AVX2 and POPCNT.
    #[target_feature(enable = "avx2,popcnt")]
    unsafe fn check<const W: usize, T: Copy>(
        fc: &[u32],
        scale: u32,
        payload: &[u8],
        src: &[T],
        field: Field,
        x: &mut [u32; WIDE_LANES],
    ) -> (usize, usize, bool) {
        let start = 4 * WIDE_LANES;
        if size_of::<T>() != W || !fc.len().is_power_of_two() || fc.len() > 1 << 16 {
            return (start, 0, true);
        }
        let fcp = fc.as_ptr().cast::<i32>();
        let slot_mask = _mm256_set1_epi32((1i32 << scale) - 1);
        let value_mask = _mm256_set1_epi32(fc.len() as i32 - 1);
        let low16 = _mm256_set1_epi32(0xFFFF);
        let shift = _mm_cvtsi32_si128(scale as i32);
        let field_shift = _mm_cvtsi32_si128(field.shift as i32);
        let field_mask = _mm256_set1_epi32(field.mask as i32);
        // SAFETY: AVX2 is present (this function's own requirement).
        let mut xs = unsafe { load_states(x) };
        // SAFETY (every load below): a group at `done` with `done + 32 <= src.len()` reads
        // the 32 words there, 8 at a time; lookups read `fc` at a word masked to
        // `fc.len() - 1` (a word past it is flagged, never read); the refill's reads as in
        // `refill`.
        let wp = src.as_ptr().cast::<u8>();
        let mut bad = _mm256_setzero_si256();
        let mut pos = start;
        let mut done = 0;
        while done + WIDE_LANES <= src.len() && pos + 2 * WIDE_LANES <= payload.len() {
            for (v, xv) in xs.iter_mut().enumerate() {
                let at = unsafe { wp.add((done + 8 * v) * W) };
                let words = if W == 1 {
                    _mm256_cvtepu8_epi32(unsafe { _mm_loadl_epi64(at.cast()) })
                } else {
                    _mm256_cvtepu16_epi32(unsafe { _mm_loadu_si128(at.cast()) })
                };
                let w = _mm256_and_si256(_mm256_srl_epi32(words, field_shift), field_mask);
                let e = unsafe { lookup8(fcp, &lanes(_mm256_and_si256(w, value_mask))) };
                let f = _mm256_and_si256(e, low16);
                // The slot's offset in the word's slots; outside them (unsigned `d >= f`,
                // always for a word with no slots) the decoder gives another word.
                let d =
                    _mm256_sub_epi32(_mm256_and_si256(*xv, slot_mask), _mm256_srli_epi32::<16>(e));
                let outside = _mm256_cmpeq_epi32(_mm256_max_epu32(d, f), d);
                let past = _mm256_cmpgt_epi32(w, value_mask);
                bad = _mm256_or_si256(bad, _mm256_or_si256(outside, past));
                let q = _mm256_srl_epi32(*xv, shift);
                *xv = _mm256_add_epi32(_mm256_mullo_epi32(f, q), d);
            }
            // SAFETY: AVX2 is present; `pos + 64 <= payload.len()` (the loop's test).
            unsafe { refill(&mut xs, &mut pos, payload) };
            done += WIDE_LANES;
        }
        // SAFETY: AVX2 is present (this function's own requirement).
        unsafe { store_states(&xs, x) };
        (pos, done, _mm256_testz_si256(bad, bad) == 1)
    }

    /// Per 8-bit mask of lanes, their indices from the highest down, then `0x80` (a
    /// shuffle that packs the masked lanes' bytes to the front, last lane first).
    static COMPACT: [[u8; 16]; 256] = {
        let mut t = [[0x80u8; 16]; 256];
        let mut m = 0;
        while m < 256 {
            let mut k = 0;
            let mut j = 8;
            while j > 0 {
                j -= 1;
                if (m >> j) & 1 == 1 {
                    t[m][k] = j as u8;
                    k += 1;
                }
            }
            m += 1;
        }
        t
    };

    /// Whether the arguments are what both encoders require: `T` of `W` bytes, whole
    /// groups, a table of a power of two of at most `2^16` entries, a precision in
    /// 1..=16, and an output (if any) of `2 * groups.len() + slack` bytes.
    fn encoder_args_fit<const W: usize, T>(
        groups: &[T],
        tab: &[EncEntry],
        scale: u32,
        shift: u32,
        out: &Option<&mut [u8]>,
        slack: usize,
    ) -> bool {
        size_of::<T>() == W
            && shift < 16
            && groups.len().is_multiple_of(WIDE_LANES)
            && tab.len().is_power_of_two()
            && tab.len() <= 1 << 16
            && (1..=16).contains(&scale)
            && out
                .as_ref()
                .is_none_or(|o| o.len() >= 2 * groups.len() + slack)
    }

    /// [`encode`] once the processor is known to have what it needs and the arguments
    /// fit (otherwise `None`, nothing done).
    pub(super) fn encode_checked<const W: usize, T: Copy>(
        groups: &[T],
        tab: &[EncEntry],
        scale: u32,
        shift: u32,
        x: &mut [u32; WIDE_LANES],
        out: Option<&mut [u8]>,
    ) -> Option<usize> {
        if !(available() && encoder_args_fit::<W, T>(groups, tab, scale, shift, &out, 16)) {
            return None;
        }
        // SAFETY: AVX2 and POPCNT are present and the arguments fit (checked above).
        Some(unsafe { encode::<W, T>(groups, tab, scale, shift, x, out) })
    }

    /// Encodes whole groups of words of `W` bytes (1 or 2, the size of `T`), last group
    /// first, each word's value its bits from `shift` up, masked to `tab`; returns the
    /// bytes shed.
    ///
    /// # Safety
    /// The processor must have AVX2 and POPCNT, `T` must be `W` bytes, `groups` a
    /// multiple of 32 words, `tab` a power of two of at most `2^16` entries, `scale` in
    /// 1..=16, `shift` below 16 and `out`, if any, at least `2 * groups.len() + 16` bytes.
    #[target_feature(enable = "avx2,popcnt")]
    unsafe fn encode<const W: usize, T: Copy>(
        groups: &[T],
        tab: &[EncEntry],
        scale: u32,
        shift: u32,
        x: &mut [u32; WIDE_LANES],
        out: Option<&mut [u8]>,
    ) -> usize {
        let wmask = _mm256_set1_epi32(tab.len() as i32 - 1);
        let field_shift = _mm_cvtsi32_si128(shift as i32);
        let low16 = _mm256_set1_epi32(0xFFFF);
        let one = _mm256_set1_epi32(1);
        let total = _mm256_set1_epi32(1 << scale);
        let total_less_one = _mm256_set1_epi32((1 << scale) - 1);
        let exp_bias = _mm256_set1_epi32(127);
        // x_max = ((L >> s) << 8) f = f << (31 - s): a state at or above it sheds a byte.
        let to_max = _mm_cvtsi32_si128(31 - scale as i32);
        // Byte 0 of each lane to the front of its 128-bit half, then the halves together.
        let pick = _mm256_setr_epi8(
            0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 4, 8, 12, -1, -1, -1,
            -1, -1, -1, -1, -1, -1, -1, -1, -1,
        );
        let join = _mm256_setr_epi32(0, 4, 0, 0, 0, 0, 0, 0);
        let wp = groups.as_ptr().cast::<u8>();
        let outp = out.map(|o| o.as_mut_ptr());
        // SAFETY: AVX2 is present (this function's own requirement).
        let mut xs = unsafe { load_states(x) };
        // SAFETY (every load, lookup and store below): a group `g < groups.len() / 32`
        // reads the 32 words at `32 g`, 8 at a time (`8 W` bytes each); lookups read the
        // entry at `w & (tab.len() - 1)`, inside `tab`; each
        // store writes 8 bytes at the count of bytes shed so far, at most
        // `2 * groups.len()`, and `out` has 16 more.
        let mut len = 0usize;
        for g in (0..groups.len() / WIDE_LANES).rev() {
            // Per vector and round (second, first): the bytes in the lanes' low bytes and
            // the mask of the lanes that shed one.
            let mut bytes = [[_mm256_setzero_si256(); 4]; 2];
            let mut masks = [[0usize; 4]; 2];
            for (v, xv) in xs.iter_mut().enumerate() {
                let at = unsafe { wp.add((g * WIDE_LANES + 8 * v) * W) };
                let w = if W == 1 {
                    _mm256_cvtepu8_epi32(unsafe { _mm_loadl_epi64(at.cast()) })
                } else {
                    _mm256_cvtepu16_epi32(unsafe { _mm_loadu_si128(at.cast()) })
                };
                let i = _mm256_and_si256(_mm256_srl_epi32(w, field_shift), wmask);
                // SAFETY: every lane is masked to `tab.len() - 1`.
                let (a, rcp) = unsafe { lookup_pairs(tab, &lanes(i)) };
                let freq = _mm256_and_si256(a, low16);
                // The reciprocal's shift, ceil(log2 f) - 1 (0 for f = 1): floor(log2(f - 1))
                // read from the exponent of f - 1 as a float (exact below 2^24; f - 1 = 0
                // reads -127, clamped to 0).
                let fm1 = _mm256_castps_si256(_mm256_cvtepi32_ps(_mm256_sub_epi32(freq, one)));
                let shift = _mm256_max_epi32(
                    _mm256_sub_epi32(_mm256_srli_epi32::<23>(fm1), exp_bias),
                    _mm256_setzero_si256(),
                );
                // The bias: the slot start, plus M - 1 for a frequency of 1.
                let rare = _mm256_and_si256(_mm256_cmpeq_epi32(freq, one), total_less_one);
                let bias = _mm256_add_epi32(_mm256_srli_epi32::<16>(a), rare);
                let xmax = _mm256_sll_epi32(freq, to_max);
                // States are below 2^31 and x_max below 2^31: signed compares are exact.
                let x8 = _mm256_srli_epi32::<8>(*xv);
                let keep1 = _mm256_cmpgt_epi32(xmax, *xv);
                let keep2 = _mm256_cmpgt_epi32(xmax, x8);
                let v1 = _mm256_blendv_epi8(x8, *xv, keep1);
                let y = _mm256_blendv_epi8(_mm256_srli_epi32::<16>(*xv), v1, keep2);
                // The second round's byte is the low one; the first round's is the upper
                // one of a state shedding two.
                bytes[0][v] = *xv;
                bytes[1][v] = _mm256_blendv_epi8(x8, *xv, keep2);
                masks[0][v] = !_mm256_movemask_ps(_mm256_castsi256_ps(keep2)) as usize & 0xFF;
                masks[1][v] = !_mm256_movemask_ps(_mm256_castsi256_ps(keep1)) as usize & 0xFF;
                // q = floor(y rcp / 2^32) >> shift, from the even and the odd lanes.
                let even = _mm256_srli_epi64::<32>(_mm256_mul_epu32(y, rcp));
                let odd =
                    _mm256_mul_epu32(_mm256_srli_epi64::<32>(y), _mm256_srli_epi64::<32>(rcp));
                let hi = _mm256_blend_epi32::<0b1010_1010>(even, odd);
                let q = _mm256_srlv_epi32(hi, shift);
                let cmpl = _mm256_sub_epi32(total, freq);
                *xv = _mm256_add_epi32(_mm256_add_epi32(y, bias), _mm256_mullo_epi32(q, cmpl));
            }
            // The second round's bytes, then the first's, each from the last state down.
            for r in 0..2 {
                for v in (0..4).rev() {
                    let m = masks[r][v];
                    if let Some(p) = outp {
                        let packed = _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(
                            _mm256_shuffle_epi8(bytes[r][v], pick),
                            join,
                        ));
                        let lut = unsafe { _mm_loadu_si128(COMPACT[m].as_ptr().cast()) };
                        let b = _mm_shuffle_epi8(packed, lut);
                        unsafe { _mm_storel_epi64(p.add(len).cast(), b) };
                    }
                    len += m.count_ones() as usize;
                }
            }
        }
        // SAFETY: AVX2 is present (this function's own requirement).
        unsafe { store_states(&xs, x) };
        len
    }

    /// [`encode512`] once the processor is known to have what it needs and the
    /// arguments fit (otherwise `None`, nothing done).
    pub(super) fn encode512_checked<const W: usize, T: Copy>(
        groups: &[T],
        tab: &[EncEntry],
        scale: u32,
        shift: u32,
        x: &mut [u32; WIDE_LANES],
        out: Option<&mut [u8]>,
    ) -> Option<usize> {
        if !(available512() && encoder_args_fit::<W, T>(groups, tab, scale, shift, &out, 32)) {
            return None;
        }
        // SAFETY: the features are present and the arguments fit (checked above).
        Some(unsafe { encode512::<W, T>(groups, tab, scale, shift, x, out) })
    }

    /// [`encode`] on two vectors of 16 states (states 0-15 and 16-31): the same steps
    /// with mask registers for the renormalization's compares and blends and a
    /// leading-zero count for the reciprocal's shift; each round's shed bytes (the low
    /// bytes of all 32 states, from the last state down, as [`encode`]'s table shuffles
    /// order them) packed by one byte compress and stored 32 bytes at a time (a round
    /// sheds at most 32 bytes).
    ///
    /// # Safety
    /// The processor must have AVX-512 F, CD, BW, VL and VBMI2 and POPCNT, and the
    /// arguments must be as [`encode`] requires except that `out`, if any, must have
    /// `2 * groups.len() + 32` bytes.
    #[target_feature(enable = "avx2,popcnt,avx512f,avx512cd,avx512bw,avx512vl,avx512vbmi2")]
    unsafe fn encode512<const W: usize, T: Copy>(
        groups: &[T],
        tab: &[EncEntry],
        scale: u32,
        shift: u32,
        x: &mut [u32; WIDE_LANES],
        out: Option<&mut [u8]>,
    ) -> usize {
        let wmask = _mm512_set1_epi32(tab.len() as i32 - 1);
        let field_shift = _mm_cvtsi32_si128(shift as i32);
        let low16 = _mm512_set1_epi32(0xFFFF);
        let one = _mm512_set1_epi32(1);
        let total = _mm512_set1_epi32(1 << scale);
        let total_less_one = _mm512_set1_epi32((1 << scale) - 1);
        let thirty_one = _mm512_set1_epi32(31);
        // x_max = ((L >> s) << 8) f = f << (31 - s): a state at or above it sheds a byte.
        let to_max = _mm_cvtsi32_si128(31 - scale as i32);
        // Each 128-bit half's 16 bytes reversed: the states' bytes from the last down.
        let reverse = _mm256_setr_epi8(
            15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 15, 14, 13, 12, 11, 10, 9, 8, 7,
            6, 5, 4, 3, 2, 1, 0,
        );
        let tabp = tab.as_ptr().cast::<i32>();
        let wp = groups.as_ptr().cast::<u8>();
        let outp = out.map(|o| o.as_mut_ptr());
        let xp = x.as_mut_ptr().cast::<i32>();
        // SAFETY: `x` holds 32 states: two unaligned loads of 16.
        let mut xs = unsafe { [_mm512_loadu_epi32(xp), _mm512_loadu_epi32(xp.add(16))] };
        // SAFETY (every load, gather and store below): as in `encode`; each store writes
        // 32 bytes at the count of bytes shed so far, at most `2 * groups.len()`, and
        // `out` has `2 * groups.len() + 32`.
        let mut len = 0usize;
        for g in (0..groups.len() / WIDE_LANES).rev() {
            // Per round (second, first) and vector: the bytes in the lanes' low bytes and
            // the mask of the lanes that shed one.
            let mut bytes = [[_mm512_setzero_si512(); 2]; 2];
            let mut masks = [[0u16; 2]; 2];
            for (v, xv) in xs.iter_mut().enumerate() {
                let at = unsafe { wp.add((g * WIDE_LANES + 16 * v) * W) };
                let w = if W == 1 {
                    _mm512_cvtepu8_epi32(unsafe { _mm_loadu_si128(at.cast()) })
                } else {
                    _mm512_cvtepu16_epi32(unsafe { _mm256_loadu_si256(at.cast()) })
                };
                let i = _mm512_and_si512(_mm512_srl_epi32(w, field_shift), wmask);
                let a = unsafe { _mm512_i32gather_epi32::<8>(i, tabp) };
                let rcp = unsafe { _mm512_i32gather_epi32::<8>(i, tabp.add(1)) };
                let freq = _mm512_and_si512(a, low16);
                // The reciprocal's shift, ceil(log2 f) - 1 = floor(log2(f - 1)) (0 for
                // f = 1, where the count of leading zeros is 32).
                let shift = _mm512_max_epi32(
                    _mm512_sub_epi32(thirty_one, _mm512_lzcnt_epi32(_mm512_sub_epi32(freq, one))),
                    _mm512_setzero_si512(),
                );
                // The bias: the slot start, plus M - 1 for a frequency of 1.
                let start = _mm512_srli_epi32::<16>(a);
                let rare = _mm512_cmpeq_epi32_mask(freq, one);
                let bias = _mm512_mask_add_epi32(start, rare, start, total_less_one);
                let xmax = _mm512_sll_epi32(freq, to_max);
                // States are below 2^31 and x_max below 2^31: signed compares are exact.
                let x8 = _mm512_srli_epi32::<8>(*xv);
                let keep1 = _mm512_cmpgt_epi32_mask(xmax, *xv);
                let keep2 = _mm512_cmpgt_epi32_mask(xmax, x8);
                let v1 = _mm512_mask_blend_epi32(keep1, x8, *xv);
                let y = _mm512_mask_blend_epi32(keep2, _mm512_srli_epi32::<16>(*xv), v1);
                bytes[0][v] = *xv;
                bytes[1][v] = _mm512_mask_blend_epi32(keep2, x8, *xv);
                masks[0][v] = !keep2;
                masks[1][v] = !keep1;
                // q = floor(y rcp / 2^32) >> shift, from the even and the odd lanes.
                let even = _mm512_srli_epi64::<32>(_mm512_mul_epu32(y, rcp));
                let odd =
                    _mm512_mul_epu32(_mm512_srli_epi64::<32>(y), _mm512_srli_epi64::<32>(rcp));
                let hi = _mm512_mask_blend_epi32(0xAAAA, even, odd);
                let q = _mm512_srlv_epi32(hi, shift);
                let cmpl = _mm512_sub_epi32(total, freq);
                *xv = _mm512_add_epi32(_mm512_add_epi32(y, bias), _mm512_mullo_epi32(q, cmpl));
            }
            // The second round's bytes, then the first's, each from the last state down.
            for r in 0..2 {
                let m = u32::from(masks[r][1].reverse_bits())
                    | u32::from(masks[r][0].reverse_bits()) << 16;
                if let Some(p) = outp {
                    let both = _mm256_set_m128i(
                        _mm512_cvtepi32_epi8(bytes[r][0]),
                        _mm512_cvtepi32_epi8(bytes[r][1]),
                    );
                    let packed = _mm256_maskz_compress_epi8(m, _mm256_shuffle_epi8(both, reverse));
                    unsafe { _mm256_storeu_si256(p.add(len).cast(), packed) };
                }
                len += m.count_ones() as usize;
            }
        }
        // SAFETY: `x` holds 32 states: two unaligned stores of 16.
        unsafe {
            _mm512_storeu_epi32(xp, xs[0]);
            _mm512_storeu_epi32(xp.add(16), xs[1]);
        }
        len
    }
}
