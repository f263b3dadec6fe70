//! Bounded A* over partial programs (DESIGN §6; paper §3.3, Algorithm 1).
//!
//! A state is a partial program whose leaves may be holes. The queue orders states by
//! `g + h` (prior cost so far plus an admissible estimate of the cost of filling the
//! holes), then by their rollout size in bytes, then by creation order. The leftmost hole
//! of the best state is expanded with every proposal of [`super::decompose`]; complete
//! programs are ranked by exact serialized size and the search goes on after the first
//! one. The budget counts expansions. Every open state can be completed by putting `Lit`
//! in each hole (its *rollout*); the exact size of that completion is known from the
//! holes' literal sizes (estimated for large holes), so each rollout is compared with the
//! incumbent too. The best state at the end of each expansion is a finalist; when the
//! budget runs out the finalists are encoded and the exactly smallest wins (then
//! `Lit(target)` if that is no larger). A larger budget's finalists include a smaller
//! one's, so it never returns a larger program.
//!
//! Deterministic: no randomness, no dependence on threads or addresses.
//!
//! Why one file of some 1,800 lines: the queue, the partial-program states, their
//! expansion and the finalists share one state type and one incumbent, and each change to
//! the search has touched all four together; its tests sit at the end. A split along
//! those lines waits for the parallel work on the search's hot paths (`synth/fast.rs`,
//! the search itself) to land, so that the two do not collide in a merge.

use super::decompose::{
    candidates_with, lazy_children, merge_fields, pointwise, Cand, HoleInfo, ProdKind, Shell,
};
use super::prior::{Context, Features, Prior};
use super::{SearchOptions, SearchStats, Synthesis};
use crate::codec;
use crate::dsl::exec::extract;
use crate::dsl::wire::{program_len, uleb_len};
use crate::dsl::{Lit, Node, Ty};
use crate::stats;
use crate::tensor::{bits_needed, container_bytes, Dtype, Words};
use std::cell::OnceCell;
use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};
use std::sync::Arc;

/// Exact bytes of the node `Lit(words)` with the smallest codec: tag, length, body.
pub fn lit_node_len(words: &Words) -> u64 {
    let body = codec::select::best_size(words);
    1 + uleb_len(body) + body
}

/// The body the codecs choose between a plain size and a table codec's (estimated)
/// size: the table's only when it comes under [`codec::select::table_bar`].
fn choose(plain: u64, table: u64) -> u64 {
    if table < codec::select::table_bar(plain) {
        table
    } else {
        plain
    }
}

/// Estimated bytes of the node `Lit(words)`: exact for raw words, bit packing and
/// Huffman (their sizes follow from the histogram), and for rANS the table plus the ideal
/// payload under its quantized model plus the final states, which is within a few bytes
/// of the encoder's output. Costs one histogram pass and no encoding, so the search can
/// size every hole it opens; the finalists are then sized exactly.
pub fn lit_node_estimate(words: &Words) -> u64 {
    estimate_of(wide_histogram(words).as_deref(), words)
}

/// [`lit_node_estimate`] of `words` from its [`wide_histogram`].
fn estimate_of(hist: Option<&[(u64, u64)]>, words: &Words) -> u64 {
    let max = match hist {
        Some(h) => h.last().map_or(0, |&(s, _)| s),
        None => words.max().unwrap_or(0),
    };
    estimate_from_hist(hist, max, words.width(), words.len())
}

/// The histogram the estimates size table codecs from, `None` when the stream has more
/// distinct words than the tables take ([`stats::beyond_tables`] or counted).
fn wide_histogram(words: &Words) -> Option<Vec<(u64, u64)>> {
    if stats::beyond_tables(words) {
        return None;
    }
    stats::histogram(words, codec::MAX_TABLE_SYMBOLS)
}

/// The histogram of a sample of a stream of more than [`SAMPLE_WORDS`] words, `None`
/// when the sample is wider than 16 bits and [`stats::nearly_distinct`]: the stream then
/// has far more distinct words than the sample (and the tables) hold, and counting the
/// sample in a hash table and sorting it was most of the time F32 tensors took to
/// compress.
fn sample_histogram(sample: &Words) -> Option<Vec<(u64, u64)>> {
    if sample.width() > 16 && stats::nearly_distinct(sample) {
        return None;
    }
    stats::histogram(sample, codec::MAX_TABLE_SYMBOLS)
}

/// [`lit_node_estimate`] from a histogram (`None`: too many distinct words for the
/// tables) and the largest word of a stream of `n` words of `width` bits. Above
/// `APPROX_SYMBOLS` (4,096) distinct words the table codecs are sized by the entropy plus a
/// coarse table size instead of being planned.
pub fn estimate_from_hist(hist: Option<&[(u64, u64)]>, max: u64, width: u32, n: usize) -> u64 {
    let mut body = codec::raw::size(width, n).min(codec::bitpack::size_for(bits_needed(max), n));
    if let Some(h) = hist {
        let table = if h.len() > APPROX_SYMBOLS {
            // Bits per word, times the words.
            let bits = stats::entropy_bits(h.iter().map(|&(_, c)| c)) * n as f64;
            let m = h.len() as f64;
            let spread = (max.max(1) as f64 / m).log2().max(0.0);
            let table = m * (spread + 2.0 + 6.0);
            ((bits + table) / 8.0).ceil() as u64 + RANS_STATE_BYTES
        } else if n > EXACT_WORDS {
            estimate_sizes(h, width, n)
        } else {
            plan_sizes(h, width, n).0
        };
        body = choose(body, table);
    }
    1 + uleb_len(body) + body
}

/// The root literal's table plans (Huffman's exact size and the optimally quantized rANS
/// table), made only when the search's best program does not beat the literal's cheap
/// lower bound ([`codec::select::TableBounds::lower`]), so that the final comparison
/// with `Lit(target)` can size the literal exactly without writing its body.
struct RootLit {
    /// The smaller of the raw and bit-packed body sizes.
    plain: u64,
    huff: u64,
    rans: Option<codec::select::RansPlan>,
}

impl RootLit {
    /// Plans the tables for histogram `h` of the root's `n` words of `width` bits, whose
    /// plain body is `plain` bytes.
    #[cfg(test)]
    fn plan(h: &[(u64, u64)], target: &Words, plain: u64) -> RootLit {
        let (width, n) = (target.width(), target.len());
        let syms: Vec<u64> = h.iter().map(|&(s, _)| s).collect();
        let set = codec::table::plan_set(&syms, width);
        let huff = codec::huffman::Plan::with_set(h, width, n, syms.clone(), set).size();
        let rans = codec::select::RansPlan::new(h, codec::Stream::Words(target), syms, set, true);
        RootLit { plain, huff, rans }
    }

    /// Whether the `Lit(target)` node takes more than `bytes` bytes (`target`: the root's
    /// `n` words of `width` bits, histogram `h`, plain body `plain` bytes). Decided by
    /// bounds where they suffice: the rANS table is planned first, and its plan's lower
    /// bound with the Huffman bound ([`codec::select::TableBounds`]) often puts the
    /// literal above `bytes` already; only otherwise is Huffman planned (package-merge
    /// on deep codes) and the size made exact ([`RootLit::exact_len`]). `b`: the bounds
    /// of `h` ([`codec::select::TableBounds::of`]).
    fn exceeds(
        h: &[(u64, u64)],
        b: &codec::select::TableBounds,
        target: &Words,
        plain: u64,
        bytes: u64,
    ) -> bool {
        let (width, n) = (target.width(), target.len());
        let rans = codec::select::RansPlan::new(
            h,
            codec::Stream::Words(target),
            b.syms.clone(),
            b.set,
            true,
        );
        let least = plain
            .min(b.huff_lb)
            .min(rans.as_ref().map_or(u64::MAX, |r| r.lower_bound()));
        if 1 + uleb_len(least) + least > bytes {
            return true;
        }
        let huff = codec::huffman::Plan::with_set(h, width, n, b.syms.clone(), b.set).size();
        RootLit { plain, huff, rans }.exact_len(target) > bytes
    }

    /// Exact bytes of the `Lit(target)` node (`target` is the root's stream): the codec
    /// [`codec::encode_best`] would choose, with the rANS coder run without output.
    fn exact_len(&self, target: &Words) -> u64 {
        // The rANS coder runs only when its bound leaves it a chance: at or above the
        // smaller of the plain and Huffman bodies it can change neither the size chosen
        // nor, under `chosen_size`'s bar, whether a table codec is chosen.
        let others = self.plain.min(self.huff);
        let rans = self
            .rans
            .as_ref()
            .filter(|r| r.lower_bound() < others)
            .map(|r| r.size(codec::Stream::Words(target)));
        let sizes = [Some(self.plain), None, Some(self.huff), rans, None, None];
        let body = codec::select::chosen_size(&sizes);
        1 + uleb_len(body) + body
    }
}

/// Distinct words above which [`estimate_from_hist`] approximates the table codecs.
const APPROX_SYMBOLS: usize = 4096;

/// (estimate, lower bound) in bytes of the table codecs' bodies for histogram `h`: the
/// Huffman size is exact; rANS is its table plus the ideal payload plus the final states
/// for the estimate and [`codec::rans::Plan::lower_bound`] for the bound. One symbol-set
/// plan serves both.
fn plan_sizes(h: &[(u64, u64)], width: u32, n: usize) -> (u64, u64) {
    let (huff, r) = table_plans(h, width, n);
    (huff.min(rans_estimate(&r)), huff.min(r.lower_bound()))
}

/// Huffman's exact body size and the optimally quantized rANS plan for histogram `h`,
/// sharing one symbol-set plan.
fn table_plans(h: &[(u64, u64)], width: u32, n: usize) -> (u64, codec::rans::Plan) {
    let syms: Vec<u64> = h.iter().map(|&(s, _)| s).collect();
    let set = codec::table::plan_set(&syms, width);
    let huff = codec::huffman::Plan::with_set(h, width, n, syms.clone(), set).size();
    (huff, codec::rans::Plan::with_set(h, width, n, syms, set))
}

/// Estimated rANS body size of a plan: its table, the ideal payload and the final states.
fn rans_estimate(r: &codec::rans::Plan) -> u64 {
    r.table_bytes() + (r.ideal_bits / 8.0).ceil() as u64 + RANS_STATE_BYTES
}

/// The estimate of [`plan_sizes`] for large streams, with rANS planned by proportional
/// rounding ([`codec::rans::Plan::estimate`]) instead of the optimal quantizer.
///
/// Huffman is planned only for streams of fewer than [`HUFFMAN_WORDS_PER_SYMBOL`] words
/// per distinct word: on longer ones its payload's redundancy over the entropy outweighs
/// its smaller table, so it all but never beats rANS there and the estimate does without.
fn estimate_sizes(h: &[(u64, u64)], width: u32, n: usize) -> u64 {
    let syms: Vec<u64> = h.iter().map(|&(s, _)| s).collect();
    let set = codec::table::plan_set(&syms, width);
    estimate_sizes_with(h, width, n, syms, set)
}

/// [`estimate_sizes`] with the symbols of `h` and their set encoding already planned.
fn estimate_sizes_with(
    h: &[(u64, u64)],
    width: u32,
    n: usize,
    syms: Vec<u64>,
    set: codec::table::SetPlan,
) -> u64 {
    let huff = if huffman_planned(h, n) {
        codec::huffman::Plan::with_set(h, width, n, syms.clone(), set).size()
    } else {
        u64::MAX
    };
    let r = codec::rans::Plan::estimate(h, width, n, syms, set);
    huff.min(rans_estimate(&r))
}

/// See [`estimate_sizes`].
const HUFFMAN_WORDS_PER_SYMBOL: usize = 32;

/// Whether [`estimate_sizes`] plans Huffman for histogram `h` of `n` words.
fn huffman_planned(h: &[(u64, u64)], n: usize) -> bool {
    n < HUFFMAN_WORDS_PER_SYMBOL * h.len()
}

/// The root literal's estimated bytes ([`estimate_sizes`] through [`estimate_from_hist`]'s
/// choice and node framing) when it would plan Huffman, known first only between two
/// bounds: the rANS estimate above, and below it the same with Huffman's lower bound
/// ([`codec::select::TableBounds`]) in place of Huffman's size. The search reads the
/// root's estimate only to compare other states' rollouts with it
/// ([`Search::offer`] while the root is the only record), so Huffman's length-limited
/// code (package-merge on tens of thousands of distinct words, a quarter of an F16
/// checkpoint's compression) is planned only when a rollout falls between the bounds.
/// Every comparison comes out as with the exact estimate.
struct LazyRoot {
    lo: u64,
    hi: u64,
    exact: OnceCell<u64>,
    hist: Dense,
    syms: Vec<u64>,
    set: codec::table::SetPlan,
    width: u32,
    n: usize,
    /// The smaller of the raw and bit-packed body sizes.
    plain: u64,
    /// The rANS estimate of the body ([`rans_estimate`]).
    rans: u64,
}

impl LazyRoot {
    /// The root literal's estimate for histogram `hist` (of `n` words of `width` bits,
    /// plain body `plain` bytes, symbols and set plan `syms`, `set`, Huffman's lower
    /// bound `huff_lb` bytes): exact when Huffman is not planned or the bounds meet,
    /// else its bounds.
    fn of(
        hist: &Dense,
        width: u32,
        n: usize,
        plain: u64,
        b: &codec::select::TableBounds,
    ) -> Result<u64, LazyRoot> {
        let node = |b: u64| 1 + uleb_len(b) + b;
        if !huffman_planned(hist, n) {
            let est = estimate_sizes_with(hist, width, n, b.syms.clone(), b.set);
            return Ok(node(choose(plain, est)));
        }
        let plan = codec::rans::Plan::estimate(hist, width, n, b.syms.clone(), b.set);
        let rans = rans_estimate(&plan);
        // `choose` and the framing are monotone, so the bounds of the body bound the node.
        let lo = node(choose(plain, b.huff_lb.min(rans)));
        let hi = node(choose(plain, rans));
        if lo == hi {
            return Ok(hi);
        }
        Err(LazyRoot {
            lo,
            hi,
            exact: OnceCell::new(),
            hist: Arc::clone(hist),
            syms: b.syms.clone(),
            set: b.set,
            width,
            n,
            plain,
            rans,
        })
    }

    /// The exact estimate, planning Huffman on first use.
    fn exact(&self) -> u64 {
        *self.exact.get_or_init(|| {
            let huff = codec::huffman::Plan::with_set(
                &self.hist,
                self.width,
                self.n,
                self.syms.clone(),
                self.set,
            )
            .size();
            let body = choose(self.plain, huff.min(self.rans));
            let e = 1 + uleb_len(body) + body;
            debug_assert!((self.lo..=self.hi).contains(&e));
            e
        })
    }

    /// Whether the root literal's estimate is above `bytes`.
    fn above(&self, bytes: u64) -> bool {
        if bytes < self.lo {
            true
        } else if bytes >= self.hi {
            false
        } else {
            bytes < self.exact()
        }
    }
}

/// Bytes the rANS coder spends on flushing its interleaved states (estimate only).
const RANS_STATE_BYTES: u64 = 8;

/// Holes of more words than this are sized on a sample when their histogram cannot be
/// derived from their parent's.
const SAMPLE_WORDS: usize = 1 << 16;

/// Blocks of the deterministic sample (evenly spaced, first and last included).
const SAMPLE_BLOCKS: usize = 16;

/// A deterministic sample of `w`: [`SAMPLE_BLOCKS`] evenly spaced blocks, together
/// [`SAMPLE_WORDS`] words.
fn sample_of(w: &Words) -> Words {
    let n = w.len();
    let len = SAMPLE_WORDS / SAMPLE_BLOCKS;
    let mut out = Words::with_capacity(w.width(), SAMPLE_WORDS);
    for b in 0..SAMPLE_BLOCKS {
        let start = (n - len) * b / (SAMPLE_BLOCKS - 1);
        out.extend_from(&w.slice(start, start + len));
    }
    out
}

/// [`lit_node_estimate`] of a stream of `n` words from a sample of it: the sample's
/// counts scaled to `n` words.
fn sampled_estimate(sample: &Words, n: usize) -> u64 {
    sampled_with(sample_histogram(sample), sample, n)
}

/// [`sampled_estimate`] from the sample's [`sample_histogram`] `hist`.
fn sampled_with(hist: Option<Vec<(u64, u64)>>, sample: &Words, n: usize) -> u64 {
    let max = match &hist {
        Some(h) => h.last().map_or(0, |&(s, _)| s),
        None => sample.max().unwrap_or(0),
    };
    let ns = sample.len().max(1) as u64;
    // Many words seen once in the sample mean the whole stream has far more distinct
    // words than the sample shows (Good-Turing: singletons estimate the unseen mass), so
    // a table scaled up from the sample would be far too optimistic: size such a stream
    // without table codecs.
    let hist = hist.filter(|h| {
        let singletons = h.iter().filter(|&&(_, c)| c == 1).count() as u64;
        singletons * 8 <= ns
    });
    let scaled = hist.map(|h| {
        h.into_iter()
            .map(|(s, c)| (s, (c * n as u64 / ns).max(1)))
            .collect::<Vec<_>>()
    });
    estimate_from_hist(scaled.as_deref(), max, sample.width(), n)
}

/// A floor under the estimated bytes of the children of any bijection of `words` (a
/// merge of its fields, bit planes or byte planes; a map), each sized as a literal the
/// way [`Search::propose_into`] sizes them (from `nonzero`, the hole's dense
/// histogram, when it has one; else from its sample when longer than [`SAMPLE_WORDS`]
/// words, filling `sample`; else from its words): `None` where the histogram is not
/// counted (more distinct words than the tables take).
///
/// Every literal codec is an order-0 code, so a literal costs at least its words'
/// empirical entropy, and the children of a bijection together have at least the
/// entropy of the words they are cut from (`H(X) <= sum H(F_i)` for fields `F_i` that
/// determine `X`; a map only relabels the words). The floor is 7/8 of that entropy in
/// bytes: the estimates scale a sample's counts, which moves their entropy a little.
fn order0_floor(
    words: &Words,
    nonzero: Option<&[(u64, u64)]>,
    sample: &mut Option<Words>,
) -> Option<u64> {
    let n = words.len();
    let counted;
    let hist: &[(u64, u64)] = match nonzero {
        Some(list) => list,
        None => {
            counted = if n > SAMPLE_WORDS {
                sample_histogram(sample.get_or_insert_with(|| sample_of(words)))?
            } else if n > EXACT_WORDS {
                wide_histogram(words)?
            } else {
                stats::histogram(words, usize::MAX)?
            };
            &counted
        }
    };
    Some(floor_of(hist, n))
}

/// [`order0_floor`] from the histogram `hist` (of the stream or of its sample) for a
/// stream of `n` words: 7/8 of `n` words at the histogram's entropy, in bytes.
fn floor_of(hist: &[(u64, u64)], n: usize) -> u64 {
    let bits = stats::entropy_bits(hist.iter().map(|&(_, c)| c)) * n as f64;
    (bits / 8.0 * 7.0 / 8.0) as u64
}

/// The histogram of a stream of words of at most 16 bits, counted in a table indexed
/// by word: its `(word, count)` pairs of distinct words ascending (what the codecs take).
type Dense = Arc<Vec<(u64, u64)>>;

/// The [`Dense`] histogram of `counts` (indexed by word).
fn dense_from<C: Copy + Into<u64>>(counts: &[C]) -> Dense {
    Arc::new(
        counts
            .iter()
            .enumerate()
            .map(|(s, &c)| (s as u64, c.into()))
            .filter(|&(_, c)| c > 0)
            .collect(),
    )
}

/// [`marginal`] for the field `(x >> shift) & (2^width - 1)` of each word `x` (`width`
/// at most 16 bits): the same histogram, counted without a call per word. Fields of at
/// most 8 bits (the sign bit, a mantissa's low bits) are counted in four tables taken
/// in turn, so that the few counters every word adds to are not one chain of
/// dependent additions.
fn marginal_field(list: &[(u64, u64)], shift: u32, width: u32) -> Dense {
    debug_assert!(width <= 16);
    let m = crate::tensor::mask(width);
    let at = |x: u64| ((x >> shift) & m) as usize;
    if width <= 8 {
        let mut t = [[0u64; 256]; 4];
        let mut quads = list.chunks_exact(4);
        for q in &mut quads {
            for (k, &(x, c)) in q.iter().enumerate() {
                t[k][at(x)] += c;
            }
        }
        for &(x, c) in quads.remainder() {
            t[0][at(x)] += c;
        }
        let sum: Vec<u64> = (0..1usize << width)
            .map(|y| t[0][y] + t[1][y] + t[2][y] + t[3][y])
            .collect();
        return dense_from(&sum);
    }
    marginal(list, width, |x| (x >> shift) & m)
}

/// The [`Dense`] histogram of the words `f(x)` (of `width` bits, at most 16) for the
/// distinct words `x` of histogram `list` with their counts: by a table of a counter per
/// word, or, when the list is much shorter than that table (a `map` of a 16-bit stream),
/// by sorting the mapped pairs and adding up equal words.
fn marginal(list: &[(u64, u64)], width: u32, f: impl Fn(u64) -> u64) -> Dense {
    if list.len() * 16 < 1 << width {
        let mut pairs: Vec<(u64, u64)> = list.iter().map(|&(x, c)| (f(x), c)).collect();
        pairs.sort_unstable_by_key(|&(y, _)| y);
        let mut out: Vec<(u64, u64)> = Vec::with_capacity(pairs.len());
        for (y, c) in pairs {
            match out.last_mut() {
                Some(last) if last.0 == y => last.1 += c,
                _ => out.push((y, c)),
            }
        }
        return Arc::new(out);
    }
    let mut cd = vec![0u64; 1 << width];
    for &(x, c) in list {
        cd[f(x) as usize] += c;
    }
    dense_from(&cd)
}

/// The [`Dense`] histogram of `w` (at most 16 bits), from a table of a counter per
/// container value (so that indexing it needs no bounds check).
fn dense_of(w: &Words) -> Dense {
    use crate::tensor::WordBuf;
    match w.buf() {
        WordBuf::U8(v) => {
            let mut t = [0u64; 256];
            v.iter().for_each(|&x| t[usize::from(x)] += 1);
            dense_from(&t)
        }
        // 32-bit counters while they cannot overflow, in the thread's table kept
        // across calls ([`stats::with_u16_counts`]).
        WordBuf::U16(v) if u32::try_from(v.len()).is_ok() => stats::with_u16_counts(|t| {
            v.iter().for_each(|&x| t[usize::from(x)] += 1);
            Arc::new(stats::drain_counts_of(t, v))
        }),
        WordBuf::U16(v) => {
            let mut t = vec![0u64; 1 << 16];
            let t16: &mut [u64; 1 << 16] = t.as_mut_slice().try_into().expect("2^16 counters");
            v.iter().for_each(|&x| t16[usize::from(x)] += 1);
            dense_from(&t)
        }
        _ => {
            let mut t = vec![0u64; 1 << w.width()];
            w.iter().for_each(|x| t[x as usize] += 1);
            dense_from(&t)
        }
    }
}

fn dense_estimate(d: &[(u64, u64)], width: u32, n: usize) -> u64 {
    let max = d.last().map_or(0, |&(s, _)| s);
    estimate_from_hist(Some(d), max, width, n)
}

/// A size in bytes `Lit(words)` can never be smaller than, from the histogram alone:
/// raw and bit packing sizes are exact, the table codecs bounded below without planning
/// ([`codec::select::TableBounds::lower`]). No encoding.
fn lit_lower_bound(words: &Words, dense: Option<&[(u64, u64)]>) -> u64 {
    match dense {
        Some(d) => lit_lower_bound_of(words, Some(d)),
        None => lit_lower_bound_of(words, wide_histogram(words).as_deref()),
    }
}

/// [`lit_lower_bound`] from the [`wide_histogram`] of `words`.
fn lit_lower_bound_of(words: &Words, hist: Option<&[(u64, u64)]>) -> u64 {
    let (width, n) = (words.width(), words.len());
    let max = match hist {
        Some(h) => h.last().map_or(0, |&(s, _)| s),
        None => words.max().unwrap_or(0),
    };
    let mut body = codec::raw::size(width, n).min(codec::bitpack::size_for(bits_needed(max), n));
    if let Some(h) = &hist {
        // The table codecs' bounds before planning: planning both tables of a root of
        // tens of thousands of distinct words for a bound was a third of silero's
        // compression time, and a looser bound only sends more roots to the exact size.
        body = body.min(codec::select::TableBounds::of(h, width, n).lower());
    }
    1 + uleb_len(body) + body
}

struct Hole {
    /// The hole's target, once computed.
    words: OnceCell<Arc<Words>>,
    /// How to compute the target: parent hole, its shell, and the id of the first of the
    /// shell's children (siblings are consecutive holes).
    src: Option<(usize, Shell, usize)>,
    /// Dense histogram, for holes of at most 16 bits, once computed.
    dense: OnceCell<Option<Dense>>,
    width: u32,
    len: usize,
    depth: u32,
    dtype: Option<Dtype>,
    parent: Option<ProdKind>,
    pos: u32,
    /// Bytes of `Lit(target)`: exact up to [`EXACT_WORDS`], estimated above.
    lit_bytes: u64,
    /// [`order0_floor`] of the target, when its literal's estimate counted the
    /// histogram the floor takes.
    floor: Option<u64>,
}

#[derive(Clone, Debug)]
enum PNode {
    /// An open hole (arena index).
    Hole(usize),
    /// A hole filled by `Lit` of its target.
    LitOf(usize),
    /// A complete leaf (`Const`) in the hole it filled.
    Done(usize, ProdKind, Node),
    /// An operator in the hole it filled, its production and its children.
    Op(usize, ProdKind, Shell, Vec<PNode>),
}

#[derive(Clone, Debug)]
struct State {
    tree: PNode,
    /// Open holes, leftmost first.
    holes: Vec<usize>,
    g: f64,
    h: f64,
    /// Bytes of everything that is not an open hole.
    fixed: u64,
    /// Bytes if every open hole is filled with `Lit`.
    rollout: u64,
    nodes: u32,
    seq: u64,
}

impl PartialEq for State {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for State {}
impl PartialOrd for State {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for State {
    /// Reversed so that `BinaryHeap` pops the smallest `(g + h, rollout, seq)`.
    fn cmp(&self, other: &Self) -> Ordering {
        (other.g + other.h)
            .total_cmp(&(self.g + self.h))
            .then(other.rollout.cmp(&self.rollout))
            .then(other.seq.cmp(&self.seq))
    }
}

/// Open states: a priority queue for A*, a stack for the first-complete ablation.
enum Frontier {
    AStar(BinaryHeap<State>),
    Stack(Vec<State>),
}

impl Frontier {
    fn len(&self) -> usize {
        match self {
            Frontier::AStar(q) => q.len(),
            Frontier::Stack(v) => v.len(),
        }
    }

    fn pop(&mut self) -> Option<State> {
        match self {
            Frontier::AStar(q) => q.pop(),
            Frontier::Stack(v) => v.pop(),
        }
    }
}

struct Search<'a> {
    opts: &'a SearchOptions,
    prior: &'a Prior,
    holes: Vec<Hole>,
    memory: u64,
    seq: u64,
    stats: SearchStats,
    /// Every state that was, when created, smaller by rollout size than all before it.
    /// Only grows, so a larger budget keeps every candidate of a smaller one.
    records: Vec<(u64, State)>,
    /// First-complete ablation: the first complete program that is not the root `Lit`.
    first: Option<State>,
    /// Indices into `records` of the best record at the end of each expansion (each
    /// index once): what the search would return at every smaller budget. The result
    /// is the exactly smallest of them, so a larger budget, whose finalists include
    /// every smaller budget's, never returns a larger program.
    finalists: Vec<usize>,
    /// The root's rows when the target is a whole matrix ([`HoleInfo::rows`]).
    rows: Option<u64>,
    /// The root literal's estimate when only its bounds are known ([`LazyRoot`]): the
    /// root hole's `lit_bytes` (and so the root state's rollout) then holds the upper
    /// bound, which every child's rollout subtracts again.
    lazy_root: Option<LazyRoot>,
    /// The root's [`wide_histogram`], once counted: the back-reference proposals'
    /// literal estimate (of the root, and of its columns, the same words in another
    /// order) and the final comparison's lower bound share it.
    root_hist: OnceCell<Option<Vec<(u64, u64)>>>,
}

/// Holes of at most this many words are sized exactly; larger ones are estimated.
const EXACT_WORDS: usize = 4096;

/// Most open states plus holes one search holds: a search that reaches it stops as if
/// its budget ran out, with [`SearchStats::memory_limited`] set. Each costs about 1 KB
/// (the open state's partial tree and hole list, the hole's record and features; the
/// holes' words are bounded apart, by [`SearchOptions::max_memory`]), so this bounds a
/// search of any budget to about 0.5 GB: before it, a budget of 2^40 on the demo's
/// position ids grew by about 60 MB/s until the machine ran out of memory (at 2 Mi items
/// it stopped at 2 GB, after 683,535 expansions). An expansion adds about three items, so
/// budgets up to about 150,000 per region never meet it.
pub const MAX_OPEN_ITEMS: usize = 1 << 19;

impl Search<'_> {
    /// The target of hole `id`, computing it (and its siblings') on first use.
    fn words(&self, id: usize) -> Arc<Words> {
        if let Some(w) = self.holes[id].words.get() {
            return Arc::clone(w);
        }
        let (parent, shell, first) = self.holes[id]
            .src
            .clone()
            .expect("a hole without words has a source");
        let pw = self.words(parent);
        for (i, k) in lazy_children(&shell, &pw).into_iter().enumerate() {
            let _ = self.holes[first + i].words.set(Arc::new(k));
        }
        Arc::clone(self.holes[id].words.get().expect("siblings were just set"))
    }

    /// The dense histogram of hole `id` when it has at most 16 bits and is large.
    fn dense(&self, id: usize) -> Option<Dense> {
        let h = &self.holes[id];
        h.dense
            .get_or_init(|| {
                (h.width <= 16 && h.len > EXACT_WORDS).then(|| dense_of(&self.words(id)))
            })
            .clone()
    }

    #[allow(clippy::too_many_arguments)]
    fn push_hole(
        &mut self,
        words: Option<Arc<Words>>,
        src: Option<(usize, Shell, usize)>,
        dense: Option<Option<Dense>>,
        (width, len): (u32, usize),
        depth: u32,
        dtype: Option<Dtype>,
        parent: Option<ProdKind>,
        pos: u32,
        lit_bytes: u64,
    ) -> usize {
        self.memory += (len * container_bytes(width)) as u64;
        let cell = OnceCell::new();
        if let Some(w) = words {
            let _ = cell.set(w);
        }
        let dcell = OnceCell::new();
        if let Some(d) = dense {
            let _ = dcell.set(d);
        }
        self.holes.push(Hole {
            words: cell,
            src,
            dense: dcell,
            width,
            len,
            depth,
            dtype,
            parent,
            pos,
            lit_bytes,
            floor: None,
        });
        self.holes.len() - 1
    }

    /// Adds a hole whose words are known, sizing its literal; `known` is the words'
    /// [`lit_node_estimate`] when the caller has it (it is their literal's size where
    /// the search sizes it that way: words wider than 16 bits, more than
    /// [`EXACT_WORDS`] and at most [`SAMPLE_WORDS`] of them).
    fn add_words_hole(
        &mut self,
        w: Arc<Words>,
        depth: u32,
        dtype: Option<Dtype>,
        parent: Option<ProdKind>,
        pos: u32,
        known: Option<u64>,
    ) -> usize {
        let (width, len) = (w.width(), w.len());
        // The root's floor is what the last expansion asks for at a budget of 1; a
        // deeper hole's is counted only if that hole is ever expanded last.
        let root = self.holes.is_empty();
        let mut floor = None;
        let (lit, dense) = if len <= EXACT_WORDS {
            (lit_node_len(&w), Some(None))
        } else if width <= 16 {
            let d = dense_of(&w);
            (dense_estimate(&d, width, len), Some(Some(d)))
        } else if len > SAMPLE_WORDS {
            let smp = sample_of(&w);
            let hist = sample_histogram(&smp);
            if root {
                floor = hist.as_deref().map(|h| floor_of(h, len));
            }
            (sampled_with(hist, &smp, len), None)
        } else if let Some(lit) = known.filter(|_| !root) {
            (lit, None)
        } else {
            let hist = wide_histogram(&w);
            let lit = estimate_of(hist.as_deref(), &w);
            if root {
                floor = hist.as_deref().map(|h| floor_of(h, len));
                // The root's whole histogram, which the back-reference gates and the
                // final lower bound take too.
                let _ = self.root_hist.set(hist);
            }
            (lit, None)
        };
        let id = self.push_hole(
            Some(w),
            None,
            dense,
            (width, len),
            depth,
            dtype,
            parent,
            pos,
            lit,
        );
        self.holes[id].floor = floor;
        id
    }

    fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    fn offer(&mut self, s: &State) {
        let better = match (self.records.last(), &self.lazy_root) {
            (None, _) => true,
            // The root is the only record, its estimate known by bounds.
            (Some(_), Some(lazy)) if self.records.len() == 1 => lazy.above(s.rollout),
            (Some((b, _)), _) => s.rollout < *b,
        };
        if better {
            self.records.push((s.rollout, s.clone()));
        }
    }

    fn context(&self, hid: usize) -> Context {
        if self.prior.is_uniform() {
            return self.plain_context(hid);
        }
        Context {
            feat: Features::of(&self.words(hid)),
            ..self.plain_context(hid)
        }
    }

    /// Hole `hid`'s context without the stream's features (what a uniform prior reads).
    fn plain_context(&self, hid: usize) -> Context {
        let h = &self.holes[hid];
        let feat = Features::default();
        Context {
            width: h.width,
            depth: h.depth,
            parent: h.parent,
            pos: h.pos,
            dtype: h.dtype,
            feat,
        }
    }

    /// Expands the leftmost hole of `s`, pushing open children and offering every child.
    fn expand(&mut self, s: &State, queue: &mut Frontier) {
        let hid = s.holes[0];
        let (width, lit_bytes) = {
            let h = &self.holes[hid];
            (h.width, h.lit_bytes)
        };
        let ctx = self.context_for(hid);
        let rest = &s.holes[1..];
        let rest_h = s.h - self.prior.min_cost(width);
        let mut out = Vec::new();

        // Lit in the hole.
        let lit_state = State {
            tree: replace_hole(&s.tree, hid, PNode::LitOf(hid)),
            holes: rest.to_vec(),
            g: s.g + self.prior.cost(&ctx, ProdKind::Lit),
            h: rest_h,
            fixed: s.fixed + lit_bytes,
            rollout: s.rollout,
            nodes: s.nodes,
            seq: self.next_seq(),
        };
        out.push(lit_state);

        self.propose_into(s, &ctx, true, &mut out);
        if self.opts.first_complete {
            // Lit last, so that depth first takes the first proposal.
            out.rotate_left(1);
        }
        for st in out {
            self.push_or_finish(st, queue);
        }
    }

    /// The context of hole `hid` for its proposals' costs: with the stream's features
    /// while the budget lasts (after the budget's last expansion the children's prior
    /// costs are never read, so the features are not computed).
    fn context_for(&self, hid: usize) -> Context {
        if self.stats.expansions < self.opts.budget {
            self.context(hid)
        } else {
            self.plain_context(hid)
        }
    }

    /// Every way but `Lit` to fill the leftmost hole of `s` (context `ctx`), appended to
    /// `out` as new states. With `nest`, a cast's (`dequant` without scales) codes hole
    /// is filled at once too (one level only).
    fn propose_into(&mut self, s: &State, ctx: &Context, nest: bool, out: &mut Vec<State>) {
        let hid = s.holes[0];
        let (depth, width, len, dtype, lit_bytes) = {
            let h = &self.holes[hid];
            (h.depth, h.width, h.len, h.dtype, h.lit_bytes)
        };
        let rest = &s.holes[1..];
        let rest_rollout = s.rollout - lit_bytes;
        let rest_h = s.h - self.prior.min_cost(width);
        // The smallest split (`scan`, `map`) adds one node; each proposal is checked
        // against the limit with its own child count below.
        let may_split = depth < self.opts.max_depth && s.nodes < self.opts.max_nodes;
        let words = self.words(hid);
        let dense = self.dense(hid);
        // The parent's distinct words with their counts: marginalizing visits these
        // instead of every entry of the dense table.
        let nonzero: Option<&[(u64, u64)]> = dense.as_deref().map(Vec::as_slice);
        let syms: Option<Vec<u64>> = nonzero
            .as_ref()
            .map(|l| l.iter().map(|&(s, _)| s).collect());
        let rows = if hid == 0 { self.rows } else { None };
        let info = HoleInfo {
            dtype,
            may_split,
            rows,
        };
        let local = OnceCell::new();
        let hist = if hid == 0 { &self.root_hist } else { &local };
        let lit = || {
            estimate_of(
                hist.get_or_init(|| wide_histogram(&words)).as_deref(),
                &words,
            )
        };
        let cands = candidates_with(&words, info, syms.as_deref(), &lit);
        let mut sample: Option<Words> = None;
        // At the budget's last expansion a state that cannot become a record is never
        // used, so a bijection's state (a merge of fields or planes, a map) whose
        // rollout cannot come under the best so far is not sized at all (see
        // `order0_floor`); computed once, when first needed.
        let last = self.stats.expansions >= self.opts.budget
            && !self.opts.first_complete
            && !tests::pruning_off();
        let mut floor: Option<Option<u64>> = None;
        // Children that are the same bit field of this hole's words (the sign bit under
        // every float split, the low mantissa bits under two) are sized once: their
        // histogram, their words when known, and their literal's size.
        let mut fields: HashMap<(u32, u32), FieldHole> = HashMap::new();
        // The same for children sized on the sample: the estimate of each field.
        let mut sampled: HashMap<(u32, u32), u64> = HashMap::new();
        for c in cands {
            match c {
                Cand::Leaf(kind, node) => {
                    let bytes = program_len(&node);
                    out.push(State {
                        tree: replace_hole(&s.tree, hid, PNode::Done(hid, kind, node)),
                        holes: rest.to_vec(),
                        g: s.g + self.prior.cost(ctx, kind),
                        h: rest_h,
                        fixed: s.fixed + bytes,
                        rollout: rest_rollout + bytes,
                        nodes: s.nodes,
                        seq: self.next_seq(),
                    });
                }
                Cand::Eager(kind, shell, targets, sizes) => {
                    let k = targets.len() as u32;
                    if s.nodes + k > self.opts.max_nodes {
                        continue;
                    }
                    let need: u64 = targets.iter().map(words_bytes).sum();
                    if self.memory + need > self.opts.max_memory {
                        self.stats.memory_limited = true;
                        continue;
                    }
                    let own = shell_own_len(&shell, targets.iter().map(|t| (t.width(), t.len())));
                    let mut ids = Vec::with_capacity(targets.len());
                    for (i, t) in targets.into_iter().enumerate() {
                        let known = sizes.as_ref().map(|s| s[i]);
                        ids.push(self.add_words_hole(
                            Arc::new(t),
                            depth + 1,
                            shell.child_dtype(i),
                            Some(kind),
                            i as u32,
                            known,
                        ));
                    }
                    let codes = nest && matches!(&shell, Shell::Dequant(d, _) if d.is_cast());
                    let st = self.split_state(s, hid, kind, shell, ids, own, ctx);
                    if codes {
                        // A cast's codes hole (its child, the state's leftmost hole)
                        // filled in the same expansion by everything but `Lit`
                        // (which is `st` itself): at a budget of 1 the codes are still
                        // coded as a tensor of their format is (the F16 values of an F32
                        // tensor with F16's field splits and byte planes).
                        let cctx = self.context_for(st.holes[0]);
                        let mut inner = Vec::new();
                        self.propose_into(&st, &cctx, false, &mut inner);
                        out.push(st);
                        out.extend(inner);
                    } else {
                        out.push(st);
                    }
                }
                Cand::Lazy(kind, shell) => {
                    // Child types without computing the children.
                    let types: Vec<(u32, usize)> = match &shell {
                        Shell::Scan(..) => vec![(width, len - 1)],
                        Shell::Map(_) => vec![(width, len)],
                        Shell::Merge(f) => match f.widths(width) {
                            Ok(ws) => ws.into_iter().map(|w| (w, len)).collect(),
                            Err(_) => continue,
                        },
                        _ => continue,
                    };
                    let k = types.len() as u32;
                    if s.nodes + k > self.opts.max_nodes {
                        continue;
                    }
                    let need: u64 = types
                        .iter()
                        .map(|&(w, n)| (n * container_bytes(w)) as u64)
                        .sum();
                    if self.memory + need > self.opts.max_memory {
                        self.stats.memory_limited = true;
                        continue;
                    }
                    let own = shell_own_len(&shell, types.iter().copied());
                    if last && matches!(shell, Shell::Merge(_) | Shell::Map(_)) {
                        let best = out
                            .iter()
                            .map(|st| st.rollout)
                            .chain(self.records.last().map(|r| r.0))
                            .min()
                            .unwrap_or(u64::MAX);
                        // Only where some proposal already came well under the literal:
                        // elsewhere the floor (about the literal's size) rules nothing out.
                        if best < lit_bytes / 8 * 7 {
                            let known = self.holes[hid].floor;
                            let f = *floor.get_or_insert_with(|| {
                                known.or_else(|| order0_floor(&words, nonzero, &mut sample))
                            });
                            if f.is_some_and(|f| rest_rollout + own + f >= best) {
                                self.stats.pruned += 1;
                                continue;
                            }
                        }
                    }
                    let first = self.holes.len();
                    let src = Some((hid, shell.clone(), first));
                    let pw = if len <= EXACT_WORDS {
                        None
                    } else {
                        pointwise(&shell, width)
                    };
                    let mut ids = Vec::with_capacity(types.len());
                    let bounds = merge_fields(&shell, width);
                    let field = |i: usize| bounds.as_ref().map(|b| b[i]);
                    match (&nonzero, pw) {
                        // Histograms of the children by marginalizing the parent's.
                        (Some(list), Some(fns)) => {
                            for (i, ((cw, f), &(_, n))) in fns.iter().zip(&types).enumerate() {
                                let key = field(i);
                                let (cd, lit) = match key.and_then(|k| fields.get(&k)) {
                                    Some(h) => (h.dense.clone().flatten(), h.lit),
                                    None => {
                                        let cd = match key {
                                            Some((shift, _)) => marginal_field(list, shift, *cw),
                                            None => marginal(list, *cw, f),
                                        };
                                        let lit = dense_estimate(&cd, *cw, n);
                                        if let Some(k) = key {
                                            fields.insert(
                                                k,
                                                FieldHole {
                                                    words: None,
                                                    dense: Some(Some(Arc::clone(&cd))),
                                                    lit,
                                                },
                                            );
                                        }
                                        (Some(cd), lit)
                                    }
                                };
                                let id = self.push_hole(
                                    None,
                                    src.clone(),
                                    Some(cd),
                                    (*cw, n),
                                    depth + 1,
                                    None,
                                    Some(kind),
                                    i as u32,
                                    lit,
                                );
                                ids.push(id);
                            }
                        }
                        _ if len > SAMPLE_WORDS => {
                            let smp = sample.get_or_insert_with(|| sample_of(&words));
                            // A merge's fields are cut from the sample one by one, each
                            // sized once across the proposals that share it (the sign
                            // bit under four float splits); other children together.
                            let kids = bounds.is_none().then(|| lazy_children(&shell, smp));
                            for (i, &(cw, n)) in types.iter().enumerate() {
                                let lit = match (&kids, field(i)) {
                                    (Some(kids), _) => sampled_estimate(&kids[i], n),
                                    (None, Some((shift, fw))) => {
                                        *sampled.entry((shift, fw)).or_insert_with(|| {
                                            sampled_estimate(&extract(smp.buf(), shift, fw), n)
                                        })
                                    }
                                    (None, None) => unreachable!("a merge's fields"),
                                };
                                let id = self.push_hole(
                                    None,
                                    src.clone(),
                                    None,
                                    (cw, n),
                                    depth + 1,
                                    None,
                                    Some(kind),
                                    i as u32,
                                    lit,
                                );
                                ids.push(id);
                            }
                        }
                        _ if bounds.is_some() => {
                            // Each field extracted and sized once (see `fields`).
                            for (i, &(cw, n)) in types.iter().enumerate() {
                                let (shift, fw) = field(i).expect("a merge's fields");
                                let id = match fields.get(&(shift, fw)) {
                                    Some(h) => self.push_hole(
                                        h.words.clone(),
                                        src.clone(),
                                        h.dense.clone(),
                                        (cw, n),
                                        depth + 1,
                                        None,
                                        Some(kind),
                                        i as u32,
                                        h.lit,
                                    ),
                                    None => {
                                        let t = Arc::new(extract(words.buf(), shift, fw));
                                        let id = self.add_words_hole(
                                            Arc::clone(&t),
                                            depth + 1,
                                            None,
                                            Some(kind),
                                            i as u32,
                                            None,
                                        );
                                        let h = &self.holes[id];
                                        let hole = FieldHole {
                                            words: Some(t),
                                            dense: h.dense.get().cloned(),
                                            lit: h.lit_bytes,
                                        };
                                        fields.insert((shift, fw), hole);
                                        id
                                    }
                                };
                                ids.push(id);
                            }
                        }
                        _ => {
                            for (i, t) in lazy_children(&shell, &words).into_iter().enumerate() {
                                let id = self.add_words_hole(
                                    Arc::new(t),
                                    depth + 1,
                                    None,
                                    Some(kind),
                                    i as u32,
                                    None,
                                );
                                ids.push(id);
                            }
                        }
                    }
                    out.push(self.split_state(s, hid, kind, shell, ids, own, ctx));
                }
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn split_state(
        &mut self,
        s: &State,
        hid: usize,
        kind: ProdKind,
        shell: Shell,
        ids: Vec<usize>,
        own: u64,
        ctx: &Context,
    ) -> State {
        let lit_bytes = self.holes[hid].lit_bytes;
        let width = self.holes[hid].width;
        let mut h = s.h - self.prior.min_cost(width);
        let mut rollout = s.rollout - lit_bytes + own;
        for &i in &ids {
            h += self.prior.min_cost(self.holes[i].width);
            rollout += self.holes[i].lit_bytes;
        }
        let k = ids.len() as u32;
        let sub = PNode::Op(
            hid,
            kind,
            shell,
            ids.iter().map(|&i| PNode::Hole(i)).collect(),
        );
        let mut holes = ids;
        holes.extend_from_slice(&s.holes[1..]);
        State {
            tree: replace_hole(&s.tree, hid, sub),
            holes,
            g: s.g + self.prior.cost(ctx, kind),
            h,
            fixed: s.fixed + own,
            rollout,
            nodes: s.nodes + k,
            seq: self.next_seq(),
        }
    }

    fn push_or_finish(&mut self, st: State, queue: &mut Frontier) {
        self.stats.candidates += 1;
        self.offer(&st);
        match queue {
            Frontier::AStar(q) => {
                if !st.holes.is_empty() {
                    q.push(st);
                }
            }
            Frontier::Stack(v) => {
                let root_lit = matches!(st.tree, PNode::LitOf(0));
                if st.holes.is_empty() && !root_lit && self.first.is_none() {
                    self.first = Some(st.clone());
                }
                if !st.holes.is_empty() {
                    v.push(st);
                }
            }
        }
    }

    /// Appends the production of every node of `p` with its context (see
    /// [`observations`]).
    fn observe(&self, p: &PNode, out: &mut Vec<(Context, ProdKind)>) {
        let (id, kind) = match p {
            PNode::Hole(i) | PNode::LitOf(i) => (*i, ProdKind::Lit),
            PNode::Done(i, kind, _) | PNode::Op(i, kind, _, _) => (*i, *kind),
        };
        let h = &self.holes[id];
        let ctx = Context {
            width: h.width,
            depth: h.depth,
            parent: h.parent,
            pos: h.pos,
            dtype: h.dtype,
            feat: Features::of(&self.words(id)),
        };
        out.push((ctx, kind));
        if let PNode::Op(_, _, _, kids) = p {
            for k in kids {
                self.observe(k, out);
            }
        }
    }

    /// The program of `p`, each hole's literal encoded once across calls (`memo`, by hole).
    /// With `last` (no later call needs `memo`), literals are moved out of it rather than
    /// copied: a hole is a leaf of a program at most once.
    fn materialize(&self, p: &PNode, memo: &mut HashMap<usize, Node>, last: bool) -> Node {
        match p {
            PNode::Hole(i) | PNode::LitOf(i) if last => {
                memo.remove(i).unwrap_or_else(|| self.literal(*i))
            }
            PNode::Hole(i) | PNode::LitOf(i) => {
                memo.entry(*i).or_insert_with(|| self.literal(*i)).clone()
            }
            PNode::Done(_, _, n) => n.clone(),
            PNode::Op(_, _, shell, kids) => shell
                .build(
                    kids.iter()
                        .map(|k| self.materialize(k, memo, last))
                        .collect(),
                )
                .expect("decompositions are well typed"),
        }
    }

    /// `Lit` of hole `i`'s target.
    fn literal(&self, i: usize) -> Node {
        self.leaf_words(i).literal()
    }

    /// What hole `i`'s literal reads (see [`LeafWords`]).
    fn leaf_words(&self, i: usize) -> LeafWords {
        let h = &self.holes[i];
        let dense = h.dense.get().cloned().flatten();
        let field = (dense.is_some() && h.len > EXACT_WORDS && h.words.get().is_none())
            .then_some(h.src.as_ref())
            .flatten()
            .filter(|(p, shell, _)| matches!(shell, Shell::Merge(_)) && self.holes[*p].width <= 16)
            .and_then(|(p, shell, first)| {
                let fields = merge_fields(shell, self.holes[*p].width)?;
                Some((*p, *fields.get(i - first)?))
            });
        match (field, dense) {
            (Some((p, (shift, width))), Some(dense)) => LeafWords::Field {
                parent: self.words(p),
                shift,
                width,
                dense,
            },
            (_, dense) => LeafWords::Own(self.words(i), dense),
        }
    }

    /// Encodes the literals of `p`'s leaves not in `memo` on the thread pool when they
    /// are large together (a big tensor's fields then use every core), adding them to
    /// `memo`; [`Search::materialize`] then finds them there. The same bytes either way.
    fn encode_leaves_in_parallel(&self, p: &PNode, memo: &mut HashMap<usize, Node>) {
        fn leaves(p: &PNode, out: &mut Vec<usize>) {
            match p {
                PNode::Hole(i) | PNode::LitOf(i) => out.push(*i),
                PNode::Done(..) => {}
                PNode::Op(_, _, _, kids) => kids.iter().for_each(|k| leaves(k, out)),
            }
        }
        let mut ids = Vec::new();
        leaves(p, &mut ids);
        ids.retain(|i| !memo.contains_key(i));
        ids.dedup();
        let words: usize = ids.iter().map(|&i| self.holes[i].len).sum();
        if ids.len() < 2 || words < PARALLEL_WORDS {
            return;
        }
        let inputs: Vec<(usize, LeafWords)> =
            ids.iter().map(|&i| (i, self.leaf_words(i))).collect();
        use rayon::prelude::*;
        let nodes: Vec<(usize, Node)> = inputs
            .into_par_iter()
            .map(|(i, w)| (i, w.literal()))
            .collect();
        memo.extend(nodes);
    }
}

/// What [`Search::expand`] keeps of a bit field of the expanded hole's words, for the
/// other proposals that have the same field as a child.
struct FieldHole {
    /// The field's words, when they were extracted.
    words: Option<Arc<Words>>,
    /// The field's dense histogram as its hole holds it (`Some(None)`: none, the field
    /// is short).
    dense: Option<Option<Dense>>,
    /// The bytes of the field's literal (estimated or exact, as its hole's).
    lit: u64,
}

/// Leaves of a finalist holding at least this many words together are encoded in
/// parallel.
const PARALLEL_WORDS: usize = 1 << 20;

/// `Lit(words)`; the dense histogram, when the hole has one, spares the codec a pass.
fn literal_of(words: &Words, dense: Option<Dense>) -> Node {
    match dense {
        Some(d) if words.len() > EXACT_WORDS => {
            let hist = d.to_vec();
            let ty = Ty::new(words.width(), words.len() as u64);
            Node::lit_encoded(ty, codec::encode_best_with_histogram(words, hist).into())
                .expect("a hole's type is valid")
        }
        _ => Node::lit(words),
    }
}

/// What a leaf's literal reads: the hole's own words (with its dense histogram, if
/// any), or, for a bit field of its parent's words of at most 16 bits (a `merge` child)
/// whose own words were never needed and which has a dense histogram, the parent's
/// words and the field. The field is then encoded in place ([`codec::Stream::Field`]),
/// never extracted into a buffer of its own; the literal is the same.
enum LeafWords {
    /// The hole's words and dense histogram.
    Own(Arc<Words>, Option<Dense>),
    /// Bits `[shift, shift + width)` of each of the parent's words, and their dense
    /// histogram.
    Field {
        parent: Arc<Words>,
        shift: u32,
        width: u32,
        dense: Dense,
    },
}

impl LeafWords {
    /// `Lit` of the leaf's words.
    fn literal(self) -> Node {
        match self {
            LeafWords::Own(w, dense) => literal_of(&w, dense),
            LeafWords::Field {
                parent,
                shift,
                width,
                dense,
            } => {
                let stream = codec::Stream::Field {
                    words: &parent,
                    shift,
                    width,
                };
                let ty = Ty::new(width, parent.len() as u64);
                let lit = codec::encode_stream_with_histogram(stream, dense.to_vec()).into();
                Node::lit_encoded(ty, lit).expect("a hole's type is valid")
            }
        }
    }
}

fn words_bytes(w: &Words) -> u64 {
    (w.len() * container_bytes(w.width())) as u64
}

/// The node's own bytes for an operator over children of the given (width, length).
fn shell_own_len(shell: &Shell, types: impl Iterator<Item = (u32, usize)>) -> u64 {
    let placeholders: Vec<Node> = types
        .map(|(w, n)| {
            Node::lit_encoded(
                Ty::new(w, n as u64),
                Lit {
                    codec: codec::CodecId::Raw,
                    body: bytes::Bytes::new(),
                },
            )
            .expect("targets have valid widths")
        })
        .collect();
    // The shell's own bytes at every level it builds (two for transpose over
    // backref): the whole program less the placeholders'.
    let theirs: u64 = placeholders.iter().map(program_len).sum();
    let node = shell
        .build(placeholders)
        .expect("decompositions are well typed");
    program_len(&node) - theirs
}

/// `tree` with the hole `id` replaced by `with`.
fn replace_hole(tree: &PNode, id: usize, with: PNode) -> PNode {
    fn go(p: &PNode, id: usize, with: &mut Option<PNode>) -> PNode {
        match p {
            PNode::Hole(i) if *i == id => with.take().expect("hole appears once"),
            PNode::Op(h, kind, shell, kids) => PNode::Op(
                *h,
                *kind,
                shell.clone(),
                kids.iter().map(|k| go(k, id, with)).collect(),
            ),
            other => other.clone(),
        }
    }
    go(tree, id, &mut Some(with))
}

/// The root's dense histogram as a list, its plain body size in bytes and its table
/// bounds, for [`RootLit::exceeds`].
type RootHist = (Vec<(u64, u64)>, u64, codec::select::TableBounds);

/// The search loop: the explored arena, the chosen state (the best record by rollout
/// size for A*, the first complete program in the ablation) and the root literal's
/// lower bound in bytes when it was planned (its exact size for a root of at most
/// `EXACT_WORDS` words). `opts.budget >= 1`, `target` not empty.
fn explore<'a>(
    target: &Arc<Words>,
    dtype: Option<Dtype>,
    rows: Option<u64>,
    opts: &'a SearchOptions,
    prior: &'a Prior,
) -> (Search<'a>, State, Option<u64>, Option<RootHist>) {
    let mut search = Search {
        opts,
        prior,
        holes: Vec::new(),
        memory: 0,
        seq: 0,
        stats: SearchStats::default(),
        records: Vec::new(),
        first: None,
        finalists: Vec::new(),
        rows,
        lazy_root: None,
        root_hist: OnceCell::new(),
    };
    // A root with a dense histogram has its literal sized by planning its tables (by
    // rounding; never approximated, however many distinct words), sharing the symbol
    // set's plan with the lower bound the final comparison needs.
    let mut root_lb = None;
    let mut root_lit = None;
    let (width, n) = (target.width(), target.len());
    if width <= 16 && n > EXACT_WORDS {
        let d = dense_of(target);
        let list = d.to_vec();
        let max = list.last().map_or(0, |&(s, _)| s);
        let plain = codec::raw::size(width, n).min(codec::bitpack::size_for(bits_needed(max), n));
        let node = |b: u64| 1 + uleb_len(b) + b;
        let b = codec::select::TableBounds::of(&list, width, n);
        let lit = match LazyRoot::of(&d, width, n, plain, &b) {
            Ok(exact) => exact,
            Err(lazy) => {
                let hi = lazy.hi;
                search.lazy_root = Some(lazy);
                hi
            }
        };
        search.push_hole(
            Some(Arc::clone(target)),
            None,
            Some(Some(d)),
            (width, n),
            1,
            dtype,
            None,
            0,
            lit,
        );
        root_lb = Some(node(plain.min(b.lower())));
        root_lit = Some((list, plain, b));
    } else {
        search.add_words_hole(Arc::clone(target), 1, dtype, None, 0, None);
        if n <= EXACT_WORDS {
            // A short root's literal was sized exactly: that is its bound.
            root_lb = Some(search.holes[0].lit_bytes);
        }
    }
    let root = State {
        tree: PNode::Hole(0),
        holes: vec![0],
        g: 0.0,
        h: prior.min_cost(target.width()),
        fixed: 0,
        rollout: search.holes[0].lit_bytes,
        nodes: 1,
        seq: 0,
    };
    search.offer(&root);
    let mut queue = if opts.first_complete {
        Frontier::Stack(Vec::new())
    } else {
        Frontier::AStar(BinaryHeap::new())
    };
    let mut last = root.clone();
    match &mut queue {
        Frontier::AStar(q) => q.push(root),
        Frontier::Stack(v) => v.push(root),
    }
    while let Some(s) = queue.pop() {
        if search.stats.expansions >= opts.budget || search.first.is_some() {
            search.stats.budget_exhausted = search.first.is_none();
            last = s;
            break;
        }
        if queue.len() + search.holes.len() > MAX_OPEN_ITEMS {
            search.stats.budget_exhausted = true;
            search.stats.memory_limited = true;
            last = s;
            break;
        }
        if opts.control.cancelled() {
            // Stopped from outside: finish as if the budget had run out here.
            search.stats.budget_exhausted = true;
            last = s;
            break;
        }
        search.stats.expansions += 1;
        opts.control.expanded();
        if let Frontier::Stack(v) = &mut queue {
            // Depth first in proposal order: the first proposal is expanded next.
            let before = v.len();
            search.expand(&s, &mut queue);
            if let Frontier::Stack(v) = &mut queue {
                v[before..].reverse();
            }
        } else {
            search.expand(&s, &mut queue);
        }
        let best = search.records.len() - 1;
        if search.finalists.last() != Some(&best) {
            search.finalists.push(best);
        }
        last = s;
    }
    // The candidate: the best record by size (A*), or the first complete program (or
    // failing that the last state's rollout) in the ablation.
    let chosen = if opts.first_complete {
        search.first.clone().unwrap_or(last)
    } else {
        search
            .records
            .last()
            .map(|(_, s)| s.clone())
            .expect("the root is always a record")
    };
    (search, chosen, root_lb, root_lit)
}

/// The productions of the program the search chooses for `target` (the same search as
/// [`search`]), each with the context it was used in, root first, children in order.
/// Nothing is encoded or executed: the program is read off the search tree, and each
/// node's context takes the features of the stream it produces. For calibration.
pub fn observations(
    target: Words,
    dtype: Option<Dtype>,
    opts: &SearchOptions,
    prior: &Prior,
) -> Vec<(Context, ProdKind)> {
    let target = Arc::new(target);
    let root_ctx = |kind| {
        vec![(
            Context {
                width: target.width(),
                depth: 1,
                parent: None,
                pos: 0,
                dtype,
                feat: Features::of(&target),
            },
            kind,
        )]
    };
    if opts.budget == 0 || target.is_empty() {
        return root_ctx(ProdKind::Lit);
    }
    let (search, chosen, _, _) = explore(&target, dtype, None, opts, prior);
    let mut out = Vec::new();
    search.observe(&chosen.tree, &mut out);
    out
}

/// Runs the bounded search (see the module doc) with the given prior.
pub fn search(
    target: &Words,
    dtype: Option<Dtype>,
    opts: &SearchOptions,
    prior: &Prior,
) -> Synthesis {
    search_shared(&Arc::new(target.clone()), dtype, opts, prior)
}

/// [`search`] on a shared target, which the search then holds without copying it.
pub fn search_shared(
    shared: &Arc<Words>,
    dtype: Option<Dtype>,
    opts: &SearchOptions,
    prior: &Prior,
) -> Synthesis {
    search_matrix(shared, dtype, None, opts, prior)
}

/// [`search_shared`] on a target that is a whole tensor of `rows` rows (its first
/// dimension; `None` for a vector, a region or a group), which lets the search read it
/// column by column too ([`HoleInfo::rows`]).
pub fn search_matrix(
    shared: &Arc<Words>,
    dtype: Option<Dtype>,
    rows: Option<u64>,
    opts: &SearchOptions,
    prior: &Prior,
) -> Synthesis {
    let target: &Words = shared;
    // The fast level's layout (a literal for a short target): at the fast level for the targets it picks
    // (`fast::takes_the_layout`), and at the default level's budget for ordinary trained
    // weights, on which the search finds that layout (or one within 0.1% of it) at
    // several times its cost (`fast::ordinary_weights`).
    let layout = match opts.level {
        crate::synth::Level::Fast => crate::synth::fast::takes_the_layout(target, dtype),
        crate::synth::Level::Default => {
            opts.budget == crate::synth::Level::Default.budget()
                && crate::synth::fast::ordinary_weights(target, dtype, rows)
        }
        crate::synth::Level::Max => false,
    };
    if layout {
        let (program, bytes) = crate::synth::fast::program(target, dtype);
        return Synthesis {
            program,
            bytes,
            stats: SearchStats::default(),
        };
    }
    // The fast level codes a target with reuse (a JSON header, repeated rows) as the
    // match finder's parse with literal children when that is under the literal's
    // lower bound, without searching it: the search at budget 1 finds the same program
    // on every corpus file's header (every archive unchanged), at 1.4-1.7x the time
    // (fracast0-f32's header of 4,408 bytes: 290 -> 175 us; the file's fast compression
    // 1.14x, fracast0-int8-f32's 1.19x).
    if opts.level == crate::synth::Level::Fast {
        if let Some(p) = crate::synth::backref::propose(target) {
            let children: Vec<Node> = p.children().iter().map(Node::lit).collect();
            let program =
                Node::backref(target.len() as u64, children).expect("a parse is well typed");
            let bytes = program_len(&program);
            let lit = lit_lower_bound(target, None);
            if bytes < lit {
                return Synthesis {
                    program,
                    bytes,
                    stats: SearchStats::default(),
                };
            }
        }
    }
    // The fast level searches the other targets at budget 1 (those of few values or
    // not floats, whose search costs little and whose tables the layout would overpay).
    let searched;
    let opts = if opts.level == crate::synth::Level::Fast {
        searched = SearchOptions {
            budget: 1,
            level: crate::synth::Level::Default,
            ..opts.clone()
        };
        &searched
    } else {
        opts
    };
    if opts.budget == 0 || target.is_empty() {
        let program = Node::lit(target);
        let bytes = program_len(&program);
        let stats = SearchStats {
            literal_fallback: true,
            ..SearchStats::default()
        };
        return Synthesis {
            program,
            bytes,
            stats,
        };
    }
    let (search, chosen, root_lb, root_lit) = explore(shared, dtype, rows, opts, prior);
    // A*: the exactly smallest of the finalists (earliest on ties); the ablation: its
    // one candidate.
    let candidates: Vec<&State> = if opts.first_complete || search.finalists.is_empty() {
        vec![&chosen]
    } else {
        search
            .finalists
            .iter()
            .map(|&i| &search.records[i].1)
            .collect()
    };
    let mut memo = HashMap::new();
    let mut best: Option<(u64, Node)> = None;
    let count = candidates.len();
    for (k, st) in candidates.into_iter().enumerate() {
        if matches!(st.tree, PNode::Hole(0) | PNode::LitOf(0)) {
            continue;
        }
        search.encode_leaves_in_parallel(&st.tree, &mut memo);
        let program = search.materialize(&st.tree, &mut memo, k + 1 == count);
        let bytes = program_len(&program);
        if best.as_ref().is_none_or(|(b, _)| bytes < *b) {
            best = Some((bytes, program));
        }
    }
    drop(memo);
    let mut winner = None;
    if let Some((bytes, program)) = best {
        // Never larger than Lit(target): encode the literal only when its lower bound
        // and then its exact size (from the root's plans, when there are any) leave it
        // a chance; ties go to the literal.
        let lb = root_lb.unwrap_or_else(|| {
            lit_lower_bound_of(
                target,
                search
                    .root_hist
                    .get_or_init(|| wide_histogram(target))
                    .as_deref(),
            )
        });
        let exceeds = || {
            root_lit
                .as_ref()
                .is_some_and(|(h, plain, b)| RootLit::exceeds(h, b, target, *plain, bytes))
        };
        if lb > bytes || exceeds() {
            winner = Some((bytes, program, false));
        } else {
            let lit = Node::lit(target);
            let lb = program_len(&lit);
            winner = Some(if lb <= bytes {
                (lb, lit, true)
            } else {
                (bytes, program, false)
            });
        }
    }
    let (bytes, program, fallback) = winner.unwrap_or_else(|| {
        let lit = Node::lit(target);
        (program_len(&lit), lit, true)
    });
    let mut stats = search.stats;
    stats.literal_fallback = fallback;
    Synthesis {
        program,
        bytes,
        stats,
    }
}

#[cfg(not(test))]
mod tests {
    /// The unit tests' switch that turns the last expansion's pruning off: off in a
    /// build without tests.
    #[inline(always)]
    pub(super) fn pruning_off() -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    thread_local! {
        static PRUNING_OFF: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    }

    /// Whether this test thread turned the last expansion's pruning off.
    pub(super) fn pruning_off() -> bool {
        PRUNING_OFF.with(std::cell::Cell::get)
    }

    /// A Fourier basis as silero-vad's STFT convolution holds it: `rows` rows of
    /// `cols` F32 words, the cosines of frequencies 0..rows/2 then their sines.
    fn fourier_basis(rows: usize, cols: usize) -> Words {
        let half = rows / 2;
        let mut v = Vec::with_capacity(rows * cols);
        for r in 0..rows {
            let k = (r % half) as f64;
            for c in 0..cols {
                let a = 2.0 * std::f64::consts::PI * k * c as f64 / cols as f64;
                let x = if r < half { a.cos() } else { a.sin() };
                v.push(u64::from((x as f32).to_bits()));
            }
        }
        Words::from_u64s(32, &v)
    }

    #[test]
    fn order0_floor_is_seven_eighths_of_the_entropy() {
        // Counts 4, 2, 1, 1: 1.75 bits a word, 14 bits in all; 7/8 of 1.75 bytes.
        let w = Words::from_u64s(32, &[7, 7, 7, 7, 9, 9, 11, 1 << 30]);
        assert_eq!(order0_floor(&w, None, &mut None), Some(1));
        let w = Words::from_u64s(32, &(0..4096u64).map(|i| i % 256).collect::<Vec<_>>());
        // 8 bits a word: 4,096 bytes, 3,584 of them.
        assert_eq!(order0_floor(&w, None, &mut None), Some(3584));
    }

    #[test]
    fn pruning_the_last_expansion_keeps_the_program() {
        let basis = Arc::new(fourier_basis(258, 256));
        let opts = SearchOptions::default();
        let run = |off: bool| {
            PRUNING_OFF.with(|p| p.set(off));
            let s = search_matrix(
                &basis,
                Some(Dtype::F32),
                Some(258),
                &opts,
                &Prior::uniform(),
            );
            PRUNING_OFF.with(|p| p.set(false));
            s
        };
        let (pruned, full) = (run(false), run(true));
        // The basis is coded as back references, far under any field split,
        // which are then not sized.
        assert!(
            matches!(pruned.program.op(), Op::BackRef(..) | Op::Transpose(..)),
            "{}",
            pruned.program
        );
        assert!(pruned.stats.pruned >= 4, "{:?}", pruned.stats);
        assert_eq!(full.stats.pruned, 0);
        assert_eq!(pruned.program, full.program);
        assert_eq!(pruned.bytes, full.bytes);
        assert!(pruned.stats.candidates < full.stats.candidates);
    }
    use crate::dsl::program_len;
    use crate::dsl::Op;

    /// A safetensors-like JSON header of `n` tensors (keys and offsets repeat: what the
    /// match finder is for).
    fn json_header(n: usize) -> Words {
        let mut s = String::from("{");
        for k in 0..n {
            let (a, b) = (k * 16384, (k + 1) * 16384);
            s.push_str(&format!(
                "\"model.layers.{}.mlp.{}.weight\":{{\"dtype\":\"BF16\",\"shape\":[64,128],\"data_offsets\":[{a},{b}]}},",
                k / 3,
                ["up", "down", "gate"][k % 3]
            ));
        }
        s.push('}');
        Words::from_le_bytes(8, s.as_bytes()).unwrap()
    }

    /// The fast level codes a stream with reuse as the match finder's parse with literal
    /// children, unsearched: here the program the search at budget 1 finds too, of the
    /// same bytes, and it runs back to the stream.
    #[test]
    fn the_fast_level_codes_a_header_as_its_parse_with_literal_children() {
        let header = json_header(60);
        assert_eq!(header.len(), 5_855);
        let fast = SearchOptions {
            level: crate::synth::Level::Fast,
            budget: crate::synth::Level::Fast.budget(),
            ..SearchOptions::default()
        };
        let got = search_matrix(
            &Arc::new(header.clone()),
            None,
            None,
            &fast,
            &Prior::uniform(),
        );
        let Op::BackRef(children) = got.program.op() else {
            panic!("not a backref: {}", got.program);
        };
        assert!(
            children.iter().all(|c| matches!(c.op(), Op::Lit(_))),
            "{}",
            got.program
        );
        assert_eq!(crate::dsl::execute(&got.program, 1 << 20).unwrap(), header);
        let searched = SearchOptions {
            budget: 1,
            ..SearchOptions::default()
        };
        let want = search_matrix(&Arc::new(header), None, None, &searched, &Prior::uniform());
        assert_eq!(got.program, want.program);
        assert_eq!((got.bytes, want.bytes), (632, 632));
        assert_eq!((got.stats.expansions, want.stats.expansions > 0), (0, true));
    }

    /// `--max-nodes 2` admits a two-node program (`scan add` over a constant): the
    /// search used to refuse every split unless two more nodes fitted, so it found
    /// `scan` only from `--max-nodes 3` (found by a tester).
    #[test]
    fn a_one_child_split_fits_a_limit_of_two_nodes() {
        let ramp = Words::from_fn(64, 3000, |i| i as u64 * 3);
        let opts = |max_nodes| SearchOptions {
            budget: 32,
            max_nodes,
            ..SearchOptions::default()
        };
        let two = search(&ramp, Some(Dtype::I64), &opts(2), &Prior::uniform());
        assert_eq!(two.program.node_count(), 2, "{} bytes", two.bytes);
        let one = search(&ramp, Some(Dtype::I64), &opts(1), &Prior::uniform());
        assert_eq!(one.program.node_count(), 1);
        assert!(two.bytes < one.bytes / 10, "{} vs {}", two.bytes, one.bytes);
    }

    /// [`marginal_field`] gives what [`marginal`] gives with the field's closure: on a
    /// real BF16 matrix's histogram (3,549 distinct words) for every field a float split
    /// proposes, and on short lists that leave one to three words past the four tables.
    #[test]
    fn field_marginal_equals_the_closure_marginal() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/assets/demo.safetensors");
        let bytes = std::fs::read(path).unwrap();
        let src = crate::archive::safetensors::parse(&bytes).unwrap();
        let name = "encoder.layer.0.intermediate.dense.weight";
        let t = src.tensors().iter().position(|t| t.name == name).unwrap();
        let real = Words::from_le_bytes(16, src.tensor_bytes(t)).unwrap();
        let mut lists = vec![dense_of(&real).to_vec()];
        for len in 1..=7u64 {
            lists.push((0..len).map(|i| (i * 9_973 % 65_536, i + 1)).collect());
        }
        for list in &lists {
            for (shift, width) in [(15, 1), (7, 8), (0, 7), (4, 11), (0, 4), (3, 3), (0, 16)] {
                let m = crate::tensor::mask(width);
                let want = marginal(list, width, |x| (x >> shift) & m);
                assert_eq!(
                    marginal_field(list, shift, width),
                    want,
                    "{} words, field ({shift}, {width})",
                    list.len()
                );
            }
        }
        assert_eq!(lists[0].len(), 3_549);
    }

    /// The root literal's estimate known by its bounds ([`LazyRoot`]) brackets the
    /// estimate the search used to plan at once ([`estimate_sizes_with`] through
    /// [`choose`] and the node's framing), and every comparison with it comes out as
    /// with that estimate: on 16-bit streams of many distinct words (Huffman planned;
    /// skewed, and uniform, where plain packing wins either way) and of few (Huffman
    /// not planned: exact at once).
    #[test]
    fn lazy_root_estimate_compares_as_the_planned_one() {
        let cases = [
            Words::from_fn(16, 200_000, |i| {
                let x = (i as u64).wrapping_mul(2_654_435_761) % 20_000;
                x * x / 20_000
            }),
            Words::from_fn(16, 100_000, |i| (i as u64).wrapping_mul(40_503) % 30_011),
            Words::from_fn(16, 100_000, |i| (i as u64).wrapping_mul(40_503) % 300),
        ];
        let mut lazy = 0;
        for w in &cases {
            let (width, n) = (w.width(), w.len());
            let d = dense_of(w);
            let max = d.last().map_or(0, |&(s, _)| s);
            let plain =
                codec::raw::size(width, n).min(codec::bitpack::size_for(bits_needed(max), n));
            let b = codec::select::TableBounds::of(&d, width, n);
            let body = choose(
                plain,
                estimate_sizes_with(&d, width, n, b.syms.clone(), b.set),
            );
            let planned = 1 + uleb_len(body) + body;
            match LazyRoot::of(&d, width, n, plain, &b) {
                Ok(exact) => assert_eq!(exact, planned, "{} distinct", d.len()),
                Err(root) => {
                    lazy += 1;
                    assert!(root.lo <= planned && planned <= root.hi && root.lo < root.hi);
                    let near = [root.lo - 1, root.lo, planned - 1, planned, planned + 1];
                    for x in near.into_iter().chain([root.hi, root.hi + 1]) {
                        assert_eq!(root.above(x), x < planned, "{x} vs {planned}");
                    }
                    assert_eq!(root.exact(), planned);
                }
            }
        }
        // The first only: the uniform one's bounds both choose the plain body, and the
        // last plans no Huffman.
        assert_eq!(lazy, 1);
    }

    /// The root literal's size from the plans [`explore`] keeps is exactly the size of the
    /// literal the codecs write: on a real BF16 matrix (3,549 distinct words, rANS), on
    /// one of more than [`APPROX_SYMBOLS`] distinct words, and on streams where Huffman,
    /// rANS or plain packing wins.
    #[test]
    fn root_literal_exact_size_matches_the_encoded_literal() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/assets/demo.safetensors");
        let bytes = std::fs::read(path).unwrap();
        let src = crate::archive::safetensors::parse(&bytes).unwrap();
        let name = "encoder.layer.0.intermediate.dense.weight";
        let t = src.tensors().iter().position(|t| t.name == name).unwrap();
        let real = Words::from_le_bytes(16, src.tensor_bytes(t)).unwrap();
        let cases = [
            real,
            Words::from_fn(16, 50_000, |i| {
                (i as u64 * 40_503 % 37) * (i as u64 % 5 + 1)
            }),
            Words::from_fn(16, 200_000, |i| {
                let x = (i as u64).wrapping_mul(2_654_435_761) % 9_000;
                x * x / 9_000
            }),
            Words::from_fn(8, 10_000, |i| i as u64 * 97 % 256),
            Words::from_fn(8, 3_000, |i| u64::from(i % 10 == 0)),
            // Four equally frequent words: the flat tables (every length or frequency the
            // same) are the bounds' special case.
            Words::from_fn(8, 70_000, |i| i as u64 % 4),
        ];
        let mut many = false;
        for w in &cases {
            let hist = stats::histogram(w, codec::MAX_TABLE_SYMBOLS).unwrap();
            many |= hist.len() > APPROX_SYMBOLS;
            let max = hist.last().map_or(0, |&(s, _)| s);
            let plain = codec::raw::size(w.width(), w.len())
                .min(codec::bitpack::size_for(bits_needed(max), w.len()));
            let root = RootLit::plan(&hist, w, plain);
            let exact = root.exact_len(w);
            assert_eq!(exact, program_len(&Node::lit(w)), "{} words", w.len());
            let lb = plain.min(codec::select::TableBounds::of(&hist, w.width(), w.len()).lower());
            assert!(1 + uleb_len(lb) + lb <= exact);
            // Each codec's own bound holds for its exact body.
            let syms: Vec<u64> = hist.iter().map(|&(s, _)| s).collect();
            let head = codec::table::count_bits(w.width(), w.len())
                + codec::table::plan_set(&syms, w.width()).bits;
            let mut counts: Vec<u64> = hist.iter().map(|&(_, c)| c).collect();
            counts.sort_unstable();
            let rans = root.rans.as_ref().unwrap();
            if !rans.is_rans8() {
                assert!(
                    codec::rans::body_lower_bound(&counts, w.len(), head)
                        <= rans.size(codec::Stream::Words(w))
                );
            }
            assert!(rans.lower_bound() <= rans.size(codec::Stream::Words(w)));
            assert!(codec::huffman::body_lower_bound(&counts, w.len(), head) <= root.huff);
        }
        assert!(many, "one case has more than APPROX_SYMBOLS distinct words");
    }
}
