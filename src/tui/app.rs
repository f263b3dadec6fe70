//! The app's state and how actions change it. Nothing here draws; [`super::ui`] renders
//! this state, [`super::event`] turns keys into [`Action`]s.

mod apply;
mod jobs;
mod playground;
mod prior;
mod search;
mod state;
mod sweep;
mod tree;
mod verify;
mod write;

pub use state::{
    ArchiveView, Column, Loading, Pending, PriorMode, PromptKind, SearchForm, SearchState,
    TreeState, VerifyState, WriteOutcome, WritePrompt,
};

use super::action::{Action, Field, Kill, Move, View};
use super::inspect::{thousands, Inspection};
use super::learn::{self, Lesson};
use super::model::{Check, Sharing, Source, TensorRow, VerifyOutcome};
use super::playground::{Origin, Playground};
use super::prior_view::PriorView;
use super::searching::{search_record, PriorRequest};
use super::sweep::SweepState;
use super::textfield;
use super::worker::{self, JobHandle, Msg, Outcome, SearchResult, Worker};
use crate::archive::format::{PriorKind, Settings};
use crate::dsl::{program_len, Node};
use crate::synth::{Prior, SearchOptions};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Inspections kept in memory (each holds a tensor's program).
const CACHE: usize = 6;

/// Rows of the Prior view's table: one per production.
const ALL_PRODS_LEN: usize = crate::synth::decompose::ALL_PRODS.len();

/// Rows moved by PageUp / PageDown in a view not drawn yet (whose height is unknown).
pub const PAGE: usize = 10;

/// Rows each scrolling view showed when it was last drawn: PageUp / PageDown move by
/// one such page. Each is [`PAGE`] until its view is drawn, and never 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageRows {
    /// Tensor rows the table shows; also used by the plots, search and verify views,
    /// where the arrows pick the tensor.
    pub table: usize,
    /// Node rows the program tree shows.
    pub tree: usize,
    /// Lines the text and why views show.
    pub text: usize,
    /// Lines each program pane of the search view shows (PageUp / PageDown scroll both).
    pub search: usize,
}

impl Default for PageRows {
    fn default() -> PageRows {
        PageRows {
            table: PAGE,
            tree: PAGE,
            text: PAGE,
            search: PAGE,
        }
    }
}

/// The largest search budget the form takes (expansions); larger values are clamped and
/// the form says so.
pub const MAX_BUDGET: u64 = 1 << 40;

/// The whole app.
pub struct App {
    /// The opened archive (`None` while it is being made).
    pub source: Option<Arc<dyn Source>>,
    /// Compressing before opening.
    pub loading: Option<Loading>,
    /// Why the archive could not be made or opened, if it could not: an error, so the
    /// program exits with status 1 ([`App::exit_code`]).
    pub load_error: Option<String>,
    /// A note to print once the terminal is restored that is not an error, such as
    /// that a cancelled compression wrote no archive.
    pub exit_note: Option<String>,
    /// The temporary folder the open archive was staged in, which is removed at exit
    /// (the demo's): `w` then proposes a path in the current folder instead, and the
    /// shell keeps whatever the user wrote into it ([`App::written_paths`]).
    pub temp_dir: Option<std::path::PathBuf>,
    /// Every file a write from the Search view made, in order.
    pub written_paths: Vec<std::path::PathBuf>,
    /// Set while `q` asks whether to quit with pending changes that were not written
    /// (or a search or write still running): the question.
    pub quit_question: Option<String>,
    /// Programs waiting to be written, one per record, in the order they came.
    pub pending: Vec<Pending>,
    /// The selected pending change (Changes view).
    pub pending_selected: usize,
    /// The archive's length in bytes with every pending change written (`None`: no
    /// change pending; `Err`: not a file, or its index cannot be read).
    pub pending_len: Option<Result<u64, String>>,
    /// The Archive view.
    pub archive_view: ArchiveView,
    /// The budget sweep.
    pub sweep: SweepState,
    /// The Prior view.
    pub prior_view: PriorView,
    /// The playground.
    pub play: Playground,
    /// The view shown.
    pub view: View,
    /// The view to go back to from help.
    pub back_view: View,
    /// Set when the user quits.
    pub quit: bool,
    /// Sort column.
    pub sort: Column,
    /// Descending order.
    pub reverse: bool,
    /// Name filter (substring, case-insensitive).
    pub filter: String,
    /// Whether the filter is being typed.
    pub filter_editing: bool,
    /// Cursor in the filter, in characters.
    pub filter_cursor: usize,
    /// Visible rows (indices into the source's rows), sorted and filtered.
    pub order: Vec<usize>,
    /// Selected line in `order`.
    pub selected: usize,
    /// First visible line of the table.
    pub table_offset: usize,
    /// Rows per page of each scrolling view, as last drawn.
    pub pages: PageRows,
    /// Recent inspections, newest last.
    pub inspections: VecDeque<(usize, Result<Arc<Inspection>, String>)>,
    /// The inspection running: tensor and job.
    pub inspecting: Option<(usize, JobHandle)>,
    /// The tree's state.
    pub tree: TreeState,
    /// Scroll of the text and why views.
    pub scroll: usize,
    /// Scroll of the search view's two program panes (lines from the top), back to 0
    /// when another tensor is picked or a search starts.
    pub search_scroll: usize,
    /// Search form.
    pub search: SearchState,
    /// Verification.
    pub verify: VerifyState,
    /// Lesson page (0 = keys).
    pub page: usize,
    /// Steps shown of the lesson's example.
    pub step: usize,
    /// The lessons.
    pub lessons: Vec<Lesson>,
    /// A one-line message for the status bar.
    pub status: String,
    /// Tick counter for spinners.
    pub tick: u64,
    worker: Worker,
}

impl App {
    /// An app showing `source`.
    pub fn new(source: Arc<dyn Source>) -> App {
        let mut app = App::empty();
        app.set_source(source);
        app
    }

    /// An app that waits for an archive being made by `job` (see [`App::start_loading`]).
    pub fn empty() -> App {
        App {
            source: None,
            loading: None,
            load_error: None,
            exit_note: None,
            temp_dir: None,
            written_paths: Vec::new(),
            quit_question: None,
            pending: Vec::new(),
            pending_selected: 0,
            pending_len: None,
            archive_view: ArchiveView::default(),
            sweep: SweepState::default(),
            prior_view: PriorView::default(),
            play: Playground::default(),
            view: View::Table,
            back_view: View::Table,
            quit: false,
            sort: Column::Index,
            reverse: false,
            filter: String::new(),
            filter_editing: false,
            filter_cursor: 0,
            order: Vec::new(),
            selected: 0,
            table_offset: 0,
            pages: PageRows::default(),
            inspections: VecDeque::new(),
            inspecting: None,
            tree: TreeState::default(),
            scroll: 0,
            search_scroll: 0,
            search: SearchState {
                form: SearchForm {
                    opts: SearchOptions {
                        budget: 32,
                        ..SearchOptions::default()
                    },
                    prior: PriorMode::Calibrated,
                    prior_path: String::new(),
                },
                field: Field::Budget,
                editing: None,
                form_error: None,
                form_note: None,
                running: None,
                stopping: false,
                expansions: Arc::new(AtomicU64::new(0)),
                tensor: None,
                result: None,
                prompt: None,
                writing: None,
                written: None,
                prior_cursor: 0,
            },
            verify: VerifyState::default(),
            page: 0,
            step: 0,
            lessons: learn::lessons(),
            status: String::new(),
            tick: 0,
            worker: Worker::default(),
        }
    }

    /// Starts making the archive on a worker thread; `job` returns the opened source.
    pub fn start_loading(
        &mut self,
        input: String,
        output: String,
        job: impl FnOnce(&worker::JobCtx) -> Result<Arc<dyn Source>, String> + Send + 'static,
    ) {
        let handle = self.worker.spawn(move |ctx| Outcome::Opened(job(ctx)));
        self.loading = Some(Loading {
            input,
            output,
            job: handle,
            too_late: false,
        });
    }

    fn set_source(&mut self, source: Arc<dyn Source>) {
        self.source = Some(source);
        self.refresh_order();
    }

    /// The source's rows (empty while loading).
    pub fn rows(&self) -> &[TensorRow] {
        self.source.as_deref().map_or(&[], |s| s.rows())
    }

    /// The selected tensor's index in the source.
    pub fn selected_tensor(&self) -> Option<usize> {
        self.order.get(self.selected).copied()
    }

    /// The selected tensor's row.
    pub fn selected_row(&self) -> Option<&TensorRow> {
        self.selected_tensor().and_then(|i| self.rows().get(i))
    }

    /// The last search's result (or why it failed) when it belongs to the selected
    /// tensor; `None` after moving to another tensor, so that what is shown and what `w`
    /// writes is always the tensor named on screen.
    pub fn search_result(&self) -> Option<&Result<Box<SearchResult>, String>> {
        match (self.search.tensor, self.selected_tensor()) {
            (Some(a), Some(b)) if a == b => self.search.result.as_ref(),
            _ => None,
        }
    }

    /// The key mapping's context.
    pub fn key_context(&self) -> super::event::KeyContext {
        use super::event::Prompt;
        let prompt_view = matches!(
            self.view,
            View::Search | View::Changes | View::Playground | View::Prior
        );
        super::event::KeyContext {
            view: self.view,
            filter_editing: self.filter_editing,
            loading: self.source.is_none(),
            filter_kept: !self.filter.is_empty(),
            search_editing: self.view == View::Search && self.search.editing.is_some(),
            text_field: self.search.field == Field::PriorFile,
            editing: (self.view == View::Playground && self.play.editing)
                || (self.view == View::Prior && self.prior_view.editing.is_some()),
            prompt: match &self.search.prompt {
                _ if self.quit_question.is_some() => Prompt::Quit,
                Some(p) if prompt_view => {
                    if p.confirm.is_some() {
                        Prompt::Confirm
                    } else {
                        Prompt::Path
                    }
                }
                _ => Prompt::None,
            },
        }
    }

    /// The inspection of tensor `i`, if done.
    pub fn inspection(&self, i: usize) -> Option<&Result<Arc<Inspection>, String>> {
        self.inspections
            .iter()
            .rev()
            .find(|(t, _)| *t == i)
            .map(|(_, r)| r)
    }

    /// The selected tensor's inspection, if done.
    pub fn current(&self) -> Option<&Result<Arc<Inspection>, String>> {
        self.selected_tensor().and_then(|i| self.inspection(i))
    }

    /// Whether any job is running.
    pub fn busy(&self) -> bool {
        self.loading.is_some()
            || self.inspecting.is_some()
            || self.search.running.is_some()
            || self.search.writing.is_some()
            || self.verify.running.is_some()
            || self.archive_view.running.is_some()
            || self.sweep.running.is_some()
            || self.prior_view.loading.is_some()
            || self.play.running.is_some()
    }

    /// Recomputes the visible rows after a sort or filter change, keeping the selected
    /// tensor selected when it is still visible.
    pub fn refresh_order(&mut self) {
        let keep = self.selected_tensor();
        let needle = self.filter.to_lowercase();
        let rows = self.rows();
        let mut order: Vec<usize> = (0..rows.len())
            .filter(|&i| needle.is_empty() || rows[i].name.to_lowercase().contains(&needle))
            .collect();
        let key = self.sort;
        order.sort_by(|&a, &b| {
            let (ra, rb) = (&rows[a], &rows[b]);
            let o = match key {
                Column::Index => a.cmp(&b),
                Column::Name => ra.name.cmp(&rb.name),
                Column::Dtype => ra.dtype.name().cmp(rb.dtype.name()),
                Column::Shape => ra.elements().cmp(&rb.elements()),
                Column::Original => ra.original_bytes.cmp(&rb.original_bytes),
                Column::Archive => ra.archive_bytes.cmp(&rb.archive_bytes),
                Column::Reduction => ra.reduction().total_cmp(&rb.reduction()),
                Column::Root => ra.root_op.cmp(&rb.root_op),
            };
            o.then(a.cmp(&b))
        });
        if self.reverse {
            order.reverse();
        }
        self.order = order;
        self.selected = keep
            .and_then(|t| self.order.iter().position(|&i| i == t))
            .unwrap_or(0);
    }

    /// The process exit status for how the session ended: 0 when the user ended it
    /// (`q`, Ctrl-C, or `x` while the archive was being made), 1 when the archive
    /// could not be made or opened ([`App::load_error`]).
    pub fn exit_code(&self) -> i32 {
        if self.load_error.is_some() {
            super::EXIT_ERROR
        } else {
            super::EXIT_OK
        }
    }

    /// `q`: quits, unless changes are pending (or a search or a write is still running):
    /// then asks first ([`App::quit_question`]).
    fn request_quit(&mut self) {
        match self.unsaved() {
            Some(q) => self.quit_question = Some(q),
            None => self.quit = true,
        }
    }

    /// The question to ask before quitting, when quitting would lose work: changes are
    /// pending, a search is running, or the new archive is still being written.
    pub fn unsaved(&self) -> Option<String> {
        if self.search.writing.is_some() {
            return Some("the new archive is still being written: quit and lose it? (y/n)".into());
        }
        if self.search.running.is_some() {
            return Some(
                "a search is running: quit and lose what it found? (y/n) x stops it and \
                 shows its best program so far"
                    .into(),
            );
        }
        if self.pending.is_empty() {
            return None;
        }
        let n = self.pending.len();
        let change = match self.pending_total() {
            Some(d) => format!("; the file {} B", super::ui::signed(d)),
            None => String::new(),
        };
        let names: Vec<String> = self
            .pending
            .iter()
            .take(2)
            .map(|p| self.row_name(p.tensor))
            .collect();
        let more = if n > 2 {
            format!(" and {} more", n - 2)
        } else {
            String::new()
        };
        Some(format!(
            "quit without writing {n} pending change{} ({}{more}{change})? (y/n) w writes \
             them (9 lists them)",
            if n == 1 { "" } else { "s" },
            names.join(", ")
        ))
    }

    /// The escaped name of tensor `t`.
    pub fn row_name(&self, t: usize) -> String {
        self.rows()
            .get(t)
            .map(|r| super::escape_name(&r.name).into_owned())
            .unwrap_or_default()
    }

    /// The change in the archive's length in bytes were every pending change written
    /// (index entries included); `None` when it cannot be told (not a file).
    pub fn pending_total(&self) -> Option<i64> {
        let arch = self.source.as_ref()?.file_sizes().1;
        match &self.pending_len {
            Some(Ok(len)) => Some(*len as i64 - arch as i64),
            _ => None,
        }
    }

    /// Adds (or replaces, for the same record) a pending change, and recomputes the
    /// archive's length with all of them. A change no smaller than the one pending for
    /// its record replaces it only when `replace`.
    pub fn add_pending(&mut self, change: Pending, replace: bool) -> bool {
        if let Some(k) = self.pending.iter().position(|p| p.record == change.record) {
            if !replace && change.new_bytes >= self.pending[k].new_bytes {
                return false;
            }
            self.pending[k] = change;
        } else {
            self.pending.push(change);
        }
        self.refresh_pending();
        true
    }

    /// Recomputes each pending change's own effect and the archive's length with all of
    /// them ([`Source::rewritten_len`]).
    fn refresh_pending(&mut self) {
        self.pending_selected = self
            .pending_selected
            .min(self.pending.len().saturating_sub(1));
        let Some(source) = self.source.clone() else {
            return;
        };
        if self.pending.is_empty() {
            self.pending_len = None;
            return;
        }
        let arch = source.file_sizes().1 as i64;
        for p in &mut self.pending {
            p.delta = source
                .rewritten_len(&[(p.tensor, &p.program, p.settings)])
                .ok()
                .map(|len| len as i64 - arch);
        }
        let all: Vec<(usize, &Node, Option<Settings>)> = self
            .pending
            .iter()
            .map(|p| (p.tensor, &p.program, p.settings))
            .collect();
        self.pending_len = Some(source.rewritten_len(&all));
    }

    /// `d` in the Changes view: drops the selected pending change.
    fn drop_pending(&mut self) {
        if self.pending_selected < self.pending.len() {
            let p = self.pending.remove(self.pending_selected);
            self.status = format!("dropped the change of {}", self.row_name(p.tensor));
            self.refresh_pending();
        } else {
            self.status = "no change is pending".into();
        }
    }

    /// Enter in the Archive view (Why on the selected tensor) and the Changes view (the
    /// Search view of the selected change's tensor).
    fn open_selected(&mut self) {
        let t = match self.view {
            View::Archive => match &self.archive_view.report {
                Some(Ok(r)) => r
                    .tensors_above_reference
                    .get(self.archive_view.selected)
                    .map(|a| a.index),
                _ => None,
            },
            View::Changes => self.pending.get(self.pending_selected).map(|p| p.tensor),
            _ => None,
        };
        let Some(t) = t else {
            return;
        };
        self.select_tensor(t);
        self.show(if self.view == View::Archive {
            View::Why
        } else {
            View::Search
        });
    }

    /// Selects tensor `t` in the table, clearing a filter that hides it.
    pub fn select_tensor(&mut self, t: usize) {
        if !self.order.contains(&t) {
            self.filter.clear();
            self.filter_cursor = 0;
            self.refresh_order();
        }
        if let Some(k) = self.order.iter().position(|&i| i == t) {
            self.selected = k;
        }
    }

    /// Ctrl-U / Ctrl-W in the text being typed: the filter, the output path, the prior
    /// file, the playground's line, or a limit (Ctrl-U and Ctrl-W both clear a number).
    fn kill(&mut self, k: Kill) {
        if self.filter_editing {
            textfield::kill(&mut self.filter, &mut self.filter_cursor, k);
            self.refresh_order();
        } else if let Some(p) = &mut self.search.prompt {
            textfield::kill(&mut p.path, &mut p.cursor, k);
            p.error = None;
        } else if self.view == View::Playground && self.play.editing {
            self.play.kill(k);
        } else if self.search.editing.is_some() {
            match self.search.field {
                Field::PriorFile => textfield::kill(
                    &mut self.search.form.prior_path,
                    &mut self.search.prior_cursor,
                    k,
                ),
                Field::Prior => {}
                _ => self.edit_field(|_| 0),
            }
        }
    }

    /// The arrows, Home and End in the text being typed.
    fn cursor(&mut self, m: Move) {
        if self.filter_editing {
            textfield::move_cursor(&self.filter, &mut self.filter_cursor, m);
        } else if let Some(p) = &mut self.search.prompt {
            textfield::move_cursor(&p.path, &mut p.cursor, m);
        } else if self.view == View::Playground && self.play.editing {
            self.play.move_cursor(m);
        } else if self.search.editing.is_some() && self.search.field == Field::PriorFile {
            textfield::move_cursor(
                &self.search.form.prior_path,
                &mut self.search.prior_cursor,
                m,
            );
        }
    }

    /// Delete in the text being typed.
    fn delete_forward(&mut self) {
        if self.filter_editing {
            textfield::delete(&mut self.filter, &mut self.filter_cursor);
            self.refresh_order();
        } else if let Some(p) = &mut self.search.prompt {
            textfield::delete(&mut p.path, &mut p.cursor);
        } else if self.view == View::Playground && self.play.editing {
            self.play.delete();
        } else if self.search.editing.is_some() && self.search.field == Field::PriorFile {
            textfield::delete(
                &mut self.search.form.prior_path,
                &mut self.search.prior_cursor,
            );
        }
    }

    fn show(&mut self, v: View) {
        if v == View::Help && self.view != View::Help {
            self.back_view = self.view;
        }
        if v != self.view {
            self.scroll = 0;
        }
        self.view = v;
        self.filter_editing = false;
        self.search.editing = None;
        self.play.editing = false;
        self.prior_view.editing = None;
        match v {
            View::Archive
                if self.archive_view.report.is_none() && self.archive_view.running.is_none() =>
            {
                self.start_analysis();
            }
            View::Prior if self.prior_view.prior.is_none() && self.prior_view.loading.is_none() => {
                self.load_prior();
            }
            View::Playground if self.play.origin.is_none() => self.play_open(),
            _ => {}
        }
    }

    /// Rows PageUp / PageDown move in the view shown: one page of its list or text as
    /// last drawn (1 in help, where they step through a lesson).
    pub fn page_rows(&self) -> usize {
        let rows = match self.view {
            View::Table | View::Plots | View::Search | View::Verify | View::Sweep => {
                self.pages.table
            }
            View::Tree => self.pages.tree,
            View::Text | View::Why | View::Archive | View::Changes | View::Playground => {
                self.pages.text
            }
            View::Prior => ALL_PRODS_LEN,
            View::Help => 1,
        };
        rows.clamp(1, isize::MAX as usize)
    }

    fn move_by(&mut self, delta: isize) {
        match self.view {
            View::Table | View::Plots | View::Search | View::Verify | View::Sweep => {
                let n = self.order.len();
                if n > 0 {
                    self.selected = step(self.selected, delta, n);
                }
                self.search_scroll = 0;
            }
            View::Archive => {
                let n = match &self.archive_view.report {
                    Some(Ok(r)) => r.tensors_above_reference.len(),
                    _ => 0,
                };
                self.archive_view.selected = step(self.archive_view.selected, delta, n);
            }
            View::Changes => {
                self.pending_selected = step(self.pending_selected, delta, self.pending.len());
            }
            View::Prior => {
                self.prior_view.prod = step(self.prior_view.prod, delta, ALL_PRODS_LEN);
            }
            View::Playground => {
                self.play.result_scroll = step(self.play.result_scroll, delta, usize::MAX / 4);
            }
            View::Tree => {
                let vis = self.visible_nodes();
                if let Some(pos) = vis.iter().position(|&i| i == self.tree.cursor) {
                    self.tree.cursor = vis[step(pos, delta, vis.len())];
                } else if let Some(&first) = vis.first() {
                    self.tree.cursor = first;
                }
            }
            View::Text | View::Why => {
                self.scroll = step(self.scroll, delta, usize::MAX / 4);
            }
            View::Help => {
                if delta < 0 {
                    self.apply(Action::StepPrev)
                } else {
                    self.apply(Action::StepNext)
                }
            }
        }
    }

    /// Cancels the running jobs: search, verification, analysis, sweep, calibration,
    /// playground check. Each view shows its own "cancelled"; the status line says it
    /// only for a job whose view is not shown.
    ///
    /// A cancelled search is not forgotten: it polls its flag once per expansion and
    /// stops as if its budget ran out, and its best program so far arrives through
    /// [`App::pump`] as the result, marked cancelled. A cancelled sweep keeps the points
    /// it finished.
    fn cancel(&mut self) {
        let mut any = false;
        let mut unseen = Vec::new();
        if let Some((_, h)) = &self.search.running {
            h.cancel();
            self.search.stopping = true;
            any = true;
            if self.view != View::Search {
                unseen.push("search");
            }
        }
        if let Some(h) = self.verify.running.take() {
            // Verification stops before the next tensor.
            h.cancel();
            self.verify.result = Some(Err("cancelled".into()));
            any = true;
            if self.view != View::Verify {
                unseen.push("verify");
            }
        }
        if let Some(h) = self.archive_view.running.take() {
            h.cancel();
            self.archive_view.cancelled = true;
            any = true;
            if self.view != View::Archive {
                unseen.push("the archive's analysis");
            }
        }
        if let Some(h) = &self.sweep.running {
            h.cancel();
            any = true;
            if self.view != View::Sweep {
                unseen.push("sweep");
            }
        }
        if let Some(h) = self.prior_view.loading.take() {
            h.cancel();
            self.prior_view.error = Some("calibration cancelled: c calibrates again".into());
            any = true;
        }
        if let Some(h) = self.play.running.take() {
            h.cancel();
            self.play.result = Some(Err("cancelled: r checks again".into()));
            any = true;
        }
        self.status = if !any {
            "nothing to cancel".into()
        } else if unseen.is_empty() {
            String::new()
        } else {
            format!("{} cancelled", unseen.join(" and "))
        };
    }
}

/// A path in `dir` for a re-searched copy of the archive `archive` that does not exist
/// yet: `STEM.researched.brv`, then `STEM.researched-1.brv`, ... (after 10,000 taken
/// names the last one is proposed, and writing it asks before replacing it).
pub fn researched_path(dir: &std::path::Path, archive: &std::path::Path) -> std::path::PathBuf {
    let stem = archive
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "archive".into());
    let mut k = 0u32;
    loop {
        let p = dir.join(super::numbered_name(&stem, ".researched", k));
        if std::fs::symlink_metadata(&p).is_err() || k > 10_000 {
            return p;
        }
        k += 1;
    }
}

/// Deletes from `text` as Ctrl-U (all of it) or Ctrl-W (the last word or path
/// component with the spaces or `/` after it, back to the previous space or `/`, which
/// stays) do in a shell.
pub fn kill_text(text: &mut String, k: Kill) {
    match k {
        Kill::Line => text.clear(),
        Kill::Word => {
            let trimmed = text.trim_end_matches([' ', '/']).len();
            let cut = text[..trimmed].rfind([' ', '/']).map_or(0, |i| i + 1);
            text.truncate(cut);
        }
    }
}

/// Whether two paths name the same existing file.
pub fn same_file(a: &std::path::Path, b: &std::path::Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(x), Ok(y)) => x == y,
        _ => false,
    }
}

/// `pos + delta` clamped to `0..len`.
fn step(pos: usize, delta: isize, len: usize) -> usize {
    if len == 0 {
        return 0;
    }
    let p = pos as isize;
    p.saturating_add(delta).clamp(0, len as isize - 1) as usize
}
