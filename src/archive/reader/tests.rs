use super::structure::*;
use super::*;
use crate::archive::safetensors::parse;
use crate::archive::writer::write_archive;
use crate::archive::{no_progress, verify, CompressOptions};
use crate::dsl::wire_version_of;

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
    let index = br#"  {"metadata": {}, "weight_map": {"a": "model-00001-of-00002.safetensors"}}"#;
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
