//! Fine-tunes coded against their base (issue 30), on pairs made from real weights
//! (`tests/support/finetune.rs`) with corpus files as bases: `compress --base` at least
//! 5% smaller than BitX (ZipLLM's XOR + byte planes + zstd-3) on every pair, restored
//! byte for byte with the right base, and a wrong or missing base refused with nothing
//! written.

#[path = "support/finetune.rs"]
mod finetune;
mod support;

use brevis::archive::base::BaseSet;
use brevis::archive::writer::Links;
use brevis::archive::{compress_file, no_progress, Archive, CompressOptions, DecompressOptions};
use brevis::Error;
use finetune::Tensor;
use std::path::Path;
use std::sync::Arc;
use support::CORPUS;

fn write(path: &Path, tensors: &[Tensor]) -> Vec<u8> {
    let list: Vec<(&str, &str, Vec<u64>, Vec<u8>)> = tensors
        .iter()
        .map(|(n, d, s, b)| (n.as_str(), d.as_str(), s.clone(), b.clone()))
        .collect();
    let bytes = support::safetensors_bytes(&list);
    std::fs::write(path, &bytes).unwrap();
    bytes
}

fn with_base(base: &Path) -> CompressOptions {
    CompressOptions {
        links: Some(Arc::new(Links::base(BaseSet::open(base).unwrap()))),
        ..CompressOptions::default()
    }
}

fn restore(archive: &Path, base: Option<&Path>, out: &Path) -> brevis::Result<Vec<u8>> {
    let a = Archive::open(archive)?;
    let opts = DecompressOptions {
        jobs: Some(2),
        base: base.map(|b| Arc::new(BaseSet::open(b).unwrap())),
        ..DecompressOptions::default()
    };
    a.decompress_to(out, &opts, &no_progress)?;
    Ok(std::fs::read(out).unwrap())
}

/// The constructions `kinds` of `finetune::KINDS` against the corpus file `corpus`: at
/// most `bar` of BitX's bytes, the exact restore, and what a wrong or missing base gives.
fn check_pairs(corpus: &str, kinds: &[&str], bar: f64) {
    let dir = tempfile::tempdir().unwrap();
    let base_path = Path::new(CORPUS).join(corpus);
    let base_bytes = std::fs::read(&base_path).unwrap();
    let base = finetune::tensors_of(&base_bytes);
    for &kind in kinds {
        let ft = finetune::make(kind, &base);
        let src = dir.path().join(format!("{kind}.safetensors"));
        let original = write(&src, &ft);
        let brv = dir.path().join(format!("{kind}.brv"));
        compress_file(&src, &brv, &with_base(&base_path), &no_progress).unwrap();
        let ours = std::fs::metadata(&brv).unwrap().len();
        let bitx = finetune::bitx_bytes(&ft, &base);
        eprintln!(
            "{corpus} {kind}: {} B; --base {ours} B, BitX {bitx} B ({:.1}% smaller than BitX)",
            original.len(),
            100.0 * (1.0 - ours as f64 / bitx as f64)
        );
        assert!(
            ours as f64 <= bitx as f64 * bar,
            "{corpus} {kind}: --base {ours} B is over {bar} x BitX's {bitx} B"
        );
        let a = Archive::open(&brv).unwrap();
        assert_eq!(a.version(), 4, "format 4, its sources in the header record");
        assert_eq!(a.sources().len(), 1);
        assert_eq!(a.sources()[0].original_len, base_bytes.len() as u64);
        let out = dir.path().join(format!("{kind}.restored"));
        let restored = restore(&brv, Some(&base_path), &out).unwrap();
        assert!(
            restored == original,
            "{corpus} {kind}: restored bytes differ"
        );
        std::fs::remove_file(&out).unwrap();

        // No base: refused before anything is written.
        let e = restore(&brv, None, &out).unwrap_err();
        assert_eq!(e.kind(), "base_missing", "{e}");
        assert!(e.to_string().contains("--base"), "{e}");
        assert!(!out.exists());
        // Another base (the fine-tune itself): refused, naming what differs.
        let e = restore(&brv, Some(&src), &out).unwrap_err();
        assert_eq!(e.kind(), "wrong_base", "{e}");
        assert!(
            e.to_string()
                .contains(&format!("{} bytes", base_bytes.len())),
            "{e}"
        );
        assert!(!out.exists());
    }
}

/// Issue 30's bar, 5% under BitX, on every construction of a BF16 checkpoint.
#[test]
fn fine_tunes_of_a_bf16_checkpoint_beat_bitx_and_restore_exactly() {
    check_pairs(
        "minilm-l6-v2-bf16-layer0.safetensors",
        &finetune::KINDS,
        0.95,
    );
}

/// The same bar on an F16 checkpoint (whisper-tiny, 75 MB) for the two dense
/// constructions, where every large tensor changes.
#[test]
fn fine_tunes_of_an_f16_checkpoint_beat_bitx_and_restore_exactly() {
    check_pairs(
        "whisper-tiny-en-f16.safetensors",
        &["lora-merge", "optimizer-steps"],
        0.95,
    );
}

/// The same bar on an F32 checkpoint. The dense constructions add Gaussian noise to the
/// 16-20 low mantissa bits; their residuals are coded as buckets offset by the base
/// word's exponent (`codec::bucket`), which takes the noise's scale from the base.
#[test]
fn fine_tunes_of_an_f32_checkpoint_beat_bitx_and_restore_exactly() {
    check_pairs("fracast0-f32.safetensors", &finetune::KINDS, 0.95);
}

/// Whisper's head-only pair is the one the 5% bar cannot hold: its one changed tensor
/// (the last matrix, the 1500 x 384 position encodings) is drawn afresh, independent of
/// the base, so no coder goes below the order-0 entropy of its words, and that entropy
/// (966,854 B) is above 95% of BitX (957,247 B). Brevis codes the tensor alone within
/// 0.5% of that entropy and stays under BitX.
#[test]
fn a_redrawn_f16_tensor_is_coded_at_its_entropy() {
    let base_path = Path::new(CORPUS).join("whisper-tiny-en-f16.safetensors");
    let base = finetune::tensors_of(&std::fs::read(&base_path).unwrap());
    let ft = finetune::head_only(&base);
    let changed: Vec<&Tensor> = ft.iter().filter(|t| !base.contains(t)).collect();
    assert_eq!(changed.len(), 1);
    let mut counts = std::collections::HashMap::new();
    for c in changed[0].3.chunks_exact(2) {
        *counts.entry([c[0], c[1]]).or_insert(0u64) += 1;
    }
    let n = (changed[0].3.len() / 2) as f64;
    let entropy_bytes = counts
        .values()
        .map(|&c| -(c as f64) * (c as f64 / n).log2())
        .sum::<f64>()
        / 8.0;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ft.safetensors");
    let bytes = write(&path, &ft);
    let out = dir.path().join("ft.brv");
    compress_file(&path, &out, &with_base(&base_path), &no_progress).unwrap();
    let ours = std::fs::metadata(&out).unwrap().len() as f64;
    let bitx = finetune::bitx_bytes(&ft, &base) as f64;
    eprintln!("whisper head-only: --base {ours} B, BitX {bitx} B, entropy {entropy_bytes:.0} B");
    assert!(entropy_bytes > 0.95 * bitx, "the bar is below the entropy");
    assert!(ours < bitx, "--base {ours} B, BitX {bitx} B");
    assert!(
        ours < entropy_bytes * 1.005 + 8192.0,
        "--base {ours} B against the redrawn tensor's entropy {entropy_bytes:.0} B"
    );
    assert_eq!(
        restore(&out, Some(&base_path), &dir.path().join("r")).unwrap(),
        bytes
    );
}

/// The base may be given as an archive of it; a tensor identical to its base costs a
/// reference record of a few bytes, and one taken from the base under another name (a
/// tied copy) too.
#[test]
fn a_base_given_as_an_archive_restores_the_same_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let base_path = Path::new(CORPUS).join("minilm-l6-v2-bf16-layer0.safetensors");
    let base = finetune::tensors_of(&std::fs::read(&base_path).unwrap());
    let ft = finetune::tied_copy(&base);
    let src = dir.path().join("tied.safetensors");
    let original = write(&src, &ft);
    let base_brv = dir.path().join("base.brv");
    compress_file(
        &base_path,
        &base_brv,
        &CompressOptions::default(),
        &no_progress,
    )
    .unwrap();
    let brv = dir.path().join("tied.brv");
    compress_file(&src, &brv, &with_base(&base_brv), &no_progress).unwrap();
    let a = Archive::open(&brv).unwrap();
    // Every tensor is its base's: 24 reference records of const 0.
    for t in a.tensors() {
        assert!(t.reference.is_some(), "{} is coded alone", t.name);
        assert_eq!(t.root_op, "const", "{}", t.name);
    }
    let head = a.find("lm_head.weight").unwrap();
    let r = a.tensors()[head].reference.unwrap();
    assert_eq!(
        a.attached(0).map(|_| ()),
        None,
        "nothing attached before a base is given"
    );
    let out = dir.path().join("restored");
    assert!(restore(&brv, Some(&base_brv), &out).unwrap() == original);
    // The tied copy points at the largest matrix of the base.
    let b = BaseSet::open(&base_path).unwrap();
    let named = &b.sources[0].tensors()[r.tensor as usize].name;
    assert_eq!(named, "encoder.layer.0.output.dense.weight");
    assert!(a.archive_len() < 2_000, "{} bytes", a.archive_len());
}

/// A fine-tune folder against a base folder: each shard coded against the base's shards
/// (its tensors found by name in any of them), restored with `--base` as a folder.
#[test]
fn a_folder_is_coded_against_a_base_folder() {
    use brevis::archive::folder::{compress_folder, Folder};
    let dir = tempfile::tempdir().unwrap();
    let base_path = Path::new(CORPUS).join("minilm-l6-v2-bf16-layer0.safetensors");
    let base = finetune::tensors_of(&std::fs::read(&base_path).unwrap());
    let ft = finetune::optimizer_steps(&base);
    let (bdir, fdir) = (dir.path().join("base"), dir.path().join("ft"));
    std::fs::create_dir_all(&bdir).unwrap();
    std::fs::create_dir_all(&fdir).unwrap();
    // The base split in two shards one way, the fine-tune the other way.
    write(&bdir.join("a.safetensors"), &base[..10]);
    write(&bdir.join("b.safetensors"), &base[10..]);
    let fa = write(&fdir.join("a.safetensors"), &ft[..15]);
    let fb = write(&fdir.join("b.safetensors"), &ft[15..]);
    let out = dir.path().join("ft.brv");
    compress_folder(&fdir, &out, &with_base(&bdir), &|_, _| {}).unwrap();
    let mut f = Folder::open(&out).unwrap();
    let restored = dir.path().join("restored");
    let e = f
        .decompress_to(&restored, &DecompressOptions::default(), &|_, _| {})
        .unwrap_err();
    assert_eq!(e.kind(), "base_missing", "{e}");
    assert!(!restored.exists());
    f.set_base(Some(Arc::new(BaseSet::open(&bdir).unwrap())));
    f.decompress_to(&restored, &DecompressOptions::default(), &|_, _| {})
        .unwrap();
    assert!(std::fs::read(restored.join("a.safetensors")).unwrap() == fa);
    assert!(std::fs::read(restored.join("b.safetensors")).unwrap() == fb);
    // Shard a of the fine-tune takes tensors from both base shards.
    let shard = f.open_shard(&f.shards().next().unwrap().clone()).unwrap();
    let names: Vec<&str> = shard.sources().iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["a.safetensors", "b.safetensors"]);
}

/// Damage to a reference record's fields is refused, never a panic: a source index past
/// the sources, and a base tensor of another length.
#[test]
fn a_reference_to_a_missing_source_tensor_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let base_path = Path::new(CORPUS).join("minilm-l6-v2-bf16-layer0.safetensors");
    let base = finetune::tensors_of(&std::fs::read(&base_path).unwrap());
    let src = dir.path().join("ft.safetensors");
    write(&src, &finetune::head_only(&base));
    let brv = dir.path().join("ft.brv");
    compress_file(&src, &brv, &with_base(&base_path), &no_progress).unwrap();
    // A base whose tensors are the same names with other lengths: refused by checksum
    // before any tensor is read.
    let other = dir.path().join("other.safetensors");
    write(&other, &base[..3]);
    let a = Archive::open(&brv).unwrap();
    let e = a.attach_base(&BaseSet::open(&other).unwrap()).unwrap_err();
    assert!(
        matches!(
            e,
            Error::Invalid {
                kind: "wrong_base",
                ..
            }
        ),
        "{e}"
    );
    let e = a.decode_tensor(0).unwrap_err();
    assert_eq!(e.kind(), "base_missing", "{e}");
}

/// Single-bit flips of a committed format-3 archive (`tests/data/v3`, 2,106 bytes;
/// every 5th bit, so every byte is hit) are refused or restore exactly, with its base
/// attached: never a panic, never other bytes.
#[test]
fn every_bit_flip_of_a_reference_archive_is_refused_or_harmless() {
    let base_path = Path::new(CORPUS).join("fracast0-f32.safetensors");
    let base = finetune::tensors_of(&std::fs::read(&base_path).unwrap());
    let tied = finetune::tied_copy(&base);
    let list: Vec<(&str, &str, Vec<u64>, Vec<u8>)> = tied
        .iter()
        .map(|(n, d, s, b)| (n.as_str(), d.as_str(), s.clone(), b.clone()))
        .collect();
    let source = support::safetensors_bytes(&list);
    let set = Arc::new(BaseSet::open(&base_path).unwrap());
    let good = std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/v3/fracast0-f32-tied-copy.brv"),
    )
    .unwrap();
    let (mut refused, mut exact) = (0, 0);
    for bit in (0..good.len() * 8).step_by(5) {
        let mut bad = good.clone();
        bad[bit / 8] ^= 1 << (bit % 8);
        let outcome = Archive::from_bytes(bad, "flipped.brv").and_then(|a| {
            a.attach_base(&set)?;
            let mut out = Vec::new();
            a.write_original(&mut out, Some(1), &no_progress, Path::new("out"))?;
            Ok(out)
        });
        match outcome {
            Err(_) => refused += 1,
            Ok(out) => {
                assert!(out == source, "bit {bit}: restored other bytes");
                exact += 1;
            }
        }
    }
    eprintln!("{refused} flips refused, {exact} harmless");
    assert!(refused > good.len(), "{refused} refused");
}

/// `brevis-tui FT.safetensors [--base BASE]` reuses an archive of that file only when
/// it was coded against the base given (or against none when none is), and says at open
/// what an archive's base means for it.
#[cfg(feature = "tui")]
#[test]
fn the_tui_reuses_an_archive_only_with_the_base_it_was_made_against() {
    use brevis::tui::{base_note, existing_archive};
    let dir = tempfile::tempdir().unwrap();
    let base_path = Path::new(CORPUS).join("minilm-l6-v2-bf16-layer0.safetensors");
    let base = finetune::tensors_of(&std::fs::read(&base_path).unwrap());
    let src = dir.path().join("ft.safetensors");
    write(&src, &finetune::head_only(&base));
    let set = BaseSet::open(&base_path).unwrap();
    compress_file(
        &src,
        &dir.path().join("ft.brv"),
        &with_base(&base_path),
        &no_progress,
    )
    .unwrap();
    assert!(existing_archive(&src, None).is_none());
    let with = existing_archive(&src, Some(&set)).unwrap();
    assert_eq!(with.path(), dir.path().join("ft.brv"));
    assert_eq!(base_note(&with, true), None);
    let alone = Archive::open(&dir.path().join("ft.brv")).unwrap();
    let refs = alone
        .tensors()
        .iter()
        .filter(|t| t.reference.is_some())
        .count();
    assert!(refs > 0);
    assert_eq!(
        base_note(&alone, false).unwrap(),
        format!(
            "{refs} tensors are coded against the base \"minilm-l6-v2-bf16-layer0.safetensors\": \
             without --base they cannot be decoded (verify, why, search); the others can"
        )
    );
    compress_file(
        &src,
        &dir.path().join("ft-1.brv"),
        &CompressOptions::default(),
        &no_progress,
    )
    .unwrap();
    let plain = existing_archive(&src, None).unwrap();
    assert_eq!(plain.path(), dir.path().join("ft-1.brv"));
    assert_eq!(
        base_note(&plain, true).unwrap(),
        "this archive is not coded against a base: --base is not used"
    );
    assert_eq!(base_note(&plain, false), None);
}
