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
    /// Whether it was stored as a literal because the program the search found did not
    /// restore it (a defect, reported as a warning too; never set with `--no-verify`,
    /// which skips the check). A search that simply kept the literal is not a fallback:
    /// `root_op` says `lit` then. For a tensor in a group record, the group's.
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
/// a file, [`folder::default_folder_archive_name`] for a folder). For a file, an
/// `output` that is an existing folder gets the default name inside it, and a character
/// device (`/dev/null`) is written directly ([`compress_from`]).
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
    let dest = output.map_or(Destination::Default, Destination::Path);
    compress_from(Input::Path(input), dest, opts, obs)
}

/// What a job reads: a path, standard input, or bytes in memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Input<'a> {
    /// A file or folder.
    Path(&'a Path),
    /// Standard input, read whole into memory first ([`read_stdin`]).
    Stdin,
    /// The whole file, already in memory (a checkpoint a program built, an archive it
    /// received); `label` names it in messages and reports.
    Bytes {
        /// The file's bytes.
        bytes: &'a [u8],
        /// What to call it.
        label: &'a Path,
    },
}

impl Input<'_> {
    /// How the input is named in messages and reports: its path, [`STDIN_LABEL`], or
    /// the bytes' label.
    pub fn label(&self) -> PathBuf {
        match self {
            Input::Path(p) => p.to_path_buf(),
            Input::Stdin => PathBuf::from(STDIN_LABEL),
            Input::Bytes { label, .. } => label.to_path_buf(),
        }
    }
}

/// Opens the archive `input` names: a path as [`open_archive_with`] does (memory-mapped);
/// standard input read whole into memory first, at most [`stdin_limit`] bytes, as
/// `compress -` reads a checkpoint ([`read_stdin`]); bytes copied. `base` is attached
/// when given.
///
/// # Errors
/// As [`open_archive_with`] and [`read_stdin`]; an archive from standard input or bytes
/// is named by [`Input::label`] in errors.
pub fn open_archive_from(input: Input<'_>, base: Option<&Arc<BaseSet>>) -> Result<Archive> {
    let (bytes, label) = match input {
        Input::Path(p) => return open_archive_with(p, base),
        Input::Stdin => (read_stdin()?, PathBuf::from(STDIN_LABEL)),
        Input::Bytes { bytes, label } => (bytes.to_vec(), label.to_path_buf()),
    };
    let a = Archive::from_bytes(bytes, label)?;
    if let Some(b) = base {
        a.attach_base(b)?;
    }
    Ok(a)
}

/// Where a job writes the file it makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Destination<'a> {
    /// The job's default name, beside the input.
    Default,
    /// This path: a new file (or, with `force`, a replaced one), written to a temporary
    /// file beside it and renamed into place; an existing folder, to hold the file
    /// under its default name (the compressed file's name, or for `decompress` the name
    /// the archive records); an existing character device (`/dev/null`), written
    /// directly.
    Path(&'a Path),
    /// Standard output, written in order.
    Stdout,
}

/// How standard input is named in messages and reports.
pub const STDIN_LABEL: &str = "standard input";

/// Most bytes [`read_stdin`] reads: 64 GiB, or less when the system says less memory is
/// available (`MemAvailable` of `/proc/meminfo`, on Linux).
pub fn stdin_limit() -> u64 {
    const CAP: u64 = 64 << 30;
    let available = std::fs::read_to_string("/proc/meminfo").ok().and_then(|m| {
        m.lines()
            .find_map(|l| l.strip_prefix("MemAvailable:"))
            .and_then(|v| v.trim().strip_suffix("kB"))
            .and_then(|kb| kb.trim().parse::<u64>().ok())
            .map(|kb| kb.saturating_mul(1024))
    });
    available.map_or(CAP, |a| a.min(CAP))
}

/// Reads standard input to its end, at most [`stdin_limit`] bytes.
///
/// # Errors
/// As [`read_bounded`].
pub fn read_stdin() -> Result<Vec<u8>> {
    read_bounded(
        &mut std::io::stdin().lock(),
        stdin_limit(),
        Path::new(STDIN_LABEL),
    )
}

/// Reads `r` to its end into memory, refusing more than `limit` bytes. `label` names it
/// in errors.
///
/// # Errors
/// [`Error::Io`] if a read fails; [`Error::Refused`] of kind `too_large` past `limit`
/// bytes or when memory for the next chunk cannot be had.
pub fn read_bounded<R: std::io::Read + ?Sized>(
    r: &mut R,
    limit: u64,
    label: &Path,
) -> Result<Vec<u8>> {
    const CHUNK: usize = 1 << 20;
    let too_large = |why: String| {
        refused(
            "too_large",
            format!(
                "{}: {why}; write it to a file and give its name instead",
                shown_path(label)
            ),
        )
    };
    let mut buf: Vec<u8> = Vec::new();
    loop {
        if buf.len() as u64 > limit {
            return Err(too_large(format!(
                "more than {limit} bytes, the most read into memory (the memory available)"
            )));
        }
        if buf.capacity() - buf.len() < CHUNK {
            let want = buf.capacity().max(CHUNK);
            buf.try_reserve(want).map_err(|_| {
                too_large(format!(
                    "more memory than is available to hold more than {} bytes",
                    buf.len()
                ))
            })?;
        }
        let at = buf.len();
        let room = (buf.capacity() - at).min(CHUNK * 16);
        buf.resize(at + room, 0);
        match r.read(&mut buf[at..]) {
            Ok(0) => {
                buf.truncate(at);
                if buf.len() as u64 > limit {
                    continue;
                }
                return Ok(buf);
            }
            Ok(n) => buf.truncate(at + n),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => buf.truncate(at),
            Err(e) => return Err(Error::io(label, "cannot read", e)),
        }
    }
}

/// The target of a file job's output: `dest`, with `default` for
/// [`Destination::Default`] and `name_in` giving the file's name inside an existing
/// folder.
fn file_target(
    dest: Destination<'_>,
    default: impl FnOnce() -> PathBuf,
    name_in: impl FnOnce(&Path) -> Result<std::ffi::OsString>,
) -> Result<writer::Target> {
    Ok(match dest {
        Destination::Default => writer::Target::File(default()),
        Destination::Stdout => writer::Target::Stdout,
        // `out/` of a folder that exists is the folder too.
        Destination::Path(p) if std::fs::metadata(p).is_ok_and(|m| m.is_dir()) => {
            writer::Target::File(p.join(name_in(p)?))
        }
        Destination::Path(p) => writer::Target::of_path(p),
    })
}

/// The file name part of `path` (for a default name inside a folder).
fn name_part(path: &Path) -> Result<std::ffi::OsString> {
    path.file_name()
        .map(std::ffi::OsStr::to_os_string)
        .ok_or_else(|| Error::Internal {
            path: path.to_path_buf(),
            what: "a default output name without a file name".to_string(),
        })
}

/// [`compress`] of a file, folder or standard input, into any [`Destination`]: standard
/// input (a `.safetensors` file, read whole into memory, at most [`stdin_limit`]
/// bytes) needs a destination that is not a folder; a folder job writes a folder, so
/// not to standard output or a device.
///
/// # Errors
/// As [`compress`]; [`Error::Refused`] of kind `usage` for standard input without a
/// file to write or for a folder to standard output, and as [`read_stdin`].
pub fn compress_from(
    input: Input<'_>,
    dest: Destination<'_>,
    opts: &CompressOptions,
    obs: &dyn Observer,
) -> Result<CompressReport> {
    let stdin;
    let (source, input, target) = match input {
        Input::Path(input) => {
            if let Some(e) = compress_refusal(input) {
                return Err(e);
            }
            if let Some(dir) = folder::source_folder(input) {
                return match dest {
                    Destination::Default => compress_folder(&dir, None, opts, obs),
                    Destination::Path(p) => compress_folder(&dir, Some(p), opts, obs),
                    Destination::Stdout => Err(refused(
                        "usage",
                        format!(
                            "{}: a checkpoint folder compresses into a folder, which cannot \
                             be written to standard output; give -o DIR.brv",
                            shown_path(&dir)
                        ),
                    )),
                };
            }
            let target = file_target(
                dest,
                || default_archive_name(input),
                |_| name_part(&default_archive_name(input)),
            )?;
            (archive::Source::File(input), input, target)
        }
        Input::Stdin | Input::Bytes { .. } => {
            let label = input.label();
            let no_name = |why: String| {
                refused(
                    "usage",
                    format!(
                        "{} has no file name to name the archive after: {why} \
                         (-o x.brv, or -o - for standard output)",
                        shown_path(&label)
                    ),
                )
            };
            let target = file_target(dest, PathBuf::new, |dir| {
                Err(no_name(format!(
                    "{} is a folder; give the archive's file name in it",
                    shown_path(dir)
                )))
            })?;
            match &target {
                writer::Target::File(p) if p.as_os_str().is_empty() => {
                    return Err(no_name("give -o with the archive's name".to_string()));
                }
                // Refused before standard input is read, not after.
                writer::Target::File(p) => crate::files::check_output_of(None, p, opts.force)?,
                _ => {}
            }
            let (bytes, label): (&[u8], &Path) = match input {
                Input::Bytes { bytes, label } => (bytes, label),
                _ => {
                    stdin = read_stdin()?;
                    (&stdin, Path::new(STDIN_LABEL))
                }
            };
            let source = archive::Source::Bytes { bytes, label };
            (source, label, target)
        }
    };
    let stale = match &target {
        writer::Target::File(output) => warn_stale_temporaries(output, input, obs),
        _ => Vec::new(),
    };
    let start = Instant::now();
    let s = archive::compress_to(source, &target, opts, &|ev| obs.progress("", ev))?;
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
            literal_fallback: r.search.unrestored,
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

/// Compresses `bytes`, a whole `.safetensors` file in memory (`label` names it in
/// messages), into an archive in memory: the archive [`compress_from`] writes of the same
/// bytes, byte for byte, without a file (no file name is recorded unless
/// [`CompressOptions::file_name`] gives one). The source's warnings go to `obs`.
///
/// # Errors
/// [`Error::Source`] if `bytes` is not a valid `.safetensors` file; [`Error::Internal`]
/// if the worker pool cannot start or a worker panics.
pub fn compress_to_bytes(
    bytes: &[u8],
    label: &Path,
    opts: &CompressOptions,
    obs: &dyn Observer,
) -> Result<Vec<u8>> {
    let src = archive::safetensors::parse(bytes).map_err(|e| Error::source(label, e))?;
    let mut out = Vec::new();
    let written = writer::write_archive(&src, &mut out, opts, &|ev| obs.progress("", ev), label)?;
    let mut warnings = src.warnings().to_vec();
    warnings.extend(written.warnings);
    obs.file_warnings(label, &warnings);
    Ok(out)
}

/// The refusal of `input` as a source: a compressed folder (or a checkpoint folder
/// holding a file of the manifest's name).
fn compress_refusal(input: &Path) -> Option<Error> {
    let dir = folder::compressed_folder(input)?;
    if !folder::manifest_is_ours(&dir) {
        // A checkpoint folder with a stray file of the manifest's name: compressing
        // it would put two files of that name in the archive folder.
        return Some(Error::Invalid {
            path: dir.join(folder::MANIFEST_NAME),
            what: "cannot compress the folder",
            detail: "this file is not a Brevis manifest, but the compressed folder's \
                     manifest takes its name; rename or move it first"
                .to_string(),
            kind: "name_collision",
        });
    }
    Some(Error::WrongKind {
        path: input.to_path_buf(),
        found: "a Brevis folder archive".to_string(),
        expected: "a .safetensors file or checkpoint folder",
        command: "brevis decompress",
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
    /// True unless [`DecompressOptions::salvage`] zero-filled a damaged region (any
    /// other failure is an error).
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
    /// Whether every restored byte matched its checksum: always true without
    /// [`DecompressOptions::salvage`] (a mismatch is an error), false when salvage
    /// zero-filled a damaged region.
    pub checksums_ok: bool,
    /// Whether the records (names, shapes, programs) hash to their stored checksum.
    pub records_intact: bool,
    /// The regions [`DecompressOptions::salvage`] zero-filled (their tensors, offsets
    /// and why), in file order; empty otherwise.
    pub damaged: Vec<archive::DamagedRegion>,
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
    let dest = output.map_or(Destination::Default, Destination::Path);
    decompress_into(input, dest, opts, obs)
}

/// The file name a restored file gets inside a folder given as the output: the name
/// the archive records (a single plain name only), else [`default_restored_name`]'s.
fn restored_file_name(archive: &Archive, input: &Path) -> Result<std::ffi::OsString> {
    let recorded = archive
        .file_name()
        .filter(|n| Path::new(n).file_name() == Some(std::ffi::OsStr::new(n)));
    match recorded {
        Some(n) => Ok(n.into()),
        None => name_part(&default_restored_name(input)),
    }
}

/// `e`, an archive that cannot be opened (or whose header cannot be restored), as the
/// refusal of a salvage: nothing can be, and nothing was written (exit 1, not 3).
fn unsalvageable(e: Error) -> Error {
    if matches!(
        e,
        Error::Io { .. }
            | Error::WrongKind { .. }
            | Error::OutputExists { .. }
            | Error::SameFile { .. }
    ) {
        return e;
    }
    refused(
        e.kind(),
        format!(
            "{e}; --salvage cannot help: it restores the tensors around damaged tensor \
             records, and needs the header record (which names every tensor) intact (and \
             for an archive of format 3 or earlier the index and the trailer too); nothing \
             was written"
        ),
    )
}

/// [`decompress`] into any [`Destination`]: for an archive file, an existing folder
/// gets the file under the name the archive records, a character device and standard
/// output are written directly; a compressed folder restores a folder, so only to a
/// path. With [`DecompressOptions::salvage`], damaged regions are zero-filled and listed
/// in the report's `damaged` instead of failing the job: for an archive file, through
/// [`Archive::open_for_salvage`] (a format-4 archive cut short or whose index is damaged
/// is read through its records, and the tensors whose records are missing are named);
/// for a compressed folder, every file, each with the damage in it
/// ([`folder::Folder::decompress_to`]).
///
/// # Errors
/// As [`decompress`]; [`Error::Refused`] of kind `usage` for a compressed folder to
/// standard output; with salvage, an archive that cannot be opened or whose header does
/// not restore is [`Error::Refused`] of that error's kind, saying that nothing can be
/// salvaged.
pub fn decompress_into(
    input: &Path,
    dest: Destination<'_>,
    opts: &DecompressOptions,
    obs: &dyn Observer,
) -> Result<DecompressReport> {
    if let Some(dir) = folder::compressed_folder(input) {
        let output = match dest {
            Destination::Default => None,
            Destination::Path(p) => Some(p),
            Destination::Stdout => {
                return Err(refused(
                    "usage",
                    format!(
                        "{}: a compressed folder restores a folder, which cannot be written \
                         to standard output; give -o DIR",
                        shown_path(&dir)
                    ),
                ))
            }
        };
        let output = output.map_or_else(|| default_restored_folder(&dir), Path::to_path_buf);
        let f = open_folder_with(&dir, opts.base.as_ref())?;
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
        let intact = restored.damaged.is_empty();
        return Ok(DecompressReport {
            ok: intact,
            input: dir,
            output,
            original_bytes: restored.original_bytes,
            detail: DecompressDetail::Folder {
                files: f.files().len(),
            },
            seconds,
            checksums_ok: intact,
            records_intact: restored.damaged_records.is_empty(),
            damaged: restored.damaged,
            warnings,
        });
    }
    let archive = if opts.salvage {
        // An archive of format 4 whose index is cut off or damaged is read through its
        // records.
        match folder::not_an_archive(input) {
            Some(e) => Err(e),
            None => Archive::open_for_salvage(input),
        }
        .map_err(unsalvageable)?
    } else {
        open_archive(input)?
    };
    let target = file_target(
        dest,
        || default_restored_name(input),
        |_| restored_file_name(&archive, input),
    )?;
    decompress_archive(&archive, input, &target, opts, obs)
}

/// [`decompress_into`] of an archive given as `input`: a path, or standard input or
/// bytes read whole into memory first ([`open_archive_from`], at most [`stdin_limit`]
/// bytes from standard input, as `compress -` reads). An archive from standard input or
/// bytes needs a destination: a file, an existing folder (the file inside it under the
/// name the archive records), a device or standard output.
///
/// # Errors
/// As [`decompress_into`] and [`open_archive_from`]; [`Error::Refused`] of kind `usage`
/// for standard input or bytes with [`Destination::Default`], or into a folder when
/// the archive records no file name.
pub fn decompress_from(
    input: Input<'_>,
    dest: Destination<'_>,
    opts: &DecompressOptions,
    obs: &dyn Observer,
) -> Result<DecompressReport> {
    let Input::Path(path) = input else {
        let label = input.label();
        let no_name = |why: String| {
            refused(
                "usage",
                format!(
                    "{} has no file name to name the restored file after: {why} \
                     (-o x.safetensors, or -o - for standard output)",
                    shown_path(&label)
                ),
            )
        };
        if dest == Destination::Default {
            return Err(no_name("give -o with the file's name".to_string()));
        }
        // The base is attached by the restore itself, as for a path.
        let archive = open_archive_from(input, None).map_err(|e| {
            if opts.salvage {
                unsalvageable(e)
            } else {
                e
            }
        })?;
        let target = file_target(dest, PathBuf::new, |dir| {
            archive
                .file_name()
                .filter(|n| Path::new(n).file_name() == Some(std::ffi::OsStr::new(n)))
                .map(std::ffi::OsString::from)
                .ok_or_else(|| {
                    no_name(format!(
                        "the archive records no file name to write in {}",
                        shown_path(dir)
                    ))
                })
        })?;
        return decompress_archive(&archive, &label, &target, opts, obs);
    };
    decompress_into(path, dest, opts, obs)
}

/// Restores the open `archive` (named `input` in reports) into `target`.
fn decompress_archive(
    archive: &Archive,
    input: &Path,
    target: &writer::Target,
    opts: &DecompressOptions,
    obs: &dyn Observer,
) -> Result<DecompressReport> {
    let mut warnings = match target {
        writer::Target::File(output) => warn_stale_temporaries(output, input, obs),
        _ => Vec::new(),
    };
    let start = Instant::now();
    let s = archive
        .decompress_into(target, opts, &|ev| obs.progress("", ev))
        .map_err(|e| {
            if opts.salvage && e.is_mismatch() {
                unsalvageable(e)
            } else {
                e
            }
        })?;
    let seconds = start.elapsed().as_secs_f64();
    if let Some(missing) = archive.missing_index() {
        let w = format!(
            "{}: restored without its index ({missing}); every tensor written was checked \
             against its own checksum, the whole file could not be",
            shown_path(input)
        );
        obs.warning(&w);
        warnings.push(w);
    } else if !s.records_intact && s.damaged.is_empty() {
        // The restored bytes are proved by the per-tensor and whole-file checksums;
        // damage to names or shapes in the records does not change them but is worth
        // saying.
        let w = format!(
            "{}: the archive's records (names, shapes, programs) do not match \
             their stored checksum; the restored file matches its whole-file checksum",
            shown_path(input)
        );
        obs.warning(&w);
        warnings.push(w);
    }
    let intact = s.damaged.is_empty();
    Ok(DecompressReport {
        ok: intact,
        input: input.to_path_buf(),
        output: s.output,
        original_bytes: s.original_bytes,
        detail: DecompressDetail::File {
            archive_bytes: archive.archive_len(),
        },
        seconds,
        checksums_ok: intact,
        records_intact: s.records_intact,
        damaged: s.damaged,
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
