//! The program tree of the selected tensor: one line per visible node with its own and
//! subtree bytes and its share of the program, and details of the node under the cursor.

use super::super::app::App;
use super::super::inspect::{codec_summary, share, thousands, Inspection, NodeInfo};
use super::super::model::Sharing;
use super::{bar, fit_name_and_rest, fit_spans, inspected, selected_style, text_width, ACCENT};
use crate::archive::escape_name;
use ratatui::layout::{Alignment, Constraint, Layout, Rect};
use ratatui::style::{Color, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Paragraph, Row, Table, TableState, Wrap};
use ratatui::Frame;

const BAR: usize = 10;

pub(super) fn draw(frame: &mut Frame, area: Rect, app: &mut App) {
    let Some((ins, name)) = inspected(frame, area, app) else {
        return;
    };
    let record = app
        .selected_tensor()
        .and_then(|t| app.source.as_ref().and_then(|s| s.record(t)));
    let record_text = match &record {
        Some(r) => match &r.sharing {
            Sharing::Own => format!(
                " · record {} B (+{} B {})",
                thousands(r.record_bytes),
                thousands(r.framing_bytes()),
                // Format 4 frames a record; a regions record adds its table of regions.
                match r.framing.first() {
                    Some((head, _)) if head.starts_with("record frame") => {
                        if r.framing.len() > 2 {
                            "frame, checksum, regions"
                        } else {
                            "frame, checksum"
                        }
                    }
                    _ => "kind, checksum",
                }
            ),
            Sharing::Group { tensors, share, .. } => format!(
                " · group record {} B for {tensors} tensors, this one's share {} B",
                thousands(r.record_bytes),
                thousands(*share)
            ),
            Sharing::Copy { of } => format!(
                " · a copy of tensor #{of}: record {} B (its program shown)",
                thousands(r.record_bytes)
            ),
            Sharing::Reference {
                op, role, tensor, ..
            } => format!(
                " · record {} B, {op} against {role} tensor {} (the residual's program shown)",
                thousands(r.record_bytes),
                escape_name(tensor)
            ),
            Sharing::Empty => " · no record (empty)".to_string(),
        },
        None => String::new(),
    };
    let rest = format!(
        "  program {} B in {} node{}{record_text}",
        thousands(ins.total_bytes),
        ins.nodes.len(),
        if ins.nodes.len() == 1 { "" } else { "s" },
    );
    // Wrapped onto a second line rather than cut when it does not fit.
    let width = usize::from(area.width).max(1);
    let head_lines = (text_width(&name) + text_width(&rest))
        .div_ceil(width)
        .clamp(1, 2);
    // The node's details take 6 rows; on a short view what the nodes leave, but at
    // least half.
    let visible = app.visible_nodes();
    let avail = area.height.saturating_sub(head_lines as u16);
    let table_want = u16::try_from(visible.len() + 1).unwrap_or(u16::MAX);
    let detail_h = (avail / 2).max(avail.saturating_sub(table_want)).min(6);
    let [head, table_area, detail] = Layout::vertical([
        Constraint::Length(head_lines as u16),
        Constraint::Min(0),
        Constraint::Length(detail_h),
    ])
    .areas(area);
    let (name, rest) = if head_lines == 1 {
        (name, rest)
    } else {
        fit_name_and_rest(&name, &rest, width * 2)
    };
    frame.render_widget(
        Paragraph::new(Line::from(vec![
            Span::styled(name, Style::default().bold().fg(ACCENT)),
            Span::raw(rest),
        ]))
        .wrap(Wrap { trim: false }),
        head,
    );

    // Byte columns as wide as their widest value, so no digit is ever cut.
    let num_width = |title: &str, f: &dyn Fn(&NodeInfo) -> u64| {
        visible
            .iter()
            .filter_map(|&i| ins.nodes.get(i))
            .map(|n| text_width(&thousands(f(n))))
            .chain([text_width(title), 11])
            .max()
            .unwrap_or(0) as u16
    };
    let (own_w, sub_w) = (
        num_width("own B", &|n| n.own_bytes),
        num_width("subtree B", &|n| n.subtree_bytes),
    );
    // Narrow terminals drop the share bars before any text, then cut node text with `…`.
    let bar_w: u16 = if area.width >= 80 { BAR as u16 } else { 0 };
    let gaps = if bar_w > 0 { 4 } else { 3 };
    let node_w = usize::from(area.width.saturating_sub(own_w + sub_w + 7 + bar_w + gaps));
    let rows: Vec<Row> = visible
        .iter()
        .map(|&i| {
            node_row(
                &ins,
                i,
                app.tree.expanded.get(i).copied().unwrap_or(false),
                node_w,
                bar_w > 0,
            )
        })
        .collect();
    let header = Row::new(vec![
        Cell::from("node"),
        Cell::from(Line::from("own B").alignment(Alignment::Right)),
        Cell::from(Line::from("subtree B").alignment(Alignment::Right)),
        Cell::from(Line::from("share").alignment(Alignment::Right)),
    ])
    .style(Style::default().bold());
    let mut widths = vec![
        Constraint::Fill(1),
        Constraint::Length(own_w),
        Constraint::Length(sub_w),
        Constraint::Length(7),
    ];
    if bar_w > 0 {
        widths.push(Constraint::Length(bar_w));
    }
    app.pages.tree = usize::from(table_area.height.saturating_sub(1)).max(1);
    let pos_now = visible.iter().position(|&i| i == app.tree.cursor);
    app.tree.offset = super::fill_offset(
        app.tree.offset,
        pos_now.unwrap_or(0),
        visible.len(),
        table_area.height.saturating_sub(1) as usize,
    );
    let table = Table::new(rows, widths)
        .header(header)
        .row_highlight_style(selected_style());
    let pos = visible.iter().position(|&i| i == app.tree.cursor);
    let mut state = TableState::default()
        .with_offset(app.tree.offset)
        .with_selected(pos);
    frame.render_stateful_widget(table, table_area, &mut state);
    app.tree.offset = state.offset();

    if let Some(n) = ins.nodes.get(app.tree.cursor) {
        frame.render_widget(
            Paragraph::new(super::wrap_fit(
                &detail_lines(&ins, app.tree.cursor, n),
                usize::from(detail.width),
                usize::from(detail.height.saturating_sub(1)),
            ))
            .block(
                Block::default()
                    .borders(Borders::TOP)
                    .title(format!(" node #{} ", app.tree.cursor)),
            ),
            detail,
        );
    }
}

fn node_row(
    ins: &Inspection,
    i: usize,
    expanded: bool,
    node_width: usize,
    bars: bool,
) -> Row<'static> {
    let n = &ins.nodes[i];
    let marker = match (n.children > 0, expanded) {
        (false, _) => "  ",
        (true, true) => "▾ ",
        (true, false) => "▸ ",
    };
    let mut label = vec![
        Span::raw(format!("{}{marker}", "  ".repeat(n.depth))),
        Span::styled(n.label.clone(), Style::default().fg(Color::LightRed).bold()),
        Span::styled(format!(" : {}", n.ty), Style::default().fg(Color::Green)),
    ];
    if let Some(l) = &n.lit {
        if let Some(h) = l.entropy_bits {
            label.push(Span::styled(
                format!("  H={h:.2}b/w"),
                Style::default().fg(Color::DarkGray),
            ));
        }
    }
    let s = share(n.subtree_bytes, ins.total_bytes);
    let mut cells = vec![
        Cell::from(Line::from(fit_spans(label, node_width))),
        Cell::from(Line::from(thousands(n.own_bytes)).alignment(Alignment::Right)),
        Cell::from(Line::from(thousands(n.subtree_bytes)).alignment(Alignment::Right)),
        Cell::from(Line::from(format!("{:.1}%", s * 100.0)).alignment(Alignment::Right)),
    ];
    if bars {
        cells.push(Cell::from(bar(s, BAR)).style(Style::default().fg(ACCENT)));
    }
    Row::new(cells)
}

fn detail_lines(ins: &Inspection, i: usize, n: &NodeInfo) -> Vec<Line<'static>> {
    let mut lines = vec![Line::from(vec![
        Span::styled(n.line.clone(), Style::default().bold()),
        Span::styled(
            format!("  ({})", n.role),
            Style::default().fg(Color::DarkGray),
        ),
    ])];
    lines.push(Line::raw(format!(
        "own {} B · subtree {} B = {:.1}% of the program's {} B · {} word{} of {}",
        thousands(n.own_bytes),
        thousands(n.subtree_bytes),
        share(n.subtree_bytes, ins.total_bytes) * 100.0,
        thousands(ins.total_bytes),
        thousands(n.ty.len),
        if n.ty.len == 1 { "" } else { "s" },
        super::super::inspect::bits(u64::from(n.ty.width))
    )));
    if let Some(l) = &n.lit {
        lines.push(Line::raw(format!(
            "node bytes per codec: {}",
            codec_summary(l)
        )));
        let ent = match (l.entropy_bits, l.distinct) {
            (Some(h), Some(d)) => {
                let spent = if n.ty.len == 0 {
                    0.0
                } else {
                    n.own_bytes as f64 * 8.0 / n.ty.len as f64
                };
                format!(
                    "entropy {h:.3} bits/word (order 0, {} distinct words) · stored at {spent:.3} \
                     bits/word · table {} B",
                    thousands(d),
                    thousands(l.table_bytes)
                )
            }
            _ => "entropy: too many distinct words to count".to_string(),
        };
        lines.push(Line::raw(ent));
        if let Some(e) = &l.error {
            lines.push(Line::styled(
                format!("does not decode: {e}"),
                Style::default().fg(Color::Red),
            ));
        }
    } else if i == 0 {
        lines.push(Line::raw(format!(
            "bits per word: {:.3} of {}",
            ins.why.achieved_bits, ins.why.width
        )));
    }
    lines
}
