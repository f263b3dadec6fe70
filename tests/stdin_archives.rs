//! Archives read from standard input (`-`) by `decompress`, `verify` and `ls`, whole into
//! memory as `compress -` reads a checkpoint, and a pipe given by its path.

#![cfg(all(feature = "cli", unix))]

mod support;

use serde_json::Value;
use std::ffi::OsStr;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use support::{brevis, brevis_fed, ok, stderr, stdout, BREVIS, LAYER0};

/// `bash -c SCRIPT` with `$B` the brevis binary and `$1`.. the arguments (pipefail on).
fn bash(script: &str, args: &[&OsStr]) -> Output {
    Command::new("bash")
        .arg("-c")
        .arg(format!("set -o pipefail; {script}"))
        .arg("bash")
        .args(args)
        .env("B", BREVIS)
        .stdin(Stdio::null())
        .output()
        .expect("run bash")
}

fn layer0_archive(dir: &Path) -> Vec<u8> {
    let archive = dir.join("x.brv");
    ok(&brevis([
        OsStr::new("compress"),
        OsStr::new(LAYER0),
        OsStr::new("-o"),
        archive.as_os_str(),
    ]));
    std::fs::read(&archive).unwrap()
}

#[test]
fn compress_to_stdout_piped_into_decompress_from_stdin_restores_byte_for_byte() {
    // brevis compress F -o - | brevis decompress - -o - | cmp - F
    let o = bash(
        r#"$B compress "$1" -o - | $B decompress - -o - | cmp - "$1""#,
        &[OsStr::new(LAYER0)],
    );
    assert!(
        o.status.success(),
        "exit {:?}: {}{}",
        o.status.code(),
        stdout(&o),
        stderr(&o)
    );
    // Both status lines went to stderr, naming standard input and output.
    assert!(
        stderr(&o).contains("standard input -> standard output: 4247680 bytes, tensor and whole-file checksums match"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn decompress_verify_and_ls_read_the_archive_from_stdin() {
    let dir = tempfile::tempdir().unwrap();
    let archive = layer0_archive(dir.path());
    let original = std::fs::read(LAYER0).unwrap();

    // decompress - -o FILE, and -o DIR (the name the archive records).
    let out = dir.path().join("back.safetensors");
    let o = brevis_fed(
        [
            OsStr::new("decompress"),
            OsStr::new("-"),
            OsStr::new("-o"),
            out.as_os_str(),
        ],
        &archive,
    );
    ok(&o);
    assert!(std::fs::read(&out).unwrap() == original);
    assert!(
        stdout(&o).starts_with(&format!(
            "standard input -> {}: 4247680 bytes",
            out.display()
        )),
        "{}",
        stdout(&o)
    );
    let into = dir.path().join("into");
    std::fs::create_dir(&into).unwrap();
    ok(&brevis_fed(
        [
            OsStr::new("decompress"),
            OsStr::new("-"),
            OsStr::new("-o"),
            into.as_os_str(),
        ],
        &archive,
    ));
    let restored = into.join("minilm-l6-v2-bf16-layer0.safetensors");
    assert!(std::fs::read(&restored).unwrap() == original);

    // Without -o: a usage error (standard input has no name), as for compress -.
    let o = brevis_fed(["decompress", "-"], &archive);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).starts_with("error: reading the archive from standard input (`-`) needs -o OUT"),
        "{}",
        stderr(&o)
    );

    // verify -
    let o = brevis_fed(["verify", "-"], &archive);
    ok(&o);
    assert_eq!(
        stdout(&o),
        "standard input: ok: 23 tensors, 0 gaps, header and whole file (4247680 bytes) \
         match their checksums\n"
    );
    let o = brevis_fed(["verify", "-", "--json"], &archive);
    ok(&o);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["ok"], true);
    assert_eq!(v["archive"], "standard input");
    // verify - --against the original.
    let o = brevis_fed(["verify", "-", "--against", LAYER0], &archive);
    ok(&o);
    assert!(
        stdout(&o).contains("standard input: identical to"),
        "{}",
        stdout(&o)
    );

    // ls - lists what ls FILE lists.
    let by_path = brevis([OsStr::new("ls"), dir.path().join("x.brv").as_os_str()]);
    ok(&by_path);
    let o = brevis_fed(["ls", "-"], &archive);
    ok(&o);
    assert_eq!(stdout(&o), stdout(&by_path));
    assert_eq!(stdout(&o).lines().count(), 1 + 23 + 1);

    // A damaged archive on standard input: verify finds it (exit 3) as for a file.
    let mut bad = archive.clone();
    let at = bad.len() / 2;
    bad[at] ^= 0x5a;
    let o = brevis_fed(["verify", "-"], &bad);
    assert_eq!(o.status.code(), Some(3), "{}", stdout(&o));

    // Not an archive: an error naming standard input, exit 1, nothing written.
    let junk = dir.path().join("junk.safetensors");
    let o = brevis_fed(
        [
            OsStr::new("decompress"),
            OsStr::new("-"),
            OsStr::new("-o"),
            junk.as_os_str(),
        ],
        b"not an archive",
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).starts_with("error: standard input: "),
        "{}",
        stderr(&o)
    );
    assert!(!junk.exists());
    let o = brevis_fed(["ls", "-", "--json"], b"");
    assert_eq!(o.status.code(), Some(1));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["kind"], "not_archive", "{v}");
}

#[test]
fn a_pipe_given_by_path_suggests_dash() {
    let dir = tempfile::tempdir().unwrap();
    layer0_archive(dir.path());
    let x = dir.path().join("x.brv");
    for (script, command) in [
        (r#"$B compress <(cat "$1") -o "$2/y.brv""#, "compress"),
        (
            r#"$B decompress <(cat "$2/x.brv") -o "$2/y.safetensors""#,
            "decompress",
        ),
        (r#"$B verify <(cat "$2/x.brv")"#, "verify"),
        (r#"$B ls <(cat "$2/x.brv")"#, "ls"),
    ] {
        let o = bash(script, &[OsStr::new(LAYER0), dir.path().as_os_str()]);
        assert_eq!(o.status.code(), Some(1), "{command}: {}", stderr(&o));
        let err = stderr(&o);
        assert!(
            err.contains("is not a regular file")
                && err.contains(&format!(
                    "to read from a pipe, give `-` and send it to standard input: `... | brevis {command} -"
                )),
            "{command}: {err}"
        );
    }
    assert!(x.exists());
}

/// An archive cut short (an interrupted download) is salvaged from standard input as from
/// a file: the same tensors restored, the same ones named and zero-filled; without
/// `--salvage`, `decompress` says that it would restore them.
#[test]
fn an_archive_cut_short_is_salvaged_from_stdin_as_from_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let archive = layer0_archive(dir.path());
    let cut = &archive[..archive.len() * 3 / 4];
    let cut_path = dir.path().join("cut.brv");
    std::fs::write(&cut_path, cut).unwrap();

    // Without --salvage: exit 1, nothing written, and the hint, from a file and from `-`.
    let out = dir.path().join("no.safetensors");
    let o = brevis([
        OsStr::new("decompress"),
        cut_path.as_os_str(),
        OsStr::new("-o"),
        out.as_os_str(),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains(
            "; `brevis decompress --salvage` restores the tensors whose records are whole and \
             zero-fills the others"
        ),
        "{}",
        stderr(&o)
    );
    let o = brevis_fed(
        [
            OsStr::new("decompress"),
            OsStr::new("-"),
            OsStr::new("-o"),
            out.as_os_str(),
        ],
        cut,
    );
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("; `brevis decompress - --salvage` restores the tensors whose"),
        "{}",
        stderr(&o)
    );
    assert!(!out.exists());

    // With --salvage: the same file and the same damaged tensors either way (exit 3).
    let by_path = dir.path().join("a.safetensors");
    let o = brevis([
        OsStr::new("decompress"),
        cut_path.as_os_str(),
        OsStr::new("-o"),
        by_path.as_os_str(),
        OsStr::new("--salvage"),
        OsStr::new("--json"),
    ]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let file_report: Value = serde_json::from_slice(&o.stdout).unwrap();
    let by_stdin = dir.path().join("b.safetensors");
    let o = brevis_fed(
        [
            OsStr::new("decompress"),
            OsStr::new("-"),
            OsStr::new("-o"),
            by_stdin.as_os_str(),
            OsStr::new("--salvage"),
            OsStr::new("--json"),
        ],
        cut,
    );
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let stdin_report: Value = serde_json::from_slice(&o.stdout).unwrap();
    let names = |v: &Value| -> Vec<String> {
        v["damaged"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|d| d["tensors"].as_array().unwrap().clone())
            .map(|t| t.as_str().unwrap().to_string())
            .collect()
    };
    let damaged = names(&file_report);
    assert!(!damaged.is_empty(), "{file_report}");
    assert_eq!(names(&stdin_report), damaged);
    let restored = std::fs::read(&by_stdin).unwrap();
    assert!(restored == std::fs::read(&by_path).unwrap());
    // Every tensor before the cut is the original's: the restored file agrees with the
    // original in every byte outside the zero-filled regions, which are zeros.
    let original = std::fs::read(LAYER0).unwrap();
    assert_eq!(restored.len(), original.len());
    let mut zeroed = 0u64;
    for d in stdin_report["damaged"].as_array().unwrap() {
        let at = d["offset"].as_u64().unwrap() as usize;
        let n = d["bytes"].as_u64().unwrap() as usize;
        assert!(restored[at..at + n].iter().all(|&b| b == 0));
        zeroed += n as u64;
    }
    let same = restored
        .iter()
        .zip(&original)
        .filter(|(a, b)| a == b)
        .count() as u64;
    assert!(
        same + zeroed >= original.len() as u64 && zeroed < original.len() as u64 / 2,
        "{same} equal bytes, {zeroed} zero-filled of {}",
        original.len()
    );
}

/// `show`, `why` and `extract` read an archive from a file only (they read just the
/// records they need): `-` is a usage error saying which commands read standard input,
/// and a pipe given by path says to save it to a file; `verify --against -` is refused
/// the same way, not reported as a missing file named `-`.
#[test]
fn commands_that_read_archives_from_files_only_say_so_for_dash_and_pipes() {
    let dir = tempfile::tempdir().unwrap();
    let archive = layer0_archive(dir.path());
    let out = dir.path().join("e.safetensors");
    for args in [
        vec![
            OsStr::new("show"),
            OsStr::new("-"),
            OsStr::new("pooler.dense.bias"),
        ],
        vec![OsStr::new("why"), OsStr::new("-")],
        vec![
            OsStr::new("extract"),
            OsStr::new("-"),
            OsStr::new("pooler.dense.bias"),
            OsStr::new("-o"),
            out.as_os_str(),
        ],
    ] {
        let command = args[0].to_str().unwrap().to_string();
        let o = brevis_fed(&args, &archive);
        assert_eq!(o.status.code(), Some(2), "{command}: {}", stderr(&o));
        assert!(
            stderr(&o).starts_with(&format!(
                "error: `brevis {command}` reads an archive from a file, not from standard \
                 input (`-`): save the archive to a file and name it (decompress, verify and \
                 ls read `-`)"
            )),
            "{command}: {}",
            stderr(&o)
        );
    }
    assert!(!out.exists());
    for (script, command) in [
        (r#"$B show <(cat "$1/x.brv") pooler.dense.bias"#, "show"),
        (r#"$B why <(cat "$1/x.brv")"#, "why"),
        (
            r#"$B extract <(cat "$1/x.brv") pooler.dense.bias -o "$1/e.safetensors""#,
            "extract",
        ),
    ] {
        let o = bash(script, &[dir.path().as_os_str()]);
        assert_eq!(o.status.code(), Some(1), "{command}: {}", stderr(&o));
        assert!(
            stderr(&o).contains(&format!(
                "is not a regular file (a pipe, socket or device); `brevis {command}` reads an \
                 archive from a file only: save the pipe's bytes to a file and name it"
            )),
            "{command}: {}",
            stderr(&o)
        );
    }
    let o = brevis_fed(["verify", "-", "--against", "-"], &archive);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).starts_with(
            "error: --against reads the original from a file or folder, not from standard input"
        ),
        "{}",
        stderr(&o)
    );
}
