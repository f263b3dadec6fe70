//! `brevis show`.

use crate::args::ShowArgs;
use crate::print::{col_width, fmt_change, fmt_shape, percent_smaller, plural};
use crate::{emit, emit_report, hinted, pipe_hint, shown, Console, Outcome};
use anyhow::Result;
use brevis::archive::escape_name;
use std::fmt::Write as _;

pub fn run(a: ShowArgs) -> Result<Outcome> {
    let console = Console::new("show");
    let base = a.base.as_deref().map(brevis::job::open_base).transpose()?;
    let found = brevis::job::show(&a.input, &a.tensor, base.as_ref(), &console)
        .map_err(|e| hinted(e.into(), pipe_hint(&a.input, "show")))?;
    drop(console);
    // Not found because the archive is damaged: said on stderr, exit 3.
    let Some(r) = found else {
        return Ok(Outcome::Mismatch);
    };
    let outcome = if r.ok { Outcome::Ok } else { Outcome::Mismatch };
    if a.json {
        emit_report(&r)?;
        return Ok(outcome);
    }
    // Node shares are of the record that holds the program (a group's whole record).
    let record = r.group.as_ref().map_or(r.archive_bytes, |g| g.record_bytes);
    let share = |b: u64| {
        if record > 0 {
            b as f64 / record as f64 * 100.0
        } else {
            0.0
        }
    };
    let mut s = String::new();
    // In a folder, which shard archive holds the tensor.
    let shard = if r.archive == a.input {
        String::new()
    } else {
        format!(" (in {})", shown(&r.archive))
    };
    writeln!(
        s,
        "tensor {}{shard}  {} {}  {} -> record {} ({})",
        escape_name(&r.name),
        r.dtype,
        fmt_shape(&r.shape),
        plural(r.original_bytes as usize, "byte"),
        plural(r.archive_bytes as usize, "byte"),
        fmt_change(percent_smaller(r.original_bytes, r.archive_bytes)),
    )?;
    match (&r.group, &r.copy_of) {
        (Some(g), _) => writeln!(
            s,
            "stored in a group record of {} with its neighbours ({}, from {}): the program \
             below codes them all, and this tensor is counted its share of the record, in \
             proportion to its bytes",
            plural(g.tensors, "tensor"),
            plural(g.record_bytes as usize, "byte"),
            escape_name(&g.first),
        )?,
        (None, Some(of)) => writeln!(
            s,
            "a copy of tensor {}: its record is a reference to that one's (the program \
             below is the one it copies)",
            escape_name(of)
        )?,
        (None, None) => {}
    }
    if let Some(x) = &r.reference {
        let what = match x.role {
            "shard" => "another shard of the folder",
            _ => "the base",
        };
        let tensor = x.tensor.as_deref().map_or_else(
            || format!("#{}", x.tensor_index),
            |n| format!("\"{}\"", escape_name(n)),
        );
        writeln!(
            s,
            "coded against tensor {tensor} of {what}, {:?} ({} bytes, xxh3 {}): the program \
             below restores the residual, which {} with that tensor's words gives this one",
            x.source,
            x.source_bytes,
            x.source_xxh3,
            if x.op == "xor" { "XORed" } else { "added" },
        )?;
    }
    if let Some(st) = &r.settings {
        let level = st.level.map_or(String::new(), |l| format!("--level {l} "));
        writeln!(
            s,
            "built with {level}--budget {} --max-depth {} --max-nodes {}, prior {} ({})",
            st.budget, st.max_depth, st.max_nodes, st.prior, st.prior_digest
        )?;
    }
    writeln!(s)?;
    s.push_str(&r.program);
    writeln!(s)?;
    // Format 4 frames every record: marker and kind, length, item count.
    let kind = if r.format_version >= 4 {
        "frame"
    } else {
        "kind"
    };
    let framing_label = if r.format_version == 1 {
        "(record fields: name, dtype, shape, offsets, checksum)".to_string()
    } else if r.copy_of.is_some() {
        format!("(copy record: {kind}, record index)")
    } else if r.reference.is_some() {
        format!("(reference record: {kind}, checksum, source, tensor, its checksum, op)")
    } else if r.regions > 0 {
        format!(
            "(regions record: {kind}, checksum, {} regions' words, lengths, checksums)",
            r.regions
        )
    } else {
        format!("(record fields: {kind}, checksum)")
    };
    let mut lines: Vec<(String, u64, u64)> =
        vec![(framing_label, r.framing_bytes, r.framing_bytes)];
    for n in &r.nodes {
        let text = format!("{:indent$}{}", "", n.line, indent = n.depth * 2);
        lines.push((text, n.own_bytes, n.subtree_bytes));
    }
    let w = col_width(lines.iter().map(|l| l.0.chars().count()), 4);
    let own_w = col_width(lines.iter().map(|l| l.1.to_string().len()), 3);
    let sub_w = col_width(lines.iter().map(|l| l.2.to_string().len()), 7);
    writeln!(
        s,
        "{:<w$}  {:>own_w$}  {:>sub_w$}  {:>6}",
        "NODE", "OWN", "SUBTREE", "SHARE"
    )?;
    for (text, own, sub) in &lines {
        let pad = w - text.chars().count();
        writeln!(
            s,
            "{text}{:pad$}  {own:>own_w$}  {sub:>sub_w$}  {:>5.1}%",
            "",
            share(*sub)
        )?;
    }
    emit(&s)?;
    Ok(outcome)
}
