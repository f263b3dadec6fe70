//! One library path for files and checkpoint folders: the jobs the CLI, the TUI and the
//! Python package run.
//!
//! Each job takes a path that is a `.safetensors` file or checkpoint folder (for
//! [`compress`], [`calibrate`] and [`bench()`]) or a `.brv` archive or compressed folder
//! (for [`decompress`], [`extract`], [`verify`], [`list`], [`show`] and [`why::why`]), reports progress and warnings
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
mod compress;
mod decompress;
mod extract;
mod inspect;
mod verify;
pub mod why;

pub use bench::{
    ablation, bench, mb_per_s, AblationRow, BenchOptions, BenchReport, BenchRow, NodeBytes,
    SearchReport, TensorSearch,
};
pub use extract::{extract, nearest_name, ExtractReport};
pub use inspect::{
    list, list_from, show, FolderListEntry, ListFile, ListFolder, ListReport, ListedGap,
    ListedHeader, ListedTensor, NodeRow, ShowReport,
};
pub use verify::{
    verify, verify_from, ComparedFile, FolderAgainst, FolderComparison, RegionResult, RegionStatus,
    VerifiedFile, VerifyFile, VerifyFolder, VerifyReport,
};

use crate::archive::base::BaseSet;
use crate::archive::writer::{self, RegionKind, RegionStat};
use crate::archive::{
    self, escape_name, folder, resolve_jobs, shown_path, Archive, CompressOptions,
    DecompressOptions, ProgressEvent,
};
use crate::error::{Error, Result, Warning};
use crate::synth::{prior::ReadPriorError, Prior, PriorChoice};
pub use compress::*;
pub use decompress::*;
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

/// [`open_archive`], with `base` (the base checkpoint it was coded against) attached
/// when given.
///
/// # Errors
/// As [`open_archive`] and [`Archive::attach_base`] (a base of another length or
/// checksum than the archive pins).
pub fn open_archive_with(path: &Path, base: Option<&Arc<BaseSet>>) -> Result<Archive> {
    let a = open_archive(path)?;
    if let Some(b) = base {
        a.attach_base(b)?;
    }
    Ok(a)
}

/// [`folder::Folder::open`], with `base` set ([`folder::Folder::set_base`]).
///
/// # Errors
/// As [`folder::Folder::open`].
pub fn open_folder_with(dir: &Path, base: Option<&Arc<BaseSet>>) -> Result<folder::Folder> {
    let mut f = folder::Folder::open(dir)?;
    f.set_base(base.cloned());
    Ok(f)
}

/// Opens the base checkpoint `--base` names ([`BaseSet::open`]): a `.safetensors`
/// file, a checkpoint folder, an archive or a compressed folder of one.
///
/// # Errors
/// As [`BaseSet::open`].
pub fn open_base(path: &Path) -> Result<Arc<BaseSet>> {
    BaseSet::open(path).map(Arc::new)
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
