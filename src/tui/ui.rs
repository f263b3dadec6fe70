//! Drawing: the frame (title, tabs, status and key bar) and one module per view. Drawing
//! reads the app's state and only stores back scroll offsets; every size is handled,
//! down to a 1x1 terminal.

mod help;
mod loading;
mod plots;
mod search;
mod table;
mod text;
mod tree;
mod verify;
mod why;

use super::action::View;
use super::app::App;
use super::event::hints;
use super::inspect::thousands;
use super::model::reduction;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Tabs};
use ratatui::Frame;

/// Accent color of titles and selections.
pub const ACCENT: Color = Color::Cyan;
/// Style of the selected line.
pub fn selected_style() -> Style {
    Style::default()
        .bg(Color::DarkGray)
        .add_modifier(Modifier::BOLD)
}

/// Draws the whole screen.
pub fn draw(frame: &mut Frame, app: &mut App) {
    let area = frame.area();
    if app.source.is_none() {
        loading::draw(frame, area, app);
        return;
    }
    let [title, tabs, body, status, keys] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(1),
        Constraint::Min(0),
        Constraint::Length(1),
        Constraint::Length(1),
    ])
    .areas(area);
    draw_title(frame, title, app);
    draw_tabs(frame, tabs, app);
    match app.view {
        View::Table => table::draw(frame, body, app),
        View::Tree => tree::draw(frame, body, app),
        View::Text => text::draw(frame, body, app),
        View::Why => why::draw(frame, body, app),
        View::Plots => plots::draw(frame, body, app),
        View::Search => search::draw(frame, body, app),
        View::Verify => verify::draw(frame, body, app),
        View::Help => help::draw(frame, body, app),
    }
    draw_status(frame, status, app);
    draw_keys(frame, keys, app);
}

fn draw_title(frame: &mut Frame, area: Rect, app: &App) {
    let Some(src) = app.source.as_ref() else {
        return;
    };
    let (orig, arch) = src.file_sizes();
    let (path, stats) = title_parts(
        &super::escape_name(&src.title()),
        src.rows().len() as u64,
        orig,
        arch,
        usize::from(area.width),
    );
    let line = Line::from(vec![
        Span::styled(
            TITLE_BADGE,
            Style::default().fg(Color::Black).bg(ACCENT).bold(),
        ),
        Span::raw(" "),
        Span::styled(path, Style::default().bold()),
        Span::raw(stats),
    ]);
    frame.render_widget(Paragraph::new(line), area);
}

/// The program's name at the start of the title line.
const TITLE_BADGE: &str = " brevis-tui ";

/// The archive's path and its figures for a title line of `width` columns after the
/// badge: all the figures when the path can keep a dozen columns (cut in its middle),
/// else the tensor count and the change only, else the path alone. Numbers are never
/// cut (at 80 columns the line read `4,247,680 → 2,`).
fn title_parts(path: &str, tensors: u64, orig: u64, arch: u64, width: usize) -> (String, String) {
    let room = width.saturating_sub(text_width(TITLE_BADGE) + 1);
    let tensors = count(tensors, "tensor");
    let full = format!(
        "  {tensors} · {} → {} bytes · {}",
        thousands(orig),
        thousands(arch),
        change(orig, arch)
    );
    let short = format!("  {tensors} · {}", change(orig, arch));
    let keep = text_width(path).min(12);
    for stats in [full, short] {
        if let Some(left) = room.checked_sub(text_width(&stats)) {
            if left >= keep {
                return (fit_middle(path, left), stats);
            }
        }
    }
    (fit_middle(path, room), String::new())
}

/// `n` things with a thousands separator and the plural when `n` is not 1:
/// `1 tensor`, `20,000 tensors`.
pub fn count(n: u64, what: &str) -> String {
    format!("{} {what}{}", thousands(n), if n == 1 { "" } else { "s" })
}

/// How the archive's size compares with the original's, as the CLI says it:
/// `34.23% smaller`, `24.87% larger` (an archive can grow), `same size`.
pub fn change(orig: u64, arch: u64) -> String {
    let r = reduction(orig, arch) * 100.0;
    if orig == 0 && arch > 0 {
        "larger (the original is empty)".to_string()
    } else if arch > orig {
        format!("{:.2}% larger", -r)
    } else if arch == orig {
        "same size".to_string()
    } else {
        format!("{r:.2}% smaller")
    }
}

fn draw_tabs(frame: &mut Frame, area: Rect, app: &App) {
    let titles: Vec<Line> = View::TABS
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let key = if *v == View::Help {
                "?".to_string()
            } else {
                (i + 1).to_string()
            };
            Line::from(format!("{key} {}", v.title()))
        })
        .collect();
    let tabs = Tabs::new(titles)
        .select(app.view.index())
        .highlight_style(Style::default().fg(Color::Black).bg(ACCENT).bold())
        .divider("│");
    frame.render_widget(tabs, area);
}

fn spinner(tick: u64) -> &'static str {
    const S: [&str; 8] = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧"];
    S[(tick % 8) as usize]
}

fn draw_status(frame: &mut Frame, area: Rect, app: &App) {
    if let Some(q) = app.quit_question.as_ref().or(app.discard_question.as_ref()) {
        let line = Line::styled(
            fit_end(&format!("⚠ {q}"), usize::from(area.width)),
            Style::default().fg(Color::Black).bg(Color::Yellow).bold(),
        );
        frame.render_widget(Paragraph::new(line), area);
        return;
    }
    let mut spans = Vec::new();
    let running = [
        app.inspecting.as_ref().map(|(_, h)| ("analysing", h)),
        app.search.running.as_ref().map(|(_, h)| {
            let what = if app.search.stopping {
                "stopping the search"
            } else {
                "searching"
            };
            (what, h)
        }),
        app.verify.running.as_ref().map(|h| ("verifying", h)),
    ];
    for (what, h) in running.into_iter().flatten() {
        spans.push(Span::styled(
            format!(
                "{} {what} {:.1}s  ",
                spinner(app.tick),
                h.elapsed().as_secs_f64()
            ),
            Style::default().fg(Color::Yellow),
        ));
    }
    spans.push(Span::raw(super::escape_typed(&app.status)));
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
}

fn draw_keys(frame: &mut Frame, area: Rect, app: &App) {
    // Drop hints before the last (`q quit`) until the bar fits, so quitting is always shown.
    let mut shown: Vec<_> = hints(app.key_context()).to_vec();
    let width = |h: &[(&str, &str)]| -> usize {
        h.iter()
            .map(|(k, w)| k.chars().count() + w.chars().count() + 5)
            .sum()
    };
    while shown.len() > 1 && width(&shown) > area.width as usize {
        shown.remove(shown.len() - 2);
    }
    let mut spans = Vec::new();
    for (k, what) in shown {
        spans.push(Span::styled(
            format!(" {k} "),
            Style::default().fg(Color::Black).bg(Color::Gray),
        ));
        spans.push(Span::raw(format!(" {what}  ")));
    }
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
}

/// A horizontal bar of `width` cells filled to `ratio` (0..=1) with eighth blocks.
pub fn bar(ratio: f64, width: usize) -> String {
    const PARTS: [char; 8] = [' ', '▏', '▎', '▍', '▌', '▋', '▊', '▉'];
    let r = if ratio.is_finite() {
        ratio.clamp(0.0, 1.0)
    } else {
        0.0
    };
    let eighths = (r * width as f64 * 8.0).round() as usize;
    let full = eighths / 8;
    let mut s = "█".repeat(full.min(width));
    if full < width {
        let part = PARTS[eighths % 8];
        if part != ' ' {
            s.push(part);
        }
    }
    let used = s.chars().count();
    s.extend(std::iter::repeat_n(' ', width.saturating_sub(used)));
    s
}

/// Width of `s` in terminal cells.
pub fn text_width(s: &str) -> usize {
    ratatui::text::Span::raw(s).width()
}

/// `s` fitted into `width` columns by cutting its middle: the start and the end stay
/// (about a third and two thirds of the room), joined by `…`. Tensor names differ at
/// their ends (`….attention.output.LayerNorm.weight`), so neither end may go. `s` as it
/// is when it fits; an empty string for a width of 0.
pub fn fit_middle(s: &str, width: usize) -> String {
    if text_width(s) <= width {
        return s.to_string();
    }
    if width == 0 {
        return String::new();
    }
    let room = width - 1; // the ellipsis takes one column
    let (head, used) = take_columns(s.chars(), room / 3);
    let (tail, _) = take_columns(s.chars().rev(), room - used);
    format!("{head}…{}", tail.chars().rev().collect::<String>())
}

/// The leading characters of `chars` that fit in `room` columns, and their width.
fn take_columns(chars: impl Iterator<Item = char>, room: usize) -> (String, usize) {
    let mut out = String::new();
    let mut used = 0;
    for c in chars {
        let w = text_width(c.encode_utf8(&mut [0u8; 4]));
        if used + w > room {
            break;
        }
        out.push(c);
        used += w;
    }
    (out, used)
}

/// `s` fitted into `width` columns by cutting its end: as much of the start as fits,
/// then `…`. For one-line texts whose start says what they are (a header, a hint, a
/// title). `s` as it is when it fits; an empty string for a width of 0.
pub fn fit_end(s: &str, width: usize) -> String {
    if text_width(s) <= width {
        return s.to_string();
    }
    if width == 0 {
        return String::new();
    }
    let (mut out, _) = take_columns(s.chars(), width - 1); // the ellipsis takes one column
    out.push('…');
    out
}

/// A name and the text after it fitted together into `width` columns: the text is cut
/// at its end first ([`fit_end`]); when the name alone does not fit, it is cut in its
/// middle ([`fit_middle`]) and the text goes.
pub fn fit_name_and_rest(name: &str, rest: &str, width: usize) -> (String, String) {
    let name_w = text_width(name);
    if name_w >= width {
        return (fit_middle(name, width), String::new());
    }
    (name.to_string(), fit_end(rest, width - name_w))
}

/// The first visible line of a list of `len` lines shown `height` at a time, starting
/// from `offset` and moved as little as possible so that line `selected` is visible and
/// the window is full whenever there are enough lines (no blank lines below while lines
/// are hidden above, e.g. after the terminal grew taller).
pub fn fill_offset(offset: usize, selected: usize, len: usize, height: usize) -> usize {
    if height == 0 {
        return offset.min(len.saturating_sub(1));
    }
    let mut o = offset.min(len.saturating_sub(height));
    if selected < o {
        o = selected;
    } else if selected >= o + height {
        o = selected + 1 - height;
    }
    o
}

/// A centered message in `area`.
pub fn message(frame: &mut Frame, area: Rect, text: &str) {
    let p = Paragraph::new(text.to_string())
        .alignment(ratatui::layout::Alignment::Center)
        .wrap(ratatui::widgets::Wrap { trim: true });
    let [_, mid, _] = Layout::vertical([
        Constraint::Fill(1),
        Constraint::Length(3),
        Constraint::Fill(1),
    ])
    .areas(area);
    frame.render_widget(p, mid);
}

/// The selected tensor's analysis and its escaped name, or `None` after drawing the
/// message that stands in for it (still analysing, failed, nothing selected).
pub fn inspected(
    frame: &mut Frame,
    area: Rect,
    app: &App,
) -> Option<(std::sync::Arc<super::inspect::Inspection>, String)> {
    if let Some(msg) = pending(app) {
        message(frame, area, &msg);
        return None;
    }
    let Some(Ok(ins)) = app.current().cloned() else {
        return None;
    };
    let name = app
        .selected_row()
        .map(|r| super::escape_name(&r.name).into_owned())
        .unwrap_or_default();
    Some((ins, name))
}

/// The message shown while the selected tensor is analysed, or why it failed; `None`
/// when the analysis is there.
pub fn pending(app: &App) -> Option<String> {
    let Some(row) = app.selected_row() else {
        return Some("no tensor selected (the filter matches nothing?)".into());
    };
    match app.current() {
        Some(Ok(_)) => None,
        Some(Err(e)) => Some(format!(
            "cannot show {}: {}",
            super::escape_name(&row.name),
            super::escape_name(e)
        )),
        None => Some(format!(
            "{} analysing {} ({} bytes)…",
            spinner(app.tick),
            super::escape_name(&row.name),
            thousands(row.original_bytes)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::bar;

    /// The title line keeps its figures whole: the path is cut in its middle, then the
    /// byte counts go, then the figures (at 80 columns it read `4,247,680 → 2,`).
    #[test]
    fn the_title_line_cuts_the_path_not_the_figures() {
        use super::{text_width, title_parts, TITLE_BADGE};
        let path = "/tmp/cmpn/minilm-l6-v2-bf16-layer0.brv";
        let at = |width: usize| title_parts(path, 23, 4_247_680, 2_794_870, width);
        let full = "  23 tensors · 4,247,680 → 2,794,870 bytes · 34.20% smaller";
        assert_eq!(at(200), (path.to_string(), full.to_string()));
        let (p, stats) = at(100);
        assert_eq!(stats, full);
        assert_eq!(
            text_width(TITLE_BADGE) + 1 + text_width(&p) + text_width(&stats),
            100
        );
        assert!(p.starts_with("/tmp/") && p.ends_with("layer0.brv") && p.contains('…'));
        // 80 columns: all the figures would leave the path 8; the short ones, 38 (whole).
        let (p, stats) = at(80);
        assert_eq!(
            (p.as_str(), stats.as_str()),
            (path, "  23 tensors · 34.20% smaller")
        );
        let (p, stats) = at(60);
        assert_eq!(stats, "  23 tensors · 34.20% smaller");
        assert!(text_width(&p) >= 12 && p.contains('…'), "{p}");
        assert_eq!(at(30).1, "");
    }

    #[test]
    fn fit_middle_keeps_both_ends() {
        use super::{fit_middle, text_width};
        let name = "encoder.layer.0.attention.output.LayerNorm.weight";
        assert_eq!(fit_middle(name, 60), name);
        assert_eq!(fit_middle(name, 20), "encode…erNorm.weight");
        assert_eq!(text_width(&fit_middle(name, 20)), 20);
        assert_eq!(fit_middle(name, 1), "…");
        assert_eq!(fit_middle(name, 0), "");
        // Wide characters count two columns and are never split.
        assert_eq!(fit_middle("日本語テンソル名前", 9), "日…ル名前");
    }

    #[test]
    fn fill_offset_keeps_the_window_full() {
        use super::fill_offset;
        // 30 rows, cursor on the last; the window grows from 10 to 20 rows.
        assert_eq!(fill_offset(20, 29, 30, 10), 20);
        assert_eq!(fill_offset(20, 29, 30, 20), 10);
        assert_eq!(fill_offset(20, 29, 30, 40), 0);
        assert_eq!(fill_offset(0, 15, 30, 10), 6);
        assert_eq!(fill_offset(12, 5, 30, 10), 5);
        assert_eq!(fill_offset(3, 0, 0, 10), 0);
    }

    #[test]
    fn bar_fills_in_eighths() {
        assert_eq!(bar(0.0, 4), "    ");
        assert_eq!(bar(1.0, 4), "████");
        assert_eq!(bar(0.5, 4), "██  ");
        assert_eq!(bar(0.0625, 2), "▏ ");
        assert_eq!(bar(f64::NAN, 2), "  ");
        assert_eq!(bar(0.5, 0), "");
    }
}
