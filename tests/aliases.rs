//! The same bytes under dtypes of different word widths (issue 38): an F32 tensor and a
//! BF16 view of its bytes, tied embeddings saved once as BF16 and once as raw bytes. The
//! writer stored the second as a copy of the first, which the reader refuses (a copy
//! restores the words of the record it names), so an archive `compress` reported as
//! written could not be restored. Each width pair, in one file and across the shards of
//! a folder, must now restore byte for byte through the CLI; and `compress` must refuse
//! to leave an archive the reader refuses (the writer made to emit one by a test hook).

mod support;

use brevis::archive::Archive;
use serde_json::{json, Map};
use std::path::{Path, PathBuf};
use support::safetensors_bytes;
use support::text;
use support::{brevis_env, CORPUS};

/// `n` bytes of real weights: the start of a BF16 matrix of the corpus, repeated if
/// need be.
fn payload(n: usize) -> Vec<u8> {
    let bytes = std::fs::read(Path::new(CORPUS).join("minilm-l6-v2-bf16-layer0.safetensors"))
        .expect("read ../shared/corpus/minilm-l6-v2-bf16-layer0.safetensors");
    // Skip the header and the position ids (I64): take from the last quarter.
    let start = bytes.len() * 3 / 4;
    bytes[start..].iter().copied().cycle().take(n).collect()
}

/// A tensor of a test file: name, dtype, shape and bytes.
type Tensor = (String, &'static str, Vec<u64>, Vec<u8>);

fn width_bytes(dtype: &str) -> usize {
    match dtype {
        "U8" | "I8" | "BOOL" | "F8_E4M3" => 1,
        "BF16" | "F16" | "I16" => 2,
        "F32" | "I32" => 4,
        "F64" | "I64" => 8,
        _ => unreachable!(),
    }
}

/// Tensors named `t0, t1, ...` of `dtypes`, each holding the same `n` bytes.
fn views(dtypes: &[&str], n: usize) -> Vec<Tensor> {
    let p = payload(n);
    dtypes
        .iter()
        .enumerate()
        .map(|(k, d)| {
            let d: &'static str = match *d {
                "U8" => "U8",
                "I8" => "I8",
                "BF16" => "BF16",
                "F16" => "F16",
                "I16" => "I16",
                "F32" => "F32",
                "I32" => "I32",
                "F64" => "F64",
                "I64" => "I64",
                _ => unreachable!(),
            };
            (
                format!("t{k}"),
                d,
                vec![(n / width_bytes(d)) as u64],
                p.clone(),
            )
        })
        .collect()
}

/// Compresses `src` with the CLI, decompresses the archive and compares byte for byte.
fn cli_round_trip(dir: &Path, name: &str, src: &[u8]) -> PathBuf {
    let input = dir.join(format!("{name}.safetensors"));
    let archive = dir.join(format!("{name}.brv"));
    let output = dir.join(format!("{name}.out"));
    std::fs::write(&input, src).unwrap();
    let o = brevis_env(
        [Path::new("compress"), &input, Path::new("-o"), &archive],
        &[],
    );
    assert!(o.status.success(), "compress {name}: {}", text(&o));
    let o = brevis_env(
        [Path::new("decompress"), &archive, Path::new("-o"), &output],
        &[],
    );
    assert!(o.status.success(), "decompress {name}: {}", text(&o));
    assert!(
        std::fs::read(&output).unwrap() == src,
        "{name}: restored bytes differ"
    );
    archive
}

/// The two commands of the issue (an F32 tensor and a BF16 view of its 4,096 bytes; BF16,
/// U8 and F64 views of one payload) and each width pair, 8/16, 16/32, 8/32 and 32/64 bits
/// in both orders, restore byte for byte; a same-width alias (F32 and I32) is still
/// stored as a copy, a different-width one is not.
#[test]
fn identical_bytes_under_different_widths_restore() {
    let dir = tempfile::tempdir().unwrap();
    let cases: &[(&str, &[&str])] = &[
        ("issue_f32_bf16", &["F32", "BF16"]),
        ("issue_bf16_u8_f64", &["BF16", "U8", "F64"]),
        ("w8_16", &["U8", "BF16"]),
        ("w16_8", &["F16", "I8"]),
        ("w16_32", &["BF16", "F32"]),
        ("w32_16", &["F32", "F16"]),
        ("w8_32", &["U8", "F32"]),
        ("w32_8", &["I32", "U8"]),
        ("w32_64", &["F32", "F64"]),
        ("w64_32", &["I64", "F32"]),
        ("same_width", &["F32", "I32", "BF16", "F32"]),
    ];
    for (name, dtypes) in cases {
        let tensors = views(dtypes, 4096);
        let src = safetensors_bytes(&tensors);
        let archive = cli_round_trip(dir.path(), name, &src);
        let a = Archive::open(&archive).unwrap();
        for (k, t) in a.tensors().iter().enumerate() {
            // The first tensor of each word width is stored; a later one of the same
            // width is a copy of it.
            let first_of_width = (0..k).find(|&j| {
                brevis::tensor::Dtype::from_name(dtypes[j]).map(|d| d.word_bits())
                    == brevis::tensor::Dtype::from_name(dtypes[k]).map(|d| d.word_bits())
            });
            assert_eq!(t.copy_of, first_of_width, "{name}: tensor {k}");
        }
    }
}

fn write_folder(dir: &Path, shards: &[Vec<Tensor>]) {
    std::fs::create_dir(dir).unwrap();
    let k = shards.len();
    let mut weight_map = Map::new();
    let mut total = 0;
    for (s, tensors) in shards.iter().enumerate() {
        let file = format!("model-{:05}-of-{k:05}.safetensors", s + 1);
        std::fs::write(dir.join(&file), safetensors_bytes(tensors)).unwrap();
        for t in tensors {
            weight_map.insert(t.0.clone(), json!(file));
            total += t.3.len();
        }
    }
    let index = json!({"metadata": {"total_size": total}, "weight_map": weight_map});
    std::fs::write(
        dir.join("model.safetensors.index.json"),
        serde_json::to_vec_pretty(&index).unwrap(),
    )
    .unwrap();
}

/// Shards that share tensors across dtypes (the first shard's F32 tensor is a BF16, a U8
/// and an F64 tensor in the others, and an F32 one under another name) restore byte for
/// byte through the CLI.
#[test]
fn shards_sharing_bytes_across_dtypes_restore() {
    let dir = tempfile::tempdir().unwrap();
    let all = views(&["F32", "BF16", "U8", "F64", "F32"], 8192);
    let mut shards: Vec<Vec<_>> = all.into_iter().map(|t| vec![t]).collect();
    shards[1].push(views(&["I16"], 512).remove(0));
    shards[1][1].0 = "extra".to_string();
    let ckpt = dir.path().join("ckpt");
    write_folder(&ckpt, &shards);
    let archive = dir.path().join("ckpt.brv");
    let restored = dir.path().join("restored");
    let o = brevis_env(
        [Path::new("compress"), &ckpt, Path::new("-o"), &archive],
        &[],
    );
    assert!(o.status.success(), "compress: {}", text(&o));
    let o = brevis_env(
        [
            Path::new("decompress"),
            &archive,
            Path::new("-o"),
            &restored,
        ],
        &[],
    );
    assert!(o.status.success(), "decompress: {}", text(&o));
    for s in 1..=shards.len() {
        let file = format!("model-{s:05}-of-{:05}.safetensors", shards.len());
        assert!(
            std::fs::read(restored.join(&file)).unwrap()
                == std::fs::read(ckpt.join(&file)).unwrap(),
            "{file} differs"
        );
    }
    // The last shard's F32 tensor is stored once, in the first shard.
    let f = brevis::archive::folder::Folder::open(&archive).unwrap();
    let last = f.shards().last().unwrap().clone();
    let a = f.open_shard(&last).unwrap();
    assert!(
        a.tensors()[0].reference.is_some(),
        "the F32 copy is a reference"
    );
}

/// The writer made to emit what its reader refuses (the test hook `BREVIS_TEST_FAULT`):
/// `compress` checks the archive it wrote through the reader, exits non-zero naming the
/// tensor, and leaves no output; an existing output it was asked to replace (`--force`)
/// is left as it was.
#[test]
fn compress_refuses_an_archive_its_reader_refuses() {
    let dir = tempfile::tempdir().unwrap();
    let src = safetensors_bytes(&views(&["F32", "BF16"], 4096));
    let input = dir.path().join("w1.safetensors");
    std::fs::write(&input, &src).unwrap();
    let archive = dir.path().join("w1.brv");
    let cases = [
        // The bug of the issue: a copy between different widths.
        ("copy-any-width", "tensor \"t1\""),
        // A flipped byte at the end of record 1 (tensor t0's program).
        ("flip-record=1", "tensor \"t0\""),
        // The same in the header record.
        ("flip-record=0", "record 0 (the header)"),
    ];
    for (fault, names) in cases {
        let o = brevis_env(
            [Path::new("compress"), &input, Path::new("-o"), &archive],
            &[("BREVIS_TEST_FAULT", fault)],
        );
        assert_eq!(o.status.code(), Some(1), "{fault}: {}", text(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains("the archive written does not restore its source"),
            "{fault}: {err}"
        );
        assert!(err.contains(names), "{fault}: {err}");
        assert!(!archive.exists(), "{fault}: an output was left");
        let leftovers: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .filter(|n| n != "w1.safetensors")
            .collect();
        assert!(leftovers.is_empty(), "{fault}: left {leftovers:?}");
    }
    // --force over an existing archive: refused, and the old archive is untouched.
    std::fs::write(&archive, b"old").unwrap();
    let o = brevis_env(
        [
            Path::new("compress"),
            &input,
            Path::new("-o"),
            &archive,
            Path::new("--force"),
        ],
        &[("BREVIS_TEST_FAULT", "copy-any-width")],
    );
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert_eq!(std::fs::read(&archive).unwrap(), b"old");
    // --no-verify skips the check: the refused archive is written (what the issue's
    // user got), and decompress refuses it.
    std::fs::remove_file(&archive).unwrap();
    let o = brevis_env(
        [
            Path::new("compress"),
            &input,
            Path::new("-o"),
            &archive,
            Path::new("--no-verify"),
        ],
        &[("BREVIS_TEST_FAULT", "copy-any-width")],
    );
    assert!(o.status.success(), "{}", text(&o));
    let out = dir.path().join("w1.out");
    let o = brevis_env(
        [Path::new("decompress"), &archive, Path::new("-o"), &out],
        &[],
    );
    assert_ne!(o.status.code(), Some(0), "{}", text(&o));
}

/// A synthesized program that does not restore its words (the test hook makes every one
/// wrong) fails the check after writing; `compress` then writes the archive again with
/// each program checked as it is made, stores the wrong ones as literals with a warning,
/// and the archive restores.
#[test]
fn wrong_programs_fall_back_to_literals() {
    let dir = tempfile::tempdir().unwrap();
    let src = safetensors_bytes(&views(&["F32", "BF16"], 4096));
    let input = dir.path().join("w1.safetensors");
    std::fs::write(&input, &src).unwrap();
    let archive = dir.path().join("w1.brv");
    let o = brevis_env(
        [Path::new("compress"), &input, Path::new("-o"), &archive],
        &[("BREVIS_TEST_FAULT", "bad-program")],
    );
    assert!(o.status.success(), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("tensor \"t0\": synthesized program did not reproduce the data"),
        "{err}"
    );
    let a = Archive::open(&archive).unwrap();
    let mut out = Vec::new();
    a.write_original(&mut out, Some(1), &brevis::archive::no_progress, &archive)
        .unwrap();
    assert!(out == src);
}
