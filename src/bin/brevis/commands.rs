//! One module per command: parse its arguments into the library's options, run the job
//! ([`brevis::job`]), print its report (text, or JSON with `--json`).

pub mod bench;
pub mod calibrate;
pub mod compress;
pub mod decompress;
pub mod ls;
pub mod show;
pub mod verify;
