//! Compressing a checkpoint folder: every shard into its archive, every other file
//! copied, the manifest last, all in a temporary folder renamed into place.

use super::index::check_indexes;
use super::manifest::{
    manifest_bytes, stored_names, FileKind, FolderFile, Manifest, FORMAT, MANIFEST_NAME, VERSION,
};
use super::open::Folder;
use super::walk::{
    archive_name, check_folder_output, empty_folders, file_checksum, first_stranger, hex, is_shard,
    list_tree, make_parent, other, persist_dir, Walk,
};
use crate::archive::base::OpenedSource;
use crate::archive::progress::ProgressEvent;
use crate::archive::writer::{compress_file, CompressOptions, CompressSummary, Links};
use crate::error::{Error, Result};
use crate::files::temp_beside_dir;
use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

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

/// Compresses the checkpoint folder `input` (every `.safetensors` file into a `.brv`,
/// every other file copied) into the folder `output` (see the module doc for the
/// layout). Shards are compressed one after another, each on `opts.jobs` threads.
///
/// # Errors
/// As [`check_index`](crate::archive::folder::check_index) if the folder's index names a missing shard or tensor;
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
