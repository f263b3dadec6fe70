//! The tensor table: one row per tensor, sortable and filterable, with totals.

use super::super::app::{App, Column};
use super::super::inspect::thousands;
use super::super::model::reduction;
use super::super::{escape_name, escape_typed};
use super::{selected_style, text_width, ACCENT};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Cell, Paragraph, Row, Table, TableState};
use ratatui::Frame;

/// `[30522, 384]`.
pub fn shape_text(shape: &[u64]) -> String {
    let dims: Vec<String> = shape.iter().map(u64::to_string).collect();
    format!("[{}]", dims.join(", "))
}

pub(super) fn draw(frame: &mut Frame, area: Rect, app: &mut App) {
    let show_filter = app.filter_editing || !app.filter.is_empty();
    let [filter_area, table_area] = Layout::vertical([
        Constraint::Length(u16::from(show_filter)),
        Constraint::Min(0),
    ])
    .areas(area);
    if show_filter {
        let cursor = if app.filter_editing { "▏" } else { "" };
        let how = if app.filter_editing {
            "Enter keeps, Esc clears"
        } else {
            "/ edits, Esc clears"
        };
        let line = Line::from(vec![
            Span::styled("filter: ", Style::default().fg(ACCENT)),
            Span::raw(escape_typed(&app.filter).into_owned()),
            Span::raw(cursor),
            Span::styled(
                format!(
                    "   {} of {} tensors ({how})",
                    app.order.len(),
                    app.rows().len()
                ),
                Style::default().fg(Color::DarkGray),
            ),
        ]);
        frame.render_widget(Paragraph::new(line), filter_area);
    }

    let header = Row::new(Column::ALL.iter().map(|&c| {
        let mark = if c == app.sort {
            if app.reverse {
                " ▼"
            } else {
                " ▲"
            }
        } else {
            ""
        };
        let style = if c == app.sort {
            Style::default().fg(ACCENT).add_modifier(Modifier::BOLD)
        } else {
            Style::default().add_modifier(Modifier::BOLD)
        };
        Cell::from(Line::from(format!("{}{mark}", c.title())).alignment(align(c))).style(style)
    }));

    let rows = app.rows();
    let texts: Vec<[String; 8]> = app
        .order
        .iter()
        .map(|&i| {
            let r = &rows[i];
            [
                i.to_string(),
                escape_name(&r.name).into_owned(),
                r.dtype.name().to_string(),
                shape_text(&r.shape),
                thousands(r.original_bytes),
                thousands(r.archive_bytes),
                format!("{:.2}%", r.reduction() * 100.0),
                r.root_op.clone(),
            ]
        })
        .collect();
    let (o, a) = app.order.iter().fold((0u64, 0u64), |(o, a), &i| {
        (
            o.saturating_add(rows[i].original_bytes),
            a.saturating_add(rows[i].archive_bytes),
        )
    });
    let totals = [
        String::new(),
        format!("total of {} tensors", app.order.len()),
        String::new(),
        String::new(),
        thousands(o),
        thousands(a),
        format!("{:.2}%", reduction(o, a) * 100.0),
        String::new(),
    ];
    // Every column but the name is as wide as its widest value (or its title with the
    // sort mark), so numbers are never cut; the name takes what is left.
    let widths: Vec<Constraint> = Column::ALL
        .iter()
        .enumerate()
        .map(|(k, &c)| {
            if c == Column::Name {
                return Constraint::Fill(1);
            }
            let w = texts
                .iter()
                .map(|t| t[k].as_str())
                .chain(std::iter::once(totals[k].as_str()))
                .map(text_width)
                .chain([text_width(c.title()) + 2, min_width(c)])
                .max()
                .unwrap_or(0);
            Constraint::Length(w as u16)
        })
        .collect();
    // The name column gets what the others leave (the highlight symbol takes 2 columns,
    // each gap 1); longer names lose their middle, not their distinguishing end.
    let fixed: usize = widths
        .iter()
        .map(|w| match w {
            Constraint::Length(n) => usize::from(*n),
            _ => 0,
        })
        .sum();
    let name_w = usize::from(table_area.width).saturating_sub(fixed + 2 + Column::ALL.len() - 1);
    let name_k = Column::ALL
        .iter()
        .position(|&c| c == Column::Name)
        .unwrap_or(1);
    let body: Vec<Row> = texts
        .into_iter()
        .map(|mut t| {
            t[name_k] = super::fit_middle(&t[name_k], name_w);
            Row::new(Column::ALL.iter().zip(t).map(|(&c, s)| cell(c, s)))
        })
        .collect();
    let footer = Row::new(Column::ALL.iter().zip(totals).map(|(&c, s)| {
        if c == Column::Name {
            Cell::from(s)
        } else {
            cell(c, s)
        }
    }))
    .style(Style::default().bold().fg(ACCENT));
    // Keep the window full: after the terminal grew, scroll back so that no rows are
    // left out above while blank lines show below (header and footer take a line each).
    let visible = table_area.height.saturating_sub(2) as usize;
    app.pages.table = visible.max(1);
    app.table_offset = super::fill_offset(app.table_offset, app.selected, app.order.len(), visible);

    let empty = app.order.is_empty();
    let table = Table::new(body, widths)
        .header(header)
        .footer(footer)
        .block(Block::default())
        .column_spacing(1)
        .row_highlight_style(selected_style())
        .highlight_symbol("▶ ");
    let mut state = TableState::default()
        .with_offset(app.table_offset)
        .with_selected(if empty { None } else { Some(app.selected) });
    frame.render_stateful_widget(table, table_area, &mut state);
    app.table_offset = state.offset();
    if empty && table_area.height > 3 {
        let msg = if app.rows().is_empty() {
            "the archive holds no tensors"
        } else {
            "no tensor name matches the filter (Esc clears it)"
        };
        let r = Rect {
            y: table_area.y + 1,
            height: 1,
            ..table_area
        };
        frame.render_widget(
            Paragraph::new(msg).style(Style::default().fg(Color::DarkGray)),
            r,
        );
    }
}

/// The width a column gets at least (what fits usual values), so that the layout does
/// not jump between archives.
fn min_width(c: Column) -> usize {
    match c {
        Column::Index => 4,
        Column::Name => 0,
        Column::Dtype | Column::Root => 7,
        Column::Shape => 13,
        Column::Original | Column::Archive | Column::Reduction => 11,
    }
}

fn align(c: Column) -> ratatui::layout::Alignment {
    match c {
        Column::Index | Column::Original | Column::Archive | Column::Reduction => {
            ratatui::layout::Alignment::Right
        }
        _ => ratatui::layout::Alignment::Left,
    }
}

fn cell(c: Column, s: String) -> Cell<'static> {
    Cell::from(Line::from(s).alignment(align(c)))
}
