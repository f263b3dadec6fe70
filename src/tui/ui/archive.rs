//! Where the whole archive's bytes go ([`crate::job::why`]): the bytes by kind, by dtype
//! and by role, the structure found and what it saved, and the records furthest above
//! their references (Enter opens Why on one).

use super::super::app::App;
use super::super::escape_name;
use super::super::inspect::thousands;
use super::{change, column_widths, columns_line, fit_end, message, selected_style, ACCENT};
use crate::job::why::{WhyReport, KINDS};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, Gauge, Paragraph};
use ratatui::Frame;

pub(super) fn draw(frame: &mut Frame, area: Rect, app: &mut App) {
    let width = usize::from(area.width);
    if let Some(h) = &app.archive_view.running {
        let [text, gauge, _] = Layout::vertical([
            Constraint::Length(2),
            Constraint::Length(3),
            Constraint::Min(0),
        ])
        .areas(area);
        frame.render_widget(
            Paragraph::new(vec![
                Line::raw(fit_end(
                    "where the bytes go: every record is decoded once to find its reference",
                    width,
                )),
                Line::raw(fit_end("x cancels", width)),
            ]),
            text,
        );
        let (d, t, what) = &h.progress;
        let label = fit_end(
            &format!(
                "{d}/{t} {} · {:.1} s",
                escape_name(what),
                h.elapsed().as_secs_f64()
            ),
            width.saturating_sub(2),
        );
        frame.render_widget(
            Gauge::default()
                .block(Block::default().borders(Borders::ALL))
                .gauge_style(Style::default().fg(ACCENT))
                .ratio(h.ratio())
                .label(label),
            gauge,
        );
        return;
    }
    let report = match &app.archive_view.report {
        Some(Ok(r)) => r.clone(),
        Some(Err(e)) => {
            message(
                frame,
                area,
                &format!("cannot analyse the archive: {}", escape_name(e)),
            );
            return;
        }
        None if app.archive_view.cancelled => {
            message(frame, area, "the analysis was cancelled: r analyses again");
            return;
        }
        None => {
            message(frame, area, "r analyses where the archive's bytes go");
            return;
        }
    };
    let (lines, first_ranked) = lines(&report, width, app.archive_view.selected);
    let height = usize::from(area.height).max(1);
    app.pages.text = height;
    // Keep the selected ranked line visible.
    let sel_line = first_ranked + app.archive_view.selected;
    let mut scroll = app
        .archive_view
        .scroll
        .min(lines.len().saturating_sub(height));
    // From the top until the selection moves (the kinds come first).
    if report.tensors_above_reference.is_empty()
        || (app.archive_view.selected == 0 && app.archive_view.scroll == 0)
    {
        scroll = 0;
    } else if sel_line < scroll {
        scroll = sel_line;
    } else if sel_line >= scroll + height {
        scroll = sel_line + 1 - height;
    }
    app.archive_view.scroll = scroll;
    let shown: Vec<Line> = lines.into_iter().skip(scroll).take(height).collect();
    frame.render_widget(Paragraph::new(shown), area);
}

/// The view's lines at `width` columns, and the index of the first line of the ranking.
fn lines(r: &WhyReport, width: usize, selected: usize) -> (Vec<Line<'static>>, usize) {
    let head = Style::default().bold();
    let total = r.archive_bytes;
    let pct = |b: u64| {
        if total == 0 {
            "0.0%".to_string()
        } else {
            format!("{:.1}%", b as f64 / total as f64 * 100.0)
        }
    };
    let mut out = vec![Line::styled(
        fit_end(
            &format!(
                "where the bytes go: {} bytes (file {})",
                thousands(total),
                change(r.original_bytes, total)
            ),
            width,
        ),
        Style::default().fg(ACCENT).bold(),
    )];
    // A table: title row, then (label, bytes) rows with their share, then the total.
    let table = |title: &str, rows: Vec<(String, u64)>, out: &mut Vec<Line<'static>>| {
        let cells: Vec<Vec<String>> = rows
            .iter()
            .map(|(_, b)| vec![thousands(*b), pct(*b)])
            .chain([vec![thousands(total), "100.0%".to_string()]])
            .collect();
        let w = column_widths(&cells, &[5, 6]);
        out.push(Line::styled(
            columns_line(title, &["bytes".into(), "share".into()], &w, width),
            head,
        ));
        for ((label, _), c) in rows.iter().zip(&cells) {
            out.push(Line::raw(columns_line(&format!("  {label}"), c, &w, width)));
        }
        if let Some(c) = cells.last() {
            out.push(Line::styled(
                columns_line("  total: the archive's length", c, &w, width),
                head,
            ));
        }
    };
    let kinds: Vec<(String, u64)> = KINDS
        .iter()
        .map(|(k, label)| (label.to_string(), r.kind(k)))
        .filter(|(l, b)| *b > 0 || !(l.contains("not analysed") || l.starts_with("gaps")))
        .collect();
    table("by kind", kinds, &mut out);
    out.push(Line::raw(""));
    let above = &r.tensors_above_reference;
    let mut first = out.len();
    if above.is_empty() {
        out.push(Line::raw(fit_end(
            "no record's coded words are above its reference",
            width,
        )));
    } else {
        out.push(Line::styled(
            fit_end(
                &format!(
                    "furthest above their references: {} record{} (Enter: why)",
                    above.len(),
                    if above.len() == 1 { "" } else { "s" }
                ),
                width,
            ),
            head,
        ));
        let cells: Vec<Vec<String>> = above
            .iter()
            .map(|a| vec![thousands(a.bytes_above), thousands(a.reference_bytes)])
            .collect();
        let w = column_widths(&cells, &[5, 9]);
        out.push(Line::styled(
            columns_line("  tensor", &["above".into(), "reference".into()], &w, width),
            Style::default().fg(Color::DarkGray),
        ));
        first = out.len();
        for (k, (a, c)) in above.iter().zip(&cells).enumerate() {
            let group = if a.tensors > 1 {
                format!(" +{} in group", a.tensors - 1)
            } else {
                String::new()
            };
            let mark = if k == selected { "▶ " } else { "  " };
            let line = columns_line(
                &format!("{mark}{}{group}", escape_name(&a.name)),
                c,
                &w,
                width,
            );
            out.push(if k == selected {
                Line::styled(line, selected_style())
            } else {
                Line::raw(line)
            });
        }
    }
    out.push(Line::raw(""));
    out.push(Line::styled(
        fit_end("structure found, and what it saved", width),
        head,
    ));
    for s in &r.structure {
        let what = match s.kind {
            "copies" => ("copies", "copy record"),
            "references" => ("coded against a base", "record"),
            "back_references" => ("back references", "backref node"),
            _ => ("dequantization", "dequant node"),
        };
        let text = if s.count == 0 {
            format!("  {}: none", what.0)
        } else {
            let saved = match s.saved_bytes {
                Some(v) if v >= 0 => format!("saves {} B", thousands(v as u64)),
                Some(v) => format!("{} B more", thousands(v.unsigned_abs())),
                None => "saving unknown (base not attached)".to_string(),
            };
            format!(
                "  {}: {} {}{}, {} B, {saved}",
                what.0,
                s.count,
                what.1,
                if s.count == 1 { "" } else { "s" },
                thousands(s.bytes)
            )
        };
        out.push(Line::raw(fit_end(&text, width)));
    }
    out.push(Line::raw(""));
    table("by dtype", r.bytes_by_dtype.clone(), &mut out);
    out.push(Line::raw(""));
    let roles: Vec<(String, u64)> = r
        .bytes_by_role
        .iter()
        .filter(|(_, b)| *b > 0)
        .cloned()
        .collect();
    table("by role (by name)", roles, &mut out);
    out.push(Line::raw(""));
    (out, first)
}
