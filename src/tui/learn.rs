//! The operator lessons of the help screen: one page per operator with its type rule and
//! a worked example the user steps through. Every example is a real [`Node`] built with
//! the library's checked constructors and run with [`execute`], so the words shown are
//! what the decoder produces.

use crate::dsl::{execute, program_len, MapFn, MergeFn, Node, ScanFn, Ty};
use crate::tensor::Words;

/// One lesson page.
#[derive(Clone, Debug)]
pub struct Lesson {
    /// Page title.
    pub title: &'static str,
    /// The operator's type rule, in the design's notation.
    pub rule: &'static str,
    /// What the operator does, in a sentence or two.
    pub text: &'static str,
    /// The worked example.
    pub program: Node,
    /// For the F32 example: show the output words as floats too.
    pub show_f32: bool,
}

/// One step of a worked example: a node, run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    /// Pre-order index of the node.
    pub node: usize,
    /// Depth (root = 0).
    pub depth: usize,
    /// Its text-form line.
    pub line: String,
    /// Its output words.
    pub words: Vec<u64>,
    /// Width of its words in bits.
    pub width: u32,
    /// Sentence on what this node did.
    pub explain: String,
}

/// The dequant lesson's 2 x 2 BF16 matrix from E4M3 codes and per-row scales.
fn dequant_example() -> Node {
    use crate::dsl::narrow::{Code, Out};
    let d = crate::dsl::Dequant {
        code: Code::E4M3,
        out: Out::Bf16,
        cols: 2,
        block_rows: 1,
        block_cols: 2,
    };
    let scales = [0.5f32, 3.0].map(|s| u64::from(s.to_bits()));
    Node::dequant(d, 4, lit(8, &[0x38, 0xC0, 0x7E, 0x01]), lit(32, &scales)).expect("valid")
}

/// The cast lesson's F32 words from F16 codes 1.0, -0.5, 65504 and 2^-24 (a subnormal).
fn cast_example() -> Node {
    use crate::dsl::narrow::{Code, Out};
    Node::dequant_cast(
        Code::F16,
        Out::F32,
        lit(16, &[0x3C00, 0xB800, 0x7BFF, 0x0001]),
    )
    .expect("valid")
}

fn lit(width: u32, v: &[u64]) -> Node {
    Node::lit(&Words::from_u64s(width, v))
}

/// The worked example (docs/design.md §3.9, from the paper's §3.2): the F32 words of
/// (+1, -1, +1, -1, +1, -1).
pub fn paper_example() -> Node {
    let sign = Node::repeat(3, lit(1, &[0, 1])).expect("valid");
    let exp = Node::constant(Ty::new(8, 6), 127).expect("valid");
    let man = Node::constant(Ty::new(23, 6), 0).expect("valid");
    Node::merge(MergeFn::Fields(vec![1, 8, 23]), vec![sign, exp, man]).expect("valid")
}

/// What the search finds for the same words with a budget of 200 expansions.
pub fn searched_example() -> Node {
    let c = Node::constant(Ty::new(32, 5), 256).expect("valid");
    let s = Node::scan(ScanFn::Xor, 127, c).expect("valid");
    Node::map(MapFn::RotL(23), s).expect("valid")
}

/// The bytes of `abcdabcdabcdX` as back references (the match finder's parse).
pub fn backref_example() -> Node {
    let t = Words::from_le_bytes(8, b"abcdabcdabcdX").expect("whole bytes");
    let kids = crate::synth::backref::parse(&t)
        .children()
        .iter()
        .map(Node::lit)
        .collect();
    Node::backref(13, kids).expect("valid")
}

/// All lessons, in page order.
pub fn lessons() -> Vec<Lesson> {
    vec![
        Lesson {
            title: "The worked example (docs/design.md §3.9)",
            rule: "every program has one type b[n]: n words of b bits",
            text: "The F32 words of (+1, -1, +1, -1, +1, -1). Split each 32-bit word into \
                   its sign (1 bit), exponent (8) and mantissa (23): the signs alternate, \
                   the exponent is always 127, the mantissa always 0.",
            program: paper_example(),
            show_f32: true,
        },
        Lesson {
            title: "lit: stored words",
            rule: "Lit_b(v) : b[len v], n >= 0",
            text: "The words themselves, stored by the smallest of four codecs (raw, \
                   bitpack, huffman, rans; rans32 is rans with 32 states, for streams of \
                   64 Ki words or more). Every other operator exists to make lits smaller.",
            program: lit(8, &[3, 1, 4, 1, 5, 9]),
            show_f32: false,
        },
        Lesson {
            title: "const: one word, n times",
            rule: "Const_{b,n}(v) : b[n], n >= 1, v < 2^b",
            text: "A constant stream costs a tag and the value, whatever its length.",
            program: Node::constant(Ty::new(4, 5), 7).expect("valid"),
            show_f32: false,
        },
        Lesson {
            title: "concat: one after another",
            rule: "Concat(P1..Pk) : b[sum n_i], k >= 2, same b, each n_i >= 1",
            text: "Children one after another. The search cuts where the statistics change, \
                   so each part gets its own program.",
            program: Node::concat(vec![
                Node::constant(Ty::new(8, 4), 0).expect("valid"),
                lit(8, &[200, 17, 99]),
            ])
            .expect("valid"),
            show_f32: false,
        },
        Lesson {
            title: "repeat: the child's stream k times",
            rule: "Repeat_k(P) : b[k*m], k >= 2, child b[m], m >= 1",
            text: "Only exact copies: the decoder writes the child's words k times.",
            program: Node::repeat(3, lit(8, &[9, 8])).expect("valid"),
            show_f32: false,
        },
        Lesson {
            title: "map: a bijection on every word",
            rule: "Map_{u,θ}(P) : same type as P",
            text: "xor c, add c (mod 2^b), zigzag, gray, bitrev, rotl r. A bijection loses \
                   nothing; it moves information where a later split or codec can use it. \
                   Here zigzag maps the 8-bit two's-complement values 0, -1, 1, -2 \
                   (stored as 0, 255, 1, 254) to 0, 1, 2, 3.",
            program: Node::map(MapFn::ZigZag, lit(8, &[0, 255, 1, 254])).expect("valid"),
            show_f32: false,
        },
        Lesson {
            title: "scan: running xor or sum",
            rule: "Scan_{q,θ}(v0, P) : b[m+1], child b[m], m >= 1",
            text: "v0, then y_i = q(y_{i-1}, u_i). With add, the child holds the differences: \
                   a ramp becomes a constant.",
            program: Node::scan(
                ScanFn::Add,
                10,
                Node::constant(Ty::new(8, 4), 3).expect("valid"),
            )
            .expect("valid"),
            show_f32: false,
        },
        Lesson {
            title: "merge: fields side by side",
            rule: "Merge_{f,θ}(P1..Pk) : b[n], sum b_i = b, k >= 2, all n equal",
            text: "Combines equal-length children pointwise: contiguous bit fields (most \
                   significant first), bit planes or byte planes. Here a 4-bit high nibble \
                   and a 4-bit low nibble make bytes.",
            program: Node::merge(
                MergeFn::Fields(vec![4, 4]),
                vec![
                    Node::constant(Ty::new(4, 3), 1).expect("valid"),
                    lit(4, &[10, 11, 12]),
                ],
            )
            .expect("valid"),
            show_f32: false,
        },
        Lesson {
            title: "backref: copies of earlier words",
            rule: "BackRef(L, R, M, D) : b[n], L b[l] with 1 <= l <= n, R M D of one length t, 1 <= t <= n",
            text: "LZ77 in the language. The literal words L, and per token a run R of \
                   literals, then a copy of M words from D+1 words back in the output (a \
                   copy may overlap itself). Here the bytes of \"abcdabcdabcdX\": four \
                   literals, one copy of 8 bytes from 4 back, then the last literal. A \
                   safetensors JSON header, whose keys repeat for every tensor, costs a \
                   quarter of its order-0 code this way.",
            program: backref_example(),
            show_f32: false,
        },
        Lesson {
            title: "transpose: a matrix by columns",
            rule: "Transpose_r(P) : same type as P, r >= 2 divides n into c = n / r >= 2",
            text: "The child holds an r x c matrix column by column; the decoder writes it \
                   row by row. Proposed only with back references over the columns: a \
                   Fourier basis (silero's stft_conv.weight) whose columns mirror each \
                   other shrinks from 129,577 bytes to 22,081 this way. Here the child \
                   1 4 2 5 3 6 is the 2 x 3 matrix [1 2 3; 4 5 6].",
            program: Node::transpose(2, lit(8, &[1, 4, 2, 5, 3, 6])).expect("valid"),
            show_f32: false,
        },
        Lesson {
            title: "dequant: FP8 codes times their scales",
            rule: "Dequant(C, S) : bf16|f16|f32[n], C u8[n], S u32[one per block of rows x cols]",
            text: "A BF16 copy of an FP8 model holds 8 bits a weight and one f32 scale per \
                   row or per 128 x 128 block. Each word is the code's value times its \
                   block's scale in f32, rounded to nearest even: here E4M3 codes 1.0, \
                   -2.0, 448 and 2^-9 with row scales 0.5 and 3 give 0.5, -1, 1344 and \
                   3 x 2^-9. The search finds codes and scales that recompute every word \
                   exactly: fp8-mixed's weights dequantized per row went from 34.0% to \
                   58.7% smaller.",
            program: dequant_example(),
            show_f32: false,
        },
        Lesson {
            title: "dequant f16>f32: an F32 tensor holding F16 values",
            rule: "Dequant(C) : f32[n], C u16[n] of F16 or BF16 codes, no scales",
            text: "A checkpoint saved in F32 after mixed-precision training often holds \
                   only F16 (or BF16) values: the low 13 (or 16) bits of every mantissa \
                   are zero. A cast has no scales: each word is the code's value, exactly \
                   (here 1.0, -0.5, 65504 and 2^-24). The search proposes it only when \
                   every word is such a value, and then searches the codes as an F16 \
                   tensor: whisper-tiny upcast to F32 costs 64,071,022 bytes, against \
                   64,070,323 for the F16 original (64,450,459 before the cast).",
            program: cast_example(),
            show_f32: true,
        },
        Lesson {
            title: "What the search finds for the worked example",
            rule: "smaller programs win: sizes are exact serialized bytes",
            text: "With a budget of 200 expansions the search finds a 7-byte program for the \
                   ±1.0 words, against 14 for the paper's: rotating each word right by 23 bits \
                   leaves 127 or 383 (sign above exponent), which alternate by xor 256.",
            program: searched_example(),
            show_f32: true,
        },
    ]
}

/// The steps of a lesson: its nodes in post-order (children before parents), each run
/// with the library's executor.
pub fn steps(program: &Node) -> Vec<Step> {
    fn go(n: &Node, depth: usize, next: &mut usize, out: &mut Vec<Step>) {
        let index = *next;
        *next += 1;
        for c in n.children() {
            go(c, depth + 1, next, out);
        }
        let words = execute(n, 1 << 16).map(|w| w.to_u64s()).unwrap_or_default();
        out.push(Step {
            node: index,
            depth,
            line: crate::dsl::text::node_line(n),
            explain: explain(n, &words),
            words,
            width: n.ty().width,
        });
    }
    let mut out = Vec::new();
    go(program, 0, &mut 0, &mut out);
    out
}

/// Pre-order lines of the program: `(depth, line)`.
pub fn lines(program: &Node) -> Vec<(usize, String)> {
    fn go(n: &Node, depth: usize, out: &mut Vec<(usize, String)>) {
        out.push((depth, crate::dsl::text::node_line(n)));
        n.children().iter().for_each(|c| go(c, depth + 1, out));
    }
    let mut out = Vec::new();
    go(program, 0, &mut out);
    out
}

fn explain(n: &Node, out: &[u64]) -> String {
    use crate::dsl::Op;
    let ty = n.ty();
    match n.op() {
        Op::Lit(l) => format!(
            "lit: the decoder reads {} stored words of {} ({} codec)",
            ty.len,
            super::inspect::bits(u64::from(ty.width)),
            l.codec.name()
        ),
        Op::Const(v) => format!("const: the value {v} written {} times", ty.len),
        Op::Concat(c) => format!("concat: the {} children's words one after another", c.len()),
        Op::Repeat(k, c) => format!("repeat: the child's {} words written {k} times", c.ty().len),
        Op::Map(..) => format!(
            "{}: applied to every {}-bit word of the child",
            crate::dsl::text::node_label(n),
            ty.width
        ),
        Op::Scan(f, v0, _) => format!(
            "scan: starts at {v0}, then each word is the previous {} the child's word",
            match f {
                ScanFn::Xor => "xor",
                ScanFn::Add => "plus",
            }
        ),
        Op::Merge(f, _) => match f {
            MergeFn::Fields(w) => format!(
                "merge: the children's words side by side as bit fields {w:?}, most \
                 significant first -> {} words",
                out.len()
            ),
            MergeFn::BitPlanes => "merge: one bit from each child per word".into(),
            MergeFn::BytePlanes => "merge: one byte from each child per word".into(),
        },
        Op::BackRef(c) => format!(
            "backref: {} tokens; each writes its run of the {} literal words, then copies \
             a match from earlier in the output{} -> {} words",
            c[1].ty().len,
            c[0].ty().len,
            if c.len() == 5 {
                " (forward or backward, sign flipped or not)"
            } else {
                ""
            },
            out.len()
        ),
        Op::Transpose(r, _) => format!(
            "transpose: the child's words are a {r} x {} matrix column by column; written \
             row by row",
            ty.len / r
        ),
        Op::Dequant(d, _) if d.is_cast() => format!(
            "dequant: each {} code's value, exactly, as {} -> {} words",
            d.code.name(),
            d.out.name(),
            out.len()
        ),
        Op::Dequant(d, c) => format!(
            "dequant: each {} code times its block's f32 scale ({} scales, blocks of {} x \
             {}), rounded to {} -> {} words",
            d.code.name(),
            c[1].ty().len,
            d.block_rows,
            d.block_cols,
            d.out.name(),
            out.len()
        ),
    }
}

/// The serialized size of a lesson's program in bytes.
pub fn bytes(program: &Node) -> u64 {
    program_len(program)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paper_example_runs_to_plus_minus_one() {
        let s = steps(&paper_example());
        let root = s.last().unwrap();
        let f: Vec<f32> = root
            .words
            .iter()
            .map(|&w| f32::from_bits(w as u32))
            .collect();
        assert_eq!(f, [1.0, -1.0, 1.0, -1.0, 1.0, -1.0]);
        assert_eq!(s.len(), 5);
        assert_eq!(s[0].words, [0, 1]);
        assert_eq!(s[1].words, [0, 1, 0, 1, 0, 1]);
        assert_eq!(bytes(&paper_example()), 14);
        let t = steps(&searched_example());
        assert_eq!(t.last().unwrap().words, root.words);
        assert_eq!(bytes(&searched_example()), 7);
    }

    #[test]
    fn every_lesson_executes() {
        for l in lessons() {
            let s = steps(&l.program);
            assert_eq!(s.len(), l.program.node_count());
            assert_eq!(s.last().unwrap().words.len() as u64, l.program.ty().len);
        }
    }
}
