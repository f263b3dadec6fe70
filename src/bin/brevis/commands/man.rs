//! `brevis man`: the man page (roff), from the clap definitions.

use crate::args::Cli;
use crate::{failure, Outcome};
use anyhow::Result;
use clap::CommandFactory;

pub fn run() -> Result<Outcome> {
    let mut out = Vec::new();
    clap_mangen::Man::new(Cli::command())
        .render(&mut out)
        .map_err(|e| failure("internal", format!("cannot render the man page: {e}")))?;
    crate::emit(&String::from_utf8_lossy(&out))?;
    Ok(Outcome::Ok)
}
