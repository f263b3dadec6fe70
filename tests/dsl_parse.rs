//! The text form read back (`brevis::dsl::parse`): every program the search finds on the
//! corpus prints and parses back to the same program, given the words it restores; and
//! malformed text is refused at the offending token's line and column.
//! (The property test over random programs is in `tests/dsl_roundtrip.rs`.)

mod support;

use brevis::archive::{compress_file, no_progress, Archive, CompressOptions};
use brevis::dsl::parse::{parse, ParseError};
use brevis::dsl::{MergeFn, Node, Ty};
use brevis::synth::SearchOptions;
use brevis::tensor::Words;
use support::corpus;

/// Checks every record of the archive of `file` compressed at `budget`: its program
/// prints, parses, and builds back to itself against the words it restores. Returns
/// the programs checked and the operators seen.
fn round_trip_archive(file: &str, budget: u64) -> (usize, std::collections::BTreeSet<String>) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("a.brv");
    let opts = CompressOptions {
        search: SearchOptions {
            budget,
            ..SearchOptions::default()
        },
        ..CompressOptions::default()
    };
    compress_file(&corpus(file), &out, &opts, &no_progress).unwrap();
    let a = Archive::open(&out).unwrap();
    let mut checked = 0;
    let mut ops = std::collections::BTreeSet::new();
    let mut check = |what: &str, program: Node, words: Words| {
        let text = program.to_string();
        for l in text.lines() {
            ops.insert(l.trim_start().split(' ').next().unwrap_or("").to_string());
        }
        let back = parse(&text)
            .and_then(|s| s.build(Some(&words), None))
            .unwrap_or_else(|e| panic!("{file} {what}: {e}\n{text}"));
        assert!(back == program, "{file} {what}: another program:\n{text}");
        checked += 1;
    };
    let header = a.header_bytes().unwrap();
    check(
        "header",
        a.header_program().unwrap(),
        Words::from_le_bytes(8, &header).unwrap(),
    );
    let mut seen_groups = std::collections::HashSet::new();
    for (i, t) in a.tensors().iter().enumerate() {
        if t.record.is_empty() || t.copy_of.is_some() || t.reference.is_some() {
            continue;
        }
        let bytes = match t.group {
            Some(g) => {
                if !seen_groups.insert(g) {
                    continue;
                }
                let mut b = Vec::new();
                for m in a.groups()[g].tensors.clone() {
                    b.extend(a.decode_tensor(m).unwrap());
                }
                b
            }
            None => a.decode_tensor(i).unwrap(),
        };
        let words = Words::from_le_bytes(t.dtype.word_bits(), &bytes).unwrap();
        check(&t.name, a.program(i).unwrap(), words);
    }
    (checked, ops)
}

/// The whole corpus at the default budget, and the small files at budget 8, where the
/// search finds deeper programs (`scan`, `const`, `concat`, `backref`, `transpose`).
#[test]
fn every_program_the_search_finds_on_the_corpus_parses_back() {
    let mut all_ops = std::collections::BTreeSet::new();
    let mut total = 0;
    for (file, budget) in [
        ("minilm-l6-v2-bf16.safetensors", 1),
        ("minilm-l6-v2-fp8-mixed.safetensors", 1),
        ("whisper-tiny-en-f16.safetensors", 1),
        ("easyocr-english-g2-f32.safetensors", 1),
        ("silero-vad-16k-f32.safetensors", 1),
        ("fracast0-f32.safetensors", 1),
        ("fracast0-int8-f32.safetensors", 1),
        ("minilm-l6-v2-bf16-layer0.safetensors", 8),
        ("fracast0-int8-f32.safetensors", 8),
        ("silero-vad-16k-f32.safetensors", 8),
    ] {
        let (n, ops) = round_trip_archive(file, budget);
        eprintln!("{file} budget {budget}: {n} programs, operators {ops:?}");
        total += n;
        all_ops.extend(ops);
    }
    eprintln!("{total} programs; operators {all_ops:?}");
    for op in [
        "lit",
        "merge",
        "concat",
        "backref",
        "const",
        "scan",
        "map",
        "transpose",
        "repeat",
    ] {
        assert!(all_ops.contains(op), "no {op} seen: {all_ops:?}");
    }
}

fn err(text: &str) -> ParseError {
    match parse(text) {
        Err(e) => e,
        Ok(s) => s
            .build(None, None)
            .expect_err(&format!("{text:?} was accepted")),
    }
}

fn at(text: &str, line: usize, column: usize, says: &str) {
    let e = err(text);
    assert_eq!(
        (e.line, e.column),
        (line, column),
        "{text:?}: {e} (expected line {line}, column {column})"
    );
    assert!(e.message.contains(says), "{text:?}: {e}");
}

#[test]
fn malformed_text_is_refused_at_the_offending_token() {
    // Unknown operator, codec, bijection.
    at("mrege fields[1,8,7] : u16[6]", 1, 1, "expected an operator");
    at("lit zstd : u8[3]", 1, 5, "expected a codec");
    at(
        "map rot 3 : u8[2]\n  lit raw : u8[2] = [1, 2]",
        1,
        5,
        "a bijection",
    );
    // Missing or broken type.
    at("const 7", 1, 8, "found the end of the line");
    at("const 7 u8[3]", 1, 9, "expected `:`");
    at("const 7 : i8[3]", 1, 11, "expected a type such as u16[6]");
    at("const 7 : u65[3]", 1, 11, "word width 65 is out of range");
    at("const 7 : u8[3", 1, 15, "expected `]`");
    // Literal words.
    at("lit raw : u8[3] = [1, 2]", 1, 17, "its list holds 2");
    at("lit raw : u4[2] = [1, 16]", 1, 23, "does not fit in 4 bits");
    at("lit raw : u8[2] = [1; 2]", 1, 21, "expected `,` or `]`");
    at(
        "const 7 : u8[3] = [7, 7, 7]",
        1,
        17,
        "end of the line after the type",
    );
    // Numbers.
    at(
        "const 99999999999999999999 : u64[1]",
        1,
        7,
        "does not fit in 64 bits",
    );
    at("repeat x : u8[4]", 1, 8, "the repeat count");
    // Merge widths and dequant blocks.
    at("merge fields[1,8;7] : u16[6]", 1, 17, "expected `,` or `]`");
    at(
        "dequant e4m3>bf16 cols 2 block 1by2 : u16[4]",
        1,
        32,
        "block's size",
    );
    // Indentation: odd, too deep, a second root, a tab, children of a leaf.
    at(
        "concat : u8[2]\n   const 1 : u8[1]",
        2,
        4,
        "two spaces per level",
    );
    at(
        "concat : u8[2]\n    const 1 : u8[1]",
        2,
        5,
        "one level (two spaces)",
    );
    at("const 1 : u8[1]\nconst 2 : u8[1]", 2, 1, "a second root");
    at("concat : u8[2]\n\tconst 1 : u8[1]", 2, 1, "a tab");
    at(
        "const 1 : u8[2]\n  const 1 : u8[2]",
        2,
        3,
        "has no children",
    );
    at("  const 1 : u8[2]", 1, 3, "the first node is the root");
    at("", 1, 1, "the text is empty");
    // Type rules, found when building: at the child whose type is wrong, the node whose
    // parameters are, or the literal whose words cannot be told.
    at(
        "merge fields[1,8,7] : u16[2]\n  const 0 : u1[2]\n  const 127 : u8[2]\n  const 0 : u8[2]",
        4,
        13,
        "takes a child of type u7[2] here, this one says u8[2]",
    );
    at(
        "concat : u8[5]\n  const 1 : u8[2]\n  const 2 : u8[2]",
        1,
        10,
        "concat of 5 words has children of 4 words",
    );
    at(
        "repeat 3 : u8[4]\n  const 1 : u8[2]",
        1,
        1,
        "the count must be 2 or more and divide the length",
    );
    at(
        "const 300 : u8[2]",
        1,
        1,
        "const 300 does not fit in 8 bits",
    );
    at(
        "merge fields[1,8,7] : u16[2]\n  const 0 : u1[2]\n  const 127 : u8[2]",
        1,
        1,
        "takes 3 children, it has 2",
    );
    at("lit rans : u8[2]", 1, 1, "cannot be told from the tensor");
}

#[test]
fn a_program_is_type_checked_against_the_tensor() {
    let words = Words::from_u64s(16, &[0x3F80, 0xBF80, 0x3F80, 0xBF80, 0x3F80, 0xBF80]);
    let s = parse("const 7 : u16[5]").unwrap();
    let e = s.build(Some(&words), None).unwrap_err();
    assert_eq!((e.line, e.column), (1, 11));
    assert_eq!(
        e.message,
        "the tensor is u16[6], the program's type is u16[5]"
    );
    // The paper's split with its literal left out: the words come from the tensor.
    let text = "merge fields[1,8,7] : u16[6]\n  lit bitpack : u1[6]\n  const 127 : u8[6]\n  const 0 : u7[6]\n";
    let p = parse(text).unwrap().build(Some(&words), None).unwrap();
    assert!(matches!(
        p.op(),
        brevis::dsl::Op::Merge(MergeFn::Fields(_), _)
    ));
    assert_eq!(brevis::dsl::execute(&p, 6).unwrap(), words);
    assert_eq!(p.ty(), Ty::new(16, 6));
    // A codec that does not apply is refused at the literal.
    let wide = Words::from_fn(32, 70_000, |i| i as u64 * 7919);
    let e = parse("lit huffman : u32[70000]")
        .unwrap()
        .build(Some(&wide), None)
        .unwrap_err();
    assert_eq!((e.line, e.column), (1, 1));
    assert!(e.message.contains("codec huffman does not apply"), "{e}");
}
