//! Validating an archive's structure when it is opened (file header, trailer, index and
//! every record's fields) without decoding a program: the archive is hostile, every
//! length, count and offset is checked against the bytes present before it is used.

use super::entries::{GapEntry, Item, TensorEntry};
use super::items::{corrupt, damaged_record, Assign, Head, RecIn, Structure};
use crate::archive::format::{self, Record, RecordV2, RecordV4, Settings};
use crate::dsl::{execute, read_program, wire_version_of, Node, Ty};
use crate::error::ArchiveError;
use crate::hash::xxh3_64;
use crate::tensor::words_into_le_bytes;
use std::collections::HashMap;
use std::ops::Range;

/// Bytes before the end of an archive searched for its trailer when the file does not end
/// with a sound one ([`appended_after`]): enough for a copy of a small archive appended
/// to itself, little time on an error path.
pub(super) const APPENDED_SEARCH_BYTES: usize = 64 << 20;

/// Bits in which the last 8 bytes may differ from [`format::END_MAGIC`] and still be
/// called a damaged end marker rather than a missing one (8 random bytes differ from it
/// in 32 bits on average; a flipped or mistyped byte in up to 8).
const END_MARKER_NEAR_BITS: u32 = 8;

/// What is wrong with a file of `len` bytes holding an archive that ends at byte `end`.
pub(super) fn appended(end: usize, len: usize) -> String {
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
pub(super) fn appended_after(bytes: &[u8]) -> Option<usize> {
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

/// What a file that is not an archive looks like, for the error message.
pub(super) fn describe_foreign(bytes: &[u8]) -> String {
    if bytes.is_empty() {
        return "the file is empty (0 bytes)".to_string();
    }
    if bytes.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        return "it is a zstd frame".to_string();
    }
    if crate::archive::safetensors::looks_like_safetensors(bytes, bytes.len() as u64) {
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
pub(super) fn hex_bytes(bytes: &[u8]) -> String {
    let shown: Vec<String> = bytes.iter().map(|b| format!("{b:02x}")).collect();
    shown.join(" ")
}

pub(super) fn parse_structure(bytes: &[u8]) -> Result<Structure, ArchiveError> {
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
    let max_header = crate::archive::safetensors::MAX_HEADER_LEN;
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
        head: Head {
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
            indexless: None,
        },
        tensors,
        gaps,
        groups: Vec::new(),
        items,
        regions: HashMap::new(),
        lost: Vec::new(),
    })
}

/// The byte ranges of records of `lens` bytes each, which must tile `[16, index_offset)`.
pub(super) fn record_ranges(
    lens: &[u64],
    index_offset: u64,
) -> Result<Vec<Range<usize>>, ArchiveError> {
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
pub(super) fn within_wire(node: Node, wire: u16) -> std::result::Result<Node, String> {
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
pub(super) fn decode_header_v2(
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
pub(super) fn parse_v2(
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
pub(super) fn settings_of(
    settings: &[Settings],
    r: usize,
    id: u64,
) -> Result<Settings, ArchiveError> {
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
pub(super) fn header_layout(
    bytes: &[u8],
    program: &Range<usize>,
    header_len: u64,
    checksum: u64,
    original_len: u64,
    wire: u16,
) -> Result<crate::archive::safetensors::ParsedHeader, ArchiveError> {
    let max_header = crate::archive::safetensors::MAX_HEADER_LEN;
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
    crate::archive::safetensors::parse_header(&header, data_len).map_err(|e| {
        damaged_record(format!(
            "record 0 (the header): the restored header is not a valid .safetensors header: {e}"
        ))
    })
}

/// The rest of [`parse_structure`] for format version 4 (see [`format`]): as version 2,
/// with the original length, file name and sources in the header record, and what each
/// record covers in its frame.
pub(super) fn parse_v4(
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
pub(super) fn file_header_v4(bytes: &[u8]) -> Result<u16, ArchiveError> {
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
pub(super) fn check_header_v4(head: &[u8]) -> Result<(), ArchiveError> {
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
pub(super) fn parse_walk(bytes: &[u8], why: &str) -> Result<Structure, ArchiveError> {
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
