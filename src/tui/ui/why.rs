//! "Why this size": bits per word achieved against reference bounds, the node holding
//! the most bytes, and plain sentences on what limits the size.

use super::super::app::App;
use super::super::escape_name;
use super::super::inspect::{thousands, Inspection};
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
    let lines = lines(&name, &ins);
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
) -> Line<'static> {
    let (num, b) = match bits {
        Some(b) => (format!("{b:>7.3}"), bar(b / scale, BAR)),
        None => ("    n/a".to_string(), " ".repeat(BAR)),
    };
    let style = if strong {
        Style::default().fg(ACCENT).bold()
    } else {
        Style::default()
    };
    Line::from(vec![
        Span::styled(format!("  {label:<38}"), style),
        Span::styled(num, style),
        Span::raw("  "),
        Span::styled(
            b,
            Style::default().fg(if strong { ACCENT } else { Color::Gray }),
        ),
        Span::styled(format!("  {note}"), Style::default().fg(Color::DarkGray)),
    ])
}

fn lines(name: &str, ins: &Inspection) -> Vec<Line<'static>> {
    let w = &ins.why;
    let scale = f64::from(w.width.max(1)).max(w.achieved_bits);
    let mut out = vec![
        Line::from(vec![
            Span::styled(name.to_string(), Style::default().fg(ACCENT).bold()),
            Span::raw(format!(
                "  {} word{} of {}, program {} byte{}",
                thousands(w.words),
                if w.words == 1 { "" } else { "s" },
                super::super::inspect::bits(u64::from(w.width)),
                thousands(ins.total_bytes),
                if ins.total_bytes == 1 { "" } else { "s" }
            )),
        ]),
        Line::raw(""),
        Line::styled("bits per word", Style::default().bold()),
        reference(
            "achieved (program bytes × 8 / words)",
            Some(w.achieved_bits),
            scale,
            "",
            true,
        ),
        reference("raw width", Some(f64::from(w.width)), scale, "", false),
        reference(
            "order-0 entropy of whole words",
            w.whole_entropy,
            scale,
            &w.distinct
                .map(|d| format!("{} distinct", thousands(d)))
                .unwrap_or_else(|| "too many distinct to count".into()),
            false,
        ),
    ];
    if !w.fields.is_empty() {
        let parts: Vec<String> = w
            .fields
            .iter()
            .map(|f| match f.entropy_bits {
                Some(h) => format!("{} {h:.2} of {} {}", f.name, f.width, bits(f.width)),
                None => format!("{} ? of {} {}", f.name, f.width, bits(f.width)),
            })
            .collect();
        out.push(reference(
            "order-0 fields, mantissa raw",
            w.field_bound_bits,
            scale,
            "",
            false,
        ));
        out.push(Line::styled(
            format!("    {}", parts.join(" · ")),
            Style::default().fg(Color::DarkGray),
        ));
    }
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
    for s in &w.sentences {
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
