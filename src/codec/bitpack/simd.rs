//! SIMD unpacking of bit-packed words (see the parent module): sixteen words of `k`
//! bits (`k` at most 25, so a word and its bit offset fit four bytes) a step, with
//! AVX-512 VBMI: one masked load of the `2k` bytes, one byte permute placing each word's
//! four bytes in its 32-bit lane, one variable shift and a mask; the lanes narrowed to
//! the output's container (`vpmovdw`, `vpmovdb`). The 20- and 23-bit mantissa fields of
//! F32 tensors and the 1-, 3- and 4-bit fields of BF16 ones are the streams this serves.
//!
//! Chosen at run time; `false` (nothing done) where the processor lacks AVX-512 VBMI,
//! the width is out of range, or `BREVIS_NO_SIMD` is set; the scalar unpacking runs then.

use crate::codec::table::Word;

/// Unpacks `out.len()` words of `k` bits from the start of `data` (which holds them) when
/// a SIMD path applies; returns whether it did.
pub(super) fn unpack<T: Word>(data: &[u8], k: u32, out: &mut [T]) -> bool {
    imp::unpack(data, k, out)
}

/// `out[i] |= word_i << shift` for the `out.len()` words of `k` bits at the start of
/// `data` (a field of a `merge`, OR-ed into its output words without a buffer between)
/// when a SIMD path applies; returns whether it did.
pub(super) fn unpack_or<T: Word>(data: &[u8], k: u32, out: &mut [T], shift: u32) -> bool {
    imp::unpack_or(data, k, out, shift)
}

/// Appends the field `(w >> shift) & (2^k - 1)` of the 16-bit words `v`, packed at `k`
/// bits, when a SIMD path applies (on processors with AVX-512 BW: `k` 1 or 4, the sign
/// bits and low mantissa nibbles of BF16 words, by vector steps; `k` up to 8 otherwise,
/// the low mantissa bits of F16 and BF16 words, by BMI2's `pext`, which is fast on
/// every processor with AVX-512 and microcoded on AMD's before Zen 3); returns whether
/// it did (nothing appended when not). The bytes are the scalar packer's.
pub(super) fn pack_field_u16(v: &[u16], shift: u32, k: u32, out: &mut Vec<u8>) -> bool {
    imp::pack_field_u16(v, shift, k, out)
}

#[cfg(not(target_arch = "x86_64"))]
mod imp {
    pub(super) fn pack_field_u16(_: &[u16], _: u32, _: u32, _: &mut Vec<u8>) -> bool {
        false
    }
    pub(super) fn unpack<T: crate::codec::table::Word>(_: &[u8], _: u32, _: &mut [T]) -> bool {
        false
    }
    pub(super) fn unpack_or<T: crate::codec::table::Word>(
        _: &[u8],
        _: u32,
        _: &mut [T],
        _: u32,
    ) -> bool {
        false
    }
}

#[cfg(target_arch = "x86_64")]
mod imp {
    use crate::codec::table::Word;
    use std::arch::x86_64::*;

    fn available() -> bool {
        crate::simd::level().avx512_vbmi
    }

    pub(super) fn pack_field_u16(v: &[u16], shift: u32, k: u32, out: &mut Vec<u8>) -> bool {
        if !(1..=8).contains(&k) || shift + k > 16 || !crate::simd::level().avx512 {
            return false;
        }
        if !matches!(k, 1 | 4) {
            return is_x86_feature_detected!("bmi2") && {
                // SAFETY: the processor has BMI2 (checked above).
                unsafe { pext_field16(v, shift, k, out) };
                true
            };
        }
        // Steps of 32 words: 4 bytes of sign bits or 16 of nibbles.
        let groups = v.len() / 32;
        let step = 4 * k as usize;
        let start = out.len();
        out.resize(start + groups * step, 0);
        let dst = &mut out[start..];
        // SAFETY: AVX-512 F, BW and VL were detected; step `g` reads words `[32 g, 32 g
        // + 32)` of `v` and writes bytes `[g step, (g + 1) step)` of `dst`, which holds
        // `groups * step`.
        unsafe {
            match k {
                1 => pack_bits16(v.as_ptr(), dst.as_mut_ptr(), groups, shift),
                _ => pack_nibbles16(v.as_ptr(), dst.as_mut_ptr(), groups, shift),
            }
        }
        pack_rest(&v[groups * 32..], shift, k, out);
        true
    }

    /// Packs the field of the words `v` the steps left (fewer than a step's, starting on
    /// a byte) by the scalar packer.
    fn pack_rest(v: &[u16], shift: u32, k: u32, out: &mut Vec<u8>) {
        let rest: Vec<u8> = v
            .iter()
            .map(|&x| ((x >> shift) & ((1 << k) - 1)) as u8)
            .collect();
        super::super::pack_u8(&rest, k, out);
    }

    /// Bits `[shift, shift + k)` (`k <= 8`) of eight words a step: two `pext` of four
    /// words each join their `4k` bits, stored as eight bytes of which the next step
    /// overwrites all but the first `k`.
    #[target_feature(enable = "bmi2")]
    unsafe fn pext_field16(v: &[u16], shift: u32, k: u32, out: &mut Vec<u8>) {
        let field = ((1u64 << k) - 1) << shift;
        let mask = field * 0x0001_0001_0001_0001;
        let groups = v.len() / 8;
        let k = k as usize;
        let start = out.len();
        // Eight bytes of room past the last step's `k`.
        out.resize(start + groups * k + 8, 0);
        let dst = out[start..].as_mut_ptr();
        for (g, w) in v.chunks_exact(8).enumerate() {
            let lo = u64::from(w[0])
                | u64::from(w[1]) << 16
                | u64::from(w[2]) << 32
                | u64::from(w[3]) << 48;
            let hi = u64::from(w[4])
                | u64::from(w[5]) << 16
                | u64::from(w[6]) << 32
                | u64::from(w[7]) << 48;
            let bits = _pext_u64(lo, mask) | _pext_u64(hi, mask) << (4 * k);
            // SAFETY: step `g` writes bytes `[g k, g k + 8)` of the `groups k + 8`
            // after `start`.
            unsafe { dst.add(g * k).cast::<u64>().write_unaligned(bits.to_le()) };
        }
        out.truncate(start + groups * k);
        pack_rest(&v[groups * 8..], shift, k as u32, out);
    }

    /// Bit `shift` of 32 words a step: one test into a mask register, stored as four
    /// bytes (word `j`'s bit is bit `j`, lowest first, as the packer writes them).
    #[target_feature(enable = "avx512f,avx512bw")]
    unsafe fn pack_bits16(src: *const u16, dst: *mut u8, groups: usize, shift: u32) {
        let bit = _mm512_set1_epi16((1u16 << shift) as i16);
        for g in 0..groups {
            let x = _mm512_loadu_si512(src.add(32 * g).cast());
            let m: u32 = _mm512_test_epi16_mask(x, bit);
            dst.add(4 * g).cast::<u32>().write_unaligned(m.to_le());
        }
    }

    /// Bits `[shift, shift + 4)` of 32 words a step: shifted and masked in 16-bit
    /// lanes, each pair joined in its 32-bit lane (`lo | hi << 4`) and narrowed to
    /// bytes, stored as sixteen.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    unsafe fn pack_nibbles16(src: *const u16, dst: *mut u8, groups: usize, shift: u32) {
        let count = _mm_cvtsi32_si128(shift as i32);
        let low = _mm512_set1_epi16(0xF);
        for g in 0..groups {
            let x = _mm512_loadu_si512(src.add(32 * g).cast());
            let y = _mm512_and_si512(_mm512_srl_epi16(x, count), low);
            // The odd word's nibble (bits 16..20 of the lane) lands on bits 4..8; the
            // even word's bits 12..16 it brings down are zero.
            let z = _mm512_or_si512(y, _mm512_srli_epi32::<12>(y));
            _mm_storeu_si128(dst.add(16 * g).cast(), _mm512_cvtepi32_epi8(z));
        }
    }

    pub(super) fn unpack<T: Word>(data: &[u8], k: u32, out: &mut [T]) -> bool {
        let size = std::mem::size_of::<T>();
        if !(1..=25).contains(&k) || size > 4 || (k as usize) > 8 * size {
            return false;
        }
        if !available() {
            return crate::simd::level().avx2 && unpack256(data, k, out);
        }
        let groups = out.len() / 16;
        if groups == 0 {
            return false;
        }
        let (head, _) = out.split_at_mut(groups * 16);
        // SAFETY: the processor has AVX-512 F, BW and VBMI (checked above); every load
        // reads at most `step_bytes` bytes of group `g`, which lie inside `data` (it holds
        // `out.len() * k` bits); every store writes sixteen words of `head`.
        unsafe {
            let dst = head.as_mut_ptr().cast::<u8>();
            match size {
                1 => steps::<1>(data, k, dst, groups),
                2 => steps::<2>(data, k, dst, groups),
                _ => steps::<4>(data, k, dst, groups),
            }
        }
        unpack_rest(data, k, out, groups * 16);
        true
    }

    /// The words of `out` from `done` on (a multiple of 8, so they start on a byte),
    /// scalar: what the SIMD steps left.
    fn unpack_rest<T: Word>(data: &[u8], k: u32, out: &mut [T], done: usize) {
        if done < out.len() {
            let bit = done * k as usize;
            debug_assert_eq!(bit % 8, 0, "eight words end on a byte");
            super::super::unpack_scalar(&data[bit / 8..], k, &mut out[done..]);
        }
    }

    pub(super) fn unpack_or<T: Word>(data: &[u8], k: u32, out: &mut [T], shift: u32) -> bool {
        let size = std::mem::size_of::<T>();
        // Sign bits into 16- or 32-bit words; wider fields into 32-bit words only: into
        // 16-bit words (F16, BF16 mantissas) the fused step was slower than unpacking to
        // bytes and OR-ing those (whisper-tiny's 75 MB decoded 10% slower), into 32-bit
        // ones (F32 mantissas) faster (easyocr 12%).
        if !(1..=25).contains(&k)
            || !(size == 4 || (size == 2 && k == 1))
            || k + shift > 8 * size as u32
            || !available()
        {
            return false;
        }
        assert!(
            data.len() as u64 * 8 >= out.len() as u64 * u64::from(k),
            "the data holds the words"
        );
        // Steps of 32 words (16-bit words) or 16 (32-bit ones); sign bits take a mask
        // register each step, other widths a [`Step`].
        let per = if k == 1 { 64 / size } else { 16 };
        let groups = out.len() / per;
        let (head, tail) = out.split_at_mut(groups * per);
        // SAFETY: AVX-512 F, BW and VBMI were detected; each step reads `per * k / 8`
        // bytes of `data` inside what it holds and writes `per` words of `head`.
        unsafe {
            let dst = head.as_mut_ptr().cast::<u8>();
            match (k, size) {
                (1, 2) => signs_or::<2>(data, dst, groups, shift),
                (1, _) => signs_or::<4>(data, dst, groups, shift),
                _ => steps_or(data, k, dst, groups, shift),
            }
        }
        // The rest, scalar, from the byte where the steps ended.
        let bit = groups * per * k as usize;
        debug_assert_eq!(bit % 8, 0, "a step ends on a byte");
        let mut rest = [T::default(); 64];
        let rest = &mut rest[..tail.len()];
        super::super::unpack_scalar(&data[bit / 8..], k, rest);
        for (o, &x) in tail.iter_mut().zip(rest.iter()) {
            *o = T::from_u64((*o).into() | x.into() << shift);
        }
        true
    }

    /// A step of sixteen `k`-bit words (`k` in 1..=25), what [`steps`] and [`steps_or`]
    /// share: one masked load of the step's `2k` bytes, one byte permute placing each
    /// word's four bytes in its 32-bit lane, one variable shift and a mask.
    struct Step {
        idx: __m512i,
        shifts: __m512i,
        mask: __m512i,
        load: __mmask64,
        /// Bytes a step reads: `2k`.
        bytes: usize,
    }

    impl Step {
        #[inline]
        #[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
        fn new(k: u32) -> Step {
            let mut idx = [0u8; 64];
            let mut shifts = [0u32; 16];
            for j in 0..16 {
                let bit = j * k as usize;
                for b in 0..4 {
                    idx[4 * j + b] = ((bit >> 3) + b).min(63) as u8;
                }
                shifts[j] = (bit & 7) as u32;
            }
            let bytes = 2 * k as usize;
            // SAFETY: the loads read the 64 bytes of `idx` and of `shifts`.
            unsafe {
                Step {
                    idx: _mm512_loadu_si512(idx.as_ptr().cast()),
                    shifts: _mm512_loadu_si512(shifts.as_ptr().cast()),
                    mask: _mm512_set1_epi32(((1u64 << k) - 1) as i32),
                    load: (1u64 << bytes) - 1,
                    bytes,
                }
            }
        }

        /// The sixteen words of step `g` of the data at `src`, each in its 32-bit lane.
        ///
        /// # Safety
        /// The step's `bytes` bytes from `src + g * bytes` are readable.
        #[inline]
        #[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
        unsafe fn words(&self, src: *const u8, g: usize) -> __m512i {
            // SAFETY: the masked load touches only the step's bytes (the caller's
            // promise).
            let v = unsafe { _mm512_maskz_loadu_epi8(self.load, src.add(g * self.bytes).cast()) };
            _mm512_and_si512(
                _mm512_srlv_epi32(_mm512_permutexvar_epi8(self.idx, v), self.shifts),
                self.mask,
            )
        }
    }

    /// `groups` steps of [`unpack_or`] of 1-bit words: `64 / SIZE` words of `SIZE`
    /// bytes a step, their bits a mask selecting `1 << shift`.
    ///
    /// # Safety
    /// AVX-512 F and BW; `data` holds `groups * 8 / SIZE` bytes, `out` room for
    /// `groups * 64 / SIZE` words of `SIZE` bytes.
    #[target_feature(enable = "avx512f,avx512bw")]
    unsafe fn signs_or<const SIZE: usize>(data: &[u8], out: *mut u8, groups: usize, shift: u32) {
        let step_bytes = 8 / SIZE;
        assert!(
            data.len() >= groups * step_bytes,
            "the data holds the steps"
        );
        let src = data.as_ptr();
        let bit = 1u32 << shift;
        for g in 0..groups {
            // SAFETY: the step's bytes lie inside `data`, its words inside `out`.
            unsafe {
                let dst = out.add(g * 64).cast::<__m512i>();
                let old = _mm512_loadu_si512(dst);
                let v = if SIZE == 2 {
                    let m = src.add(g * 4).cast::<u32>().read_unaligned();
                    _mm512_maskz_mov_epi16(m, _mm512_set1_epi16(bit as i16))
                } else {
                    let m = src.add(g * 2).cast::<u16>().read_unaligned();
                    _mm512_maskz_mov_epi32(m, _mm512_set1_epi32(bit as i32))
                };
                _mm512_storeu_si512(dst, _mm512_or_si512(old, v));
            }
        }
    }

    /// `groups` steps of [`unpack_or`] of sixteen `k`-bit words (`k` in 2..=25) into
    /// 32-bit words: a [`Step`]'s words, shifted and OR-ed into the words there.
    ///
    /// # Safety
    /// AVX-512 F, BW and VBMI; `data` holds `groups * 2k` bytes, `out` room for
    /// `groups * 16` 32-bit words.
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
    unsafe fn steps_or(data: &[u8], k: u32, out: *mut u8, groups: usize, shift: u32) {
        let step = Step::new(k);
        let up = _mm_cvtsi32_si128(shift as i32);
        assert!(
            data.len() >= groups * step.bytes,
            "the data holds the groups"
        );
        let src = data.as_ptr();
        for g in 0..groups {
            // SAFETY: the data holds the step's bytes (asserted); the step's sixteen
            // 4-byte words lie inside `out`.
            unsafe {
                let w = step.words(src, g);
                let dst = out.add(g * 64).cast::<__m512i>();
                let new = _mm512_or_si512(_mm512_loadu_si512(dst), _mm512_sll_epi32(w, up));
                _mm512_storeu_si512(dst, new);
            }
        }
    }

    /// [`unpack`] with AVX2, eight words a step: the step's bytes loaded as two 16-byte
    /// halves (words 0-3 from its first byte, words 4-7 from byte `floor(k / 2)`), one
    /// byte shuffle placing each word's four bytes in its 32-bit lane, one variable
    /// shift and a mask, the lanes packed to the output's container. Groups whose loads
    /// would pass the end of `data` are left to the scalar unpacking.
    fn unpack256<T: Word>(data: &[u8], k: u32, out: &mut [T]) -> bool {
        let size = std::mem::size_of::<T>();
        if size == 1 && (k == 1 || k == 4) {
            // Sign bits and nibbles into bytes (a `merge`'s sign and low mantissa fields),
            // 32 words a step.
            let per_step = 32 * k as usize / 8;
            let groups = (out.len() / 32).min(data.len() / per_step);
            if groups == 0 {
                return false;
            }
            // SAFETY: AVX2 was detected by the caller; step `g` reads bytes
            // `[g per_step, (g + 1) per_step)` of `data` and writes words `[32 g, 32 g +
            // 32)` of `out`, both inside (`groups` bounds them).
            unsafe {
                let dst = out.as_mut_ptr().cast::<u8>();
                if k == 1 {
                    bits_to_bytes(data, dst, groups);
                } else {
                    nibbles_to_bytes(data, dst, groups);
                }
            }
            unpack_rest(data, k, out, groups * 32);
            return true;
        }
        let step = k as usize;
        let half = step / 2;
        // Group `g` loads bytes `[g k, g k + half + 16)`: the groups inside `data`.
        let groups = match data.len().checked_sub(half + 16) {
            Some(room) => (out.len() / 8).min(room / step + 1),
            None => 0,
        };
        if groups == 0 {
            return false;
        }
        let (head, _) = out.split_at_mut(groups * 8);
        // SAFETY: AVX2 was detected by the caller; every load of group `g < groups` ends
        // at `g k + half + 16 <= data.len()` (found above); every store writes the eight
        // words of group `g` inside `head`.
        unsafe {
            let dst = head.as_mut_ptr().cast::<u8>();
            match size {
                1 => steps256::<1>(data, k, dst, groups),
                2 => steps256::<2>(data, k, dst, groups),
                _ => steps256::<4>(data, k, dst, groups),
            }
        }
        unpack_rest(data, k, out, groups * 8);
        true
    }

    /// 32 one-bit words a step into bytes: the step's four bytes broadcast, byte `j / 8`
    /// picked into lane `j` by a shuffle, its bit `j mod 8` tested by a compare.
    ///
    /// # Safety
    /// AVX2; `data` holds `4 groups` bytes and `out` room for `32 groups`.
    #[target_feature(enable = "avx2")]
    unsafe fn bits_to_bytes(data: &[u8], out: *mut u8, groups: usize) {
        let pick = _mm256_setr_epi8(
            0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3,
            3, 3, 3,
        );
        let bit = _mm256_set1_epi64x(0x8040_2010_0804_0201_u64 as i64);
        let one = _mm256_set1_epi8(1);
        for g in 0..groups {
            let w = std::ptr::read_unaligned(data.as_ptr().add(4 * g).cast::<i32>());
            let v = _mm256_shuffle_epi8(_mm256_set1_epi32(w), pick);
            let set = _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
            _mm256_storeu_si256(out.add(32 * g).cast(), _mm256_and_si256(set, one));
        }
    }

    /// 32 four-bit words a step into bytes: the step's sixteen bytes' low and high
    /// nibbles interleaved.
    ///
    /// # Safety
    /// AVX2; `data` holds `16 groups` bytes and `out` room for `32 groups`.
    #[target_feature(enable = "avx2")]
    unsafe fn nibbles_to_bytes(data: &[u8], out: *mut u8, groups: usize) {
        let low = _mm_set1_epi8(0x0F);
        for g in 0..groups {
            let v = _mm_loadu_si128(data.as_ptr().add(16 * g).cast());
            let lo = _mm_and_si128(v, low);
            let hi = _mm_and_si128(_mm_srli_epi16::<4>(v), low);
            let dst = out.add(32 * g);
            _mm_storeu_si128(dst.cast(), _mm_unpacklo_epi8(lo, hi));
            _mm_storeu_si128(dst.add(16).cast(), _mm_unpackhi_epi8(lo, hi));
        }
    }

    /// # Safety
    /// AVX2; `data` holds `(groups - 1) k + floor(k / 2) + 16` bytes; `out` has room for
    /// `8 groups` words of `SIZE` bytes; `k` in 1..=25 and at most `8 SIZE`.
    #[target_feature(enable = "avx2")]
    unsafe fn steps256<const SIZE: usize>(data: &[u8], k: u32, out: *mut u8, groups: usize) {
        let step = k as usize;
        let half = step / 2;
        let mut idx = [0i8; 32];
        let mut shifts = [0i32; 8];
        for j in 0..8 {
            let bit = j * step;
            let base = if j < 4 { 0 } else { 16 };
            let first = bit / 8 - if j < 4 { 0 } else { half };
            for b in 0..4 {
                idx[base + 4 * (j % 4) + b] = (first + b) as i8;
            }
            shifts[j] = (bit % 8) as i32;
        }
        let idx = _mm256_loadu_si256(idx.as_ptr().cast());
        let shifts = _mm256_loadu_si256(shifts.as_ptr().cast());
        let m = _mm256_set1_epi32(((1u64 << k) - 1) as i32);
        let src = data.as_ptr();
        for g in 0..groups {
            let p = src.add(g * step);
            let v = _mm256_loadu2_m128i(p.add(half).cast(), p.cast());
            let w = _mm256_and_si256(_mm256_srlv_epi32(_mm256_shuffle_epi8(v, idx), shifts), m);
            let dst = out.add(g * 8 * SIZE);
            match SIZE {
                1 => {
                    let h = _mm256_packus_epi32(w, w);
                    let b = _mm256_packus_epi16(h, h);
                    let lo = _mm_cvtsi128_si32(_mm256_castsi256_si128(b)) as u32;
                    let hi = _mm_cvtsi128_si32(_mm256_extracti128_si256::<1>(b)) as u32;
                    std::ptr::write_unaligned(
                        dst.cast::<u64>(),
                        u64::from(lo) | u64::from(hi) << 32,
                    );
                }
                2 => {
                    let h = _mm256_permute4x64_epi64::<0b00_00_10_00>(_mm256_packus_epi32(w, w));
                    _mm_storeu_si128(dst.cast(), _mm256_castsi256_si128(h));
                }
                _ => _mm256_storeu_si256(dst.cast(), w),
            }
        }
    }

    /// Unpacks `groups` steps of sixteen `k`-bit words from `data` into `out`, words of
    /// `SIZE` bytes.
    ///
    /// # Safety
    /// The processor has AVX-512 F, BW and VBMI; `data` holds `groups * 2k` bytes and
    /// `out` room for `groups * 16` words of `SIZE` bytes.
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
    unsafe fn steps<const SIZE: usize>(data: &[u8], k: u32, out: *mut u8, groups: usize) {
        let step = Step::new(k);
        assert!(
            data.len() >= groups * step.bytes,
            "the data holds the groups"
        );
        let src = data.as_ptr();
        for g in 0..groups {
            // SAFETY: the data holds the group's bytes (asserted).
            let w = unsafe { step.words(src, g) };
            // SAFETY: the group's sixteen words of `SIZE` bytes lie inside `out`.
            unsafe {
                let dst = out.add(g * 16 * SIZE);
                match SIZE {
                    1 => _mm_storeu_si128(dst.cast(), _mm512_cvtepi32_epi8(w)),
                    2 => _mm256_storeu_si256(dst.cast(), _mm512_cvtepi32_epi16(w)),
                    _ => _mm512_storeu_si512(dst.cast(), w),
                }
            }
        }
    }
}
