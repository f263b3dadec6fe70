//! The Prior view: the production prior the search uses as a table of production
//! weights (counts, the probability they give and its cost in bits, Eq. 9-10) by
//! context, edited in place.

use super::super::app::{App, PriorMode};
use super::super::escape_typed;
use super::super::inspect::thousands;
use super::{column_widths, columns_line, fit_end, fit_middle, message, selected_style, ACCENT};
use ratatui::layout::Rect;
use ratatui::style::{Color, Style};
use ratatui::text::Line;
use ratatui::widgets::Paragraph;
use ratatui::Frame;

pub(super) fn draw(frame: &mut Frame, area: Rect, app: &mut App) {
    let width = usize::from(area.width);
    let pv = &app.prior_view;
    if let Some(h) = &pv.loading {
        message(
            frame,
            area,
            &format!(
                "calibrating a prior on the archive's tensors, as compress does… {:.1} s (x cancels)",
                h.elapsed().as_secs_f64()
            ),
        );
        return;
    }
    let Some(prior) = &pv.prior else {
        let msg = match &pv.error {
            Some(e) => format!("no prior: {}; c calibrates one", escape_typed(e)),
            None => "no prior loaded: c calibrates one on the archive's tensors".to_string(),
        };
        message(frame, area, &msg);
        return;
    };
    let mut lines = Vec::new();
    let used = if app.search.form.prior == PriorMode::Edited {
        "the search uses it (prior: edited)"
    } else if pv.edited {
        "edited; the search uses it once its prior is edited (p in the Search view)"
    } else {
        "the search's prior"
    };
    lines.push(Line::styled(
        fit_middle(
            &format!("prior: {} · {used}", escape_typed(&pv.label)),
            width,
        ),
        Style::default().fg(ACCENT).bold(),
    ));
    if pv.keys.is_empty() {
        lines.push(Line::raw(fit_end(
            "uniform: every production costs 1 bit in every context; c calibrates a prior \
             on this archive to edit",
            width,
        )));
        frame.render_widget(Paragraph::new(lines), area);
        return;
    }
    let key = pv.key().unwrap_or("");
    let total: u64 = prior.counts.get(key).map_or(0, |c| c.values().sum());
    let shown_key = if key.is_empty() {
        "(any context: the coarsest level)"
    } else {
        key
    };
    lines.push(Line::raw(fit_middle(
        &format!(
            "context {}/{} (←→): {shown_key} · {} observations",
            pv.ctx + 1,
            pv.keys.len(),
            thousands(total)
        ),
        width,
    )));
    let rows = pv.rows();
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                thousands(r.count),
                format!("{:.4}", r.q),
                format!("{:.2}", r.cost),
            ]
        })
        .collect();
    let w = column_widths(&cells, &[5, 6, 4]);
    lines.push(Line::styled(
        columns_line(
            "  production",
            &["count".into(), "q".into(), "bits".into()],
            &w,
            width,
        ),
        Style::default().fg(Color::DarkGray),
    ));
    let height = usize::from(area.height);
    // The rows that fit below the three head lines (and a note line), the selected one
    // always among them.
    let room = height.saturating_sub(4).max(1);
    let first = (pv.prod + 1).saturating_sub(room);
    for (k, (r, c)) in rows.iter().zip(&cells).enumerate().skip(first).take(room) {
        let sel = k == pv.prod;
        let editing = sel && pv.editing.is_some();
        let mark = if editing {
            "✎ "
        } else if sel {
            "▶ "
        } else {
            "  "
        };
        let line = columns_line(&format!("{mark}{}", r.prod.name()), c, &w, width);
        lines.push(if editing {
            Line::styled(
                line,
                Style::default().fg(Color::Black).bg(Color::Yellow).bold(),
            )
        } else if sel {
            Line::styled(line, selected_style())
        } else {
            Line::raw(line)
        });
    }
    let note = match &pv.note {
        Some(n) => escape_typed(n).into_owned(),
        None => "e or +/- edits the count; s saves the prior as JSON (brevis calibrate's format)"
            .to_string(),
    };
    lines.push(Line::styled(
        fit_end(&note, width),
        Style::default().fg(Color::DarkGray),
    ));
    frame.render_widget(Paragraph::new(lines), area);
    super::draw_prompt(frame, area, app);
}
