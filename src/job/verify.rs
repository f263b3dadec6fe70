//! `verify`: an archive or compressed folder against its stored checksums, and
//! optionally against the original.

use super::{lossy, open_archive_with, open_folder_with, refused, warn_unlisted, Input, Observer};
use crate::archive::base::BaseSet;
use crate::archive::{self, folder, shown_path, Archive, CheckStatus, ProgressEvent};
use crate::error::Result;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The outcome of one region, as `verify --json` prints it (`status` and its fields).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "lowercase")]
pub enum RegionStatus {
    /// The decoded bytes match the stored checksum.
    Ok,
    /// They differ: both checksums (xxh3-64) as 16 hex digits.
    Mismatch {
        /// The stored checksum.
        expected: String,
        /// The decoded bytes' checksum.
        actual: String,
    },
    /// The program could not be read or run.
    Undecodable {
        /// Why.
        what: String,
    },
}

impl From<&CheckStatus> for RegionStatus {
    fn from(s: &CheckStatus) -> RegionStatus {
        match s {
            CheckStatus::Ok => RegionStatus::Ok,
            CheckStatus::Mismatch { expected, actual } => RegionStatus::Mismatch {
                expected: format!("{expected:016x}"),
                actual: format!("{actual:016x}"),
            },
            CheckStatus::Undecodable { what } => RegionStatus::Undecodable { what: what.clone() },
        }
    }
}

/// One region's check.
#[derive(Clone, Debug, Serialize)]
pub struct RegionResult {
    /// `header`, `tensor "name"` or `gap at data bytes [b, e)`.
    pub region: String,
    /// Original bytes of the region.
    pub bytes: u64,
    /// The tensor's name, for a tensor.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tensor: Option<String>,
    /// The outcome.
    #[serde(flatten)]
    pub status: RegionStatus,
}

/// A decoded archive compared byte for byte with a file.
#[derive(Clone, Debug, Serialize)]
pub struct ComparedFile {
    /// The original file.
    #[serde(serialize_with = "lossy")]
    pub file: PathBuf,
    /// Whether they are identical.
    pub identical: bool,
    /// Offset in bytes of the first difference (or of the end of the shorter one).
    pub first_difference: Option<u64>,
    /// Length of the file in bytes.
    pub file_bytes: u64,
    /// Length of the decoded archive in bytes.
    pub decoded_bytes: u64,
}

/// What [`verify`] found in one archive; serializes as `verify --json` prints it.
#[derive(Clone, Debug, Serialize)]
pub struct VerifyFile {
    /// The archive.
    #[serde(serialize_with = "lossy")]
    pub archive: PathBuf,
    /// Whether everything matched (and the original is identical, when given).
    pub ok: bool,
    /// Length of the original in bytes.
    pub original_bytes: u64,
    /// Whether the restored file matches the whole-file checksum.
    pub file_checksum_ok: bool,
    /// Whether the records hash to their stored checksum.
    pub records_intact: bool,
    /// Records that disagree with the stored header, one line each.
    pub disagreements: Vec<String>,
    /// Regions that did not match.
    pub failed: usize,
    /// Every region, header first.
    pub regions: Vec<RegionResult>,
    /// The comparison with the original, when asked for.
    pub against: Option<ComparedFile>,
    /// Tensors in the archive.
    #[serde(skip)]
    pub tensor_count: usize,
    /// Gaps in the archive.
    #[serde(skip)]
    pub gap_count: usize,
}

impl VerifyFile {
    /// The regions that did not match.
    pub fn failures(&self) -> impl Iterator<Item = &RegionResult> {
        self.regions.iter().filter(|r| r.status != RegionStatus::Ok)
    }

    /// Whether every region, the whole file and the records matched (the original not
    /// considered).
    pub fn checksums_ok(&self) -> bool {
        self.file_checksum_ok && self.records_intact && self.failed == 0
    }

    /// What is wrong, one line per damaged region (`REGION: what`), then the records'
    /// checksum if it does not match.
    pub fn failure_lines(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .failures()
            .filter_map(|f| {
                let what = match &f.status {
                    RegionStatus::Mismatch { expected, actual } => {
                        format!("checksum mismatch (stored {expected}, decoded {actual})")
                    }
                    RegionStatus::Undecodable { what } => format!("cannot decode: {what}"),
                    RegionStatus::Ok => return None,
                };
                Some(format!("{}: {what}", f.region))
            })
            .collect();
        if !self.records_intact {
            out.push(
                "the archive's records (names, shapes, programs) do not match their stored \
                 checksum"
                    .to_string(),
            );
        }
        out
    }
}

/// One file of a compressed folder, checked.
#[derive(Clone, Debug, Serialize)]
pub struct VerifiedFile {
    /// Its path inside the folder.
    pub path: String,
    /// Whether it is intact.
    pub ok: bool,
    /// What is wrong, one line each (empty when ok).
    pub failures: Vec<String>,
}

/// One file of a compressed folder compared with the original folder.
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "status", rename_all = "lowercase")]
pub enum FolderComparison {
    /// Compared byte for byte and equal.
    Identical {
        /// Path inside the folder.
        path: String,
        /// Bytes of the original.
        file_bytes: u64,
        /// Bytes decoded.
        decoded_bytes: u64,
        /// Always `None`.
        first_difference: Option<u64>,
    },
    /// Compared and different.
    Differs {
        /// Path inside the folder.
        path: String,
        /// Bytes of the original.
        file_bytes: u64,
        /// Bytes decoded.
        decoded_bytes: u64,
        /// Offset in bytes of the first difference.
        first_difference: Option<u64>,
    },
    /// Restored by the archive, absent from the original folder.
    Missing {
        /// Path inside the folder.
        path: String,
    },
    /// In the original folder, not restored by the archive.
    Extra {
        /// Path inside the folder.
        path: String,
    },
}

/// A compressed folder compared with the original folder.
#[derive(Clone, Debug, Serialize)]
pub struct FolderAgainst {
    /// The original folder.
    #[serde(serialize_with = "lossy")]
    pub folder: PathBuf,
    /// Whether every file is identical.
    pub identical: bool,
    /// One entry per file.
    pub files: Vec<FolderComparison>,
}

/// What [`verify`] found in a compressed folder; serializes as `verify --json` prints
/// it.
#[derive(Clone, Debug, Serialize)]
pub struct VerifyFolder {
    /// The compressed folder.
    #[serde(serialize_with = "lossy")]
    pub folder: PathBuf,
    /// Whether everything matched.
    pub ok: bool,
    /// One entry per file of the manifest.
    pub files: Vec<VerifiedFile>,
    /// Files in the folder that its manifest does not name.
    pub unlisted: Vec<String>,
    /// The comparison with the original folder, when asked for.
    pub against: Option<FolderAgainst>,
    /// Shards in the folder.
    #[serde(skip)]
    pub shard_count: usize,
    /// Bytes of every file it restores.
    #[serde(skip)]
    pub original_bytes: u64,
}

/// What [`verify`] found.
#[derive(Clone, Debug, Serialize)]
#[serde(untagged)]
pub enum VerifyReport {
    /// One archive.
    File(VerifyFile),
    /// A compressed folder.
    Folder(VerifyFolder),
}

impl VerifyReport {
    /// Whether everything matched.
    pub fn ok(&self) -> bool {
        match self {
            VerifyReport::File(v) => v.ok,
            VerifyReport::Folder(v) => v.ok,
        }
    }
}

/// Decodes every region of `input` (an archive or compressed folder) on `jobs` threads
/// (`None` = all cores) and compares it with the stored checksums; with `against`, also
/// compares the decoded file byte for byte with the original (for a folder: every file
/// with the original folder, or its `model.safetensors.index.json`). Damage is the
/// report's result (`ok` false), not an error.
///
/// # Errors
/// [`Error::Refused`](crate::Error::Refused) of kind `wrong_kind` if `against` is a
/// folder for a single-file archive; as [`open_archive`](crate::job::open_archive) or [`folder::Folder::open`] if
/// the archive cannot be opened; [`crate::Error::Io`] if the original cannot be read.
pub fn verify(
    input: &Path,
    against: Option<&Path>,
    jobs: Option<usize>,
    base: Option<&Arc<BaseSet>>,
    obs: &dyn Observer,
) -> Result<VerifyReport> {
    if let Some(dir) = folder::compressed_folder(input) {
        return verify_folder(&dir, against, jobs, base, obs).map(VerifyReport::Folder);
    }
    let archive = open_archive_with(input, base)?;
    verify_archive(&archive, input, against, jobs, obs)
}

/// [`verify`] of an archive given as `input`: a path, standard input or bytes, read
/// whole into memory ([`super::open_archive_from`]) unless it is a path. A compressed
/// folder is a path only.
///
/// # Errors
/// As [`verify`] and [`super::open_archive_from`].
pub fn verify_from(
    input: Input<'_>,
    against: Option<&Path>,
    jobs: Option<usize>,
    base: Option<&Arc<BaseSet>>,
    obs: &dyn Observer,
) -> Result<VerifyReport> {
    match input {
        Input::Path(p) => verify(p, against, jobs, base, obs),
        _ => {
            let archive = super::open_archive_from(input, base)?;
            verify_archive(&archive, &input.label(), against, jobs, obs)
        }
    }
}

/// [`verify`] of an archive already open; `input` names it in the report.
fn verify_archive(
    archive: &Archive,
    input: &Path,
    against: Option<&Path>,
    jobs: Option<usize>,
    obs: &dyn Observer,
) -> Result<VerifyReport> {
    if let Some(original) = against {
        // A folder or shard index is what a folder archive is compared with; against a
        // single-file archive it compared the index's own bytes.
        if folder::source_folder(original).is_some() {
            return Err(refused(
                "wrong_kind",
                format!(
                    "{}: is a checkpoint folder or shard index, and {} is a single-file \
                     archive: --against takes the original .safetensors file it was made \
                     from",
                    shown_path(original),
                    shown_path(input)
                ),
            ));
        }
    }
    let progress = |ev: ProgressEvent<'_>| obs.progress("", ev);
    let report = archive::verify(archive, jobs, &progress)?;
    let compared = match against {
        Some(original) => Some(archive::verify_against(archive, original, jobs, &progress)?),
        None => None,
    };
    let ok = report.is_ok() && compared.as_ref().is_none_or(|c| c.identical);
    // Which record disagrees with the stored header, when the records are damaged.
    let disagreements = if report.records_intact {
        Vec::new()
    } else {
        archive.header_disagreements().unwrap_or_default()
    };
    let regions = report
        .regions
        .iter()
        .map(|r| RegionResult {
            region: r.region.clone(),
            bytes: r.bytes,
            tensor: r.tensor.map(|i| archive.tensors()[i].name.clone()),
            status: (&r.status).into(),
        })
        .collect();
    Ok(VerifyReport::File(VerifyFile {
        archive: input.to_path_buf(),
        ok,
        original_bytes: report.original_bytes,
        file_checksum_ok: report.file_checksum_ok,
        records_intact: report.records_intact,
        disagreements,
        failed: report.failures().count(),
        regions,
        against: compared.zip(against).map(|(c, path)| ComparedFile {
            file: path.to_path_buf(),
            identical: c.identical,
            first_difference: c.first_difference,
            file_bytes: c.file_bytes,
            decoded_bytes: c.decoded_bytes,
        }),
        tensor_count: archive.tensors().len(),
        gap_count: archive.gaps().len(),
    }))
}

/// [`VerifyFile::failure_lines`] for one file of a folder archive.
fn folder_failure_lines(check: &folder::FileCheck, path: &Path) -> Vec<String> {
    match check {
        folder::FileCheck::Archive(r, manifest) => {
            let file = VerifyFile {
                archive: path.to_path_buf(),
                ok: r.is_ok(),
                original_bytes: r.original_bytes,
                file_checksum_ok: r.file_checksum_ok,
                records_intact: r.records_intact,
                disagreements: Vec::new(),
                failed: r.failures().count(),
                regions: r
                    .failures()
                    .map(|f| RegionResult {
                        region: f.region.clone(),
                        bytes: f.bytes,
                        tensor: None,
                        status: (&f.status).into(),
                    })
                    .collect(),
                against: None,
                tensor_count: 0,
                gap_count: 0,
            };
            let mut lines = file.failure_lines();
            if lines.is_empty() && !r.file_checksum_ok {
                lines.push("whole-file checksum does not match".to_string());
            }
            lines.extend(manifest.clone());
            lines
        }
        folder::FileCheck::Copy { .. } => {
            vec!["copied file's length or checksum differs from the manifest".to_string()]
        }
    }
}

fn verify_folder(
    dir: &Path,
    against: Option<&Path>,
    jobs: Option<usize>,
    base: Option<&Arc<BaseSet>>,
    obs: &dyn Observer,
) -> Result<VerifyFolder> {
    let f = open_folder_with(dir, base)?;
    f.require_sources()?;
    let unlisted = warn_unlisted(&f, dir, obs);
    let progress = |shard: &str, ev: ProgressEvent<'_>| obs.progress(shard, ev);
    let checks = f.verify(jobs, &progress)?;
    let compared = match against {
        Some(original) => Some(f.verify_against(original, jobs, &progress)?),
        None => None,
    };
    // Differences are named in the original folder, also when it was given by its
    // shard index.
    let against_dir = against.map(|p| folder::source_folder(p).unwrap_or_else(|| p.to_path_buf()));
    let checks_ok = checks.iter().all(|(_, c)| c.is_ok());
    let identical = compared
        .as_ref()
        .is_none_or(|v| v.iter().all(|(_, c)| c.is_identical()));
    let files = checks
        .iter()
        .map(|(path, c)| VerifiedFile {
            path: path.clone(),
            ok: c.is_ok(),
            failures: if c.is_ok() {
                Vec::new()
            } else {
                folder_failure_lines(c, &f.root().join(path))
            },
        })
        .collect();
    let against = compared.zip(against_dir).map(|(v, folder)| FolderAgainst {
        folder,
        identical,
        files: v
            .into_iter()
            .map(|(path, c)| match c {
                folder::FileComparison::Compared(c) if c.identical => FolderComparison::Identical {
                    path,
                    file_bytes: c.file_bytes,
                    decoded_bytes: c.decoded_bytes,
                    first_difference: c.first_difference,
                },
                folder::FileComparison::Compared(c) => FolderComparison::Differs {
                    path,
                    file_bytes: c.file_bytes,
                    decoded_bytes: c.decoded_bytes,
                    first_difference: c.first_difference,
                },
                folder::FileComparison::Missing => FolderComparison::Missing { path },
                folder::FileComparison::Extra => FolderComparison::Extra { path },
            })
            .collect(),
    });
    Ok(VerifyFolder {
        folder: dir.to_path_buf(),
        ok: checks_ok && identical,
        files,
        unlisted,
        against,
        shard_count: f.shards().count(),
        original_bytes: f.original_len(),
    })
}
