//! A checkpoint's shard index (`model.safetensors.index.json`) checked against its
//! shards before anything is written, and the shards a folder job reads.

use super::walk::{is_shard, list_files, other, quoted, read_json_file, Walk};
use crate::archive::safetensors::parse;
use crate::error::{Error, Result};
use crate::files::map_file;
use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Component, Path, PathBuf};

/// File name of the Hugging Face shard index.
pub const INDEX_NAME: &str = "model.safetensors.index.json";

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
pub(super) fn check_indexes(root: &Path, files: &[String]) -> Result<()> {
    for index in files.iter().filter(|f| f.ends_with(".index.json")) {
        let path = root.join(index);
        let dir = path.parent().unwrap_or(root);
        check_index(dir, &path)?;
    }
    Ok(())
}

/// Tensor names of a `.safetensors` file (parsing it strictly).
pub(super) fn shard_tensor_names(path: &Path) -> Result<BTreeSet<String>> {
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
