//! "Why this size": bits per word achieved against reference bounds, the node holding
//! the most bytes, and plain sentences on what limits the size.

use super::super::app::App;
use super::super::escape_name;
use super::super::inspect::{record_account, record_sentences, thousands, Inspection};
use super::super::model::{RecordInfo, Sharing};
use super::{bar, inspected, ACCENT};
use ratatui::layout::Rect;
use ratatui::style::{Color, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Wrap};
use ratatui::Frame;

const BAR: usize = 24;

pub(super) fn draw(frame: &mut Frame, area: Rect, app: &mut App) {
    let Some((ins, name)) = inspected(frame, area, app) else {
        return;
    };
    let record = app
        .selected_tensor()
        .and_then(|t| app.source.as_ref().and_then(|s| s.record(t)));
    let copied = match record.as_ref().map(|r| &r.sharing) {
        Some(Sharing::Copy { of }) => app
            .rows()
            .get(*of)
            .map(|r| escape_name(&r.name).into_owned()),
        _ => None,
    };
    let original = app.selected_row().map_or(0, |r| r.original_bytes);
    let lines = lines(
        &name,
        &ins,
        record.as_ref(),
        original,
        copied.as_deref(),
        usize::from(area.width),
    );
    app.pages.text = usize::from(area.height).max(1);
    let max = lines.len().saturating_sub(area.height as usize);
    app.scroll = app.scroll.min(max);
    let scroll = u16::try_from(app.scroll).unwrap_or(u16::MAX);
    frame.render_widget(
        Paragraph::new(lines)
            .wrap(Wrap { trim: false })
            .scroll((scroll, 0)),
        area,
    );
}

/// One row of bits per word: `bits` drawn as a bar of which a full one is `scale` bits
/// (the raw width, or what the program takes when it takes more: a tiny tensor's
/// framing can cost more than its words, and its bar must then outgrow raw's).
fn reference(
    label: &str,
    bits: Option<f64>,
    scale: f64,
    note: &str,
    strong: bool,
    bar_width: usize,
    label_width: usize,
) -> Line<'static> {
    let (num, b) = match bits {
        Some(b) => (format!("{b:>7.3}"), bar(b / scale, bar_width)),
        None => ("    n/a".to_string(), " ".repeat(bar_width)),
    };
    let style = if strong {
        Style::default().fg(ACCENT).bold()
    } else {
        Style::default()
    };
    Line::from(vec![
        Span::styled(
            format!("  {:<label_width$}", super::fit_end(label, label_width)),
            style,
        ),
        Span::styled(num, style),
        Span::raw("  "),
        Span::styled(
            b,
            Style::default().fg(if strong { ACCENT } else { Color::Gray }),
        ),
        Span::styled(format!("  {note}"), Style::default().fg(Color::DarkGray)),
    ])
}

fn lines(
    name: &str,
    ins: &Inspection,
    record: Option<&RecordInfo>,
    original: u64,
    copied: Option<&str>,
    width: usize,
) -> Vec<Line<'static>> {
    let w = &ins.why;
    // Narrow terminals drop the bars before any text: label, number and bar take
    // 2 + 38 + 7 + 2 + BAR columns.
    let bar_width = if width >= 49 + BAR + 20 { BAR } else { 0 };
    // Labels 38 columns wide, narrower where that leaves the number no room.
    let label_w = 38.min(width.saturating_sub(12)).max(8);
    let whose = match record.map(|r| &r.sharing) {
        Some(Sharing::Group { .. }) => "the group's program",
        Some(Sharing::Copy { .. }) => "the copied tensor's program",
        Some(Sharing::Reference { .. }) => "the residual's program",
        _ => "program",
    };
    // Whose words the statistics below describe: a group's program restores all its
    // tensors, a reference record's the residual against the other file's tensor.
    let words_of = match record.map(|r| &r.sharing) {
        Some(Sharing::Group { tensors, .. }) => format!(" in its group of {tensors} tensors"),
        Some(Sharing::Reference { op, role, .. }) => {
            format!(" of the residual ({op} with the {role}'s tensor)")
        }
        _ => String::new(),
    };
    let scale = f64::from(w.width.max(1)).max(w.achieved_bits);
    let mut out = vec![
        Line::from(vec![
            Span::styled(name.to_string(), Style::default().fg(ACCENT).bold()),
            Span::raw(format!(
                "  {} word{} of {}{words_of}, {whose} {} byte{}",
                thousands(w.words),
                if w.words == 1 { "" } else { "s" },
                super::super::inspect::bits(u64::from(w.width)),
                thousands(ins.total_bytes),
                if ins.total_bytes == 1 { "" } else { "s" }
            )),
        ]),
        Line::raw(""),
    ];
    if let Some(rec) = record {
        let account = record_account(rec, ins);
        if !account.is_empty() {
            out.push(Line::styled(
                "bytes of the record (each line the sum of those under it)",
                Style::default().bold(),
            ));
            let cells: Vec<Vec<String>> = account
                .iter()
                .map(|(_, _, b)| vec![format!("{} B", thousands(*b))])
                .collect();
            let w = super::column_widths(&cells, &[9]);
            // As wide as it was (44 columns of labels), or the view's width.
            let line_w = width.min(44 + 2 + w[0]);
            for ((depth, what, _), c) in account.iter().zip(&cells) {
                let label = format!("{}{what}", "  ".repeat(depth + 1));
                out.push(Line::styled(
                    super::columns_line(&label, c, &w, line_w),
                    if *depth == 0 {
                        Style::default().fg(ACCENT).bold()
                    } else {
                        Style::default()
                    },
                ));
            }
            out.push(Line::raw(""));
        }
    }
    out.extend([
        Line::styled("bits per word", Style::default().bold()),
        reference(
            "achieved (program bytes × 8 / words)",
            Some(w.achieved_bits),
            scale,
            "",
            true,
            bar_width,
            label_w,
        ),
        reference(
            "raw width",
            Some(f64::from(w.width)),
            scale,
            "",
            false,
            bar_width,
            label_w,
        ),
        reference(
            "order-0 entropy of whole words",
            w.whole_entropy,
            scale,
            &match w.distinct {
                _ if w.words == 1 => "one word: no reference".to_string(),
                Some(d) if !w.whole_meaningful => format!(
                    "{} distinct in {} words: no reference",
                    thousands(d),
                    thousands(w.words)
                ),
                Some(d) => format!("{} distinct", thousands(d)),
                None => "too many distinct to count".into(),
            },
            false,
            bar_width,
            label_w,
        ),
    ]);
    if !w.fields.is_empty() {
        let parts: Vec<String> = w
            .fields
            .iter()
            .map(|f| match f.entropy_bits {
                Some(h) => format!("{} {h:.2} of {} {}", f.name, f.width, bits(f.width)),
                None => format!("{} ? of {} {}", f.name, f.width, bits(f.width)),
            })
            .collect();
        let note = if w.fields_meaningful {
            String::new()
        } else {
            "no reference: too few words per exponent".to_string()
        };
        out.push(reference(
            "order-0 fields, mantissa raw",
            w.field_bound_bits,
            scale,
            &note,
            false,
            bar_width,
            label_w,
        ));
        out.push(Line::styled(
            format!("    {}", parts.join(" · ")),
            Style::default().fg(Color::DarkGray),
        ));
    }
    let coded = super::super::inspect::program_parts(ins).payload;
    let above = coded.saturating_sub(w.reference_bytes);
    out.push(Line::from(vec![
        Span::styled(
            format!("  {:<38}", "coded words against the reference"),
            Style::default(),
        ),
        Span::raw(format!(
            "{} B, reference {} B: {}",
            thousands(coded),
            thousands(w.reference_bytes),
            if above > 0 {
                format!("{} B above it", thousands(above))
            } else {
                "within it".to_string()
            }
        )),
    ]));
    out.push(Line::raw(""));
    if let Some(n) = ins.nodes.get(w.largest) {
        out.push(Line::from(vec![
            Span::styled("largest node  ", Style::default().bold()),
            Span::raw(format!(
                "#{} {} : {} — {} of {} bytes ({})",
                w.largest,
                n.label,
                n.ty,
                thousands(n.own_bytes),
                thousands(ins.total_bytes),
                n.role
            )),
        ]));
        out.push(Line::raw(""));
    }
    out.push(Line::styled("what limits it", Style::default().bold()));
    let from_record = record
        .map(|r| record_sentences(r, original, copied))
        .unwrap_or_default();
    for s in from_record.iter().chain(&w.sentences) {
        out.push(Line::raw(format!("  • {}", escape_name(s))));
    }
    out
}

fn bits(n: u32) -> &'static str {
    if n == 1 {
        "bit"
    } else {
        "bits"
    }
}
