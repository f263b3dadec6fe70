//! How each [`Action`] changes the app: the one dispatch from the key map's actions to
//! the views' handlers.

use super::*;

impl App {
    /// Applies an action.
    pub fn apply(&mut self, action: Action) {
        if self.source.is_none() {
            // Quitting or cancelling while the archive is made ends the session as
            // the user asked: not an error, and no archive is written. Unless the job
            // already moved the archive into place: then it is opened, saying so.
            if matches!(action, Action::Quit | Action::Cancel) {
                match self.loading.as_mut() {
                    Some(l) if l.job.cancel_unless_committed() => {
                        l.too_late = true;
                        return;
                    }
                    Some(_) => {
                        self.loading = None;
                        self.exit_note = Some("cancelled: no archive was written".into());
                    }
                    None => {}
                }
                self.quit = true;
            }
            return;
        }
        // A status line answers the last key: the next one clears it (its own answer, if
        // any, is set below), so an old "nothing to cancel" does not stay on screen.
        self.status.clear();
        if let Some(q) = self.quit_question.take() {
            match action {
                Action::Confirm(true) | Action::Quit => self.quit = true,
                Action::Confirm(false) => {
                    self.status = if self.pending.is_empty() {
                        "not quit".into()
                    } else {
                        "not quit: w writes the pending changes (9 lists them)".into()
                    };
                }
                // Any other key leaves the question on screen.
                _ => self.quit_question = Some(q),
            }
            return;
        }
        match action {
            Action::Quit => self.request_quit(),
            Action::Show(v) => self.show(v),
            Action::NextView => self.show(View::TABS[(self.view.index() + 1) % View::TABS.len()]),
            Action::PrevView => {
                self.show(View::TABS[(self.view.index() + View::TABS.len() - 1) % View::TABS.len()])
            }
            Action::Back => match self.view {
                View::Help => self.show(self.back_view),
                View::Table => {
                    if !self.filter.is_empty() {
                        self.filter.clear();
                        self.refresh_order();
                    }
                }
                _ => self.show(View::Table),
            },
            Action::Up => self.move_by(-1),
            Action::Down => self.move_by(1),
            // In the search view the arrows pick the tensor, and the pages scroll its
            // programs (a long `concat` does not fit the panes).
            Action::PageUp if self.view == View::Search => {
                self.search_scroll = self.search_scroll.saturating_sub(self.pages.search);
            }
            Action::PageDown if self.view == View::Search => {
                self.search_scroll = self.search_scroll.saturating_add(self.pages.search);
            }
            Action::PageUp => self.move_by(-(self.page_rows() as isize)),
            Action::PageDown => self.move_by(self.page_rows() as isize),
            Action::Home => self.move_by(isize::MIN / 2),
            Action::End => self.move_by(isize::MAX / 2),
            Action::Enter => match self.view {
                View::Table => self.show(View::Tree),
                View::Tree => self.tree_toggle(),
                _ => {}
            },
            Action::Open => self.open_selected(),
            Action::Expand => self.tree_set(true),
            Action::Collapse => self.tree_set(false),
            Action::ExpandAll => self.tree.expanded.iter_mut().for_each(|e| *e = true),
            Action::CollapseAll => {
                self.tree.expanded.iter_mut().for_each(|e| *e = false);
                self.tree.cursor = 0;
            }
            Action::SortNext => {
                let i = Column::ALL
                    .iter()
                    .position(|&c| c == self.sort)
                    .unwrap_or(0);
                self.sort = Column::ALL[(i + 1) % Column::ALL.len()];
                self.refresh_order();
            }
            Action::SortReverse => {
                self.reverse = !self.reverse;
                self.refresh_order();
            }
            Action::FilterStart => {
                self.filter_editing = true;
                self.filter_cursor = textfield::len(&self.filter);
            }
            Action::FilterChar(c) => {
                textfield::insert(&mut self.filter, &mut self.filter_cursor, c);
                self.selected = 0;
                self.refresh_order();
            }
            Action::FilterBackspace => {
                textfield::backspace(&mut self.filter, &mut self.filter_cursor);
                self.refresh_order();
            }
            Action::FilterAccept => self.filter_editing = false,
            Action::FilterClear => {
                self.filter_editing = false;
                self.filter.clear();
                self.filter_cursor = 0;
                self.refresh_order();
            }
            Action::VerifyOne => self.start_verify(true),
            Action::VerifyAll => self.start_verify(false),
            Action::SearchRun => match self.view {
                View::Archive => self.start_analysis(),
                View::Sweep => self.start_sweep(),
                _ => {
                    self.search_scroll = 0;
                    self.start_search()
                }
            },
            Action::SearchField(f) => {
                self.search.field = f;
                self.search_edit();
                if f == Field::PriorFile {
                    self.search.prior_cursor = textfield::len(&self.search.form.prior_path);
                }
            }
            Action::SearchEdit => self.search_edit(),
            Action::SearchEditDone => self.search.editing = None,
            Action::SearchEditCancel => {
                if let Some(saved) = self.search.editing.take() {
                    self.search.form = saved;
                    self.search.form_note = self.search.form.opts.validate().err();
                }
            }
            Action::SearchNextField | Action::SearchPrevField => {
                let all = Field::ALL;
                let i = all
                    .iter()
                    .position(|&f| f == self.search.field)
                    .unwrap_or(0);
                let k = if action == Action::SearchNextField {
                    (i + 1) % all.len()
                } else {
                    (i + all.len() - 1) % all.len()
                };
                self.search.field = all[k];
                if self.search.field == Field::PriorFile {
                    self.search.prior_cursor = textfield::len(&self.search.form.prior_path);
                }
            }
            Action::SearchChar(c) => self.search_char(c),
            Action::SearchBackspace => match self.search.field {
                Field::PriorFile => {
                    textfield::backspace(
                        &mut self.search.form.prior_path,
                        &mut self.search.prior_cursor,
                    );
                }
                Field::Prior => {}
                _ => self.edit_field(|v| v / 10),
            },
            Action::SearchMore if self.view == View::Sweep => self.sweep_limit(true),
            Action::SearchLess if self.view == View::Sweep => self.sweep_limit(false),
            Action::SearchMore if self.view == View::Prior => self.prior_step(true),
            Action::SearchLess if self.view == View::Prior => self.prior_step(false),
            Action::SearchMore => self.search_step(true),
            Action::SearchLess => self.search_step(false),
            Action::SearchWrite => match self.view {
                View::Playground => self.play_write(),
                _ => self.open_write_prompt(),
            },
            Action::PromptChar(c) => {
                if let Some(p) = &mut self.search.prompt {
                    textfield::insert(&mut p.path, &mut p.cursor, c);
                    p.error = None;
                }
            }
            Action::PromptBackspace => {
                if let Some(p) = &mut self.search.prompt {
                    textfield::backspace(&mut p.path, &mut p.cursor);
                    p.error = None;
                }
            }
            Action::Cursor(m) => self.cursor(m),
            Action::DeleteForward => self.delete_forward(),
            Action::PromptAccept => self.write_accept(),
            Action::PromptCancel => self.search.prompt = None,
            Action::Confirm(yes) => {
                if yes {
                    self.start_write(true);
                } else if let Some(p) = &mut self.search.prompt {
                    p.confirm = None;
                    p.error = Some("not replaced: type another path".into());
                }
            }
            Action::Kill(k) => self.kill(k),
            Action::Cancel => self.cancel(),
            Action::Drop => self.drop_pending(),
            Action::SweepTarget => {
                self.sweep.sample = !self.sweep.sample;
            }
            Action::PriorContext(next) => {
                let n = self.prior_view.keys.len();
                if n > 0 {
                    let c = self.prior_view.ctx;
                    self.prior_view.ctx = if next { (c + 1) % n } else { (c + n - 1) % n };
                }
            }
            Action::PriorCalibrate => self.start_calibration(),
            Action::PriorSave => self.open_prior_prompt(),
            Action::EditStart => match self.view {
                View::Playground => {
                    if self.play.origin.is_none() {
                        self.play_open();
                    }
                    self.play.editing = true;
                }
                View::Prior
                    if self.prior_view.prior.is_some() && !self.prior_view.keys.is_empty() =>
                {
                    self.prior_view.editing = Some(self.prior_view.count());
                }
                _ => {}
            },
            Action::EditDone => {
                self.play.editing = false;
                self.prior_view.editing = None;
            }
            Action::EditCancel => {
                if let Some(v) = self.prior_view.editing.take() {
                    self.prior_view.set_count(v);
                }
            }
            Action::Type(c) => match self.view {
                View::Playground => self.play.insert(c),
                View::Prior => {
                    if let Some(d) = c.to_digit(10) {
                        let v = self.prior_view.count();
                        self.prior_view.set_count(
                            v.saturating_mul(10)
                                .saturating_add(u64::from(d))
                                .min(1 << 40),
                        );
                        self.prior_edited();
                    }
                }
                _ => {}
            },
            Action::Backspace => match self.view {
                View::Playground => self.play.backspace(),
                View::Prior => {
                    let v = self.prior_view.count();
                    self.prior_view.set_count(v / 10);
                    self.prior_edited();
                }
                _ => {}
            },
            Action::Newline => self.play.newline(),
            Action::PlayRun => self.start_play(),
            Action::PlayOpen => self.play_open(),
            Action::NextPage => {
                self.page = (self.page + 1).min(self.lessons.len());
                self.step = 0;
            }
            Action::PrevPage => {
                self.page = self.page.saturating_sub(1);
                self.step = 0;
            }
            Action::StepNext => {
                if self.page == 0 {
                    self.page = 1;
                    self.step = 0;
                } else if let Some(l) = self.lessons.get(self.page - 1) {
                    self.step = (self.step + 1).min(l.program.node_count());
                }
            }
            Action::StepPrev => self.step = self.step.saturating_sub(1),
        }
        self.ensure_inspection();
    }
}
