//! Plots: a histogram of the tensor's values (the exponent field for floats) and the
//! bytes held by each node.

use super::super::app::App;
use super::super::inspect::{share, thousands, thousands_signed, Histogram, Inspection};
use super::{fit_end, fit_name_and_rest, inspected, text_width, ACCENT};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Style};
use ratatui::text::{Line, Span as TextSpan};
use ratatui::widgets::{Bar, BarChart, Block, Borders, Paragraph};
use ratatui::Frame;

pub(super) fn draw(frame: &mut Frame, area: Rect, app: &mut App) {
    let Some((ins, name)) = inspected(frame, area, app) else {
        return;
    };
    let [left, right] =
        Layout::horizontal([Constraint::Percentage(60), Constraint::Percentage(40)]).areas(area);
    // A reference record's program restores the residual against the other file's
    // tensor: its statistics are the residual's, and the title says so.
    let name = match app
        .selected_tensor()
        .and_then(|t| app.source.as_ref()?.record(t))
    {
        Some(r) => match r.sharing {
            super::super::model::Sharing::Reference { op, role, .. } => {
                format!("{name} (residual: {op} with the {role}'s tensor)")
            }
            _ => name,
        },
        None => name,
    };
    histogram(frame, left, &ins.hist, &name);
    node_bytes(frame, right, &ins);
}

/// One bar of the histogram: the values `lo..=hi` it spans and how many words fall in
/// them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Span {
    lo: i128,
    hi: i128,
    count: u64,
}

impl Span {
    /// `7` for a bar of one value, `0-7` for a bar of several.
    fn range(&self) -> String {
        if self.lo == self.hi {
            self.lo.to_string()
        } else {
            format!("{}-{}", self.lo, self.hi)
        }
    }

    /// [`Span::range`] with thousands separators, for the caption.
    fn long_range(&self) -> String {
        if self.lo == self.hi {
            thousands_signed(self.lo)
        } else {
            // A dash between negative values would read as a minus sign.
            let sep = if self.lo < 0 || self.hi < 0 {
                " to "
            } else {
                "-"
            };
            format!(
                "{}{sep}{}",
                thousands_signed(self.lo),
                thousands_signed(self.hi)
            )
        }
    }
}

/// `v` in at most 5 columns when it is long: `1128` stays, `12345` is `12k`,
/// `-9223372036854775808` is `-9.2E`. Shortened forms are rounded down in magnitude
/// and carry a suffix, so they never read as another exact number.
fn short_value(v: i128) -> String {
    let full = v.to_string();
    if full.len() <= 4 {
        return full;
    }
    let sign = if v < 0 { "-" } else { "" };
    let m = v.unsigned_abs();
    let mut unit = 1u128;
    let mut suffix = "";
    for s in ["k", "M", "G", "T", "P", "E", "Z"] {
        if m / (unit * 1000) == 0 {
            break;
        }
        unit *= 1000;
        suffix = s;
    }
    let whole = m / unit;
    if whole < 10 {
        let tenth = (m % unit) * 10 / unit;
        format!("{sign}{whole}.{tenth}{suffix}")
    } else {
        format!("{sign}{whole}{suffix}")
    }
}

/// Bars are at least this wide (in columns) and at most [`MAX_BAR`].
const MIN_BAR: u16 = 3;
/// The widest bar, enough for a label such as `1000-1999`.
const MAX_BAR: u16 = 9;

/// Groups bins spanning `bin_width` values each so that at most `slots` bars remain
/// (sums of adjacent bins); also returns how many bins each bar sums.
fn group(bins: &[(i128, u64)], bin_width: u64, slots: usize) -> (Vec<Span>, usize) {
    let per = bins.len().div_ceil(slots.max(1)).max(1);
    let last_offset = i128::from(bin_width.max(1) - 1);
    let spans = bins
        .chunks(per)
        .map(|c| Span {
            lo: c.first().map_or(0, |b| b.0),
            hi: c.last().map_or(0, |b| b.0.saturating_add(last_offset)),
            count: c.iter().map(|b| b.1).sum(),
        })
        .collect();
    (spans, per)
}

/// How the histogram is drawn in `width` columns.
#[derive(Debug, PartialEq, Eq)]
struct BarLayout {
    /// Bar width in columns (each bar is followed by a gap of 1).
    bar_width: u16,
    /// The bars, left to right.
    bars: Vec<Span>,
    /// Bins summed by each bar.
    per: usize,
    /// Whether each bar is labelled with its whole range (`0-7`); otherwise with its
    /// first value, and the caption says how many values a bar spans.
    ranges: bool,
    /// When `ranges` is false: the label of every `every`-th bar (its first value,
    /// shortened by [`short_value`]), which may run over the bars to its right.
    every: usize,
}

/// Lays out the bars: as many as fit with bars [`MIN_BAR`] wide, each labelled with
/// the values it spans. When those labels do not fit, bars are widened until they do,
/// as long as at least half as many bars remain; failing that, bars keep their width
/// and are labelled with their first value.
fn bar_layout(h: &Histogram, width: u16) -> BarLayout {
    let fits = |bars: &[Span], bar_width: u16| {
        bars.iter()
            .all(|b| text_width(&b.range()) <= usize::from(bar_width))
    };
    let layout_for = |bar_width: u16| {
        let slots = usize::from(width / (bar_width + 1)).max(1);
        let (bars, per) = group(&h.bins, h.bin_width, slots);
        BarLayout {
            bar_width,
            bars,
            per,
            ranges: true,
            every: 1,
        }
    };
    let narrow = layout_for(MIN_BAR);
    if fits(&narrow.bars, MIN_BAR) {
        return narrow;
    }
    for bar_width in MIN_BAR + 1..=MAX_BAR {
        let wide = layout_for(bar_width);
        if wide.bars.len() * 2 < narrow.bars.len() {
            break;
        }
        if fits(&wide.bars, bar_width) {
            return wide;
        }
    }
    // Label every `every`-th bar, so that each label fits before the next one.
    let room = |every: usize| every * usize::from(MIN_BAR + 1) - 1;
    let longest = narrow
        .bars
        .iter()
        .map(|b| text_width(&short_value(b.lo)))
        .max()
        .unwrap_or(0);
    let every = (1..=narrow.bars.len().max(1))
        .find(|&k| room(k) >= longest)
        .unwrap_or(narrow.bars.len().max(1));
    BarLayout {
        ranges: false,
        every,
        ..narrow
    }
}

/// The label row of a layout that labels bars with their first value: each `every`-th
/// bar's label starts at the bar's left edge.
fn label_row(layout: &BarLayout) -> String {
    let step = usize::from(layout.bar_width + 1);
    let mut row = String::new();
    for (i, b) in layout.bars.iter().enumerate().step_by(layout.every.max(1)) {
        let at = i * step;
        while text_width(&row) < at {
            row.push(' ');
        }
        row.push_str(&short_value(b.lo));
    }
    row
}

/// The caption under the bars: how many values a bar spans (when more than one) and
/// the most common values.
fn caption(h: &Histogram, layout: &BarLayout) -> String {
    let bin_width = h.bin_width.max(1);
    let total: u64 = h.bins.iter().map(|b| b.1).sum();
    let mut top: Vec<(i128, u64)> = h.bins.iter().copied().filter(|b| b.1 > 0).collect();
    top.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let common: Vec<String> = top
        .iter()
        .take(4)
        .map(|&(v, c)| {
            let bin = Span {
                lo: v,
                hi: v + i128::from(bin_width - 1),
                count: c,
            };
            format!("{} {:.1}%", bin.long_range(), share(c, total) * 100.0)
        })
        .collect();
    let contiguous = h
        .bins
        .windows(2)
        .all(|w| w[0].0 + i128::from(bin_width) == w[1].0);
    let values = (layout.per as u64).saturating_mul(bin_width);
    let first = match (layout.ranges, layout.every) {
        (true, _) => String::new(),
        (false, 1) => ", labelled by its first value".into(),
        (false, k) => format!(", labels every {k} bars"),
    };
    let span = if values <= 1 {
        String::new()
    } else if contiguous {
        format!("each bar spans {} values{first} · ", thousands(values))
    } else {
        format!(
            "each bar sums {} of the values present{first} · ",
            layout.per
        )
    };
    format!("{span}most common: {}", common.join(" · "))
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
    let [chart_area, caption_area] =
        Layout::vertical([Constraint::Min(0), Constraint::Length(1)]).areas(inner);
    let layout = bar_layout(h, inner.width);
    frame.render_widget(
        Paragraph::new(fit_caption(
            &caption(h, &layout),
            usize::from(caption_area.width),
        ))
        .style(Style::default().fg(Color::Gray)),
        caption_area,
    );
    // Labels that fit their bars are drawn by the chart; longer ones in a row of their
    // own, so that none is cut to read as another number.
    let chart_area = if layout.ranges {
        chart_area
    } else {
        let [bars_area, labels_area] =
            Layout::vertical([Constraint::Min(0), Constraint::Length(1)]).areas(chart_area);
        frame.render_widget(
            Paragraph::new(label_row(&layout)).style(Style::default().fg(Color::Gray)),
            labels_area,
        );
        bars_area
    };
    let bars: Vec<Bar> = layout
        .bars
        .iter()
        .map(|b| {
            let bar = Bar::default().value(b.count).text_value(String::new());
            if layout.ranges {
                bar.label(Line::from(b.range()))
            } else {
                bar
            }
        })
        .collect();
    let chart = BarChart::default()
        .data(ratatui::widgets::BarGroup::default().bars(&bars))
        .bar_width(layout.bar_width)
        .bar_gap(1)
        .bar_style(Style::default().fg(ACCENT))
        .label_style(Style::default().fg(Color::Gray));
    frame.render_widget(chart, chart_area);
}

fn node_bytes(frame: &mut Frame, area: Rect, ins: &Inspection) {
    let block = Block::default()
        .borders(Borders::ALL)
        .title(node_bytes_title(
            ins.total_bytes,
            usize::from(area.width.saturating_sub(2)),
        ))
        .title_style(Style::default().fg(ACCENT).bold());
    let inner = block.inner(area);
    frame.render_widget(block, area);
    if inner.width == 0 || inner.height == 0 {
        return;
    }
    let rows: Vec<(String, u64)> = ins
        .nodes
        .iter()
        .enumerate()
        .take(usize::from(inner.height))
        .map(|(i, n)| (format!("#{i} {}", n.label), n.own_bytes))
        .collect();
    frame.render_widget(Paragraph::new(node_rows(&rows, inner.width)), inner);
}

/// The title of the bytes-per-node chart in `width` columns: the longest wording that
/// fits whole, so that the total is never cut (it read `(of 258,1…` at 80 columns).
fn node_bytes_title(total: u64, width: usize) -> String {
    let total = thousands(total);
    [
        format!(" own bytes per node (of {total}) "),
        format!(" bytes per node (of {total}) "),
        format!(" bytes (of {total}) "),
    ]
    .into_iter()
    .find(|t| text_width(t) <= width)
    .unwrap_or_else(|| fit_end(" own bytes per node ", width))
}

/// `caption` in `width` columns: whole ` · `-separated parts from the start, then `…`
/// where parts were dropped, so that no value or share is cut (the caption read
/// `most common: 121 31.` at 80 columns). The first part is cut at its end when it does
/// not fit alone.
fn fit_caption(caption: &str, width: usize) -> String {
    if text_width(caption) <= width {
        return caption.to_string();
    }
    let mut out = String::new();
    for part in caption.split(" · ") {
        let next = if out.is_empty() {
            part.to_string()
        } else {
            format!("{out} · {part}")
        };
        // Room for the ` …` that marks what was dropped.
        if text_width(&next) + 2 > width {
            break;
        }
        out = next;
    }
    if out.is_empty() {
        return fit_end(caption, width);
    }
    out.push_str(" …");
    out
}

/// The rows of the bytes-per-node chart, `width` columns wide: each `(label, bytes)` as
/// its label padded to the longest, a space, a bar of whole cells in proportion to the
/// largest count, a space and the count, so that a count never touches its bar. An empty
/// bar leaves its count right after the label's space. When the labels and counts do not
/// fit, the labels are cut at their end (`…`), never the counts; only a width too narrow
/// for the counts themselves leaves rows for the paragraph to cut.
fn node_rows(rows: &[(String, u64)], width: u16) -> Vec<Line<'static>> {
    let value_width = rows
        .iter()
        .map(|(_, b)| text_width(&thousands(*b)))
        .max()
        .unwrap_or(0);
    // Labels and bars share what the counts and the two spaces leave; bars keep at least
    // a third of it (one cell at the least), so that a narrow terminal still compares
    // the nodes instead of showing long labels beside one-cell bars.
    let shared = usize::from(width).saturating_sub(value_width + 2);
    let label_room = shared.saturating_sub((shared / 3).max(1));
    let rows: Vec<(String, u64)> = rows
        .iter()
        .map(|(l, b)| (fit_end(l, label_room), *b))
        .collect();
    let label_width = rows.iter().map(|(l, _)| text_width(l)).max().unwrap_or(0);
    // Columns left for a bar: the width less the labels, the counts and a space before
    // and after the bar.
    let room = usize::from(width).saturating_sub(label_width + value_width + 2);
    let most = rows.iter().map(|(_, b)| *b).max().unwrap_or(0);
    rows.iter()
        .map(|(label, bytes)| {
            let cells = if most == 0 {
                0
            } else {
                // At most `room` (bytes <= most), so the conversion cannot fail.
                usize::try_from(u128::from(*bytes) * room as u128 / u128::from(most))
                    .unwrap_or(room)
            };
            let pad = " ".repeat(label_width.saturating_sub(text_width(label)) + 1);
            let mut spans = vec![TextSpan::raw(format!("{label}{pad}"))];
            if cells > 0 {
                spans.push(TextSpan::styled(
                    "█".repeat(cells),
                    Style::default().fg(ACCENT),
                ));
                spans.push(TextSpan::raw(" "));
            }
            spans.push(TextSpan::raw(thousands(*bytes)));
            Line::from(spans)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 512 position ids (0..=511) in 64 bins of 8 values, as `value_histogram` makes them.
    fn position_ids() -> Histogram {
        Histogram {
            title: "signed values of the I64 words".into(),
            bins: (0..64).map(|k| (k * 8, 8)).collect(),
            bin_width: 8,
        }
    }

    #[test]
    fn bars_of_several_values_are_labelled_with_their_range() {
        let h = position_ids();
        let l = bar_layout(&h, 70);
        assert!(l.ranges);
        assert_eq!(l.bars.len(), 8);
        assert_eq!(l.bars[0].range(), "0-63");
        assert_eq!(l.bars[7].range(), "448-511");
        for b in &l.bars {
            assert!(text_width(&b.range()) <= usize::from(l.bar_width));
        }
        assert!(caption(&h, &l).starts_with("each bar spans 64 values · "));
        // Wide enough for one bar per bin: still a range, `0-7`.
        let l = bar_layout(&h, 64 * 8);
        assert_eq!((l.bars.len(), l.bar_width), (64, 7));
        assert_eq!(l.bars[1].range(), "8-15");
        let c = caption(&h, &l);
        assert!(
            c.starts_with("each bar spans 8 values · most common: 0-7 "),
            "{c}"
        );
    }

    #[test]
    fn bars_of_one_value_keep_single_labels() {
        let h = Histogram {
            title: "exponent".into(),
            bins: (120..130).map(|v: i128| (v, (v - 119) as u64)).collect(),
            bin_width: 1,
        };
        let l = bar_layout(&h, 60);
        assert!(l.ranges);
        assert_eq!((l.bars.len(), l.per, l.bar_width), (10, 1, 3));
        assert_eq!(l.bars[0].range(), "120");
        assert_eq!(
            caption(&h, &l),
            "most common: 129 18.2% · 128 16.4% · 127 14.5% · 126 12.7%"
        );
    }

    #[test]
    fn labels_too_long_for_the_bars_say_so_in_the_caption() {
        // 134 exponents in 70 columns: 17 bars of 8; ranges would need 8 bars.
        let h = Histogram {
            title: "exponent".into(),
            bins: (0..134).map(|v| (v, 1)).collect(),
            bin_width: 1,
        };
        let l = bar_layout(&h, 70);
        assert!(!l.ranges);
        assert_eq!((l.bars.len(), l.bar_width), (17, 3));
        let c = caption(&h, &l);
        assert!(
            c.starts_with("each bar spans 8 values, labelled by its first value · "),
            "{c}"
        );
    }

    #[test]
    fn short_values_keep_four_digits_and_round_down_longer_ones() {
        assert_eq!(short_value(1128), "1128");
        assert_eq!(short_value(-999), "-999");
        assert_eq!(short_value(12_345), "12k");
        assert_eq!(short_value(1_124_640), "1.1M");
        assert_eq!(short_value(i128::from(i64::MIN)), "-9.2E");
        assert_eq!(short_value(i128::from(u64::MAX)), "18E");
    }

    #[test]
    fn node_counts_stand_one_space_after_their_bars() {
        let rows = [
            ("#0 merge fields[11,5]".to_string(), 3),
            ("#1 lit huffman".to_string(), 600),
            ("#2 lit bitpack".to_string(), 1_083),
        ];
        // 40 columns: 21 of labels, 5 of counts, 2 spaces: bars of up to 12 cells.
        let text: Vec<String> = node_rows(&rows, 40).iter().map(Line::to_string).collect();
        assert_eq!(
            text,
            [
                "#0 merge fields[11,5] 3",
                "#1 lit huffman        ██████ 600",
                "#2 lit bitpack        ████████████ 1,083",
            ]
        );
        // Too narrow for the labels: they are cut, never the counts, and the bars keep
        // a third of what labels and bars share (13 columns: 9 of label, up to 4 cells
        // of bar; it was 12 of label and one cell).
        let text: Vec<String> = node_rows(&rows, 20).iter().map(Line::to_string).collect();
        assert_eq!(
            text,
            ["#0 merge… 3", "#1 lit h… ██ 600", "#2 lit b… ████ 1,083",]
        );
        assert!(text.iter().all(|t| text_width(t) <= 20));
        assert_eq!(
            node_rows(&[("#0 const".to_string(), 0)], 20)[0].to_string(),
            "#0 const 0"
        );
    }

    /// At 80 columns the chart titles and captions drop words or whole parts, never a
    /// digit (a tester saw `(of 258,1…` and `most common: 121 31.`).
    #[test]
    fn titles_and_captions_are_cut_between_parts() {
        // The right pane of an 80-column terminal: 32 columns less the borders.
        assert_eq!(
            node_bytes_title(258_166, 30),
            " bytes per node (of 258,166) "
        );
        assert_eq!(node_bytes_title(258_166, 20), " bytes (of 258,166) ");
        assert_eq!(node_bytes_title(258_166, 12), " own bytes …");
        let c = "each bar spans 5 values · most common: 121 31.2% · 120 20.1% · 119 9.9%";
        assert_eq!(fit_caption(c, 46), "each bar spans 5 values …");
        assert_eq!(
            fit_caption(c, 60),
            "each bar spans 5 values · most common: 121 31.2% …"
        );
        assert_eq!(fit_caption(c, 200), c);
        assert_eq!(fit_caption(c, 10), "each bar …");
    }

    #[test]
    fn long_labels_label_every_few_bars_whole() {
        // 0..=2997 in 64 bins of 47: bars of 188 values whose first values reach 4 digits.
        let h = Histogram {
            title: "signed values of the I64 words".into(),
            bins: (0..64).map(|k| (k * 47, 47)).collect(),
            bin_width: 47,
        };
        let l = bar_layout(&h, 70);
        assert!(!l.ranges);
        assert_eq!((l.bars.len(), l.bar_width, l.every), (16, 3, 2));
        assert_eq!(
            label_row(&l),
            "0       376     752     1128    1504    1880    2256    2632"
        );
        assert!(caption(&h, &l).starts_with("each bar spans 188 values, labels every 2 bars · "));
    }
}
