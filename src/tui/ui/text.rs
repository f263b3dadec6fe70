//! The program in its text form, highlighted with the shipped syntax and theme.

use super::super::app::App;
use super::super::highlight::highlight;
use super::super::inspect::thousands;
use super::{inspected, ACCENT};
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::widgets::{Block, Borders, Paragraph};
use ratatui::Frame;

pub(super) fn draw(frame: &mut Frame, area: Rect, app: &mut App) {
    let Some((ins, name)) = inspected(frame, area, app) else {
        return;
    };
    let lines = highlight(&ins.text);
    let inner_h = area.height.saturating_sub(1) as usize;
    app.pages.text = inner_h.max(1);
    let max = lines.len().saturating_sub(inner_h);
    app.scroll = app.scroll.min(max);
    let block = Block::default()
        .borders(Borders::TOP)
        .title(format!(" {name} · {} bytes ", thousands(ins.total_bytes)))
        .title_style(Style::default().fg(ACCENT).bold());
    let scroll = u16::try_from(app.scroll).unwrap_or(u16::MAX);
    frame.render_widget(Paragraph::new(lines).block(block).scroll((scroll, 0)), area);
}
