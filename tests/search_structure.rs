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

/// A period that does not divide the length (3,000 copies of three words, then two more)
/// becomes whole periods then the head of one more, at the default budget of one
/// expansion: 1,815 bytes of rANS literal before, 27 now (both exact program sizes).
#[test]
fn partial_repeats_become_concat_of_repeat_and_head() {
    let t = Words::from_fn(32, 9002, |i| [7, 300, (-5i32) as u32 as u64][i % 3]);
    let s = synthesize(&t, Some(Dtype::I32), &SearchOptions::default());
    assert_eq!(
        shape(&s.program.to_string()),
        "concat : u32[9002]\n  repeat 3000 : u32[9000]\n    lit raw : u32[3]\n  lit bitpack : u32[2]"
    );
    assert_eq!(execute(&s.program, u64::MAX).unwrap(), t);
    assert_eq!((s.bytes, program_len(&Node::lit(&t))), (27, 1815));
    // A tail that is not the period's head is a literal of its own all the same.
    let t = Words::from_fn(32, 9002, |i| {
        if i < 9000 {
            [7, 300, (-5i32) as u32 as u64][i % 3]
        } else {
            [1, 2][i - 9000]
        }
    });
    let s = synthesize(&t, Some(Dtype::I32), &SearchOptions::default());
    assert_eq!(
        shape(&s.program.to_string()),
        "concat : u32[9002]\n  repeat 3000 : u32[9000]\n    lit raw : u32[3]\n  lit bitpack : u32[2]"
    );
    assert_eq!(execute(&s.program, u64::MAX).unwrap(), t);
}

#[test]
fn arithmetic_sequence_becomes_scan_of_const() {
    let t = Words::from_fn(32, 2000, |i| 5 + 7 * i as u64);
    assert_eq!(
        shape(&found(&t, None, 6)),
        "scan add 5 : u32[2000]\n  const 7 : u32[1999]"
    );
}

/// Per-row scales: 32 rows of 128 BF16 values, each row one power-of-two scale (its
/// exponent) times a mantissa pattern every row shares. Before back references the
/// search split sign and exponent from the mantissa (`fields[9,7]`: the exponent a delta
/// stream, the mantissa one row repeated; 169 bytes at budget 64). With them it finds a
/// third of that: the second differences of the words are the same in every row but at
/// its start, so after the first row each row is a copy from 128 words back, 11 tokens
/// in all (67 bytes).
///
/// A* orders by prior cost, so with uniform costs it first spends its expansions on
/// one-hole programs; the two scans and the back references need three expansions in a
/// row, which budget 64 reaches.
#[test]
fn per_row_scales_become_copies_of_the_row_before() {
    let t = Words::from_fn(16, 32 * 128, |i| {
        let (row, col) = (i / 128, i % 128);
        let exp = 100 + row as u64;
        let man = ((col * col * 11 + col * 37 + 3) % 128) as u64;
        (exp << 7) | man
    });
    assert_eq!(
        shape(&found(&t, Some(Dtype::BF16), 64)),
        "scan add 12803 : u16[4096]\n  scan add 48 : u16[4095]\n    backref : u16[4094]\n      lit huffman : u16[11]\n      lit bitpack : u3[11]\n      lit huffman : u12[11]\n      lit raw : u7[11]\n      lit bitpack : u1[11]"
    );
    let s = synthesize(
        &t,
        Some(Dtype::BF16),
        &SearchOptions {
            budget: 64,
            ..SearchOptions::default()
        },
    );
    assert_eq!(s.bytes, 67);
}
