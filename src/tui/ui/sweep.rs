//! The budget sweep: archive bytes against the search budget, one bar per budget, and
//! where the curve flattens.

use super::super::app::App;
use super::super::escape_name;
use super::super::inspect::thousands;
use super::super::sweep::{budgets, flattens_at, verdict};
use super::{bar, column_widths, fit_end, fit_middle, ACCENT};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, Gauge, Paragraph, Wrap};
use ratatui::Frame;

pub(super) fn draw(frame: &mut Frame, area: Rect, app: &mut App) {
    let width = usize::from(area.width);
    let f = &app.search.form;
    let target = if app.sweep.sample {
        "a sample of the archive's records (t: the selected tensor)".to_string()
    } else {
        format!(
            "{} (t: a sample)",
            app.selected_row()
                .map(|r| escape_name(&r.name).into_owned())
                .unwrap_or_default()
        )
    };
    let head = vec![
        Line::styled(
            fit_middle(&format!("budget sweep of {target}"), width),
            Style::default().fg(ACCENT).bold(),
        ),
        Line::raw(fit_end(
            &format!(
                "budgets 1 to {} (+/-), depth {}, nodes {}, prior {}: each as `brevis compress --budget N` searches it",
                thousands(app.sweep.limit),
                f.opts.max_depth,
                f.opts.max_nodes,
                f.prior.label()
            ),
            width,
        )),
    ];
    let running = app.sweep.running.is_some();
    let [h, g, body] = Layout::vertical([
        Constraint::Length(2),
        Constraint::Length(if running { 3 } else { 0 }),
        Constraint::Min(0),
    ])
    .areas(area);
    frame.render_widget(Paragraph::new(head), h);
    let live: Vec<(u64, u64)> = app.sweep.live.lock().map(|l| l.clone()).unwrap_or_default();
    if let Some(job) = &app.sweep.running {
        let (d, t, what) = &job.progress;
        let label = fit_end(
            &format!(
                "{d}/{t} {what} · {:.1} s (x cancels)",
                job.elapsed().as_secs_f64()
            ),
            width.saturating_sub(2),
        );
        frame.render_widget(
            Gauge::default()
                .block(Block::default().borders(Borders::ALL))
                .gauge_style(Style::default().fg(ACCENT))
                .ratio(job.ratio())
                .label(label),
            g,
        );
    }
    let (points, note, limit) = match (&app.sweep.result, running) {
        (_, true) => (live, None, app.sweep.limit),
        (Some(Ok(s)), _) => {
            let note = if s.cancelled {
                Some(format!(
                    "cancelled after {} of {} budgets · prior {}",
                    s.points.len(),
                    budgets(s.limit).len(),
                    s.prior
                ))
            } else {
                Some(format!("{} · prior {}", escape_name(&s.label), s.prior))
            };
            (s.points.clone(), note, s.limit)
        }
        (Some(Err(e)), _) => {
            frame.render_widget(
                Paragraph::new(Line::styled(
                    format!("sweep: {}", escape_name(e)),
                    Style::default().fg(Color::Red),
                ))
                .wrap(Wrap { trim: true }),
                body,
            );
            return;
        }
        (None, _) => {
            frame.render_widget(
                Paragraph::new(fit_end("r runs the sweep", width))
                    .style(Style::default().fg(Color::DarkGray)),
                body,
            );
            return;
        }
    };
    let mut lines = Vec::new();
    if let Some(n) = note {
        lines.push(Line::styled(
            fit_middle(&n, width),
            Style::default().fg(Color::DarkGray),
        ));
    }
    if !running && !points.is_empty() {
        lines.push(Line::styled(
            fit_end(&verdict(&points), width),
            Style::default().bold(),
        ));
    }
    let flat = if running { None } else { flattens_at(&points) };
    let (lo, hi) = (
        points.iter().map(|p| p.1).min().unwrap_or(0),
        points.iter().map(|p| p.1).max().unwrap_or(0),
    );
    // Bars from a little below the smallest point to the largest, so that the steps show.
    let floor = lo.saturating_sub((hi - lo) / 4 + 1);
    let cells: Vec<Vec<String>> = budgets(limit)
        .iter()
        .map(|b| {
            vec![
                thousands(*b),
                points
                    .iter()
                    .find(|p| p.0 == *b)
                    .map_or_else(|| "…".to_string(), |p| format!("{} B", thousands(p.1))),
            ]
        })
        .collect();
    let w = column_widths(&cells, &[6, 3]);
    let mark = " ◀ flattens";
    let fixed = w[0] + w[1] + 4 + mark.chars().count();
    let bar_w = width.saturating_sub(fixed).min(40);
    for (k, c) in cells.iter().enumerate() {
        let p = points.get(k);
        let ratio = p.map_or(0.0, |p| {
            if hi == floor {
                1.0
            } else {
                (p.1 - floor) as f64 / (hi - floor) as f64
            }
        });
        let b = if bar_w >= 4 {
            format!("{} ", bar(ratio, bar_w))
        } else {
            String::new()
        };
        let m = if Some(k) == flat { mark } else { "" };
        lines.push(Line::raw(fit_end(
            &format!("{:>w0$} {b}{:>w1$}{m}", c[0], c[1], w0 = w[0], w1 = w[1]),
            width,
        )));
    }
    frame.render_widget(Paragraph::new(lines), body);
}
