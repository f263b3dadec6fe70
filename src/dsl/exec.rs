//! Execution of programs on packed word streams (DESIGN §3).
//!
//! Every operator works on [`Words`] in their narrowest container; nothing widens a
//! stream to one `u64` per word. The forward direction (run a program) and the inverse
//! pieces the synthesizer needs (split a word into fields, take differences) live side
//! by side so they are tested as pairs.

use super::program::{Dequant, MapFn, Node, Op, ScanFn, Ty};
use crate::codec::bucket::Context;
use crate::codec::CodecError;
pub use crate::tensor::extract;
use crate::tensor::with_buf;
use crate::tensor::{mask, WordBuf, Words};

/// Why a program could not be executed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExecError {
    /// A literal's body did not decode to its type.
    #[error("literal {ty}: {source}")]
    Lit {
        ty: Ty,
        #[source]
        source: CodecError,
    },
    /// The program's output would exceed the words the caller allowed.
    #[error("program output of {len} words exceeds the limit of {limit}")]
    TooLarge { len: u64, limit: u64 },
    /// A `backref`'s tokens do not produce its type: a distance reaching before the
    /// start, runs or lengths that overrun, literals left over, a token that writes
    /// nothing.
    #[error("backref {ty}: {what}")]
    BackRef { ty: Ty, what: String },
}

/// Runs a program and returns its `ty().len` words of `ty().width` bits.
///
/// # Errors
/// [`ExecError::Lit`] if a literal body is inconsistent with its type;
/// [`ExecError::TooLarge`] if the output has more than `max_words` words (checked before
/// anything is allocated).
pub fn execute(node: &Node, max_words: u64) -> Result<Words, ExecError> {
    execute_in(node, max_words, None)
}

/// [`execute`] of a program whose literals may be coded against `context`: a reference
/// record's residual program, given its base tensor's words (of the tensor's width and
/// length). Word `i` of the output lines up with context word `i`; `concat` hands each
/// child its part, `map` and `merge` (length-preserving) the whole, the other operators
/// none.
///
/// # Errors
/// As [`execute`]; a literal coded against a context it is not given is
/// [`ExecError::Lit`].
pub fn execute_in(
    node: &Node,
    max_words: u64,
    context: Option<&Words>,
) -> Result<Words, ExecError> {
    let ty = node.ty();
    if ty.len > max_words {
        return Err(ExecError::TooLarge {
            len: ty.len,
            limit: max_words,
        });
    }
    let ctx = context.map(|words| Context { words, start: 0 });
    run(node, ctx)
}

/// Whether a literal of `node`'s tree is coded against a context (a bucket body with
/// the context flag): [`execute_in`] must be given one.
pub fn uses_context(node: &Node) -> bool {
    match node.op() {
        Op::Lit(lit) => {
            lit.codec == crate::codec::CodecId::Bucket
                && crate::codec::bucket::has_context(&lit.body)
        }
        _ => node.children().iter().any(uses_context),
    }
}

/// [`execute`] without the size check: what [`super::fused::execute_into`] runs for the
/// operators it does not fuse (its caller sized the output).
pub(crate) fn run_node(node: &Node) -> Result<Words, ExecError> {
    run(node, None)
}

/// Merges of at least this many words decode their fields in parallel.
const PARALLEL_WORDS: usize = 1 << 20;

fn run(node: &Node, ctx: Option<Context<'_>>) -> Result<Words, ExecError> {
    let ty = node.ty();
    let n = ty.len as usize;
    let none = |c: &Node| run(c, None);
    Ok(match node.op() {
        Op::Lit(lit) => lit
            .decode_in(ty, ctx)
            .map_err(|source| ExecError::Lit { ty, source })?,
        Op::Const(v) => Words::filled(ty.width, *v, n),
        Op::Concat(children) => {
            let mut out = Words::with_capacity(ty.width, n);
            for c in children {
                let part = ctx.map(|x| Context {
                    words: x.words,
                    start: x.start + out.len(),
                });
                out.extend_from(&run(c, part)?);
            }
            out
        }
        Op::Repeat(k, child) => repeat(&none(child)?, *k as usize),
        Op::Map(f, child) => map_words(&run(child, ctx)?, *f, false),
        Op::Scan(f, first, child) => scan(*f, *first, &none(child)?),
        Op::Merge(f, children) => {
            let widths = f
                .widths(ty.width)
                .expect("constructors checked merge widths");
            merge_fields(&run_parts(children, n, ctx)?, &widths)
        }
        Op::BackRef(children) => {
            let kids = children.iter().map(none).collect::<Result<Vec<_>, _>>()?;
            back_references(n, &kids[0], &kids[1], &kids[2], &kids[3], kids.get(4))
                .map_err(|what| ExecError::BackRef { ty, what })?
        }
        Op::Transpose(rows, child) => transpose(&none(child)?, *rows as usize),
        Op::Dequant(d, children) => {
            let scales = children.get(1).map(none).transpose()?;
            dequantize(d, &none(&children[0])?, scales.as_ref())
        }
    })
}

/// The outputs of a merge's children. Large fields decode on the pool's other threads
/// too (a tensor that is one work item still uses every core); the first failing field,
/// in order, is the error either way.
fn run_parts(
    children: &[Node],
    n: usize,
    ctx: Option<Context<'_>>,
) -> Result<Vec<Words>, ExecError> {
    let parts: Vec<Result<Words, ExecError>> = if n >= PARALLEL_WORDS {
        use rayon::prelude::*;
        children.par_iter().map(|c| run(c, ctx)).collect()
    } else {
        children.iter().map(|c| run(c, ctx)).collect()
    };
    parts.into_iter().collect()
}

/// Whether running `node` gives exactly `target` (its width and words): what
/// [`execute`] followed by a comparison says, mostly without running it.
///
/// * A literal is checked against `target` by its codec
///   ([`super::program::Lit::matches_field`]: the rANS wide layout without decoding).
/// * A merge gives `target` exactly when each child gives its field of `target`: the
///   bits [`split_fields`] takes and [`merge_fields`] puts back (the merge's definition,
///   DESIGN §3). Each child is checked against its field, a literal child in place (no
///   field is extracted), any other against the extracted field.
/// * Any other program is run and compared.
///
/// # Errors
/// [`ExecError::Lit`] if a literal body is inconsistent with its type (as [`execute`];
/// when the words differ too, `Ok(false)` may come first). A program whose type differs
/// from `target`'s is `Ok(false)`, never run.
pub fn matches(node: &Node, target: &Words) -> Result<bool, ExecError> {
    let ty = node.ty();
    if ty.width != target.width() || ty.len != target.len() as u64 {
        return Ok(false);
    }
    field_matches(node, target, 0)
}

/// [`matches`] of `node` (of the length of `target`, at most as wide) against field
/// `(shift, node.ty().width)` of `target`.
fn field_matches(node: &Node, target: &Words, shift: u32) -> Result<bool, ExecError> {
    let ty = node.ty();
    match node.op() {
        Op::Lit(lit) => lit
            .matches_field(target, shift, ty.width)
            .map_err(|source| ExecError::Lit { ty, source }),
        Op::Merge(f, children) => {
            let widths = f
                .widths(ty.width)
                .expect("constructors checked merge widths");
            // Most significant field first, as `split_fields` takes them.
            let mut at = shift + ty.width;
            let fields: Vec<(&Node, u32)> = children
                .iter()
                .zip(&widths)
                .map(|(c, &w)| {
                    at -= w;
                    (c, at)
                })
                .collect();
            let each = |&(c, s): &(&Node, u32)| field_matches(c, target, s);
            let results: Vec<Result<bool, ExecError>> = if target.len() >= PARALLEL_WORDS {
                use rayon::prelude::*;
                fields.par_iter().map(each).collect()
            } else {
                fields.iter().map(each).collect()
            };
            let mut all = true;
            for r in results {
                all &= r?;
            }
            Ok(all)
        }
        _ if shift == 0 && ty.width == target.width() => Ok(run(node, None)? == *target),
        _ => Ok(run(node, None)? == extract(target.buf(), shift, ty.width)),
    }
}

/// Runs back references (DESIGN §3, [`super::Op::BackRef`]): for each token `i`, the
/// next `runs[i]` words of `lits`, then `lens[i]` words copied from the output, starting
/// `dists[i] + 1` words back: forward, or backward when bit 0 of `modes[i]` is set, with
/// the top bit of each copied word flipped when bit 1 is (`modes` absent: all 0).
/// Returns `n` words of the literals' width.
///
/// # Errors
/// A sentence saying what is wrong when the tokens do not make exactly `n` words from
/// exactly all of `lits`: a run past the literals, a copy reaching before the start,
/// output past `n`, a token that writes nothing, a mode above 3, literals left over, or
/// fewer than `n` words. Never allocates more than `n` words.
pub fn back_references(
    n: usize,
    lits: &Words,
    runs: &Words,
    lens: &Words,
    dists: &Words,
    modes: Option<&Words>,
) -> Result<Words, String> {
    let tokens = runs.len();
    if lens.len() != tokens || dists.len() != tokens || modes.is_some_and(|m| m.len() != tokens) {
        return Err("token streams of different lengths".into());
    }
    let top = 1u64 << (lits.width() - 1);
    macro_rules! go {
        ($v:expr, $t:ty) => {{
            let lit: &[$t] = $v;
            let flip = top as $t;
            let mut out: Vec<$t> = Vec::with_capacity(n);
            let mut used = 0usize;
            for i in 0..tokens {
                let (r, m, d) = (runs.get(i), lens.get(i), dists.get(i));
                let mode = modes.map_or(0, |k| k.get(i));
                if r == 0 && m == 0 {
                    return Err(format!("token {i} writes nothing"));
                }
                if mode > 3 {
                    return Err(format!("token {i}: mode {mode} is not 0..=3"));
                }
                let r = usize::try_from(r)
                    .ok()
                    .filter(|&r| r <= lit.len() - used && r <= n - out.len())
                    .ok_or_else(|| format!("token {i}: a run of {r} literals overruns"))?;
                out.extend_from_slice(&lit[used..used + r]);
                used += r;
                if m == 0 {
                    continue;
                }
                let m = usize::try_from(m)
                    .ok()
                    .filter(|&m| m <= n - out.len())
                    .ok_or_else(|| format!("token {i}: a match of {m} words overruns"))?;
                let reach = || {
                    format!(
                        "token {i}: a copy from {} back reaches before the start",
                        d.saturating_add(1)
                    )
                };
                let start = usize::try_from(d)
                    .ok()
                    .and_then(|d| out.len().checked_sub(d)?.checked_sub(1))
                    .ok_or_else(reach)?;
                let x = if mode & 2 != 0 { flip } else { 0 };
                if mode & 1 != 0 {
                    // Backward from `start`: a mirror image of the words before it.
                    if start + 1 < m {
                        return Err(reach());
                    }
                    for j in 0..m {
                        let w = out[start - j] ^ x;
                        out.push(w);
                    }
                } else if x == 0 && start + m <= out.len() {
                    out.extend_from_within(start..start + m);
                } else {
                    // The copy overlaps what it writes, or flips: word by word.
                    for j in start..start + m {
                        let w = out[j] ^ x;
                        out.push(w);
                    }
                }
            }
            if used != lit.len() {
                return Err(format!("{} literal words left over", lit.len() - used));
            }
            if out.len() != n {
                return Err(format!("tokens make {} words, expected {n}", out.len()));
            }
            out
        }};
    }
    let buf = match lits.buf() {
        WordBuf::U8(v) => WordBuf::U8(go!(v, u8)),
        WordBuf::U16(v) => WordBuf::U16(go!(v, u16)),
        WordBuf::U32(v) => WordBuf::U32(go!(v, u32)),
        WordBuf::U64(v) => WordBuf::U64(go!(v, u64)),
    };
    Ok(Words::from_buf_trusted(lits.width(), buf))
}

/// The `rows x c` matrix (`c = n / rows`) that `child` holds column by column, row by
/// row: output word `i * c + j` is `child[j * rows + i]` ([`super::Op::Transpose`]).
/// Its inverse is itself with `c` rows: `transpose(&transpose(w, r), n / r) == w`.
///
/// # Panics
/// If `r` is 0 or does not divide the length.
pub fn transpose(child: &Words, rows: usize) -> Words {
    let n = child.len();
    assert!(
        rows > 0 && n.is_multiple_of(rows),
        "transpose of {n} words into {rows} rows"
    );
    let cols = n / rows;
    macro_rules! go {
        ($v:expr) => {{
            let v = $v;
            let mut out = Vec::with_capacity(n);
            for i in 0..rows {
                out.extend((0..cols).map(|j| v[j * rows + i]));
            }
            out
        }};
    }
    let buf = match child.buf() {
        WordBuf::U8(v) => WordBuf::U8(go!(v)),
        WordBuf::U16(v) => WordBuf::U16(go!(v)),
        WordBuf::U32(v) => WordBuf::U32(go!(v)),
        WordBuf::U64(v) => WordBuf::U64(go!(v)),
    };
    Words::from_buf_trusted(child.width(), buf)
}

/// The stream repeated `k` times.
pub fn repeat(words: &Words, k: usize) -> Words {
    let mut out = Words::with_capacity(words.width(), words.len() * k);
    for _ in 0..k {
        out.extend_from(words);
    }
    out
}

/// Applies the bijection `f` (or its inverse when `inverse`) to every word.
pub fn map_words(words: &Words, f: MapFn, inverse: bool) -> Words {
    let w = words.width();
    let m = mask(w);
    // One closure per family so the inner loop has no dispatch.
    match (f, inverse) {
        (MapFn::Xor(c), _) => words.map_to(w, |x| x ^ c),
        (MapFn::Add(c), false) => words.map_to(w, |x| x.wrapping_add(c) & m),
        (MapFn::Add(c), true) => words.map_to(w, |x| x.wrapping_sub(c) & m),
        (f, false) => words.map_to(w, |x| f.apply(x, w)),
        (f, true) => words.map_to(w, |x| f.invert(x, w)),
    }
}

/// `Scan_q(first, u)`: `first`, then `y_i = q(y_{i-1}, u_i)`; `u.len() + 1` words.
pub fn scan(f: ScanFn, first: u64, u: &Words) -> Words {
    let w = u.width();
    let m = mask(w);
    macro_rules! go {
        ($v:expr, $t:ty) => {{
            let mut out: Vec<$t> = Vec::with_capacity($v.len() + 1);
            let mut prev = first as $t;
            out.push(prev);
            match f {
                ScanFn::Xor => {
                    for &x in $v.iter() {
                        prev ^= x;
                        out.push(prev);
                    }
                }
                ScanFn::Add => {
                    for &x in $v.iter() {
                        prev = ((prev as u64).wrapping_add(x as u64) & m) as $t;
                        out.push(prev);
                    }
                }
            }
            out
        }};
    }
    let buf = match u.buf() {
        WordBuf::U8(v) => WordBuf::U8(go!(v, u8)),
        WordBuf::U16(v) => WordBuf::U16(go!(v, u16)),
        WordBuf::U32(v) => WordBuf::U32(go!(v, u32)),
        WordBuf::U64(v) => WordBuf::U64(go!(v, u64)),
    };
    Words::from_buf_trusted(w, buf)
}

/// The inverse of [`scan`]: for `y` with at least one word, returns `(y_0, u)` with
/// `u_i = q^{-1}(y_{i-1}, y_i)`.
pub fn unscan(f: ScanFn, y: &Words) -> Option<(u64, Words)> {
    if y.is_empty() {
        return None;
    }
    let w = y.width();
    let m = mask(w);
    macro_rules! go {
        ($v:expr) => {
            $v.windows(2)
                .map(|p| match f {
                    ScanFn::Xor => p[0] ^ p[1],
                    ScanFn::Add => ((p[1] as u64).wrapping_sub(p[0] as u64) & m) as _,
                })
                .collect()
        };
    }
    let buf = match y.buf() {
        WordBuf::U8(v) => WordBuf::U8(go!(v)),
        WordBuf::U16(v) => WordBuf::U16(go!(v)),
        WordBuf::U32(v) => WordBuf::U32(go!(v)),
        WordBuf::U64(v) => WordBuf::U64(go!(v)),
    };
    Some((y.get(0), Words::from_buf_trusted(w, buf)))
}

/// Combines equal-length streams of the given widths (most significant first) into one
/// stream of their summed width. `parts[i].width()` must equal `widths[i]`.
///
/// # Panics
/// If the parts' lengths or widths disagree with `widths` (the type rules prevent it).
pub fn merge_fields(parts: &[Words], widths: &[u32]) -> Words {
    let total: u32 = widths.iter().sum();
    let n = parts.first().map_or(0, Words::len);
    if let Some(fused) = merge_bytes_into_u16(parts, widths, total, n) {
        return fused;
    }
    let mut out = Words::filled(total, 0, n).into_buf();
    let mut shift = total;
    for (p, &w) in parts.iter().zip(widths) {
        assert_eq!(p.width(), w, "merge part width");
        assert_eq!(p.len(), n, "merge part length");
        shift -= w;
        or_shifted(&mut out, p.buf(), shift);
    }
    Words::from_buf_trusted(total, out)
}

/// Fast path of [`merge_fields`]: two or three parts held in bytes or 16-bit words merged
/// into 9- to 16-bit words (BF16 as 1/8/7 or 1/11/4, F16 as 1/7/8, ...) in one pass with
/// no intermediate stream. `None` when the shape is not one of these.
fn merge_bytes_into_u16(parts: &[Words], widths: &[u32], total: u32, n: usize) -> Option<Words> {
    if !(9..=16).contains(&total)
        || !(2..=3).contains(&parts.len())
        || widths.len() != parts.len()
        || parts.iter().any(|p| p.len() != n)
    {
        return None;
    }
    let mut shifts = [0u32; 3];
    let mut shift = total;
    for (p, (s, &w)) in parts.iter().zip(shifts.iter_mut().zip(widths)) {
        if p.width() != w || !matches!(p.buf(), WordBuf::U8(_) | WordBuf::U16(_)) {
            return None;
        }
        shift -= w;
        *s = shift;
    }
    /// One pass over parts of any of the two container types.
    fn fuse<A: Into<u16> + Copy, B: Into<u16> + Copy, C: Into<u16> + Copy>(
        a: &[A],
        b: &[B],
        c: Option<&[C]>,
        [sa, sb, _]: [u32; 3],
    ) -> Vec<u16> {
        let ab = a.iter().zip(b);
        match c {
            None => ab.map(|(&x, &y)| x.into() << sa | y.into() << sb).collect(),
            Some(c) => ab
                .zip(c)
                .map(|((&x, &y), &z)| x.into() << sa | y.into() << sb | z.into())
                .collect(),
        }
    }
    macro_rules! third {
        ($a:expr, $b:expr) => {
            match parts.get(2).map(Words::buf) {
                None => fuse::<_, _, u8>($a, $b, None, shifts),
                Some(WordBuf::U8(c)) => fuse($a, $b, Some(c.as_slice()), shifts),
                Some(WordBuf::U16(c)) => fuse($a, $b, Some(c.as_slice()), shifts),
                Some(_) => return None,
            }
        };
    }
    let out = match (parts[0].buf(), parts[1].buf()) {
        (WordBuf::U8(a), WordBuf::U8(b)) => third!(a.as_slice(), b.as_slice()),
        (WordBuf::U8(a), WordBuf::U16(b)) => third!(a.as_slice(), b.as_slice()),
        (WordBuf::U16(a), WordBuf::U8(b)) => third!(a.as_slice(), b.as_slice()),
        (WordBuf::U16(a), WordBuf::U16(b)) => third!(a.as_slice(), b.as_slice()),
        _ => return None,
    };
    Some(Words::from_buf_trusted(total, WordBuf::U16(out)))
}

/// Splits each word into fields of the given widths (most significant first); the
/// widths must sum to the stream's width. Inverse of [`merge_fields`].
///
/// # Panics
/// If the widths do not sum to `words.width()`.
pub fn split_fields(words: &Words, widths: &[u32]) -> Vec<Words> {
    let total: u32 = widths.iter().sum();
    assert_eq!(total, words.width(), "split widths must sum to the width");
    let mut shift = total;
    widths
        .iter()
        .map(|&w| {
            shift -= w;
            extract(words.buf(), shift, w)
        })
        .collect()
}

/// `out[i] |= part[i] << shift` for every word.
fn or_shifted(out: &mut WordBuf, part: &WordBuf, shift: u32) {
    macro_rules! inner {
        ($o:expr, $t:ty) => {
            with_buf!(part, p => {
                for (o, &x) in $o.iter_mut().zip(p.iter()) {
                    *o |= ((x as u64) << shift) as $t;
                }
            })
        };
    }
    match out {
        WordBuf::U8(o) => inner!(o, u8),
        WordBuf::U16(o) => inner!(o, u16),
        WordBuf::U32(o) => inner!(o, u32),
        WordBuf::U64(o) => inner!(o, u64),
    }
}

/// The output of `Dequant_d(codes, scales)` ([`super::Op::Dequant`]): `codes.len()`
/// words of `d.out`'s width, each recomputed from its code and its block's scale by the
/// arithmetic of [`super::narrow`]; a cast ([`Dequant::cast`], `scales` `None`) takes
/// every scale as `1.0`.
///
/// # Panics
/// If `d` does not fit `codes.len()` words, the codes are not of the code format's
/// width, or `scales` has another length than its blocks (or is given to a cast, or
/// missing from a non-cast) ([`Dequant::blocks`]; the constructors check all of these).
pub fn dequantize(d: &Dequant, codes: &Words, scales: Option<&Words>) -> Words {
    let o = d.out;
    let code = d.code;
    let buf = match (codes.buf(), scales) {
        (WordBuf::U16(c), None) => {
            assert!(d.is_cast(), "a scaled dequant has its scales");
            match o {
                // The exact upcast; NaNs become the canonical quiet NaN.
                super::narrow::Out::F32 => {
                    WordBuf::U32(c.iter().map(|&x| o.round(code.value(x)) as u32).collect())
                }
                _ => WordBuf::U16(c.iter().map(|&x| o.round(code.value(x)) as u16).collect()),
            }
        }
        (WordBuf::U8(c), Some(scales)) => {
            let table = code.table();
            scaled(d, c, scales, |x: u8| table[x as usize])
        }
        (WordBuf::U16(c), Some(scales)) => scaled(d, c, scales, |x: u16| code.value(x)),
        _ => unreachable!("the constructors checked the codes and scales"),
    };
    Words::from_buf(o.width(), buf).expect("the container of the output width")
}

/// [`dequantize`] with scales: the codes `c` (values by `value`) in `d`'s blocks.
fn scaled<C: Copy>(d: &Dequant, c: &[C], scales: &Words, value: impl Fn(C) -> f32) -> WordBuf {
    let n = c.len();
    let blocks = d.blocks(n as u64).expect("constructors checked the blocks");
    assert_eq!(scales.len() as u64, blocks, "one scale per block");
    let cols = d.cols as usize;
    let (br, bc) = (d.block_rows as usize, d.block_cols as usize);
    // Per block run: the scale, then one multiply and one rounding per word.
    fn fill<C: Copy, T>(
        c: &[C],
        cols: usize,
        br: usize,
        bc: usize,
        put: impl Fn(C, f32) -> T,
        scale: impl Fn(usize) -> f32,
    ) -> Vec<T> {
        let per_row = cols.div_ceil(bc);
        let mut out = Vec::with_capacity(c.len());
        for (i, row) in c.chunks_exact(cols).enumerate() {
            let first = (i / br) * per_row;
            for (k, chunk) in row.chunks(bc).enumerate() {
                let s = scale(first + k);
                out.extend(chunk.iter().map(|&code| put(code, s)));
            }
        }
        out
    }
    let scale = |b: usize| f32::from_bits(scales.get(b) as u32);
    let o = d.out;
    match o {
        super::narrow::Out::F32 => WordBuf::U32(fill(
            c,
            cols,
            br,
            bc,
            |code, s| o.round(value(code) * s) as u32,
            scale,
        )),
        _ => WordBuf::U16(fill(
            c,
            cols,
            br,
            bc,
            |code, s| o.round(value(code) * s) as u16,
            scale,
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `matches` agrees with running the program and comparing: on BF16 merges (a
    /// difference in the first word, past 4,096 words, in the last word), on a 32-bit
    /// merge and on a non-merge root.
    #[test]
    fn matches_is_execute_then_compare() {
        use crate::dsl::MergeFn;
        const CHUNK: usize = 4096;
        let n = 3 * CHUNK + 123;
        let bf16 = Words::from_fn(16, n, |i| (i as u64 * 40_503 + 7) & 0xFFFF);
        let program = |w: &Words, widths: &[u32]| {
            let kids = split_fields(w, widths).iter().map(Node::lit).collect();
            Node::merge(MergeFn::Fields(widths.to_vec()), kids).unwrap()
        };
        for widths in [&[1, 11, 4][..], &[1, 8, 7], &[9, 7]] {
            let p = program(&bf16, widths);
            assert!(matches(&p, &bf16).unwrap(), "{widths:?}");
            for at in [0, CHUNK + 5, n - 1] {
                let mut v = bf16.to_u64s();
                v[at] ^= 1 << 3;
                let other = Words::from_u64s(16, &v);
                assert!(!matches(&p, &other).unwrap(), "{widths:?} at {at}");
            }
            assert!(!matches(&p, &bf16.slice(0, n - 1)).unwrap());
            assert!(!matches(&p, &Words::from_u64s(17, &bf16.to_u64s())).unwrap());
        }
        let f32s = Words::from_fn(32, 5000, |i| (i as u64).wrapping_mul(2_654_435_761) >> 32);
        let p = program(&f32s, &[1, 8, 23]);
        assert!(matches(&p, &f32s).unwrap());
        let mut v = f32s.to_u64s();
        v[4321] ^= 1;
        assert!(!matches(&p, &Words::from_u64s(32, &v)).unwrap());
        let lit = Node::lit(&bf16);
        assert!(matches(&lit, &bf16).unwrap());
        assert!(!matches(&lit, &bf16.slice(1, n)).unwrap());
    }

    /// [`matches`] checks a merge's literals against the target's fields in place: a
    /// BF16 stream long enough for the rANS wide layout (its exponent field's codec,
    /// checked without decoding) matches, and a change in any one field does not.
    #[test]
    fn matches_checks_wide_rans_fields_in_place() {
        use crate::codec::CodecId;
        use crate::dsl::MergeFn;
        let n = 70_000;
        // Sign, then an exponent-like field of few common values, then noise.
        let bf16 = Words::from_fn(16, n, |i| {
            let r = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40;
            (r & 1) << 15 | (100 + (r >> 1) % 7 * (r >> 4) % 5) << 4 | (r >> 8) & 0xF
        });
        let widths = [1, 11, 4];
        let kids: Vec<Node> = split_fields(&bf16, &widths).iter().map(Node::lit).collect();
        let Op::Lit(lit) = kids[1].op() else {
            unreachable!("a literal")
        };
        assert_eq!(lit.codec, CodecId::Rans8);
        let p = Node::merge(MergeFn::Fields(widths.to_vec()), kids).unwrap();
        assert!(matches(&p, &bf16).unwrap());
        for bit in [15, 4, 9, 0] {
            let mut v = bf16.to_u64s();
            v[n / 2 + bit] ^= 1 << bit;
            assert!(
                !matches(&p, &Words::from_u64s(16, &v)).unwrap(),
                "bit {bit}"
            );
        }
    }

    #[test]
    fn fields_split_and_merge_bf16() {
        // 1.0 in BF16 is 0x3F80: sign 0, exponent 127, mantissa 0.
        let w = Words::from_u64s(16, &[0x3F80, 0xBF80, 0x0001]);
        let parts = split_fields(&w, &[1, 8, 7]);
        assert_eq!(parts[0].to_u64s(), vec![0, 1, 0]);
        assert_eq!(parts[1].to_u64s(), vec![127, 127, 0]);
        assert_eq!(parts[2].to_u64s(), vec![0, 0, 1]);
        assert_eq!(merge_fields(&parts, &[1, 8, 7]), w);
    }

    #[test]
    fn fields_of_32_and_64_bit_words_are_extracted_in_their_own_type() {
        // -1.5f32: sign 1, exponent 127, mantissa 0x400000.
        let w = Words::from_u64s(32, &[u64::from((-1.5f32).to_bits()), 0x7FFF_FFFF, 1]);
        let parts = split_fields(&w, &[1, 8, 23]);
        assert_eq!(parts[0].to_u64s(), vec![1, 0, 0]);
        assert_eq!(parts[1].to_u64s(), vec![127, 255, 0]);
        assert_eq!(parts[2].to_u64s(), vec![0x40_0000, 0x7F_FFFF, 1]);
        assert_eq!(merge_fields(&parts, &[1, 8, 23]), w);
        let d = Words::from_u64s(64, &[(-2.0f64).to_bits(), u64::MAX, 3]);
        let parts = split_fields(&d, &[1, 11, 20, 32]);
        assert_eq!(parts[0].to_u64s(), vec![1, 1, 0]);
        assert_eq!(parts[1].to_u64s(), vec![1024, 2047, 0]);
        assert_eq!(parts[2].to_u64s(), vec![0, 0xF_FFFF, 0]);
        assert_eq!(parts[3].to_u64s(), vec![0, 0xFFFF_FFFF, 3]);
        assert_eq!(merge_fields(&parts, &[1, 11, 20, 32]), d);
    }

    #[test]
    fn fused_merges_of_byte_and_16_bit_fields_restore_the_words() {
        let w = Words::from_u64s(16, &[0x3F80, 0xBF80, 0x0001, 0xFFFF, 0x1234, 0x8000]);
        for widths in [
            &[1, 11, 4][..],
            &[1, 7, 8],
            &[9, 7],
            &[12, 4],
            &[4, 12],
            &[10, 6],
            &[3, 10, 3],
        ] {
            let parts = split_fields(&w, widths);
            let fused = merge_bytes_into_u16(&parts, widths, 16, w.len()).expect("fast path");
            assert_eq!(fused, w, "{widths:?}");
            assert_eq!(merge_fields(&parts, widths), w, "{widths:?}");
        }
        // Four fields or 32-bit words take the general path.
        let parts = split_fields(&w, &[1, 5, 5, 5]);
        assert!(merge_bytes_into_u16(&parts, &[1, 5, 5, 5], 16, w.len()).is_none());
        assert_eq!(merge_fields(&parts, &[1, 5, 5, 5]), w);
    }

    #[test]
    fn scan_and_unscan_are_inverse() {
        let y = Words::from_u64s(8, &[5, 7, 6, 255, 0, 3]);
        for f in [ScanFn::Xor, ScanFn::Add] {
            let (first, u) = unscan(f, &y).unwrap();
            assert_eq!(scan(f, first, &u), y);
        }
        let (_, d) = unscan(ScanFn::Add, &y).unwrap();
        assert_eq!(d.to_u64s(), vec![2, 255, 249, 1, 3]);
    }

    #[test]
    fn map_families_are_bijections_on_small_widths() {
        for w in 1..=8u32 {
            let all = Words::from_fn(w, 1 << w, |i| i as u64);
            let mut fams = vec![
                MapFn::Xor(mask(w) / 3),
                MapFn::Add(1),
                MapFn::ZigZag,
                MapFn::Gray,
                MapFn::BitRev,
            ];
            if w > 1 {
                fams.push(MapFn::RotL(1));
            }
            for f in fams {
                let y = map_words(&all, f, false);
                let mut seen = y.to_u64s();
                seen.sort_unstable();
                assert_eq!(seen, all.to_u64s(), "{f:?} is a permutation at width {w}");
                assert_eq!(map_words(&y, f, true), all, "{f:?} inverts at width {w}");
            }
        }
        // ZigZag on 8 bits: 0, -1, 1, -2 -> 0, 1, 2, 3.
        let z = map_words(
            &Words::from_u64s(8, &[0, 255, 1, 254]),
            MapFn::ZigZag,
            false,
        );
        assert_eq!(z.to_u64s(), vec![0, 1, 2, 3]);
    }
}
