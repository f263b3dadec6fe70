//! What a key can ask the app to do. Keys map to actions in [`super::event`]; the app
//! applies them in [`super::app::App::apply`].

/// The screens of the app, in tab order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum View {
    /// The tensor table.
    Table,
    /// The program tree of the selected tensor.
    Tree,
    /// The program in the highlighted text form.
    Text,
    /// "Why this size".
    Why,
    /// Histogram and bytes per node.
    Plots,
    /// Re-run the search with other limits.
    Search,
    /// Verify against stored checksums.
    Verify,
    /// Where the whole archive's bytes go.
    Archive,
    /// Search results and playground programs waiting to be written, all with one `w`.
    Changes,
    /// Type a program in its text form, check it, run it, write it.
    Playground,
    /// Archive bytes against the search budget.
    Sweep,
    /// The production prior the search uses, edited in place.
    Prior,
    /// Keys and the operator lessons.
    Help,
}

impl View {
    /// Views reachable with Tab, in order.
    pub const TABS: [View; 13] = [
        View::Table,
        View::Tree,
        View::Text,
        View::Why,
        View::Plots,
        View::Search,
        View::Verify,
        View::Archive,
        View::Changes,
        View::Playground,
        View::Sweep,
        View::Prior,
        View::Help,
    ];

    /// Tab title.
    pub fn title(self) -> &'static str {
        match self {
            View::Table => "Tensors",
            View::Tree => "Tree",
            View::Text => "Text",
            View::Why => "Why",
            View::Plots => "Plots",
            View::Search => "Search",
            View::Verify => "Verify",
            View::Archive => "Archive",
            View::Changes => "Changes",
            View::Playground => "Playground",
            View::Sweep => "Sweep",
            View::Prior => "Prior",
            View::Help => "Help",
        }
    }

    /// The key that shows the view: `1`-`9` and `0` for the first ten tabs, `?` for
    /// help; Sweep and Prior have none of their own (`B` and `P` from the Search view,
    /// or Tab).
    pub fn key(self) -> Option<char> {
        match self {
            View::Help => Some('?'),
            View::Sweep | View::Prior => None,
            v => {
                let i = v.index();
                char::from_digit(((i + 1) % 10) as u32, 10)
            }
        }
    }

    /// The view a digit key shows.
    pub fn of_digit(d: char) -> Option<View> {
        let n = d.to_digit(10)? as usize;
        let i = if n == 0 { 9 } else { n - 1 };
        View::TABS.get(i).copied().filter(|v| v.key() == Some(d))
    }

    /// Position in [`View::TABS`].
    pub fn index(self) -> usize {
        View::TABS.iter().position(|&v| v == self).unwrap_or(0)
    }
}

/// A cursor movement in a text being typed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Move {
    /// One character left.
    Left,
    /// One character right.
    Right,
    /// To the start of the line.
    Home,
    /// To the end of the line.
    End,
    /// One line up (the playground).
    Up,
    /// One line down (the playground).
    Down,
}

/// Which field of the search form is selected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Field {
    /// Expansion budget.
    Budget,
    /// Deepest program.
    Depth,
    /// Most nodes.
    Nodes,
    /// Which production prior orders the search (calibrated, uniform or a file).
    Prior,
    /// The prior file's path (used when the prior is "file").
    PriorFile,
}

impl Field {
    /// The fields in form order.
    pub const ALL: [Field; 5] = [
        Field::Budget,
        Field::Depth,
        Field::Nodes,
        Field::Prior,
        Field::PriorFile,
    ];
}

/// What a line-editing key deletes ([`Action::Kill`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kill {
    /// The whole text (Ctrl-U).
    Line,
    /// The last word and the spaces after it (Ctrl-W); in a path, back to the last `/`.
    Word,
}

/// Something the user asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Leave the program.
    Quit,
    /// Show a view.
    Show(View),
    /// Next tab.
    NextView,
    /// Previous tab.
    PrevView,
    /// Back: close the help, leave a detail view for the table.
    Back,
    /// Cursor up one line.
    Up,
    /// Cursor down one line.
    Down,
    /// Cursor up one page.
    PageUp,
    /// Cursor down one page.
    PageDown,
    /// Cursor to the first line.
    Home,
    /// Cursor to the last line.
    End,
    /// Open the selected tensor's tree (table) or toggle a node (tree).
    Enter,
    /// Expand the node under the cursor.
    Expand,
    /// Collapse the node under the cursor (or go to its parent).
    Collapse,
    /// Expand every node.
    ExpandAll,
    /// Collapse every node.
    CollapseAll,
    /// Sort by the next column.
    SortNext,
    /// Reverse the sort order.
    SortReverse,
    /// Start editing the name filter.
    FilterStart,
    /// Type into the filter.
    FilterChar(char),
    /// Delete the last filter character.
    FilterBackspace,
    /// Keep the filter and stop editing.
    FilterAccept,
    /// Clear the filter and stop editing.
    FilterClear,
    /// Verify the selected tensor.
    VerifyOne,
    /// Verify the whole archive.
    VerifyAll,
    /// Run the search with the form's limits.
    SearchRun,
    /// Select a form field and start editing it.
    SearchField(Field),
    /// Start editing the selected field.
    SearchEdit,
    /// Stop editing, keeping the value.
    SearchEditDone,
    /// Stop editing, restoring the value it had when editing started.
    SearchEditCancel,
    /// Next form field (editing it if one was being edited).
    SearchNextField,
    /// Previous form field.
    SearchPrevField,
    /// Type a character into the field being edited (digits for limits, any character
    /// for the prior file; `+`, `-` and Space step a limit or the prior choice).
    SearchChar(char),
    /// Delete the last character of the field being edited.
    SearchBackspace,
    /// Double the selected limit (or the next prior choice).
    SearchMore,
    /// Halve the selected limit (or the previous prior choice).
    SearchLess,
    /// Ask where to write the new program into a new archive.
    SearchWrite,
    /// Type into the output path.
    PromptChar(char),
    /// Delete the last character of the output path.
    PromptBackspace,
    /// Write to the path typed (or ask to confirm replacing a file).
    PromptAccept,
    /// Close the prompt without writing.
    PromptCancel,
    /// Answer the confirmation: replace the file (true) or not.
    Confirm(bool),
    /// Line editing in the text being typed (the filter, the output path, a search
    /// field): Ctrl-U clears it, Ctrl-W deletes the word before the cursor.
    Kill(Kill),
    /// Cancel the running job.
    Cancel,
    /// Move the cursor in the text being typed.
    Cursor(Move),
    /// Delete the character under the cursor (Delete).
    DeleteForward,
    /// A new line in the playground's text (Enter while editing).
    Newline,
    /// Enter in a list: the Archive view opens Why on the selected tensor.
    Open,
    /// Drop the selected pending change (Changes view).
    Drop,
    /// Sweep: toggle the selected tensor / a sample of the archive.
    SweepTarget,
    /// Prior view: the next (or previous) context.
    PriorContext(bool),
    /// Prior view: learn a prior from the archive's tensors to edit (calibrate).
    PriorCalibrate,
    /// Prior view: save the prior to a file (asks for its path).
    PriorSave,
    /// Start editing (the playground's text, the prior's selected count).
    EditStart,
    /// Stop editing, keeping the text.
    EditDone,
    /// Stop editing the prior's count, restoring it.
    EditCancel,
    /// Type a character (the playground's text, the prior's count).
    Type(char),
    /// Delete the character before the cursor (the playground's text, the prior's count).
    Backspace,
    /// Playground: check, run and size the program against the tensor.
    PlayRun,
    /// Playground (and the end of a lesson): load the selected tensor's program (or the
    /// lesson's example) into the playground.
    PlayOpen,
    /// Next lesson page.
    NextPage,
    /// Previous lesson page.
    PrevPage,
    /// Run the next node of the worked example.
    StepNext,
    /// Undo the last step of the worked example.
    StepPrev,
}
