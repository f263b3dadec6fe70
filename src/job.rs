//! One library path for files and checkpoint folders: the jobs the CLI, the TUI and the
//! Python package run.
//!
//! Each job takes a path that is a `.safetensors` file or checkpoint folder (for
//! [`compress`], [`calibrate`] and [`bench()`]) or a `.brv` archive or compressed folder
//! (for [`decompress`], [`verify`], [`list`] and [`show`]), reports progress and warnings
//! to an [`Observer`] as they happen, and returns a report that serializes with serde
//! into the object `brevis COMMAND --json` prints (paths as lossy UTF-8 strings, sizes in
//! bytes, times in seconds). Printing is left to the caller.
//!
//! ```no_run
//! use brevis::job::{self, Silent};
//! let report = job::compress(
//!     "model.safetensors".as_ref(),
//!     None,
//!     &brevis::CompressOptions::default(),
//!     &Silent,
//! )?;
//! println!("{} -> {} bytes", report.original_bytes, report.archive_bytes);
//! # Ok::<(), brevis::Error>(())
//! ```

mod bench;
mod inspect;
mod verify;

pub use bench::{
    ablation, bench, mb_per_s, AblationRow, BenchOptions, BenchReport, BenchRow, NodeBytes,
    SearchReport, TensorSearch,
};
pub use inspect::{
    list, show, FolderListEntry, ListFile, ListFolder, ListReport, ListedGap, ListedHeader,
    ListedTensor, NodeRow, ShowReport,
};
pub use verify::{
    verify, ComparedFile, FolderAgainst, FolderComparison, RegionResult, RegionStatus,
    VerifiedFile, VerifyFile, VerifyFolder, VerifyReport,
};

use crate::archive::writer::{self, RegionKind, RegionStat};
use crate::archive::{
    self, escape_name, folder, resolve_jobs, shown_path, Archive, CompressOptions,
    DecompressOptions, ProgressEvent,
};
use crate::error::{Error, Result, Warning};
use crate::synth::{prior::ReadPriorError, Prior, PriorChoice};
use serde::{Serialize, Serializer};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

/// What a job reports while it runs. Every method has a default that ignores the event,
/// so an observer implements only what it shows. Calls come from the thread that runs
/// the job.
pub trait Observer: Sync {
    /// Progress of the work in bytes of original data; for a folder, `shard` is the
    /// path inside the folder of the shard the event belongs to (empty for a file).
    fn progress(&self, _shard: &str, _event: ProgressEvent<'_>) {}

    /// A warning, as one line without a `warning: ` prefix (paths already escaped for
    /// a terminal). The job goes on.
    fn warning(&self, _text: &str) {}

    /// The warnings of compressing one file (`file`, the source): by default each as
    /// [`Observer::warning`] of `FILE: WARNING`.
    fn file_warnings(&self, file: &Path, warnings: &[Warning]) {
        for w in warnings {
            self.warning(&format!("{}: {w}", shown_path(file)));
        }
    }

    /// A failure found that is the job's result rather than an error (a tensor `show`
    /// did not find because the archive is damaged), as one line without an `error: `
    /// prefix; the report (or its absence) says that the job did not succeed.
    fn failure(&self, _text: &str) {}
}

/// An [`Observer`] that ignores everything.
#[derive(Clone, Copy, Debug, Default)]
pub struct Silent;

impl Observer for Silent {}

/// A path as a JSON string (lossy for paths that are not UTF-8, which JSON cannot hold).
pub(crate) fn lossy<S: Serializer>(path: &Path, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_str(&path.to_string_lossy())
}

/// How much smaller `archive` is than `original`, in percent (negative when it grew);
/// `None` for an empty original.
pub fn percent_smaller(original: u64, archive: u64) -> Option<f64> {
    (original > 0).then(|| (1.0 - archive as f64 / original as f64) * 100.0)
}

/// `n` and `noun`, plural unless `n` is 1: `1 shard`, `3 shards`, `0 gaps`.
pub fn plural(n: usize, noun: &str) -> String {
    format!("{n} {noun}{}", if n == 1 { "" } else { "s" })
}

/// A job-level refusal: [`Error::Refused`] of `kind` saying `message`.
pub(crate) fn refused(kind: &'static str, message: String) -> Error {
    Error::Refused { kind, message }
}

/// Reads the production prior at `path` (JSON from [`calibrate`]) as the prior a job
/// orders its search by.
///
/// # Errors
/// [`Error::Io`] if the file cannot be read; [`Error::Refused`] of kind `invalid_prior`
/// if it is not a prior.
pub fn read_prior(path: &Path) -> Result<PriorChoice> {
    match Prior::read_file(path) {
        Ok(p) => Ok(PriorChoice::Given(Arc::new(p))),
        Err(ReadPriorError::Io(e)) => Err(e),
        Err(e) => Err(refused(
            "invalid_prior",
            format!("{}: {e}", shown_path(path)),
        )),
    }
}

/// `input` with extension `ext` replaced by `replacement` (`""`: removed), or, with any
/// other extension, with `appended` added to its name.
fn renamed(input: &Path, ext: &str, replacement: &str, appended: &str) -> PathBuf {
    if input.extension().is_some_and(|e| e == ext) {
        input.with_extension(replacement)
    } else {
        let mut s = input.as_os_str().to_owned();
        s.push(appended);
        PathBuf::from(s)
    }
}

/// `x.safetensors` -> `x.brv` (anything else: `.brv` appended).
pub fn default_archive_name(input: &Path) -> PathBuf {
    renamed(input, "safetensors", "brv", ".brv")
}

/// `x.brv` -> `x.safetensors` (anything else: `.safetensors` appended).
pub fn default_restored_name(input: &Path) -> PathBuf {
    renamed(input, "brv", "safetensors", ".safetensors")
}

/// `x.brv/` -> `x/`; anything else: `.restored` appended.
pub fn default_restored_folder(input: &Path) -> PathBuf {
    renamed(&folder::with_name(input), "brv", "", ".restored")
}

/// Warns about the temporaries runs killed by SIGKILL left beside `output` (never
/// `input`): nothing removes them, as a name proves nothing about what a file holds.
/// Returns the warnings, for the report's `warnings`.
fn warn_stale_temporaries(output: &Path, input: &Path, obs: &dyn Observer) -> Vec<String> {
    let mut said = Vec::new();
    for t in writer::stale_temporaries(output, input) {
        let kind = if t.folder { "folder" } else { "file" };
        let w = format!(
            "{}: a temporary {kind} left by brevis process {}, which no longer runs; \
             nothing reads it, delete it if you do not need it",
            shown_path(&t.path),
            t.pid
        );
        obs.warning(&w);
        said.push(w);
    }
    said
}

/// Warns about each file inside the compressed folder that its manifest does not name
/// (nothing restores it), or that the folder could not be listed to look; returns their
/// paths.
fn warn_unlisted(f: &folder::Folder, dir: &Path, obs: &dyn Observer) -> Vec<String> {
    match f.unlisted() {
        Ok(paths) => {
            for p in &paths {
                obs.warning(&format!(
                    "{}: not named by the folder's manifest, so not restored",
                    shown_path(&f.root().join(p))
                ));
            }
            paths
        }
        Err(e) => {
            obs.warning(&format!(
                "{}: cannot look for files the manifest does not name: {e}",
                shown_path(dir)
            ));
            Vec::new()
        }
    }
}

/// Opens the archive `path`; a `.safetensors` file, shard index or plain folder is
/// refused saying what it is and that `compress` takes it (rather than "wrong magic
/// bytes" or "is a directory").
///
/// # Errors
/// [`Error::WrongKind`] for such an input; as [`Archive::open`] otherwise.
pub fn open_archive(path: &Path) -> Result<Archive> {
    if let Some(e) = folder::not_an_archive(path) {
        return Err(e);
    }
    Archive::open(path)
}

/// One record of a compressed file (the header or a gap), as in `compress --json`.
#[derive(Clone, Debug, Serialize)]
pub struct CompressedRegion {
    /// Bytes of the original it restores.
    pub original_bytes: u64,
    /// Bytes of its record.
    pub archive_bytes: u64,
    /// Bytes of its program (part of `archive_bytes`).
    pub program_bytes: u64,
    /// The program's root operator.
    pub root_op: &'static str,
}

impl CompressedRegion {
    fn of(r: &RegionStat) -> CompressedRegion {
        CompressedRegion {
            original_bytes: r.original_bytes,
            archive_bytes: r.archive_bytes,
            program_bytes: r.program_bytes,
            root_op: r.root_op,
        }
    }
}

/// One tensor of a compressed file, as in `compress --json`.
#[derive(Clone, Debug, Serialize)]
pub struct CompressedTensor {
    /// Its name.
    pub name: String,
    /// Its dtype's name (`BF16`, ...).
    pub dtype: Option<&'static str>,
    /// Its shape.
    pub shape: Vec<u64>,
    /// Bytes of the original.
    pub original_bytes: u64,
    /// Bytes of its record (its share, in a group).
    pub archive_bytes: u64,
    /// Bytes of its program.
    pub program_bytes: u64,
    /// [`percent_smaller`] of the two sizes.
    pub reduction_percent: Option<f64>,
    /// The program's root operator.
    pub root_op: &'static str,
    /// Partial programs the search expanded.
    pub expansions: u64,
    /// Whether it was stored as a literal because its program did not restore it.
    pub literal_fallback: bool,
}

/// What [`compress`] wrote beyond the common figures: a file's records or a folder's
/// shards.
#[derive(Clone, Debug, Serialize)]
#[serde(untagged)]
pub enum CompressDetail {
    /// A `.safetensors` file was compressed into one archive.
    File {
        /// The header's record.
        header: Option<CompressedRegion>,
        /// Every tensor, in file order.
        tensors: Vec<CompressedTensor>,
        /// The records of bytes no tensor owns.
        gaps: Vec<CompressedRegion>,
    },
    /// A checkpoint folder was compressed into a folder.
    Folder {
        /// One entry per shard, in path order.
        shards: Vec<CompressedShard>,
        /// Files copied as they are (paths inside the folder).
        copied: Vec<String>,
        /// Empty folders, which are not kept.
        empty_folders: Vec<String>,
    },
}

/// One shard of a compressed folder, as in `compress --json`.
#[derive(Clone, Debug, Serialize)]
pub struct CompressedShard {
    /// The shard.
    #[serde(serialize_with = "lossy")]
    pub input: PathBuf,
    /// Its archive.
    #[serde(serialize_with = "lossy")]
    pub output: PathBuf,
    /// Bytes of the shard.
    pub original_bytes: u64,
    /// Bytes of its archive.
    pub archive_bytes: u64,
    /// Its tensor count.
    pub tensors: usize,
}

/// What [`compress`] did; serializes as `brevis compress --json` prints it.
#[derive(Clone, Debug, Serialize)]
pub struct CompressReport {
    /// Always true (a failure is an error).
    pub ok: bool,
    /// The source file or folder.
    #[serde(serialize_with = "lossy")]
    pub input: PathBuf,
    /// The archive (or archive folder) written.
    #[serde(serialize_with = "lossy")]
    pub output: PathBuf,
    /// Bytes of the source.
    pub original_bytes: u64,
    /// Bytes written.
    pub archive_bytes: u64,
    /// [`percent_smaller`] of the two.
    pub reduction_percent: Option<f64>,
    /// Wall time of the job in seconds.
    pub seconds: f64,
    /// Worker threads used.
    pub jobs: usize,
    /// The file's records or the folder's shards.
    #[serde(flatten)]
    pub detail: CompressDetail,
    /// Every warning, in the order reported.
    pub warnings: Vec<String>,
}

impl CompressReport {
    /// Tensors compressed, over every shard.
    pub fn tensor_count(&self) -> usize {
        match &self.detail {
            CompressDetail::File { tensors, .. } => tensors.len(),
            CompressDetail::Folder { shards, .. } => shards.iter().map(|s| s.tensors).sum(),
        }
    }
}

/// Compresses `input`, a `.safetensors` file or checkpoint folder (or its
/// `model.safetensors.index.json`), into `output` (default: [`default_archive_name`] for
/// a file, [`folder::default_folder_archive_name`] for a folder).
///
/// # Errors
/// [`Error::WrongKind`] if `input` is a compressed folder; [`Error::Invalid`] of kind
/// `name_collision` if a checkpoint folder holds a file named as the manifest; as
/// [`archive::compress_file`] or [`folder::compress_folder`] otherwise.
pub fn compress(
    input: &Path,
    output: Option<&Path>,
    opts: &CompressOptions,
    obs: &dyn Observer,
) -> Result<CompressReport> {
    if let Some(dir) = folder::compressed_folder(input) {
        if !folder::manifest_is_ours(&dir) {
            // A checkpoint folder with a stray file of the manifest's name: compressing
            // it would put two files of that name in the archive folder.
            return Err(Error::Invalid {
                path: dir.join(folder::MANIFEST_NAME),
                what: "cannot compress the folder",
                detail: "this file is not a Brevis manifest, but the compressed folder's \
                         manifest takes its name; rename or move it first"
                    .to_string(),
                kind: "name_collision",
            });
        }
        return Err(Error::WrongKind {
            path: input.to_path_buf(),
            found: "a Brevis folder archive".to_string(),
            expected: "a .safetensors file or checkpoint folder",
            command: "brevis decompress",
        });
    }
    if let Some(dir) = folder::source_folder(input) {
        return compress_folder(&dir, output, opts, obs);
    }
    let output = output.map_or_else(|| default_archive_name(input), Path::to_path_buf);
    let stale = warn_stale_temporaries(&output, input, obs);
    let start = Instant::now();
    let s = archive::compress_file(input, &output, opts, &|ev| obs.progress("", ev))?;
    let seconds = start.elapsed().as_secs_f64();
    obs.file_warnings(input, &s.warnings);
    let tensors = s
        .tensors()
        .map(|r| CompressedTensor {
            name: r.label.clone(),
            dtype: r.dtype.map(|d| d.name()),
            shape: r.shape.clone(),
            original_bytes: r.original_bytes,
            archive_bytes: r.archive_bytes,
            program_bytes: r.program_bytes,
            reduction_percent: percent_smaller(r.original_bytes, r.archive_bytes),
            root_op: r.root_op,
            expansions: r.search.expansions,
            literal_fallback: r.search.literal_fallback,
        })
        .collect();
    let header = s
        .regions
        .iter()
        .find(|r| r.kind == RegionKind::Header)
        .map(CompressedRegion::of);
    let gaps = s
        .regions
        .iter()
        .filter(|r| r.kind == RegionKind::Gap)
        .map(CompressedRegion::of)
        .collect();
    let mut warnings: Vec<String> = s.warnings.iter().map(ToString::to_string).collect();
    warnings.extend(stale);
    Ok(CompressReport {
        ok: true,
        reduction_percent: percent_smaller(s.original_bytes, s.archive_bytes),
        input: s.input,
        output: s.output,
        original_bytes: s.original_bytes,
        archive_bytes: s.archive_bytes,
        seconds,
        jobs: resolve_jobs(opts.jobs),
        detail: CompressDetail::File {
            header,
            tensors,
            gaps,
        },
        warnings,
    })
}

fn compress_folder(
    dir: &Path,
    output: Option<&Path>,
    opts: &CompressOptions,
    obs: &dyn Observer,
) -> Result<CompressReport> {
    let output = output.map_or_else(
        || folder::default_folder_archive_name(dir),
        Path::to_path_buf,
    );
    let mut warnings = warn_stale_temporaries(&output, dir, obs);
    let start = Instant::now();
    let s = folder::compress_folder(dir, &output, opts, &|shard, ev| obs.progress(shard, ev))?;
    let seconds = start.elapsed().as_secs_f64();
    for shard in &s.shards {
        obs.file_warnings(&shard.input, &shard.warnings);
        let file = shown_path(&shard.input);
        warnings.extend(shard.warnings.iter().map(|w| format!("{file}: {w}")));
    }
    let empty = s.empty_folders.iter().map(|d| {
        format!(
            "{}: empty folder \"{}\" is not kept (an archive folder holds files only)",
            shown_path(&s.input),
            escape_name(d)
        )
    });
    // Copied as they are, as every other file of the folder; but one is likely garbage.
    let temporaries = s
        .copied
        .iter()
        .filter(|p| {
            Path::new(p.as_str())
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(writer::is_temporary_name)
        })
        .map(|p| {
            format!(
                "{}: copied \"{}\", which is named like a temporary left by a killed brevis \
                 run (delete it from the folder if it is one)",
                shown_path(&s.input),
                escape_name(p)
            )
        });
    for w in empty.chain(temporaries) {
        obs.warning(&w);
        warnings.push(w);
    }
    let shards = s
        .shards
        .iter()
        .map(|c| CompressedShard {
            input: c.input.clone(),
            output: c.output.clone(),
            original_bytes: c.original_bytes,
            archive_bytes: c.archive_bytes,
            tensors: c.tensors().count(),
        })
        .collect();
    Ok(CompressReport {
        ok: true,
        reduction_percent: percent_smaller(s.original_bytes, s.archive_bytes),
        input: s.input,
        output: s.output,
        original_bytes: s.original_bytes,
        archive_bytes: s.archive_bytes,
        seconds,
        jobs: resolve_jobs(opts.jobs),
        detail: CompressDetail::Folder {
            shards,
            copied: s.copied,
            empty_folders: s.empty_folders,
        },
        warnings,
    })
}

/// What [`decompress`] restored beyond the common figures.
#[derive(Clone, Debug, Serialize)]
#[serde(untagged)]
pub enum DecompressDetail {
    /// One archive restored one file.
    File {
        /// Bytes of the archive.
        archive_bytes: u64,
    },
    /// A compressed folder restored a folder.
    Folder {
        /// Files restored.
        files: usize,
    },
}

/// What [`decompress`] did; serializes as `brevis decompress --json` prints it.
#[derive(Clone, Debug, Serialize)]
pub struct DecompressReport {
    /// Always true (a failure is an error).
    pub ok: bool,
    /// The archive or compressed folder.
    #[serde(serialize_with = "lossy")]
    pub input: PathBuf,
    /// The file or folder written.
    #[serde(serialize_with = "lossy")]
    pub output: PathBuf,
    /// Bytes restored.
    pub original_bytes: u64,
    /// The archive's size, or the folder's file count.
    #[serde(flatten)]
    pub detail: DecompressDetail,
    /// Wall time in seconds.
    pub seconds: f64,
    /// Always true: every restored byte matched its checksum (else it is an error).
    pub checksums_ok: bool,
    /// Whether the records (names, shapes, programs) hash to their stored checksum.
    pub records_intact: bool,
    /// Every warning, in the order reported.
    pub warnings: Vec<String>,
}

/// Restores the original of `input`, a `.brv` archive or compressed folder, into
/// `output` (default: [`default_restored_name`], or [`default_restored_folder`]).
/// Nothing is written unless every checksum matches.
///
/// # Errors
/// As [`open_archive`] and [`Archive::decompress_to`], or [`folder::Folder::open`] and
/// [`folder::Folder::decompress_to`].
pub fn decompress(
    input: &Path,
    output: Option<&Path>,
    opts: &DecompressOptions,
    obs: &dyn Observer,
) -> Result<DecompressReport> {
    if let Some(dir) = folder::compressed_folder(input) {
        let output = output.map_or_else(|| default_restored_folder(&dir), Path::to_path_buf);
        let f = folder::Folder::open(&dir)?;
        let mut warnings = warn_stale_temporaries(&output, &dir, obs);
        warn_unlisted(&f, &dir, obs);
        let start = Instant::now();
        let restored = f.decompress_to(&output, opts, &|shard, ev| obs.progress(shard, ev))?;
        let seconds = start.elapsed().as_secs_f64();
        // As for one archive: damaged records that did not change the restored bytes
        // are worth saying.
        for (archive, file) in &restored.damaged_records {
            let w = format!(
                "{}: the archive's records (names, shapes, programs) do not match \
                 their stored checksum; the restored {file:?} matches its whole-file checksum",
                shown_path(archive),
            );
            obs.warning(&w);
            warnings.push(w);
        }
        return Ok(DecompressReport {
            ok: true,
            input: dir,
            output,
            original_bytes: restored.original_bytes,
            detail: DecompressDetail::Folder {
                files: f.files().len(),
            },
            seconds,
            checksums_ok: true,
            records_intact: restored.damaged_records.is_empty(),
            warnings,
        });
    }
    let output = output.map_or_else(|| default_restored_name(input), Path::to_path_buf);
    let archive = open_archive(input)?;
    let mut warnings = warn_stale_temporaries(&output, input, obs);
    let start = Instant::now();
    let s = archive.decompress_to(&output, opts, &|ev| obs.progress("", ev))?;
    let seconds = start.elapsed().as_secs_f64();
    // The restored bytes are proved by the per-tensor and whole-file checksums; damage
    // to names or shapes in the records does not change them but is worth saying.
    if !s.records_intact {
        let w = format!(
            "{}: the archive's records (names, shapes, programs) do not match \
             their stored checksum; the restored file matches its whole-file checksum",
            shown_path(input)
        );
        obs.warning(&w);
        warnings.push(w);
    }
    Ok(DecompressReport {
        ok: true,
        input: input.to_path_buf(),
        output: s.output,
        original_bytes: s.original_bytes,
        detail: DecompressDetail::File {
            archive_bytes: archive.archive_len(),
        },
        seconds,
        checksums_ok: true,
        records_intact: s.records_intact,
        warnings,
    })
}

/// What [`calibrate`] wrote.
#[derive(Clone, Debug, Serialize)]
pub struct CalibrateReport {
    /// The prior file written (JSON).
    #[serde(serialize_with = "lossy")]
    pub output: PathBuf,
    /// The `.safetensors` file calibrated on.
    #[serde(serialize_with = "lossy")]
    pub calibrated_on: PathBuf,
    /// Contexts the prior counts productions in.
    pub contexts: usize,
    /// Where the prior came from (its `source` field).
    pub source: String,
    /// Time of the calibration in seconds.
    pub seconds: f64,
}

/// Learns a production prior from `input`, a `.safetensors` file or checkpoint folder
/// (calibrated on its first shard in path order), and writes it to `output` as JSON.
///
/// # Errors
/// [`Error::OutputExists`] if `output` exists and `force` is false (checked before the
/// work); [`Error::Invalid`] if `output` lies inside the folder; [`Error::Source`] if
/// the file is not a valid `.safetensors` file; [`Error::Io`] if a file cannot be read
/// or written.
pub fn calibrate(input: &Path, output: &Path, force: bool) -> Result<CalibrateReport> {
    // Refused before the work, and checked again when writing.
    writer::check_output(input, output, force)?;
    // A checkpoint folder (or its shard index) is calibrated on its first shard: a few
    // tensors are all calibration reads, and the prior then serves every shard.
    let file = match folder::source_folder(input) {
        Some(dir) => {
            folder::check_output_outside(&dir, output)?;
            folder::shard_paths(&dir, folder::ShardsFor::Calibrate)?
                .into_iter()
                .next()
                .ok_or_else(|| Error::Internal {
                    path: dir.clone(),
                    what: "shard_paths gave no shard".to_string(),
                })?
        }
        None => input.to_path_buf(),
    };
    let map = writer::map_input(&file)?;
    let src = archive::safetensors::parse(map.as_deref().unwrap_or(&[]))
        .map_err(|e| Error::source(&file, e))?;
    let start = Instant::now();
    let prior = writer::calibrate_source(&src, &file);
    let seconds = start.elapsed().as_secs_f64();
    let json = prior.to_json() + "\n";
    writer::write_output_file(input, output, force, json.as_bytes())?;
    Ok(CalibrateReport {
        output: output.to_path_buf(),
        calibrated_on: file,
        contexts: prior.counts.len(),
        source: prior.source,
        seconds,
    })
}
