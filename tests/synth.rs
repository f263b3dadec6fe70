//! The synthesizer: returned programs execute to their targets, are never larger than
//! `Lit(target)`, report their exact size, and find known structure.

use brevis::dsl::{execute, program_len, MergeFn, Node, Ty};
use brevis::synth::{synthesize, SearchOptions};
use brevis::tensor::{Dtype, Words};
use proptest::prelude::*;

fn opts(budget: u64) -> SearchOptions {
    SearchOptions {
        budget,
        ..SearchOptions::default()
    }
}

fn f32_words(values: &[f32]) -> Words {
    Words::from_u64s(
        32,
        &values
            .iter()
            .map(|v| u64::from(v.to_bits()))
            .collect::<Vec<_>>(),
    )
}

fn check(target: &Words, dtype: Option<Dtype>, budget: u64) -> String {
    let s = synthesize(target, dtype, &opts(budget));
    assert_eq!(execute(&s.program, u64::MAX).unwrap(), *target);
    assert_eq!(program_len(&s.program), s.bytes);
    let lit = program_len(&brevis::dsl::Node::lit(target));
    assert!(s.bytes <= lit, "{} > lit {}", s.bytes, lit);
    s.program.to_string()
}

/// The paper's program for the worked example (§3.2), built by hand: a float-field merge
/// with `repeat 3` of `lit [0, 1]` on the sign and constant exponent and mantissa.
fn paper_program() -> Node {
    let sign = Node::repeat(3, Node::lit(&Words::from_u64s(1, &[0, 1]))).unwrap();
    let exp = Node::constant(Ty::new(8, 6), 127).unwrap();
    let man = Node::constant(Ty::new(23, 6), 0).unwrap();
    Node::merge(MergeFn::Fields(vec![1, 8, 23]), vec![sign, exp, man]).unwrap()
}

/// Paper §3.2: the F32 words of (+1, -1, +1, -1, +1, -1). The paper's program is valid
/// and executes to the target (14 bytes); with budget enough the search finds a smaller
/// one (7 bytes): rotating each word right by 23 bits leaves 127 or 383 (the exponent,
/// with the sign above it), which alternate by XOR with 256.
#[test]
fn worked_example_paper_program_and_search() {
    let t = f32_words(&[1.0, -1.0, 1.0, -1.0, 1.0, -1.0]);
    let paper = paper_program();
    assert_eq!(execute(&paper, 100).unwrap(), t);
    assert_eq!(
        paper.to_string(),
        "merge fields[1,8,23] : u32[6]\n  repeat 3 : u1[6]\n    lit raw : u1[2] = [0, 1]\n  const 127 : u8[6]\n  const 0 : u23[6]\n"
    );
    assert_eq!(program_len(&paper), 14);

    let found = synthesize(&t, Some(Dtype::F32), &opts(200));
    assert_eq!(
        check(&t, Some(Dtype::F32), 200),
        "map rotl 23 : u32[6]\n  scan xor 127 : u32[6]\n    const 256 : u32[5]\n"
    );
    assert_eq!(found.bytes, 7);
    assert!(found.stats.candidates > 100);
}

/// At depth 2 the search rotates the exponent to the bottom and codes the two words
/// that remain with a two-symbol Huffman table.
#[test]
fn worked_example_depth_two_is_repeat() {
    let t = f32_words(&[1.0, -1.0, 1.0, -1.0, 1.0, -1.0]);
    let s = synthesize(
        &t,
        Some(Dtype::F32),
        &SearchOptions {
            budget: 200,
            max_depth: 2,
            ..SearchOptions::default()
        },
    );
    assert_eq!(
        s.program.to_string(),
        "map rotl 23 : u32[6]\n  lit huffman : u32[6] = [127, 383, 127, 383, 127, 383]\n"
    );
    assert_eq!(s.bytes, 9);
}

#[test]
fn budget_zero_is_literal() {
    let t = f32_words(&[1.0, 2.0, 3.0]);
    let s = synthesize(&t, Some(Dtype::F32), &opts(0));
    assert!(s.stats.literal_fallback);
    assert_eq!(s.program.op_name(), "lit");
}

#[test]
fn constant_tensor_becomes_const() {
    let t = Words::filled(16, 0x3F80, 1000);
    assert_eq!(check(&t, Some(Dtype::BF16), 1), "const 16256 : u16[1000]\n");
}

#[test]
fn arithmetic_sequence_becomes_scan_of_const() {
    let t = Words::from_fn(64, 512, |i| i as u64);
    assert_eq!(
        check(&t, Some(Dtype::I64), 4),
        "scan add 0 : u64[512]\n  const 1 : u64[511]\n"
    );
}

#[test]
fn synthesis_is_deterministic() {
    let t = Words::from_fn(16, 5000, |i| ((i * 2654435761) >> 7) as u64 & 0x3FFF);
    let a = synthesize(&t, Some(Dtype::BF16), &opts(8));
    let b = synthesize(&t, Some(Dtype::BF16), &opts(8));
    assert_eq!(a.program, b.program);
    assert_eq!(a.stats, b.stats);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn every_program_executes_to_its_target(width in prop::sample::select(vec![8u32, 16, 32, 64]),
                                            vals in proptest::collection::vec(0u64..6, 0..200),
                                            seed in any::<u64>(), budget in 0u64..12) {
        // Few distinct values, spread over the word's bit range.
        let t = Words::from_fn(width, vals.len(), |i| vals[i].wrapping_mul(seed | 1));
        let dtype = match width { 8 => Dtype::F8E4M3, 16 => Dtype::BF16, 32 => Dtype::F32, _ => Dtype::I64 };
        check(&t, Some(dtype), budget);
    }
}

/// The fast level's fixed layout (`synth::fast::program`) restores every float target
/// it takes, whatever the dtype, the length (a table's 4,096 words and up, past one
/// 64-state group and not a multiple of one), the spread of the exponents and the
/// signs (all positive, mixed, one sign flipped), and words outside the coded set (rare
/// exponents escaped): its size is its program's serialized length.
mod fast_layout {
    use brevis::synth::fast;
    use brevis::{Dtype, Words};
    use proptest::prelude::*;

    fn float_dtype() -> impl Strategy<Value = Dtype> {
        prop::sample::select(vec![
            Dtype::BF16,
            Dtype::F16,
            Dtype::F32,
            Dtype::F64,
            Dtype::F8E4M3,
            Dtype::F8E5M2,
        ])
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]
        #[test]
        fn the_layout_runs_back(
            dtype in float_dtype(),
            n in 4096usize..9000,
            spread in 0u32..12,
            signs in 0u8..3,
            rare in 0usize..40,
            seed in any::<u64>(),
        ) {
            let width = dtype.word_bits();
            let [_, e, m] = dtype.float_layout().unwrap();
            let mut s = seed | 1;
            let mut next = move || {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                s
            };
            let bias = (1u64 << (e - 1)) - 1;
            let words = Words::from_fn(width, n, |i| {
                let r = next();
                // Exponents near the bias, `spread` bits of them; a few anywhere.
                let exp = if i % 997 < rare {
                    r >> 40
                } else {
                    bias - (r >> 20) % (1 + (1 << spread.min(e - 1)) as u64).min(bias)
                } & ((1 << e) - 1);
                let sign = match signs {
                    0 => 0,
                    1 => r >> 63,
                    _ => u64::from(i == n / 2),
                };
                (sign << (width - 1)) | (exp << m) | (next() & ((1u64 << m) - 1))
            });
            let (node, bytes) = fast::program(&words, Some(dtype));
            prop_assert_eq!(bytes, brevis::dsl::program_len(&node));
            prop_assert_eq!(brevis::dsl::execute(&node, u64::MAX).unwrap(), words);
        }
    }
}
