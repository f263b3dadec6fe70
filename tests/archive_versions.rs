//! Archives stay readable: every committed archive of an earlier format or wire version
//! (`tests/data/v1`: format 1; `tests/data/v2`: format 2 with wire version 2; each written
//! by the last build that wrote it; `tests/data/v3`: format 3, coded against a base;
//! `tests/data/v4`: format 4, the first build that wrote it, plain and coded against a
//! base) restores its source byte for byte, verifies, and decodes tensor by tensor, and
//! its file header says the versions its folder names.

#[path = "support/finetune.rs"]
mod finetune;
#[path = "support/safetensors.rs"]
mod support;

use brevis::archive::{no_progress, verify, Archive};
use std::path::{Path, PathBuf};

const DATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data");
const SHARED: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared");

/// The source of `regions.brv`: one BF16 tensor of 1,310,725 words (two 1 Mi-word
/// regions), `0x3F80` plus a small value every 4,096 words.
fn regions_source() -> Vec<u8> {
    let n: u64 = (1 << 20) + (1 << 18) + 5;
    let header = format!(
        r#"{{"ramp":{{"dtype":"BF16","shape":[{n}],"data_offsets":[0,{}]}}}}"#,
        2 * n
    );
    let mut header = header.into_bytes();
    while header.len() % 8 != 0 {
        header.push(b' ');
    }
    let mut v = (header.len() as u64).to_le_bytes().to_vec();
    v.extend_from_slice(&header);
    for i in 0..n {
        let w: u16 = 0x3F80
            + if i % 4096 == 0 {
                (i * 7919 % 13) as u16
            } else {
                0
            };
        v.extend_from_slice(&w.to_le_bytes());
    }
    v
}

/// The committed archives of `tests/data/{folder}` with their sources.
fn fixtures(folder: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let dir = Path::new(DATA).join(folder);
    for e in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("read {}: {e}", dir.display())) {
        let path = e.expect("entry").path();
        if path.extension().is_none_or(|x| x != "brv") {
            continue;
        }
        let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
        if stem.starts_with("fracast0-f32-") {
            // Fine-tunes coded against a base: `fine_tunes_restore_with_their_base`.
            continue;
        }
        let source = if stem == "regions" {
            regions_source()
        } else if stem.starts_with('B') {
            std::fs::read(
                Path::new(SHARED)
                    .join("cases")
                    .join(format!("{stem}.safetensors")),
            )
            .expect("read the case")
        } else {
            std::fs::read(
                Path::new(SHARED)
                    .join("corpus")
                    .join(format!("{stem}.safetensors")),
            )
            .expect("read the corpus file")
        };
        out.push((path, source));
    }
    out.sort();
    out
}

/// The format version (bytes 8..10) and program wire version (bytes 10..12) in the file
/// header of the archive at `path` (`src/archive/format.rs`).
fn header_versions(path: &Path) -> (u16, u16) {
    let bytes = std::fs::read(path).expect("read the archive");
    assert_eq!(&bytes[..8], b"BREVIS\0\0", "{}: magic", path.display());
    (
        u16::from_le_bytes([bytes[8], bytes[9]]),
        u16::from_le_bytes([bytes[10], bytes[11]]),
    )
}

/// Every archive of `tests/data/{folder}` (there are `count`) has format `format` and
/// wire version `wire` in its file header, restores its source byte for byte, verifies,
/// and decodes tensor by tensor.
fn check_folder(folder: &str, count: usize, format: u16, wire: u16) {
    let all = fixtures(folder);
    assert_eq!(all.len(), count, "the committed archives of {folder}");
    for (path, source) in &all {
        let name = path.display();
        assert_eq!(header_versions(path), (format, wire), "{name}: file header");
        let a = Archive::open(path).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(a.version(), format, "{name}");
        if format == 1 {
            assert_eq!(a.file_name(), None, "{name}: version 1 kept no file name");
            assert!(a.settings().is_empty(), "{name}");
        } else {
            let stem = path.file_stem().unwrap().to_string_lossy();
            assert_eq!(
                a.file_name(),
                Some(format!("{stem}.safetensors").as_str()),
                "{name}"
            );
            assert_eq!(a.settings().len(), 1, "{name}: one settings entry");
        }
        let mut out = Vec::new();
        a.write_original(&mut out, Some(2), &no_progress, Path::new("out"))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(out == *source, "{name}: restored bytes differ");
        assert!(verify(&a, Some(1), &no_progress).unwrap().is_ok(), "{name}");
        assert!(a.header_disagreements().unwrap().is_empty(), "{name}");
        // Each tensor alone: its bytes in the source, by its offsets.
        let data = 8 + a.header_len() as usize;
        for (i, t) in a.tensors().iter().enumerate() {
            let bytes = a.decode_tensor(i).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(
                bytes,
                source[data + t.begin as usize..data + t.end as usize],
                "{name}: tensor {:?}",
                t.name
            );
            if format == 1 {
                assert_eq!(t.group, None);
                assert_eq!(t.archive_bytes(), t.record.len() as u64);
            }
        }
    }
}

#[test]
fn version_1_archives_restore_byte_for_byte() {
    check_folder("v1", 10, 1, 1);
}

#[test]
fn version_2_wire_2_archives_restore_byte_for_byte() {
    check_folder("v2", 11, 2, 2);
}

/// Format 4 (the file header under a checksum, framed records, a checksum per region),
/// as its first build wrote it.
#[test]
fn version_4_archives_restore_byte_for_byte() {
    check_folder("v4", 10, 4, 5);
}

/// Format 3: fine-tunes coded against a corpus file (`tests/data/v3/README.md`), made
/// again here from the base: each restores byte for byte with its base, and without it
/// is refused naming what to pass.
#[test]
fn version_3_archives_restore_with_their_base() {
    fine_tunes_restore_with_their_base(
        "v3",
        3,
        &[
            ("fracast0-f32-head-only.brv", "head-only", 3),
            ("fracast0-f32-tied-copy.brv", "tied-copy", 3),
            ("fracast0-f32-optimizer-steps.brv", "optimizer-steps", 5),
        ],
    );
}

/// Format 4: the same fine-tunes (`tests/data/v4/README.md`), their sources listed in
/// the header record.
#[test]
fn version_4_archives_restore_with_their_base() {
    fine_tunes_restore_with_their_base(
        "v4",
        4,
        &[
            ("fracast0-f32-head-only.brv", "head-only", 5),
            ("fracast0-f32-tied-copy.brv", "tied-copy", 5),
        ],
    );
}

/// Each `(file, fine-tune, wire)` of `tests/data/{folder}`, of format `format`, coded
/// against fracast0-f32: restores its fine-tune (`finetune::make`) byte for byte with
/// the base attached and is refused without it.
fn fine_tunes_restore_with_their_base(folder: &str, format: u16, cases: &[(&str, &str, u16)]) {
    use brevis::archive::base::BaseSet;
    use std::sync::Arc;
    let base_path = Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../shared/corpus/fracast0-f32.safetensors"
    ));
    let base = finetune::tensors_of(&std::fs::read(base_path).unwrap());
    let set = Arc::new(BaseSet::open(base_path).unwrap());
    for &(file, kind, wire) in cases {
        let tensors = finetune::make(kind, &base);
        let path = Path::new(DATA).join(folder).join(file);
        assert_eq!(
            header_versions(&path),
            (format, wire),
            "{file}: file header"
        );
        let list: Vec<(&str, &str, Vec<u64>, Vec<u8>)> = tensors
            .iter()
            .map(|(n, d, s, b)| (n.as_str(), d.as_str(), s.clone(), b.clone()))
            .collect();
        let source = support::safetensors_bytes(&list);
        let a = Archive::open(&path).unwrap();
        assert_eq!(a.version(), format);
        assert_eq!(a.sources().len(), 1, "{file}");
        assert_eq!(a.sources()[0].name, "fracast0-f32.safetensors");
        let e = a.require_sources().unwrap_err();
        assert_eq!(e.kind(), "base_missing", "{file}: {e}");
        a.attach_base(&set).unwrap();
        let mut out = Vec::new();
        a.write_original(&mut out, Some(2), &no_progress, Path::new("out"))
            .unwrap_or_else(|e| panic!("{file}: {e}"));
        assert!(out == source, "{file}: restored bytes differ");
        assert!(verify(&a, Some(1), &no_progress).unwrap().is_ok(), "{file}");
        // Wire 5's bucket literals, coded against the base words, in the large tensors.
        let buckets = (0..a.tensors().len())
            .filter(|&i| a.program(i).unwrap().to_string().contains("lit bucket"))
            .count();
        assert_eq!(
            buckets > 0,
            kind == "optimizer-steps",
            "{file}: {buckets} bucket programs"
        );
    }
}

/// The multi-region fixture keeps its `concat` of two regions, read by the units of the
/// streaming decoder; from format 4 on each region has its own checksum.
#[test]
fn concat_of_regions_is_read_in_every_version() {
    for folder in ["v1", "v2", "v4"] {
        let a = Archive::open(&Path::new(DATA).join(folder).join("regions.brv")).unwrap();
        let p = a.program(0).unwrap();
        assert_eq!(p.op_name(), "concat", "{folder}");
        assert_eq!(p.children().len(), 2, "{folder}");
        assert_eq!(p.ty().len, (1 << 20) + (1 << 18) + 5, "{folder}");
        let regions = a.tensor_regions(0);
        if folder == "v4" {
            let words: Vec<u64> = regions.iter().map(|r| r.words).collect();
            assert_eq!(words, [1 << 20, (1 << 18) + 5]);
            assert_eq!(regions[1].offset, 2 << 20);
            let src = regions_source();
            let data = src.len() - 2 * ((1 << 20) + (1 << 18) + 5);
            assert_eq!(
                regions[1].checksum,
                brevis::hash::xxh3_64(&src[data + (2 << 20)..])
            );
        } else {
            assert!(regions.is_empty(), "{folder}");
        }
    }
}

/// A committed wire-2 archive whose header record is a back reference program,
/// relabelled wire 1 in its file header (no checksum covers those two bytes), is refused
/// at open with the versions named: a reader never runs an operator newer than the
/// archive declares.
#[test]
fn a_header_program_newer_than_the_declared_wire_version_is_refused() {
    let path = Path::new(DATA).join("v2/fracast0-int8-f32.brv");
    let mut bytes = std::fs::read(&path).expect("read the committed archive");
    assert!(Archive::from_bytes(bytes.clone(), &path).is_ok());
    bytes[10..12].copy_from_slice(&1u16.to_le_bytes());
    let Err(e) = Archive::from_bytes(bytes, &path) else {
        panic!("a wire-1 label on a backref header opened");
    };
    let e = e.to_string();
    assert!(
        e.contains("the header") && e.contains("needs wire version 2, but the archive declares 1"),
        "{e}"
    );
}
