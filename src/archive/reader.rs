//! Reading archives (DESIGN §7): open, list, decode one tensor, restore the original.
//!
//! [`Archive::open`] memory-maps the file and validates its structure — file header,
//! trailer, index and every record's fields — without decoding any program. The archive
//! is treated as hostile: every length, count and offset is checked against the bytes
//! present before it is used, nothing is allocated from an unchecked number, and nothing
//! panics. Programs are read ([`crate::dsl::read_program`]) and run only when a tensor is
//! decoded, against the type its dtype and byte length give, and the result is compared
//! with the stored xxh3-64 checksum.

use super::base::{BaseSet, OpenedSource};
use super::format::{self, Record, RecordV2, RecordV4, RefOp, Settings, SourceEntry, SourceRole};
use super::pool::resolve_jobs;
use super::progress::ProgressEvent;
use super::stream::{self, Decoded};
use crate::dsl::{execute, read_program, wire_version_of, Node, Ty};
use crate::error::{ArchiveError, Error, Result};
use crate::files::{check_output, open_direct, persist, temp_beside, SyncAhead, Target};
use crate::hash::{xxh3_64, Xxh3};
use crate::tensor::words_into_le_bytes;
use crate::tensor::Dtype;
use std::collections::HashMap;
use std::fs::File;
use std::io::Write;
use std::ops::{Deref, Range};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

/// Most bytes one region (the header, a tensor or a gap) may decode to: 64 GiB, well
/// above the largest single tensor of published checkpoints. A region is also refused
/// when an allocation of its size fails (e.g. under `ulimit -v`).
pub const MAX_REGION_BYTES: u64 = 1 << 36;

/// One tensor of an archive, as listed by the archive (its program is not decoded).
///
/// In a version-2 archive a tensor is stored in a record of its own, or with the small
/// tensors next to it in one *group* record ([`TensorEntry::group`]), or as a *copy* of
/// an earlier tensor with the same bytes ([`TensorEntry::copy_of`]); an empty tensor has
/// no record at all. Its name, dtype, shape and offsets come from the stored header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorEntry {
    /// The tensor's name (may hold control characters; see [`crate::shown::escape_name`]).
    pub name: String,
    /// Its dtype.
    pub dtype: Dtype,
    /// Its shape.
    pub shape: Vec<u64>,
    /// Its position among the source header's tensor entries.
    pub header_index: u64,
    /// Start of its bytes in the source's data region.
    pub begin: u64,
    /// End (exclusive).
    pub end: u64,
    /// xxh3-64 of the original bytes its record restores: its own bytes, or its group's
    /// (all of them) for a tensor in a group.
    pub checksum: u64,
    /// Byte range of its record in the archive (its group's record for a tensor in a
    /// group; empty for an empty tensor of a version-2 archive, which has no record).
    pub record: Range<usize>,
    /// Byte range of the program that restores it in the archive: its record's, its
    /// group's, or for a copy the program of the record it copies.
    pub program: Range<usize>,
    /// Name of the program's root operator (`lit`, `merge`, ...), read from its tag.
    pub root_op: &'static str,
    /// The group record it is stored in, an index into [`Archive::groups`].
    pub group: Option<usize>,
    /// The tensor (an index into [`Archive::tensors`]) whose record this one's copies.
    pub copy_of: Option<usize>,
    /// The search settings that built its record (version-1 archives do not say).
    pub settings: Option<Settings>,
    /// For a tensor coded against a tensor of a source (a reference record, version 3):
    /// which, and how; its program then restores the residual.
    pub reference: Option<Reference>,
    /// Bytes of the archive counted for it ([`TensorEntry::archive_bytes`]).
    share: u64,
    /// Bytes of program counted for it ([`TensorEntry::program_bytes`]).
    program_share: u64,
}

impl TensorEntry {
    /// Bytes of the tensor in the original file.
    pub fn original_bytes(&self) -> u64 {
        self.end - self.begin
    }

    /// Bytes of its record in the archive (its framing, checksum and program). A tensor
    /// in a group is counted its share of the group's record, in proportion to its
    /// original bytes (the shares of a group add up to its record exactly).
    pub fn archive_bytes(&self) -> u64 {
        self.share
    }

    /// Bytes of its program (part of [`TensorEntry::archive_bytes`]); a tensor in a
    /// group is counted its share of the group's program, a copy none.
    pub fn program_bytes(&self) -> u64 {
        self.program_share
    }

    /// The tensor's type: its bytes as little-endian words of `dtype.word_bits()` bits
    /// (docs/design.md §2). For a tensor in a group, the program has its group's type
    /// ([`GroupEntry::ty`]).
    pub fn ty(&self) -> Ty {
        let width = self.dtype.word_bits();
        Ty::new(width, self.original_bytes() / u64::from(width / 8))
    }
}

/// The shares of a group record of `record` bytes, `program` of them its program, among
/// tensors of `sizes` original bytes (in data order): (archive bytes, program bytes) per
/// tensor. The record is shared in proportion to the original bytes, the rounding put on
/// the last one, so that the shares add up to it exactly; so is the program, except that
/// no tensor's program share exceeds its record share (rounded independently, a tensor
/// of fracast0-f32 had 642 archive bytes and 643 program bytes). The writer's report and
/// the reader's listing count the same shares.
pub(crate) fn group_shares(record: u64, program: u64, sizes: &[u64]) -> Vec<(u64, u64)> {
    let total = sizes.iter().sum::<u64>().max(1);
    let upto_share =
        |whole: u64, upto: u64| (u128::from(whole) * u128::from(upto) / u128::from(total)) as u64;
    let program = program.min(record);
    let (mut upto, mut record_done, mut program_done) = (0u64, 0u64, 0u64);
    let mut out = Vec::with_capacity(sizes.len());
    for (k, &n) in sizes.iter().enumerate() {
        upto += n;
        let last = k + 1 == sizes.len();
        let record_to = if last {
            record
        } else {
            upto_share(record, upto)
        };
        let share = record_to - record_done;
        // The program shared in proportion too, but never past the record's share: the
        // program bytes a tensor is not given here go to the next (the framing between
        // the program's cumulative share and the record's bounds what is carried, so the
        // last tensor's record share holds the rest of the program).
        let program_to = if last {
            program
        } else {
            upto_share(program, upto).min(program_done + share)
        };
        out.push((share, program_to - program_done));
        record_done = record_to;
        program_done = program_to;
    }
    out
}

#[cfg(test)]
mod group_share_tests {
    use super::group_shares;

    #[test]
    fn shares_add_up_and_each_record_share_holds_its_program_share() {
        // The case of the issue: two shares rounded apart gave 642 and 643.
        let s = group_shares(48, 39, &[32, 32]);
        assert_eq!(s, vec![(24, 19), (24, 20)]);
        let mut seed = 7u64;
        let mut next = || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            seed >> 33
        };
        for _ in 0..2000 {
            let k = 1 + (next() % 12) as usize;
            let sizes: Vec<u64> = (0..k).map(|_| next() % 3000).collect();
            let program = next() % 5000;
            let record = program + next() % 20;
            let s = group_shares(record, program, &sizes);
            assert_eq!(s.iter().map(|x| x.0).sum::<u64>(), record, "{sizes:?}");
            assert_eq!(s.iter().map(|x| x.1).sum::<u64>(), program, "{sizes:?}");
            assert!(
                s.iter().all(|&(a, p)| a >= p),
                "{record} {program} {sizes:?}: {s:?}"
            );
        }
    }
}

/// What a reference record codes its tensor against (docs/design.md §12): tensor
/// `tensor` (in data order) of source `source` (an index into [`Archive::sources`]),
/// whose bytes have xxh3-64 `source_checksum`; the record's program restores the
/// residual, which [`RefOp`] combines with the source tensor's words.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reference {
    /// Index into [`Archive::sources`].
    pub source: usize,
    /// Position of the source's tensor among the source's tensors, in data order.
    pub tensor: u64,
    /// xxh3-64 of the source tensor's bytes.
    pub source_checksum: u64,
    /// How the residual combines with the source's words.
    pub op: RefOp,
}

/// A group record of a version-2 archive: consecutive small tensors of one dtype, coded
/// as one stream (the concatenation of their words) by one program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupEntry {
    /// Its tensors, a range of indices into [`Archive::tensors`] (consecutive in data
    /// order).
    pub tensors: Range<usize>,
    /// Start of its bytes in the data region.
    pub begin: u64,
    /// End (exclusive).
    pub end: u64,
    /// The dtype of its tensors.
    pub dtype: Dtype,
    /// xxh3-64 of its original bytes.
    pub checksum: u64,
    /// Byte range of its record in the archive.
    pub record: Range<usize>,
    /// Byte range of its program in the archive.
    pub program: Range<usize>,
    /// The search settings that built it.
    pub settings: Option<Settings>,
}

impl GroupEntry {
    /// The program's type: the group's bytes as little-endian words of its dtype.
    pub fn ty(&self) -> Ty {
        let width = self.dtype.word_bits();
        Ty::new(width, (self.end - self.begin) / u64::from(width / 8))
    }
}

/// Bytes of the source's data region that no tensor owns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GapEntry {
    /// Start in the data region.
    pub begin: u64,
    /// End (exclusive).
    pub end: u64,
    /// xxh3-64 of the bytes.
    pub checksum: u64,
    /// Byte range of its record in the archive.
    pub record: Range<usize>,
    /// Byte range of its program in the archive.
    pub program: Range<usize>,
}

/// A region in record order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Item {
    Header,
    Tensor(usize),
    Gap(usize),
    Group(usize),
    /// A tensor or gap whose record was not found: an archive opened without its index
    /// ([`Archive::open_for_salvage`]) cut or damaged before it.
    Lost(usize),
}

/// One region of a large tensor (or gap) stored with a checksum of its own (a regions
/// record, format 4): the child of the record's root `concat` that restores it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegionSpan {
    /// Words it restores.
    pub words: u64,
    /// Where its bytes start among the record's restored bytes, in bytes.
    pub offset: u64,
    /// Byte range of its program (the `concat`'s child) in the archive.
    pub program: Range<usize>,
    /// xxh3-64 of the original bytes it restores.
    pub checksum: u64,
}

/// A tensor or gap of an archive opened without its index whose record was not found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LostEntry {
    /// Start of its bytes in the data region.
    begin: u64,
    /// End (exclusive).
    end: u64,
    /// The tensor (an index into [`Archive::tensors`]), or `None` for a gap.
    tensor: Option<usize>,
    /// Why its record was not found.
    why: String,
}

enum Backing {
    Map(memmap2::Mmap),
    Owned(Vec<u8>),
    /// A remote archive read by ranges: its image holds what opening read.
    #[cfg(feature = "object-store")]
    Ranged(super::remote::Ranged),
}

impl Deref for Backing {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Backing::Map(m) => m,
            Backing::Owned(v) => v,
            #[cfg(feature = "object-store")]
            Backing::Ranged(r) => r.image(),
        }
    }
}

/// How to decompress.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DecompressOptions {
    /// Worker threads (`None` = all cores).
    pub jobs: Option<usize>,
    /// Replace an existing output file.
    pub force: bool,
    /// Restore what can be restored of a damaged archive: every region whose bytes
    /// match their checksum is written, every other one (a tensor, group or gap whose
    /// program does not decode or does not restore its checksum) is zero-filled and
    /// listed in [`DecompressSummary::damaged`] instead of failing the job. The header
    /// record cannot be salvaged (it names every tensor).
    pub salvage: bool,
    /// The base checkpoint the archive was coded against (`--base`), attached before
    /// anything is written ([`Archive::attach_base`]).
    pub base: Option<Arc<BaseSet>>,
}

/// A region that [`DecompressOptions::salvage`] zero-filled in the restored file.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct DamagedRegion {
    /// For a folder archive, the file it is in (its path in the folder, `/`-separated);
    /// `None` (and left out of JSON) for a single archive.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// What it is: `tensor "w"`, `group of 3 tensors "a" to "c"`, `gap at data bytes
    /// [8, 10)`, `tensor "w", region 2 of 12 (words [1048576, 2097152))`, or for a
    /// folder archive's file that cannot be restored at all, `the whole file`.
    pub region: String,
    /// The tensors whose bytes it holds, in data order (none for a gap).
    pub tensors: Vec<String>,
    /// Where its bytes start in the restored file, in bytes.
    pub offset: u64,
    /// Its length in bytes, all zeros in the restored file.
    pub bytes: u64,
    /// Why: the decoder's error, or the checksum mismatch.
    pub reason: String,
}

/// What [`Archive::decompress_to`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecompressSummary {
    /// The file written.
    pub output: PathBuf,
    /// Its length in bytes.
    pub original_bytes: u64,
    /// Whether the archive's records hash to their stored checksum
    /// ([`Archive::records_intact`]); damage there (a name, a shape) can leave the
    /// restored bytes, which their own checksums prove, untouched.
    pub records_intact: bool,
    /// With [`DecompressOptions::salvage`]: the regions zero-filled because they did not
    /// restore (empty when the whole file did, and always without salvage).
    pub damaged: Vec<DamagedRegion>,
}

/// An opened, structurally validated archive.
pub struct Archive {
    path: PathBuf,
    bytes: Backing,
    header_len: u64,
    header_checksum: u64,
    header_record: Range<usize>,
    header_program: Range<usize>,
    original_len: u64,
    file_checksum: u64,
    records_checksum: u64,
    records_end: usize,
    version: u16,
    /// The program wire version the file header declares (bytes 10..12).
    wire: u16,
    file_name: Option<String>,
    settings: Vec<Settings>,
    /// The sources reference records take tensors from (version 3).
    sources: Vec<SourceEntry>,
    /// Each source, once attached ([`Archive::attach`]).
    links: Vec<OnceLock<Arc<OpenedSource>>>,
    tensors: Vec<TensorEntry>,
    gaps: Vec<GapEntry>,
    groups: Vec<GroupEntry>,
    items: Vec<Item>,
    /// The regions of each item stored in a regions record (format 4).
    regions: HashMap<Item, Arc<[RegionSpan]>>,
    /// The items of an archive opened without its index whose records were not found.
    lost: Vec<LostEntry>,
    /// For an archive opened without its index ([`Archive::open_for_salvage`]): what is
    /// wrong with it, and where the records found end.
    indexless: Option<String>,
}

impl std::fmt::Debug for Archive {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Archive")
            .field("path", &self.path)
            .field("archive_len", &self.bytes.len())
            .field("original_len", &self.original_len)
            .field("tensors", &self.tensors.len())
            .finish()
    }
}

impl Archive {
    /// Opens and validates the archive at `path` (memory-mapped).
    ///
    /// # Errors
    /// [`Error::Io`] if it cannot be read; [`Error::Archive`] if it is not an archive,
    /// has an unsupported version, or its structure is inconsistent.
    pub fn open(path: &Path) -> Result<Archive> {
        Archive::open_as(path, path)
    }

    /// [`Archive::open`] of the file at `path`, named `label` in its messages and by
    /// [`Archive::path`] (a temporary file named as the output it becomes).
    pub(crate) fn open_as(path: &Path, label: &Path) -> Result<Archive> {
        crate::files::regular_file(path)?;
        let file = File::open(path).map_err(|e| Error::io(path, "cannot open", e))?;
        let meta = file
            .metadata()
            .map_err(|e| Error::io(path, "cannot read", e))?;
        let bytes = if meta.len() == 0 {
            Backing::Owned(Vec::new())
        } else {
            Backing::Map(
                crate::files::map_file(&file).map_err(|e| Error::io(path, "cannot map", e))?,
            )
        };
        Archive::validate(label.to_path_buf(), bytes)
    }

    /// Validates an archive held in memory; `path` only labels errors.
    ///
    /// # Errors
    /// As [`Archive::open`].
    pub fn from_bytes(bytes: Vec<u8>, path: impl Into<PathBuf>) -> Result<Archive> {
        Archive::validate(path.into(), Backing::Owned(bytes))
    }

    /// A remote archive whose structure `ranged` has read ([`Archive::open_url`]).
    #[cfg(feature = "object-store")]
    pub(crate) fn from_ranged(ranged: super::remote::Ranged) -> Result<Archive> {
        Archive::validate(PathBuf::from(ranged.url()), Backing::Ranged(ranged))
    }

    /// Bytes read from the archive's store so far (an archive opened by
    /// [`Archive::open_url`]); its length for one opened otherwise.
    pub fn bytes_read(&self) -> u64 {
        match &self.bytes {
            #[cfg(feature = "object-store")]
            Backing::Ranged(r) => r.bytes_read(),
            _ => self.bytes.len() as u64,
        }
    }

    /// The archive bytes in `range`: for a remote archive, fetched.
    fn fetch(&self, range: &Range<usize>) -> Result<std::borrow::Cow<'_, [u8]>> {
        match &self.bytes {
            #[cfg(feature = "object-store")]
            Backing::Ranged(r) => r.get(range),
            b => b
                .get(range.clone())
                .map(std::borrow::Cow::Borrowed)
                .ok_or_else(|| {
                    Error::archive(
                        &self.path,
                        ArchiveError::DamagedRecord {
                            what: format!(
                                "bytes [{}, {}) are past the end of the archive, cut at byte {}",
                                range.start,
                                range.end,
                                b.len()
                            ),
                        },
                    )
                }),
        }
    }

    /// Opens the archive at `path` for `decompress --salvage`: as [`Archive::open`], or,
    /// for a format-4 archive whose trailer or index cannot be read (the file cut short,
    /// say by an interrupted download, or the index damaged), by walking its records
    /// from byte 16 (each record's frame gives its kind and length): every record that
    /// is whole and reads is used, and the tensors and gaps after the last one are
    /// restored by none ([`Archive::missing_index`] says so; salvage zero-fills and names
    /// them). The header record must be whole and restore the source's header, which
    /// names every tensor.
    ///
    /// # Errors
    /// As [`Archive::open`] when the archive is not of format 4 or its damage is not in
    /// its trailer or index; [`Error::Archive`] saying that nothing can be salvaged when
    /// the header record is cut or damaged too.
    pub fn open_for_salvage(path: &Path) -> Result<Archive> {
        let e = match Archive::open(path) {
            Ok(a) => return Ok(a),
            Err(e) => e,
        };
        let Error::Archive {
            source: ArchiveError::Corrupt { what },
            ..
        } = &e
        else {
            return Err(e);
        };
        let file = File::open(path).map_err(|e| Error::io(path, "cannot open", e))?;
        let bytes = Backing::Map(
            crate::files::map_file(&file).map_err(|e| Error::io(path, "cannot map", e))?,
        );
        Archive::walk(path.to_path_buf(), bytes, what).unwrap_or(Err(e))
    }

    /// [`Archive::open_for_salvage`] of an archive held in memory; `path` only labels
    /// errors.
    ///
    /// # Errors
    /// As [`Archive::open_for_salvage`].
    pub fn from_bytes_for_salvage(bytes: Vec<u8>, path: impl Into<PathBuf>) -> Result<Archive> {
        let path = path.into();
        let e = match parse_structure(&bytes) {
            Ok(s) => return Ok(Archive::from_structure(path, Backing::Owned(bytes), s)),
            Err(e) => e,
        };
        let ArchiveError::Corrupt { what } = &e else {
            return Err(Error::archive(&path, e));
        };
        let what = what.clone();
        Archive::walk(path.clone(), Backing::Owned(bytes), &what)
            .unwrap_or_else(|| Err(Error::archive(&path, e)))
    }

    /// The archive in `bytes` opened by walking its records ([`parse_walk`]), its index
    /// being unreadable for `why`; `None` when it is not a format-4 archive.
    fn walk(path: PathBuf, bytes: Backing, why: &str) -> Option<Result<Archive>> {
        if bytes.get(..8) != Some(&format::MAGIC[..])
            || bytes.get(8..10) != Some(&4u16.to_le_bytes()[..])
        {
            return None;
        }
        Some(match parse_walk(&bytes, why) {
            Ok(s) => Ok(Archive::from_structure(path, bytes, s)),
            Err(e) => Err(Error::archive(&path, e)),
        })
    }

    fn validate(path: PathBuf, bytes: Backing) -> Result<Archive> {
        match parse_structure(&bytes) {
            Ok(s) => Ok(Archive::from_structure(path, bytes, s)),
            Err(e) => Err(Error::archive(&path, e)),
        }
    }

    fn from_structure(path: PathBuf, bytes: Backing, s: Structure) -> Archive {
        Archive {
            path,
            bytes,
            header_len: s.header_len,
            header_checksum: s.header_checksum,
            header_record: s.header_record,
            header_program: s.header_program,
            original_len: s.original_len,
            file_checksum: s.file_checksum,
            records_checksum: s.records_checksum,
            records_end: s.records_end,
            version: s.version,
            wire: s.wire,
            file_name: s.file_name,
            settings: s.settings,
            links: s.sources.iter().map(|_| OnceLock::new()).collect(),
            sources: s.sources,
            tensors: s.tensors,
            gaps: s.gaps,
            groups: s.groups,
            items: s.items,
            regions: s.regions,
            lost: s.lost,
            indexless: s.indexless,
        }
    }

    /// The archive's path (or the label given to [`Archive::from_bytes`]).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Length of the archive in bytes.
    pub fn archive_len(&self) -> u64 {
        self.bytes.len() as u64
    }

    /// Length of the original file in bytes.
    pub fn original_len(&self) -> u64 {
        self.original_len
    }

    /// xxh3-64 of the whole original file.
    pub fn file_checksum(&self) -> u64 {
        self.file_checksum
    }

    /// Whether the archive's record bytes (names, shapes, programs: everything but the
    /// index) still hash to the checksum stored when it was written. Reads every record.
    pub fn records_intact(&self) -> bool {
        self.records_intact_unless(&AtomicBool::new(false))
            .unwrap_or(false)
    }

    /// [`Archive::records_intact`], given up (`None`) once `stop` is set: checked
    /// between chunks, so that a failed decompression does not wait for the hash of a
    /// large archive.
    fn records_intact_unless(&self, stop: &AtomicBool) -> Option<bool> {
        // In chunks whose mapped pages are released once hashed: memory does not grow
        // with the archive.
        const CHUNK: usize = 8 << 20;
        let mut hasher = Xxh3::new();
        let mut at = format::FILE_HEADER_LEN;
        while at < self.records_end {
            if stop.load(Ordering::Relaxed) {
                return None;
            }
            let end = self.records_end.min(at + CHUNK);
            hasher.update(&self.fetch(&(at..end)).ok()?);
            self.release(&(at..end));
            at = end;
        }
        Some(hasher.digest() == self.records_checksum)
    }

    /// Length of the source's JSON header in bytes (its 8-byte length field's value).
    pub fn header_len(&self) -> u64 {
        self.header_len
    }

    /// Bytes of the header record in the archive.
    pub fn header_archive_bytes(&self) -> u64 {
        self.header_record.len() as u64
    }

    /// The tensors, in record (data-offset) order.
    pub fn tensors(&self) -> &[TensorEntry] {
        &self.tensors
    }

    /// The gaps (bytes no tensor owns), in offset order.
    pub fn gaps(&self) -> &[GapEntry] {
        &self.gaps
    }

    /// The group records (version 2): runs of small tensors stored together.
    pub fn groups(&self) -> &[GroupEntry] {
        &self.groups
    }

    /// The archive's format version (1 to 4).
    pub fn version(&self) -> u16 {
        self.version
    }

    /// The source's file name as the archive stores it (version 2; `None` when it was
    /// not known, e.g. for an archive made in memory, and for version 1).
    pub fn file_name(&self) -> Option<&str> {
        self.file_name.as_deref()
    }

    /// The distinct search settings that built the archive's records (empty for
    /// version 1, which does not record them).
    pub fn settings(&self) -> &[Settings] {
        &self.settings
    }

    /// The sources its reference records take tensors from (version 3; empty before):
    /// each pinned by its length and xxh3-64.
    pub fn sources(&self) -> &[SourceEntry] {
        &self.sources
    }

    /// The source `i` attached to it, if any.
    pub fn attached(&self, i: usize) -> Option<&Arc<OpenedSource>> {
        self.links.get(i).and_then(OnceLock::get)
    }

    /// Attaches `source` as source `i` (of [`Archive::sources`]): what its reference
    /// records to it decode against. A source already attached stays.
    ///
    /// # Errors
    /// [`Error::Invalid`] of kind `wrong_base` naming `source`'s path if it is not the
    /// file the archive pins (its length or checksum differs), saying what differs.
    pub fn attach(&self, i: usize, source: Arc<OpenedSource>) -> Result<()> {
        let Some(entry) = self.sources.get(i) else {
            return Ok(());
        };
        if !source.matches(entry) {
            return Err(Error::Invalid {
                path: source.path().to_path_buf(),
                what: "is not the base this archive was made against",
                detail: format!(
                    "{} was coded against {} {:?} of {} bytes with xxh3 {:016x}; this file \
                     is {} bytes with xxh3 {:016x}",
                    crate::shown::shown_path(&self.path),
                    entry.role.name(),
                    entry.name,
                    entry.original_len,
                    entry.checksum,
                    source.original_len(),
                    source.checksum()
                ),
                kind: "wrong_base",
            });
        }
        let _ = self.links[i].set(source);
        Ok(())
    }

    /// Whether the archive lists a base checkpoint among its sources (role
    /// [`SourceRole::Base`]): its reference records need that base attached.
    pub fn needs_base(&self) -> bool {
        self.sources.iter().any(|e| e.role == SourceRole::Base)
    }

    /// Attaches the files of `base` to the archive's base sources: each to the base file
    /// of the same length and checksum (the name may differ).
    ///
    /// # Errors
    /// [`Error::Invalid`] of kind `wrong_base`, naming the base and what differs, when a
    /// base source has no such file in `base`.
    pub fn attach_base(&self, base: &BaseSet) -> Result<()> {
        for (i, entry) in self.sources.iter().enumerate() {
            if entry.role != SourceRole::Base || self.attached(i).is_some() {
                continue;
            }
            match base.sources.iter().find(|s| s.matches(entry)) {
                Some(s) => self.attach(i, s.clone())?,
                None => {
                    let named = base.sources.iter().find(|s| s.name() == entry.name);
                    let what = match named {
                        Some(s) => format!(
                            "its {:?} is {} bytes with xxh3 {:016x}",
                            s.name(),
                            s.original_len(),
                            s.checksum()
                        ),
                        None => format!(
                            "it holds no file of that length and checksum (nor one named \
                             {:?})",
                            entry.name
                        ),
                    };
                    return Err(Error::Invalid {
                        path: base.path().to_path_buf(),
                        what: "is not the base this archive was made against",
                        detail: format!(
                            "{} was coded against {:?} of {} bytes with xxh3 {:016x}; {what}",
                            crate::shown::shown_path(&self.path),
                            entry.name,
                            entry.original_len,
                            entry.checksum
                        ),
                        kind: "wrong_base",
                    });
                }
            }
        }
        Ok(())
    }

    /// Refuses to go on while a source some record is coded against is not attached:
    /// what `decompress`, `verify` and `extract` check before anything is written.
    ///
    /// # Errors
    /// [`Error::Invalid`] of kind `base_missing` naming the archive and the source
    /// (`--base` for a base; the folder for a sibling shard).
    pub fn require_sources(&self) -> Result<()> {
        for (i, e) in self.sources.iter().enumerate() {
            if self.attached(i).is_none() {
                return Err(self.missing_source(e));
            }
        }
        Ok(())
    }

    /// [`Archive::require_sources`] for a salvage: the base must be given (a user's
    /// omission, said before anything is written), but another shard of a folder may be
    /// missing (too damaged to open), which costs only the tensors taken from it.
    ///
    /// # Errors
    /// As [`Archive::require_sources`], for a base source only.
    pub fn require_base(&self) -> Result<()> {
        for (i, e) in self.sources.iter().enumerate() {
            if e.role == SourceRole::Base && self.attached(i).is_none() {
                return Err(self.missing_source(e));
            }
        }
        Ok(())
    }

    fn missing_source(&self, e: &SourceEntry) -> Error {
        let hint = match e.role {
            SourceRole::Base => {
                "pass it with --base (a .safetensors file, a checkpoint \
                                 folder or an archive of it)"
            }
            SourceRole::Shard => {
                "it is another shard of the folder archive: open the folder, \
                                  not the shard alone"
            }
        };
        Error::Invalid {
            path: self.path.clone(),
            what: "needs its base",
            detail: format!(
                "it is coded against {} {:?} ({} bytes, xxh3 {:016x}), which is not given; {hint}",
                e.role.name(),
                e.name,
                e.original_len,
                e.checksum
            ),
            kind: "base_missing",
        }
    }

    /// The bytes tensor `t` restores, for an archive used as a source
    /// ([`OpenedSource`]): as [`Archive::decode_tensor`], refusing a tensor that is
    /// itself coded against another shard (sources are one level deep).
    pub(crate) fn decode_source_tensor(&self, t: usize) -> Result<Vec<u8>> {
        let e = self.tensor(t)?;
        if let Some(r) = e.reference {
            if self.sources[r.source].role == SourceRole::Shard {
                return Err(self.decode_err(
                    Item::Tensor(t),
                    "a tensor taken from another shard is itself taken from a shard",
                ));
            }
        }
        self.decode_tensor(t)
    }

    /// The source tensor's bytes of a reference record of `item`, checked: the source
    /// attached, the tensor there, of the record's byte length and checksum.
    fn source_bytes(
        &self,
        item: Item,
        r: &Reference,
        bytes: u64,
    ) -> Result<std::borrow::Cow<'_, [u8]>> {
        let entry = &self.sources[r.source];
        let src = self
            .attached(r.source)
            .ok_or_else(|| self.missing_source(entry))?;
        let t = usize::try_from(r.tensor)
            .ok()
            .filter(|&t| t < src.tensors().len())
            .ok_or_else(|| {
                self.decode_err(
                    item,
                    format!(
                        "coded against tensor #{} of {:?}, which has {}",
                        r.tensor,
                        entry.name,
                        src.tensors().len()
                    ),
                )
            })?;
        let info = &src.tensors()[t];
        if info.bytes != bytes {
            return Err(self.decode_err(
                item,
                format!(
                    "coded against {:?} of {:?}, of {} bytes, but restores {bytes}",
                    info.name, entry.name, info.bytes
                ),
            ));
        }
        let data = src.tensor_bytes(t)?;
        let actual = xxh3_64(&data);
        if actual != r.source_checksum {
            return Err(Error::Invalid {
                path: src.path().to_path_buf(),
                what: "is not the base this archive was made against",
                detail: format!(
                    "its tensor {:?} has xxh3 {actual:016x}; {} needs {:016x}",
                    info.name,
                    crate::shown::shown_path(&self.path),
                    r.source_checksum
                ),
                kind: "wrong_base",
            });
        }
        Ok(data)
    }

    /// Runs `node` (the program of `item`, `ty.len` words) and returns the item's bytes:
    /// for a reference record, the residual combined with its source tensor's.
    pub(crate) fn run_item(&self, item: Item, node: &Node, ty: Ty) -> Result<Vec<u8>> {
        let reference = match item {
            Item::Tensor(i) => self.tensors[i].reference,
            _ => None,
        };
        let Some(r) = reference else {
            let len = ty
                .len
                .saturating_mul(crate::tensor::container_bytes(ty.width) as u64);
            let len = usize::try_from(len).map_err(|_| {
                self.decode_err(
                    item,
                    crate::dsl::ExecError::TooLarge {
                        len: ty.len,
                        limit: ty.len,
                    },
                )
            })?;
            let mut bytes = vec![0u8; len];
            crate::dsl::fused::execute_into(node, &mut bytes)
                .map_err(|e| self.decode_err(item, e))?;
            return Ok(bytes);
        };
        let wb = crate::tensor::container_bytes(ty.width);
        let len = ty.len.saturating_mul(wb as u64);
        let source = self.source_bytes(item, &r, len)?;
        super::base::restore(node, ty, &source, r.op).map_err(|e| self.decode_err(item, e))
    }

    /// Whether `item` is a tensor coded against a source.
    pub(crate) fn is_reference(&self, item: Item) -> bool {
        matches!(item, Item::Tensor(i) if self.tensors[i].reference.is_some())
    }

    /// Index in [`Archive::tensors`] of the first tensor named `name`.
    pub fn find(&self, name: &str) -> Option<usize> {
        self.tensors.iter().position(|t| t.name == name)
    }

    /// [`Archive::find`], also taking a name as `ls` prints it: a name with control
    /// characters or backslashes is printed escaped ([`crate::shown::escape_name`]), so
    /// a person copies the escaped form. The exact name wins; an escaped form matches
    /// only the one tensor it escapes.
    pub fn find_as_printed(&self, name: &str) -> Option<usize> {
        self.find(name).or_else(|| {
            let mut hits = (0..self.tensors.len())
                .filter(|&i| crate::shown::escape_name(&self.tensors[i].name) == name);
            match (hits.next(), hits.next()) {
                (Some(i), None) => Some(i),
                _ => None,
            }
        })
    }

    fn tensor(&self, i: usize) -> Result<&TensorEntry> {
        self.tensors.get(i).ok_or_else(|| {
            Error::archive(
                &self.path,
                ArchiveError::NoSuchTensor {
                    index: i,
                    count: self.tensors.len(),
                },
            )
        })
    }

    /// Reads (without running) the program that restores tensor `i`: its record's, or
    /// for a tensor in a group the group's (of the group's type, [`GroupEntry::ty`]);
    /// an empty tensor of a version-2 archive, which has no record, gets `Lit` of no
    /// words.
    ///
    /// # Errors
    /// [`ArchiveError::NoSuchTensor`] for a bad index; [`ArchiveError::Decode`] if the
    /// program bytes are malformed or do not have the tensor's type.
    pub fn program(&self, i: usize) -> Result<Node> {
        let t = self.tensor(i)?;
        match t.group {
            Some(g) => self.read(&t.program, self.groups[g].ty(), Item::Group(g)),
            None if t.record.is_empty() && t.original_bytes() == 0 => {
                Ok(Node::lit(&crate::tensor::Words::empty(t.dtype.word_bits())))
            }
            None => self.read(&t.program, t.ty(), Item::Tensor(i)),
        }
    }

    /// The program of the source header (type `u8[header_len]`).
    ///
    /// # Errors
    /// [`ArchiveError::Decode`] if it is malformed.
    pub fn header_program(&self) -> Result<Node> {
        self.read(&self.header_program, self.header_ty(), Item::Header)
    }

    /// Decodes tensor `i` into its original bytes and checks them against the stored
    /// checksum (a tensor in a group: the whole group is decoded and checked, then its
    /// part returned).
    ///
    /// # Errors
    /// As [`Archive::program`], plus [`ArchiveError::Decode`] if the program does not run
    /// and [`Error::Mismatch`] if the bytes differ from the stored checksum.
    pub fn decode_tensor(&self, i: usize) -> Result<Vec<u8>> {
        let t = self.tensor(i)?;
        match t.group {
            Some(g) => {
                let group = &self.groups[g];
                let all = self.decode_checked(Item::Group(g))?;
                let at = (t.begin - group.begin) as usize;
                Ok(all[at..at + t.original_bytes() as usize].to_vec())
            }
            None if t.record.is_empty() && t.original_bytes() == 0 => Ok(Vec::new()),
            None => self.decode_checked(Item::Tensor(i)),
        }
    }

    /// The words of the base tensor that tensor `i`'s reference record is coded against
    /// (of the tensor's word width and length), which its residual program's bucket
    /// literals may take as their context ([`crate::dsl::execute_in`]); `None` for a
    /// tensor that is not a reference.
    ///
    /// # Errors
    /// [`ArchiveError::NoSuchTensor`] for a bad index; a missing or mismatched source, as
    /// [`Archive::decode_tensor`].
    pub fn base_words(&self, i: usize) -> Result<Option<crate::tensor::Words>> {
        let t = self.tensor(i)?;
        let Some(r) = t.reference else {
            return Ok(None);
        };
        let width = t.dtype.word_bits();
        let source = self.source_bytes(Item::Tensor(i), &r, t.original_bytes())?;
        Ok(crate::tensor::Words::from_le_bytes(width, &source))
    }

    /// Decodes the source's JSON header and checks it against the stored checksum.
    ///
    /// # Errors
    /// As [`Archive::decode_tensor`].
    pub fn header_bytes(&self) -> Result<Vec<u8>> {
        self.decode_checked(Item::Header)
    }

    /// Where the tensor records disagree with the source header the archive restores:
    /// each record's name, dtype, shape and data offsets against the header's entry at
    /// its index, one message per record that differs (empty when all agree). Decodes
    /// only the header (small), so listing can tell a damaged record (a name changed
    /// after writing) from a sound one without hashing the archive.
    ///
    /// # Errors
    /// As [`Archive::header_bytes`] (a damaged header record is a checksum mismatch);
    /// [`Error::Archive`] if the restored header is not a `.safetensors` header.
    pub fn header_disagreements(&self) -> Result<Vec<String>> {
        if self.version >= 2 {
            // Version-2 records hold no name, dtype, shape or offsets: the header is the
            // only place that says them, checked against its checksum when opened.
            return Ok(Vec::new());
        }
        let header = self.header_bytes()?;
        let entries = std::str::from_utf8(&header)
            .ok()
            .and_then(|text| super::safetensors::header_tensors(text).ok())
            .ok_or_else(|| {
                Error::archive(
                    &self.path,
                    ArchiveError::Decode {
                        region: "header".to_string(),
                        what: "the restored header is not a .safetensors header".to_string(),
                    },
                )
            })?;
        let mut out = Vec::new();
        for t in &self.tensors {
            let i = t.header_index;
            let Some((name, dtype, shape, offsets)) =
                usize::try_from(i).ok().and_then(|i| entries.get(i))
            else {
                out.push(format!(
                    "record of tensor {:?}: the header has no entry #{i}",
                    t.name
                ));
                continue;
            };
            let mut what = Vec::new();
            if *name != t.name {
                what.push(format!("the header names it {name:?}"));
            }
            if dtype != t.dtype.name() {
                what.push(format!("dtype {}, the header says {dtype}", t.dtype.name()));
            }
            if *shape != t.shape {
                what.push(format!("shape {:?}, the header says {shape:?}", t.shape));
            }
            if *offsets != (t.begin, t.end) {
                what.push(format!(
                    "offsets [{}, {}], the header says [{}, {}]",
                    t.begin, t.end, offsets.0, offsets.1
                ));
            }
            if !what.is_empty() {
                out.push(format!(
                    "record of tensor {:?}: {}",
                    t.name,
                    what.join(", ")
                ));
            }
        }
        Ok(out)
    }

    fn header_ty(&self) -> Ty {
        Ty::new(8, self.header_len)
    }

    pub(crate) fn items(&self) -> &[Item] {
        &self.items
    }

    /// Description of an item for messages: `header`, `tensor "w"`, `gap at ...`.
    pub(crate) fn item_region(&self, item: Item) -> String {
        match item {
            Item::Header => "header".to_string(),
            Item::Tensor(i) => format!("tensor {:?}", self.tensors[i].name),
            Item::Gap(g) => {
                let g = &self.gaps[g];
                format!("gap at data bytes [{}, {})", g.begin, g.end)
            }
            Item::Group(k) => {
                let g = &self.groups[k];
                format!(
                    "group of {} tensors {:?} to {:?}",
                    g.tensors.len(),
                    self.tensors[g.tensors.start].name,
                    self.tensors[g.tensors.end - 1].name
                )
            }
            Item::Lost(k) => {
                let l = &self.lost[k];
                match l.tensor {
                    Some(t) => format!("tensor {:?}", self.tensors[t].name),
                    None => format!("gap at data bytes [{}, {})", l.begin, l.end),
                }
            }
        }
    }

    /// Label of an item for progress: the tensor name (a group's first), `(header)` or
    /// `(gap)`.
    pub(crate) fn item_label(&self, item: Item) -> &str {
        match item {
            Item::Header => "(header)",
            Item::Tensor(i) => &self.tensors[i].name,
            Item::Gap(_) => "(gap)",
            Item::Group(k) => &self.tensors[self.groups[k].tensors.start].name,
            Item::Lost(k) => match self.lost[k].tensor {
                Some(t) => &self.tensors[t].name,
                None => "(gap)",
            },
        }
    }

    /// Original bytes an item restores (the header's include the 8-byte length field).
    pub(crate) fn item_original_bytes(&self, item: Item) -> u64 {
        match item {
            Item::Header => 8 + self.header_len,
            Item::Tensor(i) => self.tensors[i].original_bytes(),
            Item::Gap(g) => self.gaps[g].end - self.gaps[g].begin,
            Item::Group(k) => self.groups[k].end - self.groups[k].begin,
            Item::Lost(k) => self.lost[k].end - self.lost[k].begin,
        }
    }

    pub(crate) fn item_checksum(&self, item: Item) -> u64 {
        match item {
            Item::Header => self.header_checksum,
            Item::Tensor(i) => self.tensors[i].checksum,
            Item::Gap(g) => self.gaps[g].checksum,
            Item::Group(k) => self.groups[k].checksum,
            // Never decoded: nothing is compared with it.
            Item::Lost(_) => 0,
        }
    }

    /// Why a lost item's record was not found (`None` for any other item).
    pub(crate) fn lost_reason(&self, item: Item) -> Option<&str> {
        match item {
            Item::Lost(k) => Some(&self.lost[k].why),
            _ => None,
        }
    }

    /// The regions of `item` with checksums of their own (a regions record, format 4;
    /// `None` for any other item).
    pub(crate) fn item_regions(&self, item: Item) -> Option<&Arc<[RegionSpan]>> {
        self.regions.get(&item)
    }

    /// Bytes of the frame (marker and kind, length, item count) that starts tensor `i`'s
    /// record in a format-4 archive; 0 in earlier formats, for an empty tensor, or when
    /// the record's first bytes cannot be read.
    pub fn record_frame_bytes(&self, i: usize) -> u64 {
        let Some(t) = self.tensors.get(i) else {
            return 0;
        };
        if self.version < 4 || t.record.is_empty() {
            return 0;
        }
        // A byte of marker and kind, then two LEB128 numbers of at most 10 bytes each.
        let first = t.record.start..t.record.end.min(t.record.start.saturating_add(21));
        let Ok(bytes) = self.fetch(&first) else {
            return 0;
        };
        let mut c = format::Cursor::new(&bytes, "record frame");
        let frame = |c: &mut format::Cursor<'_>| -> Result<u64, String> {
            c.u8()?;
            c.uleb()?;
            c.uleb()?;
            Ok(c.pos() as u64)
        };
        frame(&mut c).unwrap_or(0)
    }

    /// The regions of tensor `i` stored with a checksum each (a tensor of more than
    /// [`super::writer::REGION_WORDS`] words in a format-4 archive), in order; empty for
    /// any other tensor.
    pub fn tensor_regions(&self, i: usize) -> &[RegionSpan] {
        self.regions
            .get(&Item::Tensor(i))
            .map_or(&[], |r| r.as_ref())
    }

    /// For an archive opened without its index ([`Archive::open_for_salvage`]): what is
    /// wrong with it and where the records found end; `None` for an archive opened
    /// through its index.
    pub fn missing_index(&self) -> Option<&str> {
        self.indexless.as_deref()
    }

    fn read(&self, program: &Range<usize>, ty: Ty, item: Item) -> Result<Node> {
        let node = read_program(&self.fetch(program)?, ty).map_err(|e| self.decode_err(item, e))?;
        within_wire(node, self.wire).map_err(|e| self.decode_err_at(item, program.start, e))
    }

    /// Reads the program (or part of a program) of `item` held in `range` of the archive
    /// as type `ty`; errors say where `range` starts.
    pub(crate) fn read_at(&self, item: Item, range: &Range<usize>, ty: Ty) -> Result<Node> {
        let node = read_program(&self.fetch(range)?, ty)
            .map_err(|e| self.decode_err_at(item, range.start, e))?;
        within_wire(node, self.wire).map_err(|e| self.decode_err_at(item, range.start, e))
    }

    /// The archive bytes in `range` (a range this archive's index produced). For a
    /// remote archive whose record cannot be fetched: empty ([`Archive::read_at`] then
    /// says why).
    pub(crate) fn program_slice(&self, range: &Range<usize>) -> &[u8] {
        match self.fetch(range) {
            Ok(std::borrow::Cow::Borrowed(b)) => b,
            Ok(std::borrow::Cow::Owned(_)) | Err(_) => &[],
        }
    }

    /// The byte range of an item's program in the archive and the type it restores.
    pub(crate) fn item_program(&self, item: Item) -> (Range<usize>, Ty) {
        match item {
            Item::Header => (self.header_program.clone(), self.header_ty()),
            Item::Tensor(i) => (self.tensors[i].program.clone(), self.tensors[i].ty()),
            Item::Gap(g) => {
                let g = &self.gaps[g];
                (g.program.clone(), Ty::new(8, g.end - g.begin))
            }
            Item::Group(k) => (self.groups[k].program.clone(), self.groups[k].ty()),
            Item::Lost(k) => {
                let l = &self.lost[k];
                let width = l.tensor.map_or(8, |t| self.tensors[t].dtype.word_bits());
                (
                    0..0,
                    Ty::new(width, (l.end - l.begin) * 8 / u64::from(width)),
                )
            }
        }
    }

    /// Drops the archive's pages holding `range` from the resident set (they are read
    /// again from the file if needed), so that decoding a whole archive does not keep it
    /// in memory. Nothing for an archive held in memory.
    pub(crate) fn release(&self, range: &Range<usize>) {
        if let Backing::Map(m) = &self.bytes {
            if let Some(part) = m.get(range.clone()) {
                crate::files::release_pages(m, part);
            }
        }
    }

    /// A decode error for `item`, saying where its program starts in the archive (the
    /// wire reader's offsets count from there).
    pub(crate) fn decode_err(&self, item: Item, e: impl std::fmt::Display) -> Error {
        let start = self.item_program(item).0.start;
        self.decode_err_at(item, start, e)
    }

    /// A decode error for `item` in program bytes starting at archive byte `start`.
    pub(crate) fn decode_err_at(
        &self,
        item: Item,
        start: usize,
        e: impl std::fmt::Display,
    ) -> Error {
        Error::archive(
            &self.path,
            ArchiveError::Decode {
                region: self.item_region(item),
                what: format!("program at archive byte {start}: {e}"),
            },
        )
    }

    /// Decodes an item's bytes (the JSON header without its length field) without
    /// checking the checksum. Returns the bytes and their xxh3-64.
    pub(crate) fn decode_item(&self, item: Item) -> Result<(Vec<u8>, u64)> {
        let (program, ty) = self.item_program(item);
        let node = self.read(&program, ty, item)?;
        self.check_decoded_size(item, self.item_original_bytes(item))?;
        let bytes = self.run_item(item, &node, ty)?;
        let sum = xxh3_64(&bytes);
        Ok((bytes, sum))
    }

    /// Refuses to decode `bytes` of an item (all of it, or the part of a split region;
    /// see [`super::stream`]) larger than [`MAX_REGION_BYTES`] or than the memory the
    /// process can get: a program as small as one `Const` node may declare a huge
    /// output, so the output size (already tied to the record's dtype and shape, and the
    /// index's original length) is checked, and an allocation of that size is tried
    /// fallibly, before anything runs. Allocation failure then is an error, not an abort.
    pub(crate) fn check_decoded_size(&self, item: Item, bytes: u64) -> Result<()> {
        let too_large = |what: String| {
            Error::archive(
                &self.path,
                ArchiveError::TooLarge {
                    region: self.item_region(item),
                    bytes,
                    what,
                },
            )
        };
        if bytes > MAX_REGION_BYTES {
            return Err(too_large(format!(
                "over the limit of {MAX_REGION_BYTES} bytes per region"
            )));
        }
        let mut probe: Vec<u8> = Vec::new();
        probe
            .try_reserve_exact(bytes as usize)
            .map_err(|_| too_large("more memory than is available".to_string()))?;
        Ok(())
    }

    fn decode_checked(&self, item: Item) -> Result<Vec<u8>> {
        let (bytes, actual) = self.decode_item(item)?;
        let expected = self.item_checksum(item);
        if actual != expected {
            return Err(Error::Mismatch {
                path: self.path.clone(),
                region: self.item_region(item),
                expected,
                actual,
            });
        }
        Ok(bytes)
    }

    /// Streams the original file into `out`: the 8-byte header length, the header, then
    /// every region, decoded in parallel on `jobs` threads (`None` = all cores) and
    /// checked against the whole-file checksum; when that does not match, the archive is
    /// decoded once more with each region checked against its own checksum, so that the
    /// error names the region (one hash of every byte on the way that succeeds, not two).
    /// Memory stays bounded by the largest region (or region part) and the thread count,
    /// not the archive's size (see `src/archive/stream.rs`); `out` receives chunks of at
    /// most 1 MiB.
    ///
    /// # Errors
    /// [`Error::Archive`] if a program is malformed; [`Error::Mismatch`] if decoded bytes
    /// differ from a stored checksum (naming the first region that differs, or the whole
    /// file when every region matched); [`Error::Io`] (labelled `name`) if `out` fails.
    /// After an error `out` holds a partial or wrong file.
    pub fn write_original<W: Write>(
        &self,
        out: &mut W,
        jobs: Option<usize>,
        progress: &dyn Fn(ProgressEvent<'_>),
        name: &Path,
    ) -> Result<()> {
        self.require_sources()?;
        match self.write_checked(out, jobs, progress, name, false) {
            Err(whole @ Error::Mismatch { .. }) => {
                // Which region differs: the cold path of a damaged archive.
                self.write_checked(&mut std::io::sink(), jobs, &|_| {}, name, true)?;
                Err(whole)
            }
            r => r,
        }
    }

    /// [`Archive::write_original`]'s pass: the whole file hashed, and with `each_region`
    /// every region too (its mismatch returned first).
    fn write_checked<W: Write>(
        &self,
        out: &mut W,
        jobs: Option<usize>,
        progress: &dyn Fn(ProgressEvent<'_>),
        name: &Path,
        each_region: bool,
    ) -> Result<()> {
        let write_err = |e| Error::io(name, "cannot write", e);
        let mut hasher = Xxh3::new();
        let mut region = Xxh3::new();
        stream::decode_all_with_progress(
            self,
            resolve_jobs(jobs),
            progress,
            &mut |d| {
                match d {
                    Decoded::Begin(unit) => {
                        if unit.first {
                            region.reset();
                            if unit.item == Item::Header {
                                let field = self.header_len.to_le_bytes();
                                hasher.update(&field);
                                out.write_all(&field).map_err(write_err)?;
                            }
                        }
                    }
                    Decoded::Bytes(b) => {
                        if each_region {
                            region.update(b);
                        }
                        hasher.update(b);
                        out.write_all(b).map_err(write_err)?;
                    }
                    Decoded::End(unit) if each_region => {
                        let (expected, actual) = (self.item_checksum(unit.item), region.digest());
                        if unit.last && actual != expected {
                            return Err(Error::Mismatch {
                                path: self.path.clone(),
                                region: self.item_region(unit.item),
                                expected,
                                actual,
                            });
                        }
                    }
                    Decoded::End(_) => {}
                    Decoded::Failed(_, e) => return Err(e),
                }
                Ok(())
            },
            &|| false,
        )?;
        let actual = hasher.digest();
        if actual != self.file_checksum {
            return Err(Error::Mismatch {
                path: self.path.clone(),
                region: "whole file".to_string(),
                expected: self.file_checksum,
                actual,
            });
        }
        Ok(())
    }

    /// Restores the original file at `output` through a temporary file in its folder,
    /// synced and renamed into place only when every checksum matched (with
    /// [`DecompressOptions::salvage`]: whatever was damaged, once the damaged regions
    /// are zero-filled).
    ///
    /// # Errors
    /// [`Error::SameFile`] if `output` is this archive; [`Error::OutputExists`] if it
    /// exists and `opts.force` is false; otherwise as [`Archive::write_original`] (with
    /// salvage, as [`Archive::write_salvaged`]).
    pub fn decompress_to(
        &self,
        output: &Path,
        opts: &DecompressOptions,
        progress: &dyn Fn(ProgressEvent<'_>),
    ) -> Result<DecompressSummary> {
        if let Some(base) = &opts.base {
            self.attach_base(base)?;
        }
        if opts.salvage {
            self.require_base()?;
        } else {
            self.require_sources()?;
        }
        check_output(&self.path, output, opts.force)?;
        let evict = crate::files::EvictReplaced::start(output, opts.force);
        let mut tmp = temp_beside(output)?;
        // The records are hashed on a thread of their own while the file is restored
        // (one more pass over the archive, which at the end took 5% of a decompression).
        let stop = AtomicBool::new(false);
        let (records_intact, damaged) = std::thread::scope(|scope| -> Result<_> {
            let hashing = std::thread::Builder::new()
                .name("brevis-records".into())
                .spawn_scoped(scope, || self.records_intact_unless(&stop))
                .ok();
            let restored = (|| {
                let mut w = SyncAhead::new(tmp.as_file_mut());
                let damaged = if opts.salvage {
                    self.write_salvaged(&mut w, opts.jobs, progress, output, Salvage::Mark)?
                } else {
                    self.write_original(&mut w, opts.jobs, progress, output)?;
                    Vec::new()
                };
                w.finish(output)?;
                Ok(damaged)
            })();
            if restored.is_err() {
                // Nothing waits for the hash of an archive that did not restore.
                stop.store(true, Ordering::Relaxed);
            }
            let hashed = hashing.and_then(|h| h.join().ok().flatten());
            let damaged = restored?;
            Ok((hashed.unwrap_or_else(|| self.records_intact()), damaged))
        })?;
        if !damaged.is_empty() {
            zero_fill(tmp.as_file(), &damaged, output)?;
        }
        drop(evict);
        persist(tmp, output, opts.force)?;
        Ok(DecompressSummary {
            output: output.to_path_buf(),
            original_bytes: self.original_len,
            records_intact,
            damaged,
        })
    }

    /// [`Archive::decompress_to`] for any [`Target`]: a file as there, a character
    /// device or standard output written in order (checked all the same, but the bytes
    /// written before a damaged region was found stay written; with salvage, each
    /// region is held until it is proved, so nothing unproved is written).
    ///
    /// # Errors
    /// As [`Archive::decompress_to`]; [`Error::Io`] if the device cannot be opened.
    pub fn decompress_into(
        &self,
        target: &Target,
        opts: &DecompressOptions,
        progress: &dyn Fn(ProgressEvent<'_>),
    ) -> Result<DecompressSummary> {
        if let Target::File(output) = target {
            return self.decompress_to(output, opts, progress);
        }
        if let Some(base) = &opts.base {
            self.attach_base(base)?;
        }
        if opts.salvage {
            self.require_base()?;
        } else {
            self.require_sources()?;
        }
        let path = target.path();
        let mut w = open_direct(target)?;
        let damaged = if opts.salvage {
            self.write_salvaged(&mut w, opts.jobs, progress, path, Salvage::Hold)?
        } else {
            self.write_original(&mut w, opts.jobs, progress, path)?;
            Vec::new()
        };
        w.flush().map_err(|e| Error::io(path, "cannot write", e))?;
        Ok(DecompressSummary {
            output: path.to_path_buf(),
            original_bytes: self.original_len,
            records_intact: self.records_intact(),
            damaged,
        })
    }

    /// Writes what can be restored of a damaged archive to `out`, as `decompress
    /// --salvage` does ([`DecompressOptions::salvage`]): every region whose bytes match
    /// their checksum, and zeros for every other one (a tensor, group, gap or region of
    /// a large tensor that does not decode or does not match, or whose record an archive
    /// opened without its index lacks), each held in memory until it is checked. Returns
    /// the regions zero-filled, in file order (empty when the whole file restored).
    ///
    /// # Errors
    /// As [`Archive::write_salvaged`]: the header record does not restore (it names
    /// every tensor), `out` fails, or a source is not attached.
    pub fn salvage_to<W: Write>(
        &self,
        out: &mut W,
        jobs: Option<usize>,
        progress: &dyn Fn(ProgressEvent<'_>),
        name: &Path,
    ) -> Result<Vec<DamagedRegion>> {
        self.require_base()?;
        self.write_salvaged(out, jobs, progress, name, Salvage::Hold)
    }

    /// [`Archive::write_original`] that goes on past damage: a region (tensor, group or
    /// gap) whose program does not decode, or whose bytes do not match its checksum,
    /// is written as zeros of its length and returned as a [`DamagedRegion`]. With
    /// [`Salvage::Hold`] each region's bytes are held in memory until its checksum is
    /// checked (for an output that cannot be rewritten); with [`Salvage::Mark`] they
    /// are written at once and the caller must zero the returned ranges afterwards
    /// ([`zero_fill`]). The whole-file checksum is checked only when nothing is damaged.
    ///
    /// # Errors
    /// [`Error::Archive`] if the header record does not decode and
    /// [`Error::Mismatch`] if it does not match its checksum (nothing can be salvaged
    /// without it); [`Error::Mismatch`] for the whole file when every region matched
    /// but the file does not; [`Error::Io`] if `out` fails.
    pub(crate) fn write_salvaged<W: Write + ?Sized>(
        &self,
        out: &mut W,
        jobs: Option<usize>,
        progress: &dyn Fn(ProgressEvent<'_>),
        name: &Path,
        mode: Salvage,
    ) -> Result<Vec<DamagedRegion>> {
        static ZEROS: [u8; 1 << 16] = [0; 1 << 16];
        let write_err = |e| Error::io(name, "cannot write", e);
        let mut hasher = Xxh3::new();
        let mut region = Xxh3::new();
        let mut damaged = Vec::new();
        // The region being restored: where it starts in the file, its length (without
        // the header's length field), bytes of it seen so far, and why it is damaged.
        let mut start = 0u64;
        let mut len = 0u64;
        let mut seen = 0u64;
        let mut why: Option<String> = None;
        let mut held: Vec<u8> = Vec::new();
        let mut pos = 0u64;
        let header_failed = |e: Error| -> Error {
            match e {
                Error::Archive { path, source } => Error::Archive {
                    path,
                    source: ArchiveError::DamagedRecord {
                        what: format!(
                            "the header record does not decode ({source}); it names every \
                             tensor, so nothing can be salvaged"
                        ),
                    },
                },
                other => other,
            }
        };
        let zeros = |out: &mut W, mut n: u64, held: &mut Vec<u8>| -> Result<()> {
            while n > 0 {
                let k = n.min(ZEROS.len() as u64) as usize;
                match mode {
                    Salvage::Hold => held.extend_from_slice(&ZEROS[..k]),
                    Salvage::Mark => out.write_all(&ZEROS[..k]).map_err(write_err)?,
                }
                n -= k as u64;
            }
            Ok(())
        };
        // The unit being restored when it is one region of a regions record (format 4),
        // checked alone: its hash, bytes seen and why it is damaged; and whether a region
        // of the current item was found damaged (then the item's own checksum, which
        // covers that region, is not reported again).
        let mut unit_hash = Xxh3::new();
        let mut unit_seen = 0u64;
        let mut unit_why: Option<String> = None;
        let mut region_damaged = false;
        stream::decode_all_with_progress(
            self,
            resolve_jobs(jobs),
            progress,
            &mut |d| {
                let unit = match &d {
                    Decoded::Begin(u) | Decoded::End(u) | Decoded::Failed(u, _) => Some(*u),
                    Decoded::Bytes(_) => None,
                };
                let is_begin = matches!(d, Decoded::Begin(_));
                let is_end = matches!(d, Decoded::End(_));
                if let Some(u) = unit.filter(|u| u.first && !is_end) {
                    region.reset();
                    held.clear();
                    why = None;
                    seen = 0;
                    region_damaged = false;
                    len = self.item_original_bytes(u.item);
                    if u.item == Item::Header {
                        let field = self.header_len.to_le_bytes();
                        hasher.update(&field);
                        out.write_all(&field).map_err(write_err)?;
                        pos += 8;
                        len -= 8;
                    }
                    start = pos;
                }
                if unit.is_some_and(|u| u.check.is_some()) && !is_end {
                    unit_hash.reset();
                    unit_seen = 0;
                    unit_why = None;
                }
                match d {
                    Decoded::Begin(_) => {}
                    Decoded::Bytes(b) => {
                        // Never more than the region holds, whatever a program gives.
                        let room = (len - seen).min(b.len() as u64) as usize;
                        if room < b.len() && why.is_none() {
                            why = Some(format!("decodes to more than its {len} bytes"));
                        }
                        let b = &b[..room];
                        region.update(b);
                        unit_hash.update(b);
                        seen += room as u64;
                        unit_seen += room as u64;
                        match mode {
                            Salvage::Hold => held.extend_from_slice(b),
                            Salvage::Mark => {
                                hasher.update(b);
                                out.write_all(b).map_err(write_err)?;
                            }
                        }
                    }
                    Decoded::Failed(u, e) => {
                        if u.item == Item::Header {
                            return Err(header_failed(e));
                        }
                        let reason = match self.lost_reason(u.item) {
                            Some(lost) => lost.to_string(),
                            None => e.to_string(),
                        };
                        if u.check.is_some() {
                            unit_why.get_or_insert(reason);
                        } else if why.is_none() {
                            why = Some(reason);
                        }
                        let n = u.bytes.min(len - seen);
                        zeros(out, n, &mut held)?;
                        seen += n;
                        unit_seen += n;
                    }
                    Decoded::End(_) => {}
                }
                // A region checked alone, at its end.
                if let Some(u) = unit.filter(|_| !is_begin) {
                    if let Some(c) = u.check {
                        if unit_why.is_none() && unit_seen < u.bytes {
                            unit_why =
                                Some(format!("decodes to {unit_seen} of its {} bytes", u.bytes));
                        }
                        let actual = unit_hash.digest();
                        if unit_why.is_none() && actual != c.checksum {
                            unit_why = Some(format!(
                                "checksum mismatch: stored {:016x}, decoded {actual:016x}",
                                c.checksum
                            ));
                        }
                        if let Some(reason) = unit_why.take() {
                            region_damaged = true;
                            let words = u.bytes
                                / crate::tensor::container_bytes(self.item_program(u.item).1.width)
                                    as u64;
                            damaged.push(DamagedRegion {
                                file: None,
                                region: format!(
                                    "{}, region {} of {} (words [{}, {}))",
                                    self.item_region(u.item),
                                    c.index + 1,
                                    c.count,
                                    c.first_word,
                                    c.first_word + words
                                ),
                                tensors: self.item_tensors(u.item),
                                offset: start + c.offset,
                                bytes: u.bytes,
                                reason,
                            });
                            if mode == Salvage::Hold {
                                let at = c.offset as usize;
                                let end = (at + u.bytes as usize).min(held.len());
                                held[at.min(end)..end].fill(0);
                            }
                        }
                    }
                }
                let Some(u) = unit.filter(|u| u.last && !is_begin) else {
                    return Ok(());
                };
                if seen < len {
                    if why.is_none() {
                        why = Some(format!("decodes to {seen} of its {len} bytes"));
                    }
                    zeros(out, len - seen, &mut held)?;
                }
                let (expected, actual) = (self.item_checksum(u.item), region.digest());
                if why.is_none() && !region_damaged && actual != expected {
                    if u.item == Item::Header {
                        return Err(Error::Mismatch {
                            path: self.path.clone(),
                            region: "header (it names every tensor, so nothing can be salvaged)"
                                .to_string(),
                            expected,
                            actual,
                        });
                    }
                    why = Some(format!(
                        "checksum mismatch: stored {expected:016x}, decoded {actual:016x}"
                    ));
                }
                if let Some(reason) = why.take() {
                    // Damage found in the item as a whole: all of it is zero-filled
                    // (what its regions reported is part of it).
                    damaged.retain(|d: &DamagedRegion| d.offset < start || d.offset >= start + len);
                    damaged.push(DamagedRegion {
                        file: None,
                        region: self.item_region(u.item),
                        tensors: self.item_tensors(u.item),
                        offset: start,
                        bytes: len,
                        reason,
                    });
                    if mode == Salvage::Hold {
                        held.clear();
                        held.resize(len as usize, 0);
                    }
                }
                if mode == Salvage::Hold {
                    hasher.update(&held);
                    out.write_all(&held).map_err(write_err)?;
                    held.clear();
                }
                pos = start + len;
                Ok(())
            },
            &|| false,
        )?;
        let actual = hasher.digest();
        // An archive opened without its index has no whole-file checksum to check.
        if damaged.is_empty() && self.indexless.is_none() && actual != self.file_checksum {
            return Err(Error::Mismatch {
                path: self.path.clone(),
                region: "whole file".to_string(),
                expected: self.file_checksum,
                actual,
            });
        }
        Ok(damaged)
    }

    /// The names of the tensors an item holds, in data order.
    pub(crate) fn item_tensors(&self, item: Item) -> Vec<String> {
        match item {
            Item::Header | Item::Gap(_) => Vec::new(),
            Item::Tensor(i) => vec![self.tensors[i].name.clone()],
            Item::Lost(k) => self.lost[k]
                .tensor
                .map(|t| self.tensors[t].name.clone())
                .into_iter()
                .collect(),
            Item::Group(k) => self.tensors[self.groups[k].tensors.clone()]
                .iter()
                .map(|t| t.name.clone())
                .collect(),
        }
    }

    /// Decodes group `k`'s bytes (all of its tensors) and checks them against its
    /// checksum.
    ///
    /// # Errors
    /// As [`Archive::decode_tensor`].
    pub(crate) fn decode_group(&self, k: usize) -> Result<Vec<u8>> {
        self.decode_checked(Item::Group(k))
    }
}

/// How [`Archive::write_salvaged`] keeps unproved bytes out of its output.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Salvage {
    /// Hold each region in memory until its checksum is checked (standard output).
    Hold,
    /// Write at once; the caller zeroes the damaged ranges afterwards ([`zero_fill`]).
    Mark,
}

/// Overwrites the bytes of every damaged region in the complete restored `file` with
/// zeros, then syncs it.
///
/// # Errors
/// [`Error::Io`] naming `name` if a write or the sync fails.
fn zero_fill(file: &File, damaged: &[DamagedRegion], name: &Path) -> Result<()> {
    static ZEROS: [u8; 1 << 16] = [0; 1 << 16];
    for d in damaged {
        let mut at = d.offset;
        let end = d.offset + d.bytes;
        while at < end {
            let k = (end - at).min(ZEROS.len() as u64) as usize;
            write_at(file, &ZEROS[..k], at).map_err(|e| Error::io(name, "cannot write", e))?;
            at += k as u64;
        }
    }
    file.sync_all()
        .map_err(|e| Error::io(name, "cannot sync", e))
}

fn write_at(file: &File, bytes: &[u8], offset: u64) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        std::os::unix::fs::FileExt::write_all_at(file, bytes, offset)
    }
    #[cfg(not(unix))]
    {
        use std::io::{Seek, SeekFrom};
        let mut f = file;
        f.seek(SeekFrom::Start(offset))?;
        f.write_all(bytes)
    }
}

/// Everything [`parse_structure`] learns from an archive.
struct Structure {
    header_len: u64,
    header_checksum: u64,
    header_record: Range<usize>,
    header_program: Range<usize>,
    original_len: u64,
    file_checksum: u64,
    records_checksum: u64,
    records_end: usize,
    version: u16,
    wire: u16,
    file_name: Option<String>,
    settings: Vec<Settings>,
    sources: Vec<SourceEntry>,
    tensors: Vec<TensorEntry>,
    gaps: Vec<GapEntry>,
    groups: Vec<GroupEntry>,
    items: Vec<Item>,
    regions: HashMap<Item, Arc<[RegionSpan]>>,
    lost: Vec<LostEntry>,
    indexless: Option<String>,
}

/// Bytes before the end of an archive searched for its trailer when the file does not end
/// with a sound one ([`appended_after`]): enough for a copy of a small archive appended
/// to itself, little time on an error path.
const APPENDED_SEARCH_BYTES: usize = 64 << 20;

/// Bits in which the last 8 bytes may differ from [`format::END_MAGIC`] and still be
/// called a damaged end marker rather than a missing one (8 random bytes differ from it
/// in 32 bits on average; a flipped or mistyped byte in up to 8).
const END_MARKER_NEAR_BITS: u32 = 8;

/// What is wrong with a file of `len` bytes holding an archive that ends at byte `end`.
fn appended(end: usize, len: usize) -> String {
    format!(
        "the archive ends at byte {end} (its trailer is sound there) but the file goes on: \
         {} after it (data appended to it? `truncate -s {end} FILE` removes them)",
        match len - end {
            1 => "1 byte".to_string(),
            n => format!("{n} bytes"),
        }
    )
}

/// Where the archive in `bytes` ends when bytes were appended to it: the end of the last
/// trailer in the final [`APPENDED_SEARCH_BYTES`] whose index ends where it starts and
/// whose index checksum is right (so not a stray `BRVINDEX` in the data). `None` when
/// there is none.
fn appended_after(bytes: &[u8]) -> Option<usize> {
    let from = bytes
        .len()
        .saturating_sub(APPENDED_SEARCH_BYTES + format::TRAILER_LEN);
    let tail = &bytes[from..];
    let mut end = tail.len();
    while let Some(at) = tail[..end].windows(8).rposition(|w| w == format::END_MAGIC) {
        end = at;
        let stop = from + at + 8;
        let Some(start) = stop.checked_sub(format::TRAILER_LEN) else {
            continue;
        };
        let word = |k: usize| {
            let b: [u8; 8] = bytes[start + 8 * k..start + 8 * k + 8].try_into().ok()?;
            Some(u64::from_le_bytes(b))
        };
        let as_usize = |w: Option<u64>| w.and_then(|w| usize::try_from(w).ok());
        let (Some(offset), Some(index_len)) = (as_usize(word(0)), as_usize(word(1))) else {
            continue;
        };
        let sound = offset.checked_add(index_len) == Some(start)
            && word(2) == Some(xxh3_64(&bytes[offset..start]));
        if sound {
            return Some(stop);
        }
    }
    None
}

fn corrupt(what: impl Into<String>) -> ArchiveError {
    ArchiveError::Corrupt { what: what.into() }
}

/// A record found damaged once the archive's trailer and index have been read.
fn damaged_record(what: impl Into<String>) -> ArchiveError {
    ArchiveError::DamagedRecord { what: what.into() }
}

/// What a file that is not an archive looks like, for the error message.
fn describe_foreign(bytes: &[u8]) -> String {
    if bytes.is_empty() {
        return "the file is empty (0 bytes)".to_string();
    }
    if bytes.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        return "it is a zstd frame".to_string();
    }
    if super::safetensors::looks_like_safetensors(bytes, bytes.len() as u64) {
        return "it looks like an uncompressed .safetensors file (`brevis compress` takes it)"
            .to_string();
    }
    if bytes.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{') {
        return "it looks like a JSON file, not an archive (a shard index? `brevis compress` \
                takes the checkpoint folder or its index)"
            .to_string();
    }
    format!(
        "wrong magic bytes [{}] (expected \"BREVIS\\0\\0\")",
        hex_bytes(&bytes[..bytes.len().min(8)])
    )
}

/// Bytes as two hex digits each, separated by spaces (`50 4b 03 04`).
fn hex_bytes(bytes: &[u8]) -> String {
    let shown: Vec<String> = bytes.iter().map(|b| format!("{b:02x}")).collect();
    shown.join(" ")
}

fn parse_structure(bytes: &[u8]) -> Result<Structure, ArchiveError> {
    let len = bytes.len();
    let min = format::FILE_HEADER_LEN + format::TRAILER_LEN;
    let truncated = || {
        let unit = if len == 1 { "byte" } else { "bytes" };
        corrupt(format!(
            "truncated: {len} {unit}, fewer than the {min} of an empty archive"
        ))
    };
    // A file cut inside the magic bytes is an archive cut short, not a foreign file.
    if len > 0 && len < format::MAGIC.len() && format::MAGIC.starts_with(bytes) {
        return Err(truncated());
    }
    if !bytes.starts_with(&format::MAGIC) {
        return Err(ArchiveError::NotArchive {
            what: describe_foreign(bytes),
        });
    }
    if len < min {
        return Err(truncated());
    }
    let u16_at = |o: usize| u16::from_le_bytes([bytes[o], bytes[o + 1]]);
    let version = u16_at(8);
    if !(format::FIRST_VERSION..=format::FORMAT_VERSION).contains(&version) {
        return Err(ArchiveError::Version {
            what: "format",
            found: version.into(),
            first: format::FIRST_VERSION.into(),
            supported: format::FORMAT_VERSION.into(),
        });
    }
    // Version-1 archives hold programs of wire version 1 only; later ones any version up
    // to this build's (each reads the ones before it).
    let wire = u16_at(10);
    let newest_wire = if version == 1 {
        1
    } else {
        crate::dsl::wire::WIRE_VERSION
    };
    if !(1..=newest_wire).contains(&u32::from(wire)) {
        return Err(ArchiveError::Version {
            what: "program wire",
            found: wire.into(),
            first: 1,
            supported: newest_wire.into(),
        });
    }
    let flags = u32::from_le_bytes([bytes[12], bytes[13], bytes[14], bytes[15]]);
    if version >= 4 {
        check_header_v4(bytes)?;
    } else if flags != 0 {
        // A version-4 header checksum there means a damaged version field.
        let what =
            if format::header_check(&[&bytes[..8], &4u16.to_le_bytes(), &bytes[10..12]].concat())
                == flags
            {
                format!(
                    "the file header is damaged: it says format version {version}, but its \
                 bytes 12..16 hold the checksum of a version-4 header"
                )
            } else {
                format!("unknown flags {flags:#x} in the file header")
            };
        return Err(corrupt(what));
    }

    let trailer_start = len - format::TRAILER_LEN;
    let mut t = format::Cursor::new(&bytes[trailer_start..], "trailer");
    let (index_offset, index_len, index_sum) = (t.u64(), t.u64(), t.u64());
    let (index_offset, index_len, index_sum) = (
        index_offset.map_err(corrupt)?,
        index_len.map_err(corrupt)?,
        index_sum.map_err(corrupt)?,
    );
    let index_ok = index_offset >= format::FILE_HEADER_LEN as u64
        && index_offset.checked_add(index_len) == Some(trailer_start as u64);
    let end = &bytes[len - 8..];
    if end != format::END_MAGIC {
        return Err(corrupt(match appended_after(bytes) {
            Some(at) => appended(at, len),
            None => {
                // A few bits off the marker: say so, and whether the rest of the trailer
                // still holds (then the damage is likely the marker's alone).
                let bits: u32 = end
                    .iter()
                    .zip(&format::END_MAGIC)
                    .map(|(a, b)| (a ^ b).count_ones())
                    .sum();
                if bits <= END_MARKER_NEAR_BITS {
                    let sound = index_ok
                        && xxh3_64(&bytes[index_offset as usize..trailer_start]) == index_sum;
                    format!(
                        "the end marker is damaged: its 8 bytes are [{}], {bits} bit{} off {:?}{}",
                        hex_bytes(end),
                        if bits == 1 { "" } else { "s" },
                        String::from_utf8_lossy(&format::END_MAGIC),
                        if sound {
                            " (the rest of the trailer and the index are sound)"
                        } else {
                            " (truncated or damaged archive)"
                        }
                    )
                } else {
                    "the end marker is missing (truncated or damaged archive)".to_string()
                }
            }
        }));
    }
    if !index_ok {
        // The end marker of a second archive appended to this one (`cat a.brv a.brv`).
        if let Some(end) = appended_after(bytes) {
            return Err(corrupt(appended(end, len)));
        }
        return Err(corrupt(format!(
            "the trailer places the index at [{index_offset}, +{index_len}), which does not \
             end at the trailer (byte {trailer_start})"
        )));
    }
    let index_bytes = &bytes[index_offset as usize..trailer_start];
    let actual = xxh3_64(index_bytes);
    if actual != index_sum {
        return Err(corrupt(format!(
            "index checksum mismatch: stored {index_sum:016x}, computed {actual:016x}"
        )));
    }
    if version >= 4 {
        return parse_v4(bytes, index_bytes, index_offset, wire);
    }
    if version >= 2 {
        return parse_v2(bytes, index_bytes, index_offset, version, wire);
    }
    let index = format::read_index(index_bytes).map_err(corrupt)?;

    let ranges = record_ranges(&index.record_lens, index_offset)?;

    let rec = |i: usize| -> Result<Record, ArchiveError> {
        format::read_record(&bytes[ranges[i].clone()])
            .map_err(|e| damaged_record(format!("record {i} at byte {}: {e}", ranges[i].start)))
    };
    let abs = |i: usize, r: Range<usize>| ranges[i].start + r.start..ranges[i].start + r.end;

    let Record::Header {
        header_len,
        checksum: header_checksum,
        program,
    } = rec(0)?
    else {
        return Err(damaged_record("record 0 is not the header record"));
    };
    let header_program = abs(0, program);
    // The writer only stores headers its parser accepted: bound the header's decoded size.
    let max_header = super::safetensors::MAX_HEADER_LEN;
    if header_len > max_header {
        return Err(damaged_record(format!(
            "header record declares {header_len} bytes, over the limit of {max_header}"
        )));
    }
    let data_len = index
        .original_len
        .checked_sub(8)
        .and_then(|r| r.checked_sub(header_len))
        .filter(|_| header_len > 0)
        .ok_or_else(|| {
            damaged_record(format!(
                "header of {header_len} bytes does not fit an original file of {} bytes",
                index.original_len
            ))
        })?;

    let mut tensors = Vec::new();
    let mut gaps = Vec::new();
    let mut items = Vec::with_capacity(ranges.len());
    items.push(Item::Header);
    let mut cursor = 0u64;
    for (i, range) in ranges.iter().enumerate().skip(1) {
        match rec(i)? {
            Record::Header { .. } => {
                return Err(damaged_record(format!(
                    "record {i} is a second header record"
                )))
            }
            Record::Tensor { meta, program } => {
                let bad = |what: String| {
                    damaged_record(format!("record {i} (tensor {:?}): {what}", meta.name))
                };
                if meta.begin > meta.end || meta.end > data_len {
                    return Err(bad(format!(
                        "offsets [{}, {}) do not fit the data region of {data_len} bytes",
                        meta.begin, meta.end
                    )));
                }
                let need = meta
                    .shape
                    .iter()
                    .try_fold(1u64, |a, &d| a.checked_mul(d))
                    .and_then(|n| meta.dtype.byte_len(n));
                if need != Some(meta.end - meta.begin) {
                    return Err(bad(format!(
                        "shape {:?} of {} does not match offsets [{}, {})",
                        meta.shape, meta.dtype, meta.begin, meta.end
                    )));
                }
                if meta.begin != meta.end {
                    if meta.begin != cursor {
                        return Err(bad(format!(
                            "starts at data byte {} but the previous region ends at {cursor}",
                            meta.begin
                        )));
                    }
                    cursor = meta.end;
                }
                let program = abs(i, program);
                let root_op = format::root_op_name(&bytes[program.clone()]);
                items.push(Item::Tensor(tensors.len()));
                tensors.push(TensorEntry {
                    name: meta.name,
                    dtype: meta.dtype,
                    shape: meta.shape,
                    header_index: meta.header_index,
                    begin: meta.begin,
                    end: meta.end,
                    checksum: meta.checksum,
                    record: range.clone(),
                    share: range.len() as u64,
                    program_share: program.len() as u64,
                    program,
                    root_op,
                    group: None,
                    copy_of: None,
                    settings: None,
                    reference: None,
                });
            }
            Record::Gap {
                begin,
                end,
                checksum,
                program,
            } => {
                if begin >= end || begin != cursor || end > data_len {
                    return Err(damaged_record(format!(
                        "record {i}: gap [{begin}, {end}) does not continue the data region at \
                         byte {cursor} of {data_len}"
                    )));
                }
                cursor = end;
                items.push(Item::Gap(gaps.len()));
                gaps.push(GapEntry {
                    begin,
                    end,
                    checksum,
                    record: range.clone(),
                    program: abs(i, program),
                });
            }
        }
    }
    if cursor != data_len {
        return Err(damaged_record(format!(
            "records restore {cursor} of the {data_len} bytes of the data region"
        )));
    }
    if tensors.len() as u64 != index.tensor_count {
        return Err(damaged_record(format!(
            "index counts {} tensors, records hold {}",
            index.tensor_count,
            tensors.len()
        )));
    }
    Ok(Structure {
        header_len,
        header_checksum,
        header_record: ranges[0].clone(),
        header_program,
        original_len: index.original_len,
        file_checksum: index.file_checksum,
        records_checksum: index.records_checksum,
        records_end: index_offset as usize,
        version,
        wire,
        file_name: None,
        settings: Vec::new(),
        sources: Vec::new(),
        tensors,
        gaps,
        groups: Vec::new(),
        items,
        regions: HashMap::new(),
        lost: Vec::new(),
        indexless: None,
    })
}

/// The byte ranges of records of `lens` bytes each, which must tile `[16, index_offset)`.
fn record_ranges(lens: &[u64], index_offset: u64) -> Result<Vec<Range<usize>>, ArchiveError> {
    let mut ranges = Vec::with_capacity(lens.len());
    let mut at = format::FILE_HEADER_LEN as u64;
    for (i, &l) in lens.iter().enumerate() {
        let end = at
            .checked_add(l)
            .filter(|&e| e <= index_offset)
            .ok_or_else(|| corrupt(format!("record {i} of {l} bytes runs past the index")))?;
        ranges.push(at as usize..end as usize);
        at = end;
    }
    if at != index_offset {
        return Err(corrupt(format!(
            "records end at byte {at} but the index starts at byte {index_offset}"
        )));
    }
    Ok(ranges)
}

/// `node` when its operators are all in `wire`, the program wire version the archive's
/// file header declares; else the message saying which version the program needs.
fn within_wire(node: Node, wire: u16) -> std::result::Result<Node, String> {
    let needs = wire_version_of(&node);
    if needs > u32::from(wire) {
        return Err(format!(
            "the program needs wire version {needs}, but the archive declares {wire}"
        ));
    }
    Ok(node)
}

/// The header a version-2 archive of program wire version `wire` stores, decoded from
/// `program` (of type `u8[len]`) and checked against `checksum`: the only place its
/// tensors' names, dtypes, shapes and offsets are written, so a damaged header makes
/// the archive unreadable.
fn decode_header_v2(
    program: &[u8],
    len: u64,
    checksum: u64,
    wire: u16,
) -> Result<Vec<u8>, ArchiveError> {
    let damaged = |what: String| damaged_record(format!("record 0 (the header): {what}"));
    let node = read_program(program, Ty::new(8, len)).map_err(|e| damaged(e.to_string()))?;
    let node = within_wire(node, wire).map_err(damaged)?;
    let mut probe: Vec<u8> = Vec::new();
    probe
        .try_reserve_exact(len as usize)
        .map_err(|_| damaged(format!("{len} bytes are more memory than is available")))?;
    drop(probe);
    let words = execute(&node, len).map_err(|e| damaged(e.to_string()))?;
    let header = words_into_le_bytes(words);
    let actual = xxh3_64(&header);
    if actual != checksum {
        return Err(damaged(format!(
            "it does not restore the header (checksum {actual:016x}, stored {checksum:016x}), \
             which names every tensor: the archive cannot be read"
        )));
    }
    Ok(header)
}

/// The rest of [`parse_structure`] for format versions 2 and 3 (see [`format`]): the
/// index, the header record (decoded: it says what every other record holds), then every
/// record's items, groups and copies.
fn parse_v2(
    bytes: &[u8],
    index_bytes: &[u8],
    index_offset: u64,
    version: u16,
    wire: u16,
) -> Result<Structure, ArchiveError> {
    let index = format::read_index_v2(index_bytes, version).map_err(corrupt)?;
    let ranges = record_ranges(&index.record_lens, index_offset)?;
    let rec = |i: usize| -> Result<RecordV2, ArchiveError> {
        format::read_record_v2(&bytes[ranges[i].clone()], version)
            .map_err(|e| damaged_record(format!("record {i} at byte {}: {e}", ranges[i].start)))
    };
    let abs = |i: usize, r: Range<usize>| ranges[i].start + r.start..ranges[i].start + r.end;

    let RecordV2::Header {
        header_len,
        checksum: header_checksum,
        program,
    } = rec(0)?
    else {
        return Err(damaged_record("record 0 is not the header record"));
    };
    let header_program = abs(0, program);
    let parsed = header_layout(
        bytes,
        &header_program,
        header_len,
        header_checksum,
        index.original_len,
        wire,
    )?;
    let mut assign = Assign::new(bytes, version, &parsed, index.sources.len());
    for (r, &(count, set)) in (1..).zip(&index.records) {
        let settings = settings_of(&index.settings, r, set)?;
        let record = rec(r)?;
        assign.place(
            r,
            RecIn {
                range: ranges[r].clone(),
                items: count,
                settings: Some(settings),
                record,
            },
        )?;
    }
    assign.finish()?;
    Ok(assign.into_structure(Head {
        header_len,
        header_checksum,
        header_record: ranges[0].clone(),
        header_program,
        original_len: index.original_len,
        file_checksum: index.file_checksum,
        records_checksum: index.records_checksum,
        records_end: index_offset as usize,
        version,
        wire,
        file_name: (!index.file_name.is_empty()).then_some(index.file_name),
        settings: index.settings,
        sources: index.sources,
        indexless: None,
    }))
}

/// The settings entry `id` of `settings`, which record `r` names.
fn settings_of(settings: &[Settings], r: usize, id: u64) -> Result<Settings, ArchiveError> {
    usize::try_from(id)
        .ok()
        .and_then(|k| settings.get(k).copied())
        .ok_or_else(|| {
            damaged_record(format!(
                "record {r}: settings #{id}, but the index has {}",
                settings.len()
            ))
        })
}

/// The source header a version-2 or later archive stores in its header record
/// (`program`, absolute), decoded, checked against `checksum` and parsed for an original
/// file of `original_len` bytes: the tensors and gaps every other record restores.
fn header_layout(
    bytes: &[u8],
    program: &Range<usize>,
    header_len: u64,
    checksum: u64,
    original_len: u64,
    wire: u16,
) -> Result<super::safetensors::ParsedHeader, ArchiveError> {
    let max_header = super::safetensors::MAX_HEADER_LEN;
    let data_len = original_len
        .checked_sub(8)
        .and_then(|r| r.checked_sub(header_len))
        .filter(|_| header_len > 0 && header_len <= max_header)
        .ok_or_else(|| {
            damaged_record(format!(
                "header of {header_len} bytes does not fit an original file of \
                 {original_len} bytes (or the limit of {max_header})"
            ))
        })?;
    let header = decode_header_v2(&bytes[program.clone()], header_len, checksum, wire)?;
    super::safetensors::parse_header(&header, data_len).map_err(|e| {
        damaged_record(format!(
            "record 0 (the header): the restored header is not a valid .safetensors header: {e}"
        ))
    })
}

/// The rest of [`parse_structure`] for format version 4 (see [`format`]): as version 2,
/// with the original length, file name and sources in the header record, and what each
/// record covers in its frame.
fn parse_v4(
    bytes: &[u8],
    index_bytes: &[u8],
    index_offset: u64,
    wire: u16,
) -> Result<Structure, ArchiveError> {
    let index = format::read_index_v4(index_bytes).map_err(corrupt)?;
    let ranges = record_ranges(&index.record_lens, index_offset)?;
    let rec = |i: usize| -> Result<RecordV4, ArchiveError> {
        format::read_record_v4(&bytes[ranges[i].clone()])
            .map_err(|e| damaged_record(format!("record {i} at byte {}: {e}", ranges[i].start)))
    };
    let RecordV4::Header { head, program } = rec(0)? else {
        return Err(damaged_record("record 0 is not the header record"));
    };
    let header_program = ranges[0].start + program.start..ranges[0].start + program.end;
    let parsed = header_layout(
        bytes,
        &header_program,
        head.header_len,
        head.checksum,
        head.original_len,
        wire,
    )?;
    let mut assign = Assign::new(bytes, 4, &parsed, head.sources.len());
    for (r, range) in ranges.iter().enumerate().skip(1) {
        let settings = settings_of(&index.settings, r, index.record_settings[r - 1])?;
        let RecordV4::Other { items, record } = rec(r)? else {
            return Err(damaged_record(format!(
                "record {r} at byte {}: a second header record",
                range.start
            )));
        };
        assign.place(
            r,
            RecIn {
                range: range.clone(),
                items,
                settings: Some(settings),
                record,
            },
        )?;
    }
    assign.finish()?;
    Ok(assign.into_structure(Head {
        header_len: head.header_len,
        header_checksum: head.checksum,
        header_record: ranges[0].clone(),
        header_program,
        original_len: head.original_len,
        file_checksum: index.file_checksum,
        records_checksum: index.records_checksum,
        records_end: index_offset as usize,
        version: 4,
        wire,
        file_name: (!head.file_name.is_empty()).then_some(head.file_name),
        settings: index.settings,
        sources: head.sources,
        indexless: None,
    }))
}

/// Checks the 16-byte file header of a version-4 archive: magic, version 4, a wire
/// version this build reads, and the header checksum. Returns the wire version.
fn file_header_v4(bytes: &[u8]) -> Result<u16, ArchiveError> {
    let head = bytes
        .get(..format::FILE_HEADER_LEN)
        .ok_or_else(|| corrupt("cut inside its 16-byte file header"))?;
    if !head.starts_with(&format::MAGIC) {
        return Err(ArchiveError::NotArchive {
            what: describe_foreign(bytes),
        });
    }
    let version = u16::from_le_bytes([head[8], head[9]]);
    if version != 4 {
        return Err(ArchiveError::Version {
            what: "format",
            found: version.into(),
            first: 4,
            supported: format::FORMAT_VERSION.into(),
        });
    }
    check_header_v4(head)?;
    let wire = u16::from_le_bytes([head[10], head[11]]);
    if !(1..=crate::dsl::wire::WIRE_VERSION).contains(&u32::from(wire)) {
        return Err(ArchiveError::Version {
            what: "program wire",
            found: wire.into(),
            first: 1,
            supported: crate::dsl::wire::WIRE_VERSION.into(),
        });
    }
    Ok(wire)
}

/// Refuses a version-4 file header whose checksum (bytes 12..16) does not match its
/// first 12 bytes.
fn check_header_v4(head: &[u8]) -> Result<(), ArchiveError> {
    let stored = u32::from_le_bytes([head[12], head[13], head[14], head[15]]);
    let computed = format::header_check(&head[..12]);
    if stored != computed {
        return Err(corrupt(format!(
            "the file header is damaged: its checksum is {stored:08x}, its bytes hash to \
             {computed:08x} (format version {}, wire version {})",
            u16::from_le_bytes([head[8], head[9]]),
            u16::from_le_bytes([head[10], head[11]])
        )));
    }
    Ok(())
}

/// The records of a version-4 archive whose trailer or index cannot be read (cut short,
/// damaged), found by walking their frames from byte 16 ([`Archive::open_for_salvage`]):
/// the header record must be whole and sound; every record after it is taken while it
/// is whole and its frame and fields read, and the items no record found covers are
/// [`Item::Lost`]. `why` says what is wrong with the index.
fn parse_walk(bytes: &[u8], why: &str) -> Result<Structure, ArchiveError> {
    let wire = file_header_v4(bytes)?;
    let len = bytes.len();
    let start = format::FILE_HEADER_LEN;
    // The record at `at`: its range when whole; else why not, and whether it is cut.
    let whole = |at: usize| -> Result<Range<usize>, (String, bool)> {
        let frame = format::read_frame_v4(&bytes[at..]).map_err(|e| {
            let cut = bytes.len() - at < 11;
            (e, cut)
        })?;
        let end = usize::try_from(frame.len)
            .ok()
            .and_then(|l| at.checked_add(l))
            .filter(|&e| e <= len)
            .ok_or_else(|| {
                (
                    format!(
                        "the archive is cut inside it: {} of its {} bytes are present",
                        len - at,
                        frame.len
                    ),
                    true,
                )
            })?;
        Ok(at..end)
    };
    let cant = |what: String| {
        damaged_record(format!(
            "{why}, and {what}: the header record, which names every tensor, cannot be \
             read, so nothing can be salvaged"
        ))
    };
    let range0 = whole(start).map_err(|(e, _)| cant(e))?;
    let RecordV4::Header { head, program } =
        format::read_record_v4(&bytes[range0.clone()]).map_err(cant)?
    else {
        return Err(cant("record 0 is not the header record".to_string()));
    };
    let header_program = range0.start + program.start..range0.start + program.end;
    let parsed = header_layout(
        bytes,
        &header_program,
        head.header_len,
        head.checksum,
        head.original_len,
        wire,
    )?;
    let mut assign = Assign::new(bytes, 4, &parsed, head.sources.len());
    let mut at = range0.end;
    let mut r = 1usize;
    let stop = loop {
        if assign.next == assign.its.len() {
            break None;
        }
        if at >= len {
            break Some(format!("the archive ends at byte {len}, before record {r}"));
        }
        let range = match whole(at) {
            Ok(range) => range,
            Err((e, cut)) => {
                let stop = format!("record {r} at byte {at}: {e}");
                // A large tensor cut inside its regions keeps the regions before the cut.
                if cut {
                    if let Ok(RecordV4::Other {
                        items,
                        record: record @ RecordV2::Regions { .. },
                    }) = format::read_cut_record_v4(&bytes[at..])
                    {
                        let total = match &record {
                            RecordV2::Regions { program, .. } => program.end,
                            _ => 0,
                        };
                        let placed = assign.place(
                            r,
                            RecIn {
                                range: at..at + total,
                                items,
                                settings: None,
                                record,
                            },
                        );
                        if placed.is_ok() {
                            at = len;
                        }
                    }
                }
                break Some(stop);
            }
        };
        let placed = match format::read_record_v4(&bytes[range.clone()]) {
            Ok(RecordV4::Other { items, record }) => assign.place(
                r,
                RecIn {
                    range: range.clone(),
                    items,
                    settings: None,
                    record,
                },
            ),
            Ok(RecordV4::Header { .. }) => Err(damaged_record("a second header record")),
            Err(e) => Err(damaged_record(e)),
        };
        if let Err(e) = placed {
            break Some(format!("record {r} at byte {at}: {e}"));
        }
        at = range.end;
        r += 1;
    };
    let lost_because = match &stop {
        Some(s) => format!("its record is lost: {s}"),
        None => String::new(),
    };
    assign.lose_rest(&lost_because);
    Ok(assign.into_structure(Head {
        header_len: head.header_len,
        header_checksum: head.checksum,
        header_record: range0,
        header_program,
        original_len: head.original_len,
        file_checksum: 0,
        records_checksum: 0,
        records_end: at,
        version: 4,
        wire,
        file_name: (!head.file_name.is_empty()).then_some(head.file_name),
        settings: Vec::new(),
        sources: head.sources,
        indexless: Some(match stop {
            Some(s) => format!("{why}; the records found end at byte {at} ({s})"),
            None => format!("{why}; every record was found before byte {at}"),
        }),
    }))
}

/// The fields of a [`Structure`] that do not come from laying records over items.
struct Head {
    header_len: u64,
    header_checksum: u64,
    header_record: Range<usize>,
    header_program: Range<usize>,
    original_len: u64,
    file_checksum: u64,
    records_checksum: u64,
    records_end: usize,
    version: u16,
    wire: u16,
    file_name: Option<String>,
    settings: Vec<Settings>,
    sources: Vec<SourceEntry>,
    indexless: Option<String>,
}

/// A record as [`Assign::place`] takes it.
struct RecIn {
    /// Its bytes in the archive.
    range: Range<usize>,
    /// Items it covers.
    items: u64,
    /// The settings that built it (`None`: not known, the index being lost).
    settings: Option<Settings>,
    /// What it holds (never the header).
    record: RecordV2,
}

/// What a data record restores, for the copies that name it: its type, checksum,
/// program range, first tensor and regions.
struct Stored {
    ty: Ty,
    checksum: u64,
    program: Range<usize>,
    tensor: Option<usize>,
    regions: Option<Arc<[RegionSpan]>>,
}

/// An item of the data region: a non-empty tensor (by position in the tensors) or a gap.
enum It {
    Tensor(usize),
    Gap(u64, u64),
}

/// Lays the records of a version-2 or later archive over the items of the data region
/// its header lays out, in order, checking each against what it covers.
struct Assign<'b> {
    bytes: &'b [u8],
    version: u16,
    sources: usize,
    tensors: Vec<TensorEntry>,
    its: Vec<It>,
    next: usize,
    stored: Vec<Option<Stored>>,
    gaps: Vec<GapEntry>,
    groups: Vec<GroupEntry>,
    items: Vec<Item>,
    regions: HashMap<Item, Arc<[RegionSpan]>>,
    lost: Vec<LostEntry>,
}

impl<'b> Assign<'b> {
    /// Tensors in data order (empty ones at their offset), and the items: non-empty
    /// tensors (by position in `tensors`) and gaps.
    fn new(
        bytes: &'b [u8],
        version: u16,
        parsed: &super::safetensors::ParsedHeader,
        sources: usize,
    ) -> Assign<'b> {
        use super::safetensors::Region;
        let mut tensors: Vec<TensorEntry> = Vec::with_capacity(parsed.tensors.len());
        let mut its = Vec::with_capacity(parsed.regions.len());
        for r in &parsed.regions {
            match *r {
                Region::Tensor(t) => {
                    let info = &parsed.tensors[t];
                    if info.begin != info.end {
                        its.push(It::Tensor(tensors.len()));
                    }
                    tensors.push(TensorEntry {
                        name: info.name.clone(),
                        dtype: info.dtype,
                        shape: info.shape.clone(),
                        header_index: info.header_index as u64,
                        begin: info.begin,
                        end: info.end,
                        checksum: xxh3_64(&[]),
                        record: 0..0,
                        program: 0..0,
                        root_op: "lit",
                        group: None,
                        copy_of: None,
                        settings: None,
                        reference: None,
                        share: 0,
                        program_share: 0,
                    });
                }
                Region::Gap { begin, end } => its.push(It::Gap(begin, end)),
            }
        }
        let items = vec![Item::Header];
        Assign {
            bytes,
            version,
            sources,
            tensors,
            its,
            next: 0,
            stored: vec![None],
            gaps: Vec::new(),
            groups: Vec::new(),
            items,
            regions: HashMap::new(),
            lost: Vec::new(),
        }
    }

    /// Lays record `r` over the next items. Changes nothing when it fails.
    fn place(&mut self, r: usize, rec: RecIn) -> Result<(), ArchiveError> {
        let RecIn {
            range,
            items: count,
            settings,
            record,
        } = rec;
        let bad =
            |what: String| damaged_record(format!("record {r} at byte {}: {what}", range.start));
        let abs = |p: Range<usize>| range.start + p.start..range.start + p.end;
        let tensors = &self.tensors;
        let left = self.its.len() - self.next;
        let count = usize::try_from(count)
            .ok()
            .filter(|&c| c >= 1 && c <= left)
            .ok_or_else(|| bad(format!("covers {count} items, {left} are left")))?;
        let mine = &self.its[self.next..self.next + count];
        // The record's type, and what it restores.
        let (ty, first_tensor, kind) = match mine {
            [It::Gap(b, e)] => (Ty::new(8, e - b), None, 0),
            [It::Tensor(t)] => (tensors[*t].ty(), Some(*t), 1),
            many => {
                let ts: Vec<usize> = many
                    .iter()
                    .map(|i| match i {
                        It::Tensor(t) => Some(*t),
                        It::Gap(..) => None,
                    })
                    .collect::<Option<_>>()
                    .ok_or_else(|| bad("a group holds a gap".to_string()))?;
                let dtype = tensors[ts[0]].dtype;
                if ts.iter().any(|&t| tensors[t].dtype != dtype) {
                    return Err(bad("a group holds tensors of several dtypes".to_string()));
                }
                let bytes: u64 = ts.iter().map(|&t| tensors[t].original_bytes()).sum();
                let width = dtype.word_bits();
                (Ty::new(width, bytes / u64::from(width / 8)), Some(ts[0]), 2)
            }
        };
        let mut reference = None;
        let mut regions = None;
        let (checksum, program, copy_of) = match record {
            RecordV2::Header { .. } => return Err(bad("a second header record".to_string())),
            RecordV2::Data { checksum, program } => (checksum, abs(program), None),
            RecordV2::Regions {
                checksum,
                regions: heads,
                program,
            } => {
                let program = abs(program);
                regions = Some(region_spans(&heads, &program, ty).map_err(bad)?);
                (checksum, program, None)
            }
            RecordV2::Ref {
                checksum,
                source,
                tensor,
                source_checksum,
                op,
                program,
            } => {
                if kind != 1 {
                    return Err(bad(
                        "a reference record covers something else than one tensor".to_string(),
                    ));
                }
                let source = usize::try_from(source)
                    .ok()
                    .filter(|&s| s < self.sources)
                    .ok_or_else(|| {
                        bad(format!(
                            "coded against source #{source}, but the archive lists {}",
                            self.sources
                        ))
                    })?;
                reference = Some(Reference {
                    source,
                    tensor,
                    source_checksum,
                    op,
                });
                (checksum, abs(program), None)
            }
            RecordV2::Copy { of } => {
                let target = usize::try_from(of)
                    .ok()
                    .filter(|&j| (1..r).contains(&j))
                    .and_then(|j| self.stored.get(j)?.as_ref())
                    .ok_or_else(|| {
                        bad(format!(
                            "copies record {of}, which is not an earlier data record"
                        ))
                    })?;
                if !format::copy_allowed(self.version, target.ty, ty) {
                    let named = first_tensor
                        .map(|t| format!(" (tensor {:?})", tensors[t].name))
                        .unwrap_or_default();
                    return Err(bad(format!(
                        "copies record {of} of type {}, but restores {ty}{named}",
                        target.ty
                    )));
                }
                regions = target.regions.clone();
                (target.checksum, target.program.clone(), target.tensor)
            }
        };
        // Checked: from here on nothing fails.
        self.next += count;
        let stored = (copy_of.is_none() && reference.is_none()).then(|| Stored {
            ty,
            checksum,
            program: program.clone(),
            tensor: first_tensor,
            regions: regions.clone(),
        });
        while self.stored.len() < r {
            self.stored.push(None);
        }
        self.stored.push(stored);
        // (The program of a record cut short runs past the bytes present.)
        let root_op = format::root_op_name(self.bytes.get(program.start..).unwrap_or_default());
        let record = range;
        let item = match (kind, mine) {
            (0, [It::Gap(begin, end)]) => {
                let item = Item::Gap(self.gaps.len());
                self.gaps.push(GapEntry {
                    begin: *begin,
                    end: *end,
                    checksum,
                    record,
                    program,
                });
                item
            }
            (1, [It::Tensor(t)]) => {
                let e = &mut self.tensors[*t];
                e.checksum = checksum;
                e.share = record.len() as u64;
                e.program_share = if copy_of.is_some() {
                    0
                } else {
                    program.len() as u64
                };
                e.record = record;
                e.program = program;
                e.root_op = root_op;
                e.copy_of = copy_of;
                e.settings = settings;
                e.reference = reference;
                Item::Tensor(*t)
            }
            _ => {
                let ts: Vec<usize> = mine
                    .iter()
                    .filter_map(|i| match i {
                        It::Tensor(t) => Some(*t),
                        It::Gap(..) => None,
                    })
                    .collect();
                let (lo, hi) = (ts[0], ts[ts.len() - 1] + 1);
                let k = self.groups.len();
                let tensors = &mut self.tensors;
                // Shares of the record and program in proportion to the original bytes,
                // the rounding put on the last one, so that they add up exactly.
                let sizes: Vec<u64> = ts.iter().map(|&t| tensors[t].original_bytes()).collect();
                let shares = group_shares(record.len() as u64, program.len() as u64, &sizes);
                for (&t, share) in ts.iter().zip(shares) {
                    let e = &mut tensors[t];
                    e.checksum = checksum;
                    e.record = record.clone();
                    e.program = program.clone();
                    e.root_op = root_op;
                    e.group = Some(k);
                    e.copy_of = copy_of;
                    e.settings = settings;
                    (e.share, e.program_share) = share;
                }
                self.groups.push(GroupEntry {
                    tensors: lo..hi,
                    begin: tensors[lo].begin,
                    end: tensors[hi - 1].end,
                    dtype: tensors[lo].dtype,
                    checksum,
                    record,
                    program,
                    settings,
                });
                Item::Group(k)
            }
        };
        self.items.push(item);
        if let Some(spans) = regions {
            self.regions.insert(item, spans);
        }
        Ok(())
    }

    /// Refuses records that do not cover every item.
    fn finish(&self) -> Result<(), ArchiveError> {
        if self.next != self.its.len() {
            return Err(damaged_record(format!(
                "the records cover {} of the {} tensors and gaps the header lays out",
                self.next,
                self.its.len()
            )));
        }
        Ok(())
    }

    /// Makes every item no record covered a lost one, lost for `why`.
    fn lose_rest(&mut self, why: &str) {
        for it in &self.its[self.next..] {
            let (begin, end, tensor) = match *it {
                It::Tensor(t) => (self.tensors[t].begin, self.tensors[t].end, Some(t)),
                It::Gap(b, e) => (b, e, None),
            };
            self.items.push(Item::Lost(self.lost.len()));
            self.lost.push(LostEntry {
                begin,
                end,
                tensor,
                why: why.to_string(),
            });
        }
        self.next = self.its.len();
    }

    fn into_structure(self, h: Head) -> Structure {
        Structure {
            header_len: h.header_len,
            header_checksum: h.header_checksum,
            header_record: h.header_record,
            header_program: h.header_program,
            original_len: h.original_len,
            file_checksum: h.file_checksum,
            records_checksum: h.records_checksum,
            records_end: h.records_end,
            version: h.version,
            wire: h.wire,
            file_name: h.file_name,
            settings: h.settings,
            sources: h.sources,
            tensors: self.tensors,
            gaps: self.gaps,
            groups: self.groups,
            items: self.items,
            regions: self.regions,
            lost: self.lost,
            indexless: h.indexless,
        }
    }
}

/// The regions of a regions record whose program (absolute range `program`) restores
/// `ty`: each child of the root `concat` at the program's end, with its words, its
/// byte offset in the record's bytes and its checksum.
fn region_spans(
    heads: &[format::RegionHead],
    program: &Range<usize>,
    ty: Ty,
) -> Result<Arc<[RegionSpan]>, String> {
    let words: u64 = heads
        .iter()
        .try_fold(0u64, |a, h| a.checked_add(h.words).filter(|_| h.words >= 1))
        .ok_or_else(|| "a region of no words".to_string())?;
    if words != ty.len {
        return Err(format!(
            "its regions hold {words} words, its items {}",
            ty.len
        ));
    }
    let total: u64 = heads.iter().map(|h| h.program_len).sum();
    // `read_record_v4` checked that the regions' programs fit the program.
    let mut at = program.end - total as usize;
    let word_bytes = u64::from(crate::tensor::container_bytes(ty.width) as u32);
    let mut offset = 0u64;
    let mut spans = Vec::with_capacity(heads.len());
    for h in heads {
        if h.program_len == 0 {
            return Err("a region with an empty program".to_string());
        }
        let end = at + h.program_len as usize;
        spans.push(RegionSpan {
            words: h.words,
            offset,
            program: at..end,
            checksum: h.checksum,
        });
        offset += h.words * word_bytes;
        at = end;
    }
    Ok(spans.into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::archive::safetensors::parse;
    use crate::archive::writer::write_archive;
    use crate::archive::{no_progress, verify, CompressOptions};

    /// Files that are not archives are named for what they are (`brevis-tui
    /// model.safetensors.index.json` said "wrong magic bytes").
    #[test]
    fn foreign_files_are_described() {
        let what = |b: &[u8]| match parse_structure(b) {
            Err(ArchiveError::NotArchive { what }) => what,
            Err(e) => panic!("expected NotArchive, got {e:?}"),
            Ok(_) => panic!("expected NotArchive, got an archive"),
        };
        assert_eq!(what(b""), "the file is empty (0 bytes)");
        assert_eq!(
            what(&[0x28, 0xb5, 0x2f, 0xfd, 0, 0, 0, 0]),
            "it is a zstd frame"
        );
        assert!(what(&source()).starts_with("it looks like an uncompressed .safetensors file"));
        let index =
            br#"  {"metadata": {}, "weight_map": {"a": "model-00001-of-00002.safetensors"}}"#;
        assert!(what(index).starts_with("it looks like a JSON file, not an archive"));
        assert_eq!(
            what(b"PK\x03\x04zipfile"),
            "wrong magic bytes [50 4b 03 04 7a 69 70 66] (expected \"BREVIS\\0\\0\")"
        );
        // A file cut inside the magic is a truncated archive (a tester saw "wrong magic
        // bytes" for the first 5 bytes of one); other short files are still foreign.
        assert!(matches!(
            parse_structure(b"BREVI"),
            Err(ArchiveError::Corrupt { what }) if what == "truncated: 5 bytes, fewer than the 48 of an empty archive"
        ));
        assert!(what(b"BREVX").starts_with("wrong magic bytes [42 52 45 56 58]"));
        assert!(matches!(
            parse_structure(b"B"),
            Err(ArchiveError::Corrupt { what }) if what == "truncated: 1 byte, fewer than the 48 of an empty archive"
        ));
    }

    /// What `parse_structure` says is wrong with `b`, which must be a damaged archive.
    fn corrupt_what(b: &[u8]) -> String {
        match parse_structure(b) {
            Err(ArchiveError::Corrupt { what }) => what,
            Err(e) => panic!("expected Corrupt, got {e:?}"),
            Ok(_) => panic!("expected Corrupt, got an archive"),
        }
    }

    /// An end marker a few bits off is called damaged, with its bytes and whether the
    /// rest of the trailer holds; a cut archive still has its end marker missing.
    #[test]
    fn damaged_end_marker_is_named() {
        let good = archive_of(&source(), 1);
        let what = corrupt_what;
        let mut flipped = good.clone();
        let last = flipped.len() - 1;
        flipped[last] ^= 0x01;
        assert_eq!(
            what(&flipped),
            "the end marker is damaged: its 8 bytes are [42 52 56 49 4e 44 45 59], 1 bit off \
             \"BRVINDEX\" (the rest of the trailer and the index are sound)"
        );
        // The marker and the index checksum both damaged.
        flipped[last - 8] ^= 0x80;
        assert!(what(&flipped).ends_with("1 bit off \"BRVINDEX\" (truncated or damaged archive)"));
        let cut = &good[..good.len() - 5];
        assert_eq!(
            what(cut),
            "the end marker is missing (truncated or damaged archive)"
        );
    }

    /// Bytes appended to an archive are named as such, with where the archive ends (a
    /// tester saw "the end marker is missing (truncated or damaged archive)"); a cut or a
    /// damaged trailer is still called that, and a stray end marker in appended bytes is
    /// not taken for the archive's end.
    #[test]
    fn appended_bytes_are_named() {
        let good = archive_of(&source(), 1);
        let what = corrupt_what;
        let end = good.len();
        let mut one = good.clone();
        one.push(b'\n');
        assert_eq!(
            what(&one),
            format!(
                "the archive ends at byte {end} (its trailer is sound there) but the file \
                 goes on: 1 byte after it (data appended to it? `truncate -s {end} FILE` \
                 removes them)"
            )
        );
        // Appended bytes that hold an end marker, and a second copy of the archive (its
        // trailer places its index relative to its own start, so it is not sound here).
        let mut more = good.clone();
        more.extend_from_slice(b"xxBRVINDEXyy");
        more.extend_from_slice(&good);
        more.extend_from_slice(b"!!");
        let tail = end + 14;
        assert!(
            what(&more).starts_with(&format!(
                "the archive ends at byte {end} (its trailer is sound there) but the file \
                 goes on: {tail} bytes after it"
            )),
            "{}",
            what(&more)
        );
        // A copy of the archive appended to itself ends with an end marker, whose trailer
        // places its index relative to the copy's start.
        let doubled = [good.as_slice(), good.as_slice()].concat();
        assert!(
            what(&doubled).starts_with(&format!("the archive ends at byte {end} ")),
            "{}",
            what(&doubled)
        );
        let missing = "the end marker is missing (truncated or damaged archive)";
        assert_eq!(what(&good[..end - 1]), missing);
        let mut bad_sum = good.clone();
        bad_sum[end - 9] ^= 1;
        bad_sum.push(0);
        assert_eq!(what(&bad_sum), missing);
    }

    /// A small source with a leading gap, an empty tensor, two dtypes and trailing bytes.
    fn source() -> Vec<u8> {
        let header = r#"{"__metadata__":{"format":"pt"},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]},"e":{"dtype":"BF16","shape":[0,3],"data_offsets":[12,12]},"a":{"dtype":"BF16","shape":[3],"data_offsets":[12,18]}}  "#;
        let mut v = (header.len() as u64).to_le_bytes().to_vec();
        v.extend_from_slice(header.as_bytes());
        v.extend_from_slice(&[9, 9, 9, 9]);
        v.extend_from_slice(&1.5f32.to_le_bytes());
        v.extend_from_slice(&(-0.0f32).to_le_bytes());
        v.extend_from_slice(&[0x80, 0x3f, 0x00, 0x80, 0xc0, 0x7f]);
        v.extend_from_slice(b"tail");
        v
    }

    fn archive_of(src: &[u8], jobs: usize) -> Vec<u8> {
        let parsed = parse(src).unwrap();
        let opts = CompressOptions {
            jobs: Some(jobs),
            ..CompressOptions::default()
        };
        let mut out = Vec::new();
        write_archive(&parsed, &mut out, &opts, &no_progress, Path::new("mem")).unwrap();
        out
    }

    #[test]
    fn round_trips_in_memory_and_decodes_tensors_alone() {
        let src = source();
        let bytes = archive_of(&src, 1);
        assert_eq!(
            bytes,
            archive_of(&src, 3),
            "thread count changed the archive"
        );
        let a = Archive::from_bytes(bytes, "mem").unwrap();
        let names: Vec<&str> = a.tensors().iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["b", "e", "a"]);
        assert_eq!(a.gaps().len(), 2);
        assert_eq!(a.original_len(), src.len() as u64);
        let i = a.find("a").unwrap();
        assert_eq!(
            a.decode_tensor(i).unwrap(),
            [0x80, 0x3f, 0x00, 0x80, 0xc0, 0x7f]
        );
        assert_eq!(
            a.decode_tensor(a.find("e").unwrap()).unwrap(),
            Vec::<u8>::new()
        );
        assert_eq!(a.program(i).unwrap().ty(), Ty::new(16, 3));
        assert!(a.decode_tensor(99).is_err());
        let mut out = Vec::new();
        a.write_original(&mut out, Some(2), &no_progress, Path::new("out"))
            .unwrap();
        assert_eq!(out, src);
        assert!(verify(&a, Some(1), &no_progress).unwrap().is_ok());
    }

    /// A U8 tensor of 4,096 bytes: 512 pseudo-random bytes, then 64-byte copies of
    /// earlier bytes at pseudo-random distances (back references pay; no period does).
    fn reuse_source() -> Vec<u8> {
        let mut x: u32 = 12345;
        let mut next = || {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            x >> 8
        };
        let mut data: Vec<u8> = (0..512).map(|_| next() as u8).collect();
        while data.len() < 4096 {
            let from = next() as usize % (data.len() - 64);
            let copy = data[from..from + 64].to_vec();
            data.extend_from_slice(&copy);
        }
        let header = r#"{"r":{"dtype":"U8","shape":[4096],"data_offsets":[0,4096]}}    "#;
        let mut v = (header.len() as u64).to_le_bytes().to_vec();
        v.extend_from_slice(header.as_bytes());
        v.extend_from_slice(&data);
        v
    }

    #[test]
    fn a_program_newer_than_the_declared_wire_version_is_refused() {
        let src = reuse_source();
        let good = archive_of(&src, 1);
        let a = Archive::from_bytes(good.clone(), "mem").unwrap();
        let i = a.find("r").unwrap();
        assert_eq!(
            a.decode_tensor(i).unwrap().as_slice(),
            &src[src.len() - 4096..]
        );
        let node = a.program(i).unwrap();
        assert_eq!(wire_version_of(&node), 2, "{node:?}");
        // The wire version is under the file header's checksum: changed alone, the
        // header is refused as damaged.
        let mut old = good;
        old[10..12].copy_from_slice(&1u16.to_le_bytes());
        let e = Archive::from_bytes(old.clone(), "mem")
            .unwrap_err()
            .to_string();
        assert!(e.contains("the file header is damaged"), "{e}");
        // The same archive with a sound header declaring wire version 1 opens, but the
        // tensor is refused.
        old[..format::FILE_HEADER_LEN].copy_from_slice(&format::file_header_of(4, 1));
        let a = Archive::from_bytes(old, "mem").unwrap();
        let e = a.decode_tensor(i).unwrap_err().to_string();
        assert!(
            e.contains("needs wire version 2, but the archive declares 1"),
            "{e}"
        );
    }

    #[test]
    fn hostile_archives_are_refused_without_panics() {
        let good = archive_of(&source(), 1);
        // Every truncation is refused at open.
        for n in 0..good.len() {
            assert!(
                Archive::from_bytes(good[..n].to_vec(), "t").is_err(),
                "prefix {n}"
            );
        }
        // Every single-byte change is refused at open, or caught by decoding and the
        // checksums; nothing panics.
        for pos in 0..good.len() {
            for flip in [0x01u8, 0x80, 0xff] {
                let mut bad = good.clone();
                bad[pos] ^= flip;
                let Ok(a) = Archive::from_bytes(bad, "t") else {
                    continue;
                };
                // Every byte is covered by a checksum (the file header's own since format
                // 4): verification must fail.
                let report = verify(&a, Some(1), &no_progress).unwrap();
                assert!(!report.is_ok(), "byte {pos} ^ {flip:#x} went unnoticed");
                // Restoring checks the original bytes only: it either fails or is exact.
                let mut out = Vec::new();
                let restored = a.write_original(&mut out, Some(1), &no_progress, Path::new("o"));
                if restored.is_ok() {
                    assert_eq!(out, source(), "byte {pos} ^ {flip:#x} decoded wrongly");
                }
            }
        }
    }
}
