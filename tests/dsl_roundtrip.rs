//! Property tests of the language: every operator round-trips, the wire format is the
//! identity on random valid programs, the per-node size report adds up, and hostile
//! program bytes are refused without panicking.

use brevis::dsl::exec::{map_words, merge_fields, scan, split_fields, unscan};
use brevis::dsl::wire::{
    program_bytes, program_end, program_len, program_pieces, read_program, size_report, Piece,
};
use brevis::dsl::{execute, MapFn, MergeFn, Node, ScanFn, Ty};
use brevis::tensor::{mask, Words};
use proptest::prelude::*;

mod support;
use support::Rng;

impl Rng {
    fn word(&mut self, width: u32) -> u64 {
        // Mix of small values, extremes and arbitrary bit patterns.
        let v = match self.below(4) {
            0 => self.below(4),
            1 => mask(width) - self.below(2).min(mask(width)),
            _ => self.next(),
        };
        v & mask(width)
    }
}

fn random_words(rng: &mut Rng, width: u32, n: u64) -> Words {
    let distinct = 1 + rng.below(6);
    let pool: Vec<u64> = (0..distinct).map(|_| rng.word(width)).collect();
    let wild = rng.below(2) == 0;
    Words::from_fn(width, n as usize, |_| {
        if wild {
            rng.word(width)
        } else {
            pool[rng.below(distinct) as usize]
        }
    })
}

/// A random well-typed program of type `ty`.
fn random_program(rng: &mut Rng, ty: Ty, depth: u32) -> Node {
    let leaf = depth >= 4 || rng.below(3) == 0;
    if leaf || ty.len == 0 {
        if ty.len >= 1 && rng.below(3) == 0 {
            return Node::constant(ty, rng.word(ty.width)).unwrap();
        }
        return Node::lit(&random_words(rng, ty.width, ty.len));
    }
    let b = ty.width;
    let n = ty.len;
    loop {
        match rng.below(9) {
            8 if b == 16 || b == 32 => {
                // Dequant: random codes and scales (NaNs included) over a random tiling.
                use brevis::dsl::narrow::{Code, Out};
                let cols_of: Vec<u64> = (1..=n).filter(|c| n.is_multiple_of(*c)).collect();
                let cols = cols_of[rng.below(cols_of.len() as u64) as usize];
                let rows = n / cols;
                let code = [Code::E4M3, Code::E5M2, Code::F16, Code::BF16][rng.below(4) as usize];
                let out = match (b, rng.below(2)) {
                    (32, _) => Out::F32,
                    (_, 0) => Out::Bf16,
                    _ => Out::F16,
                };
                let codes_ty = Ty::new(code.width(), n);
                if code.width() == 16 && rng.below(2) == 0 {
                    // A cast: 16-bit codes without scales.
                    let codes = random_program(rng, codes_ty, depth + 1);
                    return Node::dequant_cast(code, out, codes).unwrap();
                }
                let d = brevis::dsl::Dequant {
                    code,
                    out,
                    cols,
                    block_rows: 1 + rng.below(rows),
                    block_cols: 1 + rng.below(cols),
                };
                let blocks = d.blocks(n).unwrap();
                let codes = random_program(rng, codes_ty, depth + 1);
                let scales = random_program(rng, Ty::new(32, blocks), depth + 1);
                return Node::dequant(d, n, codes, scales).unwrap();
            }
            7 => {
                let rows: Vec<u64> = (2..=n / 2).filter(|r| n.is_multiple_of(*r)).collect();
                if let Some(&r) = rows.get(rng.below(rows.len() as u64) as usize) {
                    let child = random_program(rng, ty, depth + 1);
                    return Node::transpose(r, child).unwrap();
                }
            }
            6 => {
                // Back references: the match finder's parse of words with reuse (a small
                // pool), its four streams each a random program of their type.
                let t = random_words(rng, b, n);
                let p = brevis::synth::backref::parse(&t);
                let kids = p
                    .children()
                    .iter()
                    .map(|w| {
                        let cty = Ty::new(w.width(), w.len() as u64);
                        if rng.below(2) == 0 {
                            Node::lit(w)
                        } else {
                            random_program_of(rng, cty, w, depth + 1)
                        }
                    })
                    .collect();
                return Node::backref(n, kids).unwrap();
            }
            0 if n >= 2 => {
                let cut = 1 + rng.below(n - 1);
                let a = random_program(rng, Ty::new(b, cut), depth + 1);
                let c = random_program(rng, Ty::new(b, n - cut), depth + 1);
                return Node::concat(vec![a, c]).unwrap();
            }
            1 => {
                let divisors: Vec<u64> = (2..=n).filter(|k| n.is_multiple_of(*k)).collect();
                if let Some(&k) = divisors.get(rng.below(divisors.len() as u64) as usize) {
                    let child = random_program(rng, Ty::new(b, n / k), depth + 1);
                    return Node::repeat(k, child).unwrap();
                }
            }
            2 => {
                let f = match rng.below(6) {
                    0 => MapFn::Xor(rng.word(b)),
                    1 => MapFn::Add(rng.word(b)),
                    2 => MapFn::ZigZag,
                    3 => MapFn::Gray,
                    4 => MapFn::BitRev,
                    _ if b >= 2 => MapFn::RotL(1 + rng.below(u64::from(b) - 1) as u32),
                    _ => MapFn::Gray,
                };
                return Node::map(f, random_program(rng, ty, depth + 1)).unwrap();
            }
            3 if n >= 2 => {
                let f = if rng.below(2) == 0 {
                    ScanFn::Xor
                } else {
                    ScanFn::Add
                };
                let child = random_program(rng, Ty::new(b, n - 1), depth + 1);
                return Node::scan(f, rng.word(b), child).unwrap();
            }
            4 if b >= 2 => {
                let (f, widths) = if b.is_multiple_of(8) && b >= 16 && rng.below(2) == 0 {
                    (MergeFn::BytePlanes, vec![8; (b / 8) as usize])
                } else if b <= 8 && rng.below(2) == 0 {
                    (MergeFn::BitPlanes, vec![1; b as usize])
                } else {
                    let cut = 1 + rng.below(u64::from(b) - 1) as u32;
                    (MergeFn::Fields(vec![b - cut, cut]), vec![b - cut, cut])
                };
                let kids = widths
                    .iter()
                    .map(|&w| random_program(rng, Ty::new(w, n), depth + 1))
                    .collect();
                return Node::merge(f, kids).unwrap();
            }
            5 => return Node::lit(&random_words(rng, b, n)),
            _ => {}
        }
    }
}

/// A program of type `ty` producing exactly `words`: a literal, or a concat of two
/// literals (so that backref's children are not always plain literals).
fn random_program_of(rng: &mut Rng, ty: Ty, words: &Words, _depth: u32) -> Node {
    let n = words.len();
    if n >= 2 && rng.below(2) == 0 {
        let cut = 1 + rng.below(n as u64 - 1) as usize;
        let node = Node::concat(vec![
            Node::lit(&words.slice(0, cut)),
            Node::lit(&words.slice(cut, n)),
        ])
        .unwrap();
        assert_eq!(node.ty(), ty);
        return node;
    }
    Node::lit(words)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn wire_round_trip_is_identity(seed in 1u64.., width in 1u32..=64, n in 0u64..40) {
        let mut rng = Rng(seed);
        let ty = Ty::new(width, n);
        let p = random_program(&mut rng, ty, 0);
        let bytes = program_bytes(&p);
        prop_assert_eq!(bytes.len() as u64, program_len(&p));
        let back = read_program(&bytes, ty).unwrap();
        prop_assert_eq!(&back, &p);
        // Its extent is found without copying bodies, with anything after it, and a
        // program cut short is refused there as by the full reader.
        let mut longer = bytes.clone();
        longer.extend_from_slice(&[0xAB, 0xCD]);
        prop_assert_eq!(program_end(&longer, ty).unwrap(), bytes.len());
        prop_assert_eq!(program_end(&bytes, ty).unwrap(), bytes.len());
        if !bytes.is_empty() {
            let cut = &bytes[..bytes.len() - 1];
            prop_assert_eq!(program_end(cut, ty).unwrap_err(), read_program(cut, ty).unwrap_err());
        }
        // Executing the read program gives the same words.
        prop_assert_eq!(execute(&back, 1 << 20).unwrap(), execute(&p, 1 << 20).unwrap());
        // The per-node report sums to the serialized length.
        let report = size_report(&p);
        prop_assert_eq!(report.len(), p.node_count());
        prop_assert_eq!(report.iter().map(|r| r.own_bytes).sum::<u64>(), bytes.len() as u64);
        prop_assert_eq!(report[0].subtree_bytes, bytes.len() as u64);
        // The pieces of a vectored write are the same bytes, no two framing pieces in a
        // row and no empty one.
        let mut framing = Vec::new();
        let mut pieces = Vec::new();
        program_pieces(&p, &mut framing, &mut pieces);
        let mut joined = Vec::new();
        for (k, piece) in pieces.iter().enumerate() {
            match piece {
                Piece::Framing(r) => {
                    prop_assert!(!r.is_empty());
                    prop_assert!(k == 0 || matches!(pieces[k - 1], Piece::Body(_)));
                    joined.extend_from_slice(&framing[r.clone()]);
                }
                Piece::Body(b) => joined.extend_from_slice(b),
            }
        }
        prop_assert_eq!(joined, bytes);
    }

    /// The text form reads back (`brevis::dsl::parse`): every random program prints and
    /// parses to itself given the words it produces. Without the program as a reference,
    /// the literals' words come from the target alone; that works wherever the target
    /// determines them, which is everywhere but below a `dequant` (random codes and
    /// scales whose product many codes give): there the program itself is the
    /// reference, as the archive's program is in the playground.
    #[test]
    fn text_form_parses_back_to_the_same_program(seed in 1u64.., width in 1u32..=64, n in 0u64..40) {
        let mut rng = Rng(seed);
        let ty = Ty::new(width, n);
        let p = random_program(&mut rng, ty, 0);
        let text = p.to_string();
        let target = execute(&p, 1 << 20).unwrap();
        let sketch = brevis::dsl::parse::parse(&text)
            .unwrap_or_else(|e| panic!("{e}\n{text}"));
        prop_assert_eq!(sketch.node_count(), p.node_count());
        let has_dequant = text.lines().any(|l| l.trim_start().starts_with("dequant"));
        let alone = sketch.build(Some(&target), None);
        if alone.as_ref() != Ok(&p) {
            prop_assert!(has_dequant, "{:?}\n{}", alone, text);
            let back = sketch.build(Some(&target), Some(&p)).unwrap();
            prop_assert_eq!(&back, &p, "{}", text);
        }
    }

    #[test]
    fn hostile_program_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64),
                                         width in 1u32..=64, n in 0u64..1000) {
        if let Ok(p) = read_program(&bytes, Ty::new(width, n)) {
            prop_assert_eq!(p.ty(), Ty::new(width, n));
            let _ = execute(&p, 1 << 16);
        }
    }

    #[test]
    fn map_and_scan_invert(seed in 1u64.., width in 1u32..=64, n in 1usize..100) {
        let mut rng = Rng(seed);
        let w = random_words(&mut rng, width, n as u64);
        let mut fams = vec![MapFn::Xor(rng.word(width)), MapFn::Add(rng.word(width)),
                            MapFn::ZigZag, MapFn::Gray, MapFn::BitRev];
        if width >= 2 {
            fams.push(MapFn::RotL(1 + rng.below(u64::from(width) - 1) as u32));
        }
        for f in fams {
            prop_assert_eq!(map_words(&map_words(&w, f, true), f, false), w.clone());
        }
        for f in [ScanFn::Xor, ScanFn::Add] {
            let (first, u) = unscan(f, &w).unwrap();
            prop_assert_eq!(scan(f, first, &u), w.clone());
        }
        if width >= 2 {
            let cut = 1 + rng.below(u64::from(width) - 1) as u32;
            let widths = [width - cut, cut];
            prop_assert_eq!(merge_fields(&split_fields(&w, &widths), &widths), w.clone());
        }
    }
}

#[test]
fn wire_bytes_of_a_worked_program_are_exact() {
    // merge fields[1,8,7] : u16[6] of (sign repeat, const 127, const 0).
    let sign = Node::repeat(3, Node::lit(&Words::from_u64s(1, &[0, 1]))).unwrap();
    let e = Node::constant(Ty::new(8, 6), 127).unwrap();
    let m = Node::constant(Ty::new(7, 6), 0).unwrap();
    let p = Node::merge(MergeFn::Fields(vec![1, 8, 7]), vec![sign, e, m]).unwrap();
    let bytes = program_bytes(&p);
    // merge tag, k=3, widths 1 and 8; repeat tag, k=3; lit (raw) tag, body length 2,
    // body [0, 1]; const tag, 127; const tag, 0.
    assert_eq!(
        bytes,
        vec![0x70, 3, 1, 8, 0x40, 3, 0x10, 2, 0, 1, 0x20, 127, 0x20, 0]
    );
    assert_eq!(
        p.to_string(),
        "merge fields[1,8,7] : u16[6]\n  repeat 3 : u1[6]\n    lit raw : u1[2] = [0, 1]\n  const 127 : u8[6]\n  const 0 : u7[6]\n"
    );
    let out = execute(&p, 100).unwrap();
    assert_eq!(
        out.to_u64s(),
        vec![0x3F80, 0xBF80, 0x3F80, 0xBF80, 0x3F80, 0xBF80]
    );
}

#[test]
fn backref_of_a_worked_example_is_exact() {
    // "abcdabcdabcdX": 4 literals, a copy of 8 words from 4 back (overlapping), then
    // one more literal.
    let t = Words::from_le_bytes(8, b"abcdabcdabcdX").unwrap();
    let parse = brevis::synth::backref::parse(&t);
    let kids: Vec<Node> = parse.children().iter().map(Node::lit).collect();
    let p = Node::backref(13, kids).unwrap();
    assert_eq!(p.ty(), Ty::new(8, 13));
    assert_eq!(execute(&p, 100).unwrap(), t);
    assert_eq!(
        p.to_string(),
        "backref : u8[13]\n  lit raw : u8[5] = [97, 98, 99, 100, 88]\n  \
         lit raw : u3[2] = [4, 1]\n  lit raw : u4[2] = [8, 0]\n  lit raw : u2[2] = [3, 0]\n"
    );
    let bytes = program_bytes(&p);
    // backref tag, 5 literals, 2 tokens, token widths 3, 4, 2; then the four literals.
    assert_eq!(&bytes[..6], &[0x80, 5, 2, 3, 4, 2]);
    assert_eq!(read_program(&bytes, p.ty()).unwrap(), p);
}

/// Copies backward and flipped (the modes), and a transposition: a 2 x 3 matrix held
/// column by column, written row by row.
#[test]
fn backref_modes_and_transpose_of_worked_examples_are_exact() {
    let lit = |w: u32, v: &[u64]| Node::lit(&Words::from_u64s(w, v));
    // 16-bit words 1 2 3, then a mirror copy of 3 from 1 back (3 2 1), then a flipped
    // forward copy of 2 from 6 back (1 2 with the top bit set).
    let p = Node::backref(
        8,
        vec![
            lit(16, &[1, 2, 3]),
            lit(2, &[3, 0]),
            lit(2, &[3, 2]),
            lit(3, &[0, 5]),
            lit(2, &[1, 2]),
        ],
    )
    .unwrap();
    assert_eq!(
        execute(&p, 100).unwrap().to_u64s(),
        vec![1, 2, 3, 3, 2, 1, 0x8001, 0x8002]
    );
    let bytes = program_bytes(&p);
    assert_eq!(&bytes[..7], &[0x81, 3, 2, 2, 2, 3, 2]);
    assert_eq!(read_program(&bytes, p.ty()).unwrap(), p);
    // A mirror copy longer than what precedes it reaches before the start.
    let bad = Node::backref(
        6,
        vec![
            lit(16, &[1, 2]),
            lit(2, &[2]),
            lit(3, &[4]),
            lit(1, &[0]),
            lit(1, &[1]),
        ],
    )
    .unwrap();
    assert!(matches!(
        execute(&bad, 100),
        Err(brevis::dsl::ExecError::BackRef { .. })
    ));
    // Transpose 2: the child [1, 4, 2, 5, 3, 6] holds [[1, 2, 3], [4, 5, 6]] by columns.
    let t = Node::transpose(2, lit(8, &[1, 4, 2, 5, 3, 6])).unwrap();
    assert_eq!(execute(&t, 100).unwrap().to_u64s(), vec![1, 2, 3, 4, 5, 6]);
    assert_eq!(t.to_string().lines().next(), Some("transpose 2 : u8[6]"));
    let bytes = program_bytes(&t);
    assert_eq!(&bytes[..2], &[0x90, 2]);
    assert_eq!(read_program(&bytes, t.ty()).unwrap(), t);
    for bad in [1, 4, 6] {
        assert!(
            Node::transpose(bad, lit(8, &[1, 4, 2, 5, 3, 6])).is_err(),
            "{bad}"
        );
    }
    assert!(matches!(
        read_program(&[0x90, 4, 0x20, 1], Ty::new(8, 6)),
        Err(brevis::dsl::WireError::Type { .. })
    ));
    // Dequant: a 2 x 2 BF16 matrix from E4M3 codes 1.0 (0x38), -2.0 (0xC0), 448 (0x7E),
    // 2^-9 (0x01) and per-row scales 0.5, 3.0: 0.5, -1.0, 1344, 3 * 2^-9.
    use brevis::dsl::narrow::{Code, Out};
    use brevis::dsl::Dequant;
    let d = Dequant {
        code: Code::E4M3,
        out: Out::Bf16,
        cols: 2,
        block_rows: 1,
        block_cols: 2,
    };
    let scales = lit(32, &[0.5f32.to_bits().into(), 3f32.to_bits().into()]);
    let q = Node::dequant(d, 4, lit(8, &[0x38, 0xC0, 0x7E, 0x01]), scales.clone()).unwrap();
    assert_eq!(
        execute(&q, 100).unwrap().to_u64s(),
        vec![0x3F00, 0xBF80, 0x44A8, 0x3BC0]
    );
    assert_eq!(
        q.to_string().lines().next(),
        Some("dequant e4m3>bf16 cols 2 block 1x2 : u16[4]")
    );
    let bytes = program_bytes(&q);
    assert_eq!(&bytes[..5], &[0xA0, 0, 2, 1, 2]);
    assert_eq!(read_program(&bytes, q.ty()).unwrap(), q);
    // Blocks that do not tile the matrix, scales of the wrong count, codes of 16 bits.
    let bad = Dequant { block_rows: 3, ..d };
    assert!(Node::dequant(bad, 4, lit(8, &[0; 4]), scales.clone()).is_err());
    assert!(Node::dequant(d, 4, lit(8, &[0; 4]), lit(32, &[0])).is_err());
    assert!(Node::dequant(d, 4, lit(16, &[0; 4]), scales.clone()).is_err());
    // On the wire: an unknown code format, output format, or one that is not the type's.
    for bad in [
        vec![0xA4, 0, 2, 1, 2],
        vec![0xA0, 3, 2, 1, 2],
        vec![0xA0, 2, 2, 1, 2],
        vec![0xA0, 0, 3, 1, 2],
    ] {
        assert!(read_program(&bad, Ty::new(16, 4)).is_err(), "{bad:x?}");
    }
    assert_eq!(brevis::dsl::wire_version_of(&q), 3);
    // A cast (wire version 4): F16 codes 1.0 (0x3C00), -0.0 (0x8000), the smallest
    // subnormal (0x0001, 2^-24), 65504 (0x7BFF), infinity (0x7C00) and a NaN with a
    // payload (0x7E01) upcast to F32 exactly, the NaN as the canonical quiet NaN.
    let f16 = [0x3C00, 0x8000, 0x0001, 0x7BFF, 0x7C00, 0x7E01];
    let c = Node::dequant_cast(Code::F16, Out::F32, lit(16, &f16)).unwrap();
    assert_eq!(
        execute(&c, 100).unwrap().to_u64s(),
        vec![
            0x3F80_0000,
            0x8000_0000,
            0x3380_0000,
            0x477F_E000,
            0x7F80_0000,
            0x7FC0_0000
        ]
    );
    assert_eq!(
        c.to_string().lines().next(),
        Some("dequant f16>f32 : u32[6]")
    );
    let bytes = program_bytes(&c);
    // Tag 0xA2 (F16 codes), output binary32 (2), columns 0: no block parameters, no
    // scales; then the codes.
    assert_eq!(&bytes[..3], &[0xA2, 2, 0]);
    assert_eq!(brevis::dsl::size_report(&c)[0].own_bytes, 3);
    assert_eq!(read_program(&bytes, c.ty()).unwrap(), c);
    assert_eq!(brevis::dsl::wire_version_of(&c), 4);
    // BF16 codes into F32 are their top halves; into BF16 themselves.
    let b = Node::dequant_cast(Code::BF16, Out::F32, lit(16, &[0x3F80, 0xC000])).unwrap();
    assert_eq!(
        execute(&b, 100).unwrap().to_u64s(),
        vec![0x3F80_0000, 0xC000_0000]
    );
    assert_eq!(program_bytes(&b)[..3], [0xA3, 2, 0]);
    // 16-bit codes with scales: F16 codes 1.0, 2.0 times 0.5 into BF16.
    let d16 = Dequant {
        code: Code::F16,
        ..d
    };
    let s16 = Node::dequant(
        d16,
        4,
        lit(16, &[0x3C00, 0x4000, 0x3C00, 0x4000]),
        scales.clone(),
    )
    .unwrap();
    assert_eq!(
        execute(&s16, 100).unwrap().to_u64s(),
        vec![0x3F00, 0x3F80, 0x4040, 0x40C0]
    );
    assert_eq!(brevis::dsl::wire_version_of(&s16), 4);
    // Refused: a cast of 8-bit codes, of codes of the wrong width, and on the wire a
    // cast of E4M3 codes (columns 0) or one into a type of another width.
    assert!(Node::dequant_cast(Code::E4M3, Out::Bf16, lit(8, &[0; 4])).is_err());
    assert!(Node::dequant_cast(Code::F16, Out::F32, lit(8, &[0; 4])).is_err());
    assert!(Node::dequant(d16, 4, lit(8, &[0; 4]), scales).is_err());
    for (bad, ty) in [
        (vec![0xA0, 0, 0, 0x20, 0], Ty::new(16, 4)),
        (vec![0xA2, 2, 0, 0x20, 0], Ty::new(16, 4)),
        (vec![0xA2, 0, 0, 0x20, 0], Ty::new(32, 4)),
    ] {
        assert!(read_program(&bad, ty).is_err(), "{bad:x?}");
    }
    assert!(read_program(&[0xA2, 0, 0, 0x20, 0, 0], Ty::new(16, 4)).is_err());
    assert_eq!(
        read_program(&[0xA2, 0, 0, 0x20, 0x80, 0x78], Ty::new(16, 4))
            .unwrap()
            .to_string()
            .lines()
            .next(),
        Some("dequant f16>bf16 : u16[4]")
    );
}

/// Each way a backref's tokens can disagree with its type is an execution error that
/// says which, never a panic or an allocation past the type.
#[test]
fn backref_tokens_that_disagree_with_the_type_are_refused() {
    use brevis::dsl::ExecError;
    let lit = |w: u32, v: &[u64]| Node::lit(&Words::from_u64s(w, v));
    let run = |n: u64, lits: &[u64], runs: &[u64], lens: &[u64], dists: &[u64]| {
        let p = Node::backref(
            n,
            vec![lit(8, lits), lit(8, runs), lit(8, lens), lit(8, dists)],
        )
        .unwrap();
        match execute(&p, 1000) {
            Err(ExecError::BackRef { what, .. }) => what,
            other => panic!("{other:?}"),
        }
    };
    assert!(run(4, &[1, 2], &[2], &[2], &[5]).contains("reaches before the start"));
    assert!(run(4, &[1, 2], &[3], &[1], &[0]).contains("overruns"));
    assert!(run(4, &[1, 2], &[2], &[9], &[0]).contains("overruns"));
    assert!(run(4, &[1, 2], &[1, 0], &[1, 0], &[0, 0]).contains("writes nothing"));
    assert!(run(4, &[1, 2], &[1], &[3], &[0]).contains("left over"));
    assert!(run(5, &[1, 2], &[2], &[2], &[1]).contains("expected 5"));
    // The type rules: four children, literals 1..=n, token streams of one length 1..=n.
    assert!(Node::backref(4, vec![lit(8, &[1]), lit(8, &[1]), lit(8, &[1])]).is_err());
    assert!(Node::backref(
        1,
        vec![lit(8, &[1, 2]), lit(8, &[1]), lit(8, &[1]), lit(8, &[1])]
    )
    .is_err());
    assert!(Node::backref(
        4,
        vec![lit(8, &[1]), lit(8, &[1, 1]), lit(8, &[1]), lit(8, &[1])]
    )
    .is_err());
}

#[test]
fn reader_rejects_each_kind_of_bad_program() {
    use brevis::dsl::WireError;
    let ty = Ty::new(8, 4);
    assert!(matches!(
        read_program(&[], ty),
        Err(WireError::Truncated { .. })
    ));
    assert!(matches!(
        read_program(&[0x20, 5, 0], ty),
        Err(WireError::Trailing { extra: 1, .. })
    ));
    assert!(matches!(
        read_program(&[0xB0], ty),
        Err(WireError::UnknownTag { tag: 0xB0, .. })
    ));
    // Backref: no literals, more tokens than words, a token width of 0 or 65.
    for bad in [
        &[0x80, 0, 1, 1, 1, 1][..],
        &[0x80, 1, 5, 1, 1, 1],
        &[0x80, 1, 1, 0, 1, 1],
        &[0x80, 1, 1, 1, 65, 1],
    ] {
        assert!(
            matches!(read_program(bad, ty), Err(WireError::Type { .. })),
            "{bad:?}"
        );
    }
    assert!(matches!(
        read_program(&[0x21, 0], ty),
        Err(WireError::UnknownTag { .. })
    ));
    // Const 256 does not fit in 8 bits.
    assert!(matches!(
        read_program(&[0x20, 0x80, 0x02], ty),
        Err(WireError::Type { .. })
    ));
    // Repeat 3 does not divide 4.
    assert!(matches!(
        read_program(&[0x40, 3, 0x20, 1], ty),
        Err(WireError::Type { .. })
    ));
    // LEB128 longer than 64 bits.
    let mut over = vec![0x20];
    over.extend_from_slice(&[0xff; 10]);
    over.push(0x01);
    assert!(matches!(
        read_program(&over, ty),
        Err(WireError::Overflow { .. })
    ));
    // Lit body length past the end.
    assert!(matches!(
        read_program(&[0x10, 100, 1], ty),
        Err(WireError::Truncated { .. })
    ));
    // A chain of maps deeper than the limit.
    let deep: Vec<u8> = std::iter::repeat_n(0x52u8, 100).chain([0x20, 1]).collect();
    assert!(matches!(
        read_program(&deep, ty),
        Err(WireError::Limit { what: "depth", .. })
    ));
}
