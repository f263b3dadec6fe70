//! Back references and transposition on real checkpoints (`../shared/corpus`): the
//! safetensors JSON header of a small checkpoint and the Fourier basis of a voice
//! detector, the two inputs these productions were built for, at the default settings.

mod support;

use brevis::archive::{compress_file, no_progress, Archive, CompressOptions, DecompressOptions};
use std::path::Path;
use support::CORPUS;

fn compressed(name: &str, dir: &Path) -> (Archive, u64) {
    let input = Path::new(CORPUS).join(name);
    let out = dir.join(format!("{name}.brv"));
    let summary = compress_file(&input, &out, &CompressOptions::default(), &no_progress)
        .unwrap_or_else(|e| panic!("compress {name}: {e}"));
    let archive = Archive::open(&out).expect("open");
    let restored = dir.join(name);
    archive
        .decompress_to(&restored, &DecompressOptions::default(), &no_progress)
        .expect("decompress");
    assert!(
        std::fs::read(&input).unwrap() == std::fs::read(&restored).unwrap(),
        "{name}: restored bytes differ"
    );
    (archive, summary.original_bytes)
}

/// silero-vad-16k-f32's `stft_conv.weight` (258 x 1 x 256 F32, a windowed Fourier basis:
/// each column mirrors another, the sine half negated) was 129,577 bytes as a Huffman
/// literal of whole words; by columns with back references it is at most 50,000, and the
/// file at least 29% smaller (ZipNN 0.5.4: 15.60%).
#[test]
fn a_fourier_basis_is_coded_by_columns_with_back_references() {
    let dir = tempfile::tempdir().unwrap();
    let (archive, original) = compressed("silero-vad-16k-f32.safetensors", dir.path());
    let t = archive
        .tensors()
        .iter()
        .find(|t| t.name == "stft_conv.weight")
        .expect("tensor");
    assert_eq!(t.root_op, "transpose");
    let bytes = t.record.len();
    assert!(bytes <= 50_000, "stft_conv.weight: {bytes} bytes");
    let archive_len = std::fs::metadata(dir.path().join("silero-vad-16k-f32.safetensors.brv"))
        .unwrap()
        .len();
    let reduction = 1.0 - archive_len as f64 / original as f64;
    assert!(
        reduction >= 0.29,
        "silero: {:.2}% smaller",
        100.0 * reduction
    );
}

/// fracast0-int8-f32's header is 6,392 bytes of JSON (6,400 with its length field) whose keys repeat for each of its 67
/// tensors: 4,117 bytes as a Huffman literal; with back references at most 1,200 (zstd
/// -3: 1,193, xz -6: 1,120).
#[test]
fn a_json_header_is_coded_with_back_references() {
    let dir = tempfile::tempdir().unwrap();
    let (archive, _) = compressed("fracast0-int8-f32.safetensors", dir.path());
    let bytes = archive.header_archive_bytes();
    assert!(bytes <= 1_200, "header record: {bytes} bytes");
    let program = archive
        .header_program()
        .expect("header program")
        .to_string();
    assert!(program.starts_with("backref : u8[6392]"), "{program}");
}
