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
//! refused with a message naming them ([`Error::Invalid`] with the index as path, kind
//! `invalid_source`).

use super::base::{BaseSet, OpenedSource};
use super::format::SourceRole;
use super::progress::ProgressEvent;
use super::reader::{Archive, DamagedRegion, DecompressOptions};
use super::safetensors::{looks_like_safetensors, parse};
use super::verify::{verify, verify_against, CompareReport, VerifyReport};
use super::writer::{compress_file, CompressOptions, CompressSummary, Links};
use crate::error::{Error, Result};
use crate::files::{check_replaceable, map_file, rename_temp_dir, temp_beside_dir};
use crate::hash::Xxh3;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

/// File name of the manifest inside a compressed folder.
pub const MANIFEST_NAME: &str = "brevis-folder.json";
/// File name of the Hugging Face shard index.
pub const INDEX_NAME: &str = "model.safetensors.index.json";
const FORMAT: &str = "brevis-folder";

/// Largest manifest [`manifest_is_ours`] reads to tell.
const MAX_MANIFEST_BYTES: u64 = 256 << 20;
const VERSION: u32 = 1;
/// Largest manifest or index JSON read, in bytes.
const MAX_JSON_BYTES: u64 = 256 << 20;

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
struct Manifest {
    format: String,
    version: u32,
    files: Vec<FolderFile>,
    /// xxh3-64 of `files` as compact JSON ([`files_checksum`]), 16 lowercase hex digits:
    /// a changed entry (a renamed path, a wrong length) is caught when the folder is
    /// opened. Manifests written before it had none and are read without the check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    files_xxh3: Option<String>,
}

/// The checksum a manifest stores for its entries: xxh3-64 of their compact JSON, as
/// 16 lowercase hex digits.
fn files_checksum(files: &[FolderFile]) -> String {
    let json = serde_json::to_vec(files).expect("manifest entries serialize");
    hex(crate::hash::xxh3_64(&json))
}

/// Whether `path` asks for folder mode on compression: a folder, or a shard index JSON.
/// Returns the source folder.
pub fn source_folder(path: &Path) -> Option<PathBuf> {
    if path.is_dir() {
        return Some(path.to_path_buf());
    }
    let name = path.file_name()?.to_str()?;
    if name.ends_with(".index.json") && path.is_file() {
        return Some(match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        });
    }
    None
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

/// What the shards of [`shard_paths`] are for: the verb of its errors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShardsFor {
    /// `bench` measures each shard.
    Bench,
    /// `calibrate` learns a prior from the first shard.
    Calibrate,
}

/// The `.safetensors` files of the checkpoint folder `folder`, in path order: the shards
/// `compress` would compress (for `bench` and `calibrate`).
///
/// # Errors
/// [`Error::Io`] naming the entry if the folder cannot be listed, [`Error::Invalid`] if
/// it holds a link to a folder, a broken link or a special file; as [`check_index`] if a
/// shard index names a missing shard or tensor; [`Error::Invalid`] naming the folder if it
/// holds no `.safetensors` file.
pub fn shard_paths(folder: &Path, purpose: ShardsFor) -> Result<Vec<PathBuf>> {
    let walk = match purpose {
        ShardsFor::Bench => Walk::Bench,
        ShardsFor::Calibrate => Walk::Calibrate,
    };
    let files = list_files(folder, walk)?;
    check_indexes(folder, &files)?;
    let shards: Vec<PathBuf> = files
        .into_iter()
        .filter(|f| is_shard(f))
        .map(|f| folder.join(f))
        .collect();
    if shards.is_empty() {
        return Err(other(
            folder,
            walk.verb(),
            "the folder holds no .safetensors file".to_string(),
        ));
    }
    Ok(shards)
}

/// [`check_index`] for every shard index (`*.index.json`) among `files`, the relative
/// paths of the files under `root`.
fn check_indexes(root: &Path, files: &[String]) -> Result<()> {
    for index in files.iter().filter(|f| f.ends_with(".index.json")) {
        let path = root.join(index);
        let dir = path.parent().unwrap_or(root);
        check_index(dir, &path)?;
    }
    Ok(())
}

/// `x/` -> `x.brv/`.
pub fn default_folder_archive_name(folder: &Path) -> PathBuf {
    let mut s = with_name(folder).into_os_string();
    s.push(".brv");
    PathBuf::from(s)
}

/// `path` without trailing `/` or `.`, and resolved to an absolute path when its last
/// component is not a name (`.`, `..`, `/`), so that a name derived from it (`DIR.brv`)
/// lands beside the folder, not inside it (`cd ckpt; brevis compress .` writes
/// `../ckpt.brv`, not `./..brv`).
pub fn with_name(path: &Path) -> PathBuf {
    let p = path.components().as_path();
    match p.components().next_back() {
        Some(Component::Normal(_)) => p.to_path_buf(),
        _ => resolved(p),
    }
}

/// What [`compress_folder`] did.
#[derive(Clone, Debug)]
pub struct FolderSummary {
    /// The source folder.
    pub input: PathBuf,
    /// The compressed folder written.
    pub output: PathBuf,
    /// Bytes of every source file.
    pub original_bytes: u64,
    /// Bytes of every file written (archives, copies, manifest).
    pub archive_bytes: u64,
    /// One summary per compressed shard, in path order.
    pub shards: Vec<CompressSummary>,
    /// Files copied verbatim (relative paths).
    pub copied: Vec<String>,
    /// Folders of the source with no file anywhere below them (relative paths), which
    /// the archive folder does not keep: it holds files only.
    pub empty_folders: Vec<String>,
}

/// An error about `path`, worded `PATH: WHAT: MSG`, of the [`Error::kind`] that `what`
/// says: a damaged manifest is a damaged archive, an incomplete or invalid checkpoint an
/// invalid source, a path `--against` cannot take the wrong kind of input; the refusals
/// of the file system's entries (links to folders, devices) stay `io`.
fn other(path: &Path, what: &'static str, msg: String) -> Error {
    let kind = match what {
        "damaged folder manifest" => "damaged_archive",
        "incomplete checkpoint"
        | "invalid shard index"
        | "cannot archive"
        | "cannot bench"
        | "cannot calibrate" => "invalid_source",
        "cannot compare with" => "wrong_kind",
        _ => "io",
    };
    Error::Invalid {
        path: path.to_path_buf(),
        what,
        detail: msg,
        kind,
    }
}

/// The relative paths of what a compressed folder of `files` holds: each shard's
/// archive, each copied file, and the manifest.
fn stored_names(files: &[FolderFile]) -> BTreeSet<&str> {
    files
        .iter()
        .map(|f| f.archive.as_deref().unwrap_or(&f.path))
        .chain([MANIFEST_NAME])
        .collect()
}

/// Why a folder is walked, for the wording of a refusal: the verb of the error (`cannot
/// archive`, `cannot replace`, ...) and what to do about a link to a folder.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Walk {
    /// Compressing a checkpoint folder.
    Archive,
    /// Measuring a checkpoint folder's shards (`bench`).
    Bench,
    /// Calibrating a prior on a checkpoint folder's first shard (`calibrate`).
    Calibrate,
    /// Checking that an existing output folder may be replaced (`decompress --force`).
    Replace,
    /// Listing the original folder for `verify --against`.
    Compare,
}

impl Walk {
    fn verb(self) -> &'static str {
        match self {
            Walk::Archive => "cannot archive",
            Walk::Bench => "cannot bench",
            Walk::Calibrate => "cannot calibrate",
            Walk::Replace => "cannot replace",
            Walk::Compare => "cannot compare",
        }
    }

    /// Why a link to a folder is refused, and what to do about it.
    fn link_refusal(self) -> &'static str {
        match self {
            Walk::Archive | Walk::Bench | Walk::Calibrate | Walk::Compare => {
                "is a symbolic link to a folder, which brevis does not follow: copy the \
                 folder in or remove the link"
            }
            Walk::Replace => {
                "is a symbolic link to a folder; --force replaces only a folder of the \
                 archive's own files, so remove it first if you mean to"
            }
        }
    }
}

/// Every regular file under `root`, as sorted `/`-separated relative paths.
///
/// # Errors
/// As [`entry_kind`], worded for `walk`; [`Error::Io`] if a folder cannot be listed.
fn list_files(root: &Path, walk: Walk) -> Result<Vec<String>> {
    Ok(list_tree(root, walk)?.0)
}

/// [`list_files`], and the folders under `root` (relative, `/`-separated, sorted).
fn list_tree(root: &Path, walk: Walk) -> Result<(Vec<String>, Vec<String>)> {
    let mut out = Vec::new();
    let mut dirs = Vec::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let dir = root.join(&rel);
        let entries = fs::read_dir(&dir).map_err(|e| Error::io(&dir, "cannot list", e))?;
        for entry in entries {
            let entry = entry.map_err(|e| Error::io(&dir, "cannot list", e))?;
            let path = entry.path();
            let meta = entry_kind(&path, walk)?;
            let name = entry.file_name();
            let Some(name) = name.to_str() else {
                return Err(other(
                    &path,
                    walk.verb(),
                    "file name is not UTF-8".to_string(),
                ));
            };
            let child = rel.join(name);
            let parts: Vec<&str> = child.iter().filter_map(|c| c.to_str()).collect();
            if meta.is_dir() {
                dirs.push(parts.join("/"));
                stack.push(child);
            } else {
                out.push(parts.join("/"));
            }
        }
    }
    out.sort();
    dirs.sort();
    Ok((out, dirs))
}

/// The first thing in folder `dir` that `--force` must not delete: a file that is not one
/// of `ours` (relative paths), or a folder with no file below it (no archive folder and
/// no restore holds one), quoted for a refusal.
fn first_stranger(dir: &Path, ours: &BTreeSet<&str>) -> Result<Option<String>> {
    let (files, dirs) = list_tree(dir, Walk::Replace)?;
    if let Some(f) = files.iter().find(|f| !ours.contains(f.as_str())) {
        return Ok(Some(format!("{f:?}")));
    }
    Ok(empty_folders(&files, &dirs)
        .into_iter()
        .next()
        .map(|d| format!("the empty folder {d:?}")))
}

/// Of the folders `dirs` (as [`list_tree`] gave them), those no file of `files` lies in:
/// what an archive of the folder does not keep. Only the outermost such folder of a
/// branch is named.
fn empty_folders(files: &[String], dirs: &[String]) -> Vec<String> {
    let holds_files = |d: &str| {
        let prefix = format!("{d}/");
        files.iter().any(|f| f.starts_with(&prefix))
    };
    dirs.iter()
        .filter(|d| {
            !holds_files(d)
                && d.rsplit_once('/')
                    .is_none_or(|(parent, _)| holds_files(parent))
        })
        .cloned()
        .collect()
}

/// The metadata of a folder entry, for [`list_files`]: a folder (not a link to one), a
/// regular file, or a symbolic link to a regular file (followed: a Hugging Face cache
/// snapshot is made of such links, and the file they point to is what is kept).
///
/// # Errors
/// [`Error::Invalid`] naming the entry, with `walk`'s verb, if it is a link to a folder
/// (following one could loop or leave the checkpoint), a broken link, or not a regular
/// file (a device, FIFO or socket).
fn entry_kind(path: &Path, walk: Walk) -> Result<fs::Metadata> {
    let own = fs::symlink_metadata(path).map_err(|e| Error::io(path, "cannot read", e))?;
    let meta = if own.file_type().is_symlink() {
        let target = fs::metadata(path).map_err(|e| {
            Error::io(
                path,
                walk.verb(),
                io::Error::other(format!("broken symbolic link ({e})")),
            )
        })?;
        if target.is_dir() {
            return Err(other(path, walk.verb(), walk.link_refusal().to_string()));
        }
        target
    } else {
        own
    };
    if !meta.is_dir() && !meta.is_file() {
        return Err(other(
            path,
            walk.verb(),
            "is not a regular file (a device, FIFO or socket)".to_string(),
        ));
    }
    Ok(meta)
}

/// `path` made absolute with its links resolved, as far as it exists: the canonical form
/// of its longest existing ancestor joined with the rest.
fn resolved(path: &Path) -> PathBuf {
    if let Ok(p) = fs::canonicalize(path) {
        return p;
    }
    match (path.parent(), path.file_name()) {
        (Some(parent), Some(name)) => {
            let parent = if parent.as_os_str().is_empty() {
                Path::new(".")
            } else {
                parent
            };
            resolved(parent).join(name)
        }
        _ => path.to_path_buf(),
    }
}

/// Refuses a one-file `output` of a job that reads the checkpoint folder `input` (as
/// `calibrate DIR` does) when it lies inside that folder, where it could replace a shard
/// or the index (`compress` refuses the same for its archive folder). Links are resolved
/// as far as the path exists.
///
/// # Errors
/// [`Error::Io`] naming `output` and the folder.
pub fn check_output_outside(input: &Path, output: &Path) -> Result<()> {
    if resolved(output).starts_with(resolved(input)) {
        return Err(other(
            output,
            "cannot write",
            format!(
                "is inside the input folder {}",
                crate::shown::shown_path(input)
            ),
        ));
    }
    Ok(())
}

/// Refuses a folder job's `output` when it is the folder `input`, lies inside it, or holds
/// it (replacing it would delete the input); when it exists and `force` is false; and,
/// with `force`, when it is not a regular file or a folder `replaceable` accepts (so that
/// `--force` never deletes files the job did not write).
fn check_folder_output(
    input: &Path,
    output: &Path,
    force: bool,
    replaceable: impl Fn(&Path) -> Result<()>,
) -> Result<()> {
    let (from, to) = (resolved(input), resolved(output));
    let refuse = |why: String| Err(other(output, "cannot write", why));
    if to == from {
        return refuse(format!(
            "is the input folder {}",
            crate::shown::shown_path(input)
        ));
    }
    check_output_outside(input, output)?;
    if from.starts_with(&to) {
        return refuse(format!(
            "holds the input {}: replacing it would delete the input",
            crate::shown::shown_path(input)
        ));
    }
    let Ok(meta) = fs::symlink_metadata(output) else {
        return Ok(());
    };
    check_replaceable(output, &meta, true)?;
    if !force {
        return Err(Error::OutputExists {
            path: output.to_path_buf(),
        });
    }
    if meta.is_dir() {
        replaceable(output)?;
    }
    Ok(())
}

impl BaseSet {
    /// Opens the base at `path`: a `.safetensors` file, a checkpoint folder (every
    /// `*.safetensors` file in it, named by its path inside the folder), a `.brv` archive
    /// of a file, or a compressed folder (`DIR.brv/`, its shard archives).
    ///
    /// # Errors
    /// As [`OpenedSource::open`]; [`Error::Invalid`] of kind `wrong_base` for a folder
    /// holding no `.safetensors` file or shard archive.
    pub fn open(path: &Path) -> Result<BaseSet> {
        let mut sources = Vec::new();
        if path.is_dir() {
            for (rel, file) in base_files(path)? {
                let mut s = OpenedSource::open(&file)?;
                s.set_name(rel);
                sources.push(s);
            }
            if sources.is_empty() {
                return Err(Error::Invalid {
                    path: path.to_path_buf(),
                    what: "cannot be a base",
                    detail: "the folder holds no .safetensors file or shard archive".to_string(),
                    kind: "wrong_base",
                });
            }
        } else {
            sources.push(OpenedSource::open(path)?);
        }
        Ok(BaseSet::from_sources(sources, path))
    }
}

/// The `.safetensors` files of a base given as a folder ([`super::base::BaseSet::open`]):
/// for a compressed folder, each shard's original path inside it and its archive; for a
/// checkpoint folder, each `.safetensors` file's path inside it and the file. In path
/// order.
///
/// # Errors
/// As [`Folder::open`] and [`Folder::check_stored`]; as listing the folder.
pub(crate) fn base_files(path: &Path) -> Result<Vec<(String, PathBuf)>> {
    if let Some(root) = compressed_folder(path) {
        let f = Folder::open(&root)?;
        f.check_stored()?;
        return Ok(f
            .shards()
            .map(|s| (s.path.clone(), f.stored_path(s)))
            .collect());
    }
    Ok(list_files(path, Walk::Bench)?
        .into_iter()
        .filter(|f| is_shard(f))
        .map(|f| {
            let p = path.join(&f);
            (f, p)
        })
        .collect())
}

fn is_shard(rel: &str) -> bool {
    rel.ends_with(".safetensors")
}

fn archive_name(rel: &str) -> String {
    format!("{}.brv", rel.strip_suffix(".safetensors").unwrap_or(rel))
}

/// A relative `/`-separated path that stays inside its folder.
fn safe_relative(rel: &str) -> bool {
    !rel.is_empty()
        && Path::new(rel)
            .components()
            .all(|c| matches!(c, Component::Normal(_)))
}

fn read_json_file(path: &Path) -> Result<Vec<u8>> {
    let len = fs::metadata(path)
        .map_err(|e| Error::io(path, "cannot read", e))?
        .len();
    if len > MAX_JSON_BYTES {
        return Err(other(
            path,
            "cannot read",
            format!("{len} bytes is over the limit of {MAX_JSON_BYTES} bytes for a JSON file"),
        ));
    }
    fs::read(path).map_err(|e| Error::io(path, "cannot read", e))
}

/// Tensor names of a `.safetensors` file (parsing it strictly).
fn shard_tensor_names(path: &Path) -> Result<BTreeSet<String>> {
    let file = fs::File::open(path).map_err(|e| Error::io(path, "cannot open", e))?;
    let len = file
        .metadata()
        .map_err(|e| Error::io(path, "cannot read", e))?
        .len();
    let map = if len == 0 {
        None
    } else {
        Some(map_file(&file).map_err(|e| Error::io(path, "cannot map", e))?)
    };
    let src = parse(map.as_deref().unwrap_or(&[])).map_err(|e| Error::source(path, e))?;
    Ok(src.tensors().iter().map(|t| t.name.clone()).collect())
}

/// Checks `index` (a `model.safetensors.index.json`) against the folder: every shard it
/// names exists and holds every tensor it maps to it.
///
/// # Errors
/// [`Error::Invalid`] naming the index and the missing shard or tensor; [`Error::Source`] if
/// a shard is not a valid `.safetensors` file.
pub fn check_index(folder: &Path, index: &Path) -> Result<()> {
    let text = read_json_file(index)?;
    let value: serde_json::Value = serde_json::from_slice(&text)
        .map_err(|e| other(index, "invalid shard index", format!("not valid JSON: {e}")))?;
    let Some(map) = value.get("weight_map").and_then(|m| m.as_object()) else {
        return Err(other(
            index,
            "invalid shard index",
            "no \"weight_map\" object".to_string(),
        ));
    };
    let mut by_shard: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (tensor, shard) in map {
        let Some(shard) = shard.as_str() else {
            return Err(other(
                index,
                "invalid shard index",
                format!("tensor {tensor:?} maps to {shard}, not a file name"),
            ));
        };
        by_shard.entry(shard).or_default().push(tensor);
    }
    // A name that leaves the folder, or names a folder, is the index's fault, not a
    // shard gone missing: said as such.
    // `./x` is inside too (some writers spell names so); `..`, a root or a prefix is not.
    let inside = |s: &str| {
        let parts = Path::new(s).components();
        parts
            .clone()
            .all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
            && parts.into_iter().any(|c| matches!(c, Component::Normal(_)))
    };
    if let Some((shard, tensors)) = by_shard.iter().find(|(s, _)| !inside(s)) {
        return Err(other(
            index,
            "invalid shard index",
            format!(
                "shard {shard:?} (of tensor {}) is not a path inside the checkpoint folder",
                quoted(tensors, 4)
            ),
        ));
    }
    if let Some((shard, tensors)) = by_shard.iter().find(|(s, _)| folder.join(s).is_dir()) {
        return Err(other(
            index,
            "invalid shard index",
            format!(
                "shard {shard:?} (of tensor {}) is a folder, not a .safetensors file",
                quoted(tensors, 4)
            ),
        ));
    }
    let missing: Vec<&str> = by_shard
        .keys()
        .copied()
        .filter(|s| !folder.join(s).is_file())
        .collect();
    if !missing.is_empty() {
        let tensors: Vec<&str> = missing
            .iter()
            .flat_map(|s| by_shard[s].iter().copied())
            .collect();
        return Err(other(
            index,
            "incomplete checkpoint",
            format!(
                "missing shard {} (named by the index; tensors no shard holds: {})",
                quoted(&missing, 4),
                quoted(&tensors, 8)
            ),
        ));
    }
    for (shard, tensors) in &by_shard {
        let held = shard_tensor_names(&folder.join(shard))?;
        let absent: Vec<&str> = tensors
            .iter()
            .copied()
            .filter(|t| !held.contains(*t))
            .collect();
        if !absent.is_empty() {
            return Err(other(
                index,
                "incomplete checkpoint",
                format!(
                    "shard {shard:?} does not hold tensor {} that the index maps to it",
                    quoted(&absent, 8)
                ),
            ));
        }
    }
    Ok(())
}

fn quoted(names: &[&str], at_most: usize) -> String {
    let mut s: Vec<String> = names
        .iter()
        .take(at_most)
        .map(|n| format!("\"{}\"", crate::shown::escape_name(n)))
        .collect();
    if names.len() > at_most {
        s.push(format!("and {} more", names.len() - at_most));
    }
    s.join(", ")
}

/// xxh3-64 and length of a file, read in 4 MiB blocks.
fn file_checksum(path: &Path) -> Result<(u64, u64)> {
    use std::io::Read;
    let mut f = fs::File::open(path).map_err(|e| Error::io(path, "cannot open", e))?;
    let mut h = Xxh3::new();
    let mut buf = vec![0u8; 4 << 20];
    let mut len = 0u64;
    loop {
        let n = f
            .read(&mut buf)
            .map_err(|e| Error::io(path, "cannot read", e))?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
        len += n as u64;
    }
    Ok((h.digest(), len))
}

fn hex(x: u64) -> String {
    format!("{x:016x}")
}

/// Compresses the checkpoint folder `input` (every `.safetensors` file into a `.brv`,
/// every other file copied) into the folder `output` (see the module doc for the
/// layout). Shards are compressed one after another, each on `opts.jobs` threads.
///
/// # Errors
/// As [`check_index`] if the folder's index names a missing shard or tensor;
/// [`Error::OutputExists`] if `output` exists and `opts.force` is false; as
/// [`compress_file`] for each shard; [`Error::Io`] if a file cannot be read or written.
pub fn compress_folder(
    input: &Path,
    output: &Path,
    opts: &CompressOptions,
    progress: &dyn Fn(&str, ProgressEvent<'_>),
) -> Result<FolderSummary> {
    if !input.is_dir() {
        return Err(other(input, "cannot read", "not a folder".to_string()));
    }
    let (files, dirs) = list_tree(input, Walk::Archive)?;
    if !files.iter().any(|f| is_shard(f)) {
        return Err(other(
            input,
            "cannot archive",
            "the folder holds no .safetensors file (brevis compresses checkpoint folders)"
                .to_string(),
        ));
    }
    check_indexes(input, &files)?;
    // `--force` replaces a folder only if it is empty or a previous archive folder that
    // holds nothing but its manifest and the files the manifest lists.
    check_folder_output(input, output, opts.force, |dir| {
        let empty = fs::read_dir(dir).is_ok_and(|mut d| d.next().is_none());
        if empty {
            return Ok(());
        }
        let refuse = |why: String| {
            Err(other(
                dir,
                "cannot replace",
                format!(
                    "{why}; --force replaces only a previous archive folder, so remove it \
                     first if you mean to"
                ),
            ))
        };
        if !dir.join(MANIFEST_NAME).is_file() {
            return refuse(format!(
                "is a folder but not a brevis folder archive (it has no {MANIFEST_NAME})"
            ));
        }
        let previous = match Folder::open(dir) {
            Ok(f) => f,
            Err(e) => {
                return refuse(format!(
                    "is a folder whose {MANIFEST_NAME} is not a valid manifest ({e})"
                ))
            }
        };
        let ours = stored_names(&previous.files);
        match first_stranger(dir, &ours)? {
            None => Ok(()),
            Some(f) => refuse(format!(
                "holds {f}, which is not part of the archive folder its manifest describes"
            )),
        }
    })?;
    let names: BTreeSet<String> = files.iter().cloned().collect();
    for f in files.iter().filter(|f| is_shard(f)) {
        if names.contains(&archive_name(f)) {
            return Err(other(
                &input.join(f),
                "cannot archive",
                format!(
                    "its archive name {:?} is taken by another file",
                    archive_name(f)
                ),
            ));
        }
    }
    if names.contains(MANIFEST_NAME) {
        return Err(other(
            &input.join(MANIFEST_NAME),
            "cannot archive",
            "the folder already holds a brevis manifest (is it a compressed folder?)".to_string(),
        ));
    }

    let tmp = temp_beside_dir(output)?;
    let mut manifest = Manifest {
        format: FORMAT.to_string(),
        version: VERSION,
        files: Vec::new(),
        files_xxh3: None,
    };
    let mut shards = Vec::new();
    let mut copied = Vec::new();
    let mut original_bytes = 0;
    let mut archive_bytes = 0;
    // Tensors are stored once across shards: each shard is coded against the shards
    // before it (identical tensors only), and against the base when one is given.
    let given = opts.links.as_deref().cloned().unwrap_or_default();
    let mut links = Links {
        base: given.base.clone(),
        ..Links::default()
    };
    // Errors inside the temporary folder name the file where it would have been.
    let mut fill = || -> Result<()> {
        for rel in &files {
            let src = input.join(rel);
            let (sum, len) = file_checksum(&src)?;
            original_bytes += len;
            if is_shard(rel) {
                let arch = archive_name(rel);
                let dst = tmp.path().join(&arch);
                make_parent(tmp.path(), &dst)?;
                let shard_opts = CompressOptions {
                    force: false,
                    links: Some(Arc::new(links.clone())),
                    ..opts.clone()
                };
                let s = compress_file(&src, &dst, &shard_opts, &|ev| progress(rel, ev))?;
                // Its tensors, for the shards after it.
                let mut opened = OpenedSource::open(&src)?;
                opened.set_name(rel.clone());
                let k = links.shards.len();
                for (t, info) in opened.tensors().iter().enumerate() {
                    if info.bytes == 0 {
                        continue;
                    }
                    let sum = crate::hash::xxh3_64(&opened.tensor_bytes(t)?);
                    links
                        .shard_tensors
                        .entry((sum, info.bytes, info.dtype))
                        .or_insert((k, t));
                }
                links.shards.push(Arc::new(opened));
                archive_bytes += s.archive_bytes;
                shards.push(s);
                manifest.files.push(FolderFile {
                    path: rel.clone(),
                    kind: FileKind::Archive,
                    archive: Some(arch),
                    bytes: len,
                    xxh3: hex(sum),
                });
            } else {
                let dst = tmp.path().join(rel);
                make_parent(tmp.path(), &dst)?;
                fs::copy(&src, &dst).map_err(|e| Error::io(&dst, "cannot copy", e))?;
                archive_bytes += len;
                copied.push(rel.clone());
                manifest.files.push(FolderFile {
                    path: rel.clone(),
                    kind: FileKind::Copy,
                    archive: None,
                    bytes: len,
                    xxh3: hex(sum),
                });
            }
        }
        let text = manifest_bytes(std::mem::take(&mut manifest.files), output)?;
        manifest.files = serde_json::from_slice::<Manifest>(&text)
            .map(|m| m.files)
            .map_err(|e| Error::Internal {
                path: output.to_path_buf(),
                what: format!("cannot read back the manifest: {e}"),
            })?;
        archive_bytes += text.len() as u64;
        let mpath = tmp.path().join(MANIFEST_NAME);
        fs::write(&mpath, &text).map_err(|e| Error::io(&mpath, "cannot write", e))?;
        Ok(())
    };
    fill().map_err(|e| e.relocated(tmp.path(), output))?;
    persist_dir(tmp, output, opts.force)?;
    for (s, f) in shards.iter_mut().zip(
        manifest
            .files
            .iter()
            .filter(|f| f.kind == FileKind::Archive),
    ) {
        if let Some(a) = &f.archive {
            s.output = output.join(a);
        }
    }
    Ok(FolderSummary {
        input: input.to_path_buf(),
        output: output.to_path_buf(),
        original_bytes,
        archive_bytes,
        shards,
        copied,
        empty_folders: empty_folders(&files, &dirs),
    })
}

/// The manifest of a compressed folder whose entries are `files` (in path order), as
/// [`compress_folder`] writes it (`output` only labels errors): what a job that
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

/// Creates the folders between `root` (a temporary folder) and `path`'s parent, one
/// level at a time and never `root` itself: if a signal has removed `root`, this fails
/// instead of bringing it back (which `create_dir_all` would, leaving it behind).
fn make_parent(root: &Path, path: &Path) -> Result<()> {
    let Some(parent) = path.parent() else {
        return Ok(());
    };
    let rel = parent.strip_prefix(root).unwrap_or(parent);
    let mut at = root.to_path_buf();
    for c in rel.components() {
        at.push(c);
        match fs::create_dir(&at) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && at.is_dir() => {}
            Err(e) => return Err(Error::io(&at, "cannot create folder", e)),
        }
    }
    Ok(())
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
fn manifest_length(manifest: &Path, f: &FolderFile, len: u64) -> Error {
    other(
        manifest,
        "damaged folder manifest",
        format!(
            "it says {} bytes for {:?}, whose stored file has its checksum but {len} bytes",
            f.bytes, f.path
        ),
    )
}

/// Renames a complete temporary folder to `output`, replacing it only if `force`.
fn persist_dir(tmp: tempfile::TempDir, output: &Path, force: bool) -> Result<()> {
    let exists = output.exists();
    if exists && !force {
        return Err(Error::OutputExists {
            path: output.to_path_buf(),
        });
    }
    rename_temp_dir(tmp, output, exists)
        .map_err(|e| Error::io(output, "cannot rename into place", e))
}

/// An opened compressed folder: its manifest, with archives opened on demand.
#[derive(Clone, Debug)]
pub struct Folder {
    root: PathBuf,
    files: Vec<FolderFile>,
    /// The base its shards are coded against, when given ([`Folder::set_base`]).
    base: Option<Arc<BaseSet>>,
}

/// What [`Folder::verify`] found for one file.
#[derive(Clone, Debug)]
pub enum FileCheck {
    /// A shard: the archive's own report, and how the file it restores disagrees with
    /// the manifest's entry for it, if it does ([`shard_mismatch`]).
    Archive(Box<VerifyReport>, Option<String>),
    /// A copied file: whether its length and checksum match the manifest.
    Copy {
        /// Whether they match.
        ok: bool,
    },
}

/// What [`Folder::verify_against`] found for one file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FileComparison {
    /// Both sides exist and were compared byte for byte.
    Compared(CompareReport),
    /// The compressed folder restores this file, the original folder does not hold it.
    Missing,
    /// The original folder holds this file, the compressed folder does not restore it.
    Extra,
}

impl FileComparison {
    /// Whether the file is identical on both sides.
    pub fn is_identical(&self) -> bool {
        matches!(self, FileComparison::Compared(c) if c.identical)
    }
}

/// Compares two files byte for byte, reading both in 4 MiB blocks.
fn compare_files(ours: &Path, theirs: &Path) -> Result<CompareReport> {
    use std::io::Read;
    let open = |p: &Path| {
        fs::File::open(p)
            .map(|f| io::BufReader::with_capacity(4 << 20, f))
            .map_err(|e| Error::io(p, "cannot open", e))
    };
    let (mut a, mut b) = (open(ours)?, open(theirs)?);
    let (mut abuf, mut bbuf) = (Vec::new(), Vec::new());
    let (mut at, mut a_len, mut b_len) = (0u64, 0u64, 0u64);
    let mut first_difference = None;
    loop {
        abuf.clear();
        bbuf.clear();
        let na = (&mut a)
            .take(4 << 20)
            .read_to_end(&mut abuf)
            .map_err(|e| Error::io(ours, "cannot read", e))?;
        let nb = (&mut b)
            .take(4 << 20)
            .read_to_end(&mut bbuf)
            .map_err(|e| Error::io(theirs, "cannot read", e))?;
        a_len += na as u64;
        b_len += nb as u64;
        if first_difference.is_none() {
            let n = na.min(nb);
            if let Some(p) = abuf[..n].iter().zip(&bbuf[..n]).position(|(x, y)| x != y) {
                first_difference = Some(at + p as u64);
            } else if na != nb {
                first_difference = Some(at + n as u64);
            }
        }
        at += na.min(nb) as u64;
        if na == 0 && nb == 0 {
            break;
        }
    }
    Ok(CompareReport {
        identical: first_difference.is_none(),
        first_difference,
        file_bytes: b_len,
        decoded_bytes: a_len,
    })
}

impl FileCheck {
    /// Whether the file is intact.
    pub fn is_ok(&self) -> bool {
        match self {
            FileCheck::Archive(r, manifest) => r.is_ok() && manifest.is_none(),
            FileCheck::Copy { ok } => *ok,
        }
    }
}

impl Folder {
    /// Opens a compressed folder (or its manifest).
    ///
    /// # Errors
    /// [`Error::Io`] if the manifest cannot be read; [`Error::Invalid`] (kind
    /// `damaged_archive`) if it is not a brevis folder manifest, names a path outside the
    /// folder, or its entries do not match their checksum.
    pub fn open(path: &Path) -> Result<Folder> {
        let root = compressed_folder(path).unwrap_or_else(|| path.to_path_buf());
        let mpath = root.join(MANIFEST_NAME);
        let text = read_json_file(&mpath)?;
        let m: Manifest = serde_json::from_slice(&text).map_err(|e| {
            other(
                &mpath,
                "damaged folder manifest",
                format!("not a brevis folder manifest: {e}"),
            )
        })?;
        if m.format != FORMAT || m.version != VERSION {
            return Err(other(
                &mpath,
                "damaged folder manifest",
                format!(
                    "format {:?} version {}, expected {FORMAT:?} version {VERSION}",
                    m.format, m.version
                ),
            ));
        }
        if let Some(stored) = &m.files_xxh3 {
            let computed = files_checksum(&m.files);
            if *stored != computed {
                return Err(other(
                    &mpath,
                    "damaged folder manifest",
                    format!(
                        "its entries do not match their checksum (stored {stored}, computed \
                         {computed}): a path, length or checksum in it was changed"
                    ),
                ));
            }
        }
        let mut seen = BTreeSet::new();
        for f in &m.files {
            let wrong = match (f.kind, &f.archive) {
                _ if !safe_relative(&f.path) => {
                    Some("its path is not a relative path inside the folder".to_string())
                }
                (FileKind::Archive, Some(a)) if !safe_relative(a) => Some(format!(
                    "its archive {a:?} is not a relative path inside the folder"
                )),
                (FileKind::Archive, None) => Some("it is a shard but names no archive".to_string()),
                (FileKind::Copy, Some(a)) => {
                    Some(format!("it is a copied file but names an archive, {a:?}"))
                }
                _ if !seen.insert(f.path.as_str()) => Some("it is listed twice".to_string()),
                _ => None,
            };
            if let Some(wrong) = wrong {
                return Err(other(
                    &mpath,
                    "damaged folder manifest",
                    format!("bad entry for {:?}: {wrong}", f.path),
                ));
            }
            if u64::from_str_radix(&f.xxh3, 16).is_err() || f.xxh3.len() != 16 {
                return Err(other(
                    &mpath,
                    "damaged folder manifest",
                    format!("bad checksum {:?} for {:?}", f.xxh3, f.path),
                ));
            }
        }
        Ok(Folder {
            root,
            files: m.files,
            base: None,
        })
    }

    /// Gives the base checkpoint its shards were coded against (`--base`): attached to
    /// every shard [`Folder::open_shard`] opens.
    pub fn set_base(&mut self, base: Option<Arc<BaseSet>>) {
        self.base = base;
    }

    /// Attaches to shard archive `a` its sources: the base ([`Folder::set_base`]) and
    /// the other shards it takes tensors from (each opened from this folder, with the
    /// base attached too).
    fn link(&self, a: &Archive) -> Result<()> {
        self.link_as(a, false)
    }

    /// [`Folder::link`]; for a salvage (`salvage`), a sibling shard is opened as
    /// [`Archive::open_for_salvage`] does, and one that cannot be opened at all is left
    /// unattached (the tensors taken from it then fail alone).
    fn link_as(&self, a: &Archive, salvage: bool) -> Result<()> {
        let needs_base = a.needs_base();
        if let (true, Some(b)) = (needs_base, &self.base) {
            a.attach_base(b)?;
        }
        for (i, e) in a.sources().iter().enumerate() {
            if e.role != SourceRole::Shard {
                continue;
            }
            let Some(f) = self.shards().find(|f| f.path == e.name) else {
                return Err(Error::archive(
                    a.path(),
                    crate::error::ArchiveError::DamagedRecord {
                        what: format!(
                            "it takes tensors from shard {:?}, which the folder's manifest \
                             does not list",
                            e.name
                        ),
                    },
                ));
            };
            let sibling = match salvage {
                false => Archive::open(&self.stored_path(f))?,
                true => match Archive::open_for_salvage(&self.stored_path(f)) {
                    Ok(s) => s,
                    Err(_) => continue,
                },
            };
            if let Some(b) = &self.base {
                if sibling.needs_base() {
                    sibling.attach_base(b)?;
                }
            }
            a.attach(
                i,
                Arc::new(OpenedSource::from_archive(sibling, e.name.clone())),
            )?;
        }
        Ok(())
    }

    /// Refuses to go on while a shard is coded against a base that is not given (or
    /// another than given): what decompressing and verifying check before anything is
    /// written. Opens every shard.
    ///
    /// # Errors
    /// As [`Folder::open_shard`] and [`Archive::require_sources`].
    pub fn require_sources(&self) -> Result<()> {
        for f in self.shards() {
            self.open_shard(f)?.require_sources()?;
        }
        Ok(())
    }

    /// The compressed folder.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Every file of the original folder, in path order.
    pub fn files(&self) -> &[FolderFile] {
        &self.files
    }

    /// Bytes of the original folder.
    pub fn original_len(&self) -> u64 {
        self.files.iter().map(|f| f.bytes).sum()
    }

    /// The shards (files kept as archives), in path order.
    pub fn shards(&self) -> impl Iterator<Item = &FolderFile> {
        self.files.iter().filter(|f| f.kind == FileKind::Archive)
    }

    /// Path of a file's stored form inside the compressed folder.
    pub fn stored_path(&self, f: &FolderFile) -> PathBuf {
        self.root.join(f.archive.as_deref().unwrap_or(&f.path))
    }

    /// Checks that every file the manifest names is stored: each shard's archive and each
    /// copied file exists (nothing is read).
    ///
    /// # Errors
    /// [`Error::Io`] naming the first stored file that is missing ("cannot open").
    pub fn check_stored(&self) -> Result<()> {
        for f in &self.files {
            let stored = self.stored_path(f);
            if let Err(e) = fs::metadata(&stored) {
                return Err(Error::io(&stored, "cannot open", e));
            }
        }
        Ok(())
    }

    /// Files inside the compressed folder that its manifest does not name (neither the
    /// manifest, a shard archive nor a copied file), as sorted `/`-separated relative
    /// paths: nothing restores them, so a command reading the folder warns about them
    /// (a file put there by hand would otherwise be ignored in silence).
    ///
    /// # Errors
    /// [`Error::Io`] if the folder cannot be listed, [`Error::Invalid`] if it holds a link
    /// to a folder.
    pub fn unlisted(&self) -> Result<Vec<String>> {
        let stored = stored_names(&self.files);
        Ok(list_files(&self.root, Walk::Compare)?
            .into_iter()
            .filter(|f| !stored.contains(f.as_str()))
            .collect())
    }

    /// Opens the archive of a shard.
    ///
    /// # Errors
    /// As [`Archive::open`].
    pub fn open_shard(&self, f: &FolderFile) -> Result<Archive> {
        let a = Archive::open(&self.stored_path(f))?;
        self.link(&a)?;
        Ok(a)
    }

    /// The manifest entry of the shard archive opened as `a` (by its stored path).
    pub fn entry_of(&self, a: &Archive) -> Option<&FolderFile> {
        self.shards().find(|f| self.stored_path(f) == a.path())
    }

    /// Finds the shard holding tensor `name` (as given or as `ls` prints it, see
    /// [`Archive::find_as_printed`]), opening archives in path order. Returns the
    /// shard's archive and the tensor's index in it.
    ///
    /// # Errors
    /// As [`Archive::open`].
    pub fn find_tensor(&self, name: &str) -> Result<Option<(Archive, usize)>> {
        for f in self.shards() {
            let a = self.open_shard(f)?;
            if let Some(i) = a.find_as_printed(name) {
                return Ok(Some((a, i)));
            }
        }
        Ok(None)
    }

    fn check_copy(&self, f: &FolderFile) -> Result<bool> {
        let (sum, len) = file_checksum(&self.stored_path(f))?;
        Ok(len == f.bytes && hex(sum) == f.xxh3)
    }

    /// Verifies every shard against its stored checksums and every copied file against
    /// the manifest; `progress` gets each shard's events with its relative path.
    ///
    /// # Errors
    /// As [`Archive::open`] and [`verify`]; [`Error::Io`] if a copied file is missing.
    pub fn verify(
        &self,
        jobs: Option<usize>,
        progress: &dyn Fn(&str, ProgressEvent<'_>),
    ) -> Result<Vec<(String, FileCheck)>> {
        let mut out = Vec::new();
        for f in &self.files {
            let check = match f.kind {
                FileKind::Archive => {
                    let a = self.open_shard(f)?;
                    let r = verify(&a, jobs, &|ev| progress(&f.path, ev))?;
                    FileCheck::Archive(Box::new(r), shard_mismatch(f, &a))
                }
                FileKind::Copy => FileCheck::Copy {
                    ok: self.check_copy(f)?,
                },
            };
            out.push((f.path.clone(), check));
        }
        Ok(out)
    }

    /// Compares every file the compressed folder restores, byte for byte, with the file
    /// at the same relative path under `original` (shards are decoded, copies read), and
    /// lists the files of `original` that the compressed folder does not hold. `original`
    /// is a folder or its shard index (`*.index.json`), which stands for the folder
    /// holding it, as for `compress` ([`source_folder`]). Files are read in order
    /// alongside the decoding, so memory stays bounded as for [`Archive::write_original`];
    /// `progress` gets each shard's events with its path.
    ///
    /// # Errors
    /// [`Error::Invalid`] if `original` is neither a folder nor a shard index;
    /// [`Error::Io`] if it cannot be listed or read; as
    /// [`Archive::open`] for a shard; [`Error::Archive`] if a shard's program cannot be
    /// decoded (a difference is reported, not an error).
    pub fn verify_against(
        &self,
        original: &Path,
        jobs: Option<usize>,
        progress: &dyn Fn(&str, ProgressEvent<'_>),
    ) -> Result<Vec<(String, FileComparison)>> {
        if let Err(e) = fs::metadata(original) {
            return Err(Error::io(original, "cannot compare with", e));
        }
        let Some(original) = source_folder(original) else {
            return Err(other(
                original,
                "cannot compare with",
                "not a folder or shard index (a folder archive is compared with the original folder)"
                    .to_string(),
            ));
        };
        let original = original.as_path();
        let theirs = list_files(original, Walk::Compare)?;
        let mut out = Vec::new();
        for f in &self.files {
            let path = original.join(&f.path);
            if !path.is_file() {
                out.push((f.path.clone(), FileComparison::Missing));
                continue;
            }
            let report = match f.kind {
                FileKind::Archive => {
                    let a = self.open_shard(f)?;
                    verify_against(&a, &path, jobs, &|ev| progress(&f.path, ev))?
                }
                FileKind::Copy => compare_files(&self.stored_path(f), &path)?,
            };
            out.push((f.path.clone(), FileComparison::Compared(report)));
        }
        let ours: BTreeSet<&str> = self.files.iter().map(|f| f.path.as_str()).collect();
        for rel in theirs {
            if !ours.contains(rel.as_str()) {
                out.push((rel, FileComparison::Extra));
            }
        }
        Ok(out)
    }

    /// Restores the original folder at `output` through a temporary folder beside it,
    /// renamed into place only when every file matched its checksums.
    ///
    /// # Errors
    /// [`Error::OutputExists`] if `output` exists and `opts.force` is false;
    /// [`Error::Mismatch`] if a copied file differs from the manifest; as
    /// [`Archive::decompress_to`] for each shard.
    pub fn decompress_to(
        &self,
        output: &Path,
        opts: &DecompressOptions,
        progress: &dyn Fn(&str, ProgressEvent<'_>),
    ) -> Result<FolderRestore> {
        if opts.salvage {
            return self.salvage_to(output, opts, progress);
        }
        self.require_sources()?;
        // `--force` replaces a folder only if every file in it is one this archive
        // restores (a previous restore of it, say).
        check_folder_output(&self.root, output, opts.force, |dir| {
            let ours: BTreeSet<&str> = self.files.iter().map(|f| f.path.as_str()).collect();
            match first_stranger(dir, &ours)? {
                None => Ok(()),
                Some(f) => Err(other(
                    dir,
                    "cannot replace",
                    format!(
                        "holds {f}, which this archive does not restore; --force replaces \
                         only a folder of the archive's own files, so remove it first if you \
                         mean to"
                    ),
                )),
            }
        })?;
        let tmp = temp_beside_dir(output)?;
        let mut damaged_records = Vec::new();
        let mut fill = || -> Result<()> {
            for f in &self.files {
                let dst = tmp.path().join(&f.path);
                make_parent(tmp.path(), &dst)?;
                match f.kind {
                    FileKind::Archive => {
                        let a = self.open_shard(f)?;
                        // A shard archive that restores another file (swapped or replaced
                        // shards) is a checksum mismatch, exit 3, as `verify` reports it;
                        // the right file with another length is a damaged manifest.
                        let len = a.original_len();
                        if len != f.bytes && hex(a.file_checksum()) == f.xxh3 {
                            return Err(manifest_length(&self.root.join(MANIFEST_NAME), f, len));
                        }
                        if let Some(region) = shard_mismatch(f, &a) {
                            return Err(Error::Mismatch {
                                path: a.path().to_path_buf(),
                                region,
                                expected: u64::from_str_radix(&f.xxh3, 16).unwrap_or(0),
                                actual: a.file_checksum(),
                            });
                        }
                        let o = DecompressOptions {
                            force: false,
                            ..opts.clone()
                        };
                        let s = a.decompress_to(&dst, &o, &|ev| progress(&f.path, ev))?;
                        if !s.records_intact {
                            damaged_records.push((a.path().to_path_buf(), f.path.clone()));
                        }
                    }
                    FileKind::Copy => {
                        let src = self.stored_path(f);
                        // Errors name the stored file or the final output, never the
                        // temporary folder.
                        fs::metadata(&src).map_err(|e| Error::io(&src, "cannot read", e))?;
                        fs::copy(&src, &dst)
                            .map_err(|e| Error::io(&output.join(&f.path), "cannot write", e))?;
                        let (sum, len) = file_checksum(&dst)?;
                        if len != f.bytes && hex(sum) == f.xxh3 {
                            return Err(manifest_length(&self.root.join(MANIFEST_NAME), f, len));
                        }
                        if len != f.bytes || hex(sum) != f.xxh3 {
                            let region = if len == f.bytes {
                                "whole file".to_string()
                            } else {
                                format!("whole file ({len} bytes, the manifest says {})", f.bytes)
                            };
                            return Err(Error::Mismatch {
                                path: src,
                                region,
                                expected: u64::from_str_radix(&f.xxh3, 16).unwrap_or(0),
                                actual: sum,
                            });
                        }
                    }
                }
            }
            Ok(())
        };
        fill().map_err(|e| e.relocated(tmp.path(), output))?;
        persist_dir(tmp, output, opts.force)?;
        Ok(FolderRestore {
            original_bytes: self.original_len(),
            damaged_records,
            damaged: Vec::new(),
        })
    }

    /// [`Folder::decompress_to`] with [`DecompressOptions::salvage`]: every file is
    /// written, each shard as [`Archive::decompress_to`] salvages it (its damaged tensors
    /// zero-filled; a shard archive cut short or with a damaged index through its
    /// records, [`Archive::open_for_salvage`]); a shard archive that cannot be opened at
    /// all, one that restores another file than the manifest names, and a copied file
    /// that does not match the manifest are written as zeros of the manifest's length.
    /// Every zero-filled region is returned, with its file.
    ///
    /// # Errors
    /// [`Error::OutputExists`] as [`Folder::decompress_to`]; [`Error::Invalid`] of kind
    /// `base_missing` when a shard needs the base and none is given; [`Error::Io`] when a
    /// file cannot be written.
    fn salvage_to(
        &self,
        output: &Path,
        opts: &DecompressOptions,
        progress: &dyn Fn(&str, ProgressEvent<'_>),
    ) -> Result<FolderRestore> {
        check_folder_output(&self.root, output, opts.force, |dir| {
            let ours: BTreeSet<&str> = self.files.iter().map(|f| f.path.as_str()).collect();
            match first_stranger(dir, &ours)? {
                None => Ok(()),
                Some(f) => Err(other(
                    dir,
                    "cannot replace",
                    format!(
                        "holds {f}, which this archive does not restore; --force replaces \
                         only a folder of the archive's own files, so remove it first if you \
                         mean to"
                    ),
                )),
            }
        })?;
        let tmp = temp_beside_dir(output)?;
        let mut damaged: Vec<DamagedRegion> = Vec::new();
        let mut damaged_records = Vec::new();
        // A file that cannot be restored at all: zeros of its length, and why.
        let whole = |f: &FolderFile, dst: &Path, reason: String| -> Result<DamagedRegion> {
            fs::File::create(dst)
                .and_then(|file| file.set_len(f.bytes).map(|()| file))
                .and_then(|file| file.sync_all())
                .map_err(|e| Error::io(&output.join(&f.path), "cannot write", e))?;
            Ok(DamagedRegion {
                file: Some(f.path.clone()),
                region: "the whole file".to_string(),
                tensors: Vec::new(),
                offset: 0,
                bytes: f.bytes,
                reason,
            })
        };
        let mut fill = || -> Result<()> {
            for f in &self.files {
                let dst = tmp.path().join(&f.path);
                make_parent(tmp.path(), &dst)?;
                match f.kind {
                    FileKind::Archive => {
                        let opened = Archive::open_for_salvage(&self.stored_path(f))
                            .and_then(|a| self.link_as(&a, true).map(|()| a));
                        let a = match opened {
                            Ok(a) => a,
                            Err(e) if e.kind() == "base_missing" || e.kind() == "wrong_base" => {
                                return Err(e)
                            }
                            Err(e) => {
                                damaged.push(whole(f, &dst, e.to_string())?);
                                continue;
                            }
                        };
                        // A sound index pins the file it restores: another file than the
                        // manifest's is not this shard.
                        let len = a.original_len();
                        let other_file = if a.missing_index().is_some() {
                            (len != f.bytes).then(|| {
                                format!("restores {len} bytes where the manifest says {}", f.bytes)
                            })
                        } else {
                            shard_mismatch(f, &a)
                        };
                        if let Some(why) = other_file {
                            damaged.push(whole(f, &dst, why)?);
                            continue;
                        }
                        let o = DecompressOptions {
                            force: false,
                            ..opts.clone()
                        };
                        match a.decompress_to(&dst, &o, &|ev| progress(&f.path, ev)) {
                            Ok(s) => {
                                if !s.records_intact && a.missing_index().is_none() {
                                    damaged_records.push((a.path().to_path_buf(), f.path.clone()));
                                }
                                damaged.extend(s.damaged.into_iter().map(|d| DamagedRegion {
                                    file: Some(f.path.clone()),
                                    ..d
                                }));
                            }
                            Err(e) if e.kind() == "base_missing" || e.kind() == "io" => {
                                return Err(e)
                            }
                            Err(e) => {
                                let _ = fs::remove_file(&dst);
                                damaged.push(whole(f, &dst, e.to_string())?);
                            }
                        }
                    }
                    FileKind::Copy => {
                        let src = self.stored_path(f);
                        let copied = fs::copy(&src, &dst)
                            .map_err(|e| e.to_string())
                            .and_then(|_| file_checksum(&dst).map_err(|e| e.to_string()));
                        let why = match copied {
                            Ok((sum, len)) if len == f.bytes && hex(sum) == f.xxh3 => None,
                            Ok((sum, len)) => Some(format!(
                                "the stored copy is {len} bytes with xxh3 {}, the manifest \
                                 says {} bytes with {}",
                                hex(sum),
                                f.bytes,
                                f.xxh3
                            )),
                            Err(e) => Some(format!("the stored copy cannot be read: {e}")),
                        };
                        if let Some(why) = why {
                            let _ = fs::remove_file(&dst);
                            damaged.push(whole(f, &dst, why)?);
                        }
                    }
                }
            }
            Ok(())
        };
        fill().map_err(|e| e.relocated(tmp.path(), output))?;
        persist_dir(tmp, output, opts.force)?;
        Ok(FolderRestore {
            original_bytes: self.original_len(),
            damaged_records,
            damaged,
        })
    }
}

/// What [`Folder::decompress_to`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FolderRestore {
    /// Bytes of every restored file together.
    pub original_bytes: u64,
    /// The shard archives whose records do not hash to their stored checksum
    /// ([`Archive::records_intact`]), though the files they restored matched theirs:
    /// each archive's path with the folder path of the file it restored.
    pub damaged_records: Vec<(PathBuf, String)>,
    /// With [`DecompressOptions::salvage`]: the regions zero-filled, each with its file
    /// ([`DamagedRegion::file`]); empty when every file restored.
    pub damaged: Vec<DamagedRegion>,
}
