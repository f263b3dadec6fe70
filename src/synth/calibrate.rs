//! Calibration of the production prior (docs/design.md §6; paper Eq. 9-10).
//!
//! A deterministic sample of a checkpoint's tensors, stratified by dtype and size, is
//! searched with uniform costs; every production of every winning program is counted in
//! its context ([`Prior::observe`]). The result depends only on the tensors and the
//! options: the tensors are searched in parallel but counted in a fixed order, so it is
//! the same for any thread count.

use super::astar;
use super::decompose::ProdKind;
use super::prior::{Context, Features, Prior};
use super::SearchOptions;
use crate::dsl::{execute, Node, Op};
use crate::tensor::{Dtype, Words};
use rayon::prelude::*;
use std::collections::BTreeMap;

/// How much of a checkpoint calibration looks at. Defaults are the paper's main run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CalibrateOptions {
    /// Most tensors searched.
    pub max_tensors: usize,
    /// Expansion budget per tensor.
    pub expansions: u64,
    /// Most elements (words) of one tensor searched: a longer tensor contributes its
    /// first `max_elements` words.
    pub max_elements: usize,
}

impl Default for CalibrateOptions {
    fn default() -> Self {
        CalibrateOptions {
            max_tensors: 4,
            expansions: 6,
            max_elements: 1 << 20,
        }
    }
}

/// One tensor offered to calibration.
#[derive(Clone, Copy, Debug)]
pub struct Tensor<'a> {
    /// Name (orders ties).
    pub name: &'a str,
    /// Dtype.
    pub dtype: Dtype,
    /// Number of words.
    pub words: usize,
}

/// Indices of the tensors calibration searches: tensors are grouped by (dtype, size
/// class = `floor(log2(words)) / 4`); groups are taken largest total first, and from
/// each group its largest tensor (ties by name), round robin, up to `max_tensors`.
pub fn pick(tensors: &[Tensor], max_tensors: usize) -> Vec<usize> {
    let mut groups: BTreeMap<(u8, u32), Vec<usize>> = BTreeMap::new();
    for (i, t) in tensors.iter().enumerate() {
        if t.words < 2 {
            continue;
        }
        let class = (usize::BITS - 1 - t.words.leading_zeros()) / 4;
        groups.entry((t.dtype.code(), class)).or_default().push(i);
    }
    let mut groups: Vec<Vec<usize>> = groups.into_values().collect();
    for g in &mut groups {
        g.sort_by(|&a, &b| {
            tensors[b]
                .words
                .cmp(&tensors[a].words)
                .then(tensors[a].name.cmp(tensors[b].name))
        });
    }
    let total = |g: &Vec<usize>| g.iter().map(|&i| tensors[i].words).sum::<usize>();
    groups.sort_by_key(|g| std::cmp::Reverse(total(g)));
    let mut out = Vec::new();
    let mut round = 0;
    while out.len() < max_tensors {
        let mut any = false;
        for g in &groups {
            if let Some(&i) = g.get(round) {
                any = true;
                if out.len() < max_tensors {
                    out.push(i);
                }
            }
        }
        if !any {
            break;
        }
        round += 1;
    }
    out
}

/// Learns a prior from `tensors` (see the module doc). `load(i, n)` returns the first
/// `n` words of tensor `i` (`n` is at most its length).
pub fn calibrate(
    tensors: &[Tensor],
    load: impl Fn(usize, usize) -> Words + Sync,
    opts: &CalibrateOptions,
    source: &str,
) -> Prior {
    let picked = pick(tensors, opts.max_tensors);
    let search = SearchOptions {
        budget: opts.expansions,
        ..SearchOptions::default()
    };
    let uniform = Prior::uniform();
    let found: Vec<Vec<(Context, ProdKind)>> = picked
        .par_iter()
        .map(|&i| {
            let t = tensors[i];
            let words = load(i, t.words.min(opts.max_elements));
            astar::observations(words, Some(t.dtype), &search, &uniform)
        })
        .collect();
    let mut prior = Prior::uniform();
    let names: Vec<&str> = picked.iter().map(|&i| tensors[i].name).collect();
    prior.source = match names.len() {
        // Nothing observed: the counts stay uniform, and the source says so.
        0 => format!("calibrated on {source}: no tensor of two or more words, so uniform"),
        k => format!(
            "calibrated on {source}: {k} tensor{} ({}), {} expansions each, at most {} elements",
            if k == 1 { "" } else { "s" },
            names.join(", "),
            opts.expansions,
            opts.max_elements
        ),
    };
    for obs in found {
        for (ctx, prod) in obs {
            prior.observe(&ctx, prod);
        }
    }
    prior
}

/// The (context, production) pairs of a winning program, root first.
pub fn observe_program(node: &Node, ctx: Context, out: &mut Vec<(Context, ProdKind)>) {
    let kind = ProdKind::of(node);
    out.push((ctx, kind));
    if matches!(node.op(), Op::Lit(_) | Op::Const(_)) {
        return;
    }
    for (i, child) in node.children().iter().enumerate() {
        let Ok(words) = execute(child, u64::MAX) else {
            continue;
        };
        let cctx = Context {
            width: words.width(),
            depth: ctx.depth + 1,
            parent: Some(kind),
            pos: i as u32,
            dtype: None,
            feat: Features::of(&words),
        };
        observe_program(child, cctx, out);
    }
}
