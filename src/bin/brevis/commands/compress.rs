//! `brevis compress`.

use crate::args::{destination, is_stdio, CompressArgs};
use crate::print::{fmt_change, mb_per_s, plural};
use crate::{
    after_writing, emit, emit_report, emit_stderr, failure, hinted, pipe_hint, shown, Console,
    Outcome,
};
use anyhow::Result;
use brevis::job::{self, CompressDetail, Input};
use std::io::IsTerminal;

pub fn run(a: CompressArgs) -> Result<Outcome> {
    a.search.check().map_err(|m| failure("usage", m))?;
    let opts = a.options()?;
    let input = if is_stdio(Some(&a.input)) {
        if std::io::stdin().is_terminal() {
            return Err(failure(
                "usage",
                "standard input is a terminal: pipe a .safetensors file into \
                 `brevis compress -` (or name the file)"
                    .to_string(),
            ));
        }
        Input::Stdin
    } else {
        Input::Path(&a.input)
    };
    let console = Console::new("compress");
    let r = job::compress_from(input, destination(a.output.as_deref()), &opts, &console)
        .map_err(|e| hinted(e.into(), pipe_hint(&a.input, "compress")))?;
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
    let line = format!(
        "{} -> {}: {} -> {} bytes ({}), {what}, {:.2} s ({:.1} MB/s)\n",
        shown(&r.input),
        shown(&r.output),
        r.original_bytes,
        r.archive_bytes,
        fmt_change(r.reduction_percent),
        r.seconds,
        mb_per_s(r.original_bytes, r.seconds),
    );
    if is_stdio(a.output.as_deref()) {
        emit_stderr(&line);
    } else {
        after_writing(&r.output, emit(&line))?;
    }
    Ok(Outcome::Ok)
}
