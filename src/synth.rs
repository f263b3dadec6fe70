//! Synthesis: target-directed decomposition and bounded A* search (DESIGN §6; paper §3.3,
//! Algorithm 1).

pub mod astar;
pub mod backref;
pub mod calibrate;
pub mod decompose;
pub mod dequant;
pub mod fast;
pub mod prior;
pub mod replay;

use crate::dsl::Node;
use crate::tensor::{Dtype, Words};
pub use prior::Prior;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// Which production prior a compression uses.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum PriorChoice {
    /// Calibrate on the input when the budget is at least 1 ([`calibrate`]); uniform
    /// at budget 0.
    #[default]
    Auto,
    /// Uniform costs.
    Uniform,
    /// This prior (from a file, say).
    Given(Arc<Prior>),
}

/// Limits and budget of one search (DESIGN §6). Defaults are the paper's main run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SearchOptions {
    /// Expansion budget per tensor: how many partial programs may be expanded. 0 means
    /// the program is `Lit(target)`.
    pub budget: u64,
    /// Deepest program the search builds (root has depth 1).
    pub max_depth: u32,
    /// Most nodes in one program.
    pub max_nodes: u32,
    /// Bytes of open targets the search may hold at once.
    pub max_memory: u64,
    /// Ablation: depth first in proposal order, stopping at the first complete program
    /// (compared with `Lit(target)` still), instead of A*.
    pub first_complete: bool,
    /// The compression level: [`Level::Fast`] replaces the search by a fixed layout
    /// ([`fast`]); the other levels search with `budget`.
    pub level: Level,
    /// Watch and stop the search from another thread (none by default). Never changes
    /// the program found for a search that is not stopped.
    pub control: SearchControl,
}

impl SearchOptions {
    /// Whether the production prior can change the program this search returns: only
    /// when it may expand more than one state. With a budget of 1 the root alone is
    /// expanded, and the result (the exactly smallest finalist, the best record by
    /// rollout size) does not depend on the prior's order, so callers skip calibration.
    pub fn prior_matters(&self) -> bool {
        self.budget >= 2 && self.level != Level::Fast
    }
}

/// A compression level (`--level`): what a tensor's search may spend, as zstd's and
/// xz's levels trade speed for size.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Level {
    /// No search: each tensor gets the fixed field layout of its dtype ([`fast`]), coded
    /// in two passes over its words. Faster than ZipNN both ways, and as small.
    Fast,
    /// The search at budget 1: every root proposal sized, the smallest kept.
    #[default]
    Default,
    /// The search at budget [`Level::MAX_BUDGET`] with a calibrated production prior.
    Max,
}

impl Level {
    /// Every level, fastest first.
    pub const ALL: [Level; 3] = [Level::Fast, Level::Default, Level::Max];

    /// The expansion budget of [`Level::Max`].
    pub const MAX_BUDGET: u64 = 4;

    /// The level's name (`fast`, `default`, `max`), as `--level` takes it.
    pub fn name(self) -> &'static str {
        match self {
            Level::Fast => "fast",
            Level::Default => "default",
            Level::Max => "max",
        }
    }

    /// The level's number (1 to 3), as `--level` also takes it.
    pub fn number(self) -> u8 {
        match self {
            Level::Fast => 1,
            Level::Default => 2,
            Level::Max => 3,
        }
    }

    /// The level named `s` (a name or a number), or `None`.
    pub fn parse(s: &str) -> Option<Level> {
        Level::ALL
            .into_iter()
            .find(|l| s.eq_ignore_ascii_case(l.name()) || s == l.number().to_string())
    }

    /// The search budget the level uses (ignored by [`Level::Fast`]).
    pub fn budget(self) -> u64 {
        match self {
            Level::Fast => 0,
            Level::Default => 1,
            Level::Max => Level::MAX_BUDGET,
        }
    }
}

impl std::fmt::Display for Level {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Handles to follow and stop a running search from another thread (e.g. a UI). The
/// search reads `cancel` and adds to `expansions` once per expansion; when `cancel` is
/// set it stops as if the budget had run out and returns the best program found so far
/// (still exact, never larger than `Lit(target)`).
///
/// Two controls are equal when they share the same handles (or both have none), so
/// options with no control compare by their limits alone.
#[derive(Clone, Debug, Default)]
pub struct SearchControl {
    /// Set to stop the search at its next expansion.
    pub cancel: Option<Arc<AtomicBool>>,
    /// Incremented once per expansion (a progress counter; compare with the budget).
    pub expansions: Option<Arc<AtomicU64>>,
}

impl SearchControl {
    /// Whether the search was asked to stop.
    pub fn cancelled(&self) -> bool {
        self.cancel
            .as_ref()
            .is_some_and(|c| c.load(Ordering::Relaxed))
    }

    /// Counts one expansion.
    pub fn expanded(&self) {
        if let Some(n) = &self.expansions {
            n.fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl PartialEq for SearchControl {
    fn eq(&self, other: &Self) -> bool {
        fn same<T>(a: &Option<Arc<T>>, b: &Option<Arc<T>>) -> bool {
            match (a, b) {
                (None, None) => true,
                (Some(x), Some(y)) => Arc::ptr_eq(x, y),
                _ => false,
            }
        }
        same(&self.cancel, &other.cancel) && same(&self.expansions, &other.expansions)
    }
}

impl Eq for SearchControl {}

impl Default for SearchOptions {
    fn default() -> Self {
        SearchOptions {
            budget: 1,
            max_depth: 4,
            max_nodes: 64,
            max_memory: 512 << 20,
            first_complete: false,
            level: Level::Default,
            control: SearchControl::default(),
        }
    }
}

impl SearchOptions {
    /// Checks the limits a caller may have taken from a person (a form, a flag):
    /// `max_depth` in `1..=`[`crate::dsl::wire::MAX_DEPTH`] (deeper programs could not be
    /// read back) and `max_nodes` in `1..=`[`crate::dsl::wire::MAX_NODES`]. Any budget is
    /// valid (0 means `Lit(target)`).
    ///
    /// # Errors
    /// A lowercase sentence naming the limit, its value and the accepted range.
    pub fn validate(&self) -> Result<(), String> {
        let max_depth = crate::dsl::wire::MAX_DEPTH as u32;
        let max_nodes = crate::dsl::wire::MAX_NODES as u32;
        if !(1..=max_depth).contains(&self.max_depth) {
            return Err(format!(
                "depth {} is out of range: it must be 1 to {max_depth}",
                self.max_depth
            ));
        }
        if !(1..=max_nodes).contains(&self.max_nodes) {
            return Err(format!(
                "node limit {} is out of range: it must be 1 to {max_nodes}",
                self.max_nodes
            ));
        }
        Ok(())
    }
}

/// What the search saw while synthesizing one program.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SearchStats {
    /// Partial programs expanded.
    pub expansions: u64,
    /// Complete programs whose exact size was computed.
    pub candidates: u64,
    /// Proposals of the budget's last expansion not sized, because their children's
    /// order-0 entropy already put them above the best state found (they could not
    /// have changed the result).
    pub pruned: u64,
    /// Whether the budget ran out with open states left.
    pub budget_exhausted: bool,
    /// Whether the result is the literal fallback `Lit(target)`: the search found
    /// nothing smaller (or had no budget), or its program failed the writer's check
    /// ([`SearchStats::unrestored`]).
    pub literal_fallback: bool,
    /// Whether the writer stored a literal because the program the search found did
    /// not have the target's type or, checked, did not restore it (a defect, warned
    /// about); `compress --json` reports this as `literal_fallback`.
    pub unrestored: bool,
    /// Whether a proposal was skipped because open targets would exceed the memory limit
    /// ([`SearchOptions::max_memory`]), or the search stopped at its most open states
    /// ([`astar::MAX_OPEN_ITEMS`]).
    pub memory_limited: bool,
}

impl SearchStats {
    /// Adds the counts of `other` (the search of another region of the same tensor) and
    /// ors its flags.
    pub fn absorb(&mut self, other: &SearchStats) {
        self.expansions += other.expansions;
        self.candidates += other.candidates;
        self.pruned += other.pruned;
        self.budget_exhausted |= other.budget_exhausted;
        self.literal_fallback |= other.literal_fallback;
        self.unrestored |= other.unrestored;
        self.memory_limited |= other.memory_limited;
    }
}

/// A synthesized program and how it was found.
#[derive(Clone, Debug)]
pub struct Synthesis {
    /// The smallest program found; it executes to the target exactly.
    pub program: Node,
    /// Its serialized size in bytes.
    pub bytes: u64,
    /// Search statistics.
    pub stats: SearchStats,
}

/// Finds a small program whose output is exactly `target`, with uniform production
/// costs. `dtype` (the tensor's dtype, when the target is a whole tensor) lets the search
/// propose the float field layouts. The result is never larger than `Lit(target)`.
pub fn synthesize(target: &Words, dtype: Option<Dtype>, opts: &SearchOptions) -> Synthesis {
    astar::search(target, dtype, opts, &Prior::uniform())
}

/// Like [`synthesize`], ordering the search by a production prior.
pub fn synthesize_with_prior(
    target: &Words,
    dtype: Option<Dtype>,
    opts: &SearchOptions,
    prior: &Prior,
) -> Synthesis {
    astar::search(target, dtype, opts, prior)
}

/// [`synthesize_with_prior`] on a shared target, which the search holds without copying.
pub fn synthesize_shared(
    target: &std::sync::Arc<Words>,
    dtype: Option<Dtype>,
    opts: &SearchOptions,
    prior: &Prior,
) -> Synthesis {
    astar::search_shared(target, dtype, opts, prior)
}

/// [`synthesize_shared`] on a whole tensor of `rows` rows (its first dimension, when it
/// has two or more): the search may read it column by column too.
pub fn synthesize_matrix(
    target: &std::sync::Arc<Words>,
    dtype: Option<Dtype>,
    rows: Option<u64>,
    opts: &SearchOptions,
    prior: &Prior,
) -> Synthesis {
    astar::search_matrix(target, dtype, rows, opts, prior)
}

/// [`synthesize_with_prior`] on `target` cut into regions of `region_words` words, each
/// searched on its own with the whole budget and joined by one `Concat` (as `compress`
/// stores tensors of more than [`crate::archive::writer::REGION_WORDS`] words); `target`
/// searched whole when it has at most `region_words` words (as a matrix of `rows` rows
/// when given: [`synthesize_matrix`]). Regions are searched on the thread pool; the
/// result does not depend on the thread count.
pub fn synthesize_in_regions(
    target: &Words,
    dtype: Option<Dtype>,
    rows: Option<u64>,
    opts: &SearchOptions,
    prior: &Prior,
    region_words: usize,
) -> Synthesis {
    let n = target.len();
    if region_words == 0 || n <= region_words {
        let shared = std::sync::Arc::new(target.clone());
        return synthesize_matrix(&shared, dtype, rows, opts, prior);
    }
    use rayon::prelude::*;
    let (region_words, cols) = regions_of(n, rows, region_words);
    let parts: Vec<Synthesis> = (0..n.div_ceil(region_words))
        .into_par_iter()
        .map(|k| {
            let start = k * region_words;
            let region = target.slice(start, (start + region_words).min(n));
            let rows = cols.map(|c| (region.len() / c) as u64);
            synthesize_matrix(&std::sync::Arc::new(region), dtype, rows, opts, prior)
        })
        .collect();
    let mut stats = SearchStats::default();
    parts.iter().for_each(|p| stats.absorb(&p.stats));
    let program = Node::concat(parts.into_iter().map(|p| p.program).collect())
        .expect("regions share the width and are not empty");
    let bytes = crate::dsl::program_len(&program);
    Synthesis {
        program,
        bytes,
        stats,
    }
}

/// The region length in words for a tensor of `n` words of `rows` rows (when it has
/// two dimensions or more) cut near `region_words` words, and the matrix's columns when
/// every region holds whole rows. A matrix whose row fits a region is cut at whole rows
/// (a multiple of 128 rows when a region holds that many: the blocks of
/// [`dequant`]'s 128 x 128 scales then never straddle two regions), so every region is
/// a matrix of its own; anything else at `region_words` words.
pub fn regions_of(n: usize, rows: Option<u64>, region_words: usize) -> (usize, Option<usize>) {
    let cols = rows
        .filter(|&r| r >= 1 && (n as u64).is_multiple_of(r))
        .map(|r| n / r as usize)
        .filter(|&c| (1..=region_words).contains(&c));
    match cols {
        Some(c) => {
            let mut per = region_words / c;
            if per >= 128 {
                per -= per % 128;
            }
            (per * c, Some(c))
        }
        None => (region_words, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A target of two and a half regions is searched as three regions joined by one
    /// `Concat`, each region's program exactly what searching that region alone gives;
    /// the program runs to the target; a target of one region is searched whole.
    #[test]
    fn regions_are_searched_alone_and_joined_by_one_concat() {
        let target = Words::from_fn(16, 2_500, |i| {
            let x = (i as u64).wrapping_mul(2_654_435_761) % 97;
            0x3F00 + x * x % 61 + if i < 1_000 { 0 } else { 0x40 }
        });
        let opts = SearchOptions {
            budget: 6,
            ..SearchOptions::default()
        };
        let prior = Prior::uniform();
        let s = synthesize_in_regions(&target, Some(Dtype::BF16), None, &opts, &prior, 1_000);
        assert_eq!(s.program.op_name(), "concat");
        let kids = s.program.children();
        assert_eq!(kids.len(), 3);
        let mut expansions = 0;
        for (k, kid) in kids.iter().enumerate() {
            let region = target.slice(k * 1_000, ((k + 1) * 1_000).min(2_500));
            let alone = synthesize_with_prior(&region, Some(Dtype::BF16), &opts, &prior);
            assert_eq!(kid, &alone.program, "region {k}");
            expansions += alone.stats.expansions;
        }
        assert_eq!(s.stats.expansions, expansions);
        assert_eq!(s.bytes, crate::dsl::program_len(&s.program));
        assert_eq!(crate::dsl::execute(&s.program, 1 << 20).unwrap(), target);
        let whole = synthesize_in_regions(&target, Some(Dtype::BF16), None, &opts, &prior, 2_500);
        let direct = synthesize_with_prior(&target, Some(Dtype::BF16), &opts, &prior);
        assert_eq!(whole.program, direct.program);
    }
}
