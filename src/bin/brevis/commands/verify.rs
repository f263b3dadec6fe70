//! `brevis verify`.

use crate::args::{archive_input, VerifyArgs};
use crate::print::plural;
use crate::{emit, emit_report, hinted, pipe_hint, shown, Console, Outcome};
use anyhow::Result;
use brevis::archive::escape_name;
use brevis::job::{self, FolderComparison, RegionStatus, VerifyFile, VerifyFolder, VerifyReport};
use std::fmt::Write as _;

pub fn run(a: VerifyArgs) -> Result<Outcome> {
    let input = archive_input(&a.input, "verify")?;
    let console = Console::new("verify");
    let base = a.base.as_deref().map(job::open_base).transpose()?;
    let r = job::verify_from(input, a.against.as_deref(), a.jobs, base.as_ref(), &console)
        .map_err(|e| hinted(e.into(), pipe_hint(&a.input, "verify")))?;
    drop(console);
    if a.json {
        emit_report(&r)?;
    } else {
        let text = match &r {
            VerifyReport::File(v) => file_text(v)?,
            VerifyReport::Folder(v) => folder_text(v)?,
        };
        emit(&text)?;
    }
    Ok(if r.ok() {
        Outcome::Ok
    } else {
        Outcome::Mismatch
    })
}

fn file_text(v: &VerifyFile) -> Result<String> {
    let mut s = String::new();
    let name = shown(&v.archive);
    for line in v.failure_lines() {
        writeln!(s, "{name}: FAILED: {line}")?;
    }
    let data_ok = v.failed == 0 && v.file_checksum_ok;
    for d in &v.disagreements {
        writeln!(s, "{name}: FAILED: {d}")?;
    }
    // Compared with the original and different: the verdict is FAILED, so the archive's
    // own soundness is said without "ok:" (it printed "ok:" and then "FAILED:").
    let differs = v.against.as_ref().is_some_and(|c| !c.identical);
    if v.checksums_ok() {
        let sound = format!(
            "{}, {}, header and whole file ({} bytes) match their checksums",
            plural(v.tensor_count, "tensor"),
            plural(v.gap_count, "gap"),
            v.original_bytes
        );
        if differs {
            writeln!(s, "{name}: the archive is sound: {sound}")?;
        } else {
            writeln!(s, "{name}: ok: {sound}")?;
        }
    } else if data_ok {
        // Only the records are damaged: say that the data itself decodes right.
        writeln!(
            s,
            "{name}: the data decodes right: all {} regions and the whole file ({} bytes) \
             match their checksums",
            v.regions.len(),
            v.original_bytes
        )?;
    } else if v.file_checksum_ok
        && v.failures()
            .all(|f| matches!(f.status, RegionStatus::Mismatch { .. }))
    {
        // Every decoded byte matches the whole-file checksum: the regions' stored
        // checksums are what changed, not the data.
        writeln!(
            s,
            "{name}: FAILED: {} of {} regions do not match their stored checksums, but \
             the whole file ({} bytes) matches its own: the stored checksums are damaged, \
             not the data",
            v.failed,
            v.regions.len(),
            v.original_bytes
        )?;
    } else {
        writeln!(
            s,
            "{name}: FAILED: {} of {} regions differ; whole-file checksum {}",
            v.failed,
            v.regions.len(),
            if v.file_checksum_ok {
                "matches"
            } else {
                "does not match"
            }
        )?;
    }
    if let Some(c) = &v.against {
        match c.first_difference {
            None => writeln!(
                s,
                "{name}: identical to {} ({} bytes)",
                shown(&c.file),
                c.file_bytes
            )?,
            Some(at) => writeln!(
                s,
                "{name}: FAILED: differs from {} at byte {at} (decoded {} bytes, file {} bytes)",
                shown(&c.file),
                c.decoded_bytes,
                c.file_bytes
            )?,
        }
    }
    Ok(s)
}

fn folder_text(v: &VerifyFolder) -> Result<String> {
    let mut s = String::new();
    let name = shown(&v.folder);
    for file in v.files.iter().filter(|f| !f.ok) {
        let path = escape_name(&file.path);
        if file.failures.is_empty() {
            writeln!(s, "{name}: FAILED: {path}")?;
        }
        for line in &file.failures {
            writeln!(s, "{name}: FAILED: {path}: {line}")?;
        }
    }
    if v.files.iter().all(|f| f.ok) {
        // As for a file: "ok:" only when nothing below says FAILED.
        let differs = v.against.as_ref().is_some_and(|a| !a.identical);
        writeln!(
            s,
            "{name}: {}{} ({}) match their checksums ({} bytes)",
            if differs {
                "the archive is sound: "
            } else {
                "ok: "
            },
            plural(v.files.len(), "file"),
            plural(v.shard_count, "shard"),
            v.original_bytes
        )?;
    }
    if let Some(against) = &v.against {
        let orig = shown(&against.folder);
        // `join`, not "{orig}/{path}": an original given as `dir/` printed `dir//file`.
        let inside = |path: &str| shown(&against.folder.join(path));
        for c in &against.files {
            match c {
                FolderComparison::Identical { .. } => {}
                FolderComparison::Differs {
                    path,
                    file_bytes,
                    decoded_bytes,
                    first_difference,
                } => {
                    let path = escape_name(path);
                    if let Some(at) = first_difference {
                        writeln!(
                            s,
                            "{name}: FAILED: {path} differs from {} at byte {at} \
                             (decoded {decoded_bytes} bytes, file {file_bytes} bytes)",
                            inside(&path),
                        )?;
                    }
                }
                FolderComparison::Missing { path } => {
                    let path = escape_name(path);
                    writeln!(s, "{name}: FAILED: {path} is missing from {orig}")?;
                }
                FolderComparison::Extra { path } => {
                    let path = escape_name(path);
                    writeln!(s, "{name}: FAILED: {} is not in the archive", inside(&path))?;
                }
            }
        }
        if against.identical {
            writeln!(
                s,
                "{name}: identical to {orig} ({}, {} bytes)",
                plural(against.files.len(), "file"),
                v.original_bytes
            )?;
        }
    }
    Ok(s)
}
