//! The `.brv` archive layout (docs/design.md §7; paper §3.4), both directions.
//!
//! An archive restores its source `.safetensors` file byte for byte. It is a file header,
//! a run of independent records, an index and a trailer:
//!
//! ```text
//! offset 0     file header      16 bytes
//! offset 16    record 0         the source header (length field and JSON text)
//!              record 1..R-1    the data region, in offset order
//! index_offset index            record lengths, settings, checksums
//! end - 32     trailer          32 bytes: where the index is, its checksum, end magic
//! ```
//!
//! This module writes format version 4 ([`FORMAT_VERSION`]) and reads versions 1 to 4.
//! Versions 2 and 3 are described after version 4, version 1 at the end.
//!
//! **Integers.** Fixed-size fields are little-endian (`u16`, `u32`, `u64`). Variable
//! fields (`uleb`) are unsigned LEB128, at most 10 bytes, no bits beyond 64. Checksums
//! are xxh3-64 (seed 0) of the *original* bytes, stored as `u64` little-endian.
//!
//! **File header** (16 bytes):
//!
//! | bytes | field |
//! | --- | --- |
//! | 0..8 | magic [`MAGIC`] = `"BREVIS\0\0"` |
//! | 8..10 | format version `u16` (4; 1 to 3 for earlier formats) |
//! | 10..12 | program wire version `u16`, at most [`crate::dsl::wire::WIRE_VERSION`] (this build writes that) |
//! | 12..16 | version 4: `u32` header check, the low 32 bits of the xxh3-64 of bytes 0..12, 1 where those are 0 ([`header_check`]); versions 1 to 3: flags, 0 |
//!
//! A reader refuses a header whose check does not match: every bit of the file header is
//! covered (a version-4 header whose version field is damaged into 1 to 3 has a nonzero
//! "flags" field, and is refused too).
//!
//! **Items.** The source header says everything about the tensors: names, dtypes,
//! shapes and offsets. A reader decodes record 0 (the header, a few kilobytes), parses
//! it as the writer's parser did ([`super::safetensors::parse_header`]), and cuts the
//! data region into *items*: the non-empty tensors and the gaps between them (bytes no
//! tensor owns), in offset order. Empty tensors have no bytes and no item. Records
//! therefore store no name, dtype, shape or offset: only their bytes' checksum and
//! program.
//!
//! **Records** follow each other without padding from byte 16. Record 0 is the header
//! record; records `1..R` each cover one or more consecutive items and together cover
//! them all, in order. Each record starts with a *frame*, so that it can be found and
//! checked without the index (an archive cut short, or whose index is damaged):
//!
//! 1. `u8` marker and kind: [`RECORD_MARKER`] `0xB0` plus the kind (0 to 4);
//! 2. `uleb` length in bytes of the rest of the record (after this field);
//! 3. for every kind but the header, `uleb` count of items it covers (>= 1);
//!
//! then the fields of its kind, and its program to the record's end:
//!
//! | kind | fields after the frame |
//! | --- | --- |
//! | `0` header | `uleb` header length `N` (the value of the source's 8-byte length field); `u64` checksum of the `N` JSON bytes; `uleb` length of the original file in bytes; `uleb` length and UTF-8 bytes of the source's file name (no folders; empty if not known), which `decompress` restores by default; `uleb` count of sources, then each source ([`SourceEntry`]): `u8` role (0 a file of the base checkpoint, 1 another shard of the same folder), `uleb` length and UTF-8 bytes of its name, `uleb` its original length, `u64` its checksum; program of type `u8[N]` |
//! | `1` data | `u64` checksum of the bytes it restores; program |
//! | `2` copy | `uleb` index `j` of an earlier data record (`1 <= j` < this one) of the same type ([`copy_allowed`]), whose bytes these are (a tensor stored twice, e.g. tied embeddings); no program |
//! | `3` reference | `u64` checksum of the bytes it restores; `uleb` source `s` (< the header record's source count); `uleb` position `t` of the source's tensor among its tensors in data order; `u64` xxh3-64 of that tensor's bytes; `u8` op ([`RefOp`]: 0 XOR, 1 subtraction); program of the residual |
//! | `4` regions | `u64` checksum of all the bytes it restores; `uleb` count `k` (>= 2) of regions, then each region ([`RegionHead`]): `uleb` its words, `uleb` its program's length in bytes, `u64` checksum of its bytes; program, a root `concat` of `k` children whose last `sum of lengths` bytes are the regions' programs in order |
//!
//! A data or regions record covers either one item, or several consecutive tensors of one
//! dtype (a *group*: small tensors coded together, see [`crate::archive::writer`]). Its
//! program has type `b[L / (b / 8)]`: its `L` bytes read as little-endian `b`-bit words,
//! `b` the word width of its tensors' dtype (docs/design.md §2), 8 for a gap.
//!
//! **Large tensors** of more than [`crate::archive::writer::REGION_WORDS`] words (and
//! gaps of more than that many bytes) are stored as a regions record: an explicit
//! `Concat` whose children cover consecutive regions of that many words (the last one
//! shorter; for a matrix, whole rows: [`crate::synth::regions_of`]), each synthesized
//! alone, each with its own checksum and program length. A region is decoded and
//! checked alone: damage in one costs that region (`decompress --salvage` zero-fills it
//! only), and an archive cut inside the record keeps the regions before the cut.
//!
//! **Index** (at `index_offset`, `index_len` bytes):
//!
//! 1. `uleb` record count `R` (>= 1);
//! 2. `u64` checksum of the whole original file;
//! 3. `u64` xxh3-64 of the archive bytes `[16, index_offset)` (all records, checked by
//!    verification, not on open);
//! 4. `uleb` count `S` of search settings, then each ([`write_settings`]): `uleb` length
//!    in bytes of its fields, then `uleb` budget (expansions per region), `uleb` depth
//!    limit, `uleb` node limit, `u8` prior (0 uniform, 1 calibrated on the source, 2
//!    given), `u64` xxh3-64 of the prior's JSON (0 for uniform) ([`Settings`]); a field
//!    added later goes at the end of the fields;
//! 5. `R` times `uleb` record length in bytes: record `i` starts at `16 + sum of the
//!    lengths before it`; the lengths add up to `index_offset - 16`, and each record's
//!    frame must say the same;
//! 6. for each record `1..R`: `uleb` index of the settings that built it (< `S`).
//!
//! **Trailer** (last 32 bytes): `u64` index offset, `u64` index length, `u64` xxh3-64 of
//! the index bytes, end magic [`END_MAGIC`] = `"BRVINDEX"`. The index must end where the
//! trailer starts.
//!
//! Every record can be decoded alone, given its offset and length (from the index, or by
//! walking the frames from byte 16) and the decoded header (a copy through the record it
//! names). The reader checks every length, count and offset against the bytes present
//! before using it; see [`crate::archive::reader`]. An archive whose trailer or index
//! cannot be read is opened for salvage by walking its frames
//! ([`crate::archive::Archive::open_for_salvage`]): the header record must be whole; the
//! walk stops at the first record that is cut short or does not read, and the items after
//! it are restored by none. The measured cost of the frames, the header check and the
//! region tables on the corpus is at most 0.009 percentage points of reduction (7 to 533
//! bytes a file).
//!
//! **Checkpoint folders** (a sharded checkpoint with `model.safetensors.index.json`) are
//! not one archive but a folder of archives: one `.brv` per `.safetensors` shard, every
//! other file copied verbatim, and a JSON manifest `brevis-folder.json`; see
//! [`crate::archive::folder`] for the layout. One archive per shard keeps random access
//! (open only the shard holding a tensor) and lets shards be written, read and verified
//! independently.
//!
//! **Versions 2 and 3** (read only) had the same layout with flags 0 at bytes 12..16
//! (nothing covered the file header's fields), no frames (a record's length was only in
//! the index; a record started with its kind byte, 0 to 3, without the marker, and held
//! the fields above after it), no regions records (a large tensor was a data record whose
//! `concat` shared one checksum), the original length, file name and (version 3) sources
//! in the index, and an index of:
//!
//! 1. `uleb` record count `R` (>= 1);
//! 2. `uleb` original file length in bytes;
//! 3. `u64` checksum of the whole original file;
//! 4. `u64` xxh3-64 of the archive bytes `[16, index_offset)`;
//! 5. `uleb` length and UTF-8 bytes of the source's file name;
//! 6. `uleb` count `S` of search settings, then each: the fields above without their
//!    length;
//! 7. version 3 only: `uleb` count of sources (>= 1), then each as above;
//! 8. `R` times `uleb` record length in bytes;
//! 9. for each record `1..R`: `uleb` count of items it covers (>= 1), `uleb` index of
//!    the settings that built it (< `S`).
//!
//! Version 2 was written for an archive without sources (with program wire version 4),
//! version 3 for one with.
//!
//! **Version 1** (read only) had the same file header (version 1, wire version 1),
//! trailer and layout, with self-describing records, one per tensor (empty ones too) or
//! gap, in data-offset order:
//!
//! | kind | fields after the kind byte |
//! | --- | --- |
//! | `0` header | `uleb` header length `N`; `u64` checksum of the `N` JSON bytes; `uleb` program length; program of type `u8[N]` |
//! | `1` tensor | `uleb` name length, name (UTF-8); `uleb` position among the header's tensor entries; `u8` dtype code ([`crate::tensor::Dtype::code`]); `uleb` rank, `uleb` per dimension; `uleb` begin, `uleb` end (its `data_offsets`); `u64` checksum of its bytes; `uleb` program length; program |
//! | `2` gap | `uleb` begin, `uleb` end (never empty); `u64` checksum; `uleb` program length; program of type `u8[end - begin]` |
//!
//! and an index of: `uleb` record count `R`; `uleb` tensor count; `uleb` original file
//! length; `u64` whole-file checksum; `u64` records checksum; `R` times `uleb` record
//! length.

use crate::dsl::wire::Sink;
use crate::dsl::Ty;
use crate::tensor::Dtype;

/// Magic at the start of every archive.
pub const MAGIC: [u8; 8] = *b"BREVIS\0\0";

/// Magic at the very end of every archive.
pub const END_MAGIC: [u8; 8] = *b"BRVINDEX";

/// Newest layout this build writes and reads (it reads [`FIRST_VERSION`] to this one).
/// Every archive is written as version 4: the file header under a checksum, records
/// that can be found and checked without the index, a checksum per region of a large
/// tensor.
pub const FORMAT_VERSION: u16 = 4;

/// The version of an archive with no sources written by builds before format 4: 2
/// (version 3 had sources). Kept to build such archives in tests.
pub const PLAIN_VERSION: u16 = 2;

/// Oldest layout this build reads.
pub const FIRST_VERSION: u16 = 1;

/// Length of the file header in bytes.
pub const FILE_HEADER_LEN: usize = 16;

/// Length of the trailer in bytes.
pub const TRAILER_LEN: usize = 32;

/// Record kinds.
pub const KIND_HEADER: u8 = 0;
/// A tensor record (version 1).
pub const KIND_TENSOR: u8 = 1;
/// A gap record (version 1).
pub const KIND_GAP: u8 = 2;
/// A data record (version 2).
pub const KIND_DATA: u8 = 1;
/// A copy record (version 2).
pub const KIND_COPY: u8 = 2;
/// A reference record (version 3): a tensor coded against a tensor of a source.
pub const KIND_REF: u8 = 3;
/// A data record with a checksum per region (version 4): a large tensor (or gap) whose
/// program is a root `concat` of its regions.
pub const KIND_REGIONS: u8 = 4;

/// The high four bits of a version-4 record's first byte (its low four bits are the
/// kind): what a reader walking the records without the index checks that it stands on
/// a record.
pub const RECORD_MARKER: u8 = 0xB0;

/// The 16-byte file header of format 2 (program wire
/// [`crate::dsl::wire::PLAIN_WIRE_VERSION`]), what builds before format 4 wrote for an
/// archive without sources: to build version-2 archives in tests.
pub fn file_header() -> [u8; FILE_HEADER_LEN] {
    file_header_version(PLAIN_VERSION)
}

/// The 16-byte file header of format `version`: format 4 ([`FORMAT_VERSION`], what
/// this build writes) at this build's wire version, its fields under the checksum at
/// bytes 12..16 ([`header_check`]); format 3, whose reference records may hold bucket
/// literals, at this build's wire version; format 2 at
/// [`crate::dsl::wire::PLAIN_WIRE_VERSION`].
pub fn file_header_version(version: u16) -> [u8; FILE_HEADER_LEN] {
    let wire = if version >= 3 {
        crate::dsl::wire::WIRE_VERSION
    } else {
        crate::dsl::wire::PLAIN_WIRE_VERSION
    };
    file_header_of(version, wire as u16)
}

/// The 16-byte file header of a version-1 archive (format 1, wire 1): what the
/// version-1 record writers below go with, to build such archives in tests.
pub fn file_header_v1() -> [u8; FILE_HEADER_LEN] {
    file_header_of(1, 1)
}

/// The file header of format `version` and program wire version `wire`: from version 4
/// on with [`header_check`] at bytes 12..16 (flags 0 before).
pub fn file_header_of(version: u16, wire: u16) -> [u8; FILE_HEADER_LEN] {
    let mut h = [0u8; FILE_HEADER_LEN];
    h[..8].copy_from_slice(&MAGIC);
    h[8..10].copy_from_slice(&version.to_le_bytes());
    h[10..12].copy_from_slice(&wire.to_le_bytes());
    if version >= 4 {
        let check = header_check(&h[..12]);
        h[12..16].copy_from_slice(&check.to_le_bytes());
    }
    h
}

/// The checksum of a version-4 file header, stored at its bytes 12..16 (where earlier
/// versions had flags that had to be 0): the low 32 bits of the xxh3-64 of its bytes
/// 0..12 (magic, format version, wire version), never 0 (a 0 is stored as 1), so that
/// no damaged version-4 header reads as a sound header of an earlier version.
pub fn header_check(first12: &[u8]) -> u32 {
    match crate::hash::xxh3_64(first12) as u32 {
        0 => 1,
        c => c,
    }
}

/// How the production prior of a search was chosen ([`Settings`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PriorKind {
    /// Uniform production costs.
    Uniform = 0,
    /// Calibrated on the source's own tensors (docs/design.md §6).
    Calibrated = 1,
    /// Given by the user (a prior file).
    Given = 2,
}

impl PriorKind {
    /// Lowercase name (`uniform`, `calibrated`, `given`).
    pub fn name(self) -> &'static str {
        match self {
            PriorKind::Uniform => "uniform",
            PriorKind::Calibrated => "calibrated",
            PriorKind::Given => "given",
        }
    }

    fn from_u8(b: u8) -> Option<PriorKind> {
        match b {
            0 => Some(PriorKind::Uniform),
            1 => Some(PriorKind::Calibrated),
            2 => Some(PriorKind::Given),
            _ => None,
        }
    }
}

/// The search settings that built a record (version 2 keeps them in the index): the
/// expansion budget per region, the depth and node limits, and which prior ordered the
/// search, by the xxh3-64 of its JSON without its `source` note
/// ([`crate::synth::Prior::digest`]; 0 for uniform; archives written before 2026-12-03
/// hashed the note too, so theirs named the path the prior was learned from).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Settings {
    /// Expansions per region (`--budget`).
    pub budget: u64,
    /// Deepest program (`--max-depth`).
    pub max_depth: u64,
    /// Most nodes per program (`--max-nodes`).
    pub max_nodes: u64,
    /// How the prior was chosen.
    pub prior: PriorKind,
    /// [`crate::synth::Prior::digest`] of the prior; 0 for a uniform prior.
    pub prior_digest: u64,
    /// The compression level asked for (`--level`); `None` when none was (a search with
    /// limits of its own, as the TUI's) or not recorded (formats 1 to 3).
    pub level: Option<crate::synth::Level>,
}

impl Settings {
    /// The digest as 16 hex digits (what `show` and `ls --json` print).
    pub fn digest_hex(&self) -> String {
        format!("{:016x}", self.prior_digest)
    }
}

/// What a version-2 record holds, read from its bytes without decoding its program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RecordV2 {
    /// The source header.
    Header {
        /// Length of the JSON header in bytes.
        header_len: u64,
        /// xxh3-64 of the JSON header.
        checksum: u64,
        /// Program bytes, relative to the record start.
        program: std::ops::Range<usize>,
    },
    /// Bytes of the data region.
    Data {
        /// xxh3-64 of the bytes.
        checksum: u64,
        /// Program bytes, relative to the record start.
        program: std::ops::Range<usize>,
    },
    /// Bytes of the data region whose program is a root `concat` of regions, each with
    /// its own checksum (version 4).
    Regions {
        /// xxh3-64 of all the bytes.
        checksum: u64,
        /// Its regions, in order: the children of the program's root `concat`.
        regions: Vec<RegionHead>,
        /// Program bytes, relative to the record start.
        program: std::ops::Range<usize>,
    },
    /// The bytes of an earlier data record.
    Copy {
        /// Index of that record (>= 1).
        of: u64,
    },
    /// A tensor coded against tensor `tensor` of source `source` (version 3).
    Ref {
        /// xxh3-64 of the bytes it restores.
        checksum: u64,
        /// Index into the index's sources.
        source: u64,
        /// Position of the source's tensor among the source's tensors in data order.
        tensor: u64,
        /// xxh3-64 of the source tensor's bytes.
        source_checksum: u64,
        /// How the residual combines with the source's words.
        op: RefOp,
        /// Program bytes (the residual's), relative to the record start.
        program: std::ops::Range<usize>,
    },
}

/// How a reference record's residual words `r` combine with the source tensor's words
/// `s` (both of the tensor's word width `b`) into the tensor's words `w`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RefOp {
    /// `w = s ^ r` (BitX's XOR, ZipLLM §4).
    Xor = 0,
    /// `w = s + r mod 2^b`: `r` is the difference of the words as unsigned integers.
    Sub = 1,
}

impl RefOp {
    /// `xor` or `sub`.
    pub fn name(self) -> &'static str {
        match self {
            RefOp::Xor => "xor",
            RefOp::Sub => "sub",
        }
    }

    fn from_u8(b: u8) -> Option<RefOp> {
        match b {
            0 => Some(RefOp::Xor),
            1 => Some(RefOp::Sub),
            _ => None,
        }
    }
}

/// What a source of a version-3 archive is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SourceRole {
    /// A file of the base checkpoint (`--base`): a `.safetensors` file, or a shard of a
    /// base folder.
    Base = 0,
    /// Another shard of the same checkpoint folder (tensors stored once across shards).
    Shard = 1,
}

impl SourceRole {
    /// `base` or `shard`.
    pub fn name(self) -> &'static str {
        match self {
            SourceRole::Base => "base",
            SourceRole::Shard => "shard",
        }
    }

    fn from_u8(b: u8) -> Option<SourceRole> {
        match b {
            0 => Some(SourceRole::Base),
            1 => Some(SourceRole::Shard),
            _ => None,
        }
    }
}

/// A source of a version-3 archive: an original `.safetensors` file that reference
/// records take tensors from, pinned by its length and checksum.
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize)]
pub struct SourceEntry {
    /// Base or sibling shard.
    pub role: SourceRole,
    /// Its name: a base file's name (for a base folder, the shard's path inside it, `/`
    /// separated), or a sibling shard's path inside the folder.
    pub name: String,
    /// Length of its original bytes.
    pub original_len: u64,
    /// xxh3-64 of its original bytes (the whole `.safetensors` file).
    pub checksum: u64,
}

/// Appends everything of a version-2 header record but its program.
pub fn header_record_head_v2(out: &mut Vec<u8>, header_len: u64, checksum: u64) {
    out.push(KIND_HEADER);
    out.put_uleb(header_len);
    out.extend_from_slice(&checksum.to_le_bytes());
}

/// Appends everything of a version-2 data record but its program.
pub fn data_record_head(out: &mut Vec<u8>, checksum: u64) {
    out.push(KIND_DATA);
    out.extend_from_slice(&checksum.to_le_bytes());
}

/// Appends everything of a version-3 reference record but its program (see
/// [`RecordV2::Ref`]).
pub fn ref_record_head(
    out: &mut Vec<u8>,
    checksum: u64,
    (source, tensor, source_checksum): (u64, u64, u64),
    op: RefOp,
) {
    out.push(KIND_REF);
    out.extend_from_slice(&checksum.to_le_bytes());
    out.put_uleb(source);
    out.put_uleb(tensor);
    out.extend_from_slice(&source_checksum.to_le_bytes());
    out.push(op as u8);
}

/// Appends a version-2 copy record of record `of`.
pub fn copy_record(out: &mut Vec<u8>, of: u64) {
    out.push(KIND_COPY);
    out.put_uleb(of);
}

/// Whether a copy record restoring words of type `copy` may name a data record of type
/// `target`, in an archive of format `version`: the one rule the writer decides copies
/// by and the reader checks them with. In every format so far the two types must be
/// equal (same word width and count): a record restores its program's words, so bytes
/// that two tensors of different word widths share (an F32 tensor and a BF16 view of
/// it) are coded twice.
pub fn copy_allowed(version: u16, target: Ty, copy: Ty) -> bool {
    let _ = version;
    target == copy
}

/// Reads one record of a version-2 or version-3 archive from exactly its bytes
/// (reference records only in version 3). Allocates nothing.
pub fn read_record_v2(bytes: &[u8], version: u16) -> Result<RecordV2, String> {
    let mut c = Cursor::new(bytes, "record");
    let rest = |c: &Cursor<'_>| c.pos()..bytes.len();
    let rec = match c.u8()? {
        KIND_HEADER => {
            let header_len = c.uleb()?;
            let checksum = c.u64()?;
            RecordV2::Header {
                header_len,
                checksum,
                program: rest(&c),
            }
        }
        KIND_DATA => {
            let checksum = c.u64()?;
            RecordV2::Data {
                checksum,
                program: rest(&c),
            }
        }
        KIND_COPY => {
            let of = c.uleb()?;
            c.finish()?;
            RecordV2::Copy { of }
        }
        KIND_REF if version >= 3 => {
            let checksum = c.u64()?;
            let source = c.uleb()?;
            let tensor = c.uleb()?;
            let source_checksum = c.u64()?;
            let op = c.u8()?;
            let op = RefOp::from_u8(op).ok_or_else(|| format!("unknown reference op {op}"))?;
            RecordV2::Ref {
                checksum,
                source,
                tensor,
                source_checksum,
                op,
                program: rest(&c),
            }
        }
        k => return Err(format!("unknown record kind {k}")),
    };
    Ok(rec)
}

/// The index of a version-2 archive.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexV2 {
    /// Length of the original file in bytes.
    pub original_len: u64,
    /// xxh3-64 of the whole original file.
    pub file_checksum: u64,
    /// xxh3-64 of the archive's record bytes (from byte 16 to the index).
    pub records_checksum: u64,
    /// The source's file name (empty if not known).
    pub file_name: String,
    /// The search settings the records refer to.
    pub settings: Vec<Settings>,
    /// The sources reference records take tensors from (version 3; empty in version 2).
    pub sources: Vec<SourceEntry>,
    /// Length in bytes of every record, in order (record 0 is the header record).
    pub record_lens: Vec<u64>,
    /// For records `1..`: how many items each covers, and which settings built it.
    pub records: Vec<(u64, u64)>,
}

/// Appends the bytes of a version-2 index, or of a version-3 one (the sources after the
/// settings) when `index.sources` is not empty.
///
/// # Panics
/// If `index.records` does not have one entry per record after the first.
pub fn write_index_v2(out: &mut Vec<u8>, index: &IndexV2) {
    assert_eq!(index.records.len() + 1, index.record_lens.len());
    out.put_uleb(index.record_lens.len() as u64);
    out.put_uleb(index.original_len);
    out.extend_from_slice(&index.file_checksum.to_le_bytes());
    out.extend_from_slice(&index.records_checksum.to_le_bytes());
    out.put_uleb(index.file_name.len() as u64);
    out.extend_from_slice(index.file_name.as_bytes());
    out.put_uleb(index.settings.len() as u64);
    let version = if index.sources.is_empty() { 2 } else { 3 };
    for s in &index.settings {
        write_settings(out, s, version);
    }
    if !index.sources.is_empty() {
        out.put_uleb(index.sources.len() as u64);
        for s in &index.sources {
            out.push(s.role as u8);
            out.put_uleb(s.name.len() as u64);
            out.extend_from_slice(s.name.as_bytes());
            out.put_uleb(s.original_len);
            out.extend_from_slice(&s.checksum.to_le_bytes());
        }
    }
    for &l in &index.record_lens {
        out.put_uleb(l);
    }
    for &(items, settings) in &index.records {
        out.put_uleb(items);
        out.put_uleb(settings);
    }
}

/// Reads a version-2 (or, with `version` 3, version-3) index from exactly its bytes.
/// Every count is bounded by the bytes left (each entry takes at least one byte) before
/// anything is allocated.
pub fn read_index_v2(bytes: &[u8], version: u16) -> Result<IndexV2, String> {
    let mut c = Cursor::new(bytes, "index");
    let count = c.uleb()?;
    let original_len = c.uleb()?;
    let file_checksum = c.u64()?;
    let records_checksum = c.u64()?;
    let name_len = c.uleb()?;
    let file_name = std::str::from_utf8(c.take(name_len)?)
        .map_err(|_| "the file name is not UTF-8".to_string())?
        .to_string();
    let bounded = |c: &Cursor<'_>, n: u64, what: &str, each: u64| {
        if n.saturating_mul(each) > c.remaining() as u64 {
            Err(format!(
                "index claims {n} {what} but has {} bytes left",
                c.remaining()
            ))
        } else {
            Ok(n as usize)
        }
    };
    let settings = read_settings_list(&mut c, version)?;
    let mut sources = Vec::new();
    if version >= 3 {
        let n = c.uleb()?;
        let n = bounded(&c, n, "sources", 11)?;
        if n == 0 {
            return Err("a version-3 index lists no sources".into());
        }
        sources.reserve_exact(n);
        for _ in 0..n {
            let role = c.u8()?;
            let role =
                SourceRole::from_u8(role).ok_or_else(|| format!("unknown source role {role}"))?;
            let len = c.uleb()?;
            let name = std::str::from_utf8(c.take(len)?)
                .map_err(|_| "a source's name is not UTF-8".to_string())?
                .to_string();
            let original_len = c.uleb()?;
            let checksum = c.u64()?;
            sources.push(SourceEntry {
                role,
                name,
                original_len,
                checksum,
            });
        }
    }
    // Each record takes at least three bytes: its length, its item count and its
    // settings (the header record one: its length).
    let record_lens = read_record_lens(&mut c, count, 3)?;
    let n = record_lens.len();
    let mut records = Vec::with_capacity(n - 1);
    for _ in 1..n {
        let items = c.uleb()?;
        let set = c.uleb()?;
        records.push((items, set));
    }
    c.finish()?;
    Ok(IndexV2 {
        original_len,
        file_checksum,
        records_checksum,
        file_name,
        settings,
        sources,
        record_lens,
        records,
    })
}

/// The settings entries of a format-`version` index: their count, then each entry
/// ([`read_settings`]); a count the bytes left cannot hold is refused before anything is
/// allocated. Versions 2 to 4 read them alike.
fn read_settings_list(c: &mut Cursor<'_>, version: u16) -> Result<Vec<Settings>, String> {
    let s = c.uleb()?;
    if s.saturating_mul(SETTINGS_MIN_BYTES) > c.remaining() as u64 {
        return Err(format!(
            "index claims {s} settings but has {} bytes left",
            c.remaining()
        ));
    }
    let mut settings = Vec::with_capacity(s as usize);
    for _ in 0..s {
        settings.push(read_settings(c, version)?);
    }
    Ok(settings)
}

/// The lengths of an index's `count` records, each after the first (the header record,
/// one byte at least) taking at least `each` bytes of the index: a count of none, or one
/// the bytes left cannot hold, is refused before anything is allocated.
fn read_record_lens(c: &mut Cursor<'_>, count: u64, each: u64) -> Result<Vec<u64>, String> {
    if count == 0 {
        return Err("index lists no records".into());
    }
    if count.saturating_mul(each) - (each - 1) > c.remaining() as u64 {
        return Err(format!(
            "index claims {count} records but has {} bytes left",
            c.remaining()
        ));
    }
    let n = count as usize;
    let mut record_lens = Vec::with_capacity(n);
    for _ in 0..n {
        record_lens.push(c.uleb()?);
    }
    Ok(record_lens)
}

/// Fewest bytes one settings entry of an index takes (three one-byte integers, the
/// prior kind and its 8-byte digest): bounds a count read from an index before anything
/// is allocated.
pub const SETTINGS_MIN_BYTES: u64 = 12;

/// Appends one settings entry of the index of a format-`version` archive ([`Settings`]):
/// `uleb` budget, `uleb` depth limit, `uleb` node limit, `u8` prior kind, `u64` prior
/// digest; from format 4 on preceded by the `uleb` length in bytes of the fields and
/// followed by a `u8` level ([`crate::synth::Level::number`], 0 for none), so that fields
/// added at their end later leave earlier entries readable. The one function that writes
/// an entry ([`read_settings`] reads it).
pub fn write_settings(out: &mut Vec<u8>, s: &Settings, version: u16) {
    let mut f = Vec::new();
    f.put_uleb(s.budget);
    f.put_uleb(s.max_depth);
    f.put_uleb(s.max_nodes);
    f.push(s.prior as u8);
    f.extend_from_slice(&s.prior_digest.to_le_bytes());
    if version >= 4 {
        f.push(s.level.map_or(0, crate::synth::Level::number));
        out.put_uleb(f.len() as u64);
    }
    out.extend_from_slice(&f);
}

/// Reads one settings entry of the index of a format-`version` archive, as
/// [`write_settings`] writes it. In format 4 the entry's fields are read inside its
/// length; a field added at their end (the level) is read when the entry is long enough
/// to hold it and takes its default (`None`) otherwise, and bytes past the fields this
/// build knows are refused.
///
/// # Errors
/// A sentence if the entry is cut short, names an unknown prior kind or level, or
/// (format 4) has bytes left after its fields.
pub fn read_settings(c: &mut Cursor<'_>, version: u16) -> Result<Settings, String> {
    if version >= 4 {
        let len = c.uleb()?;
        let mut e = Cursor::new(c.take(len)?, "settings entry");
        let mut s = settings_fields(&mut e)?;
        if e.remaining() > 0 {
            let n = e.u8()?;
            s.level = match n {
                0 => None,
                n => Some(
                    crate::synth::Level::ALL
                        .into_iter()
                        .find(|l| l.number() == n)
                        .ok_or_else(|| format!("unknown level {n}"))?,
                ),
            };
        }
        e.finish()?;
        return Ok(s);
    }
    settings_fields(c)
}

fn settings_fields(c: &mut Cursor<'_>) -> Result<Settings, String> {
    let budget = c.uleb()?;
    let max_depth = c.uleb()?;
    let max_nodes = c.uleb()?;
    let kind = c.u8()?;
    let prior = PriorKind::from_u8(kind).ok_or_else(|| format!("unknown prior kind {kind}"))?;
    let prior_digest = c.u64()?;
    Ok(Settings {
        budget,
        max_depth,
        max_nodes,
        prior,
        prior_digest,
        level: None,
    })
}

// ---------------------------------------------------------------------------------------
// Version 4.

/// One region of a version-4 regions record ([`KIND_REGIONS`]): the child of the
/// record's root `concat` that restores it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RegionHead {
    /// Words the region holds (the child's length).
    pub words: u64,
    /// Bytes of the child's program in the record.
    pub program_len: u64,
    /// xxh3-64 of the original bytes the region restores.
    pub checksum: u64,
}

/// Fewest bytes a [`RegionHead`] takes in a record.
const REGION_HEAD_MIN_BYTES: u64 = 10;

/// The fields of a version-4 header record (record 0) before its program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeaderV4 {
    /// Length of the source's JSON header in bytes (its 8-byte length field's value).
    pub header_len: u64,
    /// xxh3-64 of the JSON header.
    pub checksum: u64,
    /// Length of the original file in bytes.
    pub original_len: u64,
    /// The source's file name (no folders; empty if not known).
    pub file_name: String,
    /// The sources reference records take tensors from (empty for none).
    pub sources: Vec<SourceEntry>,
}

/// The fields of a version-4 record before its program, by kind (see the module doc).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HeadV4<'a> {
    /// Record 0.
    Header(&'a HeaderV4),
    /// A data record.
    Data {
        /// Items it covers (>= 1).
        items: u64,
        /// xxh3-64 of the bytes it restores.
        checksum: u64,
    },
    /// A data record whose program is a root `concat` of its regions, each checked
    /// alone.
    Regions {
        /// Items it covers (>= 1).
        items: u64,
        /// xxh3-64 of all the bytes it restores.
        checksum: u64,
        /// Its regions, in order (at least two).
        regions: &'a [RegionHead],
    },
    /// A copy of an earlier data record (no program).
    Copy {
        /// Items it covers (>= 1).
        items: u64,
        /// Index of the record it copies.
        of: u64,
    },
    /// A tensor coded against a source tensor ([`RecordV2::Ref`]).
    Ref {
        /// Items it covers (1).
        items: u64,
        /// xxh3-64 of the bytes it restores.
        checksum: u64,
        /// Index of the source (into [`HeaderV4::sources`]), position of its tensor,
        /// and that tensor's xxh3-64.
        source: (u64, u64, u64),
        /// How the residual combines with the source's words.
        op: RefOp,
    },
}

fn put_source(out: &mut Vec<u8>, s: &SourceEntry) {
    out.push(s.role as u8);
    out.put_uleb(s.name.len() as u64);
    out.extend_from_slice(s.name.as_bytes());
    out.put_uleb(s.original_len);
    out.extend_from_slice(&s.checksum.to_le_bytes());
}

fn read_source(c: &mut Cursor<'_>) -> Result<SourceEntry, String> {
    let role = c.u8()?;
    let role = SourceRole::from_u8(role).ok_or_else(|| format!("unknown source role {role}"))?;
    let len = c.uleb()?;
    let name = std::str::from_utf8(c.take(len)?)
        .map_err(|_| "a source's name is not UTF-8".to_string())?
        .to_string();
    let original_len = c.uleb()?;
    let checksum = c.u64()?;
    Ok(SourceEntry {
        role,
        name,
        original_len,
        checksum,
    })
}

/// Appends a version-4 record's frame and fields: everything but its program of
/// `program_len` bytes, which follows to the record's end.
pub fn record_head_v4(out: &mut Vec<u8>, head: &HeadV4<'_>, program_len: u64) {
    let mut f = Vec::new();
    let kind = match head {
        HeadV4::Header(h) => {
            f.put_uleb(h.header_len);
            f.extend_from_slice(&h.checksum.to_le_bytes());
            f.put_uleb(h.original_len);
            f.put_uleb(h.file_name.len() as u64);
            f.extend_from_slice(h.file_name.as_bytes());
            f.put_uleb(h.sources.len() as u64);
            for s in &h.sources {
                put_source(&mut f, s);
            }
            KIND_HEADER
        }
        HeadV4::Data { items, checksum } => {
            f.put_uleb(*items);
            f.extend_from_slice(&checksum.to_le_bytes());
            KIND_DATA
        }
        HeadV4::Regions {
            items,
            checksum,
            regions,
        } => {
            f.put_uleb(*items);
            f.extend_from_slice(&checksum.to_le_bytes());
            f.put_uleb(regions.len() as u64);
            for r in *regions {
                f.put_uleb(r.words);
                f.put_uleb(r.program_len);
                f.extend_from_slice(&r.checksum.to_le_bytes());
            }
            KIND_REGIONS
        }
        HeadV4::Copy { items, of } => {
            f.put_uleb(*items);
            f.put_uleb(*of);
            KIND_COPY
        }
        HeadV4::Ref {
            items,
            checksum,
            source: (source, tensor, source_checksum),
            op,
        } => {
            f.put_uleb(*items);
            f.extend_from_slice(&checksum.to_le_bytes());
            f.put_uleb(*source);
            f.put_uleb(*tensor);
            f.extend_from_slice(&source_checksum.to_le_bytes());
            f.push(*op as u8);
            KIND_REF
        }
    };
    out.push(RECORD_MARKER | kind);
    out.put_uleb(f.len() as u64 + program_len);
    out.extend_from_slice(&f);
}

/// A version-4 record's frame, read from its first bytes: its kind and its length in
/// bytes (from its first byte to its last).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameV4 {
    /// Its kind ([`KIND_HEADER`], [`KIND_DATA`], [`KIND_COPY`], [`KIND_REF`],
    /// [`KIND_REGIONS`]).
    pub kind: u8,
    /// Its length in bytes, frame included.
    pub len: u64,
}

/// Reads the frame of the version-4 record that starts `bytes` (which may go on past
/// it): the marker and kind byte, then the `uleb` length of the rest.
///
/// # Errors
/// A sentence if the first byte is not a record marker of a known kind, or the bytes
/// end inside the frame.
pub fn read_frame_v4(bytes: &[u8]) -> Result<FrameV4, String> {
    let mut c = Cursor::new(bytes, "record frame");
    let b = c.u8()?;
    let kind = b & 0x0f;
    if b & 0xf0 != RECORD_MARKER || kind > KIND_REGIONS {
        return Err(format!(
            "byte {b:#04x} is not a record marker (0xb0 to 0xb4)"
        ));
    }
    let rest = c.uleb()?;
    let len = rest
        .checked_add(c.pos() as u64)
        .ok_or_else(|| format!("record length {rest} overflows"))?;
    Ok(FrameV4 { kind, len })
}

/// At most how many of the first bytes of a version-4 record whose first bytes are
/// `first` hold its frame, its fields and the first byte of its program, when that may be
/// more than a few dozen: for a regions record, whose table grows with its region count,
/// a bound from that count. `None` for any other record, or when `first` does not hold
/// the count.
pub fn head_bound_v4(first: &[u8]) -> Option<u64> {
    let frame = read_frame_v4(first).ok()?;
    if frame.kind != KIND_REGIONS {
        return None;
    }
    let mut c = Cursor::new(first, "record");
    c.u8().ok()?;
    c.uleb().ok()?;
    c.uleb().ok()?;
    c.u64().ok()?;
    let k = c.uleb().ok()?;
    // Each region: two LEB128 integers of at most 10 bytes and a checksum.
    let bound = k.saturating_mul(28).saturating_add(c.pos() as u64 + 1);
    Some(bound.min(frame.len))
}

/// A version-4 record read from exactly its bytes, without decoding its program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RecordV4 {
    /// Record 0.
    Header {
        /// Its fields.
        head: HeaderV4,
        /// Program bytes, relative to the record start.
        program: std::ops::Range<usize>,
    },
    /// Any other record.
    Other {
        /// Items it covers (>= 1).
        items: u64,
        /// What it holds ([`RecordV2::Header`] never).
        record: RecordV2,
    },
}

/// Reads one version-4 record from exactly its bytes (`bytes` is the whole record). Every
/// count is bounded by the bytes left before anything is allocated.
///
/// # Errors
/// A sentence if the frame is not a record's, its length is not the record's, or a field
/// is cut short or out of range.
pub fn read_record_v4(bytes: &[u8]) -> Result<RecordV4, String> {
    let frame = read_frame_v4(bytes)?;
    if frame.len != bytes.len() as u64 {
        return Err(format!(
            "its frame says {} bytes, the index {}",
            frame.len,
            bytes.len()
        ));
    }
    parse_record_v4(bytes, bytes.len())
}

/// Reads the frame and fields of a version-4 record of which only the first bytes,
/// `present`, are at hand (an archive cut inside it): what [`read_record_v4`] reads of
/// the whole record, its program range running to the record's end as its frame gives
/// it, past `present`.
///
/// # Errors
/// As [`read_record_v4`]; also when its fields are not all in `present`, or `present`
/// holds the whole record.
pub fn read_cut_record_v4(present: &[u8]) -> Result<RecordV4, String> {
    let frame = read_frame_v4(present)?;
    let total = usize::try_from(frame.len)
        .ok()
        .filter(|&t| t > present.len())
        .ok_or_else(|| format!("a record of {} bytes is not cut", frame.len))?;
    parse_record_v4(present, total)
}

/// The fields of the version-4 record of `total` bytes whose first bytes are `bytes`
/// (all of it, or the part present), its program to byte `total`.
fn parse_record_v4(bytes: &[u8], total: usize) -> Result<RecordV4, String> {
    let frame = read_frame_v4(bytes)?;
    let mut c = Cursor::new(bytes, "record");
    c.u8()?;
    c.uleb()?;
    let rest = |c: &Cursor<'_>| c.pos()..total;
    if frame.kind == KIND_HEADER {
        let header_len = c.uleb()?;
        let checksum = c.u64()?;
        let original_len = c.uleb()?;
        let name_len = c.uleb()?;
        let file_name = std::str::from_utf8(c.take(name_len)?)
            .map_err(|_| "the file name is not UTF-8".to_string())?
            .to_string();
        let n = c.uleb()?;
        if n.saturating_mul(11) > c.remaining() as u64 {
            return Err(format!(
                "the header record claims {n} sources but has {} bytes left",
                c.remaining()
            ));
        }
        let mut sources = Vec::with_capacity(n as usize);
        for _ in 0..n {
            sources.push(read_source(&mut c)?);
        }
        return Ok(RecordV4::Header {
            head: HeaderV4 {
                header_len,
                checksum,
                original_len,
                file_name,
                sources,
            },
            program: rest(&c),
        });
    }
    let items = c.uleb()?;
    let record = match frame.kind {
        KIND_DATA => {
            let checksum = c.u64()?;
            RecordV2::Data {
                checksum,
                program: rest(&c),
            }
        }
        KIND_REGIONS => {
            let checksum = c.u64()?;
            let k = c.uleb()?;
            if k < 2 || k.saturating_mul(REGION_HEAD_MIN_BYTES) > c.remaining() as u64 {
                return Err(format!(
                    "a regions record claims {k} regions with {} bytes left",
                    c.remaining()
                ));
            }
            let mut regions = Vec::with_capacity(k as usize);
            let mut total = 0u64;
            for _ in 0..k {
                let words = c.uleb()?;
                let program_len = c.uleb()?;
                let checksum = c.u64()?;
                total = total.saturating_add(program_len);
                regions.push(RegionHead {
                    words,
                    program_len,
                    checksum,
                });
            }
            let program = rest(&c);
            // The regions' programs are the children of the root `concat`, at its end.
            if total >= program.len() as u64 {
                return Err(format!(
                    "its regions' programs take {total} bytes of a program of {}",
                    program.len()
                ));
            }
            RecordV2::Regions {
                checksum,
                regions,
                program,
            }
        }
        KIND_COPY => {
            let of = c.uleb()?;
            if c.pos() != total {
                return Err(format!(
                    "a copy record has {} unexpected bytes",
                    total.saturating_sub(c.pos())
                ));
            }
            RecordV2::Copy { of }
        }
        KIND_REF => {
            let checksum = c.u64()?;
            let source = c.uleb()?;
            let tensor = c.uleb()?;
            let source_checksum = c.u64()?;
            let op = c.u8()?;
            let op = RefOp::from_u8(op).ok_or_else(|| format!("unknown reference op {op}"))?;
            RecordV2::Ref {
                checksum,
                source,
                tensor,
                source_checksum,
                op,
                program: rest(&c),
            }
        }
        k => return Err(format!("unknown record kind {k}")),
    };
    Ok(RecordV4::Other { items, record })
}

/// The index of a version-4 archive (the original length, file name and sources are in
/// the header record, [`HeaderV4`]; what each record covers, in its frame).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexV4 {
    /// xxh3-64 of the whole original file.
    pub file_checksum: u64,
    /// xxh3-64 of the archive's record bytes (from byte 16 to the index).
    pub records_checksum: u64,
    /// The search settings the records refer to.
    pub settings: Vec<Settings>,
    /// Length in bytes of every record, in order (record 0 is the header record).
    pub record_lens: Vec<u64>,
    /// For records `1..`: which settings built it (an index into `settings`).
    pub record_settings: Vec<u64>,
}

/// Appends the bytes of a version-4 index.
///
/// # Panics
/// If `index.record_settings` does not have one entry per record after the first.
pub fn write_index_v4(out: &mut Vec<u8>, index: &IndexV4) {
    assert_eq!(index.record_settings.len() + 1, index.record_lens.len());
    out.put_uleb(index.record_lens.len() as u64);
    out.extend_from_slice(&index.file_checksum.to_le_bytes());
    out.extend_from_slice(&index.records_checksum.to_le_bytes());
    out.put_uleb(index.settings.len() as u64);
    for s in &index.settings {
        write_settings(out, s, 4);
    }
    for &l in &index.record_lens {
        out.put_uleb(l);
    }
    for &s in &index.record_settings {
        out.put_uleb(s);
    }
}

/// Reads a version-4 index from exactly its bytes. Every count is bounded by the bytes
/// left before anything is allocated.
///
/// # Errors
/// A sentence if it is cut short, has bytes left over, or a count exceeds its bytes.
pub fn read_index_v4(bytes: &[u8]) -> Result<IndexV4, String> {
    let mut c = Cursor::new(bytes, "index");
    let count = c.uleb()?;
    let file_checksum = c.u64()?;
    let records_checksum = c.u64()?;
    let settings = read_settings_list(&mut c, 4)?;
    // Each record takes at least two bytes (its length, its settings), the header
    // record one.
    let record_lens = read_record_lens(&mut c, count, 2)?;
    let n = record_lens.len();
    let mut record_settings = Vec::with_capacity(n - 1);
    for _ in 1..n {
        record_settings.push(c.uleb()?);
    }
    c.finish()?;
    Ok(IndexV4 {
        file_checksum,
        records_checksum,
        settings,
        record_lens,
        record_settings,
    })
}

/// Fields of a version-1 tensor record other than its program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorMeta {
    /// The tensor's name.
    pub name: String,
    /// Its position among the header's tensor entries.
    pub header_index: u64,
    /// Its dtype.
    pub dtype: Dtype,
    /// Its shape.
    pub shape: Vec<u64>,
    /// Start of its bytes in the data region.
    pub begin: u64,
    /// End (exclusive).
    pub end: u64,
    /// xxh3-64 of its original bytes.
    pub checksum: u64,
}

/// Appends a version-1 header record.
pub fn write_header_record(out: &mut Vec<u8>, header_len: u64, checksum: u64, program: &[u8]) {
    header_record_head(out, header_len, checksum, program.len() as u64);
    out.extend_from_slice(program);
}

/// Appends everything of a header record but its program of `program_len` bytes.
pub fn header_record_head(out: &mut Vec<u8>, header_len: u64, checksum: u64, program_len: u64) {
    out.push(KIND_HEADER);
    out.put_uleb(header_len);
    out.extend_from_slice(&checksum.to_le_bytes());
    out.put_uleb(program_len);
}

/// Appends a version-1 tensor record.
pub fn write_tensor_record(out: &mut Vec<u8>, meta: &TensorMeta, program: &[u8]) {
    tensor_record_head(out, meta, program.len() as u64);
    out.extend_from_slice(program);
}

/// Appends everything of a tensor record but its program of `program_len` bytes.
pub fn tensor_record_head(out: &mut Vec<u8>, meta: &TensorMeta, program_len: u64) {
    out.push(KIND_TENSOR);
    out.put_uleb(meta.name.len() as u64);
    out.extend_from_slice(meta.name.as_bytes());
    out.put_uleb(meta.header_index);
    out.push(meta.dtype.code());
    out.put_uleb(meta.shape.len() as u64);
    for &d in &meta.shape {
        out.put_uleb(d);
    }
    out.put_uleb(meta.begin);
    out.put_uleb(meta.end);
    out.extend_from_slice(&meta.checksum.to_le_bytes());
    out.put_uleb(program_len);
}

/// Appends a version-1 gap record.
pub fn write_gap_record(out: &mut Vec<u8>, begin: u64, end: u64, checksum: u64, program: &[u8]) {
    gap_record_head(out, begin, end, checksum, program.len() as u64);
    out.extend_from_slice(program);
}

/// Appends everything of a gap record but its program of `program_len` bytes.
pub fn gap_record_head(out: &mut Vec<u8>, begin: u64, end: u64, checksum: u64, program_len: u64) {
    out.push(KIND_GAP);
    out.put_uleb(begin);
    out.put_uleb(end);
    out.extend_from_slice(&checksum.to_le_bytes());
    out.put_uleb(program_len);
}

/// The index of a version-1 archive: what a reader needs to find every record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Index {
    /// Number of tensor records.
    pub tensor_count: u64,
    /// Length of the original file in bytes.
    pub original_len: u64,
    /// xxh3-64 of the whole original file.
    pub file_checksum: u64,
    /// xxh3-64 of the archive's record bytes (from byte 16 to the index).
    pub records_checksum: u64,
    /// Length in bytes of every record, in order (record 0 is the header record).
    pub record_lens: Vec<u64>,
}

/// Appends the bytes of a version-1 index.
pub fn write_index(out: &mut Vec<u8>, index: &Index) {
    out.put_uleb(index.record_lens.len() as u64);
    out.put_uleb(index.tensor_count);
    out.put_uleb(index.original_len);
    out.extend_from_slice(&index.file_checksum.to_le_bytes());
    out.extend_from_slice(&index.records_checksum.to_le_bytes());
    for &l in &index.record_lens {
        out.put_uleb(l);
    }
}

/// The trailer for an index at `offset` of `index` bytes.
pub fn trailer(offset: u64, index: &[u8]) -> [u8; TRAILER_LEN] {
    let mut t = [0u8; TRAILER_LEN];
    t[..8].copy_from_slice(&offset.to_le_bytes());
    t[8..16].copy_from_slice(&(index.len() as u64).to_le_bytes());
    t[16..24].copy_from_slice(&crate::hash::xxh3_64(index).to_le_bytes());
    t[24..].copy_from_slice(&END_MAGIC);
    t
}

// ---------------------------------------------------------------------------------------
// Reading. Every function here takes exactly the bytes of one structure and fails with a
// sentence (turned into `ArchiveError::Corrupt` by the reader) instead of panicking.

/// A bounds-checked reader over one structure's bytes.
pub struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
    what: &'static str,
}

impl<'a> Cursor<'a> {
    /// A cursor over `bytes`; `what` names the structure in error messages.
    pub fn new(bytes: &'a [u8], what: &'static str) -> Cursor<'a> {
        Cursor {
            bytes,
            pos: 0,
            what,
        }
    }

    /// Bytes consumed so far.
    pub fn pos(&self) -> usize {
        self.pos
    }

    /// Bytes left.
    pub fn remaining(&self) -> usize {
        self.bytes.len() - self.pos
    }

    fn truncated(&self, needed: u64) -> String {
        format!(
            "{} truncated at byte {}: needed {needed} more bytes, {} left",
            self.what,
            self.pos,
            self.remaining()
        )
    }

    /// One byte.
    pub fn u8(&mut self) -> Result<u8, String> {
        let b = *self.bytes.get(self.pos).ok_or_else(|| self.truncated(1))?;
        self.pos += 1;
        Ok(b)
    }

    /// A little-endian `u64`.
    pub fn u64(&mut self) -> Result<u64, String> {
        let s = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(s);
        Ok(u64::from_le_bytes(a))
    }

    /// An unsigned LEB128 integer of at most 64 bits.
    pub fn uleb(&mut self) -> Result<u64, String> {
        let start = self.pos;
        let mut v: u64 = 0;
        for i in 0..10 {
            let b = self.u8()?;
            if i == 9 && b > 1 {
                break;
            }
            v |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(format!(
            "{}: integer at byte {start} overflows 64 bits",
            self.what
        ))
    }

    /// A LEB128 integer that must fit in `usize`.
    pub fn uleb_usize(&mut self) -> Result<usize, String> {
        let start = self.pos;
        let v = self.uleb()?;
        usize::try_from(v)
            .map_err(|_| format!("{}: value {v} at byte {start} too large", self.what))
    }

    /// The next `n` bytes.
    pub fn take(&mut self, n: u64) -> Result<&'a [u8], String> {
        if n > self.remaining() as u64 {
            return Err(self.truncated(n));
        }
        let s = &self.bytes[self.pos..self.pos + n as usize];
        self.pos += n as usize;
        Ok(s)
    }

    /// Fails unless every byte was consumed.
    pub fn finish(&self) -> Result<(), String> {
        if self.remaining() == 0 {
            Ok(())
        } else {
            Err(format!(
                "{} has {} unexpected bytes after byte {}",
                self.what,
                self.remaining(),
                self.pos
            ))
        }
    }
}

/// A version-1 record read from its bytes, without decoding its program. `program` is the byte
/// range of the program inside the record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Record {
    /// The source header.
    Header {
        /// Length of the JSON header in bytes.
        header_len: u64,
        /// xxh3-64 of the JSON header.
        checksum: u64,
        /// Program bytes, relative to the record start.
        program: std::ops::Range<usize>,
    },
    /// A tensor.
    Tensor {
        /// Everything but the program.
        meta: TensorMeta,
        /// Program bytes, relative to the record start.
        program: std::ops::Range<usize>,
    },
    /// Bytes no tensor owns.
    Gap {
        /// Start in the data region.
        begin: u64,
        /// End (exclusive).
        end: u64,
        /// xxh3-64 of the bytes.
        checksum: u64,
        /// Program bytes, relative to the record start.
        program: std::ops::Range<usize>,
    },
}

/// Reads one version-1 record from exactly its bytes. Allocates at most in proportion to
/// `bytes.len()`.
pub fn read_record(bytes: &[u8]) -> Result<Record, String> {
    let mut c = Cursor::new(bytes, "record");
    let kind = c.u8()?;
    let rec = match kind {
        KIND_HEADER => {
            let header_len = c.uleb()?;
            let checksum = c.u64()?;
            let program = read_program_range(&mut c)?;
            Record::Header {
                header_len,
                checksum,
                program,
            }
        }
        KIND_TENSOR => {
            let name_len = c.uleb()?;
            let name = std::str::from_utf8(c.take(name_len)?)
                .map_err(|_| "tensor name is not UTF-8".to_string())?
                .to_string();
            let header_index = c.uleb()?;
            let code = c.u8()?;
            let dtype =
                Dtype::from_code(code).ok_or_else(|| format!("unknown dtype code {code}"))?;
            let rank = c.uleb()?;
            // Each dimension takes at least one byte: bound the allocation by the record.
            if rank > c.remaining() as u64 {
                return Err(format!(
                    "rank {rank} exceeds the {} bytes left in the record",
                    c.remaining()
                ));
            }
            let mut shape = Vec::with_capacity(rank as usize);
            for _ in 0..rank {
                shape.push(c.uleb()?);
            }
            let begin = c.uleb()?;
            let end = c.uleb()?;
            let checksum = c.u64()?;
            let program = read_program_range(&mut c)?;
            Record::Tensor {
                meta: TensorMeta {
                    name,
                    header_index,
                    dtype,
                    shape,
                    begin,
                    end,
                    checksum,
                },
                program,
            }
        }
        KIND_GAP => {
            let begin = c.uleb()?;
            let end = c.uleb()?;
            let checksum = c.u64()?;
            let program = read_program_range(&mut c)?;
            Record::Gap {
                begin,
                end,
                checksum,
                program,
            }
        }
        k => return Err(format!("unknown record kind {k}")),
    };
    c.finish()?;
    Ok(rec)
}

fn read_program_range(c: &mut Cursor<'_>) -> Result<std::ops::Range<usize>, String> {
    let len = c.uleb()?;
    let start = c.pos();
    c.take(len)?;
    Ok(start..c.pos())
}

/// Reads a version-1 index from exactly its bytes. The record-length vector is bounded by the
/// index length (each length takes at least one byte).
pub fn read_index(bytes: &[u8]) -> Result<Index, String> {
    let mut c = Cursor::new(bytes, "index");
    let count = c.uleb()?;
    let tensor_count = c.uleb()?;
    let original_len = c.uleb()?;
    let file_checksum = c.u64()?;
    let records_checksum = c.u64()?;
    if count == 0 {
        return Err("index lists no records".into());
    }
    if count > c.remaining() as u64 {
        return Err(format!(
            "index claims {count} records but has {} bytes left",
            c.remaining()
        ));
    }
    let mut record_lens = Vec::with_capacity(count as usize);
    for _ in 0..count {
        record_lens.push(c.uleb()?);
    }
    c.finish()?;
    Ok(Index {
        tensor_count,
        original_len,
        file_checksum,
        records_checksum,
        record_lens,
    })
}

/// The root operator's name from the first byte of a program, without decoding it
/// ([`crate::dsl::wire::root_op_name`]).
pub fn root_op_name(program: &[u8]) -> &'static str {
    crate::dsl::wire::root_op_name(program)
}

#[cfg(test)]
mod tests;
