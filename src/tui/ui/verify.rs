//! Verify one tensor or the whole archive against the stored checksums.

use super::super::app::App;
use super::super::escape_name;
use super::ACCENT;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, Gauge, Paragraph, Wrap};
use ratatui::Frame;

pub(super) fn draw(frame: &mut Frame, area: Rect, app: &mut App) {
    let intro_text = "Decodes tensors from the archive alone and compares them with the xxh3-64 \
                      checksums stored when it was written: v the selected tensor, V everything.";
    // The intro as tall as its wrapped rows, leaving the gauge and the verdict theirs.
    let intro_lines = [Line::raw(intro_text)];
    let intro_rows = super::wrap_fit(&intro_lines, usize::from(area.width), 4).len() as u16;
    let intro_h = intro_rows.min(area.height.saturating_sub(5)).max(1);
    let [intro, gauge, verdict, details] = Layout::vertical([
        Constraint::Length(intro_h),
        Constraint::Length(3),
        Constraint::Length(2),
        Constraint::Min(0),
    ])
    .areas(area);
    frame.render_widget(
        Paragraph::new(super::wrap_fit(
            &intro_lines,
            usize::from(intro.width),
            usize::from(intro.height),
        )),
        intro,
    );
    let block = Block::default().borders(Borders::ALL);
    match (&app.verify.running, &app.verify.result) {
        (Some(h), _) => {
            let (d, t, what) = &h.progress;
            let label = if *t == 0 {
                format!("starting… {:.1} s", h.elapsed().as_secs_f64())
            } else {
                format!(
                    "{d}/{t} {} · {:.1} s",
                    escape_name(what),
                    h.elapsed().as_secs_f64()
                )
            };
            frame.render_widget(
                Gauge::default()
                    .block(block.title(" verifying (x cancels) "))
                    .gauge_style(Style::default().fg(ACCENT))
                    .ratio(h.ratio())
                    .label(label),
                gauge,
            );
        }
        (None, Some(Ok(v))) => {
            frame.render_widget(
                Gauge::default()
                    .block(block.title(" done "))
                    .gauge_style(Style::default().fg(if v.ok() {
                        Color::Green
                    } else {
                        Color::Red
                    }))
                    .ratio(1.0)
                    .label(format!("{:.2} s", v.seconds)),
                gauge,
            );
            let style = Style::default()
                .bold()
                .fg(if v.ok() { Color::Green } else { Color::Red });
            frame.render_widget(
                Paragraph::new(Line::styled(v.verdict(), style)).wrap(Wrap { trim: true }),
                verdict,
            );
            let lines: Vec<Line> = v
                .failures
                .iter()
                .map(|f| {
                    Line::styled(
                        format!("  ✗ {}", escape_name(f)),
                        Style::default().fg(Color::Red),
                    )
                })
                .collect();
            frame.render_widget(Paragraph::new(lines).wrap(Wrap { trim: false }), details);
        }
        (None, Some(Err(e))) => {
            frame.render_widget(
                Paragraph::new(Line::styled(
                    format!("verify: {}", escape_name(e)),
                    Style::default().fg(Color::Yellow),
                )),
                verdict,
            );
        }
        (None, None) => {
            frame.render_widget(
                Paragraph::new("nothing verified yet").style(Style::default().fg(Color::DarkGray)),
                verdict,
            );
        }
    }
}
