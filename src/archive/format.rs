//! The `.brv` archive layout (DESIGN §7; paper §3.4), both directions.
//!
//! An archive restores its source `.safetensors` file byte for byte. It is a file header,
//! a run of independent records, an index and a trailer:
//!
//! ```text
//! offset 0     file header      16 bytes
//! offset 16    record 0         the source header (length field and JSON text)
//!              record 1..R-1    one per region of the data region, in offset order
//! index_offset index            record lengths, counts, whole-file checksum
//! end - 32     trailer          32 bytes: where the index is, its checksum, end magic
//! ```
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
//! | 8..10 | format version `u16` = [`FORMAT_VERSION`] |
//! | 10..12 | program wire version `u16` = [`crate::dsl::wire::WIRE_VERSION`] |
//! | 12..16 | flags `u32`, must be 0 |
//!
//! **Records** follow each other without padding from byte 16. Each starts with a kind
//! byte and ends exactly where its program ends:
//!
//! | kind | fields after the kind byte |
//! | --- | --- |
//! | `0` header | `uleb` header length `N` (the value of the source's 8-byte length field); `u64` checksum of the `N` JSON bytes; `uleb` program length; program of type `u8[N]` |
//! | `1` tensor | `uleb` name length, name (UTF-8); `uleb` position among the header's tensor entries; `u8` dtype code ([`crate::tensor::Dtype::code`]); `uleb` rank, `uleb` per dimension; `uleb` begin, `uleb` end (its `data_offsets`); `u64` checksum of its bytes; `uleb` program length; program |
//! | `2` gap | `uleb` begin, `uleb` end (bytes of the data region no tensor owns, never empty); `u64` checksum; `uleb` program length; program of type `u8[end - begin]` |
//!
//! A tensor of dtype `d` and byte length `L` has a program of type
//! `b[L / (b / 8)]` with `b = d.word_bits()` (DESIGN §2): its bytes read as little-endian
//! `b`-bit words. Programs are in the wire format of [`crate::dsl::wire`]; a zero-byte
//! tensor has the program `Lit` of 0 words.
//!
//! Record 0 is the header record. The others come in data-offset order: the non-empty
//! ones (tensors and gaps) tile the data region `[0, D)` exactly, in order; an empty
//! tensor only needs `begin == end <= D`. The original file is the 8-byte length field,
//! the decoded header, then every record's decoded bytes in record order.
//!
//! **Index** (at `index_offset`, `index_len` bytes): `uleb` record count `R` (>= 1);
//! `uleb` tensor count; `uleb` original file length in bytes; `u64` checksum of the whole
//! original file; `u64` xxh3-64 of the archive bytes `[16, index_offset)` (all records,
//! checked by verification, not on open); then `R` times `uleb` record length in bytes. Record `i` starts at
//! `16 + sum of the lengths before it`; the lengths must add up to `index_offset - 16`.
//!
//! **Trailer** (last 32 bytes): `u64` index offset, `u64` index length, `u64` xxh3-64 of
//! the index bytes, end magic [`END_MAGIC`] = `"BRVINDEX"`. The index must end where the
//! trailer starts.
//!
//! Every record can be decoded alone, given its offset and length from the index. The
//! reader checks every length, count and offset against the bytes present before using
//! it; see [`crate::archive::reader`].
//!
//! **Large tensors** of more than [`crate::archive::writer::REGION_WORDS`] words are
//! stored as an explicit `Concat` whose children cover consecutive regions of that many
//! words (the last one shorter), each synthesized alone; the record layout is unchanged.
//!
//! **Checkpoint folders** (a sharded checkpoint with `model.safetensors.index.json`) are
//! not one archive but a folder of archives: one `.brv` per `.safetensors` shard, every
//! other file copied verbatim, and a JSON manifest `brevis-folder.json`; see
//! [`crate::archive::folder`] for the layout. One archive per shard keeps random access
//! (open only the shard holding a tensor) and lets shards be written, read and verified
//! independently.

use crate::dsl::wire::Sink;
use crate::tensor::Dtype;

/// Magic at the start of every archive.
pub const MAGIC: [u8; 8] = *b"BREVIS\0\0";

/// Magic at the very end of every archive.
pub const END_MAGIC: [u8; 8] = *b"BRVINDEX";

/// Version of this layout.
pub const FORMAT_VERSION: u16 = 1;

/// Length of the file header in bytes.
pub const FILE_HEADER_LEN: usize = 16;

/// Length of the trailer in bytes.
pub const TRAILER_LEN: usize = 32;

/// Record kinds.
pub const KIND_HEADER: u8 = 0;
/// A tensor record.
pub const KIND_TENSOR: u8 = 1;
/// A gap record.
pub const KIND_GAP: u8 = 2;

/// The 16-byte file header for this build.
pub fn file_header() -> [u8; FILE_HEADER_LEN] {
    let mut h = [0u8; FILE_HEADER_LEN];
    h[..8].copy_from_slice(&MAGIC);
    h[8..10].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
    h[10..12].copy_from_slice(&(crate::dsl::wire::WIRE_VERSION as u16).to_le_bytes());
    h
}

/// Fields of a tensor record other than its program.
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

/// Appends a header record.
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

/// Appends a tensor record.
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

/// Appends a gap record.
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

/// The index: what a reader needs to find every record.
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

/// Appends the index bytes.
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

/// A record read from its bytes, without decoding its program. `program` is the byte
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

/// Reads one record from exactly its bytes. Allocates at most in proportion to
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

/// Reads the index from exactly its bytes. The record-length vector is bounded by the
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
/// (`lit`, `const`, `concat`, `repeat`, `map`, `scan`, `merge`, or `?`).
///
/// Mirrors the tag numbers of [`crate::dsl::wire`].
pub fn root_op_name(program: &[u8]) -> &'static str {
    match program.first().map(|t| t & 0xf0) {
        Some(0x10) => "lit",
        Some(0x20) => "const",
        Some(0x30) => "concat",
        Some(0x40) => "repeat",
        Some(0x50) => "map",
        Some(0x60) => "scan",
        Some(0x70) => "merge",
        _ => "?",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip() {
        let meta = TensorMeta {
            name: "w\u{1b}[31m".into(),
            header_index: 3,
            dtype: Dtype::BF16,
            shape: vec![2, 300],
            begin: 10,
            end: 1210,
            checksum: 0x0123_4567_89ab_cdef,
        };
        let mut v = Vec::new();
        write_tensor_record(&mut v, &meta, &[0x20, 5]);
        let r = read_record(&v).unwrap();
        assert_eq!(
            r,
            Record::Tensor {
                meta,
                program: v.len() - 2..v.len()
            }
        );
        // Every strict prefix is refused, and so is an extra byte.
        for n in 0..v.len() {
            assert!(read_record(&v[..n]).is_err(), "prefix {n}");
        }
        v.push(0);
        assert!(read_record(&v).is_err());

        let mut g = Vec::new();
        write_gap_record(&mut g, 4, 9, 7, &[1, 2, 3]);
        assert!(matches!(
            read_record(&g),
            Ok(Record::Gap {
                begin: 4,
                end: 9,
                checksum: 7,
                ..
            })
        ));
        let mut h = Vec::new();
        write_header_record(&mut h, 70, 8, &[]);
        assert!(matches!(
            read_record(&h),
            Ok(Record::Header {
                header_len: 70,
                checksum: 8,
                ..
            })
        ));
    }

    #[test]
    fn index_round_trips_and_bounds_counts() {
        let idx = Index {
            tensor_count: 2,
            original_len: 1 << 40,
            file_checksum: 99,
            records_checksum: 5,
            record_lens: vec![10, 300, 1 << 33],
        };
        let mut v = Vec::new();
        write_index(&mut v, &idx);
        assert_eq!(read_index(&v).unwrap(), idx);
        let mut huge = Vec::new();
        huge.put_uleb(u64::MAX);
        huge.extend_from_slice(&[0; 20]);
        assert!(read_index(&huge).is_err());
    }

    #[test]
    fn uleb_refuses_overflow() {
        let mut c = Cursor::new(&[0xff; 10], "t");
        assert!(c.uleb().is_err());
        let mut max = Vec::new();
        max.put_uleb(u64::MAX);
        assert_eq!(Cursor::new(&max, "t").uleb().unwrap(), u64::MAX);
    }
}
