//! Re-run the search on the selected tensor with other limits, in the background, and
//! compare the archive's program with the new one side by side.

use super::super::action::Field;
use super::super::app::App;
use super::super::escape_name;
use super::super::highlight::highlight;
use super::super::inspect::thousands;
use super::{spinner, ACCENT};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Wrap};
use ratatui::Frame;

pub(super) fn draw(frame: &mut Frame, area: Rect, app: &mut App) {
    let [form, status, body] = Layout::vertical([
        Constraint::Length(2),
        Constraint::Length(2),
        Constraint::Min(0),
    ])
    .areas(area);
    let name = app
        .selected_row()
        .map(|r| escape_name(&r.name).into_owned())
        .unwrap_or_default();
    let o = &app.search.opts;
    let field = |f: Field, key: &str, label: &str, v: u64| {
        let sel = app.search.field == f;
        let style = if sel {
            Style::default().fg(Color::Black).bg(ACCENT).bold()
        } else {
            Style::default().bold()
        };
        vec![
            Span::raw(format!("{key}:{label} ")),
            Span::styled(format!(" {v} "), style),
            Span::raw("   "),
        ]
    };
    let mut spans = vec![Span::styled(
        format!("search {name}  "),
        Style::default().fg(ACCENT).bold(),
    )];
    spans.extend(field(Field::Budget, "b", "budget", o.budget));
    spans.extend(field(Field::Depth, "d", "depth", u64::from(o.max_depth)));
    spans.extend(field(Field::Nodes, "n", "nodes", u64::from(o.max_nodes)));
    frame.render_widget(
        Paragraph::new(Line::from(spans)).wrap(Wrap { trim: false }),
        form,
    );

    let status_line = if let Some((t, h)) = &app.search.running {
        let tname = app
            .rows()
            .get(*t)
            .map(|r| escape_name(&r.name).into_owned())
            .unwrap_or_default();
        Line::styled(
            format!(
                "{} {} {tname} for {:.1} s… (x cancels)",
                spinner(app.tick),
                if h.progress.2.is_empty() {
                    "working on"
                } else {
                    &h.progress.2
                },
                h.elapsed().as_secs_f64()
            ),
            Style::default().fg(Color::Yellow),
        )
    } else {
        match &app.search.result {
            None => Line::raw("Enter runs the search on the selected tensor with these limits"),
            Some(Err(e)) => Line::styled(
                format!("search: {}", escape_name(e)),
                Style::default().fg(Color::Red),
            ),
            Some(Ok(r)) => {
                let (old, new) = (r.old.1, r.new.bytes);
                let diff = new as i64 - old as i64;
                let pct = if old == 0 {
                    0.0
                } else {
                    diff as f64 / old as f64 * 100.0
                };
                let verdict = match diff.cmp(&0) {
                    std::cmp::Ordering::Less => format!(
                        "{} bytes smaller ({pct:.2}%)",
                        thousands(diff.unsigned_abs())
                    ),
                    std::cmp::Ordering::Greater => {
                        format!("{} bytes larger (+{pct:.2}%)", thousands(diff as u64))
                    }
                    std::cmp::Ordering::Equal => "same size".to_string(),
                };
                let s = &r.new.stats;
                let tname = app
                    .rows()
                    .get(r.tensor)
                    .map(|row| escape_name(&row.name).into_owned())
                    .unwrap_or_default();
                Line::from(vec![
                    Span::styled(
                        format!(
                            "{tname}: archive {} B → new {} B: {verdict}",
                            thousands(old),
                            thousands(new)
                        ),
                        Style::default().bold().fg(if diff < 0 { Color::Green } else { Color::Yellow }),
                    ),
                    Span::raw(format!(
                        "  · budget {} depth {} nodes {} · {} expansions, {} candidates{} · {:.2} s",
                        r.opts.budget,
                        r.opts.max_depth,
                        r.opts.max_nodes,
                        s.expansions,
                        s.candidates,
                        if s.budget_exhausted { ", budget ran out" } else { "" },
                        r.elapsed.as_secs_f64()
                    )),
                ])
            }
        }
    };
    frame.render_widget(
        Paragraph::new(status_line).wrap(Wrap { trim: false }),
        status,
    );

    let [left, right] =
        Layout::horizontal([Constraint::Percentage(50), Constraint::Percentage(50)]).areas(body);
    let (old_text, new_text, old_b, new_b) = match &app.search.result {
        Some(Ok(r)) => (
            r.old.0.to_string(),
            r.new.program.to_string(),
            Some(r.old.1),
            Some(r.new.bytes),
        ),
        _ => match app.current() {
            Some(Ok(ins)) => (ins.text.clone(), String::new(), Some(ins.total_bytes), None),
            _ => (String::new(), String::new(), None, None),
        },
    };
    let title = |what: &str, b: Option<u64>| match b {
        Some(b) => format!(" {what} · {} B ", thousands(b)),
        None => format!(" {what} "),
    };
    for (area, text, t) in [
        (left, old_text, title("in the archive", old_b)),
        (right, new_text, title("new", new_b)),
    ] {
        let block = Block::default()
            .borders(Borders::ALL)
            .title(t)
            .title_style(Style::default().fg(ACCENT).bold());
        frame.render_widget(Paragraph::new(highlight(&text)).block(block), area);
    }
}
