//! The decoding path (`dsl::fused::execute_into`) against the reference executor
//! (`dsl::execute`) on random `merge fields[...]` programs: every container width, fields
//! of 2 to 4, each a literal of `rans8` (with escapes), bit packing or raw words, or a
//! constant, at lengths around the fused loop's block of 2,048 words. The fused loop
//! lets a `rans8` field write the output's words itself (its values shifted into place)
//! and ORs bit-packed fields into them without a buffer between (SIMD where the
//! processor has it); the bytes must be the reference's, byte for byte.

use brevis::codec::{select, CodecId};
use brevis::dsl::fused::execute_into;
use brevis::dsl::{execute, MergeFn, Node, Ty};
use brevis::tensor::{mask, Words};
use proptest::prelude::*;

mod support;
use support::Rng;

/// A field of `n` words of `width` bits: mostly a few common values (what `rans8`
/// codes), some rare ones (its escapes), as a float's exponent field looks.
fn field_words(rng: &mut Rng, width: u32, n: usize) -> Words {
    let common: Vec<u64> = (0..1 + rng.below(40))
        .map(|_| rng.next() & mask(width))
        .collect();
    let rare = rng.below(20);
    Words::from_fn(width, n, |_| {
        if rng.below(100) < rare {
            rng.next() & mask(width)
        } else {
            common[rng.below(common.len() as u64) as usize]
        }
    })
}

/// A leaf for `words`: a literal of `codec` (when it can code them), else the smallest.
fn leaf(words: &Words, codec: CodecId) -> Node {
    match select::encode_with(codec, words) {
        Some(e) => Node::lit_encoded(Ty::new(words.width(), words.len() as u64), e.into()).unwrap(),
        None => Node::lit(words),
    }
}

fn check(seed: u64) {
    let mut rng = Rng(seed | 1);
    let width = [8u32, 16, 32, 64][rng.below(4) as usize];
    // Two to four field widths summing to `width`, each at least 1.
    let parts = 2 + rng.below(3) as usize;
    let mut cuts: Vec<u32> = (0..parts - 1)
        .map(|_| 1 + rng.below(u64::from(width) - 1) as u32)
        .collect();
    cuts.sort_unstable();
    cuts.dedup();
    let mut widths = Vec::new();
    let mut at = 0;
    for c in cuts.into_iter().chain([width]) {
        widths.push(c - at);
        at = c;
    }
    let n = [1usize, 63, 64, 2047, 2048, 2049, 4096 + 77, 9000][rng.below(8) as usize];
    let children: Vec<Node> = widths
        .iter()
        .map(|&w| {
            let words = field_words(&mut rng, w, n);
            match rng.below(5) {
                0 | 1 => leaf(&words, CodecId::Rans8),
                2 => leaf(&words, CodecId::BitPack),
                3 => leaf(&words, CodecId::Raw),
                _ => Node::constant(Ty::new(w, n as u64), rng.next() & mask(w)).unwrap(),
            }
        })
        .collect();
    let node = Node::merge(MergeFn::Fields(widths.clone()), children).unwrap();
    let mut want = Vec::new();
    execute(&node, u64::MAX).unwrap().write_le_bytes(&mut want);
    let mut got = vec![0xA5u8; want.len()];
    execute_into(&node, &mut got).unwrap();
    assert!(
        got == want,
        "seed {seed}: merge fields{widths:?} of {n} words"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]
    #[test]
    fn fused_merge_writes_the_reference_bytes(seed in any::<u64>()) {
        check(seed);
    }
}

/// The layouts the fast level writes for every float dtype, whole: sign, exponent with
/// the top mantissa bits by `rans8`, the rest packed.
#[test]
fn fast_level_layouts_decode_as_the_reference() {
    for (width, widths) in [
        (16u32, vec![1u32, 11, 4]),
        (16, vec![1, 8, 7]),
        (16, vec![1, 9, 6]),
        (32, vec![1, 11, 20]),
        (32, vec![1, 12, 19]),
        (64, vec![1, 14, 49]),
    ] {
        let mut rng = Rng(u64::from(width) * 1000 + u64::from(widths[1]));
        let n = 5000;
        let children: Vec<Node> = widths
            .iter()
            .enumerate()
            .map(|(i, &w)| {
                let words = field_words(&mut rng, w, n);
                leaf(
                    &words,
                    if i == 1 {
                        CodecId::Rans8
                    } else {
                        CodecId::BitPack
                    },
                )
            })
            .collect();
        let node = Node::merge(MergeFn::Fields(widths.clone()), children).unwrap();
        let mut want = Vec::new();
        execute(&node, u64::MAX).unwrap().write_le_bytes(&mut want);
        let mut got = vec![0u8; want.len()];
        execute_into(&node, &mut got).unwrap();
        assert!(got == want, "merge fields{widths:?} of {width}-bit words");
    }
}
