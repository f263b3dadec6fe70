//! Bounded A* over partial programs (DESIGN §6; paper §3.3, Algorithm 1).
//!
//! A state is a partial program whose leaves may be holes. The queue orders states by
//! `g + h` (prior cost so far plus an admissible estimate of the cost of filling the
//! holes), then by their rollout size in bytes, then by creation order. The leftmost hole
//! of the best state is expanded with every proposal of [`super::decompose`]; complete
//! programs are ranked by exact serialized size and the search goes on after the first
//! one. The budget counts expansions. Every open state can be completed by putting `Lit`
//! in each hole (its *rollout*); the exact size of that completion is known from the
//! holes' literal sizes, so each rollout is compared with the incumbent too, and when the
//! budget runs out the best of them competes with the complete programs.
//!
//! Deterministic: no randomness, no dependence on threads or addresses.

use super::decompose::{propose, HoleInfo, ProdKind, Proposal, Shell};
use super::prior::{Context, Prior};
use super::{SearchOptions, SearchStats, Synthesis};
use crate::codec;
use crate::dsl::wire::{own_len, program_len, uleb_len};
use crate::dsl::{Lit, Node, Ty};
use crate::stats;
use crate::tensor::{bits_needed, container_bytes, Dtype, Words};
use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::sync::Arc;

/// Exact bytes of the node `Lit(words)` with the smallest codec: tag, length, body.
pub fn lit_node_len(words: &Words) -> u64 {
    let body = codec::all_sizes(words)
        .into_iter()
        .flatten()
        .min()
        .expect("raw always applies");
    1 + uleb_len(body) + body
}

/// Estimated bytes of the node `Lit(words)`: exact for raw words, bit packing and
/// Huffman (their sizes follow from the histogram), and for rANS the table plus the ideal
/// payload under its quantized model plus the final states, which is within a few bytes
/// of the encoder's output. Costs one histogram pass and no encoding, so the search can
/// size every hole it opens; the finalists are then sized exactly.
pub fn lit_node_estimate(words: &Words) -> u64 {
    let (width, n) = (words.width(), words.len());
    let hist = stats::histogram(words, codec::MAX_TABLE_SYMBOLS);
    let max = match &hist {
        Some(h) => h.last().map_or(0, |&(s, _)| s),
        None => words.max().unwrap_or(0),
    };
    let mut body = codec::raw::size(width, n).min(codec::bitpack::size_for(bits_needed(max), n));
    if let Some(h) = &hist {
        body = body.min(codec::huffman::Plan::new(h, width, n).size());
        let r = codec::rans::Plan::new(h, width, n);
        let rans = r.table_bytes() + (r.ideal_bits / 8.0).ceil() as u64 + RANS_STATE_BYTES;
        body = body.min(rans);
    }
    1 + uleb_len(body) + body
}

/// Bytes the rANS coder spends on flushing its interleaved states (estimate only).
const RANS_STATE_BYTES: u64 = 8;

struct Hole {
    target: Arc<Words>,
    depth: u32,
    dtype: Option<Dtype>,
    parent: Option<ProdKind>,
    lit_bytes: u64,
}

#[derive(Clone, Debug)]
enum PNode {
    /// An open hole (arena index).
    Hole(usize),
    /// A hole filled by `Lit` of its target.
    LitOf(usize),
    /// A complete leaf (`Const`).
    Done(Node),
    /// An operator and its children.
    Op(Shell, Vec<PNode>),
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

struct Search<'a> {
    opts: &'a SearchOptions,
    prior: &'a Prior,
    holes: Vec<Hole>,
    memory: u64,
    seq: u64,
    stats: SearchStats,
    /// The smallest programs seen so far (complete or rollout), by size, at most
    /// [`FINALISTS`]; sizes are exact for small holes and estimated for large ones.
    finalists: Vec<(u64, State)>,
}

/// How many of the smallest candidates are sized exactly at the end.
const FINALISTS: usize = 3;

/// Holes of at most this many words are sized exactly; larger ones are estimated.
const EXACT_WORDS: usize = 4096;

fn words_bytes(w: &Words) -> u64 {
    (w.len() * container_bytes(w.width())) as u64
}

impl Search<'_> {
    /// Adds a hole. `made` holds the targets created in the current expansion: an equal
    /// target (the sign field of several field splits, say) shares its words and size.
    fn add_hole(
        &mut self,
        target: Words,
        depth: u32,
        dtype: Option<Dtype>,
        parent: Option<ProdKind>,
        made: &mut Vec<(Arc<Words>, u64)>,
    ) -> usize {
        let (target, lit_bytes) = match made.iter().find(|(w, _)| **w == target) {
            Some((w, l)) => (Arc::clone(w), *l),
            None => {
                self.memory += words_bytes(&target);
                let lit_bytes = if target.len() <= EXACT_WORDS {
                    lit_node_len(&target)
                } else {
                    lit_node_estimate(&target)
                };
                let w = Arc::new(target);
                made.push((Arc::clone(&w), lit_bytes));
                (w, lit_bytes)
            }
        };
        self.holes.push(Hole {
            target,
            depth,
            dtype,
            parent,
            lit_bytes,
        });
        self.holes.len() - 1
    }

    fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    fn offer(&mut self, s: &State) {
        let full = self.finalists.len() >= FINALISTS;
        if full && self.finalists.last().is_some_and(|(b, _)| s.rollout >= *b) {
            return;
        }
        // Keep the list sorted by size; equal sizes keep their creation order.
        let at = self.finalists.partition_point(|(b, _)| *b <= s.rollout);
        self.finalists.insert(at, (s.rollout, s.clone()));
        self.finalists.truncate(FINALISTS);
    }

    /// Expands the leftmost hole of `s`, pushing open children and offering every child.
    fn expand(&mut self, s: &State, queue: &mut BinaryHeap<State>) {
        let hid = s.holes[0];
        let (depth, width, dtype, parent, lit_bytes) = {
            let h = &self.holes[hid];
            (h.depth, h.target.width(), h.dtype, h.parent, h.lit_bytes)
        };
        let ctx = Context {
            width,
            depth,
            parent,
        };
        let rest = &s.holes[1..];
        let rest_rollout = s.rollout - lit_bytes;
        let rest_h = s.h - self.prior.min_cost(width);

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
        self.push_or_finish(lit_state, queue);

        let may_split = depth < self.opts.max_depth && s.nodes + 2 <= self.opts.max_nodes;
        let mut made = Vec::new();
        let proposals = propose(&self.holes[hid].target, HoleInfo { dtype, may_split });
        for p in proposals {
            match p {
                Proposal::Leaf(kind, node) => {
                    let bytes = program_len(&node);
                    let st = State {
                        tree: replace_hole(&s.tree, hid, PNode::Done(node)),
                        holes: rest.to_vec(),
                        g: s.g + self.prior.cost(&ctx, kind),
                        h: rest_h,
                        fixed: s.fixed + bytes,
                        rollout: rest_rollout + bytes,
                        nodes: s.nodes,
                        seq: self.next_seq(),
                    };
                    self.push_or_finish(st, queue);
                }
                Proposal::Split(kind, shell, targets) => {
                    let k = targets.len() as u32;
                    if s.nodes + k > self.opts.max_nodes {
                        continue;
                    }
                    let need: u64 = targets.iter().map(words_bytes).sum();
                    if self.memory + need > self.opts.max_memory {
                        self.stats.memory_limited = true;
                        continue;
                    }
                    let own = shell_own_len(&shell, &targets);
                    let mut ids = Vec::with_capacity(targets.len());
                    let mut h = rest_h;
                    let mut rollout = rest_rollout + own;
                    for t in targets {
                        h += self.prior.min_cost(t.width());
                        let id = self.add_hole(t, depth + 1, None, Some(kind), &mut made);
                        rollout += self.holes[id].lit_bytes;
                        ids.push(id);
                    }
                    let sub = PNode::Op(shell, ids.iter().map(|&i| PNode::Hole(i)).collect());
                    let mut holes = ids;
                    holes.extend_from_slice(rest);
                    let st = State {
                        tree: replace_hole(&s.tree, hid, sub),
                        holes,
                        g: s.g + self.prior.cost(&ctx, kind),
                        h,
                        fixed: s.fixed + own,
                        rollout,
                        nodes: s.nodes + k,
                        seq: self.next_seq(),
                    };
                    self.push_or_finish(st, queue);
                }
            }
        }
    }

    fn push_or_finish(&mut self, st: State, queue: &mut BinaryHeap<State>) {
        self.stats.candidates += 1;
        self.offer(&st);
        if !st.holes.is_empty() {
            queue.push(st);
        }
    }

    fn materialize(&self, p: &PNode) -> Node {
        match p {
            PNode::Hole(i) | PNode::LitOf(i) => Node::lit(&self.holes[*i].target),
            PNode::Done(n) => n.clone(),
            PNode::Op(shell, kids) => shell
                .build(kids.iter().map(|k| self.materialize(k)).collect())
                .expect("decompositions are well typed"),
        }
    }
}

/// The node's own bytes for an operator over children of the given targets.
fn shell_own_len(shell: &Shell, targets: &[Words]) -> u64 {
    let placeholders = targets
        .iter()
        .map(|t| {
            Node::lit_encoded(
                Ty::new(t.width(), t.len() as u64),
                Lit {
                    codec: codec::CodecId::Raw,
                    body: Vec::new(),
                },
            )
            .expect("targets have valid widths")
        })
        .collect();
    let node = shell
        .build(placeholders)
        .expect("decompositions are well typed");
    own_len(&node)
}

/// `tree` with the hole `id` replaced by `with`.
fn replace_hole(tree: &PNode, id: usize, with: PNode) -> PNode {
    fn go(p: &PNode, id: usize, with: &mut Option<PNode>) -> PNode {
        match p {
            PNode::Hole(i) if *i == id => with.take().expect("hole appears once"),
            PNode::Op(shell, kids) => PNode::Op(
                shell.clone(),
                kids.iter().map(|k| go(k, id, with)).collect(),
            ),
            other => other.clone(),
        }
    }
    go(tree, id, &mut Some(with))
}

/// Runs the bounded search (see the module doc) with the given prior.
pub fn search(
    target: &Words,
    dtype: Option<Dtype>,
    opts: &SearchOptions,
    prior: &Prior,
) -> Synthesis {
    let mut stats = SearchStats::default();
    if opts.budget == 0 || target.is_empty() {
        let program = Node::lit(target);
        let bytes = program_len(&program);
        stats.literal_fallback = true;
        return Synthesis {
            program,
            bytes,
            stats,
        };
    }
    let root_state = State {
        tree: PNode::Hole(0),
        holes: vec![0],
        g: 0.0,
        h: prior.min_cost(target.width()),
        fixed: 0,
        rollout: 0,
        nodes: 1,
        seq: 0,
    };
    let mut search = Search {
        opts,
        prior,
        holes: Vec::new(),
        memory: 0,
        seq: 0,
        stats,
        finalists: Vec::new(),
    };
    search.add_hole(target.clone(), 1, dtype, None, &mut Vec::new());
    let mut root = root_state;
    root.rollout = search.holes[0].lit_bytes;
    search.offer(&root);
    let mut queue = BinaryHeap::new();
    queue.push(root);
    while let Some(s) = queue.pop() {
        if search.stats.expansions >= opts.budget {
            search.stats.budget_exhausted = true;
            break;
        }
        search.stats.expansions += 1;
        search.expand(&s, &mut queue);
    }
    // The finalists, sized exactly; the smallest wins, ties to the earlier finalist.
    let mut winner: Option<(u64, Node, bool)> = None;
    for (_, st) in &search.finalists {
        let program = search.materialize(&st.tree);
        let bytes = program_len(&program);
        if winner.as_ref().is_none_or(|(b, _, _)| bytes < *b) {
            let fallback = matches!(st.tree, PNode::Hole(0) | PNode::LitOf(0));
            winner = Some((bytes, program, fallback));
        }
    }
    let (bytes, program, fallback) = winner.expect("the root state is always a finalist");
    let mut stats = search.stats;
    stats.literal_fallback = fallback;
    Synthesis {
        program,
        bytes,
        stats,
    }
}
