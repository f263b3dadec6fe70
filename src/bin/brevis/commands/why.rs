//! `brevis why`: where an archive's bytes go, or the Why view of one tensor.

use crate::args::WhyArgs;
use crate::print::{col_width, fmt_change, fmt_shape, percent_smaller, plural};
use crate::{emit, emit_report, hinted, pipe_hint, shown, Console, Outcome};
use anyhow::Result;
use brevis::archive::escape_name;
use brevis::job::why::{self, TensorWhy, WhyOutput, WhyReport, KINDS};
use std::fmt::Write as _;

/// Ranked tensors printed (`--json` lists them all).
const SHOWN: usize = 10;

pub fn run(a: WhyArgs) -> Result<Outcome> {
    let console = Console::new("why");
    let base = a.base.as_deref().map(brevis::job::open_base).transpose()?;
    let out = why::why(&a.input, a.tensor.as_deref(), base.as_ref(), &console)
        .map_err(|e| hinted(e.into(), pipe_hint(&a.input, "why")))?;
    drop(console);
    if a.json {
        emit_report(&out)?;
        return Ok(Outcome::Ok);
    }
    match out {
        WhyOutput::Archive(r) => emit(&archive_text(&r, &shown(&a.input))?)?,
        WhyOutput::Tensor(t) => emit(&tensor_text(&t)?)?,
    }
    Ok(Outcome::Ok)
}

fn share(b: u64, total: u64) -> f64 {
    if total == 0 {
        0.0
    } else {
        b as f64 / total as f64 * 100.0
    }
}

/// A table of `(label, bytes)` rows with their share of `total`, and the total.
fn table(s: &mut String, title: &str, rows: &[(String, u64)], total: u64) -> std::fmt::Result {
    let w = col_width(rows.iter().map(|r| r.0.chars().count()), title.len()).max(5);
    let bw = col_width(rows.iter().map(|r| thousands(r.1).len()), 5);
    writeln!(s, "{title:<w$}  {:>bw$}  {:>6}", "BYTES", "SHARE")?;
    for (label, b) in rows {
        writeln!(
            s,
            "{label:<w$}  {:>bw$}  {:>5.1}%",
            thousands(*b),
            share(*b, total)
        )?;
    }
    writeln!(
        s,
        "{:<w$}  {:>bw$}  {:>5.1}%",
        "total",
        thousands(total),
        100.0
    )?;
    writeln!(s)
}

fn thousands(v: u64) -> String {
    let d = v.to_string();
    let mut out = String::new();
    for (i, c) in d.chars().enumerate() {
        if i > 0 && (d.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn archive_text(r: &WhyReport, path: &str) -> Result<String> {
    let mut s = String::new();
    writeln!(
        s,
        "{path}: {} -> {} bytes ({}): where the bytes go",
        thousands(r.original_bytes),
        thousands(r.archive_bytes),
        fmt_change(percent_smaller(r.original_bytes, r.archive_bytes))
    )?;
    writeln!(s)?;
    let kinds: Vec<(String, u64)> = KINDS
        .iter()
        .map(|(k, label)| (label.to_string(), r.kind(k)))
        .filter(|(l, b)| *b > 0 || !l.contains("not analysed"))
        .collect();
    table(&mut s, "BY KIND", &kinds, r.archive_bytes)?;
    table(&mut s, "BY DTYPE", &r.bytes_by_dtype, r.archive_bytes)?;
    let roles: Vec<(String, u64)> = r
        .bytes_by_role
        .iter()
        .filter(|(_, b)| *b > 0)
        .cloned()
        .collect();
    table(&mut s, "BY ROLE", &roles, r.archive_bytes)?;
    let above = &r.tensors_above_reference;
    if above.is_empty() {
        writeln!(s, "no record's coded words are above its reference")?;
    } else {
        writeln!(
            s,
            "FURTHEST ABOVE THEIR REFERENCES ({} of {}; --json lists all)",
            above.len().min(SHOWN),
            plural(above.len(), "record")
        )?;
        let rows: Vec<_> = above.iter().take(SHOWN).collect();
        let aw = col_width(rows.iter().map(|x| thousands(x.bytes_above).len()), 5);
        let rw = col_width(rows.iter().map(|x| thousands(x.reference_bytes).len()), 9);
        let cw = col_width(rows.iter().map(|x| thousands(x.coded_words).len()), 11);
        writeln!(
            s,
            "{:>aw$}  {:>rw$}  {:>cw$}  TENSOR",
            "ABOVE", "REFERENCE", "CODED WORDS"
        )?;
        for x in rows {
            let group = if x.tensors > 1 {
                format!(" (and {} more in its group)", x.tensors - 1)
            } else {
                String::new()
            };
            writeln!(
                s,
                "{:>aw$}  {:>rw$}  {:>cw$}  {}{group}",
                thousands(x.bytes_above),
                thousands(x.reference_bytes),
                thousands(x.coded_words),
                escape_name(&x.name)
            )?;
        }
    }
    writeln!(s)?;
    writeln!(s, "STRUCTURE FOUND")?;
    for st in &r.structure {
        let what = match st.kind {
            "copies" => "copy records",
            "references" => "records coded against a base",
            "back_references" => "backref nodes",
            _ => "dequant nodes",
        };
        let saved = match st.saved_bytes {
            _ if st.count == 0 => String::new(),
            Some(v) if v >= 0 => format!(", saving {} bytes", thousands(v as u64)),
            Some(v) => format!(", {} bytes more", thousands(v.unsigned_abs())),
            None => ", saving unknown (the base is not attached: --base)".to_string(),
        };
        let against = match st.kind {
            "copies" => " against storing the copied record again",
            _ => " against the order-0 reference of what they produce",
        };
        writeln!(
            s,
            "  {}: {} {what} taking {} bytes{saved}{}",
            st.kind.replace('_', " "),
            st.count,
            thousands(st.bytes),
            if st.count > 0 && st.saved_bytes.is_some() {
                against
            } else {
                ""
            }
        )?;
    }
    if !r.not_analysed.is_empty() {
        writeln!(
            s,
            "\n{} not analysed (coded against a base that is not attached: --base BASE)",
            plural(r.not_analysed.len(), "record")
        )?;
    }
    Ok(s)
}

fn tensor_text(t: &TensorWhy) -> Result<String> {
    let mut s = String::new();
    writeln!(
        s,
        "tensor {}  {} {}  {} -> record {} ({}), stored as {}",
        escape_name(&t.name),
        t.dtype,
        fmt_shape(&t.shape),
        plural(t.original_bytes as usize, "byte"),
        plural(t.record_bytes as usize, "byte"),
        fmt_change(percent_smaller(t.original_bytes, t.record_bytes)),
        t.stored_as
    )?;
    writeln!(
        s,
        "record {} = framing {} + program {} (structure {}, codec tables {}, coded words {})",
        thousands(t.record_bytes),
        thousands(t.framing_bytes),
        thousands(t.program_bytes),
        thousands(t.parts.structure),
        thousands(t.parts.tables),
        thousands(t.parts.coded_words)
    )?;
    let bits = |b: Option<f64>| b.map_or_else(|| "no reference".to_string(), |b| format!("{b:.3}"));
    let float =
        brevis::tensor::Dtype::from_name(t.dtype).is_some_and(|d| d.float_layout().is_some());
    let fields = if float {
        bits(t.field_bound_bits)
    } else {
        "n/a (not a float)".to_string()
    };
    writeln!(
        s,
        "bits per word ({} words of {} bits): achieved {:.3}; order-0 entropy of whole words {}; \
         order-0 fields, mantissa raw {}",
        thousands(t.words),
        t.width,
        t.achieved_bits,
        bits(t.whole_entropy_bits),
        fields
    )?;
    writeln!(
        s,
        "reference {} bytes; coded words above it: {} bytes",
        thousands(t.reference_bytes),
        thousands(t.bytes_above)
    )?;
    writeln!(s)?;
    let lines: Vec<String> = t
        .nodes
        .iter()
        .map(|n| format!("{:indent$}{}", "", n.line, indent = n.depth * 2))
        .collect();
    let w = col_width(lines.iter().map(|l| l.chars().count()), 4);
    let ow = col_width(t.nodes.iter().map(|n| thousands(n.own_bytes).len()), 3);
    let sw = col_width(t.nodes.iter().map(|n| thousands(n.subtree_bytes).len()), 7);
    writeln!(s, "  {:<w$}  {:>ow$}  {:>sw$}", "NODE", "OWN", "SUBTREE")?;
    for (k, (l, n)) in lines.iter().zip(&t.nodes).enumerate() {
        let mark = if k == t.largest { "*" } else { " " };
        writeln!(
            s,
            "{mark} {l:<w$}  {:>ow$}  {:>sw$}",
            thousands(n.own_bytes),
            thousands(n.subtree_bytes)
        )?;
    }
    writeln!(s)?;
    writeln!(s, "what limits it (* the largest node)")?;
    for x in &t.sentences {
        writeln!(s, "  - {}", escape_name(x))?;
    }
    Ok(s)
}
