//! The app's state and how actions change it. Nothing here draws; [`super::ui`] renders
//! this state, [`super::event`] turns keys into [`Action`]s.

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

/// A column of the tensor table, in display order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Column {
    /// Archive order (no sort).
    Index,
    /// Tensor name.
    Name,
    /// Dtype.
    Dtype,
    /// Number of elements.
    Shape,
    /// Original bytes.
    Original,
    /// Archive bytes.
    Archive,
    /// Reduction.
    Reduction,
    /// Root operator.
    Root,
}

impl Column {
    /// All columns, in the order `s` cycles through them.
    pub const ALL: [Column; 8] = [
        Column::Index,
        Column::Name,
        Column::Dtype,
        Column::Shape,
        Column::Original,
        Column::Archive,
        Column::Reduction,
        Column::Root,
    ];

    /// Header text.
    pub fn title(self) -> &'static str {
        match self {
            Column::Index => "#",
            Column::Name => "name",
            Column::Dtype => "dtype",
            Column::Shape => "shape",
            Column::Original => "original",
            Column::Archive => "archive",
            Column::Reduction => "reduction",
            Column::Root => "root",
        }
    }
}

/// State of the compress-then-open phase.
#[derive(Debug)]
pub struct Loading {
    /// What is being compressed.
    pub input: String,
    /// Where the archive goes.
    pub output: String,
    /// The job.
    pub job: JobHandle,
    /// Set when `x` or `q` came after the archive was already moved into place: the job
    /// runs on and the archive is opened, saying so.
    pub too_late: bool,
}

/// The program tree's expansion and cursor, for one tensor.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TreeState {
    /// Tensor the state belongs to.
    pub tensor: usize,
    /// Per node (pre-order): expanded.
    pub expanded: Vec<bool>,
    /// Cursor: pre-order index of the node.
    pub cursor: usize,
    /// First visible line.
    pub offset: usize,
}

/// Which production prior a re-run of the search uses (as `brevis compress`: calibrated
/// by default, `--uniform`, or `--prior FILE`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PriorMode {
    /// Learned from a few of this archive's tensors, as `compress` does by default.
    Calibrated,
    /// Uniform production costs.
    Uniform,
    /// Read from the prior file in the form (JSON, schema `brevis-prior/1`).
    File,
    /// The prior edited in the Prior view.
    Edited,
}

impl PriorMode {
    /// The choices in the order `+` cycles through them ([`PriorMode::Edited`] comes
    /// after them once the Prior view has edited a prior).
    pub const ALL: [PriorMode; 3] = [PriorMode::Calibrated, PriorMode::Uniform, PriorMode::File];

    /// What the form shows.
    pub fn label(self) -> &'static str {
        match self {
            PriorMode::Calibrated => "calibrated",
            PriorMode::Uniform => "uniform",
            PriorMode::File => "file",
            PriorMode::Edited => "edited",
        }
    }
}

/// The values of the search form (saved when editing starts, for Esc).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SearchForm {
    /// Limits to use.
    pub opts: SearchOptions,
    /// Which prior.
    pub prior: PriorMode,
    /// Path of the prior file (for [`PriorMode::File`]).
    pub prior_path: String,
}

/// What the write prompt writes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PromptKind {
    /// A copy of the archive with every pending change.
    #[default]
    Archive,
    /// The Prior view's prior, as JSON.
    Prior,
}

/// The prompt that writes the pending changes into a new archive (or the prior to a
/// file).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WritePrompt {
    /// What it writes.
    pub kind: PromptKind,
    /// Output path being typed.
    pub path: String,
    /// Cursor in the path, in characters.
    pub cursor: usize,
    /// Set when the path names an existing file (or the open archive) and the user must
    /// confirm replacing it: the question.
    pub confirm: Option<String>,
    /// Why the last attempt was refused.
    pub error: Option<String>,
}

/// What writing the new archive did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WriteOutcome {
    /// The file written.
    pub path: std::path::PathBuf,
    /// Its length in bytes.
    pub bytes: u64,
    /// Length of the open archive in bytes.
    pub old_bytes: u64,
    /// Whether the open archive was replaced (and reopened).
    pub in_place: bool,
    /// Changes written.
    pub changes: usize,
}

/// A program waiting to be written into the archive: a search's smaller result, or a
/// playground program that restores its tensor. One `w` writes them all.
#[derive(Clone, Debug, PartialEq)]
pub struct Pending {
    /// The tensor it was found for.
    pub tensor: usize,
    /// Its record, as the first tensor the record restores (a group's first).
    pub record: usize,
    /// The new program (a group's, for a tensor in a group).
    pub program: Node,
    /// The settings that built it, recorded for the record (`None`: the record keeps
    /// its own; a program from the playground).
    pub settings: Option<Settings>,
    /// Bytes of the archive's program.
    pub old_bytes: u64,
    /// Bytes of the new program.
    pub new_bytes: u64,
    /// Where it came from, for the list (`search: budget 32, prior uniform`).
    pub from: String,
    /// The exact change in the archive's length in bytes were it written alone (the
    /// record's change, plus any index entry it adds: a new settings entry takes 12
    /// bytes or so); `None` when the source is not a file.
    pub delta: Option<i64>,
}

/// The Archive view's state: the report of where the archive's bytes go.
#[derive(Debug, Default)]
pub struct ArchiveView {
    /// The report (or why it could not be made).
    pub report: Option<Result<Arc<crate::job::why::WhyReport>, String>>,
    /// The analysis running.
    pub running: Option<JobHandle>,
    /// Set when `x` stopped the last analysis.
    pub cancelled: bool,
    /// The selected line of the ranking of tensors above their references.
    pub selected: usize,
    /// First line shown.
    pub scroll: usize,
}

/// The search form and its job.
#[derive(Debug)]
pub struct SearchState {
    /// Limits, prior choice and prior file.
    pub form: SearchForm,
    /// Field selected.
    pub field: Field,
    /// The form as it was when editing started; `Some` while a field is edited.
    pub editing: Option<SearchForm>,
    /// Why the form was refused (bad limit, unreadable prior file).
    pub form_error: Option<String>,
    /// A problem with a value as it was typed: out of range (`r` will refuse it) or
    /// clamped to the most the field takes. Names the field and the limit.
    pub form_note: Option<String>,
    /// The running search: tensor and job.
    pub running: Option<(usize, JobHandle)>,
    /// Set when `x` asked the running search to stop: it stops at its next expansion
    /// and its best program so far becomes the result, marked cancelled.
    pub stopping: bool,
    /// Expansions done by the running (or last) search, updated by the search itself.
    pub expansions: Arc<AtomicU64>,
    /// The tensor the running search, the last result and the last write belong to.
    pub tensor: Option<usize>,
    /// The last result (or why it failed). Shown and written only while its tensor is
    /// the selected one ([`App::search_result`]).
    pub result: Option<Result<Box<SearchResult>, String>>,
    /// The write prompt, when open.
    pub prompt: Option<WritePrompt>,
    /// The running write.
    pub writing: Option<JobHandle>,
    /// The last write (or why it failed).
    pub written: Option<Result<WriteOutcome, String>>,
    /// Cursor in the prior file's path, in characters.
    pub prior_cursor: usize,
}

impl SearchState {
    /// The search limits of the form.
    pub fn opts(&self) -> &SearchOptions {
        &self.form.opts
    }
}

/// The verify job and its last verdict.
#[derive(Debug, Default)]
pub struct VerifyState {
    /// The running verification.
    pub running: Option<JobHandle>,
    /// The last outcome.
    pub result: Option<Result<VerifyOutcome, String>>,
}

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

    /// Applies `f` to the selected limit. Values are kept as typed (within what fits the
    /// field, [`MAX_BUDGET`] for the budget); a value out of the library's range, or one
    /// clamped, is flagged at once in [`SearchState::form_note`] (and `r` refuses an out
    /// of range one).
    fn edit_field(&mut self, f: impl Fn(u64) -> u64) {
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

    fn search_edit(&mut self) {
        if self.search.editing.is_none() {
            self.search.editing = Some(self.search.form.clone());
        }
    }

    fn search_char(&mut self, c: char) {
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

    fn search_step(&mut self, up: bool) {
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

    fn tree_toggle(&mut self) {
        let c = self.tree.cursor;
        if let Some(e) = self.tree.expanded.get_mut(c) {
            *e = !*e;
        }
    }

    fn tree_set(&mut self, expand: bool) {
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
                super::inspect::inspect_record(
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
    fn sync_tree(&mut self, t: usize) {
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

    fn start_verify(&mut self, one: bool) {
        if self.verify.running.is_some() {
            self.status = "a verification is already running (x cancels it)".into();
            return;
        }
        let Some(source) = self.source.clone() else {
            return;
        };
        let tensor = self.selected_tensor();
        if one && tensor.is_none() {
            return;
        }
        self.view = View::Verify;
        self.verify.result = None;
        let handle = self.worker.spawn(move |ctx| {
            let start = Instant::now();
            if one {
                let i = tensor.unwrap_or(0);
                let name = source.rows()[i].name.clone();
                ctx.progress(0, 1, &name);
                let check = source.verify_tensor(i);
                let mut out = VerifyOutcome {
                    tensor: Some(i),
                    tensors: 1,
                    exact: 0,
                    failures: Vec::new(),
                    whole_file: None,
                    seconds: 0.0,
                };
                match check {
                    Check::Exact => out.exact = 1,
                    Check::Mismatch(m) | Check::Failed(m) => out.failures.push(m),
                }
                out.seconds = start.elapsed().as_secs_f64();
                Outcome::Verified(Ok(out))
            } else {
                match worker::verify_all(source.as_ref(), ctx) {
                    Some(out) => Outcome::Verified(Ok(out)),
                    None => Outcome::Verified(Err("cancelled".into())),
                }
            }
        });
        self.verify.running = Some(handle);
    }

    /// The prior the form asks for, loaded now so that a bad file is refused in the form.
    fn form_prior(&self) -> Result<PriorRequest, String> {
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
    fn unsearchable(&self, t: usize) -> Option<String> {
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
    fn start_search(&mut self) {
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

    fn run_search(&mut self) {
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
    fn keep_result(&mut self, r: &SearchResult) {
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
            .map_or(r.tensor, |s| super::sweep::record_key(s, r.tensor));
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

    /// Opens the write prompt for the pending changes, with a default path next to the
    /// archive that does not exist yet (`model.researched.brv`, then
    /// `model.researched-1.brv`, ...; see [`researched_path`]), or in the current folder
    /// when the archive lives in the temporary folder [`App::temp_dir`].
    fn open_write_prompt(&mut self) {
        if self.search.writing.is_some() {
            self.status = "the archive is being written".into();
            return;
        }
        // In the Search view, say what became of the result shown.
        let mut about_result = None;
        if self.view == View::Search {
            if let Some(Ok(r)) = self.search_result() {
                if r.new.program == r.old.0 {
                    about_result = Some(
                        "nothing to write for this tensor: the search found the archive's own \
                         program"
                            .to_string(),
                    );
                } else if r.new.bytes > r.old.1 {
                    about_result = Some(format!(
                        "nothing written: the new program is {} bytes larger than the \
                         archive's (only a smaller program becomes a change to write)",
                        thousands(r.new.bytes - r.old.1)
                    ));
                } else if r.new.bytes == r.old.1 {
                    about_result = Some(
                        "nothing to write for this tensor: the new program is the same size \
                         as the archive's"
                            .to_string(),
                    );
                }
            }
        }
        if self.pending.is_empty() {
            self.status = about_result.unwrap_or_else(|| match self.view {
                View::Search => match (self.search.tensor, &self.search.result) {
                    (Some(t), Some(Ok(_))) if Some(t) != self.selected_tensor() => format!(
                        "nothing to write for this tensor: the last search ran on {} (r \
                         searches this one)",
                        self.row_name(t)
                    ),
                    _ => "nothing to write: run a search first (r)".into(),
                },
                _ => "nothing to write: no change is pending (a search's smaller result, \
                      or a playground program that restores its tensor)"
                    .into(),
            });
            return;
        }
        if let Some(a) = about_result {
            self.status = format!("{a}; the pending changes are written");
        }
        let Some(path) = self.source.as_ref().and_then(|s| s.path()) else {
            self.status = "this archive is not a file; nothing can be written".into();
            return;
        };
        // The demo's archive lives in a temporary folder that goes at exit: propose the
        // current folder instead, so that what the user writes stays.
        let in_temp = self
            .temp_dir
            .as_deref()
            .is_some_and(|t| path.parent().is_some_and(|p| same_file(p, t)));
        // A shard of a folder archive (`ckpt.brv/model-00002-of-00002.brv`): a new
        // file inside the folder is not named by its manifest and so never restored;
        // propose beside the folder (replacing the shard in place still works).
        let parent = path.parent().unwrap_or(std::path::Path::new(""));
        let in_folder_archive = parent.is_dir() && parent.extension().is_some_and(|e| e == "brv");
        let dir = if in_temp {
            std::path::Path::new(".")
        } else if in_folder_archive {
            parent.parent().unwrap_or(std::path::Path::new(""))
        } else {
            parent
        };
        let default = researched_path(dir, &path).display().to_string();
        self.search.prompt = Some(WritePrompt {
            kind: PromptKind::Archive,
            cursor: textfield::len(&default),
            path: default,
            confirm: None,
            error: None,
        });
    }

    /// `s` in the Prior view: asks where to save the prior (JSON, as `brevis calibrate`
    /// writes it).
    fn open_prior_prompt(&mut self) {
        if self.prior_view.prior.is_none() {
            self.status = "no prior to save yet".into();
            return;
        }
        let stem = self
            .source
            .as_ref()
            .and_then(|s| s.path())
            .and_then(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
            .unwrap_or_else(|| "archive".into());
        let mut k = 0u32;
        let default = loop {
            let name = if k == 0 {
                format!("{stem}.prior.json")
            } else {
                format!("{stem}.prior-{k}.json")
            };
            if std::fs::symlink_metadata(&name).is_err() || k > 10_000 {
                break name;
            }
            k += 1;
        };
        self.search.prompt = Some(WritePrompt {
            kind: PromptKind::Prior,
            cursor: textfield::len(&default),
            path: default,
            confirm: None,
            error: None,
        });
    }

    /// Enter in the write prompt: write, or ask first when the path exists.
    fn write_accept(&mut self) {
        let Some(p) = &mut self.search.prompt else {
            return;
        };
        let typed = p.path.trim().to_string();
        if typed.is_empty() {
            p.error = Some("type the path of the new file".into());
            return;
        }
        let target = std::path::PathBuf::from(&typed);
        // Never through a link, as the CLI refuses: the write replaces the link with a
        // file and leaves what it points at unchanged (a link to the open archive was
        // reported as replaced in place; found by a tester).
        if std::fs::symlink_metadata(&target).is_ok_and(|m| m.file_type().is_symlink()) {
            p.error = Some(format!(
                "{typed} is a symbolic link: type the path of a file (or remove the link)"
            ));
            return;
        }
        let open = self.source.as_ref().and_then(|s| s.path());
        let same = open.as_deref().is_some_and(|o| same_file(o, &target));
        if same && p.kind == PromptKind::Prior {
            p.error = Some(format!("{typed} is the open archive: type another path"));
            return;
        }
        if same {
            p.confirm = Some(format!(
                "{typed} is the open archive: replace it in place with the new programs? (y/n)"
            ));
        } else if std::fs::symlink_metadata(&target).is_ok() {
            if target.is_dir() {
                p.error = Some(format!("{typed} is a folder: type a file path"));
                return;
            }
            p.confirm = Some(format!("{typed} exists: replace it? (y/n)"));
        } else {
            self.start_write(false);
        }
    }

    /// Writes the prompt's file: a copy of the archive with every pending change (on a
    /// worker), or the prior.
    fn start_write(&mut self, overwrite: bool) {
        let Some(prompt) = self.search.prompt.clone() else {
            return;
        };
        if prompt.kind == PromptKind::Prior {
            self.save_prior(&prompt.path, overwrite);
            return;
        }
        let Some(source) = self.source.clone() else {
            self.search.prompt = None;
            return;
        };
        if self.pending.is_empty() {
            self.search.prompt = None;
            return;
        }
        let target = std::path::PathBuf::from(prompt.path.trim());
        let in_place = source
            .path()
            .as_deref()
            .is_some_and(|o| same_file(o, &target));
        let changes: Vec<(usize, Node, Option<Settings>)> = self
            .pending
            .iter()
            .map(|p| (p.tensor, p.program.clone(), p.settings))
            .collect();
        let old_bytes = source.file_sizes().1;
        self.search.prompt = None;
        self.search.written = None;
        let handle = self.worker.spawn(move |ctx| {
            ctx.progress(0, 0, "writing");
            let refs: Vec<(usize, &Node, Option<Settings>)> =
                changes.iter().map(|(t, p, s)| (*t, p, *s)).collect();
            let r = source.rewrite(&target, &refs, overwrite).and_then(|bytes| {
                let reopened = if in_place {
                    Some(source.reopen()?)
                } else {
                    None
                };
                Ok((
                    WriteOutcome {
                        path: target,
                        bytes,
                        old_bytes,
                        in_place,
                        changes: changes.len(),
                    },
                    reopened,
                ))
            });
            Outcome::Written(r)
        });
        self.search.writing = Some(handle);
    }

    /// Writes the Prior view's prior to `path` as JSON (`brevis calibrate`'s format),
    /// replacing a file only when `overwrite`.
    fn save_prior(&mut self, path: &str, overwrite: bool) {
        let Some(prior) = &self.prior_view.prior else {
            self.search.prompt = None;
            return;
        };
        let target = std::path::PathBuf::from(path.trim());
        let input = self
            .source
            .as_ref()
            .and_then(|s| s.path())
            .unwrap_or_default();
        let r = crate::archive::writer::write_output_file(
            &input,
            &target,
            overwrite,
            prior.to_json().as_bytes(),
        )
        .map_err(|e| e.to_string());
        self.search.prompt = None;
        match r {
            Ok(()) => {
                let note = format!("saved the prior to {}", target.display());
                self.prior_view.note = Some(note.clone());
                self.status = note;
                // The search takes it from the file now, as `--prior FILE` would.
                self.search.form.prior_path = target.display().to_string();
                self.search.prior_cursor = textfield::len(&self.search.form.prior_path);
            }
            Err(e) => {
                self.prior_view.note = Some(format!("not saved: {e}"));
                self.status = format!("error: {e}");
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

    /// `r` in the Archive view (and showing it the first time): analyses where the
    /// archive's bytes go on a worker ([`crate::job::why::analyse`]); `x` stops it.
    fn start_analysis(&mut self) {
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
    fn sweep_limit(&mut self, up: bool) {
        let l = self.sweep.limit;
        self.sweep.limit = if up {
            l.saturating_mul(2).min(super::sweep::MAX_LIMIT)
        } else {
            (l / 2).max(1)
        };
    }

    /// `r` in the Sweep view: the selected tensor's record (or a sample of the
    /// archive's records) at budgets 1, 2, 4, ... up to the limit, on a worker, with the
    /// Search form's depth, nodes and prior.
    fn start_sweep(&mut self) {
        if self.sweep.running.is_some() {
            self.status = "a sweep is running (x cancels it)".into();
            return;
        }
        let Some(source) = self.source.clone() else {
            return;
        };
        let (tensors, label) = if self.sweep.sample {
            let t = super::sweep::sample_of(source.as_ref());
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
            let request = super::sweep::SweepRequest {
                tensors,
                label,
                limit,
                opts,
                prior,
            };
            Outcome::Swept(super::sweep::run(source.as_ref(), request, ctx, &live))
        });
        self.sweep.running = Some(handle);
    }

    /// Loads the prior the Search form names into the Prior view (calibrating on a
    /// worker for the calibrated one).
    fn load_prior(&mut self) {
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
    fn start_calibration(&mut self) {
        if self.prior_view.loading.is_some() {
            return;
        }
        let Some(source) = self.source.clone() else {
            return;
        };
        self.prior_view.error = None;
        let handle = self.worker.spawn(move |ctx| {
            ctx.progress(0, 0, "calibrating");
            Outcome::Calibrated(super::searching::calibrate_on(source.as_ref(), &|| {
                ctx.cancelled()
            }))
        });
        self.prior_view.loading = Some(handle);
    }

    /// `+`/`-` in the Prior view: the selected count up or down by one.
    fn prior_step(&mut self, up: bool) {
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
    fn prior_edited(&mut self) {
        if self.prior_view.edited {
            self.search.form.prior = PriorMode::Edited;
        }
    }

    /// `o`: loads the selected tensor's program (or, in a lesson, its example) into the
    /// playground.
    fn play_open(&mut self) {
        if self.view == View::Help {
            if let Some(l) = self.page.checked_sub(1).and_then(|k| self.lessons.get(k)) {
                let text = l.program.to_string();
                let k = self.page - 1;
                self.play.load(&text, Origin::Lesson(k));
                self.show(View::Playground);
                self.status = format!(
                    "the example of lesson {}: edit it (e), check and run it (r)",
                    self.page
                );
            }
            return;
        }
        let (Some(source), Some(t)) = (self.source.clone(), self.selected_tensor()) else {
            return;
        };
        match source.program(t) {
            Ok(p) => {
                self.play.load(&p.to_string(), Origin::Tensor(t));
                self.status = format!(
                    "the program of {}: edit it (e), check and run it (r)",
                    self.row_name(t)
                );
            }
            Err(e) => self.play.result = Some(Err(e)),
        }
    }

    /// `r` in the playground: parses, type-checks, runs and sizes the program against
    /// its tensor (the words its record restores) or its lesson's example, on a worker.
    fn start_play(&mut self) {
        if self.play.running.is_some() {
            return;
        }
        let Some(origin) = self.play.origin else {
            self.play_open();
            return;
        };
        let text = self.play.text();
        let source = self.source.clone();
        let lesson = match origin {
            Origin::Lesson(k) => self.lessons.get(k).map(|l| l.program.clone()),
            Origin::Tensor(_) => None,
        };
        self.play.result = None;
        let handle = self.worker.spawn(move |ctx| {
            let r = (|| {
                let (reference, context) = match (origin, lesson) {
                    (Origin::Lesson(_), Some(p)) => (p, None),
                    (Origin::Tensor(t), _) => {
                        let s = source.ok_or_else(|| "no archive".to_string())?;
                        (s.program(t)?, s.context(t))
                    }
                    _ => return Err("the lesson is gone".to_string()),
                };
                ctx.progress(0, 0, "decoding the tensor");
                let target =
                    crate::dsl::execute_in(&reference, reference.ty().len, context.as_ref())
                        .map_err(|e| format!("the archive's program does not run: {e}"))?;
                ctx.progress(0, 0, "checking");
                super::playground::check(&text, origin, &target, context.as_ref(), &reference)
            })();
            Outcome::Played(r.map(Box::new))
        });
        self.play.running = Some(handle);
    }

    /// `w` in the playground: keeps a program that restores its tensor as a pending
    /// change and asks where to write the pending changes.
    fn play_write(&mut self) {
        let current = self.play.result_current();
        let Some(Ok(r)) = &self.play.result else {
            self.status = "check the program first (r): only a program that restores its \
                           tensor is written"
                .into();
            return;
        };
        if !current {
            self.status = "the text changed since the last check: r checks it again".into();
            return;
        }
        if !r.restores {
            self.status = "nothing written: the program does not restore the tensor".into();
            return;
        }
        let Origin::Tensor(t) = r.origin else {
            self.status = "a lesson's example is not in the archive: nothing to write".into();
            return;
        };
        if let Some(why) = self.unsearchable(t) {
            self.status = why.replace("nothing to search", "nothing to write");
            return;
        }
        if r.bytes == r.reference_bytes && r.diff.is_empty() {
            self.status = "nothing to write: the program is the archive's own".into();
            return;
        }
        let record = self
            .source
            .as_deref()
            .map_or(t, |s| super::sweep::record_key(s, t));
        let change = Pending {
            tensor: t,
            record,
            program: r.program.clone(),
            settings: None,
            old_bytes: r.reference_bytes,
            new_bytes: r.bytes,
            from: "playground".to_string(),
            delta: None,
        };
        self.add_pending(change, true);
        self.open_write_prompt();
    }

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

    fn job_mut(&mut self, id: u64) -> Option<&mut JobHandle> {
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

    fn handle(&mut self, msg: Msg) {
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

    fn finish(&mut self, id: u64, outcome: Outcome) {
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
                                    super::escape_name(&l.output)
                                );
                            } else if let Some(l) = l {
                                let n = s.rows().len();
                                self.status = format!(
                                    "compressed {} ({} tensor{}) into {} in {:.1} s",
                                    super::escape_name(&l.input),
                                    thousands(n as u64),
                                    if n == 1 { "" } else { "s" },
                                    super::escape_name(&l.output),
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
                            .map(|r| super::escape_name(&r.name).into_owned())
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

    fn cache(&mut self, t: usize, r: Result<Arc<Inspection>, String>) {
        self.inspections.retain(|(i, _)| *i != t);
        self.inspections.push_back((t, r));
        while self.inspections.len() > CACHE {
            self.inspections.pop_front();
        }
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
