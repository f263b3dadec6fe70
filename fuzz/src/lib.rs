//! Fuzz targets of Brevis (run with `cargo fuzz run <target>`; see `fuzz_targets/`).
//! The entry logic lives in `entries.rs` so `tests/hostile_fuzz_replay.rs` can replay
//! committed inputs on stable Rust.

#[path = "entries.rs"]
pub mod entries;
