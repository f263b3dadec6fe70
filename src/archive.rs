//! The `.brv` archive (DESIGN §7, §8; paper §3.4): restores a `.safetensors` file byte
//! for byte from one program per tensor.
//!
//! - [`safetensors`]: the strict source file model ([`safetensors::parse`]).
//! - [`format`](mod@format): the archive layout, documented in its module doc.
//! - [`writer`]: [`compress_file`] (and [`writer::write_archive`] to any `Write`).
//! - [`reader`]: [`Archive::open`], listing, per-tensor decoding, [`Archive::decompress_to`].
//! - [`extract`](mod@extract): a `.safetensors` file of some tensors, decoded through the index.
//! - [`verify`](mod@verify): [`verify()`] against the stored checksums, [`verify_against`] a file.
//!
//! Files are memory-mapped; tensors are compressed and decoded in parallel on a rayon
//! pool of `jobs` threads, with a bounded window of regions in flight, and written in
//! source order, so the output bytes never depend on the number of threads.
//!
//! ```no_run
//! use brevis::archive::{compress_file, no_progress, verify, Archive, CompressOptions};
//! use std::path::Path;
//!
//! # fn main() -> brevis::Result<()> {
//! let opts = CompressOptions::default();
//! compress_file(Path::new("model.safetensors"), Path::new("model.brv"), &opts, &no_progress)?;
//! let archive = Archive::open(Path::new("model.brv"))?;
//! for t in archive.tensors() {
//!     println!("{} {} -> {} bytes ({})", t.name, t.original_bytes(), t.archive_bytes(), t.root_op);
//! }
//! assert!(verify(&archive, None, &no_progress)?.is_ok());
//! # Ok(())
//! # }
//! ```

pub mod base;
pub mod extract;
pub mod folder;
pub mod format;
mod pool;
mod progress;
pub mod reader;
#[cfg(feature = "object-store")]
pub mod remote;
pub mod rewrite;
pub mod safetensors;
pub mod slice;
pub mod verify;
pub mod writer;

pub use crate::files::input::truncated_while_read;
#[cfg(unix)]
pub use crate::files::input::truncation;
#[cfg(all(unix, any(feature = "cli", feature = "tui")))]
pub use crate::files::input::{ignore_file_size_signal, install_truncation_guard};
pub use crate::shown::{escape_name, is_bidi, shown_path};
pub use extract::{extract, ExtractSummary, Part};
pub use pool::{resolve_jobs, MAX_JOBS};
pub use progress::{no_progress, ProgressEvent};
pub use reader::{
    Archive, DamagedRegion, DecompressOptions, DecompressSummary, GapEntry, GroupEntry, RegionSpan,
    TensorEntry,
};
pub use rewrite::{rewrite_with_each, rewrite_with_programs, rewritten_len};
pub use slice::TensorPart;
pub use verify::{
    verify, verify_against, verify_until, CheckStatus, CompareReport, RegionCheck, VerifyReport,
};
pub use writer::{
    compress_file, compress_to, write_target, CompressOptions, CompressSummary, RegionStat, Source,
    Target,
};
