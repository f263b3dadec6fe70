//! Archives stay readable: every committed archive of an earlier format version
//! (`tests/data/v1`, written by the last build that wrote it) restores its source byte
//! for byte, verifies, and decodes tensor by tensor.

use brevis::archive::{no_progress, verify, Archive};
use std::path::{Path, PathBuf};

const DATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/v1");
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

/// The committed version-1 archives with their sources.
fn fixtures() -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(DATA).expect("read tests/data/v1") {
        let path = e.expect("entry").path();
        if path.extension().is_none_or(|x| x != "brv") {
            continue;
        }
        let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
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

#[test]
fn version_1_archives_restore_byte_for_byte() {
    let all = fixtures();
    assert_eq!(all.len(), 10, "the committed version-1 archives");
    for (path, source) in &all {
        let name = path.display();
        let a = Archive::open(path).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(a.version(), 1, "{name}");
        assert_eq!(a.file_name(), None, "{name}: version 1 kept no file name");
        assert!(a.settings().is_empty(), "{name}");
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
            assert_eq!(t.group, None);
            assert_eq!(t.archive_bytes(), t.record.len() as u64);
        }
    }
}

/// The multi-region fixture keeps its `concat` of two regions, read by the units of the
/// streaming decoder.
#[test]
fn version_1_concat_of_regions_is_read() {
    let a = Archive::open(&Path::new(DATA).join("regions.brv")).unwrap();
    let p = a.program(0).unwrap();
    assert_eq!(p.op_name(), "concat");
    assert_eq!(p.children().len(), 2);
    assert_eq!(p.ty().len, (1 << 20) + (1 << 18) + 5);
}
