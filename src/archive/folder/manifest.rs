//! The manifest of a compressed folder (`brevis-folder.json`): its entries, written and
//! read, and what tells a compressed folder (and what is plainly not an archive).

use super::walk::{archive_name, file_checksum, hex, is_shard, other, safe_relative};
use crate::archive::reader::Archive;
use crate::archive::safetensors::looks_like_safetensors;
use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// File name of the manifest inside a compressed folder.
pub const MANIFEST_NAME: &str = "brevis-folder.json";

pub(super) const FORMAT: &str = "brevis-folder";

/// Largest manifest [`manifest_is_ours`] reads to tell.
pub(super) const MAX_MANIFEST_BYTES: u64 = 256 << 20;

pub(super) const VERSION: u32 = 1;

/// How one file of the source folder is kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FileKind {
    /// A `.safetensors` file compressed into a `.brv` archive.
    Archive,
    /// Any other file, copied verbatim.
    Copy,
}

/// One file of the source folder, as the manifest records it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FolderFile {
    /// Path relative to the folder, `/`-separated.
    pub path: String,
    /// How it is kept.
    pub kind: FileKind,
    /// Relative path of its archive (for [`FileKind::Archive`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub archive: Option<String>,
    /// Length of the original file in bytes.
    pub bytes: u64,
    /// xxh3-64 of the original file, 16 lowercase hex digits.
    pub xxh3: String,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct Manifest {
    pub(super) format: String,
    pub(super) version: u32,
    pub(super) files: Vec<FolderFile>,
    /// xxh3-64 of `files` as compact JSON ([`files_checksum`]), 16 lowercase hex digits:
    /// a changed entry (a renamed path, a wrong length) is caught when the folder is
    /// opened. Manifests written before it had none and are read without the check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) files_xxh3: Option<String>,
}

/// The checksum a manifest stores for its entries: xxh3-64 of their compact JSON, as
/// 16 lowercase hex digits.
pub(super) fn files_checksum(files: &[FolderFile]) -> String {
    let json = serde_json::to_vec(files).expect("manifest entries serialize");
    hex(crate::hash::xxh3_64(&json))
}

/// Whether `path` is a compressed folder (a folder holding [`MANIFEST_NAME`], or the
/// manifest itself). Returns the compressed folder.
pub fn compressed_folder(path: &Path) -> Option<PathBuf> {
    if path.is_dir() && path.join(MANIFEST_NAME).is_file() {
        return Some(path.to_path_buf());
    }
    if path.file_name().is_some_and(|n| n == MANIFEST_NAME) && path.is_file() {
        return Some(match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        });
    }
    None
}

/// Whether the compressed folder `dir` ([`compressed_folder`]) holds a manifest that
/// Brevis wrote: a JSON object whose `format` is `brevis-folder`. A stray file of that
/// name in a checkpoint folder (`{}`, say) is not one. An unreadable or very large file
/// counts as one, so that it is refused as a compressed folder, as before.
pub fn manifest_is_ours(dir: &Path) -> bool {
    let path = dir.join(MANIFEST_NAME);
    match fs::metadata(&path) {
        Ok(m) if m.len() <= MAX_MANIFEST_BYTES => {}
        _ => return true,
    }
    let Ok(bytes) = fs::read(&path) else {
        return true;
    };
    serde_json::from_slice::<serde_json::Value>(&bytes)
        .is_ok_and(|v| v.get("format").and_then(|f| f.as_str()) == Some(FORMAT))
}

/// Says what `path` is when it is plainly not an archive, for the commands that take one
/// (`decompress`, `verify`, `ls`, `show`): a folder without [`MANIFEST_NAME`] (or whose
/// [`MANIFEST_NAME`] is not a file: [`Error::Invalid`], a damaged archive), a shard
/// index (`*.index.json`), or a `.safetensors` file; each is what `brevis compress`
/// takes. Returns `None` for anything else (an archive, a compressed folder, a damaged or
/// unknown file, a path that cannot be read), which opening it then reports. Reads at most
/// the first 4 KiB of a file.
pub fn not_an_archive(path: &Path) -> Option<Error> {
    let wrong = |found: String| {
        Some(Error::WrongKind {
            path: path.to_path_buf(),
            found,
            expected: "a Brevis archive",
            command: "brevis compress",
        })
    };
    if compressed_folder(path).is_some() {
        return None;
    }
    if path.is_dir() {
        // A manifest that is there but not a file (a folder of that name) is a damaged
        // archive folder, not a folder without one.
        let manifest = path.join(MANIFEST_NAME);
        if fs::symlink_metadata(&manifest).is_ok() {
            return Some(other(
                &manifest,
                "damaged folder manifest",
                "is not a regular file".to_string(),
            ));
        }
        return wrong(format!("a folder without {MANIFEST_NAME}"));
    }
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    if name.ends_with(".index.json") && path.is_file() {
        return wrong("a safetensors shard index".to_string());
    }
    // Only a regular file is read here (a FIFO would block the open); anything else is
    // refused by the archive's own open, naming what it is.
    if !fs::metadata(path).is_ok_and(|m| m.is_file()) {
        return None;
    }
    let file = fs::File::open(path).ok()?;
    let len = file.metadata().ok()?.len();
    let mut prefix = Vec::with_capacity(4096);
    io::Read::read_to_end(&mut io::Read::take(file, 4096), &mut prefix).ok()?;
    if looks_like_safetensors(&prefix, len) {
        return wrong("a .safetensors file".to_string());
    }
    None
}

/// The relative paths of what a compressed folder of `files` holds: each shard's
/// archive, each copied file, and the manifest.
pub(super) fn stored_names(files: &[FolderFile]) -> BTreeSet<&str> {
    files
        .iter()
        .map(|f| f.archive.as_deref().unwrap_or(&f.path))
        .chain([MANIFEST_NAME])
        .collect()
}

/// The manifest of a compressed folder whose entries are `files` (in path order), as
/// [`compress_folder`](crate::archive::folder::compress_folder) writes it (`output` only labels errors): what a job that
/// compresses the shards elsewhere (one task per shard, [`file_entry`] for each file)
/// writes, create-only, as its commit.
///
/// # Errors
/// [`Error::Internal`] if the entries cannot be serialized.
pub fn manifest_bytes(files: Vec<FolderFile>, output: &Path) -> Result<Vec<u8>> {
    let manifest = Manifest {
        format: FORMAT.to_string(),
        version: VERSION,
        files_xxh3: Some(files_checksum(&files)),
        files,
    };
    let mut text = serde_json::to_vec_pretty(&manifest).map_err(|e| Error::Internal {
        path: output.to_path_buf(),
        what: format!("cannot write the manifest: {e}"),
    })?;
    text.push(b'\n');
    Ok(text)
}

/// The manifest entry of the file `src`, at path `rel` (`/`-separated) of its source
/// folder: an archive entry (its `.brv` path) for a `.safetensors` file, else a copy;
/// its length and xxh3-64 read from `src`.
///
/// # Errors
/// [`Error::Io`] if `src` cannot be read; [`Error::Invalid`] if `rel` is not a safe
/// relative path.
pub fn file_entry(src: &Path, rel: &str) -> Result<FolderFile> {
    if !safe_relative(rel) {
        return Err(other(
            src,
            "cannot archive",
            format!("{rel:?} is not a relative path inside the folder"),
        ));
    }
    let (sum, len) = file_checksum(src)?;
    let shard = is_shard(rel);
    Ok(FolderFile {
        path: rel.to_string(),
        kind: if shard {
            FileKind::Archive
        } else {
            FileKind::Copy
        },
        archive: shard.then(|| archive_name(rel)),
        bytes: len,
        xxh3: hex(sum),
    })
}

/// What is wrong when shard archive `a` does not restore the file its manifest entry `f`
/// names (swapped or replaced shards): "restores another file than ...", with both
/// lengths when they differ. `None` when its length and whole-file checksum agree with
/// the manifest's. Reads only what [`Archive::open`] read.
pub fn shard_mismatch(f: &FolderFile, a: &Archive) -> Option<String> {
    let (len, sum) = (a.original_len(), hex(a.file_checksum()));
    match (len == f.bytes, sum == f.xxh3) {
        (true, true) => None,
        (false, true) => Some(format!(
            "the manifest says {} bytes for {:?}, whose archive restores {len} bytes with the \
             manifest's checksum {sum}: the manifest's length is damaged",
            f.bytes, f.path
        )),
        (true, false) => Some(format!(
            "restores another file than {:?} (whole-file checksum {sum} where the manifest \
             says {})",
            f.path, f.xxh3
        )),
        (false, false) => Some(format!(
            "restores another file than {:?} ({len} bytes with whole-file checksum {sum} where \
             the manifest says {} bytes with {})",
            f.path, f.bytes, f.xxh3
        )),
    }
}

/// A manifest whose length for `f` disagrees with a file (`len` bytes) that has the
/// manifest's checksum: the length field is what is damaged.
pub(super) fn manifest_length(manifest: &Path, f: &FolderFile, len: u64) -> Error {
    other(
        manifest,
        "damaged folder manifest",
        format!(
            "it says {} bytes for {:?}, whose stored file has its checksum but {len} bytes",
            f.bytes, f.path
        ),
    )
}
