//! Format 1: header, tensor and gap records, each tensor record carrying its own name,
//! dtype, shape and offsets, and an index of record lengths. Read so that old archives stay
//! readable, and written only when such an archive is rewritten ([`crate::archive::rewrite`]).

use super::cursor::Cursor;
use super::layout::{KIND_GAP, KIND_HEADER, KIND_TENSOR};
use crate::dsl::wire::Sink;
use crate::tensor::Dtype;

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

pub(super) fn read_program_range(c: &mut Cursor<'_>) -> Result<std::ops::Range<usize>, String> {
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
