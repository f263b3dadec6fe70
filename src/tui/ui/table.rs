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
                    "   {} of {} tensor{} ({how})",
                    app.order.len(),
                    app.rows().len(),
                    if app.rows().len() == 1 { "" } else { "s" }
                ),
                Style::default().fg(Color::DarkGray),
            ),
        ]);
        frame.render_widget(Paragraph::new(line), filter_area);
    }

    let header: Vec<Cell> = Column::ALL
        .iter()
        .map(|&c| {
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
        })
        .collect();

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
        format!(
            "total of {} tensor{} (records)",
            thousands(app.order.len() as u64),
            if app.order.len() == 1 { "" } else { "s" }
        ),
        String::new(),
        String::new(),
        thousands(o),
        thousands(a),
        format!("{:.2}%", reduction(o, a) * 100.0),
        String::new(),
    ];
    // Every column but the name is as wide as its widest value (or its title, with the
    // sort mark on the sort column), so numbers are never cut; the name takes what is
    // left. On a narrow terminal the columns lose their padding, then whole columns go,
    // least useful first, until the name keeps at least NAME_MIN columns.
    let natural: Vec<usize> = Column::ALL
        .iter()
        .enumerate()
        .map(|(k, &c)| {
            texts
                .iter()
                .map(|t| t[k].as_str())
                .chain(std::iter::once(totals[k].as_str()))
                .map(text_width)
                .chain(std::iter::once(
                    text_width(c.title()) + if c == app.sort { 2 } else { 0 },
                ))
                .max()
                .unwrap_or(0)
        })
        .collect();
    let shown = shown_columns(usize::from(table_area.width), &natural, app.sort);
    let name_k = Column::ALL
        .iter()
        .position(|&c| c == Column::Name)
        .unwrap_or(1);
    let widths: Vec<Constraint> = shown
        .columns
        .iter()
        .map(|&k| {
            if k == name_k {
                Constraint::Length(shown.name as u16)
            } else {
                Constraint::Length(shown.widths[k] as u16)
            }
        })
        .collect();
    let header = Row::new(shown.columns.iter().map(|&k| header[k].clone()));
    let pick = |t: [String; 8]| -> Vec<(Column, String)> {
        let mut t = t.map(Some);
        shown
            .columns
            .iter()
            .map(|&k| (Column::ALL[k], t[k].take().unwrap_or_default()))
            .collect()
    };
    // Longer names lose their middle, not their distinguishing end.
    let body: Vec<Row> = texts
        .into_iter()
        .map(|mut t| {
            t[name_k] = super::fit_middle(&t[name_k], shown.name);
            Row::new(pick(t).into_iter().map(|(c, s)| cell(c, s)))
        })
        .collect();
    let mut totals = totals;
    totals[name_k] = super::fit_end(&totals[name_k], shown.name);
    let footer = Row::new(pick(totals).into_iter().map(|(c, s)| {
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

/// Fewest columns the name keeps before other columns go.
const NAME_MIN: usize = 12;

/// Columns other than the name in the order they go when the terminal is too narrow:
/// the least useful first, the archive bytes last. The sort column goes only after all
/// the others.
const DROP_ORDER: [Column; 7] = [
    Column::Root,
    Column::Dtype,
    Column::Shape,
    Column::Index,
    Column::Original,
    Column::Reduction,
    Column::Archive,
];

/// The table's layout for a width: which columns show and how wide each is.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Shown {
    /// Indices into [`Column::ALL`] of the columns shown, in display order.
    columns: Vec<usize>,
    /// Width of every column (indexed as [`Column::ALL`]; the name's is unused).
    widths: Vec<usize>,
    /// Width of the name column.
    name: usize,
}

/// The columns that fit `width` cells given each column's `natural` width (its widest
/// value or title, indexed as [`Column::ALL`]): every column padded to [`min_width`]
/// when that leaves the name [`NAME_MIN`] columns, otherwise unpadded and without the
/// columns that do not fit, dropped in [`DROP_ORDER`] (the `sort` column last). A
/// number column is never narrower than its values, so numbers are never cut; at the
/// very least the name is shown alone.
fn shown_columns(width: usize, natural: &[usize], sort: Column) -> Shown {
    // The highlight symbol takes 2 cells; columns are 1 cell apart.
    let room = width.saturating_sub(2);
    let need = |cols: &[usize], widths: &[usize]| -> usize {
        cols.iter()
            .filter(|&&k| Column::ALL[k] != Column::Name)
            .map(|&k| widths[k])
            .sum::<usize>()
            + cols.len().saturating_sub(1)
    };
    let all: Vec<usize> = (0..Column::ALL.len()).collect();
    let padded: Vec<usize> = Column::ALL
        .iter()
        .zip(natural)
        .map(|(&c, &n)| n.max(min_width(c)))
        .collect();
    if need(&all, &padded) + NAME_MIN <= room {
        return Shown {
            name: room - need(&all, &padded),
            columns: all,
            widths: padded,
        };
    }
    let mut order: Vec<Column> = DROP_ORDER.iter().copied().filter(|&c| c != sort).collect();
    order.extend(DROP_ORDER.iter().copied().filter(|&c| c == sort));
    let mut columns = all;
    let mut drop = order.into_iter();
    while need(&columns, natural) + NAME_MIN > room {
        let Some(c) = drop.next() else {
            break;
        };
        columns.retain(|&k| Column::ALL[k] != c);
    }
    Shown {
        name: room.saturating_sub(need(&columns, natural)),
        columns,
        widths: natural.to_vec(),
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
