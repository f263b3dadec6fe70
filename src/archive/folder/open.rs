//! An opened compressed folder: its shards and files checked against the manifest,
//! verified, compared with a source folder, and restored; and the shards of a base given
//! as a folder.

use super::manifest::{
    compressed_folder, files_checksum, manifest_length, shard_mismatch, stored_names, FileKind,
    FolderFile, Manifest, FORMAT, MANIFEST_NAME, VERSION,
};
use super::walk::{
    check_folder_output, file_checksum, first_stranger, hex, is_shard, list_files, make_parent,
    other, persist_dir, read_json_file, safe_relative, source_folder, Walk,
};
use crate::archive::base::{BaseSet, OpenedSource};
use crate::archive::format::SourceRole;
use crate::archive::progress::ProgressEvent;
use crate::archive::reader::{Archive, DamagedRegion, DecompressOptions};
use crate::archive::verify::{verify, verify_against, CompareReport, VerifyReport};
use crate::error::{Error, Result};
use crate::files::temp_beside_dir;
use std::collections::BTreeSet;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

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

/// An opened compressed folder: its manifest, with archives opened on demand.
#[derive(Clone, Debug)]
pub struct Folder {
    pub(super) root: PathBuf,
    pub(super) files: Vec<FolderFile>,
    /// The base its shards are coded against, when given ([`Folder::set_base`]).
    pub(super) base: Option<Arc<BaseSet>>,
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
pub(super) fn compare_files(ours: &Path, theirs: &Path) -> Result<CompareReport> {
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
    pub(super) fn link(&self, a: &Archive) -> Result<()> {
        self.link_as(a, false)
    }

    /// [`Folder::link`]; for a salvage (`salvage`), a sibling shard is opened as
    /// [`Archive::open_for_salvage`] does, and one that cannot be opened at all is left
    /// unattached (the tensors taken from it then fail alone).
    pub(super) fn link_as(&self, a: &Archive, salvage: bool) -> Result<()> {
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

    pub(super) fn check_copy(&self, f: &FolderFile) -> Result<bool> {
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
    pub(super) fn salvage_to(
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
