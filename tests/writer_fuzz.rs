//! The writer fuzzer's property on stable Rust (issue 38): random valid `.safetensors`
//! files (`fuzz/src/entries.rs`, `safetensors_of`: every dtype including sub-byte ones,
//! empty tensors at any offset, scalars, shapes, gaps and trailing bytes, payloads shared
//! under other names, dtypes and widths, metadata), each compressed at budgets 0, 1 and
//! 2 and at the fast level, without a base, against itself and against a copy with one
//! tensor changed, then restored byte for byte, each tensor decoded alone, and the
//! archive cut short and salvaged. A bounded run here; `cargo fuzz run writer` runs it without end (the
//! committed inputs it found are replayed by `tests/hostile_fuzz_replay.rs`).

#[allow(dead_code)]
#[path = "../fuzz/src/entries.rs"]
mod entries;

use entries::{safetensors_of, writer_round_trip, BaseChoice, Choices};
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 256,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Every generated file round-trips at every budget, the fast level and every base,
    /// and salvages when cut.
    #[test]
    fn random_valid_files_round_trip_at_every_budget_and_base(
        choices in proptest::collection::vec(any::<u8>(), 0..400),
        cut in any::<usize>(),
    ) {
        let file = safetensors_of(&mut Choices::new(&choices));
        use brevis::synth::Level;
        let settings = [
            (Level::Default, 0),
            (Level::Default, 1),
            (Level::Default, 2),
            (Level::Fast, 0),
        ];
        for (level, budget) in settings {
            for base in [BaseChoice::None, BaseChoice::Itself, BaseChoice::OneChanged] {
                writer_round_trip(&file, level, budget, base, cut);
            }
        }
    }
}

/// The generator makes what it promises: over a spread of inputs, files with every
/// dtype, empty tensors, scalars, gaps, trailing bytes, metadata and shared payloads
/// under another dtype; each parses.
#[test]
fn the_generator_covers_what_the_writer_must_take() {
    use brevis::archive::safetensors::parse;
    let mut dtypes = std::collections::BTreeSet::new();
    let (mut empty, mut scalar, mut gaps, mut metadata, mut shared) = (0, 0, 0, 0, 0);
    for seed in 0u32..2000 {
        let bytes: Vec<u8> = (0..400u32)
            .map(|i| {
                (seed.wrapping_mul(2_654_435_761) ^ i.wrapping_mul(40_503)).rotate_left(i % 29)
                    as u8
            })
            .collect();
        let file = safetensors_of(&mut Choices::new(&bytes));
        let src = parse(&file).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        for t in src.tensors() {
            dtypes.insert(t.dtype.name());
            empty += usize::from(t.begin == t.end);
            scalar += usize::from(t.shape.is_empty());
        }
        gaps += usize::from(!src.warnings().is_empty());
        metadata += usize::from(src.metadata().is_some());
        let payloads: Vec<(&[u8], &str)> = src
            .tensors()
            .iter()
            .enumerate()
            .filter(|(_, t)| t.begin != t.end)
            .map(|(i, t)| (src.tensor_bytes(i), t.dtype.name()))
            .collect();
        shared += usize::from(
            payloads
                .iter()
                .enumerate()
                .any(|(i, (b, d))| payloads[..i].iter().any(|(b2, d2)| b == b2 && d != d2)),
        );
    }
    assert_eq!(dtypes.len(), brevis::tensor::ALL_DTYPES.len(), "{dtypes:?}");
    for (what, n) in [
        ("empty tensors", empty),
        ("scalars", scalar),
        ("gaps or trailing bytes", gaps),
        ("metadata", metadata),
        ("payloads shared under another dtype", shared),
    ] {
        assert!(n >= 20, "{what}: {n} in 2000 files");
    }
}
