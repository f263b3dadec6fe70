//! Writing archives: `.safetensors` in, `.brv` out (DESIGN §7, §8).
//!
//! The source is memory-mapped and parsed ([`super::safetensors::parse`]); the header,
//! every tensor and every gap become one record each ([`super::format`]), synthesized in
//! parallel on a pool of `jobs` threads with a bounded window in flight, and written in
//! source order through a buffered writer into a temporary file in the output's folder,
//! which is synced and then renamed into place. The archive's bytes depend only on the
//! source and the search options, never on the number of threads.

use super::format::{self, TensorMeta};
use super::safetensors::{parse, Region, SourceFile};
use super::{build_pool, ordered_pipeline, resolve_jobs, ProgressEvent};
use crate::dsl::{execute, program_bytes, Node, Ty};
use crate::error::{Error, Result, Warning};
use crate::synth::{synthesize, SearchOptions, SearchStats};
use crate::tensor::{Dtype, Words};
use std::fs::{self, File};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use xxhash_rust::xxh3::{xxh3_64, Xxh3Default};

/// How to compress.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompressOptions {
    /// Search budget and limits for every region.
    pub search: SearchOptions,
    /// Worker threads (`None` = all cores). The output does not depend on it.
    pub jobs: Option<usize>,
    /// Replace an existing output file.
    pub force: bool,
    /// Run every synthesized program and compare its output with the source before
    /// writing it; a program that differs is replaced by a literal, with a warning.
    pub verify: bool,
}

impl Default for CompressOptions {
    fn default() -> Self {
        CompressOptions {
            search: SearchOptions::default(),
            jobs: None,
            force: false,
            verify: true,
        }
    }
}

/// What kind of region a record holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RegionKind {
    /// The source's header (length field and JSON text).
    Header,
    /// A tensor.
    Tensor,
    /// Bytes of the data region that no tensor owns.
    Gap,
}

/// What compressing one region gave.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegionStat {
    /// The kind of region.
    pub kind: RegionKind,
    /// The tensor's name, or `(header)` / `(gap)`.
    pub label: String,
    /// The tensor's dtype (`None` for header and gaps, which are bytes).
    pub dtype: Option<Dtype>,
    /// The tensor's shape (empty for header and gaps).
    pub shape: Vec<u64>,
    /// Bytes of the original file this region restores (for the header, including the
    /// 8-byte length field).
    pub original_bytes: u64,
    /// Bytes of its record in the archive.
    pub archive_bytes: u64,
    /// Bytes of its program (part of `archive_bytes`).
    pub program_bytes: u64,
    /// The program's root operator (`lit`, `merge`, ...).
    pub root_op: &'static str,
    /// What the search did.
    pub search: SearchStats,
}

/// What [`compress_file`] did.
#[derive(Clone, Debug)]
pub struct CompressSummary {
    /// The source file.
    pub input: PathBuf,
    /// The archive written.
    pub output: PathBuf,
    /// Length of the source in bytes.
    pub original_bytes: u64,
    /// Length of the archive in bytes.
    pub archive_bytes: u64,
    /// One entry per record, in archive order (header first).
    pub regions: Vec<RegionStat>,
    /// Unusual things in the source (all preserved) and synthesis fallbacks.
    pub warnings: Vec<Warning>,
}

impl CompressSummary {
    /// The tensor entries, in archive (data-offset) order.
    pub fn tensors(&self) -> impl Iterator<Item = &RegionStat> {
        self.regions.iter().filter(|r| r.kind == RegionKind::Tensor)
    }
}

/// Compresses the `.safetensors` file `input` into the archive `output`.
///
/// The archive is written to a temporary file next to `output` and renamed into place
/// only when complete and synced; on any error nothing is left behind. `progress` is
/// called from the calling thread, in file order.
///
/// # Errors
/// [`Error::SameFile`] if `output` is `input`; [`Error::OutputExists`] if `output`
/// exists and `opts.force` is false; [`Error::Source`] if `input` is not a valid
/// `.safetensors` file; [`Error::Io`] if a file cannot be read or written.
pub fn compress_file(
    input: &Path,
    output: &Path,
    opts: &CompressOptions,
    progress: &dyn Fn(ProgressEvent<'_>),
) -> Result<CompressSummary> {
    check_output(input, output, opts.force)?;
    let file = File::open(input).map_err(|e| Error::io(input, "cannot open", e))?;
    let meta = file
        .metadata()
        .map_err(|e| Error::io(input, "cannot read", e))?;
    if meta.is_dir() {
        return Err(Error::io(input, "cannot read", is_a_directory()));
    }
    // An empty file cannot be mapped; it is refused by the parser all the same.
    let map = if meta.len() == 0 {
        None
    } else {
        Some(super::map_file(&file).map_err(|e| Error::io(input, "cannot map", e))?)
    };
    let bytes: &[u8] = map.as_deref().unwrap_or(&[]);
    let src = parse(bytes).map_err(|e| Error::source(input, e))?;

    let mut tmp = temp_beside(output)?;
    let written = {
        let mut w = BufWriter::with_capacity(1 << 20, tmp.as_file_mut());
        let written = write_archive(&src, &mut w, opts, progress, output)?;
        w.flush()
            .map_err(|e| Error::io(output, "cannot write", e))?;
        written
    };
    tmp.as_file()
        .sync_all()
        .map_err(|e| Error::io(output, "cannot sync", e))?;
    persist(tmp, output, opts.force)?;

    let mut warnings = src.warnings().to_vec();
    warnings.extend(written.warnings);
    Ok(CompressSummary {
        input: input.to_path_buf(),
        output: output.to_path_buf(),
        original_bytes: bytes.len() as u64,
        archive_bytes: written.archive_bytes,
        regions: written.regions,
        warnings,
    })
}

/// What [`write_archive`] wrote.
#[derive(Clone, Debug)]
pub struct Written {
    /// Bytes written.
    pub archive_bytes: u64,
    /// One entry per record, header first.
    pub regions: Vec<RegionStat>,
    /// Synthesis fallbacks (the source's own warnings are in [`SourceFile::warnings`]).
    pub warnings: Vec<Warning>,
}

/// Writes the archive of a parsed source to `out` (e.g. a `Vec<u8>` for in-memory use).
/// `name` labels errors.
///
/// # Errors
/// [`Error::Io`] if `out` fails; [`Error::Internal`] if the worker pool cannot start or
/// a worker panics.
pub fn write_archive<W: Write>(
    src: &SourceFile<'_>,
    out: &mut W,
    opts: &CompressOptions,
    progress: &dyn Fn(ProgressEvent<'_>),
    name: &Path,
) -> Result<Written> {
    let jobs = resolve_jobs(opts.jobs);
    let pool = build_pool(jobs).map_err(|what| Error::Internal {
        path: name.to_path_buf(),
        what,
    })?;
    let regions = src.regions();
    let count = regions.len() + 1;
    let write_err = |e: io::Error| Error::io(name, "cannot write", e);

    out.write_all(&format::file_header()).map_err(write_err)?;
    let mut offset = format::FILE_HEADER_LEN as u64;
    let mut record_lens = Vec::with_capacity(count);
    let mut stats = Vec::with_capacity(count);
    let mut warnings = Vec::new();
    let mut hasher = Xxh3Default::new();
    let mut records_hasher = Xxh3Default::new();
    let data = src.data();

    progress(ProgressEvent::Begin {
        items: count,
        bytes: src.bytes().len() as u64,
    });
    ordered_pipeline(
        &pool,
        count,
        |i| Ok(encode_item(src, i, opts)),
        |i, enc: Encoded| {
            let source_bytes = match i.checked_sub(1).map(|r| regions[r]) {
                None => &src.bytes()[..src.data_start()],
                Some(Region::Tensor(t)) => src.tensor_bytes(t),
                Some(Region::Gap { begin, end }) => &data[begin as usize..end as usize],
            };
            hasher.update(source_bytes);
            records_hasher.update(&enc.head);
            records_hasher.update(&enc.program);
            out.write_all(&enc.head).map_err(write_err)?;
            out.write_all(&enc.program).map_err(write_err)?;
            let len = (enc.head.len() + enc.program.len()) as u64;
            offset += len;
            record_lens.push(len);
            progress(ProgressEvent::Item {
                label: &enc.stat.label,
                bytes: enc.stat.original_bytes,
            });
            stats.push(enc.stat);
            warnings.extend(enc.warning);
            Ok(())
        },
        |i| Error::Internal {
            path: name.to_path_buf(),
            what: format!("worker panicked on record {i}"),
        },
    )?;

    let index = format::Index {
        tensor_count: src.tensors().len() as u64,
        original_len: src.bytes().len() as u64,
        file_checksum: hasher.digest(),
        records_checksum: records_hasher.digest(),
        record_lens,
    };
    let mut tail = Vec::new();
    format::write_index(&mut tail, &index);
    let trailer = format::trailer(offset, &tail);
    tail.extend_from_slice(&trailer);
    out.write_all(&tail).map_err(write_err)?;
    progress(ProgressEvent::End);
    Ok(Written {
        archive_bytes: offset + tail.len() as u64,
        regions: stats,
        warnings,
    })
}

/// One encoded record (written as `head` then `program`, so the program is not copied)
/// and what it took.
struct Encoded {
    head: Vec<u8>,
    program: Vec<u8>,
    stat: RegionStat,
    warning: Option<Warning>,
}

/// Encodes record `i`: 0 is the header, `i >= 1` is region `i - 1`.
fn encode_item(src: &SourceFile<'_>, i: usize, opts: &CompressOptions) -> Encoded {
    let region = i.checked_sub(1).map(|r| src.regions()[r]);
    // The bytes the record restores, and the dtype they are read as (bytes otherwise).
    let (bytes, dtype) = match region {
        None => (src.header(), None),
        Some(Region::Tensor(t)) => (src.tensor_bytes(t), Some(src.tensors()[t].dtype)),
        Some(Region::Gap { begin, end }) => (&src.data()[begin as usize..end as usize], None),
    };
    let width = dtype.map_or(8, Dtype::word_bits);
    let words = Words::from_le_bytes(width, bytes)
        .expect("the parser checked every byte length against its dtype");
    let describe = || match region {
        None => "header".to_string(),
        Some(Region::Tensor(t)) => format!("tensor {:?}", src.tensors()[t].name),
        Some(Region::Gap { begin, end }) => format!("gap at data bytes [{begin}, {end})"),
    };
    let (node, search, warning) = program_for(&words, dtype, opts, describe);
    drop(words);
    let program = program_bytes(&node);
    let program_len = program.len() as u64;
    let checksum = xxh3_64(bytes);

    let mut head = Vec::new();
    let (kind, label, shape, original_bytes) = match region {
        None => {
            format::header_record_head(&mut head, src.header_len(), checksum, program_len);
            let original = src.data_start() as u64;
            (
                RegionKind::Header,
                "(header)".to_string(),
                Vec::new(),
                original,
            )
        }
        Some(Region::Tensor(t)) => {
            let info = &src.tensors()[t];
            let meta = TensorMeta {
                name: info.name.clone(),
                header_index: info.header_index as u64,
                dtype: info.dtype,
                shape: info.shape.clone(),
                begin: info.begin,
                end: info.end,
                checksum,
            };
            format::tensor_record_head(&mut head, &meta, program_len);
            (
                RegionKind::Tensor,
                meta.name,
                meta.shape,
                bytes.len() as u64,
            )
        }
        Some(Region::Gap { begin, end }) => {
            format::gap_record_head(&mut head, begin, end, checksum, program_len);
            (
                RegionKind::Gap,
                "(gap)".to_string(),
                Vec::new(),
                bytes.len() as u64,
            )
        }
    };
    let stat = RegionStat {
        kind,
        label,
        dtype,
        shape,
        original_bytes,
        archive_bytes: head.len() as u64 + program_len,
        program_bytes: program_len,
        root_op: node.op_name(),
        search,
    };
    Encoded {
        head,
        program,
        stat,
        warning,
    }
}

/// Synthesizes a program for `words`; checks its type (always) and its output (when
/// `opts.verify`), falling back to a literal with a warning if either is wrong.
fn program_for(
    words: &Words,
    dtype: Option<Dtype>,
    opts: &CompressOptions,
    region: impl Fn() -> String,
) -> (Node, SearchStats, Option<Warning>) {
    let literal = |stats: SearchStats| {
        let stats = SearchStats {
            literal_fallback: true,
            ..stats
        };
        (Node::lit(words), stats)
    };
    if words.is_empty() {
        let (node, stats) = literal(SearchStats::default());
        return (node, stats, None);
    }
    let syn = synthesize(words, dtype, &opts.search);
    let want = Ty::new(words.width(), words.len() as u64);
    let problem = if syn.program.ty() != want {
        Some(format!(
            "program type {} instead of {want}",
            syn.program.ty()
        ))
    } else if opts.verify {
        match execute(&syn.program, want.len) {
            Ok(out) if out == *words => None,
            Ok(_) => Some("its output differs".to_string()),
            Err(e) => Some(e.to_string()),
        }
    } else {
        None
    };
    match problem {
        None => (syn.program, syn.stats, None),
        Some(what) => {
            let (node, stats) = literal(syn.stats);
            let warning = Warning::Fallback {
                region: region(),
                what,
            };
            (node, stats, Some(warning))
        }
    }
}

fn is_a_directory() -> io::Error {
    io::Error::other("is a directory")
}

/// Refuses an output that is the input, is a folder, or exists without `force`.
pub(crate) fn check_output(input: &Path, output: &Path, force: bool) -> Result<()> {
    let Ok(out_meta) = fs::metadata(output) else {
        return Ok(());
    };
    if same_file(input, output) {
        return Err(Error::SameFile {
            path: output.to_path_buf(),
        });
    }
    if out_meta.is_dir() {
        return Err(Error::io(output, "cannot write", is_a_directory()));
    }
    if !force {
        return Err(Error::OutputExists {
            path: output.to_path_buf(),
        });
    }
    Ok(())
}

/// Whether two existing paths name the same file (following symlinks and hard links).
fn same_file(a: &Path, b: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        if let (Ok(ma), Ok(mb)) = (fs::metadata(a), fs::metadata(b)) {
            return ma.dev() == mb.dev() && ma.ino() == mb.ino();
        }
        false
    }
    #[cfg(not(unix))]
    {
        match (fs::canonicalize(a), fs::canonicalize(b)) {
            (Ok(x), Ok(y)) => x == y,
            _ => false,
        }
    }
}

/// A temporary file in the folder of `output`, removed on drop unless persisted.
pub(crate) fn temp_beside(output: &Path) -> Result<tempfile::NamedTempFile> {
    let dir = match output.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let mut builder = tempfile::Builder::new();
    builder.prefix(".brevis-").suffix(".tmp");
    // Temporary files are private (0600) by default; the finished file should get the
    // usual permissions of a new file, which the umask then narrows.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        builder.permissions(fs::Permissions::from_mode(0o666));
    }
    builder
        .tempfile_in(dir)
        .map_err(|e| Error::io(output, "cannot create a temporary file in its folder", e))
}

/// Renames a complete, synced temporary file to `output` (replacing it only if `force`),
/// then syncs the folder so the rename is durable.
pub(crate) fn persist(tmp: tempfile::NamedTempFile, output: &Path, force: bool) -> Result<()> {
    let result = if force {
        tmp.persist(output).map(drop)
    } else {
        tmp.persist_noclobber(output).map(drop)
    };
    if let Err(e) = result {
        return Err(if e.error.kind() == io::ErrorKind::AlreadyExists {
            Error::OutputExists {
                path: output.to_path_buf(),
            }
        } else {
            Error::io(output, "cannot rename into place", e.error)
        });
    }
    if let Some(dir) = output.parent().filter(|d| !d.as_os_str().is_empty()) {
        // Best effort: not every file system lets a folder be synced.
        let _ = File::open(dir).and_then(|d| d.sync_all());
    }
    Ok(())
}
