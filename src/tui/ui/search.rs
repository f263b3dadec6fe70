//! Re-run the search on the selected tensor with other limits, in the background, and
//! compare the archive's program with the new one side by side.

use super::super::action::Field;
use super::super::app::App;
use super::super::highlight::highlight;
use super::super::inspect::thousands;
use super::super::{escape_name, escape_typed};
use super::{fit_end, fit_middle, spinner, text_width, ACCENT};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Gauge, Paragraph};
use ratatui::Frame;
use std::sync::atomic::Ordering;

pub(super) fn draw(frame: &mut Frame, area: Rect, app: &mut App) {
    // The status block as tall as its wrapped lines, leaving the programs 5 rows or more.
    let name = app
        .selected_row()
        .map(|r| escape_name(&r.name).into_owned())
        .unwrap_or_default();
    let form_lines = form_lines(app, &name, usize::from(area.width));
    let status_h = status_height(app, area.width).min(area.height.saturating_sub(9).max(1));
    let [form, hint, status, write, body] = Layout::vertical([
        Constraint::Length(form_lines.len() as u16),
        Constraint::Length(1),
        Constraint::Length(status_h),
        Constraint::Length(1),
        Constraint::Min(0),
    ])
    .areas(area);
    frame.render_widget(Paragraph::new(form_lines), form);
    draw_hint(frame, hint, app);
    draw_status(frame, status, app);
    draw_write(frame, write, app);
    let [left, right] =
        Layout::horizontal([Constraint::Percentage(50), Constraint::Percentage(50)]).areas(body);
    let (old_text, new_text, old_b, new_b) = match app.search_result() {
        Some(Ok(r)) => (
            r.old.0.to_string(),
            r.new.program.to_string(),
            Some(r.old.1),
            Some(r.new.bytes),
        ),
        _ => match app.current() {
            Some(Ok(ins)) => (ins.text.clone(), String::new(), Some(ins.total_bytes), None),
            _ => (String::new(), String::new(), None, None),
        },
    };
    // Both panes scroll together, as far as the longer program goes.
    let inner = usize::from(left.height.saturating_sub(2)).max(1);
    app.pages.search = inner;
    let longest = old_text.lines().count().max(new_text.lines().count());
    let more = longest > inner;
    app.search_scroll = app.search_scroll.min(longest.saturating_sub(inner));
    let from = app.search_scroll;
    let title = |what: &str, b: Option<u64>| {
        let size = b
            .map(|b| format!(" · {} B", thousands(b)))
            .unwrap_or_default();
        let lines = if more {
            format!(
                " · lines {}-{} of {longest} (PgUp/PgDn)",
                from + 1,
                (from + inner).min(longest)
            )
        } else {
            String::new()
        };
        format!(" {what}{size}{lines} ")
    };
    let scroll = u16::try_from(from).unwrap_or(u16::MAX);
    for (area, text, t) in [
        (left, old_text, title("in the archive", old_b)),
        (right, new_text, title("new", new_b)),
    ] {
        let block = Block::default()
            .borders(Borders::ALL)
            .title(t)
            .title_style(Style::default().fg(ACCENT).bold());
        frame.render_widget(
            Paragraph::new(highlight(&text))
                .block(block)
                .scroll((scroll, 0)),
            area,
        );
    }
}

/// The form: the tensor and the limits on one line and the prior on the next when they
/// fit, else the tensor (its name cut in the middle), the limits and the prior on three;
/// a line still too long ends in `…`.
fn form_lines(app: &App, name: &str, width: usize) -> Vec<Line<'static>> {
    let f = &app.search.form;
    let editing = app.search.editing.is_some();
    let field = |fld: Field, key: &str, label: &str, v: String| {
        let sel = app.search.field == fld;
        let style = match (sel, editing) {
            (true, true) => Style::default().fg(Color::Black).bg(Color::Yellow).bold(),
            (true, false) => Style::default().fg(Color::Black).bg(ACCENT).bold(),
            _ => Style::default().bold(),
        };
        let cursor = if sel && editing && fld != Field::PriorFile {
            "▏"
        } else {
            " "
        };
        vec![
            Span::raw(format!("{key}:{label} ")),
            Span::styled(format!(" {v}{cursor}"), style),
            Span::raw("   "),
        ]
    };
    let mut first: Vec<Span<'static>> = Vec::new();
    first.extend(field(
        Field::Budget,
        "b",
        "budget",
        f.opts.budget.to_string(),
    ));
    first.extend(field(
        Field::Depth,
        "d",
        "depth",
        f.opts.max_depth.to_string(),
    ));
    first.extend(field(
        Field::Nodes,
        "n",
        "nodes",
        f.opts.max_nodes.to_string(),
    ));
    let mut second = field(Field::Prior, "p", "prior", f.prior.label().to_string());
    let path = if app.search.editing.is_some() && app.search.field == Field::PriorFile {
        escape_typed(&super::super::textfield::with_cursor(
            &f.prior_path,
            app.search.prior_cursor,
        ))
        .into_owned()
    } else if f.prior_path.is_empty() {
        "(none)".to_string()
    } else {
        escape_typed(&f.prior_path).into_owned()
    };
    second.extend(field(Field::PriorFile, "f", "prior file", path));
    let head_style = Style::default().fg(ACCENT).bold();
    let w = |spans: &[Span]| -> usize { spans.iter().map(|s| text_width(&s.content)).sum() };
    let head = format!("search {name}  ");
    if text_width(&head) + w(&first) <= width {
        let mut one = vec![Span::styled(head, head_style)];
        one.extend(first);
        return vec![Line::from(one), Line::from(super::fit_spans(second, width))];
    }
    vec![
        Line::styled(
            format!("search {}", fit_middle(name, width.saturating_sub(7))),
            head_style,
        ),
        Line::from(super::fit_spans(first, width)),
        Line::from(super::fit_spans(second, width)),
    ]
}

fn draw_hint(frame: &mut Frame, area: Rect, app: &App) {
    let line = if let Some(e) = &app.search.form_error {
        Line::styled(
            format!("✗ {}: not started", escape_typed(e)),
            Style::default().fg(Color::Red).bold(),
        )
    } else if let Some(note) = &app.search.form_note {
        let then = if app.search.editing.is_some() {
            "; Enter done, Esc undo, Tab next field"
        } else {
            ""
        };
        Line::styled(
            format!("⚠ {}{then}", escape_typed(note)),
            Style::default().fg(Color::Red).bold(),
        )
    } else if app.search.editing.is_some() {
        let what = match app.search.field {
            Field::Budget => "budget (expansions): digits, ⌫, +/- double or halve",
            Field::Depth => "depth (1 to 32): digits, ⌫, +/-",
            Field::Nodes => "node limit (1 to 65,536): digits, ⌫, +/-",
            Field::Prior => "prior: Space or +/- cycles calibrated, uniform, file",
            Field::PriorFile => "prior file (JSON from brevis calibrate): type its path",
        };
        Line::styled(
            format!("editing {what}; Enter done, Esc undo, Tab next field"),
            Style::default().fg(Color::Yellow),
        )
    } else {
        Line::styled(
            "e or Enter edits the selected field, b d n p f edit that one, r runs on the selected tensor, ↑↓ picks the tensor, B sweeps budgets, P shows the prior",
            Style::default().fg(Color::DarkGray),
        )
    };
    let text: String = line.spans.iter().map(|s| s.content.as_ref()).collect();
    let fitted = Line::styled(fit_end(&text, usize::from(area.width)), line.style);
    frame.render_widget(Paragraph::new(fitted), area);
}

fn draw_status(frame: &mut Frame, area: Rect, app: &App) {
    if let Some((t, h)) = &app.search.running {
        let tname = app
            .rows()
            .get(*t)
            .map(|r| escape_name(&r.name).into_owned())
            .unwrap_or_default();
        let done = app.search.expansions.load(Ordering::Relaxed);
        // The most expansions: the budget per region times the regions (the job says
        // how many once it has decoded the tensor).
        let most = if h.progress.1 > 0 {
            h.progress.1
        } else {
            app.search.form.opts.budget
        };
        let budget = most.max(1);
        let what = if h.progress.2.is_empty() {
            "working on"
        } else {
            &h.progress.2
        };
        let label = format!(
            "{} {what} {tname}: {} / {} expansions · {:.1} s",
            spinner(app.tick),
            thousands(done),
            thousands(most),
            h.elapsed().as_secs_f64()
        );
        let title = if app.search.stopping {
            " stopping: the best program so far comes next "
        } else {
            " searching (x cancels) "
        };
        frame.render_widget(
            Gauge::default()
                .block(Block::default().borders(Borders::ALL).title(title))
                .gauge_style(Style::default().fg(ACCENT))
                .ratio((done as f64 / budget as f64).clamp(0.0, 1.0))
                .label(label),
            area,
        );
        return;
    }
    let lines = super::wrap_fit(
        &result_lines(app),
        usize::from(area.width),
        usize::from(area.height),
    );
    frame.render_widget(Paragraph::new(lines), area);
}

/// Rows the status block takes at `width` columns: the gauge's 3 while searching, else
/// its lines as wrapped, at most 6.
fn status_height(app: &App, width: u16) -> u16 {
    if app.search.running.is_some() {
        return 3;
    }
    let rows = super::wrap_fit(&result_lines(app), usize::from(width), 6).len();
    rows.clamp(1, 6) as u16
}

/// The status block when no search runs: the last result (or what `r` does), how the
/// search ended, and the settings the archive recorded against the form's.
fn result_lines(app: &App) -> Vec<Line<'static>> {
    let recorded = app
        .selected_tensor()
        .and_then(|t| app.source.as_ref().and_then(|s| s.record(t)))
        .and_then(|r| r.settings);
    let archive_line = archive_settings_line(recorded.as_ref(), &app.search.form.opts);
    let lines: Vec<Line<'static>> = match app.search_result() {
        None => vec![
            Line::raw("r runs the search on the selected tensor with these limits and prior"),
            Line::styled(archive_line, Style::default().fg(Color::DarkGray)),
        ],
        Some(Err(e)) => vec![
            Line::styled(
                format!("search: {}", escape_name(e)),
                Style::default().fg(Color::Red),
            ),
            Line::styled(archive_line, Style::default().fg(Color::DarkGray)),
        ],
        Some(Ok(r)) => {
            let (old, new) = (r.old.1, r.new.bytes);
            let diff = new as i64 - old as i64;
            let pct = if old == 0 {
                0.0
            } else {
                diff as f64 / old as f64 * 100.0
            };
            let verdict = match diff.cmp(&0) {
                std::cmp::Ordering::Less => format!(
                    "{} bytes smaller ({pct:.2}%), kept as a change to write",
                    thousands(diff.unsigned_abs())
                ),
                std::cmp::Ordering::Greater => format!(
                    "{} bytes larger (+{pct:.2}%): not kept, the archive's program stays",
                    thousands(diff as u64)
                ),
                std::cmp::Ordering::Equal if r.new.program == r.old.0 => {
                    "the archive's own program: nothing to improve at these limits".to_string()
                }
                std::cmp::Ordering::Equal => {
                    "another program of the same size: nothing to improve".to_string()
                }
            };
            let s = &r.new.stats;
            let mut tname = app
                .rows()
                .get(r.tensor)
                .map(|row| escape_name(&row.name).into_owned())
                .unwrap_or_default();
            if let Some(k) = r.group {
                tname.push_str(&format!(" and its group ({k} tensors, one program)"));
            }
            // Stopped by `x`: the best program so far, said before anything else.
            let sizes = if r.cancelled {
                format!(
                    "cancelled after {} expansions: best so far {} B (archive {} B)",
                    thousands(s.expansions),
                    thousands(new),
                    thousands(old)
                )
            } else {
                format!("archive {} B → new {} B", thousands(old), thousands(new))
            };
            let budget = match r.group {
                Some(k) => format!(
                    "budget {} per search × {} searches (the group's words, and each of its \
                     {k} tensors apart) = {} expansions at most",
                    thousands(r.opts.budget),
                    thousands(r.searches),
                    thousands(r.opts.budget.saturating_mul(r.searches))
                ),
                None if r.regions > 1 => format!(
                    "budget {} per region × {} regions = {} expansions at most",
                    thousands(r.opts.budget),
                    thousands(r.regions),
                    thousands(r.opts.budget.saturating_mul(r.regions))
                ),
                None => format!("budget {} expansions (1 region)", thousands(r.opts.budget)),
            };
            let ending = if r.cancelled {
                "stopped by x: a longer search may find a smaller program".to_string()
            } else if s.memory_limited {
                "stopped by the memory limit: a larger budget may not help".to_string()
            } else if s.budget_exhausted {
                "the budget ran out: a larger budget may find a smaller program".to_string()
            } else {
                "the search space was exhausted within the budget: a larger budget cannot \
                 change this (the depth and node limits bound the space)"
                    .to_string()
            };
            vec![
                Line::styled(
                    format!("{tname}: {sizes}: {verdict}"),
                    Style::default()
                        .bold()
                        .fg(if diff < 0 { Color::Green } else { Color::Yellow }),
                ),
                Line::raw(format!(
                    "{budget} · depth {} nodes {} · prior {} · {} expansions, {} candidates{} · {:.2} s",
                    r.opts.max_depth,
                    r.opts.max_nodes,
                    escape_typed(&r.prior),
                    thousands(s.expansions),
                    thousands(s.candidates),
                    if s.pruned > 0 {
                        format!(" ({} more ruled out by their entropy)", thousands(s.pruned))
                    } else {
                        String::new()
                    },
                    r.elapsed.as_secs_f64()
                )),
                Line::raw(ending),
                Line::styled(archive_line, Style::default().fg(Color::DarkGray)),
            ]
        }
    };
    lines
}

/// What the archive recorded about how it built the selected tensor's record, and how
/// the form's limits differ from `brevis compress`'s defaults.
fn archive_settings_line(
    recorded: Option<&crate::archive::format::Settings>,
    form: &crate::synth::SearchOptions,
) -> String {
    let cli = crate::archive::CompressOptions::default().search;
    let built = match recorded {
        Some(s) => format!(
            "archive: built {}with budget {} per region, depth {}, nodes {}, prior {}{}",
            s.level.map_or(String::new(), |l| format!("at level {l} ")),
            thousands(s.budget),
            s.max_depth,
            s.max_nodes,
            s.prior.name(),
            if s.prior_digest == 0 {
                String::new()
            } else {
                format!(" {}", s.digest_hex())
            }
        ),
        None => "archive: it does not record the settings that built it".to_string(),
    };
    let mut flags = Vec::new();
    if form.budget != cli.budget {
        flags.push(format!("--budget {}", form.budget));
    }
    if form.max_depth != cli.max_depth {
        flags.push(format!("--max-depth {}", form.max_depth));
    }
    if form.max_nodes != cli.max_nodes {
        flags.push(format!("--max-nodes {}", form.max_nodes));
    }
    if flags.is_empty() {
        format!("{built} · the form's limits are `brevis compress`'s defaults")
    } else {
        format!(
            "{built} · `brevis compress` (budget {}, depth {}, nodes {} by default) \
             searches as this form with {}",
            cli.budget,
            cli.max_depth,
            cli.max_nodes,
            flags.join(" ")
        )
    }
}

/// The write line: the prompt, the running write, what the last write did, or the
/// pending changes.
fn draw_write(frame: &mut Frame, area: Rect, app: &App) {
    let width = usize::from(area.width);
    let line = if let Some(l) = super::prompt_line(app, width) {
        l
    } else {
        let n = app.pending.len();
        let mine = app
            .search_result()
            .and_then(|r| r.as_ref().ok())
            .and_then(|r| {
                app.pending
                    .iter()
                    .find(|p| p.tensor == r.tensor && p.program == r.new.program)
            });
        let kept = match mine.map(|p| (p.delta, p.new_bytes as i64 - p.old_bytes as i64)) {
            Some((Some(d), prog)) if d != prog => format!(
                "kept as a change: the file {} B with its settings entry · ",
                super::changes::signed(d)
            ),
            Some(_) => "kept as a change · ".to_string(),
            None => String::new(),
        };
        let mine = mine.is_some();
        if n > 0 {
            let all = match app.pending_total() {
                Some(d) => format!(" ({} B in all)", super::changes::signed(d)),
                None => String::new(),
            };
            Line::styled(
                fit_end(
                    &format!(
                        "{kept}{n} pending change{}{all}: w writes them all into a new archive, 9 lists them",
                        if n == 1 { "" } else { "s" }
                    ),
                    width,
                ),
                Style::default().fg(if mine { Color::Green } else { Color::DarkGray }),
            )
        } else {
            match app
                .search
                .written
                .as_ref()
                .filter(|_| app.search_result().is_some())
            {
                Some(Ok(w)) => written_line(w, width),
                Some(Err(e)) => Line::styled(
                    fit_middle(&format!("✗ write: {}", escape_typed(e)), width),
                    Style::default().fg(Color::Red).bold(),
                ),
                None => Line::raw(""),
            }
        }
    };
    frame.render_widget(Paragraph::new(line), area);
}

/// What the last write did.
pub(super) fn written_line(w: &super::super::app::WriteOutcome, width: usize) -> Line<'static> {
    let diff = w.bytes as i64 - w.old_bytes as i64;
    let sign = if diff < 0 { "−" } else { "+" };
    Line::styled(
        fit_middle(
            &format!(
                "✓ wrote {}{}: {} B ({sign}{} B against the open archive's {} B)",
                escape_typed(&w.path.display().to_string()),
                if w.in_place { " in place" } else { "" },
                thousands(w.bytes),
                thousands(diff.unsigned_abs()),
                thousands(w.old_bytes)
            ),
            width,
        ),
        Style::default().fg(Color::Green).bold(),
    )
}
