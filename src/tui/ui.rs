//! Drawing: the frame (title, tabs, status and key bar) and one module per view. Drawing
//! reads the app's state and only stores back scroll offsets; every size is handled,
//! down to a 1x1 terminal.

mod archive;
mod changes;
mod help;
mod loading;
mod playground;
mod plots;
mod prior;
mod search;
mod sweep;
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
use ratatui::widgets::Paragraph;
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
        View::Archive => archive::draw(frame, body, app),
        View::Changes => changes::draw(frame, body, app),
        View::Playground => playground::draw(frame, body, app),
        View::Sweep => sweep::draw(frame, body, app),
        View::Prior => prior::draw(frame, body, app),
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
        "  {tensors} · {} → {} bytes · file {}",
        thousands(orig),
        thousands(arch),
        change(orig, arch)
    );
    let short = format!("  {tensors} · file {}", change(orig, arch));
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
    let (spans, _) = tab_spans(app.view, usize::from(area.width));
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
}

/// The tab bar for `width` columns: every tab with its key and title when that fits;
/// else the titles only of the selected tab (the others by their key); else a window of
/// tabs around the selected one, with `…` where tabs are left out. Returns the spans and
/// their width, never more than `width`.
fn tab_spans(selected: View, width: usize) -> (Vec<Span<'static>>, usize) {
    let label = |v: View, long: bool| -> String {
        let key = v.key().map(|k| k.to_string());
        match (key, long || v == selected) {
            (Some(k), true) => format!(" {k} {} ", v.title()),
            (None, true) => format!(" {} ", v.title()),
            (Some(k), false) => format!(" {k} "),
            (None, false) => format!(" {} ", &v.title()[..2]),
        }
    };
    let sep = "│";
    let sel_style = Style::default().fg(Color::Black).bg(ACCENT).bold();
    let build = |labels: &[(View, String)]| -> Vec<Span<'static>> {
        let mut spans = Vec::new();
        for (k, (v, l)) in labels.iter().enumerate() {
            if k > 0 {
                spans.push(Span::raw(sep));
            }
            let style = if *v == selected {
                sel_style
            } else {
                Style::default()
            };
            spans.push(Span::styled(l.clone(), style));
        }
        spans
    };
    let width_of = |labels: &[(View, String)]| -> usize {
        labels.iter().map(|(_, l)| text_width(l)).sum::<usize>() + labels.len().saturating_sub(1)
    };
    let all: Vec<(View, String)> = View::TABS.iter().map(|&v| (v, label(v, true))).collect();
    if width_of(&all) <= width {
        let w = width_of(&all);
        return (build(&all), w);
    }
    // Short labels, then titles back from the selected tab outwards while they fit.
    let mut labels: Vec<(View, String)> =
        View::TABS.iter().map(|&v| (v, label(v, false))).collect();
    if width_of(&labels) <= width {
        let at = selected.index();
        let mut order: Vec<usize> = (0..labels.len()).collect();
        order.sort_by_key(|&k| k.abs_diff(at));
        for k in order {
            let before = std::mem::replace(&mut labels[k].1, all[k].1.clone());
            if width_of(&labels) > width {
                labels[k].1 = before;
                break;
            }
        }
        let w = width_of(&labels);
        return (build(&labels), w);
    }
    // A window around the selected tab, `…` for what is left out on either side.
    let labels: Vec<(View, String)> = View::TABS.iter().map(|&v| (v, label(v, false))).collect();
    let at = selected.index();
    let (mut lo, mut hi) = (at, at + 1);
    let fits = |lo: usize, hi: usize| {
        let ell = usize::from(lo > 0) + usize::from(hi < labels.len());
        width_of(&labels[lo..hi]) + ell <= width
    };
    loop {
        let mut grew = false;
        if hi < labels.len() && fits(lo, hi + 1) {
            hi += 1;
            grew = true;
        }
        if lo > 0 && fits(lo - 1, hi) {
            lo -= 1;
            grew = true;
        }
        if !grew {
            break;
        }
    }
    if !fits(lo, hi) {
        // Not even the selected tab fits: its title cut with an ellipsis.
        let l = fit_end(&labels[at].1, width);
        let w = text_width(&l);
        return (vec![Span::styled(l, sel_style)], w);
    }
    let mut spans = Vec::new();
    if lo > 0 {
        spans.push(Span::raw("…"));
    }
    spans.extend(build(&labels[lo..hi]));
    if hi < labels.len() {
        spans.push(Span::raw("…"));
    }
    let w = spans.iter().map(|s| text_width(&s.content)).sum();
    (spans, w)
}

fn spinner(tick: u64) -> &'static str {
    const S: [&str; 8] = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧"];
    S[(tick % 8) as usize]
}

fn draw_status(frame: &mut Frame, area: Rect, app: &App) {
    if let Some(q) = app.quit_question.as_ref() {
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
        app.archive_view
            .running
            .as_ref()
            .map(|h| ("analysing the archive", h)),
        app.sweep.running.as_ref().map(|h| ("sweeping", h)),
        app.prior_view.loading.as_ref().map(|h| ("calibrating", h)),
        app.play.running.as_ref().map(|h| ("checking", h)),
        app.search.writing.as_ref().map(|h| ("writing", h)),
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
    spans.push(Span::raw(super::escape_typed(&app.status).into_owned()));
    frame.render_widget(
        Paragraph::new(Line::from(fit_spans(spans, usize::from(area.width)))),
        area,
    );
}

/// `-1,234` or `+12`: a change in bytes with its sign (a minus sign, not a hyphen).
pub fn signed(v: i64) -> String {
    if v < 0 {
        format!("−{}", thousands(v.unsigned_abs()))
    } else {
        format!("+{}", thousands(v as u64))
    }
}

/// `lines` wrapped at spaces into rows of `width` columns, at most `height` of them: when
/// they need more, the last row shown ends in `…`. A line that fits keeps its spans; a
/// wrapped one takes the style of its line (or of its one span).
pub fn wrap_fit(lines: &[Line<'static>], width: usize, height: usize) -> Vec<Line<'static>> {
    let mut rows: Vec<Line<'static>> = Vec::new();
    for line in lines {
        if line.width() <= width {
            rows.push(line.clone());
            continue;
        }
        let style = match line.spans.as_slice() {
            [one] => line.style.patch(one.style),
            _ => line.style,
        };
        let text: String = line.spans.iter().map(|s| s.content.as_ref()).collect();
        for row in wrap_words(&text, width) {
            rows.push(Line::styled(row, style));
        }
    }
    if rows.len() > height {
        rows.truncate(height);
        if let Some(last) = rows.last_mut() {
            let text: String = last.spans.iter().map(|s| s.content.as_ref()).collect();
            let text = text.trim_end();
            // `…` after the row, or in place of its end when the row is full.
            let cut = if text_width(text) < width {
                format!("{text}…")
            } else {
                fit_end(&format!("{text}  "), width)
            };
            let style = match last.spans.as_slice() {
                [one] => last.style.patch(one.style),
                _ => last.style,
            };
            *last = Line::styled(cut, style);
        }
    }
    rows
}

/// `s` in rows of at most `width` columns, broken at spaces (a word longer than a row is
/// broken where the row ends).
fn wrap_words(s: &str, width: usize) -> Vec<String> {
    let width = width.max(1);
    let mut rows = Vec::new();
    // The first row keeps the line's indent.
    let body = s.trim_start_matches(' ');
    let mut row = " ".repeat((s.len() - body.len()).min(width - 1));
    let mut words_in_row = 0;
    for word in body.split(' ') {
        if words_in_row > 0 && text_width(&row) + 1 + text_width(word) > width {
            rows.push(std::mem::take(&mut row));
            words_in_row = 0;
        } else if words_in_row > 0 {
            row.push(' ');
        }
        let mut rest = word;
        while text_width(&row) + text_width(rest) > width {
            let (head, used) = take_columns(rest.chars(), width - text_width(&row));
            if used == 0 {
                break;
            }
            row.push_str(&head);
            rows.push(std::mem::take(&mut row));
            words_in_row = 0;
            rest = &rest[head.len()..];
        }
        row.push_str(rest);
        words_in_row += 1;
    }
    rows.push(row);
    rows
}

/// `spans` cut to `width` columns: when they do not fit, the last one kept ends in `…`.
pub fn fit_spans(spans: Vec<Span<'static>>, width: usize) -> Vec<Span<'static>> {
    let total: usize = spans.iter().map(|s| text_width(&s.content)).sum();
    if total <= width {
        return spans;
    }
    let mut out = Vec::new();
    let mut left = width;
    for s in spans {
        let w = text_width(&s.content);
        if w < left {
            left -= w;
            out.push(s);
        } else {
            out.push(Span::styled(
                fit_end(&format!("{}…", s.content), left),
                s.style,
            ));
            break;
        }
    }
    out
}

fn draw_keys(frame: &mut Frame, area: Rect, app: &App) {
    // Drop hints before the last (`q quit`) until the bar fits, so quitting is always
    // shown; a `…` says hints were left out (`?` lists every key).
    let all: Vec<_> = hints(app.key_context()).to_vec();
    let mut shown = all.clone();
    let width = |h: &[(&str, &str)], cut: bool| -> usize {
        h.iter()
            .map(|(k, w)| text_width(k) + text_width(w) + 5)
            .sum::<usize>()
            + if cut { 2 } else { 0 }
    };
    let room = usize::from(area.width);
    while shown.len() > 1 && width(&shown, shown.len() < all.len()) > room {
        shown.remove(shown.len() - 2);
    }
    let cut = shown.len() < all.len();
    let mut spans = Vec::new();
    let last = shown.len().saturating_sub(1);
    for (i, (k, what)) in shown.into_iter().enumerate() {
        if cut && i == last {
            spans.push(Span::raw("… "));
        }
        spans.push(Span::styled(
            format!(" {k} "),
            Style::default().fg(Color::Black).bg(Color::Gray),
        ));
        spans.push(Span::raw(if i == last {
            format!(" {what}")
        } else {
            format!(" {what}  ")
        }));
    }
    frame.render_widget(Paragraph::new(Line::from(fit_spans(spans, room))), area);
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

/// One line of a table of `width` columns: `label` on the left, cut in its middle to
/// leave room for `cols`, each right-aligned in its width from `widths`, two spaces
/// apart. Numbers are never cut: when even they do not fit, the columns at the end go
/// first (the first column stays).
pub fn columns_line(label: &str, cols: &[String], widths: &[usize], width: usize) -> String {
    let mut k = cols.len();
    loop {
        let need: usize = widths[..k].iter().map(|w| w + 2).sum();
        if need + 4 <= width || k <= 1 {
            let room = width.saturating_sub(need);
            let mut s = fit_middle(label, room);
            let pad = room.saturating_sub(text_width(&s));
            s.push_str(&" ".repeat(pad));
            for (c, w) in cols[..k].iter().zip(widths) {
                s.push_str("  ");
                s.push_str(&" ".repeat(w.saturating_sub(text_width(c))));
                s.push_str(c);
            }
            return fit_end(&s, width);
        }
        k -= 1;
    }
}

/// The width of each column of `rows` (each a list of cells), at least `min`'s.
pub fn column_widths(rows: &[Vec<String>], min: &[usize]) -> Vec<usize> {
    let mut w = min.to_vec();
    for r in rows {
        for (k, c) in r.iter().enumerate() {
            if k < w.len() {
                w[k] = w[k].max(text_width(c));
            } else {
                w.push(text_width(c));
            }
        }
    }
    w
}

/// The write prompt's line (or the running write's), when one is open: the path typed
/// with its cursor, the question, or why the last attempt was refused. Long paths are
/// cut in their middle with `…` so that both ends stay.
pub fn prompt_line(app: &App, width: usize) -> Option<Line<'static>> {
    if let Some(p) = &app.search.prompt {
        if let Some(q) = &p.confirm {
            return Some(Line::styled(
                fit_middle(&format!("⚠ {}", super::escape_typed(q)), width),
                Style::default().fg(Color::Black).bg(Color::Yellow).bold(),
            ));
        }
        let what = match p.kind {
            super::app::PromptKind::Archive => "write to: ",
            super::app::PromptKind::Prior => "save the prior to: ",
        };
        let typed =
            super::escape_typed(&super::textfield::with_cursor(&p.path, p.cursor)).into_owned();
        let mut spans = vec![
            Span::styled(what, Style::default().fg(ACCENT).bold()),
            Span::raw(typed),
            Span::raw(" "),
        ];
        let hint = match (&p.error, p.kind) {
            (Some(e), _) => Span::styled(
                super::escape_typed(e).into_owned(),
                Style::default().fg(Color::Red),
            ),
            (None, super::app::PromptKind::Archive) => Span::styled(
                "(Enter writes a new archive with the pending changes, Esc cancels)",
                Style::default().fg(Color::DarkGray),
            ),
            (None, super::app::PromptKind::Prior) => Span::styled(
                "(Enter saves it as JSON, as brevis calibrate writes, Esc cancels)",
                Style::default().fg(Color::DarkGray),
            ),
        };
        spans.push(hint);
        return Some(Line::from(fit_spans(spans, width)));
    }
    app.search.writing.as_ref().map(|h| {
        Line::styled(
            fit_end(
                &format!(
                    "{} writing the new archive… {:.1} s",
                    spinner(app.tick),
                    h.elapsed().as_secs_f64()
                ),
                width,
            ),
            Style::default().fg(Color::Yellow),
        )
    })
}

/// Draws [`prompt_line`] over the last row of `area` when a prompt is open.
pub fn draw_prompt(frame: &mut Frame, area: Rect, app: &App) {
    if area.height == 0 {
        return;
    }
    if let Some(line) = prompt_line(app, usize::from(area.width)) {
        let row = Rect {
            y: area.y + area.height - 1,
            height: 1,
            ..area
        };
        frame.render_widget(ratatui::widgets::Clear, row);
        frame.render_widget(Paragraph::new(line), row);
    }
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

    /// Wrapped text that does not fit its rows ends in `…` on the last row shown; a row
    /// keeps its indent, and a word longer than a row is broken.
    #[test]
    fn wrapped_text_ends_in_an_ellipsis_when_cut() {
        use super::wrap_fit;
        use ratatui::text::Line;
        let text = |rows: Vec<Line<'static>>| -> Vec<String> {
            rows.iter()
                .map(|l| l.spans.iter().map(|s| s.content.as_ref()).collect())
                .collect()
        };
        let lines = [Line::raw("  one two three four"), Line::raw("five")];
        assert_eq!(
            text(wrap_fit(&lines, 10, 9)),
            ["  one two", "three four", "five"]
        );
        assert_eq!(text(wrap_fit(&lines, 10, 2)), ["  one two", "three fou…"]);
        assert_eq!(text(wrap_fit(&lines, 10, 1)), ["  one two…"]);
        assert_eq!(
            text(wrap_fit(&[Line::raw("abcdefghijkl mn")], 5, 9)),
            ["abcde", "fghij", "kl mn"]
        );
    }

    /// The title line keeps its figures whole: the path is cut in its middle, then the
    /// byte counts go, then the figures (at 80 columns it read `4,247,680 → 2,`).
    #[test]
    fn the_title_line_cuts_the_path_not_the_figures() {
        use super::{text_width, title_parts, TITLE_BADGE};
        let path = "/tmp/cmpn/minilm-l6-v2-bf16-layer0.brv";
        let at = |width: usize| title_parts(path, 23, 4_247_680, 2_794_870, width);
        let full = "  23 tensors · 4,247,680 → 2,794,870 bytes · file 34.20% smaller";
        assert_eq!(at(200), (path.to_string(), full.to_string()));
        let (p, stats) = at(100);
        assert_eq!(stats, full);
        assert_eq!(
            text_width(TITLE_BADGE) + 1 + text_width(&p) + text_width(&stats),
            100
        );
        assert!(p.starts_with("/tmp/") && p.ends_with("layer0.brv") && p.contains('…'));
        // 80 columns: all the figures would leave the path 3; the short ones, 33 (its
        // middle cut).
        let (p, stats) = at(80);
        assert_eq!(stats, "  23 tensors · file 34.20% smaller");
        assert_eq!(p, "/tmp/cmpn/…-l6-v2-bf16-layer0.brv");
        let (p, stats) = at(60);
        assert_eq!(stats, "  23 tensors · file 34.20% smaller");
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
