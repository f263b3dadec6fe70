//! The fixed layout: magic numbers, format versions, record kinds, the 16-byte file
//! header and the 32-byte trailer.

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

/// The trailer for an index at `offset` of `index` bytes.
pub fn trailer(offset: u64, index: &[u8]) -> [u8; TRAILER_LEN] {
    let mut t = [0u8; TRAILER_LEN];
    t[..8].copy_from_slice(&offset.to_le_bytes());
    t[8..16].copy_from_slice(&(index.len() as u64).to_le_bytes());
    t[16..24].copy_from_slice(&crate::hash::xxh3_64(index).to_le_bytes());
    t[24..].copy_from_slice(&END_MAGIC);
    t
}

/// The root operator's name from the first byte of a program, without decoding it
/// ([`crate::dsl::wire::root_op_name`]).
pub fn root_op_name(program: &[u8]) -> &'static str {
    crate::dsl::wire::root_op_name(program)
}
