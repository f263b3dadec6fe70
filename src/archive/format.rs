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

mod cursor;
mod layout;
mod settings;
mod sources;
mod v1;
mod v2;
mod v4;

pub use cursor::Cursor;
pub use layout::{
    file_header, file_header_of, file_header_v1, file_header_version, header_check, root_op_name,
    trailer, END_MAGIC, FILE_HEADER_LEN, FIRST_VERSION, FORMAT_VERSION, KIND_COPY, KIND_DATA,
    KIND_GAP, KIND_HEADER, KIND_REF, KIND_REGIONS, KIND_TENSOR, MAGIC, PLAIN_VERSION,
    RECORD_MARKER, TRAILER_LEN,
};
pub use settings::{read_settings, write_settings, PriorKind, Settings, SETTINGS_MIN_BYTES};
pub use sources::{RefOp, SourceEntry, SourceRole};
pub use v1::{
    gap_record_head, header_record_head, read_index, read_record, tensor_record_head,
    write_gap_record, write_header_record, write_index, write_tensor_record, Index, Record,
    TensorMeta,
};
pub use v2::{
    copy_allowed, copy_record, data_record_head, header_record_head_v2, read_index_v2,
    read_record_v2, ref_record_head, write_index_v2, IndexV2, RecordV2, RegionHead,
};
pub use v4::{
    head_bound_v4, read_cut_record_v4, read_frame_v4, read_index_v4, read_record_v4,
    record_head_v4, write_index_v4, FrameV4, HeadV4, HeaderV4, IndexV4, RecordV4,
};

#[cfg(test)]
mod tests;
