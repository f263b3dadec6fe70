//! AVX2 decoding of the wide rANS layout (codec `rans32`, see the parent module): the 32
//! states as four vectors of 8, each step a gather of the slot entries and the symbols,
//! each refill round a byte load widened to 8 lanes and permuted into the lanes that need
//! a byte (Giesen, "Interleaved entropy coders", 2014, §4; his `rans_sse` decodes 16-bit
//! words, this one bytes). Chosen at run time: [`wide_u8`] and [`wide_u16`] return a
//! decoder only when the processor has AVX2 (and POPCNT). The results are bit-identical to the scalar
//! decoder's, which takes the last groups and every other machine.
//!
//! This module and the memory mapping are the crate's only `unsafe` code.

use super::{Decoder, WideFn, RANS_L, SYM_PAD, WIDE_LANES};

/// The AVX2 decoder of 8-bit words, if this processor has AVX2.
pub(super) fn wide_u8() -> Option<WideFn<u8>> {
    imp::available().then_some(imp::run_checked::<1, u8> as WideFn<u8>)
}

/// The AVX2 decoder of 16-bit words, if this processor has AVX2.
pub(super) fn wide_u16() -> Option<WideFn<u16>> {
    imp::available().then_some(imp::run_checked::<2, u16> as WideFn<u16>)
}

#[cfg(not(target_arch = "x86_64"))]
mod imp {
    use super::*;

    pub(super) fn available() -> bool {
        false
    }

    pub(super) fn run_checked<const W: usize, T>(
        _: &Decoder<'_, T>,
        _: &mut [T],
        _: &mut [u32; WIDE_LANES],
    ) -> (usize, usize) {
        (4 * WIDE_LANES, 0)
    }
}

#[cfg(target_arch = "x86_64")]
mod imp {
    use super::*;
    use std::arch::x86_64::*;

    pub(super) fn available() -> bool {
        std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("popcnt")
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
        let symp = sym.as_ptr().cast::<i32>();
        let mask = _mm256_set1_epi32(slots as i32 - 1);
        let low16 = _mm256_set1_epi32(0xFFFF);
        let l = _mm256_set1_epi32(RANS_L as i32);
        let l2 = _mm256_set1_epi32((RANS_L >> 8) as i32);
        let shift = _mm_cvtsi32_si128(scale as i32);
        // Byte 0 (W = 1) or bytes 0 and 1 (W = 2) of each 32-bit lane to the front of
        // its 128-bit half, then the two halves' fronts together.
        let (pick, join) = if W == 1 {
            (
                _mm256_setr_epi8(
                    0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 4, 8, 12, -1,
                    -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
                ),
                _mm256_setr_epi32(0, 4, 0, 0, 0, 0, 0, 0),
            )
        } else {
            (
                _mm256_setr_epi8(
                    0, 1, 4, 5, 8, 9, 12, 13, -1, -1, -1, -1, -1, -1, -1, -1, 0, 1, 4, 5, 8, 9, 12,
                    13, -1, -1, -1, -1, -1, -1, -1, -1,
                ),
                _mm256_setr_epi32(0, 1, 4, 5, 0, 0, 0, 0),
            )
        };
        // SAFETY (every load and store below): `x` holds 32 states, read and written as
        // four vectors of 8; gathers read `fb` at slots below `2^scale` = `fb.len()`, and
        // 4 bytes at the symbol of such a slot, which the `SYM_PAD` zeros after the last
        // slot keep inside `sym`; a group starting at `p` with `p + 64 <= payload.len()`
        // reads at most 64 bytes, and each of its byte loads (8 bytes) starts after the
        // bytes of the lanes before it, with 8 lanes after it: at `p + 56` at most;
        // stores write the 8 words `done + 8 v ..` of a group with
        // `done + 32 <= out.len()`.
        let xp = x.as_mut_ptr().cast::<__m256i>();
        let mut xs = [
            unsafe { _mm256_loadu_si256(xp) },
            unsafe { _mm256_loadu_si256(xp.add(1)) },
            unsafe { _mm256_loadu_si256(xp.add(2)) },
            unsafe { _mm256_loadu_si256(xp.add(3)) },
        ];
        let mut pos = start;
        let mut done = 0;
        let outp = out.as_mut_ptr().cast::<u8>();
        while done + WIDE_LANES <= out.len() && pos + 2 * WIDE_LANES <= payload.len() {
            for (v, xv) in xs.iter_mut().enumerate() {
                let slot = _mm256_and_si256(*xv, mask);
                let e = unsafe { _mm256_i32gather_epi32::<4>(fbp, slot) };
                let s = if W == 1 {
                    unsafe { _mm256_i32gather_epi32::<1>(symp, slot) }
                } else {
                    unsafe { _mm256_i32gather_epi32::<2>(symp, slot) }
                };
                let f = _mm256_and_si256(e, low16);
                let q = _mm256_srl_epi32(*xv, shift);
                *xv = _mm256_add_epi32(_mm256_mullo_epi32(f, q), _mm256_srli_epi32::<16>(e));
                let packed = _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(s, pick), join);
                let at = unsafe { outp.add((done + 8 * v) * W) };
                if W == 1 {
                    unsafe { _mm_storel_epi64(at.cast(), _mm256_castsi256_si128(packed)) };
                } else {
                    unsafe { _mm_storeu_si128(at.cast(), _mm256_castsi256_si128(packed)) };
                }
            }
            // Both refill rounds at once: a state takes a byte in the first round iff it
            // is below 2^23 now, and a second iff it is below 2^15 now (then its first
            // byte leaves it below 2^23). So every lane's bytes are known from the
            // states after the steps, and no round waits for the previous one.
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
                    at[r][v] = pos;
                    pos += bits[r][v].count_ones() as usize;
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
            done += WIDE_LANES;
        }
        for (v, xv) in xs.iter().enumerate() {
            unsafe { _mm256_storeu_si256(xp.add(v), *xv) };
        }
        (pos, done)
    }
}
