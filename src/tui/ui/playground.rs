//! The playground: a program's text form typed or edited, read back, type-checked
//! against its tensor, run, and sized node by node beside the archive's program.

use super::super::app::App;
use super::super::highlight::highlight;
use super::super::inspect::thousands;
use super::super::playground::Origin;
use super::super::{escape_name, escape_typed};
use super::{column_widths, columns_line, fit_end, fit_middle, fit_spans, text_width, ACCENT};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};
use ratatui::Frame;

/// `line` shown in `width` columns with the cursor at character `col` in view: cut at
/// its end with `…`, or, when the cursor is past the right edge, from further right with
/// `…` at its start.
fn window(line: &str, col: Option<usize>, width: usize) -> String {
    let text = match col {
        Some(c) => super::super::textfield::with_cursor(line, c),
        None => line.to_string(),
    };
    let c = col.unwrap_or(0);
    if text_width(&text) <= width || c + 2 <= width {
        return fit_end(&text, width);
    }
    let skip = c + 2 - width;
    let rest: String = text.chars().skip(skip + 1).collect();
    fit_end(&format!("…{rest}"), width)
}

pub(super) fn draw(frame: &mut Frame, area: Rect, app: &mut App) {
    let width = usize::from(area.width);
    let p = &app.play;
    let Some(origin) = p.origin else {
        super::message(frame, area, "o loads the selected tensor's program to edit");
        return;
    };
    let what = match origin {
        Origin::Tensor(t) => format!("the program of {}", app.row_name(t)),
        Origin::Lesson(k) => format!(
            "the example of lesson {}: {}",
            k + 1,
            app.lessons.get(k).map_or("", |l| l.title)
        ),
    };
    let state = match (p.edited(), p.editing) {
        (_, true) => " · editing (Esc stops)",
        (true, false) => " · edited",
        _ => "",
    };
    let head = Line::styled(
        fit_middle(&format!("playground: {what}{state}"), width),
        Style::default().fg(ACCENT).bold(),
    );
    let err_line = match &p.error {
        Some(e) => Line::styled(
            fit_end(&format!("✗ {e}"), width),
            Style::default().fg(Color::Red),
        ),
        None => Line::styled(
            fit_end(
                "the text reads as a program: r checks it against the tensor and runs it",
                width,
            ),
            Style::default().fg(Color::DarkGray),
        ),
    };
    let body_h = area.height.saturating_sub(2);
    let text_h = (body_h / 2).max(body_h.min(3));
    let [h, e, text_area, result_area] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(1),
        Constraint::Length(text_h),
        Constraint::Min(0),
    ])
    .areas(area);
    frame.render_widget(Paragraph::new(head), h);
    frame.render_widget(Paragraph::new(err_line), e);
    // The text, scrolled to keep the cursor in view.
    let inner_h = usize::from(text_area.height.saturating_sub(1)).max(1);
    let row = p.row.min(p.lines.len().saturating_sub(1));
    let mut scroll = p.scroll.min(p.lines.len().saturating_sub(1));
    if row < scroll {
        scroll = row;
    } else if row >= scroll + inner_h {
        scroll = row + 1 - inner_h;
    }
    let editing = p.editing;
    let text_lines: Vec<Line> = if editing {
        p.lines
            .iter()
            .enumerate()
            .skip(scroll)
            .take(inner_h)
            .map(|(k, l)| {
                let col = (k == row).then_some(p.col);
                Line::raw(window(&escape_typed(l), col, width))
            })
            .collect()
    } else {
        highlight(&p.text())
            .into_iter()
            .skip(scroll)
            .take(inner_h)
            .map(|l| Line::from(fit_spans(l.spans, width)))
            .collect()
    };
    let title = fit_end(
        &format!(" text · line {} of {} ", row + 1, p.lines.len()),
        width,
    );
    frame.render_widget(
        Paragraph::new(text_lines).block(
            Block::default()
                .borders(Borders::TOP)
                .title(title)
                .title_style(Style::default().fg(ACCENT)),
        ),
        text_area,
    );
    // The result.
    let mut lines: Vec<Line> = Vec::new();
    if let Some(h) = &p.running {
        lines.push(Line::styled(
            fit_end(
                &format!(
                    "{} {} · {:.1} s (x cancels)",
                    super::spinner(app.tick),
                    if h.progress.2.is_empty() {
                        "checking"
                    } else {
                        &h.progress.2
                    },
                    h.elapsed().as_secs_f64()
                ),
                width,
            ),
            Style::default().fg(Color::Yellow),
        ));
    }
    match &p.result {
        None if p.running.is_none() => lines.push(Line::styled(
            fit_end(
                "r checks the program against the tensor, runs it and sizes it",
                width,
            ),
            Style::default().fg(Color::DarkGray),
        )),
        None => {}
        Some(Err(e)) => lines.push(Line::styled(
            fit_end(&format!("✗ {}", escape_name(e)), width),
            Style::default().fg(Color::Red).bold(),
        )),
        Some(Ok(r)) => {
            let stale = if r.text == p.text() {
                ""
            } else {
                " (the text changed since: r again)"
            };
            let (verdict, color) = if r.restores {
                (format!("✓ restores it exactly{stale}"), Color::Green)
            } else {
                (
                    format!(
                        "✗ does not restore it: word {} differs{stale}",
                        thousands(r.first_diff.unwrap_or(0))
                    ),
                    Color::Red,
                )
            };
            lines.push(Line::styled(
                fit_end(&verdict, width),
                Style::default().fg(color).bold(),
            ));
            let d = r.bytes as i64 - r.reference_bytes as i64;
            let whose = match r.origin {
                Origin::Tensor(_) => "the archive's",
                Origin::Lesson(_) => "the lesson's",
            };
            let cmp = match d.cmp(&0) {
                std::cmp::Ordering::Less => {
                    format!("{} B smaller than", thousands(d.unsigned_abs()))
                }
                std::cmp::Ordering::Greater => format!("{} B larger than", thousands(d as u64)),
                std::cmp::Ordering::Equal => "the same size as".to_string(),
            };
            let same = if r.diff.is_empty() {
                ", the same program"
            } else {
                ""
            };
            let write = match (r.restores, r.origin) {
                (true, Origin::Tensor(_)) if !r.diff.is_empty() => " · w writes it",
                _ => "",
            };
            lines.push(Line::raw(fit_end(
                &format!(
                    "{} B in {} nodes: {cmp} {whose} {} B{same}{write}",
                    thousands(r.bytes),
                    r.nodes.len(),
                    thousands(r.reference_bytes)
                ),
                width,
            )));
            let cells: Vec<Vec<String>> = r
                .nodes
                .iter()
                .map(|n| vec![thousands(n.own_bytes), thousands(n.subtree_bytes)])
                .collect();
            let w = column_widths(&cells, &[5, 7]);
            lines.push(Line::styled(
                columns_line("node", &["own B".into(), "subtree".into()], &w, width),
                Style::default().fg(Color::DarkGray),
            ));
            for (n, c) in r.nodes.iter().zip(&cells) {
                lines.push(Line::raw(columns_line(
                    &format!("{}{}", "  ".repeat(n.depth), n.line),
                    c,
                    &w,
                    width,
                )));
            }
            if !r.diff.is_empty() {
                lines.push(Line::styled(
                    fit_end(&format!("against {whose} program:"), width),
                    Style::default().fg(Color::DarkGray),
                ));
                for l in &r.diff {
                    let color = if l.starts_with('+') {
                        Color::Green
                    } else {
                        Color::Red
                    };
                    lines.push(Line::from(vec![Span::styled(
                        fit_end(l, width),
                        Style::default().fg(color),
                    )]));
                }
            }
        }
    }
    let rh = usize::from(result_area.height.saturating_sub(1)).max(1);
    app.pages.text = rh;
    let rs = app.play.result_scroll.min(lines.len().saturating_sub(rh));
    app.play.result_scroll = rs;
    app.play.scroll = scroll;
    frame.render_widget(
        Paragraph::new(lines.into_iter().skip(rs).collect::<Vec<_>>()).block(
            Block::default()
                .borders(Borders::TOP)
                .title(fit_end(" result (↑↓ scroll) ", width))
                .title_style(Style::default().fg(ACCENT)),
        ),
        result_area,
    );
    super::draw_prompt(frame, area, app);
}
