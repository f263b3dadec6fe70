//! Writing archives: `.safetensors` in, `.brv` out (DESIGN §7, §8).
//!
//! The source is memory-mapped and parsed ([`super::safetensors::parse`]); the header,
//! every tensor and every gap become one record each ([`super::format`]), synthesized in
//! parallel on a pool of `jobs` threads with a bounded window in flight, and written in
//! source order through a buffered writer into a temporary file in the output's folder,
//! which is synced and then renamed into place. The archive's bytes depend only on the
//! source and the search options, never on the number of threads.

mod encoded;
mod fault;
mod link;
mod options;
mod plan;
mod programs;

pub use options::{CompressOptions, CompressSummary, Links, ReferenceStat, RegionKind, RegionStat};
pub use plan::{GROUP_BYTES, GROUP_TENSOR_BYTES};
pub use programs::{calibrate_source, EARLY_RELEASE_BYTES, REGION_WORDS};

use super::base::OpenedSource;
use super::format::{self, HeadV4, HeaderV4, RegionHead};
use super::pool::{build_pool, ordered_pipeline_bounded, resolve_jobs};
use super::progress::ProgressEvent;
use super::safetensors::{parse, Region, SourceFile};
use crate::dsl::wire::{program_pieces, Piece};
use crate::dsl::{program_len, Node};
use crate::error::{Error, Result, Warning};
pub use crate::files::{
    check_output, cleanup_started, completed_outputs, is_temporary_name, remove_temporary_files,
    stale_temporaries, write_output_file, write_target, RemovedTemporaries, StaleTemporary, Target,
    STDOUT_LABEL,
};
use crate::files::{check_output_of, open_direct, persist, temp_beside};
use crate::hash::{xxh3_64, Xxh3};
use crate::synth::{PriorChoice, SearchStats};
use encoded::{Encoded, RegionSum};
use fault::{test_fault, Fault};
use link::{encode_linked, link_tensors, Linked};
use plan::{plan_records, PlannedRecord, RecordKind};
use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Write};
use std::path::Path;
use std::sync::{Arc, Mutex};

/// The file name an archive of `input` records for `decompress` to restore
/// ([`CompressOptions::file_name`]): its last component, when it is UTF-8.
pub fn recorded_name(input: &Path) -> Option<String> {
    input.file_name().and_then(|n| n.to_str()).map(String::from)
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
        (None, Source::File(input)) if recorded_name(input).is_some() => {
            named = CompressOptions {
                file_name: recorded_name(input),
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
    let archive = match super::reader::Archive::open_as(tmp, output) {
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
            // The record's checksum with the file's, each piece hashed twice while it
            // is in the cache (the workers do not hash records: one read of the source
            // here instead of one there and one here).
            let mut record_hasher = Xxh3::new();
            for part in bytes.chunks(HASH_PIECE_BYTES) {
                hasher.update(part);
                record_hasher.update(part);
            }
            let checksum = record_hasher.digest();
            // A record whose bytes an earlier data record holds is written as a copy of
            // it: decided here, in record order, so the archive does not depend on
            // which worker saw the bytes first.
            let fault = test_fault();
            let width = match fault {
                Some(Fault::CopyAnyWidth) => 0,
                _ => rec.word_bits(src),
            };
            let key = (checksum, bytes.len(), width);
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
                                checksum,
                                original_len: src.bytes().len() as u64,
                                file_name: opts.file_name.clone().unwrap_or_default(),
                                sources: linked.sources.iter().map(|(e, _)| e.clone()).collect(),
                            };
                            HeadV4::Header(&header)
                        }
                        (_, Some(r), _) => HeadV4::Ref {
                            items,
                            checksum,
                            source: (r.source as u64, r.tensor as u64, r.source_checksum),
                            op: r.op,
                        },
                        (_, None, Some(regions)) => HeadV4::Regions {
                            items,
                            checksum,
                            regions,
                        },
                        (_, None, None) => HeadV4::Data { items, checksum },
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

/// Bytes of source the writer hashes before releasing them (see `write_archive_releasing`).
const HASH_STEP_BYTES: usize = 8 << 20;

/// Bytes the sink hashes for the file's and the record's checksums before the next: a
/// piece both hashers read while it is in the second-level cache.
const HASH_PIECE_BYTES: usize = 256 << 10;

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

/// Encodes record `rec` (number `i` of the plan). A tensor record whose bytes'
/// [`sample_key`] an earlier record of the same length has already claimed in `claimed`
/// is left unencoded (see [`Encoded`]): most likely a copy, which the sink confirms by
/// checksum and bytes. Each large tensor's region is passed to `release` once its words
/// are read.
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
        let first = {
            let mut map = claimed.lock().unwrap_or_else(|e| e.into_inner());
            let e = map
                .entry((sample_key(bytes), bytes.len(), rec.word_bits(src)))
                .or_insert(i);
            *e = (*e).min(i);
            *e
        };
        if first < i {
            return Encoded {
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

/// The xxh3-64 of a sample of `bytes`: all of them up to 16 KiB, else the first and
/// last 4 KiB and 64 pieces of 64 bytes spaced evenly between. Equal bytes give equal
/// keys; a worker takes equal keys (and lengths) for a copy to skip, which the sink
/// confirms by the whole checksum and the bytes (or encodes the record itself), so a
/// sample is enough and costs no pass over a large tensor.
fn sample_key(bytes: &[u8]) -> u64 {
    const EDGE: usize = 4 << 10;
    const PIECES: usize = 64;
    const PIECE: usize = 64;
    let n = bytes.len();
    if n <= 4 * EDGE {
        return xxh3_64(bytes);
    }
    let mut sample = Vec::with_capacity(2 * EDGE + PIECES * PIECE);
    sample.extend_from_slice(&bytes[..EDGE]);
    let stride = (n - 2 * EDGE - PIECE) / PIECES;
    for k in 0..PIECES {
        let at = EDGE + k * stride;
        sample.extend_from_slice(&bytes[at..at + PIECE]);
    }
    sample.extend_from_slice(&bytes[n - EDGE..]);
    xxh3_64(&sample)
}
