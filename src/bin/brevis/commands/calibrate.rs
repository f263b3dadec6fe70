//! `brevis calibrate`.

use crate::args::CalibrateArgs;
use crate::{shown, Outcome};
use anyhow::Result;
use brevis::archive::escape_name;

pub fn run(a: CalibrateArgs) -> Result<Outcome> {
    let r = brevis::job::calibrate(&a.input, &a.output, a.force)?;
    eprintln!(
        "{}: {} contexts in {:.2}s ({})",
        shown(&r.output),
        r.contexts,
        r.seconds,
        escape_name(&r.source)
    );
    Ok(Outcome::Ok)
}
