//! The Archive and Sweep views' jobs: where the archive's bytes go, and a budget sweep.

use super::*;

impl App {
    /// `r` in the Archive view (and showing it the first time): analyses where the
    /// archive's bytes go on a worker ([`crate::job::why::analyse`]); `x` stops it.
    pub(super) fn start_analysis(&mut self) {
        if self.archive_view.running.is_some() {
            self.status = "the analysis is running (x cancels it)".into();
            return;
        }
        let Some(source) = self.source.clone() else {
            return;
        };
        self.archive_view.cancelled = false;
        let handle = self.worker.spawn(move |ctx| {
            let r = source.why(&|d, t, what| ctx.progress(d, t, what), &|| ctx.cancelled());
            Outcome::Analysed(r.map(|o| o.map(Box::new)))
        });
        self.archive_view.running = Some(handle);
    }

    /// `+`/`-` in the Sweep view: doubles or halves the largest budget.
    pub(super) fn sweep_limit(&mut self, up: bool) {
        let l = self.sweep.limit;
        self.sweep.limit = if up {
            l.saturating_mul(2).min(crate::tui::sweep::MAX_LIMIT)
        } else {
            (l / 2).max(1)
        };
    }

    /// `r` in the Sweep view: the selected tensor's record (or a sample of the
    /// archive's records) at budgets 1, 2, 4, ... up to the limit, on a worker, with the
    /// Search form's depth, nodes and prior.
    pub(super) fn start_sweep(&mut self) {
        if self.sweep.running.is_some() {
            self.status = "a sweep is running (x cancels it)".into();
            return;
        }
        let Some(source) = self.source.clone() else {
            return;
        };
        let (tensors, label) = if self.sweep.sample {
            let t = crate::tui::sweep::sample_of(source.as_ref());
            if t.is_empty() {
                self.status =
                    "no tensor to sample: every record is a copy, a reference or empty".into();
                return;
            }
            let names: Vec<String> = t.iter().map(|&i| self.row_name(i)).collect();
            (
                t,
                format!("a sample of {} records: {}", names.len(), names.join(", ")),
            )
        } else {
            let Some(t) = self.selected_tensor() else {
                self.status = "no tensor is selected (the filter matches none)".into();
                return;
            };
            if let Some(why) = self.unsearchable(t) {
                self.status = why;
                return;
            }
            (vec![t], self.row_name(t))
        };
        if let Err(e) = self.search.form.opts.validate() {
            self.status = format!("the search form: {e}");
            return;
        }
        let prior = match self.form_prior() {
            Ok(p) => p,
            Err(e) => {
                self.status = e;
                return;
            }
        };
        let opts = self.search.form.opts.clone();
        let limit = self.sweep.limit;
        let live = Arc::new(std::sync::Mutex::new(Vec::new()));
        self.sweep.live = live.clone();
        self.sweep.result = None;
        let handle = self.worker.spawn(move |ctx| {
            let request = crate::tui::sweep::SweepRequest {
                tensors,
                label,
                limit,
                opts,
                prior,
            };
            Outcome::Swept(crate::tui::sweep::run(source.as_ref(), request, ctx, &live))
        });
        self.sweep.running = Some(handle);
    }
}
