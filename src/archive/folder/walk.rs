//! Walking a checkpoint folder (regular files only, links to files followed, anything
//! else refused with its path) and the checks on a folder job's output: never the input
//! folder, inside it or holding it, and `--force` never deleting a file the job did not
//! write.

use crate::error::{Error, Result};
use crate::files::{check_replaceable, rename_temp_dir};
use crate::hash::Xxh3;
use std::collections::BTreeSet;
use std::fs;
use std::io;
use std::path::{Component, Path, PathBuf};

/// Largest manifest or index JSON read, in bytes.
pub(super) const MAX_JSON_BYTES: u64 = 256 << 20;

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

/// An error about `path`, worded `PATH: WHAT: MSG`, of the [`Error::kind`] that `what`
/// says: a damaged manifest is a damaged archive, an incomplete or invalid checkpoint an
/// invalid source, a path `--against` cannot take the wrong kind of input; the refusals
/// of the file system's entries (links to folders, devices) stay `io`.
pub(super) fn other(path: &Path, what: &'static str, msg: String) -> Error {
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

/// Why a folder is walked, for the wording of a refusal: the verb of the error (`cannot
/// archive`, `cannot replace`, ...) and what to do about a link to a folder.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Walk {
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
    pub(super) fn verb(self) -> &'static str {
        match self {
            Walk::Archive => "cannot archive",
            Walk::Bench => "cannot bench",
            Walk::Calibrate => "cannot calibrate",
            Walk::Replace => "cannot replace",
            Walk::Compare => "cannot compare",
        }
    }

    /// Why a link to a folder is refused, and what to do about it.
    pub(super) fn link_refusal(self) -> &'static str {
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
pub(super) fn list_files(root: &Path, walk: Walk) -> Result<Vec<String>> {
    Ok(list_tree(root, walk)?.0)
}

/// [`list_files`], and the folders under `root` (relative, `/`-separated, sorted).
pub(super) fn list_tree(root: &Path, walk: Walk) -> Result<(Vec<String>, Vec<String>)> {
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
pub(super) fn first_stranger(dir: &Path, ours: &BTreeSet<&str>) -> Result<Option<String>> {
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
pub(super) fn empty_folders(files: &[String], dirs: &[String]) -> Vec<String> {
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
pub(super) fn entry_kind(path: &Path, walk: Walk) -> Result<fs::Metadata> {
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
pub(super) fn resolved(path: &Path) -> PathBuf {
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
pub(super) fn check_folder_output(
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

pub(super) fn is_shard(rel: &str) -> bool {
    rel.ends_with(".safetensors")
}

pub(super) fn archive_name(rel: &str) -> String {
    format!("{}.brv", rel.strip_suffix(".safetensors").unwrap_or(rel))
}

/// A relative `/`-separated path that stays inside its folder.
pub(super) fn safe_relative(rel: &str) -> bool {
    !rel.is_empty()
        && Path::new(rel)
            .components()
            .all(|c| matches!(c, Component::Normal(_)))
}

pub(super) fn read_json_file(path: &Path) -> Result<Vec<u8>> {
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

pub(super) fn quoted(names: &[&str], at_most: usize) -> String {
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
pub(super) fn file_checksum(path: &Path) -> Result<(u64, u64)> {
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

pub(super) fn hex(x: u64) -> String {
    format!("{x:016x}")
}

/// Creates the folders between `root` (a temporary folder) and `path`'s parent, one
/// level at a time and never `root` itself: if a signal has removed `root`, this fails
/// instead of bringing it back (which `create_dir_all` would, leaving it behind).
pub(super) fn make_parent(root: &Path, path: &Path) -> Result<()> {
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

/// Renames a complete temporary folder to `output`, replacing it only if `force`.
pub(super) fn persist_dir(tmp: tempfile::TempDir, output: &Path, force: bool) -> Result<()> {
    let exists = output.exists();
    if exists && !force {
        return Err(Error::OutputExists {
            path: output.to_path_buf(),
        });
    }
    rename_temp_dir(tmp, output, exists)
        .map_err(|e| Error::io(output, "cannot rename into place", e))
}
