//! Helpers the test crates share, each crate declaring `mod support;`: where the corpus
//! and the cases are, running the `brevis` binary and reading what it prints, and
//! fixtures ([`safetensors_bytes`]), and driving the TUI's app ([`tui`]). Fine-tunes made from real weights are in
//! `finetune.rs`, included by path where they are needed (`examples/finetunes.rs` shares
//! it).

#![allow(dead_code)]

mod safetensors;
#[cfg(feature = "tui")]
pub mod tui;

#[allow(unused_imports)]
pub use safetensors::safetensors_bytes;

use std::path::{Path, PathBuf};
use std::process::Output;

/// A small deterministic generator (xorshift64*), so one proptest seed gives one input:
/// what the property tests of programs build theirs from.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform below `n` (0 for `n` = 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }
}

/// The shared corpus of real checkpoints (`../shared/corpus`).
pub const CORPUS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/corpus");

/// The shared cases of hostile and odd inputs (`../shared/cases`).
pub const CASES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/cases");

/// The corpus's smallest real checkpoint: minilm's layer 0 in BF16.
pub const LAYER0: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../shared/corpus/minilm-l6-v2-bf16-layer0.safetensors"
);

/// The path of corpus file `name`.
pub fn corpus(name: &str) -> PathBuf {
    Path::new(CORPUS).join(name)
}

/// The bytes of corpus file `name`.
///
/// # Panics
/// If it cannot be read, naming it.
pub fn corpus_bytes(name: &str) -> Vec<u8> {
    std::fs::read(corpus(name)).unwrap_or_else(|e| panic!("read ../shared/corpus/{name}: {e}"))
}

/// The `brevis` binary cargo built for these tests.
#[cfg(feature = "cli")]
pub const BREVIS: &str = env!("CARGO_BIN_EXE_brevis");

/// `brevis ARGS`, its standard input empty, its output captured; without the writer's
/// test fault (`BREVIS_TEST_FAULT`) whatever the environment holds.
#[cfg(feature = "cli")]
pub fn brevis<I: IntoIterator<Item = S>, S: AsRef<std::ffi::OsStr>>(args: I) -> Output {
    brevis_env(args, &[])
}

/// [`brevis`] with the environment variables `env` set.
#[cfg(feature = "cli")]
pub fn brevis_env<I: IntoIterator<Item = S>, S: AsRef<std::ffi::OsStr>>(
    args: I,
    env: &[(&str, &str)],
) -> Output {
    let mut c = std::process::Command::new(BREVIS);
    c.args(args)
        .env_remove("BREVIS_TEST_FAULT")
        .stdin(std::process::Stdio::null());
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("run brevis")
}

/// `brevis ARGS` with `input` on its standard input.
#[cfg(feature = "cli")]
pub fn brevis_fed<I: IntoIterator<Item = S>, S: AsRef<std::ffi::OsStr>>(
    args: I,
    input: &[u8],
) -> Output {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let mut child = Command::new(BREVIS)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run brevis");
    let mut stdin = child.stdin.take().unwrap();
    let feed = input.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&feed);
    });
    let out = child.wait_with_output().expect("wait for brevis");
    writer.join().unwrap();
    out
}

/// What a run printed on standard output, as text.
pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// What a run printed on standard error, as text.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Asserts that a run succeeded, showing its standard error if not.
pub fn ok(o: &Output) {
    assert!(
        o.status.success(),
        "exit {:?}: {}",
        o.status.code(),
        stderr(o)
    );
}

/// A run's exit code, standard output and standard error, for an assertion's message.
pub fn text(o: &Output) -> String {
    format!(
        "exit {:?}\nstdout: {}\nstderr: {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The JSON a successful run printed on standard output.
pub fn json_of(o: &Output) -> serde_json::Value {
    assert!(
        o.status.success(),
        "exit {:?}: {}",
        o.status.code(),
        stderr(o)
    );
    serde_json::from_slice(&o.stdout).expect("stdout is JSON")
}
