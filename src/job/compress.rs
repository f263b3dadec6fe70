//! `compress`: a file, a checkpoint folder, standard input or bytes in memory into an
//! archive (or a compressed folder), with its report.

use super::*;

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

/// [`Archive::open_for_salvage`] of the archive `input` names: a path, or standard
/// input or bytes read whole into memory first as [`open_archive_from`] reads them (an
/// archive cut short or whose index is damaged is read through its records).
///
/// # Errors
/// As [`Archive::open_for_salvage`] and [`read_stdin`].
pub fn open_archive_for_salvage_from(input: Input<'_>) -> Result<Archive> {
    match input {
        Input::Path(p) => match folder::not_an_archive(p) {
            Some(e) => Err(e),
            None => Archive::open_for_salvage(p),
        },
        Input::Stdin => Archive::from_bytes_for_salvage(read_stdin()?, STDIN_LABEL),
        Input::Bytes { bytes, label } => {
            Archive::from_bytes_for_salvage(bytes.to_vec(), label.to_path_buf())
        }
    }
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
pub(super) fn file_target(
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
pub(super) fn name_part(path: &Path) -> Result<std::ffi::OsString> {
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
pub(super) fn compress_refusal(input: &Path) -> Option<Error> {
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

pub(super) fn compress_folder(
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
