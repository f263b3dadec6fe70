//! The nine operators of the language and their type rules (DESIGN §3; paper §3.2,
//! Figure 3).
//!
//! Every program has one type `b[n]`: it produces `n` words of width `b` bits. Nodes are
//! built through checked constructors that enforce the type rules, so a [`Node`] that
//! exists is well typed; the wire reader goes through the same constructors.

use crate::codec::{CodecError, CodecId, Encoded};
use crate::tensor::{bits_needed, mask, Words};
use std::fmt;

/// The type `b[n]` of a program: `len` words of `width` bits (1..=64).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Ty {
    /// Width of every word in bits, 1..=64.
    pub width: u32,
    /// Number of words.
    pub len: u64,
}

impl Ty {
    /// A type; widths outside 1..=64 are rejected by [`Ty::check`].
    pub fn new(width: u32, len: u64) -> Ty {
        Ty { width, len }
    }

    /// Checks that the width is in 1..=64.
    pub fn check(self) -> Result<Ty, TypeError> {
        if (1..=64).contains(&self.width) {
            Ok(self)
        } else {
            Err(TypeError::new(format!(
                "width {} out of 1..=64",
                self.width
            )))
        }
    }

    /// Size in bits of the stream this type denotes, saturating.
    pub fn bits(self) -> u64 {
        self.len.saturating_mul(u64::from(self.width))
    }
}

impl fmt::Display for Ty {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "u{}[{}]", self.width, self.len)
    }
}

/// A violated type rule, with a sentence saying which.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("type error: {0}")]
pub struct TypeError(pub String);

impl TypeError {
    fn new(s: impl Into<String>) -> TypeError {
        TypeError(s.into())
    }
}

/// A bijection on `b`-bit words, applied to every word by `Map` (DESIGN §3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MapFn {
    /// `x ^ c`, with `c < 2^b`.
    Xor(u64),
    /// `x + c mod 2^b`, with `c < 2^b`.
    Add(u64),
    /// ZigZag: the `b`-bit two's-complement value `s` becomes `2s` for `s >= 0` and
    /// `-2s - 1` for `s < 0`, so small magnitudes of either sign become small words.
    ZigZag,
    /// Binary-reflected Gray code `x ^ (x >> 1)`.
    Gray,
    /// Reverses the order of the `b` bits.
    BitRev,
    /// Rotates the `b` bits left by `r`, `1 <= r < b`.
    RotL(u32),
}

impl MapFn {
    /// Stable wire family number.
    pub fn family(self) -> u8 {
        match self {
            MapFn::Xor(_) => 0,
            MapFn::Add(_) => 1,
            MapFn::ZigZag => 2,
            MapFn::Gray => 3,
            MapFn::BitRev => 4,
            MapFn::RotL(_) => 5,
        }
    }

    /// Checks the parameters against the word width `b`.
    pub fn check(self, width: u32) -> Result<(), TypeError> {
        match self {
            MapFn::Xor(c) | MapFn::Add(c) if c > mask(width) => Err(TypeError::new(format!(
                "map constant {c} does not fit in {width} bits"
            ))),
            MapFn::RotL(r) if r == 0 || r >= width => {
                Err(TypeError::new(format!("rotation {r} out of 1..{width}")))
            }
            _ => Ok(()),
        }
    }

    /// Applies the bijection to one `width`-bit word.
    #[inline]
    pub fn apply(self, x: u64, width: u32) -> u64 {
        let m = mask(width);
        match self {
            MapFn::Xor(c) => x ^ c,
            MapFn::Add(c) => x.wrapping_add(c) & m,
            MapFn::ZigZag => crate::tensor::zigzag(x, width),
            MapFn::Gray => x ^ (x >> 1),
            MapFn::BitRev => x.reverse_bits() >> (64 - width),
            MapFn::RotL(r) => ((x << r) | (x >> (width - r))) & m,
        }
    }

    /// Applies the inverse bijection to one `width`-bit word.
    #[inline]
    pub fn invert(self, y: u64, width: u32) -> u64 {
        let m = mask(width);
        match self {
            MapFn::Xor(c) => y ^ c,
            MapFn::Add(c) => y.wrapping_sub(c) & m,
            MapFn::ZigZag => crate::tensor::unzigzag(y, width),
            MapFn::Gray => {
                let mut x = y;
                let mut shift = 1;
                while shift < 64 {
                    x ^= x >> shift;
                    shift <<= 1;
                }
                x
            }
            MapFn::BitRev => y.reverse_bits() >> (64 - width),
            MapFn::RotL(r) => ((y >> r) | (y << (width - r))) & m,
        }
    }
}

/// The step function `q` of a `Scan` (DESIGN §3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScanFn {
    /// `y_i = y_{i-1} ^ u_i`.
    Xor,
    /// `y_i = y_{i-1} + u_i mod 2^b` (the child holds deltas).
    Add,
}

impl ScanFn {
    /// Stable wire family number.
    pub fn family(self) -> u8 {
        match self {
            ScanFn::Xor => 0,
            ScanFn::Add => 1,
        }
    }

    /// `q(prev, u)` on `width`-bit words.
    #[inline]
    pub fn step(self, prev: u64, u: u64, width: u32) -> u64 {
        match self {
            ScanFn::Xor => prev ^ u,
            ScanFn::Add => prev.wrapping_add(u) & mask(width),
        }
    }

    /// The child word `u` such that `q(prev, u) == y`.
    #[inline]
    pub fn unstep(self, prev: u64, y: u64, width: u32) -> u64 {
        match self {
            ScanFn::Xor => prev ^ y,
            ScanFn::Add => y.wrapping_sub(prev) & mask(width),
        }
    }
}

/// How `Merge` combines its children's words into one word (DESIGN §3).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum MergeFn {
    /// Contiguous bit fields with these widths in bits, most significant first
    /// (e.g. BF16 as `[1, 8, 7]`). At least two fields, each at least 1 bit.
    Fields(Vec<u32>),
    /// One 1-bit child per bit, most significant plane first.
    BitPlanes,
    /// One 8-bit child per byte, most significant byte first; `b` a multiple of 8.
    BytePlanes,
}

impl MergeFn {
    /// Stable wire family number.
    pub fn family(&self) -> u8 {
        match self {
            MergeFn::Fields(_) => 0,
            MergeFn::BitPlanes => 1,
            MergeFn::BytePlanes => 2,
        }
    }

    /// The children's widths in bits, most significant first, for output width `width`.
    pub fn widths(&self, width: u32) -> Result<Vec<u32>, TypeError> {
        match self {
            MergeFn::Fields(w) => {
                if w.len() < 2 {
                    return Err(TypeError::new("merge needs at least 2 fields"));
                }
                if w.contains(&0) {
                    return Err(TypeError::new("merge field of width 0"));
                }
                let sum: u64 = w.iter().map(|&x| u64::from(x)).sum();
                if sum != u64::from(width) {
                    return Err(TypeError::new(format!(
                        "merge field widths sum to {sum}, expected {width}"
                    )));
                }
                Ok(w.clone())
            }
            MergeFn::BitPlanes => {
                if width < 2 {
                    return Err(TypeError::new("bit planes need width >= 2"));
                }
                Ok(vec![1; width as usize])
            }
            MergeFn::BytePlanes => {
                if width < 16 || !width.is_multiple_of(8) {
                    return Err(TypeError::new(format!(
                        "byte planes need a width that is a multiple of 8 and >= 16, got {width}"
                    )));
                }
                Ok(vec![8; (width / 8) as usize])
            }
        }
    }
}

/// A stored literal: its codec and the codec's body (parameters, tables, payload).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Lit {
    /// The codec the body is written in.
    pub codec: CodecId,
    /// The complete body as stored: parameters, tables, payload. A program read from an
    /// archive for decoding shares the archive's bytes ([`bytes::Bytes`] slices of it)
    /// rather than copying them.
    pub body: bytes::Bytes,
}

impl From<Encoded> for Lit {
    /// The literal of an encoder's output (its body moved, not copied).
    fn from(Encoded { codec, body }: Encoded) -> Lit {
        Lit {
            codec,
            body: body.into(),
        }
    }
}

impl Lit {
    /// Encodes `words` with the smallest codec (DESIGN §4).
    pub fn encode(words: &Words) -> Lit {
        crate::codec::encode_best(words).into()
    }

    /// Decodes the body into `ty.len` words of `ty.width` bits.
    pub fn decode(&self, ty: Ty) -> Result<Words, CodecError> {
        let n = usize::try_from(ty.len).map_err(|_| CodecError::Invalid {
            codec: self.codec.name(),
            what: format!("length {} does not fit in memory", ty.len),
        })?;
        crate::codec::decode(self.codec, &self.body, ty.width, n)
    }

    /// [`Lit::decode`] for a literal that may be coded against `context` (a bucket
    /// body with the context flag, [`crate::codec::bucket`]).
    ///
    /// # Errors
    /// As [`Lit::decode`].
    pub fn decode_in(
        &self,
        ty: Ty,
        context: Option<crate::codec::bucket::Context<'_>>,
    ) -> Result<Words, CodecError> {
        let n = usize::try_from(ty.len).map_err(|_| CodecError::Invalid {
            codec: self.codec.name(),
            what: format!("length {} does not fit in memory", ty.len),
        })?;
        crate::codec::select::decode_in(self.codec, &self.body, ty.width, n, context)
    }

    /// Whether the body, a literal of `width`-bit words, decodes to exactly field
    /// `(shift, width)` of `src` (as [`Lit::decode`] and a comparison say; all of `src`
    /// for `shift = 0, width = src.width()`), checked without decoding where the codec
    /// can ([`crate::codec::select::matches_field`]).
    ///
    /// # Errors
    /// As [`Lit::decode`].
    ///
    /// # Panics
    /// If the field does not lie inside the words (`shift + width > src.width()`).
    pub fn matches_field(&self, src: &Words, shift: u32, width: u32) -> Result<bool, CodecError> {
        crate::codec::select::matches_field(self.codec, &self.body, src, shift, width)
    }
}

/// One operator application; children are [`Node`]s.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// `Lit_b(v)`: the words, stored by a literal codec.
    Lit(Lit),
    /// `Const_{b,n}(v)`: `v` repeated `n >= 1` times.
    Const(u64),
    /// `Concat(P1..Pk)`: children one after another; `k >= 2`, each non-empty.
    Concat(Vec<Node>),
    /// `Repeat_k(P)`: the child's stream `k >= 2` times.
    Repeat(u64, Box<Node>),
    /// `Map_u(P)`: a bijection on every word.
    Map(MapFn, Box<Node>),
    /// `Scan_q(v0, P)`: `v0`, then `y_i = q(y_{i-1}, u_i)` for the child's words `u`.
    Scan(ScanFn, u64, Box<Node>),
    /// `Merge_f(P1..Pk)`: equal-length children combined pointwise.
    Merge(MergeFn, Vec<Node>),
    /// `BackRef(L, R, M, D[, K])`: back references (LZ77). Four or five children: the
    /// literal words `L` (of the output's width), and per token `i` a literal run `R[i]`,
    /// a match length `M[i]`, a distance `D[i]` (in words, minus one) and optionally a
    /// mode `K[i]` (0 when absent). Token `i` appends the next `R[i]` literal words, then
    /// `M[i]` words copied from the output: with mode bit 0 clear, forward from `D[i] + 1`
    /// words back (a copy may overlap what it writes, so distance 1 repeats the last
    /// word); with it set, backward from the word `D[i] + 1` back (a mirror image: the
    /// word before the copy, then the one before it, ...). Mode bit 1 flips the top bit
    /// of every copied word (a float's sign). See [`Node::backref`] for the type rules and
    /// [`crate::dsl::exec::back_references`] for the checks made while running.
    BackRef(Vec<Node>),
    /// `Transpose_r(P)`: the child holds an `r x c` matrix column by column (`c = n / r`);
    /// the output is the same matrix row by row: output word `i * c + j` is child word
    /// `j * r + i`. Lets programs see a tensor's columns (a Fourier basis whose columns
    /// mirror each other) as runs.
    Transpose(u64, Box<Node>),
    /// `Dequant_{c,o,cols,br x bc}(C, S)`: dequantization. The output, `rows x cols` row
    /// by row (`rows = n / cols`), is cut into blocks of `br x bc` words (the last ones
    /// in a row or column may be smaller), numbered row-major; word `(i, j)` is
    /// `o.round(c.value(C[i * cols + j]) * f32::from_bits(S[(i / br) * ceil(cols / bc)
    /// + j / bc]))` ([`crate::dsl::narrow`] spells out the arithmetic). Children: the
    /// codes `u{w}[n]` (`w` the code format's width: 8 for E4M3 and E5M2, 16 for F16
    /// and BF16) and one scale per block, `u32[ceil(rows / br) * ceil(cols / bc)]`.
    /// Per-row scales are blocks of `1 x cols`, one scale for the tensor `rows x cols`.
    /// A cast ([`Dequant::cast`], 16-bit codes only) has the codes as its one child and
    /// takes every scale as `1.0`: word `i` is `o.round(c.value(C[i]))`.
    Dequant(Dequant, Vec<Node>),
}

/// The parameters of [`Op::Dequant`]: what the codes are, what the output is, and how
/// the scales tile the output.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Dequant {
    /// The codes' format.
    pub code: crate::dsl::narrow::Code,
    /// The output's format (its width is the node's).
    pub out: crate::dsl::narrow::Out,
    /// Columns of the output's matrix view (`>= 1`, divides `n`); 0 for a cast (no
    /// scales, [`Dequant::cast`]).
    pub cols: u64,
    /// Block height in rows (`1..=rows`; 0 for a cast).
    pub block_rows: u64,
    /// Block width in columns (`1..=cols`; 0 for a cast).
    pub block_cols: u64,
}

impl Dequant {
    /// A cast: codes of a 16-bit format ([`crate::dsl::narrow::Code::F16`], `BF16`)
    /// without scales (every scale `1.0`); the output has one word per code.
    pub fn cast(code: crate::dsl::narrow::Code, out: crate::dsl::narrow::Out) -> Dequant {
        Dequant {
            code,
            out,
            cols: 0,
            block_rows: 0,
            block_cols: 0,
        }
    }

    /// Whether this is a cast (no scales child).
    pub fn is_cast(&self) -> bool {
        self.cols == 0
    }

    /// Scales (blocks) for an output of `n` words: `ceil(rows / br) * ceil(cols / bc)`.
    /// Fails unless the parameters fit `n` (see the fields; a cast has no blocks).
    pub fn blocks(&self, n: u64) -> Result<u64, TypeError> {
        let Dequant {
            cols,
            block_rows: br,
            block_cols: bc,
            ..
        } = *self;
        if n == 0 || cols == 0 || !n.is_multiple_of(cols) {
            return Err(TypeError::new(format!(
                "dequant of {n} words into {cols} columns"
            )));
        }
        let rows = n / cols;
        if !(1..=rows).contains(&br) || !(1..=cols).contains(&bc) {
            return Err(TypeError::new(format!(
                "dequant blocks {br}x{bc} of a {rows}x{cols} matrix"
            )));
        }
        Ok(rows.div_ceil(br) * cols.div_ceil(bc))
    }
}

/// A well-typed program node: its operator and its type.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Node {
    ty: Ty,
    op: Op,
}

impl Node {
    /// The node's type `b[n]`.
    #[inline]
    pub fn ty(&self) -> Ty {
        self.ty
    }

    /// The node's operator.
    #[inline]
    pub fn op(&self) -> &Op {
        &self.op
    }

    /// The node's children, left to right.
    pub fn children(&self) -> &[Node] {
        match &self.op {
            Op::Lit(_) | Op::Const(_) => &[],
            Op::Concat(c) | Op::Merge(_, c) | Op::BackRef(c) | Op::Dequant(_, c) => c,
            Op::Repeat(_, c) | Op::Map(_, c) | Op::Scan(_, _, c) | Op::Transpose(_, c) => {
                std::slice::from_ref(c)
            }
        }
    }

    /// Number of nodes in the tree.
    pub fn node_count(&self) -> usize {
        1 + self.children().iter().map(Node::node_count).sum::<usize>()
    }

    /// Depth of the tree (a leaf has depth 1).
    pub fn depth(&self) -> usize {
        1 + self.children().iter().map(Node::depth).max().unwrap_or(0)
    }

    /// A literal holding `words`, encoded with the smallest codec.
    pub fn lit(words: &Words) -> Node {
        Node {
            ty: Ty::new(words.width(), words.len() as u64),
            op: Op::Lit(Lit::encode(words)),
        }
    }

    /// A literal from an already-encoded body, not decoded here (a body that does not
    /// decode is found when the program runs).
    pub fn lit_encoded(ty: Ty, lit: Lit) -> Result<Node, TypeError> {
        ty.check()?;
        Ok(Node {
            ty,
            op: Op::Lit(lit),
        })
    }

    /// `Const_{b,n}(v)`. Fails unless `n >= 1` and `v < 2^b`.
    pub fn constant(ty: Ty, value: u64) -> Result<Node, TypeError> {
        ty.check()?;
        if ty.len == 0 {
            return Err(TypeError::new("const needs n >= 1"));
        }
        if value > mask(ty.width) {
            return Err(TypeError::new(format!(
                "const {value} does not fit in {} bits",
                ty.width
            )));
        }
        Ok(Node {
            ty,
            op: Op::Const(value),
        })
    }

    /// `Concat(children)`. Fails unless `k >= 2`, widths agree and each child is non-empty.
    pub fn concat(children: Vec<Node>) -> Result<Node, TypeError> {
        if children.len() < 2 {
            return Err(TypeError::new("concat needs at least 2 children"));
        }
        let width = children[0].ty.width;
        let mut len: u64 = 0;
        for c in &children {
            if c.ty.width != width {
                return Err(TypeError::new(format!(
                    "concat children widths differ: {} and {}",
                    width, c.ty.width
                )));
            }
            if c.ty.len == 0 {
                return Err(TypeError::new("concat child is empty"));
            }
            len = len
                .checked_add(c.ty.len)
                .ok_or_else(|| TypeError::new("concat length overflows"))?;
        }
        Ok(Node {
            ty: Ty::new(width, len),
            op: Op::Concat(children),
        })
    }

    /// `Repeat_k(child)`. Fails unless `k >= 2` and the child is non-empty.
    pub fn repeat(count: u64, child: Node) -> Result<Node, TypeError> {
        if count < 2 {
            return Err(TypeError::new("repeat needs k >= 2"));
        }
        if child.ty.len == 0 {
            return Err(TypeError::new("repeat child is empty"));
        }
        let len = child
            .ty
            .len
            .checked_mul(count)
            .ok_or_else(|| TypeError::new("repeat length overflows"))?;
        Ok(Node {
            ty: Ty::new(child.ty.width, len),
            op: Op::Repeat(count, Box::new(child)),
        })
    }

    /// `Map_u(child)`. Fails if the parameters do not fit the child's width.
    pub fn map(f: MapFn, child: Node) -> Result<Node, TypeError> {
        f.check(child.ty.width)?;
        Ok(Node {
            ty: child.ty,
            op: Op::Map(f, Box::new(child)),
        })
    }

    /// `Scan_q(v0, child)`: type `b[m+1]` for a child `b[m]`, `m >= 1`.
    pub fn scan(f: ScanFn, first: u64, child: Node) -> Result<Node, TypeError> {
        let ty = child.ty;
        if ty.len == 0 {
            return Err(TypeError::new("scan needs n >= 2"));
        }
        if first > mask(ty.width) {
            return Err(TypeError::new(format!(
                "scan start {first} does not fit in {} bits",
                ty.width
            )));
        }
        let len = ty
            .len
            .checked_add(1)
            .ok_or_else(|| TypeError::new("scan length overflows"))?;
        Ok(Node {
            ty: Ty::new(ty.width, len),
            op: Op::Scan(f, first, Box::new(child)),
        })
    }

    /// `Merge_f(children)`. Fails unless the children's widths are the family's widths
    /// for their sum, there are at least 2, and all have the same length.
    pub fn merge(f: MergeFn, children: Vec<Node>) -> Result<Node, TypeError> {
        if children.len() < 2 {
            return Err(TypeError::new("merge needs at least 2 children"));
        }
        let width: u64 = children.iter().map(|c| u64::from(c.ty.width)).sum();
        if width > 64 {
            return Err(TypeError::new(format!("merge width {width} exceeds 64")));
        }
        let width = width as u32;
        let widths = f.widths(width)?;
        let len = children[0].ty.len;
        for (c, &w) in children.iter().zip(&widths) {
            if c.ty.width != w {
                return Err(TypeError::new(format!(
                    "merge child has width {}, expected {w}",
                    c.ty.width
                )));
            }
            if c.ty.len != len {
                return Err(TypeError::new(format!(
                    "merge children lengths differ: {} and {}",
                    len, c.ty.len
                )));
            }
        }
        if widths.len() != children.len() {
            return Err(TypeError::new(format!(
                "merge has {} children, expected {}",
                children.len(),
                widths.len()
            )));
        }
        Ok(Node {
            ty: Ty::new(width, len),
            op: Op::Merge(f, children),
        })
    }

    /// `BackRef(literals, runs, lengths, distances[, modes])` of type `b[len]`, `b` the
    /// literals' width (see [`Op::BackRef`]). Fails unless there are four or five
    /// children, the literals hold `1..=len` words, and the token streams have one common length
    /// `T` with `1 <= T <= len` (each token writes at least one word; checked when the
    /// program runs, as are the sums of runs and lengths and every distance). The
    /// token streams may have any width: each is as wide as its largest value needs.
    pub fn backref(len: u64, mut children: Vec<Node>) -> Result<Node, TypeError> {
        let modes = match children.len() {
            4 => None,
            5 => children.pop(),
            k => {
                return Err(TypeError::new(format!(
                    "backref needs 4 or 5 children, got {k}"
                )))
            }
        };
        let [lits, runs, lens, dists] = <[Node; 4]>::try_from(children)
            .map_err(|c| TypeError::new(format!("backref needs 4 children, got {}", c.len())))?;
        let width = lits.ty.width;
        if lits.ty.len == 0 || lits.ty.len > len {
            return Err(TypeError::new(format!(
                "backref of {len} words with {} literal words",
                lits.ty.len
            )));
        }
        let tokens = runs.ty.len;
        let modes_len = modes.as_ref().map_or(tokens, |m| m.ty.len);
        if lens.ty.len != tokens || dists.ty.len != tokens || modes_len != tokens {
            return Err(TypeError::new(format!(
                "backref token streams differ in length: {tokens}, {} and {}",
                lens.ty.len, dists.ty.len
            )));
        }
        if tokens == 0 || tokens > len {
            return Err(TypeError::new(format!(
                "backref of {len} words with {tokens} tokens"
            )));
        }
        let mut children = vec![lits, runs, lens, dists];
        children.extend(modes);
        Ok(Node {
            ty: Ty::new(width, len),
            op: Op::BackRef(children),
        })
    }

    /// `Transpose_r(child)` of the child's type (see [`Op::Transpose`]). Fails unless
    /// `r >= 2` and `r` divides the child's length into `c >= 2` columns.
    pub fn transpose(rows: u64, child: Node) -> Result<Node, TypeError> {
        let n = child.ty.len;
        if rows < 2 || !n.is_multiple_of(rows) || n / rows < 2 {
            return Err(TypeError::new(format!(
                "transpose of {n} words into {rows} rows"
            )));
        }
        Ok(Node {
            ty: child.ty,
            op: Op::Transpose(rows, Box::new(child)),
        })
    }

    /// `Dequant(codes, scales)` (see [`Op::Dequant`]). Fails unless `d` fits `n` words
    /// of its output width ([`Dequant::blocks`]; a cast fails, see
    /// [`Node::dequant_cast`]), the codes are `u{w}[n]` with `w` the code format's width
    /// and the scales `u32[blocks]`.
    pub fn dequant(d: Dequant, n: u64, codes: Node, scales: Node) -> Result<Node, TypeError> {
        let blocks = d.blocks(n)?;
        let w = d.code.width();
        if codes.ty != Ty::new(w, n) || scales.ty != Ty::new(32, blocks) {
            return Err(TypeError::new(format!(
                "dequant of {n} words takes u{w}[{n}] codes and u32[{blocks}] scales, not {} and {}",
                codes.ty, scales.ty
            )));
        }
        Ok(Node {
            ty: Ty::new(d.out.width(), n),
            op: Op::Dequant(d, vec![codes, scales]),
        })
    }

    /// `Dequant(codes)` without scales: the cast of 16-bit codes ([`Dequant::cast`]) to
    /// `out`, one word of `out`'s width per code. Fails unless the codes are of a 16-bit
    /// format, `u16[n]` with `n >= 1`.
    pub fn dequant_cast(
        code: crate::dsl::narrow::Code,
        out: crate::dsl::narrow::Out,
        codes: Node,
    ) -> Result<Node, TypeError> {
        let n = codes.ty.len;
        if code.width() != 16 || codes.ty.width != 16 || n == 0 {
            return Err(TypeError::new(format!(
                "dequant {}>{} without scales of {} codes",
                code.name(),
                out.name(),
                codes.ty
            )));
        }
        Ok(Node {
            ty: Ty::new(out.width(), n),
            op: Op::Dequant(Dequant::cast(code, out), vec![codes]),
        })
    }

    /// Name of the root operator (`lit`, `const`, `concat`, `repeat`, `map`, `scan`,
    /// `merge`, `backref`, `transpose`, `dequant`).
    pub fn op_name(&self) -> &'static str {
        match &self.op {
            Op::Lit(_) => "lit",
            Op::Const(_) => "const",
            Op::Concat(_) => "concat",
            Op::Repeat(..) => "repeat",
            Op::Map(..) => "map",
            Op::Scan(..) => "scan",
            Op::Merge(..) => "merge",
            Op::BackRef(..) => "backref",
            Op::Transpose(..) => "transpose",
            Op::Dequant(..) => "dequant",
        }
    }
}

/// Bits needed for the largest word of a stream (0 for empty or all-zero streams).
pub fn max_bits(words: &Words) -> u32 {
    words.max().map_or(0, bits_needed)
}
