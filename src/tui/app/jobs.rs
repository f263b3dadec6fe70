//! Background jobs: their messages pumped into the state, and each outcome applied.

use super::*;

impl App {
    /// Applies every waiting worker message. Returns whether anything changed.
    pub fn pump(&mut self) -> bool {
        self.tick = self.tick.wrapping_add(1);
        let mut changed = false;
        while let Some(msg) = self.worker.try_recv() {
            self.handle(msg);
            changed = true;
        }
        changed
    }

    /// Waits until no job is running or `timeout` passes (for tests and scripts).
    /// Returns whether every job finished.
    pub fn settle(&mut self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while self.busy() {
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            if let Some(m) = self.worker.recv_timeout(deadline - now) {
                self.handle(m);
            }
        }
        self.ensure_inspection();
        true
    }

    pub(super) fn job_mut(&mut self, id: u64) -> Option<&mut JobHandle> {
        if let Some(l) = self.loading.as_mut().filter(|l| l.job.id == id) {
            return Some(&mut l.job);
        }
        if let Some((_, h)) = self.inspecting.as_mut().filter(|(_, h)| h.id == id) {
            return Some(h);
        }
        if let Some((_, h)) = self.search.running.as_mut().filter(|(_, h)| h.id == id) {
            return Some(h);
        }
        if let Some(h) = self.search.writing.as_mut().filter(|h| h.id == id) {
            return Some(h);
        }
        for h in [
            &mut self.archive_view.running,
            &mut self.sweep.running,
            &mut self.prior_view.loading,
            &mut self.play.running,
        ] {
            if let Some(h) = h.as_mut().filter(|h| h.id == id) {
                return Some(h);
            }
        }
        self.verify.running.as_mut().filter(|h| h.id == id)
    }

    pub(super) fn handle(&mut self, msg: Msg) {
        match msg {
            Msg::Progress {
                id,
                done,
                total,
                what,
            } => {
                if let Some(h) = self.job_mut(id) {
                    h.progress = (done, total, what);
                }
            }
            Msg::Done { id, outcome } => self.finish(id, outcome),
        }
    }

    pub(super) fn finish(&mut self, id: u64, outcome: Outcome) {
        match outcome {
            Outcome::Failed(what) => {
                if self.loading.as_ref().is_some_and(|l| l.job.id == id) {
                    self.loading = None;
                    self.load_error = Some(what.clone());
                    self.quit = true;
                }
                if let Some((t, _)) = self.inspecting.take_if(|(_, h)| h.id == id) {
                    self.cache(t, Err(what.clone()));
                }
                if self.search.running.take_if(|(_, h)| h.id == id).is_some() {
                    self.search.stopping = false;
                    self.search.result = Some(Err(what.clone()));
                }
                if self.search.writing.take_if(|h| h.id == id).is_some() {
                    self.search.written = Some(Err(what.clone()));
                }
                if self.verify.running.take_if(|h| h.id == id).is_some() {
                    self.verify.result = Some(Err(what.clone()));
                }
                if self.archive_view.running.take_if(|h| h.id == id).is_some() {
                    self.archive_view.report = Some(Err(what.clone()));
                }
                if self.sweep.running.take_if(|h| h.id == id).is_some() {
                    self.sweep.result = Some(Err(what.clone()));
                }
                if self.prior_view.loading.take_if(|h| h.id == id).is_some() {
                    self.prior_view.error = Some(what.clone());
                }
                if self.play.running.take_if(|h| h.id == id).is_some() {
                    self.play.result = Some(Err(what.clone()));
                }
                self.status = what;
            }
            Outcome::Analysed(r) => {
                if self.archive_view.running.take_if(|h| h.id == id).is_some() {
                    match r {
                        Ok(Some(rep)) => {
                            self.archive_view.report = Some(Ok(Arc::from(rep)));
                            self.archive_view.selected = 0;
                        }
                        Ok(None) => self.archive_view.cancelled = true,
                        Err(e) => self.archive_view.report = Some(Err(e)),
                    }
                }
            }
            Outcome::Swept(r) => {
                if self.sweep.running.take_if(|h| h.id == id).is_some() {
                    if self.view != View::Sweep {
                        self.status = "the budget sweep finished: the Sweep view shows it".into();
                    }
                    self.sweep.result = Some(r);
                }
            }
            Outcome::Calibrated(r) => {
                if self.prior_view.loading.take_if(|h| h.id == id).is_some() {
                    match r {
                        Ok(p) => {
                            let label = p.source.clone();
                            self.prior_view.set(p, label);
                            if self.search.form.prior == PriorMode::Edited {
                                self.search.form.prior = PriorMode::Calibrated;
                            }
                        }
                        Err(e) => self.prior_view.error = Some(e),
                    }
                }
            }
            Outcome::Played(r) => {
                if self.play.running.take_if(|h| h.id == id).is_some() {
                    self.play.result_scroll = 0;
                    self.play.result = Some(r);
                }
            }
            Outcome::Opened(r) => {
                if self.loading.as_ref().is_some_and(|l| l.job.id == id) {
                    let l = self.loading.take();
                    match r {
                        Ok(s) => {
                            if let Some(l) = l.as_ref().filter(|l| l.too_late) {
                                self.status = format!(
                                    "too late to cancel: the archive was already written to {}",
                                    crate::tui::escape_name(&l.output)
                                );
                            } else if let Some(l) = l {
                                let n = s.rows().len();
                                self.status = format!(
                                    "compressed {} ({} tensor{}) into {} in {:.1} s",
                                    crate::tui::escape_name(&l.input),
                                    thousands(n as u64),
                                    if n == 1 { "" } else { "s" },
                                    crate::tui::escape_name(&l.output),
                                    l.job.elapsed().as_secs_f64()
                                );
                            }
                            self.set_source(s);
                        }
                        Err(e) => {
                            self.load_error = Some(e);
                            self.quit = true;
                        }
                    }
                }
            }
            Outcome::Inspected(t, r) => {
                if self.inspecting.as_ref().is_some_and(|(_, h)| h.id == id) {
                    self.inspecting = None;
                    match r {
                        Ok(Some(ins)) => self.cache(t, Ok(Arc::from(ins))),
                        Ok(None) => {}
                        Err(e) => self.cache(t, Err(e)),
                    }
                    self.ensure_inspection();
                }
            }
            Outcome::Searched(r) => {
                if self
                    .search
                    .running
                    .as_ref()
                    .is_some_and(|(_, h)| h.id == id)
                {
                    self.search.running = None;
                    let stopped = std::mem::take(&mut self.search.stopping);
                    self.search.result = Some(match r {
                        // Stopped before the search began (while calibrating the prior
                        // or decoding the tensor): nothing was found.
                        Err(e) if stopped && e == "cancelled" => {
                            Err("cancelled before the search began: nothing found".into())
                        }
                        r => r,
                    });
                    if let Some(Ok(r)) = &self.search.result {
                        let r = r.clone();
                        self.keep_result(&r);
                    }
                    if let Some(t) = self
                        .search
                        .tensor
                        .filter(|&t| Some(t) != self.selected_tensor())
                    {
                        let name = self
                            .rows()
                            .get(t)
                            .map(|r| crate::tui::escape_name(&r.name).into_owned())
                            .unwrap_or_default();
                        self.status =
                            format!("the search on {name} finished: select it to see the result");
                    }
                }
            }
            Outcome::Written(r) => {
                if self.search.writing.as_ref().is_some_and(|h| h.id == id) {
                    self.search.writing = None;
                    self.search.written = Some(match r {
                        Ok((w, reopened)) => {
                            if let Some(s) = reopened {
                                // The open archive was replaced: show the new one, whose
                                // analysis and programs are new.
                                self.inspections.clear();
                                self.archive_view = ArchiveView::default();
                                self.set_source(s);
                            }
                            self.status = format!(
                                "wrote {}: {} change{}",
                                w.path.display(),
                                w.changes,
                                if w.changes == 1 { "" } else { "s" }
                            );
                            self.written_paths.push(w.path.clone());
                            self.pending.clear();
                            self.refresh_pending();
                            Ok(w)
                        }
                        Err(e) => Err(e),
                    });
                }
            }
            Outcome::Verified(r) => {
                if self.verify.running.as_ref().is_some_and(|h| h.id == id) {
                    self.verify.running = None;
                    // The Verify view shows the verdict itself; elsewhere it goes to
                    // the status line.
                    self.status = match &r {
                        Ok(v) if self.view != View::Verify => v.verdict(),
                        _ => String::new(),
                    };
                    self.verify.result = Some(r);
                }
            }
        }
    }

    pub(super) fn cache(&mut self, t: usize, r: Result<Arc<Inspection>, String>) {
        self.inspections.retain(|(i, _)| *i != t);
        self.inspections.push_back((t, r));
        while self.inspections.len() > CACHE {
            self.inspections.pop_front();
        }
    }
}
