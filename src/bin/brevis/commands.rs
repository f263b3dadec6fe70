//! One module per command: parse its arguments into the library's options, run the job
//! ([`brevis::job`]), print its report (text, or JSON with `--json`).

pub mod bench;
pub mod calibrate;
pub mod completions;
pub mod compress;
pub mod decompress;
pub mod extract;
pub mod ls;
pub mod man;
pub mod show;
pub mod verify;
pub mod why;
