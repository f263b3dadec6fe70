//! Plots: a histogram of the tensor's values (the exponent field for floats) and the
//! bytes held by each node.

use super::super::app::App;
use super::super::inspect::{share, thousands, Histogram, Inspection};
use super::{fit_end, fit_name_and_rest, inspected, ACCENT};
use ratatui::layout::{Constraint, Direction, Layout, Rect};
use ratatui::style::{Color, Style};
use ratatui::text::Line;
use ratatui::widgets::{Bar, BarChart, Block, Borders, Paragraph};
use ratatui::Frame;

pub(super) fn draw(frame: &mut Frame, area: Rect, app: &mut App) {
    let Some((ins, name)) = inspected(frame, area, app) else {
        return;
    };
    let [left, right] =
        Layout::horizontal([Constraint::Percentage(60), Constraint::Percentage(40)]).areas(area);
    histogram(frame, left, &ins.hist, &name);
    node_bytes(frame, right, &ins);
}

/// Groups bins so that at most `slots` bars remain (sums of adjacent bins).
fn group(bins: &[(u64, u64)], slots: usize) -> Vec<(u64, u64, u64)> {
    let slots = slots.max(1);
    let per = bins.len().div_ceil(slots).max(1);
    bins.chunks(per)
        .map(|c| {
            let lo = c.first().map_or(0, |b| b.0);
            let hi = c.last().map_or(0, |b| b.0);
            (lo, hi, c.iter().map(|b| b.1).sum())
        })
        .collect()
}

fn histogram(frame: &mut Frame, area: Rect, h: &Histogram, name: &str) {
    // The title sits in the top border, between the corners.
    let (name, rest) = fit_name_and_rest(
        &format!(" {name}"),
        &format!(": {} ", h.title),
        usize::from(area.width.saturating_sub(2)),
    );
    let block = Block::default()
        .borders(Borders::ALL)
        .title(format!("{name}{rest}"))
        .title_style(Style::default().fg(ACCENT).bold());
    let inner = block.inner(area);
    frame.render_widget(block, area);
    if h.bins.is_empty() || inner.width == 0 || inner.height == 0 {
        return;
    }
    let [chart_area, caption] =
        Layout::vertical([Constraint::Min(0), Constraint::Length(1)]).areas(inner);
    // Bars of width 3 with a gap of 1 leave room for 3-digit labels.
    let slots = (inner.width as usize / 4).max(1);
    let groups = group(&h.bins, slots);
    let per = h.bins.len().div_ceil(slots).max(1);
    let total: u64 = h.bins.iter().map(|b| b.1).sum();
    let mut top: Vec<(u64, u64)> = h.bins.iter().copied().filter(|b| b.1 > 0).collect();
    top.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let common: Vec<String> = top
        .iter()
        .take(4)
        .map(|&(v, c)| format!("{v} {:.1}%", share(c, total) * 100.0))
        .collect();
    let caption_text = format!(
        "{}most common: {}",
        if per > 1 {
            format!("each bar sums {per} values · ")
        } else {
            String::new()
        },
        common.join(" · ")
    );
    frame.render_widget(
        Paragraph::new(caption_text).style(Style::default().fg(Color::Gray)),
        caption,
    );
    let bars: Vec<Bar> = groups
        .iter()
        .map(|&(lo, hi, c)| {
            let label = if lo == hi {
                lo.to_string()
            } else {
                format!("{lo}-")
            };
            Bar::default()
                .value(c)
                .text_value(String::new())
                .label(Line::from(label))
        })
        .collect();
    let chart = BarChart::default()
        .data(ratatui::widgets::BarGroup::default().bars(&bars))
        .bar_width(3)
        .bar_gap(1)
        .bar_style(Style::default().fg(ACCENT))
        .label_style(Style::default().fg(Color::Gray));
    frame.render_widget(chart, chart_area);
}

fn node_bytes(frame: &mut Frame, area: Rect, ins: &Inspection) {
    let block = Block::default()
        .borders(Borders::ALL)
        .title(fit_end(
            &format!(" own bytes per node (of {}) ", thousands(ins.total_bytes)),
            usize::from(area.width.saturating_sub(2)),
        ))
        .title_style(Style::default().fg(ACCENT).bold());
    let inner = block.inner(area);
    frame.render_widget(block, area);
    if inner.width == 0 || inner.height == 0 {
        return;
    }
    let bars: Vec<Bar> = ins
        .nodes
        .iter()
        .enumerate()
        .take(inner.height as usize)
        .map(|(i, n)| {
            Bar::default()
                .value(n.own_bytes)
                .text_value(thousands(n.own_bytes))
                .label(Line::from(format!("#{i} {}", n.label)))
        })
        .collect();
    let chart = BarChart::default()
        .direction(Direction::Horizontal)
        .data(ratatui::widgets::BarGroup::default().bars(&bars))
        .bar_width(1)
        .bar_gap(0)
        .bar_style(Style::default().fg(ACCENT))
        .value_style(Style::default().fg(Color::Black).bg(ACCENT));
    frame.render_widget(chart, inner);
}
