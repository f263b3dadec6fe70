//! Help: the keys of every view (page 0), then one lesson per operator whose worked
//! example the user runs node by node with the real executor.

use super::super::app::App;
use super::super::learn::{bytes, lines, steps, Lesson};
use super::ACCENT;
use ratatui::layout::Rect;
use ratatui::style::{Color, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Wrap};
use ratatui::Frame;

const KEYS: &[(&str, &str)] = &[
    ("q, Ctrl-C", "quit (asks first while changes are pending)"),
    ("Tab, Shift-Tab, 1-9 0, ?", "switch view; Esc goes back"),
    ("↑ ↓ j k, PgUp PgDn, g G", "move / scroll"),
    ("Enter", "table: open the tensor's program tree"),
    ("s, S", "table: sort by the next column, reverse the order"),
    (
        "/, Esc",
        "table: filter by name (Enter keeps it); Esc clears it",
    ),
    (
        "→ ← l h, Enter/Space, e c",
        "tree: expand, collapse, toggle, all",
    ),
    (
        "r",
        "search view (there: run the search on the selected tensor)",
    ),
    (
        "e/Enter, b d n p f",
        "search: edit the selected field / budget depth nodes prior file",
    ),
    (
        "  digits ⌫ + -, Tab",
        "while editing: type, step; next field; Enter done, Esc undo",
    ),
    (
        "  ← → Home End, ^U ^W",
        "in any text typed: move the cursor; clear, delete a word",
    ),
    (
        "w",
        "write every pending change (smaller search results, playground programs)",
    ),
    ("B, P", "search: the budget sweep, the prior"),
    ("v, V", "verify the selected tensor / the whole archive"),
    ("x", "cancel the running job (search, verify, analysis, sweep)"),
    ("8", "archive: where the bytes go; Enter opens Why on a tensor"),
    ("9, d", "the pending changes; d drops one"),
    ("0, e r o", "playground: edit, check and run, load the tensor's"),
    ("t, + -", "sweep: the tensor or a sample; the largest budget"),
    ("← →, e + -, c, s", "prior: context; edit a count; calibrate; save"),
    ("← → (here)", "lesson pages: one per operator"),
    ("n/Space, p, o", "lesson: next node, step back, open in the playground"),
];

pub(super) fn draw(frame: &mut Frame, area: Rect, app: &mut App) {
    let lines = if app.page == 0 {
        keys_page(app.lessons.len())
    } else {
        match app.lessons.get(app.page - 1) {
            Some(l) => lesson_page(l, app.page, app.lessons.len(), app.step),
            None => vec![],
        }
    };
    frame.render_widget(Paragraph::new(lines).wrap(Wrap { trim: false }), area);
}

fn keys_page(pages: usize) -> Vec<Line<'static>> {
    let mut out = vec![
        Line::styled("Keys", Style::default().bold().fg(ACCENT)),
        Line::raw(""),
    ];
    for (k, what) in KEYS {
        out.push(Line::from(vec![
            Span::styled(format!("  {k:<28}"), Style::default().bold()),
            Span::raw(*what),
        ]));
    }
    out.push(Line::raw(""));
    out.push(Line::styled(
        format!("→ or n: {pages} lessons on the program language, each a worked example you run node by node"),
        Style::default().fg(Color::Yellow),
    ));
    out
}

fn words_text(words: &[u64], width: u32) -> String {
    let shown: Vec<String> = words
        .iter()
        .take(8)
        .map(|&w| {
            if width > 16 {
                format!("{w:#x}")
            } else {
                w.to_string()
            }
        })
        .collect();
    let more = if words.len() > 8 { ", …" } else { "" };
    format!("[{}{more}]", shown.join(", "))
}

fn lesson_page(l: &Lesson, page: usize, pages: usize, step: usize) -> Vec<Line<'static>> {
    let st = steps(&l.program);
    let step = step.min(st.len());
    let mut out = vec![
        Line::styled(
            format!("Lesson {page}/{pages}: {}", l.title),
            Style::default().bold().fg(ACCENT),
        ),
        Line::styled(
            format!("rule: {}", l.rule),
            Style::default().fg(Color::Yellow),
        ),
        Line::raw(l.text),
        Line::raw(""),
        Line::styled(
            format!(
                "program ({} bytes serialized); output of each node once run:",
                bytes(&l.program)
            ),
            Style::default().bold(),
        ),
    ];
    let done: Vec<Option<&super::super::learn::Step>> = (0..st.len())
        .map(|i| st[..step].iter().find(|s| s.node == i))
        .collect();
    let current = step.checked_sub(1).and_then(|k| st.get(k)).map(|s| s.node);
    for (i, (depth, line)) in lines(&l.program).into_iter().enumerate() {
        let style = if Some(i) == current {
            Style::default().fg(Color::Black).bg(ACCENT)
        } else {
            Style::default()
        };
        let mut spans = vec![Span::styled(
            format!("  {}{line}", "  ".repeat(depth)),
            style,
        )];
        if let Some(Some(s)) = done.get(i) {
            spans.push(Span::styled(
                format!("  → {}", words_text(&s.words, s.width)),
                Style::default().fg(Color::Green),
            ));
        }
        out.push(Line::from(spans));
    }
    out.push(Line::raw(""));
    match step.checked_sub(1).and_then(|k| st.get(k)) {
        None => out.push(Line::styled(
            "press n or Space to run the first node (children run before their parent)",
            Style::default().fg(Color::Yellow),
        )),
        Some(s) => {
            out.push(Line::styled(
                format!("step {step}/{}: {}", st.len(), s.explain),
                Style::default().fg(Color::Yellow),
            ));
            if step == st.len() {
                out.push(Line::raw(format!(
                    "result: {}",
                    words_text(&s.words, s.width)
                )));
                out.push(Line::styled(
                    "o opens this example in the playground: change it, check it, run it",
                    Style::default().fg(Color::Yellow),
                ));
                if l.show_f32 {
                    let f: Vec<String> = s
                        .words
                        .iter()
                        .map(|&w| format!("{:+.1}", f32::from_bits(w as u32)))
                        .collect();
                    out.push(Line::raw(format!("as F32 values: [{}]", f.join(", "))));
                }
            }
        }
    }
    out
}
