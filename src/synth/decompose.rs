//! Target-directed decompositions (DESIGN §6; paper §3.3).
//!
//! A hole is a type and the exact words it must produce. For each operator, a
//! decomposition looks at the target and proposes child targets whose recomposition is
//! the target exactly: `Const` only on constant streams, `Repeat` only on exact copies,
//! `Map` by inverting the bijection, `Scan` by taking differences, `Merge` by splitting
//! fields, `Concat` at boundaries derived from the target. Proposals are gated by cheap
//! tests on the data so that the search does not pay for children that cannot help.

use crate::dsl::exec::{map_words, split_fields, unscan};
use crate::dsl::{MapFn, MergeFn, Node, ScanFn, Ty};
use crate::stats;
use crate::tensor::{mask, Dtype, Words};

/// Which production a proposal applies; the unit the production prior counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ProdKind {
    Lit,
    Const,
    Concat,
    Repeat,
    MapXor,
    MapAdd,
    MapZigZag,
    MapGray,
    MapBitRev,
    MapRotL,
    ScanXor,
    ScanAdd,
    MergeFields,
    MergeBitPlanes,
    MergeBytePlanes,
    BackRef,
    Transpose,
    Dequant,
}

/// Every production kind, in a fixed order.
pub const ALL_PRODS: [ProdKind; 18] = [
    ProdKind::Lit,
    ProdKind::Const,
    ProdKind::Concat,
    ProdKind::Repeat,
    ProdKind::MapXor,
    ProdKind::MapAdd,
    ProdKind::MapZigZag,
    ProdKind::MapGray,
    ProdKind::MapBitRev,
    ProdKind::MapRotL,
    ProdKind::ScanXor,
    ProdKind::ScanAdd,
    ProdKind::MergeFields,
    ProdKind::MergeBitPlanes,
    ProdKind::MergeBytePlanes,
    ProdKind::BackRef,
    ProdKind::Transpose,
    ProdKind::Dequant,
];

impl ProdKind {
    /// Stable lowercase name (used in prior files and reports).
    pub fn name(self) -> &'static str {
        match self {
            ProdKind::Lit => "lit",
            ProdKind::Const => "const",
            ProdKind::Concat => "concat",
            ProdKind::Repeat => "repeat",
            ProdKind::MapXor => "map_xor",
            ProdKind::MapAdd => "map_add",
            ProdKind::MapZigZag => "map_zigzag",
            ProdKind::MapGray => "map_gray",
            ProdKind::MapBitRev => "map_bitrev",
            ProdKind::MapRotL => "map_rotl",
            ProdKind::ScanXor => "scan_xor",
            ProdKind::ScanAdd => "scan_add",
            ProdKind::MergeFields => "merge_fields",
            ProdKind::MergeBitPlanes => "merge_bitplanes",
            ProdKind::MergeBytePlanes => "merge_byteplanes",
            ProdKind::BackRef => "backref",
            ProdKind::Transpose => "transpose",
            ProdKind::Dequant => "dequant",
        }
    }

    /// Inverse of [`ProdKind::name`].
    pub fn from_name(s: &str) -> Option<ProdKind> {
        ALL_PRODS.iter().copied().find(|p| p.name() == s)
    }

    /// The production kind of a complete node's root.
    pub fn of(node: &Node) -> ProdKind {
        use crate::dsl::Op;
        match node.op() {
            Op::Lit(_) => ProdKind::Lit,
            Op::Const(_) => ProdKind::Const,
            Op::Concat(_) => ProdKind::Concat,
            Op::Repeat(..) => ProdKind::Repeat,
            Op::Map(f, _) => match f {
                MapFn::Xor(_) => ProdKind::MapXor,
                MapFn::Add(_) => ProdKind::MapAdd,
                MapFn::ZigZag => ProdKind::MapZigZag,
                MapFn::Gray => ProdKind::MapGray,
                MapFn::BitRev => ProdKind::MapBitRev,
                MapFn::RotL(_) => ProdKind::MapRotL,
            },
            Op::Scan(f, ..) => match f {
                ScanFn::Xor => ProdKind::ScanXor,
                ScanFn::Add => ProdKind::ScanAdd,
            },
            Op::Merge(f, _) => match f {
                MergeFn::Fields(_) => ProdKind::MergeFields,
                MergeFn::BitPlanes => ProdKind::MergeBitPlanes,
                MergeFn::BytePlanes => ProdKind::MergeBytePlanes,
            },
            Op::BackRef(_) => ProdKind::BackRef,
            Op::Transpose(..) => ProdKind::Transpose,
            Op::Dequant(..) => ProdKind::Dequant,
        }
    }
}

/// What the operator applied to a hole does with its children.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Shell {
    Concat,
    Repeat(u64),
    Map(MapFn),
    Scan(ScanFn, u64),
    Merge(MergeFn),
    /// Back references producing this many words.
    BackRef(u64),
    /// `Transpose_r` over back references producing `n` words: `(r, n)`. Proposed as
    /// one step because a transposition alone never changes a literal's size; the
    /// columns pay only when something reuses them.
    TransposeBackRef(u64, u64),
    /// Dequantization producing `n` words: `(parameters, n)`; children codes, scales.
    Dequant(crate::dsl::Dequant, u64),
}

impl Shell {
    /// Builds the node from complete children.
    pub fn build(&self, children: Vec<Node>) -> Result<Node, crate::dsl::TypeError> {
        let mut it = children.into_iter();
        let mut one = || {
            it.next()
                .ok_or_else(|| crate::dsl::TypeError("missing child".into()))
        };
        match self {
            Shell::Concat => Node::concat(std::iter::from_fn(|| one().ok()).collect()),
            Shell::Repeat(k) => Node::repeat(*k, one()?),
            Shell::Map(f) => Node::map(*f, one()?),
            Shell::Scan(f, first) => Node::scan(*f, *first, one()?),
            Shell::Merge(f) => Node::merge(f.clone(), std::iter::from_fn(|| one().ok()).collect()),
            Shell::BackRef(n) => Node::backref(*n, std::iter::from_fn(|| one().ok()).collect()),
            Shell::TransposeBackRef(r, n) => Node::transpose(
                *r,
                Node::backref(*n, std::iter::from_fn(|| one().ok()).collect())?,
            ),
            Shell::Dequant(d, _) if d.is_cast() => Node::dequant_cast(d.code, d.out, one()?),
            Shell::Dequant(d, n) => Node::dequant(*d, *n, one()?, one()?),
        }
    }

    /// The dtype the search reads child `i`'s words as, when the shell gives them one:
    /// the codes of a `dequant` are words of their code format (so they get its field
    /// splits, [`field_splits`]). Every other child has none.
    pub fn child_dtype(&self, i: usize) -> Option<Dtype> {
        match self {
            Shell::Dequant(d, _) if i == 0 => Some(d.code.dtype()),
            _ => None,
        }
    }
}

/// One way to fill a hole.
#[derive(Clone, Debug)]
pub enum Proposal {
    /// A complete node (`Lit` or `Const`).
    Leaf(ProdKind, Node),
    /// An operator whose children are new holes with these exact targets, left to right.
    Split(ProdKind, Shell, Vec<Words>),
}

/// What a decomposition knows about the hole besides its words.
#[derive(Clone, Copy, Debug)]
pub struct HoleInfo {
    /// The tensor's dtype when the hole is the whole tensor (the root).
    pub dtype: Option<Dtype>,
    /// Whether operator children may be proposed (false at the depth or node limit).
    pub may_split: bool,
    /// The tensor's rows (its first dimension) when the hole is the whole tensor and
    /// the tensor has at least two dimensions: the words are a `rows x (n / rows)`
    /// matrix, row by row.
    pub rows: Option<u64>,
}

/// Minimum words before `Concat` at a run boundary is worth proposing.
const MIN_RUN: usize = 32;

/// One way to fill a hole, with the children's targets left to be computed.
#[derive(Clone, Debug)]
pub enum Cand {
    /// A complete node (`Const`).
    Leaf(ProdKind, Node),
    /// An operator whose children are computed with the proposal (`Repeat`, `Concat`,
    /// `BackRef`, `Dequant`), and each child's [`super::astar::lit_node_estimate`] when
    /// the proposal computed it (a parse, to decide whether it pays).
    Eager(ProdKind, Shell, Vec<Words>, Option<Vec<u64>>),
    /// An operator whose children follow from the target by [`lazy_children`] (`Map`,
    /// `Scan`, `Merge`); the search sizes them from a histogram or a sample and computes
    /// them only when it needs their words.
    Lazy(ProdKind, Shell),
}

/// All proposals for a hole with target `t`, in a fixed order. `Lit` is not included
/// (the search always has it); `Const` is, when the stream is constant.
pub fn propose(t: &Words, info: HoleInfo) -> Vec<Proposal> {
    candidates(t, info)
        .into_iter()
        .map(|c| match c {
            Cand::Leaf(k, n) => Proposal::Leaf(k, n),
            Cand::Eager(k, s, kids, _) => Proposal::Split(k, s, kids),
            Cand::Lazy(k, s) => {
                let kids = lazy_children(&s, t);
                Proposal::Split(k, s, kids)
            }
        })
        .collect()
}

/// The child targets of a lazy proposal (`Map`, `Scan`, `Merge`) applied to `t`. For
/// `Scan` the shell's first word is ignored and `t.len() - 1` differences are returned,
/// so the function also serves samples of `t`.
pub fn lazy_children(shell: &Shell, t: &Words) -> Vec<Words> {
    match shell {
        Shell::Map(f) => vec![map_words(t, *f, true)],
        Shell::Scan(f, _) => vec![unscan(*f, t)
            .map(|(_, u)| u)
            .unwrap_or_else(|| Words::empty(t.width()))],
        Shell::Merge(f) => {
            let widths = f.widths(t.width()).expect("proposed merges are well typed");
            split_fields(t, &widths)
        }
        Shell::Concat
        | Shell::Repeat(_)
        | Shell::BackRef(_)
        | Shell::TransposeBackRef(..)
        | Shell::Dequant(..) => {
            panic!("concat, repeat, backref and dequant children are eager")
        }
    }
}

/// A function of one word, giving a child's word from its parent's.
pub type WordFn = Box<dyn Fn(u64) -> u64>;

/// How a lazy child's word follows from one word of its parent, when it does (`Map`,
/// `Merge`): `(child width, function)` per child. `None` for `Scan`.
pub fn pointwise(shell: &Shell, width: u32) -> Option<Vec<(u32, WordFn)>> {
    match shell {
        Shell::Map(f) => {
            let f = *f;
            Some(vec![(width, Box::new(move |x| f.invert(x, width)))])
        }
        Shell::Merge(_) => Some(
            merge_fields(shell, width)?
                .into_iter()
                .map(|(s, w)| {
                    let m = mask(w);
                    (w, Box::new(move |x: u64| (x >> s) & m) as WordFn)
                })
                .collect(),
        ),
        _ => None,
    }
}

/// `(shift, width)` in bits of each child of a merge shell over words of `width` bits,
/// most significant first (child `i` is `(x >> shift) & (2^width - 1)` of each word
/// `x`); `None` for other shells or ill-typed merges.
pub fn merge_fields(shell: &Shell, width: u32) -> Option<Vec<(u32, u32)>> {
    let Shell::Merge(f) = shell else {
        return None;
    };
    let mut shift = width;
    let widths = f.widths(width).ok()?;
    Some(
        widths
            .into_iter()
            .map(|w| {
                shift -= w;
                (shift, w)
            })
            .collect(),
    )
}

/// [`propose`] without computing the children of `Map`, `Scan` and `Merge`.
pub fn candidates(t: &Words, info: HoleInfo) -> Vec<Cand> {
    candidates_with(t, info, None, &|| super::astar::lit_node_estimate(t))
}

/// [`candidates`], given the distinct words of `t` ascending when already known (they
/// replace the passes that find the minimum, maximum and common bits).
///
/// `lit` returns [`super::astar::lit_node_estimate`] of `t`, which the back-reference
/// proposals compare their parses with (the search counts it once for them and for its
/// own bound on the literal).
pub fn candidates_with(
    t: &Words,
    info: HoleInfo,
    syms: Option<&[u64]>,
    lit: &dyn Fn() -> u64,
) -> Vec<Cand> {
    let mut out = Vec::new();
    let n = t.len();
    let b = t.width();
    if n == 0 {
        return out;
    }
    if t.is_constant() {
        if let Ok(node) = Node::constant(Ty::new(b, n as u64), t.get(0)) {
            out.push(Cand::Leaf(ProdKind::Const, node));
        }
        return out;
    }
    if !info.may_split {
        return out;
    }
    // A cast: an F32 tensor whose every word is an F16 or BF16 value, proved on every
    // word (a few words for ordinary F32 weights). Then nothing else is proposed: the
    // codes hold the same words in half the bits, and the search fills their hole with
    // all it would propose for a tensor of their format, in the same expansion (every
    // operator on the F32 words has its counterpart on the codes).
    if let Some((code, codes)) = info
        .dtype
        .and_then(|dt| super::dequant::propose_cast(t, dt))
    {
        out.push(Cand::Eager(
            ProdKind::Dequant,
            Shell::Dequant(
                crate::dsl::Dequant::cast(code, crate::dsl::narrow::Out::F32),
                n as u64,
            ),
            vec![codes],
            None,
        ));
        return out;
    }
    // Repeat: the smallest exact period that divides n.
    if let Some(p) = smallest_period(t, 64) {
        out.push(Cand::Eager(
            ProdKind::Repeat,
            Shell::Repeat((n / p) as u64),
            vec![t.slice(0, p)],
            None,
        ));
    } else if let Some((p, whole)) = smallest_partial_period(t, 64) {
        // Whole periods, then a short tail (the head of one more period, or other
        // words), as one finished program (as two holes, the whole periods would be
        // sized as a literal before any expansion could find their `Repeat`).
        let program = Node::repeat((whole / p) as u64, Node::lit(&t.slice(0, p)))
            .and_then(|r| Node::concat(vec![r, Node::lit(&t.slice(whole, n))]));
        if let Ok(node) = program {
            out.push(Cand::Leaf(ProdKind::Concat, node));
        }
    }
    // Concat at the boundary of a long constant run at either end.
    if let Some(cut) = run_boundary(t) {
        out.push(Cand::Eager(
            ProdKind::Concat,
            Shell::Concat,
            vec![t.slice(0, cut), t.slice(cut, n)],
            None,
        ));
    }
    // Dequantization: a float tensor whose words are FP8 codes times per-block scales,
    // found exactly or not at all (a gate of one block's first words first).
    if let Some(f) = info
        .dtype
        .and_then(|dt| super::dequant::propose(t, dt, info.rows.unwrap_or(1)))
    {
        out.push(Cand::Eager(
            ProdKind::Dequant,
            Shell::Dequant(f.d, n as u64),
            vec![f.codes, f.scales],
            None,
        ));
    }
    // Back references: earlier runs of words reused (a bounded match finder, gated so
    // that streams without reuse cost little).
    let may_parse = super::backref::may_parse(t);
    let plain = may_parse
        .then(|| super::backref::propose_unchecked_with(t, lit))
        .flatten();
    // The same by columns, for a matrix whose columns repeat or mirror each other (a
    // Fourier basis): only when it beats the rows' parse by a tenth.
    if let Some(r) = info
        .rows
        .filter(|&r| may_parse && r >= 2 && (n as u64).is_multiple_of(r) && n as u64 / r >= 2)
    {
        if let Some(p) = by_columns(t, r as usize, lit) {
            if plain
                .as_ref()
                .is_none_or(|q| p.estimate() * 10 < q.estimate() * 9)
            {
                let (kids, sizes) = p.children_estimated();
                out.push(Cand::Eager(
                    ProdKind::Transpose,
                    Shell::TransposeBackRef(r, n as u64),
                    kids,
                    sizes,
                ));
            }
        }
    }
    if let Some(parse) = plain {
        let (kids, sizes) = parse.children_estimated();
        out.push(Cand::Eager(
            ProdKind::BackRef,
            Shell::BackRef(n as u64),
            kids,
            sizes,
        ));
    }
    // Merge: field splits. Float layouts (and the wider-exponent variants that keep the
    // top mantissa bits with the exponent, see BITS.md) at a float root; byte planes on
    // wide words; bit planes on narrow ones.
    for widths in field_splits(b, info.dtype) {
        out.push(Cand::Lazy(
            ProdKind::MergeFields,
            Shell::Merge(MergeFn::Fields(widths)),
        ));
    }
    if b >= 16 && b.is_multiple_of(8) {
        out.push(Cand::Lazy(
            ProdKind::MergeBytePlanes,
            Shell::Merge(MergeFn::BytePlanes),
        ));
    }
    if (2..=8).contains(&b) && info.dtype.is_none() {
        out.push(Cand::Lazy(
            ProdKind::MergeBitPlanes,
            Shell::Merge(MergeFn::BitPlanes),
        ));
    }
    // Map: bijections whose parameters come from the data.
    for f in map_candidates(t, syms) {
        let kind = match f {
            MapFn::Xor(_) => ProdKind::MapXor,
            MapFn::Add(_) => ProdKind::MapAdd,
            MapFn::ZigZag => ProdKind::MapZigZag,
            MapFn::Gray => ProdKind::MapGray,
            MapFn::BitRev => ProdKind::MapBitRev,
            MapFn::RotL(_) => ProdKind::MapRotL,
        };
        out.push(Cand::Lazy(kind, Shell::Map(f)));
    }
    // Scan: differences, when a sample says they are more predictable than the words.
    if n >= 2 {
        for f in scan_candidates(t) {
            let kind = match f {
                ScanFn::Xor => ProdKind::ScanXor,
                ScanFn::Add => ProdKind::ScanAdd,
            };
            out.push(Cand::Lazy(kind, Shell::Scan(f, t.get(0))));
        }
    }
    out
}

/// The back-reference parse of the `rows x c` matrix `t` (row by row) read column by
/// column, when [`super::backref::propose`] would propose it (the caller has checked
/// [`super::backref::may_parse`], which the columns share with the rows); the columns'
/// probe is gathered without transposing the whole matrix.
fn by_columns(t: &Words, rows: usize, lit: &dyn Fn() -> u64) -> Option<super::backref::Parse> {
    use super::backref::{parse_if_pays_with, probe_pays, reuses_enough, PROBE_WORDS};
    let n = t.len();
    let cols = n / rows;
    if n > PROBE_WORDS {
        let probe = Words::from_fn(t.width(), PROBE_WORDS, |k| {
            t.get(k % rows * cols + k / rows)
        });
        if !reuses_enough(&probe) || !probe_pays(&probe) {
            return None;
        }
        parse_if_pays_with(&crate::dsl::exec::transpose(t, cols), lit)
    } else {
        let columns = crate::dsl::exec::transpose(t, cols);
        if !reuses_enough(&columns) {
            return None;
        }
        parse_if_pays_with(&columns, lit)
    }
}

/// The smallest period `p < n` with `n % p == 0` and `t[i] == t[i % p]`, trying the
/// first `max_tries` candidate periods (those where `t[p] == t[0]`).
pub fn smallest_period(t: &Words, max_tries: usize) -> Option<usize> {
    let n = t.len();
    let first = t.get(0);
    let mut tries = 0;
    // The proper divisors of n, ascending: O(sqrt n) to list instead of testing every p.
    let mut small = Vec::new();
    let mut large = Vec::new();
    let mut d = 1;
    while d * d <= n {
        if n.is_multiple_of(d) {
            small.push(d);
            if d * d != n && d != 1 {
                large.push(n / d);
            }
        }
        d += 1;
    }
    for p in small.into_iter().chain(large.into_iter().rev()) {
        if p >= n || t.get(p) != first {
            continue;
        }
        tries += 1;
        if tries > max_tries {
            return None;
        }
        if (p..n).all(|i| t.get(i) == t.get(i - p)) {
            return Some(p);
        }
    }
    None
}

/// The smallest period `p` whose whole copies start the stream and cover all but a
/// tail of at most a quarter of it: `t[i] == t[i - p]` for `p <= i < w`, with `w` the
/// largest multiple of `p` (at least `2p`) that holds for, `n - w <= n / 4`, and `w < n`
/// (periods that divide `n` and cover it all are [`smallest_period`]'s). Returns
/// `(p, w)`. Tries the first `max_tries` candidates in ascending order (those where
/// `t[p] == t[0]`) up to [`MAX_PARTIAL_PERIOD`] words.
pub fn smallest_partial_period(t: &Words, max_tries: usize) -> Option<(usize, usize)> {
    let n = t.len();
    let first = t.get(0);
    (1..=(n / 2).min(MAX_PARTIAL_PERIOD))
        .filter(|&p| t.get(p) == first)
        .take(max_tries)
        .find_map(|p| {
            let run = (p..n).find(|&i| t.get(i) != t.get(i - p)).unwrap_or(n);
            let whole = run / p * p;
            (whole >= 2 * p && whole < n && n - whole <= n / 4).then_some((p, whole))
        })
}

/// Longest period [`smallest_partial_period`] looks for: finding the candidates takes
/// a pass over this many words of every stream, periodic or not.
const MAX_PARTIAL_PERIOD: usize = 1024;

/// Where a run of at least `max(MIN_RUN, n/16)` equal words at the start or end of the
/// stream ends (or begins); `None` if there is none or it covers everything.
fn run_boundary(t: &Words) -> Option<usize> {
    let n = t.len();
    let need = MIN_RUN.max(n / 16);
    let first = t.get(0);
    let lead = (0..n).take_while(|&i| t.get(i) == first).count();
    if lead >= need && lead < n {
        return Some(lead);
    }
    let last = t.get(n - 1);
    let trail = (0..n).rev().take_while(|&i| t.get(i) == last).count();
    if trail >= need && trail < n {
        return Some(n - trail);
    }
    None
}

/// Field splits worth proposing for a word of width `b`: the float layout of `dtype`
/// when the word is a whole float, the variants that move the top 1-3 mantissa bits
/// into the exponent field (BITS.md), and sign+exponent | mantissa.
pub fn field_splits(b: u32, dtype: Option<Dtype>) -> Vec<Vec<u32>> {
    let mut out: Vec<Vec<u32>> = Vec::new();
    let layout = dtype
        .and_then(Dtype::float_layout)
        .filter(|l| l.iter().sum::<u32>() == b);
    if let Some([s, e, m]) = layout {
        out.push(vec![s, e, m]);
        for k in 1..=3 {
            if m > k {
                out.push(vec![s, e + k, m - k]);
            }
        }
        out.push(vec![s + e, m]);
        if m > 2 {
            out.push(vec![s + e + 2, m - 2]);
        }
    }
    out
}

/// Map bijections whose parameters are read off the data.
fn map_candidates(t: &Words, syms: Option<&[u64]>) -> Vec<MapFn> {
    let b = t.width();
    let mut out = Vec::new();
    let (min, max, all_and, all_or) = match syms {
        Some(s) => (
            s.first().copied().unwrap_or(0),
            s.last().copied().unwrap_or(0),
            s.iter().fold(u64::MAX, |a, &x| a & x),
            s.iter().fold(0, |a, &x| a | x),
        ),
        None => {
            let (and, or) = t.and_or();
            (t.min().unwrap_or(0), t.max().unwrap_or(0), and, or)
        }
    };
    let bits = |v: u64| 64 - v.leading_zeros();
    // Add: shift the range down to start at 0 when that narrows the words.
    if min > 0 && bits(max - min) < bits(max) {
        out.push(MapFn::Add(min));
    }
    // Xor: clear the bits every word has set.
    if all_and != 0 && all_and != min {
        out.push(MapFn::Xor(all_and));
    }
    // RotL: low bits that are zero in every word move to the top.
    let tz = all_or.trailing_zeros();
    if b >= 2 && tz > 0 && tz < b {
        out.push(MapFn::RotL(tz));
    }
    // ZigZag: small signed values (most words near 0 or near 2^b).
    if b >= 2 {
        let m = mask(b);
        let near = t
            .iter()
            .take(4096)
            .filter(|&x| x < m / 16 || x > m - m / 16)
            .count();
        let sample = t.len().min(4096);
        let wraps = t.iter().take(4096).any(|x| x > m - m / 16);
        if wraps && near * 10 >= sample * 9 {
            out.push(MapFn::ZigZag);
        }
    }
    // Gray: monotone counters change few bits between neighbours in Gray code.
    if t.len() >= 4 && (1..t.len().min(4096)).all(|i| t.get(i) >= t.get(i - 1)) {
        out.push(MapFn::Gray);
    }
    let _ = MapFn::BitRev; // available to programs; not proposed by any data test yet
    out
}

/// Scan families whose differences look more predictable than the words, judged on a
/// sample of the first 4,096 words by order-0 entropy.
fn scan_candidates(t: &Words) -> Vec<ScanFn> {
    let sample = t.slice(0, t.len().min(4096));
    // Bits per word, the logarithms from the codecs' table rather than one `log2` call
    // per distinct word (a BF16 sample has thousands).
    let h = |w: &Words| {
        stats::histogram(w, 4096).map_or(f64::INFINITY, |hist| {
            crate::codec::rans::entropy_bits(&hist) / w.len().max(1) as f64
        })
    };
    let base = h(&sample);
    let mut out = Vec::new();
    for f in [ScanFn::Add, ScanFn::Xor] {
        if let Some((_, d)) = unscan(f, &sample) {
            if h(&d) + 0.25 < base {
                out.push(f);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whole copies of a period and the head of one more: the smallest such period, not
    /// one that divides the length (those are `smallest_period`'s), nor a near copy.
    #[test]
    fn partial_period_found_only_on_exact_copies() {
        let t = Words::from_u64s(8, &[1, 2, 3, 1, 2, 3, 1, 2]);
        assert_eq!(smallest_partial_period(&t, 64), Some((3, 6)));
        let t = Words::from_u64s(8, &[1, 1, 2, 1, 1, 2, 1, 1]);
        assert_eq!(smallest_partial_period(&t, 64), Some((3, 6)));
        // Any tail of at most a quarter: 12 words of period 3, then 4 others.
        let mut v = [1u64, 2, 3].repeat(4);
        v.extend([9, 8, 7, 6]);
        assert_eq!(
            smallest_partial_period(&Words::from_u64s(8, &v), 64),
            Some((3, 12))
        );
        // A longer tail is not proposed.
        v.push(5);
        assert_eq!(smallest_partial_period(&Words::from_u64s(8, &v), 64), None);
        // Period 3 divides 9 and covers it all: not a partial period.
        let t = Words::from_u64s(8, &[1, 2, 3, 1, 2, 3, 1, 2, 3]);
        assert_eq!(smallest_partial_period(&t, 64), None);
        // Every candidate tried counts; none left: not found.
        let t = Words::from_u64s(8, &[1, 2, 3, 1, 2, 3, 1, 2]);
        assert_eq!(smallest_partial_period(&t, 0), None);
    }

    #[test]
    fn period_found_only_on_exact_copies() {
        let t = Words::from_u64s(8, &[1, 2, 3, 1, 2, 3, 1, 2, 3]);
        assert_eq!(smallest_period(&t, 64), Some(3));
        let t = Words::from_u64s(8, &[1, 2, 3, 1, 2, 3, 1, 2, 4]);
        assert_eq!(smallest_period(&t, 64), None);
        let t = Words::from_u64s(8, &[1, 2, 1, 2, 1]);
        assert_eq!(smallest_period(&t, 64), None);
    }

    #[test]
    fn bf16_splits_include_exponent_plus_mantissa_bits() {
        let s = field_splits(16, Some(Dtype::BF16));
        assert_eq!(
            s,
            vec![
                vec![1, 8, 7],
                vec![1, 9, 6],
                vec![1, 10, 5],
                vec![1, 11, 4],
                vec![9, 7],
                vec![11, 5]
            ]
        );
        assert!(field_splits(16, Some(Dtype::F32)).is_empty());
        assert!(field_splits(16, None).is_empty());
    }

    #[test]
    fn every_proposal_recomposes_to_its_target() {
        let t = Words::from_u64s(16, &[0x3F80, 0xBF80, 0x3F80, 0xBF80, 0x4000, 0x4000]);
        let props = propose(
            &t,
            HoleInfo {
                dtype: Some(Dtype::BF16),
                may_split: true,
                rows: None,
            },
        );
        assert!(!props.is_empty());
        for p in props {
            if let Proposal::Split(_, shell, children) = p {
                let kids: Vec<Node> = children.iter().map(Node::lit).collect();
                let node = shell.build(kids).unwrap();
                assert_eq!(crate::dsl::execute(&node, 1 << 20).unwrap(), t, "{shell:?}");
            }
        }
    }
}
