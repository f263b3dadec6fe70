//! Safe writes (issue 5): outputs go through a temporary file in the target folder; a
//! folder that cannot be written and a full disk give one clear error line naming the
//! file, and leave nothing behind; an existing output is kept without `--force`.
//!
//! We run as root, so permission bits cannot make a folder unwritable: the tests use an
//! output whose parent is a regular file, and a folder under `/proc` (which refuses new
//! files for everyone). A full disk is simulated with a writer that fails with
//! `StorageFull` part-way.

#![cfg(feature = "cli")]

use brevis::archive::safetensors::parse;
use brevis::archive::writer::write_archive;
use brevis::archive::{no_progress, CompressOptions};
use std::io::{self, Write};
use std::path::Path;
use std::process::{Command, Output};

const SMALL: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../shared/cases/B20_mixed_dtypes.safetensors"
);

fn brevis(args: &[&Path]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_brevis"))
        .args(args)
        .output()
        .unwrap()
}

fn one_error_line(out: &Output, words: &[&str]) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("error: "), "{stderr}");
    assert!(
        words.iter().all(|w| stderr.contains(w)),
        "{stderr} lacks {words:?}"
    );
    stderr
}

#[test]
fn unwritable_folders_give_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.safetensors");
    std::fs::copy(SMALL, &input).unwrap();
    let a_file = dir.path().join("file");
    std::fs::write(&a_file, b"x").unwrap();
    // Parent is a regular file.
    let out_path = a_file.join("out.brv");
    let out = brevis(&[Path::new("compress"), &input, Path::new("-o"), &out_path]);
    one_error_line(&out, &["out.brv", "cannot create a temporary file"]);
    // A folder that refuses new files.
    let proc_out = Path::new("/proc/self/out.brv");
    let out = brevis(&[Path::new("compress"), &input, Path::new("-o"), proc_out]);
    one_error_line(&out, &["/proc/self/out.brv"]);
    // Decompress likewise.
    let brv = dir.path().join("in.brv");
    assert!(
        brevis(&[Path::new("compress"), &input, Path::new("-o"), &brv])
            .status
            .success()
    );
    let out = brevis(&[
        Path::new("decompress"),
        &brv,
        Path::new("-o"),
        &a_file.join("o"),
    ]);
    one_error_line(&out, &["cannot create a temporary file"]);
    // Nothing but what we made is in the folder.
    let mut names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["file", "in.brv", "in.safetensors"]);
    // An existing output is not replaced without --force, and is with it.
    std::fs::write(dir.path().join("keep"), b"precious").unwrap();
    let keep = dir.path().join("keep");
    let out = brevis(&[Path::new("decompress"), &brv, Path::new("-o"), &keep]);
    one_error_line(&out, &["keep", "already exists", "--force"]);
    assert_eq!(std::fs::read(&keep).unwrap(), b"precious");
    let out = brevis(&[
        Path::new("decompress"),
        &brv,
        Path::new("-o"),
        &keep,
        Path::new("--force"),
    ]);
    assert!(out.status.success());
    assert_eq!(
        std::fs::read(&keep).unwrap(),
        std::fs::read(&input).unwrap()
    );
}

/// A sink that accepts `room` bytes, then fails like a full disk.
struct FullDisk {
    room: usize,
}

impl Write for FullDisk {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.room == 0 {
            return Err(io::Error::from(io::ErrorKind::StorageFull));
        }
        let n = buf.len().min(self.room);
        self.room -= n;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_full_disk_is_a_clear_error_in_both_directions() {
    let src = std::fs::read(SMALL).unwrap();
    let parsed = parse(&src).unwrap();
    let opts = CompressOptions {
        jobs: Some(1),
        ..CompressOptions::default()
    };
    let mut brv = Vec::new();
    write_archive(&parsed, &mut brv, &opts, &no_progress, Path::new("m.brv")).unwrap();
    for room in [0, 1, 15, 16, 100, brv.len() - 1] {
        let e = write_archive(
            &parsed,
            &mut FullDisk { room },
            &opts,
            &no_progress,
            Path::new("disk/out.brv"),
        )
        .unwrap_err()
        .to_string();
        assert!(e.starts_with("disk/out.brv: cannot write"), "{e}");
    }
    let a = brevis::Archive::from_bytes(brv, "m.brv").unwrap();
    for room in [0, 7, 8, 200, src.len() - 1] {
        let e = a
            .write_original(
                &mut FullDisk { room },
                Some(1),
                &no_progress,
                Path::new("disk/out.safetensors"),
            )
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("disk/out.safetensors: cannot write"), "{e}");
    }
}
