//! The Search view: its form (budget, limits, prior) and re-running the search on the
//! selected tensor in the background, its result kept as a pending change.

use super::*;

impl App {
    /// Applies `f` to the selected limit. Values are kept as typed (within what fits the
    /// field, [`MAX_BUDGET`] for the budget); a value out of the library's range, or one
    /// clamped, is flagged at once in [`SearchState::form_note`] (and `r` refuses an out
    /// of range one).
    pub(super) fn edit_field(&mut self, f: impl Fn(u64) -> u64) {
        let o = &mut self.search.form.opts;
        let mut clamped = None;
        match self.search.field {
            Field::Budget => {
                let v = f(o.budget);
                if v > MAX_BUDGET {
                    clamped = Some(format!(
                        "budget clamped to {} expansions, the most the form takes",
                        crate::tui::inspect::thousands(MAX_BUDGET)
                    ));
                }
                o.budget = v.min(MAX_BUDGET);
            }
            Field::Depth => o.max_depth = f(u64::from(o.max_depth)).min(9_999) as u32,
            Field::Nodes => o.max_nodes = f(u64::from(o.max_nodes)).min(9_999_999) as u32,
            Field::Prior | Field::PriorFile => {}
        }
        self.search.form_error = None;
        self.search.form_note = clamped.or_else(|| self.search.form.opts.validate().err());
    }

    pub(super) fn search_edit(&mut self) {
        if self.search.editing.is_none() {
            self.search.editing = Some(self.search.form.clone());
        }
    }

    pub(super) fn search_char(&mut self, c: char) {
        match (self.search.field, c) {
            (Field::PriorFile, c) => {
                textfield::insert(
                    &mut self.search.form.prior_path,
                    &mut self.search.prior_cursor,
                    c,
                );
                self.search.form.prior = PriorMode::File;
                self.search.form_error = None;
            }
            (_, '+' | '=' | ' ') => self.search_step(true),
            (_, '-') => self.search_step(false),
            (Field::Prior, 'c') => self.search.form.prior = PriorMode::Calibrated,
            (Field::Prior, 'u') => self.search.form.prior = PriorMode::Uniform,
            (Field::Prior, 'f') => self.search.form.prior = PriorMode::File,
            (Field::Prior, 'e') if self.prior_view.edited => {
                self.search.form.prior = PriorMode::Edited
            }
            (Field::Prior, _) => {}
            (_, d @ '0'..='9') => {
                let d = u64::from(d as u8 - b'0');
                self.edit_field(|v| v.saturating_mul(10).saturating_add(d));
            }
            _ => {}
        }
    }

    pub(super) fn search_step(&mut self, up: bool) {
        match self.search.field {
            Field::Prior => {
                let mut all = PriorMode::ALL.to_vec();
                if self.prior_view.edited {
                    all.push(PriorMode::Edited);
                }
                let i = all
                    .iter()
                    .position(|&m| m == self.search.form.prior)
                    .unwrap_or(0);
                let k = (if up { i + 1 } else { i + all.len() - 1 }) % all.len();
                self.search.form.prior = all[k];
                self.search.form_error = None;
            }
            Field::PriorFile => {}
            _ if up => self.edit_field(|v| v.saturating_mul(2).max(1)),
            _ => self.edit_field(|v| v / 2),
        }
    }

    /// The prior the form asks for, loaded now so that a bad file is refused in the form.
    pub(super) fn form_prior(&self) -> Result<PriorRequest, String> {
        match self.search.form.prior {
            PriorMode::Uniform => Ok(PriorRequest::Uniform),
            PriorMode::Calibrated => Ok(PriorRequest::Calibrate),
            PriorMode::Edited => match &self.prior_view.prior {
                Some(p) => Ok(PriorRequest::Given(
                    Arc::new(p.clone()),
                    "edited in the Prior view".to_string(),
                    PriorKind::Given,
                )),
                None => Err("the edited prior is gone: choose another (p)".into()),
            },
            PriorMode::File => {
                let path = self.search.form.prior_path.trim();
                if path.is_empty() {
                    return Err(
                        "prior file: type its path (f), or choose uniform or calibrated (p)".into(),
                    );
                }
                let prior = crate::synth::Prior::read_file(std::path::Path::new(path)).map_err(
                    |e| match e {
                        crate::synth::prior::ReadPriorError::Io(e) => format!("prior file {e}"),
                        e => format!("prior file {path}: {e}"),
                    },
                )?;
                Ok(PriorRequest::Given(
                    Arc::new(prior),
                    format!("file {path}"),
                    PriorKind::Given,
                ))
            }
        }
    }

    /// Why tensor `t` cannot be searched (a reference, a copy, an empty tensor), or
    /// `None` when it can.
    pub(super) fn unsearchable(&self, t: usize) -> Option<String> {
        let source = self.source.as_ref()?;
        match source.record(t).map(|r| r.sharing) {
            Some(Sharing::Reference { op, role, .. }) => Some(format!(
                "this tensor is coded against its {role} ({op} with the {role}'s tensor): \
                 the search codes a tensor alone, which `compress --base` already \
                 compared and found larger; nothing to search"
            )),
            Some(Sharing::Copy { of }) => {
                let name = self.row_name(of);
                Some(format!(
                    "this tensor is a copy of {name}: its record is a back reference of a \
                     few bytes, which no program beats; search {name} instead"
                ))
            }
            Some(Sharing::Empty) => Some("this tensor is empty: it has no record to search".into()),
            _ => None,
        }
    }

    /// `r`: searches the selected tensor. A tensor coded against its base is not
    /// searched: the search codes a tensor alone, which its reference record already
    /// beats by choice (`compress --base` tried both). A smaller result becomes a
    /// pending change ([`App::pending`]), so a new search never loses one.
    pub(super) fn start_search(&mut self) {
        if self.search.running.is_some() {
            self.status = if self.search.stopping {
                "the search is stopping: its best program so far comes next".into()
            } else {
                "a search is already running (x cancels it)".into()
            };
            return;
        }
        let Some(t) = self.selected_tensor() else {
            self.status = "no tensor is selected (the filter matches none)".into();
            return;
        };
        if let Some(why) = self.unsearchable(t) {
            self.search.form_error = Some(why);
            return;
        }
        self.run_search();
    }

    pub(super) fn run_search(&mut self) {
        let (Some(source), Some(t)) = (self.source.clone(), self.selected_tensor()) else {
            return;
        };
        self.search.editing = None;
        if let Err(e) = self.search.form.opts.validate() {
            self.search.form_error = Some(e);
            return;
        }
        let prior = match self.form_prior() {
            Ok(p) => p,
            Err(e) => {
                self.search.form_error = Some(e);
                return;
            }
        };
        self.search.form_error = None;
        self.search.form_note = None;
        self.search.tensor = Some(t);
        self.search.result = None;
        self.search.written = None;
        self.search.prompt = None;
        let expansions = Arc::new(AtomicU64::new(0));
        self.search.expansions = expansions.clone();
        let mut opts = self.search.form.opts.clone();
        let handle = self.worker.spawn(move |ctx| {
            opts.control = crate::synth::SearchControl {
                cancel: Some(ctx.cancel_flag()),
                expansions: Some(expansions.clone()),
            };
            let r = (|| {
                let old = source.program(t)?;
                let old_bytes = program_len(&old);
                if matches!(prior, PriorRequest::Calibrate) {
                    ctx.progress(0, 0, "calibrating the prior on");
                }
                let (prior, prior_name, prior_kind) =
                    prior.resolve(source.as_ref(), &|| ctx.cancelled())?;
                ctx.progress(0, 0, "decoding");
                let start = Instant::now();
                let budget = opts.budget;
                let found = search_record(
                    source.as_ref(),
                    t,
                    &opts,
                    &prior,
                    &|| ctx.cancelled(),
                    &|searches| {
                        ctx.progress(0, budget.saturating_mul(searches), "searching");
                    },
                )?;
                let new = found.found;
                let searches = found.searches;
                // Stopped by `x`: as if the budget ran out, with the best program so far.
                let cancelled = ctx.cancelled() && new.stats.budget_exhausted;
                opts.control = crate::synth::SearchControl::default();
                // What `w` records as the settings that built the program: a search
                // stopped by `x` had the budget it used.
                let budget = if cancelled {
                    expansions.load(Ordering::Relaxed).div_ceil(searches.max(1))
                } else {
                    opts.budget
                };
                let settings = Settings {
                    budget,
                    max_depth: u64::from(opts.max_depth),
                    max_nodes: u64::from(opts.max_nodes),
                    prior: prior_kind,
                    prior_digest: match prior_kind {
                        PriorKind::Uniform => 0,
                        _ => prior.digest(),
                    },
                    // The form's own limits, not a level.
                    level: None,
                };
                Ok(Box::new(SearchResult {
                    tensor: t,
                    opts: opts.clone(),
                    regions: found.regions,
                    group: found.members.map(|m| m.len()),
                    searches,
                    prior: prior_name,
                    settings,
                    old: (old, old_bytes),
                    new,
                    elapsed: start.elapsed(),
                    cancelled,
                }))
            })();
            Outcome::Searched(r)
        });
        self.search.running = Some((t, handle));
        self.search.stopping = false;
    }

    /// A search's result, kept as a pending change when its program is smaller than
    /// the archive's (and than any pending one for the record); says why not otherwise.
    pub(super) fn keep_result(&mut self, r: &SearchResult) {
        let name = self.row_name(r.tensor);
        if r.new.program == r.old.0 {
            return;
        }
        if r.new.bytes >= r.old.1 {
            return;
        }
        let record = self
            .source
            .as_deref()
            .map_or(r.tensor, |s| crate::tui::sweep::record_key(s, r.tensor));
        let from = format!(
            "search: budget {}, depth {}, nodes {}, prior {}",
            thousands(r.opts.budget),
            r.opts.max_depth,
            r.opts.max_nodes,
            r.prior
        );
        let change = Pending {
            tensor: r.tensor,
            record,
            program: r.new.program.clone(),
            settings: Some(r.settings),
            old_bytes: r.old.1,
            new_bytes: r.new.bytes,
            from,
            delta: None,
        };
        if !self.add_pending(change, false) && self.view == View::Search {
            self.status = format!(
                "a smaller program is already pending for {name}: kept it (9 lists the changes)"
            );
        }
    }
}
