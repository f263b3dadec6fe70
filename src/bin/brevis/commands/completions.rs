//! `brevis completions`: a shell's completion script, from the clap definitions.

use crate::args::{Cli, CompletionsArgs};
use crate::{failure, Outcome};
use anyhow::Result;
use clap::CommandFactory;

pub fn run(a: CompletionsArgs) -> Result<Outcome> {
    let mut out = Vec::new();
    clap_complete::generate(a.shell, &mut Cli::command(), "brevis", &mut out);
    crate::emit(&String::from_utf8(out).map_err(|e| failure("internal", e.to_string()))?)?;
    Ok(Outcome::Ok)
}
