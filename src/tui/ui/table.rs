//! The tensor table: one row per tensor, sortable and filterable, with totals.

use super::super::app::{App, Column};
use super::super::escape_name;
use super::super::inspect::thousands;
use super::super::model::reduction;
use super::{selected_style, ACCENT};
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
        let line = Line::from(vec![
            Span::styled("filter: ", Style::default().fg(ACCENT)),
            Span::raw(escape_name(&app.filter).into_owned()),
            Span::raw(cursor),
            Span::styled(
                format!("   {} of {} tensors", app.order.len(), app.rows().len()),
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
    let body: Vec<Row> = app
        .order
        .iter()
        .map(|&i| {
            let r = &rows[i];
            Row::new(vec![
                cell(Column::Index, i.to_string()),
                cell(Column::Name, escape_name(&r.name).into_owned()),
                cell(Column::Dtype, r.dtype.name().to_string()),
                cell(Column::Shape, shape_text(&r.shape)),
                cell(Column::Original, thousands(r.original_bytes)),
                cell(Column::Archive, thousands(r.archive_bytes)),
                cell(Column::Reduction, format!("{:.2}%", r.reduction() * 100.0)),
                cell(Column::Root, r.root_op.clone()),
            ])
        })
        .collect();

    let (o, a) = app.order.iter().fold((0u64, 0u64), |(o, a), &i| {
        (o + rows[i].original_bytes, a + rows[i].archive_bytes)
    });
    let footer = Row::new(vec![
        Cell::from(""),
        Cell::from(format!("total of {} tensors", app.order.len())),
        Cell::from(""),
        Cell::from(""),
        cell(Column::Original, thousands(o)),
        cell(Column::Archive, thousands(a)),
        cell(
            Column::Reduction,
            format!("{:.2}%", reduction(o, a) * 100.0),
        ),
        Cell::from(""),
    ])
    .style(Style::default().bold().fg(ACCENT));

    let widths = [
        Constraint::Length(4),
        Constraint::Fill(1),
        Constraint::Length(7),
        Constraint::Length(13),
        Constraint::Length(11),
        Constraint::Length(11),
        Constraint::Length(11),
        Constraint::Length(7),
    ];
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
