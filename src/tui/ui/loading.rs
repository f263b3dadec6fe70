//! The screen shown while a `.safetensors` file is compressed before it is opened.

use super::super::app::App;
use super::super::{escape_name, escape_typed};
use super::{spinner, ACCENT};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, Gauge, Paragraph, Wrap};
use ratatui::Frame;

pub(super) fn draw(frame: &mut Frame, area: Rect, app: &mut App) {
    let [_, mid, _] = Layout::vertical([
        Constraint::Fill(1),
        Constraint::Length(8),
        Constraint::Fill(1),
    ])
    .areas(area);
    let Some(l) = &app.loading else {
        let msg = app
            .load_error
            .clone()
            .or_else(|| app.exit_note.clone())
            .unwrap_or_else(|| "nothing to show".into());
        frame.render_widget(
            Paragraph::new(escape_typed(&msg).into_owned()).wrap(Wrap { trim: true }),
            mid,
        );
        return;
    };
    let [text, gauge, keys] = Layout::vertical([
        Constraint::Length(4),
        Constraint::Length(3),
        Constraint::Length(1),
    ])
    .areas(mid);
    frame.render_widget(
        Paragraph::new(vec![
            Line::styled(
                format!(
                    "{} compressing {}",
                    spinner(app.tick),
                    escape_name(&l.input)
                ),
                Style::default().bold().fg(ACCENT),
            ),
            Line::raw(format!("into {}", escape_name(&l.output))),
        ])
        .wrap(Wrap { trim: true }),
        text,
    );
    let (d, t, what) = &l.job.progress;
    let label = if *t == 0 {
        format!("reading… {:.1} s", l.job.elapsed().as_secs_f64())
    } else {
        format!(
            "{d}/{t} tensors · {} · {:.1} s",
            escape_name(what),
            l.job.elapsed().as_secs_f64()
        )
    };
    frame.render_widget(
        Gauge::default()
            .block(Block::default().borders(Borders::ALL))
            .gauge_style(Style::default().fg(ACCENT))
            .ratio(l.job.ratio())
            .label(label),
        gauge,
    );
    let keys_text = if l.too_late {
        " too late to cancel: the archive is written; opening it"
    } else {
        " x/Esc cancel   q quit"
    };
    frame.render_widget(Paragraph::new(keys_text), keys);
}
