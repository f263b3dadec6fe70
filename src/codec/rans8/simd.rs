//! SIMD decoding steps of codec `rans8` (see the parent module): the 32 or 64 states as
//! vectors of 16 (AVX-512) or 8 (AVX2); each step one gather of the states'
//! table entries, a multiply-add, and the refill of the lanes below `2^16` from the next
//! 16-bit words, expanded into those lanes (AVX-512 `vpexpandd`; AVX2 a permute from a
//! table of the 256 lane masks). The lanes of a group are stepped and refilled in lane
//! order, so the words are read in the order of the scalar decoder, and the results are
//! the same.
//!
//! Gathers: htscodecs 1.6 replaced its AVX2 gathers with scalar loads after the Downfall
//! microcode update on Intel and on AMD Zen 4 (`../shared/ENTROPY.md`). Measured on an
//! Intel Xeon with AVX-512 (the update in place) on minilm's exponent bytes: AVX2 with
//! gathers 0.58 ns a symbol, with eight loads 0.63, AVX-512 with gathers 0.47, scalar 2.5;
//! on an AMD EPYC (Zen 3, no AVX-512) AVX2 with gathers 0.80-0.84, with eight loads
//! inserted into the vector (`vpinsrd` from memory) 0.74-0.78 (docs/bench.md, sessions
//! 27 and 31). So the AVX-512 path first where there is one, and between the two AVX2
//! kernels the one that decodes a short synthetic stream faster on this processor
//! ([`kernel`]).
//!
//! Chosen at run time ([`kernel`]); `None` where neither applies (the scalar decoder of
//! the parent module runs then).

/// Decodes whole groups of `x.len()` (32 or 64) words: `out.len()` (a multiple of that)
/// symbols into `out`, from states `x` and the 16-bit words `words[2 * pos..]`; returns
/// the new `pos`. Requires `words` to hold at least `out.len()` words from `pos` on (a
/// group reads at most one a state), the table to have `2^scale` entries, and
/// `scale <= 12`.
pub(super) type Kernel = fn(&[u32], u32, &mut [u32], &[u8], usize, &mut [u8]) -> usize;

/// The fastest kernel this processor has, if any: AVX-512's, else the faster of the two
/// AVX2 kernels ([`avx2`] with gathers, [`avx2_lookup`] with scalar loads) on a short
/// synthetic stream, timed once a process (about 0.1 ms). `BREVIS_RANS8_KERNEL=gather` or
/// `=lookup` picks an AVX2 kernel without timing (benchmarks; both decode the same words).
pub(super) fn kernel() -> Option<Kernel> {
    chosen().map(|(_, k)| k)
}

/// The name of [`kernel`]'s choice, as `brevis bench --json` reports it: `avx512
/// gathers`, `avx2 gathers`, `avx2 scalar loads`, or `scalar` where no kernel runs.
pub(super) fn kernel_name() -> &'static str {
    chosen().map_or("scalar", |(name, _)| name)
}

/// [`kernel`] and its name, chosen once a process.
fn chosen() -> Option<(&'static str, Kernel)> {
    use std::sync::OnceLock;
    static K: OnceLock<Option<(&'static str, Kernel)>> = OnceLock::new();
    *K.get_or_init(|| {
        if !crate::simd::allowed() {
            return None;
        }
        if let Some(k) = imp::avx512() {
            return Some(("avx512 gathers", k));
        }
        let gather = ("avx2 gathers", imp::avx2()?);
        let lookup = ("avx2 scalar loads", imp::avx2_lookup()?);
        match std::env::var("BREVIS_RANS8_KERNEL").as_deref() {
            Ok("gather") => Some(gather),
            Ok("lookup") => Some(lookup),
            _ => Some(if faster(gather.1, lookup.1) {
                lookup
            } else {
                gather
            }),
        }
    })
}

/// Whether kernel `b` decodes the same synthetic stream (64 states, 8,192 symbols of a
/// 64-symbol table at 12-bit precision, pseudo-random payload words) faster than `a`:
/// the least of 7 timings each, taken alternately; `false` on a tie.
fn faster(a: Kernel, b: Kernel) -> bool {
    use std::time::{Duration, Instant};
    const N: usize = 8192;
    let table: Vec<u32> = (0..1u32 << 12)
        .map(|slot| super::entry(slot >> 6, 64, slot & 63))
        .collect();
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let words: Vec<u8> = (0..2 * N)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed as u8
        })
        .collect();
    let mut out = vec![0u8; N];
    let mut time = |k: Kernel| {
        let mut x = [super::L; 64];
        let t = Instant::now();
        std::hint::black_box(k(&table, 12, &mut x, &words, 0, &mut out));
        t.elapsed()
    };
    let (mut ta, mut tb) = (Duration::MAX, Duration::MAX);
    for _ in 0..7 {
        ta = ta.min(time(a));
        tb = tb.min(time(b));
    }
    tb < ta
}

/// The AVX-512 kernel, if this processor has AVX-512 F.
#[allow(dead_code)]
pub(super) fn avx512() -> Option<Kernel> {
    imp::avx512()
}

/// The AVX2 kernel with gathers, if this processor has AVX2.
#[allow(dead_code)]
pub(super) fn avx2() -> Option<Kernel> {
    imp::avx2()
}

/// The AVX2 kernel that loads each state's table entry with a scalar load and inserts
/// the eight into a vector, if this processor has AVX2: the same words as [`avx2`].
#[allow(dead_code)]
pub(super) fn avx2_lookup() -> Option<Kernel> {
    imp::avx2_lookup()
}

/// Maps symbols to words of at most 8 bits: `out[i] = table[symbols[i]]`, with AVX-512
/// VBMI (two 128-entry byte permutes and a blend per 64 symbols) where the processor has
/// it; `false` (nothing done) otherwise.
pub(super) fn map_u8(symbols: &[u8], table: &[u8; 256], out: &mut [u8]) -> bool {
    imp::map_u8(symbols, table, out)
}

/// Maps symbols to 16-bit words: `out[i] = table[symbols[i]]`, with AVX-512 BW (four
/// 64-entry word permutes and three blends per 32 symbols) where the processor has it;
/// `false` (nothing done) otherwise.
pub(super) fn map_u16(symbols: &[u8], table: &[u16; 256], out: &mut [u16]) -> bool {
    imp::map_u16(symbols, table, out)
}

/// Sets `masks` to one mask per 64 symbols (the last step's bits past the symbols
/// clear) of those equal to `byte`: a 64-byte compare a step, with AVX-512 BW where the
/// processor has it; `false` (nothing done) otherwise.
pub(super) fn byte_masks(symbols: &[u8], byte: u8, masks: &mut Vec<u64>) -> bool {
    imp::byte_masks(symbols, byte, masks)
}

/// Maps symbols to 16-bit values widened to 32-bit words and shifted left by `shift`:
/// `out[i] = table[symbols[i]] << shift` (a `merge` field written straight into F32
/// words), as [`map_u16`] does the lookup; `false` (nothing done) where the processor
/// lacks AVX-512 BW.
pub(super) fn map_u16_u32(symbols: &[u8], table: &[u16; 256], out: &mut [u32], shift: u32) -> bool {
    imp::map_u16_u32(symbols, table, out, shift)
}

/// The coding constants of the encoder's symbols: `freq_cum[s] = f | c << 16` and
/// `rcp[s] = 1 / f` (the nearest double).
pub(super) struct EncTable {
    pub(super) freq_cum: [u32; 256],
    pub(super) rcp: [f64; 256],
}

/// Encodes whole groups of `x.len()` (32 or 64) symbols from the last group to the
/// first, as the scalar encoder of the parent module does, with AVX-512 (F, BW, VL,
/// VBMI2) where the processor has it: the quotient of a state by its frequency as
/// `floor(x * (1 / f) + 2^-14)` in doubles, exact for every `x < 2^32` and `f <= 2^12`
/// (the product's error is below `2^-20` and a fraction `j / f` is at least `2^-12` from
/// the next integer), and each vector's renormalization words compress-stored below
/// the last ones written. Writes the words at `words[..at]` from `at` down and returns
/// the new `at`; `None` (nothing done) where the processor lacks the features.
///
/// Requires `symbols.len()` a multiple of `x.len()`, `at >= symbols.len()`, and
/// `scale <= 12`.
pub(super) fn encode(
    symbols: &[u8],
    table: &EncTable,
    scale: u32,
    x: &mut [u32],
    words: &mut [u16],
    at: usize,
    isa: Isa,
) -> Option<usize> {
    imp::encode(symbols, table, scale, x, words, at, isa)
}

/// Least precision (bits) at which the AVX2 and AVX-512 encoders divide a state by a
/// frequency in single precision and correct the quotient by at most one (`tests::
/// single_precision_quotients_are_within_one` checks the bound; below it the quotient can
/// be off by more, and the encoders gather `1 / f` as doubles instead). On an AMD EPYC
/// (Zen 3) the division beat those gathers by 8-13% in fast compression; on an Intel
/// Xeon with AVX-512 (session 33) the AVX-512 encoder with it, its states in registers
/// and its escapes out of line went from 0.89 to 0.63 ns a symbol.
pub(super) const DIV_SCALE: u32 = 9;

/// The first guess of the AVX2 and AVX-512 encoders' quotient `floor(y / f)` for
/// `y < 2^32`: `y` rounded to single precision once (AVX2: its halves joined by a fused
/// multiply-add; AVX-512: an unsigned conversion, the same single rounding), divided
/// by `f` in single precision, truncated. Within one of the quotient for every state
/// below `f 2^(32 - s)` at precision `s >= DIV_SCALE`; what the SIMD step computes, lane
/// by lane.
#[cfg(test)]
pub(super) fn single_precision_quotient(y: u32, f: u32) -> i64 {
    let yf = ((y >> 16) as f32).mul_add(65536.0, (y & 0xFFFF) as f32);
    (yf / f as f32) as i64
}

/// Which SIMD build of the encoders runs: the best this processor has (AVX-512 F, BW,
/// VL, VBMI2, else AVX2), or AVX2 even where AVX-512 is there (the tests compare the
/// builds with the scalar encoder on one machine).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Isa {
    Best,
    #[cfg_attr(not(test), allow(dead_code))]
    Avx2,
}

/// The words of a field the fused encoder reads: the first whole groups of a stream's
/// container words.
#[derive(Clone, Copy)]
pub(super) enum Container<'a> {
    U8(&'a [u8]),
    U16(&'a [u16]),
    U32(&'a [u32]),
}

impl Container<'_> {
    pub(super) fn len(&self) -> usize {
        match self {
            Container::U8(v) => v.len(),
            Container::U16(v) => v.len(),
            Container::U32(v) => v.len(),
        }
    }
}

/// Most bits of a field the fused encoder codes: its table has `2^FIELD_BITS` 32-bit
/// entries (16 KB, in the first-level cache beside the states).
pub(super) const FIELD_BITS: u32 = 12;

/// Whether [`encode_fields`] runs on this processor in `isa`.
pub(super) fn fields_available(isa: Isa) -> bool {
    imp::fields_available(isa)
}

/// What the one-pass encoder looks a field up in.
pub(super) struct FieldTable {
    /// For each field value (`2^b <= 2^FIELD_BITS` of them), its symbol's `f | c << 12
    /// | s << 24` (with at least two symbols, `f <= 4095`).
    pub(super) entries: Vec<u32>,
    /// The symbols' coding constants (the kernel gathers `rcp`).
    pub(super) coding: EncTable,
    /// The escape symbol, if the stream has escaped words.
    pub(super) escape: Option<u8>,
}

/// [`encode`] without the symbols: each word's field `(w >> shift) & (2^b - 1)` is looked
/// up in `table`, so the pass that maps words to symbols and the pass that finds the
/// escaped words are this one. The escaped fields are pushed onto `escaped` from the
/// last to the first. The quotient of a state by its frequency is [`encode`]'s.
/// Writes the words at `words[..at]` from `at` down and returns the new `at`; `None`
/// (nothing done) where the processor lacks the features ([`fields_available`]).
///
/// Requires `fields.len()` a multiple of `x.len()` (32 or 64), `at >= fields.len()`,
/// `scale <= 12`, and `table.entries.len()` a power of two (the fields are masked to it).
#[allow(clippy::too_many_arguments)]
pub(super) fn encode_fields(
    fields: Container<'_>,
    shift: u32,
    table: &FieldTable,
    scale: u32,
    x: &mut [u32],
    words: &mut [u16],
    at: usize,
    escaped: &mut Vec<u32>,
    isa: Isa,
) -> Option<usize> {
    imp::encode_fields(fields, shift, table, scale, x, words, at, escaped, isa)
}

#[cfg(not(target_arch = "x86_64"))]
mod imp {
    use super::Kernel;
    pub(super) fn encode(
        _: &[u8],
        _: &super::EncTable,
        _: u32,
        _: &mut [u32],
        _: &mut [u16],
        _: usize,
        _: super::Isa,
    ) -> Option<usize> {
        None
    }
    pub(super) fn avx512() -> Option<Kernel> {
        None
    }
    pub(super) fn avx2() -> Option<Kernel> {
        None
    }
    pub(super) fn avx2_lookup() -> Option<Kernel> {
        None
    }
    pub(super) fn fields_available(_: super::Isa) -> bool {
        false
    }
    #[allow(clippy::too_many_arguments)]
    pub(super) fn encode_fields(
        _: super::Container<'_>,
        _: u32,
        _: &super::FieldTable,
        _: u32,
        _: &mut [u32],
        _: &mut [u16],
        _: usize,
        _: &mut Vec<u32>,
        _: super::Isa,
    ) -> Option<usize> {
        None
    }
    pub(super) fn map_u8(_: &[u8], _: &[u8; 256], _: &mut [u8]) -> bool {
        false
    }
    pub(super) fn map_u16(_: &[u8], _: &[u16; 256], _: &mut [u16]) -> bool {
        false
    }
    pub(super) fn map_u16_u32(_: &[u8], _: &[u16; 256], _: &mut [u32], _: u32) -> bool {
        false
    }
    pub(super) fn byte_masks(_: &[u8], _: u8, _: &mut Vec<u64>) -> bool {
        false
    }
}

#[cfg(target_arch = "x86_64")]
mod imp {
    use super::Kernel;
    use std::arch::x86_64::*;

    pub(super) fn avx512() -> Option<Kernel> {
        (crate::simd::avx512_allowed()
            && is_x86_feature_detected!("avx512f")
            && is_x86_feature_detected!("popcnt"))
        .then_some(run512 as Kernel)
    }

    use super::DIV_SCALE;

    /// The fields of the lanes set in `esc` (a lane mask of `fields`), pushed onto
    /// `escaped` from the last lane to the first, as the field encoders code them.
    #[inline(always)]
    fn push_escaped(fields: &[u32], esc: u32, escaped: &mut Vec<u32>) {
        for (j, &f) in fields.iter().enumerate().rev() {
            if esc >> j & 1 == 1 {
                escaped.push(f);
            }
        }
    }

    /// [`push_escaped`] of the 16 lanes of `field` (out of the encoder's loop: escapes
    /// are rare).
    #[inline(never)]
    #[target_feature(enable = "avx512f")]
    fn push_escaped512(field: __m512i, esc: u16, escaped: &mut Vec<u32>) {
        // The lanes reversed, and their mask with them, compress-stored after the
        // vector's words.
        let reversed = _mm512_permutexvar_epi32(
            _mm512_setr_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
            field,
        );
        escaped.reserve(16);
        let len = escaped.len();
        // SAFETY: `reserve` made room for 16 more words; the compress-store writes
        // `popcnt(esc)` of them, which `set_len` then counts.
        unsafe {
            _mm512_mask_compressstoreu_epi32(
                escaped.as_mut_ptr().add(len).cast(),
                esc.reverse_bits(),
                reversed,
            );
            escaped.set_len(len + esc.count_ones() as usize);
        }
    }

    /// Whether the AVX-512 encoders run here (F, BW, VL, VBMI2, POPCNT, FMA).
    fn encoders512() -> bool {
        static OK: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *OK.get_or_init(|| {
            simd_allowed()
                && crate::simd::avx512_allowed()
                && is_x86_feature_detected!("avx512f")
                && is_x86_feature_detected!("avx512bw")
                && is_x86_feature_detected!("avx512vl")
                && is_x86_feature_detected!("avx512vbmi2")
                && is_x86_feature_detected!("popcnt")
                && is_x86_feature_detected!("fma")
        })
    }

    /// Whether the AVX2 encoders run here (AVX2, POPCNT, FMA).
    fn encoders256() -> bool {
        static OK: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *OK.get_or_init(|| {
            simd_allowed()
                && is_x86_feature_detected!("avx2")
                && is_x86_feature_detected!("popcnt")
                && is_x86_feature_detected!("fma")
        })
    }

    /// The build of the encoders to run for `isa`: `Some(true)` AVX-512, `Some(false)`
    /// AVX2, `None` neither.
    fn pick(isa: super::Isa) -> Option<bool> {
        if isa == super::Isa::Best && encoders512() {
            Some(true)
        } else if encoders256() {
            Some(false)
        } else {
            None
        }
    }

    pub(super) fn encode(
        symbols: &[u8],
        table: &super::EncTable,
        scale: u32,
        x: &mut [u32],
        words: &mut [u16],
        at: usize,
        isa: super::Isa,
    ) -> Option<usize> {
        let wide = pick(isa)?;
        let lanes = x.len();
        if !matches!(lanes, 32 | 64) || !symbols.len().is_multiple_of(lanes) || scale > 12 {
            return None;
        }
        assert!(
            at >= symbols.len() && at <= words.len(),
            "room for the words"
        );
        // SAFETY: the features were detected; see `encode512` and `encode256` for the
        // accesses.
        Some(unsafe {
            if wide && scale >= DIV_SCALE {
                encode512::<true>(symbols, table, scale, x, words, at)
            } else if wide {
                encode512::<false>(symbols, table, scale, x, words, at)
            } else if scale >= DIV_SCALE {
                encode256::<true>(symbols, table, scale, x, words, at)
            } else {
                encode256::<false>(symbols, table, scale, x, words, at)
            }
        })
    }

    /// # Safety
    /// The processor has AVX-512 F, BW, VL, VBMI2, POPCNT and FMA; `symbols.len()` is a
    /// multiple of `x.len()` (32 or 64) and `symbols.len() <= at <= words.len()`.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vbmi2,popcnt,fma")]
    unsafe fn encode512<const DIV: bool>(
        symbols: &[u8],
        table: &super::EncTable,
        scale: u32,
        x: &mut [u32],
        words: &mut [u16],
        mut at: usize,
    ) -> usize {
        let lanes = x.len();
        let vectors = lanes / 16;
        let fc = table.freq_cum.as_ptr().cast::<i32>();
        let rcp = table.rcp.as_ptr();
        let low16 = _mm512_set1_epi32(0xFFFF);
        let k = StepConstants::new(scale);
        let xp = x.as_mut_ptr().cast::<i32>();
        let mut xs = [_mm512_setzero_si512(); 4];
        for (v, xv) in xs.iter_mut().enumerate().take(vectors) {
            // SAFETY: `x` holds `lanes` states.
            *xv = unsafe { _mm512_loadu_epi32(xp.add(16 * v)) };
        }
        let sp = symbols.as_ptr();
        let wp = words.as_mut_ptr();
        for g in (0..symbols.len() / lanes).rev() {
            for v in (0..vectors).rev() {
                // SAFETY (loads, gathers, stores): the 16 symbols lie inside `symbols`;
                // gathers index the 256-entry tables by a byte; the compress-store
                // writes `popcnt(m) <= 16` words at `at - popcnt(m)`, and `at` stays at
                // least the number of symbols not yet coded, so never below 0.
                let s = _mm512_cvtepu8_epi32(unsafe {
                    _mm_loadu_si128(sp.add(g * lanes + 16 * v).cast())
                });
                let e = unsafe { _mm512_i32gather_epi32::<4>(s, fc) };
                let f = _mm512_and_si512(e, low16);
                let c = _mm512_srli_epi32::<16>(e);
                // SAFETY: as above.
                xs[v] = unsafe { step512::<DIV>(xs[v], s, f, c, rcp, &k, wp, &mut at) };
            }
        }
        for (v, xv) in xs.iter().enumerate().take(vectors) {
            // SAFETY: `x` holds `lanes` states.
            unsafe { _mm512_storeu_epi32(xp.add(16 * v), *xv) };
        }
        at
    }

    /// The constants of [`step512`] at precision `scale`.
    struct StepConstants {
        to_bound: __m128i,
        total: __m512i,
        nudge: __m512d,
        scale: __m128i,
    }

    impl StepConstants {
        #[inline(always)]
        fn new(scale: u32) -> StepConstants {
            // SAFETY: called by the kernels, which run with AVX-512 F; these only set
            // registers.
            unsafe {
                StepConstants {
                    to_bound: _mm_cvtsi32_si128(32 - scale as i32),
                    total: _mm512_set1_epi32(1 << scale),
                    nudge: _mm512_set1_pd(1.0 / 16384.0),
                    scale: _mm_cvtsi32_si128(scale as i32),
                }
            }
        }
    }

    /// One encoding step of the 16 states `xv` for symbols `sym` of frequencies `f` and
    /// cumulative frequencies `c`: each state at or above `f << (32 - s)` has its low 16
    /// bits compress-stored below `*at` (which moves down by their number) and is shifted
    /// down by 16; then `x + c + q (2^s - f)` with `q = floor(x / f)`: with `DIV` (at
    /// precision `s >= DIV_SCALE`) a single-precision quotient corrected by the remainder
    /// (the bound of the tests' `single_precision_quotient`), else computed as
    /// `floor(x * (1 / f) + 2^-14)` in doubles, `1 / f` gathered from `rcp` by symbol
    /// (exact for `x < 2^32` and `f <= 2^12`: see [`super::encode`]). The new states.
    /// Shared by [`encode512`] and [`encode_fields512`], inlined into each.
    ///
    /// # Safety
    /// The processor has AVX-512 F, BW, VL, VBMI2 and FMA; `rcp` holds 256 doubles and
    /// every lane of `sym` is below 256; `wp` may be written at `*at - popcnt(m)..*at`,
    /// which the callers' accounting of `at` (never below the number of symbols not yet
    /// coded) guarantees.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn step512<const DIV: bool>(
        xv: __m512i,
        sym: __m512i,
        f: __m512i,
        c: __m512i,
        rcp: *const f64,
        k: &StepConstants,
        wp: *mut u16,
        at: &mut usize,
    ) -> __m512i {
        // SAFETY: the caller's contract above.
        unsafe {
            let bound = _mm512_sll_epi32(f, k.to_bound);
            let m = _mm512_cmpge_epu32_mask(xv, bound);
            *at -= m.count_ones() as usize;
            _mm256_mask_compressstoreu_epi16(wp.add(*at).cast(), m, _mm512_cvtepi32_epi16(xv));
            let y = _mm512_mask_srli_epi32::<16>(xv, m, xv);
            let spread = _mm512_sub_epi32(k.total, f);
            if DIV {
                // As the AVX2 step: `q0 = trunc(y / f)` in single precision (`y`
                // rounded once, the quotient once) is within one of `floor(y / f)` for
                // `s >= DIV_SCALE`; the remainder `r = y - q0 f` says which way.
                // `(q0 << s) + r + c` then moves by `2^s - f` a unit of `q`.
                let q0 = _mm512_cvttps_epi32(_mm512_div_ps(
                    _mm512_cvtepu32_ps(y),
                    _mm512_cvtepi32_ps(f),
                ));
                let r = _mm512_sub_epi32(y, _mm512_mullo_epi32(q0, f));
                let over = _mm512_cmpge_epi32_mask(r, f);
                let under = _mm512_cmplt_epi32_mask(r, _mm512_setzero_si512());
                let x0 = _mm512_add_epi32(_mm512_add_epi32(_mm512_sll_epi32(q0, k.scale), r), c);
                let x1 = _mm512_mask_add_epi32(x0, over, x0, spread);
                return _mm512_mask_sub_epi32(x1, under, x1, spread);
            }
            let r_lo = _mm512_i32gather_pd::<8>(_mm512_castsi512_si256(sym), rcp.cast());
            let r_hi = _mm512_i32gather_pd::<8>(_mm512_extracti64x4_epi64::<1>(sym), rcp.cast());
            let y_lo = _mm512_cvtepu32_pd(_mm512_castsi512_si256(y));
            let y_hi = _mm512_cvtepu32_pd(_mm512_extracti64x4_epi64::<1>(y));
            let q_lo = _mm512_cvttpd_epu32(_mm512_fmadd_pd(y_lo, r_lo, k.nudge));
            let q_hi = _mm512_cvttpd_epu32(_mm512_fmadd_pd(y_hi, r_hi, k.nudge));
            let q = _mm512_inserti64x4::<1>(_mm512_castsi256_si512(q_lo), q_hi);
            _mm512_add_epi32(_mm512_add_epi32(y, c), _mm512_mullo_epi32(q, spread))
        }
    }

    pub(super) fn fields_available(isa: super::Isa) -> bool {
        pick(isa).is_some()
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn encode_fields(
        fields: super::Container<'_>,
        shift: u32,
        table: &super::FieldTable,
        scale: u32,
        x: &mut [u32],
        words: &mut [u16],
        at: usize,
        escaped: &mut Vec<u32>,
        isa: super::Isa,
    ) -> Option<usize> {
        let wide = pick(isa)?;
        let lanes = x.len();
        let n = fields.len();
        if !matches!(lanes, 32 | 64)
            || !n.is_multiple_of(lanes)
            || scale > 12
            || !table.entries.len().is_power_of_two()
            || table.entries.len() > 1 << super::FIELD_BITS
            || shift >= 32
        {
            return None;
        }
        assert!(at >= n && at <= words.len(), "room for the words");
        let mask = table.entries.len() as u32 - 1;
        let (src, bytes) = match fields {
            super::Container::U8(v) => (v.as_ptr(), 1),
            super::Container::U16(v) => (v.as_ptr().cast::<u8>(), 2),
            super::Container::U32(v) => (v.as_ptr().cast::<u8>(), 4),
        };
        type Run = unsafe fn(
            *const u8,
            usize,
            u32,
            u32,
            &super::FieldTable,
            u32,
            &mut [u32],
            &mut [u16],
            usize,
            &mut Vec<u32>,
        ) -> usize;
        let div = scale >= DIV_SCALE;
        let run: Run = match (wide, bytes) {
            (true, 1) => encode_fields512::<1>,
            (true, 2) => encode_fields512::<2>,
            (true, _) => encode_fields512::<4>,
            (false, 1) if div => encode_fields256::<1, true>,
            (false, 2) if div => encode_fields256::<2, true>,
            (false, _) if div => encode_fields256::<4, true>,
            (false, 1) => encode_fields256::<1, false>,
            (false, 2) => encode_fields256::<2, false>,
            (false, _) => encode_fields256::<4, false>,
        };
        // SAFETY: the features were detected; see `encode_fields512` and
        // `encode_fields256` for the accesses. The field mask keeps every gather index
        // inside `table`.
        Some(unsafe { run(src, n, shift, mask, table, scale, x, words, at, escaped) })
    }

    /// # Safety
    /// The processor has AVX-512 F, BW, VL, VBMI2, POPCNT and FMA; `src` points to `n` words
    /// of `BYTES` bytes, `n` a multiple of `x.len()` (32 or 64), `n <= at <=
    /// words.len()`, and `mask + 1 == table.entries.len()`.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vbmi2,popcnt,fma")]
    #[allow(clippy::too_many_arguments)]
    unsafe fn encode_fields512<const BYTES: usize>(
        src: *const u8,
        n: usize,
        shift: u32,
        mask: u32,
        table: &super::FieldTable,
        scale: u32,
        x: &mut [u32],
        words: &mut [u16],
        at: usize,
        escaped: &mut Vec<u32>,
    ) -> usize {
        // SAFETY: the caller's contract.
        unsafe {
            let run = match (x.len() == 64, scale >= DIV_SCALE) {
                (true, true) => encode_fields512v::<BYTES, 4, true>,
                (true, false) => encode_fields512v::<BYTES, 4, false>,
                (false, true) => encode_fields512v::<BYTES, 2, true>,
                (false, false) => encode_fields512v::<BYTES, 2, false>,
            };
            run(src, n, shift, mask, table, scale, x, words, at, escaped)
        }
    }

    /// [`encode_fields512`] with `V` state vectors (`x.len() == 16 V`), each a variable
    /// of its own and the loop over them written out, so that none is stored and
    /// reloaded between steps (as an array indexed in a loop they were), and the
    /// quotient in single precision when `DIV` ([`step512`]).
    ///
    /// # Safety
    /// As [`encode_fields512`]; `DIV` only at precision `scale >= DIV_SCALE`.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vbmi2,popcnt,fma")]
    #[allow(clippy::too_many_arguments)]
    unsafe fn encode_fields512v<const BYTES: usize, const V: usize, const DIV: bool>(
        src: *const u8,
        n: usize,
        shift: u32,
        mask: u32,
        table: &super::FieldTable,
        scale: u32,
        x: &mut [u32],
        words: &mut [u16],
        mut at: usize,
        escaped: &mut Vec<u32>,
    ) -> usize {
        let lanes = x.len();
        let vectors = V;
        let tp = table.entries.as_ptr().cast::<i32>();
        let rcp = table.coding.rcp.as_ptr();
        let low12 = _mm512_set1_epi32(0xFFF);
        let escape = table.escape.map(|e| _mm512_set1_epi32(i32::from(e)));
        let field_mask = _mm512_set1_epi32(mask as i32);
        let by = _mm_cvtsi32_si128(shift as i32);
        let k = StepConstants::new(scale);
        let xp = x.as_mut_ptr().cast::<i32>();
        let load = |v: usize| {
            // SAFETY: `x` holds `lanes` states.
            unsafe { _mm512_loadu_epi32(xp.add(16 * v.min(vectors - 1))) }
        };
        let (mut x0, mut x1, mut x2, mut x3) = (load(0), load(1), load(2), load(3));
        let wp = words.as_mut_ptr();
        // One step of 16 states on the words from `i`: an inlined closure called once
        // for each of the `V` state vectors, so that each stays in a register.
        let mut one = |i: usize, xv: __m512i| {
            // SAFETY (loads, gathers, stores): the 16 words lie inside `src`'s `n`;
            // gathers index the table by a field masked below its length; the
            // compress-store writes `popcnt(m) <= 16` words at `at - popcnt(m)`, and
            // `at` stays at least the number of words not yet coded.
            let w = unsafe {
                match BYTES {
                    1 => _mm512_cvtepu8_epi32(_mm_loadu_si128(src.add(i).cast())),
                    2 => _mm512_cvtepu16_epi32(_mm256_loadu_si256(src.add(2 * i).cast())),
                    _ => _mm512_loadu_si512(src.add(4 * i).cast()),
                }
            };
            let field = _mm512_and_si512(_mm512_srl_epi32(w, by), field_mask);
            let e = unsafe { _mm512_i32gather_epi32::<4>(field, tp) };
            let sym = _mm512_srli_epi32::<24>(e);
            let esc = escape.map_or(0, |x| _mm512_cmpeq_epi32_mask(sym, x));
            if esc != 0 {
                push_escaped512(field, esc, escaped);
            }
            let f = _mm512_and_si512(e, low12);
            let c = _mm512_and_si512(_mm512_srli_epi32::<12>(e), low12);
            // SAFETY: as above.
            unsafe { step512::<DIV>(xv, sym, f, c, rcp, &k, wp, &mut at) }
        };
        for g in (0..n / lanes).rev() {
            let i = g * lanes;
            if V == 4 {
                x3 = one(i + 48, x3);
                x2 = one(i + 32, x2);
            }
            x1 = one(i + 16, x1);
            x0 = one(i, x0);
        }
        for (v, xv) in [x0, x1, x2, x3].into_iter().enumerate().take(vectors) {
            // SAFETY: `x` holds `lanes` states.
            unsafe { _mm512_storeu_epi32(xp.add(16 * v), xv) };
        }
        at
    }

    /// For each mask of 8 lanes, the byte shuffle that moves the low 16-bit words of the
    /// lanes set in it, in lane order, to the top of 8 words (the rest zeroed): stored at
    /// `at - 8`, they land at `at - popcnt(mask)..at` as AVX-512's compress-store puts
    /// them.
    static COMPACT_TOP: [[u8; 16]; 256] = {
        let mut t = [[0x80u8; 16]; 256];
        let mut m = 0;
        while m < 256 {
            let count = (m as u32).count_ones() as usize;
            let mut p = 8 - count;
            let mut l = 0;
            while l < 8 {
                if m >> l & 1 == 1 {
                    t[m][2 * p] = 2 * l as u8;
                    t[m][2 * p + 1] = 2 * l as u8 + 1;
                    p += 1;
                }
                l += 1;
            }
            m += 1;
        }
        t
    };

    /// [`StepConstants`] for the AVX2 step.
    struct StepConstants256 {
        to_bound: __m128i,
        total: __m256i,
        nudge: __m256d,
        flip: __m256i,
        two31: __m256d,
        low_words: __m256i,
        scale: __m128i,
        two16: __m256,
        low_words16: __m256i,
        one: __m256i,
    }

    impl StepConstants256 {
        #[inline(always)]
        fn new(scale: u32) -> StepConstants256 {
            // SAFETY: called by the kernels, which run with AVX2; these only set
            // registers.
            unsafe {
                StepConstants256 {
                    to_bound: _mm_cvtsi32_si128(32 - scale as i32),
                    total: _mm256_set1_epi32(1 << scale),
                    nudge: _mm256_set1_pd(1.0 / 16384.0),
                    flip: _mm256_set1_epi32(i32::MIN),
                    two31: _mm256_set1_pd(2147483648.0),
                    // Bytes 0, 1, 4, 5, 8, 9, 12, 13 of each 128-bit half: the low words.
                    low_words: _mm256_setr_epi8(
                        0, 1, 4, 5, 8, 9, 12, 13, -1, -1, -1, -1, -1, -1, -1, -1, 0, 1, 4, 5, 8, 9,
                        12, 13, -1, -1, -1, -1, -1, -1, -1, -1,
                    ),
                    scale: _mm_cvtsi32_si128(scale as i32),
                    two16: _mm256_set1_ps(65536.0),
                    low_words16: _mm256_set1_epi32(0xFFFF),
                    one: _mm256_set1_epi32(1),
                }
            }
        }
    }

    /// [`step512`] on 8 states with AVX2: the renormalization words compacted to the top
    /// of a vector by a byte shuffle ([`COMPACT_TOP`]) and stored at `*at - 8` (below
    /// `*at`, so what lands under the kept words is overwritten by later steps); within
    /// eight words of the buffer's start, word by word. `x` below `2^32` becomes a double
    /// as `(x xor 2^31) - 2^31 + 2^31` (AVX2 converts signed integers only).
    ///
    /// # Safety
    /// The processor has AVX2, POPCNT and FMA; `rcp` holds 256 doubles and every lane of
    /// `sym` is below 256; `wp` may be written at `*at - popcnt(m)..*at` (and at
    /// `*at - 8..*at` when `*at >= 8`), as in [`step512`].
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn step256<const DIV: bool>(
        xv: __m256i,
        sym: __m256i,
        f: __m256i,
        c: __m256i,
        rcp: *const f64,
        k: &StepConstants256,
        wp: *mut u16,
        at: &mut usize,
    ) -> __m256i {
        // SAFETY: the caller's contract above.
        unsafe {
            let bound = _mm256_sll_epi32(f, k.to_bound);
            let ge = _mm256_cmpeq_epi32(_mm256_max_epu32(xv, bound), xv);
            let bits = _mm256_movemask_ps(_mm256_castsi256_ps(ge)) as usize;
            let count = bits.count_ones() as usize;
            let low = _mm256_shuffle_epi8(xv, k.low_words);
            let eight = _mm256_castsi256_si128(_mm256_permute4x64_epi64::<0b1000>(low));
            let order = _mm_loadu_si128(COMPACT_TOP[bits].as_ptr().cast());
            let kept = _mm_shuffle_epi8(eight, order);
            if *at >= 8 {
                _mm_storeu_si128(wp.add(*at - 8).cast(), kept);
            } else {
                let mut v = [0u16; 8];
                _mm_storeu_si128(v.as_mut_ptr().cast(), kept);
                for (j, &w) in v.iter().enumerate().skip(8 - count) {
                    *wp.add(*at + j - 8) = w;
                }
            }
            *at -= count;
            let y = _mm256_blendv_epi8(xv, _mm256_srli_epi32::<16>(xv), ge);
            if DIV {
                // `q0 = trunc(y / f)` in single precision: `y` rounded once (its high and
                // low halves joined by an FMA) and the quotient once, so `q0` is within
                // `y / f * 2^-23 < 2^(32 - s - 23) <= 1` of `y / f` for `s >= 9`; the
                // remainder `y - q0 f` (small, so exact as a signed word) then moves `q0`
                // by one where it lies outside `0..f`.
                let yf = _mm256_fmadd_ps(
                    _mm256_cvtepi32_ps(_mm256_srli_epi32::<16>(y)),
                    k.two16,
                    _mm256_cvtepi32_ps(_mm256_and_si256(y, k.low_words16)),
                );
                let q0 = _mm256_cvttps_epi32(_mm256_div_ps(yf, _mm256_cvtepi32_ps(f)));
                let r = _mm256_sub_epi32(y, _mm256_mullo_epi32(q0, f));
                let over = _mm256_cmpgt_epi32(r, _mm256_sub_epi32(f, k.one));
                let under = _mm256_cmpgt_epi32(_mm256_setzero_si256(), r);
                let q = _mm256_add_epi32(_mm256_sub_epi32(q0, over), under);
                let r = _mm256_add_epi32(
                    _mm256_sub_epi32(r, _mm256_and_si256(over, f)),
                    _mm256_and_si256(under, f),
                );
                return _mm256_add_epi32(_mm256_add_epi32(_mm256_sll_epi32(q, k.scale), r), c);
            }
            let r_lo = _mm256_i32gather_pd::<8>(rcp, _mm256_castsi256_si128(sym));
            let r_hi = _mm256_i32gather_pd::<8>(rcp, _mm256_extracti128_si256::<1>(sym));
            let yf = _mm256_xor_si256(y, k.flip);
            let y_lo = _mm256_add_pd(_mm256_cvtepi32_pd(_mm256_castsi256_si128(yf)), k.two31);
            let y_hi = _mm256_add_pd(
                _mm256_cvtepi32_pd(_mm256_extracti128_si256::<1>(yf)),
                k.two31,
            );
            let q_lo = _mm256_cvttpd_epi32(_mm256_fmadd_pd(y_lo, r_lo, k.nudge));
            let q_hi = _mm256_cvttpd_epi32(_mm256_fmadd_pd(y_hi, r_hi, k.nudge));
            let q = _mm256_set_m128i(q_hi, q_lo);
            let spread = _mm256_sub_epi32(k.total, f);
            _mm256_add_epi32(_mm256_add_epi32(y, c), _mm256_mullo_epi32(q, spread))
        }
    }

    /// [`encode512`] with AVX2: 8 states a vector.
    ///
    /// # Safety
    /// The processor has AVX2, POPCNT and FMA; `symbols.len()` is a multiple of `x.len()`
    /// (32 or 64) and `symbols.len() <= at <= words.len()`.
    #[target_feature(enable = "avx2,popcnt,fma")]
    unsafe fn encode256<const DIV: bool>(
        symbols: &[u8],
        table: &super::EncTable,
        scale: u32,
        x: &mut [u32],
        words: &mut [u16],
        mut at: usize,
    ) -> usize {
        let lanes = x.len();
        let vectors = lanes / 8;
        let fc = table.freq_cum.as_ptr().cast::<i32>();
        let rcp = table.rcp.as_ptr();
        let low16 = _mm256_set1_epi32(0xFFFF);
        let k = StepConstants256::new(scale);
        let xp = x.as_mut_ptr().cast::<__m256i>();
        let mut xs = [_mm256_setzero_si256(); 8];
        for (v, xv) in xs.iter_mut().enumerate().take(vectors) {
            // SAFETY: `x` holds `lanes` states.
            *xv = unsafe { _mm256_loadu_si256(xp.add(v)) };
        }
        let sp = symbols.as_ptr();
        let wp = words.as_mut_ptr();
        for g in (0..symbols.len() / lanes).rev() {
            for v in (0..vectors).rev() {
                // SAFETY (loads, gathers, stores): the 8 symbols lie inside `symbols`;
                // gathers index the 256-entry tables by a byte; `step256` writes below
                // `at`, which stays at least the number of symbols not yet coded.
                let s = _mm256_cvtepu8_epi32(unsafe {
                    _mm_loadl_epi64(sp.add(g * lanes + 8 * v).cast())
                });
                let e = unsafe { _mm256_i32gather_epi32::<4>(fc, s) };
                let f = _mm256_and_si256(e, low16);
                let c = _mm256_srli_epi32::<16>(e);
                // SAFETY: as above.
                xs[v] = unsafe { step256::<DIV>(xs[v], s, f, c, rcp, &k, wp, &mut at) };
            }
        }
        for (v, xv) in xs.iter().enumerate().take(vectors) {
            // SAFETY: `x` holds `lanes` states.
            unsafe { _mm256_storeu_si256(xp.add(v), *xv) };
        }
        at
    }

    /// [`encode_fields512`] with AVX2: 8 states a vector.
    ///
    /// # Safety
    /// The processor has AVX2, POPCNT and FMA; `src` points to `n` words of `BYTES`
    /// bytes, `n` a multiple of `x.len()` (32 or 64), `n <= at <= words.len()`, and
    /// `mask + 1 == table.entries.len()`.
    #[target_feature(enable = "avx2,popcnt,fma")]
    #[allow(clippy::too_many_arguments)]
    unsafe fn encode_fields256<const BYTES: usize, const DIV: bool>(
        src: *const u8,
        n: usize,
        shift: u32,
        mask: u32,
        table: &super::FieldTable,
        scale: u32,
        x: &mut [u32],
        words: &mut [u16],
        at: usize,
        escaped: &mut Vec<u32>,
    ) -> usize {
        // SAFETY: the caller's contract.
        unsafe {
            if x.len() == 64 {
                encode_fields256v::<BYTES, DIV, 8>(
                    src, n, shift, mask, table, scale, x, words, at, escaped,
                )
            } else {
                encode_fields256v::<BYTES, DIV, 4>(
                    src, n, shift, mask, table, scale, x, words, at, escaped,
                )
            }
        }
    }

    /// [`encode_fields256`] with `V` state vectors (`x.len() == 8 V`), each a variable of
    /// its own and the loop over them written out, so that none is stored and reloaded
    /// between steps (as an array indexed in a loop they were).
    ///
    /// # Safety
    /// As [`encode_fields256`].
    #[target_feature(enable = "avx2,popcnt,fma")]
    #[allow(clippy::too_many_arguments)]
    unsafe fn encode_fields256v<const BYTES: usize, const DIV: bool, const V: usize>(
        src: *const u8,
        n: usize,
        shift: u32,
        mask: u32,
        table: &super::FieldTable,
        scale: u32,
        x: &mut [u32],
        words: &mut [u16],
        mut at: usize,
        escaped: &mut Vec<u32>,
    ) -> usize {
        let lanes = x.len();
        let tp = table.entries.as_ptr().cast::<i32>();
        let rcp = table.coding.rcp.as_ptr();
        let low12 = _mm256_set1_epi32(0xFFF);
        let escape = table.escape.map(|e| _mm256_set1_epi32(i32::from(e)));
        let field_mask = _mm256_set1_epi32(mask as i32);
        let by = _mm_cvtsi32_si128(shift as i32);
        let k = StepConstants256::new(scale);
        let xp = x.as_mut_ptr().cast::<__m256i>();
        // SAFETY: `x` holds `lanes = 8 V` states.
        let load = |v: usize| unsafe { _mm256_loadu_si256(xp.add(v.min(V - 1))) };
        let (mut x0, mut x1, mut x2, mut x3) = (load(0), load(1), load(2), load(3));
        let (mut x4, mut x5, mut x6, mut x7) = (load(4), load(5), load(6), load(7));
        let wp = words.as_mut_ptr();
        let mut one = |i: usize, xv: __m256i| {
            // SAFETY (loads, gathers, stores): the 8 words lie inside `src`'s `n`;
            // gathers index the table by a field masked below its length; `step256`
            // writes below `at`, which stays at least the number of words not yet
            // coded.
            let w = unsafe {
                match BYTES {
                    1 => _mm256_cvtepu8_epi32(_mm_loadl_epi64(src.add(i).cast())),
                    2 => _mm256_cvtepu16_epi32(_mm_loadu_si128(src.add(2 * i).cast())),
                    _ => _mm256_loadu_si256(src.add(4 * i).cast()),
                }
            };
            let field = _mm256_and_si256(_mm256_srl_epi32(w, by), field_mask);
            let e = unsafe { _mm256_i32gather_epi32::<4>(tp, field) };
            let sym = _mm256_srli_epi32::<24>(e);
            let esc = escape.map_or(0, |x| {
                _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(sym, x)))
            });
            if esc != 0 {
                push_escaped256(field, esc as u32, escaped);
            }
            let f = _mm256_and_si256(e, low12);
            let c = _mm256_and_si256(_mm256_srli_epi32::<12>(e), low12);
            // SAFETY: as above.
            unsafe { step256::<DIV>(xv, sym, f, c, rcp, &k, wp, &mut at) }
        };
        for g in (0..n / lanes).rev() {
            let i = g * lanes;
            if V == 8 {
                x7 = one(i + 56, x7);
                x6 = one(i + 48, x6);
                x5 = one(i + 40, x5);
                x4 = one(i + 32, x4);
            }
            x3 = one(i + 24, x3);
            x2 = one(i + 16, x2);
            x1 = one(i + 8, x1);
            x0 = one(i, x0);
        }
        for (v, xv) in [x0, x1, x2, x3, x4, x5, x6, x7]
            .into_iter()
            .enumerate()
            .take(V)
        {
            // SAFETY: `x` holds `lanes` states.
            unsafe { _mm256_storeu_si256(xp.add(v), xv) };
        }
        at
    }

    /// [`push_escaped`] of the 8 lanes of `field` (out of the encoder's loop: escapes are
    /// rare).
    #[inline(never)]
    #[target_feature(enable = "avx2")]
    fn push_escaped256(field: __m256i, esc: u32, escaped: &mut Vec<u32>) {
        let mut lanes_of = [0u32; 8];
        // SAFETY: 8 lanes stored into 8 words.
        unsafe { _mm256_storeu_si256(lanes_of.as_mut_ptr().cast(), field) };
        push_escaped(&lanes_of, esc, escaped);
    }

    fn simd_allowed() -> bool {
        crate::simd::allowed()
    }

    pub(super) fn map_u8(symbols: &[u8], table: &[u8; 256], out: &mut [u8]) -> bool {
        if !(simd_allowed()
            && crate::simd::avx512_allowed()
            && is_x86_feature_detected!("avx512f")
            && is_x86_feature_detected!("avx512bw")
            && is_x86_feature_detected!("avx512vbmi"))
        {
            return false;
        }
        assert_eq!(symbols.len(), out.len());
        // SAFETY: the features were detected; every load and store is of whole vectors
        // inside `symbols` and `out` (the tail is done by scalar code), and the table
        // loads read its 256 bytes.
        unsafe { map_u8_vbmi(symbols, table, out) };
        true
    }

    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
    unsafe fn map_u8_vbmi(symbols: &[u8], table: &[u8; 256], out: &mut [u8]) {
        let t = table.as_ptr() as *const __m512i;
        let (t0, t1, t2, t3) = (
            _mm512_loadu_si512(t),
            _mm512_loadu_si512(t.add(1)),
            _mm512_loadu_si512(t.add(2)),
            _mm512_loadu_si512(t.add(3)),
        );
        let whole = symbols.len() / 64 * 64;
        for i in (0..whole).step_by(64) {
            let s = _mm512_loadu_si512(symbols.as_ptr().add(i) as *const __m512i);
            // Entries 0..128 and 128..256, picked by the symbol's top bit.
            let lo = _mm512_permutex2var_epi8(t0, s, t1);
            let hi = _mm512_permutex2var_epi8(t2, s, t3);
            let top = _mm512_movepi8_mask(s);
            let v = _mm512_mask_blend_epi8(top, lo, hi);
            _mm512_storeu_si512(out.as_mut_ptr().add(i) as *mut __m512i, v);
        }
        for i in whole..symbols.len() {
            out[i] = table[usize::from(symbols[i])];
        }
    }

    pub(super) fn map_u16(symbols: &[u8], table: &[u16; 256], out: &mut [u16]) -> bool {
        if !(simd_allowed()
            && crate::simd::avx512_allowed()
            && is_x86_feature_detected!("avx512f")
            && is_x86_feature_detected!("avx512bw"))
        {
            return false;
        }
        assert_eq!(symbols.len(), out.len());
        // SAFETY: as in `map_u8`; the table loads read its 512 bytes.
        unsafe { map_u16_bw(symbols, table, out) };
        true
    }

    /// The 16-bit table entries of the 32 symbols at `at`: four 64-entry quarters of
    /// the table (`tv`), picked by each symbol's bits 6 and 7.
    ///
    /// # Safety
    /// AVX-512 F and BW; `at` points at 32 readable bytes.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw")]
    unsafe fn lookup_u16(tv: &[__m512i; 8], at: *const u8) -> __m512i {
        let s = _mm512_cvtepu8_epi16(_mm256_loadu_si256(at as *const __m256i));
        let q0 = _mm512_permutex2var_epi16(tv[0], s, tv[1]);
        let q1 = _mm512_permutex2var_epi16(tv[2], s, tv[3]);
        let q2 = _mm512_permutex2var_epi16(tv[4], s, tv[5]);
        let q3 = _mm512_permutex2var_epi16(tv[6], s, tv[7]);
        let m6 = _mm512_test_epi16_mask(s, _mm512_set1_epi16(64));
        let m7 = _mm512_test_epi16_mask(s, _mm512_set1_epi16(128));
        let lo = _mm512_mask_blend_epi16(m6, q0, q1);
        let hi = _mm512_mask_blend_epi16(m6, q2, q3);
        _mm512_mask_blend_epi16(m7, lo, hi)
    }

    #[target_feature(enable = "avx512f,avx512bw")]
    unsafe fn map_u16_bw(symbols: &[u8], table: &[u16; 256], out: &mut [u16]) {
        let t = table.as_ptr() as *const __m512i;
        let tv: [__m512i; 8] = std::array::from_fn(|k| _mm512_loadu_si512(t.add(k)));
        let whole = symbols.len() / 32 * 32;
        for i in (0..whole).step_by(32) {
            let v = lookup_u16(&tv, symbols.as_ptr().add(i));
            _mm512_storeu_si512(out.as_mut_ptr().add(i) as *mut __m512i, v);
        }
        for i in whole..symbols.len() {
            out[i] = table[usize::from(symbols[i])];
        }
    }

    pub(super) fn byte_masks(symbols: &[u8], byte: u8, masks: &mut Vec<u64>) -> bool {
        if !(simd_allowed()
            && crate::simd::avx512_allowed()
            && is_x86_feature_detected!("avx512bw"))
        {
            if !(simd_allowed() && is_x86_feature_detected!("avx2")) {
                return false;
            }
            masks.clear();
            masks.resize(symbols.len().div_ceil(64), 0);
            // SAFETY: AVX2 was detected; the loads read whole steps inside `symbols`.
            unsafe { byte_masks_avx2(symbols, byte, masks) };
            return true;
        }
        masks.clear();
        masks.resize(symbols.len().div_ceil(64), 0);
        // SAFETY: AVX-512 BW was detected; the loads read whole steps inside `symbols`
        // and the last one through a padded copy.
        unsafe { byte_masks_bw(symbols, byte, masks) };
        true
    }

    #[target_feature(enable = "avx512f,avx512bw")]
    unsafe fn byte_masks_bw(symbols: &[u8], byte: u8, masks: &mut [u64]) {
        let b = _mm512_set1_epi8(byte as i8);
        let whole = symbols.len() / 64;
        for (k, m) in masks[..whole].iter_mut().enumerate() {
            let v = _mm512_loadu_si512(symbols.as_ptr().add(64 * k) as *const __m512i);
            *m = _mm512_cmpeq_epi8_mask(v, b);
        }
        let rest = &symbols[64 * whole..];
        if !rest.is_empty() {
            let mut a = [0u8; 64];
            a[..rest.len()].copy_from_slice(rest);
            let v = _mm512_loadu_si512(a.as_ptr() as *const __m512i);
            masks[whole] = _mm512_cmpeq_epi8_mask(v, b) & ((1u64 << rest.len()) - 1);
        }
    }

    pub(super) fn map_u16_u32(
        symbols: &[u8],
        table: &[u16; 256],
        out: &mut [u32],
        shift: u32,
    ) -> bool {
        if !(simd_allowed()
            && crate::simd::avx512_allowed()
            && is_x86_feature_detected!("avx512f")
            && is_x86_feature_detected!("avx512bw"))
        {
            return false;
        }
        assert_eq!(symbols.len(), out.len());
        assert!(shift < 32, "a shift inside the word");
        // SAFETY: as in `map_u16`; each step stores 32 words inside `out`.
        unsafe { map_u16_u32_bw(symbols, table, out, shift) };
        true
    }

    #[target_feature(enable = "avx512f,avx512bw")]
    unsafe fn map_u16_u32_bw(symbols: &[u8], table: &[u16; 256], out: &mut [u32], shift: u32) {
        let t = table.as_ptr() as *const __m512i;
        let tv: [__m512i; 8] = std::array::from_fn(|k| _mm512_loadu_si512(t.add(k)));
        let up = _mm_cvtsi32_si128(shift as i32);
        let whole = symbols.len() / 32 * 32;
        for i in (0..whole).step_by(32) {
            let v = lookup_u16(&tv, symbols.as_ptr().add(i));
            let lo = _mm512_sll_epi32(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(v)), up);
            let hi = _mm512_sll_epi32(_mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64::<1>(v)), up);
            let o = out.as_mut_ptr().add(i) as *mut __m512i;
            _mm512_storeu_si512(o, lo);
            _mm512_storeu_si512(o.add(1), hi);
        }
        for i in whole..symbols.len() {
            out[i] = u32::from(table[usize::from(symbols[i])]) << shift;
        }
    }

    /// [`byte_masks`] with AVX2: two 32-byte compares per mask.
    #[target_feature(enable = "avx2")]
    unsafe fn byte_masks_avx2(symbols: &[u8], byte: u8, masks: &mut [u64]) {
        let b = _mm256_set1_epi8(byte as i8);
        let whole = symbols.len() / 64;
        for (k, m) in masks[..whole].iter_mut().enumerate() {
            let p = symbols.as_ptr().add(64 * k);
            let lo = _mm256_cmpeq_epi8(_mm256_loadu_si256(p.cast()), b);
            let hi = _mm256_cmpeq_epi8(_mm256_loadu_si256(p.add(32).cast()), b);
            *m = u64::from(_mm256_movemask_epi8(lo) as u32)
                | u64::from(_mm256_movemask_epi8(hi) as u32) << 32;
        }
        for (i, &s) in symbols.iter().enumerate().skip(64 * whole) {
            if s == byte {
                masks[i / 64] |= 1 << (i % 64);
            }
        }
    }

    pub(super) fn avx2() -> Option<Kernel> {
        (is_x86_feature_detected!("avx2") && is_x86_feature_detected!("popcnt"))
            .then_some(run256::<false> as Kernel)
    }

    pub(super) fn avx2_lookup() -> Option<Kernel> {
        (is_x86_feature_detected!("avx2") && is_x86_feature_detected!("popcnt"))
            .then_some(run256::<true> as Kernel)
    }

    fn checks(table: &[u32], scale: u32, lanes: usize, words: &[u8], pos: usize, out: &[u8]) {
        assert!(
            scale <= 12 && table.len() == 1 << scale,
            "table of 2^scale entries"
        );
        assert!(lanes == 32 || lanes == 64, "32 or 64 states");
        assert_eq!(out.len() % lanes, 0, "whole groups");
        assert!(
            words.len() / 2 >= pos + out.len(),
            "room for every group's words"
        );
    }

    fn run512(
        table: &[u32],
        scale: u32,
        x: &mut [u32],
        words: &[u8],
        pos: usize,
        out: &mut [u8],
    ) -> usize {
        checks(table, scale, x.len(), words, pos, out);
        // SAFETY: AVX-512 F and POPCNT were detected ([`avx512`]); `checks` holds: every
        // gathered index is below `2^scale` = the table's length (masked), every group
        // reads at most one word a state from a position that `pos + lanes * groups <=
        // words.len() / 2` bounds, and each 16-word load of a vector's states starts at
        // most `lanes - 16` words past the group's start.
        unsafe {
            match x.len() {
                32 => decode512::<2>(table, scale, x, words, pos, out),
                _ => decode512::<4>(table, scale, x, words, pos, out),
            }
        }
    }

    /// `V` vectors of 16 states.
    #[target_feature(enable = "avx512f,popcnt")]
    unsafe fn decode512<const V: usize>(
        table: &[u32],
        scale: u32,
        x: &mut [u32],
        words: &[u8],
        pos: usize,
        out: &mut [u8],
    ) -> usize {
        let mut xv: [__m512i; V] =
            std::array::from_fn(|k| _mm512_loadu_si512(x.as_ptr().add(16 * k) as *const __m512i));
        let mask = _mm512_set1_epi32(((1u32 << scale) - 1) as i32);
        let shift = _mm_cvtsi32_si128(scale as i32);
        let m12 = _mm512_set1_epi32(0xfff);
        let lv = _mm512_set1_epi32(1 << 16);
        let base = table.as_ptr() as *const i32;
        let mut p = words.as_ptr().add(2 * pos) as *const u16;
        for chunk in out.chunks_exact_mut(16 * V) {
            for (k, xk) in xv.iter_mut().enumerate() {
                let s = *xk;
                let e = _mm512_i32gather_epi32::<4>(_mm512_and_si512(s, mask), base);
                _mm_storeu_si128(
                    chunk.as_mut_ptr().add(16 * k) as *mut __m128i,
                    _mm512_cvtepi32_epi8(e),
                );
                let f = _mm512_and_si512(_mm512_srli_epi32::<8>(e), m12);
                let bias = _mm512_srli_epi32::<20>(e);
                let y = _mm512_add_epi32(_mm512_mullo_epi32(f, _mm512_srl_epi32(s, shift)), bias);
                let need = _mm512_cmplt_epu32_mask(y, lv);
                let loaded = _mm512_cvtepu16_epi32(_mm256_loadu_si256(p as *const __m256i));
                let w = _mm512_maskz_expand_epi32(need, loaded);
                *xk = _mm512_mask_or_epi32(y, need, _mm512_slli_epi32::<16>(y), w);
                p = p.add(need.count_ones() as usize);
            }
        }
        for (k, v) in xv.iter().enumerate() {
            _mm512_storeu_si512(x.as_mut_ptr().add(16 * k) as *mut __m512i, *v);
        }
        (p as usize - words.as_ptr() as usize) / 2
    }

    /// For each mask of 8 lanes, the index of the loaded word each lane takes (its rank
    /// among the lanes that refill).
    static EXPAND: [[u32; 8]; 256] = {
        let mut t = [[0u32; 8]; 256];
        let mut m = 0;
        while m < 256 {
            let mut c = 0;
            let mut l = 0;
            while l < 8 {
                if m >> l & 1 == 1 {
                    t[m][l] = c;
                    c += 1;
                }
                l += 1;
            }
            m += 1;
        }
        t
    };

    /// `LOOKUP`: the table entries by scalar loads, not a gather.
    fn run256<const LOOKUP: bool>(
        table: &[u32],
        scale: u32,
        x: &mut [u32],
        words: &[u8],
        pos: usize,
        out: &mut [u8],
    ) -> usize {
        checks(table, scale, x.len(), words, pos, out);
        // SAFETY: AVX2 and POPCNT were detected ([`avx2`], [`avx2_lookup`]); the bounds
        // hold as in [`run512`] (a scalar load's slot is masked below `2^scale` as a
        // gather's is), each 8-word load of a vector's states starting at most
        // `lanes - 8` words past the group's start.
        unsafe {
            match x.len() {
                32 => decode256::<4, LOOKUP>(table, scale, x, words, pos, out),
                _ => decode256::<8, LOOKUP>(table, scale, x, words, pos, out),
            }
        }
    }

    /// `V` vectors of 8 states (`V` a multiple of 4: each 4 vectors' 32 symbols are
    /// packed to bytes together). `LOOKUP`: each vector's 8 table entries by scalar
    /// loads inserted into the vector (`vmovd`/`vpinsrd` from memory; the slots taken
    /// out as four 64-bit words), else one gather.
    #[target_feature(enable = "avx2,popcnt")]
    unsafe fn decode256<const V: usize, const LOOKUP: bool>(
        table: &[u32],
        scale: u32,
        x: &mut [u32],
        words: &[u8],
        pos: usize,
        out: &mut [u8],
    ) -> usize {
        let mut xv: [__m256i; V] =
            std::array::from_fn(|k| _mm256_loadu_si256(x.as_ptr().add(8 * k) as *const __m256i));
        let mask = _mm256_set1_epi32(((1u32 << scale) - 1) as i32);
        let shift = _mm_cvtsi32_si128(scale as i32);
        let m12 = _mm256_set1_epi32(0xfff);
        let m8 = _mm256_set1_epi32(0xff);
        // `y < 2^16` as `y >> 16 == 0`: a step's `y = f (x >> s) + b` reaches `2^32 - 1`
        // (a frequency above half the table and a state near `2^32`), so a signed
        // compare would take such a state for one that needs a word.
        let zero = _mm256_setzero_si256();
        // After packing 4 vectors' symbols (32 to 16 bits, then to 8), the 4-byte
        // groups are in the order (vector, half) = (0,0) (1,0) (2,0) (3,0) (0,1) ...
        let order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
        let base = table.as_ptr() as *const i32;
        let mut p = words.as_ptr().add(2 * pos) as *const u16;
        for chunk in out.chunks_exact_mut(8 * V) {
            let mut e = [zero; V];
            for (k, xk) in xv.iter_mut().enumerate() {
                let s = *xk;
                let slots = _mm256_and_si256(s, mask);
                let ek = if LOOKUP {
                    let at = |q: i64, hi: bool| {
                        let q = q as u64;
                        *base.add(if hi { q >> 32 } else { q & 0xffff_ffff } as usize)
                    };
                    let (q0, q1) = (
                        _mm256_extract_epi64::<0>(slots),
                        _mm256_extract_epi64::<1>(slots),
                    );
                    let (q2, q3) = (
                        _mm256_extract_epi64::<2>(slots),
                        _mm256_extract_epi64::<3>(slots),
                    );
                    _mm256_setr_epi32(
                        at(q0, false),
                        at(q0, true),
                        at(q1, false),
                        at(q1, true),
                        at(q2, false),
                        at(q2, true),
                        at(q3, false),
                        at(q3, true),
                    )
                } else {
                    _mm256_i32gather_epi32::<4>(base, slots)
                };
                e[k] = ek;
                let f = _mm256_and_si256(_mm256_srli_epi32::<8>(ek), m12);
                let bias = _mm256_srli_epi32::<20>(ek);
                let y = _mm256_add_epi32(_mm256_mullo_epi32(f, _mm256_srl_epi32(s, shift)), bias);
                let need = _mm256_cmpeq_epi32(_mm256_srli_epi32::<16>(y), zero);
                let bits = _mm256_movemask_ps(_mm256_castsi256_ps(need)) as usize;
                let loaded = _mm256_cvtepu16_epi32(_mm_loadu_si128(p as *const __m128i));
                let idx = _mm256_loadu_si256(EXPAND[bits].as_ptr() as *const __m256i);
                let w = _mm256_permutevar8x32_epi32(loaded, idx);
                let refilled = _mm256_or_si256(_mm256_slli_epi32::<16>(y), w);
                *xk = _mm256_blendv_epi8(y, refilled, need);
                p = p.add(bits.count_ones() as usize);
            }
            for (g, e) in e.chunks_exact(4).enumerate() {
                let lo =
                    _mm256_packus_epi32(_mm256_and_si256(e[0], m8), _mm256_and_si256(e[1], m8));
                let hi =
                    _mm256_packus_epi32(_mm256_and_si256(e[2], m8), _mm256_and_si256(e[3], m8));
                let b = _mm256_permutevar8x32_epi32(_mm256_packus_epi16(lo, hi), order);
                _mm256_storeu_si256(chunk.as_mut_ptr().add(32 * g) as *mut __m256i, b);
            }
        }
        for (k, v) in xv.iter().enumerate() {
            _mm256_storeu_si256(x.as_mut_ptr().add(8 * k) as *mut __m256i, *v);
        }
        (p as usize - words.as_ptr() as usize) / 2
    }
}
