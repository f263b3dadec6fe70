//! Run-time SIMD detection, once per process, for every kernel of the crate: the fused
//! executor's merge loop ([`crate::dsl::fused`]), bit-unpacking
//! ([`crate::codec::bitpack`]) and the byte-alphabet rANS coder ([`crate::codec::rans8`]).
//!
//! Setting the environment variable `BREVIS_NO_SIMD` (to anything) turns every SIMD path
//! off: the scalar paths, which decode the same bytes, run instead. That is how tests and
//! fuzz targets hold the two to the same output, and how a user rules SIMD out.
//! `BREVIS_NO_AVX512` turns the AVX-512 paths off and leaves the AVX2 ones: how the AVX2
//! kernels are measured on a processor that has both (docs/bench.md, session 33), and a
//! way out where AVX-512 lowers the clock.

use std::sync::OnceLock;

/// What this processor offers the kernels, detected once; all `false` when
/// `BREVIS_NO_SIMD` is set or off x86-64.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Level {
    /// AVX2.
    pub avx2: bool,
    /// AVX-512 F, BW and VL.
    pub avx512: bool,
    /// AVX-512 F, BW and VBMI (byte permutes).
    pub avx512_vbmi: bool,
}

/// Whether SIMD paths may run at all: `BREVIS_NO_SIMD` is not set (read once).
pub fn allowed() -> bool {
    static ALLOWED: OnceLock<bool> = OnceLock::new();
    *ALLOWED.get_or_init(|| std::env::var_os("BREVIS_NO_SIMD").is_none())
}

/// Whether AVX-512 paths may run: SIMD is [`allowed`] and `BREVIS_NO_AVX512` is not set
/// (read once).
pub fn avx512_allowed() -> bool {
    static ALLOWED: OnceLock<bool> = OnceLock::new();
    *ALLOWED.get_or_init(|| allowed() && std::env::var_os("BREVIS_NO_AVX512").is_none())
}

/// The SIMD [`Level`] of this processor (detected once), or none when not [`allowed`].
pub fn level() -> Level {
    static LEVEL: OnceLock<Level> = OnceLock::new();
    *LEVEL.get_or_init(|| {
        if allowed() {
            detect()
        } else {
            Level::default()
        }
    })
}

#[cfg(target_arch = "x86_64")]
fn detect() -> Level {
    let f_bw = avx512_allowed()
        && is_x86_feature_detected!("avx512f")
        && is_x86_feature_detected!("avx512bw");
    Level {
        avx2: is_x86_feature_detected!("avx2"),
        avx512: f_bw && is_x86_feature_detected!("avx512vl"),
        avx512_vbmi: f_bw && is_x86_feature_detected!("avx512vbmi"),
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn detect() -> Level {
    Level::default()
}
