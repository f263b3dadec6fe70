//! Damage costs what it touches (issue 38, format 4): the file header is under a
//! checksum; one flipped byte inside a region of a large tensor zero-fills that region
//! only; an archive cut short (an interrupted download) salvages every tensor whose
//! record lies before the cut and names the others; a folder archive salvages every file,
//! naming the damage with its file, and exits 3.

mod support;

use brevis::archive::folder::Folder;
use brevis::archive::{
    compress_file, no_progress, Archive, CompressOptions, DamagedRegion, DecompressOptions,
};
use std::path::{Path, PathBuf};
use support::safetensors_bytes;
use support::text;
use support::{brevis, corpus_bytes};

/// A tensor of a test file: name, dtype, shape and bytes.
type Tensor = (String, &'static str, Vec<u64>, Vec<u8>);

/// `brevis decompress --salvage ARCHIVE -o OUT`, then `extra` (`--json`).
fn salvage_cli(archive: &Path, out: &Path, extra: &[&str]) -> std::process::Output {
    let mut args = vec![
        Path::new("decompress"),
        Path::new("--salvage"),
        archive,
        Path::new("-o"),
        out,
    ];
    args.extend(extra.iter().map(Path::new));
    brevis(args)
}

/// `src` compressed with the defaults, in `dir` (as `name.brv`).
fn compressed(dir: &Path, name: &str, src: &[u8]) -> PathBuf {
    let input = dir.join(format!("{name}.safetensors"));
    std::fs::write(&input, src).unwrap();
    let out = dir.join(format!("{name}.brv"));
    let opts = CompressOptions {
        jobs: Some(2),
        ..CompressOptions::default()
    };
    compress_file(&input, &out, &opts, &no_progress).unwrap();
    out
}

/// What salvaging `bytes` (an archive, maybe damaged or cut) restores, and the regions
/// it zero-filled; `None` when nothing can be salvaged.
fn salvage(bytes: &[u8]) -> Option<(Vec<u8>, Vec<DamagedRegion>)> {
    let a = Archive::from_bytes_for_salvage(bytes.to_vec(), "s.brv").ok()?;
    let mut out = Vec::new();
    let damaged = a
        .salvage_to(&mut out, Some(2), &no_progress, Path::new("out"))
        .ok()?;
    Some((out, damaged))
}

/// `source` with every range of `damaged` zeroed: what a salvage must write.
fn zeroed(source: &[u8], damaged: &[DamagedRegion]) -> Vec<u8> {
    let mut v = source.to_vec();
    for d in damaged {
        v[d.offset as usize..(d.offset + d.bytes) as usize].fill(0);
    }
    v
}

/// Every bit of the 16-byte file header flipped, one at a time: the archive is refused
/// (opened or salvaged), or restores its source exactly. The wire version at bytes
/// 10..12 was covered by nothing before format 4.
#[test]
fn every_bit_of_the_file_header_is_refused_or_restores_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let src = corpus_bytes("fracast0-int8-f32.safetensors");
    let good = std::fs::read(compressed(dir.path(), "f", &src)).unwrap();
    assert_eq!(&good[8..10], &4u16.to_le_bytes(), "format 4");
    let mut refused = 0;
    for bit in 0..16 * 8 {
        let mut bad = good.clone();
        bad[bit / 8] ^= 1 << (bit % 8);
        match Archive::from_bytes(bad.clone(), "h.brv") {
            Err(e) => {
                refused += 1;
                let e = e.to_string();
                assert!(
                    e.contains("file header is damaged")
                        || e.contains("version")
                        || e.contains("magic")
                        || e.contains("flags"),
                    "bit {bit}: {e}"
                );
            }
            Ok(a) => {
                let mut out = Vec::new();
                let r = a.write_original(&mut out, Some(1), &no_progress, Path::new("o"));
                assert!(r.is_err() || out == src, "bit {bit}: restored other bytes");
            }
        }
        // Salvage never writes what it cannot prove either.
        if let Some((out, damaged)) = salvage(&bad) {
            assert_eq!(
                out,
                zeroed(&src, &damaged),
                "bit {bit}: salvaged other bytes"
            );
        }
    }
    assert_eq!(refused, 128, "every flipped bit of the header is refused");
}

/// One flipped byte inside a region of `embeddings.word_embeddings.weight` of
/// minilm-l6-v2-bf16 (23,440,896 bytes, 12 regions of 2,688 rows) zero-fills that region
/// only: 2,064,384 bytes where format 3 zero-filled the whole tensor; every other
/// region and tensor restores exactly. The archive cut inside that tensor's record keeps
/// the regions before the cut.
#[test]
fn one_flipped_byte_in_a_region_zero_fills_that_region_only() {
    let dir = tempfile::tempdir().unwrap();
    let src = corpus_bytes("minilm-l6-v2-bf16.safetensors");
    let path = compressed(dir.path(), "minilm", &src);
    let good = std::fs::read(&path).unwrap();
    let a = Archive::from_bytes(good.clone(), "m.brv").unwrap();
    let t = a.find("embeddings.word_embeddings.weight").unwrap();
    let regions = a.tensor_regions(t);
    assert_eq!(regions.len(), 12, "regions of the word embeddings");
    let data = 8 + a.header_len();
    let start = data + a.tensors()[t].begin;
    for k in [0, 4, 11] {
        let r = &regions[k];
        let mut bad = good.clone();
        bad[(r.program.start + r.program.end) / 2] ^= 0x10;
        let (out, damaged) = salvage(&bad).expect("salvages");
        assert_eq!(damaged.len(), 1, "region {k}: {damaged:?}");
        let d = &damaged[0];
        assert_eq!(d.tensors, ["embeddings.word_embeddings.weight"]);
        assert_eq!(d.offset, start + r.offset, "region {k}");
        assert_eq!(d.bytes, r.words * 2, "region {k}");
        if k == 4 {
            assert_eq!(d.bytes, 2_064_384);
            assert!(
                d.region
                    .contains("region 5 of 12 (words [4128768, 5160960))"),
                "{}",
                d.region
            );
        }
        assert!(
            out == zeroed(&src, &damaged),
            "region {k}: other bytes differ"
        );
    }

    // Cut inside the record, halfway through its regions: the regions whose programs
    // lie before the cut restore, the rest of the tensor and every later tensor are
    // zero-filled and named.
    let cut = (regions[5].program.start + regions[5].program.end) / 2;
    let (out, damaged) = salvage(&good[..cut]).expect("salvages the cut archive");
    assert!(out == zeroed(&src, &damaged), "cut: other bytes differ");
    let kept = start + regions[5].offset;
    assert!(
        damaged.iter().all(|d| d.offset >= kept),
        "regions before the cut were zero-filled: {:?}",
        &damaged[..2]
    );
    assert!(damaged[0].region.contains("region 6 of 12"), "{damaged:?}");
}

/// The CLI's view of the same: `decompress --salvage` of the archive with a flipped byte
/// names the region, writes the rest, exits 3.
#[test]
fn salvage_on_the_command_line_names_the_region() {
    let dir = tempfile::tempdir().unwrap();
    // Two regions of U8 (2 Mi words): small and quick.
    let n = (1u64 << 20) + 5000;
    let bytes: Vec<u8> = (0..n).map(|i| (i % 251) as u8 ^ (i >> 12) as u8).collect();
    let src = safetensors_bytes(&[("big", "U8", vec![n], bytes)]);
    let path = compressed(dir.path(), "two", &src);
    let a = Archive::open(&path).unwrap();
    let r = a.tensor_regions(0)[1].clone();
    drop(a);
    let mut bad = std::fs::read(&path).unwrap();
    bad[r.program.end - 3] ^= 0x01;
    std::fs::write(&path, bad).unwrap();
    let out = dir.path().join("out.safetensors");
    let o = salvage_cli(&path, &out, &[]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("damaged: tensor \"big\": 5000 bytes at file offset")
            && stderr.contains("zero-filled"),
        "{}",
        text(&o)
    );
    let restored = std::fs::read(&out).unwrap();
    let data = src.len() - n as usize;
    assert_eq!(restored[..data + (1 << 20)], src[..data + (1 << 20)]);
    assert!(restored[data + (1 << 20)..].iter().all(|&b| b == 0));
}

/// An archive cut at 25%, 50% and 75% of its length (an interrupted download): every
/// tensor whose record lies before the cut restores byte for byte, every other one is
/// zero-filled and named (lost or, for a large tensor cut inside its record, the regions
/// after the cut); through the CLI, exit 3 and a warning that the index is missing. The
/// whole archive followed by other bytes: every tensor restored, exit 3 all the same
/// (the whole file unchecked).
#[test]
fn a_cut_archive_salvages_every_tensor_before_the_cut() {
    let dir = tempfile::tempdir().unwrap();
    let src = corpus_bytes("minilm-l6-v2-bf16-layer0.safetensors");
    let path = compressed(dir.path(), "layer0", &src);
    let good = std::fs::read(&path).unwrap();
    let a = Archive::from_bytes(good.clone(), "l.brv").unwrap();
    let data = 8 + a.header_len();
    for percent in [25, 50, 75] {
        let cut = good.len() * percent / 100;
        let (out, damaged) = salvage(&good[..cut]).expect("salvages");
        assert!(
            out == zeroed(&src, &damaged),
            "{percent}%: other bytes differ"
        );
        let mut before = 0;
        for t in a.tensors().iter().filter(|t| t.begin != t.end) {
            let at = data + t.begin..data + t.end;
            let hit = damaged
                .iter()
                .any(|d| d.offset < at.end && at.start < d.offset + d.bytes);
            let named = damaged.iter().any(|d| d.tensors.contains(&t.name));
            if t.record.end <= cut {
                before += 1;
                assert!(!hit, "{percent}%: {:?} was before the cut", t.name);
                assert_eq!(
                    &out[at.start as usize..at.end as usize],
                    &src[at.start as usize..at.end as usize]
                );
            } else {
                assert!(hit && named, "{percent}%: {:?} is not named", t.name);
            }
        }
        assert!(before > 0, "{percent}%: no tensor before the cut");

        let cut_path = dir.path().join(format!("cut{percent}.brv"));
        std::fs::write(&cut_path, &good[..cut]).unwrap();
        let out_path = dir.path().join(format!("cut{percent}.safetensors"));
        let o = salvage_cli(&cut_path, &out_path, &[]);
        assert_eq!(o.status.code(), Some(3), "{percent}%: {}", text(&o));
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(
            stderr.contains("restored without its index"),
            "{}",
            text(&o)
        );
        assert!(stderr.contains("its record is lost"), "{}", text(&o));
        assert!(
            std::fs::read(&out_path).unwrap() == out,
            "{percent}%: the CLI wrote other bytes"
        );
    }
    // Without --salvage a cut archive is refused, as before.
    let o = brevis([Path::new("decompress"), &dir.path().join("cut50.brv")]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));

    // Other bytes after the archive: salvage finds every record and restores the file
    // byte for byte, but without the index the whole file is unchecked: exit 3, and
    // no claim that its checksum matched (found by a tester: it exited 0 and said so).
    let appended = dir.path().join("appended.brv");
    let mut bytes = good.clone();
    bytes.extend_from_slice(&[0x5a; 20]);
    std::fs::write(&appended, &bytes).unwrap();
    let out_path = dir.path().join("appended.safetensors");
    let o = salvage_cli(&appended, &out_path, &[]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("restored without its index"),
        "{}",
        text(&o)
    );
    assert!(
        stderr.contains("the whole file could not be checked"),
        "{}",
        text(&o)
    );
    assert!(
        !text(&o).contains("whole-file checksums match"),
        "{}",
        text(&o)
    );
    assert!(std::fs::read(&out_path).unwrap() == src);
    let json = dir.path().join("appended.json.safetensors");
    let o = salvage_cli(&appended, &json, &["--json"]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["whole_file_checked"], false);
    assert_eq!(v["ok"], false);
    assert_eq!(v["damaged"], serde_json::json!([]));
}

/// A folder archive with one shard cut short, one with a flipped byte in a tensor's
/// record and a damaged copied file: `decompress --salvage` writes every file, the sound
/// shard byte for byte, names each damaged tensor with its file, and exits 3; without
/// `--salvage` the folder is refused.
#[test]
fn a_folder_archive_salvages_every_shard_that_verifies() {
    use serde_json::{json, Map};
    let dir = tempfile::tempdir().unwrap();
    let ckpt = dir.path().join("ckpt");
    std::fs::create_dir(&ckpt).unwrap();
    let weights = corpus_bytes("minilm-l6-v2-bf16-layer0.safetensors");
    let piece =
        |k: usize, n: usize| weights[weights.len() - (k + 1) * n..weights.len() - k * n].to_vec();
    let shards: Vec<Vec<Tensor>> = (0..3)
        .map(|s| {
            (0..4)
                .map(|t| {
                    let n = 70_000 + 2 * t;
                    (
                        format!("s{s}.t{t}"),
                        "BF16",
                        vec![(n / 2) as u64],
                        piece(4 * s + t, n),
                    )
                })
                .collect()
        })
        .collect();
    let mut weight_map = Map::new();
    for (s, tensors) in shards.iter().enumerate() {
        let file = format!("model-{:05}-of-00003.safetensors", s + 1);
        std::fs::write(ckpt.join(&file), safetensors_bytes(tensors)).unwrap();
        for t in tensors {
            weight_map.insert(t.0.clone(), json!(file));
        }
    }
    std::fs::write(
        ckpt.join("model.safetensors.index.json"),
        serde_json::to_vec(&json!({"metadata": {}, "weight_map": weight_map})).unwrap(),
    )
    .unwrap();
    std::fs::write(ckpt.join("config.json"), b"{\"hidden\": 384}\n").unwrap();
    let archive = dir.path().join("ckpt.brv");
    let o = brevis([Path::new("compress"), &ckpt, Path::new("-o"), &archive]);
    assert!(o.status.success(), "{}", text(&o));

    let f = Folder::open(&archive).unwrap();
    let stored = |i: usize| f.stored_path(f.shards().nth(i).unwrap());
    // Shard 2: cut at 60%. Shard 3: a flipped byte in its tensor s2.t1's program.
    let second = std::fs::read(stored(1)).unwrap();
    let a2 = Archive::from_bytes(second.clone(), "2").unwrap();
    let cut = second.len() * 60 / 100;
    std::fs::write(stored(1), &second[..cut]).unwrap();
    let third = Archive::open(&stored(2)).unwrap();
    let t1 = third.find("s2.t1").unwrap();
    let p = third.tensors()[t1].program.clone();
    drop(third);
    let mut bytes = std::fs::read(stored(2)).unwrap();
    bytes[(p.start + p.end) / 2] ^= 0x04;
    std::fs::write(stored(2), bytes).unwrap();
    std::fs::write(archive.join("config.json"), b"{\"hidden\": 385}\n").unwrap();

    let out = dir.path().join("restored");
    let o = brevis([Path::new("decompress"), &archive, Path::new("-o"), &out]);
    assert_ne!(o.status.code(), Some(0), "{}", text(&o));
    assert!(!out.exists());
    let o = salvage_cli(&archive, &out, &[]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    let stderr = String::from_utf8_lossy(&o.stderr);
    let first = "model-00001-of-00003.safetensors";
    assert_eq!(
        std::fs::read(out.join(first)).unwrap(),
        std::fs::read(ckpt.join(first)).unwrap(),
        "the sound shard"
    );
    assert!(
        stderr.contains("damaged: \"model-00003-of-00003.safetensors\": tensor \"s2.t1\""),
        "{}",
        text(&o)
    );
    assert!(
        stderr.contains("damaged: \"config.json\": the whole file"),
        "{}",
        text(&o)
    );
    // Shard 2: the tensors before the cut restore, the others are named.
    let src2 = std::fs::read(ckpt.join("model-00002-of-00003.safetensors")).unwrap();
    let got2 = std::fs::read(out.join("model-00002-of-00003.safetensors")).unwrap();
    assert_eq!(got2.len(), src2.len());
    let data = (8 + a2.header_len()) as usize;
    for t in a2.tensors() {
        let range = data + t.begin as usize..data + t.end as usize;
        let named = stderr.contains(&format!(
            "damaged: \"model-00002-of-00003.safetensors\": tensor \"{}\"",
            t.name
        ));
        if t.record.end <= cut {
            assert_eq!(got2[range.clone()], src2[range], "{}", t.name);
            assert!(!named, "{} named", t.name);
        } else {
            assert!(named, "{} not named: {}", t.name, text(&o));
        }
    }
    // The library reports the same, each region with its file.
    let restored = dir.path().join("again");
    let r = brevis::job::decompress(
        &archive,
        Some(&restored),
        &DecompressOptions {
            salvage: true,
            ..DecompressOptions::default()
        },
        &brevis::job::Silent,
    )
    .unwrap();
    assert!(!r.ok);
    let files: std::collections::BTreeSet<&str> =
        r.damaged.iter().filter_map(|d| d.file.as_deref()).collect();
    assert_eq!(
        files.into_iter().collect::<Vec<_>>(),
        [
            "config.json",
            "model-00002-of-00003.safetensors",
            "model-00003-of-00003.safetensors"
        ]
    );
}
