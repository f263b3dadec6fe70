//! The Prior view's state: the production prior the search uses (docs/design.md §6.5) as
//! a table of production weights by context, edited in place and saved as
//! `brevis calibrate` writes it.

use crate::synth::decompose::{ProdKind, ALL_PRODS};
use crate::synth::Prior;

/// The prior being shown and edited.
#[derive(Debug, Default)]
pub struct PriorView {
    /// The prior (`None` until loaded).
    pub prior: Option<Prior>,
    /// Where it came from: `calibrated on ...`, `uniform`, `file PATH`.
    pub label: String,
    /// Its context keys, in the prior's order (the empty key, all contexts, first).
    pub keys: Vec<String>,
    /// The selected context.
    pub ctx: usize,
    /// The selected production (an index into [`ALL_PRODS`]).
    pub prod: usize,
    /// While a count is edited: its value before (Esc restores it).
    pub editing: Option<u64>,
    /// The calibration running.
    pub loading: Option<super::worker::JobHandle>,
    /// Whether it was edited here (the search then uses it: prior "edited").
    pub edited: bool,
    /// Why it could not be loaded or saved.
    pub error: Option<String>,
    /// What the last save did.
    pub note: Option<String>,
}

/// One row of the table: a production in the selected context.
#[derive(Clone, Debug, PartialEq)]
pub struct ProdRow {
    /// The production.
    pub prod: ProdKind,
    /// Its count in the context.
    pub count: u64,
    /// `q(p | c)` with the prior's smoothing.
    pub q: f64,
    /// Its cost in bits, `-log2 q`.
    pub cost: f64,
}

impl PriorView {
    /// Shows `prior`, from `label`.
    pub fn set(&mut self, prior: Prior, label: String) {
        self.keys = prior.counts.keys().cloned().collect();
        self.ctx = self.ctx.min(self.keys.len().saturating_sub(1));
        self.prior = Some(prior);
        self.label = label;
        self.edited = false;
        self.editing = None;
        self.error = None;
    }

    /// The selected context's key.
    pub fn key(&self) -> Option<&str> {
        self.keys.get(self.ctx).map(String::as_str)
    }

    /// The table of the selected context: every production with its count, probability
    /// and cost (Eq. 9-10: `(count + alpha) / (total + alpha * K)`).
    pub fn rows(&self) -> Vec<ProdRow> {
        let Some(p) = &self.prior else {
            return Vec::new();
        };
        let counts = self.key().and_then(|k| p.counts.get(k));
        let total: u64 = counts.map_or(0, |c| c.values().sum());
        let k = ALL_PRODS.len() as f64;
        ALL_PRODS
            .iter()
            .map(|&prod| {
                let count = counts
                    .and_then(|c| c.get(prod.name()))
                    .copied()
                    .unwrap_or(0);
                let q = (count as f64 + p.alpha) / (total as f64 + p.alpha * k);
                ProdRow {
                    prod,
                    count,
                    q,
                    cost: -q.log2(),
                }
            })
            .collect()
    }

    /// The selected count.
    pub fn count(&self) -> u64 {
        self.rows().get(self.prod).map_or(0, |r| r.count)
    }

    /// Sets the selected production's count in the selected context (0 removes it).
    pub fn set_count(&mut self, v: u64) {
        let (Some(key), Some(prod)) = (self.key().map(str::to_string), ALL_PRODS.get(self.prod))
        else {
            return;
        };
        let Some(p) = &mut self.prior else {
            return;
        };
        let c = p.counts.entry(key).or_default();
        if v == 0 {
            c.remove(prod.name());
        } else {
            c.insert(prod.name().to_string(), v);
        }
        if !self.edited {
            p.source = format!("edited in brevis-tui from: {}", p.source);
        }
        self.edited = true;
    }
}
