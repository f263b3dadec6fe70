//! Replays the committed fuzz inputs (`tests/data/fuzz/<target>/*`) through the same entry
//! functions the cargo-fuzz targets call (`fuzz/src/entries.rs`), on stable Rust, so a
//! crash once found stays fixed.

#[allow(dead_code)]
#[path = "../fuzz/src/entries.rs"]
mod entries;

use std::path::Path;

/// A fuzz target's name and the function it calls.
type Target = (&'static str, fn(&[u8]));

/// Every fuzz target and its entry point.
const TARGETS: [Target; 14] = [
    ("program", entries::program),
    ("lit_raw", |d| {
        entries::literal(brevis::codec::CodecId::Raw, d)
    }),
    ("lit_bitpack", |d| {
        entries::literal(brevis::codec::CodecId::BitPack, d)
    }),
    ("lit_huffman", |d| {
        entries::literal(brevis::codec::CodecId::Huffman, d)
    }),
    ("lit_rans", |d| {
        entries::literal(brevis::codec::CodecId::Rans, d)
    }),
    ("lit_rans32", |d| {
        entries::literal(brevis::codec::CodecId::Rans32, d)
    }),
    ("lit_rans8", |d| {
        entries::literal(brevis::codec::CodecId::Rans8, d)
    }),
    ("lit_rans8_simd", entries::rans8_simd),
    ("fused", entries::fused),
    ("lit_bucket", entries::literal_bucket),
    ("archive", entries::archive),
    ("safetensors", entries::safetensors),
    ("roundtrip", entries::roundtrip),
    ("writer", entries::writer),
];

#[test]
fn committed_fuzz_inputs_replay_without_panics() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/fuzz");
    let mut replayed = 0;
    for (target, entry) in TARGETS {
        let Ok(dir) = std::fs::read_dir(root.join(target)) else {
            continue;
        };
        let mut files: Vec<_> = dir.filter_map(|e| e.ok()).map(|e| e.path()).collect();
        files.sort();
        for f in files {
            let data = std::fs::read(&f).unwrap();
            let r = std::panic::catch_unwind(|| entry(&data));
            assert!(r.is_ok(), "{target}: {} panicked", f.display());
            replayed += 1;
        }
    }
    eprintln!("replayed {replayed} committed fuzz inputs");
}

/// Every entry survives trivial inputs (empty, one byte, all-ones).
#[test]
fn fuzz_entries_accept_trivial_inputs() {
    for (_, entry) in TARGETS {
        for data in [
            &[][..],
            &[0],
            &[0xff; 64],
            &[4, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 0x20, 1],
        ] {
            entry(data);
        }
    }
}

/// The round-trip entry on every dtype, with lengths that are not whole elements, NaN
/// payloads, -0.0 and a run of equal words.
#[test]
fn every_dtype_round_trips_through_the_fuzz_harness() {
    let mut data: Vec<u8> = (0..999u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    data.extend_from_slice(&f32::NAN.to_le_bytes());
    data.extend_from_slice(&(-0.0f64).to_le_bytes());
    data.extend_from_slice(&[7; 300]);
    for dtype in brevis::tensor::ALL_DTYPES {
        for budget in [0, 1, 6] {
            for len in [0, 1, 3, 17, data.len()] {
                entries::roundtrip_dtype(dtype, budget, &data[..len]);
            }
        }
    }
}
