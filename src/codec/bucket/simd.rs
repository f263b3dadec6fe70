//! AVX2 decoding of the bucket codec's words of at most 16 bits (a BF16 or F16
//! fine-tune's residual): eight words a step, the whole of the block decoder's work on
//! them in vector registers.
//!
//! A step takes eight symbols (8 or 16 bits) and, with a context, the eight context
//! words' field (of 8- or 16-bit words), and makes the buckets `k` and checks them as
//! the scalar passes do. The extra bits' lengths `k - 1` (at most 15) are summed across
//! the lanes (a prefix sum in three shifts and adds), which gives each lane's bit offset
//! from the step's first byte. The eight words' extra bits lie in the 16 bytes from that
//! byte (at most 7 + 8 x 15 = 127 bits), loaded once; each lane takes the three bytes
//! its bits start in with one byte shuffle (`vpshufb` on the 16 bytes in both halves of
//! the register), shifts them by its offset within the byte and masks them to its length
//! (variable shifts, `vpsrlvd`/`vpsllvd`), and adds its leading one. ZigZag is undone, the
//! base word combined, and the eight words packed to 8 or 16 bits and stored: no lookup
//! in memory, no gather (whose cost varies between processors), no branch but the loop's.
//!
//! Safe code: the intrinsics are safe inside [`steps`], which has the features they
//! need, and memory is read and written through slices and `bytemuck` casts of arrays.
//! [`steps_checked`] calls it only on processors with AVX2.

use super::Combine;

/// A block's symbols, of 8 or 16 bits.
#[derive(Clone, Copy)]
pub(super) enum Syms<'a> {
    U8(&'a [u8]),
    U16(&'a [u16]),
}

/// One call: a block's words from its first.
pub(super) struct Steps<'a> {
    /// The block's symbols.
    pub syms: Syms<'a>,
    /// The block's context words (little-endian, of `ctx_bytes` bytes each: 1 or 2) and
    /// the field's shift and mask.
    pub ctx: Option<(&'a [u8], usize, u32, u32)>,
    /// The block's base words (little-endian, `word_bytes` each) and how they combine.
    pub base: Option<(&'a [u8], Combine)>,
    pub zigzag: bool,
    /// The words' width, at most 16.
    pub width: u32,
    /// Bytes of each output word: 1 or 2.
    pub word_bytes: usize,
    /// All the extra bits.
    pub extra: &'a [u8],
}

/// Whether this processor runs [`steps_checked`]'s sixteen-word steps: AVX-512 F, BW
/// and VBMI (the byte permutation across the register).
pub(super) fn has_avx512() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        crate::simd::avx512_allowed()
            && std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512bw")
            && std::arch::is_x86_feature_detected!("avx512vbmi")
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// The steps if this processor has AVX2, else nothing: `(0, false)`. With `sixteen` and
/// [`has_avx512`], sixteen words a step ([`imp512::steps`]), else eight ([`imp::steps`]);
/// both give the same words and the same verdict.
pub(super) fn steps_checked(
    s: &Steps<'_>,
    pos: &mut u64,
    out: &mut [u8],
    sixteen: bool,
) -> (usize, bool) {
    #[cfg(target_arch = "x86_64")]
    {
        if sixteen && has_avx512() {
            // SAFETY: the processor has these features (checked above).
            return unsafe { imp512::steps(s, pos, out) };
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the processor has AVX2 (checked above).
            return unsafe { imp::steps(s, pos, out) };
        }
    }
    let _ = (s, pos, out, sixteen);
    (0, false)
}

/// One step function's block: the symbols (as bytes: `s8` for 8-bit ones, `s16` for
/// 16-bit ones, the other empty), their number `n`, and the context, base and output
/// bytes of those `n` words (`WB` bytes each; the context and base empty when `CTX` or
/// `OP` say there are none). `None` when the block lacks what `CTX` and `OP` call for.
#[cfg(target_arch = "x86_64")]
struct Slices<'a, 'o> {
    s8: &'a [u8],
    s16: &'a [u8],
    n: usize,
    ctx: &'a [u8],
    base: &'a [u8],
    out: &'o mut [u8],
}

#[cfg(target_arch = "x86_64")]
impl<'a, 'o> Slices<'a, 'o> {
    #[inline(always)]
    fn of<const S16: bool, const CTX: bool, const OP: u8, const WB: usize>(
        s: &Steps<'a>,
        out: &'o mut [u8],
    ) -> Option<Slices<'a, 'o>> {
        let (s8, s16): (&[u8], &[u8]) = match s.syms {
            Syms::U8(v) => (v, &[]),
            Syms::U16(v) => (&[], bytemuck::cast_slice(v)),
        };
        let n = if S16 { s16.len() / 2 } else { s8.len() };
        let ctx: &[u8] = match s.ctx {
            Some((c, cb, _, _)) if CTX && cb == WB => &c[..n * WB],
            _ if CTX => return None,
            _ => &[],
        };
        let base: &[u8] = match s.base {
            Some((b, _)) if OP != 0 => &b[..n * WB],
            _ if OP != 0 => return None,
            _ => &[],
        };
        Some(Slices {
            s8,
            s16,
            n,
            ctx,
            base,
            out: &mut out[..n * WB],
        })
    }
}

/// The body of `imp::steps` and `imp512::steps`: the build of their `steps_as` for the
/// symbols' and words' sizes, the context, ZigZag and the base (`OP` 0 none, 1 XOR,
/// 2 addition), so that the loop has no branch on them.
#[cfg(target_arch = "x86_64")]
macro_rules! pick_steps {
    ($s:ident, $pos:ident, $out:ident) => {
        pick_steps!($s, $pos, $out;
            false, false, 1;
            false, true, 1;
            true, false, 1;
            true, true, 1;
            false, false, 2;
            false, true, 2;
            true, false, 2;
            true, true, 2;
        )
    };
    ($s:ident, $pos:ident, $out:ident; $($s16:literal, $ctx:literal, $wb:literal;)*) => {{
        let op: u8 = match $s.base {
            None => 0,
            Some((_, super::Combine::Xor)) => 1,
            Some((_, super::Combine::Add)) => 2,
        };
        let ctx = $s.ctx.is_some();
        let s16 = matches!($s.syms, super::Syms::U16(_));
        match (s16, ctx, $s.zigzag, op, $s.word_bytes) {
            $(
                ($s16, $ctx, false, 0, $wb) => steps_as::<$s16, $ctx, false, 0, $wb>($s, $pos, $out),
                ($s16, $ctx, true, 0, $wb) => steps_as::<$s16, $ctx, true, 0, $wb>($s, $pos, $out),
                ($s16, $ctx, false, 1, $wb) => steps_as::<$s16, $ctx, false, 1, $wb>($s, $pos, $out),
                ($s16, $ctx, true, 1, $wb) => steps_as::<$s16, $ctx, true, 1, $wb>($s, $pos, $out),
                ($s16, $ctx, false, 2, $wb) => steps_as::<$s16, $ctx, false, 2, $wb>($s, $pos, $out),
                ($s16, $ctx, true, 2, $wb) => steps_as::<$s16, $ctx, true, 2, $wb>($s, $pos, $out),
            )*
            _ => (0, false),
        }
    }};
}

#[cfg(target_arch = "x86_64")]
mod imp {
    use super::{Slices, Steps};
    use std::arch::x86_64::*;

    /// Whole steps of eight words from the block's first, as long as each step's 16
    /// bytes of extra bits are there: their words (little-endian, `word_bytes` each)
    /// written to `out`, `pos` (the bit the block's extra bits start at) advanced past
    /// theirs. Returns how many words it decoded (a multiple of 8) and whether a symbol
    /// was no bucket (the words are then meaningless; the caller gives up).
    ///
    /// Picks the build of [`steps_as`] for the symbols' and words' sizes, the context,
    /// ZigZag and the base, so that the loop has no branch on them.
    #[target_feature(enable = "avx2")]
    pub(super) fn steps(s: &Steps<'_>, pos: &mut u64, out: &mut [u8]) -> (usize, bool) {
        pick_steps!(s, pos, out)
    }

    /// [`steps`] for 16-bit symbols (`S16`, else 8-bit), a context (`CTX`, its words of
    /// `WB` bytes like the output's), ZigZag (`ZIG`), the base combined by `OP` (0 none,
    /// 1 XOR, 2 addition) and words of `WB` bytes (1 or 2).
    #[target_feature(enable = "avx2")]
    fn steps_as<
        const S16: bool,
        const CTX: bool,
        const ZIG: bool,
        const OP: u8,
        const WB: usize,
    >(
        s: &Steps<'_>,
        pos: &mut u64,
        out: &mut [u8],
    ) -> (usize, bool) {
        let Some(Slices {
            s8,
            s16,
            n,
            ctx,
            base,
            out,
        }) = Slices::of::<S16, CTX, OP, WB>(s, out)
        else {
            return (0, false);
        };
        let extra = s.extra;
        let one = _mm256_set1_epi32(1);
        let zero = _mm256_setzero_si256();
        let ones = _mm256_set1_epi32(-1);
        let width = _mm256_set1_epi32(s.width as i32);
        let wmask = _mm256_set1_epi32(((1u32 << s.width) - 1) as i32);
        let seven = _mm256_set1_epi32(7);
        // Each lane's offset byte to bytes 0, 1, 2 of the lane, and 0x80 (a zero byte)
        // to byte 3; then + 0, 1, 2 (and 0x80, which keeps byte 3 zero).
        let spread = _mm256_setr_epi8(
            0, 0, 0, -128, 4, 4, 4, -128, 8, 8, 8, -128, 12, 12, 12, -128, 0, 0, 0, -128, 4, 4, 4,
            -128, 8, 8, 8, -128, 12, 12, 12, -128,
        );
        let next = _mm256_setr_epi8(
            0, 1, 2, -128, 0, 1, 2, -128, 0, 1, 2, -128, 0, 1, 2, -128, 0, 1, 2, -128, 0, 1, 2,
            -128, 0, 1, 2, -128, 0, 1, 2, -128,
        );
        let lane3 = _mm256_set1_epi32(3);
        let (shift, fmask) = s.ctx.map_or((0, 0), |(_, _, sh, m)| (sh, m));
        let shift = _mm_cvtsi32_si128(shift as i32);
        let fmask = _mm256_set1_epi32(fmask as i32);
        // The last bit position whose step's 16 bytes are all there.
        let Some(last) = (extra.len() as u64).checked_sub(16).map(|b| b * 8 + 7) else {
            return (0, false);
        };
        let mut bad = zero;
        let mut p = *pos;
        let mut done = 0;
        while done + 8 <= n && p <= last {
            let byte = (p / 8) as usize;
            let sym = if S16 {
                _mm256_cvtepu16_epi32(load16(&s16[2 * done..]))
            } else {
                _mm256_cvtepu8_epi32(load8(&s8[done..]))
            };
            let nonzero = _mm256_xor_si256(_mm256_cmpeq_epi32(sym, zero), ones);
            let k = if CTX {
                let c = if WB == 1 {
                    _mm256_cvtepu8_epi32(load8(&ctx[done..]))
                } else {
                    _mm256_cvtepu16_epi32(load16(&ctx[2 * done..]))
                };
                let e = _mm256_and_si256(_mm256_srl_epi32(c, shift), fmask);
                // k = s - e for s > 0 (0 for s = 0); a bucket only if 1 <= k <= width.
                let k = _mm256_and_si256(_mm256_sub_epi32(sym, e), nonzero);
                let km1 = _mm256_sub_epi32(k, one);
                let over = _mm256_cmpeq_epi32(_mm256_max_epu32(km1, width), km1);
                bad = _mm256_or_si256(bad, _mm256_and_si256(over, nonzero));
                k
            } else {
                bad = _mm256_or_si256(bad, _mm256_cmpgt_epi32(sym, width));
                sym
            };
            // Lengths k - 1 (0 for k = 0), and their sums across the lanes.
            let len = _mm256_sub_epi32(_mm256_max_epu32(k, one), one);
            let mut sum = _mm256_add_epi32(len, _mm256_slli_si256::<4>(len));
            sum = _mm256_add_epi32(sum, _mm256_slli_si256::<8>(sum));
            let low = _mm256_permutevar8x32_epi32(sum, lane3);
            sum = _mm256_add_epi32(sum, _mm256_blend_epi32::<0xf0>(zero, low));
            let total = _mm256_extract_epi32::<7>(sum) as u32;
            // Each lane's first bit from the window's first byte: its byte and shift.
            let at = _mm256_add_epi32(
                _mm256_sub_epi32(sum, len),
                _mm256_set1_epi32((p % 8) as i32),
            );
            let idx = _mm256_add_epi8(
                _mm256_shuffle_epi8(_mm256_srli_epi32::<3>(at), spread),
                next,
            );
            let w = _mm256_broadcastsi128_si256(load16(&extra[byte..]));
            let bits = _mm256_srlv_epi32(_mm256_shuffle_epi8(w, idx), _mm256_and_si256(at, seven));
            let lead = _mm256_sllv_epi32(one, len);
            let nonzero_k = _mm256_xor_si256(_mm256_cmpeq_epi32(k, zero), ones);
            let z = _mm256_or_si256(
                _mm256_and_si256(bits, _mm256_sub_epi32(lead, one)),
                _mm256_and_si256(lead, nonzero_k),
            );
            let mut r = if ZIG {
                let sign = _mm256_sub_epi32(zero, _mm256_and_si256(z, one));
                _mm256_and_si256(_mm256_xor_si256(_mm256_srli_epi32::<1>(z), sign), wmask)
            } else {
                z
            };
            if OP != 0 {
                let b = if WB == 1 {
                    _mm256_cvtepu8_epi32(load8(&base[done..]))
                } else {
                    _mm256_cvtepu16_epi32(load16(&base[2 * done..]))
                };
                r = if OP == 1 {
                    _mm256_xor_si256(b, r)
                } else {
                    _mm256_and_si256(_mm256_add_epi32(b, r), wmask)
                };
            }
            // Eight 32-bit words (each below 2^16) to 16 or 8 bits, in order.
            let packed = _mm256_permute4x64_epi64::<0xd8>(_mm256_packus_epi32(r, r));
            let low = _mm256_castsi256_si128(packed);
            if WB == 1 {
                let bytes: [u8; 16] = bytemuck::cast(_mm_packus_epi16(low, low));
                out[done..done + 8].copy_from_slice(&bytes[..8]);
            } else {
                let bytes: [u8; 16] = bytemuck::cast(low);
                out[2 * done..2 * done + 16].copy_from_slice(&bytes);
            }
            p += u64::from(total);
            done += 8;
        }
        *pos = p;
        (done, _mm256_testz_si256(bad, bad) == 0)
    }

    /// The 16 bytes at the start of `b`.
    #[inline]
    #[target_feature(enable = "avx2")]
    pub(super) fn load16(b: &[u8]) -> __m128i {
        let a: [u8; 16] = b[..16].try_into().expect("16 bytes");
        bytemuck::cast(a)
    }

    /// The 8 bytes at the start of `b`, in the low half.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn load8(b: &[u8]) -> __m128i {
        let a: [u8; 8] = b[..8].try_into().expect("8 bytes");
        _mm_cvtsi64_si128(i64::from_le_bytes(a))
    }
}

/// [`imp`]'s steps sixteen words at a time in AVX-512 registers. The same work, with
/// three differences: the lengths' prefix sum takes four lane shifts (`valignd`); the
/// sixteen words' extra bits lie in the 32 bytes from the step's first byte (at most
/// 7 + 16 x 15 = 247 bits), from which each lane takes its three bytes with one byte
/// permutation across the register (`vpermb`, AVX-512 VBMI); and the checks and the
/// leading ones are mask registers. The words are narrowed to 8 or 16 bits by `vpmovdb`
/// and `vpmovdw`.
#[cfg(target_arch = "x86_64")]
mod imp512 {
    use super::imp::load16;
    use super::{Slices, Steps};
    use std::arch::x86_64::*;

    /// [`super::imp::steps`] sixteen words a step: whole steps from the block's first
    /// as long as each step's 32 bytes of extra bits are there. Returns how many words it
    /// decoded (a multiple of 16) and whether a symbol was no bucket.
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi,avx2")]
    pub(super) fn steps(s: &Steps<'_>, pos: &mut u64, out: &mut [u8]) -> (usize, bool) {
        pick_steps!(s, pos, out)
    }

    /// [`steps`] for one combination, as [`super::imp`]'s `steps_as`.
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi,avx2")]
    fn steps_as<
        const S16: bool,
        const CTX: bool,
        const ZIG: bool,
        const OP: u8,
        const WB: usize,
    >(
        s: &Steps<'_>,
        pos: &mut u64,
        out: &mut [u8],
    ) -> (usize, bool) {
        let Some(Slices {
            s8,
            s16,
            n,
            ctx,
            base,
            out,
        }) = Slices::of::<S16, CTX, OP, WB>(s, out)
        else {
            return (0, false);
        };
        let extra = s.extra;
        let one = _mm512_set1_epi32(1);
        let zero = _mm512_setzero_si512();
        let width = _mm512_set1_epi32(s.width as i32);
        let wmask = _mm512_set1_epi32(((1u32 << s.width) - 1) as i32);
        let seven = _mm512_set1_epi32(7);
        // + 0, 1, 2 to a lane's first byte in its bytes 0, 1, 2 (byte 3 takes a byte
        // whose bits the length's mask drops).
        let next = _mm512_set1_epi32(0x0002_0100);
        let (shift, fmask) = s.ctx.map_or((0, 0), |(_, _, sh, m)| (sh, m));
        let shift = _mm_cvtsi32_si128(shift as i32);
        let fmask = _mm512_set1_epi32(fmask as i32);
        // The last bit position whose step's 32 bytes are all there.
        let Some(last) = (extra.len() as u64).checked_sub(32).map(|b| b * 8 + 7) else {
            return (0, false);
        };
        let mut bad: __mmask16 = 0;
        let mut p = *pos;
        let mut done = 0;
        while done + 16 <= n && p <= last {
            let byte = (p / 8) as usize;
            let sym = if S16 {
                _mm512_cvtepu16_epi32(load32(&s16[2 * done..]))
            } else {
                _mm512_cvtepu8_epi32(load16(&s8[done..]))
            };
            let nonzero = _mm512_test_epi32_mask(sym, sym);
            let k = if CTX {
                let c = if WB == 1 {
                    _mm512_cvtepu8_epi32(load16(&ctx[done..]))
                } else {
                    _mm512_cvtepu16_epi32(load32(&ctx[2 * done..]))
                };
                let e = _mm512_and_si512(_mm512_srl_epi32(c, shift), fmask);
                // k = s - e for s > 0 (0 for s = 0); a bucket only if 1 <= k <= width.
                let k = _mm512_maskz_sub_epi32(nonzero, sym, e);
                let km1 = _mm512_sub_epi32(k, one);
                bad |= _mm512_mask_cmpge_epu32_mask(nonzero, km1, width);
                k
            } else {
                bad |= _mm512_cmpgt_epu32_mask(sym, width);
                sym
            };
            // Lengths k - 1 (0 for k = 0), and their sums across the lanes.
            let len = _mm512_sub_epi32(_mm512_max_epu32(k, one), one);
            let mut sum = _mm512_add_epi32(len, _mm512_alignr_epi32::<15>(len, zero));
            sum = _mm512_add_epi32(sum, _mm512_alignr_epi32::<14>(sum, zero));
            sum = _mm512_add_epi32(sum, _mm512_alignr_epi32::<12>(sum, zero));
            sum = _mm512_add_epi32(sum, _mm512_alignr_epi32::<8>(sum, zero));
            let total = _mm_extract_epi32::<3>(_mm512_extracti32x4_epi32::<3>(sum)) as u32;
            // Each lane's first bit from the window's first byte: its byte and shift.
            let at = _mm512_add_epi32(
                _mm512_sub_epi32(sum, len),
                _mm512_set1_epi32((p % 8) as i32),
            );
            // The lane's byte in each of its four bytes (`x 0x01010101`), + 0, 1, 2.
            let first = _mm512_srli_epi32::<3>(at);
            let idx = _mm512_add_epi32(
                _mm512_or_si512(
                    _mm512_or_si512(first, _mm512_slli_epi32::<8>(first)),
                    _mm512_slli_epi32::<16>(first),
                ),
                next,
            );
            let w = _mm512_zextsi256_si512(load32(&extra[byte..]));
            let bits =
                _mm512_srlv_epi32(_mm512_permutexvar_epi8(idx, w), _mm512_and_si512(at, seven));
            let lead = _mm512_sllv_epi32(one, len);
            let nonzero_k = _mm512_test_epi32_mask(k, k);
            let low = _mm512_and_si512(bits, _mm512_sub_epi32(lead, one));
            let z = _mm512_mask_or_epi32(low, nonzero_k, low, lead);
            let mut r = if ZIG {
                let sign = _mm512_sub_epi32(zero, _mm512_and_si512(z, one));
                _mm512_and_si512(_mm512_xor_si512(_mm512_srli_epi32::<1>(z), sign), wmask)
            } else {
                z
            };
            if OP != 0 {
                let b = if WB == 1 {
                    _mm512_cvtepu8_epi32(load16(&base[done..]))
                } else {
                    _mm512_cvtepu16_epi32(load32(&base[2 * done..]))
                };
                r = if OP == 1 {
                    _mm512_xor_si512(b, r)
                } else {
                    _mm512_and_si512(_mm512_add_epi32(b, r), wmask)
                };
            }
            // Sixteen 32-bit words (each below 2^16) to 16 or 8 bits, in order.
            if WB == 1 {
                let bytes: [u8; 16] = bytemuck::cast(_mm512_cvtepi32_epi8(r));
                out[done..done + 16].copy_from_slice(&bytes);
            } else {
                let bytes: [u8; 32] = bytemuck::cast(_mm512_cvtepi32_epi16(r));
                out[2 * done..2 * done + 32].copy_from_slice(&bytes);
            }
            p += u64::from(total);
            done += 16;
        }
        *pos = p;
        (done, bad != 0)
    }

    /// The 32 bytes at the start of `b`.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn load32(b: &[u8]) -> __m256i {
        let a: [u8; 32] = b[..32].try_into().expect("32 bytes");
        bytemuck::cast(a)
    }
}
