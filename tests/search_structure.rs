//! The search finds known structure in synthetic tensors (DESIGN §6): constant regions,
//! exact repeats, arithmetic sequences and per-row scales. The exact program text is
//! asserted, and every program executes to its target and is never larger than
//! `Lit(target)`.

use brevis::dsl::{execute, program_len, Node};
use brevis::synth::{synthesize, SearchOptions};
use brevis::tensor::{Dtype, Words};

fn found(t: &Words, dtype: Option<Dtype>, budget: u64) -> String {
    let s = synthesize(
        t,
        dtype,
        &SearchOptions {
            budget,
            ..SearchOptions::default()
        },
    );
    assert_eq!(execute(&s.program, u64::MAX).unwrap(), *t);
    assert_eq!(program_len(&s.program), s.bytes);
    assert!(s.bytes <= program_len(&Node::lit(t)));
    s.program.to_string()
}

/// Drops the literal payloads shown after `=` so the assertions name the structure.
fn shape(text: &str) -> String {
    text.lines()
        .map(|l| l.split(" = ").next().unwrap_or(l))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn constant_region_becomes_concat_with_const() {
    let mut x: u64 = 0x2545_F491_4F6C_DD1D;
    let t = Words::from_fn(8, 1200, |i| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        if i < 1000 {
            0
        } else {
            x % 251
        }
    });
    assert_eq!(
        shape(&found(&t, None, 6)),
        "concat : u8[1200]\n  const 0 : u8[1000]\n  lit raw : u8[200]"
    );
}

#[test]
fn exact_repeats_become_repeat() {
    let t = Words::from_fn(16, 1500, |i| [0x3F80, 0x1234, 0xBEEF][i % 3]);
    assert_eq!(
        shape(&found(&t, None, 1)),
        "repeat 500 : u16[1500]\n  lit raw : u16[3]"
    );
}

#[test]
fn arithmetic_sequence_becomes_scan_of_const() {
    let t = Words::from_fn(32, 2000, |i| 5 + 7 * i as u64);
    assert_eq!(
        shape(&found(&t, None, 6)),
        "scan add 5 : u32[2000]\n  const 7 : u32[1999]"
    );
}

/// Known gap: at budget 32 with uniform costs the search returns
/// `scan add 12800 : u16[4096]` over a rANS literal; the field split (const sign,
/// exponent runs per row, repeated mantissa) has three holes, so A* with a per-hole
/// heuristic spends the budget on the one-hole scan first. Needs row-block `Concat`
/// proposals or a calibrated prior that prefers the split; see issue 4.
#[test]
#[ignore = "per-row scale structure not found yet (see doc comment)"]
fn per_row_scales_split_the_float_fields() {
    // 32 rows of 128 BF16 values: each row is a power-of-two scale times one shared
    // mantissa pattern, so the exponent field carries the rows and the rest repeats.
    let t = Words::from_fn(16, 32 * 128, |i| {
        let (row, col) = (i / 128, i % 128);
        let exp = 100 + row as u64;
        let man = (col * 5 % 128) as u64;
        (exp << 7) | man
    });
    assert_eq!(shape(&found(&t, Some(Dtype::BF16), 32)), "merge fields[1,8,7] : u16[4096]\n  const 0 : u1[4096]\n  concat : u8[4096]\n  repeat 32 : u7[4096]");
}
