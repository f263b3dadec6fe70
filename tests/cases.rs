//! Every case of `../shared/cases/MANIFEST.tsv` gives its expected outcome through the real
//! `brevis` binary (cases/README.md).
//!
//! - `roundtrip` (stage `compress`): compress, decompress, compare the bytes exactly (never
//!   parse), and `verify` passes.
//! - `error` (stage `compress` or `decompress`): exit code 1, a message on stderr that
//!   names the file and the kind of problem, no panic, and nothing left in the output
//!   folder (neither the output nor a temporary file).
//!
//! - stage `dir` (a whole sharded checkpoint as one job, given as the folder or its
//!   `model.safetensors.index.json`): `roundtrip` compresses the folder, decompresses it,
//!   compares every file byte for byte and `verify` passes; `error` fails cleanly as above.

#![cfg(feature = "cli")]

mod support;

use std::path::{Path, PathBuf};
use std::process::Output;
use support::{brevis, stderr, CASES};

fn os(s: &str) -> &std::ffi::OsStr {
    s.as_ref()
}

/// `brevis CMD INPUT -o OUTPUT`.
fn brevis_to(cmd: &str, input: &Path, output: &Path) -> Output {
    brevis([os(cmd), input.as_os_str(), os("-o"), output.as_os_str()])
}

/// Compresses `input` to `archive` and decompresses that to `restored`; the error names
/// the step that failed and what it printed.
fn compress_and_restore(input: &Path, archive: &Path, restored: &Path) -> Result<(), String> {
    for (cmd, from, to) in [
        ("compress", input, archive),
        ("decompress", archive, restored),
    ] {
        let o = brevis_to(cmd, from, to);
        if !o.status.success() {
            return Err(format!("{cmd} failed: {}", stderr(&o)));
        }
    }
    Ok(())
}

/// Words one of which must appear (case-insensitively) in the error message of each
/// kind of fault, so that the message names the problem, not just the file.
fn expected_words(case_id: &str) -> &'static [&'static str] {
    match case_id {
        "B01" => &["past the data region"],
        "B03" => &["json"],
        "B04" => &["__metadata__"],
        "B05" => &["duplicate"],
        "B06" => &["overlap", "share the byte range"],
        "B11" => &["needs"],
        "B13" | "B15" | "B17" | "B23" => &["header length", "shorter than", "past the data region"],
        "B14" => &["utf-8"],
        "B18" => &["dtype"],
        "B25" => &["past the data region"],
        "B27" => &["not a brevis archive", "damaged archive"],
        "B28" => &["missing shard"],
        _ => &[],
    }
}

struct Row {
    file: String,
    case_id: String,
    expected: String,
    stage: String,
}

fn manifest() -> Vec<Row> {
    let text = std::fs::read_to_string(Path::new(CASES).join("MANIFEST.tsv"))
        .expect("read ../shared/cases/MANIFEST.tsv");
    text.lines()
        .skip(1)
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let cols: Vec<&str> = l.split('\t').collect();
            assert!(cols.len() >= 4, "malformed manifest row: {l:?}");
            Row {
                file: cols[0].to_string(),
                case_id: cols[1].to_string(),
                expected: cols[2].to_string(),
                stage: cols[3].to_string(),
            }
        })
        .collect()
}

/// Problems with one run that should have failed cleanly.
fn check_clean_failure(what: &str, o: &Output, row: &Row, out_dir: &Path) -> Vec<String> {
    let mut problems = Vec::new();
    let err = stderr(o);
    if o.status.code() != Some(1) {
        problems.push(format!("{what}: exit {:?}, expected 1", o.status.code()));
    }
    if err.contains("panicked") {
        problems.push(format!("{what}: panicked: {err}"));
    }
    let file_name = Path::new(&row.file)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if !err.starts_with("error: ") || !err.contains(&file_name) {
        problems.push(format!("{what}: message does not name the file: {err:?}"));
    }
    let words = expected_words(&row.case_id);
    let lower = err.to_lowercase();
    if !words.is_empty() && !words.iter().any(|w| lower.contains(w)) {
        problems.push(format!("{what}: message names none of {words:?}: {err:?}"));
    }
    let left: Vec<PathBuf> = std::fs::read_dir(out_dir)
        .expect("list the output folder")
        .map(|e| e.expect("entry").path())
        .collect();
    if !left.is_empty() {
        problems.push(format!("{what}: left files behind: {left:?}"));
    }
    problems
}

fn check_row(row: &Row) -> Vec<String> {
    let input = Path::new(CASES).join(&row.file);
    let dir = tempfile::tempdir().expect("tempdir");
    let archive = dir.path().join("out.brv");
    let restored = dir.path().join("restored.safetensors");
    let mut problems = Vec::new();
    match (row.stage.as_str(), row.expected.as_str()) {
        ("compress", "roundtrip") => {
            if let Err(e) = compress_and_restore(&input, &archive, &restored) {
                return vec![e];
            }
            let original = std::fs::read(&input).expect("read the case");
            let back = std::fs::read(&restored).expect("read the restored file");
            if original != back {
                let at = original.iter().zip(&back).position(|(a, b)| a != b);
                problems.push(format!(
                    "restored file differs (lengths {} and {}, first difference at {at:?})",
                    original.len(),
                    back.len()
                ));
            }
            let v = brevis([
                os("verify"),
                archive.as_os_str(),
                os("--against"),
                input.as_os_str(),
            ]);
            if !v.status.success() {
                problems.push(format!(
                    "verify failed: {}",
                    String::from_utf8_lossy(&v.stdout)
                ));
            }
        }
        ("compress" | "dir", "error") => {
            let c = brevis_to("compress", &input, &archive);
            problems.extend(check_clean_failure("compress", &c, row, dir.path()));
        }
        ("decompress", "error") => {
            let runs: [(&str, Vec<&std::ffi::OsStr>); 4] = [
                (
                    "decompress",
                    vec![
                        os("decompress"),
                        input.as_os_str(),
                        os("-o"),
                        restored.as_os_str(),
                    ],
                ),
                ("verify", vec![os("verify"), input.as_os_str()]),
                ("ls", vec![os("ls"), input.as_os_str()]),
                ("show", vec![os("show"), input.as_os_str(), os("w")]),
            ];
            for (what, args) in runs {
                let o = brevis(&args);
                problems.extend(check_clean_failure(what, &o, row, dir.path()));
            }
        }
        ("dir", "roundtrip") => problems.extend(check_folder_roundtrip(&input, dir.path())),
        (stage, expected) => problems.push(format!(
            "unknown stage/outcome {stage:?}/{expected:?} in the manifest"
        )),
    }
    problems
}

/// The folder of a `dir` input: the path itself, or the folder of an index JSON.
fn folder_of(input: &Path) -> PathBuf {
    if input.is_dir() {
        input.to_path_buf()
    } else {
        input.parent().expect("an index has a folder").to_path_buf()
    }
}

/// Every regular file under `root`, as sorted relative paths.
fn files_under(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("list a folder") {
            let p = e.expect("entry").path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p.strip_prefix(root).expect("under root").to_path_buf());
            }
        }
    }
    out.sort();
    out
}

/// Compresses a checkpoint folder (or its index), restores it, and compares every file.
fn check_folder_roundtrip(input: &Path, tmp: &Path) -> Vec<String> {
    let archive = tmp.join("out.brv");
    let restored = tmp.join("restored");
    if let Err(e) = compress_and_restore(input, &archive, &restored) {
        return vec![e];
    }
    let mut problems = Vec::new();
    let source = folder_of(input);
    let want = files_under(&source);
    let got = files_under(&restored);
    if want != got {
        problems.push(format!("restored files {got:?}, expected {want:?}"));
    }
    for f in &want {
        let a = std::fs::read(source.join(f)).expect("read a source file");
        if std::fs::read(restored.join(f)).ok().as_ref() != Some(&a) {
            problems.push(format!("{} differs after the round trip", f.display()));
        }
    }
    for cmd in ["verify", "ls"] {
        let v = brevis([os(cmd), archive.as_os_str()]);
        if !v.status.success() {
            problems.push(format!("{cmd} failed: {}", stderr(&v)));
        }
    }
    problems
}

#[test]
fn every_manifest_case_gives_its_expected_outcome() {
    let rows = manifest();
    assert!(rows.len() >= 40, "manifest has only {} rows", rows.len());
    let mut failures = Vec::new();
    let mut checked = 0;
    for row in &rows {
        checked += 1;
        for p in check_row(row) {
            failures.push(format!(
                "{} ({} {} {}): {p}",
                row.file, row.case_id, row.stage, row.expected
            ));
        }
    }
    assert!(checked >= 44, "only {checked} rows checked");
    assert!(
        failures.is_empty(),
        "{} of {checked} cases failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
