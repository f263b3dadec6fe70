//! Canonical wire format of a program (DESIGN §5).
//!
//! A program is written in pre-order. The type of the root is not stored (the archive
//! record holds the tensor's dtype and shape); every other type follows from the type
//! rules, so a node stores only what cannot be derived:
//!
//! | node | bytes |
//! | --- | --- |
//! | `Lit` | tag `0x10 \| codec`, LEB128 body length in bytes, body |
//! | `Const` | tag `0x20`, LEB128 value |
//! | `Concat` | tag `0x30`, LEB128 `k`, LEB128 length in words of children `1..k-1` (the last is what remains), children |
//! | `Repeat` | tag `0x40`, LEB128 `k`, child (of length `n / k`) |
//! | `Map` | tag `0x50 \| family` (xor 0, add 1, zigzag 2, gray 3, bitrev 4, rotl 5), LEB128 parameter for xor, add and rotl, child |
//! | `Scan` | tag `0x60 \| family` (xor 0, add 1), LEB128 first word, child (of length `n - 1`) |
//! | `Merge` | tag `0x70 \| family` (fields 0, bit planes 1, byte planes 2); for fields LEB128 `k` and the widths of fields `1..k-1` in bits (the last is what remains); children |
//! | `BackRef` | tag `0x80 \| family` (wire version 2; without modes 0, with modes 1), LEB128 literal words `L`, LEB128 tokens `T`, LEB128 widths in bits of the runs, lengths, distances (and modes), children (literals `b[L]`, then the token streams of `T` words) |
//! | `Transpose` | tag `0x90` (wire version 2), LEB128 rows `r`, child (of the same type) |
//! | `Dequant` | tag `0xA0 \| code` (wire version 3: E4M3 0, E5M2 1; wire version 4: F16 2, BF16 3), LEB128 output format (bfloat16 0, binary16 1, binary32 2), LEB128 columns, block rows, block columns; children (codes `u8[n]` or `u16[n]`, scales `u32[blocks]`). Columns 0 (16-bit codes only): a cast, no block parameters and no scales child |
//!
//! Tags are stable numbers independent of the Rust enums. Integers are unsigned LEB128
//! (at most 10 bytes, no overlong final byte beyond 64 bits). One encoder serves two
//! sinks ([`Sink`]): a counter, used by the search to rank programs by their exact size,
//! and a byte vector, so the size used to rank programs is by construction the size
//! written.
//!
//! The reader ([`read_program`]) rejects truncation, trailing bytes, unknown tags, integer
//! overflow, trees deeper than [`MAX_DEPTH`] or larger than [`MAX_NODES`], and any length
//! that disagrees with the type rules. Literal bodies are bounded by the record but
//! decoded only when the program runs.

use bytes::Bytes;

use super::program::{Lit, MapFn, MergeFn, Node, Op, ScanFn, Ty};
use crate::codec::CodecId;

/// Version of this wire format, stored once in the archive header. Version 2 added
/// `BackRef` (tag `0x80`) and `Transpose` (`0x90`), version 3 `Dequant` (`0xA0`) of
/// 8-bit codes, version 4 `Dequant` of 16-bit codes (`0xA2`, `0xA3`) and its cast
/// without scales, version 5 the bucket codec (`lit` family 5), version 6 the `rans8`
/// codec (`lit` family 6); a reader of a version reads every earlier one unchanged.
pub const WIRE_VERSION: u32 = 6;

/// The wire version archives without sources declare: every operator (the bucket codec,
/// which only reference records use, since version 6 too).
pub const PLAIN_WIRE_VERSION: u32 = 6;

/// Deepest tree the reader accepts (root has depth 1).
pub const MAX_DEPTH: usize = 32;

/// Most nodes the reader accepts in one program.
pub const MAX_NODES: usize = 1 << 16;

const TAG_LIT: u8 = 0x10;
const TAG_CONST: u8 = 0x20;
const TAG_CONCAT: u8 = 0x30;
const TAG_REPEAT: u8 = 0x40;
const TAG_MAP: u8 = 0x50;
const TAG_SCAN: u8 = 0x60;
const TAG_MERGE: u8 = 0x70;
const TAG_BACKREF: u8 = 0x80;
const TAG_TRANSPOSE: u8 = 0x90;
const TAG_DEQUANT: u8 = 0xA0;

/// The root operator's name from the first byte of a program, without reading the rest
/// (`lit`, `const`, `concat`, `repeat`, `map`, `scan`, `merge`, `backref`, `transpose`,
/// `dequant`, or `?` for no byte or an unknown tag).
pub fn root_op_name(program: &[u8]) -> &'static str {
    match program.first().map(|t| t & 0xf0) {
        Some(TAG_LIT) => "lit",
        Some(TAG_CONST) => "const",
        Some(TAG_CONCAT) => "concat",
        Some(TAG_REPEAT) => "repeat",
        Some(TAG_MAP) => "map",
        Some(TAG_SCAN) => "scan",
        Some(TAG_MERGE) => "merge",
        Some(TAG_BACKREF) => "backref",
        Some(TAG_TRANSPOSE) => "transpose",
        Some(TAG_DEQUANT) => "dequant",
        _ => "?",
    }
}

/// Where the encoder writes: a byte vector or a counter.
pub trait Sink {
    /// Appends bytes.
    fn put(&mut self, bytes: &[u8]);
    /// Appends one byte.
    fn put_u8(&mut self, b: u8) {
        self.put(&[b]);
    }
    /// Appends an unsigned LEB128 integer.
    fn put_uleb(&mut self, mut v: u64) {
        let mut buf = [0u8; 10];
        let mut i = 0;
        loop {
            let byte = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                buf[i] = byte;
                i += 1;
                break;
            }
            buf[i] = byte | 0x80;
            i += 1;
        }
        self.put(&buf[..i]);
    }
}

impl Sink for Vec<u8> {
    fn put(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
}

/// A sink that only counts bytes.
#[derive(Default, Debug, Clone, Copy)]
pub struct CountSink(pub u64);

impl Sink for CountSink {
    fn put(&mut self, bytes: &[u8]) {
        self.0 += bytes.len() as u64;
    }
}

/// Number of bytes of the LEB128 form of `v` (1..=10).
pub fn uleb_len(v: u64) -> u64 {
    let mut s = CountSink::default();
    s.put_uleb(v);
    s.0
}

/// Writes the node's own bytes: tag, parameters and framing, and for a `Lit` its body.
/// Children are not written.
fn write_own(node: &Node, sink: &mut impl Sink) {
    write_framing(node, sink);
    if let Op::Lit(lit) = node.op() {
        sink.put(&lit.body);
    }
}

/// The node's own bytes but a literal's body: what [`write_own`] writes before it.
fn write_framing(node: &Node, sink: &mut impl Sink) {
    match node.op() {
        Op::Lit(lit) => {
            sink.put_u8(TAG_LIT | lit.codec as u8);
            sink.put_uleb(lit.body.len() as u64);
        }
        Op::Const(v) => {
            sink.put_u8(TAG_CONST);
            sink.put_uleb(*v);
        }
        Op::Concat(children) => {
            sink.put_u8(TAG_CONCAT);
            sink.put_uleb(children.len() as u64);
            for c in &children[..children.len() - 1] {
                sink.put_uleb(c.ty().len);
            }
        }
        Op::Repeat(k, _) => {
            sink.put_u8(TAG_REPEAT);
            sink.put_uleb(*k);
        }
        Op::Map(f, _) => {
            sink.put_u8(TAG_MAP | f.family());
            match f {
                MapFn::Xor(c) | MapFn::Add(c) => sink.put_uleb(*c),
                MapFn::RotL(r) => sink.put_uleb(u64::from(*r)),
                MapFn::ZigZag | MapFn::Gray | MapFn::BitRev => {}
            }
        }
        Op::Scan(f, first, _) => {
            sink.put_u8(TAG_SCAN | f.family());
            sink.put_uleb(*first);
        }
        Op::Merge(f, _) => {
            sink.put_u8(TAG_MERGE | f.family());
            if let MergeFn::Fields(w) = f {
                sink.put_uleb(w.len() as u64);
                for &x in &w[..w.len() - 1] {
                    sink.put_uleb(u64::from(x));
                }
            }
        }
        Op::Transpose(rows, _) => {
            sink.put_u8(TAG_TRANSPOSE);
            sink.put_uleb(*rows);
        }
        Op::Dequant(d, _) => {
            sink.put_u8(TAG_DEQUANT | d.code.id());
            sink.put_uleb(u64::from(d.out.id()));
            sink.put_uleb(d.cols);
            if !d.is_cast() {
                sink.put_uleb(d.block_rows);
                sink.put_uleb(d.block_cols);
            }
        }
        Op::BackRef(children) => {
            sink.put_u8(TAG_BACKREF | (children.len() == 5) as u8);
            sink.put_uleb(children[0].ty().len);
            sink.put_uleb(children[1].ty().len);
            for c in &children[1..] {
                sink.put_uleb(u64::from(c.ty().width));
            }
        }
    }
}

/// Writes the whole program in pre-order.
pub fn write_program(node: &Node, sink: &mut impl Sink) {
    write_own(node, sink);
    for c in node.children() {
        write_program(c, sink);
    }
}

/// One piece of a program's wire bytes (see [`program_pieces`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Piece<'a> {
    /// Bytes `start..end` of the framing buffer: tags, parameters and lengths.
    Framing(std::ops::Range<usize>),
    /// A literal's body, borrowed from the tree.
    Body(&'a [u8]),
}

/// The program's wire bytes as pieces in order, without copying the literal bodies:
/// everything else is appended to `framing`, which the [`Piece::Framing`] ranges index,
/// and consecutive framing bytes make one piece. Concatenated, the pieces are
/// [`program_bytes`]; for writing a program with one vectored write.
pub fn program_pieces<'a>(node: &'a Node, framing: &mut Vec<u8>, pieces: &mut Vec<Piece<'a>>) {
    let start = framing.len();
    write_framing(node, framing);
    match pieces.last_mut() {
        Some(Piece::Framing(r)) if r.end == start => r.end = framing.len(),
        _ => pieces.push(Piece::Framing(start..framing.len())),
    }
    if let Op::Lit(lit) = node.op() {
        pieces.push(Piece::Body(&lit.body));
    }
    for c in node.children() {
        program_pieces(c, framing, pieces);
    }
}

/// The oldest wire version that holds every operator of `node`'s tree: 1, 2 with
/// `BackRef` or `Transpose`, 3 with `Dequant` of 8-bit codes, 4 with `Dequant` of
/// 16-bit codes (F16, BF16), 5 with a bucket literal. A reader refuses a program above
/// the version its archive declares.
pub fn wire_version_of(node: &Node) -> u32 {
    let own = match node.op() {
        Op::Lit(l) if l.codec == CodecId::Rans8 => 6,
        Op::Lit(l) if l.codec == CodecId::Bucket => 5,
        Op::BackRef(_) | Op::Transpose(..) => 2,
        Op::Dequant(d, _) if d.code.width() == 16 => 4,
        Op::Dequant(..) => 3,
        _ => 1,
    };
    node.children()
        .iter()
        .map(wire_version_of)
        .fold(own, u32::max)
}

/// The program's serialized length in bytes (the counting sink).
pub fn program_len(node: &Node) -> u64 {
    let mut s = CountSink::default();
    write_program(node, &mut s);
    s.0
}

/// The program's wire bytes.
pub fn program_bytes(node: &Node) -> Vec<u8> {
    // Sized first (a walk of the tree) so that the literal bodies are copied once.
    let mut v = Vec::with_capacity(program_len(node) as usize);
    write_program(node, &mut v);
    v
}

/// The node's own bytes (tag, parameters, framing, and for a `Lit` the codec tag, table
/// and payload), excluding its children. Summed over all nodes this is exactly
/// [`program_len`].
pub fn own_len(node: &Node) -> u64 {
    let mut s = CountSink::default();
    write_own(node, &mut s);
    s.0
}

/// One line of the per-node size report (DESIGN §5), in pre-order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeSize {
    /// Depth of the node (root = 0).
    pub depth: usize,
    /// Position in pre-order (root = 0).
    pub index: usize,
    /// The node's own bytes (see [`own_len`]).
    pub own_bytes: u64,
    /// Bytes of the node and all its descendants.
    pub subtree_bytes: u64,
}

/// The per-node size report: one entry per node in pre-order. The `own_bytes` add up to
/// exactly [`program_len`] of the root.
pub fn size_report(node: &Node) -> Vec<NodeSize> {
    fn go(node: &Node, depth: usize, out: &mut Vec<NodeSize>) -> u64 {
        let index = out.len();
        let own = own_len(node);
        out.push(NodeSize {
            depth,
            index,
            own_bytes: own,
            subtree_bytes: 0,
        });
        let mut total = own;
        for c in node.children() {
            total += go(c, depth + 1, out);
        }
        out[index].subtree_bytes = total;
        total
    }
    let mut out = Vec::new();
    go(node, 0, &mut out);
    out
}

/// Why a program's bytes were refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// The bytes ended inside a node.
    #[error("program truncated at byte {offset}")]
    Truncated { offset: usize },
    /// Bytes remain after the root node ended.
    #[error("program has {extra} trailing bytes after byte {offset}")]
    Trailing { offset: usize, extra: usize },
    /// A tag byte names no operator or family.
    #[error("unknown tag 0x{tag:02x} at byte {offset}")]
    UnknownTag { offset: usize, tag: u8 },
    /// A LEB128 integer does not fit in 64 bits.
    #[error("integer overflows 64 bits at byte {offset}")]
    Overflow { offset: usize },
    /// The tree is deeper or larger than the reader's limits.
    #[error("program exceeds the {what} limit of {limit} at byte {offset}")]
    Limit {
        offset: usize,
        what: &'static str,
        limit: usize,
    },
    /// A node's parameters or lengths break a type rule.
    #[error("type rule broken at byte {offset}: {what}")]
    Type { offset: usize, what: String },
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
    nodes: usize,
    /// How literal bodies are kept in the tree.
    bodies: Bodies<'a>,
}

/// How [`Reader`] keeps literal bodies.
#[derive(Clone, Copy)]
enum Bodies<'a> {
    /// Copied ([`read_program`]).
    Copied,
    /// Slices of the bytes read, which these share ([`read_program_shared`]).
    Shared(&'a Bytes),
    /// Only stepped over ([`program_end`], whose tree is dropped).
    Skipped,
}

impl Reader<'_> {
    fn u8(&mut self) -> Result<u8, WireError> {
        let b = *self
            .bytes
            .get(self.pos)
            .ok_or(WireError::Truncated { offset: self.pos })?;
        self.pos += 1;
        Ok(b)
    }

    fn uleb(&mut self) -> Result<u64, WireError> {
        let start = self.pos;
        let mut v: u64 = 0;
        for i in 0..10 {
            let b = self.u8()?;
            let low = u64::from(b & 0x7f);
            if i == 9 && (b & 0x7e) != 0 {
                return Err(WireError::Overflow { offset: start });
            }
            v |= low << (7 * i);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(WireError::Overflow { offset: start })
    }

    fn take(&mut self, len: u64) -> Result<&[u8], WireError> {
        let remaining = self.bytes.len() - self.pos;
        if len > remaining as u64 {
            return Err(WireError::Truncated {
                offset: self.bytes.len(),
            });
        }
        let s = &self.bytes[self.pos..self.pos + len as usize];
        self.pos += len as usize;
        Ok(s)
    }

    fn type_err(&self, offset: usize, what: impl Into<String>) -> WireError {
        WireError::Type {
            offset,
            what: what.into(),
        }
    }

    fn node(&mut self, ty: Ty, depth: usize) -> Result<Node, WireError> {
        let offset = self.pos;
        if depth > MAX_DEPTH {
            return Err(WireError::Limit {
                offset,
                what: "depth",
                limit: MAX_DEPTH,
            });
        }
        self.nodes += 1;
        if self.nodes > MAX_NODES {
            return Err(WireError::Limit {
                offset,
                what: "node count",
                limit: MAX_NODES,
            });
        }
        let tag = self.u8()?;
        let fam = tag & 0x0f;
        let unknown = WireError::UnknownTag { offset, tag };
        let typed = |r: &Self, res: Result<Node, super::program::TypeError>| {
            res.map_err(|e| r.type_err(offset, e.0))
        };
        let node = match tag & 0xf0 {
            TAG_LIT => {
                let codec = CodecId::from_u8(fam).ok_or(unknown)?;
                let len = self.uleb()?;
                let (start, bodies) = (self.pos, self.bodies);
                let body = self.take(len)?;
                let body = match bodies {
                    Bodies::Copied => Bytes::copy_from_slice(body),
                    Bodies::Shared(all) => all.slice(start..start + body.len()),
                    Bodies::Skipped => Bytes::new(),
                };
                let lit = Lit { codec, body };
                typed(self, Node::lit_encoded(ty, lit))?
            }
            TAG_CONST => {
                if fam != 0 {
                    return Err(unknown);
                }
                let v = self.uleb()?;
                typed(self, Node::constant(ty, v))?
            }
            TAG_CONCAT => {
                if fam != 0 {
                    return Err(unknown);
                }
                let k = self.uleb()?;
                if k < 2 || k > ty.len {
                    return Err(self.type_err(offset, format!("concat of {k} children into {ty}")));
                }
                let mut lens = Vec::new();
                let mut used: u64 = 0;
                for _ in 0..k - 1 {
                    let l = self.uleb()?;
                    used = used
                        .checked_add(l)
                        .filter(|&u| l >= 1 && u < ty.len)
                        .ok_or_else(|| {
                            self.type_err(offset, format!("concat child lengths exceed {ty}"))
                        })?;
                    lens.push(l);
                    if lens.len() > MAX_NODES {
                        return Err(WireError::Limit {
                            offset,
                            what: "node count",
                            limit: MAX_NODES,
                        });
                    }
                }
                lens.push(ty.len - used);
                let mut children = Vec::with_capacity(lens.len());
                for l in lens {
                    children.push(self.node(Ty::new(ty.width, l), depth + 1)?);
                }
                typed(self, Node::concat(children))?
            }
            TAG_REPEAT => {
                if fam != 0 {
                    return Err(unknown);
                }
                let k = self.uleb()?;
                if k < 2 || ty.len == 0 || !ty.len.is_multiple_of(k) {
                    return Err(self.type_err(offset, format!("repeat {k} into {ty}")));
                }
                let child = self.node(Ty::new(ty.width, ty.len / k), depth + 1)?;
                typed(self, Node::repeat(k, child))?
            }
            TAG_MAP => {
                let f = match fam {
                    0 => MapFn::Xor(self.uleb()?),
                    1 => MapFn::Add(self.uleb()?),
                    2 => MapFn::ZigZag,
                    3 => MapFn::Gray,
                    4 => MapFn::BitRev,
                    5 => {
                        let r = self.uleb()?;
                        MapFn::RotL(u32::try_from(r).unwrap_or(u32::MAX))
                    }
                    _ => return Err(unknown),
                };
                f.check(ty.width).map_err(|e| self.type_err(offset, e.0))?;
                let child = self.node(ty, depth + 1)?;
                typed(self, Node::map(f, child))?
            }
            TAG_SCAN => {
                let f = match fam {
                    0 => ScanFn::Xor,
                    1 => ScanFn::Add,
                    _ => return Err(unknown),
                };
                let first = self.uleb()?;
                if ty.len < 2 {
                    return Err(self.type_err(offset, format!("scan into {ty} needs n >= 2")));
                }
                let child = self.node(Ty::new(ty.width, ty.len - 1), depth + 1)?;
                typed(self, Node::scan(f, first, child))?
            }
            TAG_MERGE => {
                let f = match fam {
                    0 => {
                        let k = self.uleb()?;
                        if k < 2 || k > u64::from(ty.width) {
                            return Err(
                                self.type_err(offset, format!("merge of {k} fields into {ty}"))
                            );
                        }
                        let mut widths = Vec::with_capacity(k as usize);
                        let mut used: u64 = 0;
                        for _ in 0..k - 1 {
                            let w = self.uleb()?;
                            used = used
                                .checked_add(w)
                                .filter(|&u| w >= 1 && u < u64::from(ty.width))
                                .ok_or_else(|| {
                                    self.type_err(offset, format!("merge widths exceed {ty}"))
                                })?;
                            widths.push(w as u32);
                        }
                        widths.push(ty.width - used as u32);
                        MergeFn::Fields(widths)
                    }
                    1 => MergeFn::BitPlanes,
                    2 => MergeFn::BytePlanes,
                    _ => return Err(unknown),
                };
                let widths = f.widths(ty.width).map_err(|e| self.type_err(offset, e.0))?;
                let mut children = Vec::with_capacity(widths.len());
                for w in widths {
                    children.push(self.node(Ty::new(w, ty.len), depth + 1)?);
                }
                typed(self, Node::merge(f, children))?
            }
            TAG_TRANSPOSE => {
                if fam != 0 {
                    return Err(unknown);
                }
                let rows = self.uleb()?;
                if rows < 2 || !ty.len.is_multiple_of(rows) || ty.len / rows < 2 {
                    return Err(
                        self.type_err(offset, format!("transpose of {ty} into {rows} rows"))
                    );
                }
                let child = self.node(ty, depth + 1)?;
                typed(self, Node::transpose(rows, child))?
            }
            TAG_DEQUANT => {
                use super::narrow::{Code, Out};
                let code = Code::from_id(fam).ok_or(unknown)?;
                let out = self.uleb()?;
                let out = u8::try_from(out)
                    .ok()
                    .and_then(Out::from_id)
                    .ok_or_else(|| self.type_err(offset, format!("dequant output format {out}")))?;
                let cols = self.uleb()?;
                if out.width() != ty.width {
                    return Err(
                        self.type_err(offset, format!("dequant to {} into {ty}", out.name()))
                    );
                }
                let codes_ty = Ty::new(code.width(), ty.len);
                if cols == 0 {
                    // A cast: 16-bit codes, no scales.
                    if code.width() != 16 || ty.len == 0 {
                        return Err(self.type_err(
                            offset,
                            format!("dequant {} without scales into {ty}", code.name()),
                        ));
                    }
                    let codes = self.node(codes_ty, depth + 1)?;
                    typed(self, Node::dequant_cast(code, out, codes))?
                } else {
                    let d = super::program::Dequant {
                        code,
                        out,
                        cols,
                        block_rows: self.uleb()?,
                        block_cols: self.uleb()?,
                    };
                    let blocks = d.blocks(ty.len).map_err(|e| self.type_err(offset, e.0))?;
                    let codes = self.node(codes_ty, depth + 1)?;
                    let scales = self.node(Ty::new(32, blocks), depth + 1)?;
                    typed(self, Node::dequant(d, ty.len, codes, scales))?
                }
            }
            TAG_BACKREF => {
                if fam > 1 {
                    return Err(unknown);
                }
                let lits = self.uleb()?;
                let tokens = self.uleb()?;
                if lits == 0 || lits > ty.len || tokens == 0 || tokens > ty.len {
                    return Err(self.type_err(
                        offset,
                        format!("backref of {lits} literals and {tokens} tokens into {ty}"),
                    ));
                }
                let mut widths = vec![0u32; 3 + fam as usize];
                for w in &mut widths {
                    let v = self.uleb()?;
                    if !(1..=64).contains(&v) {
                        return Err(self.type_err(offset, format!("backref token width {v}")));
                    }
                    *w = v as u32;
                }
                let mut children = vec![self.node(Ty::new(ty.width, lits), depth + 1)?];
                for w in widths {
                    children.push(self.node(Ty::new(w, tokens), depth + 1)?);
                }
                typed(self, Node::backref(ty.len, children))?
            }
            _ => return Err(unknown),
        };
        if node.ty() != ty {
            return Err(self.type_err(
                offset,
                format!("node has type {}, expected {ty}", node.ty()),
            ));
        }
        Ok(node)
    }
}

/// Reads a program of type `ty` from exactly `bytes`.
///
/// # Errors
/// Any [`WireError`]: truncation, trailing bytes, unknown tags, overflow, limits, or a
/// broken type rule. Never panics; allocates at most in proportion to `bytes.len()`.
pub fn read_program(bytes: &[u8], ty: Ty) -> Result<Node, WireError> {
    finish_program(bytes, read_first(bytes, ty, Bodies::Copied)?)
}

/// [`read_program`] whose literal bodies share `bytes` (no copy: what decoding a record
/// of a mapped or buffered archive uses; each body is a slice that keeps the whole
/// buffer alive).
///
/// # Errors
/// As [`read_program`].
pub fn read_program_shared(bytes: &Bytes, ty: Ty) -> Result<Node, WireError> {
    finish_program(bytes, read_first(bytes, ty, Bodies::Shared(bytes))?)
}

/// The program [`read_first`] read from `bytes`, unless bytes follow it.
fn finish_program(bytes: &[u8], (node, end): (Node, usize)) -> Result<Node, WireError> {
    if end != bytes.len() {
        return Err(WireError::Trailing {
            offset: end,
            extra: bytes.len() - end,
        });
    }
    Ok(node)
}

/// Where the program of type `ty` at the start of `bytes` ends (its length in bytes), by
/// the checks of [`read_program`] on its tags, lengths, limits and types, without
/// copying its literal bodies (what finding a child's extent needs; nothing is decoded).
///
/// # Errors
/// As [`read_program`], except trailing bytes, which are the rest of `bytes`.
pub fn program_end(bytes: &[u8], ty: Ty) -> Result<usize, WireError> {
    read_first(bytes, ty, Bodies::Skipped).map(|(_, end)| end)
}

/// The program of type `ty` at the start of `bytes` and where it ends; literal bodies
/// kept as `bodies` says.
fn read_first<'a>(bytes: &'a [u8], ty: Ty, bodies: Bodies<'a>) -> Result<(Node, usize), WireError> {
    ty.check().map_err(|e| WireError::Type {
        offset: 0,
        what: e.0,
    })?;
    let mut r = Reader {
        bytes,
        pos: 0,
        nodes: 0,
        bodies,
    };
    let node = r.node(ty, 1)?;
    Ok((node, r.pos))
}
