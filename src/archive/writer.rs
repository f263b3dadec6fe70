//! Writing archives: `.safetensors` in, `.brv` out (DESIGN §7, §8).
//!
//! The source is memory-mapped and parsed ([`super::safetensors::parse`]); the header,
//! every tensor and every gap become one record each ([`super::format`]), synthesized in
//! parallel on a pool of `jobs` threads with a bounded window in flight, and written in
//! source order through a buffered writer into a temporary file in the output's folder,
//! which is synced and then renamed into place. The archive's bytes depend only on the
//! source and the search options, never on the number of threads.

use super::base::{BaseSet, Counterpart, OpenedSource};
use super::format::{self, HeadV4, HeaderV4, RefOp, RegionHead, SourceEntry, SourceRole};
use super::pool::{build_pool, ordered_pipeline_bounded, resolve_jobs};
use super::progress::ProgressEvent;
use super::safetensors::{parse, Region, SourceFile};
use crate::codec::CodecId;
use crate::dsl::wire::{program_pieces, Piece};
use crate::dsl::{program_len, Lit, Node, Ty};
use crate::error::{Error, Result, Warning};
pub use crate::files::{
    check_output, completed_outputs, is_temporary_name, remove_temporary_files, stale_temporaries,
    write_output_file, write_target, RemovedTemporaries, StaleTemporary, Target, STDOUT_LABEL,
};
use crate::files::{check_output_of, open_direct, persist, temp_beside};
use crate::hash::{xxh3_64, Xxh3};
use crate::synth::{synthesize_matrix, PriorChoice, SearchOptions, SearchStats};
use crate::tensor::{Dtype, Words};
use rayon::prelude::*;
use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// How to compress.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompressOptions {
    /// Search budget and limits for every region.
    pub search: SearchOptions,
    /// Worker threads (`None` = all cores). The output does not depend on it.
    pub jobs: Option<usize>,
    /// Replace an existing output file.
    pub force: bool,
    /// Check every synthesized program against the source before writing it
    /// ([`crate::dsl::matches`]: exactly what running it and comparing says); a program
    /// that differs is replaced by a literal, with a warning.
    pub verify: bool,
    /// Production prior ordering the search; [`PriorChoice::Auto`] calibrates on the
    /// input (DESIGN §6) when the prior can change the result
    /// ([`SearchOptions::prior_matters`]). Never changes what a program serializes to.
    pub prior: PriorChoice,
    /// The source's file name, stored in the archive for `decompress` to restore (no
    /// folders). [`compress_file`] sets it from its input when `None`.
    pub file_name: Option<String>,
    /// What the file's tensors may be coded against (a base checkpoint, earlier shards
    /// of its folder): an archive with any reference record is format version 3.
    pub links: Option<Arc<Links>>,
}

/// The files a `.safetensors` file's tensors may be coded against (docs/design.md §12).
#[derive(Clone, Debug, Default)]
pub struct Links {
    /// The base checkpoint (`--base`): each tensor with a counterpart there
    /// ([`BaseSet::counterparts`]) is coded alone, against it by XOR or by subtraction,
    /// whichever of the three is smallest.
    pub base: Option<Arc<BaseSet>>,
    /// Earlier shards of the same checkpoint folder.
    pub shards: Vec<Arc<OpenedSource>>,
    /// Each non-empty tensor of `shards` by (xxh3-64 of its bytes, byte length, dtype):
    /// its shard (an index into `shards`) and position. A tensor with the same bytes is
    /// stored as a reference to it (the first one listed wins).
    pub shard_tensors: HashMap<(u64, u64, Dtype), (usize, usize)>,
}

impl PartialEq for Links {
    fn eq(&self, other: &Links) -> bool {
        let sums = |l: &Links| {
            l.shards
                .iter()
                .map(|s| (s.original_len(), s.checksum()))
                .collect::<Vec<_>>()
        };
        self.base == other.base
            && sums(self) == sums(other)
            && self.shard_tensors == other.shard_tensors
    }
}

impl Eq for Links {}

impl Links {
    /// Links to a base checkpoint only.
    pub fn base(base: BaseSet) -> Links {
        Links {
            base: Some(Arc::new(base)),
            ..Links::default()
        }
    }
}

impl Default for CompressOptions {
    fn default() -> Self {
        CompressOptions {
            search: SearchOptions::default(),
            jobs: None,
            force: false,
            verify: true,
            prior: PriorChoice::Auto,
            file_name: None,
            links: None,
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
    /// What the search did (a group's search is counted with its first tensor).
    pub search: SearchStats,
    /// Tensors sharing its record: 1 for a record of its own, the group's size for a
    /// tensor in a group (its `archive_bytes` and `program_bytes` are then its share,
    /// in proportion to its original bytes).
    pub group_size: usize,
    /// The tensor whose record its record copies (same bytes, stored once).
    pub copy_of: Option<String>,
    /// The tensor of another file its record is coded against.
    pub reference: Option<ReferenceStat>,
}

/// What a reference record is coded against ([`RegionStat::reference`]).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct ReferenceStat {
    /// A base file, or another shard of the folder.
    pub role: SourceRole,
    /// The file's name as the archive records it.
    pub source: String,
    /// The tensor's name there.
    pub tensor: String,
    /// How the residual combines with it.
    pub op: RefOp,
}

impl RegionStat {
    /// The stat of an empty tensor, which has no record.
    fn empty(info: &super::safetensors::TensorInfo) -> RegionStat {
        RegionStat {
            kind: RegionKind::Tensor,
            label: info.name.clone(),
            dtype: Some(info.dtype),
            shape: info.shape.clone(),
            original_bytes: 0,
            archive_bytes: 0,
            program_bytes: 0,
            root_op: "lit",
            search: SearchStats::default(),
            group_size: 0,
            copy_of: None,
            reference: None,
        }
    }
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
/// The input file memory-mapped read-only (`None` for an empty file, which cannot be
/// mapped; the parser refuses it all the same).
///
/// # Errors
/// [`Error::Io`] naming `input` if it cannot be opened or mapped, is a folder, or is not
/// a regular file (a named pipe would block the open until a writer came).
pub fn map_input(input: &Path) -> Result<Option<memmap2::Mmap>> {
    Ok(open_input(input)?.0)
}

/// [`map_input`] with the open file, whose [`Stamp`] tells later whether it was changed.
fn open_input(input: &Path) -> Result<(Option<memmap2::Mmap>, File)> {
    let meta = crate::files::regular_file(input)?;
    let file = File::open(input).map_err(|e| Error::io(input, "cannot open", e))?;
    if meta.len() == 0 {
        return Ok((None, file));
    }
    let map = crate::files::map_file(&file).map_err(|e| Error::io(input, "cannot map", e))?;
    Ok((Some(map), file))
}

/// The length and modification time of an open file: a write to it (through any path
/// or mapping) or a truncation changes them.
#[derive(Debug, PartialEq, Eq)]
struct Stamp(u64, Option<std::time::SystemTime>);

impl Stamp {
    fn of(file: &File, path: &Path) -> Result<Stamp> {
        let meta = file
            .metadata()
            .map_err(|e| Error::io(path, "cannot read", e))?;
        Ok(Stamp(meta.len(), meta.modified().ok()))
    }
}

pub fn compress_file(
    input: &Path,
    output: &Path,
    opts: &CompressOptions,
    progress: &dyn Fn(ProgressEvent<'_>),
) -> Result<CompressSummary> {
    compress_to(
        Source::File(input),
        &Target::File(output.to_path_buf()),
        opts,
        progress,
    )
}

/// What [`compress_to`] reads: a file (memory-mapped) or bytes already in memory.
#[derive(Clone, Copy, Debug)]
pub enum Source<'a> {
    /// A `.safetensors` file.
    File(&'a Path),
    /// The bytes of a `.safetensors` file (read from standard input, say); `label` names
    /// it in messages and reports. No file name is stored in the archive unless
    /// [`CompressOptions::file_name`] says one.
    Bytes {
        /// The whole file.
        bytes: &'a [u8],
        /// What to call it (`standard input`).
        label: &'a Path,
    },
}

/// Compresses `source` into `target`: a regular file as [`compress_file`] writes it
/// (temporary file, synced, renamed into place), or a character device or standard
/// output, written in order as the archive is made (nothing to rename; an error
/// leaves what was written so far).
///
/// # Errors
/// As [`compress_file`]; for a file source, [`Error::Invalid`] of kind `input_changed`
/// if it changed while it was read.
pub fn compress_to(
    source: Source<'_>,
    target: &Target,
    opts: &CompressOptions,
    progress: &dyn Fn(ProgressEvent<'_>),
) -> Result<CompressSummary> {
    // The input first: a mistyped input name is reported as such, not as the existing
    // archive of the name it would have.
    let (map, file, input, bytes): (_, _, &Path, &[u8]) = match source {
        Source::File(input) => {
            let (map, file) = open_input(input)?;
            (map, Some(file), input, &[])
        }
        Source::Bytes { bytes, label } => (None, None, label, bytes),
    };
    let bytes: &[u8] = map.as_deref().unwrap_or(bytes);
    if let Target::File(output) = target {
        check_output_of(file.is_some().then_some(input), output, opts.force)?;
    }
    let evict = match target {
        Target::File(output) => Some(crate::files::EvictReplaced::start(output, opts.force)),
        _ => None,
    };
    let before = file.as_ref().map(|f| Stamp::of(f, input)).transpose()?;
    let src = parse(bytes).map_err(|e| Error::source(input, e))?;

    let named;
    let opts = match (&opts.file_name, &source) {
        (None, Source::File(input)) if input.file_name().and_then(|n| n.to_str()).is_some() => {
            named = CompressOptions {
                file_name: input.file_name().and_then(|n| n.to_str()).map(String::from),
                ..opts.clone()
            };
            &named
        }
        _ => opts,
    };
    let release = |part: &[u8]| {
        if let Some(m) = &map {
            crate::files::release_pages(m, part);
        }
    };
    let output = target.path().to_path_buf();
    let mut tmp = None;
    let written = match target {
        Target::File(output) => {
            // Verified once, after writing, through the reader `decompress` uses
            // (`check_written`), not program by program while writing: one decode, not
            // two. Should that check fail, the archive is written again with each
            // program checked as it is made (a program that does not restore its words
            // is stored as a literal, with a warning) and checked again.
            let attempt = |opts: &CompressOptions| -> Result<_> {
                let mut t = temp_beside(output)?;
                let mut w = crate::files::OutputFile::new(t.as_file_mut());
                let written =
                    write_archive_releasing(&src, &mut w, opts, progress, output, &release)?;
                w.finish(output)?;
                Ok((t, written))
            };
            let (t, written) = if opts.verify {
                let once = CompressOptions {
                    verify: false,
                    ..opts.clone()
                };
                let (t, written) = attempt(&once)?;
                match check_written(t.path(), output, bytes, &written.sources, opts.jobs) {
                    Ok(()) => (t, written),
                    Err(e) if e.kind() == NOT_RESTORABLE => {
                        drop(t);
                        let (t, written) = attempt(opts)?;
                        check_written(t.path(), output, bytes, &written.sources, opts.jobs)?;
                        (t, written)
                    }
                    Err(e) => return Err(e),
                }
            } else {
                attempt(opts)?
            };
            tmp = Some(t);
            written
        }
        _ => {
            let mut w = open_direct(target)?;
            let written = write_archive_releasing(&src, &mut w, opts, progress, &output, &release)?;
            w.flush()
                .map_err(|e| Error::io(&output, "cannot write", e))?;
            written
        }
    };
    // The input is read through a mapping: a change to it while it was read would have
    // been encoded in part, and the archive would not restore any version of the file.
    // The temporary is dropped unpersisted, so no output is left.
    if let (Some(file), Some(before)) = (&file, before) {
        if Stamp::of(file, input)? != before {
            return Err(Error::Invalid {
                path: input.to_path_buf(),
                what: "changed while it was being compressed",
                detail: "its size or modification time differs from when it was opened; no \
                         archive was written (compress it again once nothing writes to it)"
                    .to_string(),
                kind: "input_changed",
            });
        }
    }
    drop(evict);
    if let Some(tmp) = tmp {
        persist(tmp, &output, opts.force)?;
    }

    let mut warnings = src.warnings().to_vec();
    warnings.extend(written.warnings);
    Ok(CompressSummary {
        input: input.to_path_buf(),
        output,
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
    /// The sources the archive lists ([`super::Archive::sources`], in its order): what
    /// its reference records decode against.
    pub sources: Vec<Arc<OpenedSource>>,
}

/// [`Error::kind`] of an archive that `compress` wrote and found not to restore its source.
pub const NOT_RESTORABLE: &str = "not_restorable";

/// Opens the archive just written to `tmp` (to be put in place as `output`) through the
/// reader `decompress` uses, with `sources` attached, and checks that it restores
/// `original` byte for byte ([`super::verify::check_restores`]).
///
/// # Errors
/// [`Error::Invalid`] of kind `not_restorable` naming `output`, the region (the tensor)
/// and what the reader found, if it does not restore; the errors of opening it.
fn check_written(
    tmp: &Path,
    output: &Path,
    original: &[u8],
    sources: &[Arc<OpenedSource>],
    jobs: Option<usize>,
) -> Result<()> {
    let refused = |region: String, what: String| Error::Invalid {
        path: output.to_path_buf(),
        what: "the archive written does not restore its source",
        detail: format!(
            "{region}: {what}; no archive was written (this is a bug in Brevis: please \
             report it with the source file; --no-verify skips this check)"
        ),
        kind: NOT_RESTORABLE,
    };
    let archive = match super::Archive::open_as(tmp, output) {
        Ok(a) => a,
        Err(Error::Archive { source, .. }) => {
            return Err(refused("the archive".to_string(), source.to_string()))
        }
        Err(e) => return Err(e),
    };
    for (i, s) in sources.iter().enumerate() {
        archive.attach(i, s.clone())?;
    }
    match super::verify::check_restores(&archive, original, jobs)? {
        None => Ok(()),
        Some(n) => Err(refused(n.region, n.what)),
    }
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
    write_archive_releasing(src, out, opts, progress, name, &|_| {})
}

/// [`write_archive`], calling `release` with each region's source bytes once they are
/// written (so a memory-mapped source can drop them from the resident set).
fn write_archive_releasing<W: Write>(
    src: &SourceFile<'_>,
    out: &mut W,
    opts: &CompressOptions,
    progress: &dyn Fn(ProgressEvent<'_>),
    name: &Path,
    release: &(dyn Fn(&[u8]) + Sync),
) -> Result<Written> {
    let jobs = resolve_jobs(opts.jobs);
    let pool = build_pool(jobs).map_err(|what| Error::Internal {
        path: name.to_path_buf(),
        what,
    })?;
    let resolved;
    let (opts, prior_kind) = match &opts.prior {
        PriorChoice::Auto if opts.search.prior_matters() => {
            let prior = pool.install(|| calibrate_source(src, name));
            resolved = CompressOptions {
                prior: PriorChoice::Given(std::sync::Arc::new(prior)),
                ..opts.clone()
            };
            (&resolved, format::PriorKind::Calibrated)
        }
        PriorChoice::Given(_) => (opts, format::PriorKind::Given),
        _ => (opts, format::PriorKind::Uniform),
    };
    let settings = format::Settings {
        budget: opts.search.budget,
        max_depth: u64::from(opts.search.max_depth),
        max_nodes: u64::from(opts.search.max_nodes),
        prior: prior_kind,
        prior_digest: match &opts.prior {
            PriorChoice::Given(p) if prior_kind != format::PriorKind::Uniform => p.digest(),
            _ => 0,
        },
        level: Some(opts.search.level),
    };
    let linked = pool.install(|| link_tensors(src, opts.links.as_deref()));
    let plan = plan_records(src, &linked.of);
    let count = plan.len();
    let write_err = |e: io::Error| Error::io(name, "cannot write", e);

    let version = format::FORMAT_VERSION;
    out.write_all(&format::file_header_version(version))
        .map_err(write_err)?;
    let mut offset = format::FILE_HEADER_LEN as u64;
    let mut record_lens = Vec::with_capacity(count);
    let mut record_settings = Vec::with_capacity(count);
    let mut stats = Vec::with_capacity(src.regions().len() + 1);
    let mut warnings = Vec::new();
    let mut hasher = Xxh3::new();
    let mut records_hasher = Xxh3::new();
    let mut hashed = ReleaseBatch::new(src.bytes(), release);
    // Data records written whole, by (checksum, bytes, word width): where a later record
    // with the same bytes finds the one it copies ([`format::copy_allowed`] decides).
    let mut written_by_sum: HashMap<(u64, usize, u32), usize> = HashMap::new();
    let claimed: Mutex<HashMap<(u64, usize, u32), usize>> = Mutex::new(HashMap::new());
    // Each written record's root operator (a copy shows the one it copies).
    let mut roots: Vec<&'static str> = Vec::with_capacity(count);
    // Empty tensors have no record: their stats go before the record that follows them.
    let mut empties = src
        .regions()
        .iter()
        .filter_map(|r| match *r {
            Region::Tensor(t) if src.tensors()[t].begin == src.tensors()[t].end => Some(t),
            _ => None,
        })
        .peekable();

    progress(ProgressEvent::Begin {
        items: src.regions().len() + 1,
        bytes: src.bytes().len() as u64,
    });
    // Source bytes in flight (DESIGN §8): their pages, words and encoded programs are
    // what compressing holds. `jobs + 1` records of up to one region each keep every
    // thread busy; a larger record is synthesized region by region in parallel, so two
    // of them (one being written, one being encoded) are enough.
    let largest = plan
        .iter()
        .map(|r| r.source(src).len() as u64)
        .max()
        .unwrap_or(0);
    let region_bytes = (REGION_WORDS * 8) as u64;
    let budget = largest
        .saturating_mul(2)
        .max(largest.min(region_bytes).saturating_mul(jobs as u64 + 1));
    ordered_pipeline_bounded(
        &pool,
        count,
        |i| plan[i].source(src).len() as u64,
        budget,
        |i| {
            // The source pages stay mapped for the sink, which hashes them and releases
            // them (releasing them here made the sink fault every page in again: 6%
            // more wall time at --jobs 2 on minilm). The pages in flight are bounded by
            // the pipeline's budget; a tensor of several regions has each region
            // released by its worker as soon as its words are read.
            Ok(encode_item(
                src, &plan[i], i, opts, release, &claimed, &linked,
            ))
        },
        |i, enc: Encoded| {
            let rec = &plan[i];
            let bytes = rec.source(src);
            // Hashed in steps and released behind the hashing, so a large region's
            // pages are not all resident again here. The whole file starts with the
            // header's 8-byte length field.
            if rec.kind == RecordKind::Header {
                hasher.update(&src.bytes()[..8]);
            }
            for part in bytes.chunks(HASH_STEP_BYTES) {
                hasher.update(part);
            }
            // A record whose bytes an earlier data record holds is written as a copy of
            // it: decided here, in record order, so the archive does not depend on
            // which worker saw the bytes first.
            let fault = test_fault();
            let width = match fault {
                Some(Fault::CopyAnyWidth) => 0,
                _ => rec.word_bits(src),
            };
            let key = (enc.checksum, bytes.len(), width);
            let copy = match (rec.copyable(), written_by_sum.get(&key)) {
                (true, Some(&j))
                    if plan[j].source(src) == bytes
                        && (format::copy_allowed(version, plan[j].ty(src), rec.ty(src))
                            || fault == Some(Fault::CopyAnyWidth)) =>
                {
                    Some(j)
                }
                _ => None,
            };
            let enc = match (copy, enc.program) {
                (None, None) => encode_linked(src, rec, opts, release, &linked),
                (_, program) => Encoded { program, ..enc },
            };
            let mut head = Vec::new();
            let items = rec.items.len() as u64;
            let program_bytes = match (copy, &enc.program) {
                (None, Some(p)) => program_len(p),
                _ => 0,
            };
            let len = match (copy, &enc.program) {
                (Some(j), _) => {
                    let copy = HeadV4::Copy {
                        items,
                        of: j as u64,
                    };
                    format::record_head_v4(&mut head, &copy, 0);
                    records_hasher.update(&head);
                    out.write_all(&head).map_err(write_err)?;
                    head.len() as u64
                }
                (None, Some(program)) => {
                    let regions = region_heads(program, enc.regions.as_deref());
                    let header;
                    let fields = match (rec.kind, enc.reference, &regions) {
                        (RecordKind::Header, _, _) => {
                            header = HeaderV4 {
                                header_len: src.header_len(),
                                checksum: enc.checksum,
                                original_len: src.bytes().len() as u64,
                                file_name: opts.file_name.clone().unwrap_or_default(),
                                sources: linked.sources.iter().map(|(e, _)| e.clone()).collect(),
                            };
                            HeadV4::Header(&header)
                        }
                        (_, Some(r), _) => HeadV4::Ref {
                            items,
                            checksum: enc.checksum,
                            source: (r.source as u64, r.tensor as u64, r.source_checksum),
                            op: r.op,
                        },
                        (_, None, Some(regions)) => HeadV4::Regions {
                            items,
                            checksum: enc.checksum,
                            regions,
                        },
                        (_, None, None) => HeadV4::Data {
                            items,
                            checksum: enc.checksum,
                        },
                    };
                    format::record_head_v4(&mut head, &fields, program_bytes);
                    // Copies are of data records only.
                    if rec.copyable() && enc.reference.is_none() {
                        written_by_sum.entry(key).or_insert(i);
                    }
                    if fault == Some(Fault::FlipRecord(i)) {
                        let mut bytes = head.clone();
                        crate::dsl::wire::write_program(program, &mut bytes);
                        if let Some(last) = bytes.last_mut() {
                            *last ^= 0x5a;
                        }
                        records_hasher.update(&bytes);
                        out.write_all(&bytes).map_err(write_err)?;
                        bytes.len() as u64
                    } else {
                        write_record(&mut *out, &mut records_hasher, &head, program)
                            .map_err(write_err)?
                    }
                }
                (None, None) => unreachable!("encoded above"),
            };
            for part in bytes.chunks(HASH_STEP_BYTES) {
                hashed.add(part);
            }
            offset += len;
            record_lens.push(len);
            if i > 0 {
                record_settings.push(0);
            }
            let root_op = match (copy, &enc.program) {
                (Some(j), _) => roots[j],
                (None, Some(p)) => p.op_name(),
                (None, None) => "lit",
            };
            roots.push(root_op);
            let copy_of = copy
                .and_then(|j| plan[j].tensors.first())
                .map(|&t| src.tensors()[t].name.as_str());
            let reference = enc.reference.filter(|_| copy.is_none()).map(|r| {
                let (entry, source) = &linked.sources[r.source];
                ReferenceStat {
                    role: entry.role,
                    source: entry.name.clone(),
                    tensor: source.tensors()[r.tensor].name.clone(),
                    op: r.op,
                }
            });
            let first = stats.len();
            for (label, bytes) in rec.report(
                src,
                &mut empties,
                &mut stats,
                len,
                program_bytes,
                root_op,
                &enc.search,
                copy_of,
            ) {
                progress(ProgressEvent::Item {
                    label: &label,
                    bytes,
                });
            }
            if let Some(r) = reference {
                if let Some(last) = stats[first..].last_mut() {
                    last.reference = Some(r);
                }
            }
            warnings.extend(enc.warning);
            Ok(())
        },
        |i| Error::Internal {
            path: name.to_path_buf(),
            what: format!("worker panicked on record {i}"),
        },
    )?;
    // Empty tensors after the last record.
    for t in empties {
        stats.push(RegionStat::empty(&src.tensors()[t]));
    }

    let index = format::IndexV4 {
        file_checksum: hasher.digest(),
        records_checksum: records_hasher.digest(),
        settings: vec![settings],
        record_lens,
        record_settings,
    };
    let mut tail = Vec::new();
    format::write_index_v4(&mut tail, &index);
    let trailer = format::trailer(offset, &tail);
    tail.extend_from_slice(&trailer);
    out.write_all(&tail).map_err(write_err)?;
    progress(ProgressEvent::End);
    Ok(Written {
        archive_bytes: offset + tail.len() as u64,
        regions: stats,
        warnings,
        sources: linked.sources.iter().map(|(_, s)| s.clone()).collect(),
    })
}

/// The regions table of a regions record (format 4) for `program`, when it is a root
/// `concat` of `regions` (the record's regions, [`program_in_regions`]): each region's
/// words, the bytes of its program (the `concat`'s child) and its checksum.
fn region_heads(program: &Node, regions: Option<&[RegionSum]>) -> Option<Vec<RegionHead>> {
    let regions = regions?;
    let crate::dsl::Op::Concat(children) = program.op() else {
        return None;
    };
    if children.len() != regions.len() {
        return None;
    }
    children
        .iter()
        .zip(regions)
        .map(|(c, r)| {
            (c.ty().len == r.words).then(|| RegionHead {
                words: r.words,
                program_len: program_len(c),
                checksum: r.checksum,
            })
        })
        .collect()
}

/// A fault the writer injects for tests of the check `compress` runs on what it wrote
/// (issue 38), named by the environment variable `BREVIS_TEST_FAULT`: `copy-any-width`
/// writes copy records between tensors of different word widths (which the reader
/// refuses), `flip-record=N` flips bits of the last byte of record `N`, `bad-program`
/// makes every synthesized program restore other words (`map xor 1` over it). Unset (the
/// only case outside those tests), the writer behaves as documented.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fault {
    CopyAnyWidth,
    FlipRecord(usize),
    BadProgram,
}

fn test_fault() -> Option<Fault> {
    static FAULT: std::sync::OnceLock<Option<Fault>> = std::sync::OnceLock::new();
    *FAULT.get_or_init(|| {
        let v = std::env::var("BREVIS_TEST_FAULT").ok()?;
        match v.split_once('=') {
            None if v == "copy-any-width" => Some(Fault::CopyAnyWidth),
            None if v == "bad-program" => Some(Fault::BadProgram),
            Some(("flip-record", n)) => n.parse().ok().map(Fault::FlipRecord),
            _ => None,
        }
    })
}

/// Tensors of fewer bytes than this may share a group record with their neighbours
/// (same dtype, next to each other in the data region): tables, framing and
/// checksums are then paid once for the group. 64 KiB is 16 Ki F32 words, where a
/// tensor's own tables cost well under 1% of it.
pub const GROUP_TENSOR_BYTES: u64 = 64 << 10;

/// Most bytes of one group record: decoding one tensor of a group decodes the group.
pub const GROUP_BYTES: u64 = 1 << 20;

/// What a record of the archive holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RecordKind {
    /// The source header (record 0).
    Header,
    /// One tensor.
    Tensor(usize),
    /// Bytes no tensor owns.
    Gap { begin: u64, end: u64 },
    /// Consecutive small tensors of one dtype.
    Group,
}

/// One record to write: its kind and the items (indices into the data items, the
/// non-empty regions in offset order) it covers.
#[derive(Clone, Debug)]
struct PlannedRecord {
    kind: RecordKind,
    /// Indices of its tensors in [`SourceFile::tensors`] (one for a tensor record, the
    /// members of a group, none otherwise).
    tensors: Vec<usize>,
    /// Its data items, as a range of indices into the non-empty regions.
    items: std::ops::Range<usize>,
    begin: u64,
    end: u64,
}

impl PlannedRecord {
    /// The source bytes it restores (the JSON header for record 0).
    fn source<'a>(&self, src: &SourceFile<'a>) -> &'a [u8] {
        match self.kind {
            RecordKind::Header => src.header(),
            _ => &src.data()[self.begin as usize..self.end as usize],
        }
    }

    /// Whether a record with the same bytes can be a copy of this one (a tensor of its
    /// own: copies are for tied or repeated tensors).
    fn copyable(&self) -> bool {
        matches!(self.kind, RecordKind::Tensor(_))
    }

    /// The dtype its words are read as (`None`: bytes).
    fn dtype(&self, src: &SourceFile<'_>) -> Option<Dtype> {
        self.tensors.first().map(|&t| src.tensors()[t].dtype)
    }

    /// The width in bits of the words its program restores (8 for the header and gaps).
    fn word_bits(&self, src: &SourceFile<'_>) -> u32 {
        self.dtype(src).map_or(8, Dtype::word_bits)
    }

    /// The type of the words its program restores.
    fn ty(&self, src: &SourceFile<'_>) -> Ty {
        let width = self.word_bits(src);
        Ty::new(width, self.source(src).len() as u64 * 8 / u64::from(width))
    }

    /// Appends the [`RegionStat`]s of its items (and of the empty tensors before each)
    /// to `stats`; returns each one's progress label and original bytes. The record's
    /// `len` bytes and `program` bytes are shared among a group's tensors in proportion
    /// to their original bytes (the shares add up exactly). `copy_of`: the tensor whose
    /// record this one copies.
    #[allow(clippy::too_many_arguments)]
    fn report(
        &self,
        src: &SourceFile<'_>,
        empties: &mut std::iter::Peekable<impl Iterator<Item = usize>>,
        stats: &mut Vec<RegionStat>,
        len: u64,
        program: u64,
        root_op: &'static str,
        search: &SearchStats,
        copy_of: Option<&str>,
    ) -> Vec<(String, u64)> {
        let mut shown = Vec::new();
        // Empty tensors at or before data offset `at` (they come first at an offset).
        let mut empties_before = |at: u64, stats: &mut Vec<RegionStat>, shown: &mut Vec<_>| {
            while let Some(&t) = empties.peek() {
                let info = &src.tensors()[t];
                if info.begin > at {
                    break;
                }
                empties.next();
                stats.push(RegionStat::empty(info));
                shown.push((info.name.clone(), 0));
            }
        };
        let plain = |kind, label: &str, dtype, original_bytes| RegionStat {
            kind,
            label: label.to_string(),
            dtype,
            shape: Vec::new(),
            original_bytes,
            archive_bytes: len,
            program_bytes: program,
            root_op,
            search: search.clone(),
            group_size: 1,
            copy_of: None,
            reference: None,
        };
        match self.kind {
            RecordKind::Header => {
                let original = src.data_start() as u64;
                stats.push(plain(RegionKind::Header, "(header)", None, original));
                shown.push(("(header)".to_string(), original));
            }
            RecordKind::Gap { begin, end } => {
                empties_before(begin, stats, &mut shown);
                stats.push(plain(RegionKind::Gap, "(gap)", None, end - begin));
                shown.push(("(gap)".to_string(), end - begin));
            }
            RecordKind::Tensor(_) | RecordKind::Group => {
                let sizes: Vec<u64> = self
                    .tensors
                    .iter()
                    .map(|&t| src.tensors()[t].byte_len())
                    .collect();
                let shares = super::reader::group_shares(len, program, &sizes);
                for (k, (&t, (archive_bytes, program_bytes))) in
                    self.tensors.iter().zip(shares).enumerate()
                {
                    let info = &src.tensors()[t];
                    empties_before(info.begin, stats, &mut shown);
                    stats.push(RegionStat {
                        kind: RegionKind::Tensor,
                        label: info.name.clone(),
                        dtype: Some(info.dtype),
                        shape: info.shape.clone(),
                        original_bytes: info.byte_len(),
                        archive_bytes,
                        program_bytes,
                        root_op,
                        // A group's search is counted once, with its first tensor.
                        search: if k == 0 {
                            search.clone()
                        } else {
                            SearchStats {
                                unrestored: search.unrestored,
                                ..SearchStats::default()
                            }
                        },
                        group_size: self.tensors.len(),
                        copy_of: copy_of.map(str::to_string),
                        reference: None,
                    });
                    shown.push((info.name.clone(), info.byte_len()));
                }
            }
        }
        shown
    }
}

/// The records of `src`, in order: the header, then the data region's non-empty
/// regions, each a record of its own except runs of consecutive tensors of one dtype
/// under [`GROUP_TENSOR_BYTES`] each, which share a record of up to [`GROUP_BYTES`].
fn plan_records(src: &SourceFile<'_>, linked: &[Option<Counterpart>]) -> Vec<PlannedRecord> {
    let mut plan = vec![PlannedRecord {
        kind: RecordKind::Header,
        tensors: Vec::new(),
        items: 0..0,
        begin: 0,
        end: 0,
    }];
    let tensors = src.tensors();
    // A tensor with a counterpart elsewhere gets a record of its own, which can be a
    // reference record.
    let small = |t: usize| tensors[t].byte_len() < GROUP_TENSOR_BYTES && linked[t].is_none();
    let mut item = 0usize;
    for r in src.regions() {
        match *r {
            Region::Tensor(t) if tensors[t].begin == tensors[t].end => continue,
            Region::Tensor(t) => {
                let info = &tensors[t];
                let joins = plan.last().is_some_and(|last| {
                    let first = last.tensors.first().copied();
                    matches!(last.kind, RecordKind::Tensor(_) | RecordKind::Group)
                        && first.is_some_and(|f| small(f) && tensors[f].dtype == info.dtype)
                        && small(t)
                        && last.end == info.begin
                        && info.end - last.begin <= GROUP_BYTES
                });
                if joins {
                    let last = plan.last_mut().expect("checked above");
                    last.kind = RecordKind::Group;
                    last.tensors.push(t);
                    last.items.end = item + 1;
                    last.end = info.end;
                } else {
                    plan.push(PlannedRecord {
                        kind: RecordKind::Tensor(t),
                        tensors: vec![t],
                        items: item..item + 1,
                        begin: info.begin,
                        end: info.end,
                    });
                }
            }
            Region::Gap { begin, end } => plan.push(PlannedRecord {
                kind: RecordKind::Gap { begin, end },
                tensors: Vec::new(),
                items: item..item + 1,
                begin,
                end,
            }),
        }
        item += 1;
    }
    plan
}

/// Bytes of source the writer hashes before releasing them (see `write_archive_releasing`).
const HASH_STEP_BYTES: usize = 8 << 20;

/// Bytes of hashed source the writer lets pile up before releasing them in one call.
const RELEASE_BATCH_BYTES: usize = 8 << 20;

/// The source ranges of `file` the writer has hashed and not yet released: adjacent ones
/// are joined, and released in one call once they reach [`RELEASE_BATCH_BYTES`] (or
/// the next is not adjacent). Each release is an `madvise` that makes every other CPU
/// running the process flush its TLB, and waits for them: one per record made a
/// 113 kB, 68-tensor file spend a tenth of its compression there. What is pending at
/// the end is left to the unmapping that follows the job. At most
/// `RELEASE_BATCH_BYTES + HASH_STEP_BYTES` bytes are pending.
struct ReleaseBatch<'a, 'r> {
    file: &'a [u8],
    release: &'r (dyn Fn(&[u8]) + Sync),
    pending: std::ops::Range<usize>,
}

impl<'a, 'r> ReleaseBatch<'a, 'r> {
    fn new(file: &'a [u8], release: &'r (dyn Fn(&[u8]) + Sync)) -> Self {
        ReleaseBatch {
            file,
            release,
            pending: 0..0,
        }
    }

    /// Adds `part`, hashed; a slice not inside `file` is released at once.
    fn add(&mut self, part: &[u8]) {
        let at = (part.as_ptr() as usize).wrapping_sub(self.file.as_ptr() as usize);
        let inside = at
            .checked_add(part.len())
            .filter(|&end| end <= self.file.len());
        let Some(end) = inside else {
            (self.release)(part);
            return;
        };
        if self.pending.end == at && self.pending.len() < RELEASE_BATCH_BYTES {
            self.pending.end = end;
        } else {
            let done = std::mem::replace(&mut self.pending, at..end);
            if !done.is_empty() {
                (self.release)(&self.file[done]);
            }
        }
    }
}

/// Writes record `head` and then `program`'s wire bytes, hashing both into `hasher`, and
/// returns their length. The program is serialized as it is written, its literal bodies
/// straight from the tree (never gathered into one buffer first), in vectored writes (the
/// archive's writer, [`crate::files::OutputFile`], copies the pieces into its blocks; a
/// `Vec` appends them).
fn write_record<W: Write>(
    out: &mut W,
    hasher: &mut Xxh3,
    head: &[u8],
    program: &Node,
) -> io::Result<u64> {
    let mut framing = Vec::new();
    let mut pieces = Vec::new();
    program_pieces(program, &mut framing, &mut pieces);
    let mut slices = Vec::with_capacity(pieces.len() + 1);
    slices.push(io::IoSlice::new(head));
    for piece in &pieces {
        let bytes: &[u8] = match piece {
            Piece::Framing(r) => &framing[r.clone()],
            Piece::Body(b) => b,
        };
        if !bytes.is_empty() {
            slices.push(io::IoSlice::new(bytes));
        }
    }
    let mut total = 0;
    for s in &slices {
        hasher.update(s);
        total += s.len() as u64;
    }
    let mut rest: &mut [io::IoSlice<'_>] = &mut slices;
    while !rest.is_empty() {
        match out.write_vectored(rest) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => io::IoSlice::advance_slices(&mut rest, n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(total)
}

/// One encoded record: the checksum of its bytes and its program (serialized as it is
/// written), or no program when the worker found that an earlier record holds the same
/// bytes (the sink then writes a copy, or encodes it after all).
struct Encoded {
    checksum: u64,
    program: Option<Node>,
    /// Set when `program` is a residual against a source tensor.
    reference: Option<Chosen>,
    /// Set when `program` is a root `concat` of the record's regions, in order.
    regions: Option<Vec<RegionSum>>,
    search: SearchStats,
    warning: Option<Warning>,
}

/// Encodes record `rec` (number `i` of the plan). A tensor record whose bytes' checksum
/// an earlier record of the same length has already claimed in `claimed` is left
/// unencoded (see [`Encoded`]). Each large tensor's region is passed to `release` once
/// its words are read.
fn encode_item(
    src: &SourceFile<'_>,
    rec: &PlannedRecord,
    i: usize,
    opts: &CompressOptions,
    release: &(dyn Fn(&[u8]) + Sync),
    claimed: &Mutex<HashMap<(u64, usize, u32), usize>>,
    linked: &Linked,
) -> Encoded {
    let bytes = rec.source(src);
    if rec.copyable() {
        let checksum = xxh3_64(bytes);
        let first = {
            let mut map = claimed.lock().unwrap_or_else(|e| e.into_inner());
            let e = map
                .entry((checksum, bytes.len(), rec.word_bits(src)))
                .or_insert(i);
            *e = (*e).min(i);
            *e
        };
        if first < i {
            return Encoded {
                checksum,
                program: None,
                reference: None,
                regions: None,
                search: SearchStats::default(),
                warning: None,
            };
        }
    }
    encode_linked(src, rec, opts, release, linked)
}

/// The sources a file is coded against and each tensor's counterpart in them.
struct Linked {
    /// The sources the archive lists: base files first (in the base's order), then
    /// shards, each only if some tensor has a counterpart in it.
    sources: Vec<(SourceEntry, Arc<OpenedSource>)>,
    /// For each tensor of the source file ([`SourceFile::tensors`]): its counterpart,
    /// `source` an index into `sources`.
    of: Vec<Option<Counterpart>>,
}

/// A reference record's choice: source `source` (an index into [`Linked::sources`]),
/// its tensor `tensor`, that tensor's checksum, and the op.
#[derive(Clone, Copy, Debug)]
struct Chosen {
    source: usize,
    tensor: usize,
    source_checksum: u64,
    op: RefOp,
}

/// Finds each tensor's counterpart: the same bytes in an earlier shard (by checksum,
/// length and dtype; confirmed byte for byte when encoding), else a base tensor
/// ([`BaseSet::counterparts`]).
fn link_tensors(src: &SourceFile<'_>, links: Option<&Links>) -> Linked {
    let n = src.tensors().len();
    let mut of: Vec<Option<(SourceRole, Counterpart)>> = vec![None; n];
    let Some(links) = links else {
        return Linked {
            sources: Vec::new(),
            of: vec![None; n],
        };
    };
    // An identical tensor: tensor `k` of source `s` in `role`.
    let exact = |role, (s, k)| {
        (
            role,
            Counterpart {
                source: s,
                tensor: k,
                exact: true,
            },
        )
    };
    if !links.shard_tensors.is_empty() {
        let found: Vec<Option<(usize, usize)>> = (0..n)
            .into_par_iter()
            .map(|t| {
                let info = &src.tensors()[t];
                let bytes = src.tensor_bytes(t);
                if bytes.is_empty() {
                    return None;
                }
                let key = (xxh3_64(bytes), bytes.len() as u64, info.dtype);
                links.shard_tensors.get(&key).copied()
            })
            .collect();
        for (t, f) in found.into_iter().enumerate() {
            of[t] = f.map(|at| exact(SourceRole::Shard, at));
        }
    }
    if let Some(base) = &links.base {
        let list: Vec<(&str, Dtype, &[u64])> = src
            .tensors()
            .iter()
            .map(|t| (t.name.as_str(), t.dtype, t.shape.as_slice()))
            .collect();
        for (t, c) in base.counterparts(&list).into_iter().enumerate() {
            if of[t].is_none() && src.tensors()[t].byte_len() > 0 {
                of[t] = c.map(|c| (SourceRole::Base, c));
            }
        }
        // A tensor with no counterpart may still be a base tensor under another name (a
        // tied copy): the first base tensor of its dtype and length with its bytes.
        let left: Vec<usize> = (0..n)
            .filter(|&t| of[t].is_none() && src.tensors()[t].byte_len() > 0)
            .collect();
        let found: Vec<Option<(usize, usize)>> = left
            .par_iter()
            .map(|&t| {
                let info = &src.tensors()[t];
                let bytes = src.tensor_bytes(t);
                base.sources.iter().enumerate().find_map(|(s, source)| {
                    source.tensors().iter().enumerate().find_map(|(k, b)| {
                        let same = b.dtype == info.dtype
                            && b.bytes == info.byte_len()
                            && source.tensor_bytes(k).is_ok_and(|x| *x == *bytes);
                        same.then_some((s, k))
                    })
                })
            })
            .collect();
        for (&t, f) in left.iter().zip(found) {
            of[t] = f.map(|at| exact(SourceRole::Base, at));
        }
    }
    // Number the sources in use: base files first, then shards.
    let mut used: Vec<(SourceRole, usize)> =
        of.iter().flatten().map(|(r, c)| (*r, c.source)).collect();
    used.sort_unstable();
    used.dedup();
    let sources = used
        .iter()
        .map(|&(role, s)| {
            let source = match role {
                SourceRole::Base => links.base.as_ref().expect("base in use").sources[s].clone(),
                SourceRole::Shard => links.shards[s].clone(),
            };
            (source.entry(role), source)
        })
        .collect();
    let of = of
        .into_iter()
        .map(|c| {
            c.map(|(role, c)| Counterpart {
                source: used
                    .binary_search(&(role, c.source))
                    .expect("numbered above"),
                ..c
            })
        })
        .collect();
    Linked { sources, of }
}

/// Bytes a reference record's head costs over a data record's: source, tensor (LEB128,
/// usually one or two bytes each), the source tensor's checksum and the op.
const REFERENCE_HEAD_EXTRA: u64 = 12;

/// Tensors of at most this many bytes with a counterpart are also searched alone, always:
/// the search costs little there, and an estimate of so few words says little.
const SMALL_TENSOR_BYTES: usize = 64 << 10;

/// A larger tensor is searched alone only if its residual is estimated to cost more than
/// this share of its own words' estimate ([`Estimates::own`]). The estimate is an order-0
/// entropy, which a program of real weights rarely beats by more than a few percent (the
/// README's "order-0 field bound": 33.67% against Brevis's 34.2% on minilm); a residual
/// estimated under 80% of it is smaller than the program the search would find.
const SEARCH_OWN_ABOVE: f64 = 0.8;

/// Both ops are coded exactly when the other op's estimate is within this factor of the
/// better one's; otherwise only the better one.
const BOTH_OPS_WITHIN: f64 = 1.03;

/// Encodes record `rec`: as [`encode_item_whole`], or for a tensor with a counterpart
/// ([`Linked::of`]) the smallest of its own program and the programs of its residual
/// against the counterpart by XOR and by subtraction (an identical tensor: `const 0`
/// against it; a shard's counterpart is used only when identical).
///
/// Which of those are worth making is estimated first, on a sample of the words
/// ([`Estimates`]): only the op the estimate picks is coded (both when their estimates
/// are within [`BOTH_OPS_WITHIN`]), and the tensor is searched alone only when it is
/// small or its residual is not clearly smaller ([`SEARCH_OWN_ABOVE`]). A residual is
/// coded region by region as the smallest of a literal of its words and its bucket
/// literals, plain or offset by the base word's exponent, and only the codings whose
/// lower bounds ([`crate::codec::bucket::Counts::bound_len`], the order-0 entropy) do
/// not rule them out are encoded ([`residual_program`]).
fn encode_linked(
    src: &SourceFile<'_>,
    rec: &PlannedRecord,
    opts: &CompressOptions,
    release: &(dyn Fn(&[u8]) + Sync),
    linked: &Linked,
) -> Encoded {
    let RecordKind::Tensor(t) = rec.kind else {
        return encode_item_whole(src, rec, opts, release);
    };
    let Some(c) = linked.of[t] else {
        return encode_item_whole(src, rec, opts, release);
    };
    let bytes = rec.source(src);
    let source = &linked.sources[c.source].1;
    let info = &src.tensors()[t];
    let Ok(base) = source.tensor_bytes(c.tensor) else {
        return encode_item_whole(src, rec, opts, release);
    };
    if base.len() != bytes.len() {
        return encode_item_whole(src, rec, opts, release);
    }
    let source_checksum = xxh3_64(&base);
    let chosen = |op| Chosen {
        source: c.source,
        tensor: c.tensor,
        source_checksum,
        op,
    };
    let checksum = xxh3_64(bytes);
    let width = info.dtype.word_bits();
    if *base == *bytes {
        let ty = Ty::new(width, bytes.len() as u64 / u64::from(width / 8));
        return Encoded {
            checksum,
            program: Some(Node::constant(ty, 0).expect("a tensor's type is valid")),
            reference: Some(chosen(RefOp::Xor)),
            regions: None,
            search: SearchStats::default(),
            warning: None,
        };
    }
    if c.exact || !matches!(width, 8 | 16 | 32 | 64) {
        return encode_item_whole(src, rec, opts, release);
    }
    let field = info
        .dtype
        .float_layout()
        .map(|[_, e, m]| crate::codec::bucket::Field { shift: m, width: e });
    let est = Estimates::of(bytes, &base, width, field);
    let ops = est.ops();
    let search_own =
        bytes.len() <= SMALL_TENSOR_BYTES || est.residual(ops[0]) > SEARCH_OWN_ABOVE * est.own;
    let mut best = Encoded {
        checksum,
        program: None,
        reference: None,
        regions: None,
        search: SearchStats::default(),
        warning: None,
    };
    let mut best_len = u64::MAX;
    if search_own {
        best = encode_item_whole(src, rec, opts, release);
        best_len = best.program.as_ref().map_or(u64::MAX, program_len);
    }
    for op in ops {
        let cap = best_len.saturating_sub(REFERENCE_HEAD_EXTRA);
        let residual = residual_program(bytes, &base, op, width, field, cap, opts.verify);
        if let Some(node) = residual {
            let len = program_len(&node) + REFERENCE_HEAD_EXTRA;
            if len < best_len {
                best_len = len;
                best.program = Some(node);
                best.reference = Some(chosen(op));
                // A reference record has no regions of its own.
                best.regions = None;
                best.warning = None;
            }
        }
    }
    if !search_own && bytes.len() >= EARLY_RELEASE_BYTES {
        release(bytes);
    }
    debug_assert!(
        best.program.is_some(),
        "a residual is coded when nothing else is"
    );
    best
}

/// Estimates in bytes per word, from a sample of a tensor's words ([`SAMPLE_RUNS`] runs
/// of [`SAMPLE_RUN_WORDS`] words spread over it), of what [`encode_linked`] chooses
/// between: its residual by each op (the least of [`residual_program`]'s lower bounds)
/// and its own words (their order-0 entropy; of the top 16 bits plus the rest raw for
/// wider words).
#[derive(Clone, Copy, Debug)]
struct Estimates {
    xor: f64,
    sub: f64,
    own: f64,
}

/// Runs of words an estimate samples.
const SAMPLE_RUNS: usize = 16;
/// Words in a sampled run (a tensor of at most `SAMPLE_RUNS * SAMPLE_RUN_WORDS` words is
/// read whole).
const SAMPLE_RUN_WORDS: usize = 4096;

impl Estimates {
    fn of(
        target: &[u8],
        base: &[u8],
        width: u32,
        field: Option<crate::codec::bucket::Field>,
    ) -> Estimates {
        let wb = crate::tensor::container_bytes(width);
        let n = target.len() / wb;
        let (runs, run) = if n <= SAMPLE_RUNS * SAMPLE_RUN_WORDS {
            (1, n)
        } else {
            (SAMPLE_RUNS, SAMPLE_RUN_WORDS)
        };
        let mut t = Vec::with_capacity(runs * run * wb);
        let mut b = Vec::with_capacity(runs * run * wb);
        for r in 0..runs {
            // Run r starts at its share of the words, so the runs spread over the tensor.
            let at = if runs == 1 {
                0
            } else {
                (n - run) * r / (runs - 1)
            };
            t.extend_from_slice(&target[at * wb..(at + run) * wb]);
            b.extend_from_slice(&base[at * wb..(at + run) * wb]);
        }
        let words = |x: &[u8]| Words::from_le_bytes(width, x).expect("a byte width");
        let (tw, bw) = (words(&t), words(&b));
        let m = tw.len().max(1) as f64;
        let per_op = |op: RefOp| {
            let r = words(&super::base::residual(&t, &b, op, wb));
            Bounds::of(&r, &bw, op, field).least() as f64 / m
        };
        let own = if width <= 16 {
            crate::stats::stream_entropy_bits(&tw, crate::codec::MAX_TABLE_SYMBOLS)
                .unwrap_or(f64::from(width))
                / 8.0
        } else {
            let top = crate::tensor::extract(tw.buf(), width - 16, 16);
            crate::stats::stream_entropy_bits(&top, crate::codec::MAX_TABLE_SYMBOLS).unwrap_or(16.0)
                / 8.0
                + f64::from(width - 16) / 8.0
        };
        Estimates {
            xor: per_op(RefOp::Xor),
            sub: per_op(RefOp::Sub),
            own,
        }
    }

    fn residual(&self, op: RefOp) -> f64 {
        match op {
            RefOp::Xor => self.xor,
            RefOp::Sub => self.sub,
        }
    }

    /// The ops worth coding, the better first.
    fn ops(&self) -> Vec<RefOp> {
        let (better, worse) = if self.sub < self.xor {
            (RefOp::Sub, RefOp::Xor)
        } else {
            (RefOp::Xor, RefOp::Sub)
        };
        if self.residual(worse) <= self.residual(better) * BOTH_OPS_WITHIN {
            vec![better, worse]
        } else {
            vec![better]
        }
    }
}

/// One way [`residual_program`] may code a region of a residual.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Coding {
    /// A literal of the words ([`crate::codec::encode_best`]).
    Words,
    /// Bucket literal, plain.
    Buckets,
    /// Bucket literal, offset by the base words' exponent.
    Offset,
}

/// What [`residual_program`] knows of a region of a residual before encoding it: lower
/// bounds in bytes of its [`Coding`]s, ascending (its bucket literals'
/// [`crate::codec::bucket::Counts::bound_len`] and, for words of at most 16 bits, a
/// literal of its words': their order-0 entropy less 16 bytes), and the counts they come
/// from, which the encoders take.
struct Bounds {
    bounds: Vec<(u64, Coding)>,
    counts: crate::codec::bucket::Counts,
    histogram: Option<Vec<(u64, u64)>>,
}

impl Bounds {
    fn of(
        r: &Words,
        base: &Words,
        op: RefOp,
        field: Option<crate::codec::bucket::Field>,
    ) -> Bounds {
        use crate::codec::bucket::{self, Context};
        let ctx = field.map(|f| {
            (
                Context {
                    words: base,
                    start: 0,
                },
                f,
            )
        });
        let counts = bucket::count(r, op == RefOp::Sub, ctx);
        let mut bounds = vec![(counts.bound_len(false).expect("plain"), Coding::Buckets)];
        if let Some(b) = counts.bound_len(true) {
            bounds.push((b, Coding::Offset));
        }
        let histogram = (r.width() <= 16)
            .then(|| crate::stats::histogram(r, crate::codec::MAX_TABLE_SYMBOLS))
            .flatten();
        if let Some(h) = &histogram {
            let bits = crate::stats::entropy_bits(h.iter().map(|&(_, c)| c)) * r.len() as f64;
            bounds.push((((bits / 8.0) as u64).saturating_sub(16), Coding::Words));
        }
        bounds.sort_by_key(|&(b, c)| (b, c as u8));
        Bounds {
            bounds,
            counts,
            histogram,
        }
    }

    fn least(&self) -> u64 {
        self.bounds.first().map_or(0, |&(b, _)| b)
    }
}

/// The residual of a tensor's bytes against its base's by `op` (little-endian
/// `width`-bit words), as one literal per region of [`REGION_WORDS`] words under a
/// `concat`: each the smallest of the region's [`Coding`]s, only those its lower bound
/// does not rule out encoded ([`Bounds`]). `None` when the residual cannot come under
/// `cap` bytes (the sum of the regions' least bounds is not below it). With `verify`, a
/// bucket literal is decoded and one that does not give its words back (a defect)
/// replaced by a plain literal. A region's residual is made twice (for its bounds, then
/// to encode it), so no more than the regions in work are held at once.
fn residual_program(
    target: &[u8],
    base: &[u8],
    op: RefOp,
    width: u32,
    field: Option<crate::codec::bucket::Field>,
    cap: u64,
    verify: bool,
) -> Option<Node> {
    use crate::codec::bucket::{self, Context, Params};
    let wb = crate::tensor::container_bytes(width);
    let words_of = |b: &[u8]| Words::from_le_bytes(width, b).expect("a byte width");
    let region =
        |(t, b): (&[u8], &[u8])| (words_of(&super::base::residual(t, b, op, wb)), words_of(b));
    let region_bytes = REGION_WORDS * wb;
    let bounds: Vec<Bounds> = target
        .par_chunks(region_bytes)
        .zip(base.par_chunks(region_bytes))
        .map(|tb| {
            let (r, b) = region(tb);
            Bounds::of(&r, &b, op, field)
        })
        .collect();
    if bounds.iter().map(Bounds::least).sum::<u64>() >= cap {
        return None;
    }
    let zigzag = op == RefOp::Sub;
    let lits: Vec<Node> = target
        .par_chunks(region_bytes)
        .zip(base.par_chunks(region_bytes))
        .zip(bounds)
        .map(|(tb, bounds)| {
            let (r, b) = region(tb);
            let ty = Ty::new(width, r.len() as u64);
            let ctx = Context {
                words: &b,
                start: 0,
            };
            let mut best: Option<Lit> = None;
            let Bounds {
                bounds,
                counts,
                mut histogram,
            } = bounds;
            for (bound, coding) in bounds {
                if best.as_ref().is_some_and(|l| l.body.len() as u64 <= bound) {
                    break;
                }
                let lit = match coding {
                    Coding::Words => {
                        let hist = histogram.take().expect("bounded from its histogram");
                        let e = crate::codec::encode_best_with_histogram(&r, hist);
                        Lit {
                            codec: e.codec,
                            body: e.body,
                        }
                    }
                    Coding::Buckets | Coding::Offset => {
                        let context = (coding == Coding::Offset)
                            .then(|| (ctx, field.expect("offset needs a field")));
                        Lit {
                            codec: CodecId::Bucket,
                            body: bucket::encode_counted(&r, Params { zigzag, context }, &counts),
                        }
                    }
                };
                let smaller = best
                    .as_ref()
                    .is_none_or(|b| (lit.body.len(), lit.codec) < (b.body.len(), b.codec));
                if smaller {
                    best = Some(lit);
                }
            }
            let lit = best.expect("every region has a coding");
            if verify && lit.codec == CodecId::Bucket {
                let back = bucket::decode(&lit.body, width, r.len(), Some(ctx));
                if back.as_ref().ok() != Some(&r) {
                    debug_assert!(false, "a bucket literal did not give its words back");
                    return Node::lit(&r);
                }
            }
            Node::lit_encoded(ty, lit).expect("a literal has its type")
        })
        .collect();
    Some(if lits.len() == 1 {
        lits.into_iter().next().expect("one region")
    } else {
        Node::concat(lits).expect("regions are non-empty")
    })
}

/// Encodes record `rec`: its checksum and program. A group gets the smaller of one
/// program for all its tensors' words and a `concat` of each tensor's own program.
fn encode_item_whole(
    src: &SourceFile<'_>,
    rec: &PlannedRecord,
    opts: &CompressOptions,
    release: &(dyn Fn(&[u8]) + Sync),
) -> Encoded {
    let bytes = rec.source(src);
    let dtype = rec.dtype(src);
    let width = dtype.map_or(8, Dtype::word_bits);
    let describe = || match rec.kind {
        RecordKind::Header => "header".to_string(),
        RecordKind::Tensor(t) => format!("tensor {:?}", src.tensors()[t].name),
        RecordKind::Gap { begin, end } => format!("gap at data bytes [{begin}, {end})"),
        RecordKind::Group => format!(
            "group of {} tensors from {:?}",
            rec.tensors.len(),
            src.tensors()[rec.tensors[0]].name
        ),
    };
    // The checksum first: the regions' source pages are released as they are read.
    let checksum = xxh3_64(bytes);
    let rows_of = |t: usize| {
        let shape = &src.tensors()[t].shape;
        (shape.len() >= 2).then(|| shape[0])
    };
    let rows = match rec.kind {
        RecordKind::Tensor(t) => rows_of(t),
        _ => None,
    };
    let (mut node, mut search, mut warning, mut regions) = program_in_regions(
        bytes,
        REGION_WORDS,
        EARLY_RELEASE_BYTES,
        (width, dtype, rows),
        opts,
        describe,
        release,
    );
    if rec.kind == RecordKind::Group {
        let mut kids = Vec::with_capacity(rec.tensors.len());
        let mut each = SearchStats::default();
        let mut each_warning = None;
        for &t in &rec.tensors {
            let words = Words::from_le_bytes(width, src.tensor_bytes(t))
                .expect("the parser checked every byte length against its dtype");
            let name = &src.tensors()[t].name;
            let (kid, s, w) = program_for(Arc::new(words), dtype, rows_of(t), opts, || {
                format!("tensor {name:?}")
            });
            each.absorb(&s);
            each_warning = each_warning.or(w);
            kids.push(kid);
        }
        let apart =
            Node::concat(kids).expect("a group's tensors share the width and are not empty");
        search.absorb(&each);
        if program_len(&apart) < program_len(&node) {
            node = apart;
            warning = each_warning;
            regions = None;
        }
    }
    Encoded {
        checksum,
        program: Some(node),
        reference: None,
        regions,
        search,
        warning,
    }
}

/// Words per region of a large tensor (DESIGN §8): a tensor of more words is split into
/// regions of this many words (the last one shorter; for a matrix whose row fits, of
/// whole rows, at most this many words: [`crate::synth::regions_of`]), each synthesized
/// on its own (in parallel), and stored as an explicit `Concat` of their programs.
///
/// 1 Mi words bounds the words and search state per worker to one region's (2 MiB of
/// BF16), lets one large tensor use every thread, and lets each region's literal tables
/// follow its own statistics, which more than pays for the extra tables: against 16 Mi
/// words, minilm-l6-v2-bf16 is 49,221 bytes smaller (34.07% -> 34.18%), the FP8 file
/// 49,221 smaller (29.08% -> 29.23%), whisper-tiny-en-f16 4,538 smaller; smaller regions
/// gain a little more bytes but cost search time (whisper at 256 Ki words: +50% time).
pub const REGION_WORDS: usize = 1 << 20;

/// Tensors of at least this many bytes have their source pages released region by
/// region as the workers read them ([`program_in_regions`]), so that a multi-GiB matrix
/// is never resident at once. A smaller tensor's pages stay mapped until the writer has
/// hashed them for the whole-file checksum, as a single region's do: released early,
/// every page was faulted in again there (minilm's 23 MB embedding: `--jobs 2` about 8%
/// slower). Either way the source bytes in flight are bounded by the pipeline's budget
/// (twice the largest record); what early release saves is at most this much per
/// tensor, inside the 64 MiB of slack of the peak bound (4 x the largest tensor +
/// 64 MiB).
pub const EARLY_RELEASE_BYTES: usize = 64 << 20;

/// The program of a region's `bytes` read as words of `width` bits: one synthesized
/// program (of a matrix of `rows` rows, when given), or for more than `region_words`
/// ([`REGION_WORDS`]) words a `Concat` of one per region (each worker holds one
/// region's words at a time), with each region's words and the xxh3-64 of its bytes
/// (what a regions record stores, format 4). Warnings of the regions
/// are joined. The regions of at least `early_release` ([`EARLY_RELEASE_BYTES`]) bytes
/// are passed to `release` as they are read.
#[allow(clippy::too_many_arguments)]
fn program_in_regions(
    bytes: &[u8],
    region_words: usize,
    early_release: usize,
    (width, dtype, rows): (u32, Option<Dtype>, Option<u64>),
    opts: &CompressOptions,
    region: impl Fn() -> String + Sync,
    release: &(dyn Fn(&[u8]) + Sync),
) -> (Node, SearchStats, Option<Warning>, Option<Vec<RegionSum>>) {
    let word_bytes = width.div_ceil(8) as usize;
    let words_of = |b: &[u8]| {
        Words::from_le_bytes(width, b)
            .expect("the parser checked every byte length against its dtype")
    };
    let n = bytes.len() / word_bytes.max(1);
    if n <= region_words {
        let (node, stats, warning) =
            program_for(Arc::new(words_of(bytes)), dtype, rows, opts, region);
        return (node, stats, warning, None);
    }
    let (region_words, cols) = crate::synth::regions_of(n, rows, region_words);
    // Regions are synthesized in parallel (on the caller's pool); each holds only its
    // own words. A large tensor's source pages are released region by region as they are
    // read; a smaller one's stay for the writer, which hashes and then releases them
    // (released here, they were faulted in again there: see `EARLY_RELEASE_BYTES`).
    let early = bytes.len() >= early_release;
    let parts: Vec<(Node, SearchStats, Option<Warning>, RegionSum)> = bytes
        .par_chunks(region_words * word_bytes)
        .enumerate()
        .map(|(k, chunk)| {
            let checksum = xxh3_64(chunk);
            let words = Arc::new(words_of(chunk));
            if early {
                release(chunk);
            }
            let (at, len) = (k * region_words, words.len());
            let rows = cols.map(|c| (len / c) as u64);
            let (node, stats, warning) = program_for(words, dtype, rows, opts, || {
                format!("{}, words [{at}, {})", region(), at + len)
            });
            let r = RegionSum {
                words: len as u64,
                checksum,
            };
            (node, stats, warning, r)
        })
        .collect();
    let mut children = Vec::with_capacity(parts.len());
    let mut regions = Vec::with_capacity(parts.len());
    let mut stats = SearchStats::default();
    let mut warning: Option<Warning> = None;
    for (node, s, w, r) in parts {
        stats.absorb(&s);
        if warning.is_none() {
            warning = w;
        }
        children.push(node);
        regions.push(r);
    }
    let node = Node::concat(children).expect("regions share the width and are not empty");
    (node, stats, warning, Some(regions))
}

/// One region of a record whose program is a `concat` of regions: its words and the
/// xxh3-64 of its bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct RegionSum {
    words: u64,
    checksum: u64,
}

/// Calibrates a prior on the tensors of `src` with the paper's defaults
/// ([`crate::synth::calibrate`]); the same for any thread count.
pub fn calibrate_source(src: &SourceFile<'_>, name: &Path) -> crate::synth::Prior {
    use crate::synth::calibrate::{calibrate, CalibrateOptions, Tensor};
    let infos = src.tensors();
    let tensors: Vec<Tensor> = infos
        .iter()
        .enumerate()
        .map(|(i, t)| Tensor {
            name: &t.name,
            dtype: t.dtype,
            words: src.tensor_bytes(i).len() * 8 / t.dtype.word_bits() as usize,
        })
        .collect();
    let load = |i: usize, n: usize| {
        let dtype = infos[i].dtype;
        let bytes = src.tensor_bytes(i);
        let take = (n * dtype.word_bits() as usize)
            .div_ceil(8)
            .min(bytes.len());
        Words::from_le_bytes(dtype.word_bits(), &bytes[..take]).unwrap_or_else(|| Words::empty(8))
    };
    let source = name.display().to_string();
    calibrate(&tensors, load, &CalibrateOptions::default(), &source)
}

/// Synthesizes a program for `words`; checks its type (always) and its output (when
/// `opts.verify`), falling back to a literal with a warning if either is wrong.
fn program_for(
    shared: Arc<Words>,
    dtype: Option<Dtype>,
    rows: Option<u64>,
    opts: &CompressOptions,
    region: impl Fn() -> String,
) -> (Node, SearchStats, Option<Warning>) {
    let words: &Words = &shared;
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
    let uniform = crate::synth::Prior::uniform();
    let prior = match &opts.prior {
        PriorChoice::Given(p) => p.as_ref(),
        _ => &uniform,
    };
    let mut syn = synthesize_matrix(&shared, dtype, rows, &opts.search, prior);
    if test_fault() == Some(Fault::BadProgram) {
        if let Ok(wrong) = Node::map(crate::dsl::MapFn::Xor(1), syn.program.clone()) {
            syn.program = wrong;
        }
    }
    let want = Ty::new(words.width(), words.len() as u64);
    let problem = if syn.program.ty() != want {
        Some(format!(
            "program type {} instead of {want}",
            syn.program.ty()
        ))
    } else if opts.verify {
        match crate::dsl::matches(&syn.program, words) {
            Ok(true) => None,
            Ok(false) => Some("its output differs".to_string()),
            Err(e) => Some(e.to_string()),
        }
    } else {
        None
    };
    match problem {
        None => (syn.program, syn.stats, None),
        Some(what) => {
            let (node, mut stats) = literal(syn.stats);
            stats.unrestored = true;
            let warning = Warning::Fallback {
                region: region(),
                what,
            };
            (node, stats, Some(warning))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dsl::{execute, Op};

    #[test]
    fn large_regions_become_an_explicit_concat_that_round_trips() {
        let words = Words::from_fn(16, 1000, |i| (i as u64 * 7919) % 300);
        let bytes: Vec<u8> = words
            .to_u64s()
            .iter()
            .flat_map(|&x| (x as u16).to_le_bytes())
            .collect();
        let opts = CompressOptions::default();
        // Each region's bytes are released once read: record them as offsets.
        let released = std::sync::Mutex::new(Vec::new());
        let regions_releasing = |region_words: usize, early_release: usize| {
            let release = |part: &[u8]| {
                let at = part.as_ptr() as usize - bytes.as_ptr() as usize;
                released.lock().unwrap().push((at, part.len()));
            };
            let opts = &opts;
            program_in_regions(
                &bytes,
                region_words,
                early_release,
                (16, Some(Dtype::BF16), None),
                opts,
                String::new,
                &release,
            )
        };
        let regions = |region_words: usize| regions_releasing(region_words, 0);
        let (node, _, warning, sums) = regions(300);
        assert!(warning.is_none());
        // Each region's words and the checksum of its bytes, for its record's table.
        let sums = sums.expect("four regions");
        let lens: Vec<u64> = sums.iter().map(|r| r.words).collect();
        assert_eq!(lens, [300, 300, 300, 100]);
        assert_eq!(sums[1].checksum, xxh3_64(&bytes[600..1200]));
        assert_eq!(sums[3].checksum, xxh3_64(&bytes[1800..]));
        match node.op() {
            Op::Concat(children) => assert_eq!(children.len(), 4),
            op => panic!("expected concat, got {op:?}"),
        }
        assert_eq!(execute(&node, 1000).unwrap(), words);
        let mut parts = std::mem::take(&mut *released.lock().unwrap());
        parts.sort_unstable();
        assert_eq!(parts, vec![(0, 600), (600, 600), (1200, 600), (1800, 200)]);
        let (single, _, _, none) = regions(1000);
        assert_eq!(none, None);
        // A single region is released by the caller, not here.
        assert!(released.lock().unwrap().is_empty());
        assert!(!matches!(single.op(), Op::Concat(_)));
        // Nor are the regions of a tensor smaller than the early-release size: the same
        // program, its pages left to the caller.
        let (kept, _, _, _) = regions_releasing(300, bytes.len() + 1);
        assert!(released.lock().unwrap().is_empty());
        assert_eq!(kept, node);
    }
}
