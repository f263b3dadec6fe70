//! `brevis ls`.

use crate::args::{archive_input, LsArgs};
use crate::print::{fmt_change, fmt_reduction, fmt_shape, percent_smaller, plural};
use crate::{emit, emit_report, hinted, pipe_hint, Console, Outcome};
use anyhow::Result;
use brevis::archive::escape_name;
use brevis::job::{self, FolderListEntry, ListFile, ListReport};
use std::fmt::Write as _;

pub fn run(a: LsArgs) -> Result<Outcome> {
    let input = archive_input(&a.input, "ls")?;
    let console = Console::new("ls");
    let base = a.base.as_deref().map(job::open_base).transpose()?;
    let r = job::list_from(input, base.as_ref(), &console)
        .map_err(|e| hinted(e.into(), pipe_hint(&a.input, "ls")))?;
    drop(console);
    if a.json {
        emit_report(&r)?;
    } else {
        match &r {
            ListReport::File(l) => emit(&table(l)?)?,
            ListReport::Folder(f) => {
                let mut s = String::new();
                for x in &f.files {
                    match x {
                        FolderListEntry::Copy {
                            path,
                            original_bytes,
                        } => writeln!(
                            s,
                            "# {} (copied, {original_bytes} bytes)",
                            escape_name(path)
                        )?,
                        FolderListEntry::Archive {
                            path,
                            original_bytes,
                            listing,
                            ..
                        } => {
                            writeln!(s, "# {} ({original_bytes} bytes)", escape_name(path))?;
                            s.push_str(&table(listing)?);
                        }
                    }
                }
                emit(&s)?;
            }
        }
    }
    Ok(if r.ok() {
        Outcome::Ok
    } else {
        Outcome::Mismatch
    })
}

/// One archive's tensors as a table, then a line of totals.
fn table(l: &ListFile) -> Result<String> {
    let headings = ["DTYPE", "SHAPE", "ORIGINAL", "ARCHIVE", "REDUCTION", "ROOT"];
    let rows: Vec<[String; 6]> = l
        .tensors
        .iter()
        .map(|t| {
            [
                t.dtype.to_string(),
                fmt_shape(&t.shape),
                t.original_bytes.to_string(),
                t.archive_bytes.to_string(),
                fmt_reduction(t.original_bytes, t.archive_bytes),
                t.reference
                    .as_ref()
                    .map_or_else(|| t.root_op.to_string(), |r| r.short()),
            ]
        })
        .collect();
    let mut widths = headings.map(str::len);
    for r in &rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.len());
        }
    }
    // Numbers right-aligned, text left-aligned; the name comes last so that wide or
    // escaped names never shift the columns.
    let right = [false, false, true, true, true, false];
    let mut s = String::new();
    let line = |s: &mut String, cells: &[&str], name: &str| {
        for ((c, w), r) in cells.iter().zip(widths).zip(right) {
            if r {
                let _ = write!(s, "{c:>w$}  ");
            } else {
                let _ = write!(s, "{c:<w$}  ");
            }
        }
        s.push_str(name);
        s.push('\n');
    };
    line(&mut s, &headings, "NAME");
    for (t, r) in l.tensors.iter().zip(&rows) {
        let cells: Vec<&str> = r.iter().map(String::as_str).collect();
        line(&mut s, &cells, &escape_name(&t.name));
    }
    writeln!(
        s,
        "{}, {}; {} -> {} bytes ({})",
        plural(l.tensors.len(), "tensor"),
        plural(l.gaps.len(), "gap"),
        l.original_bytes,
        l.archive_bytes,
        fmt_change(percent_smaller(l.original_bytes, l.archive_bytes))
    )?;
    Ok(s)
}
