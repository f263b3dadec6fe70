//! Production prior (DESIGN §6; paper Eq. 9-10): the cost `-log2 q` of applying a
//! production in a context, used to order the search. The prior never changes legality,
//! sizes or the final comparison; the archive never stores it.

use super::decompose::ProdKind;

/// Where a production is applied: what the prior conditions on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Context {
    /// Width in bits of the hole.
    pub width: u32,
    /// Depth of the hole (root = 1).
    pub depth: u32,
    /// The parent's production, `None` at the root.
    pub parent: Option<ProdKind>,
}

/// A production prior. [`Prior::uniform`] charges every production the same cost.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Prior {
    _private: (),
}

impl Prior {
    /// Every production costs 1 bit.
    pub fn uniform() -> Prior {
        Prior::default()
    }

    /// Cost in bits (`-log2 q`) of applying `prod` in `ctx`.
    pub fn cost(&self, ctx: &Context, prod: ProdKind) -> f64 {
        let _ = (ctx, prod);
        1.0
    }

    /// A lower bound on the cost of filling one hole of width `width` (the admissible
    /// heuristic of a relaxed grammar: every hole needs at least one production).
    pub fn min_cost(&self, width: u32) -> f64 {
        let _ = width;
        1.0
    }
}
