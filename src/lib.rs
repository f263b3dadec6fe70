//! Brevis: lossless compression of model checkpoints as program synthesis.
//!
//! Each tensor of a `.safetensors` checkpoint is read as a stream of words (DESIGN §2)
//! and becomes a short typed program in a small language of reversible operators
//! ([`dsl`]); a bounded A* search ([`synth`]) finds the program with the smallest exact
//! serialized size; decoding runs the program. Literal leaves are stored by the smallest
//! of four codecs ([`codec`]). The archive ([`archive`]) restores the original file byte
//! for byte.

pub mod archive;
pub mod codec;
pub mod dsl;
pub mod error;
pub mod files;
pub mod hash;
pub mod job;
pub mod shown;
pub mod simd;
pub mod stats;
pub mod synth;
pub mod tensor;
#[cfg(feature = "tui")]
pub mod tui;

pub use archive::{compress_file, verify, Archive, CompressOptions};
pub use error::{Error, Result};
pub use tensor::{Dtype, Words};

/// Tells the C library's allocator to keep the memory this process frees for its next
/// allocations, as a compressor that allocates and frees buffers of megabytes for every
/// record wants: blocks under 32 MiB from the heap (not each from its own `mmap`) and
/// the heap not trimmed under 512 MiB free. Without it a process that decodes over and
/// over (the TUI) mapped every decoded region's buffer anew, its pages faulted in and
/// zeroed by the kernel: 50 decompressions of minilm-l6-v2-bf16-layer0 took 22% more
/// CPU time (docs/bench.md, session 22). The shells call it first thing; memory already
/// in use is unaffected, and a process that exits returns everything. Linux with glibc
/// only; elsewhere nothing.
#[cfg(any(feature = "cli", feature = "tui"))]
pub fn keep_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets the allocator's parameters; both values are in range
    // (the mmap threshold at most 32 MiB on 64-bit glibc).
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 512 << 20);
    }
}

/// Helpers the unit tests of several modules share.
#[cfg(test)]
pub(crate) mod test_util {
    /// A linear congruential generator from `seed`: its top 31 bits at each call.
    pub(crate) fn lcg(mut seed: u64) -> impl FnMut() -> u64 {
        move || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            seed >> 33
        }
    }
}
