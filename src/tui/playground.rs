//! The playground: a program typed or edited in its text form (docs/design.md §3), read
//! back with [`crate::dsl::parse`], type-checked against a tensor (or a lesson's
//! example), run, and sized node by node; written into the archive when it restores the
//! tensor exactly.

use super::action::{Kill, Move};
use super::textfield;
use crate::dsl::parse::{parse, ParseError};
use crate::dsl::{execute_in, program_len, size_report, text::node_line, Node};
use crate::tensor::Words;

/// What the playground's program is checked against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// Tensor `i` of the archive (its record's words; a group's for a tensor in one).
    Tensor(usize),
    /// The worked example of lesson `k` (its output words).
    Lesson(usize),
}

/// One node of a checked program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlayNode {
    /// Depth (root 0).
    pub depth: usize,
    /// Its text-form line.
    pub line: String,
    /// Its own bytes.
    pub own_bytes: u64,
    /// Bytes of its subtree.
    pub subtree_bytes: u64,
}

/// The outcome of checking and running the playground's program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlayResult {
    /// What it was checked against.
    pub origin: Origin,
    /// The text checked.
    pub text: String,
    /// The program built from it.
    pub program: Node,
    /// Its serialized length in bytes.
    pub bytes: u64,
    /// Its nodes with their exact bytes, pre-order.
    pub nodes: Vec<PlayNode>,
    /// Whether it produces exactly the target's words.
    pub restores: bool,
    /// The first word where it differs (when it does not restore).
    pub first_diff: Option<u64>,
    /// The reference program's bytes (the archive's, or the lesson's).
    pub reference_bytes: u64,
    /// Lines of the reference's text form not in this one (`-`) and of this one not in
    /// the reference's (`+`), in order.
    pub diff: Vec<String>,
}

/// The playground's state.
#[derive(Debug, Default)]
pub struct Playground {
    /// The text, one entry per line.
    pub lines: Vec<String>,
    /// Cursor line.
    pub row: usize,
    /// Cursor column (characters).
    pub col: usize,
    /// Whether keys type into the text.
    pub editing: bool,
    /// First text line shown.
    pub scroll: usize,
    /// First line of the result shown.
    pub result_scroll: usize,
    /// What the text was loaded for and is checked against.
    pub origin: Option<Origin>,
    /// The text as loaded (to tell an edited text).
    pub loaded: String,
    /// The text's parse error, kept up to date as it is typed.
    pub error: Option<ParseError>,
    /// The last check (or why it could not run).
    pub result: Option<Result<Box<PlayResult>, String>>,
    /// The check running.
    pub running: Option<super::worker::JobHandle>,
}

impl Playground {
    /// The whole text.
    pub fn text(&self) -> String {
        let mut s = self.lines.join("\n");
        s.push('\n');
        s
    }

    /// Loads `text` for `origin`, cursor at the start, not editing.
    pub fn load(&mut self, text: &str, origin: Origin) {
        self.lines = text.lines().map(str::to_string).collect();
        if self.lines.is_empty() {
            self.lines.push(String::new());
        }
        self.row = 0;
        self.col = 0;
        self.scroll = 0;
        self.result_scroll = 0;
        self.origin = Some(origin);
        self.loaded = self.text();
        self.result = None;
        self.reparse();
    }

    /// Whether the text differs from what was loaded.
    pub fn edited(&self) -> bool {
        self.text() != self.loaded
    }

    /// Whether the last check is of the text as it is now.
    pub fn result_current(&self) -> bool {
        matches!(&self.result, Some(Ok(r)) if r.text == self.text())
    }

    /// Reads the text again for its parse error.
    pub fn reparse(&mut self) {
        self.error = parse(&self.text()).err();
    }

    fn line_mut(&mut self) -> &mut String {
        if self.lines.is_empty() {
            self.lines.push(String::new());
        }
        self.row = self.row.min(self.lines.len() - 1);
        &mut self.lines[self.row]
    }

    /// Types `c` at the cursor.
    pub fn insert(&mut self, c: char) {
        let mut col = self.col;
        textfield::insert(self.line_mut(), &mut col, c);
        self.col = col;
        self.reparse();
    }

    /// Splits the line at the cursor, keeping the indentation.
    pub fn newline(&mut self) {
        let col = self.col;
        let line = self.line_mut().clone();
        let at = line.char_indices().nth(col).map_or(line.len(), |(b, _)| b);
        let indent: String = line.chars().take_while(|&c| c == ' ').collect();
        let (head, tail) = line.split_at(at);
        let tail = tail.trim_start_matches(' ');
        let row = self.row;
        self.lines[row] = head.to_string();
        self.lines.insert(row + 1, format!("{indent}{tail}"));
        self.row = row + 1;
        self.col = textfield::len(&indent);
        self.reparse();
    }

    /// Backspace: the character before the cursor, or joins the line with the one above.
    pub fn backspace(&mut self) {
        let mut col = self.col;
        if textfield::backspace(self.line_mut(), &mut col) {
            self.col = col;
        } else if self.row > 0 {
            let line = self.lines.remove(self.row);
            self.row -= 1;
            self.col = textfield::len(&self.lines[self.row]);
            self.lines[self.row].push_str(&line);
        }
        self.reparse();
    }

    /// Delete: the character under the cursor, or joins the next line to this one.
    pub fn delete(&mut self) {
        let mut col = self.col;
        if !textfield::delete(self.line_mut(), &mut col) && self.row + 1 < self.lines.len() {
            let next = self.lines.remove(self.row + 1);
            self.lines[self.row].push_str(&next);
        }
        self.reparse();
    }

    /// Moves the cursor; up and down keep the column where the line is long enough.
    pub fn move_cursor(&mut self, m: Move) {
        match m {
            Move::Up => self.row = self.row.saturating_sub(1),
            Move::Down => self.row = (self.row + 1).min(self.lines.len().saturating_sub(1)),
            m => {
                let mut col = self.col;
                let line = self.line_mut().clone();
                textfield::move_cursor(&line, &mut col, m);
                self.col = col;
            }
        }
        let n = self.lines.get(self.row).map_or(0, |l| textfield::len(l));
        self.col = self.col.min(n);
    }

    /// Ctrl-U / Ctrl-W on the cursor's line.
    pub fn kill(&mut self, k: Kill) {
        let mut col = self.col;
        textfield::kill(self.line_mut(), &mut col, k);
        self.col = col;
        self.reparse();
    }
}

/// Checks `text` against `target`, the words the program must produce (with `context`,
/// the base words of a reference record's residual), reading literals it leaves out
/// from `reference` where the target cannot tell them ([`crate::dsl::parse`]); runs it
/// and sizes it node by node.
///
/// # Errors
/// The parse or type error, with its line and column.
pub fn check(
    text: &str,
    origin: Origin,
    target: &Words,
    context: Option<&Words>,
    reference: &Node,
) -> Result<PlayResult, String> {
    let sketch = parse(text).map_err(|e| e.to_string())?;
    let program = sketch
        .build(Some(target), Some(reference))
        .map_err(|e| e.to_string())?;
    let out = execute_in(&program, program.ty().len, context)
        .map_err(|e| format!("the program does not run: {e}"))?;
    let restores = &out == target;
    let first_diff = (!restores).then(|| {
        (0..out.len().min(target.len()))
            .find(|&i| out.get(i) != target.get(i))
            .unwrap_or(out.len().min(target.len())) as u64
    });
    let report = size_report(&program);
    let mut nodes = Vec::with_capacity(report.len());
    let mut stack = vec![&program];
    while let Some(n) = stack.pop() {
        let r = &report[nodes.len()];
        nodes.push(PlayNode {
            depth: r.depth,
            line: node_line(n),
            own_bytes: r.own_bytes,
            subtree_bytes: r.subtree_bytes,
        });
        stack.extend(n.children().iter().rev());
    }
    let diff = line_diff(&reference.to_string(), &program.to_string());
    Ok(PlayResult {
        origin,
        text: text.to_string(),
        bytes: program_len(&program),
        program,
        nodes,
        restores,
        first_diff,
        reference_bytes: program_len(reference),
        diff,
    })
}

/// The lines of `old` not in `new` (`- line`) and of `new` not in `old` (`+ line`), in
/// the order of a longest common subsequence of the two (as `diff` shows them). Empty
/// when they are the same.
pub fn line_diff(old: &str, new: &str) -> Vec<String> {
    let a: Vec<&str> = old.lines().collect();
    let b: Vec<&str> = new.lines().collect();
    // Programs have at most a few hundred lines; beyond that, say only how many differ.
    if a.len() * b.len() > 4_000_000 {
        let changed = a.iter().zip(&b).filter(|(x, y)| x != y).count() + a.len().abs_diff(b.len());
        return vec![format!("~ {changed} lines differ")];
    }
    let mut l = vec![vec![0u32; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            l[i][j] = if a[i] == b[j] {
                l[i + 1][j + 1] + 1
            } else {
                l[i + 1][j].max(l[i][j + 1])
            };
        }
    }
    let (mut i, mut j) = (0, 0);
    let mut out = Vec::new();
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            i += 1;
            j += 1;
        } else if i < a.len() && (j == b.len() || l[i + 1][j] >= l[i][j + 1]) {
            out.push(format!("- {}", a[i]));
            i += 1;
        } else {
            out.push(format!("+ {}", b[j]));
            j += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn editing_splits_and_joins_lines() {
        let mut p = Playground::default();
        p.load("concat : u8[2]\n  const 1 : u8[1]", Origin::Lesson(0));
        p.row = 1;
        p.col = 17;
        p.newline();
        assert_eq!(p.lines, ["concat : u8[2]", "  const 1 : u8[1]", "  "]);
        assert_eq!((p.row, p.col), (2, 2));
        for c in "const 2 : u8[1]".chars() {
            p.insert(c);
        }
        assert!(p.error.is_none(), "{:?}", p.error);
        assert!(p.edited());
        p.move_cursor(Move::Home);
        p.backspace();
        assert_eq!(p.lines[1], "  const 1 : u8[1]  const 2 : u8[1]");
        let e = p.error.clone().unwrap();
        assert_eq!((e.line, e.column), (2, 20));
    }

    #[test]
    fn the_diff_shows_lines_taken_out_and_put_in() {
        let d = line_diff("a\nb\nc\n", "a\nx\nc\n");
        assert_eq!(d, ["- b", "+ x"]);
        assert!(line_diff("a\n", "a\n").is_empty());
    }
}
