//! `brevis decompress`.

use crate::args::DecompressArgs;
use crate::print::{mb_per_s, plural};
use crate::{after_writing, emit, emit_report, shown, Console, Outcome};
use anyhow::Result;
use brevis::archive::DecompressOptions;
use brevis::job::{self, DecompressDetail};

pub fn run(a: DecompressArgs) -> Result<Outcome> {
    let opts = DecompressOptions {
        jobs: a.jobs,
        force: a.force,
    };
    let console = Console::new("decompress");
    let r = job::decompress(&a.input, a.output.as_deref(), &opts, &console)?;
    drop(console);
    if a.json {
        after_writing(&r.output, emit_report(&r))?;
        return Ok(Outcome::Ok);
    }
    let line = match r.detail {
        DecompressDetail::File { .. } => format!(
            "{} -> {}: {} bytes, tensor and whole-file checksums match, {:.2} s ({:.1} MB/s)\n",
            shown(&r.input),
            shown(&r.output),
            r.original_bytes,
            r.seconds,
            mb_per_s(r.original_bytes, r.seconds),
        ),
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
    after_writing(&r.output, emit(&line))?;
    Ok(Outcome::Ok)
}
