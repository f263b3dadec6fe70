//! XXH3-64 with seed 0, the archive format's checksum (of the source file, of the
//! records, of each region and of the index; see `archive::format`).
//!
//! Computed by `twox-hash`, which picks its AVX2 or SSE2 kernel at run time: a portable
//! build still hashes with AVX2 where the CPU has it (45 MB in 1.8 ms against 2.5 to
//! 3.3 ms for `xxhash-rust`'s compile-time SSE2 kernel, on a Zen 4). The values are
//! the reference XXH3's; the tests check them against `xxhash-rust`.

use std::hash::Hasher;

/// XXH3-64 (seed 0) of `bytes`.
#[inline]
pub fn xxh3_64(bytes: &[u8]) -> u64 {
    twox_hash::XxHash3_64::oneshot(bytes)
}

/// Streaming XXH3-64 (seed 0): [`Xxh3::update`] with the bytes in order, then
/// [`Xxh3::digest`], equal to [`xxh3_64`] of their concatenation.
#[derive(Clone, Default)]
pub struct Xxh3(twox_hash::XxHash3_64);

impl Xxh3 {
    /// A hasher of no bytes yet.
    pub fn new() -> Xxh3 {
        Xxh3::default()
    }

    /// Appends `bytes`.
    #[inline]
    pub fn update(&mut self, bytes: &[u8]) {
        self.0.write(bytes);
    }

    /// Forgets every byte given: the hasher is as new.
    pub fn reset(&mut self) {
        *self = Xxh3::new();
    }

    /// The hash of every byte given so far (the hasher can go on).
    pub fn digest(&self) -> u64 {
        self.0.finish()
    }
}

impl std::fmt::Debug for Xxh3 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Xxh3")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The streaming and one-shot hashes equal the reference implementation's at the
    /// sizes where XXH3 changes path (0, 16, 128, 240 bytes, a stripe block of 1,024,
    /// a full block of 16 KiB) and across updates of every split.
    #[test]
    fn matches_reference_xxh3() {
        let data: Vec<u8> = (0..70_000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        for n in [
            0, 1, 3, 4, 8, 9, 16, 17, 128, 129, 240, 241, 1024, 1025, 16_384, 16_385, 70_000,
        ] {
            let want = xxhash_rust::xxh3::xxh3_64(&data[..n]);
            assert_eq!(xxh3_64(&data[..n]), want, "one-shot, {n} bytes");
            for split in [0, 1, n / 3, n / 2, n.saturating_sub(1)] {
                let split = split.min(n);
                let mut h = Xxh3::new();
                h.update(&data[..split]);
                h.update(&data[split..n]);
                assert_eq!(h.digest(), want, "streaming, {n} bytes split at {split}");
            }
        }
        assert_eq!(xxh3_64(b""), 0x2d06_8005_38d3_94c2);
    }
}
