//! The state of each view that [`App`] holds: the tensor table's columns, the tree's
//! expansion, the search form and job, the write prompt and pending changes, the verify
//! job, the Archive view's report.

use super::*;

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
