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
