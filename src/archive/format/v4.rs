//! Format 4, the one written today: records that start with a frame (marker and kind,
//! length, item count) so they can be found without the index, the original length, file
//! name and sources in the header record, regions records, and an index of record
//! lengths and settings.

use super::cursor::Cursor;
use super::layout::{KIND_COPY, KIND_DATA, KIND_HEADER, KIND_REF, KIND_REGIONS, RECORD_MARKER};
use super::settings::{read_settings_list, write_settings, Settings};
use super::sources::{put_source, read_source, RefOp, SourceEntry};
use super::v2::{read_record_lens, read_ref, RecordV2, RegionHead, REGION_HEAD_MIN_BYTES};
use crate::dsl::wire::Sink;

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
pub(super) fn parse_record_v4(bytes: &[u8], total: usize) -> Result<RecordV4, String> {
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
        KIND_REF => read_ref(&mut c, total)?,
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
