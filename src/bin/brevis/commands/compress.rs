//! `brevis compress`.

use crate::args::CompressArgs;
use crate::print::{fmt_change, mb_per_s, plural};
use crate::{after_writing, emit, emit_report, shown, Console, Outcome};
use anyhow::Result;
use brevis::job::{self, CompressDetail};

pub fn run(a: CompressArgs) -> Result<Outcome> {
    let opts = a.options()?;
    let console = Console::new("compress");
    let r = job::compress(&a.input, a.output.as_deref(), &opts, &console)?;
    drop(console);
    if a.json {
        after_writing(&r.output, emit_report(&r))?;
        return Ok(Outcome::Ok);
    }
    let what = match &r.detail {
        CompressDetail::File { .. } => plural(r.tensor_count(), "tensor"),
        CompressDetail::Folder { shards, copied, .. } => format!(
            "{}, {}, {} copied",
            plural(shards.len(), "shard"),
            plural(r.tensor_count(), "tensor"),
            plural(copied.len(), "file"),
        ),
    };
    after_writing(
        &r.output,
        emit(&format!(
            "{} -> {}: {} -> {} bytes ({}), {what}, {:.2} s ({:.1} MB/s)\n",
            shown(&r.input),
            shown(&r.output),
            r.original_bytes,
            r.archive_bytes,
            fmt_change(r.reduction_percent),
            r.seconds,
            mb_per_s(r.original_bytes, r.seconds),
        )),
    )?;
    Ok(Outcome::Ok)
}
