//! The pending changes: search results and playground programs waiting to be written,
//! each with the change it makes to the archive's length (the record's, and any index
//! entry it adds), and what writing them all gives. One `w` writes them all.

use super::super::app::App;
use super::super::escape_typed;
use super::super::inspect::thousands;
use super::{column_widths, columns_line, fit_end, fit_middle, selected_style, ACCENT};
use ratatui::layout::Rect;
use ratatui::style::{Color, Style};
use ratatui::text::Line;
use ratatui::widgets::Paragraph;
use ratatui::Frame;

pub use super::signed;

pub(super) fn draw(frame: &mut Frame, area: Rect, app: &mut App) {
    let width = usize::from(area.width);
    let height = usize::from(area.height).max(1);
    app.pages.text = height;
    let mut out: Vec<Line> = Vec::new();
    let arch = app.source.as_ref().map_or(0, |s| s.file_sizes().1);
    let n = app.pending.len();
    let head = if n == 0 {
        "no pending changes: a search's smaller result, or a playground program that \
         restores its tensor, waits here until w writes them all"
            .to_string()
    } else {
        let all = match &app.pending_len {
            Some(Ok(len)) => format!(
                ": archive {} → {} B ({} B)",
                thousands(arch),
                thousands(*len),
                signed(*len as i64 - arch as i64)
            ),
            Some(Err(e)) => format!(" (size unknown: {})", escape_typed(e)),
            None => String::new(),
        };
        format!(
            "{n} pending change{} (w writes them all){all}",
            if n == 1 { "" } else { "s" }
        )
    };
    out.push(Line::styled(
        fit_end(&head, width),
        Style::default().fg(ACCENT).bold(),
    ));
    if let Some(w) = app.search.written.as_ref() {
        let line = match w {
            Ok(w) => Line::styled(
                fit_middle(
                    &format!(
                        "✓ wrote {}{}: {} change{}, {} B",
                        escape_typed(&w.path.display().to_string()),
                        if w.in_place { " in place" } else { "" },
                        w.changes,
                        if w.changes == 1 { "" } else { "s" },
                        thousands(w.bytes)
                    ),
                    width,
                ),
                Style::default().fg(Color::Green),
            ),
            Err(e) => Line::styled(
                fit_middle(&format!("✗ write: {}", escape_typed(e)), width),
                Style::default().fg(Color::Red),
            ),
        };
        out.push(line);
    }
    if n > 0 {
        let cells: Vec<Vec<String>> = app
            .pending
            .iter()
            .map(|p| {
                vec![
                    p.delta.map_or_else(|| "?".to_string(), signed),
                    format!("{} → {}", thousands(p.old_bytes), thousands(p.new_bytes)),
                ]
            })
            .collect();
        let w = column_widths(&cells, &[9, 9]);
        out.push(Line::styled(
            columns_line(
                "  tensor",
                &["archive B".into(), "program B".into()],
                &w,
                width,
            ),
            Style::default().fg(Color::DarkGray),
        ));
        for (k, (p, c)) in app.pending.iter().zip(&cells).enumerate() {
            let sel = k == app.pending_selected;
            let mark = if sel { "▶ " } else { "  " };
            let label = format!("{mark}{}", app.row_name(p.tensor));
            let line = columns_line(&label, c, &w, width);
            out.push(if sel {
                Line::styled(line, selected_style())
            } else {
                Line::raw(line)
            });
            let program = p.new_bytes as i64 - p.old_bytes as i64;
            let index = p.delta.map(|d| d - program).filter(|&i| i != 0);
            if let Some(i) = index {
                out.push(Line::raw(fit_end(
                    &format!(
                        "    program {} B, index {} B (a new settings entry)",
                        signed(program),
                        signed(i)
                    ),
                    width,
                )));
            }
            out.push(Line::styled(
                fit_end(&format!("    {}", escape_typed(&p.from)), width),
                Style::default().fg(Color::DarkGray),
            ));
        }
    }
    let per = 3;
    let sel = 2 + usize::from(app.search.written.is_some()) + app.pending_selected * per;
    let skip = (sel + 2).saturating_sub(height);
    frame.render_widget(
        Paragraph::new(out.into_iter().skip(skip).collect::<Vec<_>>()),
        area,
    );
    super::draw_prompt(frame, area, app);
}
