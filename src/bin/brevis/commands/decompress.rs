//! `brevis decompress`.

use crate::args::{archive_input, destination, is_stdio, DecompressArgs};
use crate::print::{mb_per_s, plural};
use crate::{
    after_writing, emit, emit_report, emit_stderr, hinted, pipe_hint, shown, Console, Outcome,
};
use anyhow::Result;
use brevis::archive::{escape_name, DecompressOptions};
use brevis::job::{self, DecompressDetail};

pub fn run(a: DecompressArgs) -> Result<Outcome> {
    let input = archive_input(&a.input, "decompress")?;
    let opts = DecompressOptions {
        jobs: a.jobs,
        force: a.force,
        salvage: a.salvage,
        base: a.base.as_deref().map(job::open_base).transpose()?,
    };
    let console = Console::new("decompress");
    let r = job::decompress_from(input, destination(a.output.as_deref()), &opts, &console)
        .map_err(|e| {
            let hint = pipe_hint(&a.input, "decompress")
                .or_else(|| (!a.salvage).then(|| salvage_hint(&e, &a.input)).flatten());
            hinted(e.into(), hint)
        })?;
    drop(console);
    // The damaged regions a salvage zero-filled: on stderr, one line per tensor.
    for d in &r.damaged {
        let what = if d.tensors.is_empty() {
            d.region.clone()
        } else {
            let names: Vec<String> = d
                .tensors
                .iter()
                .map(|t| format!("tensor \"{}\"", escape_name(t)))
                .collect();
            names.join(", ")
        };
        let what = match &d.file {
            Some(file) => format!("\"{}\": {what}", escape_name(file)),
            None => what,
        };
        eprintln!(
            "damaged: {what}: {} bytes at file offset {} zero-filled: {}",
            d.bytes,
            d.offset,
            escape_name(&d.reason)
        );
    }
    // Damage is a zero-filled region, or an archive restored without its index.
    let outcome = if r.ok { Outcome::Ok } else { Outcome::Mismatch };
    if a.json {
        after_writing(&r.output, emit_report(&r))?;
        return Ok(outcome);
    }
    let line = match r.detail {
        DecompressDetail::File { .. } if !r.damaged.is_empty() => {
            let tensors: usize = r.damaged.iter().map(|d| d.tensors.len().max(1)).sum();
            format!(
                "{} -> {}: {} bytes, SALVAGED: {} zero-filled (named above), every other \
                 tensor matches its checksum, {:.2} s\n",
                shown(&r.input),
                shown(&r.output),
                r.original_bytes,
                plural(tensors, "damaged tensor or gap"),
                r.seconds,
            )
        }
        DecompressDetail::File { .. } if !r.whole_file_checked => format!(
            "{} -> {}: {} bytes, SALVAGED without the archive's index: every tensor \
             matches its checksum, the whole file could not be checked, {:.2} s\n",
            shown(&r.input),
            shown(&r.output),
            r.original_bytes,
            r.seconds,
        ),
        DecompressDetail::File { .. } => format!(
            "{} -> {}: {} bytes, tensor and whole-file checksums match, {:.2} s ({:.1} MB/s)\n",
            shown(&r.input),
            shown(&r.output),
            r.original_bytes,
            r.seconds,
            mb_per_s(r.original_bytes, r.seconds),
        ),
        DecompressDetail::Folder { files } if !r.damaged.is_empty() => {
            let tensors: usize = r.damaged.iter().map(|d| d.tensors.len().max(1)).sum();
            format!(
                "{} -> {}: {}, {} bytes, SALVAGED: {} zero-filled (named above), every \
                 other byte matches its checksum, {:.2} s\n",
                shown(&r.input),
                shown(&r.output),
                plural(files, "file"),
                r.original_bytes,
                plural(tensors, "damaged tensor, gap or file"),
                r.seconds,
            )
        }
        DecompressDetail::Folder { files } => format!(
            "{} -> {}: {}, {} bytes, all checksums match, {:.2} s ({:.1} MB/s)\n",
            shown(&r.input),
            shown(&r.output),
            plural(files, "file"),
            r.original_bytes,
            r.seconds,
            mb_per_s(r.original_bytes, r.seconds),
        ),
    };
    if is_stdio(a.output.as_deref()) || !r.ok {
        emit_stderr(&line);
    } else {
        after_writing(&r.output, emit(&line))?;
    }
    Ok(outcome)
}

/// For a damaged archive file, what `--salvage` would do about it: a tensor record that
/// does not decode or does not match its checksum (the other tensors restored, that one
/// zero-filled); an archive cut short or whose trailer or index is damaged, when its
/// records can be walked (the tensors whose records are whole restored, the others
/// zero-filled). A file is opened for salvage to tell (nothing decoded); standard input,
/// which cannot be read twice, gets the hint only when its header record would decide.
fn salvage_hint(e: &brevis::Error, input: &std::path::Path) -> Option<String> {
    if input.is_dir() {
        return None;
    }
    if e.is_mismatch() || matches!(e.kind(), "damaged_record" | "undecodable_record") {
        return Some(
            "; `brevis decompress --salvage` restores every other tensor and zero-fills the \
             damaged ones (it needs the header record, which names every tensor, intact)"
                .to_string(),
        );
    }
    if e.kind() != "damaged_archive" {
        return None;
    }
    if is_stdio(Some(input)) {
        return Some(
            "; `brevis decompress - --salvage` restores the tensors whose records are whole \
             and zero-fills the others, if the archive's header record (which names every \
             tensor) is whole"
                .to_string(),
        );
    }
    job::open_archive_for_salvage_from(job::Input::Path(input))
        .is_ok()
        .then(|| {
            "; `brevis decompress --salvage` restores the tensors whose records are whole \
             and zero-fills the others"
                .to_string()
        })
}
