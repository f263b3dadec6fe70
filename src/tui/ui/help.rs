//! Help: the keys of every view (page 0), then one lesson per operator whose worked
//! example the user runs node by node with the real executor.

use super::super::app::App;
use super::super::learn::{bytes, lines, steps, Lesson};
use super::ACCENT;
use ratatui::layout::Rect;
use ratatui::style::{Color, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

const KEYS: &[(&str, &str)] = &[
    ("q, Ctrl-C", "quit (asks first while changes are pending)"),
    (
        "Tab, 1-9 0, ?",
        "switch view (Sweep, Prior: Tab, or B P in Search)",
    ),
    ("↑↓ jk, PgUp PgDn, g G", "move / scroll; Esc goes back"),
    (
        "Enter, s S, / Esc",
        "table: tree; sort, reverse; filter, clear it",
    ),
    ("→ ← l h, Enter, e c", "tree: expand, collapse, toggle, all"),
    ("r", "search view; there: run the search on the tensor"),
    ("e b d n p f, + -", "search: edit a field; double, halve"),
    (
        "← → Home End ^U ^W",
        "in text being typed: cursor, clear, a word",
    ),
    ("w, 9, d", "write every pending change; list them; drop one"),
    (
        "v V, x",
        "verify the tensor / archive; cancel a running job",
    ),
    ("8, Enter", "archive: where the bytes go; Why of a tensor"),
    (
        "0: e, r, o",
        "playground: edit, check and run, load the tensor's",
    ),
    ("t, + -", "sweep: tensor or sample; the largest budget"),
    (
        "← →, e + -, c, s",
        "prior: context; edit a count; calibrate; save",
    ),
    (
        "← → n p o (lessons)",
        "page, step, step back, open in the playground",
    ),
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
    let (width, height) = (usize::from(area.width), usize::from(area.height));
    let rows = super::wrap_fit(&lines, width, usize::MAX);
    let shown = if rows.len() <= height || app.page == 0 || height < 2 {
        // The keys from the top; what does not fit ends in `…`.
        super::wrap_fit(&lines, width, height)
    } else {
        // A lesson taller than the view shows its newest step: the rows above it left
        // out, and said so.
        let keep = height - 1;
        let above = rows.len() - keep;
        let mut shown = vec![Line::styled(
            super::fit_end(&format!("… {above} rows above (p steps back)"), width),
            Style::default().fg(Color::DarkGray),
        )];
        shown.extend(rows.into_iter().skip(above));
        shown
    };
    frame.render_widget(Paragraph::new(shown), area);
}

fn keys_page(pages: usize) -> Vec<Line<'static>> {
    let mut out = vec![
        Line::styled("Keys", Style::default().bold().fg(ACCENT)),
        Line::raw(""),
    ];
    for (k, what) in KEYS {
        out.push(Line::from(vec![
            Span::styled(format!("  {k:<23}"), Style::default().bold()),
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

                if l.show_f32 {
                    let f: Vec<String> = s
                        .words
                        .iter()
                        .map(|&w| format!("{:+.1}", f32::from_bits(w as u32)))
                        .collect();
                    out.push(Line::raw(format!("as F32 values: [{}]", f.join(", "))));
                }
                out.push(Line::styled(
                    "o opens this example in the playground: change it, check it, run it",
                    Style::default().fg(Color::Yellow),
                ));
            }
        }
    }
    out
}
