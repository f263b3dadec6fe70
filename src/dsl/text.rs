//! The text form of programs (DESIGN §3): one readable line per node, indented two
//! spaces per level, e.g.
//!
//! ```text
//! merge fields[1,8,7] : u16[6]
//!   repeat 3 : u1[6]
//!     lit raw : u1[2] = [0, 1]
//!   const 127 : u8[6]
//!   const 0 : u7[6]
//! ```
//!
//! A `Lit` of at most [`SHOW_WORDS`] words shows its words after `=`.

use super::program::{MapFn, MergeFn, Node, Op, ScanFn};
use std::fmt;

/// Literals with at most this many words print their words.
pub const SHOW_WORDS: u64 = 16;

/// The operator and parameters of one node, without type or children
/// (e.g. `merge fields[1,8,7]`, `map rotl 3`, `lit rans`).
pub fn node_label(node: &Node) -> String {
    match node.op() {
        Op::Lit(l) => format!("lit {}", l.codec.name()),
        Op::Const(v) => format!("const {v}"),
        Op::Concat(_) => "concat".to_string(),
        Op::Repeat(k, _) => format!("repeat {k}"),
        Op::Map(f, _) => match f {
            MapFn::Xor(c) => format!("map xor {c}"),
            MapFn::Add(c) => format!("map add {c}"),
            MapFn::ZigZag => "map zigzag".to_string(),
            MapFn::Gray => "map gray".to_string(),
            MapFn::BitRev => "map bitrev".to_string(),
            MapFn::RotL(r) => format!("map rotl {r}"),
        },
        Op::Scan(f, first, _) => match f {
            ScanFn::Xor => format!("scan xor {first}"),
            ScanFn::Add => format!("scan add {first}"),
        },
        Op::Merge(f, _) => match f {
            MergeFn::Fields(w) => {
                let ws: Vec<String> = w.iter().map(u32::to_string).collect();
                format!("merge fields[{}]", ws.join(","))
            }
            MergeFn::BitPlanes => "merge bitplanes".to_string(),
            MergeFn::BytePlanes => "merge byteplanes".to_string(),
        },
        Op::BackRef(_) => "backref".to_string(),
        Op::Transpose(r, _) => format!("transpose {r}"),
        Op::Dequant(d, _) if d.is_cast() => format!("dequant {}>{}", d.code.name(), d.out.name()),
        Op::Dequant(d, _) => format!(
            "dequant {}>{} cols {} block {}x{}",
            d.code.name(),
            d.out.name(),
            d.cols,
            d.block_rows,
            d.block_cols
        ),
    }
}

/// One line of the text form for `node` (no indentation, no newline).
pub fn node_line(node: &Node) -> String {
    let mut s = format!("{} : {}", node_label(node), node.ty());
    if let Op::Lit(lit) = node.op() {
        if node.ty().len <= SHOW_WORDS {
            match lit.decode(node.ty()) {
                Ok(w) => {
                    let vals: Vec<String> = w.iter().map(|v| v.to_string()).collect();
                    s.push_str(&format!(" = [{}]", vals.join(", ")));
                }
                Err(_) => s.push_str(" = <invalid>"),
            }
        }
    }
    s
}

impl fmt::Display for Node {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fn go(n: &Node, depth: usize, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            writeln!(f, "{:indent$}{}", "", node_line(n), indent = depth * 2)?;
            n.children().iter().try_for_each(|c| go(c, depth + 1, f))
        }
        go(self, 0, f)
    }
}
