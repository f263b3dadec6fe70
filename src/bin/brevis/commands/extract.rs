//! `brevis extract`.

use crate::args::{destination, is_stdio, ExtractArgs};
use crate::print::plural;
use crate::{
    after_writing, emit, emit_report, emit_stderr, hinted, pipe_hint, shown, Console, Outcome,
};
use anyhow::Result;
use brevis::job;

pub fn run(a: ExtractArgs) -> Result<Outcome> {
    let console = Console::new("extract");
    let dest = destination(Some(&a.output));
    let base = a.base.as_deref().map(job::open_base).transpose()?;
    let r = job::extract(&a.input, &a.tensors, dest, a.force, base.as_ref(), &console)
        .map_err(|e| hinted(e.into(), pipe_hint(&a.input, "extract")))?;
    drop(console);
    if a.json {
        after_writing(&r.output, emit_report(&r))?;
        return Ok(Outcome::Ok);
    }
    let line = format!(
        "{} -> {}: {}, {} bytes{}, checksums match, {:.2} s\n",
        shown(&r.input),
        shown(&r.output),
        plural(r.tensors.len(), "tensor"),
        r.bytes,
        if r.metadata {
            ", __metadata__ kept"
        } else {
            ""
        },
        r.seconds,
    );
    if is_stdio(Some(&a.output)) {
        emit_stderr(&line);
    } else {
        after_writing(&r.output, emit(&line))?;
    }
    Ok(Outcome::Ok)
}
