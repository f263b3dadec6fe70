//! The Prior view: loading, calibrating and editing the production prior.

use super::*;

impl App {
    /// Loads the prior the Search form names into the Prior view (calibrating on a
    /// worker for the calibrated one).
    pub(super) fn load_prior(&mut self) {
        match self.search.form.prior {
            PriorMode::Calibrated => self.start_calibration(),
            PriorMode::Uniform => self.prior_view.set(Prior::uniform(), "uniform".into()),
            PriorMode::Edited => {}
            PriorMode::File => match self.form_prior() {
                Ok(PriorRequest::Given(p, name, _)) => self.prior_view.set((*p).clone(), name),
                Ok(_) => {}
                Err(e) => self.prior_view.error = Some(e),
            },
        }
    }

    /// `c` in the Prior view: learns a prior from the archive's tensors, as `compress`
    /// does, to show and edit.
    pub(super) fn start_calibration(&mut self) {
        if self.prior_view.loading.is_some() {
            return;
        }
        let Some(source) = self.source.clone() else {
            return;
        };
        self.prior_view.error = None;
        let handle = self.worker.spawn(move |ctx| {
            ctx.progress(0, 0, "calibrating");
            Outcome::Calibrated(crate::tui::searching::calibrate_on(
                source.as_ref(),
                &|| ctx.cancelled(),
            ))
        });
        self.prior_view.loading = Some(handle);
    }

    /// `+`/`-` in the Prior view: the selected count up or down by one.
    pub(super) fn prior_step(&mut self, up: bool) {
        if self.prior_view.prior.is_none() || self.prior_view.keys.is_empty() {
            return;
        }
        let v = self.prior_view.count();
        self.prior_view.set_count(if up {
            v.saturating_add(1)
        } else {
            v.saturating_sub(1)
        });
        self.prior_edited();
    }

    /// After an edit: the search uses the edited prior.
    pub(super) fn prior_edited(&mut self) {
        if self.prior_view.edited {
            self.search.form.prior = PriorMode::Edited;
        }
    }
}
