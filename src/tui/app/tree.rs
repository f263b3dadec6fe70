//! The program tree of the selected tensor: which nodes are expanded and shown, and the
//! inspection (decoded program, per-node bytes) it is drawn from.

use super::*;

impl App {
    /// Pre-order indices of the tree's visible nodes (children of collapsed nodes are
    /// hidden).
    pub fn visible_nodes(&self) -> Vec<usize> {
        let Some(Ok(ins)) = self.current() else {
            return Vec::new();
        };
        let mut out = Vec::new();
        let mut hidden_below: Option<usize> = None;
        for (i, n) in ins.nodes.iter().enumerate() {
            if let Some(d) = hidden_below {
                if n.depth > d {
                    continue;
                }
                hidden_below = None;
            }
            out.push(i);
            if !self.tree.expanded.get(i).copied().unwrap_or(false) && n.children > 0 {
                hidden_below = Some(n.depth);
            }
        }
        out
    }

    pub(super) fn tree_toggle(&mut self) {
        let c = self.tree.cursor;
        if let Some(e) = self.tree.expanded.get_mut(c) {
            *e = !*e;
        }
    }

    pub(super) fn tree_set(&mut self, expand: bool) {
        let c = self.tree.cursor;
        let (children, parent) = match self.current() {
            Some(Ok(ins)) => match ins.nodes.get(c) {
                Some(n) => (n.children, n.parent),
                None => return,
            },
            _ => return,
        };
        let open = self.tree.expanded.get(c).copied().unwrap_or(false);
        if expand {
            if children > 0 && !open {
                self.tree.expanded[c] = true;
            } else if children > 0 {
                self.tree.cursor = c + 1;
            }
        } else if children > 0 && open {
            self.tree.expanded[c] = false;
        } else if let Some(p) = parent {
            self.tree.cursor = p;
        }
    }

    /// Starts the analysis of the selected tensor if a view needs it and it is not
    /// cached or running.
    pub fn ensure_inspection(&mut self) {
        let needs = matches!(
            self.view,
            View::Tree | View::Text | View::Why | View::Plots | View::Search
        );
        let Some(t) = self.selected_tensor() else {
            return;
        };
        if !needs || self.inspection(t).is_some() {
            self.sync_tree(t);
            return;
        }
        if let Some((running, _)) = &self.inspecting {
            if *running == t {
                return;
            }
        }
        if let Some((_, h)) = self.inspecting.take() {
            h.cancel();
        }
        let Some(source) = self.source.clone() else {
            return;
        };
        let dtype = source.rows()[t].dtype;
        let group: Option<Vec<String>> = match source.record(t).map(|r| r.sharing) {
            Some(Sharing::Group { members, .. }) => Some(
                members
                    .iter()
                    .filter_map(|&m| source.rows().get(m).map(|r| r.name.clone()))
                    .collect(),
            ),
            _ => None,
        };
        let handle = self.worker.spawn(move |ctx| {
            let base = source.context(t);
            let r = source.program(t).and_then(|p| {
                crate::tui::inspect::inspect_record(
                    t,
                    dtype,
                    p,
                    base.as_ref(),
                    group.as_deref(),
                    &|| ctx.cancelled(),
                )
            });
            Outcome::Inspected(t, r.map(|o| o.map(Box::new)))
        });
        self.inspecting = Some((t, handle));
    }

    /// Resets the tree state when the selected tensor changed.
    pub(super) fn sync_tree(&mut self, t: usize) {
        if self.tree.tensor == t && !self.tree.expanded.is_empty() {
            return;
        }
        let expanded = match self.inspection(t) {
            Some(Ok(ins)) => ins.nodes.iter().map(|n| n.depth < 3).collect(),
            _ => return,
        };
        self.tree = TreeState {
            tensor: t,
            expanded,
            cursor: 0,
            offset: 0,
        };
    }
}
