//! Reading the text form back (DESIGN §3): the parser of what [`super::text`] prints.
//!
//! The text form names every node's operator, parameters and type, and a literal's
//! codec; it shows a literal's words only when it has at most
//! [`super::text::SHOW_WORDS`] of them. So reading a program is two steps:
//!
//! 1. [`parse`] reads the text into a [`Sketch`]: the tree with every parameter and
//!    type, and the literals' words where the text gives them. Every line the printer
//!    prints is accepted, and a literal of any length may also be given its words
//!    (`lit raw : u8[3] = [1, 2, 3]`). An error names the line and column of the
//!    offending token and what was expected there.
//! 2. [`Sketch::build`] makes the [`Node`], checking every type rule, given the words
//!    the program must produce (the tensor's, when there is one): a literal whose words
//!    the text leaves out gets the words its place in the tree must produce, found by
//!    running each operator backwards from the target, as the search's decompositions
//!    do (a `merge` splits the target into fields, a `map` inverts its bijection, a
//!    `scan` takes differences, a `concat` cuts at its children's lengths, a `repeat`
//!    takes the first copy, a `transpose` reads the columns). Below a `backref` or a
//!    `dequant`, whose children the target does not determine, the words come from the
//!    reference program (the archive's) at the same place, else from the match finder's
//!    parse or the dequantizer's fit of the target, as the search proposes them. A
//!    literal is encoded with the codec its line names.
//!
//! So for any program `p` of a tensor, `parse(&p.to_string())?.build(Some(&words),
//! None)` is `p` again when `p` came from the search (its literals are encoded as the
//! search encodes them), which `tests/dsl_parse.rs` checks on the corpus.
//!
//! Why one file of about 1,000 lines: the two steps above share the [`Sketch`] they pass
//! between them, and each operator's line and its backward run from the target are read
//! (and changed) together when an operator is added.

use super::program::{Dequant, Lit, MapFn, MergeFn, Node, Op, ScanFn, Ty};
use crate::codec::{self, CodecId};
use crate::tensor::{mask, Words};
use std::fmt;

/// Why a text could not be read or built, and where: line and column (both counted from
/// 1, columns in characters) of the offending token.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("line {line}, column {column}: {message}")]
pub struct ParseError {
    /// Line of the offending token, from 1.
    pub line: usize,
    /// Column of its first character, from 1.
    pub column: usize,
    /// What is wrong, lowercase.
    pub message: String,
}

/// One node as read from its line: its operator and parameters, its declared type, and
/// its children; a literal may lack its words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sketch {
    /// Line of the node (from 1).
    pub line: usize,
    /// Column of its operator.
    pub column: usize,
    /// The declared type.
    pub ty: Ty,
    /// Column of the type.
    pub ty_column: usize,
    /// Operator and parameters.
    pub op: SketchOp,
    /// Children, in order.
    pub children: Vec<Sketch>,
}

/// The operator of a [`Sketch`] node with its parameters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SketchOp {
    /// `lit CODEC`, with its words when the line gives them (and the column of `=`).
    Lit {
        /// The codec named.
        codec: CodecId,
        /// The words, when given.
        words: Option<Vec<u64>>,
        /// Column of the `=` (0 when the words are not given).
        words_column: usize,
    },
    /// `const V`.
    Const(u64),
    /// `concat`.
    Concat,
    /// `repeat K`.
    Repeat(u64),
    /// `map F`.
    Map(MapFn),
    /// `scan F V0`.
    Scan(ScanFn, u64),
    /// `merge F`.
    Merge(MergeFn),
    /// `backref`.
    BackRef,
    /// `transpose R`.
    Transpose(u64),
    /// `dequant C>O [cols N block RxC]`.
    Dequant(Dequant),
}

impl SketchOp {
    fn name(&self) -> &'static str {
        match self {
            SketchOp::Lit { .. } => "lit",
            SketchOp::Const(_) => "const",
            SketchOp::Concat => "concat",
            SketchOp::Repeat(_) => "repeat",
            SketchOp::Map(_) => "map",
            SketchOp::Scan(..) => "scan",
            SketchOp::Merge(_) => "merge",
            SketchOp::BackRef => "backref",
            SketchOp::Transpose(_) => "transpose",
            SketchOp::Dequant(_) => "dequant",
        }
    }
}

/// A token of a line: its text and the column of its first character.
#[derive(Clone, Copy, Debug)]
struct Tok<'a> {
    text: &'a str,
    column: usize,
}

/// Splits a line into tokens: runs of letters, digits and `_`, and single punctuation
/// characters; spaces separate.
fn tokens(line: &str) -> Vec<Tok<'_>> {
    let mut out = Vec::new();
    let mut start: Option<(usize, usize)> = None; // (byte, column)
    for (col0, (byte, c)) in line.char_indices().enumerate() {
        let word = c.is_ascii_alphanumeric() || c == '_';
        if word {
            if start.is_none() {
                start = Some((byte, col0 + 1));
            }
            continue;
        }
        if let Some((b, col)) = start.take() {
            out.push(Tok {
                text: &line[b..byte],
                column: col,
            });
        }
        if !c.is_whitespace() {
            out.push(Tok {
                text: &line[byte..byte + c.len_utf8()],
                column: col0 + 1,
            });
        }
    }
    if let Some((b, col)) = start {
        out.push(Tok {
            text: &line[b..],
            column: col,
        });
    }
    out
}

/// Reads the tokens of one line in order, with errors at the right column.
struct Line<'a> {
    number: usize,
    toks: Vec<Tok<'a>>,
    at: usize,
    /// Column just past the line's last character (for "expected ... at the end").
    end: usize,
}

impl<'a> Line<'a> {
    fn err(&self, column: usize, message: impl Into<String>) -> ParseError {
        ParseError {
            line: self.number,
            column,
            message: message.into(),
        }
    }

    fn peek(&self) -> Option<Tok<'a>> {
        self.toks.get(self.at).copied()
    }

    /// The next token, or an error saying what was expected at the end of the line.
    fn next(&mut self, expected: &str) -> Result<Tok<'a>, ParseError> {
        match self.peek() {
            Some(t) => {
                self.at += 1;
                Ok(t)
            }
            None => Err(self.err(
                self.end,
                format!("expected {expected}, found the end of the line"),
            )),
        }
    }

    /// The next token, which must be `want`.
    fn expect(&mut self, want: &str) -> Result<Tok<'a>, ParseError> {
        let t = self.next(&format!("`{want}`"))?;
        if t.text == want {
            Ok(t)
        } else {
            Err(self.err(t.column, format!("expected `{want}`, found `{}`", t.text)))
        }
    }

    /// A decimal number of at most 64 bits.
    fn number(&mut self, what: &str) -> Result<(u64, usize), ParseError> {
        let t = self.next(what)?;
        if !t.text.bytes().all(|b| b.is_ascii_digit()) {
            return Err(self.err(t.column, format!("expected {what}, found `{}`", t.text)));
        }
        let v = t.text.parse::<u64>().map_err(|_| {
            self.err(
                t.column,
                format!("{what} {} does not fit in 64 bits", t.text),
            )
        })?;
        Ok((v, t.column))
    }

    fn number_u32(&mut self, what: &str) -> Result<u32, ParseError> {
        let (v, col) = self.number(what)?;
        u32::try_from(v).map_err(|_| self.err(col, format!("{what} {v} is too large")))
    }

    /// One of `choices`, named `what` in the error.
    fn word(&mut self, what: &str, choices: &[&str]) -> Result<Tok<'a>, ParseError> {
        let list = choices.join(", ");
        let t = self.next(&format!("{what} ({list})"))?;
        if choices.contains(&t.text) {
            Ok(t)
        } else {
            Err(self.err(
                t.column,
                format!("expected {what} ({list}), found `{}`", t.text),
            ))
        }
    }
}

const OPERATORS: [&str; 10] = [
    "lit",
    "const",
    "concat",
    "repeat",
    "map",
    "scan",
    "merge",
    "backref",
    "transpose",
    "dequant",
];

fn codec_names() -> Vec<&'static str> {
    codec::ALL_CODECS
        .iter()
        .copied()
        .chain([CodecId::Bucket])
        .map(CodecId::name)
        .collect()
}

/// Reads one line (without its indentation) into a node with no children.
fn parse_line(line: &mut Line<'_>, indent: usize) -> Result<Sketch, ParseError> {
    use crate::dsl::narrow::{Code, Out};
    let op_tok = line.word("an operator", &OPERATORS)?;
    let op = match op_tok.text {
        "lit" => {
            let names = codec_names();
            let t = line.word("a codec", &names)?;
            SketchOp::Lit {
                codec: CodecId::from_name(t.text).unwrap_or(CodecId::Raw),
                words: None,
                words_column: 0,
            }
        }
        "const" => SketchOp::Const(line.number("the constant's value")?.0),
        "concat" => SketchOp::Concat,
        "repeat" => SketchOp::Repeat(line.number("the repeat count")?.0),
        "map" => {
            let f = line.word(
                "a bijection",
                &["xor", "add", "zigzag", "gray", "bitrev", "rotl"],
            )?;
            SketchOp::Map(match f.text {
                "xor" => MapFn::Xor(line.number("the constant to xor")?.0),
                "add" => MapFn::Add(line.number("the constant to add")?.0),
                "zigzag" => MapFn::ZigZag,
                "gray" => MapFn::Gray,
                "bitrev" => MapFn::BitRev,
                _ => MapFn::RotL(line.number_u32("the rotation")?),
            })
        }
        "scan" => {
            let f = line.word("a step function", &["xor", "add"])?;
            let f = if f.text == "xor" {
                ScanFn::Xor
            } else {
                ScanFn::Add
            };
            SketchOp::Scan(f, line.number("the first word")?.0)
        }
        "merge" => {
            let f = line.word("a merge", &["fields", "bitplanes", "byteplanes"])?;
            SketchOp::Merge(match f.text {
                "bitplanes" => MergeFn::BitPlanes,
                "byteplanes" => MergeFn::BytePlanes,
                _ => {
                    line.expect("[")?;
                    let mut widths = vec![line.number_u32("a field width")?];
                    loop {
                        let t = line.next("`,` or `]`")?;
                        match t.text {
                            "]" => break,
                            "," => widths.push(line.number_u32("a field width")?),
                            other => {
                                return Err(line.err(
                                    t.column,
                                    format!("expected `,` or `]`, found `{other}`"),
                                ))
                            }
                        }
                    }
                    MergeFn::Fields(widths)
                }
            })
        }
        "backref" => SketchOp::BackRef,
        "transpose" => SketchOp::Transpose(line.number("the row count")?.0),
        _ => {
            let codes = ["e4m3", "e5m2", "f16", "bf16"];
            let c = line.word("a code format", &codes)?;
            let code = match c.text {
                "e4m3" => Code::E4M3,
                "e5m2" => Code::E5M2,
                "f16" => Code::F16,
                _ => Code::BF16,
            };
            line.expect(">")?;
            let o = line.word("an output format", &["bf16", "f16", "f32"])?;
            let out = match o.text {
                "bf16" => Out::Bf16,
                "f16" => Out::F16,
                _ => Out::F32,
            };
            if line.peek().is_some_and(|t| t.text == "cols") {
                line.expect("cols")?;
                let cols = line.number("the column count")?.0;
                line.expect("block")?;
                // `block 1x128` is one token (letters and digits run together).
                let t = line.next("the block's size, such as 1x128")?;
                let bad = || {
                    line.err(
                        t.column,
                        format!(
                            "expected the block's size, such as 1x128, found `{}`",
                            t.text
                        ),
                    )
                };
                let (r, c) = t.text.split_once('x').ok_or_else(bad)?;
                let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
                if !digits(r) || !digits(c) {
                    return Err(bad());
                }
                let block_rows = r.parse::<u64>().map_err(|_| bad())?;
                let block_cols = c.parse::<u64>().map_err(|_| bad())?;
                SketchOp::Dequant(Dequant {
                    code,
                    out,
                    cols,
                    block_rows,
                    block_cols,
                })
            } else {
                SketchOp::Dequant(Dequant::cast(code, out))
            }
        }
    };
    let colon = line.next("`:` and the node's type")?;
    if colon.text != ":" {
        return Err(line.err(
            colon.column,
            format!(
                "expected `:` and the node's type after `{}`, found `{}`",
                op_tok.text, colon.text
            ),
        ));
    }
    // `u16[6]` tokenizes as `u16`, `[`, `6`, `]`.
    let t = line.next("a type such as u16[6]")?;
    let ty_column = t.column;
    let width = t
        .text
        .strip_prefix('u')
        .filter(|w| !w.is_empty() && w.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|w| w.parse::<u32>().ok())
        .ok_or_else(|| {
            line.err(
                t.column,
                format!("expected a type such as u16[6], found `{}`", t.text),
            )
        })?;
    if !(1..=64).contains(&width) {
        return Err(line.err(
            t.column,
            format!("word width {width} is out of range: it must be 1 to 64"),
        ));
    }
    line.expect("[")?;
    let len = line.number("the number of words")?.0;
    line.expect("]")?;
    let mut op = op;
    if let Some(eq) = line.peek() {
        match (&mut op, eq.text) {
            (
                SketchOp::Lit {
                    words,
                    words_column,
                    ..
                },
                "=",
            ) => {
                line.at += 1;
                *words_column = eq.column;
                line.expect("[")?;
                let mut v = Vec::new();
                let m = mask(width);
                if line.peek().is_some_and(|t| t.text == "]") {
                    line.at += 1;
                } else {
                    loop {
                        let (w, col) = line.number("a word")?;
                        if w > m {
                            return Err(
                                line.err(col, format!("word {w} does not fit in {width} bits"))
                            );
                        }
                        v.push(w);
                        let t = line.next("`,` or `]`")?;
                        match t.text {
                            "]" => break,
                            "," => {}
                            other => {
                                return Err(line.err(
                                    t.column,
                                    format!("expected `,` or `]`, found `{other}`"),
                                ))
                            }
                        }
                    }
                }
                if v.len() as u64 != len {
                    return Err(line.err(
                        eq.column,
                        format!(
                            "the literal's type says {len} word{}, its list holds {}",
                            if len == 1 { "" } else { "s" },
                            v.len()
                        ),
                    ));
                }
                *words = Some(v);
            }
            (SketchOp::Lit { .. }, other) => {
                return Err(line.err(
                    eq.column,
                    format!(
                    "expected `=` and the literal's words, or the end of the line, found `{other}`"
                ),
                ))
            }
            (_, other) => {
                return Err(line.err(
                    eq.column,
                    format!("expected the end of the line after the type, found `{other}`"),
                ))
            }
        }
    }
    if let Some(t) = line.peek() {
        return Err(line.err(
            t.column,
            format!("expected the end of the line, found `{}`", t.text),
        ));
    }
    Ok(Sketch {
        line: line.number,
        column: indent + 1,
        ty: Ty::new(width, len),
        ty_column,
        op,
        children: Vec::new(),
    })
}

/// Reads a program's text form into a [`Sketch`]: one node per line, each child indented
/// two spaces more than its parent; blank lines are skipped.
///
/// # Errors
/// A [`ParseError`] at the first token that is not what the text form allows there: an
/// unknown operator, codec or bijection, a number that does not fit, a missing `:` or
/// type, an indentation that is not two spaces per level, a second root, or an empty
/// text.
pub fn parse(text: &str) -> Result<Sketch, ParseError> {
    // Each node with its depth, in pre-order.
    let mut nodes: Vec<(usize, Sketch)> = Vec::new();
    for (k, raw) in text.lines().enumerate() {
        let number = k + 1;
        let raw = raw.strip_suffix('\r').unwrap_or(raw);
        if raw.trim().is_empty() {
            continue;
        }
        if let Some(pos) = raw.chars().position(|c| c == '\t') {
            return Err(ParseError {
                line: number,
                column: pos + 1,
                message: "a tab: indent with two spaces per level".into(),
            });
        }
        let indent = raw.chars().take_while(|&c| c == ' ').count();
        let err = |column: usize, message: String| ParseError {
            line: number,
            column,
            message,
        };
        if indent % 2 == 1 {
            return Err(err(
                indent + 1,
                format!("indented {indent} spaces: indent with two spaces per level"),
            ));
        }
        let depth = indent / 2;
        match nodes.last() {
            None if depth > 0 => {
                return Err(err(
                    indent + 1,
                    "the first node is the root: it takes no indentation".into(),
                ))
            }
            Some((d, _)) if depth > d + 1 => {
                return Err(err(
                    indent + 1,
                    format!(
                        "indented {} levels below the node above: a child is indented one level (two spaces) more than its parent",
                        depth - d
                    ),
                ))
            }
            Some(_) if depth == 0 => {
                return Err(err(
                    1,
                    "a second root: every node after the first is indented below it".into(),
                ))
            }
            _ => {}
        }
        let body = &raw[indent..];
        let mut line = Line {
            number,
            toks: tokens(body)
                .into_iter()
                .map(|t| Tok {
                    text: t.text,
                    column: t.column + indent,
                })
                .collect(),
            at: 0,
            end: raw.chars().count() + 1,
        };
        let node = parse_line(&mut line, indent)?;
        nodes.push((depth, node));
    }
    if nodes.is_empty() {
        return Err(ParseError {
            line: 1,
            column: 1,
            message: "the text is empty: write a program, one node per line".into(),
        });
    }
    // Fold the pre-order list into a tree: pop finished subtrees into their parents.
    let mut stack: Vec<(usize, Sketch)> = Vec::new();
    for (depth, node) in nodes {
        while stack.last().is_some_and(|(d, _)| *d >= depth) {
            let (_, done) = stack.pop().expect("checked");
            if let Some((_, parent)) = stack.last_mut() {
                parent.children.push(done);
            }
        }
        if let Some((_, parent)) = stack.last() {
            if matches!(parent.op, SketchOp::Lit { .. } | SketchOp::Const(_)) {
                return Err(ParseError {
                    line: node.line,
                    column: node.column,
                    message: format!(
                        "`{}` on line {} has no children: a child here belongs to nothing",
                        parent.op.name(),
                        parent.line
                    ),
                });
            }
        }
        stack.push((depth, node));
    }
    while stack.len() > 1 {
        let (_, done) = stack.pop().expect("checked");
        if let Some((_, parent)) = stack.last_mut() {
            parent.children.push(done);
        }
    }
    Ok(stack.pop().expect("one root").1)
}

/// Encodes `words` with `codec` as the search would: the codec [`Lit::encode`] picks
/// when it is that one (so a literal the search wrote comes back byte for byte), else
/// that codec's own encoder. `None` when the codec does not apply to the words.
pub fn lit_with_codec(codec: CodecId, words: &Words) -> Option<Lit> {
    let best = Lit::encode(words);
    if best.codec == codec {
        return Some(best);
    }
    codec::select::encode_with(codec, words).map(Lit::from)
}

impl Sketch {
    fn err(&self, column: usize, message: impl Into<String>) -> ParseError {
        ParseError {
            line: self.line,
            column,
            message: message.into(),
        }
    }

    /// Number of nodes.
    pub fn node_count(&self) -> usize {
        1 + self.children.iter().map(Sketch::node_count).sum::<usize>()
    }

    /// Builds the program, checking every type rule. `target` is what the program must
    /// produce (the tensor's words: the root's type must be theirs); a literal whose
    /// words the text leaves out gets the words its place must produce (see the module
    /// doc). `reference` (the archive's program) supplies the words below a `backref`
    /// or `dequant` where the same node stands there, and literals it holds at the same
    /// place with the same type, codec and words are taken as they are.
    ///
    /// # Errors
    /// A [`ParseError`] at the node that breaks a type rule (a child's type that is not
    /// what its parent takes, a type that is not the tensor's, parameters out of
    /// range), whose literal's words cannot be known, whose codec does not apply to its
    /// words, or when the program is deeper or larger than the wire format allows.
    pub fn build(
        &self,
        target: Option<&Words>,
        reference: Option<&Node>,
    ) -> Result<Node, ParseError> {
        let max_depth = crate::dsl::wire::MAX_DEPTH;
        if self.depth() > max_depth {
            return Err(self.err(
                self.column,
                format!(
                    "the program is {} levels deep: at most {max_depth}",
                    self.depth()
                ),
            ));
        }
        if self.node_count() > crate::dsl::wire::MAX_NODES {
            return Err(self.err(
                self.column,
                format!(
                    "the program has {} nodes: at most {}",
                    self.node_count(),
                    crate::dsl::wire::MAX_NODES
                ),
            ));
        }
        if let Some(t) = target {
            let want = Ty::new(t.width(), t.len() as u64);
            if want != self.ty {
                return Err(self.err(
                    self.ty_column,
                    format!("the tensor is {want}, the program's type is {}", self.ty),
                ));
            }
        }
        self.resolve(target.cloned(), reference)
    }

    fn depth(&self) -> usize {
        1 + self.children.iter().map(Sketch::depth).max().unwrap_or(0)
    }

    /// The types the children must have, from this node's declared type and parameters
    /// (`None` where the operator leaves a child's type free).
    fn child_types(&self) -> Result<Vec<Option<Ty>>, ParseError> {
        let (b, n) = (self.ty.width, self.ty.len);
        let k = self.children.len();
        let arity = |want: &str, ok: bool| -> Result<(), ParseError> {
            if ok {
                Ok(())
            } else {
                Err(self.err(
                    self.column,
                    format!(
                        "`{}` takes {want}, it has {k} (children are the lines indented below it)",
                        self.op.name()
                    ),
                ))
            }
        };
        Ok(match &self.op {
            SketchOp::Lit { .. } | SketchOp::Const(_) => {
                arity("no children", k == 0)?;
                Vec::new()
            }
            SketchOp::Concat => {
                arity("at least 2 children", k >= 2)?;
                let sum: u64 = self
                    .children
                    .iter()
                    .map(|c| c.ty.len)
                    .fold(0, u64::saturating_add);
                if sum != n {
                    return Err(self.err(
                        self.ty_column,
                        format!("concat of {n} words has children of {sum} words in all"),
                    ));
                }
                self.children
                    .iter()
                    .map(|c| Some(Ty::new(b, c.ty.len)))
                    .collect()
            }
            SketchOp::Repeat(r) => {
                arity("one child", k == 1)?;
                if *r < 2 || !n.is_multiple_of(*r) {
                    return Err(self.err(
                        self.column,
                        format!("repeat {r} of {n} words: the count must be 2 or more and divide the length"),
                    ));
                }
                vec![Some(Ty::new(b, n / r))]
            }
            SketchOp::Map(_) | SketchOp::Transpose(_) => {
                arity("one child", k == 1)?;
                vec![Some(self.ty)]
            }
            SketchOp::Scan(..) => {
                arity("one child", k == 1)?;
                if n < 2 {
                    return Err(self.err(self.ty_column, "scan needs n >= 2 words"));
                }
                vec![Some(Ty::new(b, n - 1))]
            }
            SketchOp::Merge(f) => {
                let widths = f.widths(b).map_err(|e| self.err(self.column, e.0))?;
                arity(&format!("{} children", widths.len()), k == widths.len())?;
                widths.into_iter().map(|w| Some(Ty::new(w, n))).collect()
            }
            SketchOp::BackRef => {
                arity("4 or 5 children", k == 4 || k == 5)?;
                let mut v = vec![None; k];
                v[0] = self.children.first().map(|c| Ty::new(b, c.ty.len));
                v
            }
            SketchOp::Dequant(d) if d.is_cast() => {
                arity("one child (the codes)", k == 1)?;
                vec![Some(Ty::new(d.code.width(), n))]
            }
            SketchOp::Dequant(d) => {
                arity("2 children (the codes and the scales)", k == 2)?;
                let blocks = d.blocks(n).map_err(|e| self.err(self.column, e.0))?;
                vec![Some(Ty::new(d.code.width(), n)), Some(Ty::new(32, blocks))]
            }
        })
    }

    /// The words each child must produce given this node's `target` (`None` where
    /// they cannot be told), and the reference's children lined up with them.
    fn child_targets(
        &self,
        target: Option<&Words>,
        reference: Option<&Node>,
    ) -> Vec<Option<Words>> {
        let k = self.children.len();
        let same_ref = |ok: &dyn Fn(&Op) -> bool| -> Option<Vec<Option<Words>>> {
            let r = reference.filter(|r| r.ty() == self.ty && ok(r.op()))?;
            if r.children().len() != k {
                return None;
            }
            Some(
                r.children()
                    .iter()
                    .zip(&self.children)
                    .map(|(rc, c)| {
                        (rc.ty() == c.ty)
                            .then(|| crate::dsl::execute(rc, rc.ty().len).ok())
                            .flatten()
                    })
                    .collect(),
            )
        };
        match &self.op {
            SketchOp::BackRef => {
                if let Some(v) = same_ref(&|op| matches!(op, Op::BackRef(_))) {
                    return v;
                }
                match target {
                    Some(t) if !t.is_empty() => {
                        let kids = crate::synth::backref::parse(t).children();
                        if kids.len() == k
                            && kids
                                .iter()
                                .zip(&self.children)
                                .all(|(w, c)| w.width() == c.ty.width && w.len() as u64 == c.ty.len)
                        {
                            kids.into_iter().map(Some).collect()
                        } else {
                            vec![None; k]
                        }
                    }
                    _ => vec![None; k],
                }
            }
            SketchOp::Dequant(d) => {
                let d = *d;
                if let Some(v) = same_ref(&|op| matches!(op, Op::Dequant(rd, _) if *rd == d)) {
                    return v;
                }
                let Some(t) = target else {
                    return vec![None; k];
                };
                let dtype = match d.out {
                    crate::dsl::narrow::Out::Bf16 => crate::tensor::Dtype::BF16,
                    crate::dsl::narrow::Out::F16 => crate::tensor::Dtype::F16,
                    crate::dsl::narrow::Out::F32 => crate::tensor::Dtype::F32,
                };
                if d.is_cast() {
                    match crate::synth::dequant::propose_cast(t, dtype) {
                        Some((code, codes)) if code == d.code => vec![Some(codes)],
                        _ => vec![None; k],
                    }
                } else {
                    let rows = (t.len() as u64).checked_div(d.cols).unwrap_or(0);
                    match crate::synth::dequant::propose(t, dtype, rows) {
                        Some(f) if f.d == d => vec![Some(f.codes), Some(f.scales)],
                        _ => vec![None; k],
                    }
                }
            }
            _ => {
                let Some(t) = target else {
                    return vec![None; k];
                };
                match &self.op {
                    SketchOp::Concat => {
                        let mut at = 0usize;
                        self.children
                            .iter()
                            .map(|c| {
                                let end = at + c.ty.len as usize;
                                let part = t.slice(at, end);
                                at = end;
                                Some(part)
                            })
                            .collect()
                    }
                    SketchOp::Repeat(r) => {
                        let m = t.len() / (*r as usize);
                        vec![Some(t.slice(0, m))]
                    }
                    SketchOp::Map(f) => vec![Some(crate::dsl::exec::map_words(t, *f, true))],
                    SketchOp::Scan(f, _) => {
                        vec![crate::dsl::exec::unscan(*f, t).map(|(_, u)| u)]
                    }
                    SketchOp::Merge(f) => match f.widths(t.width()) {
                        Ok(w) => crate::dsl::exec::split_fields(t, &w)
                            .into_iter()
                            .map(Some)
                            .collect(),
                        Err(_) => vec![None; k],
                    },
                    SketchOp::Transpose(r) => {
                        let rows = *r as usize;
                        // The child is the matrix by columns: the output's transpose.
                        let cols = t.len() / rows;
                        vec![Some(crate::dsl::exec::transpose(t, cols))]
                    }
                    _ => vec![None; k],
                }
            }
        }
    }

    fn resolve(&self, target: Option<Words>, reference: Option<&Node>) -> Result<Node, ParseError> {
        let types = self.child_types()?;
        for (c, want) in self.children.iter().zip(&types) {
            if let Some(want) = want {
                if c.ty != *want {
                    return Err(c.err(
                        c.ty_column,
                        format!(
                            "`{}` on line {} takes a child of type {want} here, this one says {}",
                            self.op.name(),
                            self.line,
                            c.ty
                        ),
                    ));
                }
            }
        }
        let targets = if self.children.is_empty() {
            Vec::new()
        } else {
            self.child_targets(target.as_ref(), reference)
        };
        let mut kids = Vec::with_capacity(self.children.len());
        for (j, (c, t)) in self.children.iter().zip(targets).enumerate() {
            let r = reference.and_then(|r| r.children().get(j));
            kids.push(c.resolve(t, r)?);
        }
        let type_err = |e: crate::dsl::TypeError| self.err(self.column, e.0);
        let node = match &self.op {
            SketchOp::Lit {
                codec,
                words,
                words_column,
            } => {
                let words = match words {
                    Some(v) => Words::from_u64s(self.ty.width, v),
                    None => {
                        // A literal of the reference at the same place, same type and
                        // codec, producing what this one must: taken as it is (its body
                        // may be coded in a way the codec's name does not say).
                        if let Some(r) = reference.filter(|r| r.ty() == self.ty) {
                            if let Op::Lit(l) = r.op() {
                                if l.codec == *codec {
                                    let same = match &target {
                                        Some(t) => l.decode(self.ty).is_ok_and(|w| &w == t),
                                        None => true,
                                    };
                                    if same {
                                        return Node::lit_encoded(self.ty, l.clone())
                                            .map_err(type_err);
                                    }
                                }
                            }
                        }
                        match (target, reference.filter(|r| r.ty() == self.ty)) {
                            (Some(t), _) => t,
                            (None, Some(r)) => crate::dsl::execute(r, r.ty().len).map_err(|e| {
                                self.err(
                                    self.column,
                                    format!("the reference program's node here does not run: {e}"),
                                )
                            })?,
                            (None, None) => {
                                return Err(self.err(
                                    self.column,
                                    "the words of this literal cannot be told from the tensor \
                                     (the operator above does not determine them): give them \
                                     after the type, as `= [1, 2, 3]`",
                                ))
                            }
                        }
                    }
                };
                let column = if *words_column > 0 {
                    *words_column
                } else {
                    self.column
                };
                let lit = lit_with_codec(*codec, &words).ok_or_else(|| {
                    self.err(
                        column,
                        format!(
                            "codec {} does not apply to these words (Huffman and rANS take at most {} distinct words)",
                            codec.name(),
                            "65,536"
                        ),
                    )
                })?;
                Node::lit_encoded(self.ty, lit).map_err(type_err)?
            }
            SketchOp::Const(v) => Node::constant(self.ty, *v).map_err(type_err)?,
            SketchOp::Concat => Node::concat(kids).map_err(type_err)?,
            SketchOp::Repeat(r) => {
                let c = kids.pop().expect("one child");
                Node::repeat(*r, c).map_err(type_err)?
            }
            SketchOp::Map(f) => {
                let c = kids.pop().expect("one child");
                Node::map(*f, c).map_err(type_err)?
            }
            SketchOp::Scan(f, v0) => {
                let c = kids.pop().expect("one child");
                Node::scan(*f, *v0, c).map_err(type_err)?
            }
            SketchOp::Merge(f) => Node::merge(f.clone(), kids).map_err(type_err)?,
            SketchOp::BackRef => Node::backref(self.ty.len, kids).map_err(type_err)?,
            SketchOp::Transpose(r) => {
                let c = kids.pop().expect("one child");
                Node::transpose(*r, c).map_err(type_err)?
            }
            SketchOp::Dequant(d) if d.is_cast() => {
                let c = kids.pop().expect("one child");
                Node::dequant_cast(d.code, d.out, c).map_err(type_err)?
            }
            SketchOp::Dequant(d) => {
                let s = kids.pop().expect("two children");
                let c = kids.pop().expect("two children");
                Node::dequant(*d, self.ty.len, c, s).map_err(type_err)?
            }
        };
        if node.ty() != self.ty {
            return Err(self.err(
                self.ty_column,
                format!(
                    "its children make it {}, its type says {}",
                    node.ty(),
                    self.ty
                ),
            ));
        }
        Ok(node)
    }
}

impl fmt::Display for Sketch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} : {}", self.op.name(), self.ty)
    }
}
