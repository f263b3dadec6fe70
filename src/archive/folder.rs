//! Checkpoint folders (DESIGN §8): a sharded checkpoint (`*.safetensors` shards plus
//! `model.safetensors.index.json`, configs, tokenizer files) as one job.
//!
//! # Layout
//!
//! A compressed folder is a folder (by default `DIR.brv/`) holding:
//!
//! - one `.brv` archive per `.safetensors` file of the source, at the same relative path
//!   with `.safetensors` replaced by `.brv` (`model-00001-of-00002.brv`). Each is an
//!   ordinary archive ([`super::format`]) with its own index and checksums, so a reader
//!   opens only the shard that holds a tensor, and shards can be decoded independently
//!   (in parallel, or on different machines);
//! - every other file of the source (index JSON, `config.json`, tokenizer files, ...)
//!   copied verbatim at its relative path;
//! - the manifest [`MANIFEST_NAME`] (`brevis-folder.json`), UTF-8 JSON:
//!   `{"format": "brevis-folder", "version": 1, "files": [{"path", "kind", "archive",
//!   "bytes", "xxh3"}], "files_xxh3"}` with one entry per source file in path order;
//!   `path` is the file's path relative to the folder with `/` separators, `kind` is
//!   `"archive"` or `"copy"`, `archive` the relative path of its `.brv` (for archives),
//!   `bytes` its length and `xxh3` the xxh3-64 of its bytes as 16 lowercase hex digits;
//!   `files_xxh3` is the xxh3-64 of the `files` array as compact JSON (fields in the order
//!   above, `archive` left out for copies), so that a changed entry is refused when the
//!   folder is opened (manifests without it, from earlier versions, are read unchecked).
//!
//! The output folder is built in a temporary folder beside it and renamed into place only
//! when complete, so a failed job leaves nothing behind. An output that is the input
//! folder, lies inside it or holds it is refused; `--force` replaces an existing folder
//! only if it is a previous archive folder (compress) or holds only files the archive
//! restores (decompress), never other files.
//!
//! A symbolic link to a file inside the source folder is followed and kept as the file it
//! points to (a Hugging Face cache snapshot is made of such links); a link to a folder, a
//! broken link, or a device, FIFO or socket is refused with its path.
//!
//! Before anything is written, the index (if any) is checked against the shards: a shard
//! it names that is missing, or a tensor it maps to a shard that does not hold it, is
//! refused with a message naming them ([`Error::Invalid`](crate::Error::Invalid) with the index as path, kind
//! `invalid_source`).

mod compress;
mod index;
mod manifest;
mod open;
mod walk;

pub use compress::{compress_folder, FolderSummary};
pub use index::{check_index, shard_paths, ShardsFor, INDEX_NAME};
pub use manifest::{
    compressed_folder, file_entry, manifest_bytes, manifest_is_ours, not_an_archive,
    shard_mismatch, FileKind, FolderFile, MANIFEST_NAME,
};
pub use open::{FileCheck, FileComparison, Folder, FolderRestore};
pub use walk::{check_output_outside, default_folder_archive_name, source_folder, with_name};
