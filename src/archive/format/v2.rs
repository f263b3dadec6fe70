//! Formats 2 and 3: records of one or more items (the header record holds the source
//! header, so records store no names or shapes), and an index with the original length,
//! file name and settings (and, in 3, sources). What a record holds ([`RecordV2`],
//! [`RegionHead`]) is format 4's too.

use super::cursor::Cursor;
use super::layout::{KIND_COPY, KIND_DATA, KIND_HEADER, KIND_REF};
use super::settings::{read_settings_list, write_settings, Settings};
use super::sources::{read_source, RefOp, SourceEntry};
use crate::dsl::wire::Sink;
use crate::dsl::Ty;

/// One region of a version-4 regions record ([`KIND_REGIONS`](crate::archive::format::KIND_REGIONS)): the child of the
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
pub(super) const REGION_HEAD_MIN_BYTES: u64 = 10;

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

/// The fields of a reference record after its kind (formats 3 and 4), `c` at its
/// checksum: the checksum, source, tensor, source tensor's checksum and op; its program
/// runs to byte `end` of the record.
pub(super) fn read_ref(c: &mut Cursor<'_>, end: usize) -> Result<RecordV2, String> {
    let checksum = c.u64()?;
    let source = c.uleb()?;
    let tensor = c.uleb()?;
    let source_checksum = c.u64()?;
    let op = c.u8()?;
    let op = RefOp::from_u8(op).ok_or_else(|| format!("unknown reference op {op}"))?;
    Ok(RecordV2::Ref {
        checksum,
        source,
        tensor,
        source_checksum,
        op,
        program: c.pos()..end,
    })
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
        KIND_REF if version >= 3 => read_ref(&mut c, bytes.len())?,
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
            sources.push(read_source(&mut c)?);
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

/// The lengths of an index's `count` records, each after the first (the header record,
/// one byte at least) taking at least `each` bytes of the index: a count of none, or one
/// the bytes left cannot hold, is refused before anything is allocated.
pub(super) fn read_record_lens(
    c: &mut Cursor<'_>,
    count: u64,
    each: u64,
) -> Result<Vec<u64>, String> {
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
