//! The app's state and how actions change it. Nothing here draws; [`super::ui`] renders
//! this state, [`super::event`] turns keys into [`Action`]s.

use super::action::{Action, Field, View};
use super::inspect::{inspect, Inspection};
use super::learn::{self, Lesson};
use super::model::{Check, Source, TensorRow, VerifyOutcome};
use super::worker::{self, JobHandle, Msg, Outcome, SearchResult, Worker};
use crate::dsl::program_len;
use crate::synth::{synthesize, SearchOptions};
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Inspections kept in memory (each holds a tensor's program).
const CACHE: usize = 6;

/// Rows moved by PageUp / PageDown.
pub const PAGE: usize = 10;

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

/// The search form and its job.
#[derive(Debug)]
pub struct SearchState {
    /// Limits to use.
    pub opts: SearchOptions,
    /// Field being edited.
    pub field: Field,
    /// The running search: tensor and job.
    pub running: Option<(usize, JobHandle)>,
    /// The last result (or why it failed).
    pub result: Option<Result<Box<SearchResult>, String>>,
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
    /// Why the archive could not be made, if it could not.
    pub load_error: Option<String>,
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
    /// Visible rows (indices into the source's rows), sorted and filtered.
    pub order: Vec<usize>,
    /// Selected line in `order`.
    pub selected: usize,
    /// First visible line of the table.
    pub table_offset: usize,
    /// Recent inspections, newest last.
    pub inspections: VecDeque<(usize, Result<Arc<Inspection>, String>)>,
    /// The inspection running: tensor and job.
    pub inspecting: Option<(usize, JobHandle)>,
    /// The tree's state.
    pub tree: TreeState,
    /// Scroll of the text and why views.
    pub scroll: usize,
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
            view: View::Table,
            back_view: View::Table,
            quit: false,
            sort: Column::Index,
            reverse: false,
            filter: String::new(),
            filter_editing: false,
            order: Vec::new(),
            selected: 0,
            table_offset: 0,
            inspections: VecDeque::new(),
            inspecting: None,
            tree: TreeState::default(),
            scroll: 0,
            search: SearchState {
                opts: SearchOptions {
                    budget: 32,
                    ..SearchOptions::default()
                },
                field: Field::Budget,
                running: None,
                result: None,
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

    /// The key mapping's context.
    pub fn key_context(&self) -> super::event::KeyContext {
        super::event::KeyContext {
            view: self.view,
            filter_editing: self.filter_editing,
            loading: self.source.is_none(),
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
            || self.verify.running.is_some()
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

    /// Applies an action.
    pub fn apply(&mut self, action: Action) {
        if self.source.is_none() {
            match action {
                Action::Quit => self.quit = true,
                Action::Cancel => {
                    if let Some(l) = self.loading.take() {
                        l.job.cancel();
                        self.load_error = Some("cancelled: no archive was written".into());
                    }
                    self.quit = true;
                }
                _ => {}
            }
            return;
        }
        match action {
            Action::Quit => self.quit = true,
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
            Action::PageUp => self.move_by(-(PAGE as isize)),
            Action::PageDown => self.move_by(PAGE as isize),
            Action::Home => self.move_by(isize::MIN / 2),
            Action::End => self.move_by(isize::MAX / 2),
            Action::Enter => match self.view {
                View::Table => self.show(View::Tree),
                View::Tree => self.tree_toggle(),
                _ => {}
            },
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
            Action::FilterStart => self.filter_editing = true,
            Action::FilterChar(c) => {
                self.filter.push(c);
                self.selected = 0;
                self.refresh_order();
            }
            Action::FilterBackspace => {
                self.filter.pop();
                self.refresh_order();
            }
            Action::FilterAccept => self.filter_editing = false,
            Action::FilterClear => {
                self.filter_editing = false;
                self.filter.clear();
                self.refresh_order();
            }
            Action::VerifyOne => self.start_verify(true),
            Action::VerifyAll => self.start_verify(false),
            Action::SearchRun => self.start_search(),
            Action::SearchField(f) => self.search.field = f,
            Action::SearchNextField => {
                self.search.field = match self.search.field {
                    Field::Budget => Field::Depth,
                    Field::Depth => Field::Nodes,
                    Field::Nodes => Field::Budget,
                }
            }
            Action::SearchDigit(d) => {
                self.edit_field(|v| v.saturating_mul(10).saturating_add(u64::from(d)))
            }
            Action::SearchBackspace => self.edit_field(|v| v / 10),
            Action::SearchMore => self.edit_field(|v| v.saturating_mul(2).max(1)),
            Action::SearchLess => self.edit_field(|v| v / 2),
            Action::Cancel => self.cancel(),
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

    fn show(&mut self, v: View) {
        if v == View::Help && self.view != View::Help {
            self.back_view = self.view;
        }
        if v != self.view {
            self.scroll = 0;
        }
        self.view = v;
        self.filter_editing = false;
    }

    fn edit_field(&mut self, f: impl Fn(u64) -> u64) {
        let o = &mut self.search.opts;
        match self.search.field {
            Field::Budget => o.budget = f(o.budget).min(1 << 40),
            Field::Depth => o.max_depth = f(u64::from(o.max_depth)).min(32) as u32,
            Field::Nodes => o.max_nodes = f(u64::from(o.max_nodes)).min(1 << 16) as u32,
        }
    }

    fn move_by(&mut self, delta: isize) {
        match self.view {
            View::Table | View::Plots | View::Search | View::Verify => {
                let n = self.order.len();
                if n > 0 {
                    self.selected = step(self.selected, delta, n);
                }
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
        let handle = self.worker.spawn(move |ctx| {
            let r = source
                .program(t)
                .and_then(|p| inspect(t, dtype, p, &|| ctx.cancelled()));
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

    fn start_search(&mut self) {
        if self.search.running.is_some() {
            self.status = "a search is already running (x cancels it)".into();
            return;
        }
        let (Some(source), Some(t)) = (self.source.clone(), self.selected_tensor()) else {
            return;
        };
        let opts = self.search.opts.clone();
        self.search.result = None;
        let handle = self.worker.spawn(move |ctx| {
            let r = (|| {
                let row = &source.rows()[t];
                let old = source.program(t)?;
                let old_bytes = program_len(&old);
                ctx.progress(0, 0, "decoding");
                let bytes = source.decode(t)?;
                let words = super::model::words_of(row.dtype, &bytes)
                    .ok_or_else(|| "tensor bytes are not whole words".to_string())?;
                if ctx.cancelled() {
                    return Err("cancelled".to_string());
                }
                ctx.progress(0, 0, "searching");
                let start = Instant::now();
                let new = synthesize(&words, Some(row.dtype), &opts);
                Ok(Box::new(SearchResult {
                    tensor: t,
                    opts: opts.clone(),
                    old: (old, old_bytes),
                    new,
                    elapsed: start.elapsed(),
                }))
            })();
            Outcome::Searched(r)
        });
        self.search.running = Some((t, handle));
    }

    fn cancel(&mut self) {
        let mut any = false;
        if let Some((_, h)) = self.search.running.take() {
            h.cancel();
            self.search.result = Some(Err("cancelled".into()));
            any = true;
        }
        if let Some(h) = self.verify.running.take() {
            h.cancel();
            self.verify.result = Some(Err("cancelled".into()));
            any = true;
        }
        self.status = if any {
            "cancelled".into()
        } else {
            "nothing to cancel".into()
        };
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
                    self.search.result = Some(Err(what.clone()));
                }
                if self.verify.running.take_if(|h| h.id == id).is_some() {
                    self.verify.result = Some(Err(what.clone()));
                }
                self.status = what;
            }
            Outcome::Opened(r) => {
                if self.loading.as_ref().is_some_and(|l| l.job.id == id) {
                    let l = self.loading.take();
                    match r {
                        Ok(s) => {
                            if let Some(l) = l {
                                self.status = format!(
                                    "compressed {} into {} in {:.1} s",
                                    super::escape_name(&l.input),
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
                    self.search.result = Some(r);
                }
            }
            Outcome::Verified(r) => {
                if self.verify.running.as_ref().is_some_and(|h| h.id == id) {
                    self.verify.running = None;
                    if let Ok(v) = &r {
                        self.status = v.verdict();
                    }
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

/// `pos + delta` clamped to `0..len`.
fn step(pos: usize, delta: isize, len: usize) -> usize {
    if len == 0 {
        return 0;
    }
    let p = pos as isize;
    p.saturating_add(delta).clamp(0, len as isize - 1) as usize
}
